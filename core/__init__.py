"""gpuplan's headless core: the model, the planners, the checker, forecasts and the CLI."""

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
