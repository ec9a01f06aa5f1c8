"""Real-time demand: a forecast of hourly traffic that holds on series it has never seen,
with a calibrated, bounded interval and GPU paths.

1. **Repair.** `detect_anomalies` finds outages (drops to about zero at hours that are busy in
   every other week) and spikes; on a series that is rarely idle they are replaced by the
   seasonal value before fitting, left out of the errors the weights and the interval are
   measured on, and reported. On a series idle at many hours (a cluster that empties at night,
   a service that bursts) quiet hours are its habit, and nothing is repaired.
2. **Combine.** Four members (ensemble.py): seasonal naive (the same hour last week), the same
   smoothed over neighbouring hours, the last day's level and the last week's daily profile,
   weighted per lead range by the inverse of their mean squared error at the history's own
   earlier origins, one a day. Demand running off the combination in the last hours is partly
   carried forward.
3. **Calibrate.** Split-conformal: the `level` quantile of the combination's errors at those
   origins, by lead range, floored by seasonal naive's own period-over-period moves, never
   below zero and never above `cap` (a service's `gpus_max`, a cluster's size).

The report (`forecast_series(..., report=True)`, or `frame.attrs["report"]`) says which member
carries most weight, the combination's backtest error against seasonal naive on this history,
and the interval's coverage there, measured leaving each origin out of its own calibration.
A fit is a few milliseconds of numpy, so the rolling horizon can refit it every hour.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import norm

from ..model import ScenarioError

# Reading a history (loading.py), its outages and anomalies (anomalies.py), the members and
# their weights (ensemble.py) and from demand to GPUs (gpus.py) live beside this module; their
# names stay importable from here (__all__).
from . import ensemble
from .anomalies import (
    SPIKE_HOURS,
    SPIKE_SCALES,
    Anomaly,
    _flag_runs,
    _repair,
    _same_hour_others,
    _same_hour_reference,
    _shift_start,
    _spikes,
    detect_anomalies,
)
from .ensemble import LEAD_RANGES, MIN_RANGE_ERRORS, NAIVE_FLOOR, SEASONAL_NAIVE
from .gpus import (
    _normal_tail,
    coverage_risk,
    demand_quantile,
    expected_shortfall,
    gpu_path,
    gpu_path_from_forecast,
    gpus_needed,
)
from .loading import (
    _OFFSET,
    DAY,
    MAX_HISTORY_HOURS,
    MIN_HISTORY_HOURS,
    WEEK,
    WEEKLY_MODEL_HOURS,
    _history_from_table,
    _longest_run,
    _no_short_rows,
    _parse_timestamps,
    _pick_column,
    _regularise,
    _row,
    _rows_text,
    common_utc_offset,
    load_history,
)

MAX_FIT_HOURS = 6 * WEEK  # older history is ignored: the recent weeks say more
MAX_HORIZON_HOURS = 10_080  # the longest horizon a scenario may have (SPEC section 3)
# A series at about zero (at most IDLE_LEVEL of its 90th percentile) at more than IDLE_SHARE of
# its hours outside the flagged runs is idle by habit: its drops and bursts are not repaired.
IDLE_LEVEL = 0.05
IDLE_SHARE = 0.05


# ---------------------------------------------------------------------------------------------
# The forecast and its report


@dataclass(frozen=True)
class ForecastReport:
    """What `forecast_series` did: anomalies repaired, members weighted, backtest, interval."""

    model: str
    members: tuple[str, ...]
    period: int
    anomalies: tuple[Anomaly, ...] = ()
    repairs: tuple[str, ...] = ()  # what reading the file fixed (set by `forecast_file`)
    weights: tuple[tuple[str, dict[str, float]], ...] = ()  # (lead range, member -> weight)
    winner: str = ""  # the member with the most weight over the horizon
    calibration_origins: int = 0
    interval: str = ""
    backtest_mae: dict[str, float] = field(default_factory=dict)  # per member, and "combined"
    backtest_ratio: float = math.nan  # the combination's MAE over seasonal naive's, this history
    measured_coverage: float = math.nan  # the interval's, leaving each origin out
    level: float = 0.9
    cap: float | None = None
    warnings: tuple[str, ...] = ()

    def headline(self) -> str:
        """One sentence: which member won, its backtest against seasonal naive on this history,
        and the interval's measured coverage (what the page shows above the details)."""
        parts = [f"most weight on {self.winner}" if self.winner else f"model {self.model}"]
        if math.isfinite(self.backtest_ratio):
            parts.append(
                f"at {self.calibration_origins} earlier origins of this history its error is "
                f"{self.backtest_ratio:.2f}x seasonal naive's"
            )
        if math.isfinite(self.measured_coverage):
            parts.append(
                f"the {self.level:.0%} interval held {self.measured_coverage:.0%} of hours there "
                "(each origin left out of its own calibration)"
            )
        return "; ".join(parts)

    def lines(self) -> list[str]:
        """One line each, for the command line and the page."""
        out = [f"model: {self.model}"]
        if self.winner:
            out.append(f"most weight: {self.winner}")
        out.extend(
            f"weights {lead}: " + ", ".join(f"{m} {w:.2f}" for m, w in shares.items())
            for lead, shares in self.weights
        )
        if math.isfinite(self.backtest_ratio):
            naive = self.backtest_mae[self.members[0]]
            out.append(
                f"backtest at {self.calibration_origins} earlier origins of this history: MAE "
                f"{self.backtest_mae['combined']:.4g} against seasonal naive's {naive:.4g} "
                f"(ratio {self.backtest_ratio:.2f})"
            )
        out.extend(f"repair: {text}" for text in self.repairs)
        out.extend(f"anomaly: {a.describe()}" for a in self.anomalies)
        out.append(f"interval: {self.interval}")
        if math.isfinite(self.measured_coverage):
            out.append(
                f"interval coverage measured on this history: {self.measured_coverage:.0%} of "
                f"hours inside the {self.level:.0%} interval (each origin left out of its own "
                "calibration)"
            )
        if self.cap is not None:
            out.append(f"bounded: 0 to {self.cap:g}")
        return out


