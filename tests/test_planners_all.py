"""Every registered planner through the same tests: legal plans, metric invariants, bad input.

The `planner` fixture (conftest.py) runs each test once per registered name, so a new planner
gets all of this without a line here. Metrics are recomputed by hand, cell by cell, from the
grid and the SPEC's definitions, independently of `core.plan.metrics`.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from core.cli import main
from core.model import BatchJob, Cluster, RealtimeJob, Scenario
from core.plan import IDLE, Plan, check, metrics
from tests.strategies import scenarios

PROPERTY_TIME_LIMIT = 1.0  # seconds per Hypothesis example for planners that take a limit


def hand_metrics(scenario: Scenario, plan: Plan) -> dict[str, float | None]:
    """SPEC section 1's metrics (and section 7's that random scenarios exercise) from the grid
    with plain loops: the test's own reading."""
    c, policy = scenario.cluster, scenario.policy
    G, T = c.gpus, c.horizon_steps
    step_hours = c.step_minutes / 60
    held = [[0] * T for _ in scenario.jobs]
    for g in range(G):
        for t in range(T):
            j = int(plan.grid[g, t])
            if j != IDLE:
                held[j][t] += 1

    batch_cells = served = allocated_rt = demanded = shortfall = above_demand = 0.0
    reward = penalty = value = 0.0
    started = completed = 0
    waits = []
    for j, job in enumerate(scenario.jobs):
        if isinstance(job, BatchJob):
            batch_cells += sum(held[j])
            reward += job.priority * sum(n * policy.decay**t for t, n in enumerate(held[j]))
            value += job.priority * sum(held[j]) * step_hours
            steps = [t for t in range(T) if held[j][t]]
            if steps:
                started += 1
                first = steps[0]
                completed += first + scenario.duration(job, held[j][first]) <= T
                if job.running is None:
                    waits.append((first - job.arrival_step) * step_hours)
        else:
            for t in range(T):
                allocated_rt += held[j][t]
                served += min(held[j][t], job.demand[t])
                demanded += job.demand[t]
                short = max(0.0, job.demand[t] - held[j][t])
                shortfall += short
                penalty += job.priority * short
                above_demand += max(0.0, held[j][t] - job.demand[t])
    return {
        "utilization": (batch_cells + served) / (G * T),
        "allocated_fraction": (batch_cells + allocated_rt) / (G * T),
        "value": value,
        "objective": policy.reward_weight * (reward - policy.penalty_weight * penalty),
        "completed_jobs": completed,
        "started_jobs": started,
        "batch_jobs": len(scenario.batch_jobs),
        "rt_shortfall_gpu_hours": shortfall * step_hours,
        "rt_coverage": served / demanded if demanded > 0 else 1.0,
        "unstarted_jobs": len(scenario.batch_jobs) - started,
        "idle_gpu_hours": (G * T - batch_cells - allocated_rt) * step_hours,
        "reserved_idle_gpu_hours": above_demand * step_hours,
        "wait_hours_p50": float(np.percentile(waits, 50)) if waits else None,
        "wait_hours_p90": float(np.percentile(waits, 90)) if waits else None,
    }


def run_property(max_examples: int, strategy, test) -> None:
    """Run `test` under Hypothesis with a per-planner example count (set at run time)."""
    configured = settings(
        max_examples=max_examples, deadline=None, suppress_health_check=[HealthCheck.too_slow]
    )
    configured(given(strategy)(test))()


def test_every_plan_is_legal(planner, plan_with, max_examples):
    def legal(scenario):
        plan = plan_with(scenario, planner, time_limit=PROPERTY_TIME_LIMIT)
        violations = check(scenario, plan)
        assert violations == [], [str(v) for v in violations]
        assert plan.grid.shape == (scenario.cluster.gpus, scenario.cluster.horizon_steps)

    run_property(max_examples, scenarios(), legal)


