"""INPUT...: what a command plans (a scenario JSON, the CSV pair, or a scheduler history with
its window), read once, with standard input and pipes spooled to a file first."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..model import IMPORT_STEP_MINUTES, MAX_STEPS, ScenarioError
from .arguments import positive_float, positive_int

# The arguments that name files to read ("-" is standard input), and whether each may be a
# scheduler history (read up to the import's 2 GB; the others up to the 20 MB of an upload).
_INPUT_ARGUMENTS = {
    "scenario": True,
    "file": True,
    "history_csv": False,
    "grid_csv": False,
    "rules": False,
}


_SPOOL_CHUNK = 1 << 20


@contextlib.contextmanager
def spooled_inputs(args: argparse.Namespace) -> Any:
    """Inputs that can be read only once (standard input as "-", a pipe, a process substitution
    such as <(sacct ...)) copied to a temporary regular file first, under the same name: the
    readers look at a file's head to detect its format and then read it whole."""
    import tempfile

    given = {name: _paths(getattr(args, name, None)) for name in _INPUT_ARGUMENTS}
    if sum(paths.count("-") for paths in given.values()) > 1:
        raise ScenarioError(
            "standard input ('-') is given for more than one input; it can be read once"
        )
    with tempfile.TemporaryDirectory(prefix="gpuplan-") as folder:
        for name, paths in given.items():
            if any(_read_once(p) for p in paths):
                history = _INPUT_ARGUMENTS[name]
                spooled = [
                    _spool(p, Path(folder) / f"{name}{k}", history) if _read_once(p) else p
                    for k, p in enumerate(paths)
                ]
                single = not isinstance(getattr(args, name), list)
                setattr(args, name, spooled[0] if single else spooled)
        yield


def _paths(value: Any) -> list[str]:
    """An input argument's file names (none, one, or INPUT's list)."""
    if isinstance(value, list):
        return value
    return [value] if isinstance(value, str) else []


def _spool(path: str, folder: Path, history: bool) -> str:
    """A copy of a read-once input in `folder`, under its name ("stdin" for "-"). The copy stops
    one byte past the largest file of its kind, so the readers refuse it by its size: a
    scheduler history (known by its head) 2 GB, any other input 20 MB."""
    from ..formats import HISTORY_FORMATS, MAX_UPLOAD_BYTES, detect
    from ..formats.history import MAX_HISTORY_BYTES
    from ..formats.text import os_errors

    folder.mkdir()
    copy = folder / ("stdin" if path == "-" else Path(path).name)
    with contextlib.ExitStack() as stack:
        if path == "-":
            source = sys.stdin.buffer
        else:
            with os_errors(Path(path)):
                source = stack.enter_context(Path(path).open("rb"))
        with copy.open("wb") as sink:
            chunk = source.read(_SPOOL_CHUNK)
            limit = MAX_UPLOAD_BYTES
            if history:
                head = (copy.name, chunk[:16384].decode("utf-8-sig", errors="replace"))
                with contextlib.suppress(ScenarioError):
                    limit = MAX_HISTORY_BYTES if detect([head]).name in HISTORY_FORMATS else limit
            left = limit + 1
            while chunk:
                sink.write(chunk[:left])
                left -= len(chunk)
                chunk = source.read(min(left, _SPOOL_CHUNK)) if left > 0 else b""
    return str(copy)


def _read_once(path: str) -> bool:
    """Whether `path` is standard input or a file that is not a regular one (a pipe, a device)."""
    import stat

    if path == "-":
        return True
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False  # (the reader names what is wrong with it)
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def input_arguments(
    command: argparse.ArgumentParser, window_days: bool = True, cluster: bool = True
) -> None:
    """INPUT...: a scenario JSON, the CSV pair, or a scheduler history with its window. Without
    `cluster` the command's own --gpus (sweep's list of sizes) stands in for the window's."""
    command.add_argument(
        "scenario",
        nargs="+",
        metavar="INPUT",
        help="a scenario .json; jobs.csv and demand.csv (the pair); or a scheduler history "
        "(Slurm sacct, openb or kubectl pods, Helios or Acme log) with the window options",
    )
    window = command.add_argument_group("window of a history, cluster of a CSV pair")
    window.add_argument(
        "--input-format",
        choices=("auto", "slurm", "openb", "alibaba-serving", "kubectl", "helios", "acme"),
        default="auto",
        help="the history's format (default: detected)",
    )
    window.add_argument(
        "--start",
        metavar="T",
        help="window start: ISO time, or hours from "
        "the trace start for relative traces (the CSV pair: the cluster start)",
    )
    if window_days:
        window.add_argument(
            "--window-days",
            type=positive_float,
            metavar="D",
            help="days the window covers (default 1)",
        )
    window.add_argument(
        "--step-minutes",
        type=positive_int,
        metavar="M",
        help="step length (default: a history 15, the CSV pair 60)",
    )
    if cluster:
        window.add_argument(
            "--gpus",
            dest="cluster_gpus",
            type=positive_int,
            metavar="G",
            help="cluster size (history default: its peak in use, rounded up to "
            "a power of two; needed for a CSV pair)",
        )
    window.add_argument("--rules", metavar="R.json", help="a history's type/priority rules")
    cluster_argument(command)


