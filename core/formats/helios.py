"""SenseTime Helios `cluster_log.csv` (HeliosData): one finished job per row.

Columns `job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,
queue`; times are local wall-clock times without an offset, `duration` is the run time in
seconds and `queue` the wait. The virtual cluster (`vc`) stands for the partition and the team.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..model import MAX_GPUS
from .history import (
    TraceInfo,
    check_order,
    empty_table,
    header_of,
    history_reader,
    normalise_state,
    parse_numbers,
    parse_times,
    read_delimited,
    require_columns,
)

FORMAT = "helios"
_REQUIRED = ("job_id", "gpu_num", "submit_time", "start_time", "end_time")


def sniff(name: str, head: str) -> bool:
    header = set(header_of(head))
    return {"job_id", "vc", "gpu_num", "submit_time"} <= header and "type" not in header


def job_log_table(
    source: str | bytes | Path, name: str | None, fmt: str
) -> tuple[pd.DataFrame, TraceInfo, pd.DataFrame, np.ndarray]:
    """The columns Helios and Acme share: (table, info, raw frame, rows) for the caller."""
    frame, shown = read_delimited(source, name)
    require_columns(frame, shown, [(c,) for c in _REQUIRED])
    n = len(frame)
    rows = np.arange(2, n + 2)
    table = empty_table(n)
    table["row"] = rows
    table["job_id"] = frame["job_id"].str.strip().to_numpy()
    for column, source_column in (("name", "job_name"), ("name", "jobname"), ("user", "user")):
        if source_column in frame.columns:
            table[column] = frame[source_column].str.strip().to_numpy()
    if "state" in frame.columns:
        table["state"] = normalise_state(frame["state"])
    table["gpus"] = parse_numbers(frame["gpu_num"], shown, "gpu_num", rows, maximum=MAX_GPUS)
    table["submit"] = parse_times(frame["submit_time"], shown, "submit_time", rows)
    table["start"] = parse_times(frame["start_time"], shown, "start_time", rows)
    end = parse_times(frame["end_time"], shown, "end_time", rows)
    if "duration" in frame.columns:
        duration = parse_numbers(frame["duration"], shown, "duration", rows)
        start = table["start"].to_numpy()
        end = np.where(np.isfinite(end), end, start + duration)
    table["end"] = end
    check_order(table, shown, "start_time", "end_time")
    info = TraceInfo(name=shown, format=fmt, rows=n)
    stamps = table[["submit", "start", "end"]].to_numpy().ravel()
    stamps = stamps[np.isfinite(stamps)]
    info.end = float(stamps.max()) if len(stamps) else float("nan")
    return table, info, frame, rows


def read_table(
    source: str | bytes | Path, name: str | None = None
) -> tuple[pd.DataFrame, TraceInfo]:
    table, info, frame, _ = job_log_table(source, name, FORMAT)
    if "vc" in frame.columns:
        vc = frame["vc"].str.strip().to_numpy()
        table["partition"] = vc
        table["team"] = vc
    return table, info


read_history = history_reader(read_table)
