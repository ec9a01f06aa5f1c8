"""The mapping: a job table and a window -> the scenario, the as-run metrics and the summary.

`import_table` runs its steps in order, each on whole arrays (one entry per GPU job):
`_gpu_jobs` (the window's start, jobs without GPUs dropped), `_read_jobs` (times, types,
priorities, run times, blocks), `_select_batch` (running, queued, arriving), `_realtime_demand`,
`_cluster_size`, `_drop_too_big`, `_place_batch` (pins, arrivals, work), then the jobs, the
scenario, the as-run metrics and the summary.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ...model import (
    BATCH_TYPES,
    MAX_GPUS,
    REALTIME_TYPE,
    BatchJob,
    Cluster,
    RealtimeJob,
    Running,
    Scenario,
    ScenarioError,
)
from .arrays import _Batch, _Jobs, _Placement, _Realtime, _Span
from .as_run import _as_run
from .classify import _classify, _priorities, _rt_id, _unique_ids
from .options import ImportRules, ImportWindow
from .rows import NO_GROUP, account_rows, too_big_reason
from .table import DAY, HOUR, ImportResult, TraceInfo
from .timeline import (
    _check_window_in_trace,
    _first_time,
    _realtime_series,
    _time_label,
    _window_start,
    peak_in_use,
    pow2_ceil,
)
from .typed import (
    Typing,
    ignored_note,
    job_types,
    nodes_summary,
    pin_on_groups,
    shared_summary,
    typing_of,
    unheld,
    uses_types,
)


def import_table(
    table: pd.DataFrame,
    info: TraceInfo,
    window: ImportWindow | None = None,
    rules: ImportRules | None = None,
) -> ImportResult:
    """The scenario of `window` from a job table, with the as-run metrics and the summary."""
    window = window or ImportWindow()
    rules = rules or ImportRules()
    if window.cluster is not None and window.gpus is None:  # --cluster: its types and groups
        info = dataclasses.replace(
            info, gpu_types=window.cluster.gpu_types, nodes=window.cluster.nodes, node_list=None
        )
    dropped = dict(info.dropped)
    jobs, gpus, span, cpu_rows = _gpu_jobs(table, info, window, dropped)
    j = _read_jobs(jobs, gpus, info, span, rules, window.gpus)
    batch = _select_batch(j, span, dropped)
    rt = _realtime_demand(j, span, rules)
    G, gpus_source, peak, typing = _cluster_size(window, info, j, batch, rt, span)
    cluster = Cluster(
        gpus=G,
        step_minutes=window.step_minutes,
        horizon_steps=span.T,
        start=None if info.relative else pd.Timestamp(span.W0 * 1e9).to_pydatetime(),
        gpu_types=typing.gpu_types,
        nodes=typing.nodes,
    )
    too_big = _drop_too_big(j, batch, G, dropped)
    no_group = unheld(cluster, j.gpu_types, j.block, batch.in_window)
    _drop(batch, no_group, dropped, NO_GROUP)
    placement = _place_batch(j, batch, span, cluster)
    sel = _window_order(batch, placement)
    batch_jobs, ids = _batch_jobs(j, sel, placement)
    rt_jobs, rt_summary = _realtime_jobs(j, rt, span, G, rules, set(ids))
    scenario = _scenario(info, window, span, cluster, (*batch_jobs, *rt_jobs))
    as_run = _as_run(
        scenario,
        sel,
        j.start,
        j.end,
        j.held_until,
        j.submit,
        j.block,
        j.gpus,
        j.priority,
        batch.running,
        np.array([rt.demand[g] for g in rt.names]),
        np.array([rt.served[g] for g in rt.names]),
        span.W0,
        span.W1,
        span.edges,
        snapshot=info.snapshot,
    )
    rows = account_rows(info, cpu_rows, j, batch, rt, span, too_big, G, no_group)
    as_run["rows"] = rows
    notes = _notes(info, j, span, G, placement, as_run)
    ignored = ignored_note(info, table["gpu_types"].to_numpy(dtype=object), window.gpus)
    if ignored:
        notes.append(ignored)
    summary = {
        "file": info.name,
        "format": info.format,
        "window": _window_summary(info, window, span, G, gpus_source, peak),
        "trace": {
            "rows": info.rows,
            "gpu_jobs": int(len(jobs)),
            "end": _time_label(j.trace_end, info.relative),
            "cluster_gpus": info.cluster_gpus,
        },
        "batch": _batch_summary(j, batch, placement, sel),
        "realtime": rt_summary,
        "realtime_jobs": int(_wanted_in(rt, span.W0, span.W1).sum()),
        "rows": rows,
        "rows_used": _rows_used(j, batch, rt, span),
        "rounding": _rounding(window, as_run),
        "nodes": nodes_summary(info, typing, peak),
        "shared_gpus": shared_summary(info, j, batch, rt),
        "snapshot": info.snapshot,
        "dropped": dropped,
        "priority_from": j.priority_source,
        "notes": notes,
    }
    return ImportResult(scenario, as_run, summary)


def _gpu_jobs(
    table: pd.DataFrame, info: TraceInfo, window: ImportWindow, dropped: dict[str, int]
) -> tuple[pd.DataFrame, np.ndarray, _Span, np.ndarray]:
    """(the jobs with GPUs, their GPUs, the window, the file rows of jobs without GPUs); jobs
    without GPUs are counted in `dropped` where they touch the window, like every other drop."""
    gpus = table["gpus"].to_numpy(dtype=float)
    no_gpu = ~(gpus > 0)
    all_submit = table["submit"].to_numpy(dtype=float)
    if info.snapshot:  # (no times: the window is the snapshot's own, from 0)
        if window.start is not None:
            raise ScenarioError(
                f"{info.name}: the file has no times (a packing snapshot), so --start does "
                "not apply; its pods are all present at the window start"
            )
        if not (~no_gpu).any():
            raise ScenarioError(f"{info.name}: no pod with GPUs in the file; nothing to import")
        W0 = 0.0
    else:
        W0 = _window_start(window, info, all_submit[~no_gpu])
    span = _Span(W0, window.step_seconds, window.steps)
    ends = table["end"].to_numpy(dtype=float)
    touching = no_gpu & (all_submit < span.W1) & ~(ends <= span.W0)
    if info.snapshot:
        touching = no_gpu
    if touching.any():
        dropped["no GPUs"] = dropped.get("no GPUs", 0) + int(touching.sum())
    cpu_rows = table["row"].to_numpy(dtype=np.int64)[no_gpu]
    return table.loc[~no_gpu].reset_index(drop=True), gpus[~no_gpu], span, cpu_rows


def _read_jobs(
    jobs: pd.DataFrame,
    gpus: np.ndarray,
    info: TraceInfo,
    span: _Span,
    rules: ImportRules,
    window_gpus: int | None,
) -> _Jobs:
    """The jobs' times (the window checked against the trace), types, priorities and run times."""
    submit = jobs["submit"].to_numpy(dtype=float)
    start = jobs["start"].to_numpy(dtype=float)
    end = jobs["end"].to_numpy(dtype=float)
    limit = jobs["time_limit"].to_numpy(dtype=float)
    if info.snapshot:  # every pod present at the start, holding its GPUs for the whole window
        submit = np.full(len(jobs), span.W0)
        limit = np.full(len(jobs), span.W1 - span.W0)
    trace_end = info.end
    if not math.isfinite(trace_end):
        stamps = np.concatenate([submit, start, end])
        stamps = stamps[np.isfinite(stamps)]
        trace_end = float(stamps.max()) if len(stamps) else 0.0
    _check_window_in_trace(info, span.W0, span.W1, np.concatenate([submit, start]), trace_end)
    submit = np.where(np.isfinite(submit), submit, np.where(np.isfinite(start), start, np.nan))

    types, groups = _classify(jobs, rules)
    priority, priority_source = _priorities(jobs, rules)
    is_rt = types == REALTIME_TYPE
    gpu_types = jobs["gpu_types"].to_numpy(dtype=object)
    if not uses_types(info, window_gpus):
        gpu_types = np.full(len(jobs), "", dtype=object)
    typed_rt = is_rt & (gpu_types != "")  # a service's pods on other types: another job
    groups = np.where(typed_rt, groups.astype(object) + "@" + gpu_types, groups)
    if info.service_column:  # one real-time job per service the format names
        service = jobs[info.service_column].to_numpy(dtype=object)
        groups = np.where(is_rt & (service != ""), service, groups)
        groups = np.where(typed_rt, groups.astype(object) + "@" + gpu_types, groups)
    return _Jobs(
        table=jobs,
        gpus=gpus,
        submit=submit,
        start=start,
        end=end,
        trace_end=trace_end,
        types=types,
        groups=groups,
        is_rt=is_rt,
        priority=priority,
        priority_source=priority_source,
        block=pow2_ceil(gpus) if len(gpus) else np.zeros(0, dtype=np.int64),
        gpu_types=gpu_types,
        **_run_times(start, end, limit, types, is_rt, trace_end, span.step),
    )


