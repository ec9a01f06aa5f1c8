"""AppTest: every page opens cleanly, and the key flows show what `core` computes."""

from __future__ import annotations

import math
import re
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from core import views
from core.formats import load_scenario, scenario_to_json, scenario_to_tables
from core.plan import metrics
from core.planners import solve
from tests.paths import DATA_DIR, ROOT, SCENARIOS_DIR

APP = str(ROOT / "app.py")
PAGES = [
    "pages/workload.py",
    "pages/plan_compare.py",
    "pages/demand_forecast.py",
    "pages/horizon_risk.py",
    "pages/benchmarks.py",
]
SCENARIOS = SCENARIOS_DIR
DEFAULT = SCENARIOS / (
    "mixed-control.json" if (SCENARIOS / "mixed-control.json").exists() else "example.json"
)


def open_page(page: str | None = None, timeout: float = 60) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=timeout)
    at.run()
    if page:
        at.switch_page(page).run()
    return at


def active(at: AppTest):
    return at.session_state["scenario"]


def errors(at: AppTest) -> str:
    return "\n".join(e.value for e in at.error)


def uploader(at: AppTest):
    """The Workload page's file uploader (its key changes when a built-in empties it)."""
    return at.file_uploader(key=f"wl_upload_{at.session_state['uploader_version']}")


def metric_values(at: AppTest) -> list[tuple[str, str]]:
    return [(m.label, m.value) for m in at.metric]


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
def test_every_page_opens_without_exception(page):
    at = open_page(page, timeout=120)
    assert not at.exception, at.exception
    assert at.title[0].value  # a title ...
    assert at.caption[0].value  # ... and the one-line explanation under it


def test_workload_opens_on_the_default_scenario():
    at = open_page()
    expected = load_scenario(DEFAULT)
    assert active(at) == expected
    shown = dict(metric_values(at))
    assert shown["GPUs"] == str(expected.cluster.gpus)
    assert shown["Batch jobs"] == str(len(expected.batch_jobs))
    editor = at.data_editor(key=f"wl_jobs_{at.session_state['scenario_version']}")
    assert list(editor.value["id"]) == [j.id for j in expected.jobs]


def test_choosing_a_builtin_scenario_replaces_the_workload():
    at = open_page()
    at.selectbox(key="wl_builtin").set_value("example").run()
    assert not at.exception
    assert active(at) == load_scenario(SCENARIOS / "example.json")
    assert dict(metric_values(at))["Batch jobs"] == str(len(active(at).batch_jobs))


def test_editing_a_job_makes_a_new_valid_scenario():
    at = open_page()
    before = active(at)
    key = f"wl_jobs_{at.session_state['scenario_version']}"
    row = next(k for k, j in enumerate(before.jobs) if not j.is_realtime and j.running is None)
    at.session_state[key] = {
        "edited_rows": {row: {"priority": 9.5, "gpu_hours": 3}},
        "added_rows": [],
        "deleted_rows": [],
    }
    at.run()
    assert not at.exception
    after = active(at)
    assert after.jobs[row].priority == 9.5
    assert after.jobs[row].gpu_hours == 3
    assert after.jobs[:row] == before.jobs[:row]
    assert after.jobs[row + 1 :] == before.jobs[row + 1 :]
    assert not at.error


def test_an_invalid_edit_is_listed_by_row_and_the_last_valid_scenario_stays():
    at = open_page()
    before = active(at)
    key = f"wl_jobs_{at.session_state['scenario_version']}"
    row = next(k for k, j in enumerate(before.jobs) if not j.is_realtime)
    at.session_state[key] = {
        "edited_rows": {row: {"gpus_max": 3}},
        "added_rows": [],
        "deleted_rows": [],
    }
    at.run()
    assert not at.exception
    assert active(at) == before
    assert "not** active" in errors(at) or "not active" in errors(at).replace("*", "")
    issues = at.dataframe[-1].value  # the issues table under the editors
    assert list(issues["row"]) == [row + 1]
    assert list(issues["job"]) == [before.jobs[row].id]
    assert "gpus_max 3 is not a power of two" in issues["issue"].iloc[0]


def test_a_broken_upload_shows_the_error_and_changes_nothing():
    at = open_page()
    before = active(at)
    uploader(at).set_value(
        ("broken.json", b'{"cluster": {"gpus": 8}, "jobs": [', "application/json")
    ).run()
    assert not at.exception
    assert "broken.json" in errors(at) and "not valid JSON" in errors(at)
    assert active(at) == before


@pytest.mark.slow
def test_uploading_a_scenario_json_and_a_csv_pair():
    at = open_page()
    example = load_scenario(SCENARIOS / "example.json")
    uploader(at).set_value(
        ("mine.json", scenario_to_json(example).encode(), "application/json")
    ).run()
    assert not at.error
    assert active(at) == example

    jobs_csv, demand_csv = scenario_to_tables(example)
    edited = jobs_csv.replace("eval-batch,batch_inference,3", "eval-batch,batch_inference,7")
    uploader(at).set_value(
        [
            ("demand.csv", demand_csv.encode(), "text/csv"),
            ("jobs.csv", edited.encode(), "text/csv"),
        ]
    ).run()
    assert not at.exception and not at.error
    assert active(at).jobs[active(at).job_index("eval-batch")].priority == 7


def test_an_uploaded_pair_is_named_after_its_files_and_confirmed():
    at = open_page()
    host = active(at)
    jobs_csv, demand_csv = scenario_to_tables(load_scenario(SCENARIOS / "example.json"))
    uploader(at).set_value(
        [
            ("team-a_jobs.csv", jobs_csv.encode(), "text/csv"),
            ("team-a_demand.csv", demand_csv.encode(), "text/csv"),
        ]
    ).run()
    assert not at.exception and not at.error
    new = active(at)
    assert new.name == "team-a" and new.name != host.name
    assert "team-a_jobs.csv" in new.description and host.description != new.description
    assert any(f"Loaded {len(new.jobs)} jobs" in m.value for m in at.success)
    assert at.selectbox(key="wl_builtin").value is None  # no longer shows the old built-in
    sidebar = " ".join(m.value for m in at.sidebar.markdown)
    assert "team-a" in sidebar and host.name not in sidebar


