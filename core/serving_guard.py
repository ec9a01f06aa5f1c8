"""The burst guard of the rolling horizon (`simulate(..., burst_guard=True)`, issue 52).

A forecast calibrated on the usual hour says little about a service that sits idle for days
and then jumps to its peak within an hour (Helios vcira, idle 92% of hours). A plan that
follows the forecast step by step fills the quiet hours with batch work that cannot be
preempted, and when the jump comes the service can only grow onto idle GPUs, by at most its
`swap_cap` a step. fifo's peak reservation happens to hold the GPUs for it; the guard holds
them on purpose, from what the service's own history shows it can do:

- **warm floor**: the service is planned at no less than its current level plus the largest
  rise its history shows within k steps, less the `k * swap_cap` it can grow by itself in those
  steps (the most it could not catch up by scaling), capped at `gpus_max`;
- **start guard**: a batch job may start only where, over its estimated run in the window,
  the GPUs batch work holds leave each service its current level plus the largest rise its
  history shows within that lead (at most the window's peak reservation, fifo's).

Which services: all (`burst_guard=True`), none (False), or by default (None) those whose
history bursts: idle (at most IDLE_LEVEL of its 90th percentile, as the forecaster counts idle)
in at least half of its hours, i.e. a typical hour idle. Such a series' calibrated near-term
interval cannot see a burst coming (every idle hour is in it); on a series that is rarely idle
the forecast follows the rises and the guard would only cost batch value (docs/benchmarks.md).

Rises are measured on the history and the demand seen so far, hourly; a lead of k steps is
the rise within the hours those steps span, rounded up. GPUs are counted over the cluster
(services on some GPU types only are guarded by the cluster's count, a looser bound).
"""

from __future__ import annotations

import numpy as np

from .forecast.demand import IDLE_LEVEL
from .model import RealtimeJob, Scenario
from .planners.fifo import peak_reservation

MIN_HISTORY_HOURS = 24  # less history than this says nothing about bursts (auto: unguarded)
BURSTY_IDLE_SHARE = 0.5  # auto guards a service idle at least this share of its history's hours
# `burst_guard` as the CLI, the scripts and the app name it
CHOICES: dict[str, bool | None] = {"auto": None, "on": True, "off": False}


def rises(observed: np.ndarray, hours: int) -> np.ndarray:
    """Element h-1: the largest rise of `observed` from one hour to any of the next h hours,
    for h = 1..hours; never below zero, non-decreasing."""
    y = np.asarray(observed, dtype=float)
    y = y[np.isfinite(y)]
    out = np.zeros(max(hours, 0))
    if len(y) < 2:
        return out
    ahead = np.full(len(y) - 1, -np.inf)  # the highest of the next h values after each hour
    for h in range(1, min(hours, len(y) - 1) + 1):
        ahead = np.maximum(ahead[: len(y) - h], y[h:])
        out[h - 1] = float(np.max(ahead - y[: len(y) - h]))
    if hours > len(y) - 1:
        out[len(y) - 1 :] = out[len(y) - 2]
    return np.maximum.accumulate(np.maximum(out, 0.0))


def step_rises(observed: np.ndarray, steps: int, step_minutes: int) -> np.ndarray:
    """Element k-1: the largest rise within k steps of `step_minutes` (the hours they span,
    rounded up), k = 1..steps."""
    spans = np.ceil(np.arange(1, steps + 1) * step_minutes / 60).astype(int)
    by_hour = rises(observed, int(spans[-1]) if steps else 0)
    return by_hour[spans - 1] if steps else by_hour


def warm_floor(job: RealtimeJob, level: float, rise: np.ndarray) -> float:
    """The GPUs the service should hold now: `level` plus the most of any rise it could not
    reach by growing `swap_cap` GPUs a step, at most `gpus_max`."""
    if not len(rise):
        return 0.0
    behind = rise - job.swap_cap * np.arange(1, len(rise) + 1)
    return float(min(job.gpus_max, max(0.0, level + float(np.max(behind)))))


def start_reserve(window_job: RealtimeJob, reach: np.ndarray) -> np.ndarray:
    """Per lead step (0 = now): the GPUs a batch start must leave this service, the `reach` of
    its level plus history's rises rounded up, at most its peak reservation over the window
    (fifo's)."""
    return np.minimum(float(peak_reservation(window_job)), np.ceil(reach - 1e-9))


def may_start(held: np.ndarray, gpus: int, reserve: np.ndarray, cluster_gpus: int) -> bool:
    """Whether a job of `gpus` GPUs may start with batch work holding `held` GPUs at each step
    of its run (0 = now) and the services needing `reserve` there (the last value on)."""
    n = len(held)
    need = reserve[:n]
    if len(need) < n:
        need = np.pad(need, (0, n - len(need)), mode="edge") if len(need) else np.zeros(n)
    return bool(np.all(held + gpus <= cluster_gpus - need + 1e-9))


def last_level(observed: np.ndarray, demand: tuple[float, ...], t0: int) -> float:
    """The service's demand as last seen: the step before t0, or the last observed hour."""
    if t0 > 0:
        return float(demand[t0 - 1])
    finite = np.asarray(observed, dtype=float)
    finite = finite[np.isfinite(finite)]
    return float(finite[-1]) if len(finite) else 0.0


def guarded(planner: str) -> bool:
    """Whether the guard applies to `planner`: fifo and backfill reserve the peak already."""
    return planner not in ("fifo", "backfill")


def bursty(history: tuple[float, ...] | None) -> bool:
    """Whether a service's hourly history bursts: idle at BURSTY_IDLE_SHARE of its hours."""
    y = np.asarray(history or (), dtype=float)
    y = y[np.isfinite(y)]
    if len(y) < MIN_HISTORY_HOURS:
        return False
    busy = float(np.percentile(y, 90))
    return float(np.mean(y <= IDLE_LEVEL * busy)) >= BURSTY_IDLE_SHARE


def guarded_services(scenario: Scenario, planner: str, burst_guard: bool | None) -> list[int]:
    """The job numbers of the services the guard holds GPUs for (see the module's text)."""
    if not guarded(planner) or burst_guard is False:
        return []
    return [
        i
        for i, job in enumerate(scenario.jobs)
        if isinstance(job, RealtimeJob) and (burst_guard or bursty(job.history))
    ]


__all__ = [
    "CHOICES",
    "bursty",
    "guarded",
    "guarded_services",
    "last_level",
    "may_start",
    "rises",
    "start_reserve",
    "step_rises",
    "warm_floor",
]
