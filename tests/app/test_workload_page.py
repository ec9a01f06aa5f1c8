"""AppTest: the Workload page's editors, cluster controls and uploads as a planner uses them."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from tests.app.test_pages import active, errors, open_page, uploader


def editor_key(at, kind: str = "jobs") -> str:
    return f"wl_{kind}_{at.session_state['scenario_version']}"


def number_columns(at, key: str) -> dict[str, dict]:
    """The type config of each number column of a data editor, by column."""
    config = json.loads(at.data_editor(key=key).proto.columns)
    return {
        column: c["type_config"]
        for column, c in config.items()
        if c.get("type_config", {}).get("type") == "number"
    }


def test_no_editor_number_column_has_a_minimum():
    # The browser's grid drops a typed minus sign in a column with min_value >= 0, so -5 was
    # stored as 5 and "valid": every number must reach validation as typed.
    at = open_page()
    for kind in ("jobs", "demand"):
        columns = number_columns(at, editor_key(at, kind))
        assert columns, kind
        assert {c: t["min_value"] for c, t in columns.items() if "min_value" in t} == {}, kind


def test_no_editor_column_is_required():
    # The browser's grid holds back a new row while a required cell (id, type) is empty, then
    # drops it without a word when another edit redraws the editor: every row must reach
    # validation, which names the row and each empty cell.
    at = open_page()
    config = json.loads(at.data_editor(key=editor_key(at)).proto.columns)
    assert {column for column, c in config.items() if c.get("required")} == set()


def test_a_negative_gpu_hours_is_named_by_row_job_and_field():
    at = open_page()
    before = active(at)
    row = next(k for k, j in enumerate(before.jobs) if not j.is_realtime and j.running is None)
    at.session_state[editor_key(at)] = {
        "edited_rows": {row: {"gpu_hours": -5}},
        "added_rows": [],
        "deleted_rows": [],
    }
    at.run()
    assert not at.exception and active(at) == before
    assert "not active" in errors(at).replace("*", "")
    issues = at.dataframe[-1].value
    assert list(issues["row"]) == [row + 1] and list(issues["job"]) == [before.jobs[row].id]
    assert issues["issue"].iloc[0] == "gpu_hours must be > 0, got -5.0"


def test_a_half_typed_new_row_names_its_row_and_each_empty_cell():
    # A new row whose type was not chosen yet said "type None is not one of ...".
    at = open_page()
    before = active(at)
    at.session_state[editor_key(at)] = {
        "edited_rows": {},
        "added_rows": [{"id": "sft-new", "priority": 3}, {"type": "realtime"}],
        "deleted_rows": [],
    }
    at.run()
    assert not at.exception and active(at) == before
    assert "not active" in errors(at).replace("*", "")
    table = at.dataframe[-1].value
    first, second = len(before.jobs) + 1, len(before.jobs) + 2
    lines = list(zip(table["row"], table["job"], table["issue"], strict=True))
    assert lines[0] == (
        first,
        "sft-new",
        "type is empty; choose training, batch_inference, quantization or realtime",
    )
    assert (
        first,
        "sft-new",
        "gpus_max is empty; enter a whole number of GPUs (a power of two for a batch type)",
    ) in lines
    assert (second, "(no id yet)", "id is empty; enter a job id, unique in the workload") in lines
    assert (second, "(no id yet)", "gpus_min is empty; enter a whole number of GPUs >= 0") in lines
    assert not any("None" in issue for _, _, issue in lines)


@pytest.mark.slow
def test_a_cell_that_does_not_apply_is_refused_when_invalid_and_cleared_when_valid():
    # A real-time row took gpu_hours -5 (or any value) silently: it was simply not used.
    at = open_page()
    before = active(at)
    row = next(k for k, j in enumerate(before.jobs) if j.is_realtime)
    service = before.jobs[row].id
    edit(at, {row: {"gpu_hours": -5}})
    assert active(at) == before and "not active" in errors(at).replace("*", "")
    table = at.dataframe[-1].value
    assert list(zip(table["row"], table["job"], strict=True)) == [(row + 1, service)]
    assert (
        table["issue"]
        .iloc[0]
        .startswith(
            "gpu_hours -5 does not apply to a realtime job (batch types only) and is not valid "
            "either (must be > 0)"
        )
    )

    at.button(key="wl_discard_edits").click().run()
    edit(at, {row: {"gpu_hours": 5, "swap_cap": 3}})  # a valid value is not used: said so
    assert not at.error and active(at).jobs[row].swap_cap == 3
    assert active(at).jobs[row].is_realtime  # (a real-time job has no gpu_hours to set)
    said = warnings(at)
    assert "Cleared" in said
    assert f"row {row + 1}, job '{service}': gpu_hours 5 does not apply to a realtime job" in said
    assert at.data_editor(key=editor_key(at)).value["gpu_hours"].isna().iloc[row]
    at.run()  # said once, after the edit
    assert "Cleared" not in warnings(at)

    capped = active(at)
    edit(at, {row: {"deadline_step": 4}})  # the workload unchanged: still cleared, still said
    assert active(at) == capped
    assert "deadline_step 4 does not apply to a realtime job" in warnings(at)
    assert at.data_editor(key=editor_key(at)).value["deadline_step"].isna().iloc[row]


def test_reload_loads_the_builtin_again():
    # Setting the selector's key after it was drawn raised StreamlitWidgetAlreadyInstantiatedError.
    at = open_page()
    before = active(at)
    at.number_input(key="wl_cluster_gpus").set_value(16).run()
    assert active(at).cluster.gpus == 16
    at.button(key="wl_reload").click().run()
    assert not at.exception, at.exception
    assert active(at) == before and at.selectbox(key="wl_builtin").value == before.name


def edit(at, rows: dict[int, dict], kind: str = "jobs") -> None:
    """What typing into the editor's cells does: its edited rows, then a rerun."""
    at.session_state[editor_key(at, kind)] = {
        "edited_rows": rows,
        "added_rows": [],
        "deleted_rows": [],
    }
    at.run()
    assert not at.exception, at.exception


