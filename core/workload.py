"""The workload as planners edit it: uploads, the editor's typed tables, page controls.

Pure functions between files or tables and a validated `Scenario` (no streamlit here): the app's
pages call them, and the tests call them directly. Problems come back keyed by table row so the
editor can show each one next to its row.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from .io import (
    JOBS_COLUMNS,
    decode_upload,
    job_from_dict,
    scenario_from_json,
    scenario_from_tables,
)
from .model import REALTIME_TYPE, RealtimeJob, Scenario, ScenarioError


def scenario_from_uploads(files: list[tuple[str, bytes]], base: Scenario) -> tuple[Scenario, str]:
    """A scenario from uploaded files: one JSON, or a jobs CSV and a demand CSV (any order)."""
    texts = [(name, decode_upload(data, name)) for name, data in files]
    if len(texts) == 1 and texts[0][0].lower().endswith(".json"):
        name, text = texts[0]
        return scenario_from_json(text, name), f"upload: {name}"
    csvs = [(n, t) for n, t in texts if n.lower().endswith(".csv")]
    if len(csvs) != len(texts) or len(csvs) not in (1, 2):
        names = ", ".join(n for n, _ in texts)
        raise ScenarioError(
            f"{names}: upload one scenario .json file, or jobs.csv together with demand.csv"
        )
    jobs = [(n, t) for n, t in csvs if _header(t) >= {"id", "type"}]
    demand = [(n, t) for n, t in csvs if _header(t) >= {"step", "job_id", "demand"}]
    if len(jobs) != 1 or len(demand) != 1:
        names = ", ".join(n for n, _ in csvs)
        raise ScenarioError(
            f"{names}: need a jobs CSV (header {','.join(JOBS_COLUMNS)}) and a demand CSV "
            f"(header step,job_id,demand); the horizon, cluster and policy come from the active "
            f"scenario"
        )
    (jobs_name, jobs_text), (demand_name, demand_text) = jobs[0], demand[0]
    new = scenario_from_tables(
        jobs_text, demand_text, base, jobs_name=jobs_name, demand_name=demand_name
    )
    return new, f"upload: {jobs_name} + {demand_name}"


def _header(text: str) -> set[str]:
    first = text.lstrip("\ufeff").splitlines()[0] if text.strip() else ""
    return {c.strip() for c in first.split(",")}


# ---------------------------------------------------------------------------------------------
# The editor's tables (pure)

JOB_TABLE_COLUMNS = (
    "id",
    "type",
    "priority",
    "arrival_step",
    "gpus_min",
    "gpus_max",
    "gpu_hours",
    "swap_cap",
    "running_gpu_start",
    "running_gpus",
    "running_remaining_steps",
    "previous_gpus",
    "team",
    "deadline_step",
)
# previous_gpus: blank = nothing known (step 0 is free); NO_GPUS = held no GPU before step 0
# (the notation of jobs.csv).
NO_GPUS = "[]"
_INT_COLUMNS = (
    "arrival_step",
    "gpus_min",
    "gpus_max",
    "swap_cap",
    "running_gpu_start",
    "running_gpus",
    "running_remaining_steps",
    "deadline_step",
)


def editor_tables(s: Scenario) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(jobs, demand): one row per job with typed (nullable) columns; demand as steps x jobs."""
    rows = []
    for job in s.jobs:
        row: dict[str, Any] = {c: None for c in JOB_TABLE_COLUMNS}
        row.update(
            id=job.id,
            type=job.type,
            priority=float(job.priority),
            gpus_min=job.gpus_min,
            gpus_max=job.gpus_max,
            team=job.team,
        )
        if isinstance(job, RealtimeJob):
            row["swap_cap"] = job.swap_cap
            if job.previous_gpus is not None:
                row["previous_gpus"] = " ".join(str(g) for g in job.previous_gpus) or NO_GPUS
        else:
            row.update(
                arrival_step=job.arrival_step,
                gpu_hours=float(job.gpu_hours),
                deadline_step=job.deadline_step,
            )
            if job.running is not None:
                row.update(
                    running_gpu_start=job.running.gpu_start,
                    running_gpus=job.running.gpus,
                    running_remaining_steps=job.running.remaining_steps,
                )
        rows.append(row)
    jobs = pd.DataFrame(
        rows, columns=list(JOB_TABLE_COLUMNS), index=pd.RangeIndex(1, len(rows) + 1, name="row")
    )
    for c in _INT_COLUMNS:
        jobs[c] = pd.array(jobs[c].tolist(), dtype="Int64")
    for c in ("priority", "gpu_hours"):
        jobs[c] = pd.array(jobs[c].tolist(), dtype="Float64")
    for c in ("id", "type", "previous_gpus", "team"):
        jobs[c] = jobs[c].astype("string")
    demand = pd.DataFrame(
        {j.id: list(j.demand) for j in s.realtime_jobs},
        index=pd.RangeIndex(s.cluster.horizon_steps, name="step"),
    )
    return jobs, demand.astype(float)


