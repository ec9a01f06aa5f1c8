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
long list spends the budget on the likelier ones). Each plan, the first included, is scored
after `swap_in`: a job a plan leaves out takes the place of a placed one that earns less there
(a tightening that left a job out cannot bring it back where another one then took its room).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

import numpy as np

from ...model import MAX_NUMBER, BatchJob, RealtimeJob, Scenario, ScenarioError, duration_steps
from ...plan import (
    IDLE,
    Plan,
    batch_placements,
    discounts,
    plan_rank,
    ranks_above,
)
from .watch import Watch

# penalty factors tried first: cheap (one restart each) and the most often useful
_PRICES = (0.5, 1.5, 0.75, 2.0)
# restarts a round that won leaves the next at least (within twice the budget in all): where
# the first round spends the budget, a tightening that wins only on top of its winner is
# still tried (wide small-31010, SLO 0.95: b4 held to 4 GPUs, then b1 too, reaches the optimum)
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
    watch: Watch | None = None,
) -> tuple[Plan, list[np.ndarray]]:
    """The best of `plan` and the allocator's plans of tighter problems, ranked on `scenario`
    as every planner ranks plans (`core.plan.plan_rank`: a plan meeting
    `policy.rt_coverage_target` first, then the most coverage, then the objective), within `budget`
    restarts (a round that wins leaves the next at least `_FOLLOW`, up to `2 * budget` in all).
    Without `give_up_serving`, no tightening aims for less serving (a price below 1,
    a cap). `plan.stats["restarts"]` says how many ran and which tightenings won. Also returns
    the grids of up to `others` more plans, best first, each serving otherwise than the best
    plan and than each other (the allocator's kicks search around their serving too). No
    restart starts once `watch` is over its time limit; it hears each best plan's objective."""
    watch = watch or Watch()
    if watch.listening:  # (legal as it is: the best while the swaps run)
        watch.best(plan_rank(scenario, plan)[2])
    best_grid = plan.grid.copy()
    swap_in(scenario, best_grid, watch)
    best_key = plan_rank(scenario, Plan(best_grid))
    watch.best(best_key[2])
    applied: tuple[_Tightening, ...] = ()
    spent = 0
    planned = [(best_key, best_grid)]  # every plan, for `others`
    ceiling = (True, 0.0, _ceiling(scenario))
    improved = ranks_above(ceiling, best_key)  # where the plan reaches it, nothing can win
    limit = budget
    while improved and spent < limit:
        base = applied
        for tightening in _tightenings(scenario, base, give_up_serving):
            if spent >= limit or watch.over():
                break
            trial = base + (tightening,)
            tighter, index = _tighter(scenario, trial)
            if tighter is None:
                continue
            spent += 1
            grid = _in_original(allocate(tighter).grid, index)
            swap_in(scenario, grid, watch)
            key = plan_rank(scenario, Plan(grid))
            if others:
                planned.append((key, grid))
            if ranks_above(key, best_key):
                best_key, best_grid, applied = key, grid, trial
                watch.best(key[2])
        improved = applied != base and ranks_above(ceiling, best_key) and not watch.reached
        if improved:  # a round that won: the next one tries at least _FOLLOW more
            limit = min(max(limit, spent + _FOLLOW), 2 * budget)
    result = Plan(best_grid, plan.planner, dict(plan.stats))
    result.stats["restarts"] = {
        "spent": spent,
        "kept": [dataclasses.astuple(t) for t in applied],
    }
    return result, _other_serving(scenario, best_grid, planned, others)


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


def swap_in(scenario: Scenario, grid: np.ndarray, watch: Watch | None = None) -> int:
    """Batch jobs left out take the place of placed ones that earn less there, in `grid` (in
    place): a job B the plan leaves out runs on the block and from the start of a placed job A
    where B may use that many GPUs and has arrived by then, for B's own duration (cut at the
    horizon; beyond A's end only on GPUs the plan leaves idle), where B earns more there than A
    does. The best such swap is made while one pays (the first of equals: A, then B, in file
    order) and `watch` is not over its time limit; returns how many were made. Every pair is
    scored at once (on 16,384 GPUs, 4,000 placed jobs x 1,000 left out)."""
    c = scenario.cluster
    T = c.horizon_steps
    earned = np.asarray(discounts(scenario), dtype=float)
    jobs = scenario.jobs
    queued = [
        i
        for i, job in enumerate(jobs)
        if isinstance(job, BatchJob) and job.running is None and job.arrival_step < T
    ]
    if len(queued) < 2:
        return 0
    row = {jobs[i].id: k for k, i in enumerate(queued)}
    priority = np.array([jobs[i].priority for i in queued], dtype=float)
    arrival = np.array([jobs[i].arrival_step for i in queued])
    # steps on 2**k GPUs (sizes are powers of two); 0: it may not use that many
    lasts = np.zeros((len(queued), c.gpus.bit_length()), dtype=np.int64)
    for k, i in enumerate(queued):
        for n in jobs[i].sizes():
            if n <= c.gpus:
                lasts[k, n.bit_length() - 1] = duration_steps(jobs[i], n, c.step_minutes)
    swaps = 0
    while watch is None or not watch.over():
        placements = batch_placements(scenario, Plan(grid)).items()
        placed = [(row[job_id], p) for job_id, p in placements if job_id in row]
        if not placed:
            return swaps
        rows = np.array([k for k, _ in placed])
        out = np.ones(len(queued), dtype=bool)
        out[rows] = False
        left = np.flatnonzero(out)
        if not left.size:
            return swaps
        n = np.array([p.gpus for _, p in placed])
        s = np.array([p.start_step for _, p in placed])
        e = np.array([p.end_step for _, p in placed])
        loses = priority[rows] * n * (earned[e] - earned[s])
        # per GPU and step, the idle steps from there on; per placed job, its block's from its end
        idle = np.zeros((c.gpus, T + 1), dtype=np.int64)
        for t in range(T - 1, -1, -1):
            idle[:, t] = np.where(grid[:, t] == IDLE, idle[:, t + 1] + 1, 0)
        spare = np.array(
            [idle[p.gpu_start : p.gpu_start + p.gpus, p.end_step].min() for _, p in placed]
        )
        # the pairs (placed, left out) that fit, in file order of each, then what each gains
        steps = lasts[left][:, [p.gpus.bit_length() - 1 for _, p in placed]].T
        steps[(n & (n - 1)) != 0] = 0  # (a block of another width: no job's size)
        end = np.minimum(T, s[:, None] + steps)
        a, b = np.nonzero(
            (steps > 0) & (arrival[left] <= s[:, None]) & (end - e[:, None] <= spare[:, None])
        )
        end = end[a, b]
        gain = priority[left[b]] * n[a] * (earned[end] - earned[s[a]]) - loses[a]
        pays = np.flatnonzero(gain > 1e-9 * np.maximum(1.0, loses[a]))
        if not pays.size:
            return swaps
        best = pays[np.argmax(gain[pays])]  # the first of the largest
        p = placed[a[best]][1]
        block = grid[p.gpu_start : p.gpu_start + p.gpus]
        block[block == queued[placed[a[best]][0]]] = IDLE
        block[:, p.start_step : int(end[best])] = queued[left[b[best]]]
        swaps += 1
    return swaps
