"""Serving on a cluster with node groups: each service's GPUs per step, on its allowed types.

A service follows its demand (every unit served, clipped to its range), raised ahead of each
rise so that moving `swap_cap` GPUs a step still reaches it. Its GPUs come from a lane of its
own: the GPUs of its allowed types where batch work delivers least (the slowest types first,
for the batch jobs' sake), from the top of each group down, so the rest of each group stays in
whole nodes for batch blocks. A lane holds the service's peak and never a GPU of another
service, so services never contend; batch work uses every lane GPU a service does not hold at
a step.
"""

from __future__ import annotations

import math

from ...model import RealtimeJob, Scenario
from ...nodes import allowed_gpus, allowed_groups, groups_of, job_speed, type_allowed
from ..blocks import mask_of


def counts_path(job: RealtimeJob, steps: int, room: int, worth: float | None = None) -> list[int]:
    """GPUs per step: demand rounded up within [gpus_min, gpus_max] and `room`, raised ahead of
    rises and kept up before falls so that no step moves more than swap_cap GPUs, starting from
    previous_gpus where given (the first step may then fall short of a rise it cannot reach).
    With `worth` (what a GPU-step of batch work earns, against `penalty x priority` per unit
    short), a step's fraction of a unit is served only where its shortfall would cost more."""
    cap = job.swap_cap
    top = min(job.gpus_max, room)

    def units(d: float) -> int:
        whole = math.floor(d + 1e-9)
        if d - whole > 1e-9 and (worth is None or (d - whole) * job.priority > worth):
            whole += 1
        return whole

    want = [min(max(units(d), job.gpus_min), top) for d in job.demand[:steps]]
    path = list(want)
    for t in range(steps - 2, -1, -1):  # raised ahead of each rise
        path[t] = max(path[t], path[t + 1] - cap)
    previous = len(job.previous_gpus) if job.previous_gpus is not None else None
    for t in range(steps):  # within reach of the step before
        before = previous if t == 0 else path[t - 1]
        if before is None:
            continue
        path[t] = min(path[t], before + cap)
        path[t] = max(path[t], before - cap, job.gpus_min)
        path[t] = min(path[t], top)
    return path


# How a service's lane ranks the groups it may use, and in which order services choose.
LANE_RULES = ("slow-small", "small-slow")
SERVICE_ORDERS = ("priority", "constrained")


def _batch_worth(scenario: Scenario) -> dict[int, float]:
    """Per group, the speed batch work gets there, weighted by each job's priority x work (a
    job that may not use the group counts 0): a group no batch job may use is worth nothing.
    Kept on the scenario object for the screen's many layouts."""
    cached = scenario.__dict__.get("_batch_worth")
    if cached is not None:
        return cached
    batch = scenario.batch_jobs
    weights = [b.priority * b.gpu_hours for b in batch]
    total = sum(weights)
    out = {}
    for group in groups_of(scenario.cluster):
        if total <= 0:
            out[group.index] = group.gpu_type.speed
            continue
        speeds = [
            job_speed(b, group.gpu_type) if type_allowed(b, group.gpu_type) else 0.0 for b in batch
        ]
        out[group.index] = sum(w * v for w, v in zip(weights, speeds, strict=True)) / total
    object.__setattr__(scenario, "_batch_worth", out)
    return out


def lane_order(scenario: Scenario, job: RealtimeJob, rule: str = "slow-small") -> list[int]:
    """The GPUs a service prefers, best first: its allowed groups from the one batch work
    values least (the lowest speed batch work gets there, weighted by priority x work) and,
    among those, the one of
    the smallest nodes (which breaks no large block); "small-slow" ranks by node size first;
    "first:K" puts group K first (the screen tries each: the best group for serving is not
    always the slowest); "order:K1,K2,..." takes the groups in that order (the screen tries
    every order of up to 3 groups: a service may best take a GPU of a large node rather than
    the one small node a job of that type needs).
    Each group from its top GPU down. (A service that holds other GPUs at the start moves to
    these as its swap budget allows: `_walk`.)"""
    groups = allowed_groups(scenario.cluster, job)
    worth = _batch_worth(scenario)

    def batch_worth(group) -> float:
        return worth[group.index]

    if rule == "slow-small":
        order = sorted(groups, key=lambda g: (batch_worth(g), g.gpus_per_node, -g.index))
    elif rule.startswith("first:"):  # one group first (where allowed), then "slow-small"
        first = int(rule.split(":")[1])
        order = sorted(
            groups, key=lambda g: (g.index != first, batch_worth(g), g.gpus_per_node, -g.index)
        )
    elif rule.startswith("order:"):  # the groups in this order (where allowed)
        ranks = {int(k): n for n, k in enumerate(rule.split(":")[1].split(","))}
        order = sorted(groups, key=lambda g: (ranks.get(g.index, len(ranks)), g.index))
    else:
        order = sorted(groups, key=lambda g: (g.gpus_per_node, batch_worth(g), -g.index))
    return [gpu for g in order for gpu in range(g.end - 1, g.offset - 1, -1)]