def test_one_file_of_a_pair_waits_and_removing_files_clears_the_error():
    at = open_page()
    before = active(at)
    jobs_csv, _ = scenario_to_tables(before)
    uploader(at).set_value(("jobs.csv", jobs_csv.encode(), "text/csv")).run()
    assert not at.exception and not at.error  # waits for demand.csv instead of failing
    assert any("add demand.csv" in i.value for i in at.info)
    assert active(at) == before

    uploader(at).set_value([]).run()  # the file removed: nothing waits
    assert not at.info and not at.error and active(at) == before


@pytest.mark.slow
def test_a_refused_upload_leaves_the_uploader_and_keeps_its_error_until_the_next():
    at = open_page()
    before = active(at)
    version = at.session_state["uploader_version"]
    uploader(at).set_value(("broken.json", b"{", "application/json")).run()
    assert not at.exception and "broken.json" in errors(at) and "not valid JSON" in errors(at)
    assert "taken out of the uploader" in errors(at)
    assert at.session_state["uploader_version"] == version + 1  # a new, empty uploader
    assert uploader(at).value in (None, [])
    at.run()  # reruns (another widget, another page's visit) keep the error in view
    assert "broken.json" in errors(at) and active(at) == before

    # the next upload is read alone, not with the refused file: the pair loads
    example = load_scenario(SCENARIOS / "example.json")
    jobs_csv, demand_csv = scenario_to_tables(example)
    uploader(at).set_value(
        [
            ("jobs.csv", jobs_csv.encode(), "text/csv"),
            ("demand.csv", demand_csv.encode(), "text/csv"),
        ]
    ).run()
    assert not at.exception and not at.error
    assert [j.id for j in active(at).jobs] == [j.id for j in example.jobs]

    # one file of a pair after a refusal: the old error goes, the page waits for the other
    uploader(at).set_value(("broken.json", b"{", "application/json")).run()
    assert "broken.json" in errors(at)
    uploader(at).set_value(("jobs.csv", jobs_csv.encode(), "text/csv")).run()
    assert not at.error and any("add demand.csv" in i.value for i in at.info)


@pytest.mark.slow
def test_picking_a_builtin_empties_the_uploader_of_failed_files():
    at = open_page()
    uploader(at).set_value(("broken.json", b"{", "application/json")).run()
    assert "not valid JSON" in errors(at)
    version = at.session_state["uploader_version"]
    at.selectbox(key="wl_builtin").set_value("example").run()
    assert not at.exception and not at.error
    assert at.session_state["uploader_version"] == version + 1
    assert uploader(at).value in (None, [])
    assert active(at) == load_scenario(SCENARIOS / "example.json")


def test_builtins_list_example_and_the_benchmarks_first():
    from core.bench import BENCHMARKS

    at = open_page()
    options = at.selectbox(key="wl_builtin").options
    assert options[: 1 + len(BENCHMARKS)] == ["example", *BENCHMARKS]
    assert active(at).name == "mixed-control"  # still the default workload


def test_the_cluster_controls_change_the_workload():
    at = open_page()
    at.number_input(key="wl_cluster_gpus").set_value(16).run()
    assert not at.exception and active(at).cluster.gpus == 16
    at.number_input(key="wl_cluster_steps").set_value(48).run()
    s = active(at)
    assert s.cluster.horizon_steps == 48
    assert all(j.demand[24:] == j.demand[:24] for j in s.realtime_jobs)


@pytest.mark.slow
def test_plan_page_kpis_equal_core_metrics_for_fifo_and_allocator():
    at = open_page("pages/plan_compare.py")
    assert not at.exception
    scenario = active(at)
    plans = at.session_state["plans"]["plans"]
    assert {"fifo", "allocator"} <= set(plans)
    shown = metric_values(at)
    per_card = len(shown) // len(plans)
    cards = {  # label without its unit: "Value (weighted GPU-h)" -> "Value"
        name: {label.split(" (")[0]: v for label, v in shown[k * per_card : (k + 1) * per_card]}
        for k, name in enumerate(plans)
    }
    for name in ("fifo", "allocator"):
        expected = metrics(scenario, solve(scenario, name))
        assert plans[name].same_grid(solve(scenario, name))
        card = cards[name]
        assert card["Utilization"] == f"{expected['utilization']:.1%}"
        assert card["Value"] == f"{expected['value']:,.1f}"
        assert card["Objective"] == f"{expected['objective']:,.1f}"
        assert card["Completed jobs"] == f"{expected['completed_jobs']}/{expected['batch_jobs']}"
        assert card["Real-time coverage"] == f"{expected['rt_coverage']:.1%}"
    # Deltas are against fifo.
    fifo, alloc = (metrics(scenario, plans[n]) for n in ("fifo", "allocator"))
    deltas = [m.delta for m in at.metric if m.label.startswith("Utilization")]
    change = (alloc["utilization"] - fifo["utilization"]) * 100
    assert f"{change:+.1f} pp" in deltas or abs(change) < 1e-9
    assert len(at.get("plotly_chart")) >= 3  # utilization vs value + one grid per planner
    # Units on the face of the cards, and allocated told apart from utilized.
    labels = {m.label for m in at.metric}
    assert "Value (weighted GPU-h)" in labels
    assert any(label.startswith("Utilization (") for label in labels)
    assert any("Allocated" in c.value and "utilized" in c.value for c in at.caption)


