"""Alibaba's 2025 GPU-disaggregated serving trace (cluster-trace-gpu-v2025, NSDI '25): one
instance per row, times in seconds from the trace start.

Every instance is latency-sensitive serving. `role` HN instances hold `gpu_request` GPUs and
become one real-time job per service (`app_name`), whose demand is the time-weighted GPUs of
its instances up in each step; `role` CN instances hold none and are counted and skipped.
The trace's empty fields mean: `creation_time` and `scheduled_time` empty, the instance
existed before the trace began (it is up from the trace start); `deletion_time` empty, it was
still up at the trace's end.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..model import MAX_GPUS, ScenarioError
from .history import (
    TraceInfo,
    check_order,
    empty_table,
    header_of,
    history_reader,
    parse_numbers,
    read_delimited,
    require_columns,
)

FORMAT = "alibaba-serving"
ROLES = ("HN", "CN")  # GPU (heterogeneous) nodes' instances, CPU nodes' instances
_REQUIRED = (
    "instance_sn",
    "role",
    "app_name",
    "gpu_request",
    "creation_time",
    "scheduled_time",
    "deletion_time",
)


def sniff(name: str, head: str) -> bool:
    header = set(header_of(head))
    return {"instance_sn", "role", "app_name", "gpu_request", "creation_time"} <= header


def read_table(
    source: str | bytes | Path, name: str | None = None
) -> tuple[pd.DataFrame, TraceInfo]:
    frame, shown = read_delimited(source, name)
    require_columns(frame, shown, [(c,) for c in _REQUIRED])
    n = len(frame)
    rows = np.arange(2, n + 2)
    role = frame["role"].str.strip().str.upper()
    bad = np.flatnonzero(~role.isin(ROLES).to_numpy())
    if len(bad):
        raise ScenarioError(
            f"{shown}: row {rows[bad[0]]}: role must be HN (GPU) or CN (CPU), got "
            f"{frame['role'].iat[bad[0]]!r}"
        )
    table = empty_table(n)
    table["row"] = rows
    table["job_id"] = frame["instance_sn"].str.strip().to_numpy()
    table["name"] = table["job_id"]
    table["qos"] = "LS"  # every instance serves: the default rules make it real-time
    table["workload"] = frame["app_name"].str.strip().to_numpy()
    table["partition"] = role.to_numpy()
    gpus = parse_numbers(frame["gpu_request"], shown, "gpu_request", rows, maximum=MAX_GPUS)
    table["gpus"] = np.where(role.to_numpy() == "HN", np.nan_to_num(gpus, nan=0.0), 0.0)

    created = parse_numbers(frame["creation_time"], shown, "creation_time", rows, minimum=None)
    started = parse_numbers(frame["scheduled_time"], shown, "scheduled_time", rows, minimum=None)
    end = parse_numbers(frame["deletion_time"], shown, "deletion_time", rows, minimum=None)
    stamps = np.concatenate([created, started, end])
    stamps = stamps[np.isfinite(stamps)]
    origin = min(0.0, float(stamps.min())) if len(stamps) else 0.0
    before = ~np.isfinite(created) & ~np.isfinite(started)  # up before the trace began
    table["submit"] = np.where(before, origin, created)
    table["start"] = np.where(before, origin, np.where(np.isfinite(started), started, np.nan))
    table["end"] = end
    check_order(table, shown, "scheduled_time", "deletion_time")
    info = TraceInfo(name=shown, format=FORMAT, relative=True, rows=n, service_column="workload")
    info.end = float(stamps.max()) if len(stamps) else float("nan")
    cpu = int((role == "CN").sum())
    up_before = int((before & (role.to_numpy() == "HN")).sum())
    info.notes.append(
        f"serving trace: every instance is latency-sensitive; {cpu:,} CN (CPU) instances are "
        f"counted and skipped (no GPUs); {up_before:,} GPU instances were up before the trace "
        "began (empty creation_time), and an empty deletion_time is up to the trace's end"
    )
    return table, info


read_history = history_reader(read_table)
