"""The openb node list (`openb_node_list_*.csv`: `sn,cpu_milli,memory_mib,gpu,model`) as SPEC
section 8's GPU types and node groups.

One group per (model, GPUs per node), named `<model>x<GPUs per node>` (`V100M16x8`, `T4x2`),
in the order of model then GPUs per node, so the names and the GPU numbering do not depend on
the order of the file's rows. One GPU type per model at speed 1.0: the trace gives no speeds
and none are invented here; no memory either (the trace's models are partly anonymised, `G2`,
`G3`), so `min_gpu_memory_gb` is not something an openb import sets. Nodes without GPUs are
left out and counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..model import MAX_GPUS, ScenarioError
from ..nodes import GpuType, NodeGroup
from .history.reading import parse_numbers, read_delimited, read_source, require_columns


@dataclass(frozen=True)
class NodeList:
    name: str
    gpus: int
    gpu_types: tuple[GpuType, ...]
    nodes: tuple[NodeGroup, ...]
    gpu_nodes: int
    zero_gpu_nodes: int

    def summary(self) -> dict:
        return {
            "file": self.name,
            "gpus": self.gpus,
            "gpu_nodes": self.gpu_nodes,
            "zero_gpu_nodes": self.zero_gpu_nodes,
            "groups": {n.group: {"nodes": n.count, "gpus_per_node": n.gpus_per_node}
                       for n in self.nodes},
        }  # fmt: skip


def read_node_list(source: str | bytes | Path, name: str | None = None) -> NodeList:
    """The node list's GPUs, types and groups (a bad row is named with its field)."""
    read_source(source, name)  # (size and encoding checks, named)
    frame, shown = read_delimited(source, name)
    require_columns(frame, shown, [("gpu",), ("model",)])
    rows = np.arange(2, len(frame) + 2)
    gpus = parse_numbers(frame["gpu"], shown, "gpu", rows, maximum=MAX_GPUS)
    missing = np.flatnonzero(~np.isfinite(gpus))
    if len(missing):
        raise ScenarioError(f"{shown}: row {rows[missing[0]]}: gpu is empty (give 0 for none)")
    broken = np.flatnonzero(gpus != np.floor(gpus))
    if len(broken):
        raise ScenarioError(
            f"{shown}: row {rows[broken[0]]}: gpu must be a whole number, got "
            f"{frame['gpu'].iat[broken[0]]!r}"
        )
    models = frame["model"].str.strip().to_numpy(dtype=object)
    with_gpus = gpus > 0
    unnamed = np.flatnonzero(with_gpus & (models == ""))
    if len(unnamed):
        raise ScenarioError(
            f"{shown}: row {rows[unnamed[0]]}: model is empty on a node with GPUs "
            "(the GPU model names the node's group)"
        )
    if not with_gpus.any():
        raise ScenarioError(f"{shown}: no node with GPUs (column gpu)")
    kinds: dict[tuple[str, int], int] = {}
    for model, n in zip(models[with_gpus], gpus[with_gpus].astype(int), strict=True):
        kinds[(model, int(n))] = kinds.get((model, int(n)), 0) + 1
    order = sorted(kinds)
    groups = tuple(NodeGroup(f"{m}x{n}", m, n, kinds[(m, n)]) for m, n in order)
    types = tuple(GpuType(m) for m in dict.fromkeys(m for m, _ in order))
    total = sum(g.gpus for g in groups)
    if total > MAX_GPUS:
        raise ScenarioError(f"{shown}: {total:,} GPUs, more than the limit of {MAX_GPUS:,}")
    return NodeList(shown, total, types, groups, int(with_gpus.sum()), int((~with_gpus).sum()))