def _run_times(
    start: np.ndarray,
    end: np.ndarray,
    limit: np.ndarray,
    types: np.ndarray,
    is_rt: np.ndarray,
    trace_end: float,
    step: float,
) -> dict[str, np.ndarray]:
    """Run time: real where finished; the time limit where not (at least what is already run);
    without a limit, the median real run time of finished jobs of the same type. Real-time
    services still up at the export are taken to keep running."""
    started = np.isfinite(start)
    finished = started & np.isfinite(end)
    never_ran = ~started & np.isfinite(end)  # cancelled (or deleted) while waiting
    zero_run = finished & (end - start <= 0)

    run = np.where(finished, end - start, np.nan)
    estimate = limit.copy()
    no_limit = ~np.isfinite(estimate)
    if no_limit.any():
        medians = pd.Series(run).groupby(types).median()
        estimate[no_limit] = pd.Series(types[no_limit]).map(medians).to_numpy(dtype=float)
    estimate = np.where(np.isfinite(estimate) & (estimate > 0), estimate, step)
    running_at_export = started & ~finished
    run = np.where(running_at_export, np.maximum(estimate, trace_end - start), run)
    run = np.where(~started, estimate, run)
    planned_end = start + run
    held_until = np.where(finished, end, np.where(is_rt & running_at_export, np.inf, planned_end))
    held_until = np.where(running_at_export & ~is_rt, np.maximum(trace_end, held_until), held_until)
    return {
        "started": started,
        "finished": finished,
        "never_ran": never_ran,
        "zero_run": zero_run,
        "run": run,
        "planned_end": planned_end,
        "estimated": ~finished & ~never_ran,
        "running_at_export": running_at_export,
        "held_until": held_until,
    }


