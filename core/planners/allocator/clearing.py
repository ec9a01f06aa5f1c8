"""Phase 4's serving moves: clearing a window of serving within swap caps and ranges.

Serving moves off a window only (to an idle GPU, or onto the cheapest serving unit or batch
cell); serving that cannot return to its GPUs within its swap cap after the window is placed
again from where it stands. A GPU is gained a step early or released a step late where a cap is
too small to move at once (`_within_swap_cap`); `_STUCK` marks a window that cannot be cleared.
"""

from __future__ import annotations

from ...model import RealtimeJob
from ..blocks import (
    mask_of,
)
from .serving import _covers

_STUCK = object()  # `_clear_window`: serving left the window but a swap cap held it


def _clear_window(
    scenario, jobs, running, incumbent, window, give_up, resume=None, gain_late=False, by_step=None
):
    """Serving moved off the window (b, g, start, end) of a batch job, `window` being
    ((b, g, start, end), the job's index: its incumbent placement is given up), or None where
    serving cannot leave. `incumbent` is (serving sets, batch result, discount).

    First a serving GPU on the block moves, for its whole run, to a GPU no work holds over it
    (with `onto_batch`, the third item of `window`: else one only batch work holds, whose jobs
    re-pack; `_rehome_runs`). What is left moves per step of the window to a GPU no work holds
    (one the job held the step before first), else to the cheapest of: the GPU of a serving
    unit held off the block (its job gives that unit up; the mover's own: it just gives the GPU
    up; only with `give_up`) and a batch cell off the block (that job re-packs; priced at its
    whole reward) (`_clear_steps`). After the window serving is as before; where a swap cap is
    too small to release and gain at once, a GPU is gained a step early or released a step late
    (`_within_swap_cap`; with `onto_batch`, also on batch cells: their jobs re-pack, and wide
    small-79's b7 window on GPU 4 from step 13 clears only so), and where that is not enough
    either, `resume(sets, end)` places serving again from the window's end on, from where the
    moves left it. Where a swap cap still holds (and serving may be given up), `_STUCK` is
    returned instead of None; with `gain_late`, another service first hands the GPU over a step
    early where it holds it then (wide small-73: rt1 with a cap of 2 leaves GPUs 1-3 for GPU 5,
    rt0's at step 0, so that b6 runs on GPUs 0-3 at step 1), else the GPU gained is taken a
    step late (its job goes without it). `by_step`: `_batch_by_step` of the incumbent but the
    mover, where the caller has it."""
    G, T = scenario.cluster.gpus, scenario.cluster.horizon_steps
    realtime, result, discount = incumbent
    (b, g, start, end), mover, onto_batch = window
    block = ((1 << g) - 1) << b
    if any(running[t] & block for t in range(start, end)):
        return None
    batch, cells = by_step or _batch_by_step(scenario, result, discount, mover)
    off_block = ((1 << G) - 1) & ~block
    sets = {i: list(v) for i, v in realtime.items()}
    _rehome_runs(sets, running, batch, block, (start, end, off_block), onto_batch)
    if not _clear_steps(scenario, jobs, running, (batch, cells), sets, window[0], give_up):
        return None
    gain_late = give_up and gain_late
    if onto_batch:  # the jobs of the batch cells serving moved onto re-pack anyway: the swap
        batch = [0] * T  # caps may also gain GPUs early (or release late) on batch cells
    if gain_late:  # first, another service hands the GPU over a step early (gives its unit up)
        handed = {i: list(v) for i, v in sets.items()}
        if _within_swap_caps(jobs, running, batch, window[0], handed, hand_over=True):
            return handed
    if _within_swap_caps(jobs, running, batch, window[0], sets, gain_late):
        return sets
    stuck = _STUCK if give_up else None
    if resume is None or end >= T:
        return stuck
    sets = resume(sets, end)  # serving placed again after the window, from where it stands
    if not give_up and _covers_less(jobs, realtime, sets):
        return None  # that placement gave serving up (off an avoided block, within a swap cap)
    return sets if _within_swap_caps(jobs, running, batch, window[0], sets, gain_late) else stuck


def _covers_less(jobs, before, after) -> bool:
    """Whether some job covers less of its demand at some step in `after` than in `before`."""
    for i, job in jobs:
        for d, old, new in zip(job.demand, before[i], after[i], strict=True):
            if min(new.bit_count(), d) < min(old.bit_count(), d) - 1e-9:
                return True
    return False


