"""Nodes, GPU types and speeds (SPEC section 8): the model, the checker, the metrics and every
planner on clusters of node groups."""

from __future__ import annotations

import dataclasses
import itertools
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from core.formats.scenario_json import scenario_from_json, scenario_to_json
from core.model import BatchJob, Cluster, Policy, RealtimeJob, Running, Scenario, ScenarioError
from core.nodes import GpuType, NodeGroup, block_starts, needs_nodes, options
from core.plan import IDLE, Plan, check, metrics, objective
from core.planners import solve
from tests.budget import examples
from tests.strategies import node_scenarios, scenarios

TYPES = (GpuType("H100", 1.0, 80, 3.0), GpuType("A10", 0.5, 24, 0.8))
NODES = (NodeGroup("h100x8", "H100", 8, 1), NodeGroup("a10x4", "A10", 4, 2))


def mixed(jobs, steps: int = 6, policy: Policy | None = None) -> Scenario:
    """8 H100 on one node (GPUs 0-7), then two nodes of 4 A10 (8-11, 12-15)."""
    cluster = Cluster(16, 60, steps, gpu_types=TYPES, nodes=NODES)
    return Scenario("mixed", cluster, tuple(jobs), policy or Policy(decay=1.0))


def batch(job_id: str, gpus_min: int, gpus_max: int, gpu_hours: float, **fields) -> BatchJob:
    return BatchJob(
        job_id, "training", fields.pop("priority", 1), gpus_min, gpus_max, gpu_hours, **fields
    )


def grid_with(scenario: Scenario, *blocks: tuple[str, int, int, int, int]) -> Plan:
    """A plan from (job, first GPU, GPUs, start, end) blocks."""
    plan = Plan.empty(scenario)
    for job_id, first, gpus, start, end in blocks:
        plan.grid[first : first + gpus, start:end] = scenario.job_index(job_id)
    return plan


# -- the model and its file ------------------------------------------------------------------


def test_a_mixed_cluster_reads_and_writes_back_exactly():
    text = json.dumps(
        {
            "name": "m",
            "cluster": {
                "step_minutes": 60,
                "horizon_steps": 4,
                "gpu_types": {
                    "H100": {"speed": 1, "memory_gb": 80, "cost_per_gpu_hour": 3},
                    "A10": {"speed": 0.35, "memory_gb": 24},
                },
                "nodes": [
                    {"group": "h", "gpu_type": "H100", "gpus_per_node": 8, "count": 2},
                    {"group": "a", "gpu_type": "A10", "gpus_per_node": 4, "count": 4},
                ],
            },
            "jobs": [
                {
                    "id": "t",
                    "type": "training",
                    "priority": 2,
                    "gpus_min": 4,
                    "gpus_max": 8,
                    "gpu_hours": 10,
                    "gpu_types": ["H100"],
                    "speed": {"A10": 0.2},
                    "multi_node": False,
                },
                {
                    "id": "chat",
                    "type": "realtime",
                    "priority": 4,
                    "gpus_min": 1,
                    "gpus_max": 2,
                    "swap_cap": 1,
                    "demand": [1, 1, 2, 2],
                    "min_gpu_memory_gb": 20,
                },
            ],
        }
    )
    s = scenario_from_json(text)
    assert s.cluster.gpus == 32  # 2 x 8 + 4 x 4, left out of the file
    t = s.jobs[0]
    assert (t.gpu_types, t.speed, t.multi_node) == (("H100",), (("A10", 0.2),), False)
    again = scenario_from_json(scenario_to_json(s))
    assert again == s
    assert scenario_to_json(again) == scenario_to_json(s)


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda d: d["jobs"][0].update(gpu_types=["B200"]), ["job 't'", "gpu_types", "'B200'"]),
        (lambda d: d["jobs"][0].update(speed={"B200": 2}), ["job 't'", "speed", "'B200'"]),
        (lambda d: d["cluster"].update(gpus=20), ["cluster", "gpus is 20", "hold 24"]),
        (lambda d: d["cluster"]["gpu_types"]["A10"].update(speed=0), ["'A10'", "speed", "> 0"]),
        (lambda d: d["cluster"]["nodes"][1].update(gpu_type="T4"), ["group 'a'", "gpu_type", "T4"]),
        (lambda d: d["jobs"][0].update(speed={"A10": 0}), ["job 't'", "speed", "> 0"]),
        (
            lambda d: d["jobs"][0].update(gpus_min=16, gpus_max=16, multi_node=False),
            ["job 't'", "gpus_min 16", "fits no allowed group", "multi_node"],
        ),
        (
            lambda d: d["jobs"][0].update(min_gpu_memory_gb=100),
            ["job 't'", "no GPU", "min_gpu_memory_gb 100"],
        ),
        (
            lambda d: d["jobs"][0].update(
                running={"gpu_start": 6, "gpus": 4, "remaining_steps": 2}
            ),
            ["job 't'", "running block [6, 10)", "crosses"],
        ),
        (
            lambda d: d["jobs"][0].update(
                running={"gpu_start": 18, "gpus": 4, "remaining_steps": 2}
            ),
            ["job 't'", "running block [18, 22)", "node"],
        ),
        (lambda d: d["cluster"]["nodes"][0].update(count=-1), ["group 'h'", "count", ">= 0"]),
    ],
)
def test_bad_clusters_and_jobs_are_one_message_naming_the_job_or_group_and_field(change, words):
    raw = {
        "name": "m",
        "cluster": {
            "horizon_steps": 4,
            "gpu_types": {"H100": {"speed": 1, "memory_gb": 80}, "A10": {"speed": 0.5}},
            "nodes": [
                {"group": "h", "gpu_type": "H100", "gpus_per_node": 8, "count": 1},
                {"group": "a", "gpu_type": "A10", "gpus_per_node": 4, "count": 4},
            ],
        },
        "jobs": [
            {
                "id": "t",
                "type": "training",
                "priority": 1,
                "gpus_min": 4,
                "gpus_max": 8,
                "gpu_hours": 8,
            }
        ],
    }
    change(raw)
    with pytest.raises(ScenarioError) as caught:
        scenario_from_json(json.dumps(raw))
    message = str(caught.value)
    for word in words:
        assert word in message, message
    assert "Traceback" not in message


