"""The Workload page's nodes and GPU types (SPEC section 8): one table of node groups, each with
its type's speed, memory and price; the conversion and its checks are core.cluster_table's."""

from __future__ import annotations

import streamlit as st

from core import cluster_table
from core.model import Scenario
from pages import common

K_ERROR_SHOWN = "wl_nodes_error"  # the last problem shown (for tests and the browser)


def _describe_nodes() -> None:
    current = common.scenario()
    cluster = cluster_table.one_group(current.cluster)
    common.set_scenario(current.replace(cluster=cluster), "nodes described")


def render(s: Scenario) -> None:
    """The expander with the node table (or, without nodes, a button that starts one)."""
    c = s.cluster
    # (a key per kind of cluster: open where there are nodes to edit, closed where there are none)
    with st.expander(
        "Nodes and GPU types", expanded=bool(c.nodes), key=f"wl_nodes_expander_{bool(c.nodes)}"
    ):
        if not c.nodes:
            st.caption(
                f"This cluster is one pool of {c.gpus} identical GPUs (their number is the "
                "GPUs field above). Describe its nodes to plan GPU models of different speed, "
                "memory and price, and jobs held to some of them or to one node."
            )
            st.button(
                "Describe nodes and GPU types",
                key="wl_nodes_start",
                on_click=_describe_nodes,
                help=f"Starts the table with one node of {c.gpus} GPUs of one type at speed 1: "
                "the plans do not change until you edit it.",
            )
            return
        st.markdown(f"**{cluster_table.cluster_words(c)}**")
        st.caption(
            "One row per group of identical nodes; a node's GPUs are numbered in order, groups "
            "in the table's order. A type's speed (reference GPU-hours of work per hour), "
            "memory and price are the same on every row of that type; a new type needs its "
            "speed. Jobs pick types with 'allowed GPU types' and 'min memory GB' on the Jobs "
            "tab. Add a row at the bottom, delete with the row checkbox."
        )
        edited = st.data_editor(
            cluster_table.node_table(c),
            key=f"wl_nodes_{common.scenario_version()}",
            num_rows="dynamic",
            hide_index=True,
            width="stretch",
            placeholder="",  # an empty memory or price cell, not "None"
            column_config={
                name: (
                    st.column_config.TextColumn(label, help=help)
                    if name in ("group", "gpu_type")
                    else st.column_config.NumberColumn(
                        label,
                        help=help,
                        step=1 if name in ("gpus_per_node", "count") else None,
                        format="%d" if name in ("gpus_per_node", "count") else "%g",
                    )
                )
                for name, label, help in cluster_table.NODE_COLUMNS
            },
        )
        result = cluster_table.scenario_from_node_table(s, edited)
        if result.ok:
            st.session_state.pop(K_ERROR_SHOWN, None)
            if result.scenario != s:
                common.set_scenario(result.scenario, "nodes edited")
                st.rerun()
            return
        st.session_state[K_ERROR_SHOWN] = result.problem
        message, discard = st.columns([5, 1], vertical_alignment="center")
        message.error(
            f"**Not applied:** {result.problem}. The last valid cluster "
            f"({cluster_table.cluster_words(c)}) is still planned."
        )
        discard.button(
            "Discard",
            key="wl_nodes_discard",
            on_click=common.renew_editors,
            width="stretch",
            help="Draw the table from the active cluster again.",
        )
