"""The fast allocator of SPEC section 2: real-time demand as a curve, batch work by value.

`plan_allocator` (milliseconds, for sweeps and the rolling horizon) and `plan_thorough` (the
same search with restarts, pins and kicks at every size, within a time limit) run one pipeline.
Every phase is legal by construction: the five constraints are its rules, not a check after.

1. serving layout (`serving`, `layouts`): a target curve per service, priced against batch
   work; which GPUs it takes under three layouts, each screened with a quick packing;
2. batch packing (`packing`): jobs by value per GPU-step, each to the size, start and aligned
   block that earn it most;
3. local search (`search`): orderings and size rules, then first-improvement moves;
4. real-time moves (`moves`, `windows`, `clearing`, `bound`): windows cleared of serving for
   late jobs, each judged on the true objective after re-packing;
5. never below the queues (`queues`): fifo's and backfill's own plans where they score higher;
6. serving once more (`topup`): serving placed again around the final batch work, idle GPUs
   topped up;
7. tighter problems (`restarts`, `pins`, `kicks`): the pipeline on tightened scenarios, pinned
   jobs, and kicked packings.

`params` holds the tunables (`AllocatorParams`, `ThoroughParams`); `watch` the time limit and
progress of the thorough search. Free GPUs are Python integers used as bitsets, one per step
(bit g set: GPU g free); see `packing` for the packer's data structures. What each rule gained
when it was measured is in docs/benchmarks.md.

"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import NamedTuple

import numpy as np

from ...model import MAX_NUMBER, BatchJob, RealtimeJob, Scenario
from ...nodes import needs_nodes
from ...plan import (
    Plan,
    discounts,
    holdings,
    pin_running,
    plan_rank,
    plan_value,
    ranks_above,
)
from ..blocks import (
    bitsets_to_bool,
)
from ..nodes import plan_on_nodes
from .bound import _FluidBound
from .kicks import _OTHER_SERVING, _kick
from .layouts import BatchHeldFirst, FillBrokenBlocks, KeepHighGpusFree, KeepLowGpusFree
from .moves import _relax_realtime
from .packing import (
    _FAST_VARIANTS,
    _VARIANTS,
    _Candidate,
    _candidates,
    _free_masks,
    _Packed,
    _Packer,
    _running_masks,
    _use_grid,
)
from .params import AllocatorParams, ThoroughParams
from .pins import pin
from .queues import _no_worse_than_the_queues
from .restarts import restart
from .search import _polish, _search
from .serving import (
    _coverage_key,
    _laid_out_ahead,
    _screen,
    _Screened,
    _Targets,
    batch_worth,
    realtime_targets,
)
from .topup import _serve_around, _served_instead
from .watch import Watch, search_words

__all__ = [
    "AllocatorParams",
    "ThoroughParams",
    "batch_worth",
    "plan_allocator",
    "plan_thorough",
    "realtime_targets",
    "search_effort",
    "search_words",
]


# On clusters with node groups (`core.planners.nodes`): thorough's packings and kicks.
THOROUGH_PACKS = 600
THOROUGH_KICKS = 300


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
    if needs_nodes(scenario):
        return plan_on_nodes(scenario)
    return _plan(scenario, params or AllocatorParams(), True)


def plan_thorough(scenario: Scenario, params: ThoroughParams | None = None) -> Plan:
    """The allocator with its restarts, pins and kicks at every size, within a time limit: the
    plan for one decision, where `plan_allocator` keeps its milliseconds for sweeps and the
    rolling horizon (which re-plan hundreds of times). Never ranks below the fast allocator's
    plan (that is its first plan). `stats["time_limit_reached"]` says whether the limit cut
    the search short."""
    params = params or ThoroughParams()
    if needs_nodes(scenario):
        started = time.monotonic()
        deadline = started + params.time_limit if params.time_limit > 0 else None
        plan = plan_on_nodes(scenario, THOROUGH_PACKS, THOROUGH_KICKS, "thorough", deadline)
        fast = plan_on_nodes(scenario)  # never below the fast allocator's plan
        if ranks_above(plan_rank(scenario, fast), plan_rank(scenario, plan)):
            plan = Plan(fast.grid, "thorough", {**fast.stats, "from": "allocator"})
        plan.stats["time_limit_reached"] = deadline is not None and time.monotonic() > deadline
        return plan
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
    reached as its target, for the best J there; the best of the three by coverage, then J. (It
    runs only where the target is missed.)"""
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


