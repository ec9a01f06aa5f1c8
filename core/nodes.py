"""Nodes, GPU types and speeds (SPEC section 8): the cluster's groups of nodes, and which blocks
a job may hold on them.

A cluster without `nodes` is one group of all its GPUs on one node of type "gpu" at speed 1, and
every rule here then reduces to section 1's: the legal starts of a block of g are the multiples
of g (`core.planners.blocks.aligned_starts`), every speed is 1, every duration is
`duration_steps`. So the planners can ask these functions on every cluster and a cluster without
nodes plans exactly as it always did.

GPU numbering: groups in file order, their nodes in order, a node's GPUs in order.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .model import BatchJob, Cluster, Job, Scenario

DEFAULT_TYPE = "gpu"
DEFAULT_GROUP = "gpu"


@dataclass(frozen=True)
class GpuType:
    """A GPU model: work per hour in reference GPU-hours, memory and price (both optional)."""

    name: str
    speed: float = 1.0
    memory_gb: float | None = None
    cost_per_gpu_hour: float | None = None


@dataclass(frozen=True)
class NodeGroup:
    """`count` nodes of `gpus_per_node` GPUs of one type, as the scenario file gives them."""

    group: str
    gpu_type: str
    gpus_per_node: int
    count: int

    @property
    def gpus(self) -> int:
        return self.gpus_per_node * self.count


@dataclass(frozen=True)
class Group:
    """A node group placed on the GPU numbering: its GPUs are [offset, offset + gpus)."""

    index: int
    name: str
    gpu_type: GpuType
    gpus_per_node: int
    count: int
    offset: int

    @property
    def gpus(self) -> int:
        return self.gpus_per_node * self.count

    @property
    def end(self) -> int:
        return self.offset + self.gpus

    def node_of(self, gpu: int) -> int:
        """The node index (within the group) of one of its GPUs."""
        return (gpu - self.offset) // self.gpus_per_node

    def node_name(self, node: int) -> str:
        return f"{self.name}-{node}"


def groups_of(cluster: Cluster) -> tuple[Group, ...]:
    """The cluster's groups with their first GPUs (one default group without nodes)."""
    return _groups(cluster.gpus, cluster.nodes, cluster.gpu_types)


@functools.lru_cache(maxsize=64)
def _groups(gpus: int, nodes: tuple[NodeGroup, ...], types: tuple[GpuType, ...]):
    if not nodes:
        return (Group(0, DEFAULT_GROUP, GpuType(DEFAULT_TYPE), gpus, 1, 0),)
    by_name = {t.name: t for t in types}
    out, offset = [], 0
    for k, n in enumerate(nodes):
        out.append(Group(k, n.group, by_name[n.gpu_type], n.gpus_per_node, n.count, offset))
        offset += n.gpus
    return tuple(out)


def type_names(cluster: Cluster) -> tuple[str, ...]:
    """The GPU types in the order the cluster lists them (the default type without nodes)."""
    if not cluster.nodes:
        return (DEFAULT_TYPE,)
    return tuple(t.name for t in cluster.gpu_types)


def gpu_group_index(cluster: Cluster) -> np.ndarray:
    """Per GPU, the index of its group."""
    return _gpu_group_index(groups_of(cluster), cluster.gpus)


@functools.lru_cache(maxsize=64)
def _gpu_group_index(groups: tuple[Group, ...], gpus: int) -> np.ndarray:
    out = np.zeros(gpus, dtype=np.int64)
    for g in groups:
        out[g.offset : g.end] = g.index
    out.setflags(write=False)
    return out


def group_of_gpu(cluster: Cluster, gpu: int) -> Group:
    return groups_of(cluster)[int(gpu_group_index(cluster)[gpu])]


def allowed_groups(cluster: Cluster, job: Job) -> tuple[Group, ...]:
    """The groups whose type the job may use (its `gpu_types`, enough memory)."""
    return tuple(g for g in groups_of(cluster) if type_allowed(job, g.gpu_type))


def type_allowed(job: Job, gpu_type: GpuType) -> bool:
    names = getattr(job, "gpu_types", None)
    if names is not None and gpu_type.name not in names:
        return False
    need = getattr(job, "min_gpu_memory_gb", None)
    return need is None or (gpu_type.memory_gb is not None and gpu_type.memory_gb >= need)


def allowed_gpus(cluster: Cluster, job: Job) -> int:
    """The bitset of the GPUs a job may hold."""
    mask = 0
    for g in allowed_groups(cluster, job):
        mask |= ((1 << g.gpus) - 1) << g.offset
    return mask


def job_speed(job: BatchJob, gpu_type: GpuType) -> float:
    """Work per GPU-hour of this job on this type: its own factor, else the type's speed."""
    for name, factor in getattr(job, "speed", None) or ():
        if name == gpu_type.name:
            return float(factor)
    return float(gpu_type.speed)


def group_starts(group: Group, g: int, multi_node: bool = True) -> int:
    """The bitset of the first GPUs of the legal blocks of g in a group (section 8's rule): in
    one node at an offset that is a multiple of g, or whole consecutive nodes from a node index
    that is a multiple of their number."""
    return _group_starts(group.offset, group.gpus_per_node, group.count, g, multi_node)


