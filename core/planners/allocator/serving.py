"""Phase 1, the serving layout: real-time demand as a curve per service.

Each service follows a target: the GPUs that cover its demand where a shortfall (priced at
`penalty_weight * priority` per unit) costs more than what the cheapest batch job that could
use the GPU then would earn on it (`batch_worth`), clipped to its range and raised ahead of each
peak so that ramping `swap_cap` GPUs a step still reaches it (`realtime_targets`). GPUs go to
services by what one more GPU covers; where none is free, a service's last GPU covering less
priority-weighted demand is handed over. Spare swap budget trades a GPU for a better one, so
the free pool stays in whole aligned blocks. Each pricing (priced, every unit served, peaks held
all horizon, fifo's own reservation) under each layout is screened with a quick packing
(`_screen`); the best goes on, a plan meeting `policy.rt_coverage_target` first.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from ...model import RealtimeJob, Scenario
from ..blocks import (
    mask_of,
)
from ..fifo import reserved_sets
from .layouts import BatchHeldFirst, FillBrokenBlocks
from .packing import _free_masks, _Packer, _use_grid
from .search import _search


class _Screened(NamedTuple):
    """One serving configuration, screened with a quick batch packing."""

    # (target met, or the coverage where it is not; the screen's objective; its GPU-steps;
    # minus the units of demand short): configurations rank on it, best first
    score: tuple[float, float, float, float] | None
    sets: dict[int, list[int]]  # per service, its GPUs per step as bitsets
    packer: _Packer  # on the GPUs the serving leaves
    layout: FillBrokenBlocks  # the layout of the serving GPUs
    pricing: _Targets

    @property
    def goes_short(self) -> bool:
        """Whether some demand goes unserved."""
        return self.score[3] < 0


def _laid_out_ahead(scenario, running, discount, params, winner) -> list[tuple]:
    """Small problems where services contend: the screen winner's pricing laid out once more
    so that no service takes a GPU a higher-priority one gains next step (`FillBrokenBlocks`'s
    `ahead`), as a screened item to take through the search and real-time moves too (a screen
    of one packing misjudges it); none where that serving is the winner's."""
    G, T = scenario.cluster.gpus, scenario.cluster.horizon_steps
    pricing = winner.pricing
    ahead = FillBrokenBlocks(G, ahead=True)
    sets = _place_realtime(scenario, running, ahead, pricing, hand_over=params.give_up_serving)
    if sets == winner.sets:
        return []
    packer = _Packer(G, T, discount, _free_masks(G, running, sets), _use_grid(params, G, T))
    return [_Screened(None, sets, packer, ahead, pricing)]


def _screen(scenario, running, candidates, discount, params, configurations, screen):
    """Each configuration (a pricing and a layout) screened, best first."""
    G, T = scenario.cluster.gpus, scenario.cluster.horizon_steps
    out = []
    seen = {}  # free masks: (packer, its screened reward); layouts often agree
    for pricing, style in configurations:
        if pricing.mode == "fifo":
            realtime = reserved_sets(scenario)
            if _overlaps(realtime, running):  # held for a pinned job (`restarts.pin`)
                continue
        else:
            realtime = _place_realtime(
                scenario, running, style, pricing, hand_over=params.give_up_serving
            )
        free = _free_masks(G, running, realtime)
        key = tuple(free)
        packer, reward = seen.get(key, (None, None))
        if packer is None:
            packer = _Packer(G, T, discount, free, _use_grid(params, G, T))
            reward = _search(packer, candidates, screen)[1:3] if screen else (0.0, 0.0)
            seen[key] = packer, reward
        met, price, short = _coverage_key(scenario, realtime)
        out.append(
            _Screened((met, price + reward[0], reward[1], -short), realtime, packer, style, pricing)
        )
    out.sort(key=lambda item: item.score, reverse=True)  # stable: the first of equals wins
    return out