class _Problem(NamedTuple):
    """What every phase of one `_allocate` reads: the scenario and its batch work, priced."""

    scenario: Scenario
    params: AllocatorParams
    running: list[int]  # per step, the GPUs running batch work (and pinned jobs) hold
    discount: list[float]
    candidates: list[_Candidate]
    size: int  # jobs x GPUs x steps: what one packing costs
    packs: int  # the local search's budget (of packings, or of work where `by_work`)
    by_work: bool  # the small-problem path (see `search_effort`)


class _Screen(NamedTuple):
    """Phase 1's outcome: the serving configurations screened, best first."""

    screened: list[_Screened]
    pricings: list[_Targets]
    layouts: list[FillBrokenBlocks]
    packs: int  # what the screen left of the search's budget


def _allocate(scenario: Scenario, params: AllocatorParams, blocked: Sequence[int] = ()) -> Plan:
    """Phases 1-6 (see the module's docstring); `blocked` (per step, a bitset of GPUs) is held
    as running batch work is: a job pinned there by `pins.pin` (the grid leaves it idle)."""
    problem = _problem(scenario, params, blocked)
    screen = _lay_out_serving(problem)  # phase 1
    fluid = _FluidBound(problem.candidates, problem.discount, scenario.cluster.horizon_steps)
    realtime, result = _pack_and_move(problem, screen, fluid)  # phases 2-4
    realtime, result = _no_worse_than_the_queues(  # phase 5
        scenario,
        problem.running,
        (problem.candidates, fluid),
        problem.discount,
        params,
        realtime,
        result,
    )
    if problem.by_work and problem.candidates:  # small problems: the batch work, once more
        G, T = scenario.cluster.gpus, scenario.cluster.horizon_steps
        free = _free_masks(G, problem.running, realtime)
        packer = _Packer(G, T, problem.discount, free, _use_grid(params, G, T))
        result = _polish(packer, problem.candidates, result, screen.packs)
    realtime, placements = _serve_once_more(problem, screen.pricings, realtime, result)  # 6
    return _as_plan(scenario, realtime, placements)


def _problem(scenario: Scenario, params: AllocatorParams, blocked: Sequence[int]) -> _Problem:
    G, T = scenario.cluster.gpus, scenario.cluster.horizon_steps
    running = _running_masks(scenario, T)
    if blocked:
        running = BatchHeldFirst(m | b for m, b in zip(running, blocked, strict=True))
    discount = discounts(scenario)
    candidates = _candidates(scenario, discount)
    packs, by_work = _effort(scenario, params, len(candidates))
    size = max(1, len(candidates) * G * T)
    return _Problem(scenario, params, running, discount, candidates, size, packs, by_work)


