"""Files in and out: scenario JSON, the jobs/demand CSV pair, grid imports and plan exports.

This is the edge where input is validated: every problem becomes a `ScenarioError` whose message
names the file, the row or job id, and the field. Sizes are checked before anything large is read
or allocated.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from .model import (
    JOB_TYPES,
    REALTIME_TYPE,
    BatchJob,
    Cluster,
    Job,
    Policy,
    RealtimeJob,
    Running,
    Scenario,
    ScenarioError,
)
from .plan import IDLE, Conflict, Plan, batch_placements, holdings, report

MAX_UPLOAD_MB = 20
MAX_UPLOAD_BYTES = MAX_UPLOAD_MB * 1024 * 1024

JOBS_COLUMNS = (
    "id",
    "type",
    "priority",
    "arrival_step",
    "gpus_min",
    "gpus_max",
    "gpu_hours",
    "swap_cap",
)
JOBS_OPTIONAL_COLUMNS = (
    "running_gpu_start",
    "running_gpus",
    "running_remaining_steps",
    "previous_gpus",
    "gpu_hours_actual",
    "team",
    "deadline_step",
)
DEMAND_COLUMNS = ("step", "job_id", "demand")
GRID_COLUMNS = ("step", "gpu", "job_id")

_CLUSTER_KEYS = {"gpus", "step_minutes", "horizon_steps", "start"}
_POLICY_KEYS = {
    "penalty_weight",
    "decay",
    "reward_weight",
    "rt_coverage_target",
    "gpu_hour_cost",
}
_BATCH_KEYS = {
    "id",
    "type",
    "priority",
    "arrival_step",
    "gpus_min",
    "gpus_max",
    "gpu_hours",
    "running",
    "gpu_hours_actual",
    "team",
    "deadline_step",
}
_REALTIME_KEYS = {
    "id",
    "type",
    "priority",
    "gpus_min",
    "gpus_max",
    "swap_cap",
    "demand",
    "previous_gpus",
    "history",
    "team",
}
_RUNNING_KEYS = {"gpu_start", "gpus", "remaining_steps"}


# ---------------------------------------------------------------------------------------------
# Reading text safely


def decode_upload(data: bytes, name: str, limit: int = MAX_UPLOAD_BYTES) -> str:
    """Bytes of an uploaded file as text: size limit, empty file and UTF-8 checked, BOM dropped."""
    if len(data) > limit:
        raise ScenarioError(
            f"{name}: file is {len(data) / 1e6:.1f} MB, larger than the upload limit of "
            f"{limit / 1e6:.0f} MB"
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ScenarioError(f"{name}: is not UTF-8 text (byte {e.start} cannot be read)") from None
    if not text.strip():
        raise ScenarioError(f"{name}: file is empty")
    return text


def read_text(path: str | Path, limit: int = MAX_UPLOAD_BYTES) -> str:
    """A file's text, with the same checks as an upload; the size is checked before reading."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > limit:
            return decode_upload(b"\0" * (limit + 1), path.name, limit)
        data = path.read_bytes()
    except FileNotFoundError:
        raise ScenarioError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ScenarioError(f"{path}: is a folder, not a file") from None
    except OSError as e:
        raise ScenarioError(f"{path}: cannot be read ({e.strerror})") from None
    return decode_upload(data, path.name, limit)


# ---------------------------------------------------------------------------------------------
# Scenario JSON


def load_scenario(path: str | Path) -> Scenario:
    return scenario_from_json(read_text(path), Path(path).name)


def scenario_from_json(text: str, name: str = "scenario.json") -> Scenario:
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as e:
        raise ScenarioError(
            f"{name}: not valid JSON at line {e.lineno}, column {e.colno}: {e.msg}"
        ) from None
    try:
        return scenario_from_dict(raw)
    except ScenarioError as e:
        raise e.with_prefix(name) from None