def forecast_series(
    history: pd.Series,
    horizon: int,
    level: float = 0.9,
    *,
    cap: float | None = None,
    report: bool = False,
) -> pd.DataFrame | tuple[pd.DataFrame, ForecastReport]:
    """Mean, central `level` interval and risk scale for the next `horizon` hours.

    The mean weights four members (ensemble.py: seasonal naive, the same smoothed, the last
    day's level, the last week's daily profile; a day is the period below a week and two days
    of history) by their
    errors at the history's own earlier origins, per lead range, after outages and spikes are
    repaired (on a series that is rarely idle). The interval is split-conformal from the same
    errors. `cap` bounds every output (mean, lower, upper) from above, as zero does from below.
    `std` is the half-width over the normal z of `level` (so mean +- z * std is the interval
    before bounds), which `coverage_risk` and `demand_quantile` use. `attrs` carries `model`,
    `members`, `backtest_mae`, `warnings` and `report` (a `ForecastReport`); with `report=True`
    the report is also returned: `(frame, report)`.
    """
    z = _checked_z(horizon, level)
    cap = _checked_cap(cap)
    if not isinstance(history.index, pd.DatetimeIndex):
        raise ScenarioError("history must be indexed by timestamps")
    if horizon < DAY:
        # Weighted and calibrated on a day of leads: a few hours alone say too little
        frame, rep = forecast_series(history, DAY, level, cap=cap, report=True)
        short = frame.iloc[:horizon].copy()
        short.attrs = dict(frame.attrs)
        return (short, rep) if report else short
    values, stamps = _fit_values(history)
    index = pd.date_range(
        stamps[-1] + pd.Timedelta(hours=1), periods=horizon, freq="h", name="timestamp"
    )
    n = len(values)
    if n < 2 * DAY:
        frame, rep = _level_forecast(index, values, level, z, cap)
        return (frame, rep) if report else frame
    period = WEEK if n > WEEKLY_MODEL_HOURS else DAY
    filled = _fill(values)
    mask, runs = detect_anomalies(filled, period)
    if mask.any() and not _repairable(filled, mask):
        mask, runs = np.zeros(n, dtype=bool), []
    anomalies = tuple(Anomaly(stamps[s], stamps[e - 1], e - s, kind) for s, e, kind in runs)
    repaired = _repair(filled, mask, period) if mask.any() else filled
    scored = np.where(mask | ~np.isfinite(values), np.nan, values)
    result = ensemble.fit(repaired, scored, horizon, period, level)
    rep = _report(result, period, anomalies, level, cap)
    floor = 1e-9 * max(1.0, float(np.max(np.abs(repaired))))
    std = np.maximum(result.half_width / z, floor)
    attrs = {
        "model": rep.model,
        "members": list(rep.members),
        "backtest_mae": rep.backtest_mae,
        "warnings": list(rep.warnings),
        "report": rep,
    }
    frame = _forecast_frame(index, result.mean, std, level, attrs, cap)
    return (frame, rep) if report else frame


def _repairable(values: np.ndarray, mask: np.ndarray) -> bool:
    """Whether flagged hours are incidents: the series is rarely at about zero elsewhere."""
    busy = float(np.percentile(values, 90))
    idle = (values <= IDLE_LEVEL * busy) & ~mask
    return float(idle.mean()) <= IDLE_SHARE


