"""Workload: pick or upload a scenario, edit its jobs and real-time demand, download it."""

import streamlit as st

from core.charts import demand_figure, step_labels
from core.formats import MAX_UPLOAD_MB, scenario_to_json, scenario_to_tables
from pages import common, history_import

common.page_header(
    "Workload",
    "Pick a built-in scenario or upload your own, then edit jobs and real-time demand: "
    "every edit is validated, and only a valid workload becomes the active one.",
)
common.sidebar_summary()

builtins = common.builtin_scenarios()
names = list(builtins)


def _load_selected() -> None:
    name = st.session_state["wl_builtin"]
    common.set_scenario(common.load_builtin(name), f"built-in: {name}")
    st.session_state.pop(common.K_UPLOAD_ERROR, None)


pick, upload = st.columns([1, 2])
with pick:
    current = common.scenario_source().removeprefix("built-in: ")
    if "wl_builtin" not in st.session_state and current in names:
        st.session_state["wl_builtin"] = current
    st.selectbox(
        "Built-in scenario",
        names,
        key="wl_builtin",
        on_change=_load_selected,
        help="Scenarios shipped in data/scenarios/. Choosing one replaces the workload.",
    )
    if st.button(
        "Reload built-in",
        key="wl_reload",
        help="Discard edits and uploads; load the selected built-in scenario again.",
    ):
        _load_selected()
with upload:
    files = st.file_uploader(
        "Upload a scenario (.json) or the CSV pair (jobs.csv + demand.csv)",
        type=["json", "csv"],
        accept_multiple_files=True,
        key="wl_upload",
        help=f"Up to {MAX_UPLOAD_MB} MB per file. The CSV pair takes cluster, horizon and policy "
        "from the active scenario.",
    )
    common.load_uploads(files or [])

error = st.session_state.get(common.K_UPLOAD_ERROR)
if error:
    shown = "\n".join(f"- {p}" for p in error[:12])
    more = f"\n- ... and {len(error) - 12} more" if len(error) > 12 else ""
    st.error(f"**The upload was not loaded; the active scenario is unchanged.**\n\n{shown}{more}")

history_import.render()  # a scheduler history -> a window's scenario, with what really ran

s = common.scenario()
c = s.cluster
st.subheader(f"{s.name}")
if s.description:
    st.caption(s.description)
cols = st.columns(5)
cols[0].metric("GPUs", c.gpus)
cols[1].metric("Horizon", f"{c.horizon_steps} x {c.step_minutes} min")
cols[2].metric("Batch jobs", len(s.batch_jobs))
cols[3].metric("Real-time jobs", len(s.realtime_jobs))
cols[4].metric("Work queued", f"{sum(j.gpu_hours for j in s.batch_jobs):,.0f} GPU-h")
start = c.start.strftime("%Y-%m-%d %H:%M") if c.start else "not set"
policy = s.policy
st.caption(
    f"Starts {start} · penalty weight {policy.penalty_weight:g} · decay {policy.decay:g} "
    f"(half-life {common.format_hours(policy.half_life_hours(c.step_minutes))}) · "
    "change the policy on Plan & compare."
)

