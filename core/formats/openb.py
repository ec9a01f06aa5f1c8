"""Alibaba's openb pod list (cluster-trace-gpu-v2023): one pod per row, times in seconds from the
trace start.

`num_gpu` GPUs per pod; when `num_gpu` is 1, `gpu_milli` is the share of that GPU the pod holds
(GPU sharing), so it counts `gpu_milli / 1000`. `creation_time` is when the pod was created,
`scheduled_time` when it started (empty: never scheduled) and `deletion_time` when it ended.
An LS (latency-sensitive) pod is serving demand from its creation to its deletion, so one
never scheduled is demand the cluster did not serve. The node list beside the pod list
(`openb_node_list_*.csv`, column `gpu`) gives the cluster's GPUs for the summary.

A node list given with `nodes=` (`gpuplan import --nodes`) makes the cluster: its node groups
(`core.formats.node_list`), all of it unless `--gpus` asks for plain GPUs. Then `gpu_spec` (the
models a pod may use, `|`-separated, empty = any) is the job's `gpu_types`; models the node list
lacks are left out of it, and a pod whose gpu_spec names none of the node list's models cannot
run on that cluster: its row is skipped ("gpu_spec names no model of the node list"), and a
note names the first such row and the models. A pod sharing a GPU (num_gpu 1, gpu_milli < 1000)
is planned as one whole GPU of a node (the model has no GPU sharing); the summary counts them.
Without a node list gpu_spec is ignored (there are no types to name), and the summary says so.

A pod list without the three times (`name,cpu_milli,memory_mib,num_gpu,gpu_milli`, as the FGD
simulator's resampled lists are) is not a history but a packing snapshot: every GPU pod is a
job present at the start that holds its GPUs for the whole window, on the node list's cluster.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..model import MAX_GPUS, ScenarioError
from .history import (
    TraceInfo,
    by_unique,
    check_order,
    empty_table,
    header_of,
    history_reader,
    is_path,
    parse_numbers,
    read_delimited,
    read_source,
    require_columns,
)
from .node_list import NodeList, read_node_list

FORMAT = "openb"
COLUMNS = (
    "name",
    "cpu_milli",
    "memory_mib",
    "num_gpu",
    "gpu_milli",
    "gpu_spec",
    "qos",
    "pod_phase",
    "creation_time",
    "deletion_time",
    "scheduled_time",
)
TIMES = ("creation_time", "deletion_time", "scheduled_time")
_REQUIRED = ("name", "num_gpu", "qos", *TIMES)
_SNAPSHOT_REQUIRED = ("name", "num_gpu")


def sniff(name: str, head: str) -> bool:
    header = set(header_of(head))
    return {"name", "num_gpu", "gpu_milli"} <= header


def read_table(
    source: str | bytes | Path, name: str | None = None, nodes: str | Path | None = None
) -> tuple[pd.DataFrame, TraceInfo]:
    frame, shown = read_delimited(source, name)
    snapshot = not any(c in frame.columns for c in TIMES)
    require_columns(frame, shown, [(c,) for c in (_SNAPSHOT_REQUIRED if snapshot else _REQUIRED)])
    n = len(frame)
    rows = np.arange(2, n + 2)
    table = empty_table(n)
    table["row"] = rows
    table["job_id"] = frame["name"].str.strip().to_numpy()
    table["name"] = table["job_id"]
    table["qos"] = frame["qos"].str.strip().to_numpy() if "qos" in frame else ""
    table["state"] = (
        frame["pod_phase"].str.strip().str.upper().to_numpy() if "pod_phase" in frame else ""
    )

    num_gpu = parse_numbers(frame["num_gpu"], shown, "num_gpu", rows, maximum=MAX_GPUS)
    if "gpu_milli" in frame.columns:
        milli = parse_numbers(frame["gpu_milli"], shown, "gpu_milli", rows)
        bad = np.flatnonzero(milli > 1000)
        if len(bad):
            raise ScenarioError(
                f"{shown}: row {rows[bad[0]]}: gpu_milli must be at most 1000, got "
                f"{frame['gpu_milli'].iat[bad[0]]!r}"
            )
        shared = (num_gpu == 1) & np.isfinite(milli) & (milli > 0)
        gpus = np.where(shared, milli / 1000.0, num_gpu)
    else:
        gpus = num_gpu
    table["gpus"] = np.nan_to_num(gpus, nan=0.0)

    info = TraceInfo(name=shown, format=FORMAT, relative=True, rows=n, snapshot=snapshot)
    if "gpu_spec" in frame.columns:
        table["gpu_types"] = _gpu_spec(frame["gpu_spec"])
    if not snapshot:
        submit = parse_numbers(frame["creation_time"], shown, "creation_time", rows, minimum=None)
        start = parse_numbers(frame["scheduled_time"], shown, "scheduled_time", rows, minimum=None)
        end = parse_numbers(frame["deletion_time"], shown, "deletion_time", rows, minimum=None)
        table["submit"], table["start"], table["end"] = submit, start, end
        check_order(table, shown, "scheduled_time", "deletion_time")
        stamps = np.concatenate([submit, start, end])
        stamps = stamps[np.isfinite(stamps)]
        info.end = float(stamps.max()) if len(stamps) else float("nan")
    if nodes is not None:
        table = _on_node_list(table, info, read_node_list(nodes), rows, gpus)
    info.cluster_gpus = info.node_list["gpus"] if info.node_list else _cluster_gpus(source, None)
    if info.cluster_gpus:
        info.notes.append(f"the node list gives the trace's cluster {info.cluster_gpus:,} GPUs")
    return table, info


read_history = history_reader(read_table)  # options: nodes (the node list)

NO_MODEL = "gpu_spec names no model of the node list"


def _gpu_spec(spec: pd.Series) -> np.ndarray:
    """Each pod's gpu_spec as distinct model names joined by "|" ("" = any model)."""

    def clean(values: np.ndarray) -> np.ndarray:
        out = []
        for text in values:
            names = dict.fromkeys(x.strip() for x in str(text).split("|"))
            out.append("|".join(x for x in names if x))
        return np.array(out, dtype=object)

    return by_unique(spec.fillna("").astype("str"), clean)


