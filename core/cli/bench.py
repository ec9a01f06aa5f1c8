"""`gpuplan bench`: the benchmark scenarios (and generated cases) through the planners, with
the median runtime of each."""

from __future__ import annotations

import argparse
import json
import sys

from ..planners import PLANNER_NAMES, default_planners
from .arguments import EXIT_OK, positive_float, positive_int


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--planners", nargs="+", choices=PLANNER_NAMES, default=default_planners())
    parser.add_argument(
        "--scenarios",
        nargs="+",
        metavar="FILE",
        help="scenario files (default: data/scenarios/*.json benchmarks)",
    )
    parser.add_argument(
        "--repeat",
        type=positive_int,
        default=20,
        help="runs per planner for the median runtime (default 20; full: 1)",
    )
    parser.add_argument("--time-limit", type=positive_float, default=10.0, metavar="S")
    parser.add_argument("--json", action="store_true", help="print rows as JSON")
    parser.add_argument(
        "--large",
        action="store_true",
        help="also time the generated 1,024-GPU, 500-job, 48-step case",
    )
    parser.add_argument(
        "--generated",
        nargs=3,
        type=positive_int,
        action="append",
        metavar=("GPUS", "JOBS", "STEPS"),
        help="also time a generated case of this shape (repeatable; horizons over 48 steps get "
        "long jobs arriving across the horizon); e.g. --generated 1000 2000 10000 --repeat 3",
    )


def run(args: argparse.Namespace) -> int:
    from ..bench import check_generated_shape, format_table, run_bench

    for shape in args.generated or ():
        check_generated_shape(*shape)  # before minutes of the other benchmarks
    rows = run_bench(args.scenarios, args.planners, repeat=args.repeat, time_limit=args.time_limit)
    if args.large:
        from ..bench import run_generated

        rows += run_generated(args.planners, repeat=args.repeat)
    for gpus, jobs, steps in args.generated or ():
        from ..bench import run_generated

        rows += run_generated(
            args.planners,
            repeat=args.repeat,
            gpus=gpus,
            jobs=jobs,
            steps=steps,
            progress=lambda text: print(text, file=sys.stderr, flush=True),
        )
    if args.json:
        from ..formats import json_safe

        print(json.dumps(json_safe(rows), indent=2))
    else:
        print(format_table(rows))
    return EXIT_OK