def cluster_argument(command: argparse.ArgumentParser) -> None:
    """--cluster FILE.json (SPEC section 8): a cluster object replacing the input's cluster."""
    command.add_argument(
        "--cluster",
        dest="cluster_file",
        metavar="FILE.json",
        help="a cluster object (GPUs, or gpu_types and nodes) that replaces the input's "
        "cluster; its step and horizon where it gives them",
    )


def cluster_of(args: argparse.Namespace) -> Any:
    """--cluster's cluster for a history's import (None without the flag)."""
    path = getattr(args, "cluster_file", None)
    if path is None:
        return None
    from ..formats.cluster_file import nodes_of_file

    return nodes_of_file(Path(path))


def on_cluster_file(args: argparse.Namespace, scenario: Any) -> Any:
    """The scenario on --cluster's cluster, when one is given."""
    path = getattr(args, "cluster_file", None)
    if path is None:
        return scenario
    from ..formats.cluster_file import read_cluster_file, with_cluster

    return with_cluster(scenario, read_cluster_file(Path(path)), Path(path).name)


def read_input(args: argparse.Namespace, pair_gpus: int | None = None) -> Any:
    """The command's INPUT as a Scenario: scenario JSON, the CSV pair or a history window.
    `pair_gpus`: the CSV pair's cluster where the command has no window --gpus (sweep)."""
    return read_input_with_history(args, pair_gpus)[0]


def read_input_with_history(
    args: argparse.Namespace, pair_gpus: int | None = None
) -> tuple[Any, Any]:
    """`read_input`, and the ImportResult of a scheduler history (its as-run metrics; None for
    a scenario or the CSV pair), on --cluster's cluster where one is given."""
    scenario, imported = _read_input_with_history(args, pair_gpus)
    if imported is not None:  # (a history was imported on --cluster's nodes already)
        return scenario, imported
    return on_cluster_file(args, scenario), imported


def _read_input_with_history(
    args: argparse.Namespace, pair_gpus: int | None = None
) -> tuple[Any, Any]:
    from ..formats import HISTORY_FORMATS, detect, head_of, read

    paths = [Path(p) for p in args.scenario]
    gpus = getattr(args, "cluster_gpus", None)
    if len(paths) == 2 and all(_tabular(p) for p in paths):
        return read(paths, base=_pair_host(args, paths, gpus or pair_gpus)), None
    if len(paths) >= 2:  # (two JSON files are not a pair: say what is)
        raise ScenarioError(
            f"{', '.join(p.name for p in paths)}: give one scenario or history file, or "
            f"jobs.csv together with demand.csv"
        )
    auto = args.input_format == "auto"
    fmt = detect([head_of(paths[0])]).name if auto else args.input_format
    if fmt not in HISTORY_FORMATS:
        # a scenario carries its own cluster and horizon: options for a window are not silently
        # dropped
        given = [
            flag
            for flag, value in (
                ("--start", args.start),
                ("--window-days", getattr(args, "window_days", None)),
                ("--step-minutes", args.step_minutes),
                ("--gpus", gpus),
                ("--rules", args.rules),
            )
            if value is not None
        ]
        if given:
            verb = "applies" if len(given) == 1 else "apply"
            raise ScenarioError(
                f"{paths[0].name}: {', '.join(given)} {verb} to a scheduler history or the CSV "
                "pair; a scenario carries its own cluster and horizon (change them on the "
                "Workload page, or with gpuplan sweep --gpus)"
            )
        scenario = read(paths[0], fmt)
        return scenario, as_run_beside(paths[0], scenario)
    from ..formats.history import ImportRules, ImportWindow, import_history

    days = getattr(args, "window_days", None) or getattr(args, "days", 1.0)
    start: Any = args.start
    if start is not None:
        with contextlib.suppress(ValueError):
            start = float(start)  # hours from the trace start, for relative traces
    window = ImportWindow(
        start=start,
        days=days,
        step_minutes=args.step_minutes or IMPORT_STEP_MINUTES,
        gpus=gpus,
        cluster=cluster_of(args),
    )
    rules = ImportRules.load(args.rules) if args.rules else ImportRules()
    say_reading(paths[0], getattr(args, "no_progress", False))
    imported = import_history(paths[0], fmt, window, rules)  # (as formats.read reads it)
    return imported.scenario, imported