def test_gpu_types_without_nodes_are_refused():
    with pytest.raises(ScenarioError, match="gpu_types is given without nodes"):
        Cluster(8, gpu_types=TYPES)


# -- which blocks are legal ------------------------------------------------------------------


def starts_of(scenario: Scenario, job: BatchJob, g: int) -> list[int]:
    mask = block_starts(scenario.cluster, job, g)
    return [b for b in range(scenario.cluster.gpus) if mask >> b & 1]


def test_the_block_rule_of_section_8_by_hand():
    s = mixed([batch("j", 1, 16, 8)])
    job = s.jobs[0]
    assert starts_of(s, job, 8) == [0, 8]  # the H100 node, or both A10 nodes whole
    assert starts_of(s, job, 4) == [0, 4, 8, 12]
    assert starts_of(s, job, 16) == []  # across groups: never
    assert starts_of(s, dataclasses.replace(job, multi_node=False), 8) == [0]
    two_nodes = Cluster(8, 60, 4, gpu_types=TYPES, nodes=(NodeGroup("a", "A10", 4, 2),))
    spanning = Scenario("a", two_nodes, (batch("j", 8, 8, 8),))
    assert starts_of(spanning, spanning.jobs[0], 8) == [0]
    held = dataclasses.replace(spanning.jobs[0], gpus_min=4, multi_node=False)
    assert starts_of(spanning, held, 8) == []
    typed = batch("j", 1, 8, 8, gpu_types=("A10",))
    assert starts_of(mixed([typed]), typed, 4) == [8, 12]
    memory = batch("j", 1, 8, 8, min_gpu_memory_gb=40)
    assert starts_of(mixed([memory]), memory, 2) == [0, 2, 4, 6]


def test_durations_follow_the_speed_of_each_type_and_the_jobs_own():
    s = mixed([batch("j", 4, 4, 8, speed=(("A10", 0.25),)), batch("k", 4, 4, 8)])
    by_group = {o.group.name: o.duration for o in options(s, s.jobs[0])}
    assert by_group == {"h100x8": 2, "a10x4": 8}  # 8 GPU-hours on 4 GPUs at 1 and at 0.25
    assert {o.group.name: o.duration for o in options(s, s.jobs[1])} == {"h100x8": 2, "a10x4": 4}


# -- the checker -------------------------------------------------------------------------------


