"""Phase 6, serving once more, around the finished batch work.

On small problems, serving short of its demand is placed again around the batch work and kept
where it covers more (`_serve_around`); on every problem it then takes GPUs the plan leaves idle,
within its range and swap cap (`_top_up`); on small problems, last, GPUs handed between services
move to where that pays (`_HandOvers`), and a batch job whose GPUs would serve more priced
demand than it earns is left out, one at a time while that pays (`_served_instead`).
"""

from __future__ import annotations

import math

from ...model import Scenario
from ..blocks import (
    mask_of,
)
from .packing import _free_masks
from .serving import _coverage_key, _covers, _place_realtime, _Targets


def _served_instead(scenario, running, discount, realtime, placements):
    """Small problems, last: a batch job whose GPUs serve more priced demand than it earns is
    left out, its GPUs topped up by serving (`_top_up`), one job at a time while that pays. The
    serving priced each GPU against the cheapest batch work before the packing; a job packed
    into the room serving gave up can earn less than the shortfall it leaves (wide small-1038,
    once b0's window is tried: b5 on GPU 3 at steps 3-4 earns 6 where serving covers 0.9 units
    there, 9). Only where serving may be given up (`give_up_serving`)."""

    def score(sets, kept) -> float:  # the batch reward less the priced shortfall
        earned = sum(
            scenario.jobs[i].priority * g * (discount[e] - discount[s]) for i, _, g, s, e in kept
        )
        return earned + _coverage_key(scenario, sets)[1]

    best = score(realtime, placements)
    improved = True
    while improved:
        improved = False
        for k in range(len(placements)):
            others = placements[:k] + placements[k + 1 :]
            sets = _top_up(scenario, running, realtime, others, True)
            trial = score(sets, others)
            if trial > best + 1e-9:
                best, realtime, placements, improved = trial, sets, others, True
                break
    return realtime, placements


def _serve_around(scenario, running, incumbent, pricings, params, layouts, peak=True):
    """The final serving topped up (`_top_up`), or where it is short, serving placed again
    around the final batch work where that covers more (target met first, then priced
    shortfall; the batch work stays as it is). `incumbent` is (serving sets, batch placements).

    Serving was laid out before the batch work it had to make way for; a job with a swap cap
    of 1 cannot release a GPU and gain another at the same step, so where batch work later
    takes a GPU it holds at its peak, it goes short there. Placed again with the batch cells
    of each step avoided and the GPUs batch takes later gained only for `gpus_min` and left
    early (`_place_realtime`'s `around`), serving moves while its demand is low. Each pricing is
    placed in each of `layouts` (none: the top-up alone), and with `peak` so are the peaks held
    all horizon (`_Targets` "peak") without hand-overs, topped up like the rest: where two
    services with swap caps of 1 contend around fixed batch work, following the demand curve
    greedily gives a GPU to one job while its demand is low that the other needs a few steps
    later, and a cap of 1 cannot undo that in time (day-shape small-21 reaches the optimum so:
    tests/planners/test_allocator.py)."""
    realtime, placements = incumbent
    topped = _top_up(scenario, running, realtime, placements, bool(layouts))
    if not layouts or not placements:
        return topped
    key = _coverage_key(scenario, topped)[:2]
    if key[1] >= 0.0:
        return topped  # nothing short: nothing to gain
    T = scenario.cluster.horizon_steps
    cells = [0] * T
    for _, b, g, start, end in placements:
        block = ((1 << g) - 1) << b
        for t in range(start, end):
            cells[t] |= block
    tries = [(p, style, params.give_up_serving) for p in pricings for style in layouts]
    if peak:  # peaks held all horizon, no hand-over: services that contend keep their GPUs
        held = _Targets("peak", pricings[0].worth)
        tries += [(held, style, False) for style in layouts]
    for pricing, layout, hand_over in tries:
        sets = _place_realtime(
            scenario,
            running,
            layout,
            pricing,
            cells,
            hand_over=hand_over,
            around=cells,
        )
        if any(m & cells[t] for v in sets.values() for t, m in enumerate(v)):
            continue  # a swap cap or gpus_min held serving on batch work
        sets = _top_up(scenario, running, sets, placements, True)
        here = _coverage_key(scenario, sets)[:2]
        if here > key:
            topped, key = sets, here
    return topped


