"""Workload: pick or upload a scenario, edit its jobs and real-time demand, download it."""

from datetime import datetime, timedelta

import streamlit as st

from core import cluster_table, views
from core.charts import demand_figure, step_labels
from core.formats import (
    MAX_UPLOAD_MB,
    export_name,
    job_from_dict,
    scenario_to_json,
    scenario_to_tables,
)
from core.model import ScenarioError
from pages import common, history_import, nodes_editor

common.page_header(
    "Workload",
    "gpuplan plans which job runs on which GPUs at every step of the horizon and compares that "
    "plan with FIFO: set up the workload here (a built-in, or your own files), then see the "
    "plans and their KPIs on Plan & compare.",
)
common.sidebar_summary()

builtins = common.builtin_scenarios()
names = list(builtins)


def _load_selected() -> None:
    name = st.session_state["wl_builtin"]
    if name is None:
        return
    common.discard_pending_edits()  # (a reload of the same built-in discards them too)
    common.set_scenario(common.load_builtin(name), f"built-in: {name}")
    common.clear_uploader()  # files that failed (or were loaded) leave the uploader


def _reload(name: str) -> None:
    """Load the built-in again (a callback: the selector is set before it is drawn)."""
    st.session_state["wl_builtin"] = name
    _load_selected()


# The selector follows the active scenario: a built-in by name, anything else as a placeholder.
current = common.scenario_source().removeprefix("built-in: ")
selected = current if current in names else None
if st.session_state.get("wl_builtin", "") != selected:
    st.session_state["wl_builtin"] = selected

pick, upload = st.columns([1, 2])
with pick:
    st.selectbox(
        "Built-in scenario",
        names,
        key="wl_builtin",
        on_change=_load_selected,
        placeholder=f"{common.scenario().name}: pick a built-in to replace it",
        help="Scenarios shipped in data/scenarios/: `example`, then the seven benchmarks, then "
        "the rest. Choosing one replaces the workload.",
    )
    last = selected or st.session_state.get("wl_last_builtin")
    st.button(
        f"Reload {last}" if last else "Reload built-in",
        key="wl_reload",
        disabled=last is None,
        on_click=_reload,
        args=(last,),
        help="Discard edits and uploads; load this built-in scenario again.",
    )
    if selected is not None:
        st.session_state["wl_last_builtin"] = selected
with upload:
    files = st.file_uploader(
        f"Upload a scenario (.json) or jobs.csv + demand.csv, up to {MAX_UPLOAD_MB} MB each",
        type=["json", "csv"],
        accept_multiple_files=True,
        max_upload_size=MAX_UPLOAD_MB,
        key=common.uploader_key(),
        help=f"Up to {MAX_UPLOAD_MB} MB per file (a larger one is refused by the uploader: its "
        "chip turns red). The CSV pair is planned on the cluster and horizon set under "
        "'Cluster and horizon' below; its name comes from its file names.",
    )
    state = common.load_uploads(files or [])
    if state.kind == "waiting":
        st.info(state.message)

done = st.session_state.get(common.K_UPLOAD_DONE)
if done and common.scenario_source().startswith("upload: "):
    st.success(f"{done} The uploader is empty again for the next files.")
error = st.session_state.get(common.K_UPLOAD_ERROR)
if error:
    shown = "\n".join(f"- {p}" for p in error[:12])
    more = f"\n- ... and {len(error) - 12} more" if len(error) > 12 else ""
    hints = "".join(f"\n\n{h}" for h in views.pair_fit_hints(error, common.scenario().cluster))
    st.error(
        "**The upload was not loaded (its files were taken out of the uploader); the active "
        f"workload is unchanged.**\n\n{shown}{more}{hints}"
    )

history_import.render()  # a scheduler history -> a window's scenario, with what really ran
common.saved_workloads()  # the workspace's saved workloads, to reopen one

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
if c.nodes:
    st.markdown(f"**Cluster:** {cluster_table.cluster_words(c)}")
