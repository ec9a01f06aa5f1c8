"""Capacity: how many GPUs, and what if demand grows — sweeps of the active scenario on Dask."""

import os

import pandas as pd
import streamlit as st

from core import charts, mix_views, views
from core.model import ScenarioError
from core.planners import BASELINE, FAST, PLANNER_NAMES, PLANNERS, planner_options
from core.sweep import (
    SCHEDULER_ENV,
    ceiling_at,
    close_client,
    default_workers,
    engine_label,
    open_client,
    run_sweep,
    smallest_sizes,
    sweep_points,
    sweep_to_csv,
)
from pages import capacity_mix, common

common.page_header(
    "Capacity",
    "How many GPUs does this workload need, and what if demand grows? Every planner at every "
    "point of the grid below (cluster size x demand and work scales x policy), run on Dask "
    "workers; the star marks the smallest swept size that meets your targets.",
)
common.sidebar_summary()

K_RESULT = "capacity_result"
MAX_RUNS = 5_000  # points x planners in one sweep from the page (the CLI has no limit)


def _release(engine: dict) -> None:
    close_client(engine["client"])


def _running(engine: dict) -> bool:
    return engine["client"].status == "running"


@st.cache_resource(
    show_spinner="Starting the Dask workers ...", on_release=_release, validate=_running
)
def _engine() -> dict:
    """One Dask client per process, never per rerun: DASK_SCHEDULER_ADDRESS when set, else a
    LocalCluster of single-threaded worker processes. (Held in a dict: a Client is awaitable,
    which cache_resource refuses to store.)"""
    return {"client": open_client(None if os.environ.get(SCHEDULER_ENV) else default_workers())}


def _numbers(label: str, text: str, *, integer: bool = False) -> list[float]:
    values = []
    for part in text.split(","):
        part = part.strip()
        try:
            value = float(part)
        except ValueError:
            raise ScenarioError(f"{label}: {part!r} is not a number") from None
        if integer and not value.is_integer():
            raise ScenarioError(f"{label}: {part!r} is not a whole number")
        values.append(int(value) if integer else value)
    return values


