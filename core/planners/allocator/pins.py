"""Phase 7, pins: a tightening no scenario can state.

One batch job of the best plan held to another aligned block at the same steps, placed before
serving, which is laid out anew around it; kept where the plan ranks higher (`pin_room` lists
the blocks a job may move to).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...model import BatchJob, RealtimeJob, Scenario
from ...plan import (
    IDLE,
    Placement,
    Plan,
    batch_placements,
    check,
    holdings,
    plan_rank,
    plan_value,
    ranks_above,
)
from .restarts import _in_original, _other_serving, _Tightening, _tighter, swap_in
from .watch import Watch


def pin(
    scenario: Scenario,
    plan: Plan,
    allocate: Callable[[Scenario, list[int]], Plan],
    count: int,
    give_up_serving: bool = True,
    deep: Callable[[Scenario, list[int]], Plan] | None = None,
    watch: Watch | None = None,
) -> tuple[Plan, list[np.ndarray]]:
    """The best of `plan` and up to `count` plans that each pin one of its batch jobs to another
    aligned block at the same steps, ranked as `restart` ranks them; also the grids of those
    that lost and serve otherwise than the best (for the allocator's kicks).

    Serving is laid out before the batch work, so where it sits decides which aligned blocks
    are left, and no move after that takes a block from serving whole. A pin places one job
    first and lays out serving and the rest of the batch work anew around it
    (`allocate(scenario without the job, its GPUs per step)`; serving leaves those GPUs ahead
    of the job's start while its swap cap lets it; a plan where it could not, or where a
    service then holds less than its `gpus_min`, is dropped: `core.plan.check`).
    Pins are tried in order of the serving cells they displace, the most first, then the
    shortest job: a pin that wins puts a job where serving was, so that serving moves to the
    room the job left, which the other batch work could not use whole (wide small-42018: b3
    moved to GPU 10 takes serving off the aligned pair a 2-GPU job needs), so the first pins in
    this order gain most of what the best pin of all gains. A block holding a GPU a service held
    before the horizon, or inherited running work, is not tried. Without `give_up_serving`, a
    plan that serves less demand than `plan` does not count (a pin may leave serving short where
    it moves). The pin that wins is planned once more with `deep` (the allocator's restarts
    around it), kept where that ranks higher: the restarts' choices around the old serving need
    not hold around the new one (small-42018 reaches its optimum so; a pin wins on few draws, so
    this one more plan costs little).
    `plan.stats["pins"]` says how many ran and which won (job, first GPU). No pin starts once
    `watch` is over its time limit, and the winner is not planned again then."""
    watch = watch or Watch()
    best, best_key = plan, plan_rank(scenario, plan)
    shortfall = plan_value(scenario, holdings(scenario, plan)).shortfall
    lost: list[tuple[tuple, np.ndarray]] = []
    moves = _pin_moves(scenario, plan, count) if count > 0 and not watch.over() else []
    won = None

    def counts(grid: np.ndarray | None) -> bool:  # legal, and serving not given up if it may not
        if grid is None or give_up_serving:
            return grid is not None
        return plan_value(scenario, holdings(scenario, Plan(grid))).shortfall <= shortfall + 1e-9

    spent = 0
    for index, b, p in moves:
        if watch.over():
            break
        spent += 1
        grid = _pinned(scenario, allocate, index, b, p, watch)
        if not counts(grid):
            continue
        key = plan_rank(scenario, Plan(grid))
        if ranks_above(key, best_key):
            if best is not plan:
                lost.append((best_key, best.grid))
            best, best_key, won = Plan(grid, plan.planner), key, (index, b, p)
            watch.best(key[2])
        else:
            lost.append((key, grid))
    if won is not None and deep is not None and not watch.over():  # the winner, more effort
        with watch.muted():  # (`deep` plans the problem without the pinned job)
            grid = _pinned(scenario, deep, *won, watch)
        if counts(grid) and ranks_above(key := plan_rank(scenario, Plan(grid)), best_key):
            lost.append((best_key, best.grid))
            best = Plan(grid, plan.planner)
            watch.best(key[2])
    result = Plan(best.grid, plan.planner, dict(plan.stats))
    kept = None if won is None else (scenario.jobs[won[0]].id, won[1])
    result.stats["pins"] = {"spent": spent, "kept": kept}
    return result, _other_serving(scenario, best.grid, lost, count)


def _pin_moves(scenario: Scenario, plan: Plan, count: int) -> list[tuple[int, int, Placement]]:
    """(job index, first GPU, its placement in `plan`) of the first `count` pins in the order
    `pin` tries them: each placed queued job on each other aligned block at its steps that
    holds no inherited running work and no GPU a service held before the horizon, and leaves
    room for every service's `gpus_min`."""
    G = scenario.cluster.gpus
    serving = np.array([isinstance(job, RealtimeJob) for job in scenario.jobs] + [False])
    served = serving[plan.grid]
    held, spare = pin_room(scenario)
    moves = []
    for job_id, p in batch_placements(scenario, plan).items():
        index = scenario.job_index(job_id)
        steps = slice(p.start_step, p.end_step)
        if scenario.jobs[index].running is not None or (spare[steps] < p.gpus).any():
            continue
        # per aligned block of its size (all at once: 16,384 GPUs have 16,384 blocks of one),
        # the serving cells it would displace and whether any of its cells is held; of those
        # free, only the job's `count` first can be among the `count` first of all
        g, blocks = p.gpus, G // p.gpus
        displaced = served[: blocks * g, steps].reshape(blocks, -1).sum(axis=1)
        taken = held[: blocks * g, steps].reshape(blocks, -1).any(axis=1)
        free = np.flatnonzero(~taken)
        free = free[free * g != p.gpu_start]
        if count < free.size:
            first = np.argpartition(-displaced[free] * (blocks + 1) + free, count)[:count]
            free = free[first]
        for k in free.tolist():
            moves.append((-int(displaced[k]), p.end_step - p.start_step, index, k * g, p))
    moves.sort(key=lambda move: move[:4])
    return [move[2:] for move in moves[:count]]


def pin_room(scenario: Scenario) -> tuple[np.ndarray, np.ndarray]:
    """Where a pin may go: the cells (GPUs x steps) held by inherited running work or by a GPU
    a service held before the horizon, none of which a pin takes; and per step, how many GPUs
    a pinned block may take while every service keeps its `gpus_min`."""
    G, T = scenario.cluster.gpus, scenario.cluster.horizon_steps
    held = np.zeros((G, T), dtype=bool)
    for job in scenario.jobs:
        if isinstance(job, BatchJob) and job.running is not None:
            r = job.running
            held[r.gpu_start : r.gpu_start + r.gpus, : r.remaining_steps] = True
        elif isinstance(job, RealtimeJob) and job.previous_gpus:
            held[list(job.previous_gpus)] = True
    spare = G - held.sum(axis=0) - sum(job.gpus_min for job in scenario.realtime_jobs)
    return held, spare


def _pinned(
    scenario, allocate, index: int, b: int, p: Placement, watch: Watch | None = None
) -> np.ndarray | None:
    """The plan of job `index` pinned on GPUs b.. at `p`'s steps, the rest planned by
    `allocate` around it (then `swap_in`), or None where it is not a legal plan."""
    tighter, kept = _tighter(scenario, (_Tightening("out", scenario.jobs[index].id),))
    if tighter is None:
        return None
    block = ((1 << p.gpus) - 1) << b
    T = scenario.cluster.horizon_steps
    blocked = [block if p.start_step <= t < p.end_step else 0 for t in range(T)]
    grid = _in_original(allocate(tighter, blocked).grid, kept)
    room = grid[b : b + p.gpus, p.start_step : p.end_step]
    if (room != IDLE).any():
        return None  # serving held a GPU there from the step before and did not move off
    room[:] = index
    if check(scenario, Plan(grid)):
        return None  # a swap cap kept a service from its gpus_min around the block
    swap_in(scenario, grid, watch)
    return grid
