"""`gpuplan simulate`: the rolling horizon (re-plan, commit, repeat) over days of a scenario."""

from __future__ import annotations

import argparse
import math
import sys

from .. import serving_guard
from ..forecast import DEMAND_QUANTILE
from ..model import ScenarioError
from ..planners import FAST, PLANNER_NAMES
from .arguments import (
    EXIT_OK,
    days,
    out_folder,
    planner_options_for,
    positive_float,
    positive_int,
    share,
)
from .inputs import input_arguments, read_input
from .progress import SimulationLine


def add_arguments(parser: argparse.ArgumentParser) -> None:
    input_arguments(parser, window_days=False)
    parser.add_argument("--days", type=days, default=1.0, metavar="D")
    parser.add_argument("--planner", choices=PLANNER_NAMES, default=FAST)
    parser.add_argument(
        "--replan-minutes",
        type=positive_int,
        default=None,
        metavar="M",
        help="minutes between re-plans, a whole number of the scenario's steps (default: every "
        "hour, or the first whole number of steps past it)",
    )
    parser.add_argument("--time-limit", type=positive_float, default=5.0, metavar="S")
    parser.add_argument(
        "--demand-quantile",
        type=share,
        default=DEMAND_QUANTILE,
        metavar="Q",
        help="forecast quantile each service is planned at, as on the Horizon page (default "
        f"{DEMAND_QUANTILE:g}, the top of the forecast's 90% interval; raised after a miss, "
        "decaying back)",
    )
    parser.add_argument(
        "--burst-guard",
        choices=tuple(serving_guard.CHOICES),
        default="auto",
        help="hold GPUs for the largest rise a service's history shows: plan it at least at "
        "its level plus what its swap cap cannot catch up with, and start a batch job only "
        "where its run leaves room for such a rise; auto (default): the services idle at "
        "least half their history's hours; never fifo and backfill (their peak reservation "
        "holds it). Trades batch value for coverage",
    )
    parser.add_argument("--out", type=out_folder, metavar="DIR")
    parser.add_argument(
        "--no-progress", action="store_true", help="do not report the re-plans on stderr"
    )


def run(args: argparse.Namespace) -> int:
    from ..formats import metrics_to_json
    from ..rolling import simulate, write_simulation

    scenario = read_input(args)
    step = scenario.cluster.step_minutes
    if args.replan_minutes is None:  # hourly, in whole steps (a 7-minute step: every 63 min)
        args.replan_minutes = step * max(1, math.ceil(60 / step))
    elif args.replan_minutes % step:  # rolling would round it to whole steps: say so instead
        raise ScenarioError(
            f"--replan-minutes {args.replan_minutes} is not a whole number of the scenario's "
            f"{step}-minute steps"
        )
    line = None if args.no_progress else SimulationLine(args.planner)
    result = simulate(
        scenario,
        days=args.days,
        planner=args.planner,
        replan_minutes=args.replan_minutes,
        planner_options=planner_options_for(args),
        demand_quantile=args.demand_quantile,
        progress=line,
        burst_guard=serving_guard.CHOICES[args.burst_guard],
    )
    if line is not None:
        line.finish(len(result.replans))
    if args.out:
        write_simulation(result, args.out)
    sys.stdout.write(metrics_to_json(result.metrics))
    return EXIT_OK