s = common.scenario()
mixed = bool(s.cluster.nodes)  # node groups: the page sizes a mix of nodes (SPEC section 8)
G = s.cluster.gpus
default_gpus = ",".join(str(g) for g in sorted({max(1, G // 2), G, 2 * G, 3 * G, 4 * G}))
available = list(PLANNER_NAMES)
timed = [name for name, spec in PLANNERS.items() if spec.accepts("time_limit")]

# The lists are kept while the planner visits other pages (`remember`), and start again from
# this workload's defaults when the workload changes (sizes around its cluster, its own policy):
# scenario controls, which a new scenario drops.
P = common.SCENARIO_CONTROL_PREFIX
lists = {
    f"{P}cap_gpus": default_gpus,
    f"{P}cap_demand": "1,1.5",
    f"{P}cap_work": "1",
    f"{P}cap_penalty": f"{s.policy.penalty_weight:g}",
    f"{P}cap_decay": f"{s.policy.decay:g}",
}
for key, default in lists.items():
    common.init_widget(key, default)


def _list_input(label: str, key: str, help: str | None = None) -> str:
    return st.text_input(label, key=key, help=help, on_change=common.remember, args=(key,))


if mixed:
    st.caption(
        "This cluster has node groups: the page sizes a **mix** of nodes. Choose the node counts "
        "to try per group; every combination is planned, and the cheapest mix (by cost per "
        "hour) that meets both targets is the answer."
    )
with st.container(border=True):
    if mixed:
        node_texts = capacity_mix.count_inputs(s, P)
    else:
        c1, c2, c3 = st.columns([2, 1, 1])
        with c1:
            gpus_text = _list_input("GPUs (comma list)", f"{P}cap_gpus", "Cluster sizes to try.")
        with c2:
            demand_text = _list_input(
                "Demand scales", f"{P}cap_demand", "Real-time demand x factor."
            )
        with c3:
            work_text = _list_input("Work scales", f"{P}cap_work", "Batch gpu_hours x factor.")
    c4, c5, c6 = st.columns([2, 1, 1])
    with c4:
        common.init_widget("cap_planners", [BASELINE, FAST])
        planners = common.choose_planners(
            available,
            "cap_planners",
            help=f"{' and '.join(common.planner_label(p) for p in timed)} search up to the "
            "limit below at every point: keep their grids small.",
        )
    if not mixed:  # (a mix is planned at the workload's own policy)
        with c5:
            penalty_text = _list_input("Penalty weights", f"{P}cap_penalty")
        with c6:
            decay_text = _list_input("Decays", f"{P}cap_decay")
    c7, c8, c10, c9 = st.columns([1, 1, 1, 1])
    with c7:
        # In percent, as on Plan & compare; the workload's own coverage target by default
        own = s.policy.rt_coverage_target
        coverage = (
            st.number_input(
                "Target: real-time coverage (%)",
                0.0,
                100.0,
                99.0 if own is None else round(own * 100, 2),
                0.5,
                key="cap_coverage_pct",
                help="A size meets it where the planner serves at least this share of the "
                "demanded real-time GPU-hours (the workload's coverage target when it has one).",
            )
            / 100
        )
    with c8:
        completed = (
            st.number_input(
                "Target: completed jobs (%)", 0.0, 100.0, 80.0, 5.0, key="cap_completed_pct"
            )
            / 100
        )
    with c10:
        common.init_widget("cap_time_limit", 5)
        time_limit = st.number_input(
            "Search limit per run (s)",
            min_value=1,
            max_value=600,
            step=1,
            key="cap_time_limit",
            on_change=common.remember,
            args=("cap_time_limit",),
            disabled=not any(p in timed for p in planners),
            help=f"Seconds {' and '.join(common.planner_label(p) for p in timed)} may search at "
            "each point of the grid (the others take milliseconds).",
        )
    with c9:
        st.write("")
        run = st.button("Size the mix" if mixed else "Run sweep", type="primary", key="cap_run")

if st.session_state.get("cap_cancel"):
    st.info("Sweep cancelled: the pending runs were dropped; the last finished sweep is shown.")
# (the limit counts only where a planner takes it)
limit_used = float(time_limit) if any(p in timed for p in planners) else None
if mixed:
    inputs = (tuple(node_texts.items()), tuple(planners), limit_used)
else:
    inputs = (
        gpus_text,
        demand_text,
        work_text,
        penalty_text,
        decay_text,
        tuple(planners),
        limit_used,
    )
if run:
    try:
        if not planners:
            raise ScenarioError("choose at least one planner")
        if mixed:
            points = mix_views.mix_points(s, mix_views.parse_counts(s, node_texts))
        else:
            points = sweep_points(
                s,
                gpus=_numbers("GPUs", gpus_text, integer=True),
                demand_scale=_numbers("Demand scales", demand_text),
                work_scale=_numbers("Work scales", work_text),
                penalty_weight=_numbers("Penalty weights", penalty_text),
                decay=_numbers("Decays", decay_text),
            )
        if len(points) * len(planners) > MAX_RUNS:
            raise ScenarioError(
                f"{len(points) * len(planners):,} runs is more than this page runs at once "
                f"({MAX_RUNS:,}); use `gpuplan sweep` on a Dask cluster for larger grids"
            )
    except ScenarioError as e:
        st.error(str(e))
        points = []
    if points:
        client = _engine()["client"]
        total = len(points) * len(planners)
        cancel = st.empty()
        cancel.button("Cancel", key="cap_cancel", help="Stops the sweep; pending runs are dropped.")
        bar = st.progress(0.0, text=f"0 of {total} runs on {engine_label(client)}")

        def progress(done: int, total: int, row: dict) -> None:
            bar.progress(done / total, text=f"{done} of {total} runs ({row['planner']})")

        options = {p: planner_options(p, time_limit=float(time_limit)) for p in planners}
        rows = run_sweep(client, s, points, planners, options=options, progress=progress)
        bar.empty()
        cancel.empty()
        st.session_state[K_RESULT] = {
            "scenario": s,
            "rows": rows,
            "engine": engine_label(client),
            "inputs": inputs,
        }

result = st.session_state.get(K_RESULT)
button = "Size the mix" if mixed else "Run sweep"
if not result or result["scenario"] != s:
    st.info(f"Choose the {'node counts' if mixed else 'grid'} and press **{button}**.")
    st.stop()
if result.get("inputs") != inputs:  # (after an edit, or a run the lists above refused)
    st.info(
        f"The {'mixes' if mixed else 'sweep'} below {'were' if mixed else 'was'} run with other "
        f"lists, planners or search limit than those above: press **{button}** to run these."
    )
if mixed:
    capacity_mix.show(s, result, coverage, completed)
    st.stop()

rows = result["rows"]
table = pd.DataFrame(rows)
marks = smallest_sizes(rows, coverage=coverage, completed=completed)
st.caption(
    f"{len(rows)} runs on {result['engine']}; "
    f"{int((table['error'] != '').sum())} at invalid points."
)
st.plotly_chart(
    charts.capacity_figure(table, marks), key="cap_chart", config={"displayModeBar": False}
)

st.subheader("Smallest swept size meeting the targets")
st.caption(
    f"Real-time coverage >= {coverage * 100:g}% and completed batch jobs >= "
    f"{completed * 100:g}% of all, "
    "per planner and setting; `gpuplan size` searches every multiple of a step instead."
)
sizes = pd.DataFrame(marks)
top = int(table["gpus"].max())
# A target above what any number of GPUs reaches (a service's gpus_max below its demand, a job
# that cannot end within the horizon) is missed at every size, not only up to the largest swept.
unreachable = {}
for m in marks:
    key = (m["demand_scale"], m["work_scale"])
    if key not in unreachable:
        unreachable[key] = ceiling_at(s, *key).misses(coverage, completed)
sizes["gpus"] = [
    str(m["gpus"])
    if m["gpus"] is not None
    else "none at any size"
    if unreachable[(m["demand_scale"], m["work_scale"])]
    else f"none up to {top}"
    for m in marks
]
st.dataframe(sizes, hide_index=True, key="cap_sizes")
HINTS = {  # what lifts a ceiling, by target
    "coverage": "raise those services' gpus_max (or swap_cap)",
    "completed": "lengthen the horizon or raise those jobs' gpus_max",
}
for (demand_scale, work_scale), misses in unreachable.items():
    if misses:
        st.warning(
            f"**Demand x{demand_scale:g}, work x{work_scale:g}:** "
            + " ".join(views.sentence(reason) for reason in misses.values())
            + f" More GPUs do not help: {' and '.join(HINTS[name] for name in misses)} in the "
            "Workload editor, or lower the target."
        )

st.subheader("Every run")
invalid = table[table["error"] != ""]
if len(invalid):
    st.warning(
        f"{views.plural(len(invalid), 'run')} at invalid points, e.g. "
        f"{invalid.iloc[0]['gpus']} GPUs: "
        f"{invalid.iloc[0]['error']}"
    )
# Shares are stored as fractions and shown as percent to a tenth (`step` sets a named format's
# precision), hours, value and objective to a tenth with separators: one precision per table.
share = st.column_config.NumberColumn(format="percent", step=0.001)
tenths = "%,.1f"
hours = st.column_config.NumberColumn(format=tenths)
st.dataframe(
    table,
    hide_index=True,
    key="cap_table",
    placeholder="—",
    column_config={
        "utilization": share,
        "allocated_fraction": st.column_config.NumberColumn(
            "allocated", format="percent", step=0.001
        ),
        "rt_coverage": st.column_config.NumberColumn("rt coverage", format="percent", step=0.001),
        "team_fairness": st.column_config.NumberColumn(format="%.3f"),  # Jain's index, in (0, 1]
        "value": st.column_config.NumberColumn(format=tenths),
        "objective": st.column_config.NumberColumn(format=tenths),
        "runtime_ms": st.column_config.NumberColumn("runtime ms", format=tenths),
        **{
            column: hours
            for column in table.columns
            if column.endswith(("gpu_hours", "_hours_p50", "_hours_p90"))
        },
    },
)
st.download_button(
    "Download sweep.csv",
    sweep_to_csv(rows),
    file_name="sweep.csv",
    mime="text/csv",
    key="cap_download",
)
