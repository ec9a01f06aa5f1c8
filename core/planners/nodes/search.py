"""The order the batch jobs are packed in: a few principled starts, a descent, random kicks.

Starts: by weighted shortest run (priority x speed per step of run at the job's fastest option,
Smith's rule, which is optimal for one machine and a linear cost), by value (priority x speed),
by value of the whole job, and by arrival. The descent moves one job a place earlier in the best
order while that raises the packed reward (first improvement, passes until none does); each
kick swaps two or three jobs at random (a seeded generator: plans are reproducible) and
descends again, keeping the result where it wins. Everything is counted in packings, so the
same scenario always gets the same plan.
"""

from __future__ import annotations

import random
from time import monotonic

from .packing import NodePacker, Placed


def starting_orders(packer: NodePacker) -> list[list[int]]:
    jobs = packer.scenario.jobs
    queued = sorted(packer.options)

    def fastest(i: int):
        return max(packer.options[i], key=lambda o: o.speed, default=None)

    def smith(i: int) -> float:
        o = fastest(i)
        return jobs[i].priority * o.speed * o.gpus / o.duration if o else 0.0

    def value(i: int) -> float:
        o = fastest(i)
        return jobs[i].priority * o.speed if o else 0.0

    keys = (
        lambda i: (-smith(i), jobs[i].arrival_step, i),
        lambda i: (-value(i), jobs[i].arrival_step, i),
        lambda i: (-value(i) * jobs[i].gpu_hours, i),
        lambda i: (jobs[i].arrival_step, i),
    )
    out: list[list[int]] = []
    for key in keys:
        order = sorted(queued, key=key)
        if order not in out:
            out.append(order)
    return out


def search(
    packer: NodePacker, packs: int, kicks: int, deadline: float | None = None
) -> tuple[list[Placed], float, list[int]]:
    """The best packing found in about `packs` packings, `kicks` of them spent kicking, and
    before `deadline` (a `time.monotonic()` value) where one is given; and the order packed."""
    best_order, best_placed, best_reward = None, [], -1.0
    for order in starting_orders(packer):
        placed, reward = packer.pack(order)
        if reward > best_reward + 1e-9:
            best_order, best_placed, best_reward = order, placed, reward
    if best_order is None or len(best_order) < 2:
        return best_placed, max(best_reward, 0.0), best_order or []
    limit = packer.packs + max(0, packs - kicks)
    best_order, best_placed, best_reward = _descend(
        packer, best_order, best_placed, best_reward, limit, deadline
    )
    rng = random.Random(len(best_order))
    for _ in range(kicks):
        if packer.packs >= limit + kicks or (deadline is not None and monotonic() > deadline):
            break
        order = list(best_order)
        for _ in range(rng.choice((2, 3))):
            a, b = rng.randrange(len(order)), rng.randrange(len(order))
            order[a], order[b] = order[b], order[a]
        placed, reward = packer.pack(order)
        order, placed, reward = _descend(
            packer, order, placed, reward, packer.packs + max(4, len(order)), deadline
        )
        if reward > best_reward + 1e-9:
            best_order, best_placed, best_reward = order, placed, reward
    return best_placed, best_reward, best_order


def _descend(packer: NodePacker, order, placed, reward, limit: int, deadline=None):
    """Move a job one place earlier while it pays, until a pass finds nothing, `limit`
    packings or the deadline."""
    improved = True
    while improved and packer.packs < limit:
        improved = False
        for k in range(1, len(order)):
            if packer.packs >= limit or (deadline is not None and monotonic() > deadline):
                break
            trial = order[: k - 1] + [order[k], order[k - 1]] + order[k + 1 :]
            trial_placed, trial_reward = packer.pack(trial)
            if trial_reward > reward + 1e-9:
                order, placed, reward = trial, trial_placed, trial_reward
                improved = True
    return order, placed, reward
