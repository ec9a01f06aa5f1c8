"""The window on the trace's time axis and GPUs held over time: the window's start and its
labels, power-of-two blocks, time-weighted occupancy per step, the peak in use."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ...model import ScenarioError
from .options import ImportWindow
from .table import DAY, HOUR, TraceInfo


def pow2_ceil(values: np.ndarray) -> np.ndarray:
    """Smallest power of two >= each value (values > 0)."""
    whole = np.maximum(1.0, np.ceil(values - 1e-9))
    return np.exp2(np.ceil(np.log2(whole) - 1e-12)).astype(np.int64)


def binned_occupancy(
    starts: np.ndarray, ends: np.ndarray, weights: np.ndarray, edges: np.ndarray
) -> np.ndarray:
    """sum_i weights_i * |[starts_i, ends_i) & [edges_k, edges_k+1)| for every bin k.

    F(t) = sum_i w_i * (clip(t, s_i, e_i) - s_i) is piecewise linear with slope +w_i from s_i and
    -w_i from e_i, so F at the edges is two cumulative sums over the sorted events.
    """
    keep = ends > starts
    s, e, w = starts[keep], ends[keep], weights[keep]
    if not len(s):
        return np.zeros(len(edges) - 1)
    times = np.concatenate([s, e])
    slopes = np.concatenate([w, -w])
    order = np.argsort(times, kind="stable")
    times, slopes = times[order], slopes[order]
    slope = np.cumsum(slopes)
    slope_time = np.cumsum(slopes * times)
    idx = np.searchsorted(times, edges, side="right")
    a = np.where(idx > 0, slope[np.maximum(idx - 1, 0)], 0.0)
    b = np.where(idx > 0, slope_time[np.maximum(idx - 1, 0)], 0.0)
    return np.diff(a * edges - b)


def peak_in_use(
    starts: np.ndarray, ends: np.ndarray, gpus: np.ndarray, lo: float, hi: float
) -> float:
    """The most GPUs held at any instant in [lo, hi) (an end at t frees before a start at t)."""
    live = (starts < hi) & (ends > lo)
    s, e, g = np.maximum(starts[live], lo), np.minimum(ends[live], hi), gpus[live]
    if not len(s):
        return 0.0
    times = np.concatenate([s, e])
    deltas = np.concatenate([g, -g])
    order = np.lexsort((deltas > 0, times))
    return float(max(0.0, np.cumsum(deltas[order]).max()))


def _window_start(window: ImportWindow, info: TraceInfo, submit: np.ndarray) -> float:
    if window.start is None:
        known = submit[np.isfinite(submit)]
        if not len(submit):
            raise ScenarioError(f"{info.name}: no job with GPUs in the file; nothing to import")
        if not len(known):
            raise ScenarioError(f"{info.name}: no GPU job has a submit time; give --start")
        median = float(np.median(known))
        return math.floor(median / DAY) * DAY
    if info.relative:
        try:
            hours = float(window.start)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise ScenarioError(
                f"{info.name}: times are relative to the trace start, so --start is in hours "
                f"from it, got {window.start!r}"
            ) from None
        if not math.isfinite(hours):
            raise ScenarioError(f"{info.name}: --start must be a finite number of hours")
        return hours * HOUR
    if isinstance(window.start, int | float):
        raise ScenarioError(
            f"{info.name}: times are calendar times, so --start is an ISO time such as "
            f"2026-08-17T00:00:00, got {window.start!r}"
        )
    try:
        stamp = pd.Timestamp(window.start)
    except (TypeError, ValueError):
        raise ScenarioError(f"--start must be an ISO time, got {window.start!r}") from None
    if stamp is pd.NaT:
        raise ScenarioError(f"--start must be an ISO time, got {window.start!r}")
    if stamp.tzinfo is not None:  # to the trace's own wall clock
        return stamp.tz_convert("UTC").tz_localize(None).value / 1e9 + info.utc_offset
    return stamp.value / 1e9


def _time_label(seconds: float, relative: bool) -> str:
    if relative:
        return f"{seconds / HOUR:g} h"
    return pd.Timestamp(seconds * 1e9).isoformat()


def _check_window_in_trace(
    info: TraceInfo, W0: float, W1: float, stamps: np.ndarray, trace_end: float
) -> None:
    """A window the trace says nothing about is an empty cluster, not a plan of it: refuse one
    that ends before the first job came, or starts after the export (where the format knows its
    time; otherwise jobs never started may still wait in a later window)."""
    stamps = stamps[np.isfinite(stamps)]
    if not len(stamps):
        return
    first = float(stamps.min())
    if (math.isfinite(info.end) and info.end <= W0) or first >= W1:
        raise ScenarioError(
            f"{info.name}: the window {_time_label(W0, info.relative)} .. "
            f"{_time_label(W1, info.relative)} is outside the trace, which runs from "
            f"{_time_label(first, info.relative)} to {_time_label(trace_end, info.relative)}: "
            "give a --start inside it"
        )


def _first_time(submit: np.ndarray, start: np.ndarray) -> float:
    stamps = np.concatenate([submit, start])
    stamps = stamps[np.isfinite(stamps)]
    return math.floor(float(stamps.min()) / HOUR) * HOUR if len(stamps) else math.inf


def _realtime_series(
    rt_live: np.ndarray,
    groups: np.ndarray,
    start: np.ndarray,
    held_until: np.ndarray,
    gpus: np.ndarray,
    W0: float,
    step: float,
    T: int,
    history_from: float,
) -> tuple[list[str], dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Per real-time group: GPUs held per step of the window (time-weighted) and per hour of
    the history before it, from `history_from` (one vectorised pass per group)."""
    W1 = W0 + T * step
    edges = W0 + step * np.arange(T + 1)
    history_hours = (
        max(0, int(math.floor((W0 - history_from) / HOUR + 1e-9)))
        if math.isfinite(history_from)
        else 0
    )
    hist_edges = W0 - HOUR * np.arange(history_hours, -1, -1)
    group_names = sorted({g for g in groups[rt_live]}) if rt_live.any() else []
    rt_demand: dict[str, np.ndarray] = {}
    rt_history: dict[str, np.ndarray] = {}
    for g in group_names:
        m = rt_live & (groups == g)
        s, e, w = start[m] - W0, np.minimum(held_until[m], W1) - W0, gpus[m]
        rt_demand[g] = binned_occupancy(s, e, w, edges - W0) / step
        rt_history[g] = (
            binned_occupancy(s, e, w, hist_edges - W0) / HOUR if history_hours else np.zeros(0)
        )
    return group_names, rt_demand, rt_history
