"""core.history_view (what the Workload page's history import shows) and the two charts it adds:
detection of every fixture, the upload limit, the default window, the counts table, the
as-run's tie to its workload, the demand chart and the grey as-run bars."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd
import pytest

from core import charts
from core.formats import MAX_UPLOAD_BYTES, load_scenario, scenario_to_json, scenario_to_tables
from core.formats.history import ImportWindow, demand_frame, import_history
from core.history_view import (
    as_run_applies,
    chart_frame,
    count_rows,
    default_window,
    dropped_jobs,
    preview,
    read_upload,
    realtime_rows,
)
from core.model import ScenarioError
from core.plan import metrics
from core.planners import solve
from tests.paths import ROOT, SCENARIOS_DIR

FIXTURES = Path(__file__).resolve().parent / "formats" / "fixtures"
SACCT = FIXTURES / "sacct_quirks.txt"
DAY = "2026-08-17T00:00:00"
OPENB_HEAD = "name,num_gpu,gpu_milli,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"


@pytest.fixture(scope="module")
def sacct_trace():
    return read_upload("sacct.txt", SACCT.read_bytes())


@pytest.mark.parametrize(
    "file, fmt",
    [
        ("sacct_quirks.txt", "slurm"),
        ("kubectl_pods.json", "kubectl"),
        ("helios_cluster_log.csv", "helios"),
        ("acme_trace.csv", "acme"),
    ],
)
def test_every_fixture_is_detected_from_its_content(file, fmt):
    # renamed, so only the content can tell the format
    trace = read_upload("upload.dat", (FIXTURES / file).read_bytes())
    assert trace.format == fmt and trace.name == "upload.dat"
    assert len(trace.table) > 0 and trace.label


def test_a_relative_trace_opens_in_hours_and_charts_in_hours():
    pods = (
        "a,1,1000,LS,Running,0,90000,0\n"  # 1 GPU from 0 h to 25 h
        "b,2,0,BE,Succeeded,86400,93600,90000\n"  # 2 GPUs from 25 h to 26 h
        "c,1,500,BE,Succeeded,86400,97200,86400\n"  # half a GPU from 24 h to 27 h
    )
    trace = read_upload("pods.csv", (OPENB_HEAD + pods).encode())
    assert trace.format == "openb"
    window = default_window(trace)
    assert window.relative
    assert window.start == 24.0  # median submit 86,400 s -> the day starting at 24 h
    assert (window.first, window.last) == ("0 h", "27 h")
    result = preview(trace, ImportWindow(start=window.start))
    frame = chart_frame(result, trace)
    assert list(frame["hours"][:3]) == [24.0, 24.25, 24.5]  # the default 15-minute steps
    assert frame["rt-LS"].iloc[3] == pytest.approx(1.0) and frame["rt-LS"].iloc[4] == 0


def test_the_default_window_is_the_importers_own(sacct_trace):
    window = default_window(sacct_trace)
    assert not window.relative
    assert window.start == DAY  # the day of the median submit time
    assert window.first == "2026-08-16T10:00:00"  # the earliest GPU job's submit
    assert window.span_hours > 24
    mine = preview(sacct_trace, ImportWindow(start=window.start))
    theirs = import_history(SACCT, name="sacct.txt")  # no --start: the importer picks it
    assert mine.scenario == theirs.scenario
    assert mine.summary["window"] == theirs.summary["window"]


def test_counts_table_carries_every_count_of_the_summary(sacct_trace):
    result = preview(sacct_trace, ImportWindow(start=DAY))
    summary = result.summary
    rows = dict(zip(count_rows(summary)["what"], count_rows(summary)["jobs"], strict=True))
    b = summary["batch"]
    by_type = {k.removeprefix("batch: "): n for k, n in rows.items() if k.startswith("batch: ")}
    assert by_type == b["by_type"] and sum(by_type.values()) == b["jobs"]
    assert rows["batch jobs in the window"] == len(result.scenario.batch_jobs)
    assert rows["    pinned on their GPUs"] == sum(
        j.running is not None for j in result.scenario.batch_jobs
    )
    assert rows["GPUs rounded up to a power of two"] == b["rounded_up"] == 3  # 3, 3 and 2+1 GPUs
    dropped = {k.removeprefix("dropped: "): n for k, n in rows.items() if k.startswith("dropped")}
    assert dropped == {k: n for k, n in summary["dropped"].items() if k != "job step rows"}
    assert dropped["no GPUs"] == 1  # the cpu partition's preprocess job
    # sacct's step rows (.batch .extern .0) are not jobs: listed apart, not counted as dropped
    assert rows["skipped (not jobs): job step rows"] == 3
    assert dropped_jobs(summary) == sum(dropped.values()) == 4


def test_counts_table_says_when_nothing_was_dropped(sacct_trace):
    summary = preview(sacct_trace, ImportWindow(start=DAY)).summary
    assert ("dropped", 0) in list(count_rows({**summary, "dropped": {}}).itertuples(index=False))


def test_realtime_rows_one_per_group(sacct_trace):
    result = preview(sacct_trace, ImportWindow(start=DAY))
    table = realtime_rows(result.summary)
    assert list(table["job"]) == [j.id for j in result.scenario.realtime_jobs]
    for job, gpu_hours in zip(result.scenario.realtime_jobs, table["GPU-hours"], strict=True):
        step_hours = result.scenario.cluster.step_hours
        assert gpu_hours == pytest.approx(sum(job.demand) * step_hours, abs=1e-2)


def test_uploads_above_the_app_limit_are_refused_with_file_and_limit(monkeypatch):
    from core import history_view

    monkeypatch.setattr(history_view, "MAX_HISTORY_UPLOAD_BYTES", 1000)  # (not 200 MB of bytes)
    with pytest.raises(ScenarioError) as e:
        read_upload("big.txt", b"x" * 1001)
    assert "big.txt" in str(e.value) and "limit of 200 MB for a history" in str(e.value)
    assert "gpuplan import" in str(e.value)


@pytest.mark.slow
def test_a_history_past_the_20_mb_of_a_scenario_upload_is_read_in_the_app(tmp_path):
    """A month of sacct is tens of MB: the app reads a history up to 200 MB, not the 20 MB it
    takes for a scenario or the CSV pair."""
    import subprocess
    import sys

    from core.formats import MAX_HISTORY_UPLOAD_BYTES

    export = tmp_path / "sacct.txt"
    made = subprocess.run(
        [sys.executable, ROOT / "scripts" / "make_sacct.py", "--jobs", "90000", "--out", export],
        capture_output=True,
        timeout=120,
    )
    assert made.returncode == 0
    data = export.read_bytes()
    assert MAX_UPLOAD_BYTES < len(data) < MAX_HISTORY_UPLOAD_BYTES
    trace = read_upload("sacct.txt", data)
    assert trace.format == "slurm" and trace.info.rows == 90000


def test_a_scenario_or_a_csv_pair_is_named_as_such():
    s = load_scenario(SCENARIOS_DIR / "example.json")
    jobs_csv, demand_csv = scenario_to_tables(s)
    for name, text in [("s.json", scenario_to_json(s)), ("jobs.csv", jobs_csv)]:
        with pytest.raises(ScenarioError, match=f"^{name}: is a gpuplan"):
            read_upload(name, text.encode())
    with pytest.raises(ScenarioError, match="^notes.txt: not a recognised history"):
        read_upload("notes.txt", b"hello\nworld\n")


SACCT_HEADER = (
    "JobIDRaw|JobID|JobName|User|Partition|QOS|Submit|Start|End|ElapsedRaw|State|AllocTRES"
)
SACCT_ROW = "1000|1000|sft|a|gpu|normal|2026-08-17T00:00:00|2026-08-17T00:00:00|2026-08-17T01:00:00|3600|COMPLETED|gres/gpu=1"  # noqa: E501
BAD_SACCT_CELLS = [
    # (field, the bad value put in row 3, what the message must also say)
    ("Submit", "yesterday", "not a time"),  # not a time
    ("End", "2026-08-16T00:00:00", "before"),  # ends before it starts
    ("AllocTRES", "gres/gpu=-2", "gres/gpu"),  # negative GPUs
]


@pytest.mark.parametrize("field, bad, says", BAD_SACCT_CELLS, ids=[r[0] for r in BAD_SACCT_CELLS])
def test_a_broken_history_names_file_row_and_field(field, bad, says):
    cells = SACCT_ROW.split("|")
    cells[SACCT_HEADER.split("|").index(field)] = bad
    text = "\n".join([SACCT_HEADER, SACCT_ROW, "|".join(cells)]) + "\n"
    with pytest.raises(ScenarioError) as e:
        read_upload("mine.txt", text.encode())
    message = str(e.value)
    assert message.startswith("mine.txt: row 3:"), message
    assert field in message and says in message, message


def test_a_window_that_does_not_fit_names_the_file(sacct_trace):
    with pytest.raises(ScenarioError, match="^sacct.txt: .*grid cells exceeds the limit"):
        preview(sacct_trace, ImportWindow(start=DAY, gpus=1 << 16, days=28, step_minutes=5))


def test_as_run_belongs_to_its_workload_not_to_its_policy(sacct_trace):
    imported = preview(sacct_trace, ImportWindow(start=DAY)).scenario
    assert as_run_applies(imported, imported)
    # Plan & compare's controls: policy and swap caps do not change what really ran
    tuned = imported.replace(policy=dataclasses.replace(imported.policy, decay=0.9))
    rt = imported.realtime_jobs[0]
    capped = imported.replace(
        jobs=tuple(dataclasses.replace(j, swap_cap=1) if j is rt else j for j in imported.jobs)
    )
    assert as_run_applies(imported, tuned) and as_run_applies(imported, capped)
    # an edited job, another window, another workload: the as-run no longer applies
    first = imported.batch_jobs[0]
    edited = imported.replace(
        jobs=tuple(dataclasses.replace(j, priority=9.5) if j is first else j for j in imported.jobs)
    )
    assert not as_run_applies(imported, edited)
    other = preview(sacct_trace, ImportWindow(start="2026-08-17T06:00:00")).scenario
    assert not as_run_applies(imported, other)
    assert not as_run_applies(imported, load_scenario(SCENARIOS_DIR / "example.json"))


def test_history_demand_figure_stacks_what_ran_under_the_cluster_size(sacct_trace):
    result = preview(sacct_trace, ImportWindow(start=DAY))
    frame = demand_frame(result)
    G = result.scenario.cluster.gpus
    fig = charts.history_demand_figure(frame, G)
    rt_ids = [j.id for j in result.scenario.realtime_jobs]
    stacked = [t for t in fig.data if t.stackgroup == "held"]
    assert [t.name for t in stacked] == [f"real-time demand: {i}" for i in rt_ids] + [
        "batch GPUs held (as run, blocks rounded up)"
    ]
    for trace, column in zip(stacked, [*rt_ids, "as_run_batch_gpus"], strict=True):
        assert list(trace.y) == list(frame[column])
    (cluster,) = [t for t in fig.data if t.name.startswith("cluster")]
    assert list(cluster.y) == [G, G]
    # 1071 and 1080 waited to start: the line of what was served shows the shortfall
    (served,) = [t for t in fig.data if t.name == "real-time served (as run)"]
    assert list(served.y) == list(frame["as_run_realtime_gpus"])
    # the stack's top is the groups' demand; what really ran of it is no more, and less only
    # where a service waited to be scheduled (1071 and 1080, 5 minutes each)
    wanted, held = frame[rt_ids].sum(axis=1), frame["as_run_realtime_gpus"]
    assert (held <= wanted + 1e-3).all()
    assert (wanted - held).sum() * result.scenario.cluster.step_hours == pytest.approx(
        10 / 60, abs=1e-2
    )
    assert fig.layout.yaxis.range[1] >= G


def test_as_run_bars_are_grey_and_last_and_leave_the_planners_alone(sacct_trace):
    result = preview(sacct_trace, ImportWindow(start=DAY))
    s = result.scenario
    values = {p: metrics(s, solve(s, p)) for p in ("allocator", "fifo")}
    util, value = charts.utilization_value_figure({**values, charts.AS_RUN: result.as_run}).data
    assert list(util.x) == ["fifo", "allocator", charts.AS_RUN]
    assert list(util.marker.color) == [
        charts.METRIC_COLOURS["utilization"],
        charts.METRIC_COLOURS["utilization"],
        charts.AS_RUN_COLOURS["utilization"],
    ]
    assert value.marker.color[-1] == charts.AS_RUN_COLOURS["value"]
    fifo = values["fifo"]
    assert util.y[2] == pytest.approx(result.as_run["utilization"] / fifo["utilization"] * 100)
    assert value.y[2] == pytest.approx(result.as_run["value"] / fifo["value"] * 100)
    assert util.text[2] == f"{result.as_run['utilization']:.1%}"


def test_history_demand_figure_sums_the_smaller_of_many_services():
    steps = 4
    frame = pd.DataFrame({"step": range(steps)})
    for k in range(10):  # services of 1..10 GPUs, every step
        frame[f"rt-app_{k}"] = float(k + 1)
    frame["as_run_batch_gpus"] = 0.0
    frame["as_run_realtime_gpus"] = frame[[f"rt-app_{k}" for k in range(10)]].sum(axis=1)
    fig = charts.history_demand_figure(frame, 64)
    stacked = [t for t in fig.data if t.stackgroup == "held"]
    names = [t.name.removeprefix("real-time demand: ") for t in stacked][:-1]
    # the five largest one by one, the other five summed (1 + 2 + 3 + 4 + 5 = 15 GPUs)
    assert names == ["rt-app_9", "rt-app_8", "rt-app_7", "rt-app_6", "rt-app_5", "5 other services"]
    assert list(stacked[5].y) == [15.0] * steps
    assert sum(t.y[0] for t in stacked) == 55.0  # every GPU wanted is still in the stack
    assert not [t for t in fig.data if t.name == "real-time served (as run)"]  # all served
