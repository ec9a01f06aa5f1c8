"""The history import on the Workload page, and the as-run card on Plan & compare.

A scheduler history (sacct, pod list, job log) is read once per upload into the importer's job
table; the window controls re-map that table; "Load this window" makes the window's scenario
the active one and keeps what the real scheduler did (as-run) beside it in the session. The
as-run belongs to exactly that workload: Plan & compare shows it while the active scenario is
the imported one (its policy and swap caps aside), and drops it after an edit or another load.
The pure work lives in core.history_view.
"""

from __future__ import annotations

import hashlib
from typing import Any

import streamlit as st

from core import charts, views
from core.formats import MAX_HISTORY_UPLOAD_MB, MAX_UPLOAD_MB
from core.formats.history import ImportRules, ImportWindow, rounding_line, rows_line
from core.history_view import (
    FORMAT_LABELS,
    STEP_MINUTES_CHOICES,
    Trace,
    as_run_applies,
    chart_frame,
    count_rows,
    default_window,
    dropped_jobs,
    preview,
    read_upload,
    realtime_rows,
)
from core.model import IMPORT_STEP_MINUTES, MAX_GPUS, ScenarioError
from core.planners import BASELINE
from pages import common

# Session-state keys (not widgets): the parsed upload, its previews, the loaded as-run.
K_TRACE = "hi_trace"  # {"id", "trace" | None, "error" | None}
K_PREVIEWS = "hi_previews"  # {(trace id, window, rules): ImportResult}
K_OPEN = "hi_open"  # the expander's open state (a widget: lazy, only drawn when open)
K_AS_RUN = "history_as_run"  # {"scenario", "as_run", "summary"} of the loaded window
AS_RUN_TITLE = "As run (your scheduler)"  # short: the card's rows line up with the planners'
EXPANDER = "Import a scheduler history (Slurm sacct, Kubernetes pods, Helios/Acme logs)"
SACCT = (
    "sacct -a -X -P --format=JobIDRaw,JobID,User,Account,Partition,QOS,Priority,Submit,Eligible,"
    "Start,End,ElapsedRaw,TimelimitRaw,State,AllocTRES,ReqTRES,NNodes,NodeList"
)


# ---------------------------------------------------------------------------------------------
# Workload page


def render() -> None:
    """The expander with the history upload, its preview and the load button."""
    loaded = st.session_state.get(K_AS_RUN)
    expanded = bool(st.session_state.get("hi_upload")) or (
        loaded is not None and as_run_applies(loaded["scenario"], common.scenario())
    )
    box = st.expander(
        EXPANDER, expanded=expanded, icon=":material/history:", key=K_OPEN, on_change="rerun"
    )
    if box.open:  # lazy: a closed expander reads nothing and draws no uploader
        with box:
            _render_body()