policy = s.policy
st.caption(
    f"Penalty weight {policy.penalty_weight:g} · decay {policy.decay:g} "
    f"(half-life {common.format_hours(policy.half_life_hours(c.step_minutes))}) · "
    + (f"from {c.start:%Y-%m-%d %H:%M} · " if c.start else "no start time · ")
    + "change the policy on Plan & compare, the cluster and horizon below."
)

# The cluster controls keep their keys (and the expander its label) while the scenario changes,
# so the expander stays open through a series of edits; they are set from the active cluster
# whenever another scenario becomes active (or the page was left, which drops widget state).
K_CLUSTER_SHOWS = "wl_cluster_shows"  # the scenario the controls were last set from
K_STEP_CHANGE = "wl_step_change"  # {"scenario": made by a step change, "from": minutes before}
CLUSTER_KEYS = {f: f"wl_cluster_{f}" for f in views.CLUSTER_FIELDS}


def _apply_cluster() -> None:
    current = common.scenario()
    fields = {f: st.session_state.get(k) for f, k in CLUSTER_KEYS.items()}
    day, clock = fields["date"], fields["time"]
    start = datetime.combine(day, clock) if day is not None and clock is not None else None
    try:
        new = views.with_cluster(
            current,
            gpus=fields["gpus"],
            horizon_steps=fields["steps"],
            step_minutes=fields["minutes"],
            start=start,
        )
    except ScenarioError as e:
        st.session_state["wl_cluster_error"] = e.problems
        return
    st.session_state.pop("wl_cluster_error", None)
    if new != current:
        change = st.session_state.get(K_STEP_CHANGE)
        meant = current.cluster.step_minutes
        if change is not None and change["scenario"] is current:
            meant = change["from"]  # a further change: the numbers were meant at the first
        common.set_scenario(new, "cluster edited")
        if new.cluster.step_minutes != meant:  # the step numbers were meant at `meant` minutes
            st.session_state[K_STEP_CHANGE] = {"scenario": new, "from": meant}
        else:
            st.session_state.pop(K_STEP_CHANGE, None)


def _keep_hours(kept) -> None:
    common.set_scenario(kept, "cluster edited (hours kept)")
    st.session_state.pop(K_STEP_CHANGE, None)
    cluster, policy = kept.cluster, kept.policy
    st.session_state["wl_hours_kept"] = (
        f"Converted to keep the hours: {cluster.horizon_steps} steps of {cluster.step_minutes} "
        f"min, every step number and demand value with them, decay {policy.decay:.4g} per step "
        f"(half-life {common.format_hours(policy.half_life_hours(cluster.step_minutes))})."
    )


# (with nodes the GPUs come from the node table: no GPUs field, so no key for it)
drawn_keys = [k for f, k in CLUSTER_KEYS.items() if f != "gpus" or not c.nodes]
if st.session_state.get(K_CLUSTER_SHOWS) is not s or any(
    k not in st.session_state for k in drawn_keys
):
    for field, value in views.cluster_fields(c).items():
        st.session_state[CLUSTER_KEYS[field]] = value
    st.session_state[K_CLUSTER_SHOWS] = s
    st.session_state.pop("wl_cluster_error", None)

