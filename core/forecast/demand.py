"""Real-time demand: a weekly profile fitted to hourly traffic, calibrated intervals, GPU paths.

The forecaster is chosen per history by a rolling-origin backtest, not by taste. The candidates
are statsmodels least-squares fits of seasonal profiles (Fourier terms of periods 24 and 168
hours) with a mean-reverting AR(1) level on their residuals, plus the seasonal-naive baselines
(the same hour last week, the same hour yesterday). Intervals come from the backtest errors of
the chosen model, by lead time, so a central 90% interval holds about 90% of what happens even
when traffic has outages and level shifts that a model's own Gaussian intervals would miss.

Everything here is headless and fast: one `forecast_series` call on eight weeks of history
fits a few dozen small OLS problems (tens of milliseconds), because the rolling-horizon
simulation refits it every simulated hour.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import norm
from scipy.stats import t as student_t
from statsmodels.regression.linear_model import OLS
from statsmodels.tsa.deterministic import Fourier

from ..formats import decode_upload, read_text
from ..model import ScenarioError

DAY = 24
WEEK = 168
MIN_HISTORY_HOURS = 24  # fewer hourly values than this cannot be forecast at all
WEEKLY_MODEL_HOURS = 2 * WEEK  # below two weeks only daily-period models are tried
MAX_FIT_HOURS = 8 * WEEK  # older history is ignored: the recent weeks say more
BACKTEST_ORIGINS = 14  # rolling origins per backtest, every BACKTEST_SPACING hours
BACKTEST_SPACING = 24
DAILY_TERMS = 4  # Fourier pairs of the 24-hour period
WEEKLY_TERMS = 6  # Fourier pairs of the 168-hour period
SEASONAL_NAIVE = "seasonal_naive_week"


# ---------------------------------------------------------------------------------------------
# Reading a history


def load_history(
    source: str | Path | bytes, column: str | None = None, name: str = "history.csv"
) -> tuple[pd.Series, list[str]]:
    """An hourly float series (DatetimeIndex, gaps kept as NaN) and warnings about what was fixed.

    `source` is a path (a `Path`, or a non-blank `str` without a line break), the file's
    bytes, or its text. The first column holds timestamps; the value column is `column`, or by
    default the first column whose cells are all numbers. Sub-hourly rows are averaged into
    hours, unsorted rows sorted, duplicated timestamps keep their last value; each fix is
    reported. Anything that cannot be repaired raises a `ScenarioError` naming the file, row
    and column.
    """
    if isinstance(source, bytes):
        text = decode_upload(source, name)
    elif isinstance(source, Path) or (
        isinstance(source, str) and source.strip() and "\n" not in source and "\r" not in source
    ):
        path = Path(source)
        name = path.name
        text = read_text(path)
    else:
        text = str(source)
        if not text.strip():
            raise ScenarioError(f"{name}: file is empty")
    try:
        table = pd.read_csv(
            io.StringIO(text), dtype=str, keep_default_na=False, skipinitialspace=True
        )
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as e:
        first_line = str(e).strip().splitlines()[0] if str(e).strip() else "unreadable"
        raise ScenarioError(f"{name}: cannot be read as CSV ({first_line})") from None
    return _history_from_table(table, column, name)


def _row(i: int) -> int:
    """The file's line number of data row i (the header is line 1)."""
    return i + 2


def _rows_text(rows: Sequence[int]) -> str:
    shown = ", ".join(str(_row(i)) for i in rows[:5])
    more = f" and {len(rows) - 5} more" if len(rows) > 5 else ""
    return f"row{'s' if len(rows) > 1 else ''} {shown}{more}"


