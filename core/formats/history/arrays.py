"""What the steps of `import_table` hand each other: whole arrays, one entry per GPU job."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class _Span:
    """The window on the trace's time axis: T steps of `step` seconds from W0."""

    W0: float
    step: float
    T: int

    @property
    def W1(self) -> float:
        return self.W0 + self.T * self.step

    @property
    def edges(self) -> np.ndarray:
        return self.W0 + self.step * np.arange(self.T + 1)


@dataclass(frozen=True)
class _Jobs:
    """The trace's GPU jobs, one array entry per job, times on the trace's own axis."""

    table: pd.DataFrame
    gpus: np.ndarray
    submit: np.ndarray  # the start where the trace has no submit time
    start: np.ndarray
    end: np.ndarray
    trace_end: float
    types: np.ndarray
    groups: np.ndarray
    is_rt: np.ndarray
    priority: np.ndarray
    priority_source: str
    block: np.ndarray  # the GPU count rounded up to a power of two
    started: np.ndarray
    finished: np.ndarray
    never_ran: np.ndarray  # cancelled (or deleted) while waiting
    zero_run: np.ndarray
    run: np.ndarray  # seconds: real where finished, estimated where not
    planned_end: np.ndarray
    estimated: np.ndarray
    running_at_export: np.ndarray
    held_until: np.ndarray
    gpu_types: np.ndarray  # the types each job may use, "|"-separated ("" any, or ignored)


@dataclass(frozen=True)
class _Batch:
    """Which batch jobs the window holds (the arrays shrink in place when jobs are dropped)."""

    running: np.ndarray  # started before the window and still running at its start
    queued: np.ndarray  # submitted before it and still waiting
    arriving: np.ndarray  # submitted in it
    in_window: np.ndarray


@dataclass(frozen=True)
class _Realtime:
    """The real-time groups' demand per step of the window and history per hour before it.

    Serving demand runs from a pod's creation to its deletion (still wanted at the export where
    it has none); what was served runs from its scheduling. A pod never scheduled, or scheduled
    late, is demand that was not served."""

    live: np.ndarray  # real-time rows with demand in the window or its history
    wanted_from: np.ndarray  # creation (the start where the trace has no creation time)
    wanted_until: np.ndarray  # deletion; inf where the trace ends with it still wanted
    names: list[str]
    demand: dict[str, np.ndarray]
    history: dict[str, np.ndarray]
    history_hours: int
    total: np.ndarray
    served: dict[str, np.ndarray]  # GPUs really held per step, within the demand
    served_total: np.ndarray


@dataclass(frozen=True)
class _Placement:
    """Where the window's batch jobs start: pins of the running ones, arrival steps, work."""

    pinned: np.ndarray
    unpinned: np.ndarray
    gpu_start: np.ndarray  # -1 where not pinned
    remaining: np.ndarray
    arrival: np.ndarray
    gpu_hours: np.ndarray