@dataclass(frozen=True)
class AsRunBeside:
    """The as-run record `gpuplan import` wrote beside a scenario file (what `size` holds batch
    completion at when only coverage is asked for)."""

    as_run: dict[str, Any]
    path: Path


def as_run_beside(path: Path, scenario: Any) -> AsRunBeside | None:
    """The as-run of this scenario file: `as_run.json` beside it naming it, or
    `<stem>.as_run.json`; None where there is none, it is unreadable, or it no longer fits the
    scenario (its batch jobs were edited since the import)."""
    import json

    for candidate in (path.with_name("as_run.json"), path.with_name(f"{path.stem}.as_run.json")):
        try:
            record = json.loads(candidate.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(record, dict) or record.get("scenario") != path.name:
            continue
        if record.get("batch_jobs") != len(scenario.batch_jobs):
            return None
        return AsRunBeside(record, candidate)
    return None


def _tabular(path: Path) -> bool:
    """Whether an input may be half of the CSV pair: named .csv, or (standard input, a pipe,
    any other name) a head that is not JSON; the pair's reader checks its columns."""
    from ..formats import head_of

    if path.suffix.lower() == ".csv":
        return True
    return not head_of(path)[1].lstrip().startswith(("{", "["))


def _pair_host(args: argparse.Namespace, paths: list[Path], gpus: int | None) -> Any:
    """The cluster a CSV pair is planned on: --gpus, --step-minutes, --start, and the horizon
    its demand.csv covers (the pair itself carries only jobs and demand)."""
    import csv as csv_module
    import io
    from datetime import datetime

    from ..formats import read_text
    from ..model import Cluster, Scenario

    names = " + ".join(p.name for p in paths)
    if gpus is None:
        raise ScenarioError(
            f"{names}: the CSV pair carries no cluster: give --gpus G (and --step-minutes, "
            f"--start when the steps are not 60 minutes from no particular time)"
        )
    steps = 0
    for path in paths:
        rows = csv_module.DictReader(io.StringIO(read_text(path)))
        if rows.fieldnames and "step" in rows.fieldnames and "job_id" in rows.fieldnames:
            for row in rows:
                try:
                    step = float(row["step"])
                except (TypeError, ValueError):
                    continue  # the pair's own reader names the row
                if 0 <= step < MAX_STEPS:  # (and a step past the horizon, inf or nan)
                    steps = max(steps, int(step) + 1)
    start = None
    if args.start is not None:
        try:
            start = datetime.fromisoformat(args.start)
        except ValueError:
            raise ScenarioError(f"--start {args.start!r} is not an ISO time") from None
    horizon = steps or 24
    stem = paths[0].stem.removesuffix("jobs").removesuffix("demand").strip("_-. ") or "pair"
    return Scenario(stem, Cluster(gpus, args.step_minutes or 60, horizon, start), ())


_LARGE_HISTORY_BYTES = 20 * 10**6  # reading a history says so on stderr past this


def _size(path: Path) -> int:
    """A file's size in bytes (0 where it has none to tell; the reader says what is wrong)."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


def say_reading(path: Path, quiet: bool, label: str = "") -> bool:
    """Past 20 MB, "reading sacct.txt (257 MB) ..." on stderr (a large history takes seconds;
    a small one's errors stay one line); whether it was said."""
    size = _size(path)
    if quiet or size <= _LARGE_HISTORY_BYTES:
        return False
    print(f"{label}reading {path.name} ({size / 1e6:,.0f} MB) ...", file=sys.stderr, flush=True)
    return True
