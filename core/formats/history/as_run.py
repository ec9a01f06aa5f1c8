"""What really ran in the window ("as-run"), measured like a plan.

As-run is scored on the plans' grid: each batch job holds its block from the step it started
in for its run time rounded up to whole steps, as the planners round it, so a short job counts
the same in both. The value of the real times (no rounding) is kept beside it, and the summary
says how far the grid moved it. Real-time demand runs from creation to deletion and as-run
served it only from scheduling, so a serving pod never scheduled lowers as-run's coverage.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...model import Scenario
from .table import HOUR
from .timeline import binned_occupancy

AS_RUN_NOTE = (
    "as-run is what the trace's own start and end times say ran in the window, on the plans' "
    "grid (each job rounded up to whole steps from the step it started in); real placements "
    "are not aligned blocks, so it is not a legal grid of the model and is not checked as one"
)
SNAPSHOT_NOTE = (
    "a packing snapshot has no times, so nothing ran: as-run is empty, and the plans are "
    "compared with each other only"
)


def grid_steps(
    start: np.ndarray, held_until: np.ndarray, step: float, T: int
) -> tuple[np.ndarray, np.ndarray]:
    """(first step, step after the last) each job holds on the grid, clipped to [0, T].

    A job started in the window holds from the step it started in for ceil(run / step) steps;
    one running at the window start holds from step 0 to the step its end falls in (its
    remaining work, as the scenario pins it). Times are relative to the window start.
    """
    started = np.isfinite(start)
    s = np.where(started, start, 0.0)
    e = np.where(started, held_until, 0.0)
    first = np.floor(s / step + 1e-9)
    length = np.maximum(1.0, np.ceil((e - s) / step - 1e-9))
    last = np.where(s < 0, np.ceil(e / step - 1e-9), first + length)
    first = np.clip(first, 0, T)
    last = np.clip(np.where(started & (e > s), last, first), first, T)
    return first.astype(np.int64), last.astype(np.int64)


def grid_occupancy(first: np.ndarray, last: np.ndarray, weights: np.ndarray, T: int) -> np.ndarray:
    """sum_i weights_i over the steps [first_i, last_i) of each job, per step."""
    diff = np.zeros(T + 1)
    np.add.at(diff, first, weights)
    np.add.at(diff, last, -weights)
    return np.cumsum(diff)[:T]


def _as_run(
    scenario: Scenario,
    sel: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    held_until: np.ndarray,
    submit: np.ndarray,
    block: np.ndarray,
    gpus: np.ndarray,
    priority: np.ndarray,
    running: np.ndarray,
    rt_demand: np.ndarray,
    rt_served: np.ndarray,
    W0: float,
    W1: float,
    edges: np.ndarray,
    *,
    snapshot: bool = False,
) -> dict[str, Any]:
    """The metrics of core.plan.metrics for what really ran, on the scenario's job sizes.

    `rt_demand` and `rt_served` are per real-time job of the scenario (rows, in its order) and
    step: what was wanted and what was really held of it."""
    c, policy = scenario.cluster, scenario.policy
    G, T, step_h = c.gpus, c.horizon_steps, c.step_hours
    step = c.step_minutes * 60.0
    s = np.where(np.isfinite(start[sel]), start[sel], np.inf) - W0
    e = np.minimum(held_until[sel], W1 + step) - W0
    rel_edges = edges - W0
    g = block[sel].astype(float)
    p = priority[sel]
    first, last = grid_steps(start[sel] - W0, held_until[sel] - W0, step, T)
    batch_steps = grid_occupancy(first, last, g, T)  # GPUs held per step, on the grid
    weighted_steps = grid_occupancy(first, last, g * p, T)
    real_steps = binned_occupancy(s, e, gpus[sel], rel_edges) / step
    overlap_h = np.nan_to_num(
        np.clip(np.minimum(e, W1 - W0) - np.maximum(s, 0), 0, None) / HOUR, nan=0.0
    )
    discount = policy.decay ** np.arange(T, dtype=float)
    cells = G * T
    batch_cells = float(batch_steps.sum())
    rt_demand = rt_demand.reshape(-1, T)
    rt_served = np.minimum(rt_served.reshape(-1, T), rt_demand)
    rt_cells = float(rt_served.sum())
    demanded = float(rt_demand.sum())
    shortfall = rt_demand - rt_served
    rt_priority = np.array([j.priority for j in scenario.realtime_jobs], dtype=float)
    penalty = float(rt_priority @ shortfall.sum(axis=1))
    rt_total, rt_served_total = rt_demand.sum(axis=0), rt_served.sum(axis=0)
    reward = float(weighted_steps @ discount)
    started = overlap_h > 0
    completed = started & np.isfinite(end[sel]) & (end[sel] <= W1)
    waited = started & ~running[sel] & np.isfinite(start[sel])
    waits = (start[sel][waited] - submit[sel][waited]).clip(min=0) / HOUR
    total_steps = batch_steps + rt_served_total
    return {
        "planner": "as-run",
        "utilization": (batch_cells + rt_cells) / cells,
        "utilization_real_gpus": (float(real_steps.sum()) + rt_cells) / cells,
        "allocated_fraction": (batch_cells + rt_cells) / cells,
        "value": float(p @ ((last - first) * g)) * step_h,
        "value_real_times": float(p @ (g * overlap_h)),
        "objective": policy.reward_weight * (reward - policy.penalty_weight * penalty),
        "completed_jobs": int(completed.sum()),
        "started_jobs": int(started.sum()),
        "batch_jobs": int(len(sel)),
        "unstarted_jobs": int((~started).sum()),
        "rt_shortfall_gpu_hours": float(shortfall.sum()) * step_h,
        "rt_coverage": rt_cells / demanded if demanded > 0 else 1.0,
        "wait_hours_p50": float(np.percentile(waits, 50)) if len(waits) else None,
        "wait_hours_p90": float(np.percentile(waits, 90)) if len(waits) else None,
        "idle_gpu_hours": float(np.clip(G - total_steps, 0, None).sum() * step_h),
        "over_capacity_steps": int((total_steps > G + 1e-6).sum()),
        "per_step": {
            "batch_gpus": [round(float(x), 4) for x in batch_steps],
            "realtime_gpus": [round(float(x), 4) for x in rt_served_total],
            "realtime_demand": [round(float(x), 4) for x in rt_total],
        },
        "snapshot": snapshot,
        "note": SNAPSHOT_NOTE if snapshot else AS_RUN_NOTE,
    }