def test_the_checker_refuses_blocks_across_nodes_groups_and_types():
    s = mixed([batch("j", 2, 8, 4, gpu_types=("A10",)), batch("k", 8, 8, 8)])
    across_nodes = grid_with(s, ("j", 10, 4, 0, 1))  # GPUs 10-13: two A10 nodes
    (v,) = check(s, across_nodes)
    assert (v.constraint, v.job_id, v.gpu) == (3, "j", 10)
    assert "within one node" in v.message
    wrong_type = grid_with(s, ("j", 0, 2, 0, 4))
    (v,) = check(s, wrong_type)
    assert v.constraint == 3 and "'H100'" in v.message
    across_groups = grid_with(s, ("k", 4, 8, 0, 1))  # GPUs 4-11 (aligned to 4, not to its groups)
    assert [v.constraint for v in check(s, across_groups)] == [3]
    legal = grid_with(s, ("j", 12, 4, 0, 2), ("k", 0, 8, 0, 1))
    assert check(s, legal) == []


def test_the_checker_holds_each_block_for_its_duration_at_its_speed():
    s = mixed([batch("j", 4, 4, 8)])
    assert check(s, grid_with(s, ("j", 0, 4, 0, 2))) == []  # H100: 2 steps
    assert check(s, grid_with(s, ("j", 8, 4, 0, 4))) == []  # A10 at 0.5: 4 steps
    (v,) = check(s, grid_with(s, ("j", 8, 4, 0, 2)))
    assert v.constraint == 5 and "needs 4" in v.message


def test_serving_on_a_type_it_may_not_use_is_refused():
    rt = RealtimeJob("chat", 4, 1, 1, 1, (1.0,) * 6, gpu_types=("A10",))
    s = mixed([rt])
    plan = Plan.empty(s)
    plan.grid[0, :] = 0
    (v,) = check(s, plan)
    assert v.constraint == 3 and v.gpu == 0 and "'H100'" in v.message
    plan.grid[:] = IDLE
    plan.grid[15, :] = 0
    assert check(s, plan) == []


# -- metrics -------------------------------------------------------------------------------------


def test_value_is_delivered_work_and_per_type_metrics_match_a_hand_count():
    s = mixed([batch("fast", 4, 4, 8, priority=2), batch("slow", 4, 4, 8, priority=3)], steps=4)
    plan = grid_with(s, ("fast", 0, 4, 0, 2), ("slow", 8, 4, 0, 4))
    assert check(s, plan) == []
    m = metrics(s, plan)
    # 2 x 1.0 x 8 GPU-steps + 3 x 0.5 x 16 GPU-steps: each job delivers its 8 GPU-hours
    assert m["value"] == pytest.approx(2 * 8 + 3 * 8)
    assert m["utilization"] == pytest.approx(24 / 64)
    types = m["by_gpu_type"]
    assert types["H100"] == {
        "gpus": 8,
        "utilization": pytest.approx(8 / 32),
        "allocated_fraction": pytest.approx(8 / 32),
        "idle_gpu_hours": 24.0,
        "cost": pytest.approx(8 * 4 * 3.0),
    }
    assert types["A10"]["utilization"] == pytest.approx(16 / 32)
    assert types["A10"]["cost"] == pytest.approx(8 * 4 * 0.8)
    assert m["cost"] == pytest.approx(96 + 25.6)


def test_fragmentation_is_counted_per_node_for_the_jobs_that_may_use_it():
    # 4 A10 jobs wait: the smallest needs 2. One GPU held on each A10 node leaves 3 idle there,
    # of which 2 form a whole block of 2 and 1 does not: 1 fragmented GPU per node and step.
    s = mixed(
        [
            batch("w", 2, 2, 100, gpu_types=("A10",), arrival_step=0),
            batch("x", 1, 1, 1, gpu_types=("A10",)),
            batch("y", 1, 1, 1, gpu_types=("A10",)),
        ],
        steps=1,
    )
    plan = grid_with(s, ("x", 8, 1, 0, 1), ("y", 12, 1, 0, 1))
    m = metrics(s, plan)
    assert m["fragmented_gpu_hours"] == pytest.approx(2.0)  # the H100s: no waiting job may use


# -- every planner ---------------------------------------------------------------------------------


