"""The `gpuplan` command line (also `python -m core`): SPEC section 4.

Bad input exits 2 with one line `error: ...` on stderr and no traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .model import MAX_STEPS, ScenarioError
from .planners import BASELINE, FAST, PLANNER_NAMES, PLANNERS, default_planners, planner_options

EXIT_OK, EXIT_ILLEGAL, EXIT_BAD_INPUT = 0, 1, 2


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        with _spooled_inputs(args):
            return args.run(args)
    except ScenarioError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # stdout closed early (`| head`): quiet, as other tools are
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE
    except OSError as e:  # writing an output the checks at parse time could not foresee
        where = f"{e.filename}: " if e.filename else ""
        print(f"error: {where}cannot write ({e.strerror or e})", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130


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
def _spooled_inputs(args: argparse.Namespace) -> Any:
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
    from .formats import HISTORY_FORMATS, MAX_UPLOAD_BYTES, detect
    from .formats.history import MAX_HISTORY_BYTES
    from .formats.text import os_errors

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


class _Parser(argparse.ArgumentParser):
    """argparse with bad arguments as one `error:` line (exit 2), not a usage block."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_BAD_INPUT, f"error: {self.prog}: {message} (see {self.prog} --help)\n")


def _input_arguments(
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
        choices=("auto", "slurm", "openb", "kubectl", "helios", "acme"),
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
            type=_positive_float,
            metavar="D",
            help="days the window covers (default 1)",
        )
    window.add_argument(
        "--step-minutes",
        type=_positive_int,
        metavar="M",
        help="step length (default 60)",
    )
    if cluster:
        window.add_argument(
            "--gpus",
            dest="cluster_gpus",
            type=_positive_int,
            metavar="G",
            help="cluster size (history default: its peak in use, rounded up to "
            "a power of two; needed for a CSV pair)",
        )
    window.add_argument("--rules", metavar="R.json", help="a history's type/priority rules")


def _read_input(args: argparse.Namespace, pair_gpus: int | None = None) -> Any:
    """The command's INPUT as a Scenario: scenario JSON, the CSV pair or a history window.
    `pair_gpus`: the CSV pair's cluster where the command has no window --gpus (sweep)."""
    from .formats import HISTORY_FORMATS, detect, head_of, read

    paths = [Path(p) for p in args.scenario]
    gpus = getattr(args, "cluster_gpus", None)
    if len(paths) == 2 and all(_tabular(p) for p in paths):
        return read(paths, base=_pair_host(args, paths, gpus or pair_gpus))
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
        return read(paths[0], fmt)
    from .formats.history import ImportRules, ImportWindow

    days = getattr(args, "window_days", None) or getattr(args, "days", 1.0)
    start: Any = args.start
    if start is not None:
        with contextlib.suppress(ValueError):
            start = float(start)  # hours from the trace start, for relative traces
    window = ImportWindow(start=start, days=days, step_minutes=args.step_minutes or 60, gpus=gpus)
    rules = ImportRules.load(args.rules) if args.rules else ImportRules()
    _say_reading(paths[0], getattr(args, "no_progress", False))
    return read(paths[0], fmt, window=window, rules=rules)


def _tabular(path: Path) -> bool:
    """Whether an input may be half of the CSV pair: named .csv, or (standard input, a pipe,
    any other name) a head that is not JSON; the pair's reader checks its columns."""
    from .formats import head_of

    if path.suffix.lower() == ".csv":
        return True
    return not head_of(path)[1].lstrip().startswith(("{", "["))


