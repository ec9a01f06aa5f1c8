"""`gpuplan workspace`: the saved scenarios and runs of the app's Saved page, from the shell."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..planners import PLANNER_NAMES
from .arguments import EXIT_OK, out_file, write_file


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--workspace",
        metavar="FILE",
        help="the SQLite workspace (default: GPUPLAN_WORKSPACE, else the user's data folder)",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    actions.add_parser("list", help="saved scenarios and their runs")
    save = actions.add_parser("save", help="save a scenario file, optionally with plans")
    save.add_argument("scenario", help="scenario JSON file")
    save.add_argument("--name", help="name to save it under (default: the scenario's name)")
    save.add_argument(
        "--planners", nargs="*", choices=PLANNER_NAMES, default=[], help="also plan and keep runs"
    )
    export = actions.add_parser("export", help="write a saved scenario as JSON")
    export.add_argument("name")
    export.add_argument("--out", type=out_file, metavar="FILE", help="write here instead of stdout")
    delete = actions.add_parser("delete", help="delete a saved scenario and its runs")
    delete.add_argument("name")


def run(args: argparse.Namespace) -> int:
    from ..formats import load_scenario, scenario_to_json
    from ..planners import solve
    from ..workspace import Workspace, WorkspaceError, default_path

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
            write_file(args.out, text)
        else:
            sys.stdout.write(text)
    else:
        ws.load_scenario(args.name)  # an unknown name is an error, not a silent no-op
        ws.delete_scenario(args.name)
        print(f"deleted {args.name!r} from {ws.path}")
    return EXIT_OK