def leave_and_return(at, page: str = "pages/plan_compare.py") -> None:
    at.switch_page(page).run()
    assert not at.exception, at.exception
    at.switch_page("pages/workload.py").run()
    assert not at.exception, at.exception


def issues(at) -> list[str]:
    return list(at.dataframe[-1].value["issue"]) if at.error else []


@pytest.mark.slow
def test_pending_edits_survive_other_pages_until_fixed():
    at = open_page()
    before = active(at)
    bad, good = 2, 4  # dpo-13b gets gpus_min 3 (not a power of two); train-1 a new priority
    edit(at, {bad: {"gpus_min": 3}, good: {"priority": 7.0}})
    assert issues(at) == ["gpus_min 3 is not a power of two"] and active(at) == before

    leave_and_return(at)
    assert issues(at) == ["gpus_min 3 is not a power of two"], "the edits came back"
    assert "not active" in errors(at).replace("*", "") and active(at) == before
    shown = at.data_editor(key=editor_key(at)).value
    assert shown["gpus_min"].iloc[bad] == 3 and shown["priority"].iloc[good] == 7.0
    at.run()  # a rerun on the page keeps them too
    assert issues(at) == ["gpus_min 3 is not a power of two"]

    # a policy change elsewhere does not touch the tables: the edits stay
    at.switch_page("pages/plan_compare.py").run()
    at.slider(key="ctl_scn_penalty").set_value(6.0).run()
    at.switch_page("pages/workload.py").run()
    assert issues(at) == ["gpus_min 3 is not a power of two"]
    assert active(at).policy.penalty_weight == 6.0

    edit(at, {bad: {"gpus_min": 4}})  # fixed in the editor drawn from the pending edits
    assert not at.error and any("valid and active" in m.value for m in at.success)
    after = active(at)
    assert after.jobs[good].priority == 7.0 and after.jobs[bad].gpus_min == 4
    leave_and_return(at)
    assert not at.error and active(at) == after


@pytest.mark.slow
def test_discard_edits_shows_the_active_workload_again():
    at = open_page()
    before = active(at)
    edit(at, {2: {"gpus_min": 3}})
    leave_and_return(at)
    at.button(key="wl_discard_edits").click().run()
    assert not at.exception and not at.error and active(at) == before
    shown = at.data_editor(key=editor_key(at)).value
    assert shown["gpus_min"].iloc[2] == before.jobs[2].gpus_min
    leave_and_return(at)
    assert not at.error and active(at) == before


