"""What the Workload page's history import shows, as pure functions: the upload read once into
the job table, the window a trace opens on, the preview's counts as tables, and whether a
history's as-run metrics still belong to the active workload.

Reading (the slow part, once per file) is kept apart from mapping (`import_table`, once per
window), so moving the window re-maps the parsed table instead of re-reading the file.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .formats import MAX_HISTORY_UPLOAD_BYTES, MAX_HISTORY_UPLOAD_MB
from .formats.history import (
    HOUR,
    ImportResult,
    ImportRules,
    ImportWindow,
    TraceInfo,
    _time_label,
    _window_start,
    demand_frame,
    detect_format,
    format_module,
    import_table,
    read_source,
)
from .model import Scenario, ScenarioError

FORMAT_LABELS = {
    "slurm": "Slurm sacct",
    "openb": "Kubernetes pod list (Alibaba openb)",
    "alibaba-serving": "Serving instances (Alibaba 2025 trace)",
    "kubectl": "Kubernetes pods (kubectl get pods -o json)",
    "helios": "Helios cluster_log.csv",
    "acme": "Acme job trace",
}
STEP_MINUTES_CHOICES = (5, 10, 15, 20, 30, 60, 120, 180, 240, 360, 720, 1440)
# Drop reasons that count rows which are not jobs (sacct's step rows belong to a job counted
# elsewhere), so "jobs dropped" leaves them out.
NOT_JOBS = ("job step rows",)


@dataclass(frozen=True)
class Trace:
    """A history read into the importer's job table, before any window is chosen."""

    name: str
    format: str
    table: pd.DataFrame
    info: TraceInfo

    @property
    def label(self) -> str:
        return FORMAT_LABELS.get(self.format, self.format)


@dataclass(frozen=True)
class WindowDefaults:
    """Where a trace's window opens: `start` is an ISO time, or hours from the trace start for
    traces with relative times (`relative`); `first`/`last` label the trace's span."""

    relative: bool
    start: str | float
    first: str
    last: str
    span_hours: float
    snapshot: bool = False  # a pod list without times: no start to choose


def read_upload(name: str, data: bytes, format: str = "auto") -> Trace:
    """An uploaded history parsed into the job table; refused above the app's history limit.

    Raises ScenarioError naming the file (and row and field where a row is broken).
    """
    if len(data) > MAX_HISTORY_UPLOAD_BYTES:
        raise ScenarioError(
            f"{name}: file is {len(data) / 1024**2:.1f} MB, larger than the app's limit of "
            f"{MAX_HISTORY_UPLOAD_MB} MB for a history; import it on the command line instead "
            f"(gpuplan import {name} --out scenario.json) and upload the scenario"
        )
    shown, _, head = read_source(data, name)
    fmt = format
    if fmt in (None, "auto"):
        fmt = detect_format(shown, head)
        if fmt is None:
            raise ScenarioError(f"{shown}: {_not_a_history(head)}")
    table, info = format_module(fmt).read_table(data, shown)
    return Trace(shown, fmt, table, info)


def _not_a_history(head: str) -> str:
    text = head.lstrip("\ufeff \t\r\n")
    first = text.splitlines()[0] if text else ""
    if text.startswith("{") and '"cluster"' in head:
        return "is a gpuplan scenario, not a history; upload it with the scenario uploader above"
    columns = {c.strip() for c in first.split(",")}
    if columns >= {"id", "type"} or columns >= {"step", "job_id", "demand"}:
        return "is a gpuplan jobs/demand CSV, not a history; upload it with the scenario uploader"
    return (
        "not a recognised history: expected sacct -P output (header with JobID|Submit|...), an "
        "openb pod list (num_gpu, gpu_milli, creation_time), kubectl get pods -o json, a Helios "
        "cluster_log.csv or an Acme trace"
    )