def scenario_from_dict(raw: Any) -> Scenario:
    if not isinstance(raw, dict):
        raise ScenarioError("the top level must be an object with cluster, policy and jobs")
    _no_unknown("scenario", raw, {"name", "description", "cluster", "policy", "jobs"})
    cluster_raw = _mapping("cluster", raw.get("cluster"))
    _no_unknown("cluster", cluster_raw, _CLUSTER_KEYS)
    _require("cluster", cluster_raw, ("gpus",))
    # The cluster is validated (limits included) before any job is looked at.
    cluster = Cluster(
        gpus=cluster_raw["gpus"],
        step_minutes=cluster_raw.get("step_minutes", 60),
        horizon_steps=cluster_raw.get("horizon_steps", 24),
        start=_timestamp("cluster", "start", cluster_raw.get("start")),
    )
    policy_raw = _mapping("policy", raw.get("policy", {}))
    _no_unknown("policy", policy_raw, _POLICY_KEYS)
    policy = Policy(**policy_raw)
    jobs_raw = raw.get("jobs")
    if not isinstance(jobs_raw, list):
        raise ScenarioError("scenario: jobs must be a list of job objects")
    jobs, problems = [], []
    for k, job_raw in enumerate(jobs_raw):
        try:
            jobs.append(job_from_dict(job_raw, k))
        except ScenarioError as e:
            problems.extend(e.problems)
    if problems:
        raise ScenarioError("; ".join(problems[:5]), problems)
    name = raw.get("name", "scenario")
    description = raw.get("description", "")
    if not isinstance(description, str):
        raise ScenarioError("scenario: description must be a string")
    return Scenario(
        name=name if isinstance(name, str) else str(name),
        cluster=cluster,
        jobs=tuple(jobs),
        policy=policy,
        description=description,
    )


def job_from_dict(raw: Any, position: int) -> Job:
    if not isinstance(raw, dict):
        raise ScenarioError(f"jobs[{position}]: must be an object")
    owner = f"job '{raw['id']}'" if isinstance(raw.get("id"), str) else f"jobs[{position}]"
    _require(owner, raw, ("id", "type", "priority"))
    job_type = raw["type"]
    if job_type not in JOB_TYPES:
        raise ScenarioError(f"{owner}: type {job_type!r} is not one of {', '.join(JOB_TYPES)}")
    if job_type == REALTIME_TYPE:
        _no_unknown(owner, raw, _REALTIME_KEYS)
        _require(owner, raw, ("gpus_min", "gpus_max", "swap_cap", "demand"))
        previous = raw.get("previous_gpus")
        if previous is not None and not isinstance(previous, list):
            raise ScenarioError(f"{owner}: previous_gpus must be a list of GPU numbers")
        history = raw.get("history")
        if history is not None and not isinstance(history, list):
            raise ScenarioError(f"{owner}: history must be a list of numbers")
        return RealtimeJob(
            id=raw["id"],
            priority=raw["priority"],
            gpus_min=raw["gpus_min"],
            gpus_max=raw["gpus_max"],
            swap_cap=raw["swap_cap"],
            demand=_list(owner, "demand", raw["demand"]),
            previous_gpus=tuple(previous) if previous is not None else None,
            history=tuple(history) if history is not None else None,
            team=raw.get("team"),
        )
    _no_unknown(owner, raw, _BATCH_KEYS)
    _require(owner, raw, ("gpus_min", "gpus_max", "gpu_hours"))
    running = None
    if raw.get("running") is not None:
        running_raw = _mapping(f"{owner}: running", raw["running"])
        _no_unknown(f"{owner}: running", running_raw, _RUNNING_KEYS)
        _require(f"{owner}: running", running_raw, tuple(sorted(_RUNNING_KEYS)))
        running = Running(**running_raw)
    return BatchJob(
        id=raw["id"],
        type=job_type,
        priority=raw["priority"],
        gpus_min=raw["gpus_min"],
        gpus_max=raw["gpus_max"],
        gpu_hours=raw["gpu_hours"],
        arrival_step=raw.get("arrival_step", 0),
        running=running,
        gpu_hours_actual=raw.get("gpu_hours_actual"),
        team=raw.get("team"),
        deadline_step=raw.get("deadline_step"),
    )


def scenario_to_dict(scenario: Scenario) -> dict[str, Any]:
    c = scenario.cluster
    cluster: dict[str, Any] = {
        "gpus": c.gpus,
        "step_minutes": c.step_minutes,
        "horizon_steps": c.horizon_steps,
    }
    if c.start is not None:
        cluster["start"] = c.start.isoformat()
    p = scenario.policy
    return {
        "name": scenario.name,
        "description": scenario.description,
        "cluster": cluster,
        "policy": {
            "penalty_weight": _num(p.penalty_weight),
            "decay": _num(p.decay),
            "reward_weight": _num(p.reward_weight),
            **{
                key: _num(getattr(p, key))
                for key in ("rt_coverage_target", "gpu_hour_cost")
                if getattr(p, key) is not None
            },
        },
        "jobs": [job_to_dict(job) for job in scenario.jobs],
    }