@pytest.mark.slow
def test_policy_controls_change_the_scenario_and_the_plans():
    at = open_page("pages/plan_compare.py")
    at.slider(key="ctl_scn_penalty").set_value(5.0).run()
    at.slider(key="ctl_scn_decay").set_value(0.9).run()
    assert not at.exception
    policy = active(at).policy
    assert (policy.penalty_weight, policy.decay) == (5.0, 0.9)
    assert any("6.6 h" in c.value for c in at.caption)  # half-life of 0.9 per 60-min step
    scenario = active(at)
    plans = at.session_state["plans"]
    assert plans["scenario"] == scenario
    expected = metrics(scenario, solve(scenario, "allocator"))
    assert metrics(scenario, plans["plans"]["allocator"])["objective"] == expected["objective"]
    rt = scenario.realtime_jobs[0]
    at.number_input(key=f"ctl_scn_swap_{rt.id}").set_value(rt.swap_cap + 1).run()
    assert active(at).realtime_jobs[0].swap_cap == rt.swap_cap + 1
    # The policy travels with the scenario to the workload download.
    at.switch_page("pages/workload.py").run()
    assert "Penalty weight 5" in " ".join(c.value for c in at.caption)


@pytest.mark.slow
def test_full_planner_runs_on_request_with_bound_and_gap():
    at = open_page("pages/plan_compare.py")
    at.number_input(key="plan_time_limit").set_value(2).run()
    at.pills(key="plan_planners").set_value(["fifo", "allocator", "full"]).run()
    assert "full" not in at.session_state["plans"]["plans"]  # the MIP waits for the button
    at.button(key="plan_run").click().run(timeout=120)
    assert not at.exception
    plan = at.session_state["plans"]["plans"]["full"]
    scenario = active(at)
    full, alloc = metrics(scenario, plan), metrics(scenario, solve(scenario, "allocator"))
    assert full["objective"] >= alloc["objective"] - 1e-6
    assert "bound" in plan.stats and "status" in plan.stats
    assert any("bound" in c.value and "gap" in c.value for c in at.caption)
    shown = " ".join(c.value for c in at.caption)
    assert not re.search(r"\binf\b", shown)  # no 'bound inf · gap inf%'
    from core.planners import SolveStatus

    assert SolveStatus(plan.stats["status"]).words in shown  # the status in words


@pytest.mark.slow
def test_the_grids_can_be_coloured_by_job_type():
    at = open_page("pages/plan_compare.py")
    at.radio(key="plan_colour_by").set_value("type").run()
    assert not at.exception
    legend = " ".join(m.value for m in at.markdown if "inline-flex" in m.value)
    for job_type in {j.type for j in active(at).jobs}:
        assert job_type in legend
    assert active(at).jobs[0].id not in legend  # one chip per type, not per job


@pytest.mark.slow
def test_exports_offer_the_four_files_for_any_computed_plan():
    at = open_page("pages/plan_compare.py")
    labels = [b.label for b in at.get("download_button")]
    assert labels == [
        "grid.csv",
        "assignments.csv",
        "realtime.csv",
        "metrics.json",
        "summary.csv (all planners)",
    ]
    export = at.selectbox(key="plan_export")
    assert set(export.options) == {
        "FIFO (peak reservation)",
        "Backfill (conservative)",
        "Allocator (fast)",
    }
    export.set_value("allocator").run()
    assert not at.exception
    assert at.session_state["plan_export"] == "allocator"


# --- Demand forecast ---------------------------------------------------------------------------


@pytest.mark.slow
def test_forecast_into_the_scenario_demand():
    from core.forecast.demand import demand_quantile, forecast_series, load_history

    at = open_page("pages/demand_forecast.py", timeout=120)
    assert not at.exception
    before = active(at)
    job = before.realtime_jobs[0]
    at.button(key="fc_apply").click().run()
    assert not at.exception
    after = active(at)
    new = after.jobs[after.job_index(job.id)]
    # The demand is the 90% forecast quantile in GPUs, over the scenario's steps.
    history, _ = load_history(DATA_DIR / "histories" / "chat_requests_hourly.csv")
    capacity = next(n.value for n in at.number_input if n.key.startswith("fc_capacity_"))
    window = views.aligned_hours(history.index[-1], before)
    frame = forecast_series(history, window.horizon, 0.8).iloc[list(window.hours)]
    expected = [round(float(v), 3) for v in demand_quantile(frame, 0.9) / capacity]
    assert list(new.demand) == pytest.approx(expected, abs=1e-9)
    assert [j.id for j in after.jobs] == [j.id for j in before.jobs]
    assert any("now plans for the 90% forecast" in s.value for s in at.success)
    # The caption now says the plans were made for this forecast, and the button is spent.
    assert any("already plans for this 90% forecast" in c.value for c in at.caption)
    assert not any("not for this forecast" in c.value for c in at.caption)
    assert at.button(key="fc_apply").disabled
    # Leaving the page and coming back keeps what one GPU serves (its default would now be taken
    # from the new demand, and each apply would raise the demand again): still spent.
    at.switch_page("pages/workload.py").run()
    at.switch_page("pages/demand_forecast.py").run()
    assert not at.exception
    assert next(n.value for n in at.number_input if n.key.startswith("fc_capacity_")) == capacity
    assert at.button(key="fc_apply").disabled and active(at) == after
    assert any("the value it was put into the workload with" in c.value for c in at.caption)
    # The history comes along, in GPUs, ending on the weekday and hour before step 0 though the
    # sample ends weeks before the workload starts: the replay then forecasts from it.
    assert new.history and not views.jobs_without_history(after)
    assert window.hours[0] >= 168 and len(new.history) == 8 * 168  # (3 weeks before)
    drop = (-window.hours[0]) % 168
    kept = history.iloc[: len(history) - drop]
    assert (kept.index[-1] - pd.Timestamp(before.cluster.start)) % pd.Timedelta(weeks=1) == (
        pd.Timedelta(weeks=1) - pd.Timedelta(hours=1)
    )
    assert new.history[-1] == pytest.approx(round(kept.iloc[-1] / capacity, 3), abs=1e-12)


