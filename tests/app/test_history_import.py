"""AppTest: a scheduler history through the Workload page into Plan & compare's as-run card."""

from __future__ import annotations

import dataclasses

import pytest
from streamlit.testing.v1 import AppTest

from core.formats.history import ImportWindow, import_history
from core.plan import metrics
from core.planners import solve
from tests.paths import ROOT

APP = str(ROOT / "app.py")
SACCT = ROOT / "tests" / "formats" / "fixtures" / "sacct_quirks.txt"
DAY = "2026-08-17T00:00:00"  # the fixture's default window: the day of its median submit


def open_app() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=90)
    at.run()
    return at


def upload(at: AppTest, name: str, data: bytes) -> AppTest:
    at.session_state["hi_open"] = True  # what opening the expander does
    at.run()
    at.file_uploader(key="hi_upload").set_value((name, data, "text/plain")).run()
    assert not at.exception, at.exception
    return at


def shown_metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


@pytest.fixture(scope="module")
def expected():
    return import_history(SACCT, window=ImportWindow(start=DAY), name="sacct.txt")


@pytest.mark.slow
def test_the_preview_shows_the_mapping_before_anything_is_loaded(expected):
    at = open_app()
    before = at.session_state["scenario"]
    upload(at, "sacct.txt", SACCT.read_bytes())
    assert not at.error
    assert at.session_state["scenario"] == before  # a preview changes nothing yet
    b, w = expected.summary["batch"], expected.summary["window"]
    shown = shown_metrics(at)
    assert shown["Cluster GPUs"] == f"{w['gpus']:,}"
    assert shown["Batch jobs"] == str(b["jobs"])
    assert shown["Running at start"] == str(b["running_at_start"])
    assert shown["Rounded up"] == str(b["rounded_up"])
    assert shown["Jobs dropped"] == "4"  # no GPUs, cancelled, 0 s, 64 GPUs (not the step rows)
    assert shown["Real-time groups"] == str(len(expected.summary["realtime"]))
    counts = at.dataframe[0].value  # the counts table, then the real-time groups
    rows = dict(zip(counts["what"], counts["jobs"], strict=True))
    assert rows["batch: training"] == b["by_type"]["training"]
    assert rows["skipped (not jobs): job step rows"] == 3
    assert list(at.dataframe[1].value["job"]) == [j.id for j in expected.scenario.realtime_jobs]
    assert at.text_input[0].value == DAY  # the window opens on the importer's default
    gpus = [n for n in at.number_input if n.label == "GPUs"][0]
    assert gpus.value is None and f"default {w['gpus']}" in gpus.proto.placeholder


@pytest.mark.slow
def test_load_then_plan_and_compare_shows_the_as_run_card(expected):
    at = upload(open_app(), "sacct.txt", SACCT.read_bytes())
    at.button(key="hi_load").click().run()
    assert not at.exception and not at.error
    assert at.session_state["scenario"] == expected.scenario
    assert at.session_state["scenario_source"].startswith("history: sacct.txt")
    assert at.session_state["history_as_run"]["as_run"] == expected.as_run

    at.switch_page("pages/plan_compare.py").run()
    assert not at.exception and not at.error
    s = expected.scenario
    assert at.session_state["scenario"] == s  # the page's editor round trip kept it intact
    as_run = expected.as_run
    card = [m for m in at.metric if m.label == "Utilization (of GPU-h)"]
    fifo = metrics(s, solve(s, "fifo"))
    allocator = metrics(s, solve(s, "allocator"))
    # planners' cards first (FIFO, backfill, allocator), the as-run card last
    assert card[0].value == f"{fifo['utilization']:.1%}"
    assert card[-1].value == f"{as_run['utilization']:.1%}"
    values = [m.value for m in at.metric if m.label == "Value (weighted GPU-h)"]
    completed = [m.value for m in at.metric if m.label == "Completed jobs"]
    assert values[-1] == f"{as_run['value']:,.1f}"
    assert completed[-1] == f"{as_run['completed_jobs']}/{as_run['batch_jobs']}"
    assert [m.value for m in at.metric if m.label == "Objective (weighted GPU-h)"][-1] == (
        f"{as_run['objective']:,.1f}"
    )
    captions = "\n".join(c.value for c in at.caption)
    assert "not a legal grid" in captions
    gain = (allocator["utilization"] - as_run["utilization"]) * 100
    markdown = "\n".join(m.value for m in at.markdown)
    assert "**As run (your scheduler)**" in markdown
    assert f"**Allocator (fast)**: {gain:+.1f} pp utilization" in markdown

    # the policy is Plan & compare's: the as-run stays, only its objective (decay) goes
    at.slider(key="ctl_scn_decay").set_value(0.9).run()
    assert not at.exception
    assert at.session_state["scenario"].policy.decay == 0.9
    assert [m.value for m in at.metric if m.label == "Utilization (of GPU-h)"][-1] == (
        f"{as_run['utilization']:.1%}"
    )
    assert [m.value for m in at.metric if m.label == "Objective (weighted GPU-h)"][-1] == "—"