def _render_body() -> None:
    up, rules_col = st.columns([3, 1])
    with up:
        file = st.file_uploader(
            f"History file (up to {MAX_HISTORY_UPLOAD_MB} MB; the format is detected from its "
            "content)",
            key="hi_upload",
            max_upload_size=MAX_HISTORY_UPLOAD_MB,
            help=f"Up to {MAX_HISTORY_UPLOAD_MB} MB (a larger one is refused by the uploader: its "
            "chip turns red); import a larger export on the command line (`gpuplan import FILE "
            "--out scenario.json`, up to 2 GB) and upload the scenario. "
            + "; ".join(FORMAT_LABELS.values())
            + f". Slurm: `{SACCT}`.",
        )
    with rules_col:
        rules_file = st.file_uploader(
            "Rules (optional JSON)",
            type=["json"],
            key="hi_rules",
            max_upload_size=MAX_UPLOAD_MB,
            help="Regular expressions that map partition, QOS, job name or type to job types "
            "and priorities (the README's 'Importing a scheduler history'); the defaults "
            "treat serv|infer|online|realtime and openb qos LS as real-time.",
        )
    if file is None:
        st.caption(
            "A scheduler's own export becomes a workload for the window you pick, and Plan & "
            "compare then shows what your scheduler really did beside the planners. Slurm: "
            f"`{SACCT}`; Kubernetes: `kubectl get pods -A -o json` or an openb pod list; "
            "Helios `cluster_log.csv`; Acme traces."
        )
        return
    read = _trace(file)
    if read is None:
        return
    trace, defaults = read
    try:
        rules = _rules(rules_file)
    except ScenarioError as e:
        st.error(f"**The rules were not used.** {e}")
        return
    info = trace.info
    span = (
        "a packing snapshot (no times)"
        if defaults.snapshot
        else f"trace from {defaults.first} to {defaults.last}"
    )
    st.markdown(
        f"**{trace.name}**: {trace.label} · {info.rows:,} rows · {span}"
        + (f" · the trace's cluster has {info.cluster_gpus:,} GPUs" if info.cluster_gpus else "")
    )
    window = _window_controls(trace, defaults, rules)
    if window is None:
        return
    result = _preview(trace, window, rules)
    if result is None:
        return
    _show_preview(trace, result)
    if st.button("Load this window", type="primary", key="hi_load", icon=":material/upload:"):
        _load(trace, result)
        st.rerun()
    loaded = st.session_state.get(K_AS_RUN)
    if (
        loaded is not None
        and loaded["scenario"] == result.scenario
        and as_run_applies(loaded["scenario"], common.scenario())
    ):
        st.success(
            "This window is the active workload. **Plan & compare** shows what your "
            "scheduler really did (*as run*) beside the planners."
        )
        st.page_link("pages/plan_compare.py", label="Plan & compare", icon=":material/compare:")


def _file_token(file: Any) -> str:
    data = file.getvalue()
    digest = hashlib.sha256(data).hexdigest()[:16]
    return f"{file.name}:{digest}"


def _trace(file: Any) -> tuple[Trace, Any] | None:
    """The upload parsed once, with its default window (kept in the session); an error leaves
    the scenario as it is."""
    token = _file_token(file)
    held = st.session_state.get(K_TRACE)
    if held is None or held["id"] != token:
        try:
            trace = read_upload(file.name, file.getvalue())
            # (its default window too: a trace with no GPU job is refused here, with a message)
            held = {"id": token, "trace": trace, "defaults": default_window(trace), "error": None}
        except ScenarioError as e:
            held = {"id": token, "trace": None, "error": str(e)}
        st.session_state[K_TRACE] = held
        st.session_state[K_PREVIEWS] = {}
    if held["error"]:
        st.error(
            f"**The history was not read; the active workload is unchanged.**\n\n{held['error']}"
        )
        return None
    return held["trace"], held["defaults"]


def _rules(rules_file: Any) -> ImportRules | None:
    if rules_file is None:
        return None
    text = rules_file.getvalue().decode("utf-8", errors="replace")
    return ImportRules.from_json(text, rules_file.name)


