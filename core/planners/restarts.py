"""Restarts on tighter problems: the allocator's last phase on small problems.

The allocator decides serving before it packs batch work and places each job where it earns the
most on its own, so on some small problems it commits early to a choice the optimum avoids: a
job that should be left out for serving, a job that should run wider (a 4 GPU-hour job earns 8
cells on 8 GPUs for one step) or narrower, a job that should wait for demand to fall, serving
priced too high or too low against the batch work beside it. The moves of its local search look
at one such choice at a time from the plan it has, so they miss these when the better plan
differs in many places at once.

A restart plans a *tighter* problem from scratch: the same scenario with the shortfall priced
higher or lower, a service held to one GPU more at least or one fewer at most, or one batch job
left out, held to one of its sizes, or arriving later. Every plan of a tighter problem is a legal
plan of the original one (these only forbid plans; the price only changes what the allocator aims
for), so each is scored on the original objective and the best is kept. The search is a steepest
descent: each round tries every tightening on the best plan's problem and the one that wins most
becomes the base the next round's are added to, within a budget of restarts that a winning round
stretches by `_FOLLOW` for the next (delays come last in the list, every job's shortest first, so a
long list spends the budget on the likelier ones). (Adopting the first that wins, as this search
once did, settles on whichever comes first in the list: on one wide draw the shortfall priced twice
over, then a service's floor raised, 4.9% below the optimum, where holding one batch job to one GPU
reaches 1.5%.) Each plan, the first included, is scored after `swap_in`: a job a plan leaves out
takes the place of a placed one that earns less there (a tightening that left a job out cannot
bring it back where another one then took its room).

A pin (`pin`, after the restarts) is a tightening no scenario can state: one batch job held to
another aligned block at the steps the best plan runs it, planned before serving is laid out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

import numpy as np

from ..model import (
    MAX_NUMBER,
    BatchJob,
    RealtimeJob,
    Scenario,
    ScenarioError,
    duration_steps,
)
from ..plan import (
    IDLE,
    Placement,
    Plan,
    batch_placements,
    check,
    discounts,
    holdings,
    plan_rank,
    plan_value,
    ranks_above,
)

# penalty factors tried first: cheap (one restart each) and the most often useful
_PRICES = (0.5, 1.5, 0.75, 2.0)
# restarts a round that won leaves the next at least (within twice the budget in all): where
# the first round spends the budget, a tightening that wins only on top of its winner is
# still tried (wide small-31010, SLO 0.95: b4 held to 4 GPUs, then b1 too, 3.2% -> the optimum)
_FOLLOW = 16


@dataclasses.dataclass(frozen=True)
class _Tightening:
    """One restriction: ("price", None, f) scales the shortfall's price by f for the planning
    only; ("floor", service, g) and ("cap", service, g) set its gpus_min or gpus_max to g;
    ("out", job) leaves a batch job out, ("size", job, g) holds it to g GPUs and
    ("after", job, t) lets it start at step t at the earliest."""

    kind: str
    job: str | None
    value: float = 0.0


def restart(
    scenario: Scenario,
    plan: Plan,
    allocate: Callable[[Scenario], Plan],
    budget: int,
    give_up_serving: bool = True,
    others: int = 0,
) -> tuple[Plan, list[np.ndarray]]:
    """The best of `plan` and the allocator's plans of tighter problems, ranked on `scenario`
    as every planner ranks plans (`core.plan.plan_rank`: a plan meeting
    `policy.rt_coverage_target` first, then the most coverage, then the objective), within `budget`
    restarts (a round that wins leaves the next at least `_FOLLOW`, up to `2 * budget` in all).
    Without `give_up_serving`, no tightening aims for less serving (a price below 1,
    a cap). `plan.stats["restarts"]` says how many ran and which tightenings won. Also returns
    the grids of up to `others` more plans, best first, each serving otherwise than the best
    plan and than each other (the allocator's kicks search around their serving too)."""
    best_grid = plan.grid.copy()
    swap_in(scenario, best_grid)
    best_key = plan_rank(scenario, Plan(best_grid))
    applied: tuple[_Tightening, ...] = ()
    spent = 0
    planned = [(best_key, best_grid)]  # every plan, for `others`
    ceiling = (True, 0.0, _ceiling(scenario))
    improved = ranks_above(ceiling, best_key)  # where the plan reaches it, nothing can win
    limit = budget
    while improved and spent < limit:
        base = applied
        for tightening in _tightenings(scenario, base, give_up_serving):
            if spent >= limit:
                break
            trial = base + (tightening,)
            tighter, index = _tighter(scenario, trial)
            if tighter is None:
                continue
            spent += 1
            grid = _in_original(allocate(tighter).grid, index)
            swap_in(scenario, grid)
            key = plan_rank(scenario, Plan(grid))
            if others:
                planned.append((key, grid))
            if ranks_above(key, best_key):
                best_key, best_grid, applied = key, grid, trial
        improved = applied != base and ranks_above(ceiling, best_key)
        if improved:  # a round that won: the next one tries at least _FOLLOW more
            limit = min(max(limit, spent + _FOLLOW), 2 * budget)
    result = Plan(best_grid, plan.planner, dict(plan.stats))
    result.stats["restarts"] = {
        "spent": spent,
        "kept": [dataclasses.astuple(t) for t in applied],
    }
    return result, _other_serving(scenario, best_grid, planned, others)


def pin(
    scenario: Scenario,
    plan: Plan,
    allocate: Callable[[Scenario, list[int]], Plan],
    count: int,
    give_up_serving: bool = True,
    deep: Callable[[Scenario, list[int]], Plan] | None = None,
) -> tuple[Plan, list[np.ndarray]]:
    """The best of `plan` and up to `count` plans that each pin one of its batch jobs to another
    aligned block at the same steps, ranked as `restart` ranks them; also the grids of those
    that lost and serve otherwise than the best (for the allocator's kicks).

    Serving is laid out before the batch work, so where it sits decides which aligned blocks
    are left, and no move after that takes a block from serving whole. A pin places one job
    first and lays out serving and the rest of the batch work anew around it
    (`allocate(scenario without the job, its GPUs per step)`; serving leaves those GPUs ahead
    of the job's start while its swap cap lets it; a plan where it could not, or where a
    service then holds less than its `gpus_min`, is dropped: `core.plan.check`, 0.2 ms here).
    Pins are tried in order of the serving cells they displace, the most first, then the
    shortest job: a pin that wins puts a job where serving was, so that serving moves to the
    room the job left, which the other batch work could not use whole (wide small-42018: b3
    moved to GPU 10 takes serving off the aligned pair a 2-GPU job needs, 163.3 -> 167.8). On
    the 31 wide draws of the benchmarks' size where some pin improves the plan, the first
    three in this order reach two thirds of what the best pin of all gains. A block holding
    a GPU a service held before the horizon, or inherited running work, is not tried. Without
    `give_up_serving`, a plan that serves less demand than `plan` does not count (a pin may
    leave serving short where it moves). The pin that wins is planned once more with `deep`
    (the allocator's restarts around it), kept where that ranks higher: the restarts' choices
    around the old serving need not hold around the new one (small-42018: 167.8 -> 172.4, the
    optimum; on the wide sets this costs nothing in the median or the 90th percentile, since
    a pin wins on few draws).
    `plan.stats["pins"]` says how many ran and which won (job, first GPU)."""
    best, best_key = plan, plan_rank(scenario, plan)
    shortfall = plan_value(scenario, holdings(scenario, plan)).shortfall
    lost: list[tuple[tuple, np.ndarray]] = []
    moves = _pin_moves(scenario, plan)[:count]
    won = None

    def counts(grid: np.ndarray | None) -> bool:  # legal, and serving not given up if it may not
        if grid is None or give_up_serving:
            return grid is not None
        return plan_value(scenario, holdings(scenario, Plan(grid))).shortfall <= shortfall + 1e-9

    for index, b, p in moves:
        grid = _pinned(scenario, allocate, index, b, p)
        if not counts(grid):
            continue
        key = plan_rank(scenario, Plan(grid))
        if ranks_above(key, best_key):
            if best is not plan:
                lost.append((best_key, best.grid))
            best, best_key, won = Plan(grid, plan.planner), key, (index, b, p)
        else:
            lost.append((key, grid))
    if won is not None and deep is not None:  # the winning pin planned with more effort
        grid = _pinned(scenario, deep, *won)
        if counts(grid) and ranks_above(plan_rank(scenario, Plan(grid)), best_key):
            lost.append((best_key, best.grid))
            best = Plan(grid, plan.planner)
    result = Plan(best.grid, plan.planner, dict(plan.stats))
    kept = None if won is None else (scenario.jobs[won[0]].id, won[1])
    result.stats["pins"] = {"spent": len(moves), "kept": kept}
    return result, _other_serving(scenario, best.grid, lost, count)


def _pin_moves(scenario: Scenario, plan: Plan) -> list[tuple[int, int, Placement]]:
    """(job index, first GPU, its placement in `plan`) of every pin, in the order `pin` tries
    them: each placed queued job on each other aligned block at its steps that holds no
    inherited running work and no GPU a service held before the horizon, and leaves room for
    every service's `gpus_min`."""
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
        for b in range(0, G - p.gpus + 1, p.gpus):
            if b != p.gpu_start and not held[b : b + p.gpus, steps].any():
                displaced = int(served[b : b + p.gpus, steps].sum())
                moves.append((-displaced, p.end_step - p.start_step, index, b, p))
    moves.sort(key=lambda move: move[:4])
    return [move[2:] for move in moves]


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


def _pinned(scenario, allocate, index: int, b: int, p: Placement) -> np.ndarray | None:
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
    swap_in(scenario, grid)
    return grid


def _other_serving(scenario, best: np.ndarray, planned: list, count: int) -> list[np.ndarray]:
    """Up to `count` of the `planned` (rank, grid) pairs' grids, best first (stable: the
    earlier among equals), whose serving differs from `best`'s and from each other's."""
    serving = np.array([isinstance(job, RealtimeJob) for job in scenario.jobs] + [False])

    def cells(grid: np.ndarray) -> bytes:  # the serving jobs' cells, the rest as one value
        return np.where(serving[grid], grid, -1).tobytes()

    seen = {cells(best)}
    out: list[np.ndarray] = []
    for _, grid in sorted(planned, key=lambda item: item[0], reverse=True):
        if len(out) >= count:
            break
        key = cells(grid)
        if key not in seen:
            seen.add(key)
            out.append(grid)
    return out


def _ceiling(scenario: Scenario) -> float:
    """An upper bound on the objective: every batch job alone on the cluster (at its arrival,
    on its best size), serving short only of the demand beyond what its range allows."""
    c, policy = scenario.cluster, scenario.policy
    earned = discounts(scenario)
    T = c.horizon_steps
    total = 0.0
    for job in scenario.jobs:
        if isinstance(job, BatchJob):
            if job.running is not None:
                r = job.running
                total += job.priority * r.gpus * earned[min(T, r.remaining_steps)]
                continue
            a = min(job.arrival_step, T)
            total += max(
                (
                    job.priority
                    * g
                    * (earned[min(T, a + duration_steps(job, g, c.step_minutes))] - earned[a])
                    for g in job.sizes()
                    if g <= c.gpus
                ),
                default=0.0,
            )
        else:
            most = min(job.gpus_max, c.gpus)
            short = sum(max(0.0, d - most) for d in job.demand)
            total -= policy.penalty_weight * job.priority * short
    return policy.reward_weight * total


def _tightenings(
    scenario: Scenario, applied: tuple[_Tightening, ...], give_up_serving: bool
) -> Iterator[_Tightening]:
    """Each tightening not yet applied to a job (or to the price), cheapest kinds first."""
    touched = {t.job for t in applied}
    T = scenario.cluster.horizon_steps
    if scenario.realtime_jobs and None not in touched:
        for factor in _PRICES:
            if factor < 1 and not give_up_serving:
                continue
            if scenario.policy.penalty_weight * factor <= MAX_NUMBER:  # the model's limit
                yield _Tightening("price", None, factor)
    for job in scenario.realtime_jobs:
        if job.id not in touched and job.gpus_min < min(job.gpus_max, scenario.cluster.gpus):
            yield _Tightening("floor", job.id, job.gpus_min + 1)
            if give_up_serving:
                yield _Tightening("cap", job.id, job.gpus_max - 1)
    queued = [job for job in scenario.jobs if isinstance(job, BatchJob) and job.running is None]
    queued = [job for job in queued if job.id not in touched]
    for job in queued:
        yield _Tightening("out", job.id)
    for job in queued:
        sizes = [g for g in job.sizes() if g <= scenario.cluster.gpus]
        if len(sizes) > 1:
            for g in sizes:
                yield _Tightening("size", job.id, g)
    # every job's shortest delay before any job's longer one: where the list outruns the
    # budget, the delays it reaches are spread over the jobs
    step = max(1, T // 6)
    for delay in range(step, T, step):
        for job in queued:
            if job.arrival_step + delay < T:
                yield _Tightening("after", job.id, job.arrival_step + delay)


def _tighter(
    scenario: Scenario, applied: tuple[_Tightening, ...]
) -> tuple[Scenario | None, np.ndarray]:
    """The scenario with `applied`, and for each of its jobs the index of the same job in
    `scenario` (a job left out has none)."""
    jobs = list(scenario.jobs)
    policy = scenario.policy
    out: set[str] = set()
    for t in applied:
        if t.kind == "price":
            policy = dataclasses.replace(policy, penalty_weight=policy.penalty_weight * t.value)
            continue
        if t.kind == "out":
            out.add(t.job)
            continue
        i = scenario.job_index(t.job)
        if t.kind == "size":
            g = int(t.value)
            jobs[i] = dataclasses.replace(jobs[i], gpus_min=g, gpus_max=g)
        elif t.kind == "floor":
            jobs[i] = dataclasses.replace(jobs[i], gpus_min=int(t.value))
        elif t.kind == "cap":
            jobs[i] = dataclasses.replace(jobs[i], gpus_max=int(t.value))
        else:
            jobs[i] = dataclasses.replace(jobs[i], arrival_step=int(t.value))
    kept = [i for i, job in enumerate(jobs) if job.id not in out]
    if not any(isinstance(jobs[i], BatchJob) for i in kept) and out:
        return None, np.empty(0, dtype=np.int32)
    try:
        tighter = dataclasses.replace(scenario, jobs=tuple(jobs[i] for i in kept), policy=policy)
    except ScenarioError:  # e.g. a cap previous_gpus cannot get down to at step 0: not tried
        return None, np.empty(0, dtype=np.int32)
    return tighter, np.array(kept, dtype=np.int32)


def _in_original(grid: np.ndarray, index: np.ndarray) -> np.ndarray:
    """A tighter problem's grid with the original problem's job numbers."""
    lookup = np.append(index, IDLE).astype(np.int32)  # IDLE (-1) reads the last entry
    return lookup[grid]


def swap_in(scenario: Scenario, grid: np.ndarray) -> int:
    """Batch jobs left out take the place of placed ones that earn less there, in `grid` (in
    place): a job B the plan leaves out runs on the block and from the start of a placed job A
    where B may use that many GPUs and has arrived by then, for B's own duration (cut at the
    horizon; beyond A's end only on GPUs the plan leaves idle), where B earns more there than A
    does. The best such swap is made while one pays; returns how many were made."""
    c = scenario.cluster
    T = c.horizon_steps
    earned = discounts(scenario)
    queued = [
        i
        for i, job in enumerate(scenario.jobs)
        if isinstance(job, BatchJob) and job.running is None and job.arrival_step < T
    ]
    swaps = 0
    while True:
        placed = batch_placements(scenario, Plan(grid))
        best = None
        for a in queued:
            pa = placed.get(scenario.jobs[a].id)
            if pa is None:
                continue
            n, s, e = pa.gpus, pa.start_step, pa.end_step
            loses = scenario.jobs[a].priority * n * (earned[e] - earned[s])
            block = grid[pa.gpu_start : pa.gpu_start + n]
            for b in queued:
                job = scenario.jobs[b]
                if job.id in placed or job.arrival_step > s or n not in job.sizes():
                    continue
                end = min(T, s + duration_steps(job, n, c.step_minutes))
                if end > e and not (block[:, e:end] == IDLE).all():
                    continue
                gain = job.priority * n * (earned[end] - earned[s]) - loses
                if gain > 1e-9 * max(1.0, loses) and (best is None or gain > best[0]):
                    best = (gain, a, b, pa, end)
        if best is None:
            return swaps
        _, a, b, pa, end = best
        block = grid[pa.gpu_start : pa.gpu_start + pa.gpus]
        block[block == a] = IDLE
        block[:, pa.start_step : end] = b
        swaps += 1