@dataclass
class EditResult:
    """What the editor's tables make: a scenario when valid, otherwise the problems by row."""

    scenario: Scenario | None
    row_issues: dict[int, list[str]] = field(default_factory=dict)
    general: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.scenario is not None


def _cell(value: Any, integer: bool) -> Any:
    """A table cell as the model wants it: None when blank, int when whole, else float/str."""
    if value is None or value is pd.NA:
        return None
    if isinstance(value, str):
        return value.strip() or None
    try:
        if math.isnan(value):
            return None
    except TypeError:
        return value
    number = float(value)
    if integer and number.is_integer():
        return int(number)
    return number


def scenario_from_editor(
    base: Scenario, jobs: pd.DataFrame, demand: pd.DataFrame | None
) -> EditResult:
    """Validate the edited tables by building a Scenario; problems are keyed by table row.

    A new real-time job without a demand column starts at gpus_min for every step.
    """
    T = base.cluster.horizon_steps
    old = {j.id: j for j in base.jobs}
    built, row_of_job, issues = [], {}, {}
    for row_number, (_, row) in enumerate(jobs.iterrows()):
        raw = {c: _cell(row.get(c), c in _INT_COLUMNS) for c in JOB_TABLE_COLUMNS}
        try:
            job = job_from_dict(_job_dict(raw, demand, old, T), row_number)
        except ScenarioError as e:
            issues.setdefault(row_number, []).extend(_strip_owner(p) for p in e.problems)
            continue
        except (TypeError, ValueError) as e:
            issues.setdefault(row_number, []).append(str(e))
            continue
        built.append(job)
        row_of_job.setdefault(job.id, []).append(row_number)
    if issues:
        return EditResult(None, issues)
    try:
        return EditResult(base.replace(jobs=tuple(built)))
    except ScenarioError as e:
        general = []
        for problem in e.problems:
            named = re.match(r"job '(.+?)': ", problem)
            rows = row_of_job.get(named.group(1), []) if named else []
            if rows:
                # A duplicate id names the job: every row that carries it gets the message.
                for r in rows if "more than one job" in problem else rows[-1:]:
                    issues.setdefault(r, []).append(_strip_owner(problem))
            else:
                general.append(problem)
        return EditResult(None, issues, general)


def _job_dict(raw: dict[str, Any], demand: pd.DataFrame | None, old: dict, T: int) -> dict:
    job_id = raw["id"]
    out: dict[str, Any] = {
        "id": job_id,
        "type": raw["type"],
        "priority": raw["priority"],
        "gpus_min": raw["gpus_min"],
        "gpus_max": raw["gpus_max"],
        "team": raw["team"],
    }
    if raw["type"] == REALTIME_TYPE:
        out["swap_cap"] = raw["swap_cap"] if raw["swap_cap"] is not None else 0
        if demand is not None and job_id in demand.columns:
            values = [_cell(v, False) for v in demand[job_id].tolist()]
            out["demand"] = [0.0 if v is None else v for v in values]
        elif isinstance(old.get(job_id), RealtimeJob):
            out["demand"] = list(old[job_id].demand)
        else:
            out["demand"] = [raw["gpus_min"] or 0] * T
        if raw["previous_gpus"]:
            text = str(raw["previous_gpus"]).strip()
            out["previous_gpus"] = (
                []
                if text.lower() in (NO_GPUS, "none")
                else [_gpu_number(g) for g in text.replace(",", " ").split()]
            )
        previous = old.get(job_id)
        if isinstance(previous, RealtimeJob) and previous.history is not None:
            out["history"] = list(previous.history)
        return {k: v for k, v in out.items() if v is not None}
    out.update(
        arrival_step=raw["arrival_step"] if raw["arrival_step"] is not None else 0,
        gpu_hours=raw["gpu_hours"],
        deadline_step=raw["deadline_step"],
    )
    running = [raw["running_gpu_start"], raw["running_gpus"], raw["running_remaining_steps"]]
    if any(v is not None for v in running):
        out["running"] = {
            "gpu_start": running[0],
            "gpus": running[1],
            "remaining_steps": running[2],
        }
    previous = old.get(job_id)
    if (
        previous is not None
        and not isinstance(previous, RealtimeJob)
        and previous.gpu_hours_actual is not None
    ):
        out["gpu_hours_actual"] = previous.gpu_hours_actual
    return {k: v for k, v in out.items() if v is not None}


