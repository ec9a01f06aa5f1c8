"""Phase 4, real-time moves: serving revisited once batch work is packed.

Each move is judged by the true objective (decayed batch reward minus priced shortfall) after
re-packing the batch work; a trial the fluid bound rules out is not packed. First windows for
late jobs (`windows`, cleared by `clearing`), the jobs earlier windows pinned re-packed with the
rest or held where that earns more; then serving kept off the block where a late job could
start earliest. On small problems, window pairs (a window that loses alone kept where a second
on top of it pays) and hand-overs between services a step early or late. A move never takes
real-time coverage below `policy.rt_coverage_target` or below what the plan already had; where
a move changed the plan, jobs shrunk for serving that moved get their wider sizes back.
"""

from __future__ import annotations

import functools

from ...model import RealtimeJob, Scenario
from .bound import _FluidBound
from .clearing import _STUCK, _batch_by_step, _clear_window
from .layouts import FillBrokenBlocks
from .packing import _Candidate, _free_masks, _Packed, _Packer, _use_grid
from .params import AllocatorParams
from .search import _search
from .serving import _allowed_shortfall, _place_realtime, _Targets
from .windows import _block_moves, _windows


def _relax_realtime(
    scenario: Scenario,
    running: list[int],
    layout: FillBrokenBlocks,
    discount: list[float],
    incumbent: tuple[dict[int, list[int]], tuple, _FluidBound],
    moves: tuple[int, int, int],
    params: AllocatorParams,
    pricing: _Targets,
) -> tuple[dict[int, list[int]], tuple]:
    """Local search on the real-time side: give up a little demand where batch work earns more.

    The targets price each GPU against the cheapest batch work, but a GPU that serves a fraction
    of demand can also break an aligned block that a waiting job needs. `moves` is (windows, blocks
    kept clear, packings per trial). A window pins a waiting job on the block and start `_windows`
    ranks first, serving moved off it by `_clear_window`, the rest of the batch work re-packed
    around it (the jobs earlier windows pinned too, or where that earns less, held there). A block
    move keeps serving off a block a late job could start on (`_block_moves`); serving is
    re-placed around it (ramps and swap caps still hold) and the batch work re-packed in the
    incumbent's order with that job first (a packing, or on small problems a descent from it: a move
    that gives up serving often pays only once batch work is re-ordered). A move is kept when the
    true objective (decayed batch reward minus priced shortfall) improves, and never where it would
    take real-time coverage below `policy.rt_coverage_target` (or below what the plan already had,
    when it is below the target already). `incumbent` is (serving sets, batch result, the
    `_FluidBound` of the batch work). Last, where a move changed the incumbent, its shrunk jobs
    get their sizes back once (`_RealtimeSearch._grow`).
    """
    realtime, result, fluid = incumbent
    search = _RealtimeSearch(scenario, running, layout, discount, params, pricing, fluid)
    return search.run(realtime, result, moves)


