"""Rolling horizon (SPEC 4b): optimise the day, commit the hour, absorb forecast error.

`simulate` steps through a period of `days`. At every re-plan step `t0` it builds the scenario of
the next 24 hours as the planner would see it at that moment:

- batch jobs that have arrived (`arrival_step <= t0`) and have not started, with their
  *estimated* work (`gpu_hours`; the planner never learns `gpu_hours_actual`);
- batch jobs that are running, pinned on their block (`running`), with the remaining steps of
  their estimate (at least 1: a job that overruns its estimate is still running, so the planner
  sees it end at the earliest one step later);
- real-time jobs with `previous_gpus` = the GPUs they actually held at the last committed step
  and `demand` = a quantile of the demand forecast, refitted on history plus the actuals so far.

It plans that window, then executes it up to the next re-plan against reality: a batch job runs
for its *actual* work, real-time shortfall is measured against *actual* demand. Executed steps are
committed and never change. If a job overruns its estimate and the plan had already given its
GPUs to someone else before the next scheduled re-plan, the simulation re-plans at that step
(trigger `overrun`) instead of executing an illegal plan. A job that finishes early leaves its GPUs
idle until the next re-plan. A service whose actual demand is above its planned GPUs takes GPUs
the plan leaves idle at that step, as an autoscaler would (keeping ones it held first, then others
within its `swap_cap` and `gpus_max`); giving them back counts against the cap too, and where the
plan would make it give back more than the cap allows the simulation re-plans (trigger
`swap_cap`). The GPU-hours served that way are `metrics["rt_idle_served_gpu_hours"]`.

The realised grid is checked against `SimulationResult.scenario`: the input over the whole period,
with every batch job's `gpu_hours` set to the work it actually needed (so the checker expects the
durations that happened) and real-time `demand` the actual traffic.

This module is the loop only: the demand forecasts it plans with come from
`core.forecast.rolling_demand.DemandModel`, and the horizon products that work on any plan
(coverage risk, idle windows) live in `core.analysis`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from . import serving_guard
from .forecast import DEMAND_QUANTILE
from .forecast.rolling_demand import DemandModel, Forecaster
from .model import (
    MAX_CELLS,
    MAX_STEPS,
    BatchJob,
    RealtimeJob,
    Running,
    Scenario,
    ScenarioError,
)
from .nodes import allowed_gpus, duration_on
from .plan import IDLE, Plan, batch_placements, check, metrics
from .planners import planner_spec, solve

Progress = Callable[[float, str], None]


@dataclass
class SimulationResult:
    """What happened over the period, and how the plans moved on the way.

    `scenario` is the full period with actual work and actual demand (check `plan` against it);
    `source` the input as given. `replans` has one row per re-plan; `forecasts` the demand forecast
    (GPUs: mean, lower, upper, std) each real-time job was planned with at every committed step;
    `windows` every re-plan's day-ahead view, for the horizon products; `notes` what was assumed
    (e.g. a one-day demand repeated to cover the period).
    """

    scenario: Scenario
    source: Scenario
    plan: Plan
    metrics: dict[str, Any]
    replans: pd.DataFrame
    forecasts: dict[str, pd.DataFrame]
    windows: list[HorizonWindow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def window_at(self, step: int) -> HorizonWindow:
        """The day-ahead plan in force at `step`: the latest re-plan at or before it."""
        candidates = [w for w in self.windows if w.step <= step]
        if not candidates:
            raise ValueError(f"no re-plan at or before step {step}")
        return candidates[-1]


@dataclass(frozen=True)
class HorizonWindow:
    """One re-plan's view: its window scenario (steps from `step` on), plan and forecasts (GPUs).

    `core.analysis.coverage_risk_table(w.scenario, w.plan, w.forecasts)` and
    `core.analysis.idle_windows(w.plan)` give the horizon products as they looked at that moment
    (window step k is period step `step + k`).
    """

    step: int
    scenario: Scenario
    plan: Plan
    forecasts: dict[str, pd.DataFrame]


@dataclass(frozen=True)
class ReplanView:
    """One re-plan as `simulate(on_replan=...)` reports it (for tests, animations, debugging).

    `window_plan` numbers jobs as `window.jobs`; `realised` is a copy of the committed grid so
    far (GPUs x steps 0..step+committed_steps-1, numbered as the period's scenario).
    """

    step: int
    committed_steps: int
    trigger: str
    window: Scenario
    window_plan: Plan
    realised: np.ndarray


@dataclass
class _Started:
    """A batch job on the cluster: its block, when it started, when it ends (actual, estimate)."""

    gpu_start: int
    gpus: int
    start: int
    actual_end: int
    estimated_end: int


def simulate(
    scenario: Scenario,
    days: float,
    planner: str = "allocator",
    replan_minutes: int = 60,
    planner_options: Mapping[str, Any] | None = None,
    window_hours: float = 24,
    progress: Progress | None = None,
    *,
    demand_quantile: float | None = DEMAND_QUANTILE,
    refit_hours: float = 6,
    forecaster: Forecaster | None = None,
    on_replan: Callable[[ReplanView], None] | None = None,
    realtime_on_idle: bool = True,
    burst_guard: bool | None = None,
) -> SimulationResult:
    """Run the rolling horizon over `days` and return the realised plan and its metrics.

    The period is `days * 24 h`; a real-time demand shorter than that is repeated day by day
    (`extend_demand`, named in `notes` and `metrics["demand_extended_steps"]`). A re-plan every
    `replan_minutes` (rounded to whole steps, at least one) plans a `window_hours` window (cut at
    the period's end) and commits the steps up to the next re-plan.
    `demand_quantile` is the quantile of the forecast the planner is given as demand (None: the
    mean); per service it is raised after a step that fell short and decays back
    (`DemandModel.observe`), and held while realised coverage is below the policy's
    `rt_coverage_target`. Shortfall episodes and hours below that target are in the metrics.
    The forecaster is refitted every `refit_hours` (at most once per re-plan); in between
    its last forecast is carried forward with a level correction from the newest actual.
    `forecaster(history, horizon, level)` defaults to `core.forecast.demand.forecast_series`.
    `realtime_on_idle`: in execution, a service whose actual demand exceeds its planned GPUs
    also takes GPUs the plan leaves idle at that step, within its `gpus_max` and `swap_cap`
    (as an autoscaler on a real cluster would); `metrics["rt_idle_served_gpu_hours"]` says how
    much of the realised real-time allocation came from there (False: the plan's GPUs only).
    `burst_guard` (`core.serving_guard`): a guarded service is planned at no less than its level
    plus the largest rise its history shows that its swap cap cannot catch up with, and a batch
    job starts only where its run leaves each guarded service room for such a rise. True: every
    service; False: none; None (default): those whose history is idle at least half its hours.
    Never for fifo and backfill, whose peak reservation holds it. `metrics["burst_guarded"]`
    names the guarded services, `metrics["burst_guard_held_starts"]` counts the starts put off.
    `progress(fraction, message)` is called after every re-plan, `on_replan(view)` too.
    The allocator plans each window with `give_up_serving=False`, `restarts=0` and `kicks=0`
    unless the options say otherwise: its window moves then make room for batch work by moving
    serving to idle GPUs or batch cells only, never by giving up serving the forecast asks for;
    and a re-plan keeps the allocator's own speed (restarts would plan a small window up to 48
    times more at every re-plan, and kicks pack its batch work hundreds of times more, for a
    plan the next re-plan revises); `thorough` keeps them, within its time limit per re-plan.
    """
    options = _window_options(planner, planner_options)
    run = _set_up(
        scenario,
        days,
        planner,
        options,
        replan_minutes,
        window_hours,
        demand_quantile,
        refit_hours,
        forecaster,
        realtime_on_idle,
        burst_guard,
    )
    while run.t0 < run.period:
        _replan(run, on_replan)
        if progress is not None:
            progress(
                run.t0 / run.period, f"step {run.t0} of {run.period} ({len(run.rows)} re-plans)"
            )
    return _result(run, replan_minutes)


def _window_options(planner: str, planner_options: Mapping[str, Any] | None) -> dict[str, Any]:
    """The planner's options for every window (see `simulate`)."""
    options = dict(planner_options or {})
    if planner_spec(planner).accepts("give_up_serving"):
        # demand here is a forecast: serving the allocator gave up against it for batch work
        # would turn into realised shortfall whenever demand comes in above it
        options.setdefault("give_up_serving", False)
    if planner_spec(planner).accepts("restarts") and not planner_spec(planner).searches:
        options.setdefault("restarts", 0)
        options.setdefault("kicks", 0)
    return options


@dataclass
class _Run:
    """One `simulate` run: what it was given, worked out once, and the state each re-plan
    carries to the next (the realised grid, the started jobs, the rows and windows so far)."""

    planner: str
    options: dict[str, Any]
    source: Scenario  # the scenario with its demand extended to the period
    actual: Scenario
    notes: list[str]
    source_steps: int
    period: int
    commit_steps: int
    window_steps: int
    target: float | None
    realtime_on_idle: bool
    burst_guarded: list[int]  # the services the burst guard holds GPUs for (job numbers)
    grid: np.ndarray
    started: dict[int, _Started]
    held_before: dict[int, tuple[int, ...] | None]
    is_batch: np.ndarray
    demand_model: DemandModel
    committed_forecasts: dict[str, list[pd.DataFrame]]
    rows: list[dict[str, Any]] = field(default_factory=list)
    windows: list[HorizonWindow] = field(default_factory=list)
    previous: tuple[int, np.ndarray, dict[int, tuple[int, int, int]]] | None = None
    trigger: str = "scheduled"
    held_starts: int = 0  # batch starts the burst guard put off
    t0: int = 0
    next_scheduled: int = 0


def _set_up(
    scenario: Scenario,
    days: float,
    planner: str,
    options: dict[str, Any],
    replan_minutes: int,
    window_hours: float,
    demand_quantile: float | None,
    refit_hours: float,
    forecaster: Forecaster | None,
    realtime_on_idle: bool,
    burst_guard: bool | None = None,
) -> _Run:
    """The run before its first re-plan: the period, the realised scenario, an idle grid, the
    running batch jobs started and the demand model (see `simulate` for the arguments)."""
    source_steps = scenario.cluster.horizon_steps
    period, commit_steps, window_steps = _steps(scenario, days, replan_minutes, window_hours)
    scenario, notes = extend_demand(scenario, period)
    if demand_quantile is not None and not 0 < demand_quantile < 1:
        raise ScenarioError(f"demand_quantile must be between 0 and 1, got {demand_quantile}")
    if not refit_hours > 0:
        raise ScenarioError(f"refit_hours must be > 0, got {refit_hours}")
    if forecaster is None:
        from .forecast.demand import forecast_series as forecaster
    # the policy's real-time coverage SLO, where the model has one
    target = getattr(scenario.policy, "rt_coverage_target", None)
    actual = realised_scenario(scenario, period)
    G = actual.cluster.gpus
    grid = np.full((G, period), IDLE, dtype=np.int32)
    started: dict[int, _Started] = {}
    for i, job in enumerate(actual.jobs):
        if isinstance(job, BatchJob) and job.running is not None:
            r = job.running
            started[i] = _Started(r.gpu_start, r.gpus, 0, r.remaining_steps, r.remaining_steps)
    held_before: dict[int, tuple[int, ...] | None] = {
        i: job.previous_gpus for i, job in enumerate(actual.jobs) if isinstance(job, RealtimeJob)
    }
    # indexable by grid values: the last entry answers for IDLE (-1)
    is_batch = np.array([isinstance(j, BatchJob) for j in actual.jobs] + [False], dtype=bool)
    demand_model = DemandModel(actual, forecaster, demand_quantile, refit_hours)
    committed_forecasts: dict[str, list[pd.DataFrame]] = {j.id: [] for j in actual.realtime_jobs}
    return _Run(
        planner=planner,
        options=options,
        source=scenario,
        actual=actual,
        notes=notes,
        source_steps=source_steps,
        period=period,
        commit_steps=commit_steps,
        window_steps=window_steps,
        target=target,
        realtime_on_idle=realtime_on_idle,
        burst_guarded=serving_guard.guarded_services(actual, planner, burst_guard),
        grid=grid,
        started=started,
        held_before=held_before,
        is_batch=is_batch,
        demand_model=demand_model,
        committed_forecasts=committed_forecasts,
    )


def _replan(run: _Run, on_replan: Callable[[ReplanView], None] | None) -> None:
    """One re-plan at `run.t0`: plan the window, execute its steps up to the next re-plan (or
    the event that stops them), record the row and window, and move `run.t0` on."""
    actual, demand_model, t0 = run.actual, run.demand_model, run.t0
    steps = min(run.window_steps, run.period - t0)
    clock = time.perf_counter()
    window_forecasts = demand_model.forecasts(t0, steps)
    forecast_ms = (time.perf_counter() - clock) * 1000.0
    bursts = _bursts(run, t0, steps) if run.burst_guarded else None
    window, mapping = _window_scenario(
        actual,
        run.source,
        t0,
        steps,
        run.started,
        run.held_before,
        window_forecasts,
        demand_model,
        None if bursts is None else {i: floor for i, (floor, _) in bursts.items()},
    )
    window_plan = solve(window, run.planner, **run.options)
    lookup = np.append(mapping, IDLE).astype(np.int32)  # window IDLE (-1) stays IDLE
    planned = lookup[window_plan.grid]
    placements = {
        actual.job_index(p.job_id): (p.gpu_start, p.gpus, p.start_step + t0)
        for p in batch_placements(window, window_plan).values()
        if actual.job_index(p.job_id) not in run.started
    }
    stability = _stability(run.previous, t0, planned, placements, run.is_batch)
    if t0 >= run.next_scheduled:
        run.next_scheduled = t0 + run.commit_steps
    end = min(run.next_scheduled, run.period)
    executed, stop, lent, held = _execute(
        actual,
        run.source,
        run.grid,
        t0,
        end,
        planned,
        placements,
        run.started,
        run.held_before,
        run.realtime_on_idle,
        None if bursts is None else _start_reserve(window, mapping, bursts, steps),
    )
    run.held_starts += held
    _adapt(demand_model, actual, run.grid, t0, t0 + executed, run.target)
    for job in actual.realtime_jobs:
        frame = window_forecasts[job.id].iloc[:executed]
        run.committed_forecasts[job.id].append(frame.set_axis(range(t0, t0 + executed)))
    run.rows.append(
        {
            "step": t0,
            "trigger": run.trigger,
            "window_steps": steps,
            "committed_steps": executed,
            "rt_idle_cells": lent,
            **stability,
            "changed_fraction": stability["changed_cells"] / stability["future_cells"]
            if stability["future_cells"]
            else 0.0,
            "planner_ms": float(window_plan.stats.get("runtime_ms", 0.0)),
            "forecast_ms": forecast_ms,
            "refit": demand_model.refitted,
            "quantile_max": max(
                (demand_model.quantile_of(j.id) or 0.0 for j in actual.realtime_jobs),
                default=0.0,
            ),
        }
    )
    run.previous = (t0, planned, placements)
    run.windows.append(HorizonWindow(t0, window, window_plan, window_forecasts))
    if on_replan is not None:
        on_replan(
            ReplanView(
                t0, executed, run.trigger, window, window_plan, run.grid[:, : t0 + executed].copy()
            )
        )
    run.trigger = "scheduled" if t0 + executed >= run.next_scheduled else stop
    run.t0 = t0 + executed


def _result(run: _Run, replan_minutes: int) -> SimulationResult:
    """The realised plan, its metrics and the run's re-plans, forecasts and windows."""
    actual, grid, period = run.actual, run.grid, run.period
    replans = pd.DataFrame(run.rows)
    stats = {"runtime_ms": float(replans["planner_ms"].sum())}
    plan = Plan(grid, run.planner, stats)
    result_metrics = metrics(actual, plan)
    result_metrics["violations"] = len(check(actual, plan))  # 0 unless a planner has a bug
    result_metrics.update(_stability_metrics(replans, actual, period, replan_minutes))
    result_metrics.update(_shortfall_metrics(actual, grid, run.target))
    step_hours = actual.cluster.step_minutes / 60.0
    result_metrics["rt_idle_served_gpu_hours"] = float(replans["rt_idle_cells"].sum()) * step_hours
    result_metrics["demand_extended_steps"] = max(0, period - run.source_steps)
    if serving_guard.guarded(run.planner):
        result_metrics["burst_guarded"] = [actual.jobs[i].id for i in run.burst_guarded]
    if run.burst_guarded:
        result_metrics["burst_guard_held_starts"] = run.held_starts
    result_metrics["notes"] = list(run.notes)
    forecasts = {
        job_id: pd.concat(frames) for job_id, frames in run.committed_forecasts.items() if frames
    }
    return SimulationResult(
        scenario=actual,
        source=run.source,
        plan=plan,
        metrics=result_metrics,
        replans=replans,
        forecasts=forecasts,
        windows=run.windows,
        notes=run.notes,
    )


def write_simulation(result: SimulationResult, out_dir: str | Path) -> list[Path]:
    """Write the realised grid.csv, realtime.csv and metrics.json, plus replans.csv and the
    realised scenario.json (actual work and demand), so `gpuplan check scenario.json grid.csv`
    verifies what ran; and, as the Horizon & risk page shows them, coverage_risk.csv (per step
    and service: planned GPUs, forecast, probability demand exceeds them) and idle_windows.csv
    (the disjoint aligned idle blocks left over)."""
    from .analysis import coverage_risk_table, idle_windows
    from .formats import grid_to_csv, metrics_to_json, realtime_to_csv, scenario_to_json, write_csv

    risk = coverage_risk_table(result.scenario, result.plan, result.forecasts)
    idle = idle_windows(result.plan, step_minutes=result.scenario.cluster.step_minutes)

    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    files = {
        "grid.csv": grid_to_csv(result.scenario, result.plan),
        "realtime.csv": realtime_to_csv(result.scenario, result.plan),
        "metrics.json": metrics_to_json(result.metrics),
        "replans.csv": write_csv(result.replans.to_dict("records"), result.replans.columns),
        "scenario.json": scenario_to_json(result.scenario),
        "coverage_risk.csv": write_csv(risk.to_dict("records"), risk.columns),
        "idle_windows.csv": write_csv(idle.to_dict("records"), idle.columns),
    }
    written = []
    for name, text in files.items():
        path = folder / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def extend_demand(scenario: Scenario, period: int) -> tuple[Scenario, list[str]]:
    """The scenario over at least `period` steps: real-time demand that is shorter is repeated.

    A workload planned for one day has one day of demand; to simulate longer, each real-time
    job's demand is repeated day after day (its last `steps_per_day` steps, or all of it when
    shorter), as "tomorrow looks like today". Each repeat is named in the returned notes, and
    `simulate` reports `demand_extended_steps`, so nobody mistakes it for measured traffic.
    """
    available = scenario.cluster.horizon_steps
    if period <= available:
        return scenario, []
    step = scenario.cluster.step_minutes
    per_day = max(1, round(1440 / step))
    jobs, notes = [], []
    for job in scenario.jobs:
        if isinstance(job, RealtimeJob):
            cycle = job.demand[-per_day:] if len(job.demand) >= per_day else job.demand
            extra = tuple(np.resize(np.asarray(cycle, dtype=float), period - available).tolist())
            jobs.append(replace(job, demand=tuple(job.demand) + extra))
            notes.append(
                f"job '{job.id}': demand covers {available} steps; steps {available}-{period - 1} "
                f"repeat its last {len(cycle)} steps (not measured traffic)"
            )
        else:
            jobs.append(job)
    cluster = replace(scenario.cluster, horizon_steps=period)
    return scenario.replace(cluster=cluster, jobs=tuple(jobs)), notes


def realised_scenario(scenario: Scenario, period: int) -> Scenario:
    """The input over `period` steps with actual work as `gpu_hours` and actual demand."""
    jobs = []
    for job in scenario.jobs:
        if isinstance(job, RealtimeJob):
            jobs.append(replace(job, demand=job.demand[:period]))
        elif job.gpu_hours_actual is not None:
            jobs.append(replace(job, gpu_hours=job.gpu_hours_actual, gpu_hours_actual=None))
        else:
            jobs.append(job)
    cluster = replace(scenario.cluster, horizon_steps=period)
    return scenario.replace(cluster=cluster, jobs=tuple(jobs))


def _steps(
    scenario: Scenario, days: float, replan_minutes: int, window_hours: float
) -> tuple[int, int, int]:
    """Period, commit and window lengths in steps, with messages for impossible requests."""
    step = scenario.cluster.step_minutes
    if not (isinstance(days, int | float) and math.isfinite(days) and days > 0):
        raise ScenarioError(f"days must be a number > 0, got {days!r}")
    if not (isinstance(replan_minutes, int | float) and replan_minutes >= 1):
        raise ScenarioError(f"replan_minutes must be at least 1, got {replan_minutes!r}")
    if not (isinstance(window_hours, int | float) and window_hours > 0):
        raise ScenarioError(f"window_hours must be > 0, got {window_hours!r}")
    steps = days * 24 * 60 / step
    if not steps <= MAX_STEPS:
        raise ScenarioError(
            f"days must be at most {MAX_STEPS * step / 1440:g} ({MAX_STEPS} steps of {step} "
            f"minutes), got {days:g}"
        )
    period = round(steps)
    if period < 1:
        raise ScenarioError(f"{days} days is shorter than one step of {step} minutes")
    if period * scenario.cluster.gpus > MAX_CELLS:
        raise ScenarioError(
            f"days {days:g}: {period} steps x {scenario.cluster.gpus} GPUs is more than the "
            f"{MAX_CELLS:,} grid cells a plan may have"
        )
    commit = max(1, round(replan_minutes / step))
    window = max(1, round(window_hours * 60 / step))
    return period, min(commit, window), window


# ------------------------------------------------------------------------------ the window


def _window_scenario(
    actual: Scenario,
    source: Scenario,
    t0: int,
    steps: int,
    started: dict[int, _Started],
    held_before: dict[int, tuple[int, ...] | None],
    forecasts: dict[str, pd.DataFrame],
    demand_model: DemandModel,
    floors: dict[int, float] | None = None,
) -> tuple[Scenario, np.ndarray]:
    """The planner's view at t0 and the map from its job numbers to the period's; `floors`:
    per service (by period job number), the least demand it is planned at (the burst guard)."""
    picked: list[tuple[tuple[int, int], int, Any]] = []
    for i, job in enumerate(actual.jobs):
        estimate = source.jobs[i]
        if isinstance(job, RealtimeJob):
            demand = demand_model.planning_demand(forecasts[job.id], job.id)
            if floors is not None and i in floors:
                demand = np.maximum(demand, floors[i])
            window_job = replace(
                job, demand=tuple(demand), previous_gpus=held_before[i], history=None
            )
            picked.append(((-1, i), i, window_job))
            continue
        state = started.get(i)
        if state is not None:
            if state.actual_end <= t0:
                continue  # finished
            remaining = min(max(1, state.estimated_end - t0), steps)
            window_job = replace(
                estimate,
                arrival_step=0,
                gpu_hours_actual=None,
                running=Running(state.gpu_start, state.gpus, remaining),
            )
            picked.append(((-1, i), i, window_job))
        elif job.arrival_step <= t0:
            window_job = replace(estimate, arrival_step=0, gpu_hours_actual=None, running=None)
            picked.append(((job.arrival_step, i), i, window_job))  # fifo keeps arrival order
    picked.sort(key=lambda item: item[0])
    start = actual.cluster.start
    cluster = replace(  # (its nodes and GPU types too, SPEC section 8)
        actual.cluster,
        horizon_steps=steps,
        start=start + timedelta(minutes=actual.cluster.step_minutes * t0)
        if start is not None
        else None,
    )
    window = Scenario(
        name=f"{actual.name}@{t0}",
        cluster=cluster,
        jobs=tuple(item[2] for item in picked),
        policy=actual.policy,
        description=f"rolling window from step {t0}",
    )
    return window, np.array([item[1] for item in picked], dtype=np.int32)


def _execute(
    actual: Scenario,
    source: Scenario,
    grid: np.ndarray,
    t0: int,
    end: int,
    planned: np.ndarray,
    placements: dict[int, tuple[int, int, int]],
    started: dict[int, _Started],
    held_before: dict[int, tuple[int, ...] | None],
    realtime_on_idle: bool = True,
    reserve: np.ndarray | None = None,
) -> tuple[int, str, int, int]:
    """Commit planned steps t0..end-1 against reality.

    Returns how many steps were committed, why it stopped before `end` ("overrun" or
    "swap_cap"), how many real-time cells came from GPUs the plan left idle (`_serve_on_idle`)
    and how many batch starts the burst guard put off (`reserve`: the GPUs the services need
    left at each window step, or None without the guard).
    Stops early (for a re-plan) at a step where a job still running past its estimate sits on
    GPUs the plan gave to someone else, or where a service would have to give back GPUs it took
    on idle faster than its swap cap allows. Step t0 never stops: the window pins every running
    job for at least its first step and starts from what each service actually held.
    """
    step_minutes = actual.cluster.step_minutes
    is_batch = np.array([isinstance(j, BatchJob) for j in actual.jobs] + [False], dtype=bool)
    realtime = sorted(held_before, key=lambda i: (-actual.jobs[i].priority, i))
    allowed = _allowed_rows(actual, realtime)
    lent = put_off = 0
    for t in range(t0, end):
        column = planned[:, t - t0].copy()
        running = {i: s for i, s in started.items() if s.actual_end > t}
        blocked = False
        for i, s in running.items():
            cells = column[s.gpu_start : s.gpu_start + s.gpus]
            if np.any((cells != i) & (cells != IDLE)):
                blocked = True
                break
        if blocked:
            if t == t0:
                raise RuntimeError(f"step {t}: the window did not pin a running job")
            return t - t0, "overrun", lent, put_off
        # Batch cells follow reality: finished jobs free their block, running ones hold it.
        column[is_batch[column]] = IDLE
        for i, s in running.items():
            column[s.gpu_start : s.gpu_start + s.gpus] = i
        if reserve is not None:
            off = _put_off(
                actual, source, placements, started, t, t0 + planned.shape[1], reserve[t - t0 :]
            )
            placements = {i: p for i, p in placements.items() if i not in off}
            put_off += len(off)
        for i, (gpu_start, gpus, start) in placements.items():
            if start == t and i not in started:
                column[gpu_start : gpu_start + gpus] = i
        added = 0
        for i in realtime:
            job = actual.jobs[i]
            demand = float(job.demand[t]) if realtime_on_idle else None
            extra, legal = _serve_on_idle(column, i, job, demand, held_before[i], allowed.get(i))
            if not legal and t > t0:  # at t0 the window started from what it held: a planner bug
                return t - t0, "swap_cap", lent, put_off
            added += extra
        lent += added
        for i, (gpu_start, gpus, start) in placements.items():
            if start == t and i not in started:
                job = actual.jobs[i]
                speed = actual.speed_at(job, gpu_start)
                started[i] = _Started(
                    gpu_start,
                    gpus,
                    t,
                    t + actual.duration_at(job, gpus, gpu_start),
                    t + duration_on(source.jobs[i], gpus, step_minutes, speed),
                )
        grid[:, t] = column
        for i in held_before:
            held_before[i] = tuple(int(g) for g in np.nonzero(column == i)[0])
    return end - t0, "scheduled", lent, put_off


def _bursts(run: _Run, t0: int, steps: int) -> dict[int, tuple[float, np.ndarray]]:
    """Per guarded service (period job number): its warm floor and its level plus history's
    rises per lead step, for the burst guard (core.serving_guard)."""
    out = {}
    step_minutes = run.actual.cluster.step_minutes
    for i in run.burst_guarded:
        job = run.actual.jobs[i]
        observed = run.demand_model.observed(job, t0)
        level = serving_guard.last_level(observed, job.demand, t0)
        rise = serving_guard.step_rises(observed, steps, step_minutes)
        out[i] = (serving_guard.warm_floor(job, level, rise), level + rise)
    return out


def _start_reserve(
    window: Scenario, mapping: np.ndarray, bursts: dict[int, tuple[float, np.ndarray]], steps: int
) -> np.ndarray:
    """The GPUs the guarded services need left at each window step for a batch start."""
    total = np.zeros(steps)
    for k, job in enumerate(window.jobs):
        if isinstance(job, RealtimeJob) and int(mapping[k]) in bursts:
            _, reach = bursts[int(mapping[k])]
            total += serving_guard.start_reserve(job, reach)
    return total


def _put_off(
    actual: Scenario,
    source: Scenario,
    placements: dict[int, tuple[int, int, int]],
    started: dict[int, _Started],
    t: int,
    end: int,
    reserve: np.ndarray,
) -> set[int]:
    """The batch jobs planned to start at t that the burst guard holds back: with batch work
    held as estimated over the rest of the window, their run would not leave the services
    `reserve` (from step t on). Earlier job numbers are admitted first."""
    step_minutes = actual.cluster.step_minutes
    held = np.zeros(max(end - t, 1))
    for s in started.values():
        if s.actual_end > t:  # (past its estimate: held at least this step)
            held[: max(1, min(max(s.estimated_end, t + 1), end) - t)] += s.gpus
    off = set()
    for i, (gpu_start, gpus, start) in sorted(placements.items()):
        if start != t or i in started:
            continue
        job = actual.jobs[i]
        run = duration_on(source.jobs[i], gpus, step_minutes, actual.speed_at(job, gpu_start))
        n = max(1, min(run, end - t))
        if serving_guard.may_start(held[:n], gpus, reserve, actual.cluster.gpus):
            held[:n] += gpus
        else:
            off.add(i)
    return off


def _allowed_rows(actual: Scenario, services: list[int]) -> dict[int, np.ndarray]:
    """Per service, the GPUs of its allowed types (none listed without node groups: all)."""
    if not actual.cluster.nodes:
        return {}
    G = actual.cluster.gpus
    out = {}
    for i in services:
        mask = allowed_gpus(actual.cluster, actual.jobs[i])
        out[i] = np.array([mask >> g & 1 for g in range(G)], dtype=bool)
    return out


def _serve_on_idle(
    column: np.ndarray,
    i: int,
    job: RealtimeJob,
    demand: float | None,
    before: tuple[int, ...] | None,
    allowed: np.ndarray | None = None,
) -> tuple[int, bool]:
    """Give real-time job `i` idle GPUs of this step's `column` (in place) where it needs them.

    When its actual `demand` needs more GPUs than the plan gives it, it first keeps idle GPUs it
    held the step before (each lowers its swaps by one), then takes other idle ones while its
    swaps stay within `swap_cap`, up to `gpus_max`. Without a need (or with `demand` None) it
    still keeps idle GPUs it held where the plan would otherwise release more than `swap_cap`
    (the plan could not know it had taken them). Returns the cells added and whether the step
    is within the swap cap. `before` is what it held the step before (None: step 0 without
    `previous_gpus`, which is free). `allowed`: the GPUs of its types (SPEC section 8; None:
    every GPU).
    """
    idle = column == IDLE
    if allowed is not None:
        idle &= allowed
    mine = column == i
    held = int(mine.sum())
    want = held if demand is None else math.ceil(round(float(demand), 9))
    want = min(max(want, held), job.gpus_max)
    if before is None:
        free, swaps = len(column), 0
    else:
        prev = np.zeros(len(column), dtype=bool)
        prev[list(before)] = True
        swaps = int((prev != mine).sum())
        for g in np.nonzero(idle & prev)[0]:
            if held >= job.gpus_max or (held >= want and swaps <= job.swap_cap):
                break
            column[g] = i
            held += 1
            swaps -= 1
        free = job.swap_cap - swaps
    added = held - int(mine.sum())
    for g in np.nonzero(idle & (column == IDLE))[0]:
        if held >= want or free <= 0:
            break
        column[g] = i
        held += 1
        added += 1
        free -= 1
    return added, swaps <= job.swap_cap


def _served(actual: Scenario, grid: np.ndarray, start: int, end: int) -> tuple[np.ndarray, ...]:
    """Per real-time job and step in [start, end): actual demand and GPUs held."""
    demand, held = [], []
    for job in actual.realtime_jobs:
        i = actual.job_index(job.id)
        demand.append(np.asarray(job.demand[start:end], dtype=float))
        held.append((grid[:, start:end] == i).sum(axis=0).astype(float))
    return np.array(demand).reshape(-1, end - start), np.array(held).reshape(-1, end - start)


def _adapt(
    model: DemandModel,
    actual: Scenario,
    grid: np.ndarray,
    start: int,
    end: int,
    target: float | None,
) -> None:
    """Tell the demand model, step by step, which services fell short in the committed steps."""
    if not actual.realtime_jobs or end <= start:
        return
    demand, held = _served(actual, grid, 0, end)
    served = np.minimum(demand, held)
    for t in range(start, end):
        wanted = float(demand[:, : t + 1].sum())
        below = target is not None and wanted > 0 and served[:, : t + 1].sum() / wanted < target
        for row, job in enumerate(actual.realtime_jobs):
            model.observe(job.id, bool(demand[row, t] > held[row, t] + 1e-9), below)


def _shortfall_metrics(actual: Scenario, grid: np.ndarray, target: float | None) -> dict[str, Any]:
    """Shortfall episodes (maximal runs of steps where some service got less than its demand)
    and, with a coverage SLO, the hours whose real-time coverage was below it."""
    period = grid.shape[1]
    step_hours = actual.cluster.step_minutes / 60.0
    demand, held = _served(actual, grid, 0, period)
    short = (demand > held + 1e-9).any(axis=0) if len(demand) else np.zeros(period, dtype=bool)
    padded = np.concatenate([[False], short, [False]])
    episodes = int((np.diff(padded.astype(int)) == 1).sum())
    out: dict[str, Any] = {
        "rt_shortfall_episodes": episodes,
        "rt_shortfall_hours": float(short.sum() * step_hours),
        "rt_coverage_target": target,
    }
    if target is not None:
        wanted = demand.sum(axis=0)
        served = np.minimum(demand, held).sum(axis=0)
        coverage = np.where(wanted > 0, served / np.where(wanted > 0, wanted, 1.0), 1.0)
        out["rt_hours_below_slo"] = float((coverage < target).sum() * step_hours)
    return out


def _stability(
    previous: tuple[int, np.ndarray, dict[int, tuple[int, int, int]]] | None,
    t0: int,
    planned: np.ndarray,
    placements: dict[int, tuple[int, int, int]],
    is_batch: np.ndarray,
) -> dict[str, int]:
    """Cells of the previously planned future that changed (all, and those where a batch job
    was or now is planned), cells compared, and batch jobs whose planned start or block moved."""
    out = {"changed_cells": 0, "changed_batch_cells": 0, "future_cells": 0, "moved_jobs": 0}
    if previous is None:
        return out
    before_t0, before, before_placements = previous
    offset = t0 - before_t0
    overlap = min(before.shape[1] - offset, planned.shape[1])
    if overlap <= 0:
        return out
    old = before[:, offset : offset + overlap]
    new = planned[:, :overlap]
    changed = old != new
    out["changed_cells"] = int(np.count_nonzero(changed))
    out["changed_batch_cells"] = int(np.count_nonzero(changed & (is_batch[old] | is_batch[new])))
    out["future_cells"] = int(old.size)
    out["moved_jobs"] = sum(
        1
        for i, where in placements.items()
        if i in before_placements
        and before_placements[i] != where
        and before_placements[i][2] >= t0
    )
    return out


def _stability_metrics(
    replans: pd.DataFrame, actual: Scenario, period: int, replan_minutes: int
) -> dict[str, Any]:
    scheduled = replans[replans["step"] > 0]
    return {
        "mode": "rolling",
        "period_steps": period,
        "replan_minutes": replan_minutes,
        "replans": len(replans),
        "overrun_replans": int((replans["trigger"] == "overrun").sum()),
        "swap_replans": int((replans["trigger"] == "swap_cap").sum()),
        "changed_cells": int(replans["changed_cells"].sum()),
        "changed_batch_cells": int(replans["changed_batch_cells"].sum()),
        "changed_fraction_mean": float(scheduled["changed_fraction"].mean())
        if len(scheduled)
        else 0.0,
        "changed_fraction_max": float(scheduled["changed_fraction"].max())
        if len(scheduled)
        else 0.0,
        "moved_jobs": int(replans["moved_jobs"].sum()),
        "planner_ms_mean": float(replans["planner_ms"].mean()),
        "planner_ms_max": float(replans["planner_ms"].max()),
        "forecast_ms_total": float(replans["forecast_ms"].sum()),
        "refits": int(replans["refit"].sum()),
    }
