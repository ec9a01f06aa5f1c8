"""Phase 4's candidates: the windows where a late job would earn most, less what it displaces.

A window is a job placed late (or not at all) pinned on a block and start; prefix sums over the
serving and batch work on every block price each block and start at once (`_BlockCosts`), and
the best-ranked windows per round go to `moves` (`_Ranked`). `_block_moves` proposes keeping
serving off the block where a late job could start earliest.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ...model import Scenario
from .serving import _covers


def _block_moves(scenario: Scenario, running: list[int], realtime: dict[int, list[int]], result):
    """Blocks to keep clear of serving, in order, each as (batch job to promote, GPUs serving
    should avoid per step): per batch job placed late or not at all (highest priority first)
    and per size, the earliest window where an aligned block free of running work is broken
    only by serving (the block where serving sits least); where the GPUs serving and running
    work hold do not fit beside that block at every step of it, also (flagged True, tried on a
    budget of its own where the first loses) the earliest window where they do: a block
    cleared where serving cannot fit beside it gives up demand (rolling-surge: dpo-70b at its
    arrival, step 44, where serving holds 9 of 16 GPUs; a step later 7, and the move pays).

    (Serving is not capped at `floor(demand)` over such a window, nor over a run of steps where
    a target rounds a fraction up: the priced targets already give up the fractions batch work
    pays for.)
    """
    G, T = scenario.cluster.gpus, scenario.cluster.horizon_steps
    serving = [0] * T
    for sets in realtime.values():
        for t, mask in enumerate(sets):
            serving[t] |= mask
    crowded_at = [serving[t].bit_count() + running[t].bit_count() for t in range(T)]
    placed = {p[0]: p for p in result.placements}
    for job in sorted(result.order, key=lambda c: (-c.priority, c.index)):
        where = placed.get(job.index)
        latest = T if where is None else where[3]
        seen = set()
        for g, d in zip(reversed(job.sizes), reversed(job.durations), strict=True):
            found = _broken_blocks((job.arrival, latest), (g, d), G, running, serving, crowded_at)
            for k, window in enumerate(found):  # the earliest, then the one that fits
                if window not in seen:
                    seen.add(window)
                    s, e, block = window
                    yield job, [block if s <= t < e else 0 for t in range(T)], k > 0


def _broken_blocks(starts, shape, gpus, running, serving, crowded_at):
    """`_block_moves`' windows (start, end, block) of a job's `shape` (size, duration), at
    `starts` (first, last + 1), as asked for: the earliest where a block free of running work is
    broken only by serving (the block where serving sits least), then, where serving and
    running work (`crowded_at`: the GPUs they hold per step) do not fit beside that block at
    every step of it, the earliest where they do."""
    g, d = shape
    T, align = len(serving), (1 << g) - 1
    found = False
    for s in range(*starts):
        e = min(s + d, T)
        if found and any(crowded_at[t] + g > gpus for t in range(s, e)):
            continue  # serving cannot move off a block beside it
        best = None
        for b in range(0, gpus - g + 1, g):
            block = align << b
            cost = 0  # the serving GPUs on it over the window, -1 where running work holds it
            for t in range(s, e):
                if running[t] & block:
                    cost = -1
                    break
                cost += (serving[t] & block).bit_count()
            if cost > 0 and (best is None or cost < best[0]):
                best = (cost, block)
        if best is not None:
            yield s, e, best[1]
            if found or all(crowded_at[t] + g <= gpus for t in range(s, e)):
                return
            found = True


_WINDOWS = 10  # windows ranked per round: those that cannot be cleared are passed over


def _windows(scenario, jobs, running, incumbent, discount, widen="", small=False):
    """Windows for batch jobs placed late or not at all, whose block serving breaks: best net
    value first (the job's decayed reward there, minus what it has now, the priced serving it
    displaces and the reward of batch work on the block then, which must re-pack: counted
    unless it is no wider than the GPUs the job leaves beside the block, where it can go), as
    (job, start, end, block). Costs are prefix sums per block, so a window costs O(1).

    On `small` problems, whose search affords more trials, a window that loses may still be
    tried where the cells the job gives up could pay for it: each at the highest priority among
    the other late jobs (one may take them: a job that starts a step earlier on a block ends a
    step earlier too, and the step it leaves can hold work that fits nowhere else).

    `widen` lets jobs count as late at their own start too: "wider", a job placed narrower than its
    widest size, where a wider block would finish it sooner (every window round on larger problems,
    where a serving GPU often breaks the block a job needs at its arrival; not in small problems'
    main rounds, where it makes nearly as many plans worse as better); "pairs", every placed job, on
    any block and size (the window pairs of small problems: moving a job to another block at its
    start can make the room a second window needs), and there the batch work on the block is counted
    at what it loses starting again when the window ends, not at all it earns (only there: in every
    window round that count makes many plans worse); a job placed narrower than its widest size
    there also counts at every later start, where a wider block may earn more than the narrow one
    sooner (a job earns its GPU-steps: wide small-1068, b4 4 GPUs wide at its arrival, step 6, earns
    less than 8 GPUs wide at step 9, once running work frees GPUs 0-1;
    tests/planners/test_allocator.py)."""
    realtime, result = incumbent
    T = scenario.cluster.horizon_steps
    placed = {p[0]: p for p in result.placements}
    late = []
    for job in result.order:
        where = placed.get(job.index)
        latest = T if where is None else where[3]
        if where is not None and (widen == "pairs" or widen and job.sizes[-1] > where[2]):
            latest += 1  # its own start too: a wider block (or with "pairs", any) from there
            if widen == "pairs" and job.sizes[-1] > where[2]:
                latest = T  # and a job placed narrow at any later start (a wider block then)
        if latest > job.arrival:
            late.append((job, where, latest))
    if not late:
        return ()
    serving = [0] * T
    for sets in realtime.values():
        for t, m in enumerate(sets):
            serving[t] |= m
    costs = _BlockCosts(scenario, jobs, running, realtime, result, discount, serving)
    # Jobs by what their best window could earn (at arrival, nothing displaced): once that is
    # no more than the _WINDOWS-th best net value found, no later job can enter the list.
    bounds = []
    for job, where, latest in late:
        now = (
            0.0
            if where is None
            else job.priority * where[2] * (discount[where[4]] - discount[where[3]])
        )
        best = max(
            job.priority * g * (discount[min(job.arrival + d, T)] - discount[job.arrival])
            for g, d in zip(job.sizes, job.durations, strict=True)
        )
        bounds.append((best - now, job, where, latest, now))
    bounds.sort(key=lambda item: (-item[0], item[1].index))

    def evaluate(item) -> list[tuple]:
        _, job, where, latest, now = item
        spare = 0
        if small and where is not None:
            spare = max((other.priority for other, _, _ in late if other is not job), default=0)
        starts = range(job.arrival, latest)
        return _job_windows(job, (where, now, spare), starts, costs, discount, widen == "pairs")

    return _Ranked(bounds, evaluate)


class _Ranked:
    """`_windows`' list, ranked as it is read: the best `_WINDOWS` windows (net value, then
    -priority, job, start, end; stable) of the jobs taken in order of their bound, until that
    list is full and the next bound is no better than its last. A window is read once no job
    left could place one before it (the next bound is below its net value), so a search that
    stops after a few windows never prices the jobs behind them. Iterable more than once."""

    def __init__(self, bounds: list[tuple], evaluate: Callable[[tuple], list[tuple]]):
        self.bounds, self.evaluate = bounds, evaluate
        self.out: list[tuple] = []
        self.next = 0  # the next job of `bounds` to price

    def __iter__(self):
        p = 0
        while self._settled(p):
            *_, s, e, block, job = self.out[p]
            yield job, s, e, block
            p += 1

    def _settled(self, p: int) -> bool:
        """Whether the list has a p-th window that no job left to price can come before."""
        out, bounds = self.out, self.bounds
        while self.next < len(bounds):
            bound = bounds[self.next][0]
            if len(out) >= _WINDOWS and bound <= out[_WINDOWS - 1][0]:
                self.next = len(bounds)  # the list is final
                break
            if p < len(out) and bound < out[p][0]:
                return True
            out += self.evaluate(bounds[self.next])
            self.next += 1
            out.sort(key=lambda w: w[:5], reverse=True)
            del out[_WINDOWS:]
        return p < len(out)


def _job_windows(job, incumbent, starts, costs, discount, delay=False):
    """(net value, -priority, index, start, end, block, job) of each window of the job, at each
    size, block and start, that serving breaks, that can be cleared and that is worth it;
    `incumbent` is (where the job is placed or None, what that earns (0 unplaced), the price
    per discounted GPU-step of the cells it gives up, or 0): a window is worth it where its net
    value plus those cells at that price is positive. With `delay`, batch work on the block
    that cannot go beside it costs what it loses starting again at the window's end."""
    where, now, spare = incumbent
    T = costs.T
    out = []
    for g, d in zip(job.sizes, job.durations, strict=True):
        ends = [s + d if s + d < T else T for s in starts]
        earn = [
            job.priority * g * (discount[e] - discount[s]) - now
            for s, e in zip(starts, ends, strict=True)
        ]
        for b, cum, broken, blocked, beside, paid in costs.of(g):
            if broken[ends[-1]] == broken[starts[0]]:
                continue  # serving breaks it in none of the windows
            block = ((1 << g) - 1) << b
            beside = [p for p in beside if p[0] != job.index]
            saved = costs.vacating(block, cum, paid, where) if where else None
            # batch work no wider than what the job leaves beside the block re-packs there
            room = ((((1 << where[2]) - 1) << where[1]) & ~block).bit_count() if where else 0
            for s, e, net in zip(starts, ends, earn, strict=True):
                if broken[e] == broken[s] or blocked[e] != blocked[s]:
                    continue
                net -= cum[e] - cum[s]
                if saved is not None:
                    net += saved[e] - saved[s]
                # a window that loses may still pay with the GPU-steps it gives up, at `spare`
                credit = 0.0
                if net <= 0:
                    if not spare:
                        continue  # the batch work beside only costs more
                    credit = spare * _given_up(where, block, s, e, discount)
                    if net + credit <= 0:
                        continue
                net = _less_beside(net, beside, (s, e), room, discount, delay)
                if net <= 0:  # the batch work beside made it lose (or it lost alone)
                    if not spare:
                        continue
                    credit = credit or spare * _given_up(where, block, s, e, discount)
                    if net + credit <= 0:
                        continue
                out.append((net, -job.priority, job.index, s, e, block, job))
    return out