@pytest.mark.slow
def test_pending_edits_on_a_changed_table_are_dropped_with_a_note():
    at = open_page()
    edit(at, {2: {"gpus_min": 3}})
    at.switch_page("pages/plan_compare.py").run()
    service = active(at).realtime_jobs[0].id
    at.number_input(key=f"ctl_scn_swap_{service}").set_value(3).run()  # a jobs-table column
    at.switch_page("pages/workload.py").run()
    assert not at.exception and not at.error
    assert any("were dropped" in i.value for i in at.info)
    assert active(at).realtime_jobs[0].swap_cap == 3  # not undone by the old table


@pytest.mark.slow
def test_reloading_the_builtin_discards_pending_edits():
    at = open_page()
    before = active(at)
    edit(at, {2: {"gpus_min": 3}})
    at.button(key="wl_reload").click().run()
    assert not at.exception and not at.error and active(at) == before
    leave_and_return(at)
    assert not at.error


@pytest.mark.slow
def test_a_pending_demand_edit_survives_other_pages_too():
    at = open_page()
    before = active(at)
    edit(at, {5: {before.realtime_jobs[0].id: -1.0}}, kind="demand")
    assert issues(at) == ["demand[5] must be >= 0, got -1.0"]
    leave_and_return(at, "pages/capacity.py")
    assert issues(at) == ["demand[5] must be >= 0, got -1.0"] and active(at) == before
    shown = at.data_editor(key=editor_key(at, "demand")).value
    assert shown[before.realtime_jobs[0].id].iloc[5] == -1.0


@pytest.mark.slow
def test_the_cluster_controls_keep_their_keys_and_label_and_follow_a_loaded_scenario():
    # A label or key that changes with the scenario redraws the expander closed after every
    # edit: three fields took three re-openings.
    at = open_page()

    def cluster_expander():
        return next(e for e in at.expander if e.label.startswith("Cluster and horizon"))

    label = cluster_expander().label
    at.number_input(key="wl_cluster_gpus").set_value(16).run()
    at.number_input(key="wl_cluster_steps").set_value(48).run()
    at.number_input(key="wl_cluster_minutes").set_value(30).run()
    assert not at.exception and not at.error
    c = active(at).cluster
    assert (c.gpus, c.horizon_steps, c.step_minutes) == (16, 48, 30)
    assert cluster_expander().label == label
    assert at.number_input(key="wl_cluster_gpus").value == 16

    at.selectbox(key="wl_builtin").set_value("example").run()  # the controls follow a load
    example = active(at).cluster
    assert at.number_input(key="wl_cluster_gpus").value == example.gpus
    assert at.number_input(key="wl_cluster_steps").value == example.horizon_steps
    assert at.number_input(key="wl_cluster_minutes").value == example.step_minutes
    assert at.date_input(key="wl_cluster_date").value == example.start.date()
    leave_and_return(at)  # ... and come back after another page dropped their state
    assert at.number_input(key="wl_cluster_gpus").value == example.gpus
    assert cluster_expander().label == label


def test_an_invalid_cluster_value_stays_shown_with_its_error():
    at = open_page()
    before = active(at)
    at.number_input(key="wl_cluster_gpus").set_value(2).run()  # below the running work
    assert not at.exception and active(at) == before
    assert "Not applied" in errors(at)
    assert at.number_input(key="wl_cluster_gpus").value == 2


def warnings(at) -> str:
    return "\n".join(w.value for w in at.warning)


@pytest.mark.slow
def test_a_step_change_says_the_steps_are_kept_and_what_that_does_to_the_hours():
    at = open_page()
    before = active(at)
    at.number_input(key="wl_cluster_minutes").set_value(7).run()
    assert not at.exception and active(at).cluster.step_minutes == 7
    note = warnings(at)
    assert "Step changed from 60 to 7 min" in note and "step numbers are kept" in note
    assert "2.7 h instead of 22.8 h" in note  # the decay's half-life
    assert "2.8 h instead of 24 h" in note  # the horizon
    assert "No exact conversion" in " ".join(c.value for c in at.caption)
    assert not [b for b in at.button if b.key == "wl_keep_hours"]
    at.number_input(key="wl_cluster_gpus").set_value(16).run()  # a further edit keeps the note
    assert "Step changed from 60 to 7 min" in warnings(at)
    at.number_input(key="wl_cluster_minutes").set_value(60).run()  # back: nothing to say
    assert "Step changed" not in warnings(at)
    assert active(at).jobs == before.jobs