class _RealtimeSearch:
    """The state of `_relax_realtime`: the incumbent and the GPUs serving avoids behind it."""

    def __init__(self, scenario, running, layout, discount, params, pricing, fluid):
        self.scenario, self.running, self.layout = scenario, running, layout
        self.discount, self.params, self.pricing = discount, params, pricing
        self.G, self.T = scenario.cluster.gpus, scenario.cluster.horizon_steps
        self.weight = scenario.policy.penalty_weight
        self.jobs = [(i, j) for i, j in enumerate(scenario.jobs) if isinstance(j, RealtimeJob)]
        self.fluid = fluid
        self.whole = {c.index: c for c in fluid.candidates}  # the batch work before any shrink

    def shortfall(self, sets: dict[int, list[int]]) -> tuple[float, float]:
        """Priced shortfall, units of shortfall."""
        price = units = 0.0
        for i, job in self.jobs:
            short = 0.0
            for d, m in zip(job.demand, sets[i], strict=True):
                n = m.bit_count()
                if n < d:
                    short += d - n
            price += job.priority * short
            units += short
        return price, units

    def run(self, realtime, result, moves):
        T = self.T
        price, units = self.shortfall(realtime)
        self.allowed = max(units, _allowed_shortfall(self.scenario)) + 1e-9
        self.best = result.reward - self.weight * price
        self.realtime, self.result = realtime, result
        self.avoid = [0] * T
        self.pins: list[tuple[tuple[int, int, int, int], _Candidate]] = []
        # (a block move at the first start where serving fits beside the block, tried where
        # the earliest start's lost, has a budget of its own)
        self.budget = {"window": moves[0], "block": moves[1], "fits": moves[1]}
        self.trial_packs = moves[2]
        self.misses = moves[0]  # window trials that may fail beyond the budget
        self.chains = 0
        self.stuck: set[tuple] = set()  # (incumbent id, job, pin, onto batch) a swap cap held
        self.late = False
        self.nested = 0  # windows tried on top of a losing window (`_chain`)
        self.only: set[int] | None = None  # windows of these jobs only (`_follow_up`)
        while any(self.budget.values()) and self._improve():
            pass
        if self.trial_packs > 1 and moves[0]:  # small problems: then window pairs
            # a second round where the first moved the incumbent (its pairs start from there:
            # day small-7271, tests/planners/test_allocator.py; a round from an unchanged
            # incumbent would find nothing new)
            for _ in range(2):
                before = self.result
                self.budget = {"window": _CHAINS, "block": 0, "fits": 0}
                self.misses, self.chains = 0, _CHAINS
                while self.budget["window"] and self._improve():
                    pass
                if self.result is before:
                    break
            # and one more window among those a swap cap held on this incumbent, the GPU
            # gained a step late (`_clear_window`'s `gain_late`)
            if self.params.give_up_serving and any(k[0] == id(self.result) for k in self.stuck):
                self.budget, self.misses, self.chains = {"window": 1, "block": 0, "fits": 0}, 0, 0
                self.late = True
                self._improve()
        if self.result is not result:
            self._grow()
        return self.realtime, self.result

    def _grow(self) -> None:
        """The final incumbent's batch work packed once more with every job the main search
        shrank given back its wider sizes: a shrink that paid on the serving the moves then
        changed may only cost now (day-shape small-24: a priority-8 job kept to 2 GPUs
        beside a block a window cleared). Kept where it earns more."""
        order = self.result.order
        whole = [self.whole[c.index] if c.sizes != self.whole[c.index].sizes else c for c in order]
        if all(a is b for a, b in zip(whole, order, strict=True)):
            return
        free = _free_masks(self.G, self.running, self.realtime)
        grown = self._pack_around(free, self.pins, None, whole, 1)
        if grown[1:3] > (self.result.reward, self.result.cells):
            self.result = grown

    def _improve(self) -> bool:
        """Try moves on the incumbent until one improves it, or the moves or budgets run out."""
        for kind, job, trial in self._trials():
            spare = kind == "window" and self.misses > 0  # a window trial that may fail freely
            if spare:
                self.misses -= 1
            else:
                self.budget[kind] -= 1
            if self._try(job, *trial):
                if spare:
                    self.budget[kind] -= 1
                return True
        return False

    def _trials(self):
        """(kind, batch job, (serving sets or None, avoided GPUs, window)) of each move that
        changes something, within its kind's budget: windows first, each a batch job pinned on
        a block whose serving `_clear_window` moves off; then the blocks of `_block_moves`."""
        scenario, jobs, running = self.scenario, self.jobs, self.running
        realtime, result = self.realtime, self.result
        windows = ()
        if self.budget["window"]:
            windows = _windows(
                scenario,
                jobs,
                running,
                (realtime, result),
                self.discount,
                "pairs" if self.chains > 0 else "wider" if self.trial_packs == 1 else "",
                self.trial_packs > 1,
            )
        # Serving moves to idle GPUs in every window before it moves onto batch work in any;
        # a job whose window was tried is not tried again at another start or block. (The
        # budget is checked before the next window is asked for: they are ranked as asked.)
        tried = set()
        by_step = {}  # job: `_batch_by_step` of the incumbent but that job (read-only)
        for onto_batch in (False, True):
            ranked = iter(windows)
            while self.budget["window"]:
                window = next(ranked, None)
                if window is None:
                    break
                job, start, end, block = window
                if job.index in tried:
                    continue
                pin = ((block & -block).bit_length() - 1, block.bit_count(), start, end)
                key = (id(result), job.index, pin, onto_batch)
                if self.late and key not in self.stuck:
                    continue
                if self.only is not None and job.index not in self.only:
                    continue
                if job.index not in by_step:
                    by_step[job.index] = _batch_by_step(scenario, result, self.discount, job.index)
                sets = _clear_window(
                    scenario,
                    jobs,
                    running,
                    (realtime, result, self.discount),
                    (pin, job.index, onto_batch),
                    self.params.give_up_serving,
                    functools.partial(self._resume_after, job),
                    self.late,
                    by_step[job.index],
                )
                if sets is _STUCK:
                    self.stuck.add(key)
                    continue
                if sets is not None:
                    tried.add(job.index)
                    yield "window", job, (sets, self.avoid, pin)
        moves = _block_moves(scenario, running, realtime, result)
        while self.budget["block"]:  # (checked before the next is asked for, as windows)
            job, block_masks, fits = next(moves, (None, None, None))
            if job is None:
                break
            if fits and not self.budget["fits"]:
                continue
            trial_avoid = [a | b for a, b in zip(self.avoid, block_masks, strict=True)]
            if trial_avoid != self.avoid:
                yield "fits" if fits else "block", job, (None, trial_avoid, None)

    def _try(self, job, sets, trial_avoid, pin) -> bool:
        """Re-place serving (unless the move gives its sets) and re-pack batch work under the
        move; keep it if J improves. A block move that loses is tried once more with serving
        led off the block, where that can pay (`_lead_in`)."""
        if sets is not None:
            return self._try_sets(job, sets, trial_avoid, pin)
        plain = self._replace_serving(job, trial_avoid)
        if self._try_sets(job, plain, trial_avoid, None):
            return True
        led = self._lead_in(job, trial_avoid, plain)
        return led is not None and self._try_sets(job, led, trial_avoid, None)

    def _try_sets(self, job, sets, trial_avoid, pin) -> bool:
        """`_try` on serving `sets`; where the move loses, `missed` is the J its packing scored
        (None where it was not packed)."""
        self.missed = None
        price, units = self.shortfall(sets)
        if units > self.allowed:
            return False
        free = _free_masks(self.G, self.running, sets)
        chain = pin is not None and self.chains > 0
        if not chain and self.fluid.reward(free) - self.weight * price <= self.best + 1e-9:
            return False  # no packing of the GPUs serving leaves can make up for it
        pins = self.pins
        if pin is not None:
            # the job on the window the move cleared, the rest around it: the jobs earlier
            # windows pinned re-pack first (serving keeps off their windows), or where that
            # earns less, stay pinned
            kept = [p for p in pins if p[1] is not job] + [(pin, job)]
            pins = [(pin, job)]
        # a pair's first window re-packs with a longer descent: it is kept only where it can
        # carry a second window, and a short descent leaves it far below what it could earn
        packs = _CHAIN_PACKS * self.trial_packs if chain else None
        trial_result = self._pack_around(free, pins, job if pin is None else None, packs=packs)
        if pin is not None and len(kept) > 1:
            other = self._pack_around(free, kept, None)
            if other is not None and (trial_result is None or other[1:3] > trial_result[1:3]):
                trial_result, pins = other, kept
        if trial_result is None:
            return False
        score = trial_result.reward - self.weight * price
        trial = (score, sets, trial_result, trial_avoid, pins, pin)
        if score > self.best + 1e-9:
            self._adopt(trial)
            return True
        self.missed = score
        if chain:
            self.chains -= 1
            return self._chain(trial)
        if pin is not None and self.nested and self.only is None and self.params.give_up_serving:
            return self._follow_up(trial)
        return False

    def _adopt(self, trial) -> None:
        score, self.realtime, self.result, avoid, pins, pin = trial
        self.best, self.avoid, self.pins = score, avoid, pins
        if pin is not None:  # later re-placements keep serving off the pinned window
            b, g, start, end = pin
            block = ((1 << g) - 1) << b
            self.avoid = [a | block if start <= t < end else a for t, a in enumerate(avoid)]

    def _chain(self, trial) -> bool:
        """A window that does not pay alone, kept where a second window on top of it makes the
        pair pay: clearing one block can push batch work that needs room the serving moved
        into, whose own window then gives a little serving up (small problems only). While
        pairs are left (`_CHAINS`), a second window that loses can take a third the same way."""
        saved = (self.best, self.realtime, self.result, self.avoid, self.pins)
        saved += (self.budget, self.misses)
        self._adopt(trial)
        self.best = saved[0]
        self.budget, self.misses = {"window": _CHAIN_WINDOWS, "block": 0, "fits": 0}, 0
        self.nested += 1
        found = self._improve()
        self.nested -= 1
        self.budget, self.misses = saved[5], saved[6]
        if not found:
            self.best, self.realtime, self.result, self.avoid, self.pins = saved[:5]
        return found

    def _follow_up(self, trial) -> bool:
        """A window tried on top of another (`_chain`) that loses, where no pairs are left, kept
        where a window of a job it made earn less (left out, started later, cut short or
        narrower) on top of it pays: `_chain` once more, for those jobs only. The job the window
        pushed out is often the one whose room the window's serving took: wide small-79, where
        b7's window on GPU 4 from step 13 (serving moves onto GPUs 0-1 a step at a time) leaves
        b3 out, whose own window at the end of the day then takes serving off GPUs 0-3 at steps
        22-23, which reaches the optimum (tests/planners/test_allocator.py). Only after a window
        tried on top of another: after any losing window it also makes plans worse. Only where
        serving may be given up (`give_up_serving`): in the rolling horizon, where demand is a
        forecast, the follow-up takes realised coverage below fifo's (tests/test_rolling.py)."""
        discount = self.discount

        def earned(placements) -> dict[int, float]:
            return {i: g * (discount[end] - discount[s]) for i, _, g, s, end in placements}

        now = earned(trial[2][0])
        less = {
            i for i, was in earned(self.result.placements).items() if now.get(i, 0.0) < was - 1e-9
        }
        if not less:
            return False
        self.only = less
        try:
            return self._chain(trial)
        finally:
            self.only = None

    def _replace_serving(self, job, trial_avoid, lead_in=False):
        """Serving re-placed under a move's avoided GPUs, from the first step they change, off
        the incumbent's batch cells where it can (but the promoted job's); with `lead_in`,
        from `_LEAD` steps ahead, leaving the newly avoided GPUs from there (`_lead_in`)."""
        keep = [0] * self.T
        for index, b, g, start, end in self.result.placements:
            if index != job.index:
                block = ((1 << g) - 1) << b
                for t in range(start, end):
                    keep[t] |= block
        first = next(t for t in range(self.T) if trial_avoid[t] != self.avoid[t])
        if not lead_in:
            return self._place(trial_avoid, keep, (first, self.realtime))
        new = [a & ~b for a, b in zip(trial_avoid, self.avoid, strict=True)]
        soon = [0] * self.T  # per step, the GPUs newly avoided in the next `_LEAD` steps
        for t in range(max(0, first - _LEAD), self.T):
            m = 0
            for u in range(t + 1, min(self.T, t + _LEAD + 1)):
                m |= new[u]
            soon[t] = m & ~trial_avoid[t]
        return _place_realtime(
            self.scenario,
            self.running,
            self.layout,
            self.pricing,
            trial_avoid,
            keep,
            (max(0, first - _LEAD), self.realtime),
            hand_over=self.params.give_up_serving,
            ahead_of=soon,
        )

    def _lead_in(self, job, trial_avoid, plain):
        """Serving for a block move that lost with `plain`, placed again with a lead-in, or None:
        serving leaves the newly avoided GPUs from `_LEAD` steps ahead of the window with the
        swaps its gains leave (it gains them last and releases them first), kept where it gives
        up less than `plain`. Only on larger problems, where a service holds more of the block
        the step before it than its swap cap moves in a step, and only where the demand `plain`
        gives up against the incumbent in the window's first steps, given back, would make the
        move pay (by its packing's J; by `_FluidBound`'s, quantization-burst's serving would be
        placed once more for nothing) or meet the coverage target. (Rolling-surge: embed-api,
        cap 1, holds 3 GPUs of dpo-70b's block the step before it starts. On small problems,
        whose trials descend, it makes plans worse: day small-7271,
        tests/planners/test_allocator.py.)
        """
        first = next(t for t in range(self.T) if trial_avoid[t] != self.avoid[t])
        block = trial_avoid[first] & ~self.avoid[first]
        if self.trial_packs > 1 or not self._capped_on(block, first):
            return None
        price, units = self._lost_from(plain, first, _LEAD + 1)
        over = self.shortfall(plain)[1] - self.allowed  # units beyond the target's allowance
        if over > 0:
            if units < over:
                return None
        elif self.missed is None or self.missed + self.weight * price <= self.best + 1e-9:
            return None
        led = self._replace_serving(job, trial_avoid, lead_in=True)
        return led if self.shortfall(led)[0] < self.shortfall(plain)[0] - 1e-9 else None

    def _capped_on(self, block: int, first: int) -> bool:
        """Whether a service holds more GPUs of `block` at the step before `first` than its
        swap cap moves elsewhere in one step (two swaps a GPU)."""
        if first == 0:
            return False
        for i, job in self.jobs:
            if (self.realtime[i][first - 1] & block).bit_count() > job.swap_cap // 2:
                return True
        return False

    def _lost_from(self, sets, first: int, steps: int) -> tuple[float, float]:
        """The demand (priced, units) `sets` cover less than the incumbent at `steps` steps
        from `first` on (where a lead-in can help: later, serving is short for want of room,
        not of swaps)."""
        price = units = 0.0
        for i, job in self.jobs:
            for t in range(first, min(first + steps, self.T)):
                d = job.demand[t]
                less = min(self.realtime[i][t].bit_count(), d) - min(sets[i][t].bit_count(), d)
                if less > 1e-9:
                    price += job.priority * less
                    units += less
        return price, units

    def _resume_after(self, job, sets, end):
        """Serving placed again from step `end` on, from where `sets` leave it (the batch work
        re-packs around it, `job` on its window)."""
        return self._place(self.avoid, None, (end, sets))

    def _place(self, avoid, keep, resume):
        return _place_realtime(
            self.scenario,
            self.running,
            self.layout,
            self.pricing,
            avoid,
            keep,
            resume,
            hand_over=self.params.give_up_serving,
        )

    def _pack_around(self, free, pins, promoted, order=None, packs=None):
        """The batch work re-packed (in the incumbent's order or `order`, `promoted` first,
        with a trial's packings or `packs`) on the GPUs serving leaves `free` and around the
        pinned windows, or None where serving still holds a pinned window."""
        G, T, result = self.G, self.T, self.result
        packs = packs or self.trial_packs
        free = list(free)
        for (b, g, start, end), _ in pins:
            block = ((1 << g) - 1) << b
            for t in range(start, end):
                if free[t] & block != block:
                    return None
                free[t] ^= block
        pinned = {c.index for _, c in pins}
        order = [c for c in (order or result.order) if c.index not in pinned]
        # the jobs of the incumbent's pins that these pins leave out re-pack first
        order = [c for _, c in self.pins if c.index not in pinned] + order
        if promoted is not None:
            order = [promoted] + [c for c in order if c is not promoted]
        packer = _Packer(G, T, self.discount, free, _use_grid(self.params, G, T))
        placements, reward, cells, order, rule = _search(
            packer, order, packs, (order, result.rule), by_work=packs > 1
        )
        placements = list(placements)
        for (b, g, start, end), c in pins:
            placements.append((c.index, b, g, start, end))
            reward += c.priority * g * (self.discount[end] - self.discount[start])
            cells += g * (end - start)
        return _Packed(placements, reward, cells, order, rule)


# steps ahead of a block move's window that serving steps aside from the block (with the
# swaps its gains leave) and releases it first (`_RealtimeSearch._replace_serving`)
_LEAD = 2
_CHAINS, _CHAIN_WINDOWS = 2, 2  # window pairs per plan, next windows tried per pair
_CHAIN_PACKS = 2  # a pair's first window re-packs with a descent this many times a trial's