@pytest.mark.slow
def test_a_workload_with_its_own_history_forecasts_that_history_in_gpus():
    from core.forecast.demand import demand_quantile, forecast_series

    at = open_page()
    at.selectbox(key="wl_builtin").set_value("rolling-surge").run()
    at.switch_page("pages/demand_forecast.py").run()
    assert not at.exception
    before = active(at)
    own = [j.id for j in before.realtime_jobs if j.history]
    assert at.radio(key="fc_source").value == "A real-time job's history"  # the default here
    assert at.selectbox(key="fc_history_job").options == own
    job_id = own[-1]
    at.selectbox(key="fc_history_job").set_value(job_id).run()
    assert at.selectbox(key="fc_job_own").value == job_id
    assert not [n for n in at.number_input if n.key.startswith("fc_capacity_")]  # GPUs already
    assert any("one GPU serves one GPU of it" in c.value for c in at.caption)
    at.button(key="fc_apply").click().run()
    assert not at.exception
    after = active(at)
    new, old = after.jobs[after.job_index(job_id)], before.jobs[before.job_index(job_id)]
    history = views.history_series(before, job_id)
    assert history.index[-1] == pd.Timestamp(before.cluster.start) - pd.Timedelta(hours=1)
    window = views.aligned_hours(history.index[-1], before)
    assert window.hours[0] == 0  # the forecast starts where the history ends
    frame = forecast_series(history, window.horizon, 0.8).iloc[list(window.hours)]
    expected = [round(float(v), 3) for v in demand_quantile(frame, 0.9)]
    assert list(new.demand) == pytest.approx(expected, abs=1e-9)
    assert new.history == old.history  # its own history, kept whole


@pytest.mark.slow
def test_forecast_capacity_defaults_from_the_current_demand_not_gpus_max():
    from core.forecast.demand import load_history

    at = open_page("pages/demand_forecast.py", timeout=120)
    assert not at.exception
    job = active(at).realtime_jobs[0]
    history, _ = load_history(ROOT / "data" / "histories" / "chat_requests_hourly.csv")
    capacity = next(n for n in at.number_input if n.key.startswith("fc_capacity_"))
    assert capacity.value == views.default_capacity(history, job.demand)
    # One GPU serves the last week's mean traffic divided by the job's mean demand today ...
    recent = float(history.dropna().iloc[-168:].mean())
    assert recent / capacity.value == pytest.approx(np.mean(job.demand), rel=0.06)
    # ... and the page says where the default comes from.
    assert any("last week averages" in c.value for c in at.caption)
    # Only one quantile control on the page (no second look-alike 90% slider).
    assert [s.label for s in at.select_slider] == ["Plan for this quantile of demand"]


def test_a_broken_history_upload_shows_the_error_and_keeps_the_last_good_one():
    at = open_page("pages/demand_forecast.py", timeout=120)
    at.radio(key="fc_source").set_value("Upload a CSV").run()
    at.file_uploader(key="fc_upload").set_value(
        ("traffic.csv", b"timestamp,requests\nyesterday,12\nnoon,x\n", "text/csv")
    ).run()
    assert not at.exception
    assert "traffic.csv" in errors(at)
    assert "last good history" in errors(at)
    assert len(at.get("plotly_chart")) >= 1  # the sample keeps the page useful


def test_quantization_estimate_adds_a_job():
    from core.forecast.quantization import estimate_quantization

    at = open_page(timeout=120)  # the estimators live on the Workload page
    before = active(at)
    at.number_input(key="est_q_params").set_value(14.0)
    at.selectbox(key="est_q_algorithm").set_value("gptq")
    at.text_input(key="est_q_id").set_value("gptq-14b")
    at.button(key="est_q_estimate").click().run()
    assert not at.exception
    at.button(key="est_q_add").click().run()
    assert not at.exception
    after = active(at)
    assert len(after.jobs) == len(before.jobs) + 1
    job = after.jobs[-1]
    estimate = estimate_quantization(14.0, "gptq")
    assert (job.id, job.type, job.gpu_hours, job.gpus_min, job.gpus_max) == (
        "gptq-14b",
        "quantization",
        estimate.gpu_hours,
        estimate.gpus,
        estimate.gpus,
    )


# --- Horizon & risk ------------------------------------------------------------------------------


@pytest.mark.slow
def test_horizon_runs_the_rolling_simulation_and_shows_its_metrics():
    from core.plan import check

    at = open_page("pages/horizon_risk.py", timeout=180)
    assert not at.exception
    store = at.session_state["hz_results"]
    assert set(store["results"]) == {"fifo", "allocator"}
    shown = at.dataframe[0].value.set_index("metric")  # a row per metric, a column per planner
    assert list(shown.columns) == [
        "FIFO (peak reservation)",
        "Allocator (fast)",
        "what it measures",
    ]
    for label, result in zip(shown.columns, store["results"].values(), strict=False):
        assert not check(result.scenario, result.plan)  # the realised grid is legal
        m = result.metrics
        # Text with thousands separators: nothing a narrow column could clip to "14907.0".
        assert shown.at["utilization", label] == f"{m['utilization'] * 100:,.1f}%"
        assert shown.at["value", label] == f"{m['value']:,.1f}"
        assert shown.at["batch jobs done", label] == f"{m['completed_jobs']:,}/{m['batch_jobs']:,}"
    assert "," in shown.at["value", "Allocator (fast)"]  # rolling-surge's values run to thousands
    assert len(at.get("plotly_chart")) >= 4  # value chart, risk strip, stability, grid


