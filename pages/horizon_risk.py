"""Horizon & risk: the rolling simulation, its coverage risk, idle windows and plan stability."""

import pandas as pd
import streamlit as st

from core import charts, serving_guard, views
from core.analysis import coverage_risk_table, idle_windows
from core.forecast import DEMAND_QUANTILE
from core.model import ScenarioError
from core.planners import BASELINE, FAST, PLANNER_NAMES, PLANNERS, planner_options
from core.rolling import simulate
from pages import common

SEARCHING = [name for name, spec in PLANNERS.items() if spec.searches]
REPLAN_TIME_LIMIT = 2.0  # seconds per re-plan for planners that search
# the burst guard's choices (core.serving_guard.CHOICES) as the page names them
GUARD_LABELS = {"auto": "bursty only", "on": "all", "off": "off"}

common.page_header(
    "Horizon & risk",
    "Replay days of operation: re-plan every interval on the demand forecast, commit only what "
    "runs next, and see what really happened: realised metrics, real-time coverage risk, plan "
    "stability and the idle windows left over.",
)
common.sidebar_summary()

ROLLING_EXAMPLE = "rolling-surge"
builtins = common.builtin_scenarios()
active = common.scenario()
choices = ["active"] + ([ROLLING_EXAMPLE] if ROLLING_EXAMPLE in builtins else [])
flat = views.jobs_without_history(active)
# The active workload by default when its replay forecasts from a history (or it serves none).
common.init_widget("hz_source", "active" if not flat or len(choices) == 1 else choices[-1])
if st.session_state["hz_source"] not in choices:
    st.session_state["hz_source"] = choices[0]

with st.container(border=True):
    c1, c2, c3 = st.columns([2, 1, 1])
    with c1:
        st.radio(
            "Scenario to replay",
            choices,
            key="hz_source",
            on_change=common.remember,
            args=("hz_source",),
            horizontal=True,
            format_func=lambda c: (
                f"active workload ({active.name})"
                if c == "active"
                else f"{c} (built-in: demand surges beyond its history)"
            ),
        )
    scenario = (
        active
        if st.session_state["hz_source"] == "active"
        else common.load_builtin(ROLLING_EXAMPLE)
    )
    if flat and st.session_state["hz_source"] == "active":
        fix = (  # (a history is hourly: 'Use the forecast' brings one only to 60-minute steps)
            "history with 'Use the forecast' on Demand forecast"
            if active.cluster.step_minutes == 60
            else "history (hourly, so with 60-minute steps) in the workload"
        )
        st.warning(
            f"{', '.join(repr(j) for j in flat)} in the active workload "
            f"{'has' if len(flat) == 1 else 'have'} no demand history before step 0, so each "
            "re-plan can only carry the latest demand forward (a flat forecast): when demand "
            f"rises, the plan is a step behind and real-time coverage drops. Give the job a "
            f"{fix}, or replay {ROLLING_EXAMPLE}, which has one."
        )
    elif flat:
        st.caption(
            f"The active workload is not the default here: {', '.join(flat)} has no demand "
            "history, so its replay would forecast flat and lose coverage."
        )
    c = scenario.cluster
    covered_days = c.horizon_steps * c.step_minutes / 1440
    max_days = max(14.0, covered_days)  # beyond its demand, simulate repeats it day by day
    day_options = sorted({d for d in (0.5, 1, 2, 3, 5, 7, 14) if d <= max_days} | {max_days})
    # by default the days the workload covers: beyond them only its demand repeats (no new
    # batch work), which would dilute utilization and fill idle windows with the empty tail
    default_days = next((d for d in day_options if d >= covered_days), day_options[-1])
    days_key = f"hz_days_{scenario.name}"
    common.init_widget(days_key, default_days)
    if st.session_state[days_key] not in day_options:
        st.session_state[days_key] = default_days
    with c2:
        days = st.select_slider(
            "Days",
            day_options,
            key=days_key,
            on_change=common.remember,
            args=(days_key,),
            format_func=lambda d: f"{d:g}",
            help=f"The scenario's real-time demand covers {covered_days:g} days; longer "
            "replays repeat it day by day (said under the results).",
        )
    with c3:
        common.init_widget("hz_replan", 60)
        replan = st.select_slider(
            "Re-plan every (minutes)",
            [60, 120, 240, 360, 720],
            key="hz_replan",
            on_change=common.remember,
            args=("hz_replan",),
        )
    c4, c5, c6 = st.columns([2, 1, 1])
    with c4:
        common.init_widget("hz_planners", [BASELINE, FAST])
        planners = common.choose_planners(
            PLANNER_NAMES,
            "hz_planners",
            help=f"{' and '.join(common.planner_label(p) for p in SEARCHING)} search at every "
            f"re-plan ({REPLAN_TIME_LIMIT:g} s limit each): slow over several days.",
        )
    with c5:
        common.init_widget("hz_quantile", DEMAND_QUANTILE)
        quantile = st.select_slider(
            "Plan for demand quantile",
            [0.5, 0.75, 0.9, 0.95, 0.99],
            key="hz_quantile",
            format_func=lambda v: f"{v:.0%}",
            on_change=common.remember,
            args=("hz_quantile",),
        )
        common.init_widget("hz_guard", "auto")
        guard_choice = st.radio(
            "Guard serving against bursts",
            list(serving_guard.CHOICES),
            key="hz_guard",
            format_func=GUARD_LABELS.get,
            horizontal=True,
            on_change=common.remember,
            args=("hz_guard",),
            help="Hold GPUs for the largest rise a service's history shows: plan it at "
            "least at its level plus what its swap cap cannot catch up with, and start batch "
            "work only where its run leaves room for such a rise. Bursty: the services idle "
            "at least half their history's hours (a forecast cannot see their bursts coming); "
            "all: every service, which costs batch value on regular ones. FIFO and backfill "
            "reserve the peak already.",
        )
        guard = serving_guard.CHOICES[guard_choice]
    with c6:
        st.write("")
        run = st.button("Run simulation", type="primary", key="hz_run", width="stretch")