@pytest.mark.slow
def test_a_step_that_divides_the_old_one_can_keep_the_hours():
    at = open_page()
    before = active(at)
    at.number_input(key="wl_cluster_minutes").set_value(30).run()
    assert "Step changed from 60 to 30 min" in warnings(at)
    at.button(key="wl_keep_hours").click().run()
    assert not at.exception
    after = active(at)
    assert after.cluster.step_minutes == 30 and after.cluster.horizon_steps == 48
    assert [j.arrival_step for j in after.batch_jobs] == [
        2 * j.arrival_step for j in before.batch_jobs
    ]
    half_life = before.policy.half_life_hours(60)
    assert abs(after.policy.half_life_hours(30) - half_life) < 1e-9
    assert any("Converted to keep the hours" in m.value for m in at.success)
    assert "Step changed" not in warnings(at)
    at.switch_page("pages/plan_compare.py").run()  # its decay slider takes the new decay
    assert not at.exception


@pytest.mark.slow
def test_a_converted_decay_is_kept_exactly_by_plan_and_compare():
    # 60 -> 30 min makes the decay 0.97 ** 0.5 = 0.98489 per step: off the slider's 0.005
    # steps, so touching the slider snapped it; the number beside it holds it as it is.
    at = open_page()
    at.number_input(key="wl_cluster_minutes").set_value(30).run()
    at.button(key="wl_keep_hours").click().run()
    converted = active(at).policy.decay
    assert converted == pytest.approx(0.97**0.5) and round(converted / 0.005) * 0.005 != converted
    at.switch_page("pages/plan_compare.py").run()
    assert not at.exception
    slider, exact = at.slider(key="ctl_scn_decay"), at.number_input(key="ctl_scn_decay_exact")
    assert slider.value == exact.value == converted

    slider.set_value(0.9).run()  # the slider for a round value: the number follows
    assert active(at).policy.decay == 0.9 == at.number_input(key="ctl_scn_decay_exact").value
    at.number_input(key="ctl_scn_decay_exact").set_value(converted).run()  # and back, exactly
    assert active(at).policy.decay == converted == at.slider(key="ctl_scn_decay").value
    at.slider(key="ctl_scn_penalty").set_value(6.0).run()  # another control leaves it be
    assert active(at).policy.decay == converted and not at.exception

    # a decay below the slider's 0.80 keeps its steps on round values (0.97 among them)
    at.number_input(key="ctl_scn_decay_exact").set_value(0.7837).run()
    slider = at.slider(key="ctl_scn_decay")
    assert active(at).policy.decay == 0.7837 and slider.value == 0.7837 and slider.min == 0.78
    assert (0.97 - slider.min) / slider.step == pytest.approx(38)


@pytest.mark.slow
def test_a_penalty_outside_the_slider_range_keeps_its_steps_on_round_values():
    # a penalty of 4.3 (from a file) set the slider's minimum to 4.3, so its 0.5 steps ran
    # 4.3, 4.8, ..., and the default 8 could not be chosen again; 12.2 likewise at the top
    at = open_page()
    for penalty, low, high in ((4.3, 4.0, 10.0), (12.2, 5.0, 12.5)):
        s = active(at)
        at.session_state["scenario"] = s.replace(policy=replace(s.policy, penalty_weight=penalty))
        at.switch_page("pages/plan_compare.py").run()
        slider = at.slider(key="ctl_scn_penalty")
        assert (slider.value, slider.min, slider.max) == (penalty, low, high)
        assert ((8.0 - slider.min) / slider.step).is_integer()
        slider.set_value(8.0).run()
        assert active(at).policy.penalty_weight == 8.0 and not at.exception
        at.switch_page("pages/workload.py").run()


@pytest.mark.slow
def test_a_second_upload_is_read_alone_and_shows_its_own_error():
    # The loaded pair stayed in the uploader, so the next pair was read with it: four files,
    # "need a jobs CSV ... and a demand CSV together", and never the real error.
    from core.formats import load_scenario, scenario_to_tables
    from tests.paths import SCENARIOS_DIR

    at = open_page()
    jobs_csv, demand_csv = scenario_to_tables(load_scenario(SCENARIOS_DIR / "example.json"))
    uploader(at).set_value(
        [
            ("team-a_jobs.csv", jobs_csv.encode(), "text/csv"),
            ("team-a_demand.csv", demand_csv.encode(), "text/csv"),
        ]
    ).run()
    assert not at.exception and not at.error and active(at).name == "team-a"
    assert uploader(at).value in (None, [])  # the loaded files left the uploader
    assert any("Loaded" in m.value and "team-a_jobs.csv" in m.value for m in at.success)

    header, *rows = jobs_csv.splitlines()
    drop = header.split(",").index("gpu_hours")
    without = "\n".join(
        ",".join(c for k, c in enumerate(line.split(",")) if k != drop) for line in [header, *rows]
    )
    uploader(at).set_value(
        [
            ("nogh_jobs.csv", without.encode(), "text/csv"),
            ("nogh_demand.csv", demand_csv.encode(), "text/csv"),
        ]
    ).run()
    assert not at.exception and active(at).name == "team-a"
    assert "gpu_hours" in errors(at) and "team-a_jobs.csv" not in errors(at)
    assert "together" not in errors(at)