def _on_node_list(
    table: pd.DataFrame, info: TraceInfo, node_list: NodeList, rows: np.ndarray, gpus: np.ndarray
) -> pd.DataFrame:
    """The cluster of the node list; gpu_spec kept to its models (pods naming none skipped);
    shared GPUs made whole."""
    info.gpu_types, info.nodes, info.node_list = (
        node_list.gpu_types,
        node_list.nodes,
        node_list.summary(),
    )
    known = {t.name for t in node_list.gpu_types}
    spec = table["gpu_types"].to_numpy(dtype=object)

    def keep_known(values: np.ndarray) -> np.ndarray:
        return np.array(
            ["|".join(x for x in v.split("|") if x in known) if v else "" for v in values],
            dtype=object,
        )

    kept = by_unique(pd.Series(spec), keep_known)
    has_gpus = gpus > 0
    unknown = (spec != kept) & has_gpus
    none_left = unknown & (kept == "") & has_gpus
    if unknown.any():
        first = int(np.flatnonzero(unknown)[0])
        missing = sorted({x for v in spec[unknown] for x in v.split("|")} - known)
        info.notes.append(
            f"gpu_spec of row {rows[first]} ({spec[first]!r}) names "
            f"{'a model' if len(missing) == 1 else 'models'} the node list "
            f"{node_list.name} lacks ({', '.join(missing)}); {int(unknown.sum()):,} pod(s) name "
            f"such models: they may use the others they name, and the "
            f"{int(none_left.sum()):,} naming no other are skipped ({NO_MODEL})"
        )
    table["gpu_types"] = kept
    if none_left.any():
        info.dropped[NO_MODEL] = int(none_left.sum())
        table = table.loc[~none_left].reset_index(drop=True)
        gpus = gpus[~none_left]
    shared = (gpus > 0) & (gpus < 1)
    info.shared_rows = table["row"].to_numpy()[shared]
    table.loc[shared, "gpus"] = 1.0
    return table


def _cluster_gpus(source: str | bytes | Path, nodes: str | Path | None) -> int | None:
    """Total `gpu` of the node list given, or of the one beside a pod list file."""
    if nodes is None:
        if not is_path(source):
            return None
        candidates = sorted(Path(source).parent.glob("openb_node_list*.csv"))
        if not candidates:
            return None
        nodes = candidates[0]
    frame, shown = read_delimited(nodes, None)
    require_columns(frame, shown, [("gpu",)])
    read_source(nodes)
    gpus = parse_numbers(frame["gpu"], shown, "gpu", np.arange(2, len(frame) + 2), maximum=MAX_GPUS)
    return int(np.nansum(gpus))
