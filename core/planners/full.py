"""Full mode: SPEC section 1 as a mixed-integer program in Pyomo, solved by HiGHS.

The allocator's grid is the MIP start; HiGHS tries to improve it within a time limit and proves a
bound on the objective J. The plan returned is never worse than the warm start: when the solver
is missing, fails, times out without improving, or returns a grid that `check` rejects, the warm
start comes back with a status that says so. Nothing here raises into the caller.

Formulation (why this one). The literal statement, a binary per GPU x job x step, must rebuild
contiguity, alignment and "one block, held without interruption" from big-M style linking rows;
its LP relaxation spreads a job thinly over many GPUs and steps and the bound is useless.
Instead a batch job's decision is *where and when it runs*:

- `place[p]` (binary), one per legal placement p = (job, size g, aligned block [b, b+g),
  start s >= arrival). A placement covers exactly its block for steps s .. s+duration(g)-1, cut
  at the horizon, so constraints 2 (sizes), 3 (aligned power-of-two blocks) and 5 (no
  preemption, not before arrival) hold by construction, and its reward
  p_j * g * sum_t decay^t is a constant coefficient. `sum_p place[p] <= 1` per job (runs once).
- `hold[r, gpu, t]` (binary) for real-time job r: it holds that GPU at that step. The count
  `count[r, t]` = sum_gpu hold is an integer variable in [gpus_min, gpus_max] (constraint 2);
  branching on it and rounding cuts on `short >= demand - count` close the gap on fractional
  demand far faster than branching on single GPUs. `swap[r, gpu, t]` (continuous in
  [0, 1]) is at least |hold[t] - hold[t-1]| (at t = 0 against previous_gpus when given), and
  sum_gpu swap <= swap_cap (constraint 4). `short[r, t] >= demand - count` carries the penalty.
- Constraint 1 through block occupancy: `busy[g, k, t]` (continuous) equals the number of
  placements of size g on aligned block k that are active at step t. A cell (gpu, t) lies in
  exactly one aligned block of each size, so "one job per cell" is
  sum_g busy[g, gpu // g, t] + sum_r hold[r, gpu, t] <= 1. This is the per-cell conflict row of
  the placement model with the block sums substituted, so its LP relaxation is the same (each
  cell row is a clique of mutually exclusive placements), but a placement appears in
  duration rows instead of size x duration, which keeps building cheap on 64-GPU clusters.

Running jobs are pinned: their cells are removed from the model and their reward is a constant.
The MIP's objective is J exactly, so HiGHS's dual bound is a bound on J.

With `policy.rt_coverage_target`, one more row makes it a constraint: the total shortfall is at
most (1 - target) x demanded (served >= target x demanded). A plan that meets the target beats
one that does not; when no plan can (HiGHS proves the row infeasible), the status is
`slo_infeasible`, `slo_met` is false in its metrics and two more solves follow
(`_most_coverage`): the serving alone, for the most coverage any plan reaches, then the scenario
with that coverage as its target, for the best plan the coverage rule ranks first (its bound and
gap are then of that problem; the stats' `most_coverage` and `most_coverage_proved` say what
was reached and whether it is proved the most).

The full model is exact but hard: its per-GPU real-time columns and their swap rows make its
LP bound weak and its search slow (minutes on realtime-peak and scale-64). So a smaller model
comes first. The shape model (`_shape_program`) forgets where things are: a batch job chooses a
shape (size and start step) or none, a real-time job a count per step; per step and per size g,
the jobs of size >= g fit in the wholly free aligned g-blocks, and batch cells plus counts fit
in the free GPUs; counts move by at most swap_cap a step, and a block a real-time job starts in
(previous_gpus) is not free for batch work until it has paid the swaps to leave. It is a
relaxation (every legal plan is
one of its solutions, with the same J), so its bound holds for J; it has a column per shape
instead of per block and per GPU, and HiGHS solves it in about a second on every benchmark,
where on seven of the eight its optimum is the true one. Its solution is then realized by the
full model itself in the shape phase: every batch job fixed to its shape (any aligned block),
the real-time GPUs free. That is a restriction, so its plans are legal plans; one that reaches
the shape bound is optimal, proved, and the solve ends there.

The time limit is the whole call's: one clock from the start of `plan_full` covers the warm
start, loading Pyomo, building, the shape model and every solver phase (each HiGHS run gets
what is left once the solver holds the model); Pyomo is not loaded, nor the model built, when
less time is left than that takes. The phases share one APPSI instance, each starting from the
best legal plan so far: the shape model (`relaxation_share` of the time left); a restricted
model with the real-time columns fixed in HiGHS at the start's values that re-packs the batch
work around serving (`restricted_share`; it usually solves to optimality in well under a
second on 8 GPUs, and on scale-64 it is what reaches the shape bound first); the packed phase
(the shapes packed greedily on one block each, real-time GPUs free: `restricted_share`), whose
plan starts the shape phase (`shape_share`); then the full model with the rest of the time,
whose bound is capped by the shape model's. A phase whose plan reaches the bound ends the
solve. Every solution is verified with `check`, and the best legal one that beats the warm
start is returned.

On large models (more than LARGE_MODEL_COLUMNS binaries, e.g. 64 GPUs x 24 steps x 30 jobs)
the full and restricted phases run without presolve, which cannot be interrupted and alone
outlasts the limit there (the packed and shape phases keep it: it removes their fixed
placements at once);
whatever HiGHS finds in the remaining time still counts.

HiGHS is reached through Pyomo's APPSI interface (`pyomo.contrib.appsi.solvers.Highs`), which
passes variable values as a MIP start (`config.warmstart`) and exposes the underlying
`highspy.Highs`; progress comes from highspy's own callbacks on that object (improving
solutions, and the MIP interrupt check for the bound), throttled. HiGHS keeps one global thread
scheduler per process: the `threads` option is never set (so every solve agrees with the
scheduler) and solves are serialised by a process-wide lock, so a long-running app can solve
any number of times.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..model import BatchJob, RealtimeJob, Scenario
from ..plan import (
    IDLE,
    Plan,
    check,
    free_blocks,
    metrics,
    objective,
    pin_running,
    plan_rank,
    ranks_above,
)
from . import SolveStatus

ProgressHook = Callable[[dict[str, float]], None]
_SOLVE_LOCK = threading.Lock()


@dataclass(frozen=True)
class FullParams:
    """Options of full mode. A NaN or negative time limit or gap means none (0).

    `max_model_terms`: above this many placement-step incidences the model is not built (the
    warm start is returned): Pyomo needs about 25 us a term, so this caps building near ten
    seconds. `large_model_columns`: above this many binary columns HiGHS's MIP presolve alone
    outlasts a time limit of seconds, so it runs without. `relaxation_share`, `shape_share`
    and `restricted_share`: the shares of the time left for the shape model that gives the
    first bound, for the shape phase that realizes its solution per GPU and for the restricted
    phase (real-time GPUs fixed as in the best plan so far).
    `progress` receives {"elapsed_s", "incumbent", "bound", "gap"} at most every
    `progress_every_s` seconds while HiGHS solves; `warm_start` replaces the allocator's plan.
    """

    time_limit: float = 10.0
    mip_gap: float = 1e-4
    progress: ProgressHook | None = field(default=None, compare=False)
    warm_start: Plan | None = field(default=None, compare=False)
    max_model_terms: int = 400_000
    large_model_columns: int = 10_000
    relaxation_share: float = 0.3
    shape_share: float = 0.5
    restricted_share: float = 0.25
    progress_every_s: float = 0.25

    def __post_init__(self) -> None:
        for name in ("time_limit", "mip_gap"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"Expected {name} to be a number.")
            object.__setattr__(self, name, float(value) if value >= 0 else 0.0)
        for name in ("relaxation_share", "shape_share", "restricted_share"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"Expected {name} in [0, 1].")
        if self.max_model_terms < 0 or self.large_model_columns < 0:
            raise ValueError("Expected max_model_terms and large_model_columns >= 0.")
        if self.progress is not None and not callable(self.progress):
            raise ValueError("Expected progress to be callable.")


def plan_full(scenario: Scenario, params: FullParams | None = None, **options: Any) -> Plan:
    """The better of the warm start (by default the allocator's plan) and HiGHS's MIP solution.

    Options are `FullParams` fields (`plan_full(s, time_limit=2)` for one call). The time limit
    is the whole call's: the warm start, importing Pyomo, building the model, the relaxation and
    both solver phases share it; a phase that cannot start in the time left is skipped (the
    stats say which). With `policy.rt_coverage_target` the coverage row makes the target a
    constraint; a plan that meets it beats one that does not, and where none can, the best
    plan with the most coverage there is comes back. The plan's stats carry status (a
    `SolveStatus`), bound, gap, build_ms, solve_ms, allocator_objective, objective_source
    ("mip" or "allocator") and, once proved, proof_s (seconds from the call's start).
    """
    params = FullParams(**options) if params is None else params
    clock = _Clock(params.time_limit)
    plan = _solve(scenario, params, clock)
    if plan.stats["status"] is SolveStatus.SLO_INFEASIBLE:
        plan = _most_coverage(scenario, plan, params, clock)
    return plan


def _solve(scenario: Scenario, params: FullParams, clock: _Clock) -> Plan:
    """`plan_full` but for the most coverage where the target is out of reach."""
    warm, warm_note = _warm_start(scenario, params.warm_start)
    warm_legal = not check(scenario, warm)
    warm_objective = objective(scenario, warm) if warm_legal else -math.inf
    base = {"allocator_objective": warm_objective, "build_ms": 0.0, "solve_ms": 0.0}
    if warm_note:
        base["warm_start_note"] = warm_note

    if "pyomo.environ" not in sys.modules and clock.limit > 0 and clock.left() < clock.IMPORT_S:
        return _fallback(
            warm,
            base,
            SolveStatus.TIME_LIMIT_WARM_START,
            f"not solved: loading Pyomo takes about {clock.IMPORT_S:g} s, more than the "
            f"{clock.left():.2f} s left of the {clock.limit:g} s time limit; the allocator's "
            f"plan is returned",
        )
    try:
        import pyomo.environ  # noqa: F401
        from pyomo.contrib.appsi.solvers import Highs

        if Highs().available() != Highs.Availability.FullLicense:
            raise ImportError("highspy is not available")
    except Exception as exc:  # ImportError, or a broken installation
        return _fallback(warm, base, SolveStatus.UNAVAILABLE, f"Pyomo/HiGHS unavailable: {exc}")

    try:
        outcome = _build_and_solve(scenario, params, clock, warm, warm_legal, warm_objective, base)
    except Exception as exc:  # a solver or modelling failure never reaches the UI
        return _fallback(warm, base, SolveStatus.SOLVER_FAILED, f"{type(exc).__name__}: {exc}")
    if isinstance(outcome, Plan):
        return outcome
    plan = _choose(scenario, warm, warm_objective, base, outcome)
    if plan.stats["status"] is SolveStatus.OPTIMAL:
        plan.stats["proof_s"] = outcome.get("proof_s", clock.elapsed())
    return plan


def _most_coverage(scenario: Scenario, plan: Plan, params: FullParams, clock: _Clock) -> Plan:
    """No plan reaches the coverage target (proved): the most coverage any plan reaches, then
    the best plan with that much, in two solves within the time left.

    The first solves the serving alone: the queued batch jobs never arrive (they cannot raise
    coverage; the running ones keep their GPUs), every service weighs 1 and the shortfall is
    priced 1, so its J is minus the total shortfall and its optimum is the most coverage there
    is. The second is the scenario with that coverage as its target: the best J among the plans
    the coverage rule ranks first. Each starts from the best plan so far, so neither loses
    coverage or J; where time runs short, the plan with the most coverage found is kept and its
    stats say what was proved.
    """
    policy = scenario.policy
    if clock.limit > 0 and clock.left() < 4 * clock.MIN_PHASE_S:
        return plan
    T = scenario.cluster.horizon_steps
    queued = [
        i
        for i, job in enumerate(scenario.jobs)
        if isinstance(job, BatchJob) and job.running is None
    ]
    serving = dataclasses.replace(
        scenario,
        jobs=tuple(
            dataclasses.replace(job, arrival_step=T)
            if i in queued
            else dataclasses.replace(job, priority=1)
            if isinstance(job, RealtimeJob)
            else job
            for i, job in enumerate(scenario.jobs)
        ),
        policy=dataclasses.replace(policy, rt_coverage_target=None, penalty_weight=1.0),
    )
    grid = plan.grid.copy()
    grid[np.isin(grid, queued)] = IDLE
    limit = clock.left() / 2 if clock.limit > 0 else 0.0
    most = _solve(
        serving,
        dataclasses.replace(
            params, time_limit=limit, mip_gap=0.0, warm_start=Plan(grid, "full"), progress=None
        ),
        _Clock(limit),
    )
    coverage = metrics(scenario, most)["rt_coverage"]
    proved = most.stats["status"] is SolveStatus.OPTIMAL
    if clock.limit > 0 and clock.left() < 2 * clock.MIN_PHASE_S:
        return plan
    # the most coverage as the target (none where nothing can be served: every plan has 0)
    reachable = dataclasses.replace(
        scenario,
        policy=dataclasses.replace(policy, rt_coverage_target=coverage if coverage > 0 else None),
    )
    start = plan if metrics(scenario, plan)["rt_coverage"] >= coverage - 1e-9 else most
    best = _solve(
        reachable,
        dataclasses.replace(params, time_limit=clock.left(), warm_start=start),
        _Clock(clock.left()),
    )
    if check(scenario, best) or ranks_above(plan_rank(scenario, plan), plan_rank(scenario, best)):
        return plan  # (never: each solve keeps its start)
    stats = dict(plan.stats)
    for key in ("build_ms", "solve_ms"):
        stats[key] = plan.stats[key] + most.stats[key] + best.stats[key]
    done = proved and best.stats["status"] is SolveStatus.OPTIMAL
    bound = best.stats["bound"] if proved else math.inf
    stats.update(
        status=SolveStatus.SLO_INFEASIBLE,
        most_coverage=coverage,
        most_coverage_proved=proved,
        bound=bound,
        gap=best.stats["gap"] if proved else math.inf,
        objective_source="allocator"
        if plan.stats["objective_source"] == "allocator" and np.array_equal(best.grid, plan.grid)
        else "mip",
        message=(
            f"no plan reaches the coverage target {policy.rt_coverage_target:g} (proved); "
            + (
                f"{coverage:.2%} is the most coverage any plan reaches (proved), and "
                + (
                    "this is the best plan with that much (proved)"
                    if done
                    else f"this is the best plan with that much found in the time limit "
                    f"(bound {bound:.6g})"
                )
                if proved
                else f"the plan with the most coverage found ({coverage:.2%}) is returned, "
                f"not proved the most there is within the time limit"
            )
        ),
    )
    stats.pop("proof_s", None)
    if done:
        stats["proof_s"] = clock.elapsed()
    return Plan(best.grid, "full", stats)


class _Clock:
    """The call's deadline: `time_limit` seconds from the start of `plan_full`."""

    # Seconds Pyomo needs per model term to build (measured: about 25 us; kept on the safe side)
    # and the least time worth giving a solver phase.
    BUILD_S_PER_TERM = 40e-6
    MIN_PHASE_S = 0.05
    IMPORT_S = 1.0  # importing Pyomo the first time in a process (0.4-3 s on a busy machine)

    def __init__(self, time_limit: float):
        self.started = time.perf_counter()
        self.limit = time_limit

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def left(self) -> float:
        return max(0.0, self.limit - self.elapsed())


def _build_and_solve(scenario, params, clock, warm, warm_legal, warm_objective, base):
    """The models built and solved within the clock; a Plan when they were not built."""
    terms = _estimate_terms(scenario)
    limit = params.max_model_terms
    if terms <= limit:
        model = _FullModel(scenario)
        terms = model.terms
    if terms > limit:
        return _fallback(
            warm,
            base,
            SolveStatus.TOO_LARGE,
            f"the model would have {terms:,} terms (limit {limit:,}); "
            f"the allocator's plan is returned",
        )
    reporter = (
        _ProgressReporter(params.progress, params.progress_every_s)
        if params.progress is not None
        else None
    )
    if reporter is not None and warm_legal:
        reporter.final(warm_objective, math.inf)
    start = warm if warm_legal else None
    shaped: dict[str, Any] | None = None
    # The shape bound first, though the full model may not fit in the time left: it is small,
    # and where the warm start reaches it, it proves the optimum without the full model.
    if (model.placements or model.realtime) and clock.left() > clock.MIN_PHASE_S:
        shaped = _shape_bound(model, params, clock, reporter, start, base)
        if shaped["infeasible"]:
            # The shape model relaxes the full one: no solution there, no plan here (or none
            # that reaches the coverage target).
            shaped.update(grids=[], time_limit=False, optimal=False, bound=math.inf)
            return shaped
        if start is not None and _reaches(scenario, start, shaped["bound"], params.mip_gap):
            # The warm start already reaches the bound: optimal, nothing left to build.
            shaped.update(grids=[], time_limit=False, optimal=True, proof_s=clock.elapsed())
            return shaped
        if clock.limit > 0 and terms * clock.BUILD_S_PER_TERM > clock.left():
            shaped.update(grids=[], time_limit=True, optimal=False)
            shaped["solver_status"] = "time limit reached before the full model was built"
            return shaped
    elif clock.limit > 0 and terms * clock.BUILD_S_PER_TERM > clock.left():
        left = clock.left()
        when = (
            f"only {left:.2f} s of the {clock.limit:g} s time limit were left"
            if left > 0
            else f"the {clock.limit:g} s time limit was used up (warm start, loading Pyomo)"
        )
        return _fallback(
            warm,
            base,
            SolveStatus.TIME_LIMIT_WARM_START,
            f"not solved: {when}, too little to build the model ({terms:,} terms); "
            f"the allocator's plan is returned",
        )
    build_started = time.perf_counter()
    model.build()
    if start is not None:
        model.set_start(start.grid)
    base["build_ms"] += (time.perf_counter() - build_started) * 1000.0
    base["variables"] = model.n_variables
    base["constraints"] = model.n_constraints
    with _SOLVE_LOCK:
        outcome = model.solve(
            clock,
            params.mip_gap,
            reporter,
            None if start is None else start.grid,
            base,
            params,
            shapes=None if shaped is None else shaped["shapes"],
            bound=math.inf if shaped is None else shaped["bound"],
        )
    if shaped is not None:
        outcome["bound"] = min(outcome["bound"], shaped["bound"])
        if not outcome["optimal"] and _closed(scenario, outcome, warm, params.mip_gap):
            outcome["optimal"] = True  # the shape model's bound proves a plan found here
    if outcome["optimal"]:
        outcome["proof_s"] = clock.elapsed()
    return outcome


def _shape_bound(model, params, clock, reporter, start, base) -> dict[str, Any]:
    """Solve the shape model (`_FullModel.solve_shapes`) in its share of the time left: a
    bound on J before the full model is built, and the shapes its shape phase realizes."""
    share = params.relaxation_share * clock.left()
    started = time.perf_counter()
    with _SOLVE_LOCK:
        shaped = model.solve_shapes(
            min(share, clock.left()),
            None if start is None else start.grid,
            params.mip_gap,
            reporter,
        )
    shape_ms = (time.perf_counter() - started) * 1000.0
    base["build_ms"] += shaped["build_ms"]
    base["solve_ms"] += shape_ms - shaped["build_ms"]
    base["relaxation_bound"] = shaped["bound"]
    base["relaxation_ms"] = shape_ms
    base["relaxation_status"] = shaped["solver_status"]
    if reporter is not None:
        reporter.bound_cap = min(reporter.bound_cap, shaped["bound"])
        reporter.final(math.nan, shaped["bound"])
    return shaped


def _reaches(scenario: Scenario, plan: Plan, bound: float, mip_gap: float) -> bool:
    """True when the plan is within the MIP gap of the bound (and meets a coverage target)."""
    if metrics(scenario, plan)["slo_met"] is False or not math.isfinite(bound):
        return False
    value = objective(scenario, plan)
    return bound - value <= max(mip_gap * abs(value), 1e-6 * max(1.0, abs(value)))


def _closed(scenario: Scenario, outcome: dict[str, Any], warm: Plan, mip_gap: float) -> bool:
    """True when a legal candidate (or the warm start) reaches the outcome's bound."""
    plans = [Plan(grid, "full", {}) for grid in outcome["grids"]] + [warm]
    return any(
        not check(scenario, plan) and _reaches(scenario, plan, outcome["bound"], mip_gap)
        for plan in plans
    )


def _warm_start(scenario: Scenario, given: Plan | None) -> tuple[Plan, str]:
    """The plan to start from: the one given, else the allocator's; backfill if that fails.

    A warm start that `check` rejects is never returned, so it is replaced by backfill's plan
    (legal by construction) with a note in the stats.
    """
    from .fifo import plan_backfill

    if given is not None:
        warm, source = Plan(given.grid.copy(), "full", {}), "the given warm start"
    else:
        try:
            from .allocator import plan_allocator

            warm, source = Plan(plan_allocator(scenario).grid.copy(), "full", {}), "allocator"
        except Exception as exc:  # the allocator missing or failing must not stop full mode
            note = f"allocator failed ({type(exc).__name__}: {exc}); warm start is backfill"
            return Plan(plan_backfill(scenario).grid.copy(), "full", {}), note
    violations = check(scenario, warm)
    if violations:
        note = f"{source} is illegal ({violations[0]}); warm start is backfill"
        return Plan(plan_backfill(scenario).grid.copy(), "full", {}), note
    return warm, ""


def _estimate_terms(scenario: Scenario) -> int:
    """An upper bound on the model's terms, computed before any placement is enumerated."""
    G, T = scenario.cluster.gpus, scenario.cluster.horizon_steps
    terms = 3 * G * T * len(scenario.realtime_jobs)
    for job in scenario.batch_jobs:
        if job.running is None:
            starts = max(0, T - job.arrival_step)
            terms += sum(
                (G // g) * starts * min(T, scenario.duration(job, g)) for g in job.sizes() if g <= G
            )
    return terms


def _fallback(warm: Plan, base: dict[str, Any], status: SolveStatus, message: str) -> Plan:
    stats = dict(base)
    stats.update(
        status=status, message=message, bound=math.inf, gap=math.inf, objective_source="allocator"
    )
    return Plan(warm.grid, "full", stats)


def _relative_gap(value: float, bound: float) -> float:
    """(bound - value) / |value|, 0 when they agree, inf when the bound is unknown."""
    if not math.isfinite(bound) or not math.isfinite(value):
        return math.inf
    diff = bound - value
    if diff <= 1e-9 * max(1.0, abs(value)):
        return 0.0
    return diff / abs(value) if abs(value) > 1e-12 else math.inf


def _choose(
    scenario: Scenario,
    warm: Plan,
    warm_objective: float,
    base: dict[str, Any],
    outcome: dict[str, Any],
) -> Plan:
    """Keep a MIP grid only if it is legal and strictly better than the warm start (a grid
    that meets the coverage target beats one that misses it; then J)."""
    stats = dict(base)
    stats["solver_status"] = outcome["solver_status"]
    stats["mip_nodes"] = outcome["mip_nodes"]
    bound = outcome["bound"]
    chosen, source, status = warm, "allocator", None
    best = plan_rank(scenario, warm) if math.isfinite(warm_objective) else (False, -1.0, -math.inf)
    for grid in outcome["grids"]:
        candidate = Plan(grid, "full", {})
        violations = check(scenario, candidate)
        if violations:
            status = SolveStatus.CHECK_FAILED
            stats["message"] = f"MIP solution rejected by check: {violations[0]}"
            continue
        key = plan_rank(scenario, candidate)
        if ranks_above(key, best):
            chosen, source, best = candidate, "mip", key
    if source == "mip":
        status = None  # a legal improvement was found: report how the solver ended
    if not math.isfinite(warm_objective) and source != "mip":
        status = status or SolveStatus.NO_LEGAL_PLAN
        stats.setdefault("message", "neither the warm start nor the MIP gave a legal plan")
    value = objective(scenario, chosen)
    met = best[0]
    if math.isfinite(bound) and met:
        bound = max(bound, value)  # the solver's tolerance may leave it a hair below
    if status is None:
        status = _status(outcome, source)
        if status is SolveStatus.SOLVER_FAILED:
            stats["message"] = f"HiGHS stopped with status {outcome['solver_status']}"
        elif status is SolveStatus.INFEASIBLE:
            stats["message"] = "the scenario admits no legal plan"
            if scenario.policy.rt_coverage_target is not None and math.isfinite(warm_objective):
                status = SolveStatus.SLO_INFEASIBLE
                stats["message"] = (
                    f"no plan reaches the coverage target "
                    f"{scenario.policy.rt_coverage_target:g} (proved); the plan with the most "
                    f"coverage found is returned"
                )
    if status is SolveStatus.OPTIMAL and not met:  # proved: nothing reaches the target
        status = SolveStatus.SLO_INFEASIBLE
    if not met:
        stats.setdefault(
            "message",
            f"coverage target {scenario.policy.rt_coverage_target:g} not reached; the plan "
            f"with the most coverage found is returned",
        )
    gap = _relative_gap(value, bound) if met else math.inf
    stats.update(status=status, bound=float(bound), gap=gap, objective_source=source)
    return Plan(chosen.grid, "full", stats)


def _status(outcome: dict[str, Any], source: str) -> SolveStatus:
    if outcome["optimal"]:
        return SolveStatus.OPTIMAL
    if outcome["time_limit"]:
        improved = source == "mip"
        return SolveStatus.TIME_LIMIT_IMPROVED if improved else SolveStatus.TIME_LIMIT_WARM_START
    if outcome["infeasible"]:
        return SolveStatus.INFEASIBLE
    return SolveStatus.SOLVER_FAILED


class _FullModel:
    """The placement model of the module docstring: index data first, Pyomo objects on build."""

    def __init__(self, scenario: Scenario):
        self.scenario = scenario
        c = scenario.cluster
        self.G, self.T = c.gpus, c.horizon_steps
        policy = scenario.policy
        self.discount = policy.decay ** np.arange(self.T, dtype=float)
        self.reward_weight = policy.reward_weight
        self.penalty = policy.reward_weight * policy.penalty_weight

        pinned = np.full((self.G, self.T), IDLE, dtype=np.int32)
        pin_running(scenario, pinned)
        self.pinned = pinned
        self.free = pinned == IDLE
        self.constant = 0.0
        for i, job in enumerate(scenario.jobs):
            if isinstance(job, BatchJob) and job.running is not None:
                cells_per_step = (pinned == i).sum(axis=0)
                self.constant += (
                    self.reward_weight * job.priority * float(cells_per_step @ self.discount)
                )

        # Placements: (job index, size, block, start, end); end exclusive, cut at T.
        self.placements: list[tuple[int, int, int, int, int]] = []
        self.rewards: list[float] = []
        self.terms = 0
        cumulative = np.concatenate([[0.0], np.cumsum(self.discount)])
        for i, job in enumerate(scenario.jobs):
            if not isinstance(job, BatchJob) or job.running is not None:
                continue
            for size in job.sizes():
                if size > self.G:
                    continue
                end_offset = scenario.duration(job, size)
                blocks = free_blocks(self.free, size)
                busy_before = np.concatenate(
                    [np.zeros((blocks.shape[0], 1), dtype=np.int64), np.cumsum(~blocks, axis=1)],
                    axis=1,
                )
                for start in range(job.arrival_step, self.T):
                    end = min(start + end_offset, self.T)
                    ok = busy_before[:, end] - busy_before[:, start] == 0
                    reward = (
                        self.reward_weight
                        * job.priority
                        * size
                        * float(cumulative[end] - cumulative[start])
                    )
                    for block in np.nonzero(ok)[0]:
                        self.placements.append((i, size, int(block), start, end))
                        self.rewards.append(reward)
                        self.terms += end - start
        self.realtime = [
            (i, job) for i, job in enumerate(scenario.jobs) if isinstance(job, RealtimeJob)
        ]
        self.terms += len(self.realtime) * int(self.free.sum()) * 3
        self.model: Any = None
        self.infeasible = False  # a constraint without variables that cannot hold
        self.n_variables = 0
        self.n_constraints = 0

    # -- building --------------------------------------------------------------------------

    def build(self) -> None:
        import pyomo.environ as pyo

        self.pyo = pyo
        m = self.model = pyo.ConcreteModel(name=self.scenario.name)
        m.place = pyo.Var(range(len(self.placements)), domain=pyo.Binary)
        self.hold_cells = [
            (k, g, t)
            for k in range(len(self.realtime))
            for g in range(self.G)
            for t in range(self.T)
            if self.free[g, t]
        ]
        m.hold = pyo.Var(self.hold_cells, domain=pyo.Binary)
        m.count = pyo.Var(
            [(k, t) for k, (_i, job) in enumerate(self.realtime) for t in range(self.T)],
            domain=pyo.Integers,
            bounds=lambda _m, k, _t: (self.realtime[k][1].gpus_min, self.realtime[k][1].gpus_max),
        )
        m.short = pyo.Var(
            [(k, t) for k in range(len(self.realtime)) for t in range(self.T)],
            domain=pyo.NonNegativeReals,
        )
        m.rows = pyo.ConstraintList()
        self._run_at_most_once()
        self._one_job_per_gpu_step()
        self._realtime_range_and_shortfall()
        self._swap_cap()
        self._coverage_target()
        self._objective()
        self.n_variables = sum(len(v) for v in m.component_objects(pyo.Var))
        self.n_constraints = len(m.rows)

    def _run_at_most_once(self) -> None:
        """Constraint 5: a batch job has at most one placement (it runs once or waits)."""
        by_job: dict[int, list[int]] = {}
        for p, (i, *_rest) in enumerate(self.placements):
            by_job.setdefault(i, []).append(p)
        m = self.model
        for indices in by_job.values():
            if len(indices) > 1:
                m.rows.add(self.pyo.quicksum(m.place[p] for p in indices) <= 1)

    def _one_job_per_gpu_step(self) -> None:
        """Constraint 1: per cell, block occupancy of every size plus real-time holds <= 1."""
        pyo, m = self.pyo, self.model
        active: dict[tuple[int, int, int], list[int]] = {}
        for p, (_i, size, block, start, end) in enumerate(self.placements):
            for t in range(start, end):
                active.setdefault((size, block, t), []).append(p)
        m.busy = pyo.Var(list(active), domain=pyo.NonNegativeReals, bounds=(0, 1))
        for key, indices in active.items():
            m.rows.add(m.busy[key] == pyo.quicksum(m.place[p] for p in indices))
        sizes = sorted({key[0] for key in active})
        n_rt = len(self.realtime)
        for g in range(self.G):
            for t in range(self.T):
                if not self.free[g, t]:
                    continue
                terms = [m.busy[s, g // s, t] for s in sizes if (s, g // s, t) in active]
                terms += [m.hold[k, g, t] for k in range(n_rt)]
                if len(terms) > 1:
                    m.rows.add(pyo.quicksum(terms) <= 1)

    def _realtime_range_and_shortfall(self) -> None:
        """Constraint 2 for real-time jobs, and short[t] >= demand[t] - count[t]."""
        pyo, m = self.pyo, self.model
        for k, (_i, job) in enumerate(self.realtime):
            for t in range(self.T):
                held = [m.hold[k, g, t] for g in range(self.G) if self.free[g, t]]
                if not held:  # every GPU is pinned: the job holds none
                    self.infeasible |= job.gpus_min > 0
                    m.count[k, t].fix(0, skip_validation=True)
                    m.short[k, t].fix(job.demand[t])
                    continue
                count = m.count[k, t]
                m.rows.add(count == pyo.quicksum(held))
                if job.demand[t] > 0:
                    demand = job.demand[t]
                    m.rows.add(m.short[k, t] + count >= demand)
                    fraction = demand - math.floor(demand)
                    if fraction > 1e-9:  # rounding cut: the hull of integer count, short >= 0
                        m.rows.add(m.short[k, t] + fraction * count >= fraction * math.ceil(demand))
                else:
                    m.short[k, t].fix(0.0)

    def _swap_cap(self) -> None:
        """Constraint 4: GPUs gained plus released per step (from previous_gpus at 0) <= cap."""
        pyo, m = self.pyo, self.model
        swap_cells = []
        for k, (_i, job) in enumerate(self.realtime):
            if job.swap_cap >= min(self.G, 2 * job.gpus_max):
                continue  # the cap can never bind
            first = 0 if job.previous_gpus is not None else 1
            swap_cells += [(k, g, t) for g in range(self.G) for t in range(first, self.T)]
        m.swap = pyo.Var(swap_cells, bounds=(0, 1))
        by_step: dict[tuple[int, int], list] = {}
        for k, g, t in swap_cells:
            now = self._held(k, g, t)
            before = self._held(k, g, t - 1)
            if isinstance(now, float) and isinstance(before, float):
                m.swap[k, g, t].fix(abs(now - before))
            else:
                m.rows.add(m.swap[k, g, t] >= now - before)
                m.rows.add(m.swap[k, g, t] >= before - now)
            by_step.setdefault((k, t), []).append(m.swap[k, g, t])
        for (k, _t), swaps in by_step.items():
            m.rows.add(pyo.quicksum(swaps) <= self.realtime[k][1].swap_cap)

    @property
    def allowed_shortfall(self) -> float:
        """Units of shortfall `policy.rt_coverage_target` allows (inf without a target)."""
        target = self.scenario.policy.rt_coverage_target
        demanded = sum(sum(job.demand) for _i, job in self.realtime)
        if target is None or demanded <= 0:
            return math.inf
        return (1.0 - target) * demanded + 1e-9 * demanded

    def _coverage_target(self) -> None:
        """The SLO row: served >= target x demanded, i.e. total shortfall <= (1 - target) x
        demanded (short is at least the shortfall, and never more at an optimum)."""
        allowed = self.allowed_shortfall
        if math.isfinite(allowed):
            m = self.model
            self.model.rows.add(self.pyo.quicksum(m.short.values()) <= allowed)

    def _held(self, k: int, g: int, t: int) -> Any:
        """hold[k, g, t] as a variable, or a constant where the cell is pinned or before 0."""
        if t < 0:
            return 1.0 if g in (self.realtime[k][1].previous_gpus or ()) else 0.0
        return self.model.hold[k, g, t] if self.free[g, t] else 0.0

    def _objective(self) -> None:
        """J: discounted batch reward minus weighted real-time shortfall, pinned work constant."""
        pyo, m = self.pyo, self.model
        reward = pyo.quicksum(r * m.place[p] for p, r in enumerate(self.rewards))
        penalty = pyo.quicksum(
            self.penalty * job.priority * m.short[k, t]
            for k, (_i, job) in enumerate(self.realtime)
            for t in range(self.T)
            if job.demand[t] > 0
        )
        m.J = pyo.Objective(expr=self.constant + reward - penalty, sense=pyo.maximize)

    # -- warm start and decoding -----------------------------------------------------------

    def set_start(self, grid: np.ndarray) -> None:
        """Give every variable its value in a legal grid: HiGHS's MIP start."""
        m = self.model
        for p in range(len(self.placements)):
            m.place[p].set_value(0)
        for p in self._placements_of(grid):
            m.place[p].set_value(1)
        self._start_occupancy_and_realtime(grid)

    def _start_occupancy_and_realtime(self, grid: np.ndarray) -> None:
        """The start's block occupancy, real-time holds, counts, shortfalls and swaps."""
        m = self.model
        occupancy = {key: 0 for key in m.busy}
        for p, (_i, size, block, start, end) in enumerate(self.placements):
            if m.place[p].value:
                for t in range(start, end):
                    occupancy[size, block, t] += 1
        for key, value in occupancy.items():
            m.busy[key].set_value(value)
        for k, g, t in self.hold_cells:
            m.hold[k, g, t].set_value(int(grid[g, t] == self.realtime[k][0]))
        for k, (i, job) in enumerate(self.realtime):
            counts = (grid == i).sum(axis=0)
            for t in range(self.T):
                m.count[k, t].set_value(int(counts[t]))
                if not m.short[k, t].fixed:
                    m.short[k, t].set_value(max(0.0, job.demand[t] - float(counts[t])))
        for key in m.swap:
            if not m.swap[key].fixed:
                k, g, t = key
                now = float(self.pyo.value(self._held(k, g, t)))
                before = float(self.pyo.value(self._held(k, g, t - 1)))
                m.swap[key].set_value(abs(now - before))

    def decode(self) -> np.ndarray:
        """The grid of the solution loaded into the Pyomo variables."""
        m = self.model
        grid = self.pinned.copy()
        for p, (i, size, block, start, end) in enumerate(self.placements):
            value = m.place[p].value
            if value is not None and value > 0.5:
                grid[block * size : (block + 1) * size, start:end] = i
        for k, g, t in self.hold_cells:
            value = m.hold[k, g, t].value
            if value is not None and value > 0.5:
                grid[g, t] = self.realtime[k][0]
        return grid

    # -- the shape model: a relaxation solved first ----------------------------------------

    @property
    def columns(self) -> int:
        """Binary columns of the full model: placements plus real-time holds."""
        return len(self.placements) + len(self.realtime) * int(self.free.sum())

    @property
    def shapes(self) -> list[tuple[int, int, int, int, float]]:
        """Every (job, size, start, end, reward) some aligned block admits: a placement without
        its block."""
        if not hasattr(self, "_shapes"):
            seen: dict[tuple[int, int, int], tuple[int, int, int, int, float]] = {}
            for (i, size, _block, start, end), reward in zip(
                self.placements, self.rewards, strict=True
            ):
                seen.setdefault((i, size, start), (i, size, start, end, reward))
            self._shapes = list(seen.values())
        return self._shapes

    def _shape_program(self, integer: bool) -> tuple[Any, dict[str, int]]:
        """The shape model as a highspy.Highs (maximising J) and where its columns start.

        It keeps what every legal plan must satisfy and forgets where things are. A batch job
        chooses a shape (size and start) or none; a real-time job only its count per step.
        Per step and per size g >= 2: the jobs of size >= g hold size/g distinct wholly free
        aligned g-blocks, so at most as many as are free at that step; and the batch cells plus
        the counts fit in the free GPUs. A count moves by at most swap_cap a step (gains plus
        releases are at least the change in count; from previous_gpus at step 0); shortfall
        rows, their rounding cuts and the coverage row are the full model's. Where a job
        starts is known (previous_gpus): a block it starts in stays out of the whole-block
        count until it pays the swaps to leave (`_previous_rows`). So every legal plan is a
        solution of this model with the same J, and its optimum (or any dual bound HiGHS
        proves on it) bounds J. It has a column per shape rather than per block and no
        per-GPU columns: HiGHS solves it in about a second where the full model takes minutes.
        """
        import highspy
        from pyomo.common.tee import capture_output

        shapes, R, T = self.shapes, len(self.realtime), self.T
        Y = len(shapes)
        count0, short0 = Y, Y + R * T
        n_cols = short0 + R * T
        cost = np.zeros(n_cols)
        lower = np.zeros(n_cols)
        upper = np.ones(n_cols)
        cost[:Y] = [reward for *_rest, reward in shapes]
        rows: list[tuple[float, float, list[int], list[float]]] = []
        by_job: dict[int, list[int]] = {}
        for n, (i, *_rest) in enumerate(shapes):
            by_job.setdefault(i, []).append(n)
        rows += [(-math.inf, 1.0, ns, [1.0] * len(ns)) for ns in by_job.values() if len(ns) > 1]
        active: list[list[int]] = [[] for _ in range(T)]
        for n, (_i, _size, start, end, _reward) in enumerate(shapes):
            for t in range(start, end):
                active[t].append(n)
        largest = max((size for _i, size, *_rest in shapes), default=1)
        levels = [1 << k for k in range(1, largest.bit_length())]
        whole_blocks = {g: free_blocks(self.free, g) for g in levels}
        whole = {g: blocks.sum(axis=0) for g, blocks in whole_blocks.items()}
        tracks, stays, occupied, shared, n_extra = self._previous_columns(levels, n_cols)
        cost = np.concatenate([cost, np.zeros(n_extra)])
        lower = np.concatenate([lower, np.zeros(n_extra)])
        upper = np.concatenate([upper, np.ones(n_extra)])
        self._previous_rows(rows, tracks, stays, occupied, shared, count0)
        n_cols += n_extra
        for t in range(T):
            cols = active[t] + [count0 + k * T + t for k in range(R)]
            values = [float(shapes[n][1]) for n in active[t]] + [1.0] * R
            rows.append((-math.inf, float(self.free[:, t].sum()), cols, values))
            for g in levels:
                big = [n for n in active[t] if shapes[n][1] >= g]
                if big:
                    values = [shapes[n][1] / g for n in big]
                    held = [
                        shared.get((g, block), firsts[0]) + t
                        for (level, block), firsts in occupied.items()
                        if level == g and whole_blocks[g][block, t]
                    ]
                    rows.append(
                        (-math.inf, float(whole[g][t]), big + held, values + [1.0] * len(held))
                    )
        for k, (_i, job) in enumerate(self.realtime):
            for t in range(T):
                c, sh = count0 + k * T + t, short0 + k * T + t
                lower[c], upper[c] = job.gpus_min, job.gpus_max
                upper[sh] = math.inf
                cost[sh] = -self.penalty * job.priority
                demand = job.demand[t]
                rows.append((demand, math.inf, [sh, c], [1.0, 1.0]))
                fraction = demand - math.floor(demand)
                if fraction > 1e-9:  # the full model's rounding cut (count is integer)
                    rows.append((fraction * math.ceil(demand), math.inf, [sh, c], [1.0, fraction]))
                if t > 0:
                    rows.append((-job.swap_cap, job.swap_cap, [c, c - 1], [1.0, -1.0]))
            if job.previous_gpus is not None:
                held = len(job.previous_gpus)
                c = count0 + k * T
                lower[c] = max(lower[c], held - job.swap_cap)
                upper[c] = min(upper[c], held + job.swap_cap)
        if math.isfinite(self.allowed_shortfall):
            shorts = list(range(short0, short0 + R * T))
            rows.append((-math.inf, self.allowed_shortfall, shorts, [1.0] * len(shorts)))
        starts = np.cumsum([0] + [len(r[2]) for r in rows])
        indices = np.array([c for r in rows for c in r[2]], dtype=np.int32)
        values = np.array([v for r in rows for v in r[3]], dtype=float)
        inf = highspy.kHighsInf
        with capture_output(capture_fd=True):  # the banner HiGHS prints when it is created
            h = highspy.Highs()
            h.setOptionValue("output_flag", False)
        h.addVars(n_cols, np.maximum(lower, -inf), np.minimum(upper, inf))
        h.changeColsCost(n_cols, np.arange(n_cols, dtype=np.int32), cost)
        if rows:
            h.addRows(
                len(rows),
                np.array([max(r[0], -inf) for r in rows]),
                np.array([min(r[1], inf) for r in rows]),
                len(indices),
                starts[:-1].astype(np.int32),
                indices,
                values,
            )
        if integer:
            integral = np.arange(short0, dtype=np.int32)  # shapes and counts
            integral = np.concatenate(
                [integral, *(np.arange(first, first + 2 * T) for first in stays.values())]
            ).astype(np.int32)
            h.changeColsIntegrality(
                len(integral), integral, np.full(len(integral), highspy.HighsVarType.kInteger)
            )
        h.changeObjectiveSense(highspy.ObjSense.kMaximize)
        h.changeObjectiveOffset(self.constant)
        return h, {
            "count": count0,
            "short": short0,
            "columns": n_cols,
            "tracks": tracks,
            "stays": stays,
            "shared": shared,
        }

    def _previous_columns(self, levels: list[int], first: int) -> tuple[Any, ...]:
        """The columns of `_previous_rows`, numbered from `first`: (tracks, stays (first
        column per track: stays[t], then leaves[t]), occupied (per block, its tracks' stays),
        shared (per block more than one job starts in, a column per step), how many)."""
        tracks = self._previous_tracks(levels)
        stays: dict[tuple[int, int, int], int] = {}
        n_extra = 0
        for k, g, block, _held in tracks:
            stays[k, g, block] = first + n_extra
            n_extra += 2 * self.T
        occupied: dict[tuple[int, int], list[int]] = {}
        for k, g, block, _held in tracks:
            occupied.setdefault((g, block), []).append(stays[k, g, block])
        shared: dict[tuple[int, int], int] = {}
        for key, firsts in occupied.items():
            if len(firsts) > 1:
                shared[key] = first + n_extra
                n_extra += self.T
        return tracks, stays, occupied, shared, n_extra

    def _previous_tracks(self, levels: list[int]) -> list[tuple[int, int, int, int]]:
        """(job k, size g, block, GPUs of previous_gpus in it) for every aligned g-block a
        swap-capped real-time job starts in."""
        tracks = []
        for k, (_i, job) in enumerate(self.realtime):
            if not job.previous_gpus or job.swap_cap >= min(self.G, 2 * job.gpus_max):
                continue
            for g in levels:
                held: dict[int, int] = {}
                for gpu in job.previous_gpus:
                    if gpu // g < self.G // g:
                        held[gpu // g] = held.get(gpu // g, 0) + 1
                tracks += [(k, g, block, n) for block, n in sorted(held.items())]
        return tracks

    def _previous_rows(self, rows, tracks, stays, occupied, shared, count0) -> None:
        """Where a real-time job starts (previous_gpus) costs swaps to leave: a block it has
        held since before step 0 is not wholly free for batch work until it leaves, and
        leaving releases every GPU it holds there (all of previous_gpus in it at step 0, at
        least one later). Gains plus releases are 2 x releases + the change in count, so per
        size, 2 x the blocks left (weighted so at step 0) + count[t] - count[t-1] <= swap_cap.
        `stays[t]` is 1 while the job has held the block at every step so far."""
        T = self.T
        for k, g, _block, _held in tracks:
            stay = stays[k, g, _block]
            leave = stay + T
            rows.append((1.0, math.inf, [stay, leave], [1.0, 1.0]))  # held before step 0
            for t in range(1, T):
                rows.append((0.0, math.inf, [stay + t, leave + t, stay + t - 1], [1.0, 1.0, -1.0]))
        by_level: dict[tuple[int, int], list[tuple[int, int]]] = {}
        for k, g, block, held in tracks:
            by_level.setdefault((k, g), []).append((stays[k, g, block] + T, held))
        for (k, _g), leaves in by_level.items():
            job = self.realtime[k][1]
            c = count0 + k * T
            cols = [leave for leave, _held in leaves] + [c]
            values = [2.0 * held for _leave, held in leaves] + [1.0]
            rows.append((-math.inf, job.swap_cap + len(job.previous_gpus), cols, values))
            for t in range(1, T):
                cols = [leave + t for leave, _held in leaves] + [c + t, c + t - 1]
                values = [2.0] * len(leaves) + [1.0, -1.0]
                rows.append((-math.inf, float(job.swap_cap), cols, values))
        for key, column in shared.items():
            for first in occupied[key]:
                for t in range(T):
                    rows.append((0.0, math.inf, [column + t, first + t], [1.0, -1.0]))

    def relaxation_bound(self, time_limit: float) -> float:
        """The LP bound of the shape model (inf if not solved): an upper bound on J."""
        import highspy

        h, _layout = self._shape_program(integer=False)
        h.setOptionValue("time_limit", max(0.05, float(time_limit)))
        h.run()
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            return math.inf
        value = h.getInfo().objective_function_value
        return value + 1e-6 * max(1.0, abs(value))  # LP tolerances: stay on the safe side

    def _shape_start(self, grid: np.ndarray, layout: dict[str, int]) -> np.ndarray:
        """A legal grid as a solution of the shape model (its MIP start)."""
        values = np.zeros(layout["columns"])
        column = {(i, size, start): n for n, (i, size, start, *_rest) in enumerate(self.shapes)}
        for p in self._placements_of(grid):
            i, size, _block, start, _end = self.placements[p]
            values[column[i, size, start]] = 1.0
        for k, (i, job) in enumerate(self.realtime):
            counts = (grid == i).sum(axis=0)
            for t in range(self.T):
                values[layout["count"] + k * self.T + t] = counts[t]
                values[layout["short"] + k * self.T + t] = max(0.0, job.demand[t] - counts[t])
        stayed: dict[tuple[int, int], np.ndarray] = {}
        for k, g, block, _held in layout["tracks"]:
            touched = (grid[block * g : (block + 1) * g] == self.realtime[k][0]).any(axis=0)
            stays = np.logical_and.accumulate(touched)
            leaves = np.concatenate([[True], stays[:-1]]) & ~touched
            first = layout["stays"][k, g, block]
            values[first : first + self.T] = stays
            values[first + self.T : first + 2 * self.T] = leaves
            stayed[g, block] = stayed.get((g, block), np.zeros(self.T, dtype=bool)) | stays
        for (g, block), column in layout["shared"].items():
            values[column : column + self.T] = stayed[g, block]
        return values

    def _placements_of(self, grid: np.ndarray) -> list[int]:
        """The placement of every queued batch job that holds cells in a legal grid."""
        lookup = {
            (i, size, block, start): p
            for p, (i, size, block, start, _end) in enumerate(self.placements)
        }
        chosen = []
        for i, job in enumerate(self.scenario.jobs):
            if not isinstance(job, BatchJob) or job.running is not None:
                continue
            gpus, steps = np.nonzero(grid == i)
            if len(steps) == 0:
                continue
            low = int(gpus.min())
            size = int(gpus.max()) - low + 1
            p = lookup.get((i, size, low // size, int(steps.min())))
            if p is not None:
                chosen.append(p)
        return chosen

    def solve_shapes(
        self,
        time_limit: float,
        start: np.ndarray | None,
        mip_gap: float,
        reporter: _ProgressReporter | None,
    ) -> dict[str, Any]:
        """Solve the shape model: its bound (valid for J) and the (job, size, start) of its best
        solution (None when it has none), for the full model's shape phase.

        HiGHS 1.16 can take a MIP start of this maximising model with an objective constant at
        more than its value and stop at the root claiming it optimal: the objective it reports
        is then not its solution's (uniform-priority, with the allocator's plan of 362.65 as
        the start: "optimal" at 410.65, the solution 362.65, the optimum 375.29). Where the two
        disagree, the model is solved again without the start in the time left."""
        started = time.perf_counter()
        shaped = self._solve_shapes(time_limit, start, mip_gap, reporter)
        if not shaped.pop("inconsistent") or start is None:
            return shaped
        left = time_limit - (time.perf_counter() - started)
        if left <= 0.05:
            shaped.update(optimal=False, solver_status="MIP start scored inconsistently")
            return shaped
        again = self._solve_shapes(left, None, mip_gap, reporter)
        again.pop("inconsistent")
        again["build_ms"] += shaped["build_ms"]
        again["solver_status"] += " (solved again without the MIP start)"
        return again

    def _solve_shapes(self, time_limit, start, mip_gap, reporter) -> dict[str, Any]:
        import highspy

        build_started = time.perf_counter()
        h, layout = self._shape_program(integer=True)
        build_s = time.perf_counter() - build_started
        h.setOptionValue("time_limit", max(0.05, float(time_limit) - build_s))
        h.setOptionValue("mip_rel_gap", max(0.0, float(mip_gap)))
        h.setOptionValue("mip_abs_gap", 1e-7)
        if start is not None:
            solution = highspy.HighsSolution()
            solution.col_value = list(self._shape_start(start, layout))
            solution.value_valid = True
            h.setSolution(solution)
        best_bound = [math.inf]  # HiGHS's dual bound only falls; a restart may forget it

        def on_event(event: Any) -> None:
            value = event.data_out.mip_dual_bound
            if abs(value) < 1e30:
                best_bound[0] = min(best_bound[0], float(value))
            if reporter is not None:
                reporter.on_event(event)

        if reporter is not None:
            reporter.reports_incumbent = False  # a shape solution is not yet a plan
            h.cbMipImprovingSolution.subscribe(on_event)
        h.cbMipInterrupt.subscribe(on_event)
        try:
            h.run()
        finally:
            if reporter is not None:
                h.cbMipImprovingSolution.unsubscribe(on_event)
                reporter.reports_incumbent = True
            h.cbMipInterrupt.unsubscribe(on_event)
        status = h.getModelStatus()
        info = h.getInfo()
        bound = float(info.mip_dual_bound)
        if not abs(bound) < 1e30:
            bound = math.inf
        bound = min(bound, best_bound[0])
        chosen, inconsistent = None, False
        if info.primal_solution_status == 2:  # kSolutionStatusFeasible
            values = np.asarray(h.getSolution().col_value)
            lp = h.getLp()
            scored = float(np.dot(lp.col_cost_, values)) + lp.offset_
            reported = float(info.objective_function_value)
            inconsistent = abs(scored - reported) > 1e-6 * max(1.0, abs(scored))
            chosen = {
                (i, size, start)
                for (i, size, start, *_rest), value in zip(self.shapes, values, strict=False)
                if value > 0.5
            }
        if status == highspy.HighsModelStatus.kOptimal and not inconsistent:
            bound = max(bound, float(info.objective_function_value))
        return {
            "bound": bound,
            "infeasible": status == highspy.HighsModelStatus.kInfeasible,
            "optimal": status == highspy.HighsModelStatus.kOptimal and not inconsistent,
            "incumbent": float(info.objective_function_value) if chosen is not None else math.nan,
            "shapes": chosen,
            "solver_status": h.modelStatusToString(status),
            "mip_nodes": int(max(0, info.mip_node_count)),
            "build_ms": build_s * 1000.0,
            "inconsistent": inconsistent,
        }

    # -- solving ---------------------------------------------------------------------------

    def solve(
        self,
        clock: _Clock,
        mip_gap: float,
        reporter: _ProgressReporter | None,
        start: np.ndarray | None,
        base: dict[str, Any],
        params: FullParams,
        shapes: set[tuple[int, int, int]] | None = None,
        bound: float = math.inf,
    ) -> dict[str, Any]:
        """Run HiGHS (restricted phase, shape phase, then the full model) from the start grid
        (set with `set_start`); candidate grids, bound, status.

        `shapes` are the (job, size, start step) of the count model's solution and `bound` its
        bound: the shape phase keeps every batch job at its shape there (any aligned block) and
        chooses real-time GPUs; a legal plan that reaches `bound` ends the solve, proved.
        """
        free_variables = sum(
            1 for v in self.model.component_data_objects(self.pyo.Var) if not v.fixed
        )
        if free_variables == 0 or self.infeasible:
            # Nothing to decide (or nothing legal): the pinned grid is the only candidate.
            value = self.constant - sum(
                self.penalty * job.priority * job.demand[t]
                for _i, job in self.realtime
                for t in range(self.T)
                if not self.free[:, t].any()
            )
            return {
                "grids": [self.decode()],
                "bound": value if not self.infeasible else math.inf,
                "optimal": not self.infeasible,
                "time_limit": False,
                "infeasible": self.infeasible,
                "solver_status": "infeasible" if self.infeasible else "nothing to decide",
                "mip_nodes": 0,
            }
        solver = self._instance(params, base)
        grids = []
        if start is not None and self.realtime and clock.left() > 4 * clock.MIN_PHASE_S:
            # Restricted phase: real-time GPUs as in the start, batch placements free. It
            # solves in a fraction of the time and hands the full model a better start; its
            # bound is not a bound of the full model and is not reported. The real-time columns
            # are fixed in HiGHS itself, so one instance serves every phase.
            share = params.restricted_share * clock.left()
            with self._fixed_realtime(solver):
                restricted = self._run_highs(
                    solver, lambda: min(share, clock.left()), reporter, True, base, False
                )
            base["restricted_objective"] = restricted["incumbent"]
            if restricted["grid"] is not None:
                grids.append(restricted["grid"])
                plan = Plan(restricted["grid"], "full", {})
                legal = not check(self.scenario, plan)
                if legal and _reaches(self.scenario, plan, bound, mip_gap):
                    restricted.update(grids=grids, bound=bound, optimal=True, time_limit=False)
                    return restricted
                if legal and ranks_above(
                    plan_rank(self.scenario, plan),
                    plan_rank(self.scenario, Plan(start, "full", {})),
                ):
                    start = restricted["grid"]
        if shapes is not None:
            # The packed phase (each batch job at its shape on one block, packed greedily) and
            # the shape phase (at its shape, any block) are restrictions: their bounds are not
            # reported; their plans are legal plans of the full model. The packed phase's plan
            # is a MIP start of the shape phase.
            packed = self._pack(shapes)
            phases = (
                ("packed", params.restricted_share, lambda p: p in packed, False),
                (
                    "shape",
                    params.shape_share,
                    lambda p: self.placements[p][:2] + (self.placements[p][3],) in shapes,
                    True,
                ),
            )
            for name, share_of_left, allowed, from_packed in phases:
                if clock.left() <= 4 * clock.MIN_PHASE_S:
                    break
                share = share_of_left * clock.left()
                with self._only_placements(solver, allowed):
                    phase = self._run_highs(
                        solver,
                        lambda share=share: min(share, clock.left()),
                        reporter,
                        from_packed,
                        base,
                        False,
                    )
                base[f"{name}_objective"] = phase["incumbent"]
                if phase["grid"] is None:
                    continue
                grids.append(phase["grid"])
                plan = Plan(phase["grid"], "full", {})
                legal = not check(self.scenario, plan)
                if legal and _reaches(self.scenario, plan, bound, mip_gap):
                    phase.update(grids=grids, bound=bound, optimal=True, time_limit=False)
                    return phase
                if legal and (
                    start is None
                    or ranks_above(
                        plan_rank(self.scenario, plan),
                        plan_rank(self.scenario, Plan(start, "full", {})),
                    )
                ):
                    start = phase["grid"]
            if start is not None:
                self.set_start(start)  # the best legal plan so far starts the full model
        full = self._solve_full(solver, clock, reporter, start is not None, base, grids)
        full["grids"] = grids
        return full

    def _solve_full(self, solver, clock: _Clock, reporter, warm: bool, base, grids: list):
        """The full model's phase (its grids appended to `grids`); where the value HiGHS
        reports is not its solution's (seen with presolve on: the solution handed back was the
        start, the value a better one's), once more without a MIP start or presolve."""
        full = self._run_highs(solver, clock.left, reporter, warm, base, True)
        if full["grid"] is not None:
            grids.append(full["grid"])
        if not full["inconsistent"] or clock.left() <= 4 * clock.MIN_PHASE_S:
            return full
        presolve = solver.highs_options.get("presolve")
        solver.highs_options["presolve"] = "off"
        try:
            full = self._run_highs(solver, clock.left, reporter, False, base, True)
        finally:
            if presolve is None:
                solver.highs_options.pop("presolve")
            else:
                solver.highs_options["presolve"] = presolve
        full["solver_status"] += " (solved again without the MIP start and presolve)"
        if full["grid"] is not None:
            grids.append(full["grid"])
        return full

    def _instance(self, params: FullParams, base: dict[str, Any]) -> Any:
        """The APPSI HiGHS solver holding the model (built once; later solves reuse it)."""
        from pyomo.contrib.appsi.solvers import Highs

        build_started = time.perf_counter()
        solver = Highs()
        solver.config.mip_gap = max(0.0, float(params.mip_gap))
        solver.config.load_solution = False
        solver.config.stream_solver = False
        solver.highs_options = {"mip_abs_gap": 1e-7}
        if self.columns > params.large_model_columns:
            # HiGHS's MIP presolve and probing cannot be interrupted and on large models they
            # alone outlast the time limit; without them the limit holds (the bound then comes
            # from the relaxation).
            solver.highs_options["presolve"] = "off"
        solver.set_instance(self.model)
        for name in (
            "check_for_new_or_removed_constraints",
            "check_for_new_or_removed_vars",
            "check_for_new_or_removed_params",
            "check_for_new_objective",
            "update_constraints",
            "update_vars",
            "update_params",
            "update_named_expressions",
            "update_objective",
        ):
            setattr(solver.update_config, name, False)
        base["build_ms"] += (time.perf_counter() - build_started) * 1000.0
        return solver

    def _pack(self, shapes: set[tuple[int, int, int]]) -> set[int]:
        """One placement per shape: in order of start (larger first), the lowest aligned block
        free for its whole run; a shape that finds none is left out."""
        by_shape: dict[tuple[int, int, int], list[int]] = {}
        for p, (i, size, _block, start, _end) in enumerate(self.placements):
            if (i, size, start) in shapes:
                by_shape.setdefault((i, size, start), []).append(p)
        grid = self.pinned.copy()
        packed = set()
        for key in sorted(by_shape, key=lambda key: (key[2], -key[1])):
            for p in by_shape[key]:  # blocks in ascending order
                i, size, block, start, end = self.placements[p]
                cells = grid[block * size : (block + 1) * size, start:end]
                if (cells == IDLE).all():
                    cells[:] = i
                    packed.add(p)
                    break
        return packed

    @contextlib.contextmanager
    def _only_placements(self, solver: Any, allowed: Callable[[int], bool]):
        """Within the block, every placement p that is not `allowed(p)` is fixed to 0 in HiGHS
        (with presolve on, which removes them at once however large the model)."""
        highs = solver._solver_model
        columns = solver._pyomo_var_to_solver_var_map
        m = self.model
        index = np.array(
            [
                columns[id(m.place[p])]
                for p in range(len(self.placements))
                if not allowed(p) and id(m.place[p]) in columns
            ],
            dtype=np.int32,
        )
        lp = highs.getLp()
        lower = np.asarray(lp.col_lower_)[index]
        upper = np.asarray(lp.col_upper_)[index]
        zero = np.zeros(len(index))
        highs.changeColsBounds(len(index), index, zero, zero)
        options = dict(solver.highs_options)
        solver.highs_options = {**options, "presolve": "on"}
        try:
            yield
        finally:
            highs.changeColsBounds(len(index), index, lower, upper)
            solver.highs_options = options

    @contextlib.contextmanager
    def _fixed_realtime(self, solver: Any):
        """Within the block, every real-time hold and count column is fixed at its start value
        in HiGHS (the Pyomo variables are untouched); the bounds come back afterwards."""
        highs = solver._solver_model
        columns = solver._pyomo_var_to_solver_var_map
        variables = [
            v
            for component in (self.model.hold, self.model.count)
            for v in component.values()
            if not v.fixed and id(v) in columns
        ]
        index = np.array([columns[id(v)] for v in variables], dtype=np.int32)
        lp = highs.getLp()
        lower = np.asarray(lp.col_lower_)[index]
        upper = np.asarray(lp.col_upper_)[index]
        value = np.array([round(v.value or 0.0) for v in variables], dtype=float)
        highs.changeColsBounds(len(index), index, value, value)
        try:
            yield
        finally:
            highs.changeColsBounds(len(index), index, lower, upper)

    def _run_highs(
        self,
        solver: Any,
        time_limit: Callable[[], float],
        reporter: _ProgressReporter | None,
        warm_start: bool,
        base: dict[str, Any],
        reports_bound: bool,
    ) -> dict[str, Any]:
        """One HiGHS solve of the model as it stands, given `time_limit()` seconds."""
        from pyomo.contrib.appsi.base import TerminationCondition

        solver.config.warmstart = warm_start
        solver.config.time_limit = max(0.0, float(time_limit()))
        highs = solver._solver_model  # the underlying highspy.Highs: callbacks live there
        if reporter is not None:
            reporter.reports_bound = reports_bound
            highs.cbMipImprovingSolution.subscribe(reporter.on_event)
            highs.cbMipInterrupt.subscribe(reporter.on_event)
        solve_started = time.perf_counter()
        try:
            results = solver.solve(self.model)
        finally:
            base["solve_ms"] += (time.perf_counter() - solve_started) * 1000.0
            if reporter is not None:
                highs.cbMipImprovingSolution.unsubscribe(reporter.on_event)
                highs.cbMipInterrupt.unsubscribe(reporter.on_event)

        info = highs.getInfo()
        model_status = highs.getModelStatus()
        grid = None
        incumbent = math.nan
        inconsistent = False
        if results.best_feasible_objective is not None:
            results.solution_loader.load_vars()  # also the next phase's MIP start
            grid = self.decode()
            incumbent = float(results.best_feasible_objective)
            # HiGHS 1.16 can report a MIP start of a maximising model with an objective
            # constant at more than its value and stop there, claiming it optimal (see
            # `solve_shapes`): the objective is J exactly, so the grid's J must agree
            value = objective(self.scenario, Plan(grid, "full", {}))
            if abs(value - incumbent) > 1e-6 * max(1.0, abs(value)):
                inconsistent, incumbent = True, value
        bound = results.best_objective_bound
        if bound is None or not math.isfinite(bound):
            bound = math.inf
        condition = results.termination_condition
        if reporter is not None:
            reporter.final(incumbent, bound)
        return {
            "grid": grid,
            "incumbent": incumbent,
            "bound": float(bound),
            "optimal": condition == TerminationCondition.optimal and not inconsistent,
            "inconsistent": inconsistent,
            "time_limit": condition == TerminationCondition.maxTimeLimit,
            "infeasible": condition == TerminationCondition.infeasible,
            "solver_status": highs.modelStatusToString(model_status)
            if hasattr(highs, "modelStatusToString")
            else str(model_status),
            "mip_nodes": int(max(0, info.mip_node_count)),
        }


class _ProgressReporter:
    """Forwards HiGHS's incumbent and bound to the caller's hook, throttled (`every_s`)."""

    def __init__(self, hook: ProgressHook, every_s: float):
        self.hook: ProgressHook | None = hook
        self.every_s = every_s
        self.started = time.perf_counter()
        self.bound_cap = math.inf  # a bound known before HiGHS starts (the relaxation's)
        self.reports_bound = True  # False while solving a restricted model
        self.reports_incumbent = True  # False while solving the count model
        self.best = -math.inf  # incumbents only improve, across phases
        self.last = -math.inf

    def on_event(self, event: Any) -> None:
        now = time.perf_counter()
        improving = "ImprovingSolution" in str(event.callback_type)
        if not improving and now - self.last < self.every_s:
            return
        out = event.data_out
        self._send(now, out.mip_primal_bound, out.mip_dual_bound)

    def final(self, incumbent: float, bound: float) -> None:
        self._send(time.perf_counter(), incumbent, bound)

    def _send(self, now: float, incumbent: float, bound: float) -> None:
        if self.hook is None:
            return
        self.last = now
        if self.reports_incumbent and abs(incumbent) < 1e30:  # +-inf (or 1e100) before one
            self.best = max(self.best, float(incumbent))
        incumbent = self.best if self.best > -math.inf else math.nan
        if not self.reports_bound or not abs(bound) < 1e30:
            bound = math.inf
        bound = min(float(bound), self.bound_cap)
        try:
            self.hook(
                {
                    "elapsed_s": now - self.started,
                    "incumbent": incumbent,
                    "bound": bound,
                    "gap": _relative_gap(incumbent, bound),
                }
            )
        except Exception:  # a broken display must not stop the solve
            self.hook = None
