"""What the pages show, computed without streamlit: names, defaults, formatted tables, warnings.

Each function is pure (values in, values out) so the app's pages stay thin and the tests can
check what a planner reads on screen: the name an uploaded CSV pair gets, the default capacity
of a real-time GPU, the realised-metrics table with its thousands separators, the union of idle
windows, the earliest finish of an estimated job.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import pandas as pd

from .model import Cluster, Scenario

# ---------------------------------------------------------------------------------------------
# Built-in scenarios and uploads

EXAMPLE = "example"


def builtin_order(names: Iterable[str], benchmarks: Sequence[str]) -> list[str]:
    """`example` first, then the benchmarks in their published order, then the rest by name."""
    names = list(names)
    first = [EXAMPLE] if EXAMPLE in names else []
    first += [b for b in benchmarks if b in names and b not in first]
    return first + sorted(n for n in names if n not in first)


_PAIR_WORDS = re.compile(r"(^|[-_. ])(jobs?|demand)($|[-_. ])", re.IGNORECASE)


def pair_name(jobs_file: str, demand_file: str) -> str:
    """The name of a workload uploaded as a CSV pair, from its file names.

    'team-a_jobs.csv' + 'team-a_demand.csv' -> 'team-a'; without a shared stem the two stems
    joined ('jobs.csv' + 'demand.csv' -> 'jobs+demand').
    """
    stems = [
        re.sub(r"\.csv$", "", f.rsplit("/", 1)[-1], flags=re.IGNORECASE)
        for f in (
            jobs_file,
            demand_file,
        )
    ]
    cores = [_PAIR_WORDS.sub(" ", stem).strip(" -_.") for stem in stems]
    if cores[0] and cores[0] == cores[1]:
        return cores[0]
    if cores[0] and not cores[1]:
        return cores[0]
    return "+".join(stems)


def named_pair(s: Scenario, jobs_file: str, demand_file: str) -> Scenario:
    """The uploaded pair's scenario named after its files, not after the scenario it joined."""
    c = s.cluster
    start = f", from {c.start:%Y-%m-%d %H:%M}" if c.start else ""
    description = (
        f"Uploaded from {jobs_file} and {demand_file}: {c.gpus} GPUs, {c.horizon_steps} steps "
        f"of {c.step_minutes} min{start} (set on the Workload page)."
    )
    return s.replace(name=pair_name(jobs_file, demand_file), description=description)


@dataclass(frozen=True)
class UploadState:
    """What the uploader holds: nothing, one file of the CSV pair (wait), or something to load."""

    kind: str  # "empty" | "waiting" | "ready"
    message: str = ""


def upload_state(file_names: Sequence[str], header_of: Mapping[str, set[str]]) -> UploadState:
    """Wait for the second file of a CSV pair instead of failing on the first one alone.

    Only a CSV whose header is one half of the pair waits. Any other lone file is read at once:
    a blank one is refused as "file is empty", a history (a sacct export saved as .csv) is read
    as one, and anything else gets the reader's own message ("is not UTF-8 text", "not a format
    gpuplan reads"), not a request for a second file it could never pair with.
    """
    if not file_names:
        return UploadState("empty")
    if len(file_names) == 1 and file_names[0].lower().endswith(".csv"):
        header = header_of.get(file_names[0], set())
        if header >= {"id", "type"}:
            return UploadState("waiting", f"{file_names[0]} is the jobs CSV: add demand.csv too.")
        if header >= {"step", "job_id", "demand"}:
            return UploadState("waiting", f"{file_names[0]} is the demand CSV: add jobs.csv too.")
    return UploadState("ready")


def csv_header(data: bytes) -> set[str]:
    """The column names of a CSV file's first line (empty for anything else)."""
    first = data[:4096].decode("utf-8", errors="replace").lstrip("\ufeff").splitlines()
    return {c.strip() for c in first[0].split(",")} if first else set()


def csv_pair(names: Sequence[str], header_of: Mapping[str, set[str]]) -> tuple[str, str] | None:
    """(jobs file, demand file) when the upload is a CSV pair, else None."""
    if len(names) != 2 or not all(n.lower().endswith(".csv") for n in names):
        return None
    jobs = [n for n in names if header_of.get(n, set()) >= {"id", "type"}]
    demand = [n for n in names if header_of.get(n, set()) >= {"step", "job_id", "demand"}]
    if len(jobs) != 1 or len(demand) != 1:
        return None
    return jobs[0], demand[0]