def _pair_host(args: argparse.Namespace, paths: list[Path], gpus: int | None) -> Any:
    """The cluster a CSV pair is planned on: --gpus, --step-minutes, --start, and the horizon
    its demand.csv covers (the pair itself carries only jobs and demand)."""
    import csv as csv_module
    import io
    from datetime import datetime

    from .formats import read_text
    from .model import Cluster, Scenario

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


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="gpuplan",
        description="Plan who runs where on a GPU cluster (see the README for the model).",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    plan = sub.add_parser("plan", help="plan a scenario and print its metrics (JSON or a table)")
    _input_arguments(plan)
    plan.add_argument(
        "--planner",
        type=_planner_list,
        default=[FAST],
        metavar="P[,P...]",
        help=f"one planner or several, comma separated: {', '.join(PLANNER_NAMES)} "
        f"(default {FAST})",
    )
    plan.add_argument(
        "--format",
        choices=("json", "table"),
        default="json",
        help="json (default): metrics.json's content (an object per planner when several); "
        "table: one line per planner for people",
    )
    plan.add_argument(
        "--no-progress",
        action="store_true",
        help=f"do not report the {_searching_names()} planners' progress on stderr",
    )
    plan.add_argument(
        "--time-limit",
        type=_positive_float,
        default=10.0,
        metavar="S",
        help=f"seconds for the {_searching_names()} planners (default 10)",
    )
    plan.add_argument(
        "--gap",
        type=_non_negative_float,
        default=1e-4,
        help=f"relative MIP gap at which the {_exact_names()} planner stops (default 1e-4)",
    )
    plan.add_argument(
        "--out",
        type=_out_folder,
        metavar="DIR",
        help="write grid.csv, assignments.csv, realtime.csv and metrics.json (one folder per "
        "planner under DIR when several)",
    )
    plan.set_defaults(run=_run_plan)

    check = sub.add_parser("check", help="check a grid CSV against a scenario's constraints")
    _input_arguments(check, window_days=True)
    check.add_argument("grid_csv", help="the grid to check (grid.csv: step,gpu,job_id)")
    check.set_defaults(run=_run_check)

    bench = sub.add_parser("bench", help="run the benchmark scenarios through the planners")
    bench.add_argument("--planners", nargs="+", choices=PLANNER_NAMES, default=default_planners())
    bench.add_argument(
        "--scenarios",
        nargs="+",
        metavar="FILE",
        help="scenario files (default: data/scenarios/*.json benchmarks)",
    )
    bench.add_argument(
        "--repeat",
        type=_positive_int,
        default=20,
        help="runs per planner for the median runtime (default 20; full: 1)",
    )
    bench.add_argument("--time-limit", type=_positive_float, default=10.0, metavar="S")
    bench.add_argument("--json", action="store_true", help="print rows as JSON")
    bench.add_argument(
        "--large",
        action="store_true",
        help="also time the generated 1,024-GPU, 500-job, 48-step case",
    )
    bench.add_argument(
        "--generated",
        nargs=3,
        type=_positive_int,
        action="append",
        metavar=("GPUS", "JOBS", "STEPS"),
        help="also time a generated case of this shape (repeatable; horizons over 48 steps get "
        "long jobs arriving across the horizon); e.g. --generated 1000 2000 10000 --repeat 3",
    )
    bench.set_defaults(run=_run_bench)

    forecast = sub.add_parser("forecast", help="fit the weekly demand profile to a history")
    forecast.add_argument("history_csv")
    forecast.add_argument("--column", help="column to forecast (default: the first numeric)")
    forecast.add_argument(
        "--horizon",
        type=_horizon_hours,
        default=168,
        metavar="H",
        help=f"hours to forecast (default 168, at most {MAX_STEPS:,})",
    )
    forecast.add_argument(
        "--level",
        type=_level,
        default=0.9,
        metavar="L",
        help="central interval level, 0.001..0.999 (default 0.9)",
    )
    forecast.add_argument(
        "--out", type=_out_file, metavar="CSV", help="write the forecast here, not stdout"
    )
    forecast.set_defaults(run=_run_forecast)

    simulate = sub.add_parser("simulate", help="rolling horizon: re-plan, commit, repeat")
    _input_arguments(simulate, window_days=False)
    simulate.add_argument("--days", type=_days, default=1.0, metavar="D")
    simulate.add_argument("--planner", choices=PLANNER_NAMES, default=FAST)
    simulate.add_argument(
        "--replan-minutes",
        type=_positive_int,
        default=None,
        metavar="M",
        help="minutes between re-plans, a whole number of the scenario's steps (default: every "
        "hour, or the first whole number of steps past it)",
    )
    simulate.add_argument("--time-limit", type=_positive_float, default=5.0, metavar="S")
    simulate.add_argument(
        "--demand-quantile",
        type=_share,
        default=0.9,
        metavar="Q",
        help="forecast quantile each service is planned at, as on the Horizon page (default "
        "0.9; raised after a miss, decaying back)",
    )
    simulate.add_argument("--out", type=_out_folder, metavar="DIR")
    simulate.add_argument(
        "--no-progress", action="store_true", help="do not report the re-plans on stderr"
    )
    simulate.set_defaults(run=_run_simulate)

    workspace = sub.add_parser(
        "workspace", help="saved scenarios and runs (the app's Saved page, from the shell)"
    )
    workspace.add_argument(
        "--workspace",
        metavar="FILE",
        help="the SQLite workspace (default: GPUPLAN_WORKSPACE, else the user's data folder)",
    )
    actions = workspace.add_subparsers(dest="action", required=True, metavar="ACTION")
    actions.add_parser("list", help="saved scenarios and their runs")
    save = actions.add_parser("save", help="save a scenario file, optionally with plans")
    save.add_argument("scenario", help="scenario JSON file")
    save.add_argument("--name", help="name to save it under (default: the scenario's name)")
    save.add_argument(
        "--planners", nargs="*", choices=PLANNER_NAMES, default=[], help="also plan and keep runs"
    )
    export = actions.add_parser("export", help="write a saved scenario as JSON")
    export.add_argument("name")
    export.add_argument(
        "--out", type=_out_file, metavar="FILE", help="write here instead of stdout"
    )
    delete = actions.add_parser("delete", help="delete a saved scenario and its runs")
    delete.add_argument("name")
    workspace.set_defaults(run=_run_workspace)

    history = sub.add_parser(
        "import", help="a scheduler history (sacct, pod list, job log) -> a scenario + as-run"
    )
    history.add_argument("file", help="sacct -P export, openb/kubectl pod list, Helios/Acme log")
    history.add_argument(
        "--format", choices=("auto", "slurm", "openb", "kubectl", "helios", "acme"), default="auto"
    )
    history.add_argument(
        "--start",
        metavar="T",
        help="window start: ISO time, or hours from the trace start for openb "
        "(default: the day of the median submit time)",
    )
    history.add_argument("--days", type=_positive_float, default=1.0, metavar="D")
    history.add_argument("--step-minutes", type=int, default=60, metavar="M")
    history.add_argument(
        "--gpus", type=int, metavar="G", help="cluster size (default: peak in use, power of two)"
    )
    history.add_argument("--rules", metavar="R.json", help="type and priority rules (JSON)")
    history.add_argument("--out", type=_out_file, required=True, metavar="scenario.json")
    history.add_argument(
        "--no-progress", action="store_true", help="do not say on stderr what is being read"
    )
    history.set_defaults(run=_run_import)

    sweep = sub.add_parser("sweep", help="capacity what-ifs: every planner at every point")
    _input_arguments(sweep, cluster=False)
    sweep.add_argument(
        "--gpus",
        metavar="L",
        help="cluster sizes, e.g. 8,16,32 (default: the input's own; a CSV pair is read on the "
        "largest, a history's running work placed again on each)",
    )
    sweep.add_argument("--demand-scale", metavar="L", help="real-time demand factors, e.g. 1,1.2")
    sweep.add_argument("--work-scale", metavar="L", help="batch gpu_hours factors, e.g. 1,1.5")
    sweep.add_argument("--penalty", metavar="L", help="penalty weights, e.g. 5,8")
    sweep.add_argument("--decay", metavar="L", help="per-step decays, e.g. 0.97")
    sweep.add_argument(
        "--planners",
        metavar="L",
        default=f"{BASELINE},{FAST}",
        help=f"planners to run at every point (default {BASELINE},{FAST})",
    )
    engine = sweep.add_mutually_exclusive_group()
    engine.add_argument("--workers", metavar="N", help="local worker processes (default: cores)")
    engine.add_argument(
        "--scheduler", metavar="ADDR", help="a running Dask scheduler (or DASK_SCHEDULER_ADDRESS)"
    )
    sweep.add_argument("--time-limit", type=_positive_float, default=10.0, metavar="S")
    sweep.add_argument(
        "--out", type=_out_folder, metavar="DIR", required=True, help="writes DIR/sweep.csv"
    )
    sweep.set_defaults(run=_run_sweep)

    size = sub.add_parser("size", help="smallest multiple of --step GPUs meeting the targets")
    _input_arguments(size)
    size.add_argument("--coverage", metavar="X", help="rt_coverage target in [0, 1]")
    size.add_argument("--completed", metavar="Y", help="completed/batch jobs target in [0, 1]")
    size.add_argument("--planner", choices=PLANNER_NAMES, default=FAST)
    size.add_argument("--step", metavar="S", default="8")
    size.add_argument("--max-gpus", metavar="N")
    size.add_argument("--time-limit", type=_positive_float, default=10.0, metavar="S")
    size.add_argument(
        "--no-progress", action="store_true", help="do not report each size tried on stderr"
    )
    size.set_defaults(run=_run_size)
    return parser


