"""Demand forecast: weekly profile of real-time traffic, GPU path, coverage risk; job estimators."""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st

from core import charts, views
from core.forecast.demand import (
    coverage_risk,
    demand_quantile,
    forecast_series,
    gpu_path_from_forecast,
    gpus_needed,
    load_history,
)
from core.formats import MAX_UPLOAD_MB
from core.model import ScenarioError
from core.plan import holdings
from core.planners import BASELINE, FAST
from pages import common

common.page_header(
    "Demand forecast",
    "Fit the weekly profile of a real-time service's hourly traffic, turn it into GPUs under the "
    "swap cap, see the risk that a plan falls short, and put the forecast into the workload. "
    "(New training and quantization jobs are estimated on the Workload page.)",
)
common.sidebar_summary()
SAMPLE = common.ROOT / "data" / "histories" / "chat_requests_hourly.csv"


@st.cache_data(show_spinner=False, max_entries=8)
def _sample_history(path: str, mtime: float) -> tuple[pd.Series, list[str]]:
    return load_history(Path(path))


@st.cache_data(show_spinner=False, max_entries=32)
def _forecast(
    history: pd.Series, horizon: int, level: float
) -> tuple[pd.DataFrame, str, list[str], str]:
    """Pure and keyed by its inputs (the series, horizon, level): the forecast, the model, the
    report's lines (anomalies repaired, members combined, trend, interval) and its headline
    (which member won, the backtest against seasonal naive, the measured coverage)."""
    frame, report = forecast_series(history, horizon, level, report=True)
    return frame, str(frame.attrs.get("model", "")), report.lines(), report.headline()


# --- the history -------------------------------------------------------------------------------
s = common.scenario()
# Real-time jobs of the workload with a history to fit (an imported one has its GPUs per hour)
own = [j.id for j in s.realtime_jobs if j.id not in views.jobs_without_history(s)]
JOB_HISTORY, SAMPLE_HISTORY, UPLOAD = "A real-time job's history", "Sample history", "Upload a CSV"
sources = ([JOB_HISTORY] if own else []) + [SAMPLE_HISTORY, UPLOAD]
common.init_widget("fc_source", sources[0])
if st.session_state["fc_source"] not in sources:  # (another workload, without a history)
    st.session_state["fc_source"] = sources[0]
source_col, level_col = st.columns([3, 1])
with source_col:
    source = st.radio(
        "Hourly traffic history",
        sources,
        key="fc_source",
        horizontal=True,
        on_change=common.remember,
        args=("fc_source",),
        help="A real-time job's own history in the workload (GPUs per hour, e.g. from an "
        "imported scheduler history); the sample; or a CSV whose first column is the hour (e.g. "
        "2026-08-17 13:00) and another column the traffic (e.g. requests per hour).",
    )
    history_job = None
    if source == JOB_HISTORY:
        history_job = st.selectbox(
            "Job", own, key="fc_history_job", help="Its history before step 0, in GPUs"
        )
with level_col:
    common.init_widget("fc_quantile", 0.9)
    quantile = st.select_slider(
        "Plan for this quantile of demand",
        [0.6, 0.75, 0.8, 0.9, 0.95, 0.99],
        key="fc_quantile",
        format_func=lambda v: f"{v:.0%}",
        on_change=common.remember,
        args=("fc_quantile",),
        help="The GPUs below cover demand at this quantile of the forecast; the chart shades "
        "the central interval whose upper edge is this quantile.",
    )
level = round(2 * quantile - 1, 4)  # central interval whose upper edge is the quantile

if source == UPLOAD:
    upload = st.file_uploader(
        f"History CSV (up to {MAX_UPLOAD_MB} MB)",
        type=["csv"],
        key="fc_upload",
        max_upload_size=MAX_UPLOAD_MB,
    )
    if upload is not None and st.session_state.get("fc_upload_id") != upload.file_id:
        st.session_state["fc_upload_id"] = upload.file_id
        try:
            series, warnings = load_history(upload.getvalue(), name=upload.name)
            st.session_state["fc_history"] = (upload.name, series, warnings)
            st.session_state.pop("fc_error", None)
        except ScenarioError as e:
            st.session_state["fc_error"] = str(e)
    if st.session_state.get("fc_error"):
        st.error(f"{st.session_state['fc_error']}\n\nThe last good history stays in use.")