def loaded_message(s: Scenario, files: Sequence[str]) -> str:
    """'Loaded 12 jobs (11 batch, 1 real-time) from a.json.'"""
    return (
        f"Loaded {len(s.jobs)} jobs ({len(s.batch_jobs)} batch, {len(s.realtime_jobs)} "
        f"real-time) from {' and '.join(files)} as '{s.name}'."
    )


def pair_fit_hints(problems: Sequence[str], cluster: Cluster) -> list[str]:
    """How to fix a CSV pair that does not fit the cluster or horizon set on the page."""
    hints = []
    text = " ".join(problems)
    if re.search(r"past the horizon|has no demand for step|expected one per step", text):
        hints.append(
            f"The demand CSV must have one row per step 0..{cluster.horizon_steps - 1} for each "
            "real-time job: set the horizon under 'Cluster and horizon' to the number of steps "
            "in demand.csv."
        )
    if re.search(r"larger than the cluster's|outside the cluster's|the cluster has GPUs", text):
        hints.append(
            f"The cluster has {cluster.gpus} GPUs: raise 'GPUs' under 'Cluster and horizon' if a "
            "job needs more, or lower the job's gpus_min/gpus_max."
        )
    return hints


def without_name_prefix(name: str, message: str) -> str:
    """A message shown under its file name once, not twice ('a.csv: a.csv: ...')."""
    prefix = f"{name}: "
    while message.startswith(prefix):
        message = message[len(prefix) :]
    return message


# ---------------------------------------------------------------------------------------------
# Demand forecast


def default_capacity(history: pd.Series, current_demand: Sequence[float]) -> float:
    """Traffic one GPU serves today: the history's last-week mean over the job's mean demand.

    The job's current demand (GPUs per step, as the workload has it) is taken to serve the
    traffic the history shows most recently, so the forecast in GPUs starts where the workload
    is. Rounded to two significant digits; 1.0 when either side is zero or unknown.
    """
    recent = history.dropna().iloc[-168:]
    demand = np.asarray(current_demand, dtype=float)
    gpus = float(np.nanmean(demand)) if demand.size else 0.0
    traffic = float(recent.mean()) if len(recent) else 0.0
    if not (gpus > 0 and traffic > 0 and math.isfinite(traffic)):
        return 1.0
    raw = traffic / gpus
    digits = 1 - math.floor(math.log10(raw))
    return float(round(raw, digits))


@dataclass(frozen=True)
class StepHours:
    """Which forecast hour each scenario step uses (0 = the first hour after the history)."""

    hours: tuple[int, ...]
    note: str

    @property
    def horizon(self) -> int:
        return max(self.hours) + 1