def test_every_planner_plans_node_groups_legally(planner, plan_with):
    @settings(
        # (thorough searches for up to a second a draw: fewer draws, like full's)
        max_examples=examples({"full": 10, "thorough": 25}.get(planner, 100)),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    @given(node_scenarios())
    def legal(scenario):
        plan = plan_with(scenario, planner)
        assert check(scenario, plan) == [], planner

    legal()


def test_the_fast_planners_never_lose_to_fifo_on_nodes():
    @settings(max_examples=examples(40), deadline=None, suppress_health_check=list(HealthCheck))
    @given(node_scenarios(max_steps=8, max_jobs=5))
    def better(scenario):
        fifo = objective(scenario, solve(scenario, "fifo"))
        assert objective(scenario, solve(scenario, "allocator")) >= fifo - 1e-9

    better()


def test_fifo_takes_the_earliest_start_then_the_larger_size_then_the_lower_gpu():
    s = mixed(
        [
            batch("first", 8, 8, 8, arrival_step=0),  # the H100 node, 1 step
            batch("next", 2, 4, 8, arrival_step=0),  # H100 busy at 0: the A10s at 0, 4 GPUs
        ]
    )
    plan = solve(s, "fifo")
    assert check(s, plan) == []
    assert set(plan.grid[0:8, 0]) == {0}
    assert set(plan.grid[8:12, 0]) == {1}  # the lower A10 node
    assert (plan.grid[8:12] == 1).sum() == 4 * 4  # 8 GPU-hours at 0.5 on 4 GPUs: 4 steps


def test_fifo_reserves_serving_on_its_own_types_from_the_top():
    rt = RealtimeJob("chat", 4, 0, 2, 2, (2.0,) * 6, gpu_types=("H100",))
    s = mixed([rt])
    plan = solve(s, "fifo")
    assert check(s, plan) == []
    assert sorted(np.nonzero(plan.grid[:, 0] == 0)[0]) == [6, 7]


def test_the_allocator_serves_on_slow_gpus_and_trains_on_fast_ones():
    rt = RealtimeJob("chat", 4, 1, 4, 4, (4.0,) * 6)
    s = mixed([rt, batch("train", 8, 8, 24, priority=2)])
    plan = solve(s, "allocator")
    assert check(s, plan) == []
    assert (plan.grid[8:16] == 0).sum(axis=0).tolist() == [4] * 6  # serving on A10s
    assert (plan.grid[0:8] == 1).all(axis=0)[:3].all()  # training on the H100 node


def brute_force_optimum(scenario: Scenario) -> float:
    """The best J over every plan of a batch-only scenario: each job runs once at one of its
    options, blocks and starts, or not at all."""
    T = scenario.cluster.horizon_steps
    choices = []
    for i, job in enumerate(scenario.jobs):
        mine = [None]
        for o in options(scenario, job):
            for b in range(scenario.cluster.gpus):
                if o.starts >> b & 1:
                    for start in range(job.arrival_step, T):
                        mine.append((i, b, o.gpus, start, min(start + o.duration, T)))
        choices.append(mine)
    best = -np.inf
    for combo in itertools.product(*choices):
        grid = np.full((scenario.cluster.gpus, T), IDLE, dtype=np.int32)
        ok = True
        for c in combo:
            if c is None:
                continue
            i, b, g, start, end = c
            cells = grid[b : b + g, start:end]
            if (cells != IDLE).any():
                ok = False
                break
            cells[:] = i
        if ok:
            best = max(best, objective(scenario, Plan(grid)))
    return best


@pytest.mark.parametrize("seed", range(6))
def test_full_reaches_the_brute_forced_optimum_on_tiny_node_clusters(seed):
    import random

    rng = random.Random(seed)
    types = (GpuType("fast", 1.0), GpuType("slow", rng.choice([0.5, 0.25])))
    nodes = (NodeGroup("f", "fast", 1, 1), NodeGroup("s", "slow", 2, rng.choice([1, 2])))
    cluster = Cluster(sum(n.gpus for n in nodes), 60, 3, gpu_types=types, nodes=nodes)
    jobs = [
        batch(
            f"j{k}",
            rng.choice([1, 1, 2]),
            2,
            rng.choice([0.5, 1, 2]),
            priority=rng.choice([1, 2, 3]),
            arrival_step=rng.randint(0, 1),
            **({"gpu_types": ("slow",)} if rng.random() < 0.2 else {}),
        )
        for k in range(3)
    ]
    s = Scenario("tiny", cluster, tuple(jobs), Policy(decay=rng.choice([1.0, 0.9])))
    full = solve(s, "full", time_limit=20, mip_gap=0.0)
    assert check(s, full) == []
    assert full.stats["status"] == "optimal"
    assert objective(s, full) == pytest.approx(brute_force_optimum(s), abs=1e-6)


# -- a cluster whose nodes change nothing plans as it always did -----------------------------------


def one_group(scenario: Scenario, per_node: int | None = None) -> Scenario:
    G = scenario.cluster.gpus
    n = per_node or G
    cluster = dataclasses.replace(
        scenario.cluster,
        gpu_types=(GpuType("gpu", 1.0),),
        nodes=(NodeGroup("all", "gpu", n, G // n),),
    )
    return dataclasses.replace(scenario, cluster=cluster)


def test_one_group_clusters_give_exactly_todays_plans():
    @settings(max_examples=examples(40), deadline=None, suppress_health_check=list(HealthCheck))
    @given(scenarios(max_gpus=16, max_steps=8, max_jobs=5))
    def same(scenario):
        G = scenario.cluster.gpus
        wrapped = [one_group(scenario)]
        if G & (G - 1) == 0 and G >= 2:
            wrapped.append(one_group(scenario, G // 2))  # two nodes of a power-of-two size
        for other in wrapped:
            assert not needs_nodes(other)
            for name in ("fifo", "backfill", "allocator"):
                assert solve(other, name).same_grid(solve(scenario, name)), name
            plan = solve(other, "allocator")
            assert metrics(other, plan)["objective"] == metrics(scenario, plan)["objective"]

    same()


def test_a_job_held_to_one_node_or_slower_gpus_makes_the_nodes_count():
    s = Scenario(
        "s",
        Cluster(8, 60, 4, gpu_types=(GpuType("g"),), nodes=(NodeGroup("n", "g", 4, 2),)),
        (batch("j", 4, 8, 8, multi_node=False),),
    )
    assert needs_nodes(s)
    plan = solve(s, "allocator")
    assert check(s, plan) == [] and (plan.grid == 0).sum() == 8  # 4 GPUs x 2 steps
    assert needs_nodes(dataclasses.replace(s, jobs=(batch("j", 4, 8, 8, speed=(("g", 2.0),)),)))
    running = dataclasses.replace(s.jobs[0], running=Running(4, 4, 1), multi_node=True)
    assert not needs_nodes(dataclasses.replace(s, jobs=(running,)))


@pytest.mark.parametrize("seed", range(4))
def test_the_rolling_horizon_runs_legal_plans_on_node_groups(seed):
    from core.bench import node_case
    from core.rolling import simulate

    scenario = node_case(seed, realtime=1)
    result = simulate(scenario, days=1, planner="allocator", window_hours=8)
    assert check(result.scenario, result.plan) == []
    assert result.scenario.cluster.nodes == scenario.cluster.nodes


def test_thorough_never_ranks_below_the_fast_allocator_on_nodes():
    from core.plan import plan_rank, ranks_above

    @settings(max_examples=examples(15), deadline=None, suppress_health_check=list(HealthCheck))
    @given(node_scenarios(max_steps=8, max_jobs=5))
    def not_below(scenario):
        fast = plan_rank(scenario, solve(scenario, "allocator"))
        thorough = plan_rank(scenario, solve(scenario, "thorough", time_limit=5))
        assert not ranks_above(fast, thorough)

    not_below()


def test_fifo_reserves_a_typed_service_the_only_gpu_it_may_use():
    """A service that may use one free GPU comes first, and an untyped one after it: the
    untyped one's gpus_min may be met elsewhere, so the typed one gets its GPU (and the
    untyped one none of the typed GPUs a later service needs)."""
    from core.planners.fifo import reserved_sets

    cluster = Cluster(
        4,
        60,
        2,
        gpu_types=(GpuType("a", 1.0), GpuType("b", 1.0)),
        nodes=(NodeGroup("g0", "a", 2, 1), NodeGroup("g1", "b", 2, 1)),
    )
    held = BatchJob("held", "training", 1, 1, 1, gpu_hours=2, running=Running(2, 1, 2))
    typed = RealtimeJob("typed", 1, 1, 1, 0, demand=(0.0, 0.0), gpu_types=("b",))
    untyped = RealtimeJob("untyped", 1, 1, 1, 0, demand=(0.0, 0.0))
    for jobs in ((held, typed, untyped), (held, untyped, typed)):
        s = Scenario("typed-first", cluster, jobs)
        sets = reserved_sets(s)
        assert sets[s.job_index("typed")] == [0b1000, 0b1000]  # GPU 3, the only free b
        assert sets[s.job_index("untyped")][0] in (0b01, 0b10)  # an a GPU
        assert check(s, solve(s, "fifo")) == []