params = (scenario, float(days), int(replan), tuple(planners), float(quantile), guard_choice)
store = st.session_state.get("hz_results")
# Another workload's replay is never shown under this one's name: a new workload replays at
# once, as on the first visit.
other_workload = store is not None and store["params"][0] != scenario
fresh = store is None or store["params"] != params
# A long replay (a big import over several days, or planners that search at every re-plan)
# starts only when asked; the estimate is rough, so the message says "about".
estimate = views.replay_estimate_s(
    scenario, float(days), int(replan), planners, SEARCHING, REPLAN_TIME_LIMIT
)
searching = [common.planner_label(p) for p in planners if p in SEARCHING]
# what a long replay is said to take, wherever the page asks for Run simulation
takes = f"{'up to ' if searching else ''}about {views.duration_text(estimate)}"
if estimate > views.AUTO_REPLAY_SECONDS and not run and (store is None or other_workload):
    why = (
        f"{' and '.join(searching)} may search up to {REPLAN_TIME_LIMIT:g} s at each re-plan"
        if searching
        else f"{scenario.cluster.gpus:,} GPUs and {len(scenario.jobs):,} jobs take a while to plan"
    )
    st.info(
        f"Replaying {scenario.name} over {views.plural(days, 'day')} re-plans it every {replan} "
        f"min, and {why}: {takes} in all, so it runs when you press "
        "**Run simulation** (a progress bar per planner shows how far it is)."
    )
    st.stop()
if planners and (run or store is None or other_workload):
    results, failed = {}, {}
    with st.status("Simulating ...", expanded=True) as status:
        for name in planners:
            bar = st.progress(0.0, text=f"{common.planner_label(name)}: starting")

            def progress(fraction: float, message: str, bar=bar, name=name) -> None:
                bar.progress(min(1.0, fraction), text=f"{common.planner_label(name)}: {message}")

            options = planner_options(name, time_limit=REPLAN_TIME_LIMIT)
            try:
                results[name] = simulate(
                    scenario,
                    days=float(days),
                    planner=name,
                    replan_minutes=int(replan),
                    planner_options=options,
                    progress=progress,
                    demand_quantile=float(quantile),
                    burst_guard=guard,
                )
            except ScenarioError as e:
                failed[name] = str(e)
        status.update(
            label=f"Simulated {views.plural(days, 'day')} with "
            + (", ".join(common.planner_label(n) for n in results) or "nothing"),
            state="complete" if results else "error",
            expanded=False,
        )
    store = {"params": params, "results": results, "failed": failed}
    st.session_state["hz_results"] = store
    fresh = False

if other_workload and not planners:
    st.info(f"Choose planners and press **Run simulation** to replay {scenario.name}.")
    st.stop()
if store is None or not store["results"]:
    if store and store.get("failed"):
        for name, message in store["failed"].items():
            st.error(f"{name}: {message}")
    st.info("Choose planners and press **Run simulation**.")
    st.stop()
ran_days, ran_replan, _, ran_quantile, ran_guard = store["params"][1:]
ran = (
    f"{store['params'][0].name} over {views.plural(ran_days, 'day')}, re-planned every "
    f"{ran_replan} min at "
    f"the {ran_quantile:.0%} demand quantile"
    + views.burst_guard_text(store["results"].values(), ran_guard)
)
if fresh:
    st.info(
        f"The settings changed since this run (below: {ran}): press **Run simulation** to "
        "replay them" + (f" ({takes})." if estimate > views.AUTO_REPLAY_SECONDS else ".")
    )
for name, message in store["failed"].items():
    st.error(f"{name}: {message}")
results = store["results"]
sim_scenario = next(iter(results.values())).scenario