def job_to_dict(job: Job) -> dict[str, Any]:
    if isinstance(job, RealtimeJob):
        out: dict[str, Any] = {
            "id": job.id,
            "type": job.type,
            "priority": _num(job.priority),
            "gpus_min": job.gpus_min,
            "gpus_max": job.gpus_max,
            "swap_cap": job.swap_cap,
            "demand": [_num(d) for d in job.demand],
        }
        if job.previous_gpus is not None:
            out["previous_gpus"] = list(job.previous_gpus)
        if job.history is not None:
            out["history"] = [None if math.isnan(h) else _num(h) for h in job.history]
        if job.team is not None:
            out["team"] = job.team
        return out
    out = {
        "id": job.id,
        "type": job.type,
        "priority": _num(job.priority),
        "arrival_step": job.arrival_step,
        "gpus_min": job.gpus_min,
        "gpus_max": job.gpus_max,
        "gpu_hours": _num(job.gpu_hours),
    }
    if job.gpu_hours_actual is not None:
        out["gpu_hours_actual"] = _num(job.gpu_hours_actual)
    if job.team is not None:
        out["team"] = job.team
    if job.deadline_step is not None:
        out["deadline_step"] = job.deadline_step
    if job.running is not None:
        r = job.running
        out["running"] = {
            "gpu_start": r.gpu_start,
            "gpus": r.gpus,
            "remaining_steps": r.remaining_steps,
        }
    return out


def scenario_to_json(scenario: Scenario) -> str:
    return json.dumps(scenario_to_dict(scenario), indent=2) + "\n"


def save_scenario(scenario: Scenario, path: str | Path) -> None:
    Path(path).write_text(scenario_to_json(scenario), encoding="utf-8")


# ---------------------------------------------------------------------------------------------
# The CSV pair: jobs.csv and demand.csv


def scenario_to_tables(scenario: Scenario) -> tuple[str, str]:
    """(jobs.csv, demand.csv) text. History hours go into demand.csv as negative steps."""
    extras = [
        c for c in JOBS_OPTIONAL_COLUMNS if any(_optional_value(j, c) != "" for j in scenario.jobs)
    ]
    jobs_rows = []
    for job in scenario.jobs:
        row = {c: "" for c in (*JOBS_COLUMNS, *extras)}
        row.update(
            id=job.id,
            type=job.type,
            priority=_num(job.priority),
            gpus_min=job.gpus_min,
            gpus_max=job.gpus_max,
        )
        if isinstance(job, RealtimeJob):
            row["swap_cap"] = job.swap_cap
        else:
            row.update(arrival_step=job.arrival_step, gpu_hours=_num(job.gpu_hours))
        for c in extras:
            row[c] = _optional_value(job, c)
        jobs_rows.append(row)
    demand_rows = []
    for job in scenario.realtime_jobs:
        history = job.history or ()
        for k, h in enumerate(history):
            demand_rows.append(
                {
                    "step": k - len(history),
                    "job_id": job.id,
                    "demand": "" if math.isnan(h) else _num(h),
                }
            )
        for t, d in enumerate(job.demand):
            demand_rows.append({"step": t, "job_id": job.id, "demand": _num(d)})
    return (write_csv(jobs_rows, (*JOBS_COLUMNS, *extras)), write_csv(demand_rows, DEMAND_COLUMNS))


def _optional_value(job: Job, column: str) -> Any:
    if column == "team":
        return job.team if job.team is not None else ""
    if isinstance(job, BatchJob):
        r = job.running
        if column.startswith("running_"):
            return getattr(r, column.removeprefix("running_")) if r else ""
        if column == "gpu_hours_actual" and job.gpu_hours_actual is not None:
            return _num(job.gpu_hours_actual)
        if column == "deadline_step" and job.deadline_step is not None:
            return job.deadline_step
    elif column == "previous_gpus" and job.previous_gpus is not None:
        # "[]" says "held nothing before step 0", which limits step 0; blank says "unknown".
        return " ".join(str(g) for g in job.previous_gpus) or "[]"
    return ""


