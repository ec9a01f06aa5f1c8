"""Real traces read as they mean (issue 53): every row accounted for, time-less pod lists as a
packing snapshot, the 2025 serving trace, serving that never ran counted against as-run, and
as-run scored on the plans' grid.

Each rule has a small hand-made file whose answer is counted by hand; the shared real traces
(../shared/traces, skipped with a reason when absent) check the same rules at scale against an
independent pandas count.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from core.formats import alibaba_serving, openb
from core.formats.history import ImportWindow, detect_format, format_summary, import_history
from core.model import IMPORT_STEP_MINUTES, ScenarioError
from core.plan import metrics
from core.planners import solve
from tests.paths import ROOT, TRACES_DIR

FIXTURES = ROOT / "tests" / "formats" / "fixtures"
HOUR = 3600.0


def needs(name: str):
    path = TRACES_DIR / name
    why = f"the real trace {name} (../shared/traces) is not on this machine"
    return pytest.mark.skipif(not path.is_file(), reason=why)


def rows_add_up(rows: dict) -> None:
    assert set(rows) == {"total", "used", "skipped"}
    assert rows["used"] + sum(rows["skipped"].values()) == rows["total"]
    assert all(n > 0 for n in rows["skipped"].values())


# ---------------------------------------------------------------------------------------------
# Every row accounted for


FIXTURE_ROWS = [  # (file, window start, data rows counted by hand)
    ("sacct_quirks.txt", "2026-08-17T00:00:00", 21),  # 22 lines, one header
    ("kubectl_pods.json", "2026-08-17T00:00:00", 7),  # 7 items
    ("helios_cluster_log.csv", "2020-05-02 00:00:00", 7),
    ("acme_trace.csv", "2023-03-02T00:00:00", 6),
]


@pytest.mark.parametrize(("name", "start", "total"), FIXTURE_ROWS)
def test_every_fixture_row_is_used_or_skipped_with_a_reason(name, start, total):
    result = import_history(FIXTURES / name, window=ImportWindow(start=start))
    rows = result.summary["rows"]
    rows_add_up(rows)
    assert rows["total"] == total
    assert result.as_run["rows"] == rows  # as_run.json carries the same


def test_sacct_rows_by_hand():
    result = import_history(FIXTURES / "sacct_quirks.txt", window=ImportWindow(start="2026-08-17"))
    # 21 rows: the 1020_[3-5] range is one row of three jobs; 1100 ended and 1110 was
    # submitted outside the day; 1070, 1071 and 1080 are serving demand
    assert result.summary["rows"] == {
        "total": 21,
        "used": 12,  # 9 batch rows (11 jobs) + 3 real-time
        "skipped": {
            "job step rows": 3,
            "cancelled before it started": 1,
            "ran for 0 seconds": 1,
            "needs more than the cluster's 32 GPUs": 1,
            "outside the window": 2,
            "no GPUs": 1,
        },
    }
    text = format_summary(result.summary, result.as_run)
    assert "rows: 21 = 12 used + 3 job step rows + 1 cancelled before it started" in text


TRACE_FILES = [
    "openb_pod_list_default.csv",
    "openb_pod_list_gpuspec10.csv",
    "openb_pod_list_multigpu20.csv",
    "alibaba_v2025_dlrm_even_apps.csv",
]


@pytest.mark.parametrize("name", TRACE_FILES)
def test_every_row_of_a_real_trace_is_accounted_for(name):
    path = TRACES_DIR / name
    if not path.is_file():
        pytest.skip(f"the real trace {name} (../shared/traces) is not on this machine")
    frame = pd.read_csv(path)
    result = import_history(path)
    rows = result.summary["rows"]
    rows_add_up(rows)
    assert rows["total"] == len(frame)
    gpu_col = "gpu_request" if "gpu_request" in frame else "num_gpu"
    no_gpus = int((frame[gpu_col] <= 0).sum())
    if "role" in frame:
        no_gpus = int(((frame.role == "CN") | (frame.gpu_request <= 0)).sum())
    assert rows["skipped"].get("no GPUs", 0) == no_gpus


# ---------------------------------------------------------------------------------------------
# Serving that never ran counts, and as-run is measured on the plans' demand

OPENB_HEAD = "name,num_gpu,gpu_milli,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
SERVED = (
    "web-0,1,1000,LS,Running,0,90000,0\n"  # 1 GPU all day
    "web-1,2,0,LS,Running,3600,10800,3600\n"  # 2 GPUs 01:00-03:00
    "job-0,4,0,BE,Succeeded,0,7200,1800\n"  # batch: 4 GPUs 00:30-02:00
)


def _openb(tmp_path, body: str, name: str = "pods.csv"):
    path = tmp_path / name
    path.write_text(OPENB_HEAD + body)
    return import_history(path, window=ImportWindow(start=0, gpus=16, step_minutes=60))


def test_a_never_scheduled_serving_pod_lowers_as_run_coverage_by_exactly_its_demand(tmp_path):
    base = _openb(tmp_path, SERVED)
    assert base.as_run["rt_coverage"] == 1.0
    # the same cluster, and a pod of 3 GPUs wanted 05:00-07:30 that was never scheduled
    more = _openb(tmp_path, SERVED + "web-2,3,0,LS,Pending,18000,27000,\n")
    served = 24 * 1 + 2 * 2  # GPU-hours held by web-0 and web-1
    assert base.as_run["rt_shortfall_gpu_hours"] == 0
    assert more.as_run["rt_shortfall_gpu_hours"] == pytest.approx(3 * 2.5)
    assert more.as_run["rt_coverage"] == pytest.approx(served / (served + 3 * 2.5))
    # it is in the demand every planner is measured on, and a planner can serve it
    [rt] = more.scenario.realtime_jobs
    assert sum(rt.demand) == pytest.approx(served + 3 * 2.5)
    assert rt.demand[5] == 4 and rt.demand[7] == pytest.approx(1 + 1.5)
    plan_metrics = metrics(more.scenario, solve(more.scenario, "allocator"))
    assert plan_metrics["rt_coverage"] == pytest.approx(1.0)
    assert more.summary["rows"] == {"total": 4, "used": 4, "skipped": {}}


def test_a_serving_pod_scheduled_late_is_short_for_its_wait(tmp_path):
    # web-1 created at 01:00, scheduled at 01:45: 2 GPUs x 0.75 h wanted and not served
    late = _openb(tmp_path, SERVED.replace("3600,10800,3600", "3600,10800,6300"))
    assert late.as_run["rt_shortfall_gpu_hours"] == pytest.approx(1.5)
    assert late.as_run["per_step"]["realtime_gpus"][1] == pytest.approx(1 + 2 * 0.25)
    assert late.as_run["per_step"]["realtime_demand"][1] == pytest.approx(3.0)


# ---------------------------------------------------------------------------------------------
# As-run on the plans' grid, with the rounding said


def test_as_run_is_scored_on_the_grid_and_the_summary_says_how_much_that_moved(tmp_path):
    # one batch pod of 2 GPUs run for 10 minutes from 00:05 (priority 2: BE)
    body = "web-0,1,1000,LS,Running,0,90000,0\njob-0,2,0,BE,Succeeded,0,900,300\n"
    path = tmp_path / "pods.csv"
    path.write_text(OPENB_HEAD + body)
    hourly = import_history(path, window=ImportWindow(start=0, gpus=8, step_minutes=60))
    assert hourly.as_run["value_real_times"] == pytest.approx(2 * 2 * 10 / 60)
    assert hourly.as_run["value"] == pytest.approx(2 * 2 * 1.0)  # one whole hour, as planned
    assert hourly.summary["rounding"]["change"] == pytest.approx(5.0)
    assert "moves as-run's value +500.0%" in format_summary(hourly.summary, hourly.as_run)
    fine = import_history(path, window=ImportWindow(start=0, gpus=8))
    assert fine.scenario.cluster.step_minutes == IMPORT_STEP_MINUTES == 15
    assert fine.as_run["value"] == pytest.approx(2 * 2 * 0.25)  # 00:00-00:15 on the grid
    # the plan holds the job for the same whole steps it is scored on
    [job] = fine.scenario.batch_jobs
    assert fine.scenario.duration(job, job.gpus_min) == 1


def test_the_cli_import_defaults_to_15_minute_steps_and_writes_rows(tmp_path):
    path = tmp_path / "pods.csv"
    path.write_text(OPENB_HEAD + SERVED + "cpu-0,0,0,BE,Succeeded,0,100,0\n")
    out = tmp_path / "w" / "scenario.json"
    run = subprocess.run(
        [sys.executable, "-m", "core", "import", path, "--start", "0", "--out", out],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert "rows: 4 = 3 used + 1 no GPUs" in run.stdout
    as_run = json.loads((out.parent / "as_run.json").read_text())
    assert as_run["rows"] == {"total": 4, "used": 3, "skipped": {"no GPUs": 1}}
    scenario = json.loads(out.read_text())
    assert scenario["cluster"]["step_minutes"] == 15


# ---------------------------------------------------------------------------------------------
# A pod list without times is a packing snapshot

SNAPSHOT = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
    "p0,8000,16384,1,1000\n"
    "p1,8000,16384,1,300\n"  # a share of one GPU: a block of 1
    "p2,16000,32768,3,1000\n"  # 3 GPUs: a block of 4
    "p3,4000,8192,0,0\n"  # CPU-only
)


def test_a_pod_list_without_times_is_a_packing_snapshot(tmp_path):
    path = tmp_path / "snapshot.csv"
    path.write_text(SNAPSHOT)
    assert detect_format(path.name, SNAPSHOT) == "openb"
    result = import_history(path, window=ImportWindow(days=0.5, step_minutes=60))
    s = result.scenario
    assert s.cluster.horizon_steps == 12
    assert s.cluster.gpus == 8  # the blocks asked for at once (1 + 1 + 4), to a power of two
    jobs = {j.id: j for j in s.batch_jobs}
    assert set(jobs) == {"p0", "p1", "p2"}
    for job, block in (("p0", 1), ("p1", 1), ("p2", 4)):
        assert jobs[job].arrival_step == 0 and jobs[job].gpus_min == block
        assert jobs[job].gpu_hours == pytest.approx(block * 12)  # the whole window
        assert s.duration(jobs[job], block) == 12
    assert result.summary["snapshot"] and result.as_run["snapshot"]
    assert result.summary["rows"] == {"total": 4, "used": 3, "skipped": {"no GPUs": 1}}
    text = format_summary(result.summary, result.as_run)
    assert "a packing snapshot (no times)" in text and "as-run: none" in text
    assert any("packing snapshot" in n for n in result.summary["notes"])
    # a plan packs it legally
    plan_metrics = metrics(s, solve(s, "allocator"))
    assert plan_metrics["utilization"] == pytest.approx(6 / 8)


def test_a_snapshot_is_packed_on_the_node_list_beside_it_and_refuses_a_start(tmp_path):
    (tmp_path / "snapshot.csv").write_text(SNAPSHOT)
    (tmp_path / "openb_node_list_gpu_node.csv").write_text(
        "sn,cpu_milli,memory_mib,gpu,model\nn0,96000,786432,2,V100M16\nn1,96000,786432,1,T4\n"
    )
    result = openb.read_history(tmp_path / "snapshot.csv", ImportWindow(days=1))
    assert result.scenario.cluster.gpus == 3
    assert "node list" in result.summary["window"]["gpus_source"]
    assert "needs more than the cluster's 3 GPUs" in result.summary["rows"]["skipped"]  # p2
    rows_add_up(result.summary["rows"])
    with pytest.raises(ScenarioError, match="no times.*--start does not apply"):
        openb.read_history(tmp_path / "snapshot.csv", ImportWindow(start=24))


@needs("openb_pod_list_multigpu20.csv")
def test_the_real_multigpu_pod_list_reads_as_a_snapshot_of_every_gpu_pod():
    path = TRACES_DIR / "openb_pod_list_multigpu20.csv"
    pods = pd.read_csv(path)
    result = import_history(path)
    assert result.summary["snapshot"]
    gpu_pods = pods[pods.num_gpu > 0]
    assert len(result.scenario.batch_jobs) == len(gpu_pods)
    assert all(j.arrival_step == 0 for j in result.scenario.batch_jobs)


# ---------------------------------------------------------------------------------------------
# The 2025 serving trace

SERVING_HEAD = (
    "instance_sn,role,app_name,cpu_request,cpu_limit,gpu_request,gpu_limit,rdma_request,"
    "rdma_limit,memory_request,memory_limit,disk_request,disk_limit,max_instance_per_node,"
    "creation_time,scheduled_time,deletion_time\n"
)


def _instance(sn, role, app, gpus, created, scheduled, deleted) -> str:
    cells = [sn, role, app, 8, 8, gpus, gpus, 25, 25, 64, 64, 100, 100, 8]
    return ",".join(map(str, [*cells, created, scheduled, deleted])) + "\n"


SERVING = (
    SERVING_HEAD
    + _instance("i0", "HN", "app_0", 1, "", "", "")  # up before the trace and after it
    + _instance("i1", "HN", "app_0", 1, 3600, 3600, 7200)  # 01:00-02:00
    + _instance("i2", "HN", "app_2", 1, "", "", 5400)  # from before the trace to 01:30
    + _instance("i3", "HN", "app_2", 1, 9000, 10800, "")  # wanted 02:30, up from 03:00
    + _instance("i4", "CN", "app_0", 0, "", "", "")  # a CPU instance
    + _instance("i5", "HN", "app_4", 1, 1800, 1800, 36000)  # a marker: the trace runs 10 h
)


def test_the_serving_trace_is_one_realtime_job_per_service(tmp_path):
    path = tmp_path / "serving.csv"
    path.write_text(SERVING)
    assert detect_format(path.name, SERVING) == "alibaba-serving"
    result = import_history(path, window=ImportWindow(start=0, days=4 / 24, step_minutes=60))
    jobs = {j.id: j for j in result.scenario.realtime_jobs}
    assert set(jobs) == {"rt-app_0", "rt-app_2", "rt-app_4"}
    assert list(jobs["rt-app_0"].demand) == [1, 2, 1, 1]
    assert list(jobs["rt-app_2"].demand) == [1, 0.5, 0.5, 1]
    assert list(jobs["rt-app_4"].demand) == [0.5, 1, 1, 1]
    assert not result.scenario.batch_jobs
    # i3 waited 02:30-03:00 for its node: as-run is short by half a GPU-hour
    assert result.as_run["rt_shortfall_gpu_hours"] == pytest.approx(0.5)
    assert result.summary["rows"] == {"total": 6, "used": 5, "skipped": {"no GPUs": 1}}
    assert any("1 CN (CPU) instances are counted and skipped" in n for n in result.summary["notes"])


def test_a_bad_serving_row_is_named(tmp_path):
    path = tmp_path / "serving.csv"
    path.write_text(SERVING_HEAD + _instance("i0", "GPU", "app_0", 1, 0, 0, 10))
    with pytest.raises(ScenarioError, match=r"serving.csv: row 2: role must be HN \(GPU\) or CN"):
        alibaba_serving.read_history(path)
    path.write_text(SERVING_HEAD + _instance("i0", "HN", "app_0", "x", 0, 0, 10))
    with pytest.raises(ScenarioError, match="row 2.*gpu_request"):
        alibaba_serving.read_history(path)


@needs("alibaba_v2025_dlrm_even_apps.csv")
def test_the_real_serving_trace_demand_matches_an_independent_count():
    path = TRACES_DIR / "alibaba_v2025_dlrm_even_apps.csv"
    start_h = 24 * 12
    result = import_history(path, window=ImportWindow(start=start_h, days=2, step_minutes=60))
    trace = pd.read_csv(path)
    gpu = trace[trace.role == "HN"]
    begin = gpu.creation_time.fillna(0.0)  # empty: up before the trace began
    end = gpu.deletion_time.fillna(np.inf)  # empty: still up at its end
    edges = start_h * HOUR + HOUR * np.arange(49)
    # the GPUs each service holds per hour: every instance's overlap with every hour
    overlap = np.clip(
        np.minimum(end.to_numpy()[:, None], edges[None, 1:])
        - np.maximum(begin.to_numpy()[:, None], edges[None, :-1]),
        0,
        None,
    )
    per_app = pd.DataFrame(overlap * gpu.gpu_request.to_numpy()[:, None] / HOUR)
    per_app = per_app.groupby(gpu.app_name.to_numpy()).sum()
    jobs = {j.id: j for j in result.scenario.realtime_jobs}
    for app, expected in per_app.iterrows():
        if expected.sum() == 0 and f"rt-{app}" not in jobs:
            continue  # a service gone before the window and its history
        assert list(jobs[f"rt-{app}"].demand) == pytest.approx(list(expected), abs=1e-3)
    total = sum(np.asarray(j.demand) for j in jobs.values())
    assert total == pytest.approx(per_app.sum().to_numpy(), abs=1e-2)
    skipped = result.summary["rows"]["skipped"]
    assert skipped["no GPUs"] == int((trace.role == "CN").sum())