def default_window(trace: Trace) -> WindowDefaults:
    """The window the importer picks without --start (the day holding the median submit time),
    in the form the start control takes, with the trace's span."""
    table, info = trace.table, trace.info
    if info.snapshot:  # (no times: the window opens at 0 and only its length is chosen)
        return WindowDefaults(True, 0.0, "0 h", "0 h", 0.0, snapshot=True)
    gpu = table["gpus"].to_numpy(dtype=float) > 0
    submit = table["submit"].to_numpy(dtype=float)[gpu]
    w0 = _window_start(ImportWindow(), info, submit)
    stamps = np.concatenate(
        [table[c].to_numpy(dtype=float)[gpu] for c in ("submit", "start", "end")]
    )
    stamps = stamps[np.isfinite(stamps)]
    lo = float(stamps.min()) if len(stamps) else w0
    hi = float(info.end) if math.isfinite(info.end) else float(stamps.max(initial=w0))
    start: str | float = w0 / HOUR if info.relative else _time_label(w0, False)
    return WindowDefaults(
        relative=info.relative,
        start=start,
        first=_time_label(lo, info.relative),
        last=_time_label(hi, info.relative),
        span_hours=(hi - lo) / HOUR,
    )


def preview(trace: Trace, window: ImportWindow, rules: ImportRules | None = None) -> ImportResult:
    """The scenario, as-run metrics and summary of one window of a parsed trace."""
    try:
        return import_table(trace.table, trace.info, window, rules)
    except ScenarioError as e:
        message = str(e)
        raise (e if message.startswith(trace.name) else e.with_prefix(trace.name)) from None


def count_rows(summary: dict[str, Any]) -> pd.DataFrame:
    """The preview's counts as one table (what, jobs): batch jobs by type, how the window's
    start treats them, what the mapping changed, and every drop with its reason."""
    b = summary["batch"]
    rows: list[tuple[str, int]] = [(f"batch: {t}", n) for t, n in b["by_type"].items()]
    rows += [
        ("batch jobs in the window", b["jobs"]),
        ("  arriving in the window", b["arriving"]),
        ("  queued at the start (arrive at step 0)", b["queued_at_start"]),
        ("  running at the start", b["running_at_start"]),
        ("    pinned on their GPUs", b["pinned"]),
        ("    not pinned (wait at step 0)", b["not_pinned"]),
        ("GPUs rounded up to a power of two", b["rounded_up"]),
        (
            "work: the whole window (a snapshot)"
            if summary.get("snapshot")
            else "work estimated from the time limit",
            b["work_estimated"],
        ),
        ("real-time jobs (become demand)", summary["realtime_jobs"]),
    ]
    dropped = summary["dropped"]
    jobs = [(f"dropped: {why}", n) for why, n in dropped.items() if why not in NOT_JOBS]
    rows += jobs or [("dropped", 0)]
    rows += [(f"skipped (not jobs): {why}", n) for why, n in dropped.items() if why in NOT_JOBS]
    return pd.DataFrame(rows, columns=["what", "jobs"])


def dropped_jobs(summary: dict[str, Any]) -> int:
    """Jobs the import left out, for every reason; rows that are not jobs do not count."""
    return sum(n for why, n in summary["dropped"].items() if why not in NOT_JOBS)


def realtime_rows(summary: dict[str, Any]) -> pd.DataFrame:
    """One row per real-time group: the elastic job it becomes and its demand in the window."""
    columns = {
        "id": "job",
        "group": "group",
        "jobs_in_window": "jobs",
        "mean_gpus": "mean GPUs",
        "peak_gpus": "peak GPUs",
        "gpu_hours": "GPU-hours",
        "history_hours": "history (h)",
    }
    frame = pd.DataFrame(summary["realtime"], columns=list(columns))
    return frame.rename(columns=columns)


def chart_frame(result: ImportResult, trace: Trace) -> pd.DataFrame:
    """`demand_frame` with an `hours` column (from the trace start) for relative-time traces."""
    frame = demand_frame(result)
    if trace.info.relative and "time" not in frame:
        c = result.scenario.cluster
        start_h = float(str(result.summary["window"]["start"]).removesuffix(" h"))
        frame["hours"] = start_h + frame["step"] * c.step_minutes / 60
    return frame


def _workload(s: Scenario) -> tuple:
    """What the as-run metrics depend on: cluster and jobs; not the policy or the swap caps
    (Plan & compare's controls change those, not what really ran)."""
    jobs = tuple(
        dataclasses.replace(j, swap_cap=0) if hasattr(j, "swap_cap") else j for j in s.jobs
    )
    return s.cluster, jobs


def as_run_applies(imported: Scenario, active: Scenario) -> bool:
    """True while `active` is still the workload imported from the history (policy and swap
    caps aside); an edited job, another window or another workload drops the as-run."""
    return _workload(imported) == _workload(active)