@pytest.mark.slow
def test_horizon_burst_guard_replays_the_allocator_guarded():
    at = open_page("pages/horizon_risk.py", timeout=180)
    assert not at.exception
    guard = at.radio(key="hz_guard")
    assert guard.value == "auto" and guard.options == ["bursty only", "all", "off"]
    # rolling-surge's services are busy most hours: auto guards none, and says so
    assert at.session_state["hz_results"]["results"]["allocator"].metrics["burst_guarded"] == []
    assert any("no service bursty enough to guard" in c.value for c in at.caption)
    guard.set_value("on")
    at.button(key="hz_run").click().run(timeout=180)
    assert not at.exception
    store = at.session_state["hz_results"]
    assert store["params"][-1] == "on"
    allocator = store["results"]["allocator"].metrics
    assert allocator["burst_guarded"] == ["chat-api", "embed-api"]
    assert allocator["burst_guard_held_starts"] >= 0 and allocator["violations"] == 0
    assert "burst_guard_held_starts" not in store["results"]["fifo"].metrics  # fifo: no guard
    shown = at.dataframe[0].value.set_index("metric")
    assert (
        shown.at["starts held back", "Allocator (fast)"]
        == f"{allocator['burst_guard_held_starts']:,}"
    )
    assert shown.at["starts held back", "FIFO (peak reservation)"] == ""
    assert any("serving guarded against bursts: chat-api, embed-api" in c.value for c in at.caption)


@pytest.mark.slow
def test_horizon_idle_windows_total_counts_each_gpu_hour_once():
    from core import views
    from core.analysis import idle_windows

    at = open_page("pages/horizon_risk.py", timeout=180)
    assert at.select_slider(key="hz_min_gpus").options == ["1", "2", "4", "8", "16"]  # 16 GPUs
    at.select_slider(key="hz_min_gpus").set_value(1).run()
    at.number_input(key="hz_min_steps").set_value(1).run()
    assert not at.exception
    result = at.session_state["hz_results"]["results"][at.selectbox(key="hz_pick").value]
    windows = idle_windows(result.plan, 1, 1, step_minutes=result.scenario.cluster.step_minutes)
    union = views.idle_union_gpu_hours(windows, result.scenario.cluster.step_minutes)
    caption = next(c.value for c in at.caption if "windows covering" in c.value)
    assert f"{len(windows)} windows covering {union:,.0f} GPU-hours" in caption
    cells = int((result.plan.grid == -1).sum())
    assert union <= cells * result.scenario.cluster.step_minutes / 60  # never above what is idle
    if views.windows_overlap(windows):
        assert "counts each idle GPU-hour once" in caption


@pytest.mark.slow
def test_horizon_says_why_a_workload_without_history_replays_flat():
    from core.views import jobs_without_history

    at = open_page("pages/horizon_risk.py", timeout=180)
    flat = jobs_without_history(active(at))
    assert flat  # the default workload's real-time job has no history ...
    assert at.radio(key="hz_source").value == "rolling-surge"  # ... so it is not the default
    assert any("no demand history" in c.value for c in at.caption)
    at.radio(key="hz_source").set_value("active").run()
    assert any("flat forecast" in w.value for w in at.warning)


@pytest.mark.slow
def test_horizon_never_shows_another_workloads_replay():
    at = open_page("pages/horizon_risk.py", timeout=180)
    assert at.session_state["hz_results"]["params"][0].name == "rolling-surge"
    assert any(c.value.startswith("Replay of rolling-surge over 3 days") for c in at.caption)
    at.radio(key="hz_source").set_value("active").run()  # another workload: replayed at once
    assert not at.exception
    name = active(at).name
    store = at.session_state["hz_results"]
    assert store["params"][0] == active(at) and set(store["results"]) == {"fifo", "allocator"}
    assert all(r.source.name == name for r in store["results"].values())
    assert any(c.value.startswith(f"Replay of {name} over") for c in at.caption)
    assert not any("rolling-surge" in c.value for c in at.caption if "Replay of" in c.value)
    assert not any("settings changed" in i.value for i in at.info)
    at.select_slider(key="hz_replan").set_value(120).run()  # the same workload: kept, marked
    assert at.session_state["hz_results"]["params"][2] == 60
    changed = [i.value for i in at.info if f"below: {name} over" in i.value]
    assert len(changed) == 1 and changed[0].endswith("replay them.")  # quick: no time said
    at.pills(key="hz_planners").set_value(["fifo", "thorough"]).run()  # a long one: said
    changed = [i.value for i in at.info if f"below: {name} over" in i.value]
    assert len(changed) == 1 and "replay them (up to about " in changed[0]
    assert at.session_state["hz_results"]["params"][3] == ("fifo", "allocator")  # not run


@pytest.mark.slow
def test_horizon_waits_for_its_button_on_a_long_replay(monkeypatch):
    """A replay estimated to take long (`views.replay_estimate_s`; here past a threshold lowered
    to 0.5 s, which a 4,096-GPU day passes) runs only when asked; its info says why and how long,
    and no other workload's replay is shown meanwhile. A planner that searches at every re-plan
    is named as the reason."""
    from core.model import Cluster

    at = open_page("pages/horizon_risk.py", timeout=180)
    s = active(at)
    monkeypatch.setattr(views, "AUTO_REPLAY_SECONDS", 0.5)
    big = s.replace(name="big-import", cluster=Cluster(4096, 60, 24, s.cluster.start))
    assert views.replay_estimate_s(big, 1, 60, ["fifo", "allocator"]) > 0.5
    at.session_state["scenario"] = big
    at.radio(key="hz_source").set_value("active").run()
    assert not at.exception
    waiting = [i.value for i in at.info if "runs when you press **Run simulation**" in i.value]
    assert len(waiting) == 1 and "4,096 GPUs and" in waiting[0] and "about " in waiting[0]
    assert at.session_state["hz_results"]["params"][0].name == "rolling-surge"  # not replaced
    assert not any(c.value.startswith("Replay of") for c in at.caption)  # nor shown
    at.pills(key="hz_planners").set_value(["fifo", "thorough"]).run()
    waiting = [i.value for i in at.info if "runs when you press **Run simulation**" in i.value]
    assert len(waiting) == 1 and "may search up to 2 s at each re-plan: up to about" in waiting[0]
    at.pills(key="hz_planners").set_value(["fifo", "allocator"]).run()
    at.button(key="hz_run").click().run(timeout=300)
    assert not at.exception
    assert at.session_state["hz_results"]["params"][0] == big
    assert any(c.value.startswith("Replay of big-import over 1 day") for c in at.caption)