# --- realised metrics ----------------------------------------------------------------------------
st.subheader(
    "Realised metrics per planner",
    help="Measured on what actually ran: actual work and actual real-time traffic.",
)
st.caption(f"Replay of {ran}.")
table = views.realised_metrics_by_row(
    {common.planner_label(n): r.metrics for n, r in results.items()}
)
st.dataframe(
    table,
    hide_index=True,
    width="stretch",
    placeholder="",
    key="hz_metrics",
    height=35 * (len(table) + 1) + 3,  # every metric, without a scroll bar
    column_config={"metric": st.column_config.TextColumn(pinned=True)},
)
first = next(iter(results.values())).metrics
_, run_days, run_replan, _, run_quantile, _ = store["params"]
st.caption(
    f"{first.get('replans', '?')} re-plans (every {run_replan} min) over "
    f"{views.plural(run_days, 'day')}, each planning a 24-hour window with real-time demand at its "
    f"{run_quantile:.0%} forecast quantile (raised after a miss, decaying back)."
)
for note in first.get("notes") or ():
    st.info(note)
st.plotly_chart(
    charts.utilization_value_figure({n: r.metrics for n, r in results.items()}),
    key="hz_chart_uv",
    config={"displayModeBar": False},
)

# --- coverage risk -------------------------------------------------------------------------------
st.subheader(
    "Real-time coverage risk over the period",
    help="At each committed step: the probability, under the forecast the planner was "
    "given, that demand exceeded the GPUs it planned.",
)
labels = charts.step_labels(sim_scenario)
strips, names = [], []
for name, result in results.items():
    table = coverage_risk_table(result.scenario, result.plan, result.forecasts)
    for job_id, part in table.groupby("job_id", sort=False):
        risk = pd.Series(part["risk"].to_numpy(), index=part["step"].to_numpy())
        strips.append(risk.reindex(range(len(labels))).to_numpy())
        names.append(f"{name} · {job_id}")
if strips:
    st.plotly_chart(
        charts.coverage_risk_figure(strips, labels, names),
        key="hz_chart_risk",
        config={"displayModeBar": False},
    )
else:
    st.caption("No real-time jobs in this scenario: no coverage risk.")

# --- stability -----------------------------------------------------------------------------------
st.subheader(
    "Plan stability",
    help="Share of the still-future planned cells that a re-plan "
    "changed: low means the day-ahead plan can be trusted.",
)
st.plotly_chart(
    charts.stability_figure({n: r.replans for n, r in results.items()}, labels),
    key="hz_chart_stability",
    config={"displayModeBar": False},
)

# --- realised grid and idle windows --------------------------------------------------------------
st.subheader("Realised grid and idle windows")
g1, g2, g3 = st.columns([2, 1, 1])
with g1:
    pick = st.selectbox("Planner", list(results), key="hz_pick", format_func=common.planner_label)
with g2:  # block sizes up to the replayed cluster's (a value kept from a larger one shrinks)
    G = sim_scenario.cluster.gpus
    sizes = [1 << k for k in range(G.bit_length())]  # 1, 2, 4, ... up to G
    common.init_widget("hz_min_gpus", min(2, sizes[-1]))
    if st.session_state["hz_min_gpus"] not in sizes:
        st.session_state["hz_min_gpus"] = sizes[-1]  # (only a larger cluster's size is not here)
    min_gpus = st.select_slider("Window at least (GPUs)", sizes, key="hz_min_gpus")
with g3:
    min_steps = st.number_input("and at least (steps)", 1, 1000, 3, key="hz_min_steps")
result = results[pick]
common.show_grid(
    result.scenario, result.plan, f"{common.planner_label(pick)}: what ran", key="hz_chart_grid"
)
windows = idle_windows(
    result.plan, int(min_gpus), int(min_steps), step_minutes=result.scenario.cluster.step_minutes
)
if windows.empty:
    st.caption(f"No idle block of {min_gpus}+ GPUs for {min_steps}+ steps.")
else:
    shown = pd.DataFrame(
        {
            "from": [labels[s] for s in windows["start_step"]],
            "until": [labels[e - 1] for e in windows["end_step"]],
            "steps": windows["steps"],
            "GPUs": [
                f"{g}–{g + n - 1}"
                for g, n in zip(windows["gpu_start"], windows["gpus"], strict=True)
            ],
            "size": windows["gpus"],
            "GPU-hours": windows["gpu_hours"],
        }
    )
    st.dataframe(
        shown,
        hide_index=True,
        width="stretch",
        height="auto" if len(shown) <= 10 else 400,
        key="hz_idle_table",
        column_config={"GPU-hours": st.column_config.NumberColumn(format="localized")},
    )
    union = views.idle_union_gpu_hours(windows, result.scenario.cluster.step_minutes)
    overlap = (
        " Some windows overlap (a smaller block idle for longer inside a larger one); the total "
        "counts each idle GPU-hour once."
        if views.windows_overlap(windows)
        else ""
    )
    st.caption(
        f"{len(windows)} windows covering {union:,.0f} GPU-hours that a job of that shape could "
        f"have used.{overlap}"
    )
    st.plotly_chart(
        charts.idle_windows_figure(windows, result.scenario.cluster.gpus, len(labels), labels),
        key="hz_chart_idle",
        config={"displayModeBar": False},
    )
