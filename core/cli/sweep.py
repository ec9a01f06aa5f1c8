"""`gpuplan sweep`: capacity what-ifs, every planner at every point of a grid, on Dask."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ..model import ScenarioError
from ..planners import BASELINE, FAST, PLANNER_NAMES, planner_options
from .arguments import EXIT_OK, number, number_list, out_folder, positive_float
from .inputs import input_arguments, read_input


def add_arguments(parser: argparse.ArgumentParser) -> None:
    input_arguments(parser, cluster=False)
    parser.add_argument(
        "--gpus",
        metavar="L",
        help="cluster sizes, e.g. 8,16,32 (default: the input's own; a CSV pair is read on the "
        "largest, a history's running work placed again on each)",
    )
    parser.add_argument(
        "--nodes",
        metavar="GROUP=LIST",
        action="append",
        help="node counts of a group of the cluster, e.g. a10x4=0,2,4 (repeatable: every "
        "combination is a point; instead of --gpus)",
    )
    parser.add_argument("--demand-scale", metavar="L", help="real-time demand factors, e.g. 1,1.2")
    parser.add_argument("--work-scale", metavar="L", help="batch gpu_hours factors, e.g. 1,1.5")
    parser.add_argument("--penalty", metavar="L", help="penalty weights, e.g. 5,8")
    parser.add_argument("--decay", metavar="L", help="per-step decays, e.g. 0.97")
    parser.add_argument(
        "--planners",
        metavar="L",
        default=f"{BASELINE},{FAST}",
        help=f"planners to run at every point (default {BASELINE},{FAST})",
    )
    engine = parser.add_mutually_exclusive_group()
    engine.add_argument("--workers", metavar="N", help="local worker processes (default: cores)")
    engine.add_argument(
        "--scheduler", metavar="ADDR", help="a running Dask scheduler (or DASK_SCHEDULER_ADDRESS)"
    )
    parser.add_argument("--time-limit", type=positive_float, default=10.0, metavar="S")
    parser.add_argument(
        "--out", type=out_folder, metavar="DIR", required=True, help="writes DIR/sweep.csv"
    )


def run(args: argparse.Namespace) -> int:

    from ..mix import parse_vary
    from ..sweep import (
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
    workers = number("--workers", args.workers, integer=True)
    if workers is not None and workers < 1:
        raise ScenarioError(f"--workers: must be at least 1, got {args.workers}")
    lists = {
        "gpus": number_list("--gpus", args.gpus, integer=True),
        "demand_scale": number_list("--demand-scale", args.demand_scale),
        "work_scale": number_list("--work-scale", args.work_scale),
        "penalty_weight": number_list("--penalty", args.penalty),
        "decay": number_list("--decay", args.decay),
    }
    check_point_lists(**lists)  # (before a large history is read)
    sizes = lists["gpus"]
    scenario = read_input(args, pair_gpus=max(sizes) if sizes else None)
    nodes = parse_vary(args.nodes, scenario, "--nodes") if args.nodes else None
    points = sweep_points(scenario, **lists, nodes=nodes)
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
