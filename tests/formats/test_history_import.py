"""Scheduler histories -> scenarios (issue 14): fixtures written from each format's documentation,
the real openb pod list, hand-checked counts and demand, plans that pass check(), bad files."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from core.formats import acme, helios, kubectl, openb, slurm
from core.formats.history import (
    ImportRules,
    ImportWindow,
    binned_occupancy,
    detect_format,
    import_history,
    peak_in_use,
    pow2_ceil,
    read_source,
)
from core.model import BatchJob, RealtimeJob, ScenarioError
from core.plan import check, metrics
from core.planners import solve
from tests.budget import examples

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SACCT = FIXTURES / "sacct_quirks.txt"
KUBECTL = FIXTURES / "kubectl_pods.json"
HELIOS = FIXTURES / "helios_cluster_log.csv"
ACME = FIXTURES / "acme_trace.csv"
TRACES = ROOT.parent / "shared" / "traces"
if not TRACES.is_dir():  # a worktree sits beside the main checkout, not inside it
    TRACES = Path("/work/shared/traces")
OPENB = TRACES / "openb_pod_list_default.csv"
needs_openb = pytest.mark.skipif(
    not OPENB.is_file(), reason="the real openb pod list (../shared/traces) is not on this machine"
)
OPENB_DAY = 24 * 140  # hours from the trace start: day 140, a busy day with four weeks before it


def jobs_by_id(scenario):
    return {j.id: j for j in scenario.jobs}


@pytest.fixture(scope="module")
def sacct():
    # hand-counted in hours: 60-minute steps, not the import's default
    return slurm.read_history(SACCT, ImportWindow(start="2026-08-17T00:00:00", step_minutes=60))


# ---------------------------------------------------------------------------------------------
# Slurm sacct: every quirk, counted by hand


def test_sacct_counts_by_hand(sacct):
    s = sacct.summary
    assert s["window"]["gpus"] == 32  # peak 17 GPUs in use (02:05-02:35), rounded up
    assert s["window"]["peak_gpus_in_use"] == 17
    assert s["batch"]["by_type"] == {"training": 5, "batch_inference": 4, "quantization": 2}
    assert s["batch"]["jobs"] == 11
    assert (s["batch"]["arriving"], s["batch"]["queued_at_start"]) == (9, 1)
    assert (s["batch"]["running_at_start"], s["batch"]["pinned"]) == (1, 1)
    assert s["batch"]["rounded_up"] == 3  # 1010_1, 1010_2 (3 -> 4) and 1090 (2 + 1 typed -> 4)
    assert s["dropped"] == {
        "job step rows": 3,  # 1001.batch, 1001.extern, 1002.0
        "no GPUs": 1,  # 1050
        "cancelled before it started": 1,  # 1060, "CANCELLED by 5678" while pending
        "ran for 0 seconds": 1,  # 1130
        "needs more than the cluster's 32 GPUs": 1,  # 1041, 64 GPUs
    }


def test_sacct_quirks_map_job_by_job(sacct):
    jobs = jobs_by_id(sacct.scenario)
    # typed gres/gpu:a100=4 beside gres/gpu=4 is 4 GPUs, not 8; running since 22:00, ends 03:30
    pinned = jobs["1001"]
    assert (pinned.gpus_min, pinned.running.gpu_start, pinned.running.gpus) == (4, 0, 4)
    assert pinned.running.remaining_steps == 4
    # array tasks are jobs; 3 GPUs round up to a block of 4, work = block x real run time
    assert jobs["1010_1"].type == "quantization" and jobs["1010_1"].gpus_min == 4
    assert jobs["1010_1"].gpu_hours == pytest.approx(4.0)
    assert jobs["1010_2"].gpu_hours == pytest.approx(2.0)  # "CANCELLED by 1234" after 30 min
    # a pending array range is one job per task, GPUs from ReqTRES, work from the time limit
    for task in ("1020_3", "1020_4", "1020_5"):
        assert jobs[task].type == "batch_inference" and jobs[task].arrival_step == 5
        assert (jobs[task].gpus_min, jobs[task].gpu_hours) == (1, pytest.approx(1.5))
    # a pending job's Start is Slurm's expected start, not a start: it waits from step 7
    assert jobs["1040"].arrival_step == 7 and jobs["1040"].running is None
    assert jobs["1040"].gpu_hours == pytest.approx(16 * 10)
    # still running at the export (End Unknown): its 48 h time limit is the estimate
    assert jobs["1030"].gpu_hours == pytest.approx(8 * 48) and jobs["1030"].arrival_step == 10
    assert jobs["1090"].gpus_min == 4 and jobs["1090"].gpu_hours == pytest.approx(8.0)
    assert jobs["1120"].arrival_step == 0  # submitted before the window, started in it
    for gone in ("1001.batch", "1050", "1060", "1041", "1100", "1110", "1130"):
        assert gone not in jobs


def test_sacct_realtime_groups_and_time_weighted_demand(sacct):
    jobs = jobs_by_id(sacct.scenario)
    serving = jobs["rt-serving"]  # partition `serving`: 1070 (2 GPUs, still up) and 1071
    expected = [2.0] * 24
    # 1071 wants 1 GPU from its submit at 08:25 to 09:00 (it ran from 08:30): 35 minutes
    expected[8] = round(2 + 35 / 60, 4)
    assert list(serving.demand) == expected
    # history: hourly from the trace's first hour (2026-08-16 10:00) to the window start; 1070
    # is wanted from its submit at 11:00 (it started at 12:00)
    assert list(serving.history) == [0.0, 2.0] + [2.0] * 12
    infer = jobs["rt-infer"]  # name vllm-infer-13b on partition gpu: the matched text groups it
    # 1080 is wanted from its submit at 11:55 and runs 12:00-18:00
    assert list(infer.demand) == [0.0] * 11 + [round(5 / 60, 4)] + [1.0] * 6 + [0.0] * 6
    assert serving.gpus_min == 0 and serving.gpus_max == 32


def test_sacct_as_run_by_hand(sacct):
    a = sacct.as_run
    # on the plans' 60-minute grid, each job from the step it started in for its run time
    # rounded up to whole steps (block x steps): 1001 4x4 (running, ends 03:30), 1120 1x2
    # (00:45-02:45), 1002 2x2, 1010_1 4x1, 1010_2 4x1 (30 min), 1030 8x14 (10:30 to the end),
    # 1090 4x2 = 150; on real times the same jobs hold 142. Real-time served (from its start):
    # 1070 2x24 + 1071 0.5 + 1080 6 = 54.5, of 54.5 + 5/60 (1071) + 5/60 (1080) wanted.
    assert a["utilization"] == pytest.approx((150 + 54.5) / 768)
    assert a["utilization_real_gpus"] == pytest.approx((138.5 + 54.5) / 768)
    grid = {"1001": 4, "1120": 2, "1002": 2, "1010_1": 1, "1010_2": 1, "1030": 14, "1090": 2}
    real = {"1001": 3.5, "1120": 2, "1002": 2, "1010_1": 1, "1010_2": 0.5, "1030": 13.5}
    real["1090"] = 2
    jobs = jobs_by_id(sacct.scenario)
    value = sum(jobs[j].priority * jobs[j].gpus_min * h for j, h in grid.items())
    assert a["value"] == pytest.approx(value)
    value_real = sum(jobs[j].priority * jobs[j].gpus_min * h for j, h in real.items())
    assert a["value_real_times"] == pytest.approx(value_real)
    rounding = sacct.summary["rounding"]
    assert rounding["step_minutes"] == 60
    assert rounding["change"] == pytest.approx(value / value_real - 1)
    assert (a["completed_jobs"], a["started_jobs"], a["batch_jobs"]) == (6, 7, 11)
    wanted = 54.5 + 10 / 60
    assert a["rt_coverage"] == pytest.approx(54.5 / wanted)
    assert a["rt_shortfall_gpu_hours"] == pytest.approx(10 / 60, abs=1e-3)
    assert "not a legal grid" in a["note"]
    assert sum(a["per_step"]["batch_gpus"]) == pytest.approx(150)


def test_summary_csv_carries_the_as_run_beside_the_planners(sacct):
    import csv
    import io

    from core.formats import summary_to_csv
    from core.planners import solve

    plans = {"fifo": solve(sacct.scenario, "fifo")}
    text = summary_to_csv(sacct.scenario, plans, sacct.as_run)
    rows = list(csv.DictReader(io.StringIO(text)))
    assert list(rows[0]) == ["section", "name", "fifo", "as-run"]
    cell = {(r["section"], r["name"]): r["as-run"] for r in rows}
    a = sacct.as_run
    assert float(cell[("kpi", "utilization")]) == pytest.approx(a["utilization"])
    assert float(cell[("kpi", "value (priority-weighted GPU-h)")]) == pytest.approx(a["value"])
    assert cell[("kpi", "completed jobs")] == "6"  # by hand, above
    assert float(cell[("kpi", "real-time coverage")]) == pytest.approx(a["rt_coverage"])
    assert a["rt_coverage"] < 1  # 1071 and 1080 waited 5 minutes each
    assert cell[("kpi", "reserved idle (GPU-h)")] == ""  # not measured for what ran
    assert cell[("setting", "gpus")] == "32"
    assert {v for (section, _), v in cell.items() if section == "job"} == {""}
    # after a change of decay the page passes objective None: the cell is blank, not "None"
    later = summary_to_csv(sacct.scenario, plans, {**a, "objective": None})
    assert {r["name"]: r["as-run"] for r in csv.DictReader(io.StringIO(later))}["objective"] == ""
    # without an as-run, no such column
    assert "as-run" not in next(csv.reader(io.StringIO(summary_to_csv(sacct.scenario, plans))))


def test_sacct_priority_ranked_into_one_to_ten():
    header = "JobID|Priority|Submit|Start|End|AllocTRES"
    rows = [
        f"{i}|{p}|2026-08-17T00:00:00|2026-08-17T01:00:00|2026-08-17T02:00:00|gres/gpu=1"
        for i, p in enumerate([10, 20, 30, 40, 50, 60, 70, 80, 90, 100], start=1)
    ]
    result = slurm.read_history(
        "\n".join([header, *rows]) + "\n", ImportWindow(start="2026-08-17T00:00:00")
    )
    assert [j.priority for j in result.scenario.batch_jobs] == list(range(1, 11))
    assert result.summary["priority_from"] == (
        "the default rules (0 of the trace's 10 jobs matched), then the scheduler's priority "
        "ranked into 1-10"
    )


def test_running_jobs_that_do_not_fit_wait_at_step_zero():
    header = "JobID|Submit|Start|End|AllocTRES"
    rows = [
        f"r{i}|2026-08-16T20:00:00|2026-08-16T21:00:00|2026-08-17T0{i + 2}:00:00|gres/gpu=4"
        for i in range(3)
    ]
    text = "\n".join([header, *rows]) + "\n"
    result = slurm.read_history(text, ImportWindow(start="2026-08-17T00:00:00", gpus=8))
    jobs = jobs_by_id(result.scenario)
    assert result.summary["batch"]["pinned"] == 2 and result.summary["batch"]["not_pinned"] == 1
    starts = sorted(j.running.gpu_start for j in jobs.values() if j.running)
    assert starts == [0, 4]  # packed, aligned, not overlapping
    waiting = [j for j in jobs.values() if j.running is None]
    assert len(waiting) == 1 and waiting[0].arrival_step == 0
    # its remaining work: 4 GPUs from the window start to its real end
    hours_left = {"r0": 2, "r1": 3, "r2": 4}[waiting[0].id]
    assert waiting[0].gpu_hours == pytest.approx(4 * hours_left)
    assert any("did not fit" in n for n in result.summary["notes"])


@pytest.mark.skipif(
    "team" not in {f.name for f in fields(BatchJob)}, reason="BatchJob has no team field yet"
)
def test_team_comes_from_the_account(sacct):
    assert jobs_by_id(sacct.scenario)["1002"].team == "nlp"


# ---------------------------------------------------------------------------------------------
# kubectl, Helios, Acme


def test_kubectl_pods():
    result = kubectl.read_history(
        KUBECTL, ImportWindow(start="2026-08-17T00:00:00", step_minutes=60)
    )
    jobs = jobs_by_id(result.scenario)
    assert set(jobs) == {
        "research/sft-running",
        "research/train-resnet",
        "batch/quant-gptq-llama",
        "research/eval-mmlu",
        "rt-inference",
    }
    assert result.summary["dropped"] == {"no GPUs": 1}  # default/nginx
    # running since 20:00 with no limit: at least until the export (the last timestamp, 09:00)
    sft = jobs["research/sft-running"]
    assert sft.running.remaining_steps == 9 and sft.gpu_hours == pytest.approx(8 * 13)
    assert jobs["research/train-resnet"].arrival_step == 1
    assert jobs["research/train-resnet"].gpu_hours == pytest.approx(2 * 3)
    assert jobs["research/train-resnet"].priority == 8  # priorityClassName high-priority
    assert jobs["batch/quant-gptq-llama"].gpus_min == 4  # 2 + 2 over two containers
    assert jobs["batch/quant-gptq-llama"].type == "quantization"
    demand = list(jobs["rt-inference"].demand)  # namespace `inference`; pod a has limits only
    # pod b is wanted from its creation at 06:29 (it started at 06:30)
    assert demand == [1.0] * 6 + [round(1.5 + 1 / 60, 4)] + [1.0] * 17
    # from the hour of the first timestamp (17:58) to the window start; pod a is wanted from
    # its creation at 17:58 and serves from 18:00
    assert list(jobs["rt-inference"].history) == [round(2 / 60, 4)] + [1.0] * 6
    assert result.summary["window"]["gpus"] == 16  # 8 + 2 + 1.5 in use at the peak -> 16


def test_helios_cluster_log():
    result = helios.read_history(HELIOS, ImportWindow(start="2020-05-02 00:00:00", step_minutes=60))
    jobs = jobs_by_id(result.scenario)
    assert jobs["j1"].running.remaining_steps == 3  # ends 02:30
    assert jobs["j5"].gpus_min == 8 and jobs["j5"].arrival_step == 10  # 6 GPUs -> 8
    assert "j4" not in jobs and result.summary["dropped"] == {"no GPUs": 1}
    serve = jobs["rt-vcServe"]  # vc name matches `serv`
    assert list(serve.demand) == [1.0] * 12 + [0.0] * 12
    assert list(serve.history) == [1.0] * 12  # the trace starts at 12:00 the day before
    assert result.summary["window"]["gpus"] == 16  # j7 holds 16 from 23:00


def test_acme_offsets_and_types():
    local = acme.read_history(ACME, ImportWindow(start="2023-03-02T00:00:00", step_minutes=60))
    jobs = jobs_by_id(local.scenario)
    assert jobs["5778001"].running.remaining_steps == 5  # ends 05:00 +08:00
    assert jobs["5778500"].type == "batch_inference"  # Acme type Evaluation
    assert jobs["5778500"].arrival_step == 2
    assert jobs["5778502"].arrival_step == 12
    # the same window given in UTC
    utc = acme.read_history(ACME, ImportWindow(start="2023-03-01T16:00:00+00:00", step_minutes=60))
    assert [j.id for j in utc.scenario.jobs] == [j.id for j in local.scenario.jobs]
    assert utc.as_run["utilization"] == pytest.approx(local.as_run["utilization"])


@pytest.mark.parametrize(
    ("path", "fmt"),
    [(SACCT, "slurm"), (KUBECTL, "kubectl"), (HELIOS, "helios"), (ACME, "acme")]
    + ([(OPENB, "openb")] if OPENB.is_file() else []),
)
def test_formats_are_detected(path, fmt):
    shown, _, head = read_source(path)
    assert detect_format(shown, head) == fmt


# ---------------------------------------------------------------------------------------------
# Every imported scenario plans legally


def _imports():
    cases = [
        (SACCT, {"start": "2026-08-17T00:00:00"}),
        (SACCT, {"start": "2026-08-17T00:00:00", "step_minutes": 30, "gpus": 16}),
        (KUBECTL, {"start": "2026-08-17T00:00:00"}),
        (HELIOS, {"start": "2020-05-02 00:00:00"}),
        (ACME, {"start": "2023-03-02T00:00:00", "days": 2}),
    ]
    if OPENB.is_file():
        cases += [(OPENB, {"start": OPENB_DAY}), (OPENB, {"start": OPENB_DAY, "gpus": 48})]
    return cases


@pytest.mark.slow
@pytest.mark.parametrize(("path", "window"), _imports())
@pytest.mark.parametrize("planner", ["fifo", "allocator"])
def test_imported_scenarios_plan_legally(path, window, planner):
    result = import_history(path, window=ImportWindow(**window))
    plan = solve(result.scenario, planner)
    assert check(result.scenario, plan) == []
    m = metrics(result.scenario, plan)
    assert set(result.as_run) >= {"utilization", "value", "completed_jobs", "started_jobs"}
    assert m["batch_jobs"] == result.as_run["batch_jobs"]


# ---------------------------------------------------------------------------------------------
# The real openb pod list


@needs_openb
@pytest.mark.parametrize("start", ["3600", "1e18", "-100"])
def test_a_window_outside_the_trace_is_refused_with_the_trace_span(start, capsys, tmp_path):
    from core.cli import main

    out = tmp_path / "window"
    code = main(["import", str(OPENB), "--start", start, "--out", str(out / "scenario.json")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("error: openb_pod_list_default.csv: the window ")
    assert "is outside the trace, which runs from 0 h to 3584.16 h" in err
    assert not out.exists()


@pytest.mark.parametrize("days", [1e18, 1e6, 420.5])
def test_a_window_past_the_step_limit_is_refused_before_its_arrays(days):
    with pytest.raises(ScenarioError, match=r"more than the limit of 10,080"):
        ImportWindow(days=days, step_minutes=60)
    assert ImportWindow(days=420, step_minutes=60).steps == 10_080
    assert ImportWindow(days=7, step_minutes=1).steps == 10_080


@needs_openb
def test_openb_real_day():
    result = openb.read_history(OPENB, ImportWindow(start=OPENB_DAY, step_minutes=60))
    s = result.summary
    assert s["trace"]["cluster_gpus"] == 6212  # the node list beside the pod list
    assert s["trace"]["rows"] == 8152
    G = s["window"]["gpus"]
    assert G & (G - 1) == 0 and G / 2 < max(1, s["window"]["peak_gpus_in_use"]) <= G
    [ls] = result.scenario.realtime_jobs  # one group: qos LS
    assert ls.id == "rt-LS" and len(ls.history) == 28 * 24

    # LS demand by brute force: every pod, every step, its share times the overlap of its
    # creation..deletion (wanted, scheduled or not) and of its scheduled..deletion (served)
    pods = pd.read_csv(OPENB)
    pods = pods[(pods.qos == "LS") & (pods.num_gpu > 0)]
    shared = (pods.num_gpu == 1) & (pods.gpu_milli > 0)
    share = np.where(shared, pods.gpu_milli / 1000, pods.num_gpu)
    t0 = OPENB_DAY * 3600.0
    expected, served = [], []
    for k in range(24):
        lo, hi = t0 + 3600 * k, t0 + 3600 * (k + 1)
        end = np.minimum(pods.deletion_time, hi)
        wanted = np.clip(end - np.maximum(pods.creation_time, lo), 0, None)
        ran = np.clip(end - np.maximum(pods.scheduled_time.fillna(np.inf), lo), 0, None)
        expected.append(float((share * wanted).sum() / 3600))
        served.append(float((share * ran).sum() / 3600))
    assert list(ls.demand) == pytest.approx(expected, abs=1e-3)
    assert result.as_run["per_step"]["realtime_gpus"] == pytest.approx(served, abs=1e-3)
    # pods never scheduled, or scheduled late, are demand the real cluster did not serve
    assert sum(served) < sum(expected)
    assert result.as_run["rt_coverage"] == pytest.approx(sum(served) / sum(expected), abs=1e-4)

    # batch pods: BE, Burstable, Guaranteed that touch the day, each on a power-of-two block
    batch = result.scenario.batch_jobs
    assert len(batch) == s["batch"]["jobs"] > 0
    assert all(j.gpus_min == j.gpus_max and j.gpus_min & (j.gpus_min - 1) == 0 for j in batch)
    assert s["batch"]["rounded_up"] > 0  # shared pods (gpu_milli < 1000) take a whole GPU
    assert {j.priority for j in batch} <= {2.0, 5.0, 8.0}  # BE 2, others by the QOS rules


# ---------------------------------------------------------------------------------------------
# The vectorised pieces against brute force


intervals = st.lists(
    st.tuples(
        st.floats(-50, 150, allow_nan=False),
        st.floats(0, 80, allow_nan=False),
        st.floats(0.01, 8, allow_nan=False),
    ),
    max_size=30,
)


@settings(max_examples=examples(60), deadline=None)
@given(intervals)
def test_binned_occupancy_is_the_sum_of_overlaps(items):
    starts = np.array([s for s, _, _ in items])
    ends = starts + np.array([d for _, d, _ in items])
    weights = np.array([w for _, _, w in items])
    edges = np.arange(0.0, 101.0, 10.0)
    got = binned_occupancy(starts, ends, weights, edges)
    for k in range(10):
        lo, hi = edges[k], edges[k + 1]
        want = sum(
            w * max(0.0, min(e, hi) - max(s, lo))
            for s, e, w in zip(starts, ends, weights, strict=True)
        )
        assert got[k] == pytest.approx(want, abs=1e-6)


@settings(max_examples=examples(60), deadline=None)
@given(intervals)
def test_peak_in_use_is_the_most_held_at_any_instant(items):
    starts = np.array([s for s, _, _ in items])
    ends = starts + np.array([d for _, d, _ in items])
    gpus = np.array([w for _, _, w in items])
    got = peak_in_use(starts, ends, gpus, 0.0, 100.0)
    probes = [t for t in np.concatenate([starts, [0.0]]) if 0 <= t < 100]
    want = max(
        [float(gpus[(starts <= t) & (ends > t)].sum()) for t in probes] + [0.0]
    )  # the level only rises at a start (or at the window start)
    assert got == pytest.approx(want, abs=1e-9)


def test_pow2_ceil():
    assert pow2_ceil(np.array([0.46, 1, 2, 3, 5, 8, 9])).tolist() == [1, 1, 2, 4, 8, 8, 16]


# ---------------------------------------------------------------------------------------------
# Rules


def test_rules_file_changes_types_and_priorities(tmp_path):
    rules = tmp_path / "rules.json"
    rules.write_text(
        json.dumps(
            {
                "types": [{"type": "quantization", "fields": "name", "pattern": "^sft-"}],
                "priorities": [{"fields": ["user"], "pattern": "^alice$", "priority": 9}],
                "rank_priority": False,
                "swap_cap": 2,
            }
        )
    )
    result = slurm.read_history(
        SACCT, ImportWindow(start="2026-08-17T00:00:00"), ImportRules.load(rules)
    )
    jobs = jobs_by_id(result.scenario)
    assert jobs["1001"].type == "quantization" and jobs["1001"].priority == 9
    assert jobs["1002"].type == "training" and jobs["1002"].priority == 5  # the defaults
    assert result.scenario.realtime_jobs == []  # no real-time rule left
    assert result.summary["priority_from"] == (  # alice's three jobs in the whole trace
        "the rules file (3 of the trace's 19 jobs matched; the others 5)"
    )
    assert ImportRules.from_json(json.dumps(ImportRules().to_dict())) == ImportRules()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[1]", "must be a JSON object"),
        ('{"typez": []}', "unknown key 'typez'"),
        ('{"types": [{"type": "gpu", "fields": ["name"], "pattern": "x"}]}', "types[0]"),
        ('{"types": [{"type": "training", "fields": ["name"], "pattern": "("}]}', "pattern"),
        ('{"types": [{"type": "training", "fields": ["colour"], "pattern": "x"}]}', "fields"),
        ('{"priorities": [{"fields": ["qos"], "pattern": "x", "priority": 0}]}', "priority"),
        ('{"types": [{"type": "training", "pattern": "x"}]}', "'fields'"),
    ],
)
def test_bad_rules(text, expected):
    with pytest.raises(ScenarioError, match="rules.json") as e:
        ImportRules.from_json(text, "rules.json")
    assert expected in str(e.value)


# ---------------------------------------------------------------------------------------------
# Bad files: one message naming file, row and field

SACCT_HEAD = "JobID|Submit|Start|End|AllocTRES\n"
OPENB_HEAD = "name,num_gpu,gpu_milli,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
HELIOS_HEAD = "job_id,user,vc,gpu_num,state,submit_time,start_time,end_time,duration\n"
ACME_HEAD = "job_id,user,gpu_num,type,state,submit_time,start_time,end_time,duration\n"
T = "2026-08-17T01:00:00"


def _pods(gpu: str) -> str:
    return json.dumps(
        {
            "kind": "List",
            "items": [
                {
                    "kind": "Pod",
                    "metadata": {"name": "p", "creationTimestamp": "2026-08-17T00:00:00Z"},
                    "spec": {"containers": [{"resources": {"requests": {"nvidia.com/gpu": gpu}}}]},
                }
            ],
        }
    )


BAD_FILES = [
    # (format, file name, text, [what the message must name])
    ("slurm", "s.txt", "JobID|Start|End|AllocTRES\n1|x|y|gres/gpu=1\n", ["s.txt", "Submit"]),
    ("slurm", "s.txt", "JobID|Submit|Start|AllocTRES\n1|x|y|gres/gpu=1\n", ["End or ElapsedRaw"]),
    (
        "slurm",
        "s.txt",
        SACCT_HEAD + f"1|{T}|{T}|{T}|gres/gpu=1\n2|yesterday|{T}|{T}|gres/gpu=1\n",
        ["s.txt", "row 3", "Submit", "yesterday"],
    ),
    ("slurm", "s.txt", SACCT_HEAD + f"1|{T}|{T}|{T}|gres/gpu=-2\n", ["row 2", "AllocTRES"]),
    (
        "slurm",
        "s.txt",
        SACCT_HEAD + f"1|{T}|2026-08-17T03:00:00|{T}|gres/gpu=1\n",
        ["row 2", "End"],
    ),
    ("slurm", "s.txt", SACCT_HEAD + f"1|{T}|{T}|{T}\n", ["s.txt", "row"]),
    (
        "openb",
        "o.csv",
        OPENB_HEAD + "p0,-1,1000,LS,Running,0,10,0\n",
        ["o.csv", "row 2", "num_gpu"],
    ),
    ("openb", "o.csv", OPENB_HEAD + "p0,1,1000,LS,Running,abc,10,0\n", ["row 2", "creation_time"]),
    ("openb", "o.csv", OPENB_HEAD + "p0,1,1500,LS,Running,0,10,0\n", ["row 2", "gpu_milli"]),
    # (without any of the three times it is a packing snapshot; with only some, broken)
    (
        "openb",
        "o.csv",
        "name,num_gpu,gpu_milli,creation_time\np0,1,1000,0\n",
        ["o.csv", "missing column qos"],
    ),
    # sizes past the limits, named by row and field before anything is made of them
    (
        "openb",
        "o.csv",
        OPENB_HEAD + "p0,1,1000,LS,Running,0,10,0\np1,1e18,0,LS,Running,0,10,0\n",
        ["o.csv: row 3: num_gpu 1e18 is more than 65,536 in size"],
    ),
    (
        "openb",
        "o.csv",
        OPENB_HEAD + "p0,1,1000,LS,Running,0,1e18,0\n",
        ["o.csv: row 2: deletion_time 1e18 is more than 1e15 in size"],
    ),
    (
        "slurm",
        "s.txt",
        SACCT_HEAD + f"1|{T}|{T}|{T}|gres/gpu={'9' * 5000}\n",
        ["s.txt: row 2: AllocTRES gres/gpu must be a whole number from 0 to 65,536"],
    ),
    (
        "slurm",
        "s.txt",
        SACCT_HEAD + f"1|{T}|{T}|{T}|gres/gpu:a100=40000,gres/gpu:h100=40000\n",
        ["row 2", "from 0 to 65,536"],  # each fits, their sum does not
    ),
    (
        "helios",
        "h.csv",
        HELIOS_HEAD + "j,u,vc,1e9,COMPLETED,2020-05-02 00:00:00,,,0\n",
        ["h.csv: row 2: gpu_num 1e9 is more than 65,536 in size"],
    ),
    ("kubectl", "k.json", _pods("100000"), ["k.json", "row 0", "nvidia.com/gpu 100000 is more"]),
    (
        "helios",
        "h.csv",
        HELIOS_HEAD
        + "j,u,vc,1,COMPLETED,2020-05-02 00:00:00,2020-05-02 02:00:00,2020-05-02 01:00:00,0\n",
        ["h.csv", "row 2", "end_time"],
    ),
    ("helios", "h.csv", "job_id,vc,submit_time\nj,vc,2020-05-02\n", ["h.csv", "gpu_num"]),
    (
        "acme",
        "a.csv",
        ACME_HEAD
        + "j,u,8,SFT,COMPLETED,2023-03-02 00:00:00+08:00,soon,2023-03-02 01:00:00+08:00,1\n",
        ["a.csv", "row 2", "start_time", "soon"],
    ),
    ("kubectl", "k.json", _pods("lots"), ["k.json", "row 0", "nvidia.com/gpu"]),
    ("kubectl", "k.json", _pods("-1"), ["k.json", "row 0", "nvidia.com/gpu"]),
    ("kubectl", "k.json", '{"items": [', ["k.json", "not valid JSON"]),
    ("kubectl", "k.json", '{"kind": "Pod"}', ["k.json", "pod list"]),
    (
        "helios",
        "h.csv",
        HELIOS_HEAD.encode() + b"j,\xff\xfe,vc,1,COMPLETED,,,,1\n",
        ["h.csv", "UTF-8"],
    ),
    ("kubectl", "k.json", b'{"items": ["\xff"]}', ["k.json", "UTF-8"]),
    ("slurm", "empty.txt", "", ["empty.txt", "empty"]),
]


@pytest.mark.parametrize(("fmt", "name", "text", "named"), BAD_FILES)
def test_bad_files_name_file_row_and_field(tmp_path, fmt, name, text, named):
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    with pytest.raises(ScenarioError) as e:
        import_history(path, fmt, ImportWindow(start="2026-08-17T00:00:00"))
    for part in named:
        assert part in str(e.value)


def test_bad_windows():
    with pytest.raises(ScenarioError, match="whole number of 45-minute steps"):
        ImportWindow(days=0.1, step_minutes=45)
    with pytest.raises(ScenarioError, match="hours from"):
        openb.read_history(
            "name,num_gpu,gpu_milli,qos,creation_time,deletion_time,scheduled_time\n"
            "p,1,1000,LS,0,10,0\n",
            ImportWindow(start="2026-08-17"),
        )


# ---------------------------------------------------------------------------------------------
# The command line


def gpuplan(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "core", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
def test_cli_import_then_plan(tmp_path):
    out = tmp_path / "w" / "scenario.json"
    run = gpuplan("import", SACCT, "--start", "2026-08-17T00:00:00", "--out", out)
    assert run.returncode == 0, run.stderr
    assert "dropped: 3 job step rows" in run.stdout and "rt-serving" in run.stdout
    assert "as-run: utilization 25.6%" in run.stdout
    as_run = json.loads((out.parent / "as_run.json").read_text())
    assert as_run["planner"] == "as-run" and as_run["summary"]["batch"]["jobs"] == 11
    assert as_run["scenario"] == "scenario.json"
    planned = gpuplan("plan", out, "--planner", "fifo")
    assert planned.returncode == 0, planned.stderr
    assert json.loads(planned.stdout)["batch_jobs"] == 11

    # a second window into the same folder keeps the first one's as-run; the first again
    # replaces its own
    day2 = gpuplan(
        "import", SACCT, "--start", "2026-08-18T00:00:00", "--out", out.parent / "d2.json"
    )
    assert day2.returncode == 0, day2.stderr
    assert day2.stdout.rstrip().endswith(f"and {out.parent / 'd2.as_run.json'}")
    assert json.loads((out.parent / "as_run.json").read_text()) == as_run
    assert json.loads((out.parent / "d2.as_run.json").read_text())["scenario"] == "d2.json"
    again = gpuplan("import", SACCT, "--start", "2026-08-17T00:00:00", "--out", out)
    assert again.stdout.rstrip().endswith(f"and {out.parent / 'as_run.json'}")
    assert sorted(f.name for f in out.parent.iterdir()) == [
        "as_run.json",
        "d2.as_run.json",
        "d2.json",
        "scenario.json",
    ]


def test_cli_import_bad_file_exits_2_with_one_line(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text(SACCT_HEAD + f"1|{T}|{T}|{T}|gres/gpu=-1\n")
    run = gpuplan("import", bad, "--format", "slurm", "--out", tmp_path / "s.json")
    assert run.returncode == 2
    assert run.stderr.count("\n") == 1 and run.stderr.startswith("error: bad.txt: row 2")
    assert not (tmp_path / "s.json").exists()


def test_realtime_is_a_realtime_job(sacct):
    assert all(isinstance(j, RealtimeJob) for j in sacct.scenario.jobs if j.id.startswith("rt-"))
    assert not math.isnan(sacct.as_run["objective"])


# ---------------------------------------------------------------------------------------------
# Any job table imports into a valid scenario that every planner can plan legally

job_rows = st.lists(
    st.tuples(
        st.sampled_from(["sft", "eval", "awq", "serve", "x"]),
        st.sampled_from([0, 0.5, 1, 2, 3, 4, 6, 8, 12]),
        st.floats(-30, 30, allow_nan=False),  # submit, hours from the window start
        st.one_of(st.none(), st.floats(0, 5, allow_nan=False)),  # wait (None: never started)
        st.one_of(st.none(), st.floats(0, 20, allow_nan=False)),  # run (None: still running)
        st.one_of(st.none(), st.floats(0.1, 30, allow_nan=False)),  # time limit, hours
    ),
    max_size=25,
)


@settings(max_examples=examples(40), deadline=None)
@given(job_rows, st.sampled_from([None, 4, 16]))
def test_any_history_imports_and_plans_legally(rows, gpus):
    from core.formats.history import TraceInfo, empty_table, import_table

    table = empty_table(len(rows))
    t0 = 1_800_000_000.0
    for i, (name, g, submit, wait, run, limit) in enumerate(rows):
        start = None if wait is None else submit + wait
        end = None if start is None or run is None else start + run
        table.loc[i, ["job_id", "name"]] = [f"j{i}", name]
        table.loc[i, "gpus"] = g
        table.loc[i, "submit"] = t0 + submit * 3600
        table.loc[i, "start"] = np.nan if start is None else t0 + start * 3600
        table.loc[i, "end"] = np.nan if end is None else t0 + end * 3600
        table.loc[i, "time_limit"] = np.nan if limit is None else limit * 3600
    info = TraceInfo(name="random.txt", format="slurm", rows=len(rows))
    if not (table["gpus"] > 0).any():
        return
    window = ImportWindow(start="2027-01-15T08:00:00", gpus=gpus)
    stamps = table.loc[table["gpus"] > 0, ["submit", "start"]].to_numpy(dtype=float)
    if np.nanmin(stamps) >= t0 + 24 * 3600:  # every job came after the window
        with pytest.raises(ScenarioError, match="is outside the trace, which runs from"):
            import_table(table, info, window)
        return
    result = import_table(table, info, window)
    scenario = result.scenario
    b = result.summary["batch"]
    event(f"pinned {min(b['pinned'], 2)}, not pinned {min(b['not_pinned'], 1)}")
    assert b["jobs"] == len(scenario.batch_jobs)
    assert b["pinned"] == sum(j.running is not None for j in scenario.batch_jobs)
    # every row used or skipped, once; what ran of the serving demand is never more than it
    rows_seen = result.summary["rows"]
    assert rows_seen["used"] + sum(rows_seen["skipped"].values()) == rows_seen["total"] == len(rows)
    per_step = result.as_run["per_step"]
    served, wanted = np.array(per_step["realtime_gpus"]), np.array(per_step["realtime_demand"])
    assert (served <= wanted + 1e-9).all() and 0 <= result.as_run["rt_coverage"] <= 1
    demand = sum((np.array(j.demand) for j in scenario.realtime_jobs), np.zeros(len(wanted)))
    assert demand == pytest.approx(wanted, abs=1e-3)  # the planners' demand is as-run's
    for planner in ("fifo", "allocator"):
        assert check(scenario, solve(scenario, planner)) == []
    assert result.as_run["utilization"] >= 0
    assert result.as_run["completed_jobs"] <= result.as_run["started_jobs"] <= b["jobs"]


def test_uploaded_bytes_import_like_the_file():
    """The app hands over an upload's bytes and its name; the result is the file's."""
    window = ImportWindow(start="2026-08-17T00:00:00")
    for path in (SACCT, KUBECTL):
        from_bytes = import_history(path.read_bytes(), window=window, name=path.name)
        from_file = import_history(path, window=window)
        assert from_bytes.scenario == from_file.scenario
        assert from_bytes.summary["file"] == path.name
    with pytest.raises(ScenarioError, match="upload.txt: is not UTF-8"):
        import_history(b"JobID|Submit\n\xff", name="upload.txt")


def test_repeated_job_ids_are_made_unique_and_start_must_fit_the_trace():
    text = (
        "JobID|Submit|Start|End|AllocTRES\n"
        + "7|2026-08-17T01:00:00|2026-08-17T01:00:00|2026-08-17T02:00:00|gres/gpu=1\n" * 3
    )
    result = slurm.read_history(text, ImportWindow(start="2026-08-17T00:00:00"))
    assert [j.id for j in result.scenario.jobs] == ["7", "7#2", "7#3"]
    with pytest.raises(ScenarioError, match="calendar times"):
        slurm.read_history(text, ImportWindow(start=3360))


def test_demand_frame_for_the_preview_chart(sacct):
    from core.formats.history import demand_frame

    frame = demand_frame(sacct)
    assert list(frame.columns) == [
        "step",
        "time",
        "rt-infer",
        "rt-serving",
        "as_run_batch_gpus",
        "as_run_realtime_gpus",
    ]
    assert frame["time"].iloc[8] == pd.Timestamp("2026-08-17T08:00:00")
    assert frame["rt-serving"].iloc[8] == round(2 + 35 / 60, 4)  # 1071 wanted from 08:25
    assert frame["as_run_realtime_gpus"].sum() == pytest.approx(54.5)
    # what ran is the demand less the 5 minutes 1071 and 1080 each waited for a start
    wanted = frame["rt-infer"] + frame["rt-serving"]
    assert (frame["as_run_realtime_gpus"] <= wanted + 1e-3).all()
    assert wanted.sum() - frame["as_run_realtime_gpus"].sum() == pytest.approx(10 / 60, abs=1e-3)


def test_an_as_run_on_a_cluster_smaller_than_what_ran_says_so():
    from core.formats.history import format_summary

    whole = slurm.read_history(SACCT, ImportWindow(start="2026-08-17T00:00:00"))
    assert not whole.as_run["over_capacity_steps"]
    assert "see the note" not in format_summary(whole.summary, whole.as_run)
    small = slurm.read_history(SACCT, ImportWindow(start="2026-08-17T00:00:00", gpus=1))
    steps = small.as_run["over_capacity_steps"]
    assert steps > 0 and small.as_run["utilization"] > 1  # a share of too small a cluster
    text = format_summary(small.summary, small.as_run)
    assert "more GPUs than the cluster's 1: see the note" in text
    assert f"note: as-run holds more than 1 GPUs at {steps} step(s)" in text
