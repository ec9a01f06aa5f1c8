"""The plan exports of SPEC section 3: grid.csv, assignments.csv, realtime.csv, metrics.json."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..model import Scenario
from ..plan import Plan, holdings, job_outcomes, report, team_outcomes
from ..tables import step_time
from .cells import plain_number, write_csv
from .grid import gpu_nodes, grid_to_csv

AS_RUN_COLUMN = "as-run"  # summary.csv's column of what the real scheduler did (as_run "planner")

ASSIGNMENT_COLUMNS = (
    "job_id",
    "type",
    "priority",
    "gpu_start",
    "gpus",
    "start_step",
    "end_step",
    "arrival_step",
    "wait_steps",
    "completed",
    "delivered_gpu_hours",
    "start_time",
    "end_time",
)


def assignments_to_csv(scenario: Scenario, plan: Plan) -> str:
    """One row per batch job: its block and steps (blank when unplaced), then what it got.

    `end_step` is exclusive; `wait_steps` is blank for jobs not started or already running;
    times are step boundaries from `cluster.start`. With deadlines: `deadline_step` and
    `lateness_hours` (0 on time, blank when it does not complete); with teams: `team`; on a
    cluster with nodes (SPEC section 8): `gpu_type` and `nodes` (space-separated node names).
    """
    hours = scenario.cluster.step_hours
    outcomes = job_outcomes(scenario, plan)
    deadlines = any(o.job.deadline_step is not None for o in outcomes)
    teams = any(o.job.team is not None for o in outcomes)
    nodes = gpu_nodes(scenario) if scenario.cluster.nodes else None
    rows = []
    for o in outcomes:
        job, p = o.job, o.placement
        row: dict[str, Any] = {
            "job_id": job.id,
            "type": job.type,
            "priority": plain_number(job.priority),
            "gpu_start": p.gpu_start if p else "",
            "gpus": p.gpus if p else "",
            "start_step": p.start_step if p else "",
            "end_step": p.end_step if p else "",
            "arrival_step": job.arrival_step,
            "wait_steps": "" if o.wait_steps is None else o.wait_steps,
            "completed": "true" if o.completed else "false",
            "delivered_gpu_hours": plain_number(round(o.delivered_gpu_hours, 9)),
            "start_time": step_time(scenario, p.start_step) if p else "",
            "end_time": step_time(scenario, p.end_step) if p else "",
        }
        if deadlines:
            lateness = o.lateness_steps()
            row["deadline_step"] = "" if job.deadline_step is None else job.deadline_step
            row["lateness_hours"] = "" if lateness is None else plain_number(lateness * hours)
        if teams:
            row["team"] = job.team or ""
        if nodes:
            row["gpu_type"], row["nodes"] = _where(scenario, p, nodes) if p else ("", "")
        rows.append(row)
    columns = ASSIGNMENT_COLUMNS
    if deadlines:
        columns += ("deadline_step", "lateness_hours")
    if teams:
        columns += ("team",)
    if nodes:
        columns += ("gpu_type", "nodes")
    return write_csv(rows, columns)


def _where(scenario: Scenario, p: Any, nodes: tuple[list[str], list[str]]) -> tuple[str, str]:
    """A block's GPU type and its nodes ("h100x8-0", or "a10x4-0 a10x4-1" across nodes)."""
    node, gpu_type = nodes
    held = list(dict.fromkeys(node[g] for g in range(p.gpu_start, p.gpu_start + p.gpus)))
    return gpu_type[p.gpu_start], " ".join(held)