def _select_batch(j: _Jobs, span: _Span, dropped: dict[str, int]) -> _Batch:
    """The batch jobs running at the window start, queued at it and arriving in it; jobs
    cancelled before they started or that ran for 0 seconds are counted in `dropped`."""
    W0, W1 = span.W0, span.W1
    batch = ~j.is_rt & ~j.never_ran & ~j.zero_run
    running = batch & j.started & (j.start < W0) & (j.held_until > W0)
    queued = batch & (j.submit < W0) & ~running & (~j.started | (j.start >= W0))
    arriving = batch & (j.submit >= W0) & (j.submit < W1)
    dropped_never = int((~j.is_rt & j.never_ran & (j.submit < W1) & (j.end > W0)).sum())
    dropped_zero = int((~j.is_rt & j.zero_run & (j.submit < W1) & (j.end >= W0)).sum())
    if dropped_never:
        dropped["cancelled before it started"] = dropped_never
    if dropped_zero:
        dropped["ran for 0 seconds"] = dropped_zero
    return _Batch(running, queued, arriving, running | queued | arriving)


def _realtime_demand(j: _Jobs, span: _Span, rules: ImportRules) -> _Realtime:
    """Each real-time group's demand in the window and up to `rules.history_days` before it,
    and what was served of it: demand from creation to deletion, served from scheduling."""
    history_from = max(span.W0 - rules.history_days * DAY, _first_time(j.submit, j.start))
    wanted_from = np.where(np.isfinite(j.submit), j.submit, j.start)
    wanted_until = np.where(np.isfinite(j.end), j.end, np.inf)
    rt_rows = (
        j.is_rt
        & np.isfinite(wanted_from)
        & (wanted_from < span.W1)
        & (wanted_until > np.maximum(wanted_from, min(history_from, span.W0)))
    )
    group_names, rt_demand, rt_history = _realtime_series(
        rt_rows, j.groups, wanted_from, wanted_until, j.gpus, span.W0, span.step, span.T,
        history_from,
    )  # fmt: skip
    ran = rt_rows & j.started
    _, served, _ = _realtime_series(
        ran, j.groups, j.start, j.held_until, j.gpus, span.W0, span.step, span.T, span.W0
    )
    zeros = np.zeros(span.T)
    served = {g: served.get(g, zeros) for g in group_names}
    return _Realtime(
        live=rt_rows,
        wanted_from=wanted_from,
        wanted_until=wanted_until,
        names=group_names,
        demand=rt_demand,
        history=rt_history,
        history_hours=len(next(iter(rt_history.values()), ())),
        total=sum(rt_demand.values()) if rt_demand else zeros,
        served=served,
        served_total=sum(served.values()) if served else zeros,
    )