def _window_controls(trace: Trace, defaults: Any, rules: ImportRules | None) -> ImportWindow | None:
    token = st.session_state[K_TRACE]["id"]
    suffix = hashlib.sha256(token.encode()).hexdigest()[:8]  # new file: controls start over
    c1, c2, c3, c4 = st.columns([3, 2, 2, 2])
    with c1:
        if defaults.snapshot:
            start: str | float | None = None
            st.text_input(
                "Start",
                value="the snapshot (no times)",
                disabled=True,
                key=f"hi_start_s_{suffix}",
                help="A pod list without times is a packing snapshot: every GPU pod is present "
                "at the start and holds its GPUs for the whole window.",
            )
        elif defaults.relative:
            start = st.number_input(
                "Start (hours from the trace start)",
                min_value=0.0,
                value=float(defaults.start),
                step=24.0,
                format="%g",
                key=f"hi_start_h_{suffix}",
                help=f"This trace's times are relative; it spans {defaults.first} to "
                f"{defaults.last}. Default: the day holding the median submit time.",
            )
        else:
            start = (
                st.text_input(
                    "Start (ISO time)",
                    value=str(defaults.start),
                    key=f"hi_start_{suffix}",
                    help=f"The trace runs {defaults.first} to {defaults.last}. Default: the day "
                    "holding the median submit time.",
                ).strip()
                or None
            )
    with c2:
        days = st.number_input(
            "Days",
            min_value=0.25,
            max_value=28.0,
            value=1.0,
            step=0.25,
            format="%g",
            key=f"hi_days_{suffix}",
        )
    with c3:
        step_minutes = st.selectbox(
            "Step (minutes)",
            STEP_MINUTES_CHOICES,
            index=STEP_MINUTES_CHOICES.index(IMPORT_STEP_MINUTES),
            key=f"hi_step_{suffix}",
        )
    try:
        auto = ImportWindow(start=start, days=float(days), step_minutes=int(step_minutes))
        auto_result = _preview(trace, auto, rules, quiet=True)
    except ScenarioError as e:
        with c4:
            st.number_input("GPUs", value=None, disabled=True, key=f"hi_gpus_{suffix}")
        st.error(f"**This window cannot be imported.** {e}")
        return None
    default_gpus = auto_result.summary["window"]["gpus"] if auto_result is not None else None
    with c4:
        gpus = st.number_input(
            "GPUs",
            min_value=1,
            max_value=MAX_GPUS,
            value=None,
            step=1,
            placeholder=f"default {default_gpus}" if default_gpus else "default",
            key=f"hi_gpus_{suffix}",
            help="The cluster to plan. Default: the peak GPUs in use in the window, rounded up "
            f"to a power of two ({default_gpus} here). Leave empty for the default.",
        )
    try:
        return ImportWindow(
            start=start,
            days=float(days),
            step_minutes=int(step_minutes),
            gpus=int(gpus) if gpus is not None else None,
        )
    except ScenarioError as e:
        st.error(f"**This window cannot be imported.** {e}")
        return None


def _preview(
    trace: Trace, window: ImportWindow, rules: ImportRules | None, *, quiet: bool = False
) -> Any:
    """The window's ImportResult, mapped once per (file, window, rules) in this session."""
    key = (st.session_state[K_TRACE]["id"], window, rules)
    previews = st.session_state.setdefault(K_PREVIEWS, {})
    if key not in previews:
        try:
            previews[key] = preview(trace, window, rules)
        except ScenarioError as e:
            if quiet:
                raise
            st.error(f"**This window cannot be imported; the active workload is unchanged.** {e}")
            return None
        while len(previews) > 16:  # a few windows back and forth, not every one ever tried
            previews.pop(next(iter(previews)))
    return previews[key]


