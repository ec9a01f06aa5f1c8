"""AppTest: the Workload page's editors, cluster controls and uploads as a planner uses them."""

from __future__ import annotations

import json

from tests.app.test_pages import active, errors, open_page


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


def test_reload_loads_the_builtin_again():
    # Setting the selector's key after it was drawn raised StreamlitWidgetAlreadyInstantiatedError.
    at = open_page()
    before = active(at)
    at.number_input(key=f"wl_cluster_{at.session_state['scenario_version']}_gpus").set_value(16)
    at.run()
    assert active(at).cluster.gpus == 16
    at.button(key="wl_reload").click().run()
    assert not at.exception, at.exception
    assert active(at) == before and at.selectbox(key="wl_builtin").value == before.name