def _planner_list(text: str) -> list[str]:
    """'fifo,allocator' -> ['fifo', 'allocator']; unknown or repeated names are refused."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in PLANNER_NAMES]
    if not names or unknown:
        raise argparse.ArgumentTypeError(
            f"unknown planner {', '.join(map(repr, unknown)) or repr(text)}; "
            f"choose from {', '.join(PLANNER_NAMES)}"
        )
    if len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"a planner is named twice in {text!r}")
    return names


def _finite_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
    return value


def _share(text: str) -> float:
    """A quantile strictly between 0 and 1."""
    value = _finite_float(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1 (exclusive), got {text}")
    return value


def _positive_float(text: str) -> float:
    value = _finite_float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def _non_negative_float(text: str) -> float:
    value = _finite_float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text}")
    return value


def _days(text: str) -> float:
    """Days to simulate: no more than the longest horizon (10,080 steps of one week) holds."""
    value = _positive_float(text)
    longest = MAX_STEPS * 7
    if value > longest:
        raise argparse.ArgumentTypeError(
            f"must be at most {longest:,} ({MAX_STEPS:,} steps of a week), got {text}"
        )
    return value


def _horizon_hours(text: str) -> int:
    value = _positive_int(text)
    if value > MAX_STEPS:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_STEPS:,} hours, got {text}")
    return value


def _level(text: str) -> float:
    value = _finite_float(text)
    if not 0.001 <= value <= 0.999:
        raise argparse.ArgumentTypeError(f"must be between 0.001 and 0.999, got {text}")
    return value


def _out_folder(text: str) -> Path:
    """An output folder: existing and writable, or creatable inside a writable folder."""
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a file, not a folder")
    _writable_ancestor(path if path.exists() else path.parent, text)
    return path


def _out_file(text: str) -> Path:
    """An output file: not a folder, in a folder that exists or can be made, and can be written
    (`_write_file` makes the folder, as the commands that write folders do)."""
    path = Path(text)
    if text == "-":
        raise argparse.ArgumentTypeError("'-' is no file name here (give a file)")
    if path.is_dir() or text.endswith(("/", os.sep)):
        raise argparse.ArgumentTypeError(f"{text} is a folder, not a file")
    if path.exists() and not os.access(path, os.W_OK):
        raise argparse.ArgumentTypeError(f"{text} cannot be written (no permission)")
    _writable_ancestor(path.parent, text)
    return path


def _write_file(path: Path, text: str) -> None:
    """Write an output file given with --out, making its folder first."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as e:  # (a full disk, /dev/full: errors without a file name)
        raise ScenarioError(f"{path}: cannot write ({e.strerror or e})") from None


