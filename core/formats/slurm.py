"""Slurm accounting: `sacct -a -X -P --format=...` (`|`-separated, one header line).

Quirks handled as the sacct man page describes them: step rows (`123.batch`, `123.extern`,
`123.0`) are dropped; array tasks (`123_4`) are jobs, and a pending array range
(`123_[5-9%2]`) is one job per task; GPUs come from `gres/gpu=N` in AllocTRES (ReqTRES while
pending), a typed `gres/gpu:a100=N` beside the untyped entry is not counted twice (alone, the
typed entries are summed); `Unknown`/`None` start or end; a pending job's Start is Slurm's
expected start, not a start; `CANCELLED by 1234` is CANCELLED; TimelimitRaw is in minutes.

Typed GRES (SPEC section 8): the types of a job's `gres/gpu:<type>=N` entries (N > 0) are its
`gpu_types` (`gres/gpu:a100=4` -> a100); an untyped `gres/gpu=4` alone leaves it untyped. The
types come from ReqTRES, what the job asked for, where the export has it: AllocTRES says where
a job ran, and a job that asked for any GPU and got an A100 may use any GPU (AllocTRES only
where there is no ReqTRES). sacct says nothing of nodes: the types are planned on a cluster
given with `--cluster FILE.json` and ignored (with a note) without one
(`core.formats.history.typed`).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd

from ..model import MAX_GPUS, ScenarioError
from .history import (
    TraceInfo,
    by_unique,
    check_order,
    empty_table,
    header_of,
    history_reader,
    normalise_state,
    parse_numbers,
    parse_times,
    read_delimited,
    require_columns,
)

FORMAT = "slurm"
SACCT_FIELDS = (
    "JobIDRaw,JobID,JobName,User,Account,Partition,QOS,Priority,Submit,Eligible,Start,End,"
    "ElapsedRaw,TimelimitRaw,State,AllocTRES,ReqTRES,NNodes,NodeList"
)
SACCT_COMMAND = f"sacct -a -X -P -S <from> -E <to> --format={SACCT_FIELDS}"
_WAITING = ("PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD")
_UNFINISHED = (*_WAITING, "RUNNING", "SUSPENDED", "RESIZING", "COMPLETING", "CONFIGURING")
_NO_LIMIT = ("", "UNLIMITED", "Partition_Limit", "INVALID", "None")


def sniff(name: str, head: str) -> bool:
    header = {c.lower() for c in header_of(head, "|")}
    return "jobid" in header and "submit" in header and len(header) > 2


def read_table(
    source: str | bytes | Path, name: str | None = None
) -> tuple[pd.DataFrame, TraceInfo]:
    wanted = {c.lower() for c in SACCT_FIELDS.split(",")} - {"nnodes", "nodelist"}
    frame, shown = read_delimited(source, name, sep="|", keep=lambda c: c.lower() in wanted)
    canonical = {c.lower(): c for c in SACCT_FIELDS.split(",")}
    frame.columns = [canonical.get(c.lower(), c) for c in frame.columns]
    if "JobID" not in frame.columns and "JobIDRaw" in frame.columns:
        frame["JobID"] = frame["JobIDRaw"]
    require_columns(
        frame,
        shown,
        [("JobID",), ("Submit",), ("Start",), ("End", "ElapsedRaw"), ("AllocTRES", "ReqTRES")],
    )
    info = TraceInfo(name=shown, format=FORMAT, rows=len(frame))
    frame["_row"] = np.arange(2, len(frame) + 2)

    job_id = frame["JobID"].str.strip()
    steps = job_id.str.contains(".", regex=False)
    if steps.any():
        info.dropped["job step rows"] = int(steps.sum())
        frame, job_id = frame.loc[~steps], job_id[~steps]
    frame, job_id = _expand_pending_arrays(frame, job_id)
    frame, job_id = frame.reset_index(drop=True), job_id.reset_index(drop=True)
    n = len(frame)
    rows = frame["_row"].to_numpy()
    table = empty_table(n)
    table["row"] = rows
    table["job_id"] = job_id

    def text(column: str) -> pd.Series:
        if column not in frame.columns:
            return table["name"].copy()  # blank
        return frame[column].str.strip()

    table["name"] = text("JobName")
    table["user"] = text("User")
    account = text("Account")
    table["team"] = account.where(account != "", table["user"])
    table["partition"] = text("Partition")
    table["qos"] = text("QOS")
    state = normalise_state(frame["State"]) if "State" in frame.columns else np.full(n, "")
    table["state"] = state
    waiting = np.isin(state, _WAITING)
    unfinished = np.isin(state, _UNFINISHED)

    table["gpus"], table["gpu_types"] = _gpus(frame, shown, rows, waiting)
    submit = parse_times(frame["Submit"], shown, "Submit", rows)
    if "Eligible" in frame.columns:
        eligible = parse_times(frame["Eligible"], shown, "Eligible", rows)
        submit = np.where(np.isfinite(submit), submit, eligible)
    start = parse_times(frame["Start"], shown, "Start", rows)
    start[waiting] = np.nan  # Slurm prints the expected start of a pending job
    end = (
        parse_times(frame["End"], shown, "End", rows)
        if "End" in frame.columns
        else np.full(n, np.nan)
    )
    end[unfinished] = np.nan
    if "ElapsedRaw" in frame.columns:
        elapsed = parse_numbers(frame["ElapsedRaw"], shown, "ElapsedRaw", rows)
        derive = ~np.isfinite(end) & np.isfinite(start) & ~unfinished & np.isfinite(elapsed)
        end = np.where(derive, start + elapsed, end)
    table["submit"], table["start"], table["end"] = submit, start, end
    if "TimelimitRaw" in frame.columns:
        minutes = parse_numbers(
            frame["TimelimitRaw"], shown, "TimelimitRaw", rows, missing=_NO_LIMIT
        )
        table["time_limit"] = minutes * 60.0
    if "Priority" in frame.columns:
        table["priority_raw"] = parse_numbers(frame["Priority"], shown, "Priority", rows)
    check_order(table, shown, "Start", "End")
    stamps = np.concatenate([submit, start, end])
    stamps = stamps[np.isfinite(stamps)]
    info.end = float(stamps.max()) if len(stamps) else float("nan")
    return table, info


read_history = history_reader(read_table)


_UNTYPED = re.compile(r"(?:^|,)gres/gpu=([^,]*)")
_TYPED = re.compile(r"(?:^|,)gres/gpu:[^=,]+=([^,]*)")


def _gpus(
    frame: pd.DataFrame, name: str, rows: np.ndarray, waiting: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(GPUs, GPU types "|"-joined) per job from the TRES strings: AllocTRES, or ReqTRES where
    nothing is allocated."""
    n = len(frame)
    alloc = frame["AllocTRES"].str.strip() if "AllocTRES" in frame.columns else None
    req = frame["ReqTRES"].str.strip() if "ReqTRES" in frame.columns else None
    if alloc is None:
        tres, use_req = req, np.ones(n, dtype=bool)
    elif req is None:
        tres, use_req = alloc, np.zeros(n, dtype=bool)
    else:
        use_req = (alloc == "").to_numpy() | waiting
        tres = alloc.where(~use_req, req)
    count = by_unique(tres, lambda u: np.array([_tres_gpus(t) for t in u], dtype=float))
    bad = np.flatnonzero(np.isnan(count))
    if len(bad):
        i = int(bad[0])
        field_name = "ReqTRES" if use_req[i] else "AllocTRES"
        raise ScenarioError(
            f"{name}: row {rows[i]}: {field_name} gres/gpu must be a whole number from 0 to "
            f"{MAX_GPUS:,}, got "
            f"{tres.iloc[i]!r}"
        )
    asked = tres if req is None else req.where(req != "", tres)
    types = by_unique(asked, lambda u: np.array([_tres_types(t) for t in u], dtype=object))
    bad = np.flatnonzero(pd.isna(types))
    if len(bad):
        i = int(bad[0])
        field_name = "ReqTRES" if req is not None and req.iloc[i] != "" else "AllocTRES"
        raise ScenarioError(
            f"{name}: row {rows[i]}: {field_name} has a typed gres/gpu entry without a type "
            f"name (expected gres/gpu:<type>=N), got {asked.iloc[i]!r}"
        )
    return count, types