def _history_from_table(
    table: pd.DataFrame, column: str | None, name: str
) -> tuple[pd.Series, list[str]]:
    columns = [str(c).strip() for c in table.columns]
    table.columns = columns
    if len(columns) < 2:
        raise ScenarioError(
            f"{name}: needs a timestamp column and at least one numeric column, "
            f"found only {columns!r}"
        )
    if len(table) == 0:
        raise ScenarioError(f"{name}: has a header but no data rows")
    if len(table) == 1:
        raise ScenarioError(
            f"{name}: has only one data row; an hourly history needs at least "
            f"{MIN_HISTORY_HOURS} hours"
        )
    time_column = columns[0]
    stamps = _parse_timestamps(table[time_column], time_column, name)
    value_column = _pick_column(table, columns[1:], column, name)
    raw = table[value_column].str.strip()
    values = pd.to_numeric(raw, errors="coerce")
    bad = np.flatnonzero(
        values.isna().to_numpy()
        & (raw != "").to_numpy()
        & ~raw.str.lower().isin(["nan", "na", "null", "none"]).to_numpy()
    )
    if len(bad):
        raise ScenarioError(
            f"{name}: column '{value_column}', {_rows_text(list(bad))}: "
            f"{raw.iloc[bad[0]]!r} is not a number"
        )
    values = values.astype(float).to_numpy()
    infinite = np.flatnonzero(np.isinf(values))
    if len(infinite):
        raise ScenarioError(
            f"{name}: column '{value_column}', {_rows_text(list(infinite))}: value is not finite"
        )
    negative = np.flatnonzero(values < 0)
    if len(negative):
        raise ScenarioError(
            f"{name}: column '{value_column}', {_rows_text(list(negative))}: "
            f"demand cannot be negative ({values[negative[0]]:g})"
        )
    return _regularise(pd.Series(values, index=pd.DatetimeIndex(stamps), name=value_column), name)


def _parse_timestamps(cells: pd.Series, column: str, name: str) -> pd.DatetimeIndex:
    text = cells.str.strip()
    try:  # offsets are converted to UTC; stamps without one are read as UTC already
        stamps = pd.to_datetime(text, errors="coerce", format="mixed", utc=True)
    except (ValueError, TypeError, OverflowError) as e:
        raise ScenarioError(
            f"{name}: column '{column}' cannot be read as timestamps ({str(e).splitlines()[0]})"
        ) from None
    missing = np.flatnonzero(stamps.isna().to_numpy())
    if len(missing) == len(text):
        raise ScenarioError(
            f"{name}: the first column '{column}' holds no timestamps (e.g. "
            f"{text.iloc[0]!r} in row {_row(0)}); put the hour of each row first, "
            "like 2026-08-17 13:00"
        )
    if len(missing):
        raise ScenarioError(
            f"{name}: column '{column}', {_rows_text(list(missing))}: "
            f"{text.iloc[missing[0]]!r} is not a timestamp"
        )
    return pd.DatetimeIndex(stamps).tz_localize(None)


def _pick_column(table: pd.DataFrame, candidates: list[str], column: str | None, name: str) -> str:
    if column is not None:
        if column not in candidates:
            raise ScenarioError(
                f"{name}: no column '{column}'; the value columns are {', '.join(candidates)}"
            )
        return column
    for candidate in candidates:
        raw = table[candidate].str.strip()
        filled = raw[(raw != "") & ~raw.str.lower().isin(["nan", "na", "null", "none"])]
        if len(filled) and pd.to_numeric(filled, errors="coerce").notna().all():
            return candidate
    return candidates[0]  # reported cell by cell by the caller


def _regularise(series: pd.Series, name: str) -> tuple[pd.Series, list[str]]:
    """Sort, drop duplicated stamps, resample to whole hours; report what changed."""
    warnings: list[str] = []
    if not series.index.is_monotonic_increasing:
        warnings.append(f"{name}: rows were not in time order; sorted")
        series = series.sort_index(kind="stable")
    duplicated = series.index.duplicated(keep="last")
    if duplicated.any():
        warnings.append(
            f"{name}: {int(duplicated.sum())} duplicated timestamps; kept the last value of each"
        )
        series = series[~duplicated]
    if len(series) < 2:
        raise ScenarioError(
            f"{name}: has only one distinct timestamp; an hourly history needs "
            f"at least {MIN_HISTORY_HOURS} hours"
        )
    spacing = series.index.to_series().diff().dropna().median()
    if spacing > pd.Timedelta(hours=1):
        raise ScenarioError(
            f"{name}: rows are {spacing} apart; an hourly (or finer) history is needed"
        )
    on_the_hour = (series.index == series.index.floor("h")).all()
    hourly = series.resample("h").mean()
    if spacing < pd.Timedelta(hours=1):
        warnings.append(f"{name}: rows are {spacing} apart; averaged into hours")
    elif not on_the_hour:
        warnings.append(f"{name}: timestamps were not on the hour; grouped into whole hours")
    hourly = hourly.astype(float)
    observed = int(hourly.notna().sum())
    if observed < MIN_HISTORY_HOURS:
        raise ScenarioError(
            f"{name}: only {observed} hours have a value; at least "
            f"{MIN_HISTORY_HOURS} are needed to forecast"
        )
    gaps = int(hourly.isna().sum())
    if gaps:
        warnings.append(
            f"{name}: {gaps} of {len(hourly)} hours have no value (largest gap "
            f"{_longest_run(hourly.isna().to_numpy())} hours); they are "
            "interpolated for fitting and ignored when scoring"
        )
    if len(hourly) < WEEKLY_MODEL_HOURS:
        warnings.append(
            f"{name}: only {len(hourly) / 24:.1f} days of history, less than two "
            "weeks: the weekly profile cannot be checked, so a daily-only model "
            "is used"
        )
    hourly.index.name = "timestamp"
    return hourly, warnings


