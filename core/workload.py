"""The workload as planners edit it: uploads, the editor's typed tables, page controls.

Pure functions between files or tables and a validated `Scenario` (no streamlit here): the app's
pages call them, and the tests call them directly. Problems come back keyed by table row so the
editor can show each one next to its row.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import pandas as pd

from .formats import (
    csv_pair,
    decode_upload,
    detect,
    read_sources,
)
from .formats.jobrow import (
    INT_COLUMNS,
    ROW_COLUMNS,
    cell_value,
    job_to_row,
    read_row,
)
from .formats.jobrow import (
    NO_GPUS as NO_GPUS,  # the editor's pages show this notation
)
from .model import REALTIME_TYPE, BatchJob, RealtimeJob, Scenario, ScenarioError, shown


def scenario_from_uploads(files: list[tuple[str, bytes]], base: Scenario) -> tuple[Scenario, str]:
    """A scenario from uploaded files: one JSON, or a jobs CSV and a demand CSV (any order)."""
    texts = [(name, decode_upload(data, name)) for name, data in files]
    fmt = detect(texts)
    scenario = read_sources(texts, fmt.name, base=base)
    if fmt.name == csv_pair.FORMAT:
        texts.sort(key=lambda nt: csv_pair.role(nt[1][:4096]) != "jobs")
    return scenario, f"upload: {' + '.join(name for name, _ in texts)}"


# ---------------------------------------------------------------------------------------------
# The editor's tables (pure): one row per job, read and written by the job-row codec of jobs.csv

# gpu_hours_actual is known to the simulation only: the editor keeps it from the base job.
JOB_TABLE_COLUMNS = tuple(c for c in ROW_COLUMNS if c != "gpu_hours_actual")
_INT_COLUMNS = INT_COLUMNS
# SPEC section 8's job fields, as columns where the cluster has nodes (a job's own `speed` per
# type is kept from the base job, as its file gives it).
NODE_JOB_COLUMNS = ("gpu_types", "min_gpu_memory_gb", "multi_node")


def editor_tables(s: Scenario) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(jobs, demand): one row per job with typed (nullable) columns; demand as steps x jobs."""
    rows = [{c: job_to_row(job)[c] for c in JOB_TABLE_COLUMNS} for job in s.jobs]
    jobs = pd.DataFrame(
        rows, columns=list(JOB_TABLE_COLUMNS), index=pd.RangeIndex(1, len(rows) + 1, name="row")
    )
    for c in _INT_COLUMNS:
        jobs[c] = pd.array(jobs[c].tolist(), dtype="Int64")
    for c in ("priority", "gpu_hours"):
        jobs[c] = pd.array(
            [None if v is None or pd.isna(v) else float(v) for v in jobs[c].tolist()],
            dtype="Float64",
        )
    for c in ("id", "type", "previous_gpus", "team"):
        jobs[c] = jobs[c].astype("string")
    if s.cluster.nodes:
        jobs["gpu_types"] = pd.array(
            [None if j.gpu_types is None else ", ".join(j.gpu_types) for j in s.jobs],
            dtype="string",
        )
        jobs["min_gpu_memory_gb"] = pd.array(
            [None if j.min_gpu_memory_gb is None else float(j.min_gpu_memory_gb) for j in s.jobs],
            dtype="Float64",
        )
        jobs["multi_node"] = pd.array(
            [None if isinstance(j, RealtimeJob) else j.multi_node for j in s.jobs],
            dtype="boolean",
        )
        # beside the sizes and the work, where a planner reads a job's shape
        at = list(jobs.columns).index("gpu_hours") + 1
        jobs = jobs[[*jobs.columns[:at], *NODE_JOB_COLUMNS, *jobs.columns[at:-3]]]
    demand = pd.DataFrame(
        {j.id: list(j.demand) for j in s.realtime_jobs},
        index=pd.RangeIndex(s.cluster.horizon_steps, name="step"),
    )
    return jobs, demand.astype(float)