def scenario_from_tables(
    jobs_text: str,
    demand_text: str,
    base: Scenario,
    *,
    jobs_name: str = "jobs.csv",
    demand_name: str = "demand.csv",
) -> Scenario:
    """A scenario from the CSV pair; name, description, cluster and policy come from `base`.

    The horizon is the base cluster's; every real-time job needs one demand row per step.
    """
    demand_by_job, history_by_job = _read_demand(
        demand_text, demand_name, base.cluster.horizon_steps
    )
    header, rows = _read_csv(jobs_text, jobs_name, JOBS_COLUMNS, JOBS_OPTIONAL_COLUMNS)
    jobs: list[Job] = []
    problems: list[str] = []
    for line, row in rows:
        where = f"{jobs_name}: row {line}"
        try:
            jobs.append(_job_from_row(row, where, demand_by_job, history_by_job))
        except ScenarioError as e:
            problems.extend(
                f"{where}: {p}" if not p.startswith(jobs_name) else p for p in e.problems
            )
    known = {j.id for j in jobs}
    for job_id, (line, _) in demand_by_job.items():
        if job_id not in known:
            problems.append(
                f"{demand_name}: row {line}: job_id '{job_id}' is not a real-time "
                f"job in {jobs_name}"
            )
    if problems:
        raise ScenarioError("; ".join(problems[:5]), problems)
    try:
        return Scenario(
            name=base.name,
            description=base.description,
            cluster=base.cluster,
            policy=base.policy,
            jobs=tuple(jobs),
        )
    except ScenarioError as e:
        raise e.with_prefix(jobs_name) from None


def _job_from_row(row: dict[str, str], where: str, demand_by_job, history_by_job) -> Job:
    job_id = _unneutralise(row["id"])
    if not job_id.strip():
        raise ScenarioError(f"{where}: id is empty")
    job_type = row["type"].strip()
    owner = f"{where} (job '{job_id}')"
    if job_type not in JOB_TYPES:
        raise ScenarioError(f"{owner}: type {job_type!r} is not one of {', '.join(JOB_TYPES)}")

    def number(field: str, required: bool = True) -> Any:
        return _cell_number(owner, field, row.get(field, ""), required)

    try:
        if job_type == REALTIME_TYPE:
            if job_id not in demand_by_job:
                raise ScenarioError(f"{owner}: has no rows in the demand file")
            previous = row.get("previous_gpus", "").strip()
            empty_set = previous.replace(" ", "") == "[]"
            previous = previous.strip("[]").replace(",", " ")
            return RealtimeJob(
                id=job_id,
                priority=number("priority"),
                gpus_min=number("gpus_min"),
                gpus_max=number("gpus_max"),
                swap_cap=number("swap_cap"),
                demand=demand_by_job[job_id][1],
                previous_gpus=tuple(
                    _cell_number(owner, "previous_gpus", g) for g in previous.split()
                )
                if previous or empty_set
                else None,
                history=history_by_job.get(job_id),
                team=_unneutralise(row.get("team", "").strip()) or None,
            )
        running = None
        if row.get("running_gpus", "").strip():
            running = Running(
                gpu_start=number("running_gpu_start"),
                gpus=number("running_gpus"),
                remaining_steps=number("running_remaining_steps"),
            )
        return BatchJob(
            id=job_id,
            type=job_type,
            priority=number("priority"),
            arrival_step=number("arrival_step", False) or 0,
            gpus_min=number("gpus_min"),
            gpus_max=number("gpus_max"),
            gpu_hours=number("gpu_hours"),
            running=running,
            gpu_hours_actual=number("gpu_hours_actual", False),
            team=_unneutralise(row.get("team", "").strip()) or None,
            deadline_step=number("deadline_step", False),
        )
    except ScenarioError as e:
        # The model names the job; the table also names the row.
        raise ScenarioError("; ".join(f"{where}: {p}" for p in e.problems)) from None