def _wanted_in(rt: _Realtime, lo: float, hi: float) -> np.ndarray:
    """The real-time rows whose demand overlaps [lo, hi)."""
    return rt.live & (rt.wanted_from < hi) & (rt.wanted_until > lo)


def _cluster_size(
    window: ImportWindow, info: TraceInfo, j: _Jobs, batch: _Batch, rt: _Realtime, span: _Span
) -> tuple[int, str, float, Typing]:
    """(GPUs, where that number comes from, peak GPUs in use in the window, the types and
    groups)."""
    occupancy_start = np.where(j.started, j.start, np.nan)
    use = (batch.in_window | rt.live) & j.started
    in_use_gpus = np.where(j.is_rt, j.gpus, j.block).astype(float)
    peak = peak_in_use(occupancy_start[use], j.held_until[use], in_use_gpus[use], span.W0, span.W1)
    if info.snapshot:  # what the snapshot asks for at once
        peak = float(j.block[batch.in_window].sum() + j.gpus[rt.live].sum())
    typing = typing_of(info, window.gpus)
    if typing.nodes:
        return typing.gpus, typing.source, peak, typing
    if window.gpus is not None:
        return window.gpus, "--gpus", peak, typing
    if info.snapshot and info.cluster_gpus:
        return (
            info.cluster_gpus,
            "the node list's GPUs (the cluster the snapshot is packed on)",
            peak,
            typing,
        )
    G = int(pow2_ceil(np.array([max(1.0, peak)]))[0])
    if G > MAX_GPUS:
        raise ScenarioError(
            f"{info.name}: {peak:,.0f} GPUs in use at the peak; give --gpus (at most {MAX_GPUS:,})"
        )
    return G, "peak GPUs in use in the window, rounded up to a power of two", peak, typing


def _drop_too_big(j: _Jobs, batch: _Batch, G: int, dropped: dict[str, int]) -> np.ndarray:
    """Batch jobs whose block is larger than the cluster leave the window (counted); returns
    which they are."""
    too_big = batch.in_window & (j.block > G)
    _drop(batch, too_big, dropped, too_big_reason(G))
    return too_big


def _drop(batch: _Batch, leaving: np.ndarray, dropped: dict[str, int], reason: str) -> None:
    """The batch jobs `leaving` leave the window, counted under `reason`."""
    if leaving.any():
        dropped[reason] = dropped.get(reason, 0) + int(leaving.sum())
    for selected in (batch.in_window, batch.running, batch.queued, batch.arriving):
        selected &= ~leaving  # (in place: the arrays are the batch's own)