@pytest.mark.slow
def test_metrics_keep_their_invariants_and_match_a_hand_count(planner, plan_with, max_examples):
    def invariants(scenario):
        plan = plan_with(scenario, planner, time_limit=PROPERTY_TIME_LIMIT)
        m = dict(metrics(scenario, plan))
        eps = 1e-9
        assert -eps <= m["utilization"] <= m["allocated_fraction"] + eps
        assert m["allocated_fraction"] <= 1 + eps
        assert -eps <= m["rt_coverage"] <= 1 + eps
        assert 0 <= m["completed_jobs"] <= m["started_jobs"] <= m["batch_jobs"]
        assert m["value"] >= 0 and m["rt_shortfall_gpu_hours"] >= 0
        assert math.isfinite(m["runtime_ms"]) and m["runtime_ms"] >= 0
        assert m["planner"] == planner
        assert 0 <= m["fragmented_gpu_hours"] <= m["idle_gpu_hours"] + eps
        if m["wait_hours_p50"] is not None:
            assert 0 <= m["wait_hours_p50"] <= m["wait_hours_p90"] + eps
        for key, expected in hand_metrics(scenario, plan).items():
            if expected is None:
                assert m[key] is None, key
            else:
                assert m[key] == pytest.approx(expected, rel=1e-9, abs=1e-9), key

    run_property(max_examples, scenarios(), invariants)


def _scenario(gpus: int, steps: int, *jobs) -> Scenario:
    return Scenario("edge", Cluster(gpus, 60, steps), tuple(jobs))


# (scenario, what every planner must do with it): small cases with one right answer.
EDGE_CASES = {
    "no jobs": (_scenario(4, 3), lambda s, p, m: (p.grid == IDLE).all()),
    "every job arrives at the horizon": (
        _scenario(4, 3, BatchJob("late", "training", 5, 1, 4, 8, arrival_step=3)),
        lambda s, p, m: (p.grid == IDLE).all() and m["started_jobs"] == 0,
    ),
    "serving holds the whole cluster at its minimum": (
        _scenario(
            2,
            3,
            RealtimeJob("chat", 8, gpus_min=2, gpus_max=2, swap_cap=0, demand=(0, 1, 2)),
            BatchJob("wait", "training", 9, 1, 2, 2),
        ),
        lambda s, p, m: (p.grid == 0).all() and m["started_jobs"] == 0,
    ),
    "one job that fits exactly": (
        _scenario(4, 2, BatchJob("fit", "training", 1, 4, 4, 8)),
        lambda s, p, m: (p.grid == 0).all() and m["completed_jobs"] == 1,
    ),
}


@pytest.mark.parametrize("case", list(EDGE_CASES))
def test_edge_cases_have_one_right_answer(planner, plan_with, case):
    scenario, right = EDGE_CASES[case]
    plan = plan_with(scenario, planner)
    assert check(scenario, plan) == []
    assert right(scenario, plan, dict(metrics(scenario, plan))), plan.grid


def _example_with(scenarios_dir, path, **changes) -> None:
    doc = json.loads((scenarios_dir / "example.json").read_text())
    for key, value in changes.items():
        doc["jobs"][3][key] = value  # dpo-13b
    path.write_text(json.dumps(doc))


# (command after `gpuplan`, how to make its file, words the one-line error must contain)
BAD_INPUT = [
    pytest.param("plan", None, ["missing.json", "no such file"], id="plan: no such file"),
    pytest.param(
        "plan",
        lambda d, p: p.write_text('{"cluster": '),
        ["bad.json", "not valid JSON"],
        id="plan: not JSON",
    ),
    pytest.param(
        "plan",
        lambda d, p: _example_with(d, p, gpus_max=3),
        ["bad.json", "job 'dpo-13b'", "gpus_max", "power of two"],
        id="plan: gpus_max 3",
    ),
    pytest.param(
        "simulate",
        lambda d, p: _example_with(d, p, priority="high"),
        ["bad.json", "job 'dpo-13b'", "priority", "number"],
        id="simulate: priority text",
    ),
]


@pytest.mark.parametrize("command, make, words", BAD_INPUT)
def test_bad_input_is_one_line_naming_file_job_and_field(
    planner, command, make, words, scenarios_dir, tmp_path, capsys
):
    path = tmp_path / ("missing.json" if make is None else "bad.json")
    if make is not None:
        make(scenarios_dir, path)
    assert main([command, str(path), "--planner", planner]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    for word in words:
        assert word in err[0], (word, err[0])


@pytest.mark.parametrize("command", ["plan", "simulate"])
def test_a_time_limit_that_is_not_positive_is_refused(planner, command, scenarios_dir, capsys):
    example = str(scenarios_dir / "example.json")
    with pytest.raises(SystemExit) as exited:
        main([command, example, "--planner", planner, "--time-limit", "0"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "--time-limit" in err and "must be > 0, got 0" in err
