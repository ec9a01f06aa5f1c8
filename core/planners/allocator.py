"""The fast allocator of SPEC section 2: real-time demand as a curve, batch work by value.

Seven phases, each legal by construction (the five constraints are its rules, not a check after):

1. **Real-time, per step.** Each serving job follows a target curve: the GPUs that cover its
   demand where a shortfall (priced at `penalty_weight * priority` per unit) costs more than
   what the cheapest batch job that could use the GPU then (arrived, decayed) would earn on it,
   clipped to its range, and raised ahead of every peak so that ramping `swap_cap` GPUs a step
   still reaches it in time. GPUs go to jobs by what one more GPU covers (priority x a whole
   unit of demand, then the fractional one, which also counts what it covers at later steps its
   swap cap could not regain it for; where none is free, a job's last GPU covering less
   priority-weighted demand is handed over). Which GPUs it gains and releases follows a layout:
   buddy best fit (fill the aligned blocks that running work or serving already broke), packed
   at the top, or packed at the bottom (beside running blocks). Spare swap budget trades a GPU
   for a better one, so the free pool stays in whole aligned blocks for batch work. Where the
   pricing gives up demand, every unit served is screened too; where several serving jobs
   contend and demand still goes short, peaks held all horizon (by priority, and the baselines'
   own reservation). Each configuration is screened with a quick batch packing; the best is
   kept, a plan that meets `policy.rt_coverage_target` first (where a peak reservation wins
   the screen, the best priced serving goes on through phases 2-4 too, and the better plan
   is kept: a screen cannot see the real-time moves a reservation goes without; on small
   problems where services contend, so does the winner's pricing under a layout that keeps
   from each service the GPUs a higher-priority one gains next step).
2. **Batch, by value across the horizon.** Every queued job is seen before any is placed; jobs go
   in order of priority (value per GPU-step), each to the size and earliest start (not before its
   arrival) that earn it the most decayed value (ties: the size that ends first, then the
   narrower block, which leaves room beside it; without decay a job earns the same on any
   width), on an aligned block chosen buddy-style: a block whose parent block is already partly
   used wins over one that would split a whole free parent, so a later job that needs 8 GPUs
   still finds 8 (and where no parent is whole, one that no larger block contains, as GPUs
   8-11 of 12). A job cut by the horizon still earns its cells.
3. **Cheap local search.** A few orderings and size rules, then first-improvement moves on the
   order (promote a job left out or cut short to the front, on larger problems to just before
   the first job placed at or after its arrival; shrink a job to a narrower block; swap two
   neighbours), within a budget of re-packings that shrinks with the problem size
   (below the largest 8-GPU benchmark's size, as many as its budget's time affords; and on small
   problems, where a packing is cheap, a budget of work: a move costs only the jobs it
   places again; budget left when the moves run out goes to a second descent, from the best
   ordering of the other size rule); the plan with the best objective is kept (ties: more
   GPU-steps delivered). A move packs from the incumbent's packing: the jobs before the first
   it moves keep their places, and where the packing comes back to the incumbent's state the
   rest is not placed again.
4. **Real-time moves.** The real-time curve and layout were fixed before batch work was packed; a
   few moves revisit them, each judged by the true objective (decayed batch reward minus priced
   shortfall) after re-packing the batch work (on small problems with a descent of its own). A
   trial that an upper bound on any packing (`_FluidBound`, the fluid relaxation of the batch work
   on the GPUs serving leaves) says cannot win is not packed. First a *window*: a job placed late
   (or not at all) pinned on the block and start where what it would earn, less the serving and
   batch work it displaces, is largest (prefix sums price every block and start at once); serving
   moves off that window only (to an idle GPU, or onto the cheapest serving unit or batch cell), so
   a low-priority service can give up a fraction for a high-priority job, or a job can start a step
   later where demand is lower; serving that cannot return to its GPUs within its swap cap after
   the window is placed again from where it stands. The jobs earlier windows pinned are re-packed
   with the rest, or held where that earns more; on larger problems a job placed narrower than it
   could run may also take a wider block at its own start. Then keep serving off the block where a
   late job could start earliest (where serving cannot fit beside it then, also from the first
   start where it can; on larger problems, one that loses for want of swaps is tried again with
   serving leaving it a few steps ahead). Swap caps, ranges and `previous_gpus` hold as in phase 1
   (a GPU is gained a step early or released a step late where a cap is too small to move at
   once); a move never takes real-time coverage below `policy.rt_coverage_target` (none by
   default: then the allocator optimises the same objective as `full`) or below what the plan
   already had. On small
   problems, once these moves run out, a window that loses alone (re-packed with twice a trial's
   descent) is kept where a second window on top of it pays (clearing one block can push batch
   work into room the serving moved to; that job's own window then gives a little serving up;
   where the second loses, the windows of the jobs it made earn less are tried on top of it too),
   where any placed job may also move to another block or size at its own start and batch work
   on the block costs what it loses starting again after the window. There a window that loses
   alone is also tried where the GPU-steps its job gives up could pay for it (another late job
   may take them), and last, one window a swap cap held is tried with another service handing
   its service the GPU a step early (the other gives that unit up), else with its service gaining
   the GPU a step late (a step short; both priced like any shortfall).
   Last, where a move changed the plan, the jobs the search shrank for the serving it then moved
   get their wider sizes back in one packing.
5. **Never below the queues.** fifo's and backfill's own plans are reproduced (their serving
   reservation, their packing rules) and win where they score higher, so the allocator never
   returns less than either (`tests/planners/test_slo.py`); where the fluid bound on their
   reservation is no better than the plan, they are not packed. On small problems the final
   plan's batch work then descends once more under wider moves (the other size rule, a job
   moved to any earlier or later position), also with the jobs windows pinned held on their
   windows, and keeps what earns more.
6. **Serving, once more.** On small problems, serving short of its demand is placed again around
   the finished batch work (a service with a swap cap of 1 leaves the GPUs batch work takes later
   while its demand is low; the peaks held all horizon are placed too), kept where it covers
   more; then it takes GPUs the plan leaves idle (within its range and swap cap, where the cap
   is spent a GPU held on after its release or gained a few steps early): the pricing gave them
   up for batch work that did not come (this top-up runs on every problem); on small problems,
   last, GPUs handed between services move to where that pays (a step earlier, or a GPU let go
   while demand dipped held on instead), and a batch job whose GPUs would serve more priced demand
   than it earns is left out, one at a time while that pays.
7. **Restarts on tighter problems** (`restarts.py`). On small problems, phases 1-6 run again on
   the same scenario made tighter in one way at a time: the shortfall priced 0.5-2 times (for
   the planning only), a service held to a GPU more at least or one fewer at most, a batch job
   left out, held to one of its sizes, or arriving later. Each such plan is legal for the
   original scenario and is scored on its objective (a plan meeting the coverage target
   first); the tightening that wins most becomes the base of the next round, within
   `restarts` plans, and none runs where the plan already reaches a simple upper bound (every
   batch job alone on the cluster). Every plan is scored after a job left out takes the block
   and start of a placed one that earns less there, where it may. The phases look at one
   choice at a time from the plan they have; a restart reaches plans that differ from it
   everywhere at once (serving that keeps its peak GPU where a long priority-8 job would have
   run; a 4 GPU-hour job on 8 GPUs for one step). Then, where there is serving, a few *pins*:
   one batch job of the best plan moved to another aligned block at the same steps, placed
   before serving, which is laid out anew around it (`restarts.pin`). Last, *kicks*: the
   batch work packed again around the final serving and around the serving of the best
   plans that lost (`AllocatorParams.kicks`).

Free GPUs are Python integers used as bitsets, one per step (bit g set: GPU g free), with a cache
of aligned-free-block masks per size and step; no per-cell Python objects on the hot path. The
earliest window of a block is a sliding-window AND kept in two stacks, linear in the horizon
whatever the duration. On clusters of up to 128 GPUs and two days of steps, the packer keeps
the free GPUs of every step in one integer instead (`blocks.FreeGrid`), where the earliest
window of every block is a few shifted ANDs. Serving gains its GPUs of a step in one call per
chunk.
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import numpy as np

from ..model import MAX_NUMBER, BatchJob, RealtimeJob, Scenario
from ..model import duration_steps as duration
from ..plan import (
    Plan,
    batch_placements,
    discounts,
    holdings,
    pin_running,
    plan_rank,
    plan_value,
    ranks_above,
)
from .blocks import (
    FreeBlocks,
    FreeGrid,
    aligned_starts,
    bitsets_to_bool,
    bool_to_bitsets,
    first_open,
    grid_blocks,
    low_bits,
    mask_of,
    spread,
    top_bits,
)
from .fifo import reserved_sets
from .restarts import Watch, pin, restart


@dataclass(frozen=True)
class AllocatorParams:
    """The allocator's tunables; the defaults are the ones its benchmarks were measured with.

    The local search re-packs the batch work at most `max_packs` times, fewer on large clusters
    (`pack_budget` is in units of batch jobs x GPUs x steps), so the hot path keeps its speed;
    problems smaller than `small_work` such units (about 18 packings of 8 batch jobs on 8 GPUs x 24
    steps; twice that without serving, which has no layouts to screen and no real-time moves) get as
    many packings as fit in it, up to `small_packs`: a packing costs about its size, so their search
    takes about as long as on one of the 8-GPU benchmarks (there a move's packing costs the share of
    the jobs it places again: a budget of work; a real-time trial re-packs with a descent of a
    quarter of it; window pairs and a polish of the final plan's batch work under wider moves
    follow, which take about as long again: a median of 2.7 ms on the gap script's small cases,
    against 1.8 ms without them, when measured; with this round's moves 2.8 ms on its default shape
    and 3.4 ms on its wide one), and where one descent runs out of moves, a second starts from the
    other size rule's best ordering. Larger problems up to `fast_work` units keep the same search
    but get as many packings as a budget of that much work affords, at least `max_packs` and at most
    twice that: 45,000 units is training-heavy's 18 packings (13 jobs x 8 GPUs x 24 steps), the
    slowest 8-GPU benchmark, so no benchmark takes longer than it, and one of 8 jobs gets 29
    (realtime-peak and the gap script's day-shape small-0, whose descent needs about 30: 114.63 ->
    116.75, the optimum 118.66; 164 fresh day- and wide-shape cases of that size: 22 better, 1 worse
    by 1.4%; realtime-peak 304.1 -> 308.5, 1.6 -> 1.85 ms). Each real-time layout is screened with
    the first `screen` orderings. Clusters of up to `grid_gpus` GPUs on horizons of up to 48 steps
    search the free blocks of every GPU and step at once (`blocks.FreeGrid`, one integer for the
    whole grid) instead of computing and caching them per step (on 256 GPUs the two cost the same;
    on 1,024, `FreeBlocks` takes half the time). The real-time moves of the local search: at most
    `max_windows` pinned windows (as many more tried where one fails to improve the plan, each for
    another job) and `max_rt_moves` blocks kept clear of serving (as many more at the later start
    where serving fits beside the block; one tried again with a lead-in counts once), fewer on
    large clusters (`rt_budget`, the same units as `pack_budget`; no windows beyond it), and never
    below `policy.rt_coverage_target`. On clusters of up to `guard_cells` GPU-steps the plan is
    compared with the queue baselines' and the better one returned: a last-resort guard, off by
    default (0), because the allocator's own plan does not lose to them (a Hypothesis property in
    tests/planners/test_slo.py) and the baselines cost as much again as the allocator on 8 GPUs. It
    always runs when the plan misses the coverage target.
    `restarts`: on small problems (the path above; also problems of up to `restart_work` units,
    none by default, every size in `ThoroughParams`) phases 1-6 plan this many tighter scenarios
    (`restarts.py`; a round that wins leaves the next `restarts._FOLLOW` = 16 more, up to twice
    this many in all) and the best plan is kept; 0 turns them off. On issue 13's wide shape that
    costs a median of about 140 ms instead of 4 ms and takes the mean gap to the optimum from
    0.68% to 0.12% on 287 cases (0.16% at 86 ms with 24 plans, each tightening kept at its first
    win); on the benchmarks' size (`restart_work=10**9`) 100 fresh draws' from 1.98% to 0.52%,
    at about 170 ms a plan, which is why it is not the default there: the 8-GPU benchmarks keep
    their 2 ms. At that size the small path's own search (`small_work` raised, `restarts=0`)
    gets most of that for less: 0.82% below at 18 ms (`scripts/allocator_gap.py --day --path
    fast`; the README has the table).
    `kicks`: on the small path (and wherever the restarts run), last, the final plan's batch
    work is packed again around its serving by an iterated local search (`_kicked`): this many
    times, two or three jobs of the best order found are moved to random places and the order is
    packed and descended a little; the plan it ends on replaces the final one where that ranks
    higher. The descents stop at orders no single move improves, and packings on these clusters
    cost 10-20 microseconds, so the kicks reach orders many moves away (wide small-42018 with
    `full`'s serving: 622 random orders reach the optimum's batch reward, the descent stops 8%
    below). The restarts' best plans that serve otherwise (up to `_OTHER_SERVING`) get
    `_OTHER_KICKS` kicks each too: a serving that lost to the final plan's may win once the
    batch work around it is packed better (wide small-7214: 154.65 -> 155.16, the optimum). On
    the small path's 66 draws of four kept sets that were not optimal, the mean gap went from
    1.17% to 1.00% with the final plan's kicks, to 0.80% with the others' as well (26 of them
    optimal, none worse), at a median of 0.55 s a plan instead of 0.44 s; 0 turns it off.
    `pins`: where restarts run (not with `restarts=0`) and there is serving, after them, this
    many plans each move one batch job of the best plan to another aligned block at the same
    steps and lay out serving and the rest anew around it (`restarts.pin`: serving decides
    which blocks are left, and no move after it takes a block from serving whole); the best
    plan is kept (the winner planned again with restarts around it), and those that lost and
    serve otherwise are kicked too. On issue 13's seven wide sets (1,455 draws with a positive
    optimum) 3 pins made 12 draws better (2 of them now optimal: small-42018 from 6.7% below)
    and none worse; the small path's draws more than 3% below went from 7 to 5, at a median of
    0-11 ms more a plan (about 3%). 6 pins (the default since) take small-2013 from 3.65% to
    0.96% as well, for 4% more time in the median, 5% in the 90th percentile (the same draws
    timed in turn); 0 turns them off.
    `give_up_serving`: a window may also take a serving GPU whose unit of demand is worth less than
    the batch work (its job gives it up), and a service short of a whole unit takes the GPU of a
    lower-priority one that covers less (a hand-over); the rolling horizon turns it off, because
    there demand is a forecast and serving given up against it turns into realised shortfall when
    demand comes in above it.
    """

    max_packs: int = 18
    fast_work: int = 45_000
    small_work: int = 27_000
    small_packs: int = 60
    screen: int = 1
    pack_budget: int = 200_000_000
    grid_gpus: int = 128
    max_rt_moves: int = 3
    max_windows: int = 1
    rt_budget: int = 50_000_000
    guard_cells: int = 0
    give_up_serving: bool = True
    restarts: int = 48
    restart_work: int = 0
    kicks: int = 300
    pins: int = 6

    def __post_init__(self) -> None:
        for name in ("max_packs", "pack_budget", "rt_budget", "small_packs"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"Expected {name} to be an integer >= 1.")
        for name in (
            "screen",
            "grid_gpus",
            "max_rt_moves",
            "max_windows",
            "guard_cells",
            "small_work",
            "fast_work",
            "restarts",
            "restart_work",
            "kicks",
            "pins",
        ):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 0:
                raise ValueError(f"Expected {name} to be an integer >= 0.")
        if not isinstance(self.give_up_serving, bool):
            raise ValueError("Expected give_up_serving to be True or False.")


# `restart_work` that reaches every problem (the units overflow no Python int)
_EVERY_SIZE = 1 << 62


@dataclass(frozen=True)
class ThoroughParams(AllocatorParams):
    """`thorough`'s parameters: the allocator's, with its restarts, pins and kicks at every
    size (`restart_work`), within `time_limit` seconds for the whole call (the search stops
    where it is and keeps its best plan; a plan under way when the limit passes is finished
    first: milliseconds on an 8-GPU day, a tenth of a second at 1,024 or 16,384 GPUs). `progress`
    hears {"elapsed_s", "incumbent"} at most every `progress_every_s` seconds."""

    restart_work: int = _EVERY_SIZE
    time_limit: float = 10.0
    progress: Callable[[dict[str, float]], None] | None = field(default=None, compare=False)
    progress_every_s: float = 0.25

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("time_limit", "progress_every_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"Expected {name} to be a number.")
            if not 0 < value <= 1e9:  # (a number of seconds, not inf or nan)
                raise ValueError(f"Expected {name} to be a number of seconds above 0.")
        if self.progress is not None and not callable(self.progress):
            raise ValueError("Expected progress to be callable.")


class _Candidate(NamedTuple):
    """One batch job as the allocator sees it (a named tuple: the search makes and reads
    thousands of them)."""

    index: int  # position in scenario.jobs: the number the grid stores
    priority: float
    arrival: int
    sizes: tuple[int, ...]
    durations: tuple[int, ...]
    work: float
    worth: float  # priority x decay^arrival: what a GPU-step of it earns at its earliest start
    # (size, duration) pairs in the order the packer searches them: the most a size could earn
    # from the arrival first (ties: the earlier end, the wider), so that the sizes which cannot
    # beat the best found are skipped (the choice is the same in any order); empty: as listed
    shapes: tuple[tuple[int, int], ...] = ()


def plan_allocator(scenario: Scenario, params: AllocatorParams | None = None) -> Plan:
    """Plan with the fast allocator; the result always passes `core.plan.check`.

    With `policy.rt_coverage_target`, a plan that meets it wins over one that does not (among
    those that miss it, the one with the most coverage). Where the plan misses it, the
    allocator looks for the most coverage (`_most_coverage`: J weighs services by priority, so
    the plan it prefers may serve less demand than another). Last, on small clusters
    (`guard_cells`) or when the plan misses the target, it is compared with the queue
    baselines' plans: the better legal one comes back (its stats' `guard` names the baseline
    when that one won).
    """
    return _plan(scenario, params or AllocatorParams(), True)


def plan_thorough(scenario: Scenario, params: ThoroughParams | None = None) -> Plan:
    """The allocator with its restarts, pins and kicks at every size, within a time limit: the
    plan for one decision, where `plan_allocator` keeps its milliseconds for sweeps and the
    rolling horizon (which re-plan hundreds of times). Never ranks below the fast allocator's
    plan (that is its first plan). `stats["time_limit_reached"]` says whether the limit cut
    the search short."""
    params = params or ThoroughParams()
    watch = Watch(params.time_limit, params.progress, params.progress_every_s)
    plan = _plan(scenario, params, True, watch)
    plan.stats["time_limit_reached"] = watch.reached
    return plan


def _plan(
    scenario: Scenario, params: AllocatorParams, most_coverage: bool, watch: Watch | None = None
) -> Plan:
    """Phases 1-7, then the search for the most coverage where the target is missed (unless
    this plans for that search) and the guard; the restarts, pins and kicks stop at `watch`'s
    time limit (none by default)."""
    watch = watch or Watch()
    plan = _allocate(scenario, params)
    small_path = _effort(scenario, params, _queued(scenario))[1]
    moves = params.max_rt_moves or params.max_windows
    if moves and scenario.realtime_jobs and small_path:
        # Small problems: the plan without real-time moves too. A move wins where it is made,
        # but the phases after it may gain less from it than from the plan it replaced (3 GPUs,
        # a zero-demand service held to one GPU: a window for the last step's job, 38 against
        # 40 without), so the better of the two goes on.
        still = _allocate(scenario, replace(params, max_rt_moves=0, max_windows=0))
        if ranks_above(plan_rank(scenario, still), plan_rank(scenario, plan)):
            plan = still
    others: list[np.ndarray] = []  # the restarts' and pins' best plans that serve otherwise
    restarts = params.restarts > 0 and _restarts_here(scenario, params)
    kicks = params.kicks > 0 and (small_path or restarts)
    if restarts:
        once = replace(params, restarts=0)
        plan, others = restart(
            scenario,
            plan,
            lambda tighter: _allocate(tighter, once),
            params.restarts,
            params.give_up_serving,
            _OTHER_SERVING if kicks else 0,
            watch,
        )
        if params.pins and scenario.realtime_jobs:
            plan, pinned = pin(
                scenario,
                plan,
                lambda tighter, blocked: _allocate(tighter, once, blocked),
                params.pins,
                params.give_up_serving,
                lambda tighter, blocked: restart(
                    tighter,
                    _allocate(tighter, once, blocked),
                    lambda t: _allocate(t, once, blocked),
                    params.restarts,
                    params.give_up_serving,
                    watch=watch,
                )[0],
                watch,
            )
            others = pinned + others if kicks else []
    if kicks and not watch.over():
        plan = _kick(scenario, plan, others, params, watch)
    if most_coverage and _misses_target(scenario, plan):
        plan = _most_coverage(scenario, plan, params, watch)
    small = scenario.cluster.gpus * scenario.cluster.horizon_steps <= params.guard_cells
    if small or _misses_target(scenario, plan):
        plan = _guard(scenario, plan)
    return plan


# the shortfall's price when coverage is all that counts: far above any batch job's reward
_COVERAGE_PRICE = 1e9


def _most_coverage(
    scenario: Scenario, plan: Plan, params: AllocatorParams, watch: Watch | None = None
) -> Plan:
    """A plan that misses the coverage target, or one with more coverage: the allocator on the
    scenario where coverage is all that counts (the services weigh alike but for a thousandth
    of their priorities, which settles ties between plans of equal coverage; the shortfall
    priced far above any batch reward; no target), then on the scenario with the coverage that
    reached as its target, for the best J there; the best of the three by coverage, then J. (On
    440 wide draws with a 95% target, the 8 that had less coverage than `full` proves the most
    there is all reach it now, e.g. 81.72% -> 84.14%, most at full's J as well; it runs only
    where the target is missed: 3-4 ms more on an 8-GPU day, 10-17 ms on scale-64.)"""
    policy = scenario.policy
    # every service weighs alike, up to a thousandth: among plans of equal coverage, the one
    # that leaves lower priorities short; the price is far above any batch job's per GPU-step
    # (within the model's limit on numbers)
    top = 1000.0 * max(job.priority for job in scenario.realtime_jobs)
    batch = max((job.priority for job in scenario.batch_jobs), default=1.0)
    price = min(MAX_NUMBER, _COVERAGE_PRICE * max(1.0, batch * policy.reward_weight))
    serving = replace(
        scenario,
        jobs=tuple(
            replace(job, priority=1.0 + job.priority / top) if isinstance(job, RealtimeJob) else job
            for job in scenario.jobs
        ),
        policy=replace(policy, rt_coverage_target=None, penalty_weight=price),
    )
    once = replace(params, restarts=0)
    most = Plan(_allocate(serving, once).grid, "allocator", dict(plan.stats))

    def key(candidate: Plan) -> tuple[float, float]:
        v = plan_value(scenario, holdings(scenario, candidate))
        return v.coverage, v.objective

    best, best_key = most, key(most)
    coverage = best_key[0]
    if coverage <= key(plan)[0] + 1e-9:
        return plan
    reachable = replace(scenario, policy=replace(policy, rt_coverage_target=coverage))
    watch = watch or Watch()
    with watch.muted():  # (plans of another target)
        again = _plan(reachable, replace(params, guard_cells=0), False, watch)
    again_key = key(again)
    if again_key[0] >= coverage - 1e-9 and again_key[1] > best_key[1]:
        best = again
    return Plan(best.grid, "allocator", dict(plan.stats))


def _queued(scenario: Scenario) -> int:
    """The batch jobs `_candidates` would build, counted without building them (this runs on
    the hot path too)."""
    T = scenario.cluster.horizon_steps
    return sum(
        1
        for job in scenario.jobs
        if isinstance(job, BatchJob) and job.running is None and job.arrival_step < T
    )


def _restarts_here(scenario: Scenario, params: AllocatorParams) -> bool:
    """Whether phase 7 runs: on the small path or up to `restart_work` units."""
    c = scenario.cluster
    queued = _queued(scenario)
    if not queued:
        return False
    return (
        queued * c.gpus * c.horizon_steps <= params.restart_work
        or _effort(scenario, params, queued)[1]
    )


def search_effort(scenario: Scenario, params: AllocatorParams | None = None) -> tuple[int, bool]:
    """(packings the local search may spend, whether they are a budget of work): True is the
    small-problem path of `AllocatorParams` (trials with a descent of their own, window pairs,
    windows that lose alone, a last polish); `scripts/allocator_gap.py` reports gaps per path."""
    return _effort(scenario, params or AllocatorParams(), len(_candidates(scenario)))


def _effort(scenario: Scenario, params: AllocatorParams, batch: int) -> tuple[int, bool]:
    size = max(1, batch * scenario.cluster.gpus * scenario.cluster.horizon_steps)
    packs = max(1, min(params.max_packs, params.pack_budget // size))
    # a packing costs about its size: more of them, same time. Small problems search with a
    # budget of work (without serving there is neither a screen of layouts nor real-time
    # moves, so twice as many fit), larger ones up to `fast_work` with more packings.
    small_work = params.small_work * (1 if scenario.realtime_jobs else 2)
    if size < small_work and min(params.small_packs, small_work // size) > params.max_packs:
        return min(params.small_packs, small_work // size), True
    if packs == params.max_packs:
        packs = max(packs, min(2 * params.max_packs, params.fast_work // size))
    return packs, False


def _misses_target(scenario: Scenario, plan: Plan) -> bool:
    if scenario.policy.rt_coverage_target is None or not scenario.realtime_jobs:
        return False
    return not plan_rank(scenario, plan)[0]


def _allocate(scenario: Scenario, params: AllocatorParams, blocked: Sequence[int] = ()) -> Plan:
    """Phases 1-6 (see the module's docstring); `blocked` (per step, a bitset of GPUs) is held
    as running batch work is: a job pinned there by `restarts.pin` (the grid leaves it idle)."""
    G, T = scenario.cluster.gpus, scenario.cluster.horizon_steps
    running = _running_masks(scenario, T)
    if blocked:
        running = _Held(m | b for m, b in zip(running, blocked, strict=True))
    discount = discounts(scenario)
    candidates = _candidates(scenario, discount)
    size = max(1, len(candidates) * G * T)
    packs, by_work = _effort(scenario, params, len(candidates))

    # Serving targets priced against batch work, and (where that gives up demand) every unit
    # served; three layouts of the serving GPUs (buddy best fit, packed at the top, packed at
    # the bottom). Each is screened with the first orderings; the local search then spends what
    # is left of its budget on the best one.
    # On problems so large that the budget affords a single packing (`lean`), only the priced
    # targets (and every unit served when a coverage target asks for it) are screened, and
    # beyond 5 times the budget (e.g. 16,384 GPUs x 24 steps x 5,000 jobs) one layout.
    lean = params.pack_budget // size < 2
    worth = tuple(batch_worth(scenario))
    pricings = [_Targets("priced", worth)]
    unpriced = _Targets("all", worth)
    if (not lean or scenario.policy.rt_coverage_target is not None) and any(
        pricings[0].of(scenario, j) != unpriced.of(scenario, j) for j in scenario.realtime_jobs
    ):
        pricings.append(unpriced)
    styles = [_Buddy(G)]
    if scenario.realtime_jobs and candidates and 5 * params.pack_budget >= size:
        styles += [_Top(G), _Low(G)]
    configurations = [(p, style) for p in pricings for style in styles]
    screen = 0
    if len(configurations) > 1:
        screen = min(params.screen, max(1, packs // (2 * len(configurations))))
        screen = max(1, screen) if len(pricings) > 1 else screen
    screened = _screen(scenario, running, candidates, discount, params, configurations, screen)
    if len(scenario.realtime_jobs) > 1 and screened[0][0][3] < 0 and not lean:
        # Serving jobs contend and demand goes short: try holding peaks all horizon too, by
        # priority and (fifo's own reservation, in file order) as the baseline does.
        peak = [(_Targets("peak", worth), style) for style in styles]
        peak.append((_Targets("fifo", worth), styles[0]))
        screen = max(1, screen)
        configurations += peak
        screened += _screen(scenario, running, candidates, discount, params, peak, screen)
        screened.sort(key=lambda item: item[0], reverse=True)
    fluid = _FluidBound(candidates, discount, T)  # the bound on any packing, for the moves below
    packs = max(1, packs - screen * len(configurations))
    # (windows, caps, packings per trial); on small problems a trial re-packs with a descent of
    # its own, a quarter of the budget
    moves = (
        min(params.max_windows, params.rt_budget // size),
        min(params.max_rt_moves, max(1, params.rt_budget // size)),
        max(1, packs // 4) if by_work else 1,
    )
    kept = [screened[0]]
    lead = screened[0][4]
    if by_work and len(scenario.realtime_jobs) > 1 and lead.mode != "fifo":
        kept += _laid_out_ahead(scenario, running, discount, params, screened[0])
    if lead.mode in ("peak", "fifo"):
        # A reservation of peaks won a screen of one packing; the priced serving still has
        # its search and real-time moves to come, so the best of it goes on too.
        kept += [item for item in screened if item[4].mode not in ("peak", "fifo")][:1]
    best = None
    for _, realtime, packer, style, pricing in kept:
        result = _search(
            packer,
            candidates,
            packs,
            by_work=by_work,
            variants=_VARIANTS if by_work else _FAST_VARIANTS,
        )
        if len(styles) > 1 and pricing.mode != "fifo":
            realtime, result = _relax_realtime(
                scenario,
                running,
                style,
                discount,
                (realtime, result, fluid),
                moves,
                params,
                pricing,
            )
        met, price, _ = _coverage_key(scenario, realtime)
        if best is None or (met, result[1] + price) > best[0]:
            best = ((met, result[1] + price), realtime, result)
    _, realtime, result = best

    realtime, result = _no_worse_than_the_queues(
        scenario, running, (candidates, fluid), discount, params, realtime, result
    )
    if by_work and candidates:  # small problems: the final plan's batch work, once more
        free = _free_masks(G, running, realtime)
        packer = _Packer(G, T, discount, free, _use_grid(params, G, T))
        result = _polish(packer, candidates, result, packs)
    # small problems: where the final serving is short, serving placed again around the batch
    # work (on larger ones it won on 1 of 400 fresh day-shape cases and cost realtime-peak 14%)
    layouts = (_Buddy(G), _Top(G), _Low(G)) if by_work else ()
    realtime = _serve_around(scenario, running, (realtime, result[0]), pricings, params, layouts)
    placements = result[0]
    if by_work and realtime and params.give_up_serving:
        realtime, placements = _served_instead(scenario, running, discount, realtime, placements)
    plan = Plan.empty(scenario, "allocator")
    grid = plan.grid
    pin_running(scenario, grid)
    for index, sets in realtime.items():
        grid[bitsets_to_bool(sets, G).T] = index
    for index, gpu_start, gpus, start, end in placements:
        grid[gpu_start : gpu_start + gpus, start:end] = index
    return plan


def _served_instead(scenario, running, discount, realtime, placements):
    """Small problems, last: a batch job whose GPUs serve more priced demand than it earns is
    left out, its GPUs topped up by serving (`_top_up`), one job at a time while that pays. The
    serving priced each GPU against the cheapest batch work before the packing; a job packed
    into the room serving gave up can earn less than the shortfall it leaves (wide small-1038,
    once b0's window is tried: b5 on GPU 3 at steps 3-4 earns 6 where serving covers 0.9 units
    there, 9; measured on 1,800 fresh cases: 5 better by up to 9.4%, none worse). Only where
    serving may be given up (`give_up_serving`)."""

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


def _laid_out_ahead(scenario, running, discount, params, winner) -> list[tuple]:
    """Small problems where services contend: the screen winner's pricing laid out once more
    so that no service takes a GPU a higher-priority one gains next step (`_Buddy`'s
    `ahead`), as a screened item to take through the search and real-time moves too (a screen
    of one packing misjudges it); none where that serving is the winner's."""
    G, T = scenario.cluster.gpus, scenario.cluster.horizon_steps
    pricing = winner[4]
    ahead = _Buddy(G, ahead=True)
    sets = _place_realtime(scenario, running, ahead, pricing, hand_over=params.give_up_serving)
    if sets == winner[1]:
        return []
    packer = _Packer(G, T, discount, _free_masks(G, running, sets), _use_grid(params, G, T))
    return [(None, sets, packer, ahead, pricing)]


def _no_worse_than_the_queues(scenario, running, batch, discount, params, realtime, result):
    """The incumbent, or the queue baselines' own plans where one scores higher (target met
    first, then J): their serving reservation with their batch packing reproduced (arrival
    order, earliest start, lowest-indexed block; fifo never before the previous job's start),
    so the allocator never returns less than fifo or backfill. A buddy block choice can lose
    to the lowest one (a long job on the one aligned block a wide job needs), and a search
    that tries a few orderings cannot rule that out. `batch` is (candidates, their
    `_FluidBound`)."""
    G, T = scenario.cluster.gpus, scenario.cluster.horizon_steps
    candidates, fluid = batch
    met, price, _ = _coverage_key(scenario, realtime)
    best = (met, result[1] + price)
    serving = reserved_sets(scenario)
    if _overlaps(serving, running):  # held for a pinned job (`restarts.pin`)
        return realtime, result
    met_q, price_q, _ = _coverage_key(scenario, serving)
    free = _free_masks(G, running, serving)
    tolerance = 1e-9 * max(1.0, abs(best[1]))
    if met_q < met or (met_q == met and fluid.reward(free) + price_q <= best[1] + tolerance):
        return realtime, result  # no packing on their reservation could score higher
    packer = _Packer(G, T, discount, free, _use_grid(params, G, T))
    order = sorted(candidates, key=_VARIANTS[-1][0])
    for rule in ("fifo", "backfill"):
        placements, reward, cells = packer.pack(order, rule)
        score = (met_q, reward + price_q)
        if score[0] > best[0] or (score[0] == best[0] and score[1] > best[1] + tolerance):
            best, realtime, result = score, serving, (placements, reward, cells, order, rule)
    return realtime, result


def _polish(packer: _Packer, candidates: list[_Candidate], result: tuple, packs: float) -> tuple:
    """The final plan's batch work descended again on the GPUs its serving leaves (`packer`),
    by the wider moves of `_wide_move` until one pays (the main descent tried the others),
    within a budget of work of `packs`; kept where it earns more. For small problems, where a
    packing is cheap: these moves reach plans two of the main descent's moves away whose first
    loses (the other size rule and then a promotion; a job moved a few places). The jobs pinned
    on windows go first in the order, and, where there are any, also stay on their windows."""
    order = list(result[3])
    listed = {c.index for c in order}  # jobs pinned on a window are not in the order: first
    pinned = [p for p in result[0] if p[0] not in listed]
    placed = {p[0] for p in pinned}
    tries = [(packer, [c for c in candidates if c.index in placed] + order, ())]
    if pinned:
        free = list(packer.free)
        for _, b, g, start, end in pinned:
            for t in range(start, end):
                free[t] &= ~(((1 << g) - 1) << b)
        held = _Packer(packer.gpus, packer.steps, packer.discount, free, packer.grid is not None)
        tries.append((held, order, pinned))
    best = None
    for packer, order, pins in tries:
        start = packer.pack(order, result[4])
        incumbent = (start, order, result[4], packer.trace)
        extra = [0.0, 0.0]
        for index, _, g, begin, end in pins:
            priority = next(c.priority for c in candidates if c.index == index)
            extra[0] += priority * g * (packer.discount[end] - packer.discount[begin])
            extra[1] += g * (end - begin)
        # where the descent went on under the other size rule (it tied), also without that move
        for wide in ("tried", "same rule"):
            found, _ = _descend(packer, incumbent, packs, True, wide)
            placements, reward, cells = found[0]
            found = ((placements + list(pins), reward + extra[0], cells + extra[1]), *found[1:])
            if found[0][1:] > tuple(result[1:3]) and (best is None or found[0][1:] > best[0][1:]):
                best = found
            if found[2] == result[4]:
                break
    return result if best is None else (*best[0], best[1], best[2])


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
    later, and a cap of 1 cannot undo that in time (day-shape small-21: priced shortfall 44 ->
    30, the optimum)."""
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
    wide-shape small-4169, priced shortfall 38 -> 26; day-shape small-4236, 9 -> 2 (both the
    shortfall of the best serving around that batch work). Last, with `hand_overs` (small
    problems: on realtime-peak they cost 1% of its time and changed nothing), hand-overs
    between services move where that pays (`_hand_overs`).
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
    demand at step 16 that rt1, priority 2 and a GPU short, gained at step 17: priced
    shortfall 27 -> 21). `back`: where a job released a GPU that stayed idle until another
    gained it, it holds it on over the other's whole run instead where that pays (default-shape
    small-4353: rt0, priority 4 and swap cap 1, let GPU 4 go while its demand dipped and could
    not ramp back to its peak; rt1, priority 2, had it: 104 -> 90). Both reach the shortfall of
    the best serving around those batch cells (a MIP over serving alone)."""

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


def _screen(scenario, running, candidates, discount, params, configurations, screen):
    """(score, serving sets, packer, layout, pricing) per configuration, best first."""
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
        out.append(((met, price + reward[0], reward[1], -short), realtime, packer, style, pricing))
    out.sort(key=lambda item: item[0], reverse=True)  # stable: the first of equals wins
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


def _guard(scenario: Scenario, plan: Plan) -> Plan:
    """The better of the allocator's plan and the queue baselines' (SLO first, then J)."""
    from .fifo import plan_backfill, plan_fifo

    best, best_key = plan, plan_rank(scenario, plan)
    for name, baseline in (("fifo", plan_fifo), ("backfill", plan_backfill)):
        other = baseline(scenario)
        other_key = plan_rank(scenario, other)
        if ranks_above(other_key, best_key):
            best, best_key = Plan(other.grid, "allocator", {"guard": name}), other_key
    return best


def _overlaps(realtime: dict[int, list[int]], running: list[int]) -> bool:
    """Whether serving holds a GPU at a step where it is held by batch work."""
    return any(m & running[t] for sets in realtime.values() for t, m in enumerate(sets))


def _free_masks(gpus: int, running: list[int], realtime: dict[int, list[int]]) -> list[int]:
    taken = list(running)
    for sets in realtime.values():
        for t, mask in enumerate(sets):
            taken[t] |= mask
    all_gpus = (1 << gpus) - 1
    return [all_gpus & ~m for m in taken]


# --------------------------------------------------------------------------- real-time phase


class _Held(list):
    """Per step, the bitset of GPUs batch work holds before serving is placed, where some of it
    starts after step 0 (a job `restarts.pin` placed first; inherited running blocks only
    shrink): `later[t]` has the GPUs it takes at a later step and not at t, which serving
    leaves while its swap cap lets it (`_Serving._step_aside`)."""

    def __init__(self, masks) -> None:
        super().__init__(masks)
        self.later, taken = [0] * len(self), 0
        for t in range(len(self) - 1, -1, -1):
            self.later[t] = taken & ~self[t]
            taken |= self[t]


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
    layout: _Buddy,
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
    if isinstance(running, _Held):  # a pinned job's GPUs: left ahead of its start too
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
        the GPUs a job would still hold when batch takes them, by its targets, made the same
        plans on 2,100 scenarios.)"""
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


def _relax_realtime(
    scenario: Scenario,
    running: list[int],
    layout: _Buddy,
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
        self.best = result[1] - self.weight * price
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
            # day small-7271, 205.51 -> 217.79; measured on 1,800 fresh cases: 12 better, 1
            # worse by 1.2%; a round from an unchanged incumbent would find nothing new)
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
        order = self.result[3]
        whole = [self.whole[c.index] if c.sizes != self.whole[c.index].sizes else c for c in order]
        if all(a is b for a, b in zip(whole, order, strict=True)):
            return
        free = _free_masks(self.G, self.running, self.realtime)
        grown = self._pack_around(free, self.pins, None, whole, 1)
        if grown[1:3] > tuple(self.result[1:3]):
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
        score = trial_result[1] - self.weight * price
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
        pairs are left (`_CHAINS`), a second window that loses can take a third the same way
        (measured: forbidding that lost 9.8% on one of 2,100 fresh cases, gained 0.5% on
        another)."""
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
        22-23, 162.0 -> 168.0 (the optimum). Measured on 1,800 fresh cases: 3 better (by up to
        14.8%), none worse; also after a window tried alone (a pair beyond `_CHAINS`), 4 better
        and 1 worse (by 2.2%); after any losing window, in the first rounds too, 2 better and 4
        worse. Only where serving may be given up (`give_up_serving`): in the rolling horizon's
        example the follow-up took realised coverage to 98.715%, below fifo's 98.771%
        (tests/test_rolling.py)."""
        discount = self.discount

        def earned(placements) -> dict[int, float]:
            return {i: g * (discount[end] - discount[s]) for i, _, g, s, end in placements}

        now = earned(trial[2][0])
        less = {i for i, was in earned(self.result[0]).items() if now.get(i, 0.0) < was - 1e-9}
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
        for index, b, g, start, end in self.result[0]:
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
        whose trials descend, it made day small-7271 3% worse: tests/planners/test_allocator.py.)
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
        order = [c for c in (order or result[3]) if c.index not in pinned]
        # the jobs of the incumbent's pins that these pins leave out re-pack first
        order = [c for _, c in self.pins if c.index not in pinned] + order
        if promoted is not None:
            order = [promoted] + [c for c in order if c is not promoted]
        packer = _Packer(G, T, self.discount, free, _use_grid(self.params, G, T))
        placements, reward, cells, order, rule = _search(
            packer, order, packs, (order, result[4]), by_work=packs > 1
        )
        placements = list(placements)
        for (b, g, start, end), c in pins:
            placements.append((c.index, b, g, start, end))
            reward += c.priority * g * (self.discount[end] - self.discount[start])
            cells += g * (end - start)
        return placements, reward, cells, order, rule


class _FluidBound:
    """An upper bound on the decayed reward of any packing of the batch work on given free GPUs.

    The relaxation lets a job spread its cells over any free GPUs at any steps from its arrival,
    up to the most cells any of its sizes holds (`g x min(d_g, steps - arrival)`), each cell
    earning `priority x decay^t`. Jobs are suffixes of the steps and a cell's reward is a
    product of the job's priority and the step's weight (non-increasing), so taking jobs by
    priority, each on the earliest free cells, is optimal for the relaxation: an exchange that
    gives an earlier cell to the higher priority never loses.
    """

    def __init__(self, candidates: Sequence[_Candidate], discount: list[float], steps: int):
        self.candidates, self.steps = candidates, steps  # the batch work it bounds
        self.weights = [discount[t + 1] - discount[t] for t in range(steps)]
        jobs = []  # (-priority, arrival, the most cells any of its sizes holds)
        for c in candidates:
            pairs = zip(c.sizes, c.durations, strict=True)
            jobs.append(
                (-c.priority, c.arrival, max(g * min(d, steps - c.arrival) for g, d in pairs))
            )
        self.jobs = sorted(jobs)

    def reward(self, free: list[int]) -> float:
        """The bound on the GPUs `free` leaves, per step; linear in the steps and jobs (steps
        left without room are skipped for good, path-compressed)."""
        weights, T = self.weights, self.steps
        room = [m.bit_count() for m in free]
        after = [t if room[t] else t + 1 for t in range(T)] + [T]  # a step with room, or later
        total = 0.0
        for minus_priority, arrival, cells in self.jobs:
            t = first_open(after, arrival)
            earned = 0.0
            while cells and t < T:
                here = room[t]
                if here > cells:
                    room[t] = here - cells
                    earned += cells * weights[t]
                    break
                cells -= here
                earned += here * weights[t]
                room[t] = 0
                after[t] = t + 1
                t = first_open(after, t + 1)
            total -= minus_priority * earned
        return total


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


def _block_moves(scenario: Scenario, running: list[int], realtime: dict[int, list[int]], result):
    """Blocks to keep clear of serving, in order, each as (batch job to promote, GPUs serving
    should avoid per step): per batch job placed late or not at all (highest priority first)
    and per size, the earliest window where an aligned block free of running work is broken
    only by serving (the block where serving sits least); where the GPUs serving and running
    work hold do not fit beside that block at every step of it, also (flagged True, tried on a
    budget of its own where the first loses) the earliest window where they do: a block
    cleared where serving cannot fit beside it gives up demand (rolling-surge: dpo-70b at its
    arrival, step 44, where serving holds 9 of 16 GPUs; a step later 7, and the move pays).

    (Serving capped at `floor(demand)` over such a window, or over a run of steps where a
    target rounds a fraction up, was tried too; the priced targets already give up the
    fractions batch work pays for, and on 1,273 scenarios no such move ever improved a plan.)
    """
    G, T = scenario.cluster.gpus, scenario.cluster.horizon_steps
    serving = [0] * T
    for sets in realtime.values():
        for t, mask in enumerate(sets):
            serving[t] |= mask
    crowded_at = [serving[t].bit_count() + running[t].bit_count() for t in range(T)]
    placed = {p[0]: p for p in result[0]}
    for job in sorted(result[3], key=lambda c: (-c.priority, c.index)):
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


# steps ahead of a block move's window that serving steps aside from the block (with the
# swaps its gains leave) and releases it first (`_RealtimeSearch._replace_serving`)
_LEAD = 2
_CHAINS, _CHAIN_WINDOWS = 2, 2  # window pairs per plan, next windows tried per pair
_CHAIN_PACKS = 2  # a pair's first window re-packs with a descent this many times a trial's
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

    `widen` lets jobs count as late at their own start too: "wider", a job placed narrower
    than its widest size, where a wider block would finish it sooner (every window round on
    larger problems, where a serving GPU often breaks the block a job needs at its arrival:
    measured on 800 fresh day-shape cases, 13 better by up to 6.4%, 3 worse by up to 4.1%; on
    small problems, widening their first round too made 9 of 900 fresh cases better and 6
    worse, one by 15%); "pairs", every placed job, on any block and size (the window pairs of
    small problems: moving a job to another block at its start can make the room a second
    window needs), and there the batch work on the block is counted at what it loses starting
    again when the window ends, not at all it earns (measured on 1,800 fresh cases: 12 better
    by up to 12.5%, 6 worse by up to 3.3%; in every window round, 30 better and 20 worse, by up
    to 9.8%); a job placed narrower than its widest size there also counts at every later
    start, where a wider block may earn more than the narrow one sooner (a job earns its
    GPU-steps: wide small-1068, b4 4 GPUs wide at its arrival, step 6, earns less than 8 GPUs
    wide at step 9, once running work frees GPUs 0-1; 122.66 -> 127.89, the optimum; measured
    on 1,800 fresh cases: 20 better, 3 worse by up to 3.7%)."""
    realtime, result = incumbent
    T = scenario.cluster.horizon_steps
    placed = {p[0]: p for p in result[0]}
    late = []
    for job in result[3]:
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
        for index, b, g, start, end in result[0]:
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
    for index, b, g, start, end in result[0]:
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