def serving_sets(
    scenario: Scenario,
    running: list[int],
    rule: str = "slow-small",
    services: str = "priority",
    priced: bool = False,
    shared: bool = False,
) -> dict[int, list[int]]:
    """Per service (by grid index), its GPUs at every step as bitsets. `running`: per step,
    the GPUs running batch jobs hold. Services take their lanes by priority, or ("constrained")
    those with the fewest allowed GPUs first. `priced`: fractions of a unit are served only
    where the shortfall costs more than batch work earns (`counts_path`). `shared`: no lanes;
    a service takes the GPUs it prefers that those before it do not hold at that step (a GPU
    one frees the next may take), which may break a later one's swap cap where an earlier
    one takes a GPU from under it: `legal_sets` says whether it did."""
    worth = None
    if priced:
        penalty = scenario.policy.penalty_weight
        best = max(
            (
                b.priority * job_speed(b, g.gpu_type)
                for b in scenario.batch_jobs
                for g in allowed_groups(scenario.cluster, b)
            ),
            default=0.0,
        )
        worth = best / penalty if penalty > 0 else math.inf
    T = scenario.cluster.horizon_steps
    taken = 0  # GPUs in other services' lanes
    for job in scenario.realtime_jobs:
        taken |= mask_of(job.previous_gpus or ())
    out: dict[int, list[int]] = {}

    def key(i: int):
        # services that must hold GPUs (gpus_min) take their lanes first, so that one that may
        # hold none never leaves another short of its minimum
        job = scenario.jobs[i]
        if services == "constrained":
            return (
                job.gpus_min == 0,
                allowed_gpus(scenario.cluster, job).bit_count(),
                -job.priority,
                i,
            )
        return (job.gpus_min == 0, -job.priority, i)

    order_of = sorted(
        (i for i, j in enumerate(scenario.jobs) if isinstance(j, RealtimeJob)), key=key
    )
    busy = list(running)
    for i in order_of:
        job = scenario.jobs[i]
        own = mask_of(job.previous_gpus or ())
        lane_pref = lane_order(scenario, job, rule)
        if shared:
            others = 0  # the other services' previous GPUs stay theirs at the start
            for other in scenario.realtime_jobs:
                if other is not job:
                    others |= mask_of(other.previous_gpus or ())
            order = [g for g in lane_pref if not others >> g & 1 or own >> g & 1]
            path = counts_path(job, T, len(order), worth)
            # (only as many of them as it may need, and as many again to move to: a cluster
            # has thousands)
            head = _lane(order, own, path, busy)
            held = set(head)
            order = head + [g for g in order if g not in held][: max(path, default=0)]
            out[i] = sets = _walk(job, order, path, busy)
            busy = [m | h for m, h in zip(busy, sets, strict=True)]
            continue
        order = [g for g in lane_pref if own >> g & 1 or not taken >> g & 1]
        path = counts_path(job, T, len(order), worth)
        lane = _lane(order, own, path, running)
        path = counts_path(job, T, len(lane), worth)
        taken |= mask_of(lane)
        out[i] = _walk(job, lane, path, running)
    return out


def legal_sets(scenario: Scenario, sets: dict[int, list[int]]) -> bool:
    """Whether each service's sets keep its range and swap cap (from previous_gpus)."""
    for i, per_step in sets.items():
        job = scenario.jobs[i]
        before = mask_of(job.previous_gpus) if job.previous_gpus is not None else None
        for mask in per_step:
            if not job.gpus_min <= mask.bit_count() <= job.gpus_max:
                return False
            if before is not None and (mask ^ before).bit_count() > job.swap_cap:
                return False
            before = mask
    return True


def _lane(order: list[int], own: int, path: list[int], running: list[int]) -> list[int]:
    """The first GPUs of `order` (its previous GPUs always) until at every step as many of
    them are free of running work as the path holds."""
    short = list(path)
    lane = []
    for g in order:
        if not any(n > 0 for n in short):
            break
        lane.append(g)
        for t, mask in enumerate(running):
            if not mask >> g & 1:
                short[t] -= 1
    return lane + [g for g in order if own >> g & 1 and g not in lane]


def _walk(job: RealtimeJob, lane: list[int], path: list[int], running: list[int]) -> list[int]:
    """The service's GPUs per step: the first `path[t]` lane GPUs free of running work, reached
    from the step before within swap_cap (forced moves first)."""
    current = mask_of(job.previous_gpus) if job.previous_gpus is not None else None
    out = []
    for t, count in enumerate(path):
        free = [g for g in lane if not running[t] >> g & 1]
        target = mask_of(free[:count])
        if current is None:
            current = target
        else:
            # GPUs taken from under it (a window cut out of serving) are released first, and
            # count against the swap budget like any other move
            forced = (current & running[t]).bit_count()
            budget = max(0, job.swap_cap - forced)
            current = _toward(current & ~running[t], target, free, budget, count)
        out.append(current)
    return out


def _toward(current: int, target: int, free: list[int], budget: int, count: int) -> int:
    """Move from `current` toward `target` spending at most `budget` gains plus releases:
    first to the right size, then trading a GPU the target does not hold for one it does."""
    size = current.bit_count()
    gains = [g for g in free if target >> g & 1 and not current >> g & 1]
    gains += [g for g in free if not target >> g & 1 and not current >> g & 1]  # spare GPUs
    releases = [g for g in reversed(free) if current >> g & 1 and not target >> g & 1]
    releases += [g for g in reversed(free) if current >> g & 1 and target >> g & 1]
    while budget and size < count and gains:
        current |= 1 << gains.pop(0)
        size, budget = size + 1, budget - 1
    while budget and size > count and releases:
        current &= ~(1 << releases.pop(0))
        size, budget = size - 1, budget - 1
    wrong = [g for g in reversed(free) if current >> g & 1 and not target >> g & 1]
    right = [g for g in free if target >> g & 1 and not current >> g & 1]
    while budget >= 2 and wrong and right:
        current &= ~(1 << wrong.pop(0))
        current |= 1 << right.pop(0)
        budget -= 2
    return current
