"""`gpuplan import`: a scheduler history (sacct, a pod list, a job log) as a scenario and its
as-run metrics."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path

from ..model import IMPORT_STEP_MINUTES, ScenarioError
from .arguments import EXIT_OK, out_file, positive_float, write_file
from .inputs import cluster_argument, cluster_of, say_reading


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file",
        help="sacct -P export, openb/kubectl pod list, Alibaba 2025 serving trace, Helios/Acme log",
    )
    parser.add_argument(
        "--format",
        choices=("auto", "slurm", "openb", "alibaba-serving", "kubectl", "helios", "acme"),
        default="auto",
    )
    parser.add_argument(
        "--start",
        metavar="T",
        help="window start: ISO time, or hours from the trace start for openb and the "
        "serving trace "
        "(default: the day of the median submit time)",
    )
    parser.add_argument("--days", type=positive_float, default=1.0, metavar="D")
    parser.add_argument(
        "--step-minutes",
        type=int,
        default=IMPORT_STEP_MINUTES,
        metavar="M",
        help=f"step length (default {IMPORT_STEP_MINUTES}: traces are timed to the second)",
    )
    parser.add_argument(
        "--gpus", type=int, metavar="G", help="cluster size (default: peak in use, power of two)"
    )
    parser.add_argument(
        "--nodes",
        metavar="NODES.csv",
        help="openb node list (sn,cpu_milli,memory_mib,gpu,model): the cluster's node groups, "
        "one per model and GPUs per node; gpu_spec becomes the pods' gpu_types",
    )
    cluster_argument(parser)
    parser.add_argument("--rules", metavar="R.json", help="type and priority rules (JSON)")
    parser.add_argument("--out", type=out_file, required=True, metavar="scenario.json")
    parser.add_argument(
        "--no-progress", action="store_true", help="do not say on stderr what is being read"
    )


def run(args: argparse.Namespace) -> int:

    from ..formats import json_safe, scenario_to_json
    from ..formats.history import ImportRules, ImportWindow, format_summary, import_history

    start = args.start
    if start is not None:
        with contextlib.suppress(ValueError):
            start = float(start)  # hours from the trace start, for relative traces
    if args.cluster_file is not None and args.nodes is not None:
        raise ScenarioError("--cluster and --nodes both give the cluster: give one")
    window = ImportWindow(
        start=start,
        days=args.days,
        step_minutes=args.step_minutes,
        gpus=args.gpus,
        cluster=cluster_of(args),
    )
    rules = ImportRules.load(args.rules) if args.rules else ImportRules()
    said = say_reading(Path(args.file), args.no_progress, "import: ")
    started = time.perf_counter()
    result = import_history(args.file, args.format, window, rules, nodes=args.nodes)
    if said:
        print(f"import: read in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    out = Path(args.out)
    write_file(out, scenario_to_json(result.scenario))
    as_run_path = _as_run_path(out)
    as_run = {"scenario": out.name, **result.as_run, "summary": result.summary}
    write_file(as_run_path, json.dumps(json_safe(as_run), indent=2) + "\n")
    print(format_summary(result.summary, result.as_run))
    print(f"wrote {out} and {as_run_path}")
    return EXIT_OK


def _as_run_path(out: Path) -> Path:
    """as_run.json beside the scenario (SPEC section 4), unless that file holds another
    scenario's as-run (windows imported into one folder): then <scenario>.as_run.json."""
    path = out.with_name("as_run.json")
    try:
        other = json.loads(path.read_text(encoding="utf-8")).get("scenario") != out.name
    except (OSError, ValueError, AttributeError):
        other = path.exists()  # (unreadable: not ours to replace)
    return out.with_name(f"{out.stem}.as_run.json") if other else path
