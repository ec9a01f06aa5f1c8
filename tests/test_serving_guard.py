"""The rolling horizon's burst guard (core/serving_guard.py, issue 52): hand-computed rises,
floors and starts, legality on random scenarios, fifo untouched, and the real bursty series
where the allocator lost coverage to fifo without it."""

from __future__ import annotations

import json
import runpy

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.cli import main
from core.model import BatchJob, Cluster, RealtimeJob, Scenario
from core.rolling import _put_off, _Started, simulate
from core.serving_guard import (
    bursty,
    guarded,
    guarded_services,
    may_start,
    rises,
    start_reserve,
    step_rises,
    warm_floor,
)
from tests.budget import examples
from tests.paths import ROOT, SCENARIOS_DIR, TRACES_DIR
from tests.strategies import scenarios
from tests.test_rolling import _with_actual_work, seasonal_naive


def test_rises_by_hand():
    # from 0 the series reaches 2, 4, 6 within 1, 2, 3 hours; never more after
    assert rises(np.array([0.0, 2, 4, 6]), 5).tolist() == [2, 4, 6, 6, 6]
    # a jump and its fall: 8 within one hour, and the fall is no rise
    assert rises(np.array([0.0, 0, 8, 8, 0, 0]), 3).tolist() == [8, 8, 8]
    assert rises(np.array([5.0, 4, 3, 2]), 2).tolist() == [0, 0]  # only falling
    assert rises(np.array([1.0, np.nan, 3]), 1).tolist() == [2]  # missing hours skipped
    assert rises(np.array([3.0]), 2).tolist() == [0, 0]  # nothing to rise from


def test_step_rises_span_the_hours_of_each_lead():
    y = np.array([0.0, 2, 4, 6, 8])
    # 30-minute steps: leads 1-2 span one hour, 3-4 two hours
    assert step_rises(y, 4, 30).tolist() == [2, 2, 4, 4]
    assert step_rises(y, 2, 120).tolist() == [4, 8]  # two hours a step


def test_warm_floor_holds_what_the_swap_cap_cannot_catch_up_with():
    job = RealtimeJob("s", 5, 1, 12, 2, demand=(0.0,))
    # a jump of 8 within one step: 8 - 2 = 6 must be held already; within 2 steps 8 - 4 = 4
    assert warm_floor(job, 0.0, np.array([8.0, 8.0])) == 6.0
    assert warm_floor(job, 3.0, np.array([8.0, 8.0])) == 9.0  # from a level of 3
    assert warm_floor(job, 10.0, np.array([8.0])) == 12.0  # never above gpus_max
    assert warm_floor(job, 0.0, np.array([1.0, 3.0, 5.0])) == 0.0  # smooth: caught up
    assert warm_floor(job, 0.0, np.array([])) == 0.0


def test_start_reserve_is_at_most_the_peak_reservation():
    job = RealtimeJob("s", 5, 2, 12, 2, demand=(1.0, 3.0, 2.0))  # peak reservation 3
    assert start_reserve(job, np.array([1.2, 2.0, 9.0])).tolist() == [2, 2, 3]


def test_may_start_by_hand():
    reserve = np.array([4.0, 6.0])
    assert may_start(np.array([2.0]), 2, reserve, 8)  # 2 + 2 <= 8 - 4
    assert not may_start(np.array([2.0, 2.0]), 2, reserve, 8)  # step 1: 4 > 8 - 6
    assert not may_start(np.array([0.0, 0.0, 0.0]), 3, reserve, 8)  # the last reserve holds on


def test_put_off_admits_earlier_jobs_first_and_counts_running_work():
    rt = RealtimeJob("s", 5, 1, 8, 1, demand=(0.0,) * 4)
    jobs = (rt,) + tuple(BatchJob(f"b{k}", "training", 1, 2, 2, gpu_hours=4) for k in range(3))
    actual = Scenario("guard", Cluster(8, 60, 4), jobs)
    started = {1: _Started(0, 2, 0, 3, 3)}  # b0 holds 2 GPUs until step 3
    placements = {1: (0, 2, 0), 2: (2, 2, 1), 3: (4, 2, 1)}  # b1 and b2 (2 steps each) at 1
    off = _put_off(actual, actual, placements, started, 1, 4, np.full(3, 4.0))
    assert off == {3}  # b1 fits (2 + 2 <= 8 - 4), b2 would leave the service 2 of its 4
    assert _put_off(actual, actual, placements, started, 1, 4, np.zeros(3)) == set()


@settings(max_examples=examples(15), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    scenario=scenarios(max_gpus=12, max_steps=12, max_jobs=5),
    factors=st.lists(st.sampled_from([0.5, 1.0, 2.0]), min_size=1, max_size=5),
    replan_steps=st.integers(1, 3),
)
def test_guarded_rolling_plans_are_legal(scenario, factors, replan_steps):
    scenario = _with_actual_work(scenario, factors)
    step = scenario.cluster.step_minutes
    days = scenario.cluster.horizon_steps * step / 1440
    result = simulate(
        scenario,
        days,
        "allocator",
        replan_minutes=replan_steps * step,
        window_hours=6 * step / 60,
        forecaster=seasonal_naive,
        burst_guard=True,
    )
    assert result.metrics["violations"] == 0
    services = [job.id for job in scenario.realtime_jobs]
    assert result.metrics["burst_guarded"] == services  # on: every service
    if services:
        assert result.metrics["burst_guard_held_starts"] >= 0
    else:
        assert "burst_guard_held_starts" not in result.metrics


