"""GPU types in imports (SPEC section 8): the openb node list as node groups and gpu_spec as
gpu_types, sacct's typed GRES, a pod's nvidia.com/gpu.product; the real openb day planned on its
real node list."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from core.formats import kubectl, openb, slurm
from core.formats.history import ImportWindow, import_history
from core.formats.node_list import read_node_list
from core.model import BatchJob, Cluster, ScenarioError
from core.nodes import GpuType, NodeGroup, group_of_gpu
from core.plan import batch_placements, check
from core.planners import solve

ROOT = Path(__file__).resolve().parents[2]
NODES_HEAD = "sn,cpu_milli,memory_mib,gpu,model\n"
PODS_HEAD = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time\n"
)
HOUR = 3600


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.fixture
def node_list(tmp_path):
    return write(
        tmp_path,
        "nodes.csv",
        NODES_HEAD
        + "n0,1,1,8,V100M32\nn1,1,1,2,T4\nn2,1,1,2,T4\nn3,1,1,0,\nn4,1,1,8,V100M32\n"
        + "n5,1,1,4,T4\n",
    )


def pods(*rows: str) -> str:
    return PODS_HEAD + "".join(r + "\n" for r in rows)


# -- the node list ----------------------------------------------------------------------------


def test_node_list_groups_by_model_and_size(node_list):
    nl = read_node_list(node_list)
    assert [(g.group, g.gpu_type, g.gpus_per_node, g.count) for g in nl.nodes] == [
        ("T4x2", "T4", 2, 2),
        ("T4x4", "T4", 4, 1),
        ("V100M32x8", "V100M32", 8, 2),
    ]
    assert [t.name for t in nl.gpu_types] == ["T4", "V100M32"]
    assert all(t.speed == 1.0 and t.memory_gb is None for t in nl.gpu_types)  # none invented
    assert (nl.gpus, nl.gpu_nodes, nl.zero_gpu_nodes) == (24, 5, 1)


@pytest.mark.parametrize(
    "text, named",
    [
        ("n0,1,1,8,\n", ["row 2", "model"]),  # a node with GPUs needs its model
        ("n0,1,1,x,T4\n", ["row 2", "gpu"]),  # not a number
        ("n0,1,1,2.5,T4\n", ["row 2", "gpu"]),  # not whole
        ("n0,1,1,0,T4\n", ["no node with GPUs"]),  # nothing to plan on
        ("n0,1,1,,T4\n", ["row 2", "gpu"]),  # empty
    ],
)
def test_bad_node_lists_name_row_and_field(tmp_path, text, named):
    path = write(tmp_path, "nodes.csv", NODES_HEAD + text)
    with pytest.raises(ScenarioError) as e:
        read_node_list(path)
    assert all(n in str(e.value) for n in ["nodes.csv", *named]), str(e.value)


# -- openb with --nodes -----------------------------------------------------------------------


def test_gpu_spec_becomes_gpu_types_and_absent_models_are_accounted(tmp_path, node_list):
    path = write(
        tmp_path,
        "pods.csv",
        pods(
            "p0,1,1,1,1000,T4,BE,Running,0,7200,0",
            "p1,1,1,2,1000,V100M16|V100M32,BE,Running,0,7200,0",  # V100M16: not in the list
            "p2,1,1,1,1000,A100,BE,Running,0,7200,0",  # only absent models: skipped
            "p3,1,1,1,300,,BE,Running,0,7200,0",  # shares a GPU: one whole GPU
            "p4,1,1,8,1000,T4,BE,Running,0,7200,0",  # 8 T4: no 4 T4x2 nodes, no 2 T4x4
            "p5,1,1,1,500,T4,LS,Running,0,7200,0",  # a typed service: its own real-time job
        ),
    )
    result = openb.read_history(path, ImportWindow(start=0.0, days=1), nodes=node_list)
    s = result.scenario
    assert s.cluster.gpus == 24 and [g.group for g in s.cluster.nodes][0] == "T4x2"
    jobs = {j.id: j for j in s.jobs}
    assert jobs["p0"].gpu_types == ("T4",)
    assert jobs["p1"].gpu_types == ("V100M32",)
    assert jobs["p3"].gpu_types is None and jobs["p3"].gpus_min == 1
    assert "p2" not in jobs and "p4" not in jobs
    rt = [j for j in s.realtime_jobs if j.gpu_types == ("T4",)]
    assert len(rt) == 1 and max(rt[0].demand) == 1.0  # 500 milli planned as a whole GPU
    rows = result.summary["rows"]
    assert rows["skipped"][openb.NO_MODEL] == 1
    assert rows["skipped"]["no node group of its GPU types holds its block"] == 1
    assert rows["used"] + sum(rows["skipped"].values()) == rows["total"] == 6
    note = next(n for n in result.summary["notes"] if "gpu_spec of row" in n)
    assert "row 3" in note and "V100M16" in note and "A100" in note
    assert result.summary["shared_gpus"] == {"file": 2, "used": 2}


def test_a_block_no_allowed_group_holds_is_skipped_and_counted(tmp_path):
    nodes = write(tmp_path, "nodes.csv", NODES_HEAD + "n0,1,1,2,T4\nn1,1,1,8,V100\n")
    path = write(
        tmp_path,
        "pods.csv",
        pods("p0,1,1,4,1000,T4,BE,Running,0,7200,0", "p1,1,1,4,1000,,BE,Running,0,7200,0"),
    )
    result = openb.read_history(path, ImportWindow(start=0.0), nodes=nodes)
    jobs = {j.id: j for j in result.scenario.jobs}
    assert "p0" not in jobs and "p1" in jobs  # 4 T4 is 2 T4 nodes, and there is one
    skipped = result.summary["rows"]["skipped"]
    assert skipped["no node group of its GPU types holds its block"] == 1


def test_gpu_spec_without_a_node_list_is_ignored_and_said(tmp_path):
    path = write(tmp_path, "pods.csv", pods("p0,1,1,1,1000,T4,BE,Running,0,7200,0"))
    result = openb.read_history(path, ImportWindow(start=0.0))
    assert not result.scenario.cluster.nodes
    assert result.scenario.jobs[0].gpu_types is None
    assert any("ignored" in n and "--nodes" in n for n in result.summary["notes"])


def test_nodes_apply_to_openb_only(tmp_path, node_list):
    sacct = ROOT / "tests" / "formats" / "fixtures" / "sacct_quirks.txt"
    with pytest.raises(ScenarioError, match="--nodes .* openb pod lists, not slurm"):
        import_history(sacct, nodes=node_list)


def test_cli_import_with_nodes(tmp_path, node_list):
    path = write(tmp_path, "pods.csv", pods("p0,1,1,1,1000,T4,BE,Running,0,7200,0"))
    out = tmp_path / "s.json"
    run = subprocess.run(
        [sys.executable, "-m", "core", "import", path, "--nodes", node_list, "--out", out],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert "node groups (the node list's 3 groups): T4x2 (2 x 2 T4)" in run.stdout
    cluster = json.loads(out.read_text())["cluster"]
    assert [n["group"] for n in cluster["nodes"]] == ["T4x2", "T4x4", "V100M32x8"]
    bad = write(tmp_path, "bad.csv", NODES_HEAD + "n0,1,1,8,\n")
    run = subprocess.run(
        [sys.executable, "-m", "core", "import", path, "--nodes", bad, "--out", out],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 2 and "bad.csv: row 2: model" in run.stderr
    assert "Traceback" not in run.stderr


# -- the real openb day on its real node list -------------------------------------------------


@pytest.mark.slow
def test_real_gpuspec_day_plans_every_pod_on_a_model_it_allows(traces_dir):
    pod_list = traces_dir / "openb_pod_list_gpuspec10.csv"
    node_file = traces_dir / "openb_node_list_gpu_node.csv"
    for f in (pod_list, node_file):
        if not f.is_file():
            pytest.skip(f"{f.name} is not in {traces_dir}")
    result = openb.read_history(pod_list, ImportWindow(), nodes=node_file)
    s = result.scenario
    assert s.cluster.gpus == 6212 and len(s.cluster.nodes) == 12
    # the pods' own gpu_spec, read apart from the importer
    frame = pd.read_csv(pod_list, dtype=str, keep_default_na=False)
    spec = {
        n: set(v.split("|")) - {""} for n, v in zip(frame["name"], frame["gpu_spec"], strict=True)
    }
    typed = [j for j in s.batch_jobs if spec[j.id]]
    assert typed, "the window holds pods with a gpu_spec"
    for planner in ("fifo", "allocator"):
        plan = solve(s, planner)
        assert check(s, plan) == [], planner
        placed = batch_placements(s, plan)
        for job in typed:
            if job.id in placed:
                model = group_of_gpu(s.cluster, placed[job.id].gpu_start).gpu_type.name
                assert model in spec[job.id], (planner, job.id, model)
        for job in s.realtime_jobs:
            if job.gpu_types is None:
                continue
            held = np.flatnonzero((plan.grid == s.job_index(job.id)).any(axis=1))
            models = {group_of_gpu(s.cluster, int(g)).gpu_type.name for g in held}
            assert models <= set(job.gpu_types), (planner, job.id, models)


# -- sacct typed GRES, kubectl GPU products ---------------------------------------------------

SACCT_HEAD = "JobID|JobName|Partition|Submit|Start|End|State|AllocTRES|ReqTRES\n"


def sacct_rows(*rows: str) -> str:
    return SACCT_HEAD + "".join(r + "\n" for r in rows)


def a100_h100(gpus: tuple[int, int] = (8, 4)) -> Cluster:
    """A cluster file's cluster: `a` A100 on one node, `h` H100 on one node."""
    a, h = gpus
    return Cluster(
        a + h,
        gpu_types=(GpuType("a100"), GpuType("h100")),
        nodes=(NodeGroup("a100x8", "a100", a, 1), NodeGroup("h100x4", "h100", h, 1)),
    )