def _coverage_key(scenario: Scenario, realtime: dict[int, list[int]]) -> tuple[float, float, float]:
    """(target met, or the coverage where it is not; minus priced shortfall; units short)."""
    weight = scenario.policy.penalty_weight
    served = demanded = price = 0.0
    for i, sets in realtime.items():
        job = scenario.jobs[i]
        priority = job.priority
        for d, m in zip(job.demand, sets, strict=True):
            n = m.bit_count()
            demanded += d
            if n < d:
                served += n
                price += priority * (d - n)
            else:
                served += d
    target = scenario.policy.rt_coverage_target
    short = demanded - served
    if target is None:
        return (1.0, -weight * price, short)
    coverage = served / demanded if demanded > 0 else 1.0
    met = coverage >= target - 1e-9
    return (2.0 if met else coverage, -weight * price, short)


def _overlaps(realtime: dict[int, list[int]], running: list[int]) -> bool:
    """Whether serving holds a GPU at a step where it is held by batch work."""
    return any(m & running[t] for sets in realtime.values() for t, m in enumerate(sets))


def batch_worth(scenario: Scenario) -> list[float]:
    """Per step, what the cheapest batch job that could use a GPU then earns on it.

    Only jobs that can run at step t count: queued (not running), arrived by t (arrival < the
    horizon). Their reward there is priority x decay^t (the penalty is not decayed, the reward
    is). 0 where no batch job could use the GPU: a released GPU would earn nothing.
    """
    T = scenario.cluster.horizon_steps
    decay = scenario.policy.decay
    lowest = [math.inf] * T
    for job in scenario.batch_jobs:
        if job.running is None and job.arrival_step < T:
            lowest[job.arrival_step] = min(lowest[job.arrival_step], float(job.priority))
    out, floor, factor = [], math.inf, 1.0
    for t in range(T):
        floor = min(floor, lowest[t])
        out.append(floor * factor if math.isfinite(floor) else 0.0)
        factor *= decay
    return out


def realtime_targets(
    scenario: Scenario,
    job: RealtimeJob,
    priced: bool = True,
    worth: Sequence[float] | None = None,
) -> list[int]:
    """GPUs the job should hold at each step, before capacity: priced demand, ramped for peaks.

    The k-th GPU at step t covers `min(1, demand - (k-1))` units of demand; it is wanted unless
    the shortfall it avoids (`penalty_weight * priority` per unit) is worth less than what any
    batch job that could use it then would earn on it (`batch_worth`: the cheapest job arrived
    by t, decayed; conservative, since a released GPU earns nothing unless batch work can
    actually use it, and nothing at all where no job has arrived). With `priced` False every
    unit of demand is wanted (the plan of most coverage, tried for a coverage target and as a
    guard). Targets are then raised so that a peak is reached from below by ramping at most
    `swap_cap` GPUs a step (a count that changes by k costs at least k swaps).
    """
    if worth is None:
        worth = batch_worth(scenario)
    unit_worth = scenario.policy.penalty_weight * job.priority
    wanted = []
    for t, d in enumerate(job.demand):
        n = math.floor(d + 1e-9)
        fraction = d - n
        floor = worth[t] if priced else 0.0
        if fraction > 1e-9 and unit_worth * fraction >= floor:
            n += 1
        if unit_worth < floor or unit_worth <= 0:  # a whole GPU short costs less than batch
            n = 0  # work earns on it (or nothing at all: serving then only blocks batch work)
        wanted.append(min(max(n, job.gpus_min), job.gpus_max))
    cap = job.swap_cap
    for t in range(len(wanted) - 2, -1, -1):
        wanted[t] = max(wanted[t], wanted[t + 1] - cap)
    return wanted


@dataclass(frozen=True)
class _Targets:
    """How real-time targets are set: "priced" (`realtime_targets`), "all" (every unit of
    demand served) or "peak" (the peak held all horizon, as fifo does: where serving jobs
    contend under tight swap caps, holding early is what lets a high-priority job keep its
    GPUs); "fifo" is no targets but the baselines' own reservation (`fifo.reserved_sets`). `worth`
    is `batch_worth` of the scenario (computed once)."""

    mode: str
    worth: tuple[float, ...]
    memo: dict = field(default_factory=dict, compare=False, repr=False)

    def of(self, scenario: Scenario, job: RealtimeJob) -> tuple[int, ...]:
        """The job's targets (read-only: asked for again and again by the local search)."""
        out = self.memo.get(job.id)
        if out is None:
            out = self.memo[job.id] = tuple(self._compute(scenario, job))
        return out

    def _compute(self, scenario, job):
        if self.mode == "peak":
            peak = math.ceil(max(job.demand, default=0.0) - 1e-9)
            return [min(max(peak, job.gpus_min), job.gpus_max)] * len(job.demand)
        return realtime_targets(scenario, job, self.mode == "priced", self.worth)


