"""The planners behind one entry point: `solve(scenario, planner, **options) -> Plan`.

Each planner is a function `(scenario, **options) -> Plan` in its own module; `solve` times it
(runtime_ms: the planner itself, input parsed, output not written) so every planner is measured
the same way.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from typing import Any

from ..model import Scenario
from ..plan import Plan

PLANNER_NAMES = ("fifo", "backfill", "allocator", "full")

# name -> (module, function); imported on first use so `full` costs nothing until asked for.
_REGISTRY = {
    "fifo": ("core.planners.fifo", "plan_fifo"),
    "backfill": ("core.planners.fifo", "plan_backfill"),
    "allocator": ("core.planners.allocator", "plan_allocator"),
    "full": ("core.planners.full", "plan_full"),
}

PLANNER_LABELS = {
    "fifo": "FIFO (peak reservation)",
    "backfill": "Backfill (conservative)",
    "allocator": "Allocator (fast)",
    "full": "Full (Pyomo + HiGHS)",
}


def planner_function(name: str) -> Callable[..., Plan]:
    if name not in _REGISTRY:
        raise ValueError(f"unknown planner {name!r}; choose one of {', '.join(PLANNER_NAMES)}")
    module, function = _REGISTRY[name]
    return getattr(importlib.import_module(module), function)


def solve(scenario: Scenario, planner: str = "allocator", **options: Any) -> Plan:
    """Plan a scenario with the named planner; the plan's stats carry runtime_ms."""
    function = planner_function(planner)
    started = time.perf_counter()
    plan = function(scenario, **options)
    plan.stats.setdefault("runtime_ms", (time.perf_counter() - started) * 1000.0)
    plan.planner = planner
    return plan
