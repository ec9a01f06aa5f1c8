"""The Workload page's node table (SPEC section 8): node groups and their GPU types as one table,
and back (pure, no streamlit).

One row per node group; a type's speed, memory and price sit on each row of that type, so a
planner edits the cluster in one place. A type on several rows must say the same on each. The
cluster's GPUs are the sum of the groups' nodes x GPUs per node.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import pandas as pd

from .model import Cluster, Scenario, ScenarioError, shown
from .nodes import GpuType, NodeGroup, groups_of

# (column, label, what a cell holds): the table's columns in order.
NODE_COLUMNS = (
    ("group", "group", "a name for these nodes, e.g. h100x8"),
    ("gpu_type", "type", "the GPU model, e.g. H100; a new name adds a type (give its speed)"),
    ("gpus_per_node", "GPUs per node", "GPUs in each node, a whole number >= 1"),
    ("count", "nodes", "how many such nodes, a whole number >= 0"),
    ("speed", "speed", "work per GPU-hour in reference GPU-hours (> 0; the reference is 1)"),
    ("memory_gb", "memory GB", "optional: memory per GPU, for jobs' min_gpu_memory_gb"),
    ("cost_per_gpu_hour", "price per GPU-hour", "optional: overrides the policy's GPU price"),
)
COLUMN_NAMES = tuple(c for c, _, _ in NODE_COLUMNS)
LABELS = {c: label for c, label, _ in NODE_COLUMNS}
_TYPE_FIELDS = ("speed", "memory_gb", "cost_per_gpu_hour")


def node_table(cluster: Cluster) -> pd.DataFrame:
    """One row per node group, its type's speed, memory and price beside it (empty without
    nodes)."""
    rows = [
        {
            "group": g.name,
            "gpu_type": g.gpu_type.name,
            "gpus_per_node": g.gpus_per_node,
            "count": g.count,
            "speed": g.gpu_type.speed,
            "memory_gb": g.gpu_type.memory_gb,
            "cost_per_gpu_hour": g.gpu_type.cost_per_gpu_hour,
        }
        for g in (groups_of(cluster) if cluster.nodes else ())
    ]
    table = pd.DataFrame(rows, columns=list(COLUMN_NAMES))
    for c in ("group", "gpu_type"):
        table[c] = table[c].astype("string")
    for c in ("gpus_per_node", "count"):
        table[c] = pd.array(table[c].tolist(), dtype="Int64")
    for c in _TYPE_FIELDS:
        table[c] = pd.array([_number(v) for v in table[c].tolist()], dtype="Float64")
    return table


def one_group(cluster: Cluster) -> Cluster:
    """A cluster without nodes described as nodes: one node of all its GPUs, of one type at
    speed 1 (it plans exactly as before; a starting point for the node table)."""
    if cluster.nodes:
        return cluster
    gpu = GpuType("GPU", 1.0)
    return replace(cluster, gpu_types=(gpu,), nodes=(NodeGroup("node", "GPU", cluster.gpus, 1),))


def cluster_words(cluster: Cluster) -> str:
    """'2 x 8 H100 (h100x8) + 4 x 4 A10 (a10x4) = 32 GPUs'; '8 GPUs' without nodes."""
    if not cluster.nodes:
        return f"{cluster.gpus} GPUs"
    parts = [f"{n.count} x {n.gpus_per_node} {n.gpu_type} ({n.group})" for n in cluster.nodes]
    return f"{' + '.join(parts)} = {cluster.gpus} GPUs"


@dataclass(frozen=True)
class NodeEdit:
    """What the node table makes: the scenario on the new cluster, or one message naming the
    group (or job) and the field."""

    scenario: Scenario | None
    problem: str | None = None

    @property
    def ok(self) -> bool:
        return self.scenario is not None


def scenario_from_node_table(s: Scenario, table: pd.DataFrame) -> NodeEdit:
    """The scenario on the cluster the table describes (validated with its jobs), or the first
    problem: a bad cell names its group and column, a job that no longer fits names the job."""
    try:
        cluster = cluster_from_node_table(s.cluster, table)
        return NodeEdit(s if cluster == s.cluster else s.replace(cluster=cluster))
    except ScenarioError as e:
        return NodeEdit(None, shown(e.problems[0]))


def cluster_from_node_table(base: Cluster, table: pd.DataFrame) -> Cluster:
    """The cluster of `base`'s horizon with the table's groups and types; ScenarioError naming
    the group and the column at the first bad cell."""
    known = {t.name: t for t in base.gpu_types}
    types: dict[str, GpuType] = {}
    first_row: dict[str, str] = {}  # type -> the group that defined it first
    groups: list[NodeGroup] = []
    if len(table) == 0:
        raise ScenarioError(
            "the node table is empty: add a group (group, type, GPUs per node, nodes)"
        )
    for k, (_, row) in enumerate(table.iterrows()):
        name = _text(row.get("group"))
        if not name:
            raise ScenarioError(f"row {k + 1}: group is empty (give the nodes a name)")
        owner = f"group '{name}'"
        if name in {g.group for g in groups}:
            raise ScenarioError(f"{owner}: group names another row too (names must differ)")
        type_name = _text(row.get("gpu_type"))
        if not type_name:
            raise ScenarioError(f"{owner}: type is empty (name the GPU model, e.g. H100)")
        gpus_per_node = _whole(owner, "GPUs per node", row.get("gpus_per_node"), minimum=1)
        count = _whole(owner, "nodes", row.get("count"), minimum=0)
        gpu_type = _row_type(owner, type_name, row, known, types.get(type_name))
        if type_name in types and types[type_name] != gpu_type:
            field = next(
                f for f in _TYPE_FIELDS if getattr(types[type_name], f) != getattr(gpu_type, f)
            )
            raise ScenarioError(
                f"{owner}: {LABELS[field]} {_cell(getattr(gpu_type, field))} differs from "
                f"{_cell(getattr(types[type_name], field))} on group '{first_row[type_name]}' "
                f"of the same type {type_name} (a type has one {LABELS[field]})"
            )
        types.setdefault(type_name, gpu_type)
        first_row.setdefault(type_name, name)
        groups.append(NodeGroup(name, type_name, gpus_per_node, count))
    gpus = sum(g.gpus for g in groups)
    if gpus < 1:
        raise ScenarioError(
            "the node table holds no GPUs (every group has 0 nodes): give a group at least one node"
        )
    return Cluster(
        gpus=gpus,
        step_minutes=base.step_minutes,
        horizon_steps=base.horizon_steps,
        start=base.start,
        gpu_types=tuple(types.values()),
        nodes=tuple(groups),
    )


def _row_type(
    owner: str, name: str, row: Any, known: dict[str, GpuType], above: GpuType | None
) -> GpuType:
    """The row's type: its speed, memory and price cells, empty ones as a row above of the same
    type has them; a name the cluster does not know needs its speed (a typo would otherwise add
    a type at speed 1 unsaid)."""
    if above is not None:
        row = {f: _number(row.get(f)) for f in _TYPE_FIELDS}
        row = {f: getattr(above, f) if v is None else v for f, v in row.items()}
    speed = _number(row.get("speed"))
    if speed is None:
        if name not in known:
            names = ", ".join(known) or "none"
            raise ScenarioError(
                f"{owner}: type '{shown(name)[:40]}' is not a GPU type of the cluster (known: "
                f"{names}); give its speed to add it"
            )
        speed = known[name].speed
    if not math.isfinite(speed) or speed <= 0:
        raise ScenarioError(f"{owner}: speed must be > 0, got {_cell(speed)}")
    fields: dict[str, float | None] = {}
    for field in ("memory_gb", "cost_per_gpu_hour"):
        value = _number(row.get(field))
        if value is not None and (not math.isfinite(value) or value < 0):
            raise ScenarioError(f"{owner}: {LABELS[field]} must be >= 0, got {_cell(value)}")
        fields[field] = value
    return GpuType(name, float(speed), fields["memory_gb"], fields["cost_per_gpu_hour"])


def _whole(owner: str, label: str, value: Any, *, minimum: int) -> int:
    number = _number(value)
    if number is None:
        raise ScenarioError(f"{owner}: {label} is empty (a whole number >= {minimum})")
    if not math.isfinite(number) or number != int(number) or number < minimum:
        raise ScenarioError(
            f"{owner}: {label} must be a whole number >= {minimum}, got {_cell(number)}"
        )
    return int(number)


def _text(value: Any) -> str:
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return ""
    return str(value).strip()


def _number(value: Any) -> float | None:
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return None
    if isinstance(value, str):
        if not value.strip():
            return None
        try:
            return float(value)
        except ValueError:
            return math.nan  # refused by every check, with the group and the column
    return float(value)


def _cell(value: float | None) -> str:
    return "empty" if value is None else f"{value:g}"
