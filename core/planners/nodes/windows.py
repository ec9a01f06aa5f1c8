"""Windows cut out of serving for a batch job (the node allocator's last move).

Serving lanes follow demand first, so a job that needs a whole node may find none free while a
service holds one GPU of each. For a batch job that waits (or never starts), each of its
options and each start tried reserves the legal block that serving holds least there, for the
job's whole run: serving is laid out again around it (going short where it must, which the
objective prices) and the batch work packed with that job first. The job's best window, where
it ranks higher (the coverage rule, then J) and passes the checker, is kept (not its first
that ranks higher: the earliest start may cost serving more than a later one), and the moves
repeat from it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...model import BatchJob, Scenario
from ...nodes import Option
from ...plan import IDLE, Plan, check, plan_rank, ranks_above
from .packing import NodePacker


def improve(
    scenario: Scenario,
    plan: Plan,
    order: list[int],
    running: list[int],
    layout: Callable[[list[int]], dict[int, list[int]]],
    make_packer: Callable[[dict[int, list[int]]], NodePacker],
    build: Callable[[dict[int, list[int]], list], np.ndarray],
    every_start: bool,
    budget: int,
) -> tuple[Plan, int]:
    """The best plan found by cutting windows (see the module docstring), and the trials
    made; `layout(busy)` lays serving out around the per-step masks `busy`, `make_packer`
    makes a packer on what serving leaves, `build` the grid. At most `budget` trials."""
    T = scenario.cluster.horizon_steps
    best, best_rank = plan, plan_rank(scenario, plan)
    trials = 0
    improved = True
    while improved and trials < budget:
        improved = False
        starts = _starts(scenario, best)
        for i in list(order):
            job = scenario.jobs[i]
            if not isinstance(job, BatchJob) or job.running is not None:
                continue
            began = starts.get(i, T)
            if began <= job.arrival_step:
                continue
            packer = make_packer({})
            first = [i] + [k for k in order if k != i]
            found, found_rank = None, best_rank
            for option in packer.options[i]:
                last = began if every_start else job.arrival_step + 1
                for s in range(job.arrival_step, min(last, T)):
                    if trials >= budget:
                        break
                    block = _block(best.grid, option, s, min(s + option.duration, T), running)
                    if block is None:
                        continue
                    trials += 1
                    reserved = ((1 << option.gpus) - 1) << block
                    busy = [
                        m | reserved if s <= t < s + option.duration else m
                        for t, m in enumerate(running)
                    ]
                    serving = layout(busy)
                    placed, _ = make_packer(serving).pack(first)
                    candidate = Plan(build(serving, placed), plan.planner)
                    rank = plan_rank(scenario, candidate)
                    if ranks_above(rank, found_rank) and not check(scenario, candidate):
                        found, found_rank = candidate, rank
            if found is not None:  # the job's best window
                best, best_rank, order = found, found_rank, first
                improved = True
                break
            if trials >= budget:
                break
    return best, trials


def _starts(scenario: Scenario, plan: Plan) -> dict[int, int]:
    """Each placed queued batch job's first step."""
    out = {}
    for i, job in enumerate(scenario.jobs):
        if isinstance(job, BatchJob) and job.running is None:
            steps = np.nonzero((plan.grid == i).any(axis=0))[0]
            if len(steps):
                out[i] = int(steps[0])
    return out


def _block(
    grid: np.ndarray, option: Option, start: int, end: int, running: list[int]
) -> int | None:
    """The legal first GPU of the option whose block over [start, end) holds no running work
    and the fewest cells that are not idle (serving's or other batch work's), lowest first."""
    best, best_cost = None, None
    starts = option.starts
    g = option.gpus
    mask = (1 << g) - 1
    while starts:
        b = (starts & -starts).bit_length() - 1
        starts &= starts - 1
        if any(running[t] >> b & mask for t in range(start, end)):
            continue
        cost = int((grid[b : b + g, start:end] != IDLE).sum())
        if best_cost is None or cost < best_cost:
            best, best_cost = b, cost
    return best