def test_an_empty_csv_says_the_file_is_empty():
    at = open_page()
    before = active(at)
    uploader(at).set_value(("empty.csv", b"", "text/csv")).run()
    assert not at.exception and active(at) == before
    assert "empty.csv: file is empty" in errors(at)
    assert not [i for i in at.info if "other file of the pair" in i.value]


def test_a_lone_csv_that_is_no_half_of_a_pair_is_read_at_once():
    # a binary file or a sacct export saved as .csv asked for "the other file of the pair"
    from tests.paths import ROOT

    at = open_page()
    before = active(at)
    uploader(at).set_value(("binary.csv", b"\xff\xfe\x00\x01garbage", "text/csv")).run()
    assert not at.exception and active(at) == before
    assert "binary.csv: is not UTF-8 text" in errors(at)
    assert not [i for i in at.info if "other file of the pair" in i.value]
    sacct = ROOT / "tests" / "formats" / "fixtures" / "sacct_quirks.txt"
    uploader(at).set_value(("sacct.csv", sacct.read_bytes(), "text/csv")).run()
    assert not at.exception and not errors(at)
    assert active(at).cluster.gpus == 32  # the history's default window, as `gpuplan plan` reads


def test_every_uploader_and_the_server_say_the_limit_the_labels_say():
    # The labels said "up to 20 MB" while Streamlit's own hint said "100MB per file".
    import tomllib

    from core.formats import MAX_HISTORY_UPLOAD_MB, MAX_UPLOAD_MB
    from tests.paths import ROOT

    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["server"]["maxUploadSize"] == MAX_UPLOAD_MB

    at = open_page()
    shown = [uploader(at)]
    at.session_state["hi_open"] = True  # the history import's expander, opened
    at.run()
    shown += [at.file_uploader(key="hi_upload"), at.file_uploader(key="hi_rules")]
    at.switch_page("pages/demand_forecast.py").run()
    at.radio(key="fc_source").set_value("Upload a CSV").run()
    shown.append(at.file_uploader(key="fc_upload"))
    assert not at.exception
    history = shown.pop(1)  # a scheduler's export: larger than a scenario
    assert history.proto.max_upload_size_mb == MAX_HISTORY_UPLOAD_MB
    assert f"up to {MAX_HISTORY_UPLOAD_MB} MB" in history.label
    for widget in shown:
        assert widget.proto.max_upload_size_mb == MAX_UPLOAD_MB, widget.key
    for widget in shown[:1] + shown[2:]:  # (the rules file's label names no size)
        assert f"up to {MAX_UPLOAD_MB} MB" in widget.label, widget.key


@pytest.mark.slow
def test_pending_added_and_deleted_rows_come_back_numbered_as_the_issues_say():
    at = open_page()
    before = active(at)
    at.session_state[editor_key(at)] = {
        "edited_rows": {},
        "added_rows": [{"id": "half-typed"}],
        "deleted_rows": [1],
    }
    at.run()
    leave_and_return(at)
    shown = at.data_editor(key=editor_key(at)).value
    assert list(shown.index) == list(range(1, len(before.jobs) + 1))  # one deleted, one added
    assert shown["id"].iloc[-1] == "half-typed" and before.jobs[1].id not in set(shown["id"])
    table = at.dataframe[-1].value
    assert set(table["row"]) == {len(before.jobs)} and set(table["job"]) == {"half-typed"}
    version = at.session_state["scenario_version"]
    at.run()  # and they stay drawn as they are, by the same editors
    assert at.session_state["scenario_version"] == version
    assert list(at.data_editor(key=editor_key(at)).value["id"]) == list(shown["id"])
