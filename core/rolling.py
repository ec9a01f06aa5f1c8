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
idle until the next re-plan.

The realised grid is checked against `SimulationResult.scenario`: the input over the whole period,
with every batch job's `gpu_hours` set to the work it actually needed (so the checker expects the
durations that happened) and real-time `demand` the actual traffic.

Horizon products that work on any plan: `coverage_risk_table` (probability per step that demand
exceeds the real-time GPUs planned) and `idle_windows` (aligned blocks of idle GPUs that stay idle
for a run of steps).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
import pandas as pd

from .model import BatchJob, Cluster, RealtimeJob, Running, Scenario, ScenarioError
from .plan import IDLE, Plan, batch_placements, check, holdings, metrics
from .planners import solve

# A real-time job with less than this many hourly values (history + actuals) gets a persistence
# forecast: the forecaster needs at least a day.
MIN_FORECAST_HOURS = 24
# Between refits the last forecast is shifted and its level corrected by the latest error,
# decaying by this factor per hour ahead (a mean-reverting level, as in the forecaster's AR(1)).
LEVEL_PERSISTENCE = 0.85
# Recalibration against recent surprises: when the last BOOST_STEPS actuals ran above the model's
# step-ahead forecasts, the window's forecast is scaled up by that ratio (at most MAX_BOOST),
# fading by BOOST_PERSISTENCE per step ahead.
BOOST_STEPS = 3
MAX_BOOST = 2.0
BOOST_PERSISTENCE = 0.9
# When the cluster has no start time, forecasts are dated from this Monday midnight.
DEFAULT_START = datetime(2026, 1, 5)

Forecaster = Callable[[pd.Series, int, float], pd.DataFrame]
Progress = Callable[[float, str], None]


@dataclass
class SimulationResult:
    """What happened over the period, and how the plans moved on the way.

    `scenario` is the full period with actual work and actual demand (check `plan` against it);
    `source` the input as given. `replans` has one row per re-plan; `forecasts` the demand forecast
    (GPUs: mean, lower, upper, std) each real-time job was planned with at every committed step;
    `horizon_plan` / `horizon_scenario` / `horizon_forecasts` the last re-plan's window, for the
    horizon products.
    """

    scenario: Scenario
    source: Scenario
    plan: Plan
    metrics: dict[str, Any]
    replans: pd.DataFrame
    forecasts: dict[str, pd.DataFrame]
    horizon_scenario: Scenario | None = None
    horizon_plan: Plan | None = None
    horizon_forecasts: dict[str, pd.DataFrame] = field(default_factory=dict)
    horizon_start: int = 0
    windows: list[HorizonWindow] = field(default_factory=list)

    def window_at(self, step: int) -> HorizonWindow:
        """The day-ahead plan in force at `step`: the latest re-plan at or before it."""
        candidates = [w for w in self.windows if w.step <= step]
        if not candidates:
            raise ValueError(f"no re-plan at or before step {step}")
        return candidates[-1]