def G_MASK(gpus: int) -> int:
    return (1 << gpus) - 1


class _Buddy:
    """The buddy best-fit layout of serving GPUs, and the aligned-block arithmetic behind it.

    A gain takes the free GPU whose wholly free aligned block is smallest (serving fills blocks
    that running work or other serving already broke; ties to the highest GPU); a release gives
    back the GPU in the largest aligned block made only of free GPUs and the job's own; a trade
    is worth it while it frees a larger block than it breaks. `ahead`: the GPUs a service that
    holds its target gains at the next step (as this layout would give them now) are kept from
    lower-priority services at this step, in gains and trades, unless nothing else is free: a
    low-priority service then does not take the GPU beside a growing high-priority one, which
    would have to break a whole block a step later.
    """

    def __init__(self, gpus: int, ahead: bool = False):
        starts = aligned_starts(gpus)
        self.sizes, self.align = list(starts), list(starts.values())
        self.ahead = ahead

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

    def gains(self, free: int, count: int) -> int:
        """`count` free GPUs to gain (fewer if fewer are free), as a mask: `best_gain` applied
        `count` times, computed level by level. Taking GPUs of a block whose parent is not whole
        changes no other block's parent, so the smallest such blocks go first (highest first,
        each top-down: its own halves are then smaller still) without recomputing the levels."""
        out = 0
        levels = self.starts(free)
        for k, here in enumerate(levels):
            if count <= 0 or not here:
                break
            size = self.sizes[k]
            parents = levels[k + 1] if k + 1 < len(levels) else 0
            only = here & ~(parents | (parents << size))
            if not only:
                continue
            whole = min(only.bit_count(), count // size)
            taken = top_bits(only, whole)
            rest = only ^ taken
            out |= spread(taken, size)
            count -= whole * size
            if rest and count:  # the next block, top-down
                top = rest.bit_length() - 1 + size
                out |= ((1 << count) - 1) << (top - count)
                count = 0
        return out

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

    def gains(self, free: int, count: int) -> int:
        return top_bits(free, count)

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

    def gains(self, free: int, count: int) -> int:
        return low_bits(free, count)

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


# --------------------------------------------------------------------------- batch phase


def _candidates(scenario: Scenario, discount: list[float] | None = None) -> list[_Candidate]:
    T, decay = scenario.cluster.horizon_steps, scenario.policy.decay
    discount = discount or discounts(scenario)
    minutes = scenario.cluster.step_minutes
    out = []
    for i, job in enumerate(scenario.jobs):
        if not isinstance(job, BatchJob) or job.running is not None or job.arrival_step >= T:
            continue
        sizes = tuple(job.sizes())
        durations = tuple([duration(job, g, minutes) for g in sizes])
        a = job.arrival_step
        shapes = ((sizes[0], durations[0]),)
        if len(sizes) > 1:  # what each size could earn per unit of priority from the
            # arrival, the most first; ties to the earlier end, then the wider
            keyed = []
            for g, d in zip(sizes, durations, strict=True):
                end = a + d if a + d < T else T
                keyed.append((g * (discount[end] - discount[a]), -end, g, d))
            keyed.sort(key=lambda k: k[:3], reverse=True)
            shapes = tuple([(g, d) for _, _, g, d in keyed])
        out.append(
            _Candidate(
                i,
                float(job.priority),
                a,
                sizes,
                durations,
                float(job.gpu_hours),
                job.priority * decay**a,
                shapes,
            )
        )
    return out


# Orderings (by value per GPU-step first: the first one by what it earns at its arrival, which
# puts work that can only start once decay has taken its value last) and size rules.
_VARIANTS: tuple[tuple[Callable[[_Candidate], tuple], str], ...] = (
    (lambda c: (-c.worth, c.arrival, -c.work, c.index), "value"),
    (lambda c: (-c.priority, -c.work, c.index), "value"),
    (lambda c: (-c.priority, -c.sizes[-1], -c.work, c.index), "early"),
    (lambda c: (-c.priority, c.work, c.index), "value"),
    (lambda c: (c.arrival, c.index), "early"),
)
# The fast path's searches start from one more: by value at arrival times GPU-hours, the jobs
# worth most on their own first (on 100 fresh draws of the benchmarks' size, `--day --path fast
# --seed 40000`: 2.59% -> 2.23% below the optimum on average, 31 -> 34 optimal, 30 -> 27 more
# than 3% below; realtime-peak 308.5 -> 317.6, scale-64 2778.1 -> 2783.5, the optimum;
# batch-inference-heavy 385.4 -> 384.0). On the small path it made some draws better and others
# worse (day small-7271 10% worse), so that path keeps the five.
_FAST_VARIANTS = (*_VARIANTS[:4], (lambda c: (-c.work * c.worth, c.index), "value"), _VARIANTS[4])


def _search(
    packer: _Packer,
    candidates: list[_Candidate],
    packs: int,
    start: tuple[list[_Candidate], str] | None = None,
    by_work: bool = False,
    variants: tuple = _VARIANTS,
) -> tuple:
    """Greedy packings under a few orderings, then first-improvement moves; the best plan wins.

    Moves, tried on the incumbent's jobs in its order: *promote* packs a job that is left
    unplaced (or cut short) first, the rest in the incumbent's order; *shrink* forbids a placed
    job its current block size and the larger ones, so it takes a narrower, longer block and
    leaves room beside it; once those are exhausted, promote any job, then *swap* neighbours.
    Plans compare on the decayed batch reward (the real-time part of the objective is fixed by
    then), ties to more GPU-steps delivered. Where the moves run out with packings left, a
    second descent starts from the best ordering of the other size rule. With `start` (an
    order and its size rule), that order is packed instead of the orderings. Returns the best
    (placements, reward, GPU-steps, order, size rule) found within `packs` packings; `by_work`:
    a move's packing costs the share of the jobs it places again (see `_descend`), so `packs`
    is a budget of work.
    """
    if not candidates:
        return [], 0.0, 0.0, [], "value"
    starts = (
        [start] if start else [(sorted(candidates, key=k), rule) for k, rule in variants[:packs]]
    )
    packed = []
    for k, (order, size_rule) in enumerate(starts):
        # the orderings the screen packed on this packer are not packed again
        screened = packer.screened.get(k) if start is None else None
        if screened is None:
            screened = packer.pack(order, size_rule), packer.trace
            if start is None:
                packer.screened[k] = screened
        result, trace = screened
        packed.append((result, order, size_rule, trace))
    packs -= len(packed)
    # stable: among equal plans the earlier ordering
    packed.sort(key=lambda item: item[0][1:], reverse=True)
    best, packs = _descend(packer, packed[0], packs, by_work)
    # Budget left once the moves are exhausted: descend from the best start of the other size
    # rule too (each rule reaches plans the other's moves cannot).
    other = next((p for p in packed if p[2] != packed[0][2]), None)
    if packs > 0 and other is not None:
        found, packs = _descend(packer, other, packs, by_work)
        if found[0][1:] > best[0][1:]:
            best = found
    result, order, rule = best
    return (*result, order, rule)


def _descend(packer, incumbent, packs, by_work=False, wide: str = ""):
    """First-improvement moves from `incumbent` (result, order, size rule, trace) within
    `packs` packings; returns the best (result, order, size rule) and the packings left. Each
    move packs from the incumbent's packing (`_Packer.pack`'s `base`): the jobs before the
    first it moves are not placed again, and where the packing comes back to the incumbent's
    state the rest is not placed either. `by_work`: such a packing costs only the share of the
    jobs it placed (a move that changes nothing downstream is nearly free). `wide`: the moves
    of `_next_move` count as tried until one improves the incumbent, and `_wide_move`'s go
    first ("tried"; "same rule": without its change of size rule)."""
    best, best_order, best_rule, best_trace = incumbent
    tried: set[tuple[str, int, int]] = set()
    if wide:  # the incumbent's own moves were tried: the wider ones first
        while (move := _next_move(best[0], best_order, tried, rival=not by_work)) is not None:
            tried.add(move)
        if wide == "same rule":
            tried.add(("rule", 0, 0))
    while packs > 0:
        move = _next_move(best[0], best_order, tried, rival=not by_work)
        if move is None and wide:
            move = _wide_move(best_order, tried, best[0])
        if move is None:
            break
        tried.add(move)
        if move[0] == "rule":
            rule = "early" if best_rule == "value" else "value"
            result = packer.pack(best_order, rule)
            packs -= 1
            if result[1:] >= best[1:]:  # on a tie too: the moves are tried again under it
                better = result[1:] > best[1:]
                best, best_rule, best_trace = result, rule, packer.trace
                tried = set() if better else {move}
            continue
        order = _moved(best_order, move, best[0])
        result = packer.pack(order, best_rule, (best_order, best, best_trace))
        packs -= packer.work / len(order) if by_work else 1
        if result[1:] > best[1:]:
            best, best_order, best_trace = result, order, packer.trace
            tried.clear()
    return (best, best_order, best_rule), packs


def _moved(order: list[_Candidate], move: tuple[str, int, int], placements) -> list[_Candidate]:
    """The order after a move (kind, position, to): "insert" the job at `position` before
    position `to` (earlier), "demote" it to just after position `to` (later), "swap" it with
    the next one, "shrink" it to the sizes narrower than the one it is placed at, "pair" it and
    the job at position `to` (it first) to just after the job at `to + 1`."""
    kind, position, to = move
    job = order[position]
    if kind == "insert":
        return order[:to] + [job] + order[to:position] + order[position + 1 :]
    if kind == "demote":
        return order[:position] + order[position + 1 : to + 1] + [job] + order[to + 1 :]
    if kind == "pair":  # the job, then the one at `to`, just after the job next to that one
        return (
            order[:to]
            + [order[to + 1], job, order[to]]
            + order[to + 2 : position]
            + order[position + 1 :]
        )
    if kind == "swap":
        out = list(order)
        out[position], out[position + 1] = out[position + 1], out[position]
        return out
    placed_size = next(p[2] for p in placements if p[0] == job.index)
    keep = job.sizes.index(placed_size)
    narrower = job._replace(
        sizes=job.sizes[:keep],
        durations=job.durations[:keep],
        shapes=tuple(shape for shape in job.shapes if shape[0] < placed_size),
    )
    return order[:position] + [narrower] + order[position + 1 :]


def _wide_move(order, tried, placements):
    """The moves of a wider neighbourhood, once `_next_move`'s are exhausted: pack the order
    under the other size rule; move a job cut short or left out and a job at least two places
    before it that is placed to start after the first arrives (nearest first) as a pair, the
    first ahead, to just after the job next to the second; insert a job at any earlier position
    (nearest first), then at any later one (farthest first). A pair move reaches an order two
    single moves away, where neither pays alone (wide small-28: b3, b10, b0, b1, b6 -> b10, b6,
    b3, b0, b1: b6 then starts where b10 ends and b3 after it, where b3 took b6's room)."""
    if ("rule", 0, 0) not in tried:
        return ("rule", 0, 0)
    placed = {p[0]: p for p in placements}
    for position, job in enumerate(order):
        where = placed.get(job.index)
        if where is not None and where[4] - where[3] >= job.durations[job.sizes.index(where[2])]:
            continue
        for before in range(position - 2, -1, -1):
            rival = placed.get(order[before].index)
            if (
                rival is not None
                and rival[3] >= job.arrival
                and ("pair", position, before) not in tried
            ):
                return ("pair", position, before)
    for position in range(3, len(order)):
        for to in range(position - 2, 0, -1):  # (to position - 1 is a swap of neighbours)
            if ("insert", position, to) not in tried:
                return ("insert", position, to)
    for position in range(len(order) - 2):
        for to in range(len(order) - 1, position + 1, -1):
            if ("demote", position, to) not in tried:
                return ("demote", position, to)
    return None


def _next_move(
    placements: list[tuple[int, int, int, int, int]],
    order: list[_Candidate],
    tried: set[tuple[str, int, int]],
    rival: bool = False,
) -> tuple[str, int, int] | None:
    """The first untried move on the incumbent, as (kind, position, to): promote a job cut
    short or left out (insert it at position 0, or with `rival`, just before the first job placed
    at or after its arrival, so that the jobs already running then keep their places), or shrink a
    placed job that could run narrower; then promote any job; then swap two neighbours.

    `rival` is for larger problems, whose descent runs out of budget: promoted to the front, a
    left-out job takes the place of one that ran before it arrived, which then has to move, and a
    budget of 18 packings rarely gets that far (day-shape small-17: 3.65% below the optimum ->
    0.00%). Measured on the gap script's day and wide shapes: the fast path's mean 1.27% -> 0.97%
    and 0.71% -> 0.55%; 800 fresh day-shape cases 20 better (up to +13.4%), 7 worse (down to
    -8.0%); uniform-priority 348.2 -> 362.6, realtime-peak 311.6 -> 304.1. On small problems it
    made the wide shape's small-6 3.2% worse and is not used there."""
    placed = {p[0]: p for p in placements}
    for position, job in enumerate(order):
        where = placed.get(job.index)
        short = where is None or where[4] - where[3] < job.durations[job.sizes.index(where[2])]
        if short and position > 0:
            to = _first_rival(order, position, placed, job.arrival) if rival else 0
            if ("insert", position, to) not in tried:
                return ("insert", position, to)
        if where is not None and where[2] > job.sizes[0] and ("shrink", position, 0) not in tried:
            return ("shrink", position, 0)
    for position in range(1, len(order)):
        if ("insert", position, 0) not in tried:
            return ("insert", position, 0)
    for position in range(len(order) - 1):
        if ("swap", position, 0) not in tried:
            return ("swap", position, 0)
    return None


def _first_rival(order, position: int, placed: dict, arrival: int) -> int:
    """The position of the first job before `position` placed at or after `arrival`, else 0."""
    for k in range(position):
        where = placed.get(order[k].index)
        if where is not None and where[3] >= arrival:
            return k
    return 0


# Beyond two days of hourly steps `FreeBlocks`, whose start bounds and skipped walls pay off on
# long horizons, wins (a per-step scan there took 7.1 s on 8 GPUs x 10,080 steps, it 0.5 s),
# and the integers of `FreeGrid` (two bits a step per GPU, per size) grow with the horizon.
_GRID_STEPS = 48


def _use_grid(params: AllocatorParams, gpus: int, steps: int) -> bool:
    return gpus <= params.grid_gpus and steps <= _GRID_STEPS


class _Packer:
    """Places batch blocks on free GPUs: `FreeGrid` on small clusters and short horizons,
    per-step free bitsets with per-size aligned-block caches (`FreeBlocks`) otherwise."""

    def __init__(
        self, gpus: int, steps: int, discount: list[float], free: list[int], use_grid: bool
    ):
        self.gpus, self.steps, self.discount, self.free = gpus, steps, discount, free
        self.screened: dict[int, tuple] = {}  # `_search`'s k-th ordering: (packing, trace)
        self.trace: list[tuple[dict, int, float, float]] | None = None  # of the last packing
        self.work = 0  # the jobs the last packing placed itself (not taken from a base)
        self.align = aligned_starts(gpus)
        self.grid = FreeGrid(free, gpus, steps) if use_grid else None

    def pack(
        self, order: Sequence[_Candidate], size_rule: str, base: tuple | None = None
    ) -> tuple[list[tuple[int, int, int, int, int]], float, float]:
        """Place jobs in order; returns placements (index, gpu_start, gpus, start, end),
        the decayed reward and the GPU-steps delivered.

        Size rules: "value" (the size whose window earns most), "early" (the size that starts
        earliest, ties to the larger), and the queue baselines' own: "backfill" (as "early", on
        the lowest-indexed block) and "fifo" (as "backfill", never before the previous job's
        start).

        On `FreeGrid`, `self.trace` is then the state after each job (free GPUs, placements,
        reward, GPU-steps). `base` is (order, packing, trace) of an earlier packing with the
        same rule on this packer: the jobs this order shares with it at the front take their
        places from its trace, and once both orders have placed the same jobs and reach the
        same state (free GPUs, reward, GPU-steps), the rest goes as it went there, so that
        packing is returned as it is: it holds the same cells for the same reward and GPU-steps
        as the whole order's packing (jobs may sit on each other's blocks), no better and no
        worse, which is all the descent asks of a move."""
        if self.grid is not None:
            return self._pack_grid(order, size_rule, base)
        # Larger clusters search `FreeBlocks`, which caches blocks per step and bounds starts.
        T, discount = self.steps, self.discount
        space = FreeBlocks(self.free, self.gpus, T)
        search = space.earliest
        placements = []
        reward = cells = 0.0
        by_value, queue = size_rule == "value", size_rule in ("fifo", "backfill")
        previous = 0  # the last placed job's start (the "fifo" rule starts none before it)
        self.trace = None
        for job in order:
            arrival = max(job.arrival, previous) if size_rule == "fifo" else job.arrival
            best = self._choose(job, arrival, search, by_value)
            if best is not None:
                start, g, end, blocks = best
                if queue:  # the lowest-indexed block, as the queue baselines take
                    b = (blocks & -blocks).bit_length() - 1
                else:
                    b = self._pick_block(blocks, space.free_over(start, end), g)
                previous = start
                space.take(b, g, start, end)
                placements.append((job.index, b, g, start, end))
                reward += job.priority * g * (discount[end] - discount[start])
                cells += g * (end - start)
        self.work = len(order)
        return placements, reward, cells

    def _pack_grid(self, order, size_rule: str, base: tuple | None):
        """`pack` on `FreeGrid`'s integers, its searches (`earliest`, `free_over`, `take`)
        written out here: the hot path of small clusters, where a method call per size and job
        took a tenth of the time. So is the value rule's choice of size and start (`_choose`;
        the descent packs by that rule nearly always, and a call per job cost 2% of the plan);
        the earliest-start rules' is `_earliest_on_grid`. `sizes` is as the grid's (the free
        GPUs at size 1, the aligned free blocks per larger size, made when first searched and
        dropped at each placement)."""
        discount = self.discount
        geometry = self.grid.geometry
        gpus, all_gpus, repeat = geometry.gpus, geometry.all_gpus, geometry.repeat
        shifts, starts, aligned = geometry.shifts, geometry.starts, geometry.aligned
        queue, fifo = size_rule in ("fifo", "backfill"), size_rule == "fifo"
        base = None if fifo else base
        first, (sizes, placements, reward, cells), trace = self._resume(order, base)
        moved = set()  # the jobs placed here or there but not both, so far
        previous = 0  # the last placed job's start (the "fifo" rule starts none before it)
        T, by_value, earliest = self.steps, size_rule == "value", self._earliest_on_grid
        grid = (T, shifts, starts, gpus, aligned)
        start = size = end = 0  # the best size's window so far (read once one is found)
        for k in range(first, len(order)):
            job = order[k]
            arrival = max(job.arrival, previous) if fifo else job.arrival
            if arrival >= T:
                blocks = 0
            elif by_value:  # `_choose`'s score compared a field at a time: the value, the
                # earlier end, the narrower (building its tuples took a good share of the time)
                best, blocks = -math.inf, 0
                priority, shapes = job.priority, job.shapes
                for g, d in shapes or zip(job.sizes, job.durations, strict=True):
                    if blocks:  # no start beats its arrival: skip sizes that cannot win there
                        e = arrival + d if arrival + d < T else T
                        value = priority * g * (discount[e] - discount[arrival])
                        if value < best and shapes:  # `shapes` go by that value, the most
                            # first (a power of two times a positive priority keeps their
                            # order): none after one below the best can win either
                            break
                        if value < best or (
                            value == best and (e > end or (e == end and g >= size))
                        ):
                            continue
                    x = sizes.get(g)
                    if x is None:  # (None again: no aligned block of g on this cluster)
                        x = grid_blocks(sizes, aligned, g) or 0
                    if not x & starts[arrival]:  # no block of g free at any step from then on
                        continue
                    for shift in shifts[d if d < T else T]:
                        x &= x >> shift
                    x &= starts[arrival]
                    if not x:
                        continue
                    s = ((x & -x).bit_length() - 1) // gpus
                    e = s + d if s + d < T else T
                    value = priority * g * (discount[e] - discount[s])
                    if value < best or (value == best and (e > end or (e == end and g >= size))):
                        continue
                    best, start, size, end, blocks = value, s, g, e, x
            else:
                start, size, end, blocks = earliest(job, arrival, sizes, grid)
            if blocks:
                g = size
                blocks = (blocks >> (start * gpus)) & all_gpus
                b = (
                    (blocks & -blocks).bit_length() - 1  # the queue baselines': the lowest
                    if queue or not blocks & (blocks - 1)
                    else self._pick_on_grid(blocks, sizes[1], start, end, g)
                )
                previous = start
                cut = ((((1 << g) - 1) << b) * repeat[end - start]) << (start * gpus)
                sizes = {1: sizes[1] & ~cut}
                placements.append((job.index, b, g, start, end))
                reward += job.priority * g * (discount[end] - discount[start])
                cells += g * (end - start)
            trace.append((sizes, len(placements), reward, cells))
            if base is not None and self._rejoins(order, k, base, moved):
                self.work = k + 1 - first
                return base[1]
        self.work = len(order) - first
        return placements, reward, cells

    def _resume(self, order, base: tuple | None):
        """Where `_pack_grid` starts: (the first job to place, the state before it (free
        sizes, placements, reward, GPU-steps), the trace so far, also `self.trace`); from the
        base's trace after the jobs `order` shares with it at the front, if any (the free
        blocks made of that state's larger sizes are kept too), else from the grid's free
        state before any job (its larger sizes made here serve every packing's first job: a
        placement makes a new dict)."""
        first = 0 if base is None else self._shared_front(order, base)
        if not first:
            self.trace = []
            return 0, (self.grid.sizes, [], 0.0, 0.0), self.trace
        sizes, placed, reward, cells = base[2][first - 1]
        self.trace = base[2][:first]
        return first, (sizes, base[1][0][:placed], reward, cells), self.trace

    @staticmethod
    def _earliest_on_grid(job: _Candidate, arrival: int, sizes: dict, grid: tuple):
        """`_choose` by the earliest-start rules with `FreeGrid.earliest` written out, on the
        grid's `sizes` (arrival before the horizon; `grid` is `_pack_grid`'s steps and
        geometry): (start, size, end, the aligned blocks free from then on the grid's bits),
        blocks 0 where no size fits. The earliest start wins, ties to the wider."""
        T, shifts, starts, gpus, aligned = grid
        best = (T, 0, T, 0)
        for g, d in job.shapes or zip(job.sizes, job.durations, strict=True):
            # no start beats its arrival: skip sizes that cannot win
            if arrival > best[0] or (arrival == best[0] and g <= best[1]):
                continue
            x = sizes.get(g)
            if x is None:  # (None again: no aligned block of g on this cluster)
                x = grid_blocks(sizes, aligned, g) or 0
            if not x & starts[arrival]:  # no block of g free at any step from then on
                continue
            for shift in shifts[d if d < T else T]:
                x &= x >> shift
            x &= starts[arrival]
            if not x:
                continue
            start = ((x & -x).bit_length() - 1) // gpus
            if start < best[0] or (start == best[0] and g > best[1]):
                best = (start, g, start + d if start + d < T else T, x)
        return best

    @staticmethod
    def _shared_front(order, base: tuple) -> int:
        """How many jobs `order` shares with the base's order at the front (the same objects)."""
        base_order = base[0]
        shared, first = min(len(order), len(base_order)), 0
        while first < shared and order[first] is base_order[first]:
            first += 1
        return first

    def _choose(self, job: _Candidate, arrival: int, search, by_value: bool):
        """The job's size and earliest start by the size rule (by value, or earliest): (start,
        size, end, blocks), or None where no size fits."""
        T, discount = self.steps, self.discount
        best = None  # (score, start, size, end, block mask)
        for g, d in job.shapes or zip(job.sizes, job.durations, strict=True):
            if best is not None:  # no start beats its arrival: skip sizes that cannot win
                if by_value:
                    e = arrival + d if arrival + d < T else T
                    bound = (job.priority * g * (discount[e] - discount[arrival]), -e, -g)
                else:
                    bound = (-arrival, g)
                if bound <= best[0]:
                    continue
            found = search(g, d, arrival)
            if found is None:
                continue
            start, blocks = found
            end = start + d if start + d < T else T
            if by_value:
                score = (job.priority * g * (discount[end] - discount[start]), -end, -g)
            else:
                score = (-start, g)
            if best is None or score > best[0]:
                best = (score, start, g, end, blocks)
        return None if best is None else best[1:]

    def _rejoins(self, order, k: int, base: tuple, moved: set) -> bool:
        """After job k: both orders have placed the same jobs so far, and this packing's
        state (free GPUs, reward, GPU-steps) is the base's there (its trace is then the
        base's)."""
        base_order, _, base_trace = base
        if k >= len(base_order):
            return False
        if order[k] is not base_order[k]:
            moved ^= {id(order[k]), id(base_order[k])}
        here = self.trace[-1]
        if moved or here[0][1] != base_trace[k][0][1] or here[2:] != base_trace[k][2:]:
            return False
        self.trace = base_trace
        return True

    def _pick_on_grid(self, blocks: int, free: int, start: int, end: int, g: int) -> int:
        """`_pick_block` on the grid's free GPUs `free`, for a window [start, end)."""
        geometry = self.grid.geometry
        for shift in geometry.shifts[end - start]:
            free &= free >> shift
        return self._pick_block(blocks, (free >> (start * geometry.gpus)) & geometry.all_gpus, g)

    def _pick_block(self, blocks: int, window: int, g: int) -> int:
        """Buddy best fit: among feasible blocks, one whose parent is not wholly free, lowest.
        Where no parent of a size is whole, one with no parent of that size at all (past the
        last aligned block of it, as GPUs 8-11 of 12 for size 8) goes first: it can never
        break one."""
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
                outside = candidates & ~spread(self.align[h], h)
                if outside:
                    candidates = outside
                break
            keep = candidates & ~spread(parents, h)
            if keep:
                candidates = keep
                break
            h *= 2
        return (candidates & -candidates).bit_length() - 1


__all__ = ["plan_allocator", "plan_thorough", "realtime_targets", "search_effort"]
