"""The fast allocator of SPEC section 2: real-time demand as a curve, batch work by value.

Three phases, each legal by construction (the five constraints are its rules, not a check after):

1. **Real-time, per step.** Each serving job follows a target curve: the GPUs that cover its
   demand where a shortfall (priced at `penalty_weight * priority` per unit) costs more than
   any queued batch work could earn on that GPU, clipped to its range, and raised ahead of every
   peak so that ramping `swap_cap` GPUs a step still reaches it in time. Which GPUs it gains and
   releases follows a layout: buddy best fit (fill the aligned blocks that running work or
   serving already broke), packed at the top, or packed at the bottom (beside running blocks).
   Spare swap budget trades a GPU for a better one, so the free pool stays in whole aligned
   blocks for batch work. Each layout is screened with a quick batch packing; the best is kept.
2. **Batch, by value across the horizon.** Every queued job is seen before any is placed; jobs go
   in order of priority (value per GPU-step), each to the size and earliest start (not before its
   arrival) that earn it the most decayed value, on an aligned block chosen buddy-style: a block
   whose parent block is already partly used wins over one that would split a whole free parent,
   so a later job that needs 8 GPUs still finds 8. A job cut by the horizon still earns its cells.
3. **Cheap local search.** A few orderings and size rules, then first-improvement moves on the
   order (promote a job left out or cut short to the front, shrink a job to a narrower block,
   swap two neighbours), within a budget of re-packings that shrinks with the problem size; the
   plan with the best objective is kept (ties: more GPU-steps delivered).
4. **Real-time moves.** The real-time curve and layout were fixed before batch work was packed;
   a few moves revisit them, each judged by the true objective (decayed batch reward minus
   priced shortfall) after re-packing the batch work with the job the move is for in front:
   keep serving off the aligned block where a job placed late (or not at all) could start
   earliest (serving trades to GPUs the batch work does not use, or gives a GPU up), or cap
   serving at `floor(demand)` where a rounded-up fraction breaks a block. Swap caps, ranges
   and `previous_gpus` hold as in phase 1; a move never takes real-time coverage below 99% (the
   floor the product promises) or below what the plan already had.

Free GPUs are Python integers used as bitsets, one per step (bit g set: GPU g free), with a cache
of aligned-free-block masks per size and step (on clusters of up to 10 GPUs, a table indexed by
the free mask, built once per cluster size); no per-cell Python objects on the hot path.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from ..model import BatchJob, RealtimeJob, Scenario
from ..plan import Plan, pin_running


@dataclass(frozen=True)
class AllocatorParams:
    """The allocator's tunables; the defaults are the ones its benchmarks were measured with.

    The local search re-packs the batch work at most `max_packs` times, fewer on large clusters
    (`pack_budget` is in units of batch jobs x GPUs x steps), so the hot path keeps its speed;
    each real-time layout is screened with the first `screen` orderings. Clusters of up to
    `table_gpus` GPUs look aligned free blocks up in a table (one entry per free mask) instead
    of computing and caching them per step. The real-time moves of the local search: at most
    `max_rt_moves`, fewer on large clusters (`rt_budget`, the same units as `pack_budget`), and
    never below `min_coverage` real-time coverage.
    """

    max_packs: int = 18
    screen: int = 1
    pack_budget: int = 200_000_000
    table_gpus: int = 10
    max_rt_moves: int = 2
    rt_budget: int = 50_000_000
    min_coverage: float = 0.99

    def __post_init__(self) -> None:
        for name in ("max_packs", "pack_budget", "rt_budget"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"Expected {name} to be an integer >= 1.")
        for name in ("screen", "table_gpus", "max_rt_moves"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 0:
                raise ValueError(f"Expected {name} to be an integer >= 0.")
        if not 0.0 <= self.min_coverage <= 1.0:
            raise ValueError("Expected min_coverage in [0, 1].")


@dataclass(frozen=True)
class _Candidate:
    """One batch job as the allocator sees it."""

    index: int  # position in scenario.jobs: the number the grid stores
    priority: float
    arrival: int
    sizes: tuple[int, ...]
    durations: tuple[int, ...]
    work: float


def plan_allocator(scenario: Scenario, params: AllocatorParams | None = None) -> Plan:
    """Plan with the fast allocator; the result always passes `core.plan.check`."""
    params = params or AllocatorParams()
    plan = Plan.empty(scenario, "allocator")
    G, T = scenario.cluster.gpus, scenario.cluster.horizon_steps
    running = _running_masks(scenario, T)
    candidates = _candidates(scenario)
    discount = np.concatenate(([0.0], np.cumsum(scenario.policy.decay ** np.arange(T))))
    size = max(1, len(candidates) * G * T)
    packs = max(1, min(params.max_packs, params.pack_budget // size))

    # Three layouts of the serving GPUs (buddy best fit, packed at the top, packed at the bottom)
    # are screened with the first orderings; the local search then spends what is left of its
    # budget on the best one.
    styles = [_Buddy(G)]
    if scenario.realtime_jobs and candidates:
        styles += [_Top(G), _Low(G)]
    screen = min(params.screen, max(1, packs // (2 * len(styles)))) if len(styles) > 1 else 0
    best = None
    for style in styles:
        realtime = _place_realtime(scenario, running, style)
        free = _free_masks(G, running, realtime)
        packer = _Packer(G, T, discount.tolist(), free, params.table_gpus >= G)
        score = _search(packer, candidates, screen)[1:3] if screen else (0.0, 0.0)
        if best is None or score > best[0]:
            best = (score, realtime, packer, style)
    _, realtime, packer, style = best
    result = _search(packer, candidates, max(1, packs - screen * len(styles)))
    if len(styles) > 1:
        moves = min(params.max_rt_moves, max(1, params.rt_budget // size))
        realtime, result = _relax_realtime(
            scenario, running, style, discount.tolist(), realtime, result, moves, params
        )
    placements = result[0]

    grid = plan.grid
    pin_running(scenario, grid)
    for index, sets in realtime.items():
        grid[_bitsets_to_bool(sets, G).T] = index
    for index, gpu_start, gpus, start, end in placements:
        grid[gpu_start : gpu_start + gpus, start:end] = index
    return plan


def _free_masks(gpus: int, running: list[int], realtime: dict[int, list[int]]) -> list[int]:
    taken = list(running)
    for sets in realtime.values():
        for t, mask in enumerate(sets):
            taken[t] |= mask
    all_gpus = (1 << gpus) - 1
    return [all_gpus & ~m for m in taken]


# --------------------------------------------------------------------------- real-time phase


def _running_masks(scenario: Scenario, steps: int) -> list[int]:
    """Per step, the bitset of GPUs held by inherited running batch blocks."""
    masks = [0] * steps
    for job in scenario.batch_jobs:
        if job.running is not None:
            r = job.running
            block = ((1 << r.gpus) - 1) << r.gpu_start
            for t in range(min(r.remaining_steps, steps)):
                masks[t] |= block
    return masks


def realtime_targets(
    scenario: Scenario, job: RealtimeJob, ceiling: Sequence[int] | None = None
) -> list[int]:
    """GPUs the job should hold at each step, before capacity: priced demand, ramped for peaks.

    The k-th GPU at step t covers `min(1, demand - (k-1))` units of demand; it is wanted unless
    the shortfall it avoids (`penalty_weight * priority` per unit) is worth less than what any
    queued batch job would earn on it (the lowest batch priority: conservative, since a released
    GPU earns nothing unless batch work can actually use it). Targets are then raised so that a
    peak is reached from below by ramping at most `swap_cap` GPUs a step (a count that changes
    by k costs at least k swaps). A `ceiling` (GPUs per step) caps the priced count before the
    ramp, within the job's range: the local search uses it to give up a little demand.
    """
    policy = scenario.policy
    queued = [j.priority for j in scenario.batch_jobs if j.running is None]
    batch_floor = min(queued, default=0.0)
    unit_worth = policy.penalty_weight * job.priority
    wanted = []
    for d in job.demand:
        n = math.floor(d + 1e-9)
        fraction = d - n
        if fraction > 1e-9 and unit_worth * fraction >= batch_floor:
            n += 1
        if unit_worth < batch_floor:  # even a whole GPU of shortfall is cheaper than batch work
            n = 0
        if ceiling is not None:
            n = min(n, ceiling[len(wanted)])
        wanted.append(min(max(n, job.gpus_min), job.gpus_max))
    cap = job.swap_cap
    for t in range(len(wanted) - 2, -1, -1):
        wanted[t] = max(wanted[t], wanted[t + 1] - cap)
    return wanted


def _place_realtime(
    scenario: Scenario,
    running: list[int],
    layout: _Buddy,
    ceilings: dict[int, list[int]] | None = None,
    avoid: list[int] | None = None,
    keep: list[int] | None = None,
    resume: tuple[int, dict[int, list[int]]] | None = None,
) -> dict[int, list[int]]:
    """Per real-time job (by grid index), its GPU bitset at every step.

    Counts follow `realtime_targets` within each job's range and swap cap (releases first, so a
    GPU one job gives back can serve another at the same step; then gains, what `gpus_min`
    forces first, then by priority). Which GPUs move is the layout's choice; spare swap budget
    trades a held GPU for a free one while the layout says that improves the free pool.
    """
    G, T = scenario.cluster.gpus, scenario.cluster.horizon_steps
    all_gpus = (1 << G) - 1
    jobs = [(i, j) for i, j in enumerate(scenario.jobs) if isinstance(j, RealtimeJob)]
    if not jobs:
        return {}
    jobs.sort(key=lambda item: -item[1].priority)  # stable: file order among equals
    ceilings = ceilings or {}
    targets = {i: realtime_targets(scenario, j, ceilings.get(i)) for i, j in jobs}
    current = {i: _mask(j.previous_gpus or ()) for i, j in jobs}
    sets: dict[int, list[int]] = {i: [0] * T for i, _ in jobs}
    first = 0
    if resume is not None and resume[0] > 0:  # the steps before `first` are given
        first, given = resume
        for i, _ in jobs:
            sets[i][:first] = given[i][:first]
            current[i] = given[i][first - 1]

    for t in range(first, T):
        budget, want = {}, {}
        for i, job in jobs:
            count = current[i].bit_count()
            if t == 0 and job.previous_gpus is None:
                budget[i] = G + G  # step 0 is free
            else:
                budget[i] = job.swap_cap
            low = max(job.gpus_min, count - budget[i])
            high = min(job.gpus_max, count + budget[i])
            want[i] = min(max(targets[i][t], low), high)
        held = running[t]
        for i, _ in jobs:
            held |= current[i]
        free = all_gpus & ~held
        shun = avoid[t] if avoid else 0
        spare = ~(keep[t] if keep else 0)  # GPUs batch work does not hold in the incumbent
        # Releases first (avoided GPUs before the layout's choice), so their GPUs can serve
        # another job at this step.
        for i, _ in jobs:
            extra = current[i].bit_count() - want[i]
            if extra > 0:
                released = 0
                bad = current[i] & shun
                bad |= current[i] & ~spare & ~bad if extra > bad.bit_count() else 0
                while bad and extra:
                    low = bad & -bad
                    released |= low
                    bad ^= low
                    extra -= 1
                    budget[i] -= 1
                if extra:
                    released |= layout.releases(current[i] ^ released, free, extra)
                    budget[i] -= extra
                current[i] ^= released
                free |= released
        # Gains: first what gpus_min forces, then toward the target (not on avoided GPUs), by
        # priority.
        for forced in (True, False):
            # Avoided GPUs still held move to free ones the search does not avoid (two swaps), or
            # are given up (one swap) while the job keeps gpus_min.
            if shun and not forced:
                for i, job in jobs:
                    while current[i] & shun and budget[i] >= 1:
                        bad = current[i] & shun
                        out = bad & -bad
                        options = (free & ~shun & spare) or free & ~shun
                        if options and budget[i] >= 2:
                            into = layout.best_gain(options)
                            current[i] ^= out | into
                            free ^= out | into
                            budget[i] -= 2
                        elif current[i].bit_count() > job.gpus_min:
                            current[i] ^= out
                            free |= out
                            budget[i] -= 1
                        else:
                            break
            pool = free if forced else free & ~shun
            for i, job in jobs:
                goal = job.gpus_min if forced else want[i]
                need = min(goal - current[i].bit_count(), budget[i], pool.bit_count())
                for _ in range(max(0, need)):
                    bit = layout.best_gain(pool & spare or pool)
                    current[i] |= bit
                    free ^= bit
                    pool ^= bit
                    budget[i] -= 1
        # Spare budget: trade a GPU for another while it leaves a larger free block than it takes.
        for i, _ in jobs:
            while budget[i] >= 2 and free & ~shun and current[i]:
                out = layout.best_release(current[i], free)
                after = free | out
                into = layout.best_gain(after & ~shun & spare)
                if not into or into == out or not layout.improves(out, into, after):
                    break
                current[i] = (current[i] ^ out) | into
                free = after ^ into
                budget[i] -= 2
        for i, _ in jobs:
            sets[i][t] = current[i]
    return sets


def _relax_realtime(
    scenario: Scenario,
    running: list[int],
    layout: _Buddy,
    discount: list[float],
    realtime: dict[int, list[int]],
    result: tuple,
    moves: int,
    params: AllocatorParams,
) -> tuple[dict[int, list[int]], tuple]:
    """Local search on the real-time side: give up a little demand where batch work earns more.

    The targets price each GPU against the cheapest batch work, but a GPU that serves a fraction
    of demand can also break an aligned block that a waiting job needs. Each move caps one job's
    count at `floor(demand)` (the fractional GPU given up) or one GPU lower, over a run of steps
    or the whole horizon; serving is re-placed under the caps (ramps and swap caps still hold)
    and the batch work re-packed in the incumbent's order. A move is kept when the true
    objective (decayed batch reward minus priced shortfall) improves, and never where it would
    take real-time coverage below `params.min_coverage` (or below what the plan already had).
    """
    G, T = scenario.cluster.gpus, scenario.cluster.horizon_steps
    weight = scenario.policy.penalty_weight
    jobs = [(i, j) for i, j in enumerate(scenario.jobs) if isinstance(j, RealtimeJob)]
    demanded = sum(sum(j.demand) for _, j in jobs)

    def shortfall(sets: dict[int, list[int]]) -> tuple[float, float, dict[int, float]]:
        price = units = 0.0
        per_job = {}
        for i, job in jobs:
            short = sum(
                max(0.0, d - m.bit_count()) for d, m in zip(job.demand, sets[i], strict=True)
            )
            price += job.priority * short
            units += short
            per_job[i] = short
        return price, units, per_job

    price, units, missing = shortfall(realtime)
    allowed = max(units, (1.0 - params.min_coverage) * demanded) + 1e-9
    best = result[1] - weight * price
    ceilings: dict[int, list[int]] = {}
    avoid = [0] * T
    tried = 0
    improved = True
    while improved and tried < moves:
        improved = False
        for job, block_masks, caps in _realtime_moves(scenario, jobs, running, realtime, result):
            if tried >= moves:
                break
            trial_ceilings, trial_avoid = ceilings, avoid
            if caps:
                trial_ceilings = dict(ceilings)
                for i, cap in caps.items():
                    trial_ceilings[i] = [
                        min(a, b) for a, b in zip(ceilings.get(i, cap), cap, strict=True)
                    ]
            if block_masks:
                trial_avoid = [a | b for a, b in zip(avoid, block_masks, strict=True)]
            if trial_ceilings == ceilings and trial_avoid == avoid:
                continue
            if caps:  # the shortfall the caps alone imply (targets met) must fit the floor
                implied = sum(missing.values())
                for i in caps:
                    job_i = scenario.jobs[i]
                    implied += (
                        sum(
                            max(0.0, d - n)
                            for d, n in zip(
                                job_i.demand,
                                realtime_targets(scenario, job_i, trial_ceilings[i]),
                                strict=True,
                            )
                        )
                        - missing[i]
                    )
                if implied > allowed:
                    continue
            tried += 1
            keep = [0] * T  # serving stays off the incumbent's batch cells where it can
            for index, b, g, start, end in result[0]:
                if job is None or index != job.index:
                    block = ((1 << g) - 1) << b
                    for t in range(start, end):
                        keep[t] |= block
            first = next((t for t in range(T) if trial_avoid[t] != avoid[t]), T)
            for i in caps or ():
                old_targets = realtime_targets(scenario, scenario.jobs[i], ceilings.get(i))
                new_targets = realtime_targets(scenario, scenario.jobs[i], trial_ceilings[i])
                first = min(
                    first, next((t for t in range(T) if old_targets[t] != new_targets[t]), T)
                )
            sets = _place_realtime(
                scenario, running, layout, trial_ceilings, trial_avoid, keep, (first, realtime)
            )
            price, units, trial_missing = shortfall(sets)
            if units > allowed:
                continue
            trial_free = _free_masks(G, running, sets)
            trial_packer = _Packer(G, T, discount, trial_free, params.table_gpus >= G)
            order = result[3]
            if job is not None:  # the waiting job the block is kept for goes first
                order = [job] + [c for c in order if c is not job]
            trial_result = _search(trial_packer, order, 1, (order, result[4]))
            score = trial_result[1] - weight * price
            if score > best + 1e-9:
                best, realtime, result, missing = score, sets, trial_result, trial_missing
                ceilings, avoid = trial_ceilings, trial_avoid
                improved = True
                break
    return realtime, result


def _realtime_moves(
    scenario: Scenario,
    jobs: list[tuple[int, RealtimeJob]],
    running: list[int],
    realtime: dict[int, list[int]],
    result: tuple,
):
    """Real-time moves to try, in order, each as (batch job to promote or None, GPUs serving
    should avoid per step or None, ceilings per real-time job or None).

    First, per batch job placed late or not at all (highest priority first) and per size: the
    earliest window where an aligned block free of running work is broken only by serving (the
    block where serving sits least), kept clear of serving; then the same with every serving
    job capped at `floor(demand)` over that window. Then, per real-time job (lowest priority
    first), `floor(demand)` over each run of steps where its target rounds a fraction up.
    """
    G, T = scenario.cluster.gpus, scenario.cluster.horizon_steps
    serving = [0] * T
    for sets in realtime.values():
        for t, mask in enumerate(sets):
            serving[t] |= mask
    floors = {i: [max(math.floor(d + 1e-9), job.gpus_min) for d in job.demand] for i, job in jobs}
    placed = {p[0]: p for p in result[0]}
    for job in sorted(result[3], key=lambda c: (-c.priority, c.index)):
        where = placed.get(job.index)
        latest = T if where is None else where[3]
        seen = set()
        for g, d in zip(reversed(job.sizes), reversed(job.durations), strict=True):
            align = (1 << g) - 1
            found = None
            for s in range(job.arrival, latest):
                e = min(s + d, T)
                best = None
                for b in range(0, G - g + 1, g):
                    block = align << b
                    if any(running[t] & block for t in range(s, e)):
                        continue
                    cost = sum((serving[t] & block).bit_count() for t in range(s, e))
                    if cost and (best is None or cost < best[0]):
                        best = (cost, block)
                if best is not None:
                    found = (s, e, best[1])
                    break
            if found is not None and found not in seen:
                seen.add(found)
                s, e, block = found
                masks = [block if s <= t < e else 0 for t in range(T)]
                yield job, masks, None
                yield (
                    job,
                    masks,
                    {
                        i: [f if s <= t < e else G for t, f in enumerate(floor)]
                        for i, floor in floors.items()
                    },
                )
    for i, job in sorted(jobs, key=lambda item: item[1].priority):
        targets = realtime_targets(scenario, job)
        lower = [f < t for f, t in zip(floors[i], targets, strict=True)]
        t = 0
        while t < T:
            if lower[t]:
                a = t
                while t < T and lower[t]:
                    t += 1
                yield None, None, {i: [floors[i][k] if a <= k < t else G for k in range(T)]}
            t += 1


class _Buddy:
    """The buddy best-fit layout of serving GPUs, and the aligned-block arithmetic behind it.

    A gain takes the free GPU whose wholly free aligned block is smallest (serving fills blocks
    that running work or other serving already broke; ties to the highest GPU); a release gives
    back the GPU in the largest aligned block made only of free GPUs and the job's own; a trade
    is worth it while it frees a larger block than it breaks.
    """

    def __init__(self, gpus: int):
        self.sizes = []
        self.align = []
        h = 1
        while h <= gpus:
            self.sizes.append(h)
            self.align.append(sum(1 << b for b in range(0, gpus - h + 1, h)))
            h *= 2

    def starts(self, mask: int) -> list[int]:
        """For each block size (1, 2, 4, ...): a bit at the first GPU of every aligned block
        that lies wholly in mask."""
        out = [mask]
        here = mask
        for k in range(1, len(self.sizes)):
            here = here & (here >> self.sizes[k - 1]) & self.align[k]
            out.append(here)
            if not here:
                out.extend([0] * (len(self.sizes) - k - 1))
                break
        return out

    def best_gain(self, free: int) -> int:
        """The free GPU (as a bit) whose wholly free aligned block is smallest; ties: highest."""
        levels = self.starts(free)
        for k, here in enumerate(levels):
            if not here:
                break
            size = self.sizes[k]
            parents = levels[k + 1] if k + 1 < len(levels) else 0
            only = here & ~(parents | (parents << size))  # blocks whose parent is not whole
            if only:
                return 1 << (only.bit_length() - 1 + size - 1)
        return 0

    def best_release(self, held: int, free: int) -> int:
        """The held GPU in the largest aligned block made only of free GPUs and the job's own;
        ties: lowest."""
        levels = self.starts(free | held)
        for k in range(len(levels) - 1, -1, -1):
            spread = levels[k]
            if not spread:
                continue
            width = 1
            while width < self.sizes[k]:
                spread |= spread << width
                width *= 2
            candidates = held & spread
            if candidates:
                return candidates & -candidates
        return held & -held

    def releases(self, held: int, free: int, count: int) -> int:
        """`count` GPUs to give back, as a mask: best_release applied `count` times (free | held
        does not change as the job gives GPUs back, so the blocks are computed once)."""
        levels = self.starts(free | held)
        out = 0
        for k in range(len(levels) - 1, -1, -1):
            spread = levels[k]
            if not spread:
                continue
            width = 1
            while width < self.sizes[k]:
                spread |= spread << width
                width *= 2
            candidates = held & spread & ~out
            while candidates and count:
                low = candidates & -candidates
                out |= low
                candidates ^= low
                count -= 1
            if not count:
                break
        return out

    def improves(self, out: int, into: int, free: int) -> bool:
        """Trading `out` for `into` frees a larger aligned block than it breaks."""
        return self.level(into, free) < self.level(out, free)

    def level(self, bit: int, mask: int) -> int:
        """The size of the largest aligned block around `bit` that lies wholly in mask."""
        position = bit.bit_length() - 1
        size = 0
        for h in self.sizes:
            block = ((1 << h) - 1) << (position - position % h)
            if mask & block != block:
                break
            size = h
        return size


class _Top(_Buddy):
    """The simpler layout: serving gains the highest free GPUs and releases its lowest."""

    def best_gain(self, free: int) -> int:
        return 1 << (free.bit_length() - 1) if free else 0

    def best_release(self, held: int, free: int) -> int:
        return held & -held

    def releases(self, held: int, free: int, count: int) -> int:
        out = 0
        for _ in range(count):
            low = held & -held
            out |= low
            held ^= low
        return out

    def improves(self, out: int, into: int, free: int) -> bool:
        return into > out


class _Low(_Buddy):
    """The mirror layout: serving gains the lowest free GPUs (beside running blocks, which
    usually sit low) and releases its highest, leaving the high blocks whole."""

    def best_gain(self, free: int) -> int:
        return free & -free

    def best_release(self, held: int, free: int) -> int:
        return 1 << (held.bit_length() - 1) if held else 0

    def releases(self, held: int, free: int, count: int) -> int:
        out = 0
        for _ in range(count):
            top = 1 << (held.bit_length() - 1)
            out |= top
            held ^= top
        return out

    def improves(self, out: int, into: int, free: int) -> bool:
        return into < out


def _mask(gpus: Sequence[int]) -> int:
    mask = 0
    for g in gpus:
        mask |= 1 << g
    return mask


def _bitsets_to_bool(sets: Sequence[int], gpus: int) -> np.ndarray:
    """(steps x gpus) bool array from one bitset per step."""
    width = (gpus + 7) // 8
    raw = b"".join(s.to_bytes(width, "little") for s in sets)
    bits = np.unpackbits(np.frombuffer(raw, dtype=np.uint8), bitorder="little")
    return bits.reshape(len(sets), width * 8)[:, :gpus].astype(bool)


# --------------------------------------------------------------------------- batch phase


def _candidates(scenario: Scenario) -> list[_Candidate]:
    T = scenario.cluster.horizon_steps
    out = []
    for i, job in enumerate(scenario.jobs):
        if not isinstance(job, BatchJob) or job.running is not None or job.arrival_step >= T:
            continue
        sizes = tuple(job.sizes())
        out.append(
            _Candidate(
                i,
                float(job.priority),
                job.arrival_step,
                sizes,
                tuple(scenario.duration(job, g) for g in sizes),
                float(job.gpu_hours),
            )
        )
    return out


# Orderings (all by priority first: value per GPU-step) and size rules tried by the local search.
_VARIANTS: tuple[tuple[Callable[[_Candidate], tuple], str], ...] = (
    (lambda c: (-c.priority, c.arrival, -c.work, c.index), "value"),
    (lambda c: (-c.priority, -c.work, c.index), "value"),
    (lambda c: (-c.priority, -c.sizes[-1], -c.work, c.index), "early"),
    (lambda c: (-c.priority, c.work, c.index), "value"),
    (lambda c: (c.arrival, c.index), "early"),
)


def _search(
    packer: _Packer,
    candidates: list[_Candidate],
    packs: int,
    start: tuple[list[_Candidate], str] | None = None,
) -> tuple:
    """Greedy packings under a few orderings, then first-improvement moves; the best plan wins.

    Moves, tried on the incumbent's jobs in its order: *promote* packs a job that is left
    unplaced (or cut short) first, the rest in the incumbent's order; *shrink* forbids a placed
    job its current block size and the larger ones, so it takes a narrower, longer block and
    leaves room beside it; once those are exhausted, promote any job, then *swap* neighbours.
    Plans compare on the decayed batch reward (the real-time part of the objective is fixed by
    then), ties to more GPU-steps delivered. With `start` (an order and its size rule), that
    order is packed instead of the orderings. Returns the best (placements, reward, GPU-steps,
    order, size rule) found within `packs` packings.
    """
    if not candidates:
        return [], 0.0, 0.0, [], "value"
    best_order: list[_Candidate] = []
    best = None
    starts = (
        [start] if start else [(sorted(candidates, key=k), rule) for k, rule in _VARIANTS[:packs]]
    )
    for order, size_rule in starts:
        result = packer.pack(order, size_rule)
        packs -= 1
        if best is None or result[1:] > best[1:]:
            best, best_order, best_rule = result, order, size_rule
    tried: set[tuple[str, int]] = set()
    while packs > 0:
        move = _next_move(best[0], best_order, tried)
        if move is None:
            break
        tried.add(move)
        kind, position = move
        job = best_order[position]
        if kind == "promote":
            order = [job] + best_order[:position] + best_order[position + 1 :]
        elif kind == "swap":
            order = list(best_order)
            order[position], order[position + 1] = order[position + 1], order[position]
        else:
            placed_size = next(p[2] for p in best[0] if p[0] == job.index)
            keep = job.sizes.index(placed_size)
            narrower = replace(job, sizes=job.sizes[:keep], durations=job.durations[:keep])
            order = best_order[:position] + [narrower] + best_order[position + 1 :]
        result = packer.pack(order, best_rule)
        packs -= 1
        if result[1:] > best[1:]:
            best, best_order = result, order
            tried.clear()
    return (*best, best_order, best_rule)


def _next_move(
    placements: list[tuple[int, int, int, int, int]],
    order: list[_Candidate],
    tried: set[tuple[str, int]],
) -> tuple[str, int] | None:
    """The first untried move on the incumbent: promote a job cut short or left out, or shrink
    a placed job that could run narrower; then promote any job; then swap two neighbours."""
    placed = {p[0]: p for p in placements}
    for position, job in enumerate(order):
        where = placed.get(job.index)
        cut = where is None or where[4] - where[3] < job.durations[job.sizes.index(where[2])]
        if cut and position > 0 and ("promote", position) not in tried:
            return ("promote", position)
        if where is not None and where[2] > job.sizes[0] and ("shrink", position) not in tried:
            return ("shrink", position)
    for position in range(1, len(order)):
        if ("promote", position) not in tried:
            return ("promote", position)
    for position in range(len(order) - 1):
        if ("swap", position) not in tried:
            return ("swap", position)
    return None


class _Packer:
    """Places batch blocks on per-step free bitsets, with per-size aligned-block caches."""

    def __init__(
        self, gpus: int, steps: int, discount: list[float], free: list[int], use_table: bool
    ):
        self.gpus, self.steps, self.discount, self.free = gpus, steps, discount, free
        self.align: dict[int, int] = {}
        g = 1
        while g <= gpus:
            self.align[g] = sum(1 << b for b in range(0, gpus - g + 1, g))
            g *= 2
        self.table = _block_table(gpus) if use_table else None

    def pack(
        self, order: Sequence[_Candidate], size_rule: str
    ) -> tuple[list[tuple[int, int, int, int, int]], float, float]:
        """Place jobs in order; returns placements (index, gpu_start, gpus, start, end),
        the decayed reward and the GPU-steps delivered."""
        T, discount, table = self.steps, self.discount, self.table
        free = list(self.free)
        cache: dict[int, list[int | None]] = {g: [None] * T for g in self.align}
        placements = []
        reward = cells = 0.0
        for job in order:
            best = None  # (score, start, size, end, block mask)
            for g, d in zip(job.sizes, job.durations, strict=True):
                if table is None:
                    found = self._earliest(free, cache[g], g, d, job.arrival)
                else:
                    found = _earliest_in_table(free, table[g], d, job.arrival, T)
                if found is None:
                    continue
                start, blocks = found
                end = min(start + d, T)
                if size_rule == "early":
                    score = (-start, g)
                else:
                    score = (job.priority * g * (discount[end] - discount[start]), g)
                if best is None or score > best[0]:
                    best = (score, start, g, end, blocks)
            if best is None:
                continue
            _, start, g, end, blocks = best
            window = free[start]
            for t in range(start + 1, end):
                window &= free[t]
            b = self._pick_block(blocks, window, g)
            block = ((1 << g) - 1) << b
            for t in range(start, end):
                free[t] &= ~block
            if table is None:
                for masks in cache.values():
                    masks[start:end] = [None] * (end - start)
            placements.append((job.index, b, g, start, end))
            reward += job.priority * g * (discount[end] - discount[start])
            cells += g * (end - start)
        return placements, reward, cells

    def _earliest(
        self, free: list[int], cache: list[int | None], g: int, d: int, arrival: int
    ) -> tuple[int, int] | None:
        """Earliest start >= arrival with an aligned block of g free for d steps (cut at T).

        `cache[t]` holds, for step t, a bit at the first GPU of every aligned block of g that is
        free (None: stale since the last placement on that step).
        """
        T = self.steps
        align = self.align[g]
        s = arrival
        while s < T:
            blocks = cache[s]
            if blocks is None:
                blocks, k = free[s], 1
                while k < g:
                    blocks &= blocks >> k
                    k <<= 1
                blocks &= align
                cache[s] = blocks
            if not blocks:
                s += 1
                continue
            end = min(s + d, T)
            t = s + 1
            while t < end:
                here = cache[t]
                if here is None:
                    here, k = free[t], 1
                    while k < g:
                        here &= here >> k
                        k <<= 1
                    here &= align
                    cache[t] = here
                if not here:
                    break
                blocks &= here
                if not blocks:
                    break
                t += 1
            else:
                return s, blocks
            # No block survives to step t; if nothing of size g is free at t, skip past it.
            s = t + 1 if not cache[t] else s + 1
        return None

    def _pick_block(self, blocks: int, window: int, g: int) -> int:
        """Buddy best fit: among feasible blocks, one whose parent is not wholly free, lowest."""
        candidates = blocks
        h = g * 2
        while candidates & (candidates - 1) and h <= self.gpus:
            parents = window
            k = 1
            while k < h:
                parents &= parents >> k
                k <<= 1
            parents &= self.align[h]
            if not parents:
                break
            spread = parents
            k = 1
            while k < h:
                spread |= spread << k
                k <<= 1
            keep = candidates & ~spread
            if keep:
                candidates = keep
                break
            h *= 2
        return (candidates & -candidates).bit_length() - 1


@functools.cache
def _block_table(gpus: int) -> dict[int, tuple[int, ...]]:
    """For each block size g: entry m is the bitset of first GPUs of the aligned blocks of g that
    are wholly free in free mask m (the same bits `_Packer._earliest` computes per step)."""
    out = {}
    g = 1
    while g <= gpus:
        align = sum(1 << b for b in range(0, gpus - g + 1, g))
        row = []
        for mask in range(1 << gpus):
            blocks, k = mask, 1
            while k < g:
                blocks &= blocks >> k
                k <<= 1
            row.append(blocks & align)
        out[g] = tuple(row)
        g *= 2
    return out


def _earliest_in_table(
    free: list[int], table: tuple[int, ...], d: int, arrival: int, steps: int
) -> tuple[int, int] | None:
    """`_Packer._earliest` for small clusters: aligned free blocks looked up, not computed."""
    s = arrival
    while s < steps:
        blocks = table[free[s]]
        if not blocks:
            s += 1
            continue
        end = min(s + d, steps)
        t = s + 1
        while t < end:
            here = table[free[t]]
            if not here:
                break
            blocks &= here
            if not blocks:
                break
            t += 1
        else:
            return s, blocks
        # No block survives to step t; if nothing of size g is free at t, skip past it.
        s = t + 1 if not table[free[t]] else s + 1
    return None


__all__ = ["plan_allocator", "realtime_targets"]
