"""AppTest: the Workload page's nodes and GPU types (SPEC section 8) as a planner edits them."""

from __future__ import annotations

from tests.app.test_pages import active, errors, open_page


def open_mixed():
    at = open_page()
    at.selectbox(key="wl_builtin").set_value("mixed-nodes").run()
    assert not at.exception and active(at).name == "mixed-nodes"
    return at


def nodes_key(at) -> str:
    return f"wl_nodes_{at.session_state['scenario_version']}"


def edit_nodes(at, rows: dict, added: list | None = None):
    at.session_state[nodes_key(at)] = {
        "edited_rows": rows,
        "added_rows": added or [],
        "deleted_rows": [],
    }
    at.run()
    assert not at.exception


def test_the_cluster_is_shown_as_groups_of_nodes():
    at = open_mixed()
    shown = "\n".join(m.value for m in at.markdown)
    assert "1 x 8 H100 (h100x8) + 2 x 4 A10 (a10x4) = 16 GPUs" in shown
    nodes = at.data_editor(key=nodes_key(at)).value
    assert list(nodes["group"]) == ["h100x8", "a10x4"]
    jobs = at.data_editor(key=f"wl_jobs_{at.session_state['scenario_version']}").value
    assert {"gpu_types", "min_gpu_memory_gb", "multi_node"} <= set(jobs.columns)


def test_more_nodes_become_the_planned_cluster():
    at = open_mixed()
    edit_nodes(at, {1: {"count": 3}})
    assert active(at).cluster.gpus == 20
    assert at.session_state["scenario_source"] == "nodes edited"
    assert "1 x 8 H100 (h100x8) + 3 x 4 A10 (a10x4) = 20 GPUs" in "\n".join(
        m.value for m in at.markdown
    )


def test_a_speed_of_zero_is_one_message_and_keeps_the_last_good_cluster():
    at = open_mixed()
    before = active(at)
    edit_nodes(at, {1: {"speed": 0}})
    assert active(at) == before
    message = errors(at).replace("*", "")
    assert "Not applied: group 'a10x4': speed must be > 0, got 0." in message
    assert message.count("speed") == 1
    at.button(key="wl_nodes_discard").click().run()
    assert not at.exception and not errors(at) and active(at) == before


def test_an_unknown_type_and_a_job_nothing_holds_name_the_group_and_the_job():
    at = open_mixed()
    before = active(at)
    edit_nodes(at, {1: {"gpu_type": "A1O", "speed": None}})
    assert "group 'a10x4': type 'A1O' is not a GPU type" in errors(at)
    assert active(at) == before
    at = open_mixed()
    edit_nodes(at, {0: {"memory_gb": 16}})
    assert "job 'train': no GPU of the cluster is allowed by its min_gpu_memory_gb 40" in errors(at)
    assert active(at) == before


def test_a_plain_cluster_starts_its_node_table_from_one_node():
    at = open_page()
    before = active(at)
    assert not before.cluster.nodes
    at.button(key="wl_nodes_start").click().run()
    assert not at.exception
    after = active(at)
    assert after.cluster.gpus == before.cluster.gpus and len(after.cluster.nodes) == 1


def test_a_job_held_to_an_unknown_type_names_its_row():
    at = open_mixed()
    before = active(at)
    key = f"wl_jobs_{at.session_state['scenario_version']}"
    at.session_state[key] = {
        "edited_rows": {2: {"gpu_types": "B200"}},
        "added_rows": [],
        "deleted_rows": [],
    }
    at.run()
    assert not at.exception and active(at) == before
    issues = at.dataframe[-1].value
    assert list(issues["job"]) == ["bi"]
    assert "gpu_types names 'B200'" in issues["issue"].iloc[0]