def _lay_out_serving(problem: _Problem) -> _Screen:
    """Phase 1: serving targets priced against batch work, and (where that gives up demand)
    every unit served, each under the three layouts; each is screened with the first orderings
    and the local search then spends what is left of its budget on the best. On problems so
    large that the budget affords a single packing (`lean`), only the priced targets (and every
    unit served when a coverage target asks for it) are screened, and beyond 5 times the budget
    (e.g. 16,384 GPUs x 24 steps x 5,000 jobs) one layout. Where services contend and demand
    goes short, peaks held all horizon are screened too (by priority, and fifo's reservation)."""
    scenario, params = problem.scenario, problem.params
    G = scenario.cluster.gpus
    lean = params.pack_budget // problem.size < 2
    worth = tuple(batch_worth(scenario))
    pricings = [_Targets("priced", worth)]
    unpriced = _Targets("all", worth)
    if (not lean or scenario.policy.rt_coverage_target is not None) and any(
        pricings[0].of(scenario, j) != unpriced.of(scenario, j) for j in scenario.realtime_jobs
    ):
        pricings.append(unpriced)
    layouts = [FillBrokenBlocks(G)]
    if scenario.realtime_jobs and problem.candidates and 5 * params.pack_budget >= problem.size:
        layouts += [KeepLowGpusFree(G), KeepHighGpusFree(G)]
    configurations = [(p, layout) for p in pricings for layout in layouts]
    screen = 0
    if len(configurations) > 1:
        screen = min(params.screen, max(1, problem.packs // (2 * len(configurations))))
        screen = max(1, screen) if len(pricings) > 1 else screen
    screened = _screen_all(problem, configurations, screen)
    if len(scenario.realtime_jobs) > 1 and screened[0].goes_short and not lean:
        peak = [(_Targets("peak", worth), layout) for layout in layouts]
        peak.append((_Targets("fifo", worth), layouts[0]))
        screen = max(1, screen)
        configurations += peak
        screened += _screen_all(problem, peak, screen)
        screened.sort(key=lambda item: item.score, reverse=True)
    packs = max(1, problem.packs - screen * len(configurations))
    return _Screen(screened, pricings, layouts, packs)


def _screen_all(problem: _Problem, configurations: list, screen: int) -> list[_Screened]:
    return _screen(
        problem.scenario,
        problem.running,
        problem.candidates,
        problem.discount,
        problem.params,
        configurations,
        screen,
    )


def _pack_and_move(problem: _Problem, screen: _Screen, fluid: _FluidBound) -> tuple:
    """Phases 2-4 on the screen's winner (and, where a reservation of peaks won a screen of one
    packing, on the best priced serving too: its search and real-time moves are still to come;
    on small problems where services contend, on the winner's pricing laid out `ahead` too):
    the batch work packed and searched, then the real-time moves; the best plan (target met
    first, then the objective) as (serving sets, `_Packed`)."""
    scenario, params, size = problem.scenario, problem.params, problem.size
    # (windows, caps, packings per trial); on small problems a trial re-packs with a descent of
    # its own, a quarter of the budget
    moves = (
        min(params.max_windows, params.rt_budget // size),
        min(params.max_rt_moves, max(1, params.rt_budget // size)),
        max(1, screen.packs // 4) if problem.by_work else 1,
    )
    lead = screen.screened[0]
    kept = [lead]
    if problem.by_work and len(scenario.realtime_jobs) > 1 and lead.pricing.mode != "fifo":
        kept += _laid_out_ahead(scenario, problem.running, problem.discount, params, lead)
    if lead.pricing.mode in ("peak", "fifo"):
        kept += [s for s in screen.screened if s.pricing.mode not in ("peak", "fifo")][:1]
    best = None
    for item in kept:
        realtime = item.sets
        result = _search(
            item.packer,
            problem.candidates,
            screen.packs,
            by_work=problem.by_work,
            variants=_VARIANTS if problem.by_work else _FAST_VARIANTS,
        )
        if len(screen.layouts) > 1 and item.pricing.mode != "fifo":
            realtime, result = _relax_realtime(
                scenario,
                problem.running,
                item.layout,
                problem.discount,
                (realtime, result, fluid),
                moves,
                params,
                item.pricing,
            )
        met, price, _ = _coverage_key(scenario, realtime)
        if best is None or (met, result.reward + price) > best[0]:
            best = ((met, result.reward + price), realtime, result)
    return best[1], best[2]


def _serve_once_more(problem: _Problem, pricings, realtime, result: _Packed) -> tuple:
    """Phase 6: on small problems, serving short of its demand placed again around the final
    batch work under each layout; on every problem, idle GPUs topped up; on small problems,
    last, batch jobs whose GPUs serve more priced demand than they earn left out."""
    scenario, params = problem.scenario, problem.params
    G = scenario.cluster.gpus
    layouts = (
        (FillBrokenBlocks(G), KeepLowGpusFree(G), KeepHighGpusFree(G)) if problem.by_work else ()
    )
    realtime = _serve_around(
        scenario, problem.running, (realtime, result.placements), pricings, params, layouts
    )
    placements = result.placements
    if problem.by_work and realtime and params.give_up_serving:
        realtime, placements = _served_instead(
            scenario, problem.running, problem.discount, realtime, placements
        )
    return realtime, placements


def _as_plan(scenario: Scenario, realtime: dict[int, list[int]], placements: list) -> Plan:
    plan = Plan.empty(scenario, "allocator")
    grid = plan.grid
    pin_running(scenario, grid)
    for index, sets in realtime.items():
        grid[bitsets_to_bool(sets, scenario.cluster.gpus).T] = index
    for index, gpu_start, gpus, start, end in placements:
        grid[gpu_start : gpu_start + gpus, start:end] = index
    return plan


def _guard(scenario: Scenario, plan: Plan) -> Plan:
    """The better of the allocator's plan and the queue baselines' (SLO first, then J)."""
    from ..fifo import plan_backfill, plan_fifo

    best, best_key = plan, plan_rank(scenario, plan)
    for name, baseline in (("fifo", plan_fifo), ("backfill", plan_backfill)):
        other = baseline(scenario)
        other_key = plan_rank(scenario, other)
        if ranks_above(other_key, best_key):
            best, best_key = Plan(other.grid, "allocator", {"guard": name}), other_key
    return best
