"""`gpuplan plan`: plan a scenario with one planner or several, check each plan, print the
metrics (JSON, or a table for people) and optionally write the exports."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..planners import BASELINE, FAST, PLANNER_NAMES, PLANNERS, planner_options
from .arguments import (
    EXIT_ILLEGAL,
    EXIT_OK,
    exact_names,
    non_negative_float,
    out_folder,
    planner_list,
    positive_float,
    searching_names,
)
from .inputs import input_arguments, read_input
from .progress import ProgressLine


def add_arguments(parser: argparse.ArgumentParser) -> None:
    input_arguments(parser)
    parser.add_argument(
        "--planner",
        type=planner_list,
        default=[FAST],
        metavar="P[,P...]",
        help=f"one planner or several, comma separated: {', '.join(PLANNER_NAMES)} "
        f"(default {FAST})",
    )
    parser.add_argument(
        "--format",
        choices=("json", "table"),
        default="json",
        help="json (default): metrics.json's content (an object per planner when several); "
        "table: one line per planner for people",
    )
    parser.add_argument(
        "--no-progress",
        action="store_true",
        help=f"do not report the {searching_names()} planners' progress on stderr",
    )
    parser.add_argument(
        "--time-limit",
        type=positive_float,
        default=10.0,
        metavar="S",
        help=f"seconds for the {searching_names()} planners (default 10)",
    )
    parser.add_argument(
        "--gap",
        type=non_negative_float,
        default=1e-4,
        help=f"relative MIP gap at which the {exact_names()} planner stops (default 1e-4)",
    )
    parser.add_argument(
        "--out",
        type=out_folder,
        metavar="DIR",
        help="write grid.csv, assignments.csv, realtime.csv and metrics.json (one folder per "
        "planner under DIR when several)",
    )


def run(args: argparse.Namespace) -> int:
    from ..formats import metrics_to_json, write_exports
    from ..plan import check, report
    from ..planners import solve

    scenario = read_input(args)
    reports: dict[str, dict] = {}
    for name in args.planner:
        options = planner_options(name, time_limit=args.time_limit, mip_gap=args.gap)
        progress = None
        if PLANNERS[name].accepts("progress") and not args.no_progress:
            progress = ProgressLine(name, args.time_limit)
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
    from ..planners import SolveStatus

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