def test_typed_gres_gives_gpu_types_on_the_given_cluster(tmp_path):
    t = "2026-08-17T0{}:00:00"
    path = write(
        tmp_path,
        "s.txt",
        sacct_rows(
            f"1|a|gpu|{t.format(0)}|{t.format(1)}|{t.format(3)}|COMPLETED|gres/gpu:a100=4,"
            "gres/gpu=4|gres/gpu:a100=4",
            f"2|b|gpu|{t.format(0)}|{t.format(1)}|{t.format(3)}|COMPLETED|gres/gpu:a100=2,"
            "gres/gpu=2|gres/gpu=2",  # asked for any GPU, ran on A100s: untyped
            f"3|c|gpu|{t.format(0)}|{t.format(2)}|{t.format(4)}|COMPLETED|gres/gpu:h100=1|",
        ),
    )
    window = ImportWindow(start="2026-08-17T00:00:00", step_minutes=60, cluster=a100_h100())
    result = slurm.read_history(path, window)
    jobs = {j.id: j for j in result.scenario.jobs}
    assert jobs["1"].gpu_types == ("a100",)
    assert jobs["2"].gpu_types is None
    assert jobs["3"].gpu_types == ("h100",)  # no ReqTRES: what AllocTRES says
    assert result.scenario.cluster.nodes == a100_h100().nodes
    assert result.scenario.cluster.gpus == 12
    for planner in ("fifo", "allocator"):
        plan = solve(result.scenario, planner)
        assert check(result.scenario, plan) == []
        placed = batch_placements(result.scenario, plan)
        assert placed["3"].gpu_start >= 8  # on the H100 node
        assert placed["1"].gpu_start < 8  # on the A100 node