@dataclass
class EditResult:
    """What the editor's tables make: a scenario when valid, otherwise the problems by row;
    and by row, the cells its job ignores (valid values in columns its type does not use)."""

    scenario: Scenario | None
    row_issues: dict[int, list[str]] = field(default_factory=dict)
    general: list[str] = field(default_factory=list)
    ignored: dict[int, list[str]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.scenario is not None


def scenario_from_editor(
    base: Scenario, jobs: pd.DataFrame, demand: pd.DataFrame | None
) -> EditResult:
    """Validate the edited tables by building a Scenario; problems are keyed by table row.

    A new real-time job without a demand column starts at gpus_min for every step.
    """
    T = base.cluster.horizon_steps
    old = {j.id: j for j in base.jobs}
    built, row_of_job, issues, ignored = [], {}, {}, {}
    for row_number, (_, row) in enumerate(jobs.iterrows()):
        try:
            job, unused = _editor_job(row, demand, old, T)
        except ScenarioError as e:
            issues.setdefault(row_number, []).extend(_strip_owner(p) for p in e.problems)
            continue
        except (TypeError, ValueError) as e:
            issues.setdefault(row_number, []).append(str(e))
            continue
        built.append(job)
        row_of_job.setdefault(job.id, []).append(row_number)
        if unused:
            ignored[row_number] = unused
    if issues:
        return EditResult(None, issues, ignored=ignored)
    try:
        return EditResult(base.replace(jobs=tuple(built)), ignored=ignored)
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
        return EditResult(None, issues, general, ignored)


@dataclass(eq=False)
class PendingEdits:
    """Editor tables that do not validate yet, kept (not applied) until they are fixed or
    discarded, beside the scenario tables they were made on."""

    base_jobs: pd.DataFrame
    base_demand: pd.DataFrame
    jobs: pd.DataFrame
    demand: pd.DataFrame

    def made_on(self, jobs: pd.DataFrame, demand: pd.DataFrame) -> bool:
        """Whether these are still the tables the edits were made on: a change the tables do
        not show (the policy, the cluster size) keeps the edits; a change to a job or to the
        demand (another workload, a swap cap, the horizon) would be undone by them."""
        return self.base_jobs.equals(jobs) and self.base_demand.equals(demand)

    def shows(self, jobs: pd.DataFrame, demand: pd.DataFrame) -> bool:
        """Whether `jobs` and `demand` are exactly these edits."""
        return self.jobs.equals(jobs) and self.demand.equals(demand)

    def renumbered(self) -> pd.DataFrame:
        """The edited jobs with their rows numbered 1..n again, as the issues name them
        (deleted rows leave gaps in the editor's numbers, added ones come after the last)."""
        jobs = self.jobs.copy()
        jobs.index = pd.RangeIndex(1, len(jobs) + 1, name="row")
        return jobs


def _editor_job(row: pd.Series, demand: pd.DataFrame | None, old: dict, T: int):
    """One editor row through the job-row codec, with section 8's fields (`_node_fields`)."""
    job, unused = _coded_job(row, demand, old, T)
    return _node_fields(job, row, old.get(job.id), unused)


def _node_fields(job, row: pd.Series, previous, unused: list[str]):
    """The job with the row's allowed GPU types, minimum memory and multi_node (where the table
    has those columns; else as the base job had them), and a batch job's own speeds kept from
    the base job. multi_node false on a real-time row is a cell its job ignores."""
    from dataclasses import replace

    fields: dict = {}
    kept = previous if type(previous) is type(job) else None
    for name in NODE_JOB_COLUMNS:
        if name in row.index:
            fields[name] = row.get(name)
        elif kept is not None and hasattr(kept, name):
            fields[name] = getattr(kept, name)
    if "gpu_types" in fields:
        fields["gpu_types"] = _type_list(fields["gpu_types"])
    if "min_gpu_memory_gb" in fields:
        value = fields["min_gpu_memory_gb"]
        fields["min_gpu_memory_gb"] = None if value is None or pd.isna(value) else float(value)
    multi = fields.pop("multi_node", None)
    multi = None if multi is None or pd.isna(multi) else bool(multi)
    if isinstance(job, BatchJob):
        fields["multi_node"] = True if multi is None else multi
        if isinstance(previous, BatchJob) and previous.speed is not None:
            fields["speed"] = previous.speed
    elif multi is False:
        unused = [*unused, "multi_node false does not apply to a realtime job (batch types only)"]
    changed = {k: v for k, v in fields.items() if getattr(job, k) != v}
    return (replace(job, **changed) if changed else job), unused


def _type_list(cell) -> tuple[str, ...] | None:
    """'A10, H100' (commas or spaces) -> ('A10', 'H100'); an empty cell -> None (every type)."""
    if cell is None or (not isinstance(cell, str | tuple | list) and pd.isna(cell)):
        return None
    if isinstance(cell, tuple | list):
        return tuple(cell) or None
    names = tuple(n for n in re.split(r"[,\s]+", str(cell)) if n)
    return names or None


def _coded_job(row: pd.Series, demand: pd.DataFrame | None, old: dict, T: int):
    """One editor row through the job-row codec, and the cells its job ignores; demand, history
    and actual work as the editor keeps them (a demand column, else the old job's, else
    gpus_min at every step; a batch job's actual work while it stays batch)."""
    cells = {c: row.get(c) for c in JOB_TABLE_COLUMNS}
    job_id = cell_value("", "id", cells["id"])
    previous = old.get(job_id)
    if cell_value("", "type", cells["type"]) != REALTIME_TYPE:
        if isinstance(previous, BatchJob) and previous.gpu_hours_actual is not None:
            cells["gpu_hours_actual"] = previous.gpu_hours_actual
        return read_row(cells)
    if demand is not None and job_id in demand.columns:
        values = [cell_value(f"job '{job_id}'", "demand", v) for v in demand[job_id].tolist()]
        series = [0.0 if v is None else v for v in values]
    elif isinstance(previous, RealtimeJob):
        series = list(previous.demand)
    else:
        gpus_min = cell_value(f"job '{job_id}'", "gpus_min", cells["gpus_min"])
        series = [gpus_min if isinstance(gpus_min, int | float) else 0] * T
    history = previous.history if isinstance(previous, RealtimeJob) else None
    return read_row(cells, demand=series, history=history, defaults={"swap_cap": 0})


def _strip_owner(problem: str) -> str:
    """'job 'x': gpus_max 3 ...' -> 'gpus_max 3 ...' (the row already names the job)."""
    return re.sub(
        r"^(jobs\[\d+\]|job '.*?')(: running)?: ",
        lambda m: "running: " if m.group(2) else "",
        problem,
    )


NO_ID = "(no id yet)"  # issues_table's job column for a row whose id is still empty


def issues_table(jobs: pd.DataFrame, result: EditResult) -> pd.DataFrame:
    """One line per problem: the row number (1-based, as the editor shows), job id and issue."""
    lines = []
    for r in sorted(result.row_issues):
        job_id = jobs.iloc[r]["id"] if r < len(jobs) else ""
        for problem in result.row_issues[r]:
            # a lone surrogate, escaped; a row without an id yet is named by its number alone
            job = NO_ID if pd.isna(job_id) or not str(job_id).strip() else shown(str(job_id))
            lines.append({"row": r + 1, "job": job, "issue": shown(problem)})
    for problem in result.general:
        lines.append({"row": None, "job": "", "issue": shown(problem)})
    return pd.DataFrame(lines, columns=["row", "job", "issue"])


def ignored_lines(jobs: pd.DataFrame, result: EditResult) -> list[str]:
    """One line per cell the edited jobs ignore, naming its row (as the editor numbers it),
    job and field: "row 2, job 'chat-api': gpu_hours 5 does not apply to a realtime job ..."."""
    return [
        f"row {r + 1}, job '{shown(str(jobs.iloc[r]['id']).strip())}': {shown(line)}"
        for r in sorted(result.ignored)
        for line in result.ignored[r]
    ]


KEEP = "keep"  # with_controls: leave the coverage target as the scenario has it


def with_controls(
    s: Scenario,
    *,
    decay: float,
    penalty_weight: float,
    swap_caps: dict[str, int],
    coverage_target: float | None | str = KEEP,
) -> Scenario:
    """The scenario with the page's policy and per-job swap caps (validated again).

    `coverage_target` is a share in (0, 1], None for no target, or KEEP.
    """
    from dataclasses import replace

    jobs = tuple(
        replace(j, swap_cap=int(swap_caps[j.id]))
        if isinstance(j, RealtimeJob) and j.id in swap_caps
        else j
        for j in s.jobs
    )
    policy = replace(s.policy, decay=float(decay), penalty_weight=float(penalty_weight))
    if coverage_target != KEEP:
        target = None if coverage_target is None else float(coverage_target)
        policy = replace(policy, rt_coverage_target=target)
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
