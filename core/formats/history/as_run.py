"""What really ran in the window ("as-run"), measured like a plan."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...model import Scenario
from .table import HOUR
from .timeline import binned_occupancy

AS_RUN_NOTE = (
    "as-run is what the trace's own start and end times say ran in the window; real placements "
    "are not aligned blocks, so it is not a legal grid of the model and is not checked as one"
)


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
    rt_total: np.ndarray,
    W0: float,
    W1: float,
    edges: np.ndarray,
) -> dict[str, Any]:
    """The metrics of core.plan.metrics for what really ran, on the scenario's job sizes."""
    c, policy = scenario.cluster, scenario.policy
    G, T, step_h = c.gpus, c.horizon_steps, c.step_hours
    step = c.step_minutes * 60.0
    s = np.where(np.isfinite(start[sel]), start[sel], np.inf) - W0
    e = np.minimum(held_until[sel], W1 + step) - W0
    rel_edges = edges - W0
    g = block[sel].astype(float)
    p = priority[sel]
    batch_steps = binned_occupancy(s, e, g, rel_edges) / step  # GPUs held per step
    weighted_steps = binned_occupancy(s, e, g * p, rel_edges) / step
    real_steps = binned_occupancy(s, e, gpus[sel], rel_edges) / step
    overlap_h = np.nan_to_num(
        np.clip(np.minimum(e, W1 - W0) - np.maximum(s, 0), 0, None) / HOUR, nan=0.0
    )
    discount = policy.decay ** np.arange(T, dtype=float)
    cells = G * T
    batch_cells = float(batch_steps.sum())
    rt_cells = float(rt_total.sum())
    started = overlap_h > 0
    completed = started & np.isfinite(end[sel]) & (end[sel] <= W1)
    waited = started & ~running[sel] & np.isfinite(start[sel])
    waits = (start[sel][waited] - submit[sel][waited]).clip(min=0) / HOUR
    total_steps = batch_steps + rt_total
    return {
        "planner": "as-run",
        "utilization": (batch_cells + rt_cells) / cells,
        "utilization_real_gpus": (float(real_steps.sum()) + rt_cells) / cells,
        "allocated_fraction": (batch_cells + rt_cells) / cells,
        "value": float(p @ (g * overlap_h)),
        "objective": policy.reward_weight * float(weighted_steps @ discount),
        "completed_jobs": int(completed.sum()),
        "started_jobs": int(started.sum()),
        "batch_jobs": int(len(sel)),
        "unstarted_jobs": int((~started).sum()),
        "rt_shortfall_gpu_hours": 0.0,
        "rt_coverage": 1.0,
        "wait_hours_p50": float(np.percentile(waits, 50)) if len(waits) else None,
        "wait_hours_p90": float(np.percentile(waits, 90)) if len(waits) else None,
        "idle_gpu_hours": float(np.clip(G - total_steps, 0, None).sum() * step_h),
        "over_capacity_steps": int((total_steps > G + 1e-6).sum()),
        "per_step": {
            "batch_gpus": [round(float(x), 4) for x in batch_steps],
            "realtime_gpus": [round(float(x), 4) for x in rt_total],
        },
        "note": AS_RUN_NOTE,
    }