def _report(
    result: ensemble.Fit,
    period: int,
    anomalies: tuple[Anomaly, ...],
    level: float,
    cap: float | None,
) -> ForecastReport:
    names = [ensemble.member_name(m, period) for m in ensemble.MEMBERS]
    weights = tuple(
        (_lead_label(low, high), dict(zip(names, map(float, result.weights[:, k]), strict=True)))
        for k, (low, high) in enumerate(result.ranges)
    )
    spans = np.array([min(high, WEEK) - low for low, high in result.ranges], dtype=float)
    overall = result.weights @ np.maximum(spans, 0) / max(float(np.maximum(spans, 0).sum()), 1)
    winner = f"{names[int(np.argmax(overall))]} ({float(np.max(overall)):.2f} of the weight)"
    scores = {m: float(v) for m, v in zip(names, result.member_mae, strict=True) if np.isfinite(v)}
    if math.isfinite(result.mae):
        scores["combined"] = result.mae
    naive = scores.get(names[0], math.nan)
    ratio = result.mae / naive if naive > 0 and math.isfinite(result.mae) else math.nan
    if result.calibrated:
        interval = (
            f"split-conformal {level:.0%} from the combination's errors at {result.origins} "
            "earlier origins, each over the series' roughness there and scaled to its "
            f"roughness now, by lead range, at least {NAIVE_FLOOR:g}x seasonal naive's "
            "period-over-period moves of the last two weeks"
        )
    else:
        interval = (
            f"too few earlier origins to calibrate on: {NAIVE_FLOOR:g}x seasonal naive's "
            "period-over-period moves"
        )
    return ForecastReport(
        model="weighted " + " + ".join(names),
        members=tuple(names),
        period=period,
        anomalies=anomalies,
        weights=weights,
        winner=winner,
        calibration_origins=result.origins,
        interval=interval,
        backtest_mae=scores,
        backtest_ratio=ratio,
        measured_coverage=result.coverage,
        level=level,
        cap=cap,
        warnings=tuple(a.describe() for a in anomalies),
    )


def _lead_label(low: int, high: int) -> str:
    return f"{low + 1}-{high} h ahead" if high > low + 1 else f"{high} h ahead"


def _checked_cap(cap: float | None) -> float | None:
    """None, or a finite number >= 0 (the most demand can be: gpus_max, a cluster's size)."""
    if cap is None:
        return None
    if isinstance(cap, bool) or not isinstance(cap, int | float | np.integer | np.floating):
        raise ScenarioError(f"max must be a number of GPUs (or demand units), got {cap!r}")
    if not (math.isfinite(cap) and cap >= 0):
        raise ScenarioError(f"max must be a finite number >= 0, got {cap}")
    return float(cap)


def _checked_z(horizon: int, level: float) -> float:
    """The normal z of a central `level` interval, once `horizon` and `level` are checked."""
    if not (isinstance(horizon, int | np.integer) and 1 <= horizon <= MAX_HORIZON_HOURS):
        raise ScenarioError(
            f"horizon must be a whole number of hours from 1 to {MAX_HORIZON_HOURS}, got {horizon}"
        )
    if not (isinstance(level, int | float) and math.isfinite(level) and 0 < level < 1):
        raise ScenarioError(f"level must be between 0 and 1, got {level}")
    z = float(norm.ppf(0.5 + level / 2))
    if not z > 1e-6:
        raise ScenarioError(f"level must be between 0 and 1, got {level} (too small to use)")
    return z


def _fit_values(history: pd.Series) -> tuple[np.ndarray, pd.DatetimeIndex]:
    """(values, their hours): the history hourly and on the hour (gaps NaN), its last
    MAX_FIT_HOURS hours from the first one with a value; too few values raise."""
    series = history.astype(float)
    if len(series) and series.index.freq != pd.tseries.frequencies.to_offset("h"):
        series = series.sort_index().resample("h").mean()  # hourly, on the hour, gaps as NaN
    values = series.to_numpy()[-MAX_FIT_HOURS:]
    if np.isfinite(values).sum() < MIN_HISTORY_HOURS:
        raise ScenarioError(
            f"history has {int(np.isfinite(values).sum())} hourly values; at "
            f"least {MIN_HISTORY_HOURS} are needed to forecast"
        )
    values = np.where(np.isfinite(values), values, np.nan)
    start = int(np.flatnonzero(np.isfinite(values))[0])
    values = values[start:]  # leading gaps say nothing
    return values, series.index[-len(values) :]