def _longest_run(mask: np.ndarray) -> int:
    best = run = 0
    for flag in mask:
        run = run + 1 if flag else 0
        best = max(best, run)
    return best


# ---------------------------------------------------------------------------------------------
# The candidate models


@dataclass(frozen=True)
class _Candidate:
    """A forecaster: a seasonal-naive copy, or an OLS profile with an AR(1) level."""

    name: str
    naive_period: int = 0  # > 0: repeat the last naive_period hours
    daily_terms: int = 0
    weekly_terms: int = 0
    min_hours: int = DAY


CANDIDATES = (
    _Candidate(SEASONAL_NAIVE, naive_period=WEEK, min_hours=WEEK),
    _Candidate("seasonal_naive_day", naive_period=DAY, min_hours=DAY),
    _Candidate(
        "weekly_profile", daily_terms=DAILY_TERMS, weekly_terms=WEEKLY_TERMS, min_hours=WEEK
    ),
    _Candidate("daily_profile", daily_terms=DAILY_TERMS, min_hours=2 * DAY),
    _Candidate("level", min_hours=DAY),
)


def _design(length: int) -> np.ndarray:
    """Constant, then daily and weekly Fourier terms, one row per hour of the window + horizon."""
    index = pd.RangeIndex(length)
    daily = Fourier(period=DAY, order=DAILY_TERMS).in_sample(index).to_numpy()
    weekly = Fourier(period=WEEK, order=WEEKLY_TERMS).in_sample(index).to_numpy()
    return np.column_stack([np.ones(length), daily, weekly])


def _design_columns(candidate: _Candidate) -> np.ndarray:
    daily = np.arange(1, 1 + 2 * candidate.daily_terms)
    weekly = 1 + 2 * DAILY_TERMS + np.arange(2 * candidate.weekly_terms)
    return np.concatenate([[0], daily, weekly]).astype(int)


class _PrefixLeastSquares:
    """Every origin's least-squares fit from running sums of x'x and x'y.

    The backtest refits each profile at up to BACKTEST_ORIGINS origins; solving the small
    normal equations of each prefix gives the same coefficients as refitting OLS on it, in a
    fraction of the time, and without multithreaded BLAS calls that crawl when the machine's
    cores are shared (a rolling simulation calls this every simulated hour).
    """

    def __init__(self, y: np.ndarray, design: np.ndarray):
        x = design[: len(y)]
        self.xtx = np.cumsum(x[:, :, None] * x[:, None, :], axis=0)
        self.xty = np.cumsum(x * y[:, None], axis=0)

    def params(self, origin: int, columns: np.ndarray) -> np.ndarray:
        a = self.xtx[origin - 1][np.ix_(columns, columns)]
        b = self.xty[origin - 1][columns]
        ridge = 1e-10 * np.trace(a) / len(columns) * np.eye(len(columns))
        return np.linalg.solve(a + ridge, b)


def _predict(
    candidate: _Candidate,
    y: np.ndarray,
    design: np.ndarray,
    origin: int,
    horizon: int,
    prefix: _PrefixLeastSquares | None = None,
) -> np.ndarray:
    """Forecast y[origin : origin + horizon] from y[:origin] (y has no NaN).

    Profiles are fitted by statsmodels OLS, or in a backtest from `prefix` (the same fit).
    """
    past = y[:origin]
    if candidate.naive_period:
        return np.resize(past[-candidate.naive_period :], horizon)
    columns = _design_columns(candidate)
    x = design[:, columns]
    if prefix is None:
        params = np.asarray(OLS(past, x[:origin]).fit().params)
    else:
        params = prefix.params(origin, columns)
    residual = past - (x[:origin] * params).sum(axis=1)
    lagged = residual[:-1]
    denominator = float(lagged @ lagged)
    phi = float(residual[1:] @ lagged) / denominator if denominator > 0 else 0.0
    phi = min(max(phi, 0.0), 0.999)
    level = residual[-1] * phi ** np.arange(1, horizon + 1)
    return (x[origin : origin + horizon] * params).sum(axis=1) + level


