"""SPEC section 7's metrics on a plan small enough to count by hand."""

from __future__ import annotations

import numpy as np
import pytest

from core.model import BatchJob, Cluster, Policy, RealtimeJob, Scenario
from core.plan import Plan, check, jain_index, job_outcomes, metrics, team_outcomes

# 4 GPUs x 4 hourly steps ('.' idle):     demand of R: 0.5, 1.5, 0, 1
#   GPU 0:  .  A  A  .
#   GPU 1:  .  A  A  .
#   GPU 2:  .  .  B  B
#   GPU 3:  R  R  .  R
JOBS = (
    BatchJob("A", "training", 2, 2, 2, 4, arrival_step=0, team="x", deadline_step=1),
    BatchJob("B", "batch_inference", 1, 1, 1, 2, arrival_step=0, team="y", deadline_step=4),
    BatchJob("C", "quantization", 3, 4, 4, 8, arrival_step=0, team="y"),
    RealtimeJob("R", 5, 0, 2, swap_cap=2, demand=(0.5, 1.5, 0, 1), team="x"),
)
GRID = np.array([[-1, 0, 0, -1], [-1, 0, 0, -1], [-1, -1, 1, 1], [3, 3, -1, 3]])


@pytest.fixture
def small():
    scenario = Scenario("small", Cluster(4, 60, 4), JOBS, Policy(gpu_hour_cost=2.0))
    plan = Plan(GRID.copy())
    assert check(scenario, plan) == []
    return scenario, plan


def test_waits_idle_cost_and_deadlines_match_the_hand_count(small):
    m = metrics(*small)
    # waits: A 1 h, B 2 h; numpy's linear percentile: p50 1.5, p90 1 + 0.9 * 1
    assert m["wait_hours_p50"] == pytest.approx(1.5)
    assert m["wait_hours_p90"] == pytest.approx(1.9)
    assert m["unstarted_jobs"] == 1 and m["completed_jobs"] == 2 and m["started_jobs"] == 2
    assert m["idle_gpu_hours"] == 7  # GPU 0: 2, GPU 1: 2, GPU 2: 2, GPU 3: 1
    assert m["reserved_idle_gpu_hours"] == pytest.approx(0.5)  # 1 held at step 0 for 0.5
    assert m["value"] == 10  # A: 2 x 4 cells, B: 1 x 2 cells
    assert m["cost"] == 32  # 16 GPU-hours at 2
    assert m["idle_cost"] == pytest.approx(15)  # (7 + 0.5) x 2
    assert m["cost_per_value"] == pytest.approx(3.2)
    assert m["late_jobs"] == 1  # A finishes at 3, its deadline is 1; B at 4, deadline 4


def test_fragmentation_counts_idle_gpus_outside_blocks_a_waiting_job_could_use(small):
    # steps 0 and 1: B (1 GPU) waits, so every idle GPU is a usable block: 0.
    # steps 2 and 3: only C (4 GPUs) waits; its one block is never wholly idle: 1 + 2 GPUs.
    assert metrics(*small)["fragmented_gpu_hours"] == 3
    scenario, plan = small
    nobody_waits = scenario.replace(jobs=JOBS[:2] + JOBS[3:])
    assert metrics(nobody_waits, Plan(np.where(GRID == 3, 2, GRID)))["fragmented_gpu_hours"] == 0


def test_teams_and_jain_fairness(small):
    teams = {t.team: t for t in team_outcomes(*small)}
    assert teams["x"].gpu_hours == pytest.approx(4 + 2.5)  # A's cells + R's served hours
    assert teams["y"].gpu_hours == 2 and teams["y"].completed_jobs == 1
    assert teams["y"].batch_jobs == 2 and teams["x"].wait_hours_p50 == 1
    assert metrics(*small)["team_fairness"] == pytest.approx(8.5**2 / (2 * (6.5**2 + 2**2)))
    assert jain_index([3, 3, 3]) == pytest.approx(1.0)
    assert jain_index([1, 0, 0, 0]) == pytest.approx(0.25)
    assert jain_index([0, 0]) is None


