"""The job table every history format module produces, and what comes back from an import."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ...model import Scenario
from ...nodes import GpuType, NodeGroup

HISTORY_FORMATS = ("slurm", "openb", "alibaba-serving", "kubectl", "helios", "acme")
MAX_HISTORY_BYTES = 2 * 1024**3  # exports are large (the app takes MAX_HISTORY_UPLOAD_MB)
SNIFF_BYTES = 8192
HOUR = 3600.0
DAY = 86400.0

# The job table every format module produces (strings "" where unknown, floats NaN).
TABLE_COLUMNS = (
    "row",  # line in the source file (header = 1) or item number, for messages
    "job_id",
    "name",
    "user",
    "team",
    "partition",
    "qos",
    "priority_class",
    "workload",  # Acme's `type`
    "gpus",  # GPUs held; a share of one GPU for GPU-sharing pods
    "submit",
    "start",
    "end",
    "time_limit",  # seconds
    "priority_raw",  # a scheduler's numeric priority, ranked into 1..10
    "state",
    "gpu_types",  # the GPU types the job may use, "|"-separated; "" = any (SPEC section 8)
)
TEXT_COLUMNS = TABLE_COLUMNS[1:9] + ("state", "gpu_types")
RULE_FIELDS = ("name", "user", "team", "partition", "qos", "priority_class", "workload", "state")


@dataclass
class TraceInfo:
    """About the trace as a whole: where times come from and what was dropped while reading."""

    name: str
    format: str
    relative: bool = False  # times are seconds from the trace start (openb), not epoch seconds
    end: float = math.nan  # the export time: the latest timestamp in the trace
    rows: int = 0
    cluster_gpus: int | None = None  # from a node list, where the format has one
    utc_offset: float = 0.0  # seconds the trace's wall-clock times are ahead of UTC
    dropped: dict[str, int] = field(default_factory=dict)  # rows the reader did not keep, why
    notes: list[str] = field(default_factory=list)
    # A pod list without times is a packing snapshot: every GPU pod present at the start and
    # holding its GPUs for the whole window; nothing "ran", so it has no as-run to compare with.
    snapshot: bool = False
    # The column naming each real-time row's service where the format has one (the 2025 serving
    # trace's app_name): real-time rows are grouped by it, one elastic job per service.
    service_column: str | None = None
    # SPEC section 8: the cluster's types and groups (openb --nodes, or --cluster FILE.json);
    # without them the jobs' `gpu_types` are ignored (`history.typed`).
    gpu_types: tuple[GpuType, ...] = ()
    nodes: tuple[NodeGroup, ...] = ()
    node_list: dict[str, Any] | None = None  # what the node list held, for the summary
    shared_rows: np.ndarray | None = None  # rows of pods sharing a GPU, planned as a whole one


@dataclass(frozen=True)
class ImportResult:
    scenario: Scenario
    as_run: dict[str, Any]
    summary: dict[str, Any]


def empty_table(n: int) -> pd.DataFrame:
    """A job table of n rows with every column at its 'unknown' value."""
    blank = pd.Series(pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), [""])).astype("str")
    out = {c: blank.copy() for c in TEXT_COLUMNS}
    for c in ("gpus", "submit", "start", "end", "time_limit", "priority_raw"):
        out[c] = np.full(n, np.nan)
    out["row"] = np.arange(n, dtype=np.int64)
    return pd.DataFrame(out)[list(TABLE_COLUMNS)]