def test_typed_gres_without_a_cluster_keeps_todays_plain_gpus_and_says_how(tmp_path):
    t = "2026-08-17T0{}:00:00"
    path = write(
        tmp_path,
        "s.txt",
        sacct_rows(f"1|a|gpu|{t.format(0)}|{t.format(1)}|{t.format(3)}|COMPLETED|gres/gpu:a100=4|"),
    )
    result = slurm.read_history(path, ImportWindow(start="2026-08-17T00:00:00"))
    assert not result.scenario.cluster.nodes and result.scenario.jobs[0].gpu_types is None
    assert result.scenario.cluster.gpus == 4  # the peak in use, as before section 8
    assert any("--cluster FILE.json" in n for n in result.summary["notes"])


def test_cli_import_and_plan_a_history_on_a_cluster_file(tmp_path):
    t = "2026-08-17T0{}:00:00"
    path = write(
        tmp_path,
        "s.txt",
        sacct_rows(
            f"1|a|gpu|{t.format(0)}|{t.format(1)}|{t.format(3)}|COMPLETED|gres/gpu:a100=4|",
            f"3|c|gpu|{t.format(0)}|{t.format(2)}|{t.format(4)}|COMPLETED|gres/gpu:h100=1|",
        ),
    )
    cluster = tmp_path / "cluster.json"
    cluster.write_text(
        json.dumps(
            {
                "gpu_types": {"a100": {}, "h100": {"speed": 2.0}},
                "nodes": [
                    {"group": "a100x8", "gpu_type": "a100", "gpus_per_node": 8, "count": 1},
                    {"group": "h100x4", "gpu_type": "h100", "gpus_per_node": 4, "count": 1},
                ],
            }
        )
    )
    out = tmp_path / "w.json"
    run = subprocess.run(
        [sys.executable, "-m", "core", "import", str(path), "--start", "2026-08-17T00:00:00",
         "--cluster", str(cluster), "--out", str(out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "node groups (--cluster): a100x8 (1 x 8 a100), h100x4 (1 x 4 h100)" in run.stdout
    plan = subprocess.run(
        [sys.executable, "-m", "core", "plan", str(path), "--start", "2026-08-17T00:00:00",
         "--cluster", str(cluster), "--planner", "fifo"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert plan.returncode == 0, plan.stderr
    assert set(json.loads(plan.stdout)["by_gpu_type"]) == {"a100", "h100"}
    both = subprocess.run(
        [sys.executable, "-m", "core", "import", str(path), "--cluster", str(cluster),
         "--nodes", str(cluster), "--out", str(out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert both.returncode == 2 and "give one" in both.stderr


def test_untyped_gres_stays_untyped(tmp_path):
    t = "2026-08-17T0{}:00:00"
    path = write(
        tmp_path,
        "s.txt",
        sacct_rows(f"1|a|gpu|{t.format(0)}|{t.format(1)}|{t.format(3)}|COMPLETED|gres/gpu=4|"),
    )
    result = slurm.read_history(path, ImportWindow(start="2026-08-17T00:00:00"))
    assert not result.scenario.cluster.nodes and result.scenario.jobs[0].gpu_types is None


def test_typed_gres_is_ignored_on_plain_gpus_and_said(tmp_path):
    t = "2026-08-17T0{}:00:00"
    path = write(
        tmp_path,
        "s.txt",
        sacct_rows(f"1|a|gpu|{t.format(0)}|{t.format(1)}|{t.format(3)}|COMPLETED|gres/gpu:a100=4|"),
    )
    result = slurm.read_history(path, ImportWindow(start="2026-08-17T00:00:00", gpus=8))
    assert not result.scenario.cluster.nodes and result.scenario.jobs[0].gpu_types is None
    assert any("--gpus 8 plans on plain GPUs" in n for n in result.summary["notes"])


def test_a_nameless_gres_type_names_file_row_and_field(tmp_path):
    path = write(
        tmp_path,
        "s.txt",
        sacct_rows(
            "1|a|gpu|2026-08-17T00:00:00|2026-08-17T01:00:00|2026-08-17T02:00:00|COMPLETED|"
            "gres/gpu=4|gres/gpu:=4"
        ),
    )
    with pytest.raises(ScenarioError, match=r"s\.txt: row 2: ReqTRES .* without a type name"):
        slurm.read_table(path)


def pod(name: str, spec_extra: dict, gpus: int = 1) -> dict:
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml", "creationTimestamp": "2026-08-17T00:00:00Z"},
        "spec": {
            "containers": [{"resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}],
            **spec_extra,
        },
        "status": {
            "phase": "Succeeded",
            "containerStatuses": [
                {
                    "state": {
                        "terminated": {
                            "startedAt": "2026-08-17T01:00:00Z",
                            "finishedAt": "2026-08-17T03:00:00Z",
                        }
                    }
                }
            ],
        },
    }


def affinity(*terms: list[dict]) -> dict:
    return {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": t} for t in terms]
                }
            }
        }
    }


PRODUCT = "nvidia.com/gpu.product"
A100, L4 = "NVIDIA-A100-SXM4-80GB", "NVIDIA-L4"


@pytest.mark.parametrize(
    "extra, expected",
    [
        ({"nodeSelector": {PRODUCT: A100}}, (A100,)),
        (affinity([{"key": PRODUCT, "operator": "In", "values": [A100, L4]}]), (A100, L4)),
        # two terms are alternatives: the union of their products
        (
            affinity(
                [{"key": PRODUCT, "operator": "In", "values": [L4]}],
                [{"key": PRODUCT, "operator": "In", "values": [A100]}],
            ),
            (L4, A100),
        ),
        # a term without the key allows any product
        (affinity([{"key": PRODUCT, "operator": "In", "values": [L4]}], []), None),
        (affinity([{"key": PRODUCT, "operator": "NotIn", "values": [L4]}]), None),  # not a list
        # both: what both allow
        (
            {
                "nodeSelector": {PRODUCT: A100},
                **affinity([{"key": PRODUCT, "operator": "In", "values": [A100, L4]}]),
            },
            (A100,),
        ),
        ({"nodeSelector": {"kubernetes.io/os": "linux"}}, None),
    ],
)
def test_pod_gpu_product_gives_gpu_types(tmp_path, extra, expected):
    text = json.dumps({"kind": "List", "items": [pod("p", extra, 2)]})
    path = write(tmp_path, "pods.json", text)
    types = (GpuType(A100), GpuType(L4))
    nodes = (NodeGroup("a100", A100, 4, 1), NodeGroup("l4", L4, 4, 1))
    window = ImportWindow(
        start="2026-08-17T00:00:00", cluster=Cluster(8, gpu_types=types, nodes=nodes)
    )
    result = kubectl.read_history(path, window)
    (job,) = [j for j in result.scenario.jobs if isinstance(j, BatchJob)]
    assert job.gpu_types == expected
    assert check(result.scenario, solve(result.scenario, "fifo")) == []


def test_pod_products_that_allow_nothing_name_the_row(tmp_path):
    extra = {
        "nodeSelector": {PRODUCT: A100},
        **affinity([{"key": PRODUCT, "operator": "In", "values": [L4]}]),
    }
    path = write(tmp_path, "pods.json", json.dumps({"kind": "List", "items": [pod("p", extra)]}))
    with pytest.raises(ScenarioError, match=r"pods\.json: row 0: .*allow no GPU product"):
        kubectl.read_table(path)
