"""What the pages show: the demand chart's data and the one-screen summary."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .table import ImportResult
from .typed import nodes_lines


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


def rows_line(summary: dict[str, Any]) -> str:
    """`rows: N = U used + n reason + ...`: every row of the file, used or skipped and why."""
    rows = summary["rows"]
    skipped = "".join(f" + {n:,} {why}" for why, n in rows["skipped"].items())
    return f"rows: {rows['total']:,} = {rows['used']:,} used{skipped}"


def rounding_line(summary: dict[str, Any]) -> str | None:
    """How far scoring as-run on the plans' grid moved its value (None: nothing to say)."""
    r = summary.get("rounding")
    if not r or r["change"] is None or summary.get("snapshot"):
        return None
    return (
        f"rounding to {r['step_minutes']}-minute steps moves as-run's value {r['change']:+.1%} "
        f"({r['value_real_times']:,.1f} on its real times, {r['value_on_grid']:,.1f} on the "
        "plans' grid, which as-run is scored on)"
    )


def format_summary(summary: dict[str, Any], as_run: dict[str, Any]) -> str:
    w, b, t = summary["window"], summary["batch"], summary["trace"]
    ends = "a packing snapshot (no times)" if summary.get("snapshot") else f"trace ends {t['end']}"
    lines = [
        f"{summary['file']} ({summary['format']}): {t['gpu_jobs']:,} GPU jobs in "
        f"{t['rows']:,} rows, {ends}"
        + (f", cluster {t['cluster_gpus']:,} GPUs" if t.get("cluster_gpus") else ""),
        rows_line(summary),
        f"window {w['start']} .. {w['end']}: {w['steps']} steps of {w['step_minutes']} min on "
        f"{w['gpus']} GPUs ({w['gpus_source']}; peak in use {w['peak_gpus_in_use']:g})",
        "batch jobs: "
        + ", ".join(f"{n} {k}" for k, n in b["by_type"].items())
        + f" = {b['jobs']} ({b['arriving']} arriving, {b['queued_at_start']} queued at the "
        f"start, {b['running_at_start']} running: {b['pinned']} pinned, {b['not_pinned']} not)",
        f"rounded up to a power of two: {b['rounded_up']}; "
        + (
            "work: each pod holds its GPUs for the whole window"
            if summary.get("snapshot")
            else f"work estimated (never finished): {b['work_estimated']}"
        ),
        *nodes_lines(summary),
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
    if as_run.get("snapshot"):
        lines.append(f"as-run: none ({as_run['note']})")
    else:
        lines.append(
            f"as-run: utilization {as_run['utilization']:.1%} (real GPU counts "
            f"{as_run['utilization_real_gpus']:.1%}{over}), value {as_run['value']:,.1f}, "
            f"completed {as_run['completed_jobs']}/{as_run['batch_jobs']}, started "
            f"{as_run['started_jobs']}, real-time coverage {as_run['rt_coverage']:.2%}"
        )
        lines.append(f"  ({as_run['note']})")
        rounding = rounding_line(summary)
        if rounding:
            lines.append(rounding)
    lines.append(f"priority from {summary['priority_from']}")
    lines.extend(f"note: {n}" for n in summary["notes"])
    return "\n".join(lines)