if history_job is not None:
    history, load_warnings = views.history_series(s, history_job), []
    history_name = f"'{history_job}' history"
elif source == UPLOAD and "fc_history" in st.session_state:
    history_name, history, load_warnings = st.session_state["fc_history"]
else:
    if source == UPLOAD:
        st.info("No history uploaded yet: showing the sample.")
    history, load_warnings = _sample_history(str(SAMPLE), SAMPLE.stat().st_mtime)
    history_name = SAMPLE.name
for warning in load_warnings:
    st.warning(f"{history_name}: {views.without_name_prefix(history_name, warning)}")

window = views.aligned_hours(history.index[-1], s)
unit = views.traffic_unit(history.name)
with st.spinner("Fitting the weekly profile ..."):
    try:
        forecast, model, report_lines, headline = _forecast(history, window.horizon, float(level))
    except ScenarioError as e:
        st.error(f"{history_name}: {views.without_name_prefix(history_name, str(e))}")
        st.stop()
steps_frame = forecast.iloc[list(window.hours)]
span = (steps_frame.index[0], steps_frame.index[-1])
# A job's own history in a workload without a start time (an import of a relative trace) has
# no dates: its hours are drawn from step 0, not from the Monday the forecaster assumes.
undated = history_job is not None and s.cluster.start is None
step_0 = history.index[-1] + pd.Timedelta(hours=1) if undated else None
st.plotly_chart(
    charts.forecast_figure(
        forecast, history, level=float(level), highlight=span, unit=unit, step_0=step_0
    ),
    key="fc_chart_forecast",
    config={"displayModeBar": False},
)
until = "step 0" if undated else f"{history.index[-1]:%Y-%m-%d %H:%M}"
st.caption(
    f"{history_name}: {len(history):,} hours up to {until}; "
    f"model: **{model}**; band: the central {level:.0%} interval (its upper "
    f"edge is the {quantile:.0%} quantile); shaded: the scenario's horizon. {window.note}"
)
st.markdown(f"**How well it forecasts this history**: {headline}.")
with st.expander("How the forecast was made: repairs, anomalies, members, interval"):
    st.markdown("\n".join(f"- {line}" for line in report_lines) or "Nothing to report.")

# --- from traffic to GPUs ------------------------------------------------------------------------
st.subheader("GPUs for a real-time job")
st.caption(
    "Traffic becomes GPUs through what one GPU serves; the path is the GPU count per "
    "step that covers the chosen quantile while changing by at most the job's swap cap."
)
rt = s.realtime_jobs
if not rt:
    st.info(
        "The active workload has no real-time job: add one on the Workload page to map "
        "this forecast to GPUs."
    )