def _place_batch(j: _Jobs, batch: _Batch, span: _Span, cluster: Cluster) -> _Placement:
    """Pin running jobs largest first: descending powers of two packed from GPU 0 stay aligned,
    and all fit whenever their total does (with node groups: packed from the first GPU of the
    first allowed group with room). Those that do not fit wait at step 0 with their
    remaining work; the others arrive at the step of their submit time."""
    W0, step, block = span.W0, span.step, j.block
    run_idx = np.flatnonzero(batch.running)
    order = run_idx[np.lexsort((j.start[run_idx], -block[run_idx]))]
    if cluster.nodes:
        offsets, fits = pin_on_groups(cluster, order, block, j.gpu_types)
    else:
        offsets = np.cumsum(block[order]) - block[order]
        fits = offsets + block[order] <= cluster.gpus
    pinned, unpinned = order[fits], order[~fits]
    gpu_start = np.full(len(j.table), -1, dtype=np.int64)
    gpu_start[pinned] = offsets[fits]
    remaining = np.ceil((j.planned_end - W0) / step - 1e-9)
    remaining = np.where(np.isfinite(remaining), np.maximum(1, remaining), 1).astype(np.int64)

    arrival = np.where(batch.arriving, np.floor((j.submit - W0) / step), 0).astype(np.int64)
    arrival = np.clip(arrival, 0, span.T - 1)
    not_pinned = np.zeros(len(j.table), dtype=bool)
    not_pinned[unpinned] = True
    work_seconds = np.where(not_pinned, j.planned_end - W0, j.run)
    gpu_hours = block * np.maximum(work_seconds, 1.0) / HOUR
    return _Placement(pinned, unpinned, gpu_start, remaining, arrival, gpu_hours)


def _window_order(batch: _Batch, placement: _Placement) -> np.ndarray:
    """The window's batch jobs (indices), running ones first, then by arrival step."""
    sel = np.flatnonzero(batch.in_window)
    order = np.where(batch.running[sel], -1, placement.arrival[sel])
    return sel[np.argsort(order, kind="stable")]


def _batch_jobs(
    j: _Jobs, sel: np.ndarray, placement: _Placement
) -> tuple[list[BatchJob], np.ndarray]:
    """(the window's batch jobs, their ids)."""
    has_team = "team" in {f.name for f in fields(BatchJob)}
    ids = _unique_ids(j.table["job_id"].iloc[sel]).to_numpy(dtype=object)
    team_values = j.table["team"].to_numpy(dtype=object)
    p = placement
    batch_jobs = []
    for k, i in enumerate(sel):  # the window's jobs only: thousands, not the whole trace
        pin = (
            Running(int(p.gpu_start[i]), int(j.block[i]), int(p.remaining[i]))
            if p.gpu_start[i] >= 0
            else None
        )
        extra = {"team": team_values[i]} if has_team and team_values[i] else {}
        batch_jobs.append(
            BatchJob(
                id=ids[k],
                type=j.types[i],
                priority=float(j.priority[i]),
                gpus_min=int(j.block[i]),
                gpus_max=int(j.block[i]),
                gpu_hours=round(float(p.gpu_hours[i]), 6),
                arrival_step=int(p.arrival[i]),
                running=pin,
                gpu_types=job_types(j.gpu_types[i]),
                **extra,
            )
        )
    return batch_jobs, ids


def _realtime_jobs(
    j: _Jobs, rt: _Realtime, span: _Span, G: int, rules: ImportRules, taken: set[str]
) -> tuple[list[RealtimeJob], list[dict[str, Any]]]:
    """One elastic job per real-time group, and the group's line of the summary."""
    swap_cap = rules.swap_cap if rules.swap_cap is not None else G
    rt_jobs, rt_summary = [], []
    for g in rt.names:
        m = rt.live & (j.groups == g)
        job_id = _rt_id(g, taken)
        taken.add(job_id)
        demand = np.round(rt.demand[g], 4)
        rt_jobs.append(
            RealtimeJob(
                id=job_id,
                priority=float(j.priority[m].max()),
                gpus_min=0,
                gpus_max=G,
                swap_cap=swap_cap,
                gpu_types=job_types(j.gpu_types[np.flatnonzero(m)[0]]),
                demand=tuple(float(d) for d in demand),
                history=tuple(float(h) for h in np.round(rt.history[g], 4))
                if rt.history_hours
                else None,
            )
        )
        in_win = m & _wanted_in(rt, span.W0, span.W1)
        rt_summary.append(
            {
                "id": job_id,
                "group": g,
                "jobs_in_window": int(in_win.sum()),
                "mean_gpus": round(float(demand.mean()), 3),
                "peak_gpus": round(float(demand.max()), 3),
                "gpu_hours": round(float(demand.sum() * span.step / HOUR), 3),
                "history_hours": rt.history_hours,
            }
        )
    return rt_jobs, rt_summary


