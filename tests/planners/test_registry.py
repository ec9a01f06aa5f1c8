"""The planner registry: one entry per planner, read by the CLI, bench, charts and pages."""

from __future__ import annotations

import dataclasses
import json

import pytest

from core import charts
from core.cli import _parser
from core.formats import load_scenario
from core.plan import report
from core.planners import (
    BASELINE,
    FAST,
    PLANNER_NAMES,
    PLANNERS,
    SolveStatus,
    planner_options,
    solve,
)
from core.planners.allocator import AllocatorParams
from core.planners.full import FullParams


def test_every_spec_is_complete_and_its_defaults_build():
    assert len(set(s.colour for s in PLANNERS.values())) == len(PLANNERS)
    assert [s.role for s in PLANNERS.values()].count("baseline") == 1
    assert PLANNERS[BASELINE].role == "baseline" and PLANNERS[FAST].role == "fast"
    for name, spec in PLANNERS.items():
        assert spec.name == name and spec.label and spec.description
        assert dataclasses.is_dataclass(spec.params)
        spec.params()  # the defaults are valid
        assert callable(spec.run())


def test_cli_and_charts_read_the_registry():
    choices = _parser()._subparsers._group_actions[0].choices
    planner = next(a for a in choices["simulate"]._actions if a.dest == "planner")
    assert tuple(planner.choices) == PLANNER_NAMES
    # plan takes a comma-separated list, checked against the registry.
    planner = next(a for a in choices["plan"]._actions if a.dest == "planner")
    assert planner.type(",".join(PLANNER_NAMES)) == list(PLANNER_NAMES)
    assert all(name in planner.help for name in PLANNER_NAMES)
    assert charts.PLANNER_ORDER == PLANNER_NAMES
    assert set(charts.PLANNER_COLOURS) == set(PLANNER_NAMES)


def test_options_go_only_to_the_planners_that_take_them(scenarios_dir):
    assert planner_options("fifo", time_limit=3.0) == {}
    assert planner_options("full", time_limit=3.0, mip_gap=0.0) == {
        "time_limit": 3.0,
        "mip_gap": 0.0,
    }
    scenario = load_scenario(scenarios_dir / "example.json")
    with pytest.raises(TypeError, match="time_limt"):
        solve(scenario, "allocator", time_limt=3)  # a typo is an error, not ignored
    with pytest.raises(ValueError, match="unknown planner"):
        solve(scenario, "greedy")


@pytest.mark.parametrize(
    "make",
    [
        lambda: AllocatorParams(max_packs=0),  # at least one packing
        lambda: AllocatorParams(guard_cells=-1),  # a count
        lambda: AllocatorParams(grid_gpus=-1),
        lambda: FullParams(time_limit="ten"),  # not a number
        lambda: FullParams(relaxation_share=2.0),
        lambda: FullParams(progress=5),  # not callable
    ],
)
def test_bad_parameters_are_refused(make):
    with pytest.raises(ValueError, match="Expected"):
        make()


def test_nan_or_negative_time_limit_and_gap_mean_none():
    params = FullParams(time_limit=float("nan"), mip_gap=-1)
    assert params.time_limit == 0.0 and params.mip_gap == 0.0


def test_params_change_the_plan_as_documented(scenarios_dir):
    # small_packs=1 and fast_work=0 too: else the small-problem rule raises the budget above
    # max_packs (and that budget of work comes with its own moves), or fast_work doubles it
    lean = AllocatorParams(max_packs=1, max_rt_moves=0, small_packs=1, fast_work=0)
    for name in ("mixed-control", "training-heavy"):
        scenario = load_scenario(scenarios_dir / f"{name}.json")
        default = solve(scenario, "allocator")
        one_pack = solve(scenario, "allocator", lean)
        assert default.stats["runtime_ms"] > 0 and one_pack.stats["runtime_ms"] > 0
        # the search only keeps improvements: more of it never lowers the objective
        assert report(scenario, default)["objective"] >= report(scenario, one_pack)["objective"]
    # and on training-heavy the search and the real-time moves pay (747.5 against 715.4)
    assert report(scenario, default)["objective"] > report(scenario, one_pack)["objective"] + 10


def test_solve_status_is_the_metrics_json_string(scenarios_dir):
    scenario = load_scenario(scenarios_dir / "example.json")
    plan = solve(scenario, "full", time_limit=5.0, max_model_terms=1)
    assert plan.stats["status"] is SolveStatus.TOO_LARGE
    assert json.loads(json.dumps(report(scenario, plan), default=str))["status"] == "too_large"
    assert not SolveStatus.TOO_LARGE.solver_ran and SolveStatus.OPTIMAL.solver_ran
    assert all(status.words for status in SolveStatus)


def test_metrics_are_apart_from_planner_stats(scenarios_dir):
    from core.plan import metrics

    scenario = load_scenario(scenarios_dir / "example.json")
    plan = solve(scenario, "full", time_limit=5.0, max_model_terms=1)
    assert "status" not in metrics(scenario, plan)
    assert report(scenario, plan)["status"] == "too_large"