def _top_up(
    scenario: Scenario,
    running: list[int],
    realtime: dict[int, list[int]],
    placements: list[tuple[int, int, int, int, int]],
    hand_overs: bool = False,
) -> dict[int, list[int]]:
    """Serving short of its demand also takes GPUs the finished plan leaves idle.

    The targets priced a GPU against the batch work that could use it; where the packed batch
    work did not, the GPU is idle and serving on it only lowers the shortfall. Per job (by
    priority), from each step where it is short: an idle GPU, held from there while it stays
    idle and within `gpus_max`, up to the last step whose swap budget has room for its release
    (or the horizon); its gain needs room at the first step too (`_idle_run`). Where a swap cap
    is spent at either end, the run takes a GPU the job just released (held on), or gains one
    at an earlier step with room, or one the job gains at the next step anyway (a step early):
    wide-shape small-4169 and day-shape small-4236 reach the shortfall of the best serving
    around that batch work (tests/planners/test_allocator.py). Last, with `hand_overs` (small
    problems only: at the benchmarks' size they cost time for no gain), hand-overs between
    services move where that pays (`_hand_overs`).
    """
    if not realtime:
        return realtime
    T = scenario.cluster.horizon_steps
    idle = _free_masks(scenario.cluster.gpus, running, realtime)
    for _, b, g, start, end in placements:
        block = ((1 << g) - 1) << b
        for t in range(start, end):
            idle[t] &= ~block
    jobs = sorted(realtime, key=lambda i: -scenario.jobs[i].priority)  # stable: file order
    out = dict(realtime)
    for i in jobs:
        if scenario.policy.penalty_weight * scenario.jobs[i].priority <= 0:
            continue  # its shortfall costs nothing: serving would only hold GPUs
        job = scenario.jobs[i]
        sets = list(out[i])
        before = [mask_of(job.previous_gpus)] if job.previous_gpus is not None else sets[:1]
        swaps = [(a ^ b).bit_count() for a, b in zip(before + sets[:-1], sets, strict=True)]
        free_first = job.previous_gpus is None  # step 0 is free
        a = 0
        while a < T:
            want = math.ceil(job.demand[a] - 1e-9)
            n = sets[a].bit_count()
            run = None
            if n < min(want, job.gpus_max) and idle[a]:
                run = _idle_run(job, (sets, swaps, idle, before[0]), a, free_first)
            if run is None:
                a += 1
                continue
            first, end, bit, gained, released = run
            for t in range(first, end):
                sets[t] |= bit
                idle[t] ^= bit
            swaps[first] += gained
            if end < T:
                swaps[end] += released
        out[i] = sets
    return _hand_overs(scenario, out, idle) if hand_overs else out


def _hand_overs(scenario: Scenario, realtime: dict[int, list[int]], idle: list[int]):
    """GPUs handed between services at better steps, where that pays (`_HandOvers`); `idle`
    is per step the GPUs neither serving nor batch work holds (kept up to date)."""
    if len(realtime) < 2 or scenario.policy.penalty_weight <= 0:
        return realtime
    moves = _HandOvers(scenario, realtime, idle)
    moves.earlier()
    moves.back()
    return moves.sets