def _writable_ancestor(folder: Path, text: str) -> None:
    """The nearest existing folder on the way to `folder` must be a folder we may write in."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise argparse.ArgumentTypeError(f"{existing} is a file, so {text} cannot be made")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"cannot write in {existing} (no permission) for {text}")


def _planner_options(args: argparse.Namespace) -> dict:
    """The command's planner options that the chosen planner accepts."""
    return planner_options(
        args.planner, time_limit=args.time_limit, mip_gap=getattr(args, "gap", 1e-4)
    )


def _exact_names() -> str:
    return " and ".join(name for name, spec in PLANNERS.items() if spec.exact) or "exact"


def _searching_names() -> str:
    return " and ".join(name for name, spec in PLANNERS.items() if spec.searches)


def _run_plan(args: argparse.Namespace) -> int:
    from .formats import metrics_to_json, write_exports
    from .plan import check, report
    from .planners import solve

    scenario = _read_input(args)
    reports: dict[str, dict] = {}
    for name in args.planner:
        options = planner_options(name, time_limit=args.time_limit, mip_gap=args.gap)
        progress = None
        if PLANNERS[name].accepts("progress") and not args.no_progress:
            progress = _ProgressLine(name, args.time_limit)
            options = planner_options(
                name, time_limit=args.time_limit, mip_gap=args.gap, progress=progress
            )
        plan = solve(scenario, name, **options)
        if progress is not None:
            progress.finish(plan.stats)
        violations = check(scenario, plan)
        if violations:  # a planner bug, not bad input: say so loudly
            print(
                f"internal error: the {name} plan breaks {len(violations)} constraint(s); "
                f"first: {violations[0]}",
                file=sys.stderr,
            )
            return EXIT_ILLEGAL
        if args.out:
            several = len(args.planner) > 1
            write_exports(scenario, plan, Path(args.out) / name if several else args.out)
        reports[name] = report(scenario, plan)
    if args.format == "table":
        print(format_plan_table(reports))
    elif len(reports) == 1:
        sys.stdout.write(metrics_to_json(next(iter(reports.values()))))
    else:
        sys.stdout.write(metrics_to_json(reports))
    return EXIT_OK