def _fill(values: np.ndarray) -> np.ndarray:
    """Missing hours interpolated linearly (edges held) so the fits see a complete series."""
    missing = np.isnan(values)
    if not missing.any():
        return values
    positions = np.arange(len(values))
    return np.interp(positions, positions[~missing], values[~missing])


@dataclass(frozen=True)
class Backtest:
    """Rolling-origin errors of every candidate (origins x leads; NaN where not observed)."""

    errors: dict[str, np.ndarray]
    origins: np.ndarray

    def mae(self, name: str) -> float:
        """Mean absolute error with every lead weighted equally."""
        by_lead = np.nanmean(np.abs(self.errors[name]), axis=0)
        return float(np.nanmean(by_lead))


def backtest(values: np.ndarray, horizon: int, candidates: Sequence[_Candidate]) -> Backtest:
    """Forecast from the last BACKTEST_ORIGINS daily origins and score against what happened."""
    n = len(values)
    filled = _fill(values)
    first = max(c.min_hours for c in candidates)
    last = n - 1
    origins = np.arange(last, first - 1, -BACKTEST_SPACING)[:BACKTEST_ORIGINS][::-1]
    design = _design(n + horizon)
    errors = {c.name: np.full((len(origins), horizon), np.nan) for c in candidates}
    prefix = _PrefixLeastSquares(filled, design)
    for row, origin in enumerate(origins):
        leads = min(horizon, n - origin)
        actual = values[origin : origin + leads]
        for candidate in candidates:
            predicted = _predict(candidate, filled, design, int(origin), leads, prefix)
            errors[candidate.name][row, :leads] = actual - predicted
    return Backtest(errors, origins)


def _usable(n: int) -> list[_Candidate]:
    """Candidates with at least a day of backtest; weekly ones only from two weeks of history."""

    def weekly(c: _Candidate) -> bool:
        return c.naive_period == WEEK or c.weekly_terms > 0

    return [
        c
        for c in CANDIDATES
        if n >= c.min_hours + DAY and (n >= WEEKLY_MODEL_HOURS or not weekly(c))
    ]


def _lead_scale(errors: np.ndarray, horizon: int) -> np.ndarray:
    """RMS error by lead, pooled over log-spaced lead buckets, never decreasing with lead."""
    squared = errors**2
    edges = [1, 2, 3, 5, 9, 17, 33, 65, 129, 10**9]
    centres, scales = [], []
    for low, high in zip(edges[:-1], edges[1:], strict=True):
        block = squared[:, low - 1 : min(high - 1, horizon)]
        if block.size and np.isfinite(block).sum() >= 8:
            centres.append(math.log((low + min(high - 1, horizon)) / 2))
            scales.append(math.sqrt(float(np.nanmean(block))))
    if not scales:
        overall = np.nanmean(squared) if np.isfinite(squared).any() else 0.0
        return np.full(horizon, math.sqrt(overall))
    leads = np.log(np.arange(1, horizon + 1))
    scale = np.interp(leads, centres, scales)
    return np.maximum.accumulate(scale)


