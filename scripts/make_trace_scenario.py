"""Write data/scenarios/rolling-philly.json: three days whose real-time demand is a real trace.

The serving job's demand is Microsoft Philly's hourly active nodes (out of 420), scaled to the
16-GPU cluster (`SCALE` GPUs per node: the busiest hour of the trace becomes about 10.5 GPUs):
27 days of it (2017-10-03 to 2017-10-29, with the real outage of 2017-10-26 and a few empty hours,
interpolated) are the job's `history`, and the next three days (Monday 2017-10-30 on) its actual
`demand`, revealed hour by hour to `gpuplan simulate`. The scenario's calendar starts on a Monday
too, so weekdays line up. The batch work is rolling-surge's (scripts/make_rolling_example.py)
plus a second wave of the same queued jobs six hours later with mirrored priorities (10 - p):
with the serving share at 4-6 GPUs of 16, one wave leaves the cluster half idle at night, and a
planner's choices only matter when the queue is contended.
Reads ../shared/traces (relative to the repository, or one level further up from a worktree);
the written file is what the tests and the app use, so the trace is not needed afterwards.

    .venv/bin/python scripts/make_trace_scenario.py
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
TRACES = next(
    (
        p / "shared" / "traces"
        for p in (ROOT.parent, ROOT.parent.parent)
        if (p / "shared" / "traces").is_dir()
    ),
    ROOT.parent / "shared" / "traces",
)
OUT = ROOT / "data" / "scenarios" / "rolling-philly.json"
SOURCE = ROOT / "data" / "scenarios" / "rolling-surge.json"
DAYS = 3
HISTORY_HOURS = 27 * 24  # 2017-10-03 00:00 .. 2017-10-29 23:00
NODES = 420
SCALE = 6.0 / NODES  # GPUs per active node


def rolling_workload(history: list[float], actual: list[float], serving_id: str) -> dict:
    """The cluster, policy and jobs of a rolling scenario around a real serving series: the
    serving job (`history` before step 0, `demand` revealed hour by hour) beside rolling-surge's
    batch work and its second wave (scripts/rolling_real_demand.py builds its windows so too)."""
    held = min(max(math.ceil(history[-1]), 2), 8)
    base = json.loads(SOURCE.read_text(encoding="utf-8"))
    batch = [job for job in base["jobs"] if job["type"] != "realtime"]
    second_wave = [
        {
            **job,
            "id": f"{job['id']}-late",
            "arrival_step": min(DAYS * 24 - 1, job["arrival_step"] + 6),
            "priority": max(1, 10 - job["priority"]),
        }
        for job in batch
        if "running" not in job
    ]
    serving = {
        "id": serving_id,
        "type": "realtime",
        "priority": 8,
        "gpus_min": 2,
        "gpus_max": 12,
        "swap_cap": 2,
        # what it held before step 0: the last hour's need, on the top GPUs (sft-70b runs on 0-7)
        "previous_gpus": list(range(16 - held, 16)),
        "demand": actual,
        "history": history,
    }
    return {
        "cluster": dict(base["cluster"]),
        "policy": dict(base["policy"]),
        "jobs": [serving, *batch, *second_wave],
    }


def main() -> None:
    trace = pd.read_csv(TRACES / "philly_active_nodes_hourly.csv", parse_dates=["timestamp"])
    nodes = trace.set_index("timestamp")["active_nodes"].asfreq("h").interpolate()
    assert nodes.index[HISTORY_HOURS] == pd.Timestamp("2017-10-30 00:00")  # a Monday
    gpus = (nodes * SCALE).round(2)
    history = gpus.iloc[:HISTORY_HOURS].tolist()
    actual = gpus.iloc[HISTORY_HOURS : HISTORY_HOURS + DAYS * 24].tolist()
    scenario = {
        "name": "rolling-philly",
        "description": (
            "Three days on 16 GPUs for `gpuplan simulate` whose serving demand is a real trace: "
            "Philly's active nodes scaled to GPUs, 27 days of history with a real outage; "
            "two waves of batch work."
        ),
        **rolling_workload(history, actual, "philly-serving"),
    }
    OUT.write_text(json.dumps(scenario, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