with st.expander("Cluster and horizon", expanded=False):
    st.caption(
        "The cluster and horizon every planner uses, and the ones an uploaded CSV pair is read "
        "into. A longer horizon repeats the real-time demand from its first step."
    )
    k1, k2, k3, k4, k5 = st.columns(5)
    if c.nodes:
        k1.markdown(f"GPUs  \n**{c.gpus}**, from the nodes below")
    else:
        k1.number_input("GPUs", 1, 65536, key=CLUSTER_KEYS["gpus"], on_change=_apply_cluster)
    k2.number_input(
        "Horizon (steps)", 1, 10080, key=CLUSTER_KEYS["steps"], on_change=_apply_cluster
    )
    k3.number_input(
        "Step (minutes)", 1, 10080, key=CLUSTER_KEYS["minutes"], on_change=_apply_cluster
    )
    k4.date_input("Start date", key=CLUSTER_KEYS["date"], on_change=_apply_cluster)
    k5.time_input(
        "Start time",
        key=CLUSTER_KEYS["time"],
        on_change=_apply_cluster,
        step=timedelta(minutes=c.step_minutes if c.step_minutes < 1440 else 60),
    )
    change = st.session_state.get(K_STEP_CHANGE)
    if change is not None and change["scenario"] is not s:  # the workload changed since
        st.session_state.pop(K_STEP_CHANGE)
        change = None
    if change is not None:
        st.warning(views.step_change_words(s, change["from"]), icon=":material/schedule:")
        try:
            kept = views.keep_hours(s, change["from"])
        except ScenarioError as e:
            st.caption(f"No exact conversion keeps the hours: {e}.")
        else:
            st.button(
                f"Keep the hours instead: {kept.cluster.horizon_steps} steps of "
                f"{kept.cluster.step_minutes} min",
                key="wl_keep_hours",
                on_click=_keep_hours,
                args=(kept,),
                help="Converts the step numbers (horizon, arrivals, deadlines, running steps "
                "left) and holds each demand value over the new steps, so every time keeps its "
                "hours; the decay per step changes so that its half-life in hours stays. Swap "
                "caps stay per step.",
            )
    if st.session_state.get("wl_hours_kept"):
        st.success(st.session_state.pop("wl_hours_kept"))
    if st.session_state.get("wl_cluster_error"):
        st.error(
            "Not applied: "
            + "; ".join(st.session_state["wl_cluster_error"][:5])
            + ". Change the value or the jobs that do not fit."
        )

nodes_editor.render(s)  # the node groups and GPU types (SPEC section 8), or a button to start

jobs_table, demand_table, dropped_note = common.editor_data(s)  # pending edits drawn again
if dropped_note:
    st.info(dropped_note)
version = common.scenario_version()
jobs_tab, demand_tab = st.tabs(["Jobs", "Real-time demand"])
with jobs_tab:
    st.caption(
        "One row per job. Batch jobs (training, batch_inference, quantization) need gpu_hours and "
        "power-of-two gpus_min/gpus_max; real-time jobs need swap_cap and get demand on the next "
        "tab. Add a row at the bottom, delete with the row checkbox. running_* pins a job that "
        "is already on GPUs [gpu_start, gpu_start+gpus)."
        + (
            " On this cluster of nodes, 'allowed GPU types' (e.g. 'A10, H100'; blank = any) and "
            "'min memory GB' hold a job to some types, and an unticked 'multi-node' keeps a "
            "batch job on one node."
            if c.nodes
            else ""
        )
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
            # Not `required`: the grid holds back a new row with a required cell empty, and
            # drops it unsaid when another edit redraws the editor. Every row reaches
            # validation, which names each empty cell and what belongs there.
            "id": st.column_config.TextColumn("id", help="unique job id"),
            "type": st.column_config.SelectboxColumn("type", options=common.JOB_TYPE_OPTIONS),
            # No min_value on any number column: the grid drops a typed minus sign under
            # one, so -5 became 5 and passed. Every value reaches validation, which names
            # the row, the job and the field.
            "priority": st.column_config.NumberColumn(
                "priority", format="%g", help="> 0; higher is more valuable"
            ),
            "arrival_step": st.column_config.NumberColumn(
                "arrival", step=1, help="batch: first step it may start"
            ),
            "gpus_min": st.column_config.NumberColumn("gpus_min", step=1),
            "gpus_max": st.column_config.NumberColumn("gpus_max", step=1),
            "gpu_hours": st.column_config.NumberColumn(
                "gpu_hours", format="%g", help="batch: total work in GPU-hours, > 0"
            ),
            "swap_cap": st.column_config.NumberColumn(
                "swap_cap",
                step=1,
                help="real-time: GPUs gained + released per step at most",
            ),
            "running_gpu_start": st.column_config.NumberColumn("running from GPU", step=1),
            "running_gpus": st.column_config.NumberColumn("running GPUs", step=1),
            "running_remaining_steps": st.column_config.NumberColumn("running steps left", step=1),
            "previous_gpus": st.column_config.TextColumn(
                "previous GPUs",
                help="real-time: GPUs held just before step 0, e.g. '6 7'; '[]' = held no GPU "
                "(step 0 then obeys the swap cap); blank = step 0 is free",
            ),
            "team": st.column_config.TextColumn("team", help="optional: who owns the job"),
            "deadline_step": st.column_config.NumberColumn(
                "deadline step",
                step=1,
                help="batch, optional: the step by which the job should have completed",
            ),
            # SPEC section 8 (clusters with nodes only)
            "gpu_types": st.column_config.TextColumn(
                "allowed GPU types",
                help="optional: the GPU types the job may use, e.g. 'A10, H100'; blank = any "
                "type (see 'Nodes and GPU types')",
            ),
            "min_gpu_memory_gb": st.column_config.NumberColumn(
                "min memory GB",
                format="%g",
                help="optional: leaves out GPU types with less memory per GPU (or none given)",
            ),
            "multi_node": st.column_config.CheckboxColumn(
                "multi-node",
                help="batch: may its block span whole nodes? Unticked keeps it on one node",
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
                        j: st.column_config.NumberColumn(j, format="%g")  # no min_value: see jobs
                        for j in demand_table.columns
                    },
                },
            )
        with chart_col:
            st.plotly_chart(
                demand_figure(s), key="wl_chart_demand", config={"displayModeBar": False}
            )
        edited_demand = edited.drop(columns=["time"])

