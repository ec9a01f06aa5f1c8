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

The full model is exact but hard: its per-GPU real-time columns and their swap rows make its LP
bound weak and its search slow. So a smaller model comes first. The shape model
(`_shape_program`) forgets where things are: a batch job chooses a shape (size and start step)
or none, a real-time job a count per step; per step and per size g, the jobs of size >= g fit in
the wholly free aligned g-blocks, and batch cells plus counts fit in the free GPUs; counts move
by at most swap_cap a step, and a block a real-time job starts in (previous_gpus) is not free
for batch work until it has paid the swaps to leave. It is a relaxation (every legal plan is one
of its solutions, with the same J), so its bound holds for J; it has a column per shape instead
of per block and per GPU, so HiGHS solves it in a fraction of the full model's time, and its
optimum is often the true one. Its solution is then realized by the full model itself in the
shape phase: every batch job fixed to its shape (any aligned block), the real-time GPUs free.
That is a restriction, so its plans are legal plans; one that reaches the shape bound is
optimal, proved, and the solve ends there.

The time limit is the whole call's: one clock from the start of `plan_full` covers the warm
start, loading Pyomo, building, the shape model and every solver phase (each HiGHS run gets what
is left once the solver holds the model); Pyomo is not loaded, nor the model built, when less
time is left than that takes. The phases share one APPSI instance, each starting from the best
legal plan so far: the shape model (`relaxation_share` of the time left); a restricted model
with the real-time columns fixed in HiGHS at the start's values that re-packs the batch work
around serving (`restricted_share`; it usually solves to optimality, and it can be what reaches
the shape bound first); the packed phase (the shapes packed greedily on one block each,
real-time GPUs free: `restricted_share`), whose plan starts the shape phase (`shape_share`);
then the full model with the rest of the time, whose bound is capped by the shape model's. A
phase whose plan reaches the bound ends the solve. Every solution is verified with `check`, and
the best legal one that beats the warm start is returned.

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

import dataclasses
import math
import sys
import time
from typing import Any

import numpy as np

from ...model import BatchJob, RealtimeJob, Scenario
from ...nodes import needs_nodes
from ...plan import IDLE, Plan, check, metrics, objective, plan_rank, ranks_above
from .. import SolveStatus
from .model import _estimate_terms, _FullModel
from .params import _SOLVE_LOCK, FullParams, _Clock, _ProgressReporter
from .params import ProgressHook as ProgressHook
from .status import _choose, _closed, _fallback, _reaches
from .status import _relative_gap as _relative_gap
from .status import _status as _status
from .warm import _warm_start


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
    # (On a cluster with node groups a shape's duration depends on its group's speed, which
    # the shape model does not know: there the full model's own bound is the proof.)
    if (
        (model.placements or model.realtime)
        and clock.left() > clock.MIN_PHASE_S
        and not needs_nodes(scenario)
    ):
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
