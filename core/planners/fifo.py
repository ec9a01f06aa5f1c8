"""The published baselines: FIFO with a peak reservation for real-time serving, and backfill.

Real-time jobs reserve `clip(ceil(max demand), gpus_min, gpus_max)` GPUs for the whole horizon on
the highest-numbered free GPUs; batch jobs go in arrival order (then file order) to their earliest
feasible start on the lowest-indexed free aligned block, the size that starts earliest winning
(ties to the larger). `fifo` never starts a job before the previous placed job's start; `backfill`
lets a later job use an earlier gap that is still free (conservative backfilling). No priority.
"""

from __future__ import annotations

import math

import numpy as np

from ..model import BatchJob, RealtimeJob, Scenario
from ..nodes import allowed_gpus, needs_nodes, options
from ..plan import IDLE, Plan, pin_running
from .blocks import FreeBlocks, NodeFree, bitsets_to_bool, mask_of, top_bits


def plan_fifo(scenario: Scenario, params: object = None) -> Plan:
    """The published baseline (no options: `params` is accepted for the registry's sake)."""
    return _plan_queue(scenario, in_order=True, name="fifo")


def plan_backfill(scenario: Scenario, params: object = None) -> Plan:
    return _plan_queue(scenario, in_order=False, name="backfill")


def _plan_queue(scenario: Scenario, *, in_order: bool, name: str) -> Plan:
    plan = Plan.empty(scenario, name)
    grid = plan.grid
    pin_running(scenario, grid)
    reserve_realtime_peaks(scenario, grid)
    queue = sorted(
        (
            (job.arrival_step, i, job)
            for i, job in enumerate(scenario.jobs)
            if isinstance(job, BatchJob) and job.running is None
        ),
        key=lambda item: item[:2],
    )
    steps = scenario.cluster.horizon_steps
    if needs_nodes(scenario):
        _place_on_nodes(scenario, grid, queue, in_order)
        return plan
    free = FreeBlocks(grid == IDLE, scenario.cluster.gpus, steps)
    previous_start = 0
    for arrival, i, job in queue:
        earliest = max(arrival, previous_start) if in_order else arrival
        # The earliest start over the sizes (ties to the larger: sizes ascend), on the
        # lowest-indexed aligned block free for the whole window (cut at the horizon).
        best = None
        for g in job.sizes():
            found = free.earliest(g, scenario.duration(job, g), earliest)
            if found is not None and (best is None or found[0] <= best[0]):
                best = (found[0], (found[1] & -found[1]).bit_length() - 1, g)
        if best is None:
            continue
        start, gpu_start, gpus = best
        end = min(start + scenario.duration(job, gpus), steps)
        grid[gpu_start : gpu_start + gpus, start:end] = i
        free.take(gpu_start, gpus, start, end)
        previous_start = start
    return plan


def _place_on_nodes(
    scenario: Scenario, grid: np.ndarray, queue: list[tuple[int, int, BatchJob]], in_order: bool
) -> None:
    """The same queue on a cluster with node groups (SPEC section 8): the earliest feasible
    start over every allowed group and size, at the job's speed there; ties to the larger
    size, then the lower GPU index."""
    steps = scenario.cluster.horizon_steps
    free = NodeFree(grid == IDLE, scenario.cluster.gpus, steps)
    previous_start = 0
    for arrival, i, job in queue:
        earliest = max(arrival, previous_start) if in_order else arrival
        best = None  # (start, -size, gpu, duration)
        for option in options(scenario, job):
            view = free.view(option.group, job.multi_node)
            found = view.earliest(option.gpus, option.duration, earliest)
            if found is None:
                continue
            key = (found[0], -option.gpus, (found[1] & -found[1]).bit_length() - 1)
            if best is None or key < best[:3]:
                best = (*key, option.duration)
        if best is None:
            continue
        start, minus_size, gpu_start, duration = best
        gpus = -minus_size
        end = min(start + duration, steps)
        grid[gpu_start : gpu_start + gpus, start:end] = i
        free.take(gpu_start, gpus, start, end)
        previous_start = start


def peak_reservation(job: RealtimeJob) -> int:
    peak = max(job.demand, default=0.0)
    return int(min(max(math.ceil(peak - 1e-9), job.gpus_min), job.gpus_max))


