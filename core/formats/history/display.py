"""What the pages show: the demand chart's data and the one-screen summary."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .table import ImportResult


def demand_frame(result: ImportResult) -> pd.DataFrame:
    """One row per step: each real-time group's demand and the GPUs really held (as-run),
    with the step's start time where the trace has calendar times."""
    scenario = result.scenario
    c = scenario.cluster
    frame = pd.DataFrame({"step": np.arange(c.horizon_steps)})
    if c.start is not None:
        frame["time"] = pd.Timestamp(c.start) + pd.to_timedelta(
            frame["step"] * c.step_minutes, unit="min"
        )
    for job in scenario.realtime_jobs:
        frame[job.id] = job.demand
    per_step = result.as_run["per_step"]
    frame["as_run_batch_gpus"] = per_step["batch_gpus"]
    frame["as_run_realtime_gpus"] = per_step["realtime_gpus"]
    return frame


def format_summary(summary: dict[str, Any], as_run: dict[str, Any]) -> str:
    w, b, t = summary["window"], summary["batch"], summary["trace"]
    lines = [
        f"{summary['file']} ({summary['format']}): {t['gpu_jobs']:,} GPU jobs in "
        f"{t['rows']:,} rows, trace ends {t['end']}"
        + (f", cluster {t['cluster_gpus']:,} GPUs" if t.get("cluster_gpus") else ""),
        f"window {w['start']} .. {w['end']}: {w['steps']} steps of {w['step_minutes']} min on "
        f"{w['gpus']} GPUs ({w['gpus_source']}; peak in use {w['peak_gpus_in_use']:g})",
        "batch jobs: "
        + ", ".join(f"{n} {k}" for k, n in b["by_type"].items())
        + f" = {b['jobs']} ({b['arriving']} arriving, {b['queued_at_start']} queued at the "
        f"start, {b['running_at_start']} running: {b['pinned']} pinned, {b['not_pinned']} not)",
        f"rounded up to a power of two: {b['rounded_up']}; work estimated (never finished): "
        f"{b['work_estimated']}",
        "dropped: " + (", ".join(f"{n} {why}" for why, n in summary["dropped"].items()) or "none"),
        f"real-time: {summary['realtime_jobs']} job(s) in {len(summary['realtime'])} group(s)",
    ]
    for g in summary["realtime"]:
        lines.append(
            f"  {g['id']}: {g['jobs_in_window']} jobs, mean {g['mean_gpus']:g} GPUs, peak "
            f"{g['peak_gpus']:g}, {g['gpu_hours']:g} GPU-h; history {g['history_hours']} h"
        )
    over = (  # (a share of a cluster smaller than what ran: said, not left to puzzle over)
        f", more GPUs than the cluster's {summary['window']['gpus']}: see the note"
        if as_run["over_capacity_steps"]
        else ""
    )
    lines.append(
        f"as-run: utilization {as_run['utilization']:.1%} (real GPU counts "
        f"{as_run['utilization_real_gpus']:.1%}{over}), value {as_run['value']:,.1f}, completed "
        f"{as_run['completed_jobs']}/{as_run['batch_jobs']}, started {as_run['started_jobs']}"
    )
    lines.append(f"  ({as_run['note']})")
    lines.append(f"priority from {summary['priority_from']}")
    lines.extend(f"note: {n}" for n in summary["notes"])
    return "\n".join(lines)
