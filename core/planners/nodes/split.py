"""Serving split exactly among the services on the GPUs batch work leaves (the node allocator's
last word on serving).

Lanes and the shared layout decide each service's GPUs one service at a time, each rounding its
own demand up: where two services share too few GPUs, the one served first may hold a GPU for
a tenth of a unit while the other goes short by four tenths. Once the batch blocks are fixed,
what serving earns depends only on how many GPUs each service holds at each step, so the
counts are chosen by a dynamic programme over the steps: the states are the services' counts
(at most a few services of a few GPUs each, on these small clusters), a step's counts must fit
the GPUs each subset of services may use there, and a move between steps must keep every swap
cap, GPUs that batch work takes from a service counting as moves (the GPUs free at both steps
bound what the services can keep). The value is the served demand weighted by priority (the
objective's shortfall penalty), fewer GPUs held breaking ties. The counts are then laid onto
GPUs step by step: each service keeps the GPUs it held that are still free, and takes the ones
free for as long as it needs them, in its lane order; where that cannot keep a swap cap the
split gives up (`None`) and the caller keeps its own layout.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ...model import RealtimeJob, Scenario
from ...nodes import allowed_gpus
from ..blocks import mask_of
from .serving import lane_order

MAX_STATES = 400  # count vectors per step (the product of the services' count ranges)


def exact_split(scenario: Scenario, busy: list[int]) -> dict[int, list[int]] | None:
    """Per service (by grid index), its GPUs at every step as bitsets, serving the most
    priority-weighted demand on the GPUs not in `busy` (per step, what batch work holds);
    None where there are no services, too many count vectors, or no legal layout found."""
    jobs = scenario.jobs
    services = [i for i, j in enumerate(jobs) if isinstance(j, RealtimeJob)]
    if not services:
        return None
    T = scenario.cluster.horizon_steps
    K = len(services)
    tops = []  # a service never needs more GPUs than its peak demand rounded up
    for i in services:
        job = jobs[i]
        need = max((math.ceil(d - 1e-9) for d in job.demand[:T]), default=0)
        tops.append(min(job.gpus_max, max(job.gpus_min, need)))
    if math.prod(t + 1 for t in tops) > MAX_STATES:
        return None
    allowed = [allowed_gpus(scenario.cluster, jobs[i]) for i in services]
    avail = [[a & ~busy[t] for t in range(T)] for a in allowed]
    subsets = [
        [k for k in range(K) if q >> k & 1] for q in range(1, 1 << K)
    ]  # every non-empty subset of services

    def union(masks: list[int], members: list[int]) -> int:
        out = 0
        for k in members:
            out |= masks[k]
        return out.bit_count()

    room = np.array(
        [[union([avail[k][t] for k in range(K)], q) for q in subsets] for t in range(T)]
    )
    stable = np.array(
        [[0] * len(subsets)]
        + [
            [union([avail[k][t - 1] & avail[k][t] for k in range(K)], q) for q in subsets]
            for t in range(1, T)
        ]
    )
    # every count vector up to the tops, one row each; a step's states are those that fit
    counts = np.array(list(itertools.product(*(range(t + 1) for t in tops))), dtype=np.int64)
    counts = counts.reshape(-1, K)
    lows = np.array([jobs[i].gpus_min for i in services])
    caps = np.array([jobs[i].swap_cap for i in services])
    member = np.array([[k in q for k in range(K)] for q in subsets], dtype=np.int64)  # Q x K
    sizes = np.array([[avail[k][t].bit_count() for k in range(K)] for t in range(T)])
    fits = (counts[None] >= lows).all(axis=2) & (counts[None] <= sizes[:, None]).all(axis=2)
    fits &= (counts @ member.T <= room[:, None]).all(axis=2)  # T x N
    priority = np.array([jobs[i].priority for i in services], dtype=float)
    demand = np.array([list(jobs[i].demand[:T]) for i in services], dtype=float).T  # T x K
    gain = (np.minimum(counts[None], demand[:, None]) * priority).sum(axis=2)
    gain -= 1e-6 * counts.sum(axis=1)  # fewer GPUs held breaks ties
    # moves between count vectors a -> b: within each swap cap, and what the services keep
    # (less the replacements their spare moves afford) fitting the GPUs free at both steps
    step = np.abs(counts[:, None] - counts[None])  # N x N x K
    within = (step <= caps).all(axis=2)
    kept = np.maximum(0, np.minimum(counts[:, None], counts[None]) - (caps - step) // 2)
    need = kept @ member.T  # N x N x Q
    previous = [
        mask_of(jobs[i].previous_gpus) if jobs[i].previous_gpus is not None else None
        for i in services
    ]
    start_ok = fits[0].copy()
    for k, i in enumerate(services):
        if previous[k] is None:
            continue
        held = previous[k].bit_count()
        keep = np.minimum(np.minimum(held, counts[:, k]), (previous[k] & avail[k][0]).bit_count())
        start_ok &= held + counts[:, k] - 2 * keep <= jobs[i].swap_cap
    if not start_ok.any():
        return None
    value = np.where(start_ok, gain[0], -np.inf)
    back = []
    for t in range(1, T):
        legal = within & (need <= stable[t]).all(axis=2) & fits[t][None, :]
        scores = np.where(legal, value[:, None], -np.inf)
        link = scores.argmax(axis=0)
        value = scores[link, np.arange(len(counts))] + gain[t]
        if not np.isfinite(value).any():
            return None
        back.append(link)
    n = int(value.argmax())
    path = [n]
    for link in reversed(back):
        n = int(link[n])
        path.append(n)
    counts = [tuple(int(x) for x in counts[n]) for n in reversed(path)]
    return _lay(scenario, services, allowed, busy, counts, previous)


def _lay(scenario, services, allowed, busy, counts, previous) -> dict[int, list[int]] | None:
    """The counts laid onto GPUs, step by step (see the module docstring); None where a swap
    cap or a count cannot be kept."""
    jobs = scenario.jobs
    T = len(counts)
    rank = []
    for i in services:
        order = lane_order(scenario, jobs[i])
        rank.append({g: r for r, g in enumerate(order)})

    def run(g: int, t: int) -> int:
        u = t
        while u < T and not busy[u] >> g & 1:
            u += 1
        return u - t

    def needed(k: int, t: int, size: int) -> int:
        u = t
        while u < T and counts[u][k] >= size:
            u += 1
        return u - t

    def ranked(k: int, t: int, mask: int, size: int) -> list[int]:
        gpus = [g for g in rank[k] if mask >> g & 1]
        want = needed(k, t, size)

        def key(g: int):
            r = run(g, t)
            return (r < want, -r if r < want else 0, rank[k][g])

        return sorted(gpus, key=key)

    held = list(previous)
    out = {i: [] for i in services}
    order = sorted(range(len(services)), key=lambda k: (allowed[k].bit_count(), k))
    for t in range(T):
        taken, now = 0, {}
        for k in order:  # each keeps what it held that is still free, the longest-free first
            cur = held[k] or 0
            keep = ranked(k, t, cur & allowed[k] & ~busy[t], 1)[: counts[t][k]]
            now[k] = mask_of(keep)
            taken |= now[k]
        for k in order:
            extra = counts[t][k] - now[k].bit_count()
            for _ in range(extra):
                size = now[k].bit_count() + 1
                pool = allowed[k] & ~busy[t] & ~taken
                choice = ranked(k, t, pool, size)
                if not choice:
                    return None
                now[k] |= 1 << choice[0]
                taken |= 1 << choice[0]
        for k, i in enumerate(services):
            if held[k] is not None and (now[k] ^ held[k]).bit_count() > jobs[i].swap_cap:
                return None
            held[k] = now[k]
            out[i].append(now[k])
    return out
