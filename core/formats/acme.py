"""Shanghai AI Lab's Acme traces (`trace_seren.csv`, `trace_kalos.csv`, NSDI '24).

As Helios (`job_id,user,node_num,gpu_num,cpu_num,type,state,submit_time,start_time,end_time,
duration,queue,gpu_time`) plus `type`, the LLM workload class (Pretrain, SFT, Evaluation, MLLM,
Debug, Other) that the type rules see as `workload`. Times carry an offset
(`2023-03-01 00:18:22+08:00`); they are read as wall-clock times at the offset of the first time
in the file, so the window and the summary are in the cluster's own local time.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from .helios import job_log_table
from .history import (
    TraceInfo,
    header_of,
    history_reader,
)

FORMAT = "acme"
_OFFSET = re.compile(r"([+-])(\d\d):?(\d\d)$")


def sniff(name: str, head: str) -> bool:
    header = set(header_of(head))
    return {"job_id", "gpu_num", "submit_time", "type"} <= header


def read_table(
    source: str | bytes | Path, name: str | None = None
) -> tuple[pd.DataFrame, TraceInfo]:
    table, info, frame, _ = job_log_table(source, name, FORMAT)
    table["workload"] = frame["type"].str.strip().to_numpy()
    table["team"] = table["user"]
    offset, label = _first_offset(frame["submit_time"])
    if offset:
        for column in ("submit", "start", "end"):
            table[column] = table[column] + offset
        info.end += offset
        info.utc_offset = offset
    info.notes.append(f"times are wall-clock at UTC{label}, the offset of the first row")
    return table, info


read_history = history_reader(read_table)


def _first_offset(times: pd.Series) -> tuple[float, str]:
    for text in times.head(50):
        m = _OFFSET.search(str(text).strip())
        if m:
            sign = 1 if m.group(1) == "+" else -1
            seconds = sign * (int(m.group(2)) * 3600 + int(m.group(3)) * 60)
            return float(seconds), f"{m.group(1)}{m.group(2)}:{m.group(3)}"
    return 0.0, "+00:00"