def summary_to_csv(
    scenario: Scenario, plans: Mapping[str, Plan], as_run: Mapping[str, Any] | None = None
) -> str:
    """One table to hand on: KPIs, then every batch job and team, one column per planner.

    Columns `section` (setting, kpi, job or team), `name`, then one per planner; the settings
    the plans were made under come first (the same in every column: the file says what it is of
    on its own), KPI cells are numbers, job and team cells a short outcome ("done, steps 3-9,
    waited 1 h").

    `as_run` (an imported history's as-run metrics, as `ImportResult.as_run`) adds a last
    column `as-run`, what the real scheduler did in the window: its KPI cells where the import
    measures them (blank where it does not, and the objective when it is None: computed under
    another policy), blank job and team cells.
    """
    from ..tables import KPI_COLUMNS, kpi_table

    names = list(plans)
    columns = (*names, AS_RUN_COLUMN) if as_run is not None else tuple(names)
    c, policy = scenario.cluster, scenario.policy
    hours = c.step_hours
    settings = {
        "scenario": scenario.name,
        "gpus": c.gpus,
        "horizon": f"{c.horizon_steps} steps of {c.step_minutes} min"
        + (f" from {c.start:%Y-%m-%dT%H:%M}" if c.start else ""),
        "penalty_weight": policy.penalty_weight,
        "decay": policy.decay,
        "rt_coverage_target": policy.rt_coverage_target,
    }
    rows: list[dict[str, Any]] = [
        {"section": "setting", "name": key, **dict.fromkeys(columns, _kpi_cell(value))}
        for key, value in settings.items()
    ]
    key_of = {label: key for key, label in KPI_COLUMNS}
    for record in kpi_table(scenario, plans).to_dict("records"):
        cells = {n: _kpi_cell(record[n]) for n in names}
        if as_run is not None:
            cells[AS_RUN_COLUMN] = _kpi_cell(as_run.get(key_of[record["KPI"]]))
        rows.append({"section": "kpi", "name": record["KPI"], **cells})
    outcomes = {n: job_outcomes(scenario, plan) for n, plan in plans.items()}
    for k, job in enumerate(scenario.batch_jobs):
        cells = {n: _job_words(outcomes[n][k], hours) for n in names}
        rows.append({"section": "job", "name": job.id, **cells})
    per_team = {n: {t.team: t for t in team_outcomes(scenario, plan)} for n, plan in plans.items()}
    for team in sorted({t for teams in per_team.values() for t in teams}):
        cells = {}
        for n in names:
            t = per_team[n].get(team)
            cells[n] = (
                f"{t.gpu_hours:,.1f} GPU-h, value {t.value:,.1f}, "
                f"{t.completed_jobs}/{t.batch_jobs} done"
                if t
                else ""
            )
        rows.append({"section": "team", "name": team, **cells})
    return write_csv(rows, ("section", "name", *columns))


def _kpi_cell(value: Any) -> Any:
    """Blank for a missing value, whole numbers without '.0', others as they are."""
    value = json_safe(value)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return plain_number(value) if isinstance(value, float) else value


def _job_words(o: Any, hours: float) -> str:
    """A batch job's outcome in a few words."""
    p = o.placement
    if p is None:
        words = "not started"
    elif o.completed:
        last = p.end_step - 1
        steps = f"step {last}" if last == p.start_step else f"steps {p.start_step}-{last}"
        words = f"done, {steps}"
    else:
        words = f"cut by the horizon, from step {p.start_step}"
    if o.wait_steps:
        words += f", waited {o.wait_steps * hours:g} h"
    if o.late:
        words += ", late"
    return words


def realtime_to_csv(scenario: Scenario, plan: Plan) -> str:
    held = holdings(scenario, plan)
    rows = []
    for job in scenario.realtime_jobs:
        allocated = held[scenario.job_index(job.id)]
        for t, demand in enumerate(job.demand):
            n = int(allocated[t])
            rows.append(
                {
                    "step": t,
                    "job_id": job.id,
                    "demand": plain_number(demand),
                    "allocated": n,
                    "shortfall": plain_number(round(max(0.0, demand - n), 9)),
                }
            )
    return write_csv(rows, ("step", "job_id", "demand", "allocated", "shortfall"))


def metrics_to_json(values: Mapping[str, Any]) -> str:
    return json.dumps(json_safe(dict(values)), indent=2) + "\n"


def json_safe(value: Any) -> Any:
    """Plain JSON values: numpy scalars as Python numbers, inf and NaN as null."""
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def plan_exports(scenario: Scenario, plan: Plan) -> dict[str, str]:
    """The four exports of SPEC section 3, by file name."""
    return {
        "grid.csv": grid_to_csv(scenario, plan),
        "assignments.csv": assignments_to_csv(scenario, plan),
        "realtime.csv": realtime_to_csv(scenario, plan),
        "metrics.json": metrics_to_json(report(scenario, plan)),
    }


def export_name(scenario: Scenario, planner: str | None, file_name: str) -> str:
    """`<scenario>-<planner>-grid.csv` (`<scenario>-jobs.csv` without a planner; the stem alone
    without a file name): a download that says what it is, safe as a file name, the same on
    every page ("sacct 2026-01-15T00:00" -> "sacct-2026-01-15T00-00")."""
    named = f"{scenario.name}-{planner}" if planner else scenario.name
    stem = "".join(c if c.isalnum() or c in "-_." else "-" for c in named).strip("-.")
    stem = stem or ("plan" if planner else "workload")
    return f"{stem}-{file_name}" if file_name else stem


def write_exports(scenario: Scenario, plan: Plan, folder: str | Path) -> list[Path]:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in plan_exports(scenario, plan).items():
        path = folder / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
