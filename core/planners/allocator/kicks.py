"""Phase 7, last: kicks, the batch work packed again around fixed serving.

Around the final plan's serving and around the serving of the best restart plans that lost
(`_OTHER_SERVING` of them), an iterated local search: two or three jobs of the order moved to
random places, packed, and a short descent (`_KICK_DESCENT`), `AllocatorParams.kicks` times;
the best plan is kept. Seeded by the problem's size, so a scenario always gets the same plan.
"""

from __future__ import annotations

import random

import numpy as np

from ...model import RealtimeJob, Scenario
from ...plan import (
    Plan,
    batch_placements,
    discounts,
    pin_running,
    plan_rank,
    ranks_above,
)
from ..blocks import (
    bitsets_to_bool,
    bool_to_bitsets,
)
from .packing import _Candidate, _candidates, _free_masks, _Packer, _running_masks, _use_grid
from .params import AllocatorParams
from .search import _descend
from .watch import Watch

_KICK_DESCENT = 6  # the budget of work of the short descent after each kick, in packings
_OTHER_SERVING = 8  # the restarts' best plans that serve otherwise, kicked too
_OTHER_KICKS = 40  # kicks on each of those


def _kick(
    scenario: Scenario,
    plan: Plan,
    others: list[np.ndarray],
    params: AllocatorParams,
    watch: Watch | None = None,
) -> Plan:
    """The best of the final plan kicked `params.kicks` times and the restarts' and pins'
    best plans that serve otherwise (`others`) kicked `_OTHER_KICKS` times each, where it ranks
    above the plan (until `watch`'s time limit); `stats["kicks"]` says how many plans were
    kicked and whether one won."""
    watch = watch or Watch()
    best = _kicked(scenario, plan, params, params.kicks, watch)
    best_rank = plan_rank(scenario, best)
    watch.best(best_rank[2])
    kicked_plans = 1
    for grid in others:
        if watch.over():
            break
        kicked = _kicked(scenario, Plan(grid, "allocator"), params, _OTHER_KICKS, watch)
        kicked_plans += 1
        rank = plan_rank(scenario, kicked)
        if ranks_above(rank, best_rank):
            best, best_rank = kicked, rank
            watch.best(rank[2])
    won = best is not plan
    result = Plan(best.grid, "allocator", dict(plan.stats))
    result.stats["kicks"] = {"plans": kicked_plans, "improved": won}
    return result


def _kicked(
    scenario: Scenario, plan: Plan, params: AllocatorParams, kicks: int, watch: Watch | None = None
) -> Plan:
    """The plan with its batch work packed again around its serving by an iterated local
    search, where that ranks higher; else the plan itself (the same object).

    The start is the plan's own order (its batch jobs by first step and GPU, then those it
    leaves out, by worth), packed and descended under both size rules. Each of
    `kicks` kicks moves two or three jobs of the current order to random places (and
    one in five switches the size rule), packs it and descends for `_KICK_DESCENT` packings of
    work; the current order moves to the result where that earns at least as much (drifting
    across ties), and the best one found is kept. The random numbers are seeded by the
    problem's size, so a scenario always gets the same plan."""
    G, T = scenario.cluster.gpus, scenario.cluster.horizon_steps
    discount = discounts(scenario)
    candidates = _candidates(scenario, discount)
    n = len(candidates)
    if n < 2:
        return plan
    realtime = {
        i: bool_to_bitsets(plan.grid == i)
        for i, job in enumerate(scenario.jobs)
        if isinstance(job, RealtimeJob)
    }
    free = _free_masks(G, _running_masks(scenario, T), realtime)
    packer = _Packer(G, T, discount, free, _use_grid(params, G, T))
    placed = batch_placements(scenario, plan)

    def where(c: _Candidate) -> tuple[int, int]:  # its (start, first GPU); left out: last
        p = placed.get(scenario.jobs[c.index].id)
        return (T, G) if p is None else (p.start_step, p.gpu_start)

    order = sorted(candidates, key=lambda c: (where(c), -c.worth, c.index))
    best = None
    for rule in ("value", "early"):
        start = (packer.pack(order, rule), order, rule, packer.trace)
        found, _ = _descend(packer, start, 4 * _KICK_DESCENT, True)
        if best is None or found[0][1:] > best[0][1:]:
            best = found
    current = best
    rng = random.Random(n * 7919 + G * 31 + T)
    watch = watch or Watch()
    for _ in range(kicks):
        if watch.over():
            break
        order = list(current[1])
        for _ in range(rng.choice((2, 2, 3))):
            job = order.pop(rng.randrange(n))
            order.insert(rng.randrange(n), job)
        rule = current[2]
        if rng.random() >= 0.8:
            rule = "early" if rule == "value" else "value"
        start = (packer.pack(order, rule), order, rule, packer.trace)
        found, _ = _descend(packer, start, _KICK_DESCENT, True)
        if found[0][1:] >= current[0][1:]:
            current = found
        if found[0][1:] > best[0][1:]:
            best = found
    kicked = Plan.empty(scenario, "allocator")
    pin_running(scenario, kicked.grid)
    for index, sets in realtime.items():
        kicked.grid[bitsets_to_bool(sets, G).T] = index
    for index, gpu_start, gpus, begin, end in best[0][0]:
        kicked.grid[gpu_start : gpu_start + gpus, begin:end] = index
    if ranks_above(plan_rank(scenario, kicked), plan_rank(scenario, plan)):
        return Plan(kicked.grid, "allocator", dict(plan.stats))
    return plan