def reserve_realtime_peaks(scenario: Scenario, grid: np.ndarray) -> None:
    """Write `reserved_sets` into the grid."""
    for index, sets in reserved_sets(scenario).items():
        grid[bitsets_to_bool(sets, grid.shape[0]).T] = index


def reserved_sets(scenario: Scenario) -> dict[int, list[int]]:
    """Per real-time job (by grid index), its GPUs at every step as bitsets: a fixed reserved
    set, reached from previous_gpus within swap_cap.

    The reserved set keeps the job's previous GPUs first (highest first), then takes the
    highest-numbered GPUs that are free at step 0 (and so for the whole horizon: running blocks
    only shrink) and not spoken for by another real-time job, those no later real-time job may
    use first (GPU types). GPUs still needed by later jobs' gpus_min are left.
    """
    T = scenario.cluster.horizon_steps
    rt = [(i, job) for i, job in enumerate(scenario.jobs) if isinstance(job, RealtimeJob)]
    running = 0
    for job in scenario.batch_jobs:
        if job.running is not None and job.running.remaining_steps > 0:
            running |= ((1 << job.running.gpus) - 1) << job.running.gpu_start
    spoken_for = 0  # previous sets of all, reserved sets of placed jobs
    for _, job in rt:
        spoken_for |= mask_of(job.previous_gpus or ())
    still_needed = [max(0, job.gpus_min - len(job.previous_gpus or ())) for _, job in rt]
    out = {}
    for k, (i, job) in enumerate(rt):
        previous = mask_of(job.previous_gpus or ())
        target = peak_reservation(job)
        kept = top_bits(previous, target)
        candidates = allowed_gpus(scenario.cluster, job) & ~running & ~spoken_for
        # later jobs' gpus_min that only these candidates can meet (typed nodes: the rest
        # may lie on GPUs this job may not use)
        free = ~running & ~spoken_for
        later_needs = sum(
            max(0, n - (allowed_gpus(scenario.cluster, other) & free & ~candidates).bit_count())
            for n, (_, other) in zip(still_needed[k + 1 :], rt[k + 1 :], strict=True)
        )
        room = max(0, candidates.bit_count() - later_needs)
        need = min(room, max(0, target - kept.bit_count()))
        # GPUs no later job may use first (on typed nodes a later job may have no others)
        later = 0
        for _, other in rt[k + 1 :]:
            later |= allowed_gpus(scenario.cluster, other)
        taken = top_bits(candidates & ~later, need)
        reserved = kept | taken | top_bits(candidates & ~taken, need - taken.bit_count())
        spoken_for |= reserved
        out[i] = _walk_to(job, previous if job.previous_gpus is not None else None, reserved, T)
    return out


def _walk_to(job: RealtimeJob, previous: int | None, target: int, steps: int) -> list[int]:
    """Hold `target` at every step, moving there from `previous` at most swap_cap GPUs a step."""
    if previous is None:
        return [target] * steps
    out, current = [], previous
    for _ in range(steps):
        budget = job.swap_cap  # no step moves more GPUs than this: list no more
        gains = _bits(target & ~current, budget, highest=True)
        releases = _bits(current & ~target, budget)
        size = current.bit_count()
        # Forced moves first: get into [gpus_min, gpus_max], then move toward the target.
        while budget and releases and size > job.gpus_max:
            current ^= 1 << releases.pop(0)
            size, budget = size - 1, budget - 1
        while budget and gains and (size < job.gpus_max):
            current |= 1 << gains.pop(0)
            size, budget = size + 1, budget - 1
        while budget and releases and size > job.gpus_min:
            current ^= 1 << releases.pop(0)
            size, budget = size - 1, budget - 1
        while budget >= 2 and gains and releases:  # same size, other GPUs: trade one for one
            current ^= 1 << releases.pop(0)
            current |= 1 << gains.pop(0)
            budget -= 2
        out.append(current)
    return out


def _bits(mask: int, limit: int, highest: bool = False) -> list[int]:
    """Up to `limit` set bits of mask, lowest first (or highest first)."""
    out = []
    while mask and len(out) < limit:
        bit = 1 << (mask.bit_length() - 1) if highest else mask & -mask
        out.append(bit.bit_length() - 1)
        mask ^= bit
    return out