class _StderrLine:
    """Progress on stderr: every update on a terminal (one line rewritten in place), else one
    line every `every_s` seconds (so a log stays short)."""

    def __init__(self, every_s: float = 2.0) -> None:
        self.every_s = every_s
        self.tty = sys.stderr.isatty()
        self.last = -every_s

    def due(self, elapsed: float) -> bool:
        """Whether an update `elapsed` seconds in is shown (and counts as the last one)."""
        if not self.tty and elapsed - self.last < self.every_s:
            return False
        self.last = elapsed
        return True

    def say(self, line: str, last: bool = False) -> None:
        """One line: rewritten in place on a terminal (the last one stays)."""
        print(("\r" + line.ljust(78)) if self.tty else line,
              end="\n" if last or not self.tty else "", file=sys.stderr, flush=True)  # fmt: skip


class _SimulationLine(_StderrLine):
    """The rolling horizon's progress (`simulate`'s `progress` hook), then how long it took."""

    def __init__(self, planner: str) -> None:
        super().__init__()
        self.planner = planner
        self.started = time.perf_counter()

    def __call__(self, fraction: float, message: str) -> None:
        elapsed = time.perf_counter() - self.started
        if self.due(elapsed):
            self.say(f"simulate ({self.planner}): {fraction:.0%} · {message} · {elapsed:.1f} s")

    def finish(self, replans: int) -> None:
        elapsed = time.perf_counter() - self.started
        self.say(f"simulate ({self.planner}): {replans} re-plans in {elapsed:.1f} s", True)


class _ProgressLine(_StderrLine):
    """A searching planner's progress (its `progress` hook), then how its search ended."""

    def __init__(self, name: str, time_limit: float) -> None:
        super().__init__()
        self.name, self.time_limit = name, time_limit

    def __call__(self, info: dict) -> None:
        elapsed = float(info.get("elapsed_s", 0.0))
        if not self.due(elapsed):
            return
        parts = [f"{elapsed:.1f} s of {self.time_limit:g} s"]
        for key, text in (("incumbent", "incumbent {:,.1f}"), ("bound", "bound {:,.1f}")):
            if info.get(key) is not None and math.isfinite(info[key]):
                parts.append(text.format(info[key]))
        if info.get("gap") is not None and math.isfinite(info["gap"]):
            parts.append(f"gap {info['gap']:.2%}")
        self.say(f"{self.name}: " + " · ".join(parts))

    def finish(self, stats: dict) -> None:
        from .planners import SolveStatus
        from .planners.allocator import search_words

        status = stats.get("status")
        runtime = float(stats.get("runtime_ms", 0.0)) / 1000
        if status is None:  # a search without a bound (thorough)
            self.say(f"{self.name}: {search_words(stats)} ({runtime:,.1f} s)", True)
            return
        words = SolveStatus(status).words if status in set(SolveStatus) else str(status)
        line = f"{self.name}: {words} after {runtime:,.1f} s"
        if stats.get("most_coverage") is not None:  # a coverage target no plan reaches
            proved = "proved" if stats.get("most_coverage_proved") else "not proved"
            line += f"; most coverage {stats['most_coverage']:.1%} ({proved})"
        self.say(line, True)


PLAN_TABLE_COLUMNS = (  # (header, report key, format)
    ("planner", "planner", "{}"),
    ("util.", "utilization", "{:.1%}"),
    ("allocated", "allocated_fraction", "{:.1%}"),
    ("value", "value", "{:,.1f}"),
    ("vs fifo", None, ""),
    ("done", None, ""),
    ("rt coverage", "rt_coverage", "{:.1%}"),
    ("objective", "objective", "{:,.1f}"),
    ("runtime", "runtime_ms", ""),
    ("status", "status", ""),
)


