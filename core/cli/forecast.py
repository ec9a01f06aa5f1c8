"""`gpuplan forecast`: a demand history's forecast with its interval, as CSV."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..model import MAX_STEPS
from .arguments import EXIT_OK, horizon_hours, level, non_negative_float, out_file, write_file


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("history_csv")
    parser.add_argument("--column", help="column to forecast (default: the first numeric)")
    parser.add_argument(
        "--horizon",
        type=horizon_hours,
        default=168,
        metavar="H",
        help=f"hours to forecast (default 168, at most {MAX_STEPS:,})",
    )
    parser.add_argument(
        "--level",
        type=level,
        default=0.9,
        metavar="L",
        help="central interval level, 0.001..0.999 (default 0.9)",
    )
    parser.add_argument(
        "--max",
        type=non_negative_float,
        metavar="N",
        help="the most demand can be (a service's gpus_max, a cluster's GPUs): every mean, "
        "lower and upper stays within 0..N",
    )
    parser.add_argument(
        "--out", type=out_file, metavar="CSV", help="write the forecast here, not stdout"
    )


def run(args: argparse.Namespace) -> int:
    # (a second or two: the statistics libraries load, then the members fit at several origins)
    print(f"forecast: fitting {Path(args.history_csv).name} ...", file=sys.stderr, flush=True)
    from ..forecast.demand import forecast_file

    table, warnings = forecast_file(
        args.history_csv, column=args.column, horizon=args.horizon, level=args.level, cap=args.max
    )
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    report = table.attrs.get("report")
    for line in report.lines() if report is not None else []:
        if not line.startswith(("anomaly:", "repair:")):  # both are among the warnings above
            print(f"forecast: {line}", file=sys.stderr)
    text = table.to_csv(index=False, float_format="%.4f", date_format="%Y-%m-%dT%H:%M:%S")
    if args.out:
        write_file(args.out, text)
    else:
        sys.stdout.write(text)
    return EXIT_OK