else:
    c1, c2 = st.columns([1, 2])
    with c1:
        if history_job is not None:  # the forecast is of this job's own GPUs
            job_id = st.selectbox("Real-time job", [history_job], key="fc_job_own", disabled=True)
        else:
            job_id = st.selectbox("Real-time job", [j.id for j in rt], key="fc_job")
    job = next(j for j in rt if j.id == job_id)
    if history_job is not None:
        capacity = 1.0
        with c2:
            st.caption(
                f"'{job.id}' history counts the GPUs it held each hour, so the forecast is in "
                "GPUs already: one GPU serves one GPU of it."
            )
    else:
        capacity_key = f"fc_capacity_{job.id}_{history_name}"
        suggested = views.default_capacity(history, job.demand)
        common.init_widget(capacity_key, suggested)
        with c2:
            capacity = st.number_input(
                f"Traffic one GPU serves ({unit})",
                min_value=0.001,
                key=capacity_key,
                on_change=common.remember,
                args=(capacity_key,),
                help="How much of this traffic one GPU of the job handles: measure it, or keep "
                "the default, which assumes the job's current demand serves the history's last "
                "week.",
            )
    # the job's demand (GPUs per step) that plans for this forecast, and whether it already does
    new_demand = np.round(demand_quantile(steps_frame, quantile) / capacity, 3)
    in_use = np.allclose(np.asarray(job.demand, dtype=float), new_demand, atol=1e-3)
    if history_job is None:
        recent = float(history.dropna().iloc[-168:].mean())
        if in_use and capacity != suggested:
            st.caption(
                f"'{job.id}' plans for this forecast at {capacity:,.4g} {unit} a GPU, the value "
                f"it was put into the workload with; a default taken from that demand now "
                f"({suggested:,.4g}) would count the forecast's headroom twice."
            )
        else:
            st.caption(
                f"Default {suggested:,.4g}: the history's last week averages {recent:,.4g} "
                f"{unit}, and '{job.id}' asks for {float(np.mean(job.demand)):,.2f} GPUs on "
                f"average in the workload now, so one GPU serves about {suggested:,.4g}. Change "
                "it to what one GPU really serves."
            )

    previous = len(job.previous_gpus) if job.previous_gpus is not None else None
    path = gpu_path_from_forecast(
        steps_frame, capacity, quantile, job.gpus_min, job.gpus_max, job.swap_cap, previous
    )
    plans = common.ensure_plans(s, [BASELINE, FAST])
    labels = charts.step_labels(s)
    allocated = {name: holdings(s, plan)[s.job_index(job.id)] for name, plan in plans.items()}
    shown = FAST if FAST in allocated else next(iter(allocated), None)
    st.plotly_chart(
        charts.gpu_path_figure(
            labels,
            gpus_needed(steps_frame["mean"], capacity),
            gpus_needed(demand_quantile(steps_frame, quantile), capacity),
            path,
            allocated=allocated.get(shown),
            swap_cap=job.swap_cap,
            allocated_name=f"{shown} plan" if shown else None,
            upper_name=f"GPUs at the {quantile:.0%} quantile",
        ),
        key="fc_chart_path",
        config={"displayModeBar": False},
    )
    risk = np.vstack([coverage_risk(steps_frame, gpus, capacity) for gpus in allocated.values()])
    st.plotly_chart(
        charts.coverage_risk_figure(
            risk,
            labels,
            [f"{name} plan" for name in allocated],
            title=f"Coverage risk of '{job.id}': P(demand > GPUs the plan gives it)",
        ),
        key="fc_chart_risk",
        config={"displayModeBar": False},
    )
    worst = {name: float(r.max()) for name, r in zip(allocated, risk, strict=True)}
    highest = "Highest risk in a step: " + ", ".join(f"{n} {v:.0%}" for n, v in worst.items())
    if in_use:
        st.caption(
            f"{highest}. '{job.id}' already plans for this {quantile:.0%} forecast (its demand "
            "is the forecast), so these are the risks of plans made for it."
        )
    else:
        st.caption(
            f"{highest}. The plans are those of the active workload, made for its current "
            f"demand of '{job.id}' (peak {max(job.demand):,.2f} GPUs), not for this forecast: put "
            "the forecast into the workload below and they re-plan for it."
        )

    if st.button(
        f"Use the {quantile:.0%} forecast as the demand of '{job.id}'",
        key="fc_apply",
        type="primary",
        disabled=in_use,
        help="Replaces the job's demand (in GPUs) for every step of the horizon; the "
        "Workload page and the planners then use it.",
    ):
        history_gpus = None
        if history_job is None and s.cluster.step_minutes == 60:
            history_gpus = views.history_before_start(history, window, capacity)
        try:
            jobs = tuple(
                replace(
                    j,
                    demand=tuple(float(d) for d in new_demand),
                    history=history_gpus or j.history,
                )
                if j.id == job.id
                else j
                for j in s.jobs
            )
            # back on this page, the same history and what one GPU serves (its default would be
            # taken from the new demand: each apply would raise the demand again)
            st.session_state["keep_fc_source"] = source
            if history_job is None:
                st.session_state["keep_" + capacity_key] = capacity
            common.set_scenario(s.replace(jobs=jobs), f"forecast into '{job.id}'")
            st.session_state["fc_applied"] = (
                f"'{job.id}' now plans for the {quantile:.0%} "
                f"forecast (peak {new_demand.max():.1f} GPUs)."
            )
            st.rerun()
        except ScenarioError as e:
            st.error(str(e))
    if st.session_state.get("fc_applied"):
        st.success(st.session_state.pop("fc_applied"))