def _level_forecast(
    index: pd.DatetimeIndex, values: np.ndarray, level: float, z: float, cap: float | None
) -> tuple[pd.DataFrame, ForecastReport]:
    """Under two days: the mean of the last day, with twice the history's spread."""
    observed = values[np.isfinite(values)]
    mean = np.full(len(index), float(np.mean(observed[-DAY:])))
    spread = max(float(np.std(observed)), 1e-9 * max(1.0, float(np.max(observed))), 1e-9)
    std = np.full(len(index), 2.0 * spread)
    warning = (
        "history too short for the seasonal members (under two days): the last day's mean is "
        "used, with twice the history's spread as its uncertainty"
    )
    rep = ForecastReport(
        model="level",
        members=("level",),
        period=0,
        interval="twice the history's spread (no earlier origins to calibrate on)",
        level=level,
        cap=cap,
        warnings=(warning,),
    )
    attrs = {"model": "level", "members": ["level"], "backtest_mae": {}, "warnings": [warning]}
    attrs["report"] = rep
    return _forecast_frame(index, mean, std, level, attrs, cap), rep


def _fill(values: np.ndarray) -> np.ndarray:
    """Missing hours interpolated linearly (edges held) so the fits see a complete series."""
    missing = np.isnan(values)
    if not missing.any():
        return values
    positions = np.arange(len(values))
    return np.interp(positions, positions[~missing], values[~missing])


def _forecast_frame(
    index: pd.DatetimeIndex,
    mean: np.ndarray,
    std: np.ndarray,
    level: float,
    attrs: dict,
    cap: float | None = None,
) -> pd.DataFrame:
    """The frame: mean, lower, upper within [0, cap], and std (the unbounded half-width / z)."""
    top = math.inf if cap is None else cap
    z = float(norm.ppf(0.5 + level / 2))
    mean = np.clip(mean, 0.0, top)
    frame = pd.DataFrame(
        {
            "mean": mean,
            "lower": np.clip(mean - z * std, 0.0, top),
            "upper": np.clip(mean + z * std, 0.0, top),
            "std": std,
        },
        index=index,
    )
    frame.attrs.update(attrs)
    return frame


def forecast_file(
    path: str | Path,
    column: str | None = None,
    horizon: int = 168,
    level: float = 0.9,
    cap: float | None = None,
) -> tuple[pd.DataFrame, list[str]]:
    """`gpuplan forecast`: a table `timestamp, mean, lower, upper` and the warnings to print.

    The table's `attrs["report"]` is the `ForecastReport` (weights, backtest, interval).
    """
    history, warnings_ = load_history(Path(path), column)
    frame, rep = forecast_series(history, horizon, level, cap=cap, report=True)
    table = frame[["mean", "lower", "upper"]].reset_index()
    offset = history.attrs.get("utc_offset")
    if offset is not None:  # the history's own offset, kept in the output: 2026-08-22T00:00+02:00
        first = table.columns[0]
        local = pd.DatetimeIndex(table[first]).tz_localize("UTC").tz_convert(offset)
        table[first] = [t.isoformat(timespec="seconds") for t in local]
    table.attrs["report"] = dataclasses.replace(rep, repairs=tuple(warnings_))
    return table, [*warnings_, *frame.attrs.get("warnings", [])]


# Names importable from here: the module's own, and those of loading.py, anomalies.py,
# ensemble.py and gpus.py that callers have imported from here since before the split.
__all__ = [
    "DAY",
    "WEEK",
    "MIN_HISTORY_HOURS",
    "WEEKLY_MODEL_HOURS",
    "MAX_FIT_HOURS",
    "MAX_HISTORY_HOURS",
    "MAX_HORIZON_HOURS",
    "IDLE_LEVEL",
    "IDLE_SHARE",
    "LEAD_RANGES",
    "MIN_RANGE_ERRORS",
    "NAIVE_FLOOR",
    "SPIKE_SCALES",
    "SPIKE_HOURS",
    "SEASONAL_NAIVE",
    "load_history",
    "_no_short_rows",
    "_row",
    "_rows_text",
    "_history_from_table",
    "_OFFSET",
    "common_utc_offset",
    "_parse_timestamps",
    "_pick_column",
    "_regularise",
    "_longest_run",
    "Anomaly",
    "_same_hour_others",
    "_same_hour_reference",
    "_flag_runs",
    "detect_anomalies",
    "_shift_start",
    "_spikes",
    "_repair",
    "ForecastReport",
    "forecast_series",
    "_level_forecast",
    "_fill",
    "_forecast_frame",
    "forecast_file",
    "demand_quantile",
    "coverage_risk",
    "expected_shortfall",
    "_normal_tail",
    "gpus_needed",
    "gpu_path",
    "gpu_path_from_forecast",
]
