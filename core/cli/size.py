"""`gpuplan size`: the smallest cluster (a multiple of --step GPUs) that meets the targets."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..planners import FAST, PLANNER_NAMES, planner_options
from .arguments import EXIT_OK, number, positive_float
from .inputs import input_arguments, read_input


def add_arguments(parser: argparse.ArgumentParser) -> None:
    input_arguments(parser)
    parser.add_argument("--coverage", metavar="X", help="rt_coverage target in [0, 1]")
    parser.add_argument("--completed", metavar="Y", help="completed/batch jobs target in [0, 1]")
    parser.add_argument("--planner", choices=PLANNER_NAMES, default=FAST)
    parser.add_argument("--step", metavar="S", default="8")
    parser.add_argument("--max-gpus", metavar="N")
    parser.add_argument("--time-limit", type=positive_float, default=10.0, metavar="S")
    parser.add_argument(
        "--no-progress", action="store_true", help="do not report each size tried on stderr"
    )


def run(args: argparse.Namespace) -> int:
    from ..formats import json_safe
    from ..sweep import check_targets, size

    step = number("--step", args.step, integer=True)
    max_gpus = number("--max-gpus", args.max_gpus, integer=True)
    coverage = number("--coverage", args.coverage)
    completed = number("--completed", args.completed)
    check_targets(coverage, completed)  # (before a large history is read)
    scenario = read_input(args)
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
