"""Demand forecast: weekly profile of real-time traffic, GPU path, coverage risk; job estimators."""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st

from core import charts
from core.forecast.demand import (
    coverage_risk,
    demand_quantile,
    forecast_series,
    gpu_path_from_forecast,
    gpus_needed,
    load_history,
)
from core.formats import MAX_UPLOAD_MB, job_from_dict
from core.model import ScenarioError
from core.plan import holdings
from core.planners import BASELINE, FAST
from pages import common

common.page_header(
    "Demand forecast",
    "Fit the weekly profile of a real-time service's hourly traffic, turn it into GPUs under the "
    "swap cap, see the risk that a plan falls short, and estimate new training or quantization "
    "jobs.",
)
common.sidebar_summary()
SAMPLE = common.ROOT / "data" / "histories" / "chat_requests_hourly.csv"


@st.cache_data(show_spinner=False, max_entries=8)
def _sample_history(path: str, mtime: float) -> tuple[pd.Series, list[str]]:
    return load_history(Path(path))


@st.cache_data(show_spinner=False, max_entries=32)
def _forecast(history: pd.Series, horizon: int, level: float) -> tuple[pd.DataFrame, str]:
    """Pure and keyed by its inputs (the series, horizon, level)."""
    frame = forecast_series(history, horizon, level)
    return frame, str(frame.attrs.get("model", ""))


# --- the history -------------------------------------------------------------------------------
source_col, level_col = st.columns([3, 1])
with source_col:
    source = st.radio(
        "Hourly traffic history",
        ["Sample history", "Upload a CSV"],
        key="fc_source",
        horizontal=True,
        on_change=common.remember,
        args=("fc_source",),
        help="A CSV whose first column is the hour (e.g. 2026-08-17 13:00) and "
        "another column the traffic (e.g. requests per hour).",
    )
with level_col:
    common.init_widget("fc_level", 0.9)
    level = st.select_slider(
        "Interval level",
        [0.5, 0.8, 0.9, 0.95, 0.99],
        key="fc_level",
        format_func=lambda v: f"{v:.0%}",
        on_change=common.remember,
        args=("fc_level",),
    )