def forecast_series(history: pd.Series, horizon: int, level: float = 0.9) -> pd.DataFrame:
    """Mean, central `level` interval and risk scale for the next `horizon` hours.

    The model is the candidate with the lowest rolling-origin MAE on this history (seasonal
    naive included, so the result is never knowingly worse than it). The interval is the chosen
    model's backtest RMS error by lead time, widened for the few origins it rests on; `std` is
    the scale of the normal predictive distribution (mean +- z * std is the central interval),
    which `coverage_risk` uses. `attrs` carries
    `model`, `backtest_mae` per candidate and `warnings`.
    """
    if horizon < 1:
        raise ScenarioError(f"horizon must be at least 1 hour, got {horizon}")
    if not 0 < level < 1:
        raise ScenarioError(f"level must be between 0 and 1, got {level}")
    if not isinstance(history.index, pd.DatetimeIndex):
        raise ScenarioError("history must be indexed by timestamps")
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
    end = series.index[-1]
    index = pd.date_range(end + pd.Timedelta(hours=1), periods=horizon, freq="h", name="timestamp")
    warnings: list[str] = []
    candidates = _usable(len(values))
    if candidates:
        test = backtest(values, min(horizon, WEEK), candidates)
        scores = {c.name: test.mae(c.name) for c in candidates}
        chosen = min(candidates, key=lambda c: scores[c.name])
        errors = test.errors[chosen.name]
    else:
        chosen, scores = _Candidate("level"), {}
        errors = np.empty((0, horizon))
        warnings.append(
            "history too short for a backtest: a mean-reverting level is used, "
            "with twice the history's spread as its uncertainty"
        )
    filled = _fill(values)
    mean = _predict(chosen, filled, _design(len(values) + horizon), len(values), horizon)
    std = _calibrate(errors, horizon, level, filled)
    return _forecast_frame(
        index,
        mean,
        std,
        level,
        {"model": chosen.name, "backtest_mae": scores, "warnings": warnings},
    )


def _calibrate(errors: np.ndarray, horizon: int, level: float, values: np.ndarray) -> np.ndarray:
    """The predictive scale per lead: normal, with the interval of `level` at mean +- z * scale.

    The backtest's RMS error by lead is a scale estimated from few origins (each origin's
    errors are strongly correlated across leads), so it is widened the way a prediction
    interval with an estimated variance is: a Student-t quantile with (origins - 1) degrees of
    freedom and a factor sqrt(1 + 1/origins), expressed as the equivalent normal scale.
    """
    z = float(norm.ppf(0.5 + level / 2))
    observed = np.isfinite(errors)
    origins = int((observed.sum(axis=1) >= errors.shape[1] / 2).sum()) if errors.size else 0
    if observed.sum() < 20 or origins < 2:
        spread = float(np.std(values))
        return np.full(horizon, max(spread, 1e-9) * 2.0)
    scale = _lead_scale(errors, min(horizon, errors.shape[1]))
    if horizon > len(scale):
        scale = np.concatenate([scale, np.full(horizon - len(scale), scale[-1])])
    floor = 1e-9 * max(1.0, float(np.max(np.abs(values))))
    widening = float(student_t.ppf(0.5 + level / 2, origins - 1)) / z
    return np.maximum(scale * widening * math.sqrt(1 + 1 / origins), floor)


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
    """`gpuplan forecast`: a table `timestamp, mean, lower, upper` and the warnings to print."""
    history, warnings = load_history(Path(path), column)
    frame = forecast_series(history, horizon, level)
    table = frame[["mean", "lower", "upper"]].reset_index()
    return table, [*warnings, *frame.attrs.get("warnings", [])]


# ---------------------------------------------------------------------------------------------
# From demand to GPUs


def demand_quantile(forecast: pd.DataFrame, quantile: float) -> np.ndarray:
    """Demand at `quantile` of each step's predictive distribution (normal, mean and std)."""
    if not 0 < quantile < 1:
        raise ScenarioError(f"quantile must be between 0 and 1, got {quantile}")
    mean = forecast["mean"].to_numpy(dtype=float)
    std = forecast["std"].to_numpy(dtype=float)
    return np.maximum(mean + float(norm.ppf(quantile)) * std, 0.0)


def coverage_risk(
    forecast: pd.DataFrame,
    allocated_gpus: Sequence[float] | np.ndarray | float,
    capacity_per_gpu: float,
) -> np.ndarray:
    """Probability, per step, that demand exceeds what the allocated GPUs can serve.

    Demand at a step is normal with the forecast's `mean` and `std`; `capacity_per_gpu` is in
    the history's units (e.g. requests per hour one GPU serves). Non-increasing in the allocation.
    """
    return _normal_tail(forecast, allocated_gpus, capacity_per_gpu)[0]


def expected_shortfall(
    forecast: pd.DataFrame,
    allocated_gpus: Sequence[float] | np.ndarray | float,
    capacity_per_gpu: float,
) -> np.ndarray:
    """E[max(0, demand - served)] per step, in the history's units, under the same normal model."""
    return _normal_tail(forecast, allocated_gpus, capacity_per_gpu)[1]


