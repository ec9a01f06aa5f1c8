"""The checker rejects each of the five constraints by name; metrics match hand computation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from core.formats import plan_from_grid_csv
from core.model import BatchJob, Cluster, Policy, RealtimeJob, Running, Scenario
from core.plan import IDLE, Plan, batch_placements, check, metrics, plan_rank, ranks_above


def scenario_8x4() -> Scenario:
    """8 GPUs x 4 hourly steps: a 2-GPU job (4 steps of work), a 1-GPU job, a service."""
    return Scenario(
        "eight",
        Cluster(8, 60, 4),
        (
            BatchJob("pair", "training", 2, gpus_min=2, gpus_max=2, gpu_hours=6),  # 3 steps on 2
            BatchJob(
                "late", "quantization", 1, gpus_min=1, gpus_max=1, gpu_hours=1, arrival_step=2
            ),
            RealtimeJob("chat", 4, gpus_min=1, gpus_max=3, swap_cap=1, demand=(1, 2, 2, 1)),
        ),
    )


def legal_grid(s: Scenario) -> np.ndarray:
    grid = np.full((8, 4), IDLE)
    grid[0:2, 0:3] = 0  # pair on [0, 2) steps 0..2
    grid[4, 2] = 1  # late on GPU 4 at step 2
    grid[7, :] = 2  # chat keeps GPU 7 and grows to 6 for the peak
    grid[6, 1:3] = 2
    return grid


def names(violations) -> set[int]:
    return {v.constraint for v in violations}


def test_the_legal_grid_is_legal():
    s = scenario_8x4()
    assert check(s, Plan(legal_grid(s))) == []


def test_constraint_1_a_cell_claimed_twice():
    s = scenario_8x4()
    rows = ["step,gpu,job_id"] + [
        f"{t},{g},{s.jobs[j].id}"
        for g, t in zip(*np.nonzero(legal_grid(s) >= 0), strict=True)
        for j in [legal_grid(s)[g, t]]
    ]
    rows.append("2,4,chat")  # GPU 4 at step 2 is 'late''s
    plan = plan_from_grid_csv(s, "\n".join(rows) + "\n")
    violations = check(s, plan)
    assert names(violations) == {1}
    v = violations[0]
    assert (v.job_id, v.gpu, v.step) == ("chat", 4, 2)
    assert "one job per GPU per step" in str(v) and "'late'" in str(v)


def test_constraint_2_block_outside_the_range():
    s = scenario_8x4()
    grid = legal_grid(s)
    grid[0:4, 0:2] = 0  # pair on 4 GPUs: not allowed (2..2), and 4 x 2 steps of work is right
    grid[0:4, 2] = IDLE
    violations = check(s, Plan(grid))
    assert 2 in names(violations)
    assert any(v.job_id == "pair" and "allowed 2..2" in v.message for v in violations)


def test_constraint_2_realtime_below_its_minimum():
    s = scenario_8x4()
    chat = s.jobs[2]
    needs_two = RealtimeJob(chat.id, chat.priority, 2, chat.gpus_max, chat.swap_cap, chat.demand)
    s2 = s.replace(jobs=(s.jobs[0], s.jobs[1], needs_two))
    violations = check(s2, Plan(legal_grid(s)))  # chat holds 1 GPU at steps 0 and 3
    assert names(violations) == {2}
    assert [(v.job_id, v.step) for v in violations] == [("chat", 0), ("chat", 3)]


def test_constraint_3_misaligned_block():
    s = scenario_8x4()
    grid = legal_grid(s)
    grid[0:2, 0:3] = IDLE
    grid[1:3, 0:3] = 0  # [1, 3) is contiguous but not aligned to 2
    violations = check(s, Plan(grid))
    assert names(violations) == {3}
    assert violations[0].job_id == "pair" and violations[0].gpu == 1


def test_constraint_3_block_with_a_hole():
    s = scenario_8x4()
    grid = legal_grid(s)
    grid[1, 0:3] = IDLE
    grid[3, 0:3] = 0  # GPUs 0 and 3
    assert 3 in names(check(s, Plan(grid)))


def test_constraint_4_swap_cap():
    s = scenario_8x4()
    grid = legal_grid(s)
    grid[6:8, 1:3] = IDLE
    grid[2:4, 1] = 2  # chat jumps from {7} to {2, 3}: 3 changes, cap 1
    grid[6:8, 2] = 2
    violations = check(s, Plan(grid))
    assert 4 in names(violations)
    v = next(v for v in violations if v.constraint == 4)
    assert (v.job_id, v.step) == ("chat", 1) and "swap_cap is 1" in v.message


def test_constraint_4_counts_from_previous_gpus():
    s = scenario_8x4()
    chat = s.jobs[2]
    moved = RealtimeJob(
        chat.id,
        chat.priority,
        chat.gpus_min,
        chat.gpus_max,
        chat.swap_cap,
        chat.demand,
        previous_gpus=(5,),
    )
    s2 = s.replace(jobs=(s.jobs[0], s.jobs[1], moved))
    violations = check(s2, Plan(legal_grid(s)))  # step 0 holds {7}: release 5, gain 7 = 2
    assert [(v.constraint, v.step) for v in violations] == [(4, 0)]


@pytest.mark.parametrize(
    "edit, words",
    [
        (lambda g: g.__setitem__((slice(0, 2), 1), IDLE), "interrupted"),
        (lambda g: g.__setitem__((slice(0, 2), 2), IDLE), "needs 3"),
        (
            lambda g: (
                g.__setitem__((slice(0, 2), slice(0, 3)), IDLE),
                g.__setitem__((slice(0, 2), 1), 0),
                g.__setitem__((slice(2, 4), 2), 0),
                g.__setitem__((slice(2, 4), 3), 0),
            ),
            "moves",
        ),
    ],
)
def test_constraint_5_no_preemption(edit, words):
    s = scenario_8x4()
    grid = legal_grid(s)
    edit(grid)
    violations = check(s, Plan(grid))
    assert 5 in names(violations)
    assert any(v.constraint == 5 and words in v.message for v in violations), violations


def test_constraint_5_start_before_arrival():
    s = scenario_8x4()
    grid = legal_grid(s)
    grid[4, 2] = IDLE
    grid[4, 1] = 1  # 'late' arrives at step 2
    violations = check(s, Plan(grid))
    assert [(v.constraint, v.job_id) for v in violations] == [(5, "late")]
    assert "arrival_step 2" in violations[0].message


def test_running_job_must_stay_where_it_is():
    s = Scenario(
        "running",
        Cluster(4, 60, 3),
        (BatchJob("old", "training", 1, 2, 2, 10, running=Running(2, 2, 2)),),
    )
    grid = np.full((4, 3), IDLE)
    grid[0:2, 0:2] = 0
    assert 2 in names(check(s, Plan(grid)))
    grid[:] = IDLE
    assert 5 in names(check(s, Plan(grid)))
    grid[2:4, 0:2] = 0
    assert check(s, Plan(grid)) == []


def test_job_cut_by_the_horizon_is_legal_and_not_completed():
    s = Scenario("cut", Cluster(2, 60, 3), (BatchJob("long", "training", 1, 2, 2, 20),))
    grid = np.full((2, 3), IDLE)
    grid[:, 1:] = 0
    assert check(s, Plan(grid)) == []
    m = metrics(s, Plan(grid))
    assert (m["started_jobs"], m["completed_jobs"]) == (1, 0)


def metrics_scenario() -> tuple[Scenario, Plan]:
    """4 GPUs x 2 steps, decay 0.5, penalty 2: every number below is worked out by hand."""
    s = Scenario(
        "hand",
        Cluster(4, 60, 2),
        (
            BatchJob("A", "training", 2, gpus_min=2, gpus_max=2, gpu_hours=4),  # 2 steps on 2
            BatchJob("B", "batch_inference", 1, gpus_min=1, gpus_max=1, gpu_hours=1),
            RealtimeJob("R", 3, gpus_min=0, gpus_max=2, swap_cap=2, demand=(1.5, 2)),
        ),
        Policy(penalty_weight=2, decay=0.5, reward_weight=1),
    )
    grid = np.full((4, 2), IDLE)
    grid[0:2, :] = 0  # A: 4 cells
    grid[2, 1] = 1  # B: 1 cell at step 1
    grid[2:4, 0] = 2  # R: 2 GPUs at step 0 (demand 1.5), 1 at step 1 (demand 2)
    grid[3, 1] = 2
    return s, Plan(grid, "hand")


def test_metrics_match_hand_computation():
    s, plan = metrics_scenario()
    assert check(s, plan) == []
    m = metrics(s, plan)
    # batch cells 5; real-time holds 2 + 1 = 3 and serves min(2,1.5) + min(1,2) = 2.5
    assert m["utilization"] == pytest.approx((5 + 2.5) / 8)
    assert m["allocated_fraction"] == pytest.approx((5 + 3) / 8)
    assert m["value"] == pytest.approx(2 * 4 + 1 * 1)
    # reward: A 2*(2*1 + 2*0.5) = 6, B 1*(1*0.5) = 0.5; penalty 3 * 1 = 3; J = 6.5 - 2*3
    assert m["objective"] == pytest.approx(0.5)
    assert (m["completed_jobs"], m["started_jobs"], m["batch_jobs"]) == (2, 2, 2)
    assert m["rt_shortfall_gpu_hours"] == pytest.approx(1.0)
    assert m["rt_coverage"] == pytest.approx(2.5 / 3.5)


def test_metrics_scale_with_step_length_and_reward_weight():
    s, plan = metrics_scenario()
    s2 = s.replace(cluster=Cluster(4, 30, 2), policy=Policy(2, 0.5, 3))
    # at 30 minutes, A needs 4 steps on 2 GPUs: the grid cuts it, still legal at the horizon
    assert check(s2, plan) == []
    m = metrics(s2, plan)
    assert m["value"] == pytest.approx(9 * 0.5)
    assert m["rt_shortfall_gpu_hours"] == pytest.approx(0.5)
    assert m["objective"] == pytest.approx(3 * 0.5)
    assert m["completed_jobs"] == 0  # both now need more steps than the horizon leaves
    assert m["started_jobs"] == 2


def test_plan_rank_follows_the_coverage_rule():
    s, plan = metrics_scenario()  # coverage 2.5 / 3.5, J 0.5
    assert plan_rank(s, plan) == (True, 0.0, pytest.approx(0.5))  # no target: J alone
    at = s.replace(policy=Policy(2, 0.5, 1, rt_coverage_target=0.7))
    assert plan_rank(at, plan) == (True, 0.0, pytest.approx(0.5))
    above = s.replace(policy=Policy(2, 0.5, 1, rt_coverage_target=0.8))
    assert plan_rank(above, plan) == (False, pytest.approx(2.5 / 3.5), pytest.approx(0.5))
    empty = Plan.empty(above)  # serves nothing: less coverage ranks lower whatever J
    assert plan_rank(above, empty)[:2] == (False, 0.0)


def test_a_plan_that_meets_the_target_ranks_above_whatever_its_objective():
    assert ranks_above((True, 0.0, -50.0), (False, 0.9, 100.0))
    assert not ranks_above((False, 0.9, 100.0), (True, 0.0, -50.0))
    assert ranks_above((False, 0.9, -50.0), (False, 0.8, 100.0))  # then the most coverage
    assert ranks_above((True, 0.0, 10.0), (True, 0.0, 9.0))
    assert not ranks_above((True, 0.0, 10.0 + 1e-12), (True, 0.0, 10.0))  # a tie is not a win


def test_no_realtime_demand_means_full_coverage():
    s = Scenario("none", Cluster(2, 60, 2), (BatchJob("x", "training", 1, 1, 1, 1),))
    m = metrics(s, Plan.empty(s))
    assert m["rt_coverage"] == 1.0 and m["utilization"] == 0.0 and m["objective"] == 0.0
    assert math.isfinite(m["runtime_ms"])


def test_placements_read_off_the_grid():
    s, plan = metrics_scenario()
    p = batch_placements(s, plan)
    assert (p["A"].gpu_start, p["A"].gpus, p["A"].start_step, p["A"].end_step) == (0, 2, 0, 2)
    assert (p["B"].gpu_start, p["B"].gpus, p["B"].start_step, p["B"].end_step) == (2, 1, 1, 2)