def _show_preview(trace: Trace, result: Any) -> None:
    summary, as_run = result.summary, result.as_run
    w, b = summary["window"], summary["batch"]
    dropped = dropped_jobs(summary)
    cols = st.columns(6)
    # (six cards a row: the unit in the label, counts with separators, so "1,024" is not clipped)
    cols[0].metric("Cluster GPUs", f"{w['gpus']:,}", help=w["gpus_source"])
    cols[1].metric("Batch jobs", f"{b['jobs']:,}", help="arriving, queued or running in the window")
    cols[2].metric(
        "Running at start",
        f"{b['running_at_start']:,}",
        help=f"Jobs already running when the window opens: {b['pinned']} pinned on an aligned "
        f"block for their real remaining time, {b['not_pinned']} did not fit and wait at step 0.",
    )
    cols[3].metric(
        "Rounded up",
        f"{b['rounded_up']:,}",
        help="Jobs whose GPU count was not a power of two take the next power of two.",
    )
    cols[4].metric("Jobs dropped", f"{dropped:,}", help="Reasons in the table below.")
    cols[5].metric(
        "Real-time groups",
        len(summary["realtime"]),
        help=f"{summary['realtime_jobs']} real-time jobs become one elastic job per group, "
        "whose demand is the GPUs they wanted, from creation to deletion.",
    )
    if summary.get("snapshot"):
        ran = (
            "Read as a packing snapshot (the file has no times): every GPU pod is a job "
            "present at the start that holds its GPUs for the whole window. Nothing ran, so "
            "there is no as-run to compare with."
        )
    else:
        ran = (
            f"As run: utilization {as_run['utilization']:.1%}, value {as_run['value']:,.0f}, "
            f"{as_run['completed_jobs']:,}/{as_run['batch_jobs']:,} batch jobs completed, "
            f"real-time coverage {as_run['rt_coverage']:.1%}."
        )
        rounding = rounding_line(summary)
        if rounding:
            ran += f" {rounding[0].upper()}{rounding[1:]}."
    st.caption(
        f"Window {w['start']} to {w['end']}: {w['steps']} steps of {w['step_minutes']} min; peak "
        f"{w['peak_gpus_in_use']:g} GPUs in use. {ran}"
    )
    st.caption(f"File {rows_line(summary)}.")
    table_col, chart_col = st.columns([2, 3])
    with table_col:
        counts = count_rows(summary)
        st.dataframe(
            counts,
            hide_index=True,
            width="stretch",
            height=35 * (len(counts) + 1) + 3,  # every count in view, no scrolling
            key="hi_counts",
            column_config={"jobs": st.column_config.NumberColumn("jobs", format="localized")},
        )
    with chart_col:
        if summary.get("snapshot"):  # (no time axis: nothing ran to chart)
            st.info(
                f"A snapshot has no time axis to chart: its {b['jobs']:,} GPU pods ask for "
                f"{w['peak_gpus_in_use']:,.0f} GPUs at once (on power-of-two blocks), on a "
                f"cluster of {w['gpus']:,} ({w['gpus_source']}). Set GPUs to the cluster to "
                "pack it on, and load it to see how each planner packs it."
            )
        else:
            st.plotly_chart(
                charts.history_demand_figure(chart_frame(result, trace), w["gpus"]),
                key="hi_chart",
                config={"displayModeBar": False},
            )
    if summary["realtime"]:
        st.dataframe(
            realtime_rows(summary).round({"GPU-hours": 1}),
            hide_index=True,
            width="stretch",
            key="hi_rt",
            column_config={  # separators, and GPU-hours to the tenth
                "jobs": st.column_config.NumberColumn(format="localized"),
                "GPU-hours": st.column_config.NumberColumn(format="localized"),
                "history (h)": st.column_config.NumberColumn(format="localized"),
            },
        )
    for note in summary["notes"]:
        st.caption(f"Note: {note}.")
    st.caption(f"Priority from {summary['priority_from']}.")


def _load(trace: Trace, result: Any) -> None:
    w = result.summary["window"]
    common.set_scenario(
        result.scenario, f"history: {trace.name} {w['start']}, {views.plural(w['days'], 'day')}"
    )
    st.session_state[K_AS_RUN] = {
        "scenario": result.scenario,
        "as_run": result.as_run,
        "summary": result.summary,
    }


# ---------------------------------------------------------------------------------------------
# Plan & compare


def as_run_for(s: Any) -> dict[str, Any] | None:
    """The loaded history's as-run metrics while `s` is still its workload; else None.

    The objective (decayed batch reward less the penalty of the real-time demand it missed)
    holds for the policy it was computed with: after a change of decay or reward weight it is
    left out. A packing snapshot has no as-run (nothing ran): None.
    """
    loaded = st.session_state.get(K_AS_RUN)
    if loaded is None or loaded["as_run"].get("snapshot"):
        return None
    if not as_run_applies(loaded["scenario"], s):
        st.session_state.pop(K_AS_RUN, None)  # edited or replaced: what ran no longer applies
        return None
    then, now = loaded["scenario"].policy, s.policy
    if (then.decay, then.reward_weight) != (now.decay, now.reward_weight):
        return {**loaded["as_run"], "objective": None}
    return loaded["as_run"]