@functools.lru_cache(maxsize=4096)
def _group_starts(offset: int, per_node: int, count: int, g: int, multi_node: bool) -> int:
    mask = 0
    if g <= per_node:
        within = 0
        for k in range(0, per_node - g + 1, g):
            within |= 1 << k
        for node in range(count):
            mask |= within << (offset + node * per_node)
    elif multi_node and g % per_node == 0:
        span = g // per_node
        for node in range(0, count - span + 1, span):
            mask |= 1 << (offset + node * per_node)
    return mask


def block_starts(
    cluster: Cluster, job: Job, g: int, groups: tuple[Group, ...] | None = None
) -> int:
    """The bitset of the first GPUs of the blocks of g the job may hold, over its allowed groups
    (or over `groups`)."""
    multi = getattr(job, "multi_node", True)
    mask = 0
    for group in allowed_groups(cluster, job) if groups is None else groups:
        mask |= group_starts(group, g, multi)
    return mask


def block_problem(cluster: Cluster, job: Job, gpu_start: int, g: int) -> str | None:
    """Why [gpu_start, gpu_start + g) is not a legal block for the job, or None when it is."""
    if gpu_start < 0 or gpu_start + g > cluster.gpus:
        return (
            f"block [{gpu_start}, {gpu_start + g}) lies outside the cluster's {cluster.gpus} GPUs"
        )
    group = group_of_gpu(cluster, gpu_start)
    if gpu_start + g > group.end:
        return (
            f"block [{gpu_start}, {gpu_start + g}) crosses from group '{group.name}' into the "
            f"next group"
        )
    if not type_allowed(job, group.gpu_type):
        return (
            f"block [{gpu_start}, {gpu_start + g}) is on type '{group.gpu_type.name}', which "
            f"the job may not use"
        )
    if group_starts(group, g, getattr(job, "multi_node", True)) >> gpu_start & 1:
        return None
    if not cluster.nodes:
        return f"block [{gpu_start}, {gpu_start + g}) of {g} GPUs is not aligned to its size"
    n = group.gpus_per_node
    if g <= n:
        return (
            f"block [{gpu_start}, {gpu_start + g}) of {g} GPUs is not at an offset that is a "
            f"multiple of {g} within one node of group '{group.name}' ({n} GPUs a node)"
        )
    if not getattr(job, "multi_node", True):
        return (
            f"block [{gpu_start}, {gpu_start + g}) spans nodes of group '{group.name}' "
            f"({n} GPUs a node) and the job has multi_node false"
        )
    return (
        f"block [{gpu_start}, {gpu_start + g}) of {g} GPUs is not {g / n:g} whole nodes"
        f" of group '{group.name}' ({n} GPUs a node) from a node index that is a "
        f"multiple of their number"
    )


@dataclass(frozen=True)
class Option:
    """One way a batch job may run: g GPUs in a group, the legal first GPUs, its duration
    and its speed there."""

    gpus: int
    group: Group
    starts: int
    duration: int
    speed: float


def duration_on(job: BatchJob, gpus: int, step_minutes: int, speed: float) -> int:
    """Steps a batch job needs on a block of `gpus` of speed `speed` (section 8)."""
    from .model import duration_steps

    if speed == 1.0 or (job.running is not None and gpus == job.running.gpus):
        return duration_steps(job, gpus, step_minutes)
    return max(1, math.ceil(job.gpu_hours * 60.0 / (gpus * speed * step_minutes) - 1e-9))


def options(scenario: Scenario, job: BatchJob) -> list[Option]:
    """Every (size, group) a batch job may run on, sizes ascending, groups in order; a running
    job's only option is its running block's size and group."""
    c = scenario.cluster
    if job.running is not None:
        group = group_of_gpu(c, job.running.gpu_start)
        g = job.running.gpus
        return [
            Option(
                g,
                group,
                1 << job.running.gpu_start,
                job.running.remaining_steps,
                job_speed(job, group.gpu_type),
            )
        ]
    out = []
    groups = allowed_groups(c, job)
    multi = getattr(job, "multi_node", True)
    for g in job.sizes():
        for group in groups:
            starts = group_starts(group, g, multi)
            if starts:
                s = job_speed(job, group.gpu_type)
                out.append(Option(g, group, starts, duration_on(job, g, c.step_minutes, s), s))
    return out


def placement_speed(scenario: Scenario, job: BatchJob, gpu_start: int) -> float:
    return job_speed(job, group_of_gpu(scenario.cluster, gpu_start).gpu_type)


def needs_nodes(scenario: Scenario) -> bool:
    """Whether the planners must plan node groups: false for a cluster without nodes, and for
    one whose nodes change nothing: one group of speed 1 for every job, whose legal blocks are
    section 1's aligned blocks (one node, or nodes of a power-of-two size, and no job held to
    one node beyond a node's size). There the section 1 planners run, and plan exactly what
    they plan without the nodes."""
    c = scenario.cluster
    if not c.nodes:
        return False
    if len(c.nodes) != 1:
        return True
    (group,) = groups_of(c)
    n = group.gpus_per_node
    if group.count > 1 and n & (n - 1):
        return True
    for job in scenario.jobs:
        if not type_allowed(job, group.gpu_type):
            return True  # (refused at load: no allowed group)
        if hasattr(job, "multi_node"):
            if job_speed(job, group.gpu_type) != 1.0:
                return True
            if not job.multi_node and group.count > 1 and job.gpus_max > n:
                return True
    return False
