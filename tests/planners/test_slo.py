"""The real-time coverage SLO (`policy.rt_coverage_target`) and the allocator's floor: fifo.

Every planner reports `slo_met` from the grid; the allocator and `full` meet a target that some
legal plan meets (here: a baseline's coverage, or less), and an infeasible one is reported, never
raised. The allocator never scores below fifo or backfill on the same scenario (issue 11).
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from core.model import BatchJob, Cluster, Policy, RealtimeJob, Scenario
from core.plan import check, metrics
from core.planners import PLANNER_NAMES, solve
from core.planners.allocator import AllocatorParams, plan_allocator
from tests.budget import examples
from tests.strategies import scenarios


def _with_target(scenario: Scenario, target: float | None) -> Scenario:
    return dataclasses.replace(
        scenario, policy=dataclasses.replace(scenario.policy, rt_coverage_target=target)
    )


def _beats(a: float, b: float) -> bool:
    return a >= b - 1e-9 * max(1.0, abs(b))


def test_slo_met_is_none_without_a_target_and_follows_coverage_with_one():
    chat = RealtimeJob("chat", 4, 0, 2, swap_cap=2, demand=(2.0, 4.0))  # at most 2 of 6 units
    scenario = Scenario("t", Cluster(2, 60, 2), (chat,), Policy())
    assert metrics(scenario, solve(scenario, "fifo"))["slo_met"] is None
    for target, met in ((0.5, True), (2 / 3, True), (0.7, False), (1.0, False)):
        m = metrics(_with_target(scenario, target), solve(_with_target(scenario, target), "fifo"))
        assert m["rt_coverage"] == pytest.approx(2 / 3)
        assert m["slo_met"] is met, target


def test_an_infeasible_target_is_reported_by_every_planner_not_raised():
    # 2 GPUs, demand 3 a step: 2/3 coverage at most, the target asks for 90%.
    chat = RealtimeJob("chat", 4, 0, 2, swap_cap=2, demand=(3.0, 3.0, 3.0))
    job = BatchJob("train", "training", 5, 1, 2, 2.0)
    scenario = Scenario("t", Cluster(2, 60, 3), (chat, job), Policy(rt_coverage_target=0.9))
    for name in PLANNER_NAMES:
        plan = solve(scenario, name)
        assert check(scenario, plan) == [], name
        m = metrics(scenario, plan)
        assert m["slo_met"] is False, name
        assert m["rt_coverage"] == pytest.approx(2 / 3), name  # the most coverage there is
    assert solve(scenario, "full", time_limit=10).stats["status"] == "slo_infeasible"


def test_out_of_reach_the_most_coverage_wins_over_the_priorities():
    # One GPU, two services: a (priority 8) asks half of it, b (priority 1) all of it. J gives
    # the GPU to a (8 x 0.5 > 1 x 1): 1/3 of the demand served. No plan reaches 90%; the most
    # coverage there is serves b (2/3), which the target rule ranks first, at J = -8 (penalty
    # weight) x 8 x 0.5 x 4 steps = -128 (the batch job gets no GPU). The allocator kept the
    # plan J prefers (1/3) before it looked for the most coverage.
    a = RealtimeJob("a", 8, 0, 1, swap_cap=1, demand=(0.5,) * 4)
    b = RealtimeJob("b", 1, 0, 1, swap_cap=1, demand=(1.0,) * 4)
    job = BatchJob("train", "training", 5, 1, 1, 2.0)
    scenario = Scenario("t", Cluster(1, 60, 4), (a, b, job), Policy(rt_coverage_target=0.9))
    plain = _with_target(scenario, None)
    assert metrics(plain, plan_allocator(plain))["rt_coverage"] == pytest.approx(1 / 3)
    for name in ("allocator", "full"):
        m = metrics(scenario, solve(scenario, name))
        assert m["slo_met"] is False, name
        assert m["rt_coverage"] == pytest.approx(2 / 3), name
        assert m["objective"] == pytest.approx(-128.0), name


@pytest.mark.slow
@pytest.mark.parametrize(("seed", "most"), [(4113, 0.8414), (31032, 0.9474), (11057, 0.6179)])
def test_the_allocator_reaches_the_most_coverage_full_proves_on_wide_draws(seed, most):
    # wide draws with a 95% target no plan reaches, two services each: the allocator had
    # 81.72%, 89.47% and 61.28%; full proves the most there is (the value here)
    from core.bench import small_case

    scenario = small_case(seed, wide=True, slo=0.95)
    m = metrics(scenario, plan_allocator(scenario))
    assert m["slo_met"] is False and m["rt_coverage"] == pytest.approx(most, abs=5e-5)


@pytest.mark.slow
def test_among_plans_of_the_most_coverage_the_lower_priority_goes_short():
    # wide small-31074, 95% target out of reach: 84.79% is the most coverage there is (full,
    # proved), and the best plan with it (J 74.198) leaves the priority-2 service short where
    # serving it instead of the priority-8 one covers as much. Weighing both services exactly
    # alike in the search for coverage gave a plan of the same coverage at J 32.198.
    from core.bench import small_case

    scenario = small_case(31074, wide=True, slo=0.95)
    m = metrics(scenario, plan_allocator(scenario))
    assert m["rt_coverage"] == pytest.approx(0.8479, abs=5e-5)
    assert m["objective"] == pytest.approx(74.198, abs=1e-3)


def test_a_target_forbids_the_shortfall_the_penalty_alone_would_accept():
    # A priority-8 job pays 8 per GPU-step; serving's penalty is 0.5 x 1 per unit: priced alone,
    # the allocator gives the demand up; a 100% target keeps it served.
    chat = RealtimeJob("chat", 1, 0, 2, swap_cap=2, demand=(2.0,) * 4)
    job = BatchJob("train", "training", 8, 4, 4, 16.0)
    plain = Scenario("t", Cluster(4, 60, 4), (chat, job), Policy(penalty_weight=0.5))
    assert metrics(plain, plan_allocator(plain))["rt_coverage"] == 0.0
    served = _with_target(plain, 1.0)
    for name in ("allocator", "full"):
        m = metrics(served, solve(served, name))
        assert m["rt_coverage"] == 1.0 and m["slo_met"] is True, name


@pytest.mark.slow
@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(max_realtime=3), st.sampled_from([0.5, 0.9, 0.99, 1.0]))
def test_the_allocator_meets_every_target_a_baseline_plan_shows_feasible(scenario, share):
    assume(any(sum(j.demand) > 0 for j in scenario.realtime_jobs))
    witness = max(
        metrics(scenario, solve(scenario, name))["rt_coverage"] for name in ("fifo", "backfill")
    )
    assume(witness > 0)
    target = share * witness
    constrained = _with_target(scenario, target)
    plan = plan_allocator(constrained)
    assert check(constrained, plan) == []
    m = metrics(constrained, plan)
    assert m["slo_met"] is True, (target, m["rt_coverage"])
    for name in ("fifo", "backfill"):  # the baselines only report it
        b = metrics(constrained, solve(constrained, name))
        assert b["slo_met"] is (b["rt_coverage"] >= target - 1e-9)


@settings(
    max_examples=examples(20),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(scenarios(max_gpus=8, max_steps=6, max_jobs=4, max_realtime=2), st.sampled_from([0.7, 1]))
def test_full_meets_every_target_a_baseline_plan_shows_feasible(scenario, share):
    assume(any(sum(j.demand) > 0 for j in scenario.realtime_jobs))
    witness = metrics(scenario, solve(scenario, "fifo"))["rt_coverage"]
    assume(witness > 0)
    constrained = _with_target(scenario, share * witness)
    plan = solve(constrained, "full", time_limit=5.0)
    assert check(constrained, plan) == []
    assert metrics(constrained, plan)["slo_met"] is True


def test_a_service_is_not_starved_for_batch_work_that_cannot_run():
    # Issue 11: 8 GPUs, penalty 5, a priority-1 service demanding 6 GPUs and a priority-8 batch
    # job arriving after the horizon. Nothing can use the GPUs the service would give up.
    service = RealtimeJob("svc", 1, 1, 8, swap_cap=8, demand=(6.0,) * 6)
    late = BatchJob("late", "training", 8, 1, 8, 8.0, arrival_step=6)
    scenario = Scenario("t", Cluster(8, 60, 6), (service, late), Policy(penalty_weight=5))
    m = metrics(scenario, plan_allocator(scenario, AllocatorParams(guard_cells=0)))
    assert m["rt_coverage"] == 1.0
    assert m["objective"] == 0.0
    assert m["objective"] >= metrics(scenario, solve(scenario, "fifo"))["objective"]


def test_a_whole_unit_of_one_service_wins_over_a_fraction_of_another():
    # 2 free GPUs at a step: the priority-8 job's third GPU covers 0.25 of demand (worth 2), the
    # priority-4 job's first covers a whole unit (worth 4): that one gets it.
    big = RealtimeJob("big", 8, 1, 3, swap_cap=3, demand=(2.25,))
    small = RealtimeJob("small", 4, 0, 1, swap_cap=1, demand=(1.0,))
    scenario = Scenario("t", Cluster(3, 60, 1), (big, small), Policy())
    plan = plan_allocator(scenario, AllocatorParams(guard_cells=0))
    held = {job.id: int((plan.grid == i).sum()) for i, job in enumerate(scenario.jobs)}
    assert held == {"big": 2, "small": 1}


@pytest.mark.slow
@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(
        scenarios(max_realtime=3),
        scenarios(max_gpus=4, max_steps=6, max_jobs=4, max_realtime=3),
        scenarios(max_gpus=70, max_steps=30, max_jobs=12, max_realtime=3),
    )
)
def test_the_allocator_never_scores_below_fifo_or_backfill_without_its_guard(scenario):
    # The guard (compare with the baselines, keep the better) is off: the allocator's own plan.
    plan = plan_allocator(scenario, AllocatorParams(guard_cells=0))
    value = metrics(scenario, plan)["objective"]
    for name in ("fifo", "backfill"):
        assert _beats(value, metrics(scenario, solve(scenario, name))["objective"]), name


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(
        scenarios(max_realtime=3),
        scenarios(max_gpus=70, max_steps=30, max_jobs=12, max_realtime=3),
    )
)
def test_the_allocator_packs_fifo_and_backfill_exactly_as_they_plan(scenario):
    # What makes "never below the queues" hold by construction: on the baselines' serving
    # reservation, the allocator's packer with their rules (arrival order, earliest start, the
    # lowest block; fifo never before the previous start) draws their grids cell for cell.
    import numpy as np

    from core.plan import Plan, pin_running
    from core.planners import blocks, fifo
    from core.planners.allocator import packing

    G, T = scenario.cluster.gpus, scenario.cluster.horizon_steps
    serving = fifo.reserved_sets(scenario)
    free = packing._free_masks(G, packing._running_masks(scenario, T), serving)
    discount = list(range(T + 1))  # any: the queue rules never look at value
    packer = packing._Packer(G, T, discount, free, packing._use_grid(AllocatorParams(), G, T))
    order = sorted(packing._candidates(scenario), key=packing._VARIANTS[-1][0])
    for rule in ("fifo", "backfill"):
        grid = Plan.empty(scenario, rule).grid
        pin_running(scenario, grid)
        for index, sets in serving.items():
            grid[blocks.bitsets_to_bool(sets, G).T] = index
        for index, b, g, start, end in packer.pack(order, rule)[0]:
            grid[b : b + g, start:end] = index
        assert np.array_equal(grid, solve(scenario, rule).grid), rule
