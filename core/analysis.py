"""Horizon products that work on any plan: coverage risk and idle windows.

`coverage_risk_table` gives, per step and real-time job, the probability that demand exceeds the
GPUs planned (from a demand forecast); `idle_windows` lists the aligned blocks of idle GPUs that
stay idle for a run of steps, disjoint, so their GPU-hours add up. Both are pure: a plan (and a
scenario and forecasts) in, a table out; the Horizon & risk page and `simulate --out` use them.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

import numpy as np
import pandas as pd

from .model import Scenario, ScenarioError
from .plan import IDLE, Plan, free_blocks, holdings


def coverage_risk_table(
    scenario: Scenario,
    plan: Plan,
    forecasts: Mapping[str, pd.DataFrame],
    capacity: float | Mapping[str, float] = 1.0,
    first_step: int = 0,
) -> pd.DataFrame:
    """Per step and real-time job: the GPUs planned and the probability demand exceeds them.

    `forecasts[job_id]` holds `mean` and `std` (and optionally `lower`, `upper`) of the demand for
    the plan's steps `first_step, first_step+1, ...` (row order), in the units of `capacity`: what
    one GPU serves (1.0 when the forecast is already in GPUs). Demand is taken as normal, as in
    `core.forecast.demand.coverage_risk`; `expected_shortfall` is E[max(0, demand - served)] in
    GPUs. Rows: step, time, job_id, planned_gpus, mean, upper, risk, expected_shortfall.
    """
    from .forecast.demand import coverage_risk, expected_shortfall

    held = holdings(scenario, plan)
    T = plan.grid.shape[1]
    start = scenario.cluster.start
    step_minutes = scenario.cluster.step_minutes
    frames = []
    for job in scenario.realtime_jobs:
        forecast = forecasts.get(job.id)
        if forecast is None:
            continue
        per_gpu = capacity.get(job.id, 1.0) if isinstance(capacity, Mapping) else capacity
        if not per_gpu > 0:
            raise ScenarioError(f"job '{job.id}': capacity must be > 0, got {per_gpu}")
        count = min(len(forecast), T - first_step)
        if count <= 0:
            continue
        steps = np.arange(first_step, first_step + count)
        window = forecast.iloc[:count]
        mean = window["mean"].to_numpy(dtype=float) / per_gpu
        std = window["std"].to_numpy(dtype=float) / per_gpu
        upper = (
            window["upper"].to_numpy(dtype=float) / per_gpu
            if "upper" in forecast
            else mean + 1.6448536 * std
        )
        planned = held[scenario.job_index(job.id), steps].astype(float)
        risk = coverage_risk(window, planned, per_gpu)
        shortfall = expected_shortfall(window, planned, per_gpu) / per_gpu
        frames.append(
            pd.DataFrame(
                {
                    "step": steps,
                    "time": [
                        start + timedelta(minutes=step_minutes * int(t)) if start else None
                        for t in steps
                    ],
                    "job_id": job.id,
                    "planned_gpus": planned.astype(int),
                    "mean": mean,
                    "upper": upper,
                    "risk": risk,
                    "expected_shortfall": shortfall,
                }
            )
        )
    columns = [
        "step",
        "time",
        "job_id",
        "planned_gpus",
        "mean",
        "upper",
        "risk",
        "expected_shortfall",
    ]
    if not frames:
        return pd.DataFrame(columns=columns)
    return pd.concat(frames, ignore_index=True).sort_values(["step", "job_id"], ignore_index=True)[
        columns
    ]


def idle_windows(
    plan: Plan,
    min_gpus: int = 1,
    min_steps: int = 1,
    *,
    first_step: int = 0,
    step_minutes: int | None = None,
) -> pd.DataFrame:
    """Predictable idle windows: disjoint aligned blocks of idle GPUs, each idle for a run of steps.

    A window is an aligned power-of-two block `[gpu_start, gpu_start + gpus)` (the shape a batch
    job can take, `gpu_start % gpus == 0`) with `gpus >= min_gpus`, idle on every GPU for a run of
    steps `[start_step, end_step)` (end exclusive) of at least `min_steps` steps, from
    `first_step` on. Windows never share a GPU-step, so their `gpu_hours` add up to the idle
    capacity they describe: the largest blocks are taken first (each for its maximal idle run),
    and a smaller block only lists the idle cells no larger window holds. "GPUs 0-7 idle for
    steps 4-9" is therefore not repeated as two halves, nor as halves running a step longer.
    Sorted by start, then GPU.
    """
    grid = plan.grid[:, first_step:]
    G = grid.shape[0]
    free = grid == IDLE  # idle and not yet in a window
    sizes = []
    size = 1
    while size <= G:
        sizes.append(size)
        size *= 2
    rows = []
    for size in reversed(sizes):
        if size < min_gpus:
            break
        blocks = G // size
        whole = free_blocks(free, size)
        for b in range(blocks):
            for s, e in _runs(whole[b]):
                if e - s < min_steps:
                    continue
                free[b * size : (b + 1) * size, s:e] = False
                rows.append(
                    {
                        "start_step": s + first_step,
                        "end_step": e + first_step,
                        "steps": e - s,
                        "gpu_start": b * size,
                        "gpus": size,
                    }
                )
    columns = ["start_step", "end_step", "steps", "gpu_start", "gpus"]
    table = pd.DataFrame(rows, columns=columns)
    if step_minutes is not None:
        table["gpu_hours"] = table["gpus"] * table["steps"] * step_minutes / 60.0
    return table.sort_values(["start_step", "gpu_start", "gpus"], ignore_index=True)


def _runs(flags: np.ndarray) -> list[tuple[int, int]]:
    """Maximal runs of True as (start, end exclusive)."""
    padded = np.concatenate([[False], flags, [False]])
    edges = np.flatnonzero(padded[1:] != padded[:-1])
    return [(int(edges[k]), int(edges[k + 1])) for k in range(0, len(edges), 2)]