def test_bursty_is_idle_at_least_half_the_hours():
    idle_half = [0.0] * 12 + [10.0] * 12  # 12 of 24 hours at 0: bursty
    assert bursty(tuple(idle_half))
    assert not bursty(tuple([0.0] * 11 + [10.0] * 13))  # 11 of 24 idle
    # idle is at most IDLE_LEVEL (0.05) of the 90th percentile (10): 0.5 is idle, 0.6 is not
    assert bursty(tuple([0.5] * 12 + [10.0] * 12))
    assert not bursty(tuple([0.6] * 12 + [10.0] * 12))
    assert not bursty(tuple([0.0] * 23))  # under a day of history says nothing
    assert not bursty(None)
    assert bursty(tuple([0.0] * 12 + [float("nan")] * 5 + [9.0] * 12))  # missing hours skipped


def _two_services() -> Scenario:
    steady = RealtimeJob("steady", 5, 1, 4, 1, demand=(1.0,) * 4, history=(2.0,) * 48)
    bursts = RealtimeJob("bursts", 5, 1, 4, 1, demand=(0.0,) * 4, history=(0.0, 0.0, 0.0, 4.0) * 12)
    train = BatchJob("b", "training", 1, 2, 2, gpu_hours=4)
    return Scenario("two", Cluster(8, 60, 4), (steady, bursts, train))


def test_guarded_services_auto_on_off_and_fifo():
    scenario = _two_services()
    assert guarded_services(scenario, "allocator", None) == [1]  # auto: the bursty one
    assert guarded_services(scenario, "allocator", True) == [0, 1]
    assert guarded_services(scenario, "allocator", False) == []
    assert guarded_services(scenario, "fifo", True) == []
    assert guarded_services(scenario, "backfill", None) == []
    result = simulate(scenario, 4 / 24, "allocator", forecaster=seasonal_naive)
    assert result.metrics["burst_guarded"] == ["bursts"]
    assert result.metrics["burst_guard_held_starts"] >= 0
    off = simulate(scenario, 4 / 24, "allocator", forecaster=seasonal_naive, burst_guard=False)
    assert off.metrics["burst_guarded"] == [] and "burst_guard_held_starts" not in off.metrics


def test_fifo_and_backfill_are_not_guarded():
    assert not guarded("fifo") and not guarded("backfill") and guarded("allocator")
    from core.formats import load_scenario

    scenario = load_scenario(SCENARIOS_DIR / "rolling-surge.json")
    plain = simulate(scenario, 1, "fifo", burst_guard=False)
    guard = simulate(scenario, 1, "fifo", burst_guard=True)
    assert np.array_equal(plain.plan.grid, guard.plan.grid)
    assert "burst_guard_held_starts" not in guard.metrics
    assert "burst_guarded" not in guard.metrics


def test_rolling_surge_is_not_bursty_so_auto_is_off():
    """rolling-surge's service is busy most hours: auto leaves it unguarded, the same plan as
    off (the guard would only cost batch value there, docs/benchmarks.md)."""
    from core.formats import load_scenario

    scenario = load_scenario(SCENARIOS_DIR / "rolling-surge.json")
    auto = simulate(scenario, 1, "allocator")
    off = simulate(scenario, 1, "allocator", burst_guard=False)
    assert auto.metrics["burst_guarded"] == []
    assert np.array_equal(auto.plan.grid, off.plan.grid)


@pytest.mark.parametrize("choice", ["on", "off", "auto"])
def test_cli_simulate_burst_guard(capsys, choice):
    path = str(SCENARIOS_DIR / "rolling-surge.json")
    argv = ["simulate", path, "--days", "1", "--burst-guard", choice, "--no-progress"]
    assert main(argv) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["violations"] == 0
    assert metrics["burst_guarded"] == (["chat-api", "embed-api"] if choice == "on" else [])
    assert ("burst_guard_held_starts" in metrics) == (choice == "on")


def test_cli_simulate_burst_guard_rejects_an_unknown_choice(capsys):
    path = str(SCENARIOS_DIR / "rolling-surge.json")
    with pytest.raises(SystemExit) as exit_:
        main(["simulate", path, "--days", "1", "--burst-guard", "sometimes"])
    assert exit_.value.code == 2
    assert "--burst-guard" in capsys.readouterr().err


@pytest.mark.slow
def test_burst_guard_keeps_fifos_coverage_on_a_real_bursty_series():
    """Helios vcira (idle 92% of hours) from hour 672, scaled to 16 GPUs: without the guard
    the allocator had started batch work the burst then needed (coverage 0.943 to fifo's 1)."""
    if not (TRACES_DIR / "helios_earth_vcira_hourly.csv").exists():
        pytest.skip(f"the shared traces are not at {TRACES_DIR}")
    script = runpy.run_path(str(ROOT / "scripts" / "rolling_real_demand.py"))
    series = script["BACKTEST"]["real_series"](TRACES_DIR)["helios vcira running_gpus"]
    from core.formats.scenario_json import scenario_from_dict

    scenario = scenario_from_dict(script["scenario_for"](series, 672, "vcira"))
    fifo = simulate(scenario, 3, "fifo").metrics
    plain = simulate(scenario, 3, "allocator", burst_guard=False).metrics
    guard = simulate(scenario, 3, "allocator").metrics  # auto: vcira is idle most hours
    assert guard["burst_guarded"] == [scenario.realtime_jobs[0].id]
    assert plain["rt_coverage"] < fifo["rt_coverage"] - 0.01  # the case the guard is for
    assert guard["rt_coverage"] >= fifo["rt_coverage"] - 0.001
    assert guard["burst_guard_held_starts"] > 0 and guard["violations"] == 0
    assert guard["value"] >= fifo["value"]