class _HandOvers:
    """Hand-overs of a GPU between two services, each kept where it pays (priority times the
    demand the GPU covers), both stay within their ranges and swap caps, and under a coverage
    target no unit is lost.

    `earlier`: where one job gains a GPU at the step another releases it, the hand-over moves a
    step earlier while that pays (day-shape small-4386: rt0, priority 4, held a GPU past its
    demand at step 16 that rt1, priority 2 and a GPU short, gained at step 17). `back`: where a
    job released a GPU that stayed idle until another gained it, it holds it on over the other's
    whole run instead where that pays (default-shape small-4353: rt0, priority 4 and swap cap 1,
    let GPU 4 go while its demand dipped and could not ramp back to its peak; rt1, priority 2,
    had it). Both reach the shortfall of the best serving around those batch cells (a MIP over
    serving alone)."""

    def __init__(self, scenario: Scenario, realtime: dict[int, list[int]], idle: list[int]):
        self.T = scenario.cluster.horizon_steps
        self.jobs = {i: scenario.jobs[i] for i in realtime}
        self.units = scenario.policy.rt_coverage_target is not None
        self.sets = {i: list(v) for i, v in realtime.items()}
        self.idle = idle
        self.before = {
            i: mask_of(job.previous_gpus) if job.previous_gpus is not None else None
            for i, job in self.jobs.items()
        }

    def fits(self, i: int, t: int) -> bool:
        """Job i's swaps at steps t and t + 1 within its cap (step 0 free without
        previous_gpus)."""
        s, before = self.sets[i], self.before[i]
        for u in (t, t + 1):
            if u >= self.T or u == 0 and before is None:
                continue
            prior = s[u - 1] if u > 0 else before
            if (prior ^ s[u]).bit_count() > self.jobs[i].swap_cap:
                return False
        return True

    def earlier(self) -> None:
        jobs, sets = self.jobs, self.sets
        released = [0] * self.T  # per step, the GPUs some job releases there
        for v in sets.values():
            released = [r | (p & ~c) for r, p, c in zip(released, [0, *v], v, strict=False)]
        for b in sorted(jobs, key=lambda i: -jobs[i].priority):  # stable: file order
            v, demand = sets[b], jobs[b].demand
            steps = zip(v, v[1:], released[1:], demand, strict=False)
            # the steps where b gains a GPU another releases, short the step before
            handed = [
                (e, g)
                for e, (p, c, r, d) in enumerate(steps, 1)
                if (g := c & ~p & r) and p.bit_count() < d
            ]
            for e, gained in handed:
                while gained:
                    x = gained & -gained
                    gained ^= x
                    a = next((j for j in jobs if j != b and sets[j][e - 1] & x), None)
                    t = e - 1
                    while a is not None and t >= 0 and sets[a][t] & x and self._pays(a, b, t):
                        sets[a][t] ^= x
                        sets[b][t] |= x
                        if not (self.fits(a, t) and self.fits(b, t)):
                            sets[a][t] |= x
                            sets[b][t] ^= x
                            break
                        t -= 1

    def _pays(self, a: int, b: int, t: int) -> bool:
        """Whether job b's next GPU at step t is worth more than job a's last."""
        giver, gainer = self.jobs[a], self.jobs[b]
        n, m = self.sets[b][t].bit_count(), self.sets[a][t].bit_count()
        if n >= gainer.gpus_max or m <= giver.gpus_min:
            return False
        wins = _covers(gainer.demand[t], n + 1)
        loses = _covers(giver.demand[t], m)
        return gainer.priority * wins > giver.priority * loses + 1e-9 and not (
            self.units and wins < loses - 1e-9
        )

    def back(self) -> None:
        jobs, sets, idle, T = self.jobs, self.sets, self.idle, self.T
        for b, loser in jobs.items():
            v = sets[b]
            steps = zip(v, v[1:], idle, strict=False)
            gains = [(s, g) for s, (p, c, i) in enumerate(steps, 1) if (g := c & ~p & i)]
            for s, new in gains:  # gained where the GPU was idle the step before
                while new:
                    x = new & -new
                    new ^= x
                    r = s  # the GPU is idle from r until b gains it at s
                    while r > 0 and idle[r - 1] & x:
                        r -= 1
                    a = next((j for j in jobs if j != b and r > 0 and sets[j][r - 1] & x), None)
                    if a is None:
                        continue
                    e = s
                    while e < T and sets[b][e] & x:
                        e += 1
                    run = (r, s, e)
                    if _hands_back_pay(jobs[a], loser, (sets[a], sets[b]), run, self.units):
                        self._hand_back(a, b, x, run)

    def _hand_back(self, a: int, b: int, x: int, run: tuple[int, int, int]) -> None:
        r, s, e = run
        mine, theirs = self.sets[a], self.sets[b]
        for t in range(r, e):
            mine[t] |= x
            theirs[t] &= ~x
        fit = self.fits(a, r - 1) and self.fits(a, e - 1)
        if fit and self.fits(b, s - 1) and self.fits(b, e - 1):
            for t in range(r, s):
                self.idle[t] &= ~x
            return
        for t in range(r, e):
            mine[t] &= ~x
            if t >= s:
                theirs[t] |= x