def _place_realtime(
    scenario: Scenario,
    running: list[int],
    layout: FillBrokenBlocks,
    pricing: _Targets,
    avoid: list[int] | None = None,
    keep: list[int] | None = None,
    resume: tuple[int, dict[int, list[int]]] | None = None,
    hand_over: bool = False,
    around: list[int] | None = None,
    ahead_of: list[int] | None = None,
) -> dict[int, list[int]]:
    """Per real-time job (by grid index), its GPU bitset at every step.

    Counts follow `realtime_targets` within each job's range and swap cap (releases first, so a
    GPU one job gives back can serve another at the same step; then gains, what `gpus_min`
    forces first, then by priority). Which GPUs move is the layout's choice; spare swap budget
    trades a held GPU for a free one while the layout says that improves the free pool.
    `around`: per step, the cells of fixed batch work (`_serve_around`, which also passes them
    as `avoid`); the GPUs they take at a later step serving gains only for `gpus_min`, releases
    first and leaves while its swap cap lets it (`_Serving._step_aside`). `ahead_of`: per step,
    GPUs avoided a few steps later (a block move's lead-in), which serving gains last, releases
    first and leaves with the swaps its gains leave.
    """
    jobs = [(i, j) for i, j in enumerate(scenario.jobs) if isinstance(j, RealtimeJob)]
    if not jobs:
        return {}
    jobs.sort(key=lambda item: -item[1].priority)  # stable: file order among equals
    targets = {i: pricing.of(scenario, j) for i, j in jobs}
    placer = _Serving(scenario.cluster.gpus, running, layout, jobs, targets, avoid, keep)
    placer.hand_over = hand_over
    if around is not None:
        placer.later, taken = [0] * len(around), 0
        for t in range(len(around) - 1, -1, -1):
            placer.later[t] = taken & ~around[t]
            taken |= around[t]
    if ahead_of is not None:
        placer.soft = ahead_of
    if isinstance(running, BatchHeldFirst):  # a pinned job's GPUs: left ahead of its start too
        ahead = running.later
        if placer.later is not None:
            ahead = [a | b for a, b in zip(placer.later, ahead, strict=True)]
        placer.later = ahead
    placer.keep_units = scenario.policy.rt_coverage_target is not None
    T = scenario.cluster.horizon_steps
    sets: dict[int, list[int]] = {i: [0] * T for i, _ in jobs}
    first = 0
    if resume is not None and resume[0] > 0:  # the steps before `first` are given
        first, given = resume
        for i, _ in jobs:
            sets[i][:first] = given[i][:first]
            placer.current[i] = given[i][first - 1]
    for t in range(first, T):
        placer.step(t)
        for i, _ in jobs:
            sets[i][t] = placer.current[i]
    return sets