@pytest.mark.slow
def test_horizon_defaults_to_the_active_workload_when_it_has_a_history():
    import numpy as np

    at = open_page()
    s = active(at)
    jobs = tuple(
        replace(j, history=tuple(np.tile(j.demand, 7)))
        if j.id in {r.id for r in s.realtime_jobs}
        else j
        for j in s.jobs
    )
    at.session_state["scenario"] = s.replace(jobs=jobs)
    at.switch_page("pages/horizon_risk.py").run(timeout=180)
    assert not at.exception
    assert at.radio(key="hz_source").value == "active"
    assert not any("flat forecast" in w.value for w in at.warning)


# --- Benchmarks ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_benchmarks_table_matches_run_bench():
    from core.bench import BENCHMARKS, benchmark_paths, run_bench

    at = open_page("pages/benchmarks.py", timeout=180)
    assert not at.exception
    table = at.dataframe[0].value
    paths = benchmark_paths()
    assert len(table) == 3 * len(paths) and len(paths) <= len(BENCHMARKS)
    expected = run_bench(paths[:1], ["fifo", "backfill", "allocator"], repeat=1)
    for row in expected:
        mine = table[
            (table["scenario"] == row["scenario"]) & (table["planner"] == row["planner"])
        ].iloc[0]
        assert mine["utilization"] == pytest.approx(row["utilization"] * 100)
        assert mine["value"] == pytest.approx(row["value"])
        assert mine["proof"] == ""  # none of these proves a bound
    scale = table[(table["scenario"] == "scale-64") & (table["planner"] == "allocator")]
    if len(scale):
        assert scale["published"].iloc[0].startswith("util. 44.9% (=FIFO)")
    text = " ".join(m.value for m in at.markdown)
    assert "only FIFO" in text and "Fewer jobs done, more value" in text


def test_editing_real_time_demand_changes_only_that_step():
    at = open_page()
    before = active(at)
    job = before.realtime_jobs[0]
    key = f"wl_demand_{at.session_state['scenario_version']}"
    at.session_state[key] = {
        "edited_rows": {5: {job.id: 3.25}},
        "added_rows": [],
        "deleted_rows": [],
    }
    at.run()
    assert not at.exception and not at.error
    after = active(at).jobs[before.job_index(job.id)]
    expected = list(job.demand)
    expected[5] = 3.25
    assert list(after.demand) == expected


@pytest.mark.slow
def test_adding_and_deleting_rows_in_the_jobs_editor():
    at = open_page()
    before = active(at)
    key = f"wl_jobs_{at.session_state['scenario_version']}"
    new_batch = {
        "id": "new-job",
        "type": "training",
        "priority": 2,
        "gpus_min": 1,
        "gpus_max": 2,
        "gpu_hours": 4,
    }
    new_serving = {
        "id": "rt-new",
        "type": "realtime",
        "priority": 3,
        "gpus_min": 1,
        "gpus_max": 2,
        "swap_cap": 1,
    }
    gone = before.jobs[-1].id
    at.session_state[key] = {
        "edited_rows": {},
        "added_rows": [new_batch, new_serving],
        "deleted_rows": [len(before.jobs) - 1],
    }
    at.run()
    assert not at.exception and not at.error
    after = active(at)
    assert [j.id for j in after.jobs] == [j.id for j in before.jobs[:-1]] + ["new-job", "rt-new"]
    assert not after.has_job(gone)
    assert after.jobs[-2].gpu_hours == 4 and after.jobs[-2].sizes() == [1, 2]
    # A new real-time job starts at gpus_min for every step until its demand is edited.
    assert after.jobs[-1].demand == (1.0,) * after.cluster.horizon_steps

    key = f"wl_jobs_{at.session_state['scenario_version']}"
    at.session_state[key] = {
        "edited_rows": {},
        "added_rows": [{"id": "half-typed"}],
        "deleted_rows": [],
    }
    at.run()
    assert active(at) == after
    issues = at.dataframe[-1].value
    assert set(issues["job"]) == {"half-typed"} and issues["issue"].iloc[0].startswith("type")


def test_training_estimate_adds_a_job_sized_for_the_cluster():
    from core.forecast.training import default_training_model

    at = open_page(timeout=120)  # the estimators live on the Workload page
    before = active(at)
    at.selectbox(key="est_t_variant").set_value("lora_sft")
    at.number_input(key="est_t_params").set_value(13.0)
    at.text_input(key="est_t_id").set_value("lora-13b")
    at.button(key="est_t_estimate").click().run(timeout=180)
    assert not at.exception and not at.error
    at.button(key="est_t_add").click().run()
    after = active(at)
    run = {
        "variant": "lora_sft",
        "params_billion": 13.0,
        "train_tokens_billion": 1.0,
        "epochs": 1.0,
        "seq_len": 4096,
        "lora_rank": 16,
        "gpu_type": "H100",
        "gpu_memory_gb": 80.0,
        "precision": "bf16",
        "rollouts_per_prompt": 0,
        "generation_tokens": 0,
        "reward_model_billion": 0.0,
        "verifier_seconds": 0.0,
    }
    row = (
        default_training_model()
        .estimate(run)
        .job_row("lora-13b", 5.0, 0, max_gpus=before.cluster.gpus)
    )
    job = after.jobs[-1]
    assert len(after.jobs) == len(before.jobs) + 1
    assert (job.id, job.type, job.gpus_min, job.gpus_max, job.gpu_hours) == (
        row["id"],
        "training",
        row["gpus_min"],
        row["gpus_max"],
        row["gpu_hours"],
    )