version = common.scenario_version()
jobs_table, demand_table = common.editor_tables(s)
jobs_tab, demand_tab = st.tabs(["Jobs", "Real-time demand"])
with jobs_tab:
    st.caption(
        "One row per job. Batch jobs (training, batch_inference, quantization) need gpu_hours and "
        "power-of-two gpus_min/gpus_max; real-time jobs need swap_cap and get demand on the next "
        "tab. Add a row at the bottom, delete with the row checkbox. running_* pins a job that "
        "is already on GPUs [gpu_start, gpu_start+gpus)."
    )
    edited_jobs = st.data_editor(
        jobs_table,
        key=f"wl_jobs_{version}",
        num_rows="dynamic",
        width="stretch",
        hide_index=False,
        placeholder="",
        height=min(35 * (len(jobs_table) + 2) + 3, 740),
        column_config={
            "id": st.column_config.TextColumn("id", required=True, help="unique job id"),
            "type": st.column_config.SelectboxColumn(
                "type", options=common.JOB_TYPE_OPTIONS, required=True
            ),
            "priority": st.column_config.NumberColumn(
                "priority", min_value=0.0, format="%g", help="> 0; higher is more valuable"
            ),
            "arrival_step": st.column_config.NumberColumn(
                "arrival", min_value=0, step=1, help="batch: first step it may start"
            ),
            "gpus_min": st.column_config.NumberColumn("gpus_min", min_value=0, step=1),
            "gpus_max": st.column_config.NumberColumn("gpus_max", min_value=0, step=1),
            "gpu_hours": st.column_config.NumberColumn(
                "gpu_hours", min_value=0.0, format="%g", help="batch: total work in GPU-hours"
            ),
            "swap_cap": st.column_config.NumberColumn(
                "swap_cap",
                min_value=0,
                step=1,
                help="real-time: GPUs gained + released per step at most",
            ),
            "running_gpu_start": st.column_config.NumberColumn(
                "running from GPU", min_value=0, step=1
            ),
            "running_gpus": st.column_config.NumberColumn("running GPUs", min_value=1, step=1),
            "running_remaining_steps": st.column_config.NumberColumn(
                "running steps left", min_value=1, step=1
            ),
            "previous_gpus": st.column_config.TextColumn(
                "previous GPUs",
                help="real-time: GPUs held just before step 0, e.g. '6 7'; '[]' = held no GPU "
                "(step 0 then obeys the swap cap); blank = step 0 is free",
            ),
            "team": st.column_config.TextColumn("team", help="optional: who owns the job"),
            "deadline_step": st.column_config.NumberColumn(
                "deadline step",
                min_value=0,
                step=1,
                help="batch, optional: the step by which the job should have completed",
            ),
        },
    )
with demand_tab:
    if demand_table.empty:
        st.info("No real-time jobs: add one with type 'realtime' on the Jobs tab.")
        edited_demand = demand_table
    else:
        labels = step_labels(s)
        shown = demand_table.copy()
        shown.insert(0, "time", labels)
        st.caption("GPUs each real-time job wants at each step (fractions allowed).")
        table_col, chart_col = st.columns([2, 3])
        with table_col:
            edited = st.data_editor(
                shown,
                key=f"wl_demand_{version}",
                num_rows="fixed",
                width="stretch",
                height=min(35 * (len(shown) + 1) + 3, 420),
                column_config={
                    "time": st.column_config.TextColumn("time", disabled=True),
                    **{
                        j: st.column_config.NumberColumn(j, min_value=0.0, format="%g")
                        for j in demand_table.columns
                    },
                },
            )
        with chart_col:
            st.plotly_chart(
                demand_figure(s), key="wl_chart_demand", config={"displayModeBar": False}
            )
        edited_demand = edited.drop(columns=["time"])

result = common.scenario_from_editor(s, edited_jobs, edited_demand)
if result.ok and result.scenario != s:
    common.set_scenario(result.scenario, "edited")
    st.rerun()
if not result.ok:
    st.error(
        "These edits break a rule, so they are **not** active yet; the last valid workload "
        "is still planned. Fix the rows listed here:"
    )
    st.dataframe(
        common.issues_table(edited_jobs, result),
        hide_index=True,
        width="stretch",
        key="wl_issues",
        column_config={
            "row": st.column_config.NumberColumn("row", format="%d"),
            "issue": st.column_config.TextColumn("issue", width="large"),
        },
    )
elif common.scenario_source() == "edited":
    st.success("Edits are valid and active.")

st.subheader("Download the workload")
st.caption("The active workload: the last valid one, with the policy set on Plan & compare.")
jobs_csv, demand_csv = scenario_to_tables(s)
d1, d2, d3 = st.columns(3)
d1.download_button(
    "scenario.json",
    scenario_to_json(s),
    file_name=f"{s.name}.json",
    mime="application/json",
    key="wl_dl_json",
    width="stretch",
)
d2.download_button(
    "jobs.csv", jobs_csv, file_name="jobs.csv", mime="text/csv", key="wl_dl_jobs", width="stretch"
)
d3.download_button(
    "demand.csv",
    demand_csv,
    file_name="demand.csv",
    mime="text/csv",
    key="wl_dl_demand",
    width="stretch",
)
