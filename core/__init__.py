"""gpuplan's headless core: the model, the planners, the checker, forecasts and the CLI."""

import os

# The forecaster fits many tiny least-squares problems; BLAS threads only add contention there
# (3-7x slower on a busy 2-core machine). Takes effect only if numpy is not imported yet.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from .model import (
    BatchJob,
    Cluster,
    Policy,
    RealtimeJob,
    Running,
    Scenario,
    ScenarioError,
)
from .plan import Plan, Violation, check, metrics
from .planners import PLANNER_NAMES, solve

__all__ = [
    "PLANNER_NAMES",
    "BatchJob",
    "Cluster",
    "Plan",
    "Policy",
    "RealtimeJob",
    "Running",
    "Scenario",
    "ScenarioError",
    "Violation",
    "check",
    "metrics",
    "solve",
]