def test_an_estimate_that_cannot_finish_in_the_horizon_is_warned_with_its_earliest_finish():
    from core.forecast.quantization import estimate_quantization

    at = open_page(timeout=120)
    s = active(at)
    at.number_input(key="est_q_params").set_value(405.0)  # a big model: many GPU-hours
    at.selectbox(key="est_q_algorithm").set_value("gptq")
    at.number_input(key="est_q_arrival").set_value(s.cluster.horizon_steps - 1)  # arrives last
    at.button(key="est_q_estimate").click().run()
    assert not at.exception
    q = estimate_quantization(405.0, "gptq")
    row = {"gpus_min": q.gpus, "gpus_max": q.gpus, "gpu_hours": q.gpu_hours}
    check = views.fit_check({**row, "arrival_step": s.cluster.horizon_steps - 1}, s.cluster)
    assert not check.fits
    warning = " ".join(w.value for w in at.warning)
    assert f"step {check.earliest_finish_step}" in warning
    assert "cannot complete" in warning or "never run" in warning


@pytest.mark.slow
def test_a_pair_that_does_not_fit_the_horizon_says_how_to_fix_it():
    at = open_page()
    before = active(at)
    longer = views.with_cluster(
        before, gpus=before.cluster.gpus, horizon_steps=48, step_minutes=60, start=None
    )
    jobs_csv, demand_csv = scenario_to_tables(longer)  # 48 steps of demand for a 24-step cluster
    uploader(at).set_value(
        [
            ("jobs.csv", jobs_csv.encode(), "text/csv"),
            ("demand.csv", demand_csv.encode(), "text/csv"),
        ]
    ).run()
    assert not at.exception
    shown = errors(at)
    assert "past the horizon" in shown
    assert "set the horizon under 'Cluster and horizon'" in shown
    assert active(at) == before


@pytest.mark.slow
def test_capacity_page_runs_a_small_sweep_on_dask_and_marks_the_smallest_size():
    import streamlit as st

    from core.sweep import SweepPoint, run_point

    try:
        at = open_page("pages/capacity.py", timeout=120)
        assert not at.exception, at.exception
        assert at.title[0].value == "Capacity"
        assert "Run sweep" in [b.label for b in at.button]
        at.text_input(key="ctl_scn_cap_gpus").set_value("8,16,24")
        at.text_input(key="ctl_scn_cap_demand").set_value("1")
        at.button(key="cap_run").click().run()
        assert not at.exception, at.exception
        assert not at.error, errors(at)
        rows = at.session_state["capacity_result"]["rows"]
        assert [(r["gpus"], r["planner"]) for r in rows] == [
            (g, p) for g in (8, 16, 24) for p in ("fifo", "allocator")
        ]
        scenario = load_scenario(DEFAULT)
        for row in rows:
            expected = run_point(scenario, SweepPoint(row["gpus"]), row["planner"])
            assert row["value"] == expected["value"] and row["error"] == ""
        sizes = at.dataframe[0].value  # the sizes table, then every run
        allocator = sizes[sizes["planner"] == "allocator"]["gpus"].tolist()
        assert allocator == ["24"]  # mixed-control: 16 GPUs complete 6/11 jobs, 24 complete 9
        # Targets in percent, as on Plan & compare: 98% coverage (16 GPUs serve 98.6%) and
        # half the jobs done (6/11; 8 GPUs complete 5) are met at 16 GPUs
        assert at.number_input(key="cap_coverage_pct").value == 99.0
        at.number_input(key="cap_coverage_pct").set_value(98.0).run()
        at.number_input(key="cap_completed_pct").set_value(50.0).run()
        sizes = at.dataframe[0].value
        assert sizes[sizes["planner"] == "allocator"]["gpus"].tolist() == ["16"]
        assert any("completed batch jobs >= 50% of all" in c.value for c in at.caption)
        # Bad input: one error, the last sweep stays.
        at.text_input(key="ctl_scn_cap_gpus").set_value("8,lots")
        at.button(key="cap_run").click().run()
        assert "GPUs: 'lots' is not a number" in errors(at)
        assert at.session_state["capacity_result"]["rows"] == rows
        assert any("run with other lists, planners or search limit" in i.value for i in at.info)
    finally:
        st.cache_resource.clear()  # closes the page's Dask client and its LocalCluster


@pytest.mark.slow
def test_capacity_says_when_no_cluster_size_meets_a_target():
    """At 1.5x demand chat-api wants 6.375 GPUs at its peak but may hold 5 (gpus_max): coverage
    stops at 91.44% on any cluster, so the sizes table says 'none at any size' and a warning
    names the job; at 1x the targets are only missed up to the largest size swept."""
    import streamlit as st

    try:
        at = open_page("pages/capacity.py", timeout=120)
        at.text_input(key="ctl_scn_cap_gpus").set_value("8,16")
        at.text_input(key="ctl_scn_cap_demand").set_value("1,1.5")
        at.button(key="cap_run").click().run(timeout=120)
        assert not at.exception and not at.error, errors(at)
        sizes = at.dataframe[0].value
        by_scale = dict(zip(sizes["demand_scale"], sizes["gpus"], strict=False))
        assert set(sizes[sizes["demand_scale"] == 1.5]["gpus"]) == {"none at any size"}
        assert by_scale[1.0] == "none up to 16"  # 16 GPUs complete 6/11 (< 80%)
        [warning] = [w.value for w in at.warning if "any number of GPUs" in w.value]
        assert warning.startswith("**Demand x1.5, work x1:** No cluster size reaches 99%")
        assert "at most 91.44%" in warning
        assert "chat-api: demand above gpus_max 5 at 7 steps of 24 (peak 6.375)" in warning
        assert "More GPUs do not help: raise those services' gpus_max (or swap_cap)" in warning
    finally:
        st.cache_resource.clear()  # closes the page's Dask client and its LocalCluster