def _read_demand(text: str, name: str, steps: int):
    _, rows = _read_csv(text, name, DEMAND_COLUMNS, ())
    values: dict[str, dict[int, float]] = {}
    first_line: dict[str, int] = {}
    for line, row in rows:
        where = f"{name}: row {line}"
        job_id = _unneutralise(row["job_id"])
        step = _cell_number(where, "step", row["step"])
        if not isinstance(step, int):
            raise ScenarioError(f"{where}: step must be a whole number, got {row['step']!r}")
        if step >= steps:
            raise ScenarioError(f"{where}: step {step} is past the horizon of {steps} steps")
        demand = _cell_number(where, "demand", row["demand"], required=step >= 0)
        if demand is not None and demand < 0:
            raise ScenarioError(f"{where}: demand must be >= 0, got {demand}")
        job_values = values.setdefault(job_id, {})
        first_line.setdefault(job_id, line)
        if step in job_values:
            raise ScenarioError(f"{where}: job '{job_id}' has a second row for step {step}")
        job_values[step] = math.nan if demand is None else demand
    demand_by_job, history_by_job = {}, {}
    for job_id, by_step in values.items():
        missing = [t for t in range(steps) if t not in by_step]
        if missing:
            raise ScenarioError(
                f"{name}: job '{job_id}' has no demand for step {missing[0]}"
                f"{f' (and {len(missing) - 1} more)' if len(missing) > 1 else ''}; one row per "
                f"step 0..{steps - 1} is needed"
            )
        demand_by_job[job_id] = (first_line[job_id], tuple(by_step[t] for t in range(steps)))
        past = sorted(t for t in by_step if t < 0)
        if past:
            if past != list(range(past[0], 0)):
                raise ScenarioError(
                    f"{name}: job '{job_id}' history steps must run without gaps up to -1"
                )
            history_by_job[job_id] = tuple(by_step[t] for t in past)
    return demand_by_job, history_by_job


def _read_csv(text: str, name: str, required: Iterable[str], optional: Iterable[str]):
    """(header, [(line number, row dict)]) with missing and unknown columns reported."""
    reader = csv.reader(io.StringIO(text))
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        raise ScenarioError(f"{name}: file is empty") from None
    except csv.Error as e:
        raise ScenarioError(f"{name}: row 1: cannot be read as CSV ({e})") from None
    required, optional = tuple(required), tuple(optional)
    missing = [c for c in required if c not in header]
    if missing:
        raise ScenarioError(
            f"{name}: missing column{'s' if len(missing) > 1 else ''} "
            f"{', '.join(missing)} (the header must have {', '.join(required)})"
        )
    unknown = [c for c in header if c not in required and c not in optional]
    if unknown:
        raise ScenarioError(
            f"{name}: unknown column{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(repr(c) for c in unknown)}"
        )
    if len(set(header)) != len(header):
        raise ScenarioError(f"{name}: a column appears twice in the header")
    rows = []
    try:
        for line, cells in enumerate(reader, start=2):
            if not any(c.strip() for c in cells):
                continue
            if len(cells) != len(header):
                raise ScenarioError(
                    f"{name}: row {line}: has {len(cells)} cells, the header has {len(header)}"
                )
            rows.append((line, dict(zip(header, cells, strict=True))))
    except csv.Error as e:
        raise ScenarioError(f"{name}: row {reader.line_num}: cannot be read as CSV ({e})") from None
    return header, rows


def _cell_number(owner: str, field: str, text: str, required: bool = True) -> Any:
    text = _unneutralise(text.strip())
    if not text:
        if required:
            raise ScenarioError(f"{owner}: {field} is empty")
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        raise ScenarioError(f"{owner}: {field} must be a number, got {text!r}") from None
    if not math.isfinite(value):
        raise ScenarioError(f"{owner}: {field} must be a finite number, got {text!r}")
    return value


# ---------------------------------------------------------------------------------------------
# Plan exports and grid imports

_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(value: Any) -> Any:
    """Numbers stay numbers; text that a spreadsheet would run as a formula gets a leading '."""
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS):
        return "'" + value
    return value


def _unneutralise(text: str) -> str:
    if text.startswith("'") and text[1:2] and text[1:].startswith(_FORMULA_STARTS):
        return text[1:]
    return text


def write_csv(rows: Iterable[Mapping[str, Any]], columns: Iterable[str]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: spreadsheet_safe(v) for k, v in row.items()})
    return out.getvalue()


def step_times(scenario: Scenario) -> list[str]:
    c = scenario.cluster
    if c.start is None:
        return [""] * c.horizon_steps
    return [
        (c.start + timedelta(minutes=c.step_minutes * t)).isoformat(timespec="minutes")
        for t in range(c.horizon_steps)
    ]


