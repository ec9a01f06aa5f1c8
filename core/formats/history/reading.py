"""Reading helpers shared by the format modules: sources, delimited tables, numbers, times."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from ...model import MAX_NUMBER, ScenarioError
from ..text import os_errors
from .table import MAX_HISTORY_BYTES, SNIFF_BYTES


def as_text(source: str | bytes | Path) -> str:
    """The text of a history given directly (an upload's bytes are decoded as UTF-8)."""
    if isinstance(source, bytes):
        try:
            return source.decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise ScenarioError(f"is not UTF-8 text (byte {e.start} cannot be read)") from None
    return str(source)


def is_path(source: str | bytes | Path) -> bool:
    return isinstance(source, Path) or (
        isinstance(source, str) and "\n" not in source and len(source) < 4096
    )


def read_source(
    source: str | bytes | Path, name: str | None = None
) -> tuple[str, Path | None, str]:
    """(display name, path or None, head text) of a path, or of the text (or bytes) itself."""
    if is_path(source):
        path = Path(source)
        with os_errors(path):
            size = path.stat().st_size
            if size > MAX_HISTORY_BYTES:
                raise ScenarioError(
                    f"{path.name}: file is {size / 1e9:.1f} GB, larger than the import limit of "
                    f"{MAX_HISTORY_BYTES / 1e9:.1f} GB"
                )
            if size == 0:
                raise ScenarioError(f"{path.name}: file is empty")
            with path.open("rb") as f:
                head = f.read(SNIFF_BYTES).decode("utf-8-sig", errors="replace")
        return name or path.name, path, head
    try:
        text = as_text(source)
    except ScenarioError as e:
        raise e.with_prefix(name or "history") from None
    if not text.strip():
        raise ScenarioError(f"{name or 'history'}: file is empty")
    return name or "history", None, text[:SNIFF_BYTES]


def read_delimited(
    source: str | bytes | Path,
    name: str | None,
    sep: str = ",",
    keep: Callable[[str], bool] | None = None,
) -> tuple[pd.DataFrame, str]:
    """All cells as strings ("" where empty), with the header stripped; (frame, display name).

    pyarrow's multithreaded reader does the parsing (a 250 MB export in seconds); a file it
    rejects is read again by pandas only to name the row that breaks it.
    """
    import io

    import pyarrow as pa
    import pyarrow.csv as pacsv

    shown, path, head = read_source(source, name)
    columns = [c for c in header_of(head, sep)]
    raw = path if path is not None else io.BytesIO(as_text(source).encode("utf-8"))
    try:
        table = pacsv.read_csv(
            raw,
            read_options=pacsv.ReadOptions(encoding="utf8"),
            parse_options=pacsv.ParseOptions(delimiter=sep),
            convert_options=pacsv.ConvertOptions(
                column_types={c: pa.string() for c in columns},
                strings_can_be_null=False,
                include_columns=[c for c in columns if c and keep(c)] if keep else None,
            ),
        )
    except pa.ArrowInvalid as e:
        raise ScenarioError(f"{shown}: {_where_broken(source, path, sep, str(e))}") from None
    frame = table.to_pandas()
    frame.columns = [str(c).strip().lstrip("\ufeff") for c in frame.columns]
    # `sacct -p` ends every line with the separator: an empty, unnamed last column
    frame = frame.loc[:, [c for c in frame.columns if c]]
    return frame, shown


def _where_broken(source: str | bytes | Path, path: Path | None, sep: str, message: str) -> str:
    """The first row whose cell count differs from the header's (only on this error path is
    the file walked row by row)."""
    import csv
    import io

    try:
        handle = (
            path.open(encoding="utf-8-sig", newline="")
            if path is not None
            else io.StringIO(as_text(source), newline="")
        )
        with handle:
            reader = csv.reader(handle, delimiter=sep)
            width = len(next(reader, []))
            for cells in reader:
                if cells and len(cells) != width:
                    return f"row {reader.line_num}: has {len(cells)} cells, the header has {width}"
    except UnicodeDecodeError as e:
        return f"is not UTF-8 text (byte {e.start} of a line cannot be read)"
    except (csv.Error, OSError):
        pass
    if "utf8" in message.lower():
        return "is not UTF-8 text"
    return f"cannot be read as a table ({message.removeprefix('CSV parse error: ')})"


def header_of(head: str, sep: str = ",") -> list[str]:
    first = head.lstrip("\ufeff").splitlines()[0] if head.strip() else ""
    return [c.strip().strip('"') for c in first.split(sep)]


def require_columns(frame: pd.DataFrame, name: str, groups: list[tuple[str, ...]]) -> None:
    """Each group is one required column, or alternatives of which one must be present."""
    for group in groups:
        if not any(c in frame.columns for c in group):
            what = group[0] if len(group) == 1 else " or ".join(group)
            raise ScenarioError(
                f"{name}: missing column {what} (the header has {', '.join(frame.columns)})"
            )


def first_bad(mask: np.ndarray) -> int | None:
    hits = np.flatnonzero(mask)
    return int(hits[0]) if len(hits) else None


def parse_numbers(
    values: pd.Series,
    name: str,
    field_name: str,
    rows: np.ndarray,
    *,
    missing: tuple[str, ...] = ("",),
    minimum: float | None = 0.0,
    maximum: float = MAX_NUMBER,
) -> np.ndarray:
    """Floats (NaN for the missing tokens); anything else unreadable, below `minimum` or above
    `maximum` in size (every number a file gives is at most 1e15) raises, naming the row."""
    text = values.astype("str").str.strip()
    absent = text.isin(missing).to_numpy()
    numbers = _to_floats(text.where(~absent, "nan"))
    bad = first_bad(~absent & ~np.isfinite(numbers))
    if bad is not None:
        raise ScenarioError(
            f"{name}: row {rows[bad]}: {field_name} must be a number, got {text.iloc[bad]!r}"
        )
    bad = first_bad(~absent & (np.abs(numbers) > maximum))
    if bad is not None:
        limit = "1e15" if maximum == MAX_NUMBER else f"{maximum:,.0f}"
        raise ScenarioError(
            f"{name}: row {rows[bad]}: {field_name} {text.iloc[bad]} is more than {limit} in size"
        )
    if minimum is not None:
        bad = first_bad(~absent & (numbers < minimum))
        if bad is not None:
            raise ScenarioError(
                f"{name}: row {rows[bad]}: {field_name} must be >= {minimum:g}, "
                f"got {text.iloc[bad]!r}"
            )
    return numbers


def _to_floats(text: pd.Series) -> np.ndarray:
    """pyarrow's cast where every cell is a number; pandas (NaN for the rest) where not."""
    import pyarrow as pa

    try:
        return pa.array(text).cast(pa.float64()).to_numpy(zero_copy_only=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return pd.to_numeric(text, errors="coerce").to_numpy(dtype=float)


_FAST_TIME_FORMATS = ("%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S")


def parse_times(
    values: pd.Series,
    name: str,
    field_name: str,
    rows: np.ndarray,
    *,
    missing: tuple[str, ...] = ("", "Unknown", "None", "N/A"),
) -> np.ndarray:
    """Epoch seconds (NaN for the missing tokens); an unreadable time raises naming its row.

    Naive times are read as they stand; times with an offset are converted to UTC. The common
    layouts go through pyarrow's strptime; only what it cannot read goes to pandas.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    text = values.astype("str").str.strip()
    absent = text.isin(missing).to_numpy()
    seconds = np.full(len(text), np.nan)
    todo = ~absent
    arrow = pa.array(text)
    for fmt in _FAST_TIME_FORMATS:
        if not todo.any():
            break
        parsed = pc.strptime(arrow, format=fmt, unit="s", error_is_null=True)
        got = parsed.is_valid().to_numpy(zero_copy_only=False) & todo
        stamps = parsed.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)
        seconds[got] = stamps[got].astype(float)
        todo &= ~got
    if todo.any():
        rest = text[todo]
        try:
            parsed = pd.to_datetime(rest, format="ISO8601", errors="coerce", utc=True)
        except (ValueError, TypeError):
            parsed = pd.to_datetime(rest, format="mixed", errors="coerce", utc=True)
        seconds[todo] = epoch_seconds(parsed.dt.tz_localize(None))
    bad = first_bad(~absent & np.isnan(seconds))
    if bad is not None:
        raise ScenarioError(
            f"{name}: row {rows[bad]}: {field_name} is not a time, got {text.iloc[bad]!r}"
        )
    return seconds


def epoch_seconds(times: pd.Series) -> np.ndarray:
    ns = times.astype("datetime64[ns]").to_numpy().astype("int64").astype(float)
    ns[times.isna().to_numpy()] = np.nan
    return ns / 1e9


def by_unique(values: pd.Series, function) -> np.ndarray:
    """`function` applied to each distinct value once, mapped back to every row (traces repeat
    partitions, QOS, states and TRES strings endlessly; distinct values are few)."""
    codes, uniques = pd.factorize(values, use_na_sentinel=False)
    mapped = np.asarray(function(pd.Series(uniques, dtype="str")))
    return mapped[codes]


def normalise_state(values: pd.Series) -> np.ndarray:
    """`CANCELLED by 1234` -> `CANCELLED`; upper case."""
    return by_unique(
        values,
        lambda u: u.str.strip().str.split(" ", n=1).str[0].str.upper().fillna("").to_numpy(object),
    )


def check_order(table: pd.DataFrame, name: str, start_field: str, end_field: str) -> None:
    """An end before its start is a broken row, not a quirk (a start before the submit is kept:
    schedulers record that on requeue)."""
    start, end = table["start"].to_numpy(), table["end"].to_numpy()
    bad = first_bad(end < start - 1e-6)
    if bad is not None:
        raise ScenarioError(
            f"{name}: row {table['row'].iat[bad]}: {end_field} is before {start_field}"
        )
