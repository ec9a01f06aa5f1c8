"""The demand forecaster on real traces, under the judge's protocol (issue 12).

For every real trace in ../shared/traces (relative to the repository root): fit on 3 weeks of
hourly history, forecast the next 168 hours, at every origin the trace allows (one a day, or one
a week with --weekly), and compare with seasonal naive (the same hour one week earlier, from the
training window as it is, outages included). Prints, per trace: origins, MAE of the forecast and
of seasonal naive, their ratio, the 90% interval's coverage, the mean fit time (wall clock and
this process's CPU time: on a shared machine the wall clock includes waiting); then the worst
and geometric-mean ratio. Actual hours with no value are not scored.

    .venv/bin/python scripts/forecast_backtest.py [--weekly] [--traces DIR]

The series: Philly `active_nodes`; the two Helios virtual clusters' `running_gpus`; and from the
Alibaba openb pod list the latency-sensitive (`LS`) pods' GPUs held per hour, time-weighted (a pod
holds num_gpu * gpu_milli / 1000 GPUs when num_gpu == 1 and gpu_milli < 1000, else num_gpu, from
its scheduled_time, or creation_time when never scheduled, to its deletion_time; seconds from the
trace start, dated here from an arbitrary Monday).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core.forecast.demand import forecast_series, load_history  # noqa: E402

# ../shared/traces beside the repository (a worktree one level deeper looks one more level up)
TRACES = next(
    (
        p / "shared" / "traces"
        for p in (ROOT.parent, ROOT.parent.parent)
        if (p / "shared" / "traces").is_dir()
    ),
    ROOT.parent / "shared" / "traces",
)
WEEK = 168
TRAIN = 3 * WEEK


def openb_ls_gpus(path: Path) -> pd.Series:
    """GPUs held per hour by the trace's LS pods, time-weighted within each hour."""
    table = pd.read_csv(path)
    table = table[table["qos"] == "LS"]
    shared = (table["num_gpu"] == 1) & (table["gpu_milli"] < 1000)
    gpus = np.where(shared, table["num_gpu"] * table["gpu_milli"] / 1000.0, table["num_gpu"])
    start = table["scheduled_time"].fillna(table["creation_time"]).to_numpy(float) / 3600.0
    end = table["deletion_time"].to_numpy(float) / 3600.0
    hours = int(math.ceil(float(end.max())))
    held = np.zeros(hours)
    edges = np.arange(hours + 1, dtype=float)
    for s, e, g in zip(start, end, gpus.astype(float), strict=True):
        if e <= s or g <= 0:
            continue
        lo, hi = int(math.floor(s)), int(math.ceil(e))
        overlap = np.minimum(edges[lo + 1 : hi + 1], e) - np.maximum(edges[lo:hi], s)
        held[lo:hi] += g * np.clip(overlap, 0.0, 1.0)
    index = pd.date_range("2023-01-02", periods=hours, freq="h", name="timestamp")
    return pd.Series(held, index=index, name="ls_gpus")


def real_series(folder: Path = TRACES) -> dict[str, pd.Series]:
    """Every real trace present in `folder`, as an hourly series."""
    out = {}
    for name, file in (
        ("philly active_nodes", "philly_active_nodes_hourly.csv"),
        ("helios vchbv running_gpus", "helios_earth_vchbv_hourly.csv"),
        ("helios vcSoL running_gpus", "helios_earth_vcSoL_hourly.csv"),
    ):
        if (folder / file).exists():
            out[name] = load_history(folder / file)[0]
    if (folder / "openb_pod_list_default.csv").exists():
        out["openb LS GPUs held"] = openb_ls_gpus(folder / "openb_pod_list_default.csv")
    return out


def backtest(series: pd.Series, spacing: int = 24, level: float = 0.9) -> dict[str, float]:
    """Pooled MAE, seasonal-naive MAE, coverage and fit time over every origin."""
    values = series.to_numpy(dtype=float)
    errors, naive, inside, seconds, cpu = [], [], [], [], []
    origins = range(TRAIN, len(values) - WEEK + 1, spacing)
    for origin in origins:
        train = series.iloc[origin - TRAIN : origin]
        actual = values[origin : origin + WEEK]
        clock, cpu_clock = time.perf_counter(), time.process_time()
        forecast = forecast_series(train, WEEK, level)
        seconds.append(time.perf_counter() - clock)
        cpu.append(time.process_time() - cpu_clock)
        last_week = train.interpolate(limit_direction="both").to_numpy()[-WEEK:]
        seen = np.isfinite(actual)
        errors.append(np.abs(forecast["mean"].to_numpy() - actual)[seen])
        naive.append(np.abs(last_week - actual)[seen])
        lower, upper = forecast["lower"].to_numpy(), forecast["upper"].to_numpy()
        inside.append(((actual >= lower) & (actual <= upper))[seen])
    mae = float(np.concatenate(errors).mean())
    naive_mae = float(np.concatenate(naive).mean())
    return {
        "origins": len(seconds),
        "mae": mae,
        "naive_mae": naive_mae,
        "ratio": mae / naive_mae,
        "coverage": float(np.concatenate(inside).mean()),
        "fit_s": float(np.mean(seconds)),
        "cpu_s": float(np.mean(cpu)),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weekly", action="store_true", help="one origin a week, not a day")
    parser.add_argument("--traces", type=Path, default=TRACES)
    args = parser.parse_args()
    series = real_series(args.traces)
    if not series:
        print(f"no traces in {args.traces}", file=sys.stderr)
        return 1
    spacing = WEEK if args.weekly else 24
    print(f"fit 3 weeks, forecast 168 h, one origin every {spacing} h; 90% interval")
    header = ("origins", "MAE", "naive", "ratio", "cover", "fit s", "cpu s")
    widths = (7, 9, 9, 6, 6, 6, 6)
    print(f"{'trace':28} " + " ".join(f"{h:>{w}}" for h, w in zip(header, widths, strict=True)))
    ratios = []
    for name, s in series.items():
        r = backtest(s, spacing)
        ratios.append(r["ratio"])
        print(
            f"{name:28} {r['origins']:7d} {r['mae']:9.3f} {r['naive_mae']:9.3f} "
            f"{r['ratio']:6.3f} {r['coverage']:6.3f} {r['fit_s']:6.3f} {r['cpu_s']:6.3f}"
        )
    geo = math.exp(float(np.mean(np.log(ratios))))
    print(f"worst ratio {max(ratios):.3f}, geometric mean {geo:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