def _scenario(
    info: TraceInfo, window: ImportWindow, span: _Span, cluster: Cluster, jobs: tuple[Any, ...]
) -> Scenario:
    label = _time_label(span.W0, info.relative)
    return Scenario(
        name=f"{Path(info.name).stem} {label}"[:120],
        description=(
            f"{info.format} history {info.name}: {window.days:g} day(s) from {label}, "
            f"{window.step_minutes}-minute steps"
        ),
        cluster=cluster,
        jobs=jobs,
    )


def _notes(
    info: TraceInfo, j: _Jobs, span: _Span, G: int, placement: _Placement, as_run: dict[str, Any]
) -> list[str]:
    """The trace's own notes, then what the mapping had to assume."""
    notes = list(info.notes)
    if len(placement.unpinned):
        notes.append(
            f"{len(placement.unpinned)} job(s) running at the window start did not fit beside "
            f"the others on {G} GPUs; they wait at step 0 with their remaining work"
        )
    if j.trace_end < span.W1 and (j.running_at_export & (j.start < span.W1)).any():
        notes.append(
            f"the window ends after the trace ({_time_label(j.trace_end, info.relative)}): jobs "
            "still running then are taken to run to their time limit (services: on)"
        )
    if info.snapshot:
        notes.append(
            "read as a packing snapshot (the file has no times): every GPU pod is a job present "
            "at the start that holds its GPUs for the whole window; nothing ran, so there is no "
            "as-run to compare with"
        )
    if as_run["over_capacity_steps"]:
        notes.append(
            f"as-run holds more than {G} GPUs at {as_run['over_capacity_steps']} step(s): the "
            "cluster given is smaller than what really ran"
        )
    return notes


def _window_summary(
    info: TraceInfo, window: ImportWindow, span: _Span, G: int, gpus_source: str, peak: float
) -> dict[str, Any]:
    return {
        "start": _time_label(span.W0, info.relative),
        "end": _time_label(span.W1, info.relative),
        "days": window.days,
        "step_minutes": window.step_minutes,
        "steps": span.T,
        "gpus": G,
        "gpus_source": gpus_source,
        "peak_gpus_in_use": round(peak, 3),
    }


def _batch_summary(
    j: _Jobs, batch: _Batch, placement: _Placement, sel: np.ndarray
) -> dict[str, Any]:
    by_type = {t: 0 for t in BATCH_TYPES}
    for t, n in zip(*np.unique(j.types[sel], return_counts=True), strict=True):
        by_type[str(t)] = int(n)
    rounded = batch.in_window & (j.block != j.gpus)
    return {
        "jobs": int(len(sel)),
        "by_type": by_type,
        "arriving": int(batch.arriving.sum()),
        "queued_at_start": int(batch.queued.sum()),
        "running_at_start": int(batch.running.sum()),
        "pinned": int(len(placement.pinned)),
        "not_pinned": int(len(placement.unpinned)),
        "rounded_up": int(rounded.sum()),
        "work_estimated": int((batch.in_window & j.estimated).sum()),
    }


def _rows_used(j: _Jobs, batch: _Batch, rt: _Realtime, span: _Span) -> dict[str, int]:
    """What the used rows became: batch jobs of the window, real-time demand in it, and
    real-time rows that are only the history before it."""
    in_window = _wanted_in(rt, span.W0, span.W1)
    return {
        "batch": int(batch.in_window.sum()),
        "realtime": int(in_window.sum()),
        "realtime_history": int((rt.live & ~in_window).sum()),
    }


def _rounding(window: ImportWindow, as_run: dict[str, Any]) -> dict[str, Any]:
    """How much scoring as-run on the plans' grid (each job rounded up to whole steps from the
    step it started in) moved its value from the value of its real times."""
    real, grid = as_run["value_real_times"], as_run["value"]
    return {
        "step_minutes": window.step_minutes,
        "value_real_times": round(real, 3),
        "value_on_grid": round(grid, 3),
        "change": (grid / real - 1) if real > 0 else None,
    }
