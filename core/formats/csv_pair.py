"""The CSV pair of SPEC section 3: jobs.csv (one job per row) and demand.csv (step,job_id,demand).

The pair carries only jobs and demand: name, description, cluster and policy come from the
scenario it is loaded into (`base`), so JSON -> CSV pair -> JSON is exact. demand.csv rows with
negative steps are a service's hourly history before step 0 (-1 is the hour just before).
"""

from __future__ import annotations

import math

from ..model import MAX_HISTORY_STEPS, REALTIME_TYPE, Job, Scenario, ScenarioError
from .cells import csv_header, number_cell, plain_number, read_csv, text_cell, write_csv
from .jobrow import JOBS_COLUMNS, JOBS_OPTIONAL_COLUMNS, job_from_row, job_to_row

FORMAT = "csv-pair"
DEMAND_COLUMNS = ("step", "job_id", "demand")


def role(head: str) -> str | None:
    """'jobs' or 'demand' when the text's header is that half of the pair, else None."""
    header = set(csv_header(head))
    if {"id", "type"} <= header:
        return "jobs"
    if set(DEMAND_COLUMNS) <= header:
        return "demand"
    return None


def sniff(name: str, head: str) -> bool:
    return role(head) is not None


def read(texts: list[tuple[str, str]], base: Scenario | None = None) -> Scenario:
    """The pair given as two (name, text) in any order, told apart by their headers."""
    by_role: dict[str, list[tuple[str, str]]] = {"jobs": [], "demand": []}
    for name, text in texts:
        found = role(text[:4096])
        if found is not None:
            by_role[found].append((name, text))
    names = ", ".join(n for n, _ in texts)
    if len(texts) != 2 or len(by_role["jobs"]) != 1 or len(by_role["demand"]) != 1:
        have = ""
        if len(texts) == 1 and by_role["jobs"]:
            have = " (this is the jobs half: a demand.csv is needed too)"
        elif len(texts) == 1 and by_role["demand"]:
            have = " (this is the demand half: a jobs.csv is needed too)"
        raise ScenarioError(
            f"{names}: need a jobs CSV (header {','.join(JOBS_COLUMNS)}) and a demand CSV "
            f"(header {','.join(DEMAND_COLUMNS)}) together{have}"
        )
    if base is None:
        raise ScenarioError(
            f"{names}: the CSV pair carries only jobs and demand; load it into a scenario "
            f"that gives the cluster, horizon and policy"
        )
    (jobs_name, jobs_text), (demand_name, demand_text) = by_role["jobs"][0], by_role["demand"][0]
    return scenario_from_tables(
        jobs_text, demand_text, base, jobs_name=jobs_name, demand_name=demand_name
    )


def scenario_to_tables(scenario: Scenario) -> tuple[str, str]:
    """(jobs.csv, demand.csv) text. History hours go into demand.csv as negative steps."""
    rows = [job_to_row(job) for job in scenario.jobs]
    extras = [c for c in JOBS_OPTIONAL_COLUMNS if any(row[c] is not None for row in rows)]
    columns = (*JOBS_COLUMNS, *extras)
    jobs_rows = [
        {c: "" if row[c] is None else plain_number(row[c]) for c in columns} for row in rows
    ]
    demand_rows = []
    for job in scenario.realtime_jobs:
        history = job.history or ()
        for k, h in enumerate(history):
            demand_rows.append(
                {
                    "step": k - len(history),
                    "job_id": job.id,
                    "demand": "" if math.isnan(h) else plain_number(h),
                }
            )
        for t, d in enumerate(job.demand):
            demand_rows.append({"step": t, "job_id": job.id, "demand": plain_number(d)})
    return write_csv(jobs_rows, columns), write_csv(demand_rows, DEMAND_COLUMNS)


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
    problems: list[str] = []  # (a file that cannot be read does not hide the other's problems)
    try:
        demand_by_job, history_by_job = _read_demand(
            demand_text, demand_name, base.cluster.horizon_steps
        )
    except ScenarioError as e:
        problems.extend(e.problems)
    try:
        _, rows = read_csv(jobs_text, jobs_name, JOBS_COLUMNS, JOBS_OPTIONAL_COLUMNS)
    except ScenarioError as e:
        problems.extend(e.problems)
    if problems:
        raise ScenarioError("; ".join(problems[:5]), problems)
    jobs: list[Job] = []
    for line, row in rows:
        where = f"{jobs_name}: row {line}"
        try:
            job_id = text_cell(row["id"])
            if text_cell(row["type"]) == REALTIME_TYPE and job_id and job_id not in demand_by_job:
                raise ScenarioError(f"job '{job_id}': has no rows in {demand_name}")
            demand = demand_by_job.get(job_id, (0, None))[1]
            jobs.append(job_from_row(row, demand=demand, history=history_by_job.get(job_id)))
        except ScenarioError as e:
            problems.extend(f"{where}: {p}" for p in e.problems)
    # every row's id, read or refused (a refused row is reported: its demand rows are not news)
    known = {text_cell(row["id"]) for _, row in rows}
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


def _read_demand(text: str, name: str, steps: int):
    _, rows = read_csv(text, name, DEMAND_COLUMNS, ())
    values: dict[str, dict[int, float]] = {}
    first_line: dict[str, int] = {}
    for line, row in rows:
        where = f"{name}: row {line}"
        job_id = text_cell(row["job_id"])
        step = number_cell(where, "step", row["step"])
        if not isinstance(step, int):
            raise ScenarioError(f"{where}: step must be a whole number, got {row['step']!r}")
        if step >= steps:
            raise ScenarioError(f"{where}: step {step} is past the horizon of {steps} steps")
        if step < -MAX_HISTORY_STEPS:
            raise ScenarioError(
                f"{where}: step {step} is before the history limit of {MAX_HISTORY_STEPS:,} "
                f"hours (step -{MAX_HISTORY_STEPS:,})"
            )
        if not job_id:
            raise ScenarioError(f"{where}: job_id is empty")
        demand = number_cell(where, "demand", row["demand"], required=step >= 0)
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
            # distinct whole steps in [past[0], -1]: gap-free exactly when there are -past[0]
            if len(past) != -past[0]:
                raise ScenarioError(
                    f"{name}: job '{job_id}' history steps must run without gaps up to -1"
                )
            history_by_job[job_id] = tuple(by_step[t] for t in past)
    return demand_by_job, history_by_job