@pytest.mark.slow
def test_capacity_passes_its_search_limit_to_the_planners_that_take_one(monkeypatch):
    """The limit is the page's, not a fixed 5 s: it reaches thorough and full (and only they
    take it), is greyed out while no chosen planner searches, and a changed limit marks the
    last sweep as run with other settings."""
    import streamlit as st

    from core import sweep

    calls = []
    real = sweep.run_sweep

    def recording(client, s, points, planners, options=None, progress=None):
        calls.append(dict(options or {}))
        return real(client, s, points, planners, options=options, progress=progress)

    monkeypatch.setattr(sweep, "run_sweep", recording)
    try:
        at = open_page("pages/capacity.py", timeout=120)
        assert at.number_input(key="cap_time_limit").disabled  # FIFO and the allocator
        at.text_input(key="ctl_scn_cap_gpus").set_value("8")
        at.text_input(key="ctl_scn_cap_demand").set_value("1")
        at.pills(key="cap_planners").set_value(["fifo", "thorough", "full"]).run()
        assert not at.number_input(key="cap_time_limit").disabled
        at.number_input(key="cap_time_limit").set_value(2).run()
        at.button(key="cap_run").click().run(timeout=120)
        assert not at.exception and not at.error, errors(at)
        assert calls == [{"fifo": {}, "thorough": {"time_limit": 2.0}, "full": {"time_limit": 2.0}}]
        rows = at.session_state["capacity_result"]["rows"]
        assert [r["planner"] for r in rows] == ["fifo", "thorough", "full"]
        assert all(r["error"] == "" for r in rows)
        assert not any("search limit" in i.value for i in at.info)
        at.number_input(key="cap_time_limit").set_value(3).run()
        assert any("other lists, planners or search limit" in i.value for i in at.info)
    finally:
        st.cache_resource.clear()  # closes the page's Dask client and its LocalCluster


@pytest.mark.slow
def test_capacity_lists_survive_other_pages_and_follow_a_new_workload():
    at = open_page("pages/capacity.py")
    at.text_input(key="ctl_scn_cap_gpus").set_value("16,24,32,48").run()
    at.text_input(key="ctl_scn_cap_penalty").set_value("5,10").run()
    at.switch_page("pages/benchmarks.py").run()
    at.switch_page("pages/capacity.py").run()
    assert not at.exception
    assert at.text_input(key="ctl_scn_cap_gpus").value == "16,24,32,48"
    assert at.text_input(key="ctl_scn_cap_penalty").value == "5,10"
    at.switch_page("pages/workload.py").run()
    at.selectbox(key="wl_builtin").set_value("scale-64").run()
    at.switch_page("pages/capacity.py").run()  # another workload: its own defaults again
    assert at.text_input(key="ctl_scn_cap_gpus").value == "32,64,128,192,256"
    assert at.text_input(key="ctl_scn_cap_penalty").value == f"{active(at).policy.penalty_weight:g}"


@pytest.mark.slow
def test_the_forecast_page_shows_what_the_forecaster_did():
    from core.forecast.demand import forecast_series, load_history

    at = open_page("pages/demand_forecast.py", timeout=120)
    assert not at.exception
    (expander,) = [e for e in at.expander if e.label.startswith("How the forecast was made")]
    shown = "\n".join(m.value for m in expander.markdown)
    history, _ = load_history(ROOT / "data" / "histories" / "chat_requests_hourly.csv")
    _, report = forecast_series(history, 48, 0.9, report=True)
    assert report.members and all(member in shown for member in report.members)


def test_the_solver_summary_says_the_most_coverage_where_no_plan_reaches_the_target():
    from pages import common

    stats = {"status": "slo_infeasible", "bound": 12.5, "gap": 0.0, "most_coverage": 2 / 3}
    proved = common.solver_summary({**stats, "most_coverage_proved": True})
    assert proved == (
        "coverage target cannot be met (proved), most coverage kept · 66.7% is the most any "
        "plan reaches (proved) · bound 12.5 · gap 0.00%"
    )
    found = common.solver_summary({**stats, "most_coverage_proved": False, "bound": math.inf})
    assert "66.7% is the most found (not proved" in found and "bound" not in found
    assert "the most" not in common.solver_summary({"status": "optimal", "bound": 1.0})


def test_the_solver_summary_says_why_full_did_not_solve():
    from pages import common

    message = (
        "not solved: only 1.64 s of the 3 s time limit were left, too little to build the "
        "model (54,456 terms); the allocator's plan is returned"
    )
    said = common.solver_summary({"status": "time_limit_warm_start", "message": message})
    assert said == (
        "Not solved: only 1.64 s of the 3 s time limit were left, too little to build the model "
        "(54,456 terms); the allocator's plan is returned; no bound was computed. Raise the time "
        "limit to solve it."
    )
    unavailable = {"status": "unavailable", "message": "not solved: HiGHS is not installed"}
    assert common.solver_summary(unavailable).endswith("no bound was computed.")
    assert common.solver_summary({"status": "too_large"}).endswith(": no bound was computed")
