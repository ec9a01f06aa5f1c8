"""Fixtures for the whole suite: every registered planner, and where the data lives.

`planner` runs a test once per name in the registry (`core.planners.PLANNER_NAMES`), so a
new planner is tested the moment it is registered. Planners that take a time limit (the MIP)
get a short one and fewer Hypothesis examples, so the suite stays fast and leaves none out.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import settings

from core.model import Scenario
from core.plan import Plan
from core.planners import PLANNER_NAMES, planner_spec, solve
from tests.budget import FULL, examples
from tests.paths import DATA_DIR, SCENARIOS_DIR, TRACES_DIR

# Hypothesis profiles (pytest --hypothesis-profile=NAME; tests/budget.py scales each budget):
# `ci`, the default, runs every property at the budget it states; `dev`, the fast loop's, a tenth.
settings.register_profile("ci", max_examples=FULL)
settings.register_profile("dev", max_examples=FULL // 10)
settings.load_profile("ci")


@pytest.fixture(autouse=True, scope="session")
def _private_workspace(tmp_path_factory):
    """No test (nor an app server a test starts) reads or writes the user's saved workspace:
    GPUPLAN_WORKSPACE points at a fresh file for the session (tests that need their own set it
    again)."""
    import os

    path = tmp_path_factory.mktemp("workspace") / "workspace.sqlite"
    old = os.environ.get("GPUPLAN_WORKSPACE")
    os.environ["GPUPLAN_WORKSPACE"] = str(path)
    yield path
    if old is None:
        os.environ.pop("GPUPLAN_WORKSPACE", None)
    else:
        os.environ["GPUPLAN_WORKSPACE"] = old


QUICK_TIME_LIMIT = 2.0
EXAMPLES = 100  # Hypothesis examples per property for planners without a time limit
TIME_LIMITED_EXAMPLES = 10  # ... and for those with one: each example may use its whole limit


def takes_time_limit(name: str) -> bool:
    """Whether the planner's params dataclass (in the registry) has a `time_limit`."""
    return planner_spec(name).accepts("time_limit")


def plan_quickly(scenario: Scenario, planner: str, time_limit: float = QUICK_TIME_LIMIT) -> Plan:
    """`solve` with a short time limit for planners that take one."""
    options = {"time_limit": time_limit} if takes_time_limit(planner) else {}
    return solve(scenario, planner, **options)


@pytest.fixture(params=PLANNER_NAMES)
def planner(request) -> str:
    """Each registered planner's name in turn."""
    return request.param


@pytest.fixture
def plan_with() -> Callable[..., Plan]:
    """`plan_with(scenario, planner, time_limit=2)`: solve, quickly where a limit applies."""
    return plan_quickly


@pytest.fixture
def max_examples(planner: str) -> int:
    """Hypothesis examples for a property of `planner`: few for the time-limited ones."""
    return examples(TIME_LIMITED_EXAMPLES if takes_time_limit(planner) else EXAMPLES)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return DATA_DIR


@pytest.fixture(scope="session")
def scenarios_dir() -> Path:
    return SCENARIOS_DIR


@pytest.fixture(scope="session")
def traces_dir() -> Path:
    """The shared real traces; tests that need them skip when the shared folder is absent."""
    if not TRACES_DIR.is_dir():
        pytest.skip(f"real traces not found at {TRACES_DIR} (the shared folder is absent)")
    return TRACES_DIR