_TYPE_ENTRY = re.compile(r"(?:^|,)gres/gpu:([^=,]*)=([^,]*)")


def _tres_types(tres: str) -> str | None:
    """The types of the typed entries with GPUs, "|"-joined ("" untyped; None: a nameless
    type)."""
    names = []
    for name, count in _TYPE_ENTRY.findall(tres):
        if not name.strip():
            return None
        if count.strip() not in ("", "0") and name.strip() not in names:
            names.append(name.strip())
    return "|".join(names)


def _tres_gpus(tres: str) -> float:
    """`gres/gpu=N` if given (a typed `gres/gpu:a100=N` beside it is the same GPUs), else the
    sum of the typed entries; NaN for a count that is not a whole number >= 0."""
    untyped = _UNTYPED.findall(tres)
    counts = untyped[:1] if untyped else _TYPED.findall(tres)
    total = 0.0
    for text in counts:
        digits = text.strip()
        if not digits.isdigit() or len(digits) > 6 or int(digits) > MAX_GPUS:
            return math.nan
        total += int(digits)
    return total if total <= MAX_GPUS else math.nan


def _expand_pending_arrays(
    frame: pd.DataFrame, job_id: pd.Series
) -> tuple[pd.DataFrame, pd.Series]:
    """`123_[1-3,7%2]` (a pending array's tasks in one row) -> rows 123_1, 123_2, 123_3, 123_7."""
    ranged = job_id.str.contains(r"_\[", regex=True)
    if not ranged.any():
        return frame, job_id
    expanded_ids, repeat = [], []
    for jid in job_id[ranged]:  # a handful of rows: one per pending array, not per task
        base, _, spec = jid.partition("_[")
        tasks = _array_tasks(spec.rstrip("]").split("%")[0])
        expanded_ids.extend(f"{base}_{t}" for t in tasks)
        repeat.append(max(1, len(tasks)))
    parts = frame.loc[ranged].loc[lambda f: f.index.repeat(repeat)]
    ids = pd.Series(expanded_ids, index=parts.index, dtype="str")
    out = pd.concat([frame.loc[~ranged], parts])
    ids_all = pd.concat([job_id[~ranged], ids])
    order = np.argsort(out["_row"].to_numpy(), kind="stable")
    return out.iloc[order], ids_all.iloc[order]


def _array_tasks(spec: str) -> list[str]:
    tasks: list[str] = []
    for part in spec.split(","):
        part = part.strip()
        lo, sep, hi = part.partition("-")
        if sep and lo.isdigit():
            hi, _, stride = hi.partition(":")
            if hi.isdigit():
                tasks.extend(str(t) for t in range(int(lo), int(hi) + 1, int(stride or 1)))
                continue
        if part:
            tasks.append(part)
    return tasks