def _gpu_number(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        raise ScenarioError(f"previous_gpus: {text!r} is not a GPU number") from None


def _strip_owner(problem: str) -> str:
    """'job 'x': gpus_max 3 ...' -> 'gpus_max 3 ...' (the row already names the job)."""
    return re.sub(
        r"^(jobs\[\d+\]|job '.*?')(: running)?: ",
        lambda m: "running: " if m.group(2) else "",
        problem,
    )


def issues_table(jobs: pd.DataFrame, result: EditResult) -> pd.DataFrame:
    """One line per problem: the row number (1-based, as the editor shows), job id and issue."""
    lines = []
    for r in sorted(result.row_issues):
        job_id = jobs.iloc[r]["id"] if r < len(jobs) else ""
        for problem in result.row_issues[r]:
            lines.append(
                {"row": r + 1, "job": "" if pd.isna(job_id) else str(job_id), "issue": problem}
            )
    for problem in result.general:
        lines.append({"row": None, "job": "", "issue": problem})
    return pd.DataFrame(lines, columns=["row", "job", "issue"])


def with_controls(
    s: Scenario, *, decay: float, penalty_weight: float, swap_caps: dict[str, int]
) -> Scenario:
    """The scenario with the page's policy and per-job swap caps (validated again)."""
    from dataclasses import replace

    jobs = tuple(
        replace(j, swap_cap=int(swap_caps[j.id]))
        if isinstance(j, RealtimeJob) and j.id in swap_caps
        else j
        for j in s.jobs
    )
    policy = replace(s.policy, decay=float(decay), penalty_weight=float(penalty_weight))
    if policy == s.policy and jobs == s.jobs:
        return s
    return s.replace(policy=policy, jobs=jobs)


# ---------------------------------------------------------------------------------------------
# Demand forecast: lining an hourly forecast up with the scenario's steps (pure)


@dataclass(frozen=True)
class ForecastWindow:
    """Which forecast hours the scenario's steps fall on: step t uses hour `hours[t]` after the
    history's last hour (0 = the first forecast hour)."""

    hours: tuple[int, ...]
    note: str

    @property
    def horizon(self) -> int:
        return max(self.hours) + 1


def forecast_window(
    history_end: pd.Timestamp,
    s: Scenario,
    max_gap_hours: int = 28 * 24,
) -> ForecastWindow:
    """Line the scenario's steps up with the hours after the history (by clock when possible)."""
    c = s.cluster
    offset, note = 0, ""
    if c.start is None:
        note = "The scenario has no start time: its steps follow the history's last hour."
    else:
        first = history_end + pd.Timedelta(hours=1)
        gap = (pd.Timestamp(c.start) - first) / pd.Timedelta(hours=1)
        if 0 <= gap <= max_gap_hours:
            offset = int(math.floor(gap))
        elif gap < 0:
            note = (
                f"The scenario starts ({c.start:%Y-%m-%d %H:%M}) before the history ends "
                f"({history_end:%Y-%m-%d %H:%M}): its steps follow the history's last hour."
            )
        else:
            note = (
                f"The scenario starts {gap / 24:.0f} days after the history ends: its steps "
                f"follow the history's last hour."
            )
    hours = tuple(offset + int(t * c.step_minutes // 60) for t in range(c.horizon_steps))
    return ForecastWindow(hours, note)


def default_capacity(peak_demand: float, gpus_max: int) -> float:
    """Traffic one GPU serves, so that the peak forecast needs the job's gpus_max GPUs."""
    if not peak_demand > 0 or gpus_max < 1:
        return 1.0
    raw = peak_demand / gpus_max
    magnitude = 10 ** math.floor(math.log10(raw))
    return float(math.ceil(raw / magnitude * 2) / 2 * magnitude)
