"""AppTest of the Saved page on a real workspace file: save, survive a new session, compare."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from core.formats import load_scenario
from core.workspace import Workspace
from tests.paths import ROOT, SCENARIOS_DIR

APP = str(ROOT / "app.py")


@pytest.fixture
def workspace_file(tmp_path, monkeypatch):
    path = tmp_path / "workspace.sqlite"
    monkeypatch.setenv("GPUPLAN_WORKSPACE", str(path))
    return path


def saved_page() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page("pages/saved.py").run()
    assert not at.exception, at.exception
    return at


@pytest.mark.slow
def test_a_saved_workload_is_there_in_a_new_session_and_opens(workspace_file):
    at = saved_page()
    assert any("Nothing saved yet" in i.value for i in at.info)
    at.text_input(key=f"saved_name_{at.session_state['scenario_version']}").set_value(
        "my cluster day"
    ).run()
    at.button(key="saved_save").click().run()
    assert not at.exception and any("my cluster day" in s.value for s in at.success)
    assert [x.name for x in Workspace(workspace_file).scenarios()] == ["my cluster day"]

    fresh = saved_page()  # a reload: a new session on the same workspace file
    assert fresh.selectbox(key="saved_pick").options == ["my cluster day"]
    fresh.selectbox(key="saved_pick").set_value("my cluster day")
    fresh.button(key="saved_open").click().run()
    assert not fresh.exception
    assert fresh.session_state["scenario_source"] == "saved: my cluster day"
    assert fresh.session_state["scenario"].name == "my cluster day"  # reopens as saved


@pytest.mark.slow
def test_a_workload_saved_under_a_name_takes_it_and_keeps_its_runs(workspace_file):
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page("pages/plan_compare.py").run()  # plans fifo, backfill and the allocator
    at.switch_page("pages/saved.py").run()
    before = at.session_state["scenario"]
    plans = dict(at.session_state["plans"]["plans"])
    at.text_input(key=f"saved_name_{at.session_state['scenario_version']}").set_value("day 140")
    at.button(key="saved_save_runs").click().run()
    assert not at.exception and any("day 140" in s.value for s in at.success)
    now = at.session_state["scenario"]
    assert now.name == "day 140" and now == before.replace(name="day 140")
    assert at.session_state["plans"]["plans"].keys() == plans.keys()  # no plan made again
    ws = Workspace(workspace_file)
    assert ws.load_scenario("day 140") == now
    runs = len(ws.runs("day 140"))
    assert runs >= 2
    at.button(key="saved_save").click().run()  # saved again as it is: the same, runs kept
    assert len(Workspace(workspace_file).runs("day 140")) == runs
    assert "day 140" in " ".join(m.value for m in at.sidebar.markdown)


@pytest.mark.slow
def test_runs_saved_from_the_session_can_be_compared(workspace_file):
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page("pages/plan_compare.py").run()  # plans fifo, backfill and the allocator
    at.switch_page("pages/saved.py").run()
    at.button(key="saved_save_runs").click().run()
    assert not at.exception
    ws = Workspace(workspace_file)
    assert {r.planner for r in ws.runs()} >= {"fifo", "allocator"}
    at.run()
    assert at.selectbox(key="saved_run_a") is not None
    (table,) = [d.value for d in at.dataframe if d.value.columns.tolist()[:1] == [""]]
    assert table.columns.tolist() == ["", "A", "B", "B - A"]
    assert table[""].tolist()[:5] == [
        "workload",
        "cluster",
        "penalty weight",
        "reward decay",
        "coverage target",
    ]
    expected = load_scenario(SCENARIOS_DIR / "mixed-control.json")
    assert ws.load_scenario(expected.name) == expected


@pytest.mark.slow
def test_two_policies_of_the_same_jobs_compare_job_by_job(workspace_file):
    """A policy what-if saved under another name keeps the per-job table (same jobs, cluster)."""
    from dataclasses import replace

    from core.planners import solve

    mixed = load_scenario(SCENARIOS_DIR / "mixed-control.json")
    cheaper = mixed.replace(name="mc-pen6", policy=replace(mixed.policy, penalty_weight=6.0))
    ws = Workspace(workspace_file)
    for scenario in (mixed, cheaper):
        ws.save_scenario(scenario.name, scenario)
        ws.save_run(scenario.name, scenario, solve(scenario, "allocator"))
    at = saved_page()
    tables = [d.value for d in at.dataframe]
    per_job = [t for t in tables if "job" in t.columns]
    assert len(per_job) == 1 and len(per_job[0]) == len(mixed.batch_jobs)
    assert {"A: start", "B: start"} <= set(per_job[0].columns)
    assert any("the policies differ" in c.value for c in at.caption)
    other = mixed.replace(name="fewer", jobs=mixed.jobs[:-1])  # other jobs: no per-job table
    ws.save_scenario(other.name, other)
    ws.save_run(other.name, other, solve(other, "allocator"))
    at = saved_page()
    at.selectbox(key="saved_run_b").set_value(ws.runs("fewer")[0].id).run()
    assert not any("job" in d.value.columns for d in at.dataframe)
    said = [c.value for c in at.caption if "different jobs or clusters" in c.value]
    assert len(said) == 1 and said[0].endswith(f"A vs B: only in A: 1 job ({mixed.jobs[-1].id}).")


def test_an_unusable_workspace_is_a_message_and_keeps_the_workload(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("GPUPLAN_WORKSPACE", str(blocker / "ws.sqlite"))
    at = saved_page()
    assert any("cannot be used" in e.value for e in at.error)
    assert at.session_state["scenario"].name == "mixed-control"


def test_the_workload_page_lists_saved_workloads_and_opens_one(workspace_file):
    Workspace(workspace_file).save_scenario(
        "kept", load_scenario(ROOT / "data" / "scenarios" / "example.json")
    )
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    assert not at.exception
    (expander,) = [e for e in at.expander if e.label.startswith("Saved workloads")]
    assert expander.label == "Saved workloads (1)"
    at.button(key="wl_saved_open_0").click().run()
    assert not at.exception
    assert at.session_state["scenario_source"] == "saved: kept"
    assert at.session_state["scenario"].name == "example"