def _normal_tail(forecast: pd.DataFrame, allocated_gpus, capacity_per_gpu: float):
    """(P(demand > capacity), E[max(0, demand - capacity)]); a tiny std is a point mass."""
    if not capacity_per_gpu > 0:
        raise ScenarioError(f"capacity_per_gpu must be > 0, got {capacity_per_gpu}")
    mean = forecast["mean"].to_numpy(dtype=float)
    std = forecast["std"].to_numpy(dtype=float)
    capacity = np.broadcast_to(np.asarray(allocated_gpus, dtype=float), mean.shape)
    capacity = capacity * capacity_per_gpu
    point = ~(std > 1e-9 * np.maximum(1.0, np.abs(mean)))
    scale = np.where(point, 1.0, std)
    z = np.clip((capacity - mean) / scale, -40.0, 40.0)  # beyond that it is 0 or 1 anyway
    risk = np.where(point, (mean > capacity).astype(float), norm.sf(z))
    excess = np.where(point, mean - capacity, scale * norm.pdf(z) + (mean - capacity) * risk)
    return risk, np.maximum(excess, 0.0)


def gpus_needed(demand: Sequence[float] | np.ndarray, capacity_per_gpu: float) -> np.ndarray:
    """Whole GPUs that serve `demand` (same units as the capacity), per step."""
    if not capacity_per_gpu > 0:
        raise ScenarioError(f"capacity_per_gpu must be > 0, got {capacity_per_gpu}")
    ratio = np.asarray(demand, dtype=float) / capacity_per_gpu
    return np.ceil(np.round(ratio, 9)).astype(int)


def gpu_path(
    target_gpus: Sequence[float] | np.ndarray,
    gpus_min: int,
    gpus_max: int,
    swap_cap: int,
    previous: int | None = None,
    *,
    capacity_per_gpu: float | None = None,
) -> np.ndarray:
    """A GPU count per step within [gpus_min, gpus_max] whose changes stay within `swap_cap`.

    `target_gpus` is the GPUs wanted per step (fractions round up), e.g. `gpus_needed` of a
    `demand_quantile`; with `capacity_per_gpu` it is demand in the capacity's units instead.
    The path covers the target wherever the cap allows it at all: it ramps up early enough to
    meet each peak and comes down as fast as the cap allows afterwards, so shortfall is minimal
    first and surplus second. `previous` is the count held before step 0
    (None: step 0 is free). A `previous` outside the range is walked towards it at the cap.
    """
    for label, value in (("gpus_min", gpus_min), ("gpus_max", gpus_max), ("swap_cap", swap_cap)):
        if int(value) != value or value < 0:
            raise ScenarioError(f"{label} must be a whole number >= 0, got {value!r}")
    if gpus_min > gpus_max:
        raise ScenarioError(f"gpus_min {gpus_min} is larger than gpus_max {gpus_max}")
    if capacity_per_gpu is not None:
        target_gpus = gpus_needed(target_gpus, capacity_per_gpu)
    target = np.ceil(np.round(np.asarray(target_gpus, dtype=float), 9))
    if np.isnan(target).any():
        raise ScenarioError("target_gpus has missing values")
    need = np.clip(target, gpus_min, gpus_max).astype(int)
    steps = len(need)
    envelope = need.copy()  # the least each step may hold so every later peak is still reachable
    for t in range(steps - 2, -1, -1):
        envelope[t] = max(envelope[t], envelope[t + 1] - swap_cap)
    path = np.empty(steps, dtype=int)
    held = previous
    for t in range(steps):
        if held is None:
            count = envelope[t]
        else:
            count = max(envelope[t], held - swap_cap)
            count = min(count, held + swap_cap)
        path[t] = count
        held = count
    return path


def gpu_path_from_forecast(
    forecast: pd.DataFrame,
    capacity_per_gpu: float,
    quantile: float,
    gpus_min: int,
    gpus_max: int,
    swap_cap: int,
    previous: int | None = None,
) -> np.ndarray:
    """`gpu_path` of the GPUs needed to serve the forecast's `quantile` of demand."""
    target = gpus_needed(demand_quantile(forecast, quantile), capacity_per_gpu)
    return gpu_path(target, gpus_min, gpus_max, swap_cap, previous)
