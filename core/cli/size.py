"""`gpuplan size`: the smallest cluster (a multiple of --step GPUs) that meets the targets."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..model import ScenarioError
from ..planners import FAST, PLANNER_NAMES, planner_options
from .arguments import EXIT_OK, number, positive_float
from .inputs import input_arguments, read_input_with_history


def add_arguments(parser: argparse.ArgumentParser) -> None:
    input_arguments(parser)
    parser.add_argument("--coverage", metavar="X", help="rt_coverage target in [0, 1]")
    parser.add_argument(
        "--completed",
        metavar="Y",
        help="completed/batch jobs target in [0, 1]. With only --coverage, a scheduler "
        "history holds it at as-run's share (what the real scheduler completed in the window); "
        "'any' makes batch work no target, and the result says what share it gets",
    )
    parser.add_argument(
        "--vary",
        metavar="GROUP=LIST",
        action="append",
        help="node counts to try for a group of the cluster, e.g. a10x4=0,2,4 (repeatable): the "
        "cheapest mix meeting the targets, by cost per hour (GPUs where no price is set)",
    )
    parser.add_argument("--planner", choices=PLANNER_NAMES, default=FAST)
    parser.add_argument("--step", metavar="S", default="8")
    parser.add_argument("--max-gpus", metavar="N")
    parser.add_argument("--time-limit", type=positive_float, default=10.0, metavar="S")
    parser.add_argument(
        "--no-progress", action="store_true", help="do not report each size tried on stderr"
    )


def run(args: argparse.Namespace) -> int:
    from ..formats import json_safe
    from ..sweep import batch_note, check_targets, hold_batch, size

    step = number("--step", args.step, integer=True)
    max_gpus = number("--max-gpus", args.max_gpus, integer=True)
    coverage = number("--coverage", args.coverage)
    any_completed = args.completed is not None and args.completed.strip().lower() == "any"
    completed = None if any_completed else number("--completed", args.completed)
    check_targets(coverage, completed)  # (before a large history is read)
    scenario, imported = read_input_with_history(args)
    options = planner_options(args.planner, time_limit=args.time_limit)
    hold = None
    if completed is None and not any_completed and imported is not None:
        hold = hold_batch(scenario, imported.as_run)
        if hold is not None:
            source = f" (as-run from {imported.path.name})" if hasattr(imported, "path") else ""
            print(f"size: {hold.note()}{source}", file=sys.stderr, flush=True)

    if args.vary:
        return _size_mix(args, scenario, coverage, completed, options)

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
        hold=hold,
    )
    print(json.dumps(json_safe(result), indent=2))
    note = batch_note(result)
    if note is not None:
        print(f"size: {note}", file=sys.stderr)
    if result["gpus"] is None:
        for name, reason in result["failed"].items():
            if result["tried"]:
                limit = result["max_gpus"]
                print(f"no size up to {limit} GPUs meets {name}: {reason}", file=sys.stderr)
            else:  # above the ceiling: no size was tried
                print(f"size: {reason}", file=sys.stderr)
    return EXIT_OK


def _size_mix(args, scenario, coverage, completed, options) -> int:
    """size --vary: the cheapest mix of node counts that meets the targets."""
    from ..formats import json_safe
    from ..mix import parse_vary, size_mix

    if args.step != "8" or args.max_gpus is not None:
        raise ScenarioError("--vary: --step and --max-gpus size a pool of GPUs, not a mix")
    if coverage is None and completed is None:
        raise ScenarioError("--vary: give --coverage or --completed (the targets a mix must meet)")
    vary = parse_vary(args.vary, scenario)

    def tried(mix, row: dict[str, Any]) -> None:
        words = ", ".join(f"{g}={n}" for g, n in mix)
        cost = row.get("cost_per_hour")
        price = f", {cost:,.2f}/h" if cost is not None else ""
        verdict = "meets the targets" if row["meets"] else "misses them"
        if row.get("error"):
            verdict = f"cannot be planned: {row['error']}"
        print(f"size: {words} ({row['gpus']:,} GPUs{price}) {verdict}", file=sys.stderr, flush=True)

    result = size_mix(
        scenario,
        vary,
        coverage,
        completed,
        args.planner,
        options,
        progress=None if args.no_progress else tried,
    )
    print(json.dumps(json_safe(result), indent=2))
    if result["nodes"] is None:
        print(f"size: no mix of {len(result['tried'])} tried meets the targets", file=sys.stderr)
    return EXIT_OK