def aligned_hours(
    history_end: pd.Timestamp, s: Scenario, max_gap_hours: int = 28 * 24
) -> StepHours:
    """Line the scenario's steps up with the forecast by clock, or by weekday and hour.

    A start within four weeks after the history uses the forecast at that very hour; a start
    further away (or before the history ends) uses the same weekday and hour in the first week
    after the history, and the note says so plainly.
    """
    c = s.cluster
    step_hours = [int(t * c.step_minutes // 60) for t in range(c.horizon_steps)]
    if c.start is None:
        note = "The scenario has no start time: its steps follow the history's last hour."
        return StepHours(tuple(step_hours), note)
    first = history_end + pd.Timedelta(hours=1)
    gap = (pd.Timestamp(c.start) - first) / pd.Timedelta(hours=1)
    if 0 <= gap <= max_gap_hours:
        offset = int(math.floor(gap))
        return StepHours(tuple(offset + h for h in step_hours), "")
    offset = int(math.floor(gap)) % 168
    when = "after" if gap > 0 else "before"
    days = abs(gap) / 24
    note = (
        f"The scenario starts {days:,.0f} days {when} the history ends, so the weekly profile is "
        f"shifted: each step uses the forecast for the same weekday and hour "
        f"({pd.Timestamp(c.start):%a %H:%M} first) in the week after the history."
    )
    return StepHours(tuple(offset + h for h in step_hours), note)


def history_before_start(
    history: pd.Series, window: StepHours, capacity: float, weeks: int = 8
) -> tuple[float, ...]:
    """A traffic history as a real-time job's GPUs per hour before step 0 (the last `weeks`).

    Step 0 uses the forecast's hour `window.hours[0]` (0: the hour after the history). Where the
    history ends earlier than the hour before step 0, its last hours are dropped so that it ends
    on the same weekday and hour as that one, so the planner's weekly profile lines up with the
    clock; missing hours stay NaN."""
    drop = (-window.hours[0]) % 168
    kept = history.iloc[: len(history) - drop] if drop else history
    recent = kept.iloc[-weeks * 168 :].to_numpy(dtype=float) / capacity
    return tuple(float(np.round(v, 3)) if np.isfinite(v) else float("nan") for v in recent)


def plural(count: float, word: str) -> str:
    """'1 day', '0.5 days', '3 plans': a count with its noun (English -s plural)."""
    return f"{count:,g} {word}{'' if count == 1 else 's'}"


def sentence(text: str) -> str:
    """A clause as a sentence of its own: capitalised, with a full stop."""
    return f"{text[:1].upper()}{text[1:]}."


def burst_guard_text(results: Iterable[Any], choice: str = "auto") -> str:
    """The burst guard of a replay as a clause of its caption: ", serving guarded against
    bursts: svc-a" (the services `simulate` guarded, read from a planner that plans serving),
    ", no service bursty enough to guard" (`choice` auto and none guarded), or "" (off, or no
    replayed planner plans serving)."""
    for result in results:
        guarded = result.metrics.get("burst_guarded")
        if guarded is None:
            continue
        if not guarded:
            return ", no service bursty enough to guard" if choice == "auto" else ""
        shown = ", ".join(guarded[:3])
        if len(guarded) > 3:
            shown += f" and {len(guarded) - 3:,} more"
        return f", serving guarded against bursts: {shown}"
    return ""


def traffic_unit(name: str | None) -> str:
    """The unit of a history column as a label: its own name, never an assumed '... per hour'."""
    text = str(name or "").strip()
    return text if text else "traffic units"


# ---------------------------------------------------------------------------------------------
# Horizon & risk


# Horizon & risk replays on opening when the replay is estimated to take at most this long; a
# longer one waits for its button (the page shows a progress bar per planner either way).
AUTO_REPLAY_SECONDS = 10.0
# What a re-plan costs, measured with `core.rolling.simulate` (hourly re-plans, one day or two):
# forecasting a real-time job about 40 ms (the weekly fits; a 3-day rolling-surge replay's FIFO
# run, which fits them for the other planners too, took 5.9 s for 2 jobs x 72 re-plans); a
# queue planner or the fast allocator 36-110 million GPUs x jobs-in-a-day a second on imports of
# 1,024 GPUs (about 1,900 jobs a day: 18-54 ms a re-plan), taken at the slow end.
_FORECAST_S = 0.04
_GPU_JOBS_PER_S = 35e6


def replay_estimate_s(
    s: Scenario,
    days: float,
    replan_minutes: int,
    planners: Collection[str],
    searching: Collection[str] = (),
    time_limit: float = 0.0,
) -> float:
    """About how long replaying `s` takes, in seconds: every re-plan forecasts each real-time job
    and runs each planner, the fast ones in proportion to GPUs x the jobs of a day's window, those
    in `searching` up to their `time_limit` (an upper bound: a small problem stops earlier)."""
    replans = math.ceil(days * 1440 / replan_minutes)
    c = s.cluster
    covered_days = max(1.0, c.horizon_steps * c.step_minutes / 1440)
    gpu_jobs = c.gpus * max(1, len(s.jobs)) / covered_days
    searches = sum(1 for p in planners if p in searching)
    per_replan = (
        _FORECAST_S * len(s.realtime_jobs)
        + (len(planners) - searches) * gpu_jobs / _GPU_JOBS_PER_S
        + searches * time_limit
    )
    return replans * per_replan


def duration_text(seconds: float) -> str:
    """A rough duration as a person says it: "40 s", "3 min", "1.5 h"."""
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


def realised_metrics_table(rows: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """The realised metrics as text, with thousands separators, one row per planner."""

    def pct(v: Any) -> str:
        return "" if v is None else f"{float(v) * 100:,.1f}%"

    def number(v: Any, digits: int = 1) -> str:
        return "" if v is None else f"{float(v):,.{digits}f}"

    table = []
    for label, m in rows.items():
        table.append(
            {
                "planner": label,
                "utilization": pct(m["utilization"]),
                "allocated": pct(m["allocated_fraction"]),
                "value": number(m["value"]),
                "completed": f"{m['completed_jobs']:,}/{m['batch_jobs']:,}",
                "rt coverage": pct(m["rt_coverage"]),
                "shortfall": number(m["rt_shortfall_gpu_hours"], 2),
                "episodes": ""
                if m.get("rt_shortfall_episodes") is None
                else f"{m['rt_shortfall_episodes']:,}",
                "on idle": number(m.get("rt_idle_served_gpu_hours"), 2),
                "changed": pct(m.get("changed_fraction_mean") or 0.0),
                "moved": "" if m.get("moved_jobs") is None else f"{m['moved_jobs']:,}",
                "held back": ""
                if m.get("burst_guard_held_starts") is None
                else f"{m['burst_guard_held_starts']:,}",
                "per plan": _runtime(m.get("planner_ms_mean")),
            }
        )
    return pd.DataFrame(table)


# The realised metrics as Horizon & risk shows them: (column of `realised_metrics_table`, the
# row's label, what it measures)
REALISED_METRICS = (
    ("utilization", "utilization", "share of GPU-steps doing batch or real-time work"),
    ("allocated", "allocated", "share of GPU-steps given to a job, used or not"),
    ("value", "value", "priority-weighted GPU-hours of batch work done"),
    ("completed", "batch jobs done", "of the batch jobs in the replay"),
    ("rt coverage", "real-time coverage", "share of real-time demand served"),
    ("shortfall", "shortfall GPU-h", "real-time demand not served"),
    ("episodes", "shortfall runs", "runs of consecutive steps with real-time shortfall"),
    (
        "on idle",
        "served on idle GPU-h",
        "real-time demand above the plan served on GPUs it left idle (as an autoscaler would)",
    ),
    ("changed", "plan changed", "mean share of the still-future cells a re-plan changed"),
    ("moved", "batch moves", "batch placements a re-plan moved"),
    (
        "held back",
        "starts held back",
        "batch starts the burst guard put off (where it guards a service)",
    ),
    ("per plan", "time per re-plan", "mean planner runtime"),
)


def realised_metrics_by_row(rows: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """`realised_metrics_table` turned: one row per metric (its label, then one column per planner,
    then what it measures), so that any number of planners fits the page's width."""
    table = realised_metrics_table(rows).set_index("planner")
    out = pd.DataFrame({"metric": [label for _, label, _ in REALISED_METRICS]})
    for planner in table.index:
        out[planner] = [table.at[planner, column] for column, _, _ in REALISED_METRICS]
    out["what it measures"] = [meaning for _, _, meaning in REALISED_METRICS]
    return out


def jobs_without_history(s: Scenario, min_hours: int | None = None) -> list[str]:
    """Real-time jobs whose replay forecast is flat: under a day of demand history before step 0.

    The rolling horizon refits its forecast on history plus the actuals so far; without a
    history it can only carry the last demand forward, so a rising demand is under-planned.
    """
    if min_hours is None:
        from .forecast.rolling_demand import MIN_FORECAST_HOURS

        min_hours = MIN_FORECAST_HOURS
    short = []
    for job in s.realtime_jobs:
        values = np.asarray(job.history if job.history is not None else (), dtype=float)
        if int(np.isfinite(values).sum()) < min_hours:
            short.append(job.id)
    return short


def history_series(s: Scenario, job_id: str) -> pd.Series:
    """A real-time job's `history` as the hourly series it is (GPUs), its last hour the one
    before step 0 (dated from the forecasts' default Monday when the cluster has no start), as
    the rolling horizon forecasts from it."""
    from .forecast.rolling_demand import DEFAULT_START

    job = s.jobs[s.job_index(job_id)]
    values = np.asarray(job.history if job.history is not None else (), dtype=float)
    start = pd.Timestamp(s.cluster.start or DEFAULT_START)
    index = pd.date_range(end=start - pd.Timedelta(hours=1), periods=len(values), freq="h")
    return pd.Series(values, index=index, name="GPUs")


def _runtime(ms: Any) -> str:
    if ms is None:
        return ""
    ms = float(ms)
    if ms >= 1000:
        return f"{ms / 1000:,.1f} s"
    return f"{ms:,.2f} ms" if ms < 100 else f"{ms:,.0f} ms"


def idle_union_gpu_hours(windows: pd.DataFrame, step_minutes: int) -> float:
    """GPU-hours covered by at least one window: overlapping windows are counted once."""
    if windows.empty:
        return 0.0
    cells: set[tuple[int, int]] = set()
    for g, n, s, e in windows[["gpu_start", "gpus", "start_step", "end_step"]].itertuples(
        index=False
    ):
        cells.update((gpu, t) for gpu in range(int(g), int(g + n)) for t in range(int(s), int(e)))
    return len(cells) * step_minutes / 60


def windows_overlap(windows: pd.DataFrame) -> bool:
    """Whether some GPU-step lies in two windows (then their sum double-counts it)."""
    total_cells = int((windows["gpus"] * (windows["end_step"] - windows["start_step"])).sum())
    return idle_union_gpu_hours(windows, 60) < total_cells


# ---------------------------------------------------------------------------------------------
# Estimators


@dataclass(frozen=True)
class FitCheck:
    """Whether an estimated batch job fits: its earliest finish and the warnings to show."""

    earliest_finish_step: int  # exclusive end step at gpus_max from arrival, unbounded
    warnings: tuple[str, ...]

    @property
    def fits(self) -> bool:
        return not self.warnings


def fit_check(row: Mapping[str, Any], cluster: Cluster) -> FitCheck:
    """Can the job finish in the horizon at all, and does the cluster have its GPUs?"""
    gpus_max = int(row["gpus_max"])
    gpus_min = int(row["gpus_min"])
    arrival = int(row.get("arrival_step", 0))
    step_hours = cluster.step_minutes / 60
    usable = min(gpus_max, cluster.gpus)
    steps = math.ceil(float(row["gpu_hours"]) / (max(usable, 1) * step_hours) - 1e-9)
    finish = arrival + steps
    warnings = []
    if gpus_min > cluster.gpus:
        warnings.append(
            f"needs at least {gpus_min} GPUs but the cluster has {cluster.gpus}: it can never run"
        )
    elif finish > cluster.horizon_steps:
        warnings.append(
            f"needs {steps} steps even on {usable} GPUs from step {arrival}: its earliest finish "
            f"(step {finish}) is after the horizon ({cluster.horizon_steps} steps), so it cannot "
            "complete in this plan"
        )
    return FitCheck(finish, tuple(warnings))


def step_time(cluster: Cluster, step: int) -> str:
    """A step as people read it: 'step 14 (Tue 14:00)' when the cluster has a start."""
    if cluster.start is None:
        return f"step {step}"
    when = pd.Timestamp(cluster.start) + pd.Timedelta(minutes=step * cluster.step_minutes)
    return f"step {step} ({when:%a %H:%M})"


CLUSTER_FIELDS = ("gpus", "steps", "minutes", "date", "time")


def cluster_fields(c: Cluster) -> dict[str, Any]:
    """The Workload page's cluster controls for `c`: GPUs, horizon steps, step minutes, and the
    start as a date and a time of day (None for no start)."""
    return {
        "gpus": c.gpus,
        "steps": c.horizon_steps,
        "minutes": c.step_minutes,
        "date": c.start.date() if c.start else None,
        "time": c.start.time() if c.start else None,
    }


def with_cluster(
    s: Scenario, *, gpus: int, horizon_steps: int, step_minutes: int, start: Any
) -> Scenario:
    """The scenario on another cluster or horizon (validated again).

    A longer horizon repeats each real-time job's demand from its first step (a daily pattern
    stays daily when the horizon grows by whole days); a shorter one cuts it. A cluster with
    nodes keeps them, and its GPUs (`gpus` is ignored: the node table sets them).
    """
    from dataclasses import replace

    from .model import RealtimeJob

    cluster = Cluster(
        gpus=s.cluster.gpus if s.cluster.nodes else int(gpus),
        step_minutes=int(step_minutes),
        horizon_steps=int(horizon_steps),
        start=start,
        gpu_types=s.cluster.gpu_types,
        nodes=s.cluster.nodes,
    )
    if cluster == s.cluster:
        return s
    T = cluster.horizon_steps
    jobs = tuple(
        replace(j, demand=tuple(j.demand[t % len(j.demand)] for t in range(T)))
        if isinstance(j, RealtimeJob) and len(j.demand) != T
        else j
        for j in s.jobs
    )
    return s.replace(cluster=cluster, jobs=jobs)


def _hours_words(hours: float) -> str:
    """'2.8 h', '24 h', '45 min': a span of the horizon for a sentence."""
    if hours < 1:
        return f"{hours * 60:.0f} min"
    return f"{hours:.1f} h".replace(".0 h", " h")


def _half_life_words(decay: float, step_minutes: int) -> str:
    from .model import Policy

    hours = Policy(decay=decay).half_life_hours(step_minutes)
    return "never" if math.isinf(hours) else _hours_words(hours)


def step_change_words(s: Scenario, old_minutes: int) -> str:
    """What a change of the step length from `old_minutes` to `s`'s kept, and what that did.

    The step numbers are kept, not the hours they stood for: the horizon, arrivals, deadlines,
    the steps left of running work, the demand per step and the decay per step. Said in hours,
    with the latest arrival as the example, since that is what moved.
    """
    c, new_minutes = s.cluster, s.cluster.step_minutes
    old_hours, new_hours = old_minutes / 60, new_minutes / 60
    span = (
        f"the {c.horizon_steps}-step horizon now spans {_hours_words(c.horizon_steps * new_hours)}"
        f" instead of {_hours_words(c.horizon_steps * old_hours)}"
    )
    words = [
        f"**Step changed from {old_minutes} to {new_minutes} min: the step numbers are kept, not "
        "the hours.** Arrivals, deadlines, the steps left of running jobs, the real-time demand "
        f"per step and the decay per step are as they were, so {span}"
    ]
    late = max(
        (j for j in s.batch_jobs if j.running is None and j.arrival_step > 0),
        key=lambda j: j.arrival_step,
        default=None,
    )
    if late is not None:
        words.append(
            f"; '{late.id}' still arrives at step {late.arrival_step}, which is now "
            f"{_hours_words(late.arrival_step * new_hours)} after the start instead of "
            f"{_hours_words(late.arrival_step * old_hours)}"
        )
    decay = s.policy.decay
    if decay < 1:
        words.append(
            f"; the decay {decay:g} per step now halves the value of batch work in "
            f"{_half_life_words(decay, new_minutes)} instead of "
            f"{_half_life_words(decay, old_minutes)}"
        )
    words.append(
        ". Batch work (gpu_hours) is kept in GPU-hours, so each job takes "
        f"{'more' if new_minutes < old_minutes else 'fewer'} steps."
    )
    return "".join(words)


def keep_hours(s: Scenario, old_minutes: int) -> Scenario:
    """`s`, whose step numbers were meant at `old_minutes` a step, converted to its own step
    length so that every time keeps its hours. Raises ScenarioError saying why where no exact
    conversion exists.

    Exact when one step length is a whole multiple of the other: k times shorter steps multiply
    the horizon, arrivals, deadlines and running steps left by k, hold each demand value for k
    steps and take the k-th root of the decay (the same half-life in hours); k times longer
    ones need every step number divisible by k and the demand flat over each group of k steps.
    Swap caps stay per step.
    """
    from dataclasses import replace

    from .model import BatchJob, RealtimeJob, Running, ScenarioError

    new_minutes = s.cluster.step_minutes
    finer = old_minutes % new_minutes == 0
    if new_minutes == old_minutes:
        raise ScenarioError(f"the step is {old_minutes} min already")
    if not finer and new_minutes % old_minutes:
        raise ScenarioError(
            f"{new_minutes} min is not a whole fraction or multiple of {old_minutes} min"
        )
    k = old_minutes // new_minutes if finer else new_minutes // old_minutes
    coarse = f"whole {new_minutes}-min steps"

    def steps(n: int, what: str) -> int:
        if finer:
            return n * k
        if n % k:
            raise ScenarioError(f"{what} {n} x {old_minutes} min does not fall on {coarse}")
        return n // k

    def demand(job: RealtimeJob) -> tuple[float, ...]:
        if finer:
            return tuple(v for v in job.demand for _ in range(k))
        groups = [job.demand[i : i + k] for i in range(0, len(job.demand), k)]
        if any(len(set(g)) != 1 for g in groups):
            raise ScenarioError(f"job '{job.id}': its demand is not flat over {coarse}")
        return tuple(g[0] for g in groups)

    jobs = []
    for j in s.jobs:
        if isinstance(j, RealtimeJob):
            jobs.append(replace(j, demand=demand(j)))
        elif isinstance(j, BatchJob):
            owner = f"job '{j.id}':"
            r = j.running
            jobs.append(
                replace(
                    j,
                    arrival_step=steps(j.arrival_step, f"{owner} arrival_step"),
                    deadline_step=None
                    if j.deadline_step is None
                    else steps(j.deadline_step, f"{owner} deadline_step"),
                    running=None
                    if r is None
                    else Running(
                        r.gpu_start, r.gpus, steps(r.remaining_steps, f"{owner} running steps left")
                    ),
                )
            )
    cluster = replace(s.cluster, horizon_steps=steps(s.cluster.horizon_steps, "the horizon of"))
    policy = replace(s.policy, decay=s.policy.decay ** (new_minutes / old_minutes))
    return s.replace(cluster=cluster, policy=policy, jobs=tuple(jobs))


# ---------------------------------------------------------------------------------------------
# Benchmarks


def published_utilization_text(published: Mapping[str, Any], planner: str) -> str:
    """A published utilization for the table, saying when it is the very figure of FIFO.

    The SPEC publishes scale-64's allocator utilization as 44.9%, FIFO's own figure: the
    published gain there comes from which jobs ran, not from busier GPUs; the cell says so
    instead of looking like a copy of the FIFO row.
    """
    value = published.get(f"{planner}_utilization")
    if value is None:
        return ""
    fifo = published.get("fifo_utilization")
    if planner != "fifo" and fifo is not None and abs(float(value) - float(fifo)) < 1e-12:
        return f"{float(value):.1%} (=FIFO)"
    return f"{float(value):.1%}"


def proof_text(gap: Any, proof_s: Any) -> str:
    """A benchmark row's proof in words: '' for planners without a bound, 'optimal (0.4 s)',
    'gap 1.42%' (not proved in the limit), 'no bound' (not solved: the allocator's plan)."""
    if gap is None or (isinstance(gap, float) and math.isnan(gap)):
        return ""
    gap = float(gap)
    if not math.isfinite(gap):
        return "no bound"
    if gap <= 1e-4 and proof_s is not None and not pd.isna(proof_s):
        return f"optimal ({float(proof_s):,.1f} s)"
    return f"gap {gap:.2%}"


def published_text(
    published: Mapping[str, Any], planner: str, value_gain: Any = None, completed: Any = ""
) -> str:
    """One cell with everything published for a row's planner: 'util. 87.0% · +105.0%'."""
    parts = []
    util = published_utilization_text(published, planner)
    if util:
        parts.append(f"util. {util}")
    if value_gain is not None and not (isinstance(value_gain, float) and math.isnan(value_gain)):
        parts.append(f"{float(value_gain):+.1%}")
    if completed:
        parts.append(f"done {completed}")
    return " · ".join(parts)


def _shows_change(text: str) -> bool:
    """Whether a change as printed ("+0.0 pp", "-0.2 pp", "+3") has a digit other than 0."""
    return any(c in "123456789" for c in text)


def change_words(change: float | None, shown: str, against: str) -> tuple[str | None, bool]:
    """What a KPI card says of its change against `against` (text, whether it is coloured as a
    gain or loss): nothing without a comparison; "same as ..." when nothing changed; "≈ ..."
    when the change rounds to zero as `shown` (a red "-0.0 pp" reads as a loss)."""
    if change is None:
        return None, False
    if abs(change) < 1e-9:
        return f"same as {against}", False
    if not _shows_change(shown):
        return f"≈ {against}", False
    return shown, True


# ---------------------------------------------------------------------------------------------
# Saved & compare

_SHARES = {"utilization", "allocated_fraction", "rt_coverage"}
_COUNTS = {"completed_jobs", "unstarted_jobs", "late_jobs"}


def _kpi_text(key: str, value: Any) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    if key in _SHARES:
        return f"{value:.1%}"
    if key in _COUNTS:
        return f"{int(value):,}"
    if key == "team_fairness":
        return f"{value:.3f}"
    return f"{value:,.1f}"


def _kpi_change(key: str, a: Any, b: Any) -> str:
    if a is None or b is None or not (math.isfinite(a) and math.isfinite(b)):
        return ""
    if key in _SHARES:
        change = f"{(b - a) * 100:+.1f} pp"
    elif key in _COUNTS:
        change = f"{int(b) - int(a):+,}"
    elif key == "team_fairness":
        change = f"{b - a:+.3f}"
    else:
        change = f"{b - a:+,.1f}"
    return change if _shows_change(change) else "same"


def job_differences(a: Scenario, b: Scenario, most: int = 5) -> list[str]:
    """What tells two runs' workloads apart, in a planner's words, at most `most` lines: the
    cluster, jobs only one has, and per job of both the fields that differ ("chat-api: swap_cap
    2 vs 1"; a demand or history series as "demand differs")."""
    lines = []
    if a.cluster != b.cluster:
        lines.append(f"cluster: {_cluster_words(a.cluster)} vs {_cluster_words(b.cluster)}")
    jobs_a, jobs_b = {j.id: j for j in a.jobs}, {j.id: j for j in b.jobs}
    for ids, where in ((jobs_a.keys() - jobs_b.keys(), "A"), (jobs_b.keys() - jobs_a.keys(), "B")):
        if ids:
            shown_ids = ", ".join(sorted(ids)[:3]) + (
                f" and {len(ids) - 3} more" if len(ids) > 3 else ""
            )
            lines.append(f"only in {where}: {plural(len(ids), 'job')} ({shown_ids})")
    for job_id, ja in jobs_a.items():
        jb = jobs_b.get(job_id)
        if jb is None or ja == jb:
            continue
        if type(ja) is not type(jb):
            lines.append(f"{job_id}: {ja.type} vs {jb.type}")
            continue
        parts = []
        for f in fields(ja):
            va, vb = getattr(ja, f.name), getattr(jb, f.name)
            if _same(va, vb):
                continue
            series = isinstance(va, tuple | list) and len(va) > 3
            parts.append(f"{f.name} differs" if series else f"{f.name} {va} vs {vb}")
        if parts:
            lines.append(f"{job_id}: {', '.join(parts)}")
    return lines[:most] + ([f"and {len(lines) - most} more"] if len(lines) > most else [])


def _cluster_words(c: Cluster) -> str:
    from .cluster_table import cluster_words

    gpus = cluster_words(c) if c.nodes else f"{c.gpus:,} GPUs"
    return f"{gpus} x {c.horizon_steps:,} steps of {c.step_minutes} min from {c.start}"


def _same(a: Any, b: Any) -> bool:
    """Equal, where a series' missing hours (nan, unequal to itself) match each other."""
    if isinstance(a, tuple | list) and isinstance(b, tuple | list):
        try:
            return np.array_equal(np.asarray(a, float), np.asarray(b, float), equal_nan=True)
        except (TypeError, ValueError):
            pass
    return a == b


def saved_comparison(
    left: Scenario,
    left_metrics: Mapping[str, Any],
    right: Scenario,
    right_metrics: Mapping[str, Any],
) -> pd.DataFrame:
    """Two saved runs side by side, as text a planner reads at a glance: what each was planned
    under (workload, cluster, policy), then every KPI with its unit and B - A (pp for shares;
    "same" where it rounds to nothing; "—" where a run has no value)."""
    from .tables import KPI_COLUMNS

    def settings(s: Scenario) -> dict[str, str]:
        c, p = s.cluster, s.policy
        target = "none" if p.rt_coverage_target is None else f"{p.rt_coverage_target:.1%}"
        return {
            "workload": s.name,
            "cluster": f"{c.gpus:,} GPUs x {c.horizon_steps:,} steps of {c.step_minutes} min",
            "penalty weight": f"{p.penalty_weight:g}",
            "reward decay": f"{p.decay:g}",
            "coverage target": target,
        }

    a, b = settings(left), settings(right)
    rows = [
        {
            "": label,
            "A": a[label],
            "B": b[label],
            "B - A": "" if a[label] == b[label] else "differs",
        }
        for label in a
    ]
    for key, label in KPI_COLUMNS:
        x, y = left_metrics.get(key), right_metrics.get(key)
        if x is None and y is None:
            continue
        rows.append(
            {
                "": label,
                "A": _kpi_text(key, x),
                "B": _kpi_text(key, y),
                "B - A": _kpi_change(key, x, y),
            }
        )
    return pd.DataFrame(rows, columns=["", "A", "B", "B - A"])


def unfinished_words(unfinished: Mapping[str, Sequence[str]], shown: int = 8) -> str:
    """Per planner, the batch jobs not completed: at most `shown` named, then how many more
    (an imported day leaves dozens: a wall of ids says less than a count)."""
    parts = []
    for name, ids in unfinished.items():
        if not ids:
            parts.append(f"{name}: none")
            continue
        more = f" and {len(ids) - shown} more" if len(ids) > shown else ""
        parts.append(f"{name}: {len(ids)} ({', '.join(ids[:shown])}{more})")
    return "Not completed in the horizon: " + "; ".join(parts)