def with_as_run(values: dict[str, Any], as_run: dict[str, Any] | None) -> dict[str, Any]:
    """The planners' metrics plus the as-run entry, for the utilization-vs-value chart."""
    return values if as_run is None else {**values, charts.AS_RUN: as_run}


def as_run_card(as_run: dict[str, Any], values: dict[str, Any]) -> None:
    """The as-run KPI card beside the planners' (same rows, deltas vs FIFO), what each other
    planner would have gained over it, and why it is not a legal grid."""
    base = values.get(BASELINE)

    def d(key: str) -> float | None:
        return None if base is None or as_run.get(key) is None else as_run[key] - base[key]

    with st.container(border=True, key="plan_as_run"):
        st.markdown(f"**{AS_RUN_TITLE}**")
        common.metric_vs_fifo(
            "Utilization (of GPU-h)",
            f"{as_run['utilization']:.1%}",
            d("utilization"),
            f"{(d('utilization') or 0) * 100:+.1f} pp",
            "GPU-time the trace's jobs held, on the same power-of-two blocks the planners "
            f"get ({as_run['utilization_real_gpus']:.1%} on their real GPU counts)",
        )
        gain = as_run["value"] / base["value"] - 1 if base is not None and base["value"] else None
        common.metric_vs_fifo(
            "Value (weighted GPU-h)",
            f"{as_run['value']:,.1f}",
            d("value"),
            f"{gain:+.1%}" if gain is not None else f"{d('value') or 0:+,.1f}",
            "Priority-weighted GPU-hours the trace's batch jobs ran in the window, each rounded "
            "up to whole steps as the plans are",
        )
        if as_run.get("objective") is None:
            st.metric(
                "Objective (weighted GPU-h)",
                "—",
                help="Computed for the policy of the import; load the window again to see it "
                "under this decay",
            )
        else:
            common.metric_vs_fifo(
                "Objective (weighted GPU-h)",
                f"{as_run['objective']:,.1f}",
                d("objective"),
                f"{d('objective') or 0:+,.1f}",
                "Decayed reward of the batch work that really ran, less the penalty of the "
                "real-time demand it did not serve",
            )
        common.metric_vs_fifo(
            "Completed jobs",
            f"{as_run['completed_jobs']:,}/{as_run['batch_jobs']:,}",
            d("completed_jobs"),
            f"{d('completed_jobs') or 0:+d}",
            "Batch jobs of the window that really ended inside it",
        )
        common.metric_vs_fifo(
            "Real-time coverage",
            f"{as_run['rt_coverage']:.1%}",
            d("rt_coverage"),
            f"{(d('rt_coverage') or 0) * 100:+.1f} pp",
            "Share of the serving demand (each pod from its creation to its deletion) that "
            "really ran: a pod never scheduled, or scheduled late, lowers it",
        )
        lines = []
        for name, m in values.items():
            if name == BASELINE:
                continue
            value = (
                f"{m['value'] / as_run['value'] - 1:+.0%} value"
                if as_run["value"] > 0
                else f"{m['value'] - as_run['value']:+,.0f} value"
            )
            lines.append(
                f"- **{common.planner_label(name)}**: "
                f"{(m['utilization'] - as_run['utilization']) * 100:+.1f} pp utilization, "
                f"{value}, {m['completed_jobs'] - as_run['completed_jobs']:+d} completed"
            )
        if lines:
            st.markdown("Over what really ran:\n" + "\n".join(lines))
        note = as_run["note"]
        st.caption(views.sentence(note))