@pytest.mark.slow
def test_an_edit_drops_the_as_run():
    at = upload(open_app(), "sacct.txt", SACCT.read_bytes())
    at.button(key="hi_load").click().run()
    s = at.session_state["scenario"]
    first = s.batch_jobs[0]
    edited = s.replace(
        jobs=tuple(dataclasses.replace(j, priority=9.5) if j is first else j for j in s.jobs)
    )
    at.session_state["scenario"] = edited  # what a valid editor edit does
    at.switch_page("pages/plan_compare.py").run()
    assert not at.exception
    assert "history_as_run" not in at.session_state
    assert "As run (your scheduler)" not in "\n".join(m.value for m in at.markdown)


def test_a_broken_history_keeps_the_scenario_and_names_file_row_and_field():
    at = open_app()
    before = at.session_state["scenario"]
    lines = SACCT.read_text().splitlines()
    lines[2] = lines[2].replace("2026-08-16T11:00:00", "sometime", 1)  # job 1070's Submit
    upload(at, "broken.txt", ("\n".join(lines) + "\n").encode())
    message = "\n".join(e.value for e in at.error)
    assert "broken.txt" in message and "row 3" in message and "Submit" in message
    assert "active workload is unchanged" in message
    assert at.session_state["scenario"] == before
    assert [b for b in at.button if b.key == "hi_load"] == []  # nothing to load


@pytest.mark.slow
@pytest.mark.parametrize("keep", ["header", "no gpus"])
def test_a_history_with_no_gpu_job_is_refused_and_the_page_goes_on(keep):
    """A header-only export, or a CPU partition's (no gres/gpu anywhere), raised from the
    default window, outside the read's message: a traceback, and the page below it was gone."""
    at = open_app()
    before = at.session_state["scenario"]
    lines = SACCT.read_text().splitlines()
    if keep == "header":
        lines = lines[:1]
    else:
        lines = [line.replace("gres/gpu", "gres/nic") for line in lines]
    upload(at, "cpu.txt", ("\n".join(lines) + "\n").encode())
    message = "\n".join(e.value for e in at.error)
    assert "active workload is unchanged" in message
    assert "cpu.txt: no job with GPUs in the file" in message
    assert at.session_state["scenario"] == before
    assert [b for b in at.button if b.key == "hi_load"] == []  # nothing to load
    assert "Download the workload" in [h.value for h in at.subheader]  # the page goes on


def test_a_history_above_the_upload_limit_is_refused(monkeypatch):
    from core import history_view

    # (the app's 200 MB for a history, as 1 MB: the same check without 200 MB of bytes)
    monkeypatch.setattr(history_view, "MAX_HISTORY_UPLOAD_MB", 1)
    monkeypatch.setattr(history_view, "MAX_HISTORY_UPLOAD_BYTES", 1024 * 1024)
    at = open_app()
    before = at.session_state["scenario"]
    upload(at, "huge.txt", b"x" * (1024 * 1024 + 1))
    message = "\n".join(e.value for e in at.error)
    assert "huge.txt" in message and "limit of 1 MB for a history" in message
    assert "gpuplan import" in message
    assert at.session_state["scenario"] == before


def test_the_closed_import_reads_nothing_and_draws_no_uploader():
    at = open_app()
    assert not at.exception
    assert [e.label for e in at.expander if e.label.startswith("Import a scheduler history")]
    assert "hi_upload" not in [u.key for u in at.file_uploader]  # lazy until opened


@pytest.mark.slow
def test_another_workload_drops_the_as_run():
    at = upload(open_app(), "sacct.txt", SACCT.read_bytes())
    at.button(key="hi_load").click().run()
    assert "history_as_run" in at.session_state
    at.selectbox(key="wl_builtin").set_value("example").run()
    assert at.session_state["scenario_source"] == "built-in: example"
    at.switch_page("pages/plan_compare.py").run()
    assert not at.exception
    assert "history_as_run" not in at.session_state
    assert "As run (your scheduler)" not in "\n".join(m.value for m in at.markdown)
    assert (
        len([m for m in at.metric if m.label == "Utilization (of GPU-h)"]) == 3
    )  # the planners only


@pytest.mark.slow
def test_fifo_the_allocator_and_full_plan_the_imported_window_beside_the_as_run(expected):
    at = upload(open_app(), "sacct.txt", SACCT.read_bytes())
    at.button(key="hi_load").click().run()
    at.switch_page("pages/plan_compare.py").run()
    at.pills(key="plan_planners").set_value(["fifo", "allocator", "full"]).run()
    at.number_input(key="plan_time_limit").set_value(5).run()
    at.button(key="plan_run").click().run()
    assert not at.exception and not at.error
    plans = at.session_state["plans"]["plans"]
    assert {"fifo", "allocator", "full"} <= set(plans)
    s = expected.scenario
    full = metrics(s, plans["full"])
    assert full["objective"] >= metrics(s, solve(s, "allocator"))["objective"] - 1e-6
    utilization = [m.value for m in at.metric if m.label == "Utilization (of GPU-h)"]
    # one card per planner, then the as-run card last
    assert len(utilization) == 4
    assert utilization[-1] == f"{expected.as_run['utilization']:.1%}"
    assert utilization[2] == f"{full['utilization']:.1%}"
