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

import csv
import dataclasses
import io
import math
import re
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

from ..formats import decode_upload, read_text
from ..model import MAX_DEMAND, ScenarioError, clipped

DAY = 24
WEEK = 168
MIN_HISTORY_HOURS = 24  # fewer hourly values than this cannot be forecast at all
WEEKLY_MODEL_HOURS = 2 * WEEK  # below two weeks only daily-period models are tried
MAX_FIT_HOURS = 6 * WEEK  # older history is ignored: the recent weeks say more
MAX_HISTORY_HOURS = 200_000  # about 23 years of hours: a longer span is a typo, not a history
MAX_HORIZON_HOURS = 10_080  # the longest horizon a scenario may have (SPEC section 3)
CALIBRATION_ORIGINS = 4  # earlier origins the combination is refitted at for the interval
# Lead-time ranges (hours, inclusive) the interval is calibrated on, one quantile each
LEAD_RANGES = ((1, 6), (7, 24), (25, 72), (73, 168), (169, 10**9))
MIN_RANGE_ERRORS = 12  # fewer errors than this in a range: the range before it is used
NAIVE_FLOOR = 1.15  # the interval is at least this share of seasonal naive's own error quantile
SPIKE_SCALES = 8.0  # a spike is this many robust scales off its neighbourhood and pattern
SPIKE_HOURS = 12  # longest run that can be a spike (longer: a real change of regime)
SEASONAL_NAIVE = "seasonal_naive_week"
MIN_LOG_SHIFT = 0.2  # a last day this far (in logs) off the earlier periods may be a factor shift
LOG_FLOOR = 0.05  # ... judged only where the series stays above this share of its median
MIN_SHAPE_CORRELATION = 0.8  # ... and a factor shift if its size follows the pattern this closely
MIN_SHAPE = 0.1  # ... over a day whose hours vary at least this much (std over mean)
LOG_OFFSET = 0.01  # the log is taken of the series plus this share of its median


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
    _no_short_rows(text, name)
    return _history_from_table(table, column, name)


def _no_short_rows(text: str, name: str) -> None:
    """A row of one cell under a header of more is a file cut short (or a line broken in two),
    not an hour without a value: "2020" alone would read as 2020-01-01. (Rows short of an
    optional trailing column, as some tools write them, stay readable.)"""
    reader = csv.reader(io.StringIO(text, newline=""), skipinitialspace=True)
    try:
        width = len(next(reader, []))
        short = next((row for row in reader if len(row) == 1 and row[0].strip()), None)
    except csv.Error:  # (what pandas read, the csv module may not: pandas' reading stands)
        return
    if short is not None and width > 1:
        raise ScenarioError(
            f"{name}: row {reader.line_num} has 1 of the header's {width} columns "
            f"({short[0][:60]!r}): a file cut short, or a line broken in two?"
        )


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
        found = f"one column, '{clipped(columns[0])}'" if columns else "no columns"
        raise ScenarioError(
            f"{name}: needs a timestamp column and at least one numeric column; "
            f"its header has {found} (a CSV with a header like 'timestamp,requests')"
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
    huge = np.flatnonzero(values > MAX_DEMAND)
    if len(huge):
        raise ScenarioError(
            f"{name}: column '{value_column}', {_rows_text(list(huge))}: "
            f"{values[huge[0]]:g} is more than {MAX_DEMAND:g}"
        )
    negative = np.flatnonzero(values < 0)
    if len(negative):
        raise ScenarioError(
            f"{name}: column '{value_column}', {_rows_text(list(negative))}: "
            f"demand cannot be negative ({values[negative[0]]:g})"
        )
    series, fixes = _regularise(
        pd.Series(values, index=pd.DatetimeIndex(stamps), name=value_column), name
    )
    offset = common_utc_offset(table[time_column])
    if offset is not None:
        series.attrs["utc_offset"] = offset  # the hours are UTC; forecast_file writes them back
    return series, fixes


_OFFSET = re.compile(r"(Z|[+-]\d\d:?\d\d)$")


def common_utc_offset(cells: pd.Series) -> str | None:
    """The one UTC offset every timestamp carries ('+02:00'), or None (none, or mixed)."""
    found = cells.astype(str).str.strip().str.extract(_OFFSET, expand=False)
    if found.isna().any():
        return None
    offsets = set(found.str.replace(":", "", regex=False))
    if len(offsets) != 1:
        return None
    (offset,) = offsets
    return "+00:00" if offset == "Z" else f"{offset[:3]}:{offset[3:]}"


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
    span = (series.index[-1] - series.index[0]) / pd.Timedelta(hours=1)
    if span > MAX_HISTORY_HOURS:  # checked before resampling allocates one row per hour
        raise ScenarioError(
            f"{name}: timestamps span {span:,.0f} hours ({series.index[0]} to "
            f"{series.index[-1]}); at most {MAX_HISTORY_HOURS:,} hours of history can be "
            "read (a mistyped year?)"
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
            f"{name}: {gaps:,} of {len(hourly):,} hours have no value (largest gap "
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
# Outages and anomalies


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
    if not (isinstance(horizon, int | np.integer) and 1 <= horizon <= MAX_HORIZON_HOURS):
        raise ScenarioError(
            f"horizon must be a whole number of hours from 1 to {MAX_HORIZON_HOURS}, got {horizon}"
        )
    if not (isinstance(level, int | float) and math.isfinite(level) and 0 < level < 1):
        raise ScenarioError(f"level must be between 0 and 1, got {level}")
    z = float(norm.ppf(0.5 + level / 2))
    if not z > 1e-6:
        raise ScenarioError(f"level must be between 0 and 1, got {level} (too small to use)")
    if not isinstance(history.index, pd.DatetimeIndex):
        raise ScenarioError("history must be indexed by timestamps")
    if horizon < DAY:
        # Calibrated on at least a day of leads: a few refit errors per lead range alone would
        # give the interval of a handful of hours a band wider than the history.
        frame, rep = forecast_series(history, DAY, level, report=True)
        short = frame.iloc[:horizon].copy()
        short.attrs = dict(frame.attrs)
        return (short, rep) if report else short
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
    stamps = series.index[-len(values) :]
    end = series.index[-1]
    index = pd.date_range(end + pd.Timedelta(hours=1), periods=horizon, freq="h", name="timestamp")
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
    calibrated = _conformal_scale(errors, horizon, level) if len(origins) >= 2 else None
    if calibrated is not None:
        floor = _naive_floor(scored, repaired, period, horizon, level)
        calibrated = (np.maximum(calibrated[0], floor), calibrated[1])
    if calibrated is None:
        spread = max(float(np.std(repaired)), 1e-9) * 2.0
        half_width = np.full(horizon, z * spread)
        interval = "too little history for calibration refits: twice the history's spread"
    else:
        half_width, ranges = calibrated
        interval = (
            f"split-conformal {level:.0%} from refits at {len(origins)} earlier origins, "
            f"{ranges} lead ranges, outage hours left out"
        )
    floor = 1e-9 * max(1.0, float(np.max(np.abs(repaired))))
    std = np.maximum(half_width / z, floor)
    model = f"median of {', '.join(members)}" if len(members) > 1 else next(iter(members))
    notes = tuple(a.describe() for a in anomalies)
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
        warnings=notes,
    )
    frame = _forecast_frame(
        index,
        mean,
        std,
        level,
        {
            "model": model,
            "members": list(members),
            "backtest_mae": scores,
            "warnings": list(notes),
            "report": rep,
        },
    )
    return (frame, rep) if report else frame


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