K_IGNORED = "wl_ignored_cells"  # cells the last applied edits did not use: said after the rerun

result = common.scenario_from_editor(s, edited_jobs, edited_demand)
ignored = common.ignored_lines(edited_jobs, result)
if result.ok:
    st.session_state.pop(common.K_PENDING_EDITS, None)
if result.ok and (result.scenario != s or ignored):
    # Valid edits become the workload, and the editors are drawn from it: a value in a cell
    # its job's type does not use is cleared there, so the tables show what is planned.
    if ignored:
        st.session_state[K_IGNORED] = ignored
    if result.scenario != s:
        common.set_scenario(result.scenario, "edited")
    else:
        common.renew_editors()
    st.rerun()
cleared = st.session_state.pop(K_IGNORED, None)
if cleared or ignored:
    st.warning(
        (
            "**Cleared: these cells do not apply to their job's type**, so the workload does "
            "not use them (change the type first to give a job such a value):"
            if cleared
            else "**These cells do not apply to their job's type**: they will be cleared, not "
            "used, when the edits are valid:"
        )
        + "".join(f"\n- {line}" for line in cleared or ignored),
        icon=":material/ink_eraser:",
    )
if not result.ok:
    common.keep_pending_edits(s, edited_jobs, edited_demand)  # kept when the page is left
    message, discard = st.columns([5, 1], vertical_alignment="center")
    message.error(
        "These edits break a rule, so they are **not** active yet; the last valid workload "
        "is still planned. They are kept while you visit other pages. Fix the rows listed "
        "here, or discard the edits:"
    )
    discard.button(
        "Discard edits",
        key="wl_discard_edits",
        on_click=common.discard_pending_edits,
        width="stretch",
        help="Drop every edit that is not active yet; the editors show the active workload.",
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

# --- estimators --------------------------------------------------------------------------------
st.subheader(
    "Estimate a new job and add it to the workload",
    help="A training or quantization job sized from its description; it is checked against "
    "the cluster and horizon before you add it.",
)


def _fit_warning(row: dict) -> None:
    """The earliest finish of the estimated job, and a warning when it cannot run or finish."""
    check = views.fit_check(row, s.cluster)
    finish = views.step_time(s.cluster, check.earliest_finish_step)
    if check.fits:
        st.caption(
            f"Earliest finish: {finish}, if it gets {min(row['gpus_max'], s.cluster.gpus)} GPUs "
            f"from its arrival; the horizon ends at step {s.cluster.horizon_steps}."
        )
    else:
        st.warning(
            f"'{row['id']}' {check.warnings[0]}. You can still add it, but no planner can "
            "complete it: raise the cluster or the horizon under 'Cluster and horizon', or "
            "shorten the job."
        )


def _add_job(row: dict) -> None:
    current = common.scenario()
    try:
        job = job_from_dict(row, len(current.jobs))
        common.set_scenario(current.replace(jobs=(*current.jobs, job)), f"added '{job.id}'")
        st.session_state["est_added"] = f"Added '{job.id}' to the workload."
    except ScenarioError as e:
        st.session_state["est_added_error"] = str(e)


def _keep_estimate(key: str, estimate) -> None:
    """Keep (estimate, job row) under `key`, or the error message under `key + '_error'`."""
    try:
        st.session_state[key] = estimate()
        st.session_state.pop(f"{key}_error", None)
    except ScenarioError as e:
        st.session_state[f"{key}_error"] = str(e)
        st.session_state.pop(key, None)


def _job_fields(prefix: str, default_id: str, default_priority: float):
    """Job id, priority and arrival step: the first row of both estimator forms."""
    a, b, c = st.columns(3)
    return (
        a.text_input("Job id", default_id, key=f"{prefix}_id"),
        b.number_input("Priority", 0.1, 100.0, default_priority, key=f"{prefix}_priority"),
        c.number_input("Arrival step", 0, s.cluster.horizon_steps - 1, 0, key=f"{prefix}_arrival"),
    )


training_tab, quant_tab = st.tabs(["Training job", "Quantization job"])
with training_tab:
    from core.forecast import training

    with st.form("est_training_form"):
        t_id, t_priority, t_arrival = _job_fields("est_t", "sft-new", 5.0)
        a, b, c = st.columns(3)
        variant = a.selectbox(
            "Variant", training.VARIANTS, key="est_t_variant", help=training.FEATURES["variant"]
        )
        params = b.number_input("Parameters (billions)", 0.1, 2000.0, 8.0, key="est_t_params")
        tokens = c.number_input(
            "Training tokens (billions)",
            0.001,
            10000.0,
            1.0,
            key="est_t_tokens",
            help=training.FEATURES["train_tokens_billion"],
        )
        a, b, c = st.columns(3)
        epochs = a.number_input("Epochs", 0.1, 100.0, 1.0, key="est_t_epochs")
        seq_len = b.number_input("Sequence length", 128, 1_000_000, 4096, key="est_t_seq")
        lora_rank = c.number_input(
            "LoRA rank (LoRA variants)",
            0,
            4096,
            16,
            key="est_t_rank",
            help=training.FEATURES["lora_rank"],
        )
        a, b, c = st.columns(3)
        gpu_type = a.selectbox("GPU type", training.GPU_TYPES, index=1, key="est_t_gpu")
        memory = b.number_input("GPU memory (GB)", 8.0, 512.0, 80.0, key="est_t_memory")
        precision = c.selectbox("Precision", training.PRECISIONS, key="est_t_precision")
        with st.expander("RL features (RLHF / RLVR only)"):
            a, b = st.columns(2)
            rollouts = a.number_input("Rollouts per prompt", 0, 1024, 0, key="est_t_rollouts")
            generation = b.number_input(
                "Generated tokens per rollout", 0, 1_000_000, 0, key="est_t_generation"
            )
            reward = a.number_input("Reward model (billions)", 0.0, 2000.0, 0.0, key="est_t_reward")
            verifier = b.number_input(
                "Verifier seconds per rollout", 0.0, 3600.0, 0.0, key="est_t_verifier"
            )
        estimate_training = st.form_submit_button("Estimate", key="est_t_estimate")
    if estimate_training:
        run = {
            "variant": variant,
            "params_billion": params,
            "train_tokens_billion": tokens,
            "epochs": epochs,
            "seq_len": int(seq_len),
            "lora_rank": int(lora_rank) if variant.startswith("lora") else 0,
            "gpu_type": gpu_type,
            "gpu_memory_gb": memory,
            "precision": precision,
            "rollouts_per_prompt": int(rollouts),
            "generation_tokens": int(generation),
            "reward_model_billion": reward,
            "verifier_seconds": verifier,
        }

        def _estimate_training():
            est = training.default_training_model().estimate(run)
            return est, est.job_row(
                t_id.strip(), t_priority, int(t_arrival), max_gpus=s.cluster.gpus
            )

        with st.spinner("Estimating (the model is fitted on first use) ..."):
            _keep_estimate("est_training", _estimate_training)
    if st.session_state.get("est_training_error"):
        st.error(st.session_state["est_training_error"])
    if "est_training" in st.session_state:
        est, row = st.session_state["est_training"]
        m1, m2, m3 = st.columns(3)
        m1.metric(
            "GPU-hours (median)",
            f"{est.gpu_hours:,.1f}",
            help=f"{est.level:.0%} interval {est.lower:,.1f} – {est.upper:,.1f}",
        )
        m2.metric("GPUs (memory minimum)", est.gpus_min)
        m3.metric(
            "GPUs recommended",
            est.gpus_recommended,
            help="Finishes within a day where data parallelism allows",
        )
        st.caption(
            f"{est.level:.0%} interval: {est.lower:,.1f} – {est.upper:,.1f} GPU-hours. "
            f"Job row: gpus {row['gpus_min']}..{row['gpus_max']} (capped to the "
            f"cluster), {row['gpu_hours']} GPU-hours."
        )
        _fit_warning(row)
        st.button(
            f"Add '{row['id']}' to the workload", key="est_t_add", on_click=_add_job, args=(row,)
        )

with quant_tab:
    from core.forecast import quantization

    with st.form("est_quant_form"):
        q_id, q_priority, q_arrival = _job_fields("est_q", "quant-new", 4.0)
        a, b, c = st.columns(3)
        q_params = a.number_input("Parameters (billions)", 0.1, 2000.0, 70.0, key="est_q_params")
        algorithm = b.selectbox(
            "Algorithm", quantization.ALGORITHMS, index=1, key="est_q_algorithm"
        )
        margin = c.number_input(
            "Safety margin",
            0.0,
            5.0,
            quantization.DEFAULT_MARGIN,
            step=0.05,
            key="est_q_margin",
            format="%.2f",
        )
        estimate_quant = st.form_submit_button("Estimate", key="est_q_estimate")
    if estimate_quant:

        def _estimate_quantization():
            q = quantization.estimate_quantization(float(q_params), algorithm, float(margin))
            return q, q.job_row(q_id.strip(), q_priority, int(q_arrival), max_gpus=s.cluster.gpus)

        _keep_estimate("est_quant", _estimate_quantization)
    if st.session_state.get("est_quant_error"):
        st.error(st.session_state["est_quant_error"])
    if "est_quant" in st.session_state:
        q, row = st.session_state["est_quant"]
        m1, m2, m3 = st.columns(3)
        m1.metric(
            "GPU-hours",
            q.gpu_hours,
            help=f"tier {q.base_gpu_hours:g} h + {q.margin:.0%} margin, rounded up",
        )
        m2.metric("GPUs", q.gpus)
        m3.metric("Tier", q.tier)
        _fit_warning(row)
        st.button(
            f"Add '{row['id']}' to the workload", key="est_q_add", on_click=_add_job, args=(row,)
        )

if st.session_state.get("est_added"):
    st.success(st.session_state.pop("est_added"))
if st.session_state.get("est_added_error"):
    st.error(st.session_state.pop("est_added_error"))

st.subheader("Download the workload")
st.caption("The active workload: the last valid one, with the policy set on Plan & compare.")
jobs_csv, demand_csv = scenario_to_tables(s)
d1, d2, d3 = st.columns(3)
for column, name, text, mime, key in (
    (d1, export_name(s, None, "") + ".json", scenario_to_json(s), "application/json", "json"),
    (d2, export_name(s, None, "jobs.csv"), jobs_csv, "text/csv", "jobs"),
    (d3, export_name(s, None, "demand.csv"), demand_csv, "text/csv", "demand"),
):  # named as the plan exports are, safe as file names (an import's name holds a time)
    column.download_button(
        name, text, file_name=name, mime=mime, key=f"wl_dl_{key}", width="stretch"
    )
