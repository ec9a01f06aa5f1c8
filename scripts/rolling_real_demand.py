"""The rolling horizon under real demand: fifo against the allocator on every real series
(issue 52).

For every series of scripts/forecast_backtest.py and a few three-day windows of each (after at
least three weeks of history), a scenario is built the way scripts/make_trace_scenario.py builds
rolling-philly: the series scaled so its busiest hour (history and window) is 10.5 GPUs of a
16-GPU cluster, as one serving job (gpus_min 2, gpus_max 12, swap_cap 2) whose `history` is the
weeks before the window and whose `demand` is the window, revealed hour by hour; the batch work
is rolling-surge's in two waves. `gpuplan simulate` runs it with fifo (peak reservation of the
forecast) and with the allocator (demand at a quantile of the forecast). Prints, per window:
real-time coverage and value of each, the coverage gap (allocator minus fifo, in points) and
the value ratio; then the worst gap and the smallest ratio, dev and held-out apart (the
series the forecaster was not chosen on, forecast_backtest.HELD_OUT).

    .venv/bin/python scripts/rolling_real_demand.py [--quantile Q] [--windows N] [--series NAME]
        [--slo TARGET] [--burst-guard auto|on|off]

`--burst-guard`: the allocator's burst guard (core/serving_guard.py; default auto, as simulate).
"""

from __future__ import annotations

import argparse
import math
import runpy
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core import serving_guard  # noqa: E402
from core.formats.scenario_json import scenario_from_dict  # noqa: E402
from core.rolling import simulate  # noqa: E402

BACKTEST = runpy.run_path(str(ROOT / "scripts" / "forecast_backtest.py"))
TRACE_SCENARIO = runpy.run_path(str(ROOT / "scripts" / "make_trace_scenario.py"))
DAYS = TRACE_SCENARIO["DAYS"]
HISTORY = 3 * 168  # hours of history before each window
PEAK_GPUS = 10.5  # the series' busiest hour, scaled


def scenario_for(series: pd.Series, start: int, name: str) -> dict:
    """Three days of `series` from hour `start` as rolling-philly's serving job, scaled."""
    values = series.interpolate(limit_direction="both").to_numpy(dtype=float)
    span = values[start - HISTORY : start + DAYS * 24]
    scale = PEAK_GPUS / max(float(span.max()), 1e-9)
    gpus = np.round(span * scale, 2)
    history, actual = gpus[:HISTORY].tolist(), gpus[HISTORY:].tolist()
    return {
        "name": f"rolling-{name}",
        **TRACE_SCENARIO["rolling_workload"](history, actual, "serving"),
    }


def windows(series: pd.Series, count: int) -> list[int]:
    """Up to `count` window starts, spread over what the series allows, a day apart at least."""
    first, last = HISTORY, len(series) - DAYS * 24
    if last < first:
        return []
    starts = np.linspace(first, last, count).round().astype(int) // 24 * 24
    return sorted({int(s) for s in starts if first <= s <= last})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quantile", type=float, default=None, help="the allocator's quantile")
    parser.add_argument("--windows", type=int, default=2, help="windows per series (default 2)")
    parser.add_argument("--series", help="only series whose name contains this")
    parser.add_argument(
        "--slo", type=float, default=None, help="the policy's rt_coverage_target (issue 13)"
    )
    parser.add_argument(
        "--burst-guard",
        choices=tuple(serving_guard.CHOICES),
        default="auto",
        help="the allocator's burst guard (simulate's; default auto)",
    )
    args = parser.parse_args()
    options = {"burst_guard": serving_guard.CHOICES[args.burst_guard]}
    if args.quantile is not None:
        options["demand_quantile"] = args.quantile
    series = BACKTEST["real_series"](BACKTEST["TRACES"])
    held_out = set(BACKTEST["HELD_OUT"])
    print(
        f"{'series':28} {'start h':>7} {'fifo cov':>8} {'alloc cov':>9} {'gap pt':>7} "
        f"{'fifo val':>9} {'alloc val':>9} {'ratio':>6} guarded"
    )
    rows = []
    clock = time.perf_counter()
    for name, values in series.items():
        if args.series and args.series not in name:
            continue
        for start in windows(values, args.windows):
            raw = scenario_for(values, start, name.split()[1])
            if args.slo is not None:
                raw["policy"]["rt_coverage_target"] = args.slo
            scenario = scenario_from_dict(raw)
            fifo = simulate(scenario, DAYS, "fifo").metrics
            alloc = simulate(scenario, DAYS, "allocator", **options).metrics
            gap = 100 * (alloc["rt_coverage"] - fifo["rt_coverage"])
            ratio = alloc["value"] / fifo["value"] if fifo["value"] > 0 else math.inf
            rows.append((name in held_out, gap, ratio))
            print(
                f"{name:28} {start:7d} {fifo['rt_coverage']:8.4f} {alloc['rt_coverage']:9.4f} "
                f"{gap:+7.2f} {fifo['value']:9.0f} {alloc['value']:9.0f} {ratio:6.2f} "
                f"{'yes' if alloc.get('burst_guarded') else 'no'}",
                flush=True,
            )
    for label, keep in (("dev", False), ("held out", True)):
        part = [(g, r) for h, g, r in rows if h == keep]
        if part:
            gaps, ratios = zip(*part, strict=True)
            print(
                f"{label}: {len(part)} windows, worst coverage gap {min(gaps):+.2f} pt, "
                f"smallest value ratio {min(ratios):.2f}"
            )
    print(f"({time.perf_counter() - clock:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