def _clear_steps(scenario, jobs, running, incumbent, sets, window, give_up) -> bool:
    """Serving still on the window moved off it step by step (edits `sets`), or False where a
    GPU finds no home: to an idle GPU (one its job held the step before first), else to the
    cheapest home of `_cheapest_home`."""
    batch, cells = incumbent
    b, g, start, end = window
    block = ((1 << g) - 1) << b
    off_block = ((1 << scenario.cluster.gpus) - 1) & ~block
    for t in range(start, end):
        serving = 0
        for v in sets.values():
            serving |= v[t]
        idle = off_block & ~(running[t] | batch[t] | serving)
        bumpable = batch[t] & off_block & ~serving
        for i, job in jobs:
            on = sets[i][t] & block
            before = sets[i][t - 1] if t else mask_of(job.previous_gpus or ())
            while on:
                bit = on & -on
                on ^= bit
                if idle:
                    here = idle & before or idle
                    j, gpu = None, here & -here
                else:
                    choice = _cheapest_home(
                        scenario, jobs if give_up else (), sets, t, block, i, cells[t], bumpable
                    )
                    if choice is None:
                        return False
                    j, gpu = choice
                sets[i][t] ^= bit
                if j is not None and j != i:
                    sets[j][t] ^= gpu  # it gives its unit up
                if j != i:
                    sets[i][t] |= gpu
                    idle &= ~gpu
                    bumpable &= ~gpu
    return True


def _within_swap_caps(jobs, running, batch, window, sets, gain_late=False, hand_over=False):
    """Whether every job keeps its swap cap (`_within_swap_cap`, which edits `sets`)."""
    b, g, start, end = window
    block = ((1 << g) - 1) << b
    T = len(running)
    held = [running[t] | batch[t] | (block if start <= t < end else 0) for t in range(T)]
    for v in sets.values():
        for t, m in enumerate(v):
            held[t] |= m
    others = [(job, sets[i]) for i, job in jobs] if hand_over else ()
    return all(_within_swap_cap(job, sets[i], held, gain_late, others) for i, job in jobs)


def _rehome_runs(sets, running, batch, block, window, onto_batch):
    """Serving GPUs on the block during [start, end) of `window` (start, end, GPUs off the
    block) move, for the whole run of
    steps the job holds them, to one GPU off the block that no work holds over that run (or,
    `onto_batch`, that only batch work holds: its jobs re-pack): the counts and swaps stay as
    they were (a gain and a release of another GPU). Those that cannot are left to the
    step-by-step moves."""
    T = len(running)
    start, end, off_block = window
    hard = list(running)
    for v in sets.values():
        for t, m in enumerate(v):
            hard[t] |= m
    taken = [hard[t] | batch[t] for t in range(T)]
    for v in sets.values():
        stays = {}  # GPU: the end of its run, where that run found no home (nor will: the
        # homes only fill up as runs move)
        for t in range(start, end):
            on = v[t] & block
            while on:
                bit = on & -on
                on ^= bit
                if stays.get(bit, 0) > t:
                    continue
                a, z = t, t + 1
                while a > 0 and v[a - 1] & bit:
                    a -= 1
                while z < T and v[z] & bit:
                    z += 1
                here = free = off_block
                for k in range(a, z):
                    here &= ~taken[k]
                    free &= ~hard[k]
                if onto_batch and not here:  # onto batch cells (their jobs re-pack)
                    here = free
                if not here:
                    stays[bit] = z
                else:
                    gpu = here & -here
                    for k in range(a, z):
                        v[k] ^= bit | gpu
                        taken[k] |= gpu
                        hard[k] |= gpu


def _batch_by_step(scenario, result, discount, but=None):
    """Per step: the GPUs the incumbent's batch work (but job `but`) holds, and its blocks with
    their job's decayed reward."""
    T = scenario.cluster.horizon_steps
    batch = [0] * T
    cells: list[list[tuple[int, float]]] = [[] for _ in range(T)]
    for index, b, g, start, end in result.placements:
        if index == but:
            continue
        mask = ((1 << g) - 1) << b
        value = scenario.jobs[index].priority * g * (discount[end] - discount[start])
        for t in range(start, end):
            batch[t] |= mask
            cells[t].append((mask, value))
    return batch, cells


def _cheapest_home(scenario, jobs, sets, t, block, mover, cells, bumpable):
    """(job giving a unit up or None, GPU) for a serving GPU leaving the block at step t: the
    cheapest serving unit the mover can take (a GPU off the block) or give up (its own; the
    GPU is then 0), or a batch cell (priced at its job's reward); None if there is none."""
    weight = scenario.policy.penalty_weight
    best = None
    for j, job in jobs:
        n = sets[j][t].bit_count()
        mine = sets[j][t] & ~block
        if n <= job.gpus_min or not (mine or j == mover):
            continue
        price = weight * job.priority * _covers(job.demand[t], n)
        if best is None or price < best[0]:
            best = (price, j, mine & -mine)
    for mask, value in cells:
        here = mask & bumpable
        if here and (best is None or value < best[0]):
            best = (value, None, here & -here)
    return None if best is None else best[1:]