if source == "Upload a CSV":
    upload = st.file_uploader(
        f"History CSV (up to {MAX_UPLOAD_MB} MB)", type=["csv"], key="fc_upload"
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

if source == "Upload a CSV" and "fc_history" in st.session_state:
    history_name, history, load_warnings = st.session_state["fc_history"]
else:
    if source == "Upload a CSV":
        st.info("No history uploaded yet: showing the sample.")
    history, load_warnings = _sample_history(str(SAMPLE), SAMPLE.stat().st_mtime)
    history_name = SAMPLE.name
for warning in load_warnings:
    st.warning(f"{history_name}: {warning}")

s = common.scenario()
window = common.forecast_window(history.index[-1], s)
with st.spinner("Fitting the weekly profile ..."):
    try:
        forecast, model = _forecast(history, window.horizon, float(level))
    except ScenarioError as e:
        st.error(f"{history_name}: {e}")
        st.stop()
steps_frame = forecast.iloc[list(window.hours)]
span = (steps_frame.index[0], steps_frame.index[-1])
st.plotly_chart(
    charts.forecast_figure(
        forecast, history, level=float(level), highlight=span, unit=str(history.name or "traffic")
    ),
    key="fc_chart_forecast",
    config={"displayModeBar": False},
)
st.caption(
    f"{history_name}: {len(history):,} hours up to {history.index[-1]:%Y-%m-%d %H:%M}; "
    f"model chosen by backtest: **{model}**; shaded: the scenario's horizon. "
    f"{window.note}"
)

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
    c1, c2, c3 = st.columns(3)
    with c1:
        job_id = st.selectbox("Real-time job", [j.id for j in rt], key="fc_job")
    job = next(j for j in rt if j.id == job_id)
    capacity_key = f"fc_capacity_{job.id}_{history_name}"
    common.init_widget(
        capacity_key, common.default_capacity(float(steps_frame["upper"].max()), job.gpus_max)
    )
    with c2:
        capacity = st.number_input(
            f"Traffic one GPU serves ({history.name or 'units'} per hour)",
            min_value=0.001,
            key=capacity_key,
            on_change=common.remember,
            args=(capacity_key,),
            help="Default: the forecast's upper peak over the horizon needs the job's gpus_max.",
        )
    with c3:
        common.init_widget("fc_quantile", 0.9)
        quantile = st.select_slider(
            "Plan for this quantile of demand",
            [0.5, 0.75, 0.8, 0.9, 0.95, 0.99],
            key="fc_quantile",
            format_func=lambda v: f"{v:.0%}",
            on_change=common.remember,
            args=("fc_quantile",),
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
    st.caption(
        "Highest risk in a step: "
        + ", ".join(f"{n} {v:.0%}" for n, v in worst.items())
        + f". The plans are those of the active workload, made for its current demand of "
        f"'{job.id}' (peak {max(job.demand):g} GPUs), not for this forecast: put the forecast "
        "into the workload below and they re-plan for it."
    )

    new_demand = np.round(demand_quantile(steps_frame, quantile) / capacity, 3)
    if st.button(
        f"Use the {quantile:.0%} forecast as the demand of '{job.id}'",
        key="fc_apply",
        type="primary",
        help="Replaces the job's demand (in GPUs) for every step of the horizon; the "
        "Workload page and the planners then use it.",
    ):
        history_gpus = None
        if window.hours[0] == 0 and s.cluster.step_minutes == 60:
            recent = history.iloc[-8 * 168 :].to_numpy(dtype=float) / capacity
            history_gpus = tuple(
                float(np.round(v, 3)) if np.isfinite(v) else float("nan") for v in recent
            )
        try:
            jobs = tuple(
                replace(
                    j,
                    demand=tuple(float(d) for d in new_demand),
                    history=history_gpus if history_gpus is not None else j.history,
                )
                if j.id == job.id
                else j
                for j in s.jobs
            )
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


# --- estimators --------------------------------------------------------------------------------
st.subheader("Estimate a new job and add it to the workload")


def _add_job(row: dict) -> None:
    current = common.scenario()
    try:
        job = job_from_dict(row, len(current.jobs))
        common.set_scenario(current.replace(jobs=(*current.jobs, job)), f"added '{job.id}'")
        st.session_state["fc_added"] = f"Added '{job.id}' to the workload."
    except ScenarioError as e:
        st.session_state["fc_added_error"] = str(e)


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

    with st.form("fc_training_form"):
        t_id, t_priority, t_arrival = _job_fields("fc_t", "sft-new", 5.0)
        a, b, c = st.columns(3)
        variant = a.selectbox(
            "Variant", training.VARIANTS, key="fc_t_variant", help=training.FEATURES["variant"]
        )
        params = b.number_input("Parameters (billions)", 0.1, 2000.0, 8.0, key="fc_t_params")
        tokens = c.number_input(
            "Training tokens (billions)",
            0.001,
            10000.0,
            1.0,
            key="fc_t_tokens",
            help=training.FEATURES["train_tokens_billion"],
        )
        a, b, c = st.columns(3)
        epochs = a.number_input("Epochs", 0.1, 100.0, 1.0, key="fc_t_epochs")
        seq_len = b.number_input("Sequence length", 128, 1_000_000, 4096, key="fc_t_seq")
        lora_rank = c.number_input(
            "LoRA rank (LoRA variants)",
            0,
            4096,
            16,
            key="fc_t_rank",
            help=training.FEATURES["lora_rank"],
        )
        a, b, c = st.columns(3)
        gpu_type = a.selectbox("GPU type", training.GPU_TYPES, index=1, key="fc_t_gpu")
        memory = b.number_input("GPU memory (GB)", 8.0, 512.0, 80.0, key="fc_t_memory")
        precision = c.selectbox("Precision", training.PRECISIONS, key="fc_t_precision")
        with st.expander("RL features (RLHF / RLVR only)"):
            a, b = st.columns(2)
            rollouts = a.number_input("Rollouts per prompt", 0, 1024, 0, key="fc_t_rollouts")
            generation = b.number_input(
                "Generated tokens per rollout", 0, 1_000_000, 0, key="fc_t_generation"
            )
            reward = a.number_input("Reward model (billions)", 0.0, 2000.0, 0.0, key="fc_t_reward")
            verifier = b.number_input(
                "Verifier seconds per rollout", 0.0, 3600.0, 0.0, key="fc_t_verifier"
            )
        estimate_training = st.form_submit_button("Estimate", key="fc_t_estimate")
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
            _keep_estimate("fc_training", _estimate_training)
    if st.session_state.get("fc_training_error"):
        st.error(st.session_state["fc_training_error"])
    if "fc_training" in st.session_state:
        est, row = st.session_state["fc_training"]
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
        st.button(
            f"Add '{row['id']}' to the workload", key="fc_t_add", on_click=_add_job, args=(row,)
        )

with quant_tab:
    from core.forecast import quantization

    with st.form("fc_quant_form"):
        q_id, q_priority, q_arrival = _job_fields("fc_q", "quant-new", 4.0)
        a, b, c = st.columns(3)
        q_params = a.number_input("Parameters (billions)", 0.1, 2000.0, 70.0, key="fc_q_params")
        algorithm = b.selectbox("Algorithm", quantization.ALGORITHMS, index=1, key="fc_q_algorithm")
        margin = c.number_input(
            "Safety margin",
            0.0,
            5.0,
            quantization.DEFAULT_MARGIN,
            step=0.05,
            key="fc_q_margin",
            format="%.2f",
        )
        estimate_quant = st.form_submit_button("Estimate", key="fc_q_estimate")
    if estimate_quant:

        def _estimate_quantization():
            q = quantization.estimate_quantization(float(q_params), algorithm, float(margin))
            return q, q.job_row(q_id.strip(), q_priority, int(q_arrival), max_gpus=s.cluster.gpus)

        _keep_estimate("fc_quant", _estimate_quantization)
    if st.session_state.get("fc_quant_error"):
        st.error(st.session_state["fc_quant_error"])
    if "fc_quant" in st.session_state:
        q, row = st.session_state["fc_quant"]
        m1, m2, m3 = st.columns(3)
        m1.metric(
            "GPU-hours",
            q.gpu_hours,
            help=f"tier {q.base_gpu_hours:g} h + {q.margin:.0%} margin, rounded up",
        )
        m2.metric("GPUs", q.gpus)
        m3.metric("Tier", q.tier)
        st.button(
            f"Add '{row['id']}' to the workload", key="fc_q_add", on_click=_add_job, args=(row,)
        )

if st.session_state.get("fc_added"):
    st.success(st.session_state.pop("fc_added"))
if st.session_state.get("fc_added_error"):
    st.error(st.session_state.pop("fc_added_error"))
