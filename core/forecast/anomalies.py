"""Outages and anomalies in an hourly history: found (`detect_anomalies`), described (`Anomaly`)
and replaced by the seasonal value before fitting (`_repair`)."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .loading import DAY, WEEK

SPIKE_SCALES = 8.0  # a spike is this many robust scales off its neighbourhood and pattern
SPIKE_HOURS = 12  # longest run that can be a spike (longer: a real change of regime)


@dataclass(frozen=True)
class Anomaly:
    """A run of history hours that is not demand: an outage (a drop to about zero) or a spike."""

    start: pd.Timestamp
    end: pd.Timestamp  # last hour of the run, inclusive
    hours: int
    kind: str  # "outage" or "spike"

    def describe(self) -> str:
        what = "dropped to about zero" if self.kind == "outage" else "jumped far off its pattern"
        return (
            f"{self.hours} hour{'s' if self.hours != 1 else ''} from {self.start:%Y-%m-%d %H:%M} "
            f"to {self.end:%Y-%m-%d %H:%M} {what} ({self.kind}); replaced by the seasonal value "
            "before fitting and left out of the interval's calibration"
        )


def _same_hour_others(values: np.ndarray, period: int, reach: int = 3) -> np.ndarray:
    """The same hour 1..`reach` periods earlier and later, one row each (NaN where outside)."""
    n = len(values)
    shifted = np.full((2 * reach, n), np.nan)
    for k in range(1, reach + 1):
        lag = k * period
        if lag < n:
            shifted[2 * k - 2, lag:] = values[:-lag]
            shifted[2 * k - 1, :-lag] = values[lag:]
    return shifted


def _same_hour_reference(values: np.ndarray, period: int, reach: int = 3) -> np.ndarray:
    """Median of the same hour 1, 2 and 3 periods earlier and later (NaN if none)."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmedian(_same_hour_others(values, period, reach), axis=0)


def _flag_runs(flags: np.ndarray) -> list[tuple[int, int]]:
    padded = np.concatenate([[False], flags, [False]])
    edges = np.flatnonzero(padded[1:] != padded[:-1])
    return [(int(edges[k]), int(edges[k + 1])) for k in range(0, len(edges), 2)]


def detect_anomalies(
    values: np.ndarray, period: int
) -> tuple[np.ndarray, list[tuple[int, int, str]]]:
    """Hours that are not demand, as a mask and as runs (start, end exclusive, kind).

    An **outage** is a run (up to a week) where the series falls below a tenth of the same hour in
    the other weeks (or days) while every one of those is clearly busy (a quarter of the typical
    level or more): a cluster that is down, a broken exporter. A series that is idle at that hour
    in another week too has quiet hours as a habit, and they are kept. A **spike** is a run of
    at most SPIKE_HOURS far off both its own neighbourhood and the same hours elsewhere (more
    than SPIKE_SCALES robust scales), that ends before the history does. A run still going at
    the end that is not an outage is a level shift and is kept: it is what the forecast must
    follow.
    """
    n = len(values)
    reference = _same_hour_reference(values, period)
    typical = float(np.nanmedian(values)) if n else 0.0
    mask = np.zeros(n, dtype=bool)
    runs: list[tuple[int, int, str]] = []
    if n < 2 * period or not typical > 0:
        return mask, runs
    known = np.isfinite(reference)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        quietest = np.nanmin(_same_hour_others(values, period), axis=0)
    # busy at this hour in every other week: a drop to zero here is not a weekly habit
    busy = known & (quietest >= 0.25 * typical)
    low = busy & (values <= 0.1 * np.where(known, reference, 0.0))
    for s, e in _flag_runs(low):
        if e - s <= WEEK:
            mask[s:e] = True
            runs.append((s, e, "outage"))
    # Spikes are judged against the pattern without the outages, from the same hour and its two
    # neighbours in the other periods: with few weeks a spike pulls the median of the same hour
    # alone in the other weeks, and its copies there must not be flagged in its place.
    candidates, deviation, scale = _spikes(values, mask, period, typical)
    shift = _shift_start(candidates, deviation, scale)
    if shift < n:  # judge the rest without the shifted hours, whose copies are not spikes either
        shifted = np.arange(n) >= shift
        candidates = _spikes(values, mask | shifted, period, typical)[0] & ~shifted
    for s, e in _flag_runs(candidates):
        if e - s <= SPIKE_HOURS and e < shift:  # a run into the shift is its start
            mask[s:e] = True
            runs.append((s, e, "spike"))
    runs.sort()
    return mask, runs


def _shift_start(candidates: np.ndarray, deviation: np.ndarray, scale: float) -> int:
    """Where a level shift still going at the end of the history starts (len: none).

    A factor shift moves the busy hours most, so its busiest hours stand out as a spike-like run
    that may end before the history does. A run is part of a shift when every hour from it to
    the end is at least half the spike threshold off the pattern, on the same side; the shift
    starts at the first such hour before it.
    """
    n = len(deviation)
    off = 0.5 * SPIKE_SCALES * scale
    for s, _ in _flag_runs(candidates):
        side = math.copysign(1.0, float(deviation[s]))
        if np.all(side * deviation[s:] >= off):
            while s > 0 and side * deviation[s - 1] >= off:
                s -= 1
            return s
    return n


def _spikes(
    values: np.ndarray, outages: np.ndarray, period: int, typical: float
) -> tuple[np.ndarray, np.ndarray, float]:
    """Hours far (SPIKE_SCALES robust scales) off both their neighbourhood and the same hours of
    the other periods; with each hour's difference from that pattern and the robust scale."""
    clean = np.where(outages, np.nan, values)
    others = _same_hour_others(clean, period)
    around = [others]
    for step in (-1, 1):
        neighbour = np.full_like(others, np.nan)
        if step < 0:
            neighbour[:, 1:] = others[:, :-1]
        else:
            neighbour[:, :-1] = others[:, 1:]
        around.append(neighbour)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        reference = np.nanmedian(np.vstack(around), axis=0)
    known = np.isfinite(reference) & ~outages
    deviation = np.where(known, values - np.where(known, reference, 0.0), 0.0)
    local = pd.Series(deviation).rolling(2 * DAY + 1, center=True, min_periods=1).median()
    off = deviation - local.to_numpy()
    scale = 1.4826 * float(np.median(np.abs(off[known]))) if known.any() else 0.0
    scale = max(scale, 0.01 * typical)
    flagged = (
        known & (np.abs(off) > SPIKE_SCALES * scale) & (np.abs(deviation) > SPIKE_SCALES * scale)
    )
    return flagged, deviation, scale


def _repair(values: np.ndarray, mask: np.ndarray, period: int) -> np.ndarray:
    """Anomalous hours replaced by the same hour elsewhere plus the local level around the run."""
    if not mask.any():
        return values
    clean = np.where(mask, np.nan, values)
    reference = _same_hour_reference(clean, period)
    repaired = values.copy()
    for s, e in _flag_runs(mask):
        lo, hi = max(0, s - 2 * DAY), min(len(values), e + 2 * DAY)
        around = np.r_[lo:s, e:hi]
        offsets = clean[around] - reference[around]
        offsets = offsets[np.isfinite(offsets)]
        offset = float(np.median(offsets)) if len(offsets) else 0.0
        fill = reference[s:e] + offset
        if not np.isfinite(fill).all():
            level = clean[around][np.isfinite(clean[around])]
            fallback = float(np.median(level)) if len(level) else float(np.nanmedian(clean))
            fill = np.where(np.isfinite(fill), fill, fallback)
        repaired[s:e] = np.maximum(fill, 0.0)
    return repaired