def _within_swap_cap(
    job: RealtimeJob, sets: list[int], held: list[int], gain_late=False, others=()
) -> bool:
    """Whether the job's sets keep its swap cap, where need be after making a move before its
    break: where the cap is too small to release and gain at once, the GPU gained is taken a
    step early, or the one released kept a step longer (while it is free and the job within
    its range), or, among `others` ((job, sets) of every service), one that holds the GPU the
    step before hands it over there (while it keeps gpus_min and its own swap cap; it gives that
    unit up), or taken at the latest earlier step with swap room and held from there (while it
    is free and the job within its range; `_gained_earlier`), or with `gain_late`, the GPU
    gained is taken a step later (the job goes without it while it keeps gpus_min; the trial
    prices the shortfall). Edits `sets`, the others' sets and `held` in place."""
    before = mask_of(job.previous_gpus) if job.previous_gpus is not None else None
    T = len(sets)
    for t in range(T):
        prev = before if t == 0 else sets[t - 1]
        if prev is None:
            continue
        excess = (prev ^ sets[t]).bit_count() - job.swap_cap
        if excess <= 0:
            continue
        if t > 0:  # gain early
            early = sets[t] & ~prev & ~held[t - 1]
            prev2 = before if t == 1 else sets[t - 2]
            while excess > 0 and early and sets[t - 1].bit_count() < job.gpus_max:
                if prev2 is not None and (prev2 ^ sets[t - 1]).bit_count() >= job.swap_cap:
                    break
                bit = early & -early
                early ^= bit
                sets[t - 1] |= bit
                held[t - 1] |= bit
                excess -= 1
            prev = sets[t - 1]  # a GPU gained early is no longer gained at t
        late = prev & ~sets[t] & ~held[t]  # release late
        while excess > 0 and late and sets[t].bit_count() < job.gpus_max:
            bit = late & -late
            late ^= bit
            sets[t] |= bit
            held[t] |= bit
            excess -= 1
        if t > 0 and excess > 0 and others:  # a GPU another service hands over a step early
            excess -= _handed_over(job, sets, t, others, excess, before)
        if t > 1 and excess > 0:  # gained earlier still, where step t - 1 has no swap room
            excess -= _gained_earlier(job, sets, held, t, excess, before)
        if t > 0:
            prev = sets[t - 1]  # GPUs handed over or gained earlier are no longer gained at t
        gained = sets[t] & ~prev if gain_late else 0
        while excess > 0 and gained and sets[t].bit_count() > job.gpus_min:
            bit = gained & -gained
            gained ^= bit
            sets[t] ^= bit
            excess -= 1
        if excess > 0:
            return False
    return True


def _gained_earlier(job, sets, held, t, excess, before) -> int:
    """How many GPUs the job gains at step t it can gain instead at an earlier step with swap
    room, held from there (free and within gpus_max over the steps between), at most
    `excess` (edits `sets` and `held`)."""
    gains = sets[t] & ~sets[t - 1]
    done = 0
    while gains and done < excess:
        bit = gains & -gains
        gains ^= bit
        for k in range(t - 1, -1, -1):
            if held[k] & bit or sets[k].bit_count() >= job.gpus_max:
                break
            prior = before if k == 0 else sets[k - 1]
            if prior is None or (prior ^ sets[k]).bit_count() < job.swap_cap:
                for j in range(k, t):
                    sets[j] |= bit
                    held[j] |= bit
                done += 1
                break
    return done


def _handed_over(job, sets, t, others, excess, before) -> int:
    """How many GPUs the job gains at step t that another service hands it a step early, at
    most `excess` (edits `sets` and the others' sets): the other gives the GPU up at t - 1
    while it keeps gpus_min and its swap cap there, the job while it stays within gpus_max and
    its own cap."""
    prev, prev2 = sets[t - 1], before if t == 1 else sets[t - 2]
    handed = 0
    for other, theirs in others:
        if handed == excess or sets[t - 1].bit_count() >= job.gpus_max:
            break
        if prev2 is not None and (prev2 ^ sets[t - 1]).bit_count() >= job.swap_cap:
            break
        bit = sets[t] & ~prev & theirs[t - 1]
        bit &= -bit
        if not bit or theirs is sets or theirs[t - 1].bit_count() <= other.gpus_min:
            continue
        if t > 1:
            earlier = theirs[t - 2]
        else:
            earlier = mask_of(other.previous_gpus) if other.previous_gpus is not None else 0
        if earlier & bit and (earlier ^ theirs[t - 1]).bit_count() >= other.swap_cap:
            continue  # it held the GPU before: giving it up is one more swap at t - 1
        theirs[t - 1] ^= bit
        sets[t - 1] |= bit
        handed += 1
    return handed
