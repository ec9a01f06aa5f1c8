"""core.compare: utilization against value between two plans, on hand-made grids and benchmarks."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from core.bench import SCENARIO_DIR
from core.compare import MAX_NAMED, compare_plans, describe, explain_divergence, status
from core.formats import load_scenario
from core.model import BatchJob, Cluster, Scenario
from core.plan import IDLE, Plan, check, job_outcomes, metrics
from core.planners import solve
from tests.budget import examples

from .strategies import scenarios

# Two GPUs, four one-hour steps. Job numbers in the grids are positions in JOBS.
JOBS = (
    BatchJob("low", "training", 1, 1, 1, 4.0),  # 0: 4 steps on 1 GPU
    BatchJob("high", "training", 5, 1, 1, 4.0),  # 1: 4 steps on 1 GPU
    BatchJob("eval", "batch_inference", 3, 1, 1, 2.0),  # 2: 2 steps on 1 GPU
    BatchJob("big", "training", 9, 2, 2, 16.0),  # 3: 8 steps on 2 GPUs, cut at 4
)
TINY = Scenario("tiny", Cluster(2, 60, 4), JOBS)


def grid(*rows: list[int]) -> Plan:
    """A plan from one row per GPU (job number per step, -1 idle)."""
    plan = Plan(np.array(rows, dtype=np.int32))
    assert check(TINY, plan) == []
    return plan


X = IDLE
RUNS_LOW = grid([0, 0, 0, 0], [2, 2, X, X])  # low and eval complete: value 1*4 + 3*2 = 10
RUNS_HIGH = grid([1, 1, 1, 1], [2, 2, X, X])  # high and eval complete: value 5*4 + 3*2 = 26
RUNS_BIG = grid([3, 3, 3, 3], [3, 3, 3, 3])  # big cut by the horizon: value 9*8 = 72
RUNS_SMALL = grid([2, 2, X, X], [0, 0, 0, 0])  # low and eval complete, on other GPUs


def test_status_is_completed_cut_or_waiting():
    def statuses(plan):
        return {o.job.id: (status(o), o.delivered_gpu_hours) for o in job_outcomes(TINY, plan)}

    assert statuses(RUNS_BIG) == {
        "low": ("waiting", 0.0),
        "high": ("waiting", 0.0),
        "eval": ("waiting", 0.0),
        "big": ("cut", 8.0),  # 2 GPUs x 4 of its 8 steps
    }
    assert statuses(RUNS_LOW) == {
        "low": ("completed", 4.0),
        "high": ("waiting", 0.0),
        "eval": ("completed", 2.0),
        "big": ("waiting", 0.0),
    }


def test_same_utilization_more_value_names_the_jobs_swapped():
    d = compare_plans(TINY, RUNS_LOW, RUNS_HIGH, "FIFO", "allocator")
    assert (d.base_utilization, d.utilization) == (0.75, 0.75)  # 6 of 8 cells each
    assert (d.base_completed, d.completed, d.batch_jobs) == (2, 2, 4)
    assert d.value_gain == pytest.approx(26 / 10 - 1)
    assert [new.job.id for _, new in d.gained] == ["high"]
    assert [old.job.id for old, _ in d.lost] == ["low"]
    text = describe(d)
    assert text.startswith(
        "Same utilization (allocator 75.0%, FIFO 75.0%), the same completed jobs (2 of 4), "
        "+160.0% value: allocator ran higher-priority jobs instead: it completed high "
        "(priority 5); FIFO completed low (priority 1) in their place."
    )
    assert "About as much work ran on both plans" in text
    assert "eval" not in text  # the same outcome on both plans: not a difference


def test_fewer_completed_more_value_says_why():
    text = explain_divergence(TINY, RUNS_LOW, RUNS_BIG, "FIFO", "allocator")
    assert text.startswith(
        "Higher utilization (allocator 100.0%, FIFO 75.0%), fewer completed jobs (0 vs 2 of 4), "
        "+620.0% value: allocator ran higher-priority jobs instead: it ran big (priority 9) "
        "until the horizon cut it; FIFO completed low (priority 1), eval (priority 3) in their "
        "place."
    )
    assert "A completed job counts once whatever its size and priority" in text


def test_the_other_way_round_is_lower_utilization_more_completed_less_value():
    text = explain_divergence(TINY, RUNS_BIG, RUNS_LOW, "allocator", "FIFO")
    assert text.startswith(
        "Lower utilization (FIFO 75.0%, allocator 100.0%), more completed jobs (2 vs 0 of 4), "
        "-86.1% value: FIFO ran lower-priority jobs instead: it completed low (priority 1), "
        "eval (priority 3); allocator ran big (priority 9) until the horizon cut it in their "
        "place."
    )
    assert "counts once" not in text  # only said when fewer completions bring more value


def test_plans_with_the_same_outcomes_differ_only_in_placement():
    text = explain_divergence(TINY, RUNS_LOW, RUNS_SMALL, "FIFO", "backfill")
    assert text == (
        "Same utilization (backfill 75.0%, FIFO 75.0%), the same completed jobs (2 of 4), "
        "the same value: every batch job has the same outcome on both plans (completed, cut "
        "by the horizon, or waiting); they differ only in when and on how many GPUs jobs run."
    )


def test_a_base_plan_without_value_has_no_ratio():
    empty = Plan.empty(TINY)
    d = compare_plans(TINY, empty, RUNS_LOW, "FIFO", "allocator")
    assert d.value_gain is None
    text = describe(d)
    assert "value 10 (against none)" in text
    assert "allocator also completed low (priority 1), eval (priority 3), which FIFO did not" in (
        text
    )
    assert "FIFO also completed low" in explain_divergence(TINY, RUNS_LOW, empty, "FIFO", "x")


def test_long_lists_name_the_first_jobs_and_count_the_rest():
    jobs = tuple(BatchJob(f"j{k}", "training", k + 1, 1, 1, 1.0) for k in range(MAX_NAMED + 3))
    scenario = Scenario("many", Cluster(len(jobs), 60, 1), jobs)
    everyone = Plan(np.arange(len(jobs), dtype=np.int32).reshape(-1, 1))
    text = explain_divergence(scenario, Plan.empty(scenario), everyone, "FIFO", "allocator")
    assert f"j{MAX_NAMED - 1} (priority {MAX_NAMED:g}), 3 more, which FIFO did not" in text
    assert f"j{MAX_NAMED} " not in text


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(max_gpus=12, max_steps=8, max_jobs=5))
def test_statuses_agree_with_metrics_and_comparison_is_symmetric(scenario):
    fifo, allocator = solve(scenario, "fifo"), solve(scenario, "allocator")
    for plan in (fifo, allocator):
        m, statuses = metrics(scenario, plan), [status(o) for o in job_outcomes(scenario, plan)]
        assert statuses.count("completed") == m["completed_jobs"]
        assert len(statuses) - statuses.count("waiting") == m["started_jobs"]
    there, back = compare_plans(scenario, fifo, allocator), compare_plans(scenario, allocator, fifo)
    assert [(b, a) for a, b in there.gained] == list(back.lost)
    assert [(b, a) for a, b in there.lost] == list(back.gained)
    assert isinstance(describe(there), str) and describe(there).endswith(".")


# --- the benchmarks -----------------------------------------------------------------------------


def _bench(name: str):
    scenario = load_scenario(SCENARIO_DIR / f"{name}.json")
    return scenario, solve(scenario, "fifo"), solve(scenario, "allocator")


def test_divergence_scenario_explains_the_tie_with_the_evening_jobs():
    scenario, fifo, allocator = _bench("scale-64-divergence")
    d = compare_plans(scenario, fifo, allocator, "FIFO", "allocator")
    assert d.same_utilization and d.completed == d.base_completed == 27
    assert {new.job.id for _, new in d.gained} == {"batch-27", "training-28", "batch-29"}
    assert {old.job.id for old, _ in d.lost} == {"sweep-21", "sweep-22", "sweep-23"}
    text = describe(d)
    assert text.startswith("Same utilization (allocator 44.6%, FIFO 44.6%), the same completed")
    assert "+19.8% value: allocator ran higher-priority jobs instead" in text
    for job in ("batch-27 (priority 3)", "training-28 (priority 5)", "sweep-22 (priority 2)"):
        assert job in text


def test_mixed_control_explains_fewer_completed_jobs_with_more_value():
    scenario, fifo, allocator = _bench("mixed-control")
    m_fifo, m_alloc = metrics(scenario, fifo), metrics(scenario, allocator)
    assert m_alloc["completed_jobs"] < m_fifo["completed_jobs"]  # the case this sentence is for
    assert m_alloc["value"] > m_fifo["value"]
    text = explain_divergence(scenario, fifo, allocator, "FIFO", "allocator")
    counts = f"({m_alloc['completed_jobs']} vs {m_fifo['completed_jobs']} of 11)"
    assert f"fewer completed jobs {counts}" in text
    assert f"{m_alloc['value'] / m_fifo['value'] - 1:+.1%} value" in text
    assert "A completed job counts once whatever its size and priority" in text
    d = compare_plans(scenario, fifo, allocator)
    for old, new in d.lost:  # every job FIFO took further is named, with its priority
        assert f"{old.job.id} (priority {old.job.priority:g})" in text
        assert old.completed and not new.completed
