"""`gpuplan check`: whether a grid CSV obeys a scenario's five constraints; exit 1 if not."""

from __future__ import annotations

import argparse
from pathlib import Path

from .arguments import EXIT_ILLEGAL, EXIT_OK
from .inputs import input_arguments, read_input


def add_arguments(parser: argparse.ArgumentParser) -> None:
    input_arguments(parser, window_days=True)
    parser.add_argument("grid_csv", help="the grid to check (grid.csv: step,gpu,job_id)")


def run(args: argparse.Namespace) -> int:
    from ..formats import plan_from_grid_csv, read_text
    from ..plan import check

    scenario = read_input(args)
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