def _hands_back_pay(giver, loser, held, run, units: bool) -> bool:
    """Whether `giver`, which released a GPU at step r that stayed idle until `loser` gained
    it at s and held it to e (`run`), pays holding it on from r to e instead (priority times the
    demand it covers, within both ranges; under a coverage target, no unit lost). `held` is
    (giver's sets, loser's sets)."""
    r, s, e = run
    mine, theirs = held
    gain = loss = gained = lost = 0.0
    for t in range(r, e):
        m = mine[t].bit_count()
        if m >= giver.gpus_max:
            return False
        covered = _covers(giver.demand[t], m + 1)
        gain += giver.priority * covered
        gained += covered
        if t >= s:
            n = theirs[t].bit_count()
            if n <= loser.gpus_min:
                return False
            covered = _covers(loser.demand[t], n)
            loss += loser.priority * covered
            lost += covered
    return gain > loss + 1e-9 and not (units and gained < lost - 1e-9)


def _idle_run(job, held, a: int, free_first: bool):
    """The run of one idle GPU `_top_up` gives a job short at step `a`: (first step, end,
    the GPU's bit, the swaps its gain costs at the first step, its release at the end), or
    None. `held` is the job's (sets, swaps per step, idle GPUs per step, its GPUs before step
    0); step 0 is free where `free_first`.

    Held from `a` while it stays idle and the job below `gpus_max`, up to the last step whose
    swap budget has room for its release. Where step `a` has no room for the gain (a swap cap
    spent releasing a GPU there), it is a GPU the job released at `a` held on (its release
    moves later: one swap fewer at `a`), or else one gained at the last earlier step with room
    where it is idle from there and the job below `gpus_max`. Where no release fits, it is a
    GPU the job gains at the next step, gained at `a` instead (one swap fewer there)."""
    sets, swaps, idle, before = held
    T, cap = len(sets), job.swap_cap
    first, chain, gained = a, idle[a], 1
    if free_first and a == 0:
        gained = 0
    elif swaps[a] >= cap:
        released = idle[a] & (sets[a - 1] if a > 0 else before)
        if released:
            chain, gained = released, -1
        else:
            for first in range(a - 1, -1, -1):
                chain &= idle[first]
                if not chain or sets[first].bit_count() >= job.gpus_max:
                    return None
                if free_first and first == 0:
                    gained = 0
                    break
                if swaps[first] < cap:
                    break
            else:
                return None
    start = chain
    end = a + 1
    while end < T and sets[end].bit_count() < job.gpus_max and chain & idle[end]:
        chain &= idle[end]
        end += 1
    while a < end < T and swaps[end] >= cap:  # its release must fit
        end -= 1
    if end > a:
        return first, end, chain & -chain, gained, 1
    gains = start & sets[a + 1] if a + 1 < T else 0
    if not gains:
        return None
    return first, a + 1, gains & -gains, gained, -1