def grid_to_csv(scenario: Scenario, plan: Plan) -> str:
    """grid.csv: one row per held cell (step, gpu, job_id), then time and type."""
    times = step_times(scenario)
    gpus, steps = np.nonzero(plan.grid.T != IDLE)[::-1]
    order = np.lexsort((gpus, steps))
    ids = [job.id for job in scenario.jobs]
    types = [job.type for job in scenario.jobs]
    rows = (
        {
            "step": int(steps[k]),
            "gpu": int(gpus[k]),
            "job_id": ids[plan.grid[gpus[k], steps[k]]],
            "time": times[steps[k]],
            "type": types[plan.grid[gpus[k], steps[k]]],
        }
        for k in order
    )
    return write_csv(rows, (*GRID_COLUMNS, "time", "type"))


def plan_from_grid_csv(scenario: Scenario, text: str, name: str = "grid.csv") -> Plan:
    """A plan from grid.csv rows; a cell claimed twice is kept as a conflict for `check`."""
    _, rows = _read_csv(text, name, GRID_COLUMNS, ("time", "type"))
    G, T = scenario.cluster.gpus, scenario.cluster.horizon_steps
    if len(rows) > G * T * 2:
        raise ScenarioError(f"{name}: {len(rows):,} rows for a grid of {G * T:,} cells")
    plan = Plan.empty(scenario, planner="imported")
    conflicts = []
    for line, row in rows:
        where = f"{name}: row {line}"
        step = _cell_number(where, "step", row["step"])
        gpu = _cell_number(where, "gpu", row["gpu"])
        job_id = _unneutralise(row["job_id"].strip())
        if not isinstance(step, int) or not 0 <= step < T:
            raise ScenarioError(f"{where}: step {row['step']!r} is not a step 0..{T - 1}")
        if not isinstance(gpu, int) or not 0 <= gpu < G:
            raise ScenarioError(f"{where}: gpu {row['gpu']!r} is not a GPU 0..{G - 1}")
        if not scenario.has_job(job_id):
            raise ScenarioError(f"{where}: job_id '{job_id}' is not a job of the scenario")
        j = scenario.job_index(job_id)
        held = plan.grid[gpu, step]
        if held == IDLE:
            plan.grid[gpu, step] = j
        elif held != j:
            conflicts.append(Conflict(gpu, step, job_id, scenario.jobs[held].id))
    plan.conflicts = tuple(conflicts)
    return plan


def assignments_to_csv(scenario: Scenario, plan: Plan) -> str:
    placements = batch_placements(scenario, plan)
    rows = []
    for job in scenario.batch_jobs:
        p = placements.get(job.id)
        rows.append(
            {
                "job_id": job.id,
                "type": job.type,
                "priority": _num(job.priority),
                "gpu_start": p.gpu_start if p else "",
                "gpus": p.gpus if p else "",
                "start_step": p.start_step if p else "",
                "end_step": p.end_step if p else "",
            }
        )
    return write_csv(
        rows, ("job_id", "type", "priority", "gpu_start", "gpus", "start_step", "end_step")
    )


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
                    "demand": _num(demand),
                    "allocated": n,
                    "shortfall": _num(round(max(0.0, demand - n), 9)),
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


def write_exports(scenario: Scenario, plan: Plan, folder: str | Path) -> list[Path]:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in plan_exports(scenario, plan).items():
        path = folder / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


# ---------------------------------------------------------------------------------------------
# Small helpers


def _num(value: float) -> int | float:
    """Whole floats as ints, so JSON and CSV read naturally (5, not 5.0)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def _mapping(owner: str, value: Any) -> dict:
    if not isinstance(value, dict):
        raise ScenarioError(f"{owner}: must be an object, got {type(value).__name__}")
    return value


def _require(owner: str, raw: dict, keys: Iterable[str]) -> None:
    for key in keys:
        if key not in raw:
            raise ScenarioError(f"{owner}: missing field '{key}'")


def _no_unknown(owner: str, raw: dict, allowed: set[str]) -> None:
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise ScenarioError(
            f"{owner}: unknown field{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(repr(k) for k in unknown)}"
        )


def _list(owner: str, field: str, value: Any) -> tuple:
    if not isinstance(value, list):
        raise ScenarioError(f"{owner}: {field} must be a list of numbers")
    return tuple(value)


def _timestamp(owner: str, field: str, value: Any) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ScenarioError(f"{owner}: {field} must be an ISO timestamp string")
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise ScenarioError(f"{owner}: {field} {value!r} is not an ISO timestamp") from None