def _less_beside(net: float, beside, window, room: int, discount, delay: bool) -> float:
    """A window's net value less what the batch work on its block during `window` (start, end)
    loses, where it is wider than the `room` the moving job leaves beside the block: all it
    earns, or with `delay` what it loses starting again at the window's end (its run as long,
    cut at the horizon)."""
    s, e = window
    T = len(discount) - 1
    for _, a, z, value, width in beside:
        if a < e and s < z and width > room:
            if delay:
                later = min(e + z - a, T)
                value -= value / (discount[z] - discount[a]) * (discount[later] - discount[e])
            net -= value
    return net


def _given_up(where, block: int, start: int, end: int, discount) -> float:
    """The discounted GPU-steps of a job's placement `where` (index, b, g, start, end) that a
    window (block, start, end) does not hold."""
    _, b, g, s, e = where
    given = g * (discount[e] - discount[s])
    lo, hi = max(start, s), min(end, e)
    if lo < hi:
        given -= ((((1 << g) - 1) << b) & block).bit_count() * (discount[hi] - discount[lo])
    return given


class _BlockCosts:
    """Per block size, lazily: per aligned block, prefix sums over steps of what clearing it of
    serving costs (`_displaced`; inf where running work holds it) and of the steps serving
    breaks it and of the steps where it cannot be cleared (running work, or no room), with the
    batch placements that overlap it (index, start, end, reward)."""

    def __init__(self, scenario, jobs, running, realtime, result, discount, serving):
        G, T = scenario.cluster.gpus, scenario.cluster.horizon_steps
        self.G, self.T, self.running, self.serving = G, T, running, serving
        self.scenario, self.jobs, self.realtime, self.result = scenario, jobs, realtime, result
        self.discount = discount
        self.room = [((1 << G) - 1) & ~(running[t] | serving[t]) for t in range(T)]
        self.idle = list(self.room)  # and free of batch work, below
        self.batch: list[list[tuple[int, float]]] = [[] for _ in range(T)]
        self.placements = []
        for index, b, g, start, end in result.placements:
            block = ((1 << g) - 1) << b
            value = scenario.jobs[index].priority * g * (discount[end] - discount[start])
            self.placements.append((block, index, start, end, value))
            for t in range(start, end):
                self.idle[t] &= ~block
                cell = scenario.jobs[index].priority * (discount[t + 1] - discount[t])
                self.batch[t].append((block, cell))
        for cells in self.batch:
            cells.sort(key=lambda item: item[1])
        self.units: dict[int, list[float]] = {}
        self.memo: dict[int, list] = {}
        self.anywhere = 0  # every GPU serving holds at some step
        for m in serving:
            self.anywhere |= m

    def of(self, g: int) -> list:
        """The blocks of size g that serving breaks at some step (no others can qualify)."""
        out = self.memo.get(g)
        if out is None:
            out = self.memo[g] = [
                self._block(b, ((1 << g) - 1) << b)
                for b in range(0, self.G - g + 1, g)
                if self.anywhere & ((1 << g) - 1) << b
            ]
        return out

    def _block(self, b: int, block: int):
        """`step_cost` at every step, written out (the window ranking's hot loop)."""
        cum, broken, blocked = [0.0], [0], [0]
        paid = {}  # step: its cost, where positive
        c, n_broken, n_blocked = 0.0, 0, 0
        serving, running, idle, outside = self.serving, self.running, self.idle, ~block
        for t in range(self.T):
            on = serving[t] & block
            if running[t] & block:
                n_blocked += 1
            elif on:
                k = on.bit_count() - (idle[t] & outside).bit_count()
                if k <= 0:  # idle GPUs beside it take the serving: clearing it costs nothing
                    n_broken += 1
                else:
                    cost = _displaced(self._prefix(t), self.batch[t], block, k, self.room[t])
                    if cost == math.inf:
                        n_blocked += 1
                    else:
                        n_broken += 1
                        c += cost
                        if cost > 0.0:
                            paid[t] = cost
            cum.append(c)
            broken.append(n_broken)
            blocked.append(n_blocked)
        beside = [(i, a, z, v, m.bit_count()) for m, i, a, z, v in self.placements if m & block]
        return b, cum, broken, blocked, beside, paid

    def step_cost(self, t: int, block: int, vacated: int = 0) -> float | None:
        """What clearing the block of serving costs at step t (-1.0: no serving on it; None:
        it cannot be cleared), with the GPUs `vacated` (a moving job's own) idle too."""
        on = self.serving[t] & block
        if self.running[t] & block:
            return None
        if not on:
            return -1.0
        k = on.bit_count() - ((self.idle[t] | vacated) & ~block).bit_count()
        if k <= 0:
            return 0.0
        cost = _displaced(self._prefix(t), self.batch[t], block, k, self.room[t])
        return None if cost == math.inf else cost

    def vacating(self, block: int, cum: list[float], paid: dict, where) -> list[float] | None:
        """Prefix sums over steps of what a job's own placement `where` (index, b, g, start,
        end), given up as it moves, saves in clearing the block (its cells become idle); None
        when it saves nothing (the block costs nothing then, or the job holds no GPU beside).
        `paid`: the block's positive step costs, by step."""
        _, b, g, start, end = where
        own = (((1 << g) - 1) << b) & ~block
        if not own or cum[end] == cum[start]:
            return None
        out, c = [0.0] * (start + 1), 0.0
        for t in range(start, end):
            before = paid.get(t)
            if before is not None:
                after = self.step_cost(t, block, own)
                if after is not None:
                    c += before - max(after, 0.0)
            out.append(c)
        out += [c] * (self.T - end)
        return out

    def _prefix(self, t: int) -> list[float]:
        """Prefix sums of the marginal serving units at step t, cheapest first."""
        out = self.units.get(t)
        if out is None:
            weight = self.scenario.policy.penalty_weight
            prices = []
            for i, job in self.jobs:
                n = self.realtime[i][t].bit_count()
                d = job.demand[t]
                for k in range(n, job.gpus_min, -1):
                    prices.append(weight * job.priority * _covers(d, k))
            prices.sort()
            out = [0.0]
            for price in prices:
                out.append(out[-1] + price)
            self.units[t] = out
        return out


def _displaced(prefix, batch, block, k, room):
    """What moving k serving GPUs off a block costs at a step: the cheapest serving units given
    up, then batch cells off the block that serving takes (each at its own decayed reward: an
    estimate, the job may re-pack nearby; `batch` is (block, reward per GPU), cheapest first),
    else inf."""
    given = min(k, len(prefix) - 1)
    cost = prefix[given]
    rest = k - given
    if not rest:
        return cost
    for mask, value in batch:  # cheapest first
        n = (mask & room & ~block).bit_count()
        if n:
            cost += min(n, rest) * value
            rest -= min(n, rest)
            if not rest:
                return cost
    return math.inf
