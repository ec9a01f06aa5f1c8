"""CSV tables and their cells: numbers, and text that is safe in a spreadsheet.

Shared by the CSV pair, the grid import, the exports and the editor, so a cell means the same
in each.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Mapping
from typing import Any

from ..model import ScenarioError

_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
# Longest number text read from a cell: far beyond any real value, short enough that int()
# never meets Python's digit limit.
_MAX_NUMBER_CHARS = 64


def spreadsheet_safe(value: Any) -> Any:
    """Numbers stay numbers; text that a spreadsheet would run as a formula gets a leading '."""
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS):
        return "'" + value
    return value


def unneutralise(text: str) -> str:
    """The cell text without the ' that `spreadsheet_safe` put in front of a formula start."""
    if text.startswith("'") and text[1:2] and text[1:].startswith(_FORMULA_STARTS):
        return text[1:]
    return text


def text_cell(text: str) -> str:
    """A text cell as read: surrounding spaces dropped (spreadsheets pad cells), quote undone."""
    return unneutralise(text.strip()).strip()


def number_cell(owner: str, field: str, text: str, required: bool = True) -> Any:
    """An int when the text is a whole number, else a finite float; None when blank."""
    text = unneutralise(text.strip())
    if not text:
        if required:
            raise ScenarioError(f"{owner}: {field} is empty")
        return None
    if len(text) > _MAX_NUMBER_CHARS:
        raise ScenarioError(
            f"{owner}: {field} {text[:20]!r}... is longer than {_MAX_NUMBER_CHARS} characters; "
            f"no number of a scenario is that long"
        )
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        raise ScenarioError(f"{owner}: {field} must be a number, got {text!r}") from None
    if not math.isfinite(value):
        raise ScenarioError(f"{owner}: {field} must be a finite number, got {text!r}")
    return value


def plain_number(value: float) -> int | float:
    """Whole floats as ints, so JSON and CSV read naturally (5, not 5.0)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def read_csv(
    text: str, name: str, required: Iterable[str], optional: Iterable[str]
) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    """(header, [(line number, row dict)]) with missing and unknown columns reported."""
    reader = csv.reader(io.StringIO(text))
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        raise ScenarioError(f"{name}: file is empty") from None
    except csv.Error as e:
        raise ScenarioError(f"{name}: row 1: cannot be read as CSV ({e})") from None
    required, optional = tuple(required), tuple(optional)
    missing = [c for c in required if c not in header]
    if missing:
        raise ScenarioError(
            f"{name}: missing column{'s' if len(missing) > 1 else ''} "
            f"{', '.join(missing)} (the header must have {', '.join(required)})"
        )
    unknown = [c for c in header if c not in required and c not in optional]
    if unknown:
        raise ScenarioError(
            f"{name}: unknown column{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(repr(c) for c in unknown)}"
        )
    if len(set(header)) != len(header):
        raise ScenarioError(f"{name}: a column appears twice in the header")
    rows = []
    try:
        for line, cells in enumerate(reader, start=2):
            if not any(c.strip() for c in cells):
                continue
            if len(cells) != len(header):
                raise ScenarioError(
                    f"{name}: row {line}: has {len(cells)} cells, the header has {len(header)}"
                )
            rows.append((line, dict(zip(header, cells, strict=True))))
    except csv.Error as e:
        raise ScenarioError(f"{name}: row {reader.line_num}: cannot be read as CSV ({e})") from None
    return header, rows


def csv_header(text: str) -> list[str]:
    """The first row's column names (stripped); [] when the text has no readable first row."""
    try:
        return [h.strip() for h in next(csv.reader(io.StringIO(text.lstrip("\ufeff"))))]
    except (StopIteration, csv.Error):
        return []


def write_csv(rows: Iterable[Mapping[str, Any]], columns: Iterable[str]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: spreadsheet_safe(v) for k, v in row.items()})
    return out.getvalue()
