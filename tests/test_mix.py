"""Mixes of node groups: a scenario on other node counts, their cost, `size --vary` and
`sweep --nodes` (SPEC section 8)."""

from __future__ import annotations

import csv
import io
import json

import pytest

from core.mix import cost_per_hour, mixes, parse_vary, size_mix, with_nodes
from core.model import BatchJob, Cluster, Policy, RealtimeJob, Running, Scenario, ScenarioError
from core.nodes import GpuType, NodeGroup
from tests.test_cli import gpuplan

TYPES = (GpuType("A", 1.0, 80, 3.0), GpuType("B", 0.5, 24, 1.0))


def two_groups(big: int, small: int, jobs, steps: int = 6) -> Scenario:
    """`big` nodes of 4 A GPUs (3/h each), then `small` nodes of 1 B GPU (1/h)."""
    nodes = (NodeGroup("big", "A", 4, big), NodeGroup("small", "B", 1, small))
    cluster = Cluster(4 * big + small, 60, steps, gpu_types=TYPES, nodes=nodes)
    return Scenario("mix", cluster, tuple(jobs), Policy(decay=1.0))


def test_cost_per_hour_prices_each_type_and_needs_every_price():
    s = two_groups(1, 2, [])
    assert cost_per_hour(s) == 4 * 3.0 + 2 * 1.0
    assert cost_per_hour(s, (("big", 2), ("small", 0))) == 24.0
    unpriced = Cluster(4, 60, 2, gpu_types=(GpuType("A"),), nodes=(NodeGroup("g", "A", 4, 1),))
    assert cost_per_hour(Scenario("u", unpriced, ())) is None
    with_price = Scenario("u", unpriced, (), Policy(gpu_hour_cost=2.0))
    assert cost_per_hour(with_price) == 8.0


def test_a_mix_keeps_each_gpu_in_its_group_and_places_lost_running_work_again():
    rt = RealtimeJob("chat", 4, 1, 2, 2, (1.0,) * 6, previous_gpus=(9,))  # small node 1
    running = BatchJob("r", "training", 1, 4, 4, 8.0, running=Running(4, 4, 2))  # big node 1
    s = two_groups(2, 2, [rt, running])
    moved = with_nodes(s, {"big": 1, "small": 3})
    assert moved.cluster.gpus == 7
    assert moved.jobs[0].previous_gpus == (5,)  # small node 1 is GPU 4 + 1 now
    assert moved.jobs[1].running.gpu_start == 0  # big node 1 is gone: placed again on node 0
    with pytest.raises(ScenarioError, match="job 'r'.*fits on no free block"):
        with_nodes(s, {"big": 0})


def test_vary_specs_are_checked_naming_the_flag_and_group():
    s = two_groups(1, 1, [])
    assert parse_vary(["small=4,0,2", "big=1"], s) == {"small": [0, 2, 4], "big": [1]}
    for spec, words in [
        ("tiny=1", "no group 'tiny'"),
        ("small", "is not GROUP=LIST"),
        ("small=1,x", "'x' is not a whole number"),
    ]:
        with pytest.raises(ScenarioError, match=words):
            parse_vary([spec], s)
    with pytest.raises(ScenarioError, match="given twice"):
        parse_vary(["small=1", "small=2"], s)
    flat = Scenario("f", Cluster(4), ())
    with pytest.raises(ScenarioError, match="no node groups"):
        parse_vary(["a=1"], flat)
    assert len(mixes(s, {"big": [0, 1, 2], "small": [0, 3]})) == 6


def test_size_vary_finds_the_cheapest_mix_known_by_hand():
    # Serving needs 2 GPUs every step (any type); training needs 4 A GPUs for the whole
    # horizon (A only). By hand: big=1 alone cannot hold both (6 > 4 GPUs); big=1 with two
    # small nodes can (12 + 2 = 14/h); big=2 could too but costs 24/h; no A, no training.
    rt = RealtimeJob("chat", 8, 0, 2, 2, (2.0,) * 6)
    train = BatchJob("t", "training", 1, 4, 4, 24.0, gpu_types=("A",))
    s = two_groups(1, 0, [rt, train])
    result = size_mix(s, {"big": [0, 1, 2], "small": [0, 1, 2, 3, 4]}, 1.0, 1.0, "allocator")
    assert result["nodes"] == {"big": 1, "small": 2}
    assert (result["gpus"], result["cost_per_hour"]) == (6, 14.0)
    assert result["ranked_by"] == "cost_per_hour"
    costs = [row["cost_per_hour"] for row in result["tried"]]
    assert costs == sorted(costs) and costs[-1] == 14.0  # cheapest first, stopped at the answer
    assert all(not row["meets"] for row in result["tried"][:-1])
    # every cheaper mix is one the hand count rules out: no A node, or too few GPUs for both
    for row in result["tried"][:-1]:
        assert row["nodes_big"] == 0 or row["nodes_small"] < 2


def test_size_vary_from_the_command_line(tmp_path):
    rt = RealtimeJob("chat", 8, 0, 2, 2, (2.0,) * 6)
    train = BatchJob("t", "training", 1, 4, 4, 24.0, gpu_types=("A",))
    from core.formats.scenario_json import scenario_to_json

    path = tmp_path / "mix.json"
    path.write_text(scenario_to_json(two_groups(1, 0, [rt, train])))
    run = gpuplan(
        "size",
        path,
        "--vary",
        "big=0,1,2",
        "--vary",
        "small=0,1,2,3,4",
        "--coverage",
        "1",
        "--completed",
        "1",
    )
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["nodes"] == {"big": 1, "small": 2}
    assert "big=1, small=2 (6 GPUs, 14.00/h) meets the targets" in run.stderr
    bad = gpuplan("size", path, "--vary", "huge=1", "--coverage", "1")
    assert bad.returncode == 2 and "no group 'huge'" in bad.stderr


def test_sweep_nodes_writes_a_column_per_group_and_the_cost(tmp_path):
    rt = RealtimeJob("chat", 8, 0, 2, 2, (2.0,) * 6)
    train = BatchJob("t", "training", 1, 4, 4, 24.0, gpu_types=("A",))
    from core.formats.scenario_json import scenario_to_json

    path = tmp_path / "mix.json"
    path.write_text(scenario_to_json(two_groups(1, 0, [rt, train])))
    run = gpuplan(
        "sweep",
        path,
        "--nodes",
        "small=0,2",
        "--nodes",
        "big=1,2",
        "--workers",
        "1",
        "--out",
        tmp_path / "out",
    )
    assert run.returncode == 0, run.stderr
    rows = list(csv.DictReader(io.StringIO((tmp_path / "out" / "sweep.csv").read_text())))
    assert len(rows) == 4 * 2  # four mixes, fifo and the allocator
    mixes_seen = {(r["nodes_big"], r["nodes_small"]) for r in rows}
    assert mixes_seen == {("1", "0"), ("1", "2"), ("2", "0"), ("2", "2")}
    for r in rows:
        big, small = int(r["nodes_big"]), int(r["nodes_small"])
        assert int(r["gpus"]) == 4 * big + small
        assert float(r["cost_per_hour"]) == 12 * big + small
        assert r["error"] == ""
    both = gpuplan("sweep", path, "--nodes", "small=1", "--gpus", "8", "--out", tmp_path / "o2")
    assert both.returncode == 2 and "not both" in both.stderr
