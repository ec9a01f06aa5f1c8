"""GPU types and node groups in an import (SPEC section 8).

Where the cluster comes from, first match wins:
- `--gpus G`: G plain GPUs, as before section 8; the jobs' types are ignored (a note says so);
- a cluster given with the import (`--cluster FILE.json`) or a node list (openb `--nodes`): its
  groups, every GPU of it; the jobs' types (sacct's typed GRES, a pod's gpu.product or
  gpu_spec) must name its types;
- otherwise plain GPUs, as before: a history says what each job asked for, not what the
  cluster is made of (a type's peak in use is no node count), so the types are ignored and a
  note says how to plan on them.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from ... import nodes as node_rules
from ...model import Cluster
from ...nodes import GpuType, NodeGroup
from .table import TraceInfo

UNTYPED = "untyped"


@dataclass(frozen=True)
class Typing:
    """The import's cluster description: types and groups (none: plain GPUs)."""

    gpu_types: tuple[GpuType, ...] = ()
    nodes: tuple[NodeGroup, ...] = ()
    source: str = ""

    @property
    def gpus(self) -> int:
        return sum(n.gpus for n in self.nodes)


def uses_types(info: TraceInfo, gpus: int | None) -> bool:
    """Whether the jobs' gpu_types are kept: a cluster with node groups will name them."""
    return gpus is None and bool(info.nodes)


def ignored_note(info: TraceInfo, table_types: np.ndarray, gpus: int | None) -> str | None:
    """What the summary says when the trace names GPU types the cluster will not have."""
    n = int((table_types != "").sum())
    if not n or uses_types(info, gpus):
        return None
    why = (
        f"--gpus {gpus} plans on plain GPUs"
        if gpus is not None
        else "no cluster names the types (give --cluster FILE.json, or an openb node list "
        "with --nodes FILE)"
    )
    return f"{n:,} row(s) name GPU types; they are ignored: {why}"


def typing_of(info: TraceInfo, gpus: int | None) -> Typing:
    """The cluster's types and groups (see the module docstring)."""
    if not uses_types(info, gpus):
        return Typing()
    source = f"the node list's {len(info.nodes)} groups" if info.node_list else "--cluster"
    return Typing(info.gpu_types, info.nodes, source)


def job_types(value: str) -> tuple[str, ...] | None:
    return tuple(value.split("|")) if value else None


def unheld(cluster: Cluster, types: np.ndarray, block: np.ndarray, selected: np.ndarray):
    """The selected batch jobs no allowed group holds as one block of their size."""
    out = np.zeros(len(block), dtype=bool)
    if not cluster.nodes:
        return out
    cache: dict[tuple[str, int], bool] = {}
    for i in np.flatnonzero(selected):
        key = (types[i], int(block[i]))
        if key not in cache:
            job = SimpleNamespace(gpu_types=job_types(key[0]), multi_node=True)
            cache[key] = not node_rules.block_starts(cluster, job, key[1])
        out[i] = cache[key]
    return out


def pin_on_groups(
    cluster: Cluster, order: np.ndarray, block: np.ndarray, types: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(first GPU, fits) of running jobs pinned in `order` (largest first): each in the first
    allowed group with room, packed from its first GPU, so blocks stay aligned to their nodes."""
    groups = node_rules.groups_of(cluster)
    fill = [0] * len(groups)
    starts = np.full(len(order), -1, dtype=np.int64)
    for k, i in enumerate(order):
        b = int(block[i])
        allowed = job_types(types[i])
        for group in groups:
            if allowed is not None and group.gpu_type.name not in allowed:
                continue
            at = group.offset + fill[group.index]
            if fill[group.index] + b <= group.gpus and node_rules.group_starts(group, b) >> at & 1:
                starts[k] = at
                fill[group.index] += b
                break
    return starts, starts >= 0


def nodes_summary(info: TraceInfo, typing: Typing, peak: float) -> dict | None:
    """The cluster's groups, and how much of it the window's jobs use at once."""
    if not typing.nodes:
        return None
    out = {
        "source": typing.source,
        "gpus": typing.gpus,
        "groups": {n.group: f"{n.count} x {n.gpus_per_node} {n.gpu_type}" for n in typing.nodes},
        "peak_in_use": round(peak, 3),
    }
    if info.node_list:
        out["zero_gpu_nodes"] = info.node_list["zero_gpu_nodes"]
        out["file"] = info.node_list["file"]
    return out


def shared_summary(info: TraceInfo, j, batch, rt) -> dict | None:
    """Pods sharing a GPU, each planned as one whole GPU: in the file, and among the jobs used."""
    if info.shared_rows is None:
        return None
    used = batch.in_window | rt.live
    rows = j.table["row"].to_numpy()
    return {
        "file": int(len(info.shared_rows)),
        "used": int(np.isin(rows[used], info.shared_rows).sum()),
    }


def nodes_lines(summary: dict) -> list[str]:
    """The summary's lines on node groups and shared GPUs (none without them)."""
    lines = []
    n = summary.get("nodes")
    if n:
        groups = ", ".join(f"{name} ({what})" for name, what in n["groups"].items())
        zero = f"; {n['zero_gpu_nodes']:,} node(s) without GPUs left out" if n.get(
            "zero_gpu_nodes") else ""  # fmt: skip
        lines.append(f"node groups ({n['source']}): {groups}{zero}")
        if n["gpus"] >= 4 * max(1.0, n["peak_in_use"]):
            lines.append(
                f"the cluster holds {n['gpus']:,} GPUs; the window's jobs use at most "
                f"{n['peak_in_use']:g} at once (the pod list may be a sample of the cluster's; "
                "give --gpus G to plan on G plain GPUs instead)"
            )
    s = summary.get("shared_gpus")
    if s and s["file"]:
        lines.append(
            f"GPU sharing: {s['used']:,} pod(s) used here ({s['file']:,} in the file) share a GPU "
            "(gpu_milli < 1000); each was rounded up to a whole GPU"
        )
    return lines
