"""Saved: keep workloads and their runs in the workspace, reopen them, compare two side by side."""

import pandas as pd
import streamlit as st

from core import views
from core.model import Scenario, ScenarioError
from core.plan import metrics
from core.tables import job_table
from core.workspace import WorkspaceError
from pages import common

common.page_header(
    "Saved workloads & runs",
    "Save the active workload and its plans in your workspace (a SQLite file that survives "
    "reloads and restarts), reopen one, or compare two saved runs side by side.",
)
common.sidebar_summary()

try:
    workspace = common.workspace()
except WorkspaceError as e:
    st.error(f"{e}. The active workload is unchanged.")
    st.stop()
st.caption(f"Workspace: `{workspace.path}` (set GPUPLAN_WORKSPACE to use another file).")

s = common.scenario()
store = common.stored_plans(s)

# --- save ------------------------------------------------------------------------------------


def _named(s: Scenario, name: str) -> Scenario:
    """The workload as saved under `name`: it carries that name, so it reopens so named (and
    saving it again under the same name keeps its runs: the same body)."""
    return s if name.strip() == s.name else s.replace(name=name.strip())


def _adopt(s: Scenario, named: Scenario, store: dict) -> None:
    """The active workload takes the name it was saved under; its plans stay (only the name
    changed) and the sidebar shows the new name at once."""
    if named is s:
        return
    plans = dict(store["plans"])
    common.set_scenario(named, f"saved: {named.name}", reset_controls=False)
    common.stored_plans(named)["plans"].update(plans)
    st.rerun()


with st.container(border=True):
    st.markdown("**Save the active workload**")
    c1, c2, c3 = st.columns([3, 1, 1])
    with c1:
        # keyed by the workload's version, so a newly opened workload brings its own name
        name = st.text_input(
            "Name", value=s.name, key=f"saved_name_{common.scenario_version()}", max_chars=200
        )
    planned = list(store["plans"])
    with c2:
        st.write("")
        if st.button("Save workload", key="saved_save", type="primary", width="stretch"):
            try:
                named = _named(s, name)
                workspace.save_scenario(name, named)
                st.session_state["saved_message"] = f"Saved the workload as '{name.strip()}'."
                _adopt(s, named, store)
            except ScenarioError as e:
                st.session_state["saved_message"] = f"error: {e}"
    with c3:
        st.write("")
        if st.button(
            f"Save it with {views.plural(len(planned), 'plan')}",
            key="saved_save_runs",
            disabled=not planned,
            width="stretch",
            help="Also keep the plans made on Plan & compare (planner, policy, metrics, grid).",
        ):
            try:
                named = _named(s, name)
                for planner in planned:
                    workspace.save_run(name, named, store["plans"][planner])
                st.session_state["saved_message"] = (
                    f"Saved '{name.strip()}' with runs of "
                    f"{', '.join(common.planner_label(p) for p in planned)}."
                )
                _adopt(s, named, store)
            except ScenarioError as e:
                st.session_state["saved_message"] = f"error: {e}"
    message = st.session_state.pop("saved_message", None)
    if message and message.startswith("error: "):
        st.error(message.removeprefix("error: "))
    elif message:
        st.success(message)

# --- saved scenarios -------------------------------------------------------------------------
try:
    saved = workspace.scenarios()
    runs = workspace.runs()
except WorkspaceError as e:
    st.error(f"{e}. The active workload is unchanged.")
    st.stop()

st.subheader("Saved workloads")
if not saved:
    st.info("Nothing saved yet: save the active workload above.")
    st.stop()
st.dataframe(
    pd.DataFrame(
        [
            {
                "name": x.name,
                "saved (UTC)": x.saved_at[:19].replace("T", " "),
                "GPUs": x.gpus,
                "jobs": x.jobs,
                "runs": x.runs,
            }
            for x in saved
        ]
    ),
    hide_index=True,
    width="stretch",
    column_config={  # thousands separators for an import's counts
        c: st.column_config.NumberColumn(format="localized") for c in ("GPUs", "jobs", "runs")
    },
)
c1, c2, c3 = st.columns([3, 1, 1])
with c1:
    chosen = st.selectbox("Saved workload", [x.name for x in saved], key="saved_pick")
with c2:
    st.write("")
    if st.button("Open as active workload", key="saved_open", width="stretch"):
        try:
            common.set_scenario(workspace.load_scenario(chosen), f"saved: {chosen}")
            st.rerun()
        except WorkspaceError as e:
            st.error(f"{e}. The active workload is unchanged.")
with c3:
    st.write("")
    if st.button("Delete", key="saved_delete", width="stretch"):
        try:
            workspace.delete_scenario(chosen)
            st.rerun()
        except WorkspaceError as e:
            st.error(str(e))

# --- compare two runs ------------------------------------------------------------------------
st.subheader("Compare two saved runs")
if len(runs) < 2:
    st.info("Save at least two runs (a workload with its plans) to compare them here.")
    st.stop()
labels = {
    r.id: f"#{r.id} · {r.scenario} · {common.planner_label(r.planner)} · "
    f"{r.saved_at[:16].replace('T', ' ')}"
    for r in runs
}
ids = list(labels)
c1, c2 = st.columns(2)
left_id = c1.selectbox("Run A", ids, index=0, format_func=labels.get, key="saved_run_a")
right_id = c2.selectbox("Run B", ids, index=1, format_func=labels.get, key="saved_run_b")
try:
    (left_s, left_p), (right_s, right_p) = (workspace.load_run(i) for i in (left_id, right_id))
except WorkspaceError as e:
    st.error(str(e))
    st.stop()

kpis = views.saved_comparison(left_s, metrics(left_s, left_p), right_s, metrics(right_s, right_p))
st.dataframe(  # every KPI in view, without a scroll bar
    kpis, hide_index=True, width="stretch", key="saved_kpis", height=35 * (len(kpis) + 1) + 3
)
# The per-job table needs the same jobs on the same cluster and clock; a policy what-if (another
# penalty or decay, saved under another name) keeps them, and placements do not depend on it.
if left_s.jobs == right_s.jobs and left_s.cluster == right_s.cluster:
    st.markdown("**Per job** (unfinished and unstarted first)")
    if left_s != right_s:
        st.caption(
            "The same jobs on the same cluster; the policies differ (the table above), so the "
            "plans may place them differently."
        )
    st.dataframe(
        job_table(left_s, {"A": left_p, "B": right_p}),
        hide_index=True,
        width="stretch",
        placeholder="—",
    )
else:
    differences = views.job_differences(left_s, right_s)
    st.caption(
        "The two runs are of different jobs or clusters, so there is no per-job table (it needs "
        "the same jobs on the same cluster). A vs B: " + "; ".join(differences) + "."
    )
g1, g2 = st.columns(2)
with g1:
    common.show_grid(left_s, left_p, f"A: {labels[left_id]}", key="saved_grid_a")
with g2:
    common.show_grid(right_s, right_p, f"B: {labels[right_id]}", key="saved_grid_b")
