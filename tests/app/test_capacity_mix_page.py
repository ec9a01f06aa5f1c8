"""AppTest: the Capacity page on a cluster of node groups (SPEC section 8) sizes a mix."""

from __future__ import annotations

import pytest

from core.formats import load_scenario
from core.mix import size_mix
from tests.app.test_pages import errors, open_page
from tests.paths import SCENARIOS_DIR


@pytest.mark.slow
def test_capacity_sizes_a_mix_on_dask_as_size_mix_does():
    import streamlit as st

    try:
        at = open_page(timeout=120)
        at.selectbox(key="wl_builtin").set_value("mixed-nodes").run()
        at.switch_page("pages/capacity.py").run()
        assert not at.exception, at.exception
        # one count list per group (0..2x today's) instead of the GPU list; no policy lists
        keys = [t.key for t in at.text_input]
        assert keys == ["ctl_scn_cap_nodes_h100x8", "ctl_scn_cap_nodes_a10x4"]
        assert [t.value for t in at.text_input] == ["0,1,2", "0,1,2,3,4"]
        assert any("Choose the node counts" in i.value for i in at.info)
        at.text_input(key="ctl_scn_cap_nodes_a10x4").set_value("0,1,2")
        at.button(key="cap_run").click().run()
        assert not at.exception and not at.error, errors(at)
        rows = at.session_state["capacity_result"]["rows"]
        assert len(rows) == 8 * 2  # 3 x 3 mixes but the empty one, fifo and the allocator
        [answer] = [s.value for s in at.success]
        s = load_scenario(SCENARIOS_DIR / "mixed-nodes.json")
        expected = size_mix(s, {"h100x8": [0, 1, 2], "a10x4": [0, 1, 2]}, 0.99, 0.8, "allocator")
        assert expected["nodes"] == {"h100x8": 1, "a10x4": 1}
        assert answer.startswith(
            f"**Buy 1 x 8 H100 (h100x8) + 1 x 4 A10 (a10x4) = {expected['gpus']} GPUs, "
            f"{expected['cost_per_hour']:,.2f} per hour**"
        )
        answers = at.dataframe[0].value  # the answers, then every mix
        assert list(answers["cheapest mix"]) == ["1 x h100x8 + 1 x a10x4"] * 2
        every = at.dataframe[1].value
        assert len(every) == 16 and {"utilization_H100", "utilization_A10"} <= set(every.columns)
        holds = (every["error"] == "").tolist()
        assert holds == sorted(holds, reverse=True)  # the mixes that hold the workload first
        valid = every[every["error"] == ""]
        assert valid["cost_per_hour"].tolist() == sorted(valid["cost_per_hour"])  # cheapest
        # a changed list marks the result as run with other lists
        at.text_input(key="ctl_scn_cap_nodes_h100x8").set_value("1").run()
        assert any("were run with other lists" in i.value for i in at.info)
        # a bad count: one error naming the group, the last result stays
        at.text_input(key="ctl_scn_cap_nodes_h100x8").set_value("1,two")
        at.button(key="cap_run").click().run()
        assert "Nodes: h100x8: 'two' is not a whole number of nodes >= 0" in errors(at)
        assert at.session_state["capacity_result"]["rows"] == rows
    finally:
        st.cache_resource.clear()  # closes the page's Dask client and its LocalCluster
