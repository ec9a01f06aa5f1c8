"""Detection, the one entry point the CLI uses until the formats dispatcher lands, and the
`read_history` every format module builds from its `read_table`."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from ...model import ScenarioError
from .mapping import import_table
from .options import ImportRules, ImportWindow
from .reading import read_source
from .table import HISTORY_FORMATS, ImportResult, TraceInfo


def format_module(fmt: str):
    if fmt not in HISTORY_FORMATS:
        raise ScenarioError(f"unknown history format {fmt!r}; choose one of {HISTORY_FORMATS}")
    return importlib.import_module(f"core.formats.{module_name(fmt)}")


def module_name(fmt: str) -> str:
    """The module of a history format (`alibaba-serving` is `core.formats.alibaba_serving`)."""
    return fmt.replace("-", "_")


def detect_format(name: str, head: str) -> str | None:
    for fmt in HISTORY_FORMATS:
        if format_module(fmt).sniff(name, head):
            return fmt
    return None


def import_history(
    source: str | bytes | Path,
    format: str = "auto",
    window: ImportWindow | None = None,
    rules: ImportRules | None = None,
    *,
    name: str | None = None,
    nodes: str | bytes | Path | None = None,
) -> ImportResult:
    """Detect (or take) the format and import `source` (a path, or the text itself); `nodes`
    an openb node list, the cluster's node groups (SPEC section 8)."""
    shown, _, head = read_source(source, name)
    fmt = format
    if fmt in (None, "auto"):
        fmt = detect_format(shown, head)
        if fmt is None:
            raise ScenarioError(
                f"{shown}: not a recognised history (sacct -P, openb pod list, Alibaba 2025 "
                "serving trace, kubectl get pods -o json, Helios cluster_log.csv, Acme trace); "
                "give --format"
            )
    if nodes is None:
        return format_module(fmt).read_history(source, window, rules, name=name)
    if fmt != "openb":
        raise ScenarioError(
            f"{shown}: --nodes (an openb node list) applies to openb pod lists, not {fmt}"
        )
    return format_module(fmt).read_history(source, window, rules, name=name, nodes=nodes)


def history_reader(read_table: Callable[..., tuple[pd.DataFrame, TraceInfo]]) -> Callable[..., Any]:
    """A format module's `read_history`: its `read_table`, then `import_table` for the window.

    Extra keyword options (openb's `nodes`) go to `read_table`.
    """

    def read_history(
        source: str | bytes | Path,
        window: ImportWindow | None = None,
        rules: ImportRules | None = None,
        *,
        name: str | None = None,
        **options: Any,
    ) -> ImportResult:
        table, info = read_table(source, name, **options)
        return import_table(table, info, window, rules)

    return read_history
