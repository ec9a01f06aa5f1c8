"""Reading an hourly history for the forecast: a CSV of timestamps and values -> an hourly series
(gaps kept as NaN) and warnings about what was fixed; what cannot be repaired raises naming the
file, row and column."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from ..formats import decode_upload, read_text
from ..model import MAX_DEMAND, ScenarioError, clipped

DAY = 24
WEEK = 168
MIN_HISTORY_HOURS = 24  # fewer hourly values than this cannot be forecast at all
WEEKLY_MODEL_HOURS = 2 * WEEK  # below two weeks only daily-period models are tried
MAX_HISTORY_HOURS = 200_000  # about 23 years of hours: a longer span is a typo, not a history


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