class _Serving:
    """One step of `_place_realtime` after another: the sets held now, and the moves of a step."""

    def __init__(self, gpus, running, layout, jobs, targets, avoid, keep):
        self.hand_over = self.keep_units = False
        self.later: list[int] | None = None  # per step, GPUs `around` takes at a later step
        self.soft: list[int] | None = None  # per step, GPUs avoided a few steps later
        self.gpus, self.all_gpus = gpus, (1 << gpus) - 1
        self.running, self.layout, self.jobs, self.targets = running, layout, jobs, targets
        self.avoid, self.keep = avoid, keep
        self.current = {i: mask_of(j.previous_gpus or ()) for i, j in jobs}
        # per step, every job's target in the order of `current` (what a settled step holds)
        self.goals = [list(step) for step in zip(*(targets[i] for i in self.current), strict=True)]
        self.kept_from: dict[int, int] = {}  # with an `ahead` layout, per job, set each step
        self.settled = False  # the last step changed nothing (and was not step 0)

    def step(self, t: int) -> None:
        if self.settled and self._as_before(t):
            return  # the same inputs as the step before, which moved nothing: nothing moves
        before = tuple(self.current.values())
        self._step(t)
        self.settled = t > 0 and before == tuple(self.current.values())

    def _as_before(self, t: int) -> bool:
        """Step t sees what step t - 1 saw: the same running work, avoided and kept GPUs, and
        every job's target (targets lie within the job's range) is the count it holds."""
        if self.running[t] != self.running[t - 1]:
            return False
        if self.avoid and self.avoid[t] != self.avoid[t - 1]:
            return False
        if self.keep and self.keep[t] != self.keep[t - 1]:
            return False
        if self.later and self.later[t] != self.later[t - 1]:
            return False
        if self.soft and self.soft[t] != self.soft[t - 1]:
            return False
        return list(map(int.bit_count, self.current.values())) == self.goals[t]

    def _step(self, t: int) -> None:
        self.t = t
        current = self.current
        self.budget, self.want = budget, want = {}, {}
        held = self.running[t]
        short = False  # a job holds fewer GPUs than it wants (or than its gpus_min)
        below = False  # a job holds fewer GPUs than its gpus_min
        targets = self.targets
        for i, job in self.jobs:
            count = current[i].bit_count()
            held |= current[i]
            cap = 2 * self.gpus if t == 0 and job.previous_gpus is None else job.swap_cap
            budget[i] = cap  # step 0 is free
            # the target within the job's range and what the swap cap reaches (written out)
            goal, floor = targets[i][t], job.gpus_min
            low = count - cap if count - cap > floor else floor
            high = count + cap if count + cap < job.gpus_max else job.gpus_max
            goal = low if goal < low else goal
            want[i] = goal = high if goal > high else goal
            short = short or count < goal or count < floor
            below = below or count < floor
        self.free = self.all_gpus & ~held
        self.shun = self.avoid[t] if self.avoid else 0
        self.spare = ~(self.keep[t] if self.keep else 0)  # GPUs the incumbent's batch leaves
        if self.later:
            self.spare &= ~self.later[t]
        # Releases first (avoided GPUs before the layout's choice), so their GPUs can serve
        # another job at this step; then gains (what gpus_min forces first, then toward the
        # target, not on avoided GPUs, by priority); then trades with the spare budget.
        for i, _ in self.jobs:
            if current[i].bit_count() > want[i]:
                self._release(i)
        if self.layout.ahead:
            self._ahead(t, self.free & ~self.shun)
        if below:
            self._gain(True, t)
        if self.shun:
            for i, job in self.jobs:
                self._move_off_avoided(i, job)
            short = True  # a GPU given up off the avoided ones may be gained back elsewhere
        if short:
            self._gain(False, t)
            if self.hand_over:
                self._hand_over(t)
        self._aside()
        for i, _ in self.jobs:
            self._trade(i)

    def _aside(self) -> None:
        """`_step_aside` for every job: off the GPUs batch work takes later, then off those
        avoided a few steps later."""
        if self.later:
            for i, job in self.jobs:
                self._step_aside(i, job)
        soon = self.soft[self.t] if self.soft else 0
        if soon:
            for i, job in self.jobs:
                self._step_aside(i, job, soon)

    def _step_aside(self, i: int, job: RealtimeJob, later: int | None = None) -> None:
        """GPUs that batch work takes at a later step move, while the job has the swaps, to
        free ones batch never takes: a trade, or where one swap is left and the job is below
        `gpus_max`, a gain now whose release comes at the next step (`_release` gives such GPUs
        up first), so that a swap cap of 1 never has to release and gain at once. (Moving only
        the GPUs a job would still hold when batch takes them, by its targets, makes the same
        plans.)"""
        soft = later is not None
        later = later if soft else self.later[self.t]
        while self.current[i] & later and self.budget[i] >= 1:
            options = self.free & ~self.shun & self.spare
            if soft:
                options &= ~later
            if not options:
                return
            into = self.layout.best_gain(options)
            if self.budget[i] >= 2:
                out = self.current[i] & later
                out &= -out
                self.current[i] ^= out | into
                self.free ^= out | into
                self.budget[i] -= 2
            elif self.current[i].bit_count() < job.gpus_max:
                self.current[i] |= into
                self.free ^= into
                self.budget[i] -= 1
                return
            else:
                return

    def _release(self, i: int) -> None:
        extra = self.current[i].bit_count() - self.want[i]
        if extra <= 0:
            return
        held = self.current[i]
        released = 0
        bad = held & self.shun
        bad |= held & ~self.spare & ~bad if extra > bad.bit_count() else 0
        if self.soft and extra > bad.bit_count():  # then those avoided a few steps later
            bad |= held & self.soft[self.t] & ~bad
        while bad and extra:
            low = bad & -bad
            released |= low
            bad ^= low
            extra -= 1
            self.budget[i] -= 1
        if extra:
            released |= self.layout.releases(held ^ released, self.free, extra)
            self.budget[i] -= extra
        self.current[i] ^= released
        self.free |= released

    def _move_off_avoided(self, i: int, job: RealtimeJob) -> None:
        """Avoided GPUs still held move to free ones the search does not avoid (two swaps), or
        are given up (one swap) while the job keeps gpus_min."""
        shun = self.shun
        while self.current[i] & shun and self.budget[i] >= 1:
            bad = self.current[i] & shun
            out = bad & -bad
            options = (self.free & ~shun & self.spare) or self.free & ~shun
            if options and self.budget[i] >= 2:
                into = self.layout.best_gain(options)
                self.current[i] ^= out | into
                self.free ^= out | into
                self.budget[i] -= 2
            elif self.current[i].bit_count() > job.gpus_min:
                self.current[i] ^= out
                self.free |= out
                self.budget[i] -= 1
            else:
                break

    def _gain(self, forced: bool, t: int) -> None:
        """Gains toward gpus_min (forced) or the targets, in chunks of GPUs by what one GPU of
        the chunk is worth (priority x the demand it covers: whole units, then the fractional
        one; GPUs a ramp needs count as whole units), so a fractional GPU of one job takes no
        GPU that would cover a whole unit of another's demand, unless the fraction's GPU is
        one its swap cap needs now to reach later demand (`_ramp_covers`): a service ramping
        to a peak one GPU a step is not held back a step by another's flat demand."""
        pool = self.free if forced else self.free & ~self.shun
        if self.later and not forced:  # nor the GPUs batch work takes later
            pool &= ~self.later[self.t]
        last = 0  # GPUs avoided a few steps later: gained last
        if self.soft and self.soft[t]:
            last = pool & self.soft[t]
        chunks = []
        for rank, (i, job) in enumerate(self.jobs):
            count = self.current[i].bit_count()
            goal = job.gpus_min if forced else self.want[i]
            if goal <= count:
                continue
            if forced:
                chunks.append((math.inf, rank, i, goal - count))
                continue
            demand = job.demand[t]
            whole = math.floor(demand + 1e-9)
            fraction = demand - whole
            units = max(0, min(goal, whole) - count)
            if units:
                chunks.append((job.priority, rank, i, units))
            if fraction > 1e-9 and count + units <= whole < goal:
                ahead = _ramp_covers(job, self.targets[i], t, whole + 1)
                chunks.append((job.priority * ahead, rank, i, 1))
            covered = max(count, whole + (fraction > 1e-9))
            if goal > covered:
                chunks.append((job.priority, rank, i, goal - covered))
        chunks.sort(key=lambda c: (-c[0], c[1]))
        for _value, _rank, i, amount in chunks:
            need = min(amount, self.budget[i])
            if need <= 0 or not pool:
                continue
            kept = self.kept_from.get(i, 0) | last
            usable = pool & ~kept
            got = self.layout.gains(usable & self.spare, need)  # the incumbent's spare GPUs first
            if got.bit_count() < need:
                got |= self.layout.gains(usable ^ got, need - got.bit_count())
            if kept and got.bit_count() < need:  # those kept for a higher priority last
                got |= self.layout.gains(pool & ~got, need - got.bit_count())
            self.current[i] |= got
            self.free ^= got
            pool ^= got
            self.budget[i] -= got.bit_count()

    def _ahead(self, t: int, pool: int) -> None:
        """Per job, the GPUs kept from it at this step (gains and trades take them last): those
        the layout would give a higher-priority job that holds its target now but gains next
        step, from the pool as it stands."""
        self.kept_from = kept = {}
        if t + 1 >= len(self.targets[self.jobs[0][0]]):
            return
        held = 0
        for i, job in self.jobs:  # by priority
            if held:
                kept[i] = held
            now = self.current[i].bit_count()
            grow = min(self.targets[i][t + 1], job.gpus_max) - max(now, self.want[i])
            if grow > 0 and self.want[i] <= now:
                held |= self.layout.gains(pool & ~held, min(grow, job.swap_cap))

    def _hand_over(self, t: int) -> None:
        """Where a job is still short and no GPU is free, it takes one from a job whose last
        GPU covers less priority-weighted demand, now and at the later steps a swap cap needs
        it for (`_ramp_covers`; one swap each, the giver kept at its gpus_min): a fraction of
        low-priority demand gives way to a whole unit of higher.
        Under a coverage target (`keep_units`), only where it covers no fewer units."""
        for i, job in self.jobs:  # by priority
            while self.current[i].bit_count() < self.want[i] and self.budget[i] >= 1:
                n = self.current[i].bit_count()
                gains = _covers(job.demand[t], n + 1)
                worth = job.priority * _ramp_covers(job, self.targets[i], t, n + 1)
                giver = None
                for j, other in self.jobs:
                    m = self.current[j].bit_count()
                    if j == i or m <= other.gpus_min or self.budget[j] < 1:
                        continue
                    if not self.current[j] & ~self.shun:
                        continue
                    units = _covers(other.demand[t], m)
                    if self.keep_units and units > gains:
                        continue
                    loses = other.priority * _ramp_covers(other, self.targets[j], t, m)
                    if giver is None or loses < giver[0]:
                        giver = (loses, j)
                if giver is None or giver[0] >= worth - 1e-9:
                    return
                j = giver[1]
                gpu = self.layout.best_release(self.current[j] & ~self.shun, self.free)
                self.current[j] ^= gpu
                self.current[i] |= gpu
                self.budget[j] -= 1
                self.budget[i] -= 1

    def _trade(self, i: int) -> None:
        """Spare budget: trade a GPU for another while it leaves a larger free block than it
        takes."""
        layout = self.layout
        kept = self.kept_from.get(i, 0)
        while self.budget[i] >= 2 and self.free & ~self.shun and self.current[i]:
            out = layout.best_release(self.current[i], self.free)
            after = self.free | out
            into = layout.best_gain(after & ~self.shun & self.spare & ~kept)
            if not into or into == out or not layout.improves(out, into, after):
                break
            self.current[i] = (self.current[i] ^ out) | into
            self.free = after ^ into
            self.budget[i] -= 2


def _ramp_covers(job: RealtimeJob, targets: Sequence[int], t: int, k: int) -> float:
    """The units of demand a job's k-th GPU covers at step t, and after it where the job's
    targets ask for more than it could reach without that GPU: short of it at t, the job holds
    at most k - 1 + swap_cap GPUs at t + 1, so the (k + swap_cap)-th of t + 1 goes too, and so
    on while the targets climb that fast."""
    units = _covers(job.demand[t], k)
    for s in range(t + 1, len(targets)):
        k += job.swap_cap
        if k > targets[s]:
            break
        units += _covers(job.demand[s], k)
    return units


def _covers(demand: float, k: int) -> float:
    """The units of demand a job's k-th GPU covers at a step (its last, where it holds k)."""
    return min(1.0, max(0.0, demand - (k - 1)))


def _allowed_shortfall(scenario: Scenario) -> float:
    """Units of real-time shortfall the coverage target allows (inf without a target)."""
    target = scenario.policy.rt_coverage_target
    if target is None:
        return math.inf
    return (1.0 - target) * sum(sum(j.demand) for j in scenario.realtime_jobs)
