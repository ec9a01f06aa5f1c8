"""Files in and out, one module per format; `read` detects the format of its input and dispatches.

- `scenario_json`: the scenario JSON of SPEC section 3
- `csv_pair`: jobs.csv + demand.csv (with `jobrow`, the job-row codec the editor shares)
- `grid`: grid.csv, written by the exports and read back by `gpuplan check`
- `exports`: the four plan exports
- `text`, `cells`: bounded, decoded reads and CSV cells, shared by all

The scheduler-history imports of issue 14 (`slurm`, `openb`, `kubectl`, `helios`, `acme`, with
their shared `history` module) are registered with one `register_history(...)` line each.

A format is one `register(...)` line: a name, `sniff(name, head) -> bool` (does this file look like
mine? `head` is the first 4,096 characters), and a reader `reader(text, name, **options)`
(single-file formats) or `reader([(name, text), ...], **options)` (multi-file formats). Detection
tries single-file formats in registration order, then multi-file ones; the first whose `sniff`
accepts every input wins. Every reader returns a validated `Scenario` or raises `ScenarioError`.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..model import Scenario, ScenarioError
from . import csv_pair, scenario_json
from .cells import spreadsheet_safe, write_csv
from .csv_pair import DEMAND_COLUMNS, scenario_from_tables, scenario_to_tables
from .exports import (
    assignments_to_csv,
    export_name,
    json_safe,
    metrics_to_json,
    plan_exports,
    realtime_to_csv,
    summary_to_csv,
    write_exports,
)
from .grid import GRID_COLUMNS, grid_to_csv, plan_from_grid_csv, step_times
from .jobrow import JOBS_COLUMNS, JOBS_OPTIONAL_COLUMNS, NO_GPUS, job_from_row, job_to_row
from .scenario_json import (
    job_from_dict,
    job_to_dict,
    scenario_from_dict,
    scenario_from_json,
    scenario_to_dict,
    scenario_to_json,
)
from .text import (
    MAX_HISTORY_UPLOAD_BYTES,
    MAX_HISTORY_UPLOAD_MB,
    MAX_UPLOAD_BYTES,
    MAX_UPLOAD_MB,
    decode_upload,
    read_bytes,
    read_text,
)

HEAD_CHARS = 4096


@dataclass(frozen=True)
class Format:
    """One input format: how to recognise it and how to read it."""

    name: str
    sniff: Callable[[str, str], bool]
    reader: Callable[..., Scenario]
    files: int = 1  # inputs one scenario of this format takes (the CSV pair: 2)
    takes_base: bool = False  # the reader needs the host scenario (`base=`)
    max_bytes: int = MAX_UPLOAD_BYTES  # largest input file read for this format


FORMATS: dict[str, Format] = {}


def register(
    name: str,
    sniff: Callable[[str, str], bool],
    reader: Callable[..., Scenario],
    *,
    files: int = 1,
    takes_base: bool = False,
    max_bytes: int = MAX_UPLOAD_BYTES,
) -> Format:
    """Make a format known to `read`; returns its entry."""
    if name in FORMATS:
        raise ValueError(f"format {name!r} is registered twice")
    FORMATS[name] = Format(name, sniff, reader, files, takes_base, max_bytes)
    return FORMATS[name]


def read(
    path_or_paths: str | os.PathLike | Iterable[str | os.PathLike],
    format: str | None = None,
    *,
    base: Scenario | None = None,
    **options: Any,
) -> Scenario:
    """A validated Scenario from one file or several (the CSV pair in any order).

    `format` skips detection; `base` is the host scenario of formats that carry only part of
    one (the CSV pair); other options go to the format's reader. Each file is read at most
    `max_bytes + 1` bytes; a scheduler history is imported from its path, as `gpuplan import`
    reads it (its head first, for detection).
    """
    if isinstance(path_or_paths, str | os.PathLike):
        paths = [Path(path_or_paths)]
    else:
        paths = [Path(p) for p in path_or_paths]
    if not paths:
        raise ScenarioError("no input file given")
    if len(paths) == 1:
        fmt = _format(format) if format is not None else _detected(head_of(paths[0]))
        if fmt is not None and fmt.name in HISTORY_FORMATS:  # from its path, up to 2 GB
            from .history import import_history

            window, rules = options.get("window"), options.get("rules")
            return import_history(paths[0], fmt.name, window, rules).scenario
    limit = FORMATS[format].max_bytes if format in FORMATS else _largest_limit()
    sources = []
    for path in paths:
        data = read_bytes(path, limit)
        sources.append((path.name, decode_upload(data, path.name, limit)))
    return read_sources(sources, format, base=base, **options)


def read_sources(
    sources: list[tuple[str, str]],
    format: str | None = None,
    *,
    base: Scenario | None = None,
    **options: Any,
) -> Scenario:
    """As `read`, for texts already in memory (uploads): [(file name, text), ...]."""
    fmt = _format(format) if format is not None else detect(sources)
    for name, text in sources:
        if len(text) * 4 > fmt.max_bytes and len(text.encode("utf-8", "replace")) > fmt.max_bytes:
            decode_upload(b"\0" * (fmt.max_bytes + 1), name, fmt.max_bytes)
    kwargs = {**options, **({"base": base} if fmt.takes_base else {})}
    if fmt.files == 1:
        if len(sources) != 1:
            raise ScenarioError(
                f"{_names(sources)}: {fmt.name} is one file; give one scenario file, or "
                f"jobs.csv together with demand.csv"
            )
        name, text = sources[0]
        return fmt.reader(text, name, **kwargs)
    return fmt.reader(list(sources), **kwargs)


def detect(sources: list[tuple[str, str]]) -> Format:
    """The first registered format whose sniff accepts every source (single-file ones first)."""
    ordered = sorted(FORMATS.values(), key=lambda f: f.files > 1)
    for fmt in ordered:
        if all(_sniffs(fmt, name, text) for name, text in sources):
            if fmt.files == 1 and len(sources) > 1:
                raise ScenarioError(
                    f"{_names(sources)}: give one scenario .json file, or jobs.csv together "
                    f"with demand.csv"
                )
            return fmt
    known = ", ".join(f for f in FORMATS if f not in (scenario_json.FORMAT, csv_pair.FORMAT))
    raise ScenarioError(
        f"{_names(sources)}: not a format gpuplan reads: give a scenario .json, or jobs.csv "
        f"together with demand.csv{f' (or one of {known})' if known else ''}"
    )


def load_scenario(path: str | os.PathLike) -> Scenario:
    """One scenario file, its format detected (the JSON, or a registered import)."""
    return read(path)


def head_of(path: str | os.PathLike) -> tuple[str, str]:
    """(name, the first HEAD_CHARS characters) of a file, for detection; blank is an error."""
    path = Path(path)
    data = read_bytes(path, HEAD_CHARS * 4)[: HEAD_CHARS * 4]
    head = data.decode("utf-8-sig", errors="replace")[:HEAD_CHARS]
    if not head.strip():
        raise ScenarioError(f"{path.name}: file is empty")
    return path.name, head


def _detected(source: tuple[str, str]) -> Format | None:
    """`detect`, with None where no format knows the head (the whole read says why)."""
    try:
        return detect([source])
    except ScenarioError:
        return None


def _sniffs(fmt: Format, name: str, text: str) -> bool:
    try:
        return bool(fmt.sniff(name, text[:HEAD_CHARS]))
    except Exception:  # a sniffer that cannot tell is a "no", never a crash
        return False


def _format(name: str) -> Format:
    if name not in FORMATS:
        raise ScenarioError(f"format {name!r} is not one of {', '.join(FORMATS)}")
    return FORMATS[name]


def _largest_limit() -> int:
    return max((f.max_bytes for f in FORMATS.values()), default=MAX_UPLOAD_BYTES)


def _names(sources: list[tuple[str, str]]) -> str:
    return ", ".join(name for name, _ in sources)


HISTORY_FORMATS: list[str] = []  # the registered scheduler-history importers, by name


def register_history(fmt: str) -> Format:
    """Register a scheduler-history importer (issue 14: `core.formats.<fmt>` with `FORMAT`,
    `sniff` and `read_history`), imported on first use so plain scenario reads stay light.

    Its reader takes the import options `window` (an `ImportWindow`) and `rules` (`ImportRules`)
    and returns the imported scenario (`gpuplan import` keeps the as-run record too).
    """

    def module():
        return importlib.import_module(f"{__name__}.{fmt.replace('-', '_')}")

    def sniff(name: str, head: str) -> bool:
        return module().sniff(name, head)

    def reader(text: str, name: str, *, window=None, rules=None) -> Scenario:
        return module().read_history(text, window, rules, name=name).scenario

    HISTORY_FORMATS.append(fmt)
    return register(fmt, sniff, reader)


# Detection order: the history imports' sniffers are specific (a kubectl pod list is JSON too),
# so they go before the scenario JSON; the CSV pair (two files) is tried last.
register_history("slurm")
register_history("openb")
register_history("alibaba-serving")
register_history("kubectl")
register_history("helios")
register_history("acme")
register(scenario_json.FORMAT, scenario_json.sniff, scenario_json.read)
register(csv_pair.FORMAT, csv_pair.sniff, csv_pair.read, files=2, takes_base=True)

__all__ = [
    "DEMAND_COLUMNS",
    "FORMATS",
    "GRID_COLUMNS",
    "HISTORY_FORMATS",
    "JOBS_COLUMNS",
    "JOBS_OPTIONAL_COLUMNS",
    "MAX_HISTORY_UPLOAD_BYTES",
    "MAX_HISTORY_UPLOAD_MB",
    "MAX_UPLOAD_BYTES",
    "MAX_UPLOAD_MB",
    "NO_GPUS",
    "Format",
    "assignments_to_csv",
    "decode_upload",
    "detect",
    "export_name",
    "grid_to_csv",
    "head_of",
    "job_from_dict",
    "job_from_row",
    "job_to_dict",
    "job_to_row",
    "json_safe",
    "load_scenario",
    "metrics_to_json",
    "plan_exports",
    "plan_from_grid_csv",
    "read",
    "read_sources",
    "read_text",
    "realtime_to_csv",
    "register",
    "register_history",
    "scenario_from_dict",
    "scenario_from_json",
    "scenario_from_tables",
    "scenario_to_dict",
    "scenario_to_json",
    "scenario_to_tables",
    "spreadsheet_safe",
    "step_times",
    "summary_to_csv",
    "write_csv",
    "write_exports",
]
