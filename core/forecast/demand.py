"""Real-time demand: a robust weekly forecast of hourly traffic, calibrated intervals, GPU paths.

Real histories have outages, spikes, level shifts and trends, and a forecaster picked by a short
backtest learns them as pattern (an outage two weeks ago comes back as a "ghost dip"). So:

1. **Repair.** `detect_anomalies` finds outages (drops to about zero at hours that are busy in
   every other week) and spikes (short runs far off both their neighbourhood and the same hours
   elsewhere); they are replaced by the seasonal value before fitting, left out of the interval's
   calibration, and reported. A change still going at the end is a level shift and is kept (nor
   are the same hours of earlier weeks judged against it).
2. **Combine.** The mean is the hour-by-hour median of three statsmodels-based members that
   fail differently: seasonal naive (the same hour last week), MSTL (periods 24 and 168,
   local-constant seasonal) plus simple exponential smoothing of the rest, and the Theta method
   (period 168). A steady trend over the recent weeks is removed first and added back. After a
   level shift by a factor (the last day's busy hours moved more than its quiet ones) the members
   are fitted to the log of the series, so the whole pattern follows it within a day.
3. **Calibrate.** Split-conformal: the whole procedure is refitted at earlier origins inside the
   history, and the `level` quantile of its absolute errors by lead range is the half-width,
   floored by what seasonal naive's own period-over-period moves say.

What was done is returned as a `ForecastReport` (`forecast_series(..., report=True)`, or
`frame.attrs["report"]`). A fit on three weeks of hourly history costs about 0.2 s of CPU
(five MSTL and Theta fits), so the rolling-horizon simulation can refit it every few hours.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import norm
from statsmodels.regression.linear_model import OLS
from statsmodels.tsa.forecasting.theta import ThetaModel
from statsmodels.tsa.holtwinters import SimpleExpSmoothing
from statsmodels.tsa.seasonal import MSTL, STL

from ..model import ScenarioError

# Reading a history (loading.py), its outages and anomalies (anomalies.py) and from demand to
# GPUs (gpus.py) live beside this module; their names stay importable from here (__all__).
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
CALIBRATION_ORIGINS = 4  # earlier origins the combination is refitted at for the interval
# Lead-time ranges (hours, inclusive) the interval is calibrated on, one quantile each
LEAD_RANGES = ((1, 6), (7, 24), (25, 72), (73, 168), (169, 10**9))
MIN_RANGE_ERRORS = 12  # fewer errors than this in a range: the range before it is used
NAIVE_FLOOR = 1.15  # the interval is at least this share of seasonal naive's own error quantile
SEASONAL_NAIVE = "seasonal_naive_week"
MIN_LOG_SHIFT = 0.2  # a last day this far (in logs) off the earlier periods may be a factor shift
LOG_FLOOR = 0.05  # ... judged only where the series stays above this share of its median
MIN_SHAPE_CORRELATION = 0.8  # ... and a factor shift if its size follows the pattern this closely
MIN_SHAPE = 0.1  # ... over a day whose hours vary at least this much (std over mean)
LOG_OFFSET = 0.01  # the log is taken of the series plus this share of its median


# ---------------------------------------------------------------------------------------------
# The members and their combination


def _seasonal_naive(y: np.ndarray, horizon: int, period: int) -> np.ndarray:
    """The same hour one period earlier, repeated."""
    return np.resize(y[-period:], horizon)


def _mstl_ses(y: np.ndarray, horizon: int, period: int) -> np.ndarray:
    """MSTL seasonal components repeated, plus simple exponential smoothing of the rest.

    `seasonal_deg=0` keeps each seasonal LOESS local-constant (a sharp weekday/weekend edge is
    drawn, not rounded); the trend and low-pass jumps interpolate LOESS between every fourth point
    (the same fit to a few hundredths, four times faster).
    """
    smoothing = {"seasonal_deg": 0, "trend_jump": 4, "low_pass_jump": 4}
    if period == WEEK:  # MSTL keeps only periods shorter than half the series: callers ensure it
        fit = MSTL(y, periods=(DAY, WEEK), stl_kwargs=smoothing).fit()
    else:
        fit = STL(y, period=DAY, **smoothing).fit()
    seasonal = np.asarray(fit.seasonal).reshape(len(y), -1).sum(axis=1)
    rest = y - seasonal
    level = SimpleExpSmoothing(rest, initialization_method="estimated").fit().forecast(1)
    return np.resize(seasonal[-period:], horizon) + float(np.asarray(level)[0])


def _theta(y: np.ndarray, horizon: int, period: int) -> np.ndarray:
    """The Theta method (SES with half the OLS drift) on the additively deseasonalised series."""
    model = ThetaModel(y, period=period, deseasonalize=True, method="additive")
    return np.asarray(model.fit().forecast(horizon))


MEMBERS: dict[str, Callable[[np.ndarray, int, int], np.ndarray]] = {
    "seasonal_naive": _seasonal_naive,
    "mstl_ses": _mstl_ses,
    "theta": _theta,
}


def _member_name(name: str, period: int) -> str:
    if name == "seasonal_naive":
        return SEASONAL_NAIVE if period == WEEK else "seasonal_naive_day"
    return name


def _trend(y: np.ndarray) -> float:
    """Growth per hour when the complete recent weeks rise (or fall) steadily, else 0.

    The weekly means of the last 3-4 complete weeks must move the same way every week, lie close
    to a straight line (R^2 >= 0.95) and change by at least 2% of the level a week: a history
    that merely wanders gets no trend, since a wrong trend grows its error with every hour ahead.
    """
    weeks = min(len(y) // WEEK, 4)
    if weeks < 3:
        return 0.0
    means = y[len(y) - weeks * WEEK :].reshape(weeks, WEEK).mean(axis=1)
    steps = np.diff(means)
    if not (np.all(steps > 0) or np.all(steps < 0)):
        return 0.0
    x = np.arange(weeks, dtype=float)
    fit = OLS(means, np.column_stack([np.ones(weeks), x])).fit()
    slope = float(fit.params[1])
    level = float(np.mean(means))
    if not (level > 0 and fit.rsquared >= 0.95 and abs(slope) >= 0.02 * level):
        return 0.0
    return slope / WEEK


def _multiplicative_shift(y: np.ndarray, period: int) -> bool:
    """Whether the last day departs from the same hours of the periods before by a factor.

    The last DAY hours are compared with the median of the same hours one to three periods
    earlier (the reference): a shift of at least MIN_LOG_SHIFT in logs (about 22%) whose
    hour-by-hour difference grows with the reference (correlation at least MIN_SHAPE_CORRELATION
    in the shift's direction: busy hours moved more than quiet ones) is multiplicative. A shift
    by the same amount at every hour is not, nor one over a reference without a shape over the
    day (std under MIN_SHAPE of its mean: a factor and an amount look alike). A series that
    comes near zero in the last period (below LOG_FLOOR of its median) is not judged: the logs of
    quiet hours would swing on noise.
    """
    n = len(y)
    if n < period + DAY:
        return False
    typical = float(np.median(y))
    if not typical > 0 or float(np.min(y[-period - DAY :])) < LOG_FLOOR * typical:
        return False
    earlier = [y[n - DAY - k * period : n - k * period] for k in (1, 2, 3) if n - DAY >= k * period]
    reference = np.median(np.vstack(earlier), axis=0)
    recent = y[-DAY:]
    if float(np.min(reference)) < LOG_FLOOR * typical:
        return False
    if not float(np.std(reference)) >= MIN_SHAPE * float(np.mean(reference)):
        return False  # hardly a shape over the day: a factor and an amount look the same
    shift = float(np.median(np.log(recent / reference)))
    if abs(shift) < MIN_LOG_SHIFT or not float(np.std(recent - reference)) > 0:
        return False
    correlation = float(np.corrcoef(reference, recent - reference)[0, 1])
    return math.copysign(1.0, shift) * correlation >= MIN_SHAPE_CORRELATION


def _combine(
    y: np.ndarray, horizon: int, period: int
) -> tuple[np.ndarray, dict[str, np.ndarray], float, bool]:
    """Hour-by-hour median of the members (fitted to the detrended series), trend added back.

    After a multiplicative level shift (`_multiplicative_shift`) the members are fitted to the
    log of the detrended series and transformed back: a shift by a factor is then a shift by an
    amount, which their exponential smoothing follows within hours, on every hour of the
    pattern (fitted as it is, a weekend's shift would be carried to the weekdays as the same
    amount). A member that fails on this history (a constant series, a numerical error) is left
    out; the median of the rest is used (of two: their mean). Returns the forecast, each
    member's forecast, the trend per hour and whether the log was used.
    """
    slope = _trend(y) if period == WEEK else 0.0
    time_index = np.arange(len(y) + horizon, dtype=float) - (len(y) - 1)
    detrended = y - slope * time_index[: len(y)]
    forecasts: dict[str, np.ndarray] = {}
    constant = float(np.ptp(detrended)) <= 1e-9 * max(1.0, float(np.max(np.abs(detrended))))
    in_logs = not constant and _multiplicative_shift(detrended, period)
    if in_logs:
        offset = LOG_OFFSET * float(np.median(detrended))
        fitted = np.log(np.maximum(detrended, 0.0) + offset)
        ceiling = math.log(10.0 * float(np.max(detrended)) + offset)

        def back(z: np.ndarray) -> np.ndarray:
            return np.exp(np.minimum(z, ceiling)) - offset
    else:
        fitted = detrended

        def back(z: np.ndarray) -> np.ndarray:
            return z

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, member in MEMBERS.items():
            if constant and name != "seasonal_naive":
                continue
            try:
                predicted = np.asarray(member(fitted, horizon, period), dtype=float)
            except (ValueError, np.linalg.LinAlgError, FloatingPointError, ZeroDivisionError):
                continue
            if predicted.shape == (horizon,) and np.isfinite(predicted).all():
                forecasts[_member_name(name, period)] = back(predicted)
    stack = np.vstack(list(forecasts.values()))
    drift = slope * time_index[len(y) :]
    combined = np.median(stack, axis=0) + drift
    return combined, {k: v + drift for k, v in forecasts.items()}, slope, in_logs


# ---------------------------------------------------------------------------------------------
# The forecast and its report


@dataclass(frozen=True)
class ForecastReport:
    """What `forecast_series` did: anomalies repaired, members combined, trend, calibration."""

    model: str
    members: tuple[str, ...]
    period: int
    anomalies: tuple[Anomaly, ...] = ()
    repairs: tuple[str, ...] = ()  # what reading the file fixed (set by `forecast_file`)
    trend_per_week: float = 0.0
    log_scale: bool = False  # the members were fitted to the log (a multiplicative level shift)
    calibration_origins: int = 0
    interval: str = ""
    backtest_mae: dict[str, float] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        """One line each, for the command line and the page."""
        out = [f"model: {self.model}"]
        if self.trend_per_week:
            out.append(f"trend: {self.trend_per_week:+.3g} per week, kept in the forecast")
        if self.log_scale:
            out.append(
                "level shift: the last day runs a steady factor off the weeks before; the members "
                "were fitted to the log of the series so the whole pattern follows it"
            )
        out.extend(f"repair: {text}" for text in self.repairs)
        out.extend(f"anomaly: {a.describe()}" for a in self.anomalies)
        out.append(f"interval: {self.interval}")
        if self.backtest_mae:
            scores = ", ".join(f"{k} {v:.4g}" for k, v in self.backtest_mae.items())
            out.append(f"backtest MAE at {self.calibration_origins} earlier origins: {scores}")
        return out


def _calibration_origins(n: int, period: int) -> np.ndarray:
    """Earlier origins inside the history, each with more than two periods (and a day) before it."""
    first = max(2 * period + DAY, n - 2 * WEEK)
    last = n - DAY
    if last < first:
        return np.array([], dtype=int)
    count = min(CALIBRATION_ORIGINS, (last - first) // DAY + 1)
    return np.unique(np.linspace(first, last, count).round().astype(int))


def _conformal_scale(
    errors: np.ndarray, horizon: int, level: float
) -> tuple[np.ndarray, int] | None:
    """Per lead: the split-conformal `level` quantile of |error| over its lead range.

    Errors at hours the history marks as outages are already NaN (left out). Each range's
    quantile is the ceil((m + 1) * level)-th smallest of its m errors (the finite-sample rule);
    a range with too few errors borrows the range before it; the result never falls with lead.
    """
    ranges = [(low, high) for low, high in LEAD_RANGES if low <= horizon]
    quantiles: list[float] = []
    for low, high in ranges:
        block = np.abs(errors[:, low - 1 : min(high, errors.shape[1])])
        block = block[np.isfinite(block)]
        if len(block) >= MIN_RANGE_ERRORS:
            rank = min(len(block), math.ceil((len(block) + 1) * level))
            quantiles.append(float(np.sort(block)[rank - 1]))
        elif quantiles:
            quantiles.append(quantiles[-1])
        else:
            quantiles.append(math.nan)
    known = [q for q in quantiles if math.isfinite(q)]
    if not known:
        return None
    quantiles = [q if math.isfinite(q) else known[0] for q in quantiles]
    quantiles = list(np.maximum.accumulate(quantiles))
    out = np.empty(horizon)
    for (low, high), q in zip(ranges, quantiles, strict=True):
        out[low - 1 : min(high, horizon)] = q
    return out, len(known)


def _naive_floor(
    scored: np.ndarray, repaired: np.ndarray, period: int, horizon: int, level: float
) -> np.ndarray:
    """A lower bound on the half-width from the history's own period-over-period changes.

    A few refits see few surprises (a step up that happens every few weeks may fall between
    them); every hour of the history says how far a value moves from the same hour a period
    earlier. NAIVE_FLOOR times the `level` quantile of those moves (outage hours left out) is
    the least half-width from a day ahead on, shrinking with the square root of the lead below.
    """
    moves = np.abs(scored[period:] - repaired[:-period])
    moves = moves[np.isfinite(moves)]
    if len(moves) < MIN_RANGE_ERRORS:
        return np.zeros(horizon)
    rank = min(len(moves), math.ceil((len(moves) + 1) * level))
    quantile = float(np.sort(moves)[rank - 1])
    leads = np.arange(1, horizon + 1)
    return NAIVE_FLOOR * quantile * np.sqrt(np.minimum(leads, DAY) / DAY)


def forecast_series(
    history: pd.Series, horizon: int, level: float = 0.9, *, report: bool = False
) -> pd.DataFrame | tuple[pd.DataFrame, ForecastReport]:
    """Mean, central `level` interval and risk scale for the next `horizon` hours.

    The mean is the hour-by-hour median of differently-failing members, each fitted to the
    history with its outages and spikes replaced by the seasonal value: seasonal naive (the same
    hour last week, or yesterday below two weeks of history), MSTL (periods 24 and 168) plus
    simple exponential smoothing of the rest (follows a level shift within hours), and the Theta
    method. A steady trend over the recent weeks is kept (removed before and added back after).
    The interval is split-conformal: the combination is refitted at earlier origins inside the
    history, and the `level` quantile of its absolute errors by lead range (outage hours left
    out) is the half-width. `std` is that half-width over the normal z of `level` (so mean +- z *
    std is the interval), which `coverage_risk` and `demand_quantile` use. `attrs` carries
    `model`, `members`, `backtest_mae` per member, `warnings` and `report` (a `ForecastReport`);
    with `report=True` the report is also returned: `(frame, report)`.
    """
    z = _checked_z(horizon, level)
    if not isinstance(history.index, pd.DatetimeIndex):
        raise ScenarioError("history must be indexed by timestamps")
    if horizon < DAY:
        # Calibrated on at least a day of leads: a few refit errors per lead range alone would
        # give the interval of a handful of hours a band wider than the history.
        frame, rep = forecast_series(history, DAY, level, report=True)
        short = frame.iloc[:horizon].copy()
        short.attrs = dict(frame.attrs)
        return (short, rep) if report else short
    values, stamps = _fit_values(history)
    index = pd.date_range(
        stamps[-1] + pd.Timedelta(hours=1), periods=horizon, freq="h", name="timestamp"
    )
    n = len(values)
    if n < 2 * DAY:
        frame, rep = _level_forecast(index, values, level, z)
        return (frame, rep) if report else frame
    period = WEEK if n > WEEKLY_MODEL_HOURS else DAY
    filled = _fill(values)
    mask, runs = detect_anomalies(filled, period)
    anomalies = tuple(Anomaly(stamps[s], stamps[e - 1], e - s, kind) for s, e, kind in runs)
    repaired = _repair(filled, mask, period)
    mean, members, slope, in_logs = _combine(repaired, horizon, period)
    scored = np.where(mask | ~np.isfinite(values), np.nan, values)
    origins = _calibration_origins(n, period)
    errors, scores = _backtest(repaired, scored, origins, members, horizon)
    half_width, interval = _half_width(errors, origins, scored, repaired, period, horizon, level, z)
    floor = 1e-9 * max(1.0, float(np.max(np.abs(repaired))))
    std = np.maximum(half_width / z, floor)
    model = f"median of {', '.join(members)}" if len(members) > 1 else next(iter(members))
    rep = ForecastReport(
        model=model,
        members=tuple(members),
        period=period,
        anomalies=anomalies,
        trend_per_week=slope * WEEK,
        log_scale=in_logs,
        calibration_origins=len(origins),
        interval=interval,
        backtest_mae=scores,
        warnings=tuple(a.describe() for a in anomalies),
    )
    attrs = {
        "model": model,
        "members": list(members),
        "backtest_mae": scores,
        "warnings": list(rep.warnings),
        "report": rep,
    }
    frame = _forecast_frame(index, mean, std, level, attrs)
    return (frame, rep) if report else frame


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


def _backtest(
    repaired: np.ndarray,
    scored: np.ndarray,
    origins: np.ndarray,
    members: Sequence[str],
    horizon: int,
) -> tuple[np.ndarray, dict[str, float]]:
    """The combination refitted at each earlier origin: its errors per origin and lead (up to a
    week; NaN where `scored` is), and the mean absolute error of each member and the median."""
    n = len(scored)
    lead_cap = min(horizon, WEEK)
    errors = np.full((len(origins), lead_cap), np.nan)
    member_errors = {name: np.full((len(origins), lead_cap), np.nan) for name in members}
    for row, origin in enumerate(origins):
        leads = min(lead_cap, n - origin)
        past_period = WEEK if origin > WEEKLY_MODEL_HOURS else DAY
        combined, parts, _, _ = _combine(repaired[:origin], leads, past_period)
        actual = scored[origin : origin + leads]
        errors[row, :leads] = actual - combined
        for name, predicted in parts.items():
            if name in member_errors:
                member_errors[name][row, :leads] = actual - predicted
    scores = {
        name: float(np.nanmean(np.abs(e)))
        for name, e in member_errors.items()
        if np.isfinite(e).any()
    }
    if np.isfinite(errors).any():
        scores["median"] = float(np.nanmean(np.abs(errors)))
    return errors, scores


def _half_width(
    errors: np.ndarray,
    origins: np.ndarray,
    scored: np.ndarray,
    repaired: np.ndarray,
    period: int,
    horizon: int,
    level: float,
    z: float,
) -> tuple[np.ndarray, str]:
    """(the interval's half-width per lead, how it was found): split-conformal from the refits,
    floored by seasonal naive's own moves; twice the history's spread without refits."""
    calibrated = _conformal_scale(errors, horizon, level) if len(origins) >= 2 else None
    if calibrated is not None:
        floor = _naive_floor(scored, repaired, period, horizon, level)
        calibrated = (np.maximum(calibrated[0], floor), calibrated[1])
    if calibrated is None:
        spread = max(float(np.std(repaired)), 1e-9) * 2.0
        return (
            np.full(horizon, z * spread),
            "too little history for calibration refits: twice the history's spread",
        )
    half_width, ranges = calibrated
    return half_width, (
        f"split-conformal {level:.0%} from refits at {len(origins)} earlier origins, "
        f"{ranges} lead ranges, outage hours left out"
    )


def _level_forecast(
    index: pd.DatetimeIndex, values: np.ndarray, level: float, z: float
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
        interval="twice the history's spread (no calibration refits)",
        warnings=(warning,),
    )
    attrs = {"model": "level", "members": ["level"], "backtest_mae": {}, "warnings": [warning]}
    attrs["report"] = rep
    return _forecast_frame(index, mean, std, level, attrs), rep


def _fill(values: np.ndarray) -> np.ndarray:
    """Missing hours interpolated linearly (edges held) so the fits see a complete series."""
    missing = np.isnan(values)
    if not missing.any():
        return values
    positions = np.arange(len(values))
    return np.interp(positions, positions[~missing], values[~missing])


def _forecast_frame(
    index: pd.DatetimeIndex, mean: np.ndarray, std: np.ndarray, level: float, attrs: dict
) -> pd.DataFrame:
    mean = np.maximum(mean, 0.0)
    z = float(norm.ppf(0.5 + level / 2))
    frame = pd.DataFrame(
        {
            "mean": mean,
            "lower": np.maximum(mean - z * std, 0.0),
            "upper": mean + z * std,
            "std": std,
        },
        index=index,
    )
    frame.attrs.update(attrs)
    return frame


def forecast_file(
    path: str | Path, column: str | None = None, horizon: int = 168, level: float = 0.9
) -> tuple[pd.DataFrame, list[str]]:
    """`gpuplan forecast`: a table `timestamp, mean, lower, upper` and the warnings to print.

    The table's `attrs["report"]` is the `ForecastReport` (members, anomalies, interval).
    """
    history, warnings_ = load_history(Path(path), column)
    frame, rep = forecast_series(history, horizon, level, report=True)
    table = frame[["mean", "lower", "upper"]].reset_index()
    offset = history.attrs.get("utc_offset")
    if offset is not None:  # the history's own offset, kept in the output: 2026-08-22T00:00+02:00
        first = table.columns[0]
        local = pd.DatetimeIndex(table[first]).tz_localize("UTC").tz_convert(offset)
        table[first] = [t.isoformat(timespec="seconds") for t in local]
    table.attrs["report"] = dataclasses.replace(rep, repairs=tuple(warnings_))
    return table, [*warnings_, *frame.attrs.get("warnings", [])]


# Every name the module had before loading.py, anomalies.py and gpus.py were split off
# (issue 50), in its order then: importable from here as before.
__all__ = [
    "DAY",
    "WEEK",
    "MIN_HISTORY_HOURS",
    "WEEKLY_MODEL_HOURS",
    "MAX_FIT_HOURS",
    "MAX_HISTORY_HOURS",
    "MAX_HORIZON_HOURS",
    "CALIBRATION_ORIGINS",
    "LEAD_RANGES",
    "MIN_RANGE_ERRORS",
    "NAIVE_FLOOR",
    "SPIKE_SCALES",
    "SPIKE_HOURS",
    "SEASONAL_NAIVE",
    "MIN_LOG_SHIFT",
    "LOG_FLOOR",
    "MIN_SHAPE_CORRELATION",
    "MIN_SHAPE",
    "LOG_OFFSET",
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
    "_seasonal_naive",
    "_mstl_ses",
    "_theta",
    "MEMBERS",
    "_member_name",
    "_trend",
    "_multiplicative_shift",
    "_combine",
    "ForecastReport",
    "_calibration_origins",
    "_conformal_scale",
    "_naive_floor",
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
