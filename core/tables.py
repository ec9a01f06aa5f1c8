"""Pure pandas tables of plan outcomes for the pages and the summary export (no streamlit).

`job_table` answers "completed 9/10, but which one?": one row per batch job, planners side by
side, unfinished and unstarted jobs first. `team_table` and `kpi_table` give the per-team and
per-planner views a planner hands on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

import pandas as pd

from .model import Scenario
from .nodes import type_names
from .plan import Plan, job_outcomes, metrics, team_outcomes

# The KPIs a summary shows, with their units, in the order a planner reads them.
KPI_COLUMNS = (
    ("utilization", "utilization"),
    ("allocated_fraction", "allocated"),
    ("value", "value (priority-weighted GPU-h)"),
    ("objective", "objective"),
    ("completed_jobs", "completed jobs"),
    ("unstarted_jobs", "unstarted jobs"),
    ("rt_coverage", "real-time coverage"),
    ("rt_shortfall_gpu_hours", "real-time shortfall (GPU-h)"),
    ("wait_hours_p50", "wait p50 (h)"),
    ("wait_hours_p90", "wait p90 (h)"),
    ("idle_gpu_hours", "idle (GPU-h)"),
    ("reserved_idle_gpu_hours", "reserved idle (GPU-h)"),
    ("fragmented_gpu_hours", "fragmented idle (GPU-h)"),
    ("late_jobs", "late jobs"),
    ("team_fairness", "team fairness (Jain)"),
    ("cost", "cost"),
    ("idle_cost", "idle cost"),
    ("cost_per_value", "cost per value"),
)


def step_time(scenario: Scenario, step: int | None) -> str:
    """The wall-clock time of a step boundary ('' without a start or a step)."""
    c = scenario.cluster
    if c.start is None or step is None:
        return ""
    return (c.start + timedelta(minutes=c.step_minutes * step)).isoformat(timespec="minutes")


def job_table(scenario: Scenario, plans: Mapping[str, Plan]) -> pd.DataFrame:
    """One row per batch job; per planner: start, end, wait (h), completed, late.

    Rows where any planner leaves the job unfinished come first (unstarted before started but
    unfinished), then by priority, highest first.
    """
    hours = scenario.cluster.step_hours
    outcomes = {name: job_outcomes(scenario, plan) for name, plan in plans.items()}
    jobs = scenario.batch_jobs
    rows = []
    for k, job in enumerate(jobs):
        row: dict[str, object] = {
            "job": job.id,
            "type": job.type,
            "priority": job.priority,
            "arrival": job.arrival_step,
            "team": job.team or "",
        }
        worst = 2  # 0: unstarted somewhere, 1: unfinished somewhere, 2: done everywhere
        for name, per_job in outcomes.items():
            o = per_job[k]
            p = o.placement
            row[f"{name}: start"] = p.start_step if p else None
            row[f"{name}: end"] = p.end_step if p else None
            row[f"{name}: wait h"] = o.wait_steps * hours if o.wait_steps is not None else None
            row[f"{name}: completed"] = o.completed
            if job.deadline_step is not None:
                row[f"{name}: late"] = bool(o.late)
            worst = min(worst, 0 if not o.started else 1 if not o.completed else 2)
        row["_order"] = worst
        rows.append(row)
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    table = table.sort_values(["_order", "priority", "arrival"], ascending=[True, False, True])
    if not (table["team"] != "").any():
        table = table.drop(columns="team")
    return table.drop(columns="_order").reset_index(drop=True)


def wait_hours(scenario: Scenario, plan: Plan) -> list[float]:
    """The waits (hours) of the batch jobs the plan started (not those already running)."""
    hours = scenario.cluster.step_hours
    return [o.wait_steps * hours for o in job_outcomes(scenario, plan) if o.wait_steps is not None]


def team_table(scenario: Scenario, plans: Mapping[str, Plan]) -> pd.DataFrame:
    """Per planner and team: GPU-hours delivered, value, completed jobs, wait p50 (empty when
    no job names a team)."""
    rows = []
    for name, plan in plans.items():
        for t in team_outcomes(scenario, plan):
            rows.append(
                {
                    "planner": name,
                    "team": t.team,
                    "GPU-hours": t.gpu_hours,
                    "value": t.value,
                    "completed": f"{t.completed_jobs}/{t.batch_jobs}",
                    "wait p50 (h)": t.wait_hours_p50,
                }
            )
    return pd.DataFrame(rows)


def kpi_table(scenario: Scenario, plans: Mapping[str, Plan]) -> pd.DataFrame:
    """One row per KPI (with its unit), one column per planner; KPIs that are null for every
    planner (no price, no deadlines, no teams) are left out."""
    values = {name: metrics(scenario, plan) for name, plan in plans.items()}
    rows = []
    for key, label in KPI_COLUMNS:
        cells = {name: m.get(key) for name, m in values.items()}
        if all(v is None for v in cells.values()):
            continue
        rows.append({"KPI": label, **cells})
    return pd.DataFrame(rows)


# The per-type columns of `gpu_type_table`, from metrics' by_gpu_type (SPEC section 8).
GPU_TYPE_COLUMNS = (
    ("utilization", "utilization"),
    ("allocated_fraction", "allocated"),
    ("idle_gpu_hours", "idle GPU-h"),
    ("cost", "cost"),
    ("idle_cost", "idle cost"),
)


def gpu_type_table(
    scenario: Scenario,
    metrics_by_planner: Mapping[str, Mapping[str, object]],
    label: Callable[[str], str] = str,
) -> pd.DataFrame:
    """One row per GPU type and planner: the type's GPUs, utilization, allocated share, idle
    GPU-hours, cost and the part of it idle GPUs make (from metrics' `by_gpu_type`); empty on
    a cluster without nodes. Types in the cluster's order, planners as given."""

    if not scenario.cluster.nodes:
        return pd.DataFrame(
            columns=["GPU type", "GPUs", "planner", *dict(GPU_TYPE_COLUMNS).values()]
        )
    horizon_hours = scenario.cluster.horizon_steps * scenario.cluster.step_hours
    rows = []
    for gpu_type in type_names(scenario.cluster):
        for name, m in metrics_by_planner.items():
            per_type = (m.get("by_gpu_type") or {}).get(gpu_type)
            if per_type is None:
                continue
            per_type = {**per_type, "idle_cost": idle_cost(per_type, horizon_hours)}
            rows.append(
                {
                    "GPU type": gpu_type,
                    "GPUs": per_type["gpus"],
                    "planner": label(name),
                    **{shown: per_type[key] for key, shown in GPU_TYPE_COLUMNS},
                }
            )
    return pd.DataFrame(rows)


def idle_cost(per_type: Mapping[str, Any] | None, horizon_hours: float) -> float | None:
    """The part of a type's cost its idle GPU-hours make (None without a price)."""
    if not per_type or per_type.get("cost") is None or not per_type.get("gpus"):
        return None
    return float(per_type["cost"]) * per_type["idle_gpu_hours"] / (per_type["gpus"] * horizon_hours)