def test_per_job_outcomes(small):
    by_id = {o.job.id: o for o in job_outcomes(*small)}
    assert by_id["A"].wait_steps == 1 and by_id["A"].late and by_id["A"].lateness_steps() == 2
    assert by_id["B"].wait_steps == 2 and by_id["B"].late is False
    assert by_id["B"].lateness_steps() == 0 and by_id["B"].delivered_gpu_hours == 2
    assert by_id["C"].wait_steps is None and not by_id["C"].started
    assert by_id["C"].late is None  # no deadline


def test_without_price_teams_or_deadlines_those_metrics_are_null(small):
    scenario, plan = small
    bare = tuple(
        BatchJob(j.id, j.type, j.priority, j.gpus_min, j.gpus_max, j.gpu_hours, j.arrival_step)
        if isinstance(j, BatchJob)
        else RealtimeJob(j.id, j.priority, j.gpus_min, j.gpus_max, j.swap_cap, j.demand)
        for j in JOBS
    )
    m = metrics(scenario.replace(jobs=bare, policy=Policy()), plan)
    assert m["cost"] is None and m["idle_cost"] is None and m["cost_per_value"] is None
    assert m["team_fairness"] is None and m["late_jobs"] is None
    empty = metrics(scenario.replace(jobs=bare, policy=Policy()), Plan.empty(scenario))
    assert empty["wait_hours_p50"] is None and empty["wait_hours_p90"] is None


def test_assignments_csv_carries_the_outcome_columns(small):
    import csv
    import io
    from datetime import datetime

    from core.formats import assignments_to_csv, summary_to_csv

    scenario, plan = small
    scenario = scenario.replace(cluster=Cluster(4, 60, 4, start=datetime(2026, 8, 17, 6)))
    rows = {r["job_id"]: r for r in csv.DictReader(io.StringIO(assignments_to_csv(scenario, plan)))}
    a, b, c = rows["A"], rows["B"], rows["C"]
    assert (a["arrival_step"], a["wait_steps"], a["completed"]) == ("0", "1", "true")
    assert a["delivered_gpu_hours"] == "4" and a["lateness_hours"] == "2"
    assert (a["start_time"], a["end_time"]) == ("2026-08-17T07:00", "2026-08-17T09:00")
    assert b["wait_steps"] == "2" and b["lateness_hours"] == "0" and b["team"] == "y"
    assert (c["start_step"], c["wait_steps"], c["completed"], c["lateness_hours"]) == (
        "",
        "",
        "false",
        "",
    )
    summary = list(csv.DictReader(io.StringIO(summary_to_csv(scenario, {"hand": plan}))))
    by_name = {(r["section"], r["name"]): r["hand"] for r in summary}
    settings = [(r["name"], r["hand"]) for r in summary if r["section"] == "setting"]
    assert settings == [  # what the plans were made under, first
        ("scenario", scenario.name),
        ("gpus", "4"),
        ("horizon", "4 steps of 60 min from 2026-08-17T06:00"),
        ("penalty_weight", f"{scenario.policy.penalty_weight:g}"),
        ("decay", f"{scenario.policy.decay:g}"),
        ("rt_coverage_target", ""),
    ]
    assert summary[len(settings)]["section"] == "kpi"
    assert by_name[("kpi", "late jobs")] == "1" and by_name[("kpi", "cost")] == "32"
    assert by_name[("job", "A")] == "done, steps 1-2, waited 1 h, late"
    assert by_name[("job", "C")] == "not started"
    assert by_name[("team", "x")].startswith("6.5 GPU-h")


def test_a_job_of_one_step_reads_as_one_step_in_the_summary():
    import csv
    import io

    from core.formats import summary_to_csv

    one = BatchJob("D", "quantization", 1, 1, 1, 1, arrival_step=0)
    scenario = Scenario("one", Cluster(1, 60, 4), (one,), Policy())
    plan = Plan(np.array([[-1, -1, 0, -1]]))
    assert check(scenario, plan) == []
    rows = list(csv.DictReader(io.StringIO(summary_to_csv(scenario, {"hand": plan}))))
    assert {r["name"]: r["hand"] for r in rows if r["section"] == "job"} == {
        "D": "done, step 2, waited 2 h"
    }