def format_plan_table(reports: dict[str, dict]) -> str:
    """One aligned line per planner: utilization, value (and its gain over fifo when fifo ran),
    completed jobs, coverage, objective, runtime and the solver status in words."""
    from .planners import BASELINE, SolveStatus

    base = reports.get(BASELINE)
    lines = []
    for name, r in reports.items():
        row = []
        for _, key, fmt in PLAN_TABLE_COLUMNS:
            row.append(fmt.format(r[key]) if fmt and key in r and r[key] is not None else "")
        row[0] = name
        if base is not None and name != BASELINE and base["value"] > 0:
            row[4] = f"{r['value'] / base['value'] - 1:+.1%}"
        row[5] = f"{r['completed_jobs']}/{r['batch_jobs']}"
        ms = float(r.get("runtime_ms", 0.0))
        row[8] = f"{ms / 1000:,.1f} s" if ms >= 1000 else f"{ms:,.1f} ms"
        status = r.get("status")
        row[9] = SolveStatus(status).words if status in set(SolveStatus) else ""
        lines.append(row)
    headers = [h for h, _, _ in PLAN_TABLE_COLUMNS]
    widths = [max(len(h), *(len(line[k]) for line in lines)) for k, h in enumerate(headers)]
    left = {0, 9}

    def fmt_line(cells: list[str]) -> str:
        return "  ".join(
            c.ljust(w) if k in left else c.rjust(w)
            for k, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    return "\n".join([fmt_line(headers), *(fmt_line(line) for line in lines)])


def _run_check(args: argparse.Namespace) -> int:
    from .formats import plan_from_grid_csv, read_text
    from .plan import check

    scenario = _read_input(args)
    plan = plan_from_grid_csv(scenario, read_text(args.grid_csv), Path(args.grid_csv).name)
    violations = check(scenario, plan)
    if not violations:
        print(
            f"legal: {Path(args.grid_csv).name} obeys all five constraints "
            f"({int((plan.grid >= 0).sum())} held cells)"
        )
        return EXIT_OK
    print(f"illegal: {len(violations)} violation(s)")
    for v in violations:
        print(f"  {v}")
    return EXIT_ILLEGAL


def _run_bench(args: argparse.Namespace) -> int:
    from .bench import check_generated_shape, format_table, run_bench

    for shape in args.generated or ():
        check_generated_shape(*shape)  # before minutes of the other benchmarks
    rows = run_bench(args.scenarios, args.planners, repeat=args.repeat, time_limit=args.time_limit)
    if args.large:
        from .bench import run_generated

        rows += run_generated(args.planners, repeat=args.repeat)
    for gpus, jobs, steps in args.generated or ():
        from .bench import run_generated

        rows += run_generated(
            args.planners,
            repeat=args.repeat,
            gpus=gpus,
            jobs=jobs,
            steps=steps,
            progress=lambda text: print(text, file=sys.stderr, flush=True),
        )
    if args.json:
        from .formats import json_safe

        print(json.dumps(json_safe(rows), indent=2))
    else:
        print(format_table(rows))
    return EXIT_OK


def _run_forecast(args: argparse.Namespace) -> int:
    # (a second or two: the statistics libraries load, then the members fit at several origins)
    print(f"forecast: fitting {Path(args.history_csv).name} ...", file=sys.stderr, flush=True)
    from .forecast.demand import forecast_file

    table, warnings = forecast_file(
        args.history_csv, column=args.column, horizon=args.horizon, level=args.level
    )
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    report = table.attrs.get("report")
    for line in report.lines() if report is not None else []:
        if not line.startswith(("anomaly:", "repair:")):  # both are among the warnings above
            print(f"forecast: {line}", file=sys.stderr)
    text = table.to_csv(index=False, float_format="%.4f", date_format="%Y-%m-%dT%H:%M:%S")
    if args.out:
        _write_file(args.out, text)
    else:
        sys.stdout.write(text)
    return EXIT_OK


def _run_simulate(args: argparse.Namespace) -> int:
    from .formats import metrics_to_json
    from .rolling import simulate, write_simulation

    scenario = _read_input(args)
    step = scenario.cluster.step_minutes
    if args.replan_minutes is None:  # hourly, in whole steps (a 7-minute step: every 63 min)
        args.replan_minutes = step * max(1, math.ceil(60 / step))
    elif args.replan_minutes % step:  # rolling would round it to whole steps: say so instead
        raise ScenarioError(
            f"--replan-minutes {args.replan_minutes} is not a whole number of the scenario's "
            f"{step}-minute steps"
        )
    line = None if args.no_progress else _SimulationLine(args.planner)
    result = simulate(
        scenario,
        days=args.days,
        planner=args.planner,
        replan_minutes=args.replan_minutes,
        planner_options=_planner_options(args),
        demand_quantile=args.demand_quantile,
        progress=line,
    )
    if line is not None:
        line.finish(len(result.replans))
    if args.out:
        write_simulation(result, args.out)
    sys.stdout.write(metrics_to_json(result.metrics))
    return EXIT_OK


def _run_workspace(args: argparse.Namespace) -> int:
    from .formats import load_scenario, scenario_to_json
    from .planners import solve
    from .workspace import Workspace, WorkspaceError, default_path

    path = Path(args.workspace).expanduser() if args.workspace else default_path()
    if args.action != "save" and not path.exists():  # (reading one makes no file, no folder)
        if args.action == "list":
            print(f"workspace: {path} (none yet: save a scenario to start it)", file=sys.stderr)
            return 0
        raise WorkspaceError(f"workspace {path}: no such file (nothing saved there yet)")
    ws = Workspace(path)
    if args.action == "list":
        runs = ws.runs()
        for saved in ws.scenarios():
            print(
                f"{saved.name}  ({saved.gpus} GPUs, {saved.jobs} jobs, saved {saved.saved_at[:19]})"
            )
            for run in (r for r in runs if r.scenario == saved.name):
                m = run.metrics
                print(
                    f"  run {run.id}: {run.planner}  utilization {m['utilization']:.1%}  "
                    f"value {m['value']:,.1f}  completed {m['completed_jobs']}/{m['batch_jobs']}"
                )
        print(f"workspace: {ws.path}", file=sys.stderr)
    elif args.action == "save":
        scenario = load_scenario(args.scenario)
        name = args.name or scenario.name
        ws.save_scenario(name, scenario)
        for planner in args.planners:
            ws.save_run(name, scenario, solve(scenario, planner))
        print(f"saved {name!r} with {len(args.planners)} run(s) in {ws.path}")
    elif args.action == "export":
        text = scenario_to_json(ws.load_scenario(args.name))
        if args.out:
            _write_file(args.out, text)
        else:
            sys.stdout.write(text)
    else:
        ws.load_scenario(args.name)  # an unknown name is an error, not a silent no-op
        ws.delete_scenario(args.name)
        print(f"deleted {args.name!r} from {ws.path}")
    return EXIT_OK


def _run_import(args: argparse.Namespace) -> int:
    import contextlib

    from .formats import json_safe, scenario_to_json
    from .formats.history import ImportRules, ImportWindow, format_summary, import_history

    start = args.start
    if start is not None:
        with contextlib.suppress(ValueError):
            start = float(start)  # hours from the trace start, for relative traces
    window = ImportWindow(
        start=start, days=args.days, step_minutes=args.step_minutes, gpus=args.gpus
    )
    rules = ImportRules.load(args.rules) if args.rules else ImportRules()
    said = _say_reading(Path(args.file), args.no_progress, "import: ")
    started = time.perf_counter()
    result = import_history(args.file, args.format, window, rules)
    if said:
        print(f"import: read in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    out = Path(args.out)
    _write_file(out, scenario_to_json(result.scenario))
    as_run_path = _as_run_path(out)
    as_run = {"scenario": out.name, **result.as_run, "summary": result.summary}
    _write_file(as_run_path, json.dumps(json_safe(as_run), indent=2) + "\n")
    print(format_summary(result.summary, result.as_run))
    print(f"wrote {out} and {as_run_path}")
    return EXIT_OK


_LARGE_HISTORY_BYTES = 20 * 10**6  # reading a history says so on stderr past this


def _size(path: Path) -> int:
    """A file's size in bytes (0 where it has none to tell; the reader says what is wrong)."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _say_reading(path: Path, quiet: bool, label: str = "") -> bool:
    """Past 20 MB, "reading sacct.txt (257 MB) ..." on stderr (a large history takes seconds;
    a small one's errors stay one line); whether it was said."""
    size = _size(path)
    if quiet or size <= _LARGE_HISTORY_BYTES:
        return False
    print(f"{label}reading {path.name} ({size / 1e6:,.0f} MB) ...", file=sys.stderr, flush=True)
    return True


def _as_run_path(out: Path) -> Path:
    """as_run.json beside the scenario (SPEC section 4), unless that file holds another
    scenario's as-run (windows imported into one folder): then <scenario>.as_run.json."""
    path = out.with_name("as_run.json")
    try:
        other = json.loads(path.read_text(encoding="utf-8")).get("scenario") != out.name
    except (OSError, ValueError, AttributeError):
        other = path.exists()  # (unreadable: not ours to replace)
    return out.with_name(f"{out.stem}.as_run.json") if other else path


def _number_list(flag: str, text: str | None, *, integer: bool = False) -> list[float] | None:
    """A comma list of numbers from the command line (None when the flag was not given)."""
    if text is None:
        return None
    values = []
    for part in text.split(","):
        values.append(_number(flag, part.strip(), integer=integer))
    return values


def _number(flag: str, text: str | None, *, integer: bool = False) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        kind = "whole numbers" if integer else "numbers"
        raise ScenarioError(f"{flag}: {text!r} is not a number (give {kind})") from None
    if integer and value.is_integer():
        return int(value)
    if integer:
        raise ScenarioError(f"{flag}: {text!r} is not a whole number")
    return value


def _run_sweep(args: argparse.Namespace) -> int:
    import time

    from .sweep import (
        check_point_lists,
        dask_client,
        engine_label,
        run_sweep,
        sweep_points,
        sweep_to_csv,
    )

    planners = [p.strip() for p in args.planners.split(",")]
    unknown = [p for p in planners if p not in PLANNER_NAMES]
    if not planners or unknown:
        raise ScenarioError(
            f"--planners: {', '.join(repr(p) for p in unknown) or 'none'} not among "
            f"{', '.join(PLANNER_NAMES)}"
        )
    workers = _number("--workers", args.workers, integer=True)
    if workers is not None and workers < 1:
        raise ScenarioError(f"--workers: must be at least 1, got {args.workers}")
    lists = {
        "gpus": _number_list("--gpus", args.gpus, integer=True),
        "demand_scale": _number_list("--demand-scale", args.demand_scale),
        "work_scale": _number_list("--work-scale", args.work_scale),
        "penalty_weight": _number_list("--penalty", args.penalty),
        "decay": _number_list("--decay", args.decay),
    }
    check_point_lists(**lists)  # (before a large history is read)
    sizes = lists["gpus"]
    scenario = _read_input(args, pair_gpus=max(sizes) if sizes else None)
    points = sweep_points(scenario, **lists)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    options = {p: planner_options(p, time_limit=args.time_limit) for p in planners}

    def progress(done: int, total: int, row: dict) -> None:
        where = " ".join(f"{k}={row[k]:g}" for k in ("gpus", "demand_scale", "work_scale"))
        note = " (invalid point)" if row["error"] else ""
        print(f"[{done}/{total}] {row['planner']} {where}{note}", file=sys.stderr, flush=True)

    started = time.perf_counter()
    with dask_client(workers, args.scheduler) as client:
        engine = engine_label(client)
        ready = time.perf_counter()
        rows = run_sweep(client, scenario, points, planners, options=options, progress=progress)
        seconds = time.perf_counter() - ready
    startup = ready - started
    (out / "sweep.csv").write_text(sweep_to_csv(rows), encoding="utf-8")
    invalid = sum(1 for r in rows if r["error"])
    print(
        f"{len(points)} point(s) x {len(planners)} planner(s) = {len(rows)} run(s) on {engine} "
        f"in {seconds:.2f} s (+{startup:.2f} s to connect); {invalid} invalid; "
        f"wrote {out / 'sweep.csv'}"
    )
    for planner in planners:
        valid = [r for r in rows if r["planner"] == planner and not r["error"]]
        if valid:
            best = max(valid, key=lambda r: (r["value"], -r["gpus"]))
            print(
                f"  {planner}: highest value {best['value']:.1f} at {best['gpus']} GPUs "
                f"(coverage {best['rt_coverage']:.1%}, "
                f"{best['completed_jobs']}/{best['batch_jobs']} jobs done)"
            )
    return EXIT_OK


def _run_size(args: argparse.Namespace) -> int:
    from .formats import json_safe
    from .sweep import check_targets, size

    step = _number("--step", args.step, integer=True)
    max_gpus = _number("--max-gpus", args.max_gpus, integer=True)
    coverage = _number("--coverage", args.coverage)
    completed = _number("--completed", args.completed)
    check_targets(coverage, completed)  # (before a large history is read)
    scenario = _read_input(args)
    options = planner_options(args.planner, time_limit=args.time_limit)

    def tried(gpus: int, row: dict[str, Any]) -> None:  # each size as it is planned, on stderr
        missed = [name for name, ok in row["meets"].items() if not ok]
        verdict = f"misses {', '.join(missed)}" if missed else "meets the targets"
        if row.get("error"):  # (no plan there: say why, not which targets it missed)
            verdict = f"cannot be planned: {row['error']}"
        print(f"size: {gpus:,} GPUs {verdict}", file=sys.stderr, flush=True)

    result = size(
        scenario,
        coverage=coverage,
        completed=completed,
        planner=args.planner,
        step=step,
        max_gpus=max_gpus,
        options=options,
        progress=None if args.no_progress else tried,
    )
    print(json.dumps(json_safe(result), indent=2))
    if result["gpus"] is None:
        for name, reason in result["failed"].items():
            if result["tried"]:
                limit = result["max_gpus"]
                print(f"no size up to {limit} GPUs meets {name}: {reason}", file=sys.stderr)
            else:  # above the ceiling: no size was tried
                print(f"size: {reason}", file=sys.stderr)
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