@dataclass(frozen=True)
class HorizonWindow:
    """One re-plan's view: its window scenario (steps from `step` on), plan and forecasts (GPUs).

    `coverage_risk_table(w.scenario, w.plan, w.forecasts)` and `idle_windows(w.plan)` give the
    horizon products as they looked at that moment (window step k is period step `step + k`).
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
    demand_quantile: float | None = 0.9,
    refit_hours: float = 6,
    forecaster: Forecaster | None = None,
    on_replan: Callable[[ReplanView], None] | None = None,
) -> SimulationResult:
    """Run the rolling horizon over `days` and return the realised plan and its metrics.

    The period is `days * 24 h` (the scenario's real-time demand must cover it); a re-plan every
    `replan_minutes` (rounded to whole steps, at least one) plans a `window_hours` window (cut at
    the period's end) and commits the steps up to the next re-plan.
    `demand_quantile` is the quantile of the forecast the planner is given as demand (None: the
    mean). The forecaster is refitted every `refit_hours` (at most once per re-plan); in between
    its last forecast is carried forward with a level correction from the newest actual.
    `forecaster(history, horizon, level)` defaults to `core.forecast.demand.forecast_series`.
    `progress(fraction, message)` is called after every re-plan, `on_replan(view)` too.
    """
    options = dict(planner_options or {})
    period, commit_steps, window_steps = _steps(scenario, days, replan_minutes, window_hours)
    if demand_quantile is not None and not 0 < demand_quantile < 1:
        raise ScenarioError(f"demand_quantile must be between 0 and 1, got {demand_quantile}")
    if not refit_hours > 0:
        raise ScenarioError(f"refit_hours must be > 0, got {refit_hours}")
    if forecaster is None:
        from .forecast.demand import forecast_series as forecaster
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
    estimates = [getattr(job, "gpu_hours", 0.0) for job in scenario.jobs]
    # indexable by grid values: the last entry answers for IDLE (-1)
    is_batch = np.array([isinstance(j, BatchJob) for j in actual.jobs] + [False], dtype=bool)
    demand_model = _DemandModel(actual, forecaster, demand_quantile, refit_hours)
    committed_forecasts: dict[str, list[pd.DataFrame]] = {j.id: [] for j in actual.realtime_jobs}

    rows: list[dict[str, Any]] = []
    windows: list[HorizonWindow] = []
    previous: tuple[int, np.ndarray, dict[int, tuple[int, int, int]]] | None = None
    trigger = "scheduled"
    window = window_plan = None
    window_forecasts: dict[str, pd.DataFrame] = {}
    t0 = 0
    next_scheduled = 0
    while t0 < period:
        steps = min(window_steps, period - t0)
        clock = time.perf_counter()
        window_forecasts = demand_model.forecasts(t0, steps)
        forecast_ms = (time.perf_counter() - clock) * 1000.0
        window, mapping = _window_scenario(
            actual, scenario, t0, steps, started, held_before, window_forecasts, demand_model
        )
        window_plan = solve(window, planner, **options)
        lookup = np.append(mapping, IDLE).astype(np.int32)  # window IDLE (-1) stays IDLE
        planned = lookup[window_plan.grid]
        placements = {
            actual.job_index(p.job_id): (p.gpu_start, p.gpus, p.start_step + t0)
            for p in batch_placements(window, window_plan).values()
            if actual.job_index(p.job_id) not in started
        }
        stability = _stability(previous, t0, planned, placements, is_batch)
        if t0 >= next_scheduled:
            next_scheduled = t0 + commit_steps
        end = min(next_scheduled, period)
        executed = _execute(
            actual, estimates, grid, t0, end, planned, placements, started, held_before
        )
        for job in actual.realtime_jobs:
            frame = window_forecasts[job.id].iloc[:executed]
            committed_forecasts[job.id].append(frame.set_axis(range(t0, t0 + executed)))
        rows.append(
            {
                "step": t0,
                "trigger": trigger,
                "window_steps": steps,
                "committed_steps": executed,
                **stability,
                "changed_fraction": stability["changed_cells"] / stability["future_cells"]
                if stability["future_cells"]
                else 0.0,
                "planner_ms": float(window_plan.stats.get("runtime_ms", 0.0)),
                "forecast_ms": forecast_ms,
                "refit": demand_model.refitted,
            }
        )
        previous = (t0, planned, placements)
        windows.append(HorizonWindow(t0, window, window_plan, window_forecasts))
        if on_replan is not None:
            on_replan(
                ReplanView(
                    t0, executed, trigger, window, window_plan, grid[:, : t0 + executed].copy()
                )
            )
        trigger = "scheduled" if t0 + executed >= next_scheduled else "overrun"
        t0 += executed
        if progress is not None:
            progress(t0 / period, f"step {t0} of {period} ({len(rows)} re-plans)")

    replans = pd.DataFrame(rows)
    stats = {"runtime_ms": float(replans["planner_ms"].sum())}
    plan = Plan(grid, planner, stats)
    result_metrics = metrics(actual, plan)
    result_metrics["violations"] = len(check(actual, plan))  # 0 unless a planner has a bug
    result_metrics.update(_stability_metrics(replans, actual, period, replan_minutes))
    forecasts = {
        job_id: pd.concat(frames) for job_id, frames in committed_forecasts.items() if frames
    }
    return SimulationResult(
        scenario=actual,
        source=scenario,
        plan=plan,
        metrics=result_metrics,
        replans=replans,
        forecasts=forecasts,
        horizon_scenario=window,
        horizon_plan=window_plan,
        horizon_forecasts=window_forecasts,
        horizon_start=t0 - rows[-1]["committed_steps"],
        windows=windows,
    )


def write_simulation(result: SimulationResult, out_dir: str | Path) -> list[Path]:
    """Write the realised grid.csv, realtime.csv and metrics.json, plus replans.csv and the
    realised scenario.json (actual work and demand), so `gpuplan check scenario.json grid.csv`
    verifies what ran."""
    from .formats import grid_to_csv, metrics_to_json, realtime_to_csv, scenario_to_json, write_csv

    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    files = {
        "grid.csv": grid_to_csv(result.scenario, result.plan),
        "realtime.csv": realtime_to_csv(result.scenario, result.plan),
        "metrics.json": metrics_to_json(result.metrics),
        "replans.csv": write_csv(result.replans.to_dict("records"), result.replans.columns),
        "scenario.json": scenario_to_json(result.scenario),
    }
    written = []
    for name, text in files.items():
        path = folder / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


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
    period = round(days * 24 * 60 / step)
    if period < 1:
        raise ScenarioError(f"{days} days is shorter than one step of {step} minutes")
    available = scenario.cluster.horizon_steps
    if period > available and scenario.realtime_jobs:
        raise ScenarioError(
            f"scenario '{scenario.name}': --days {days:g} needs {period} steps of real-time "
            f"demand, the scenario has {available} ({available * step / 1440:g} days)"
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
    demand_model: _DemandModel,
) -> tuple[Scenario, np.ndarray]:
    """The planner's view at t0 and the map from its job numbers to the period's."""
    picked: list[tuple[tuple[int, int], int, Any]] = []
    for i, job in enumerate(actual.jobs):
        estimate = source.jobs[i]
        if isinstance(job, RealtimeJob):
            demand = demand_model.planning_demand(forecasts[job.id])
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
    cluster = Cluster(
        actual.cluster.gpus,
        actual.cluster.step_minutes,
        steps,
        start + timedelta(minutes=actual.cluster.step_minutes * t0) if start is not None else None,
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
    estimates: list[float],
    grid: np.ndarray,
    t0: int,
    end: int,
    planned: np.ndarray,
    placements: dict[int, tuple[int, int, int]],
    started: dict[int, _Started],
    held_before: dict[int, tuple[int, ...] | None],
) -> int:
    """Commit planned steps t0..end-1 against reality; return how many were committed.

    Stops early (for an `overrun` re-plan) at a step where a job still running past its estimate
    sits on GPUs the plan gave to someone else. Step t0 never stops: the window pins every
    running job for at least its first step.
    """
    step_minutes = actual.cluster.step_minutes
    is_batch = np.array([isinstance(j, BatchJob) for j in actual.jobs] + [False], dtype=bool)
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
            return t - t0
        # Batch cells follow reality: finished jobs free their block, running ones hold it.
        column[is_batch[column]] = IDLE
        for i, s in running.items():
            column[s.gpu_start : s.gpu_start + s.gpus] = i
        for i, (gpu_start, gpus, start) in placements.items():
            if start == t and i not in started:
                job = actual.jobs[i]
                started[i] = _Started(
                    gpu_start,
                    gpus,
                    t,
                    t + actual.duration(job, gpus),
                    t + _duration_of(estimates[i], gpus, step_minutes),
                )
                column[gpu_start : gpu_start + gpus] = i
        grid[:, t] = column
        for i in held_before:
            held_before[i] = tuple(int(g) for g in np.nonzero(column == i)[0])
    return end - t0


def _duration_of(gpu_hours: float, gpus: int, step_minutes: int) -> int:
    return max(1, math.ceil(gpu_hours * 60.0 / (gpus * step_minutes) - 1e-9))


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


# ------------------------------------------------------------------------------ demand forecasts


class _DemandModel:
    """Per real-time job: forecasts in GPUs for a window, refitted every `refit_hours`."""

    def __init__(
        self, actual: Scenario, forecaster: Forecaster, quantile: float | None, refit_hours: float
    ) -> None:
        self.step = actual.cluster.step_minutes
        self.origin = pd.Timestamp(actual.cluster.start or DEFAULT_START)
        self.jobs = actual.realtime_jobs
        self.forecaster = forecaster
        self.quantile = quantile
        self.z = 0.0 if quantile is None else NormalDist().inv_cdf(quantile)
        self.refit = pd.Timedelta(hours=refit_hours)
        self.fits: dict[str, tuple[pd.Timestamp, pd.DataFrame]] = {}
        self.refitted = False
        self.predicted: dict[str, dict[int, float]] = {}

    def forecasts(self, t0: int, steps: int) -> dict[str, pd.DataFrame]:
        """Mean, lower, upper, std of each job's demand for window steps 0..steps-1."""
        now = self.origin + pd.Timedelta(minutes=self.step * t0)
        first_hour = now.floor("h")
        hours = math.ceil(((now - first_hour).total_seconds() / 60 + steps * self.step) / 60)
        self.refitted = False
        out = {}
        for job in self.jobs:
            observed = self._hourly(job, t0, first_hour)
            hourly = self._hourly_forecast(job, observed, first_hour, hours)
            frame = self._to_steps(hourly, now, first_hour, steps)
            predicted = self.predicted.setdefault(job.id, {})
            predicted[t0] = float(frame["mean"].iloc[0])
            out[job.id] = _boosted(frame, self._boost(job, t0, predicted))
        return out

    def _boost(self, job: RealtimeJob, t0: int, predicted: dict[int, float]) -> float:
        """How far actual demand ran above the model's step-ahead forecasts lately (>= 1).

        The ratio is taken against the model's own forecasts, not the boosted ones, so it stays
        while the model keeps under-forecasting (a surge it has not learned yet) and fades as
        refits catch up. Only upward: a shortfall costs `penalty_weight` times a batch GPU-step.
        """
        recent = [t for t in range(max(0, t0 - BOOST_STEPS), t0) if t in predicted]
        if not recent:
            return 1.0
        forecast = sum(predicted[t] for t in recent)
        actual = sum(job.demand[t] for t in recent)
        if forecast <= 1e-9:
            return 1.0
        return float(min(max(actual / forecast, 1.0), MAX_BOOST))

    def planning_demand(self, frame: pd.DataFrame) -> np.ndarray:
        """The demand the planner is given: the chosen quantile (normal, mean and std)."""
        values = frame["mean"].to_numpy() + self.z * frame["std"].to_numpy()
        return np.round(np.maximum(np.nan_to_num(values, nan=0.0, posinf=0.0), 0.0), 6)

    def _hourly(self, job: RealtimeJob, t0: int, first_hour: pd.Timestamp) -> pd.Series:
        """History, then the actuals before t0 averaged per whole hour, ending before first_hour."""
        parts = []
        if job.history:
            index = pd.date_range(
                end=self.origin - pd.Timedelta(hours=1), periods=len(job.history), freq="h"
            )
            parts.append(pd.Series(job.history, index=index, dtype=float))
        if t0 > 0:
            index = self.origin + pd.to_timedelta(np.arange(t0) * self.step, unit="min")
            steps = pd.Series(job.demand[:t0], index=index, dtype=float)
            if self.step > 60 and self.step % 60 == 0:  # one step covers several hours
                repeat = self.step // 60
                index = self.origin + pd.to_timedelta(np.arange(t0 * repeat) * 60, unit="min")
                steps = pd.Series(np.repeat(job.demand[:t0], repeat), index=index, dtype=float)
            parts.append(steps.resample("h").mean())
        if not parts:
            return pd.Series(dtype=float, index=pd.DatetimeIndex([]))
        series = pd.concat(parts)
        series = series[~series.index.duplicated(keep="last")]
        series = series[series.index < first_hour]
        if len(series):
            series = series.asfreq("h")
        return series

    def _hourly_forecast(
        self, job: RealtimeJob, observed: pd.Series, first_hour: pd.Timestamp, hours: int
    ) -> pd.DataFrame:
        """Hourly frame from first_hour on: refit when due, else carry the last fit forward."""
        fit = self.fits.get(job.id)
        needed_end = first_hour + pd.Timedelta(hours=hours - 1)
        finite = int(np.isfinite(observed.to_numpy()).sum()) if len(observed) else 0
        if finite < MIN_FORECAST_HOURS:
            return _persistence(job, observed, first_hour, hours)
        due = fit is None or first_hour - fit[0] >= self.refit or fit[1].index[-1] < needed_end
        if due:
            horizon = hours + math.ceil(self.refit / pd.Timedelta(hours=1)) + 1
            try:
                frame = self.forecaster(observed, horizon, 0.9)
            except ScenarioError:
                return _persistence(job, observed, first_hour, hours)
            frame = frame[["mean", "lower", "upper", "std"]].astype(float)
            frame.index = pd.date_range(first_hour, periods=len(frame), freq="h")
            self.fits[job.id] = (first_hour, frame)
            self.refitted = True
            return frame.iloc[:hours]
        fitted_at, frame = fit
        window = frame.loc[first_hour:needed_end].copy()
        last = observed.dropna()
        if len(last) and last.index[-1] >= fitted_at and last.index[-1] in frame.index:
            error = float(last.iloc[-1] - frame.at[last.index[-1], "mean"])
            lead = (window.index - last.index[-1]) / pd.Timedelta(hours=1)
            shift = error * LEVEL_PERSISTENCE ** np.asarray(lead, dtype=float)
            mean = np.maximum(window["mean"].to_numpy() + shift, 0.0)
            window["upper"] = np.maximum(window["upper"].to_numpy() + shift, mean)
            window["lower"] = np.clip(window["lower"].to_numpy() + shift, 0.0, mean)
            window["mean"] = mean
        return window

    def _to_steps(
        self, hourly: pd.DataFrame, now: pd.Timestamp, first_hour: pd.Timestamp, steps: int
    ) -> pd.DataFrame:
        """Average the hours each window step overlaps (a step is rarely longer than an hour)."""
        values = hourly[["mean", "lower", "upper", "std"]].to_numpy(dtype=float)
        offset = (now - first_hour).total_seconds() / 60
        starts = offset + np.arange(steps) * self.step
        first = np.floor(starts / 60).astype(int)
        last = np.maximum(first, np.ceil((starts + self.step) / 60).astype(int) - 1)
        last = np.minimum(last, len(values) - 1)
        first = np.minimum(first, len(values) - 1)
        if np.array_equal(first, last):
            rows = values[first]
        else:
            cumulative = np.vstack([np.zeros((1, 4)), np.cumsum(values, axis=0)])
            rows = (cumulative[last + 1] - cumulative[first]) / (last - first + 1)[:, None]
        return pd.DataFrame(
            rows, columns=["mean", "lower", "upper", "std"], index=pd.RangeIndex(steps, name="step")
        )


def _boosted(frame: pd.DataFrame, boost: float) -> pd.DataFrame:
    """Scale a forecast up by `boost` at lead 0, fading by BOOST_PERSISTENCE per step ahead."""
    if boost <= 1.0:
        return frame
    factor = 1.0 + (boost - 1.0) * BOOST_PERSISTENCE ** np.arange(len(frame))
    return frame.mul(factor, axis=0)


def _persistence(
    job: RealtimeJob, observed: pd.Series, first_hour: pd.Timestamp, hours: int
) -> pd.DataFrame:
    """Too little data to fit: the last value (or what the job held), with the values' spread."""
    values = observed.dropna().to_numpy() if len(observed) else np.array([])
    if len(values):
        level = float(values[-1])
    elif job.previous_gpus is not None:
        level = float(len(job.previous_gpus))
    else:
        level = float(job.gpus_min)
    spread = float(np.std(values)) if len(values) >= 2 else 0.0
    spread = max(spread, 0.25 * level, 0.5)
    z = NormalDist().inv_cdf(0.95)
    mean = np.full(hours, level)
    return pd.DataFrame(
        {
            "mean": mean,
            "lower": np.maximum(mean - z * spread, 0.0),
            "upper": mean + z * spread,
            "std": np.full(hours, spread),
        },
        index=pd.date_range(first_hour, periods=hours, freq="h"),
    )


# ------------------------------------------------------------------------------ horizon products


def coverage_risk_table(
    scenario: Scenario,
    plan: Plan,
    forecasts: Mapping[str, pd.DataFrame],
    capacity: float | Mapping[str, float] = 1.0,
    first_step: int = 0,
) -> pd.DataFrame:
    """Per step and real-time job: the GPUs planned and the probability demand exceeds them.

    `forecasts[job_id]` holds `mean` and `std` (and optionally `lower`, `upper`) of the demand for
    the plan's steps `first_step, first_step+1, ...` (row order), in the units of `capacity`: what
    one GPU serves (1.0 when the forecast is already in GPUs). Demand is taken as normal, as in
    `core.forecast.demand.coverage_risk`; `expected_shortfall` is E[max(0, demand - served)] in
    GPUs. Rows: step, time, job_id, planned_gpus, mean, upper, risk, expected_shortfall.
    """
    from .forecast.demand import coverage_risk, expected_shortfall

    held = holdings(scenario, plan)
    T = plan.grid.shape[1]
    start = scenario.cluster.start
    step_minutes = scenario.cluster.step_minutes
    frames = []
    for job in scenario.realtime_jobs:
        forecast = forecasts.get(job.id)
        if forecast is None:
            continue
        per_gpu = capacity.get(job.id, 1.0) if isinstance(capacity, Mapping) else capacity
        if not per_gpu > 0:
            raise ScenarioError(f"job '{job.id}': capacity must be > 0, got {per_gpu}")
        count = min(len(forecast), T - first_step)
        if count <= 0:
            continue
        steps = np.arange(first_step, first_step + count)
        window = forecast.iloc[:count]
        mean = window["mean"].to_numpy(dtype=float) / per_gpu
        std = window["std"].to_numpy(dtype=float) / per_gpu
        upper = (
            window["upper"].to_numpy(dtype=float) / per_gpu
            if "upper" in forecast
            else mean + 1.6448536 * std
        )
        planned = held[scenario.job_index(job.id), steps].astype(float)
        risk = coverage_risk(window, planned, per_gpu)
        shortfall = expected_shortfall(window, planned, per_gpu) / per_gpu
        frames.append(
            pd.DataFrame(
                {
                    "step": steps,
                    "time": [
                        start + timedelta(minutes=step_minutes * int(t)) if start else None
                        for t in steps
                    ],
                    "job_id": job.id,
                    "planned_gpus": planned.astype(int),
                    "mean": mean,
                    "upper": upper,
                    "risk": risk,
                    "expected_shortfall": shortfall,
                }
            )
        )
    columns = [
        "step",
        "time",
        "job_id",
        "planned_gpus",
        "mean",
        "upper",
        "risk",
        "expected_shortfall",
    ]
    if not frames:
        return pd.DataFrame(columns=columns)
    return pd.concat(frames, ignore_index=True).sort_values(["step", "job_id"], ignore_index=True)[
        columns
    ]


def idle_windows(
    plan: Plan,
    min_gpus: int = 1,
    min_steps: int = 1,
    *,
    first_step: int = 0,
    step_minutes: int | None = None,
) -> pd.DataFrame:
    """Predictable idle windows: aligned blocks of idle GPUs that stay idle for a run of steps.

    A window is an aligned power-of-two block `[gpu_start, gpu_start + gpus)` (the shape a batch
    job can take, `gpu_start % gpus == 0`) with `gpus >= min_gpus`, idle on every GPU for the
    maximal run of steps `[start_step, end_step)` (end exclusive) of at least `min_steps` steps,
    from `first_step` on. A window is left out when the parent block (twice the size, aligned) is
    idle over exactly the same steps: the table lists the largest block for each idle run, so
    "GPUs 0-7 idle for steps 4-9" is not repeated as two halves. Sorted by start, then GPU.
    """
    grid = plan.grid[:, first_step:]
    G = grid.shape[0]
    idle = grid == IDLE
    runs_by_size: dict[int, set[tuple[int, int, int]]] = {}
    size = 1
    sizes = []
    while size <= G:
        sizes.append(size)
        blocks = G // size
        free = idle[: blocks * size].reshape(blocks, size, -1).all(axis=1)
        runs_by_size[size] = {(b * size, s, e) for b in range(blocks) for s, e in _runs(free[b])}
        size *= 2
    rows = []
    for size in sizes:
        if size < min_gpus:
            continue
        parent = runs_by_size.get(size * 2, set())
        for gpu_start, s, e in runs_by_size[size]:
            if e - s < min_steps:
                continue
            parent_start = gpu_start - gpu_start % (size * 2)
            if (parent_start, s, e) in parent:
                continue
            rows.append(
                {
                    "start_step": s + first_step,
                    "end_step": e + first_step,
                    "steps": e - s,
                    "gpu_start": gpu_start,
                    "gpus": size,
                }
            )
    columns = ["start_step", "end_step", "steps", "gpu_start", "gpus"]
    table = pd.DataFrame(rows, columns=columns)
    if step_minutes is not None:
        table["gpu_hours"] = table["gpus"] * table["steps"] * step_minutes / 60.0
    return table.sort_values(["start_step", "gpu_start", "gpus"], ignore_index=True)


def _runs(flags: np.ndarray) -> list[tuple[int, int]]:
    """Maximal runs of True as (start, end exclusive)."""
    padded = np.concatenate([[False], flags, [False]])
    edges = np.flatnonzero(padded[1:] != padded[:-1])
    return [(int(edges[k]), int(edges[k + 1])) for k in range(0, len(edges), 2)]
