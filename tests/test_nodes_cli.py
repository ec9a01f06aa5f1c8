"""Node groups from the command line: --cluster FILE.json, and the exports' node columns."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from core.formats import load_scenario
from core.formats.cluster_file import read_cluster_file, with_cluster
from core.model import ScenarioError
from tests.test_cli import gpuplan

CLUSTER = {
    "gpu_types": {"H100": {"speed": 1.0, "cost_per_gpu_hour": 3.0}, "L4": {"speed": 0.3}},
    "nodes": [
        {"group": "h100x8", "gpu_type": "H100", "gpus_per_node": 8, "count": 1},
        {"group": "l4x2", "gpu_type": "L4", "gpus_per_node": 2, "count": 4},
    ],
}


@pytest.fixture
def cluster_file(tmp_path) -> Path:
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(CLUSTER))
    return path


def test_a_cluster_file_replaces_the_cluster_and_keeps_the_horizon(scenarios_dir, cluster_file):
    s = load_scenario(scenarios_dir / "mixed-control.json")
    on = with_cluster(s, read_cluster_file(cluster_file))
    assert on.cluster.gpus == 16 and len(on.cluster.nodes) == 2
    assert (on.cluster.step_minutes, on.cluster.horizon_steps) == (
        s.cluster.step_minutes,
        s.cluster.horizon_steps,
    )
    assert on.jobs == s.jobs


def test_plan_on_a_cluster_file_writes_node_columns(scenarios_dir, cluster_file, tmp_path):
    out = tmp_path / "out"
    run = gpuplan(
        "plan",
        scenarios_dir / "mixed-control.json",
        "--cluster",
        cluster_file,
        "--planner",
        "allocator",
        "--out",
        out,
    )
    assert run.returncode == 0, run.stderr
    grid = list(csv.DictReader(io.StringIO((out / "grid.csv").read_text())))
    assert {"node", "gpu_type"} <= set(grid[0])
    for row in grid:
        gpu = int(row["gpu"])
        assert row["gpu_type"] == ("H100" if gpu < 8 else "L4")
        assert row["node"] == ("h100x8-0" if gpu < 8 else f"l4x2-{(gpu - 8) // 2}")
    rows = list(csv.DictReader(io.StringIO((out / "assignments.csv").read_text())))
    placed = [r for r in rows if r["gpu_start"]]
    assert placed and all(r["gpu_type"] in ("H100", "L4") and r["nodes"] for r in placed)
    metrics = json.loads((out / "metrics.json").read_text())
    assert set(metrics["by_gpu_type"]) == {"H100", "L4"}
    assert metrics["by_gpu_type"]["L4"]["gpus"] == 8
    check = gpuplan(
        "check", scenarios_dir / "mixed-control.json", out / "grid.csv", "--cluster", cluster_file
    )
    assert check.returncode == 0, check.stdout + check.stderr


def test_a_bad_cluster_file_is_one_line_naming_the_file_group_and_field(scenarios_dir, tmp_path):
    bad = {**CLUSTER, "nodes": [{**CLUSTER["nodes"][0], "gpu_type": "B200"}]}
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    run = gpuplan("plan", scenarios_dir / "mixed-control.json", "--cluster", path)
    assert run.returncode == 2
    (line,) = run.stderr.strip().splitlines()
    assert "bad.json" in line and "group 'h100x8'" in line and "gpu_type" in line
    with pytest.raises(ScenarioError, match="no such file"):
        read_cluster_file(tmp_path / "missing.json")
