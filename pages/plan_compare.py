"""Plan & compare: set the policy, run the planners, compare KPIs and grids, export any plan."""

import math

import streamlit as st

from core import charts, cluster_table, tables, views
from core.compare import explain_divergence
from core.formats import export_name, plan_exports, summary_to_csv
from core.model import ScenarioError
from core.plan import check, job_outcomes, metrics
from core.planners import (
    BASELINE,
    PLANNER_NAMES,
    PLANNERS,
    default_planners,
    planner_options,
    solve,
)
from core.sweep import ceiling
from pages import common, history_import

common.page_header(
    "Plan & compare",
    "Set the policy, run the planners on the active workload and compare them against FIFO: "
    "utilization says how busy the GPUs are, value says whether the right work ran.",
)
common.sidebar_summary()

s = common.scenario()
searching = [name for name, spec in PLANNERS.items() if spec.searches]
timed = [name for name, spec in PLANNERS.items() if spec.accepts("time_limit")]
P = common.SCENARIO_CONTROL_PREFIX  # keys derived from the scenario, reset when it changes


def _apply_controls() -> None:
    current = common.scenario()
    caps = {
        j.id: st.session_state[f"{P}swap_{j.id}"]
        for j in current.realtime_jobs
        if f"{P}swap_{j.id}" in st.session_state
    }
    target = st.session_state.get(f"{P}target", common.KEEP)
    try:
        new = common.with_controls(
            current,
            decay=st.session_state[f"{P}decay"],
            penalty_weight=st.session_state[f"{P}penalty"],
            swap_caps=caps,
            coverage_target=common.KEEP if target == common.KEEP else _share(target),
        )
    except ScenarioError as e:
        st.session_state["plan_control_error"] = str(e)
        return
    st.session_state.pop("plan_control_error", None)
    if new is not current:
        common.set_scenario(new, reset_controls=False)


# The decay slider moves in DECAY_STEP steps; the number beside it holds any decay exactly (a
# step-length conversion makes 0.98489 of 0.97), and each control follows the other.
DECAY_STEP = 0.005
DECAY_KEYS = (f"{P}decay", f"{P}decay_exact")
PENALTY_STEP = 0.5


def _apply_decay(key: str) -> None:
    """on_change of either decay control: the other one shows the same value, then apply."""
    value = st.session_state[key]
    for other in DECAY_KEYS:
        st.session_state[other] = value
    _apply_controls()


def _slider_low(decay: float) -> float:
    """The slider's minimum: 0.80, or lower on the slider's own grid for a lower decay (a
    minimum off the grid would shift every step of it, 0.97 included)."""
    return min(0.80, round(math.floor(decay / DECAY_STEP + 1e-9) * DECAY_STEP, 3))


def _share(percent: float | None) -> float | None:
    """The target control's percent as a share (empty: no target)."""
    return None if percent is None else float(percent) / 100.0


# --- controls --------------------------------------------------------------------------------
policy, step_minutes = s.policy, s.cluster.step_minutes
for key in DECAY_KEYS:
    common.init_widget(key, float(policy.decay))
common.init_widget(f"{P}penalty", float(policy.penalty_weight))
common.init_widget("plan_planners", default_planners())
common.init_widget("plan_time_limit", 10)

with st.container(border=True):
    c1, c2, c3 = st.columns([3, 3, 2])
    with c1:
        slide, exact = st.columns([2, 1], vertical_alignment="bottom")
        slide.slider(
            "Reward decay per step",
            min_value=_slider_low(st.session_state[f"{P}decay"]),
            max_value=1.0,
            step=DECAY_STEP,
            format="%.3f",
            key=f"{P}decay",
            on_change=_apply_decay,
            args=(f"{P}decay",),
            help="A GPU-step of batch work at step t is worth decay^t: lower "
            "decay rewards starting valuable work sooner.",
        )
        exact.number_input(
            "Exact",
            min_value=0.0,
            max_value=1.0,
            step=0.001,
            format="%.5f",
            key=f"{P}decay_exact",
            on_change=_apply_decay,
            args=(f"{P}decay_exact",),
            help=f"The decay per step as a number: any value in (0, 1], kept as it is (the "
            f"slider moves in steps of {DECAY_STEP}). A step-length conversion on the Workload "
            "page sets it so that the half-life in hours stays.",
        )
        hours = policy.half_life_hours(step_minutes)
        if hours == float("inf"):
            st.caption("No decay: batch work counts the same whenever it runs.")
        else:
            half_life = common.format_hours(hours)
            st.caption(
                f"Half-life **{half_life}**: a GPU-hour of batch work {half_life} from "
                "now counts half as much as one now."
            )
    with c2:
        st.slider(
            "Penalty weight for unmet real-time demand",
            key=f"{P}penalty",
            # ends on the 0.5 grid, so that a penalty outside 5-10 (4.3 from a file) does not
            # shift every step off the round values, 8 among them
            min_value=min(5.0, math.floor(policy.penalty_weight / PENALTY_STEP) * PENALTY_STEP),
            max_value=max(10.0, math.ceil(policy.penalty_weight / PENALTY_STEP) * PENALTY_STEP),
            step=PENALTY_STEP,
            on_change=_apply_controls,
            help="One GPU-step of unmet real-time demand costs this many GPU-steps of "
            "equal-priority batch work (default 8).",
        )
        if s.realtime_jobs:
            target = policy.rt_coverage_target
            common.init_widget(f"{P}target", None if target is None else round(target * 100, 2))
            st.number_input(
                "Real-time coverage target (%)",
                min_value=1.0,
                max_value=100.0,
                step=0.5,
                key=f"{P}target",
                on_change=_apply_controls,
                placeholder="none",
                help="The penalty prices shortfall; the target forbids it: the allocator and "
                "Full must serve at least this share of the demanded real-time GPU-hours "
                "where any plan can (FIFO and backfill only report whether they do). Empty: "
                "no target, the penalty alone decides.",
            )
            if target is not None:  # above what any number of GPUs serves: say so, and why
                above = ceiling(s).misses(target, None).get("coverage")
                if above:
                    st.caption(f":orange[{views.sentence(above)}]")
    with c3:
        st.number_input(
            "Search time limit (s)",
            min_value=1,
            max_value=600,
            step=1,
            key="plan_time_limit",
            on_change=common.remember,
            args=("plan_time_limit",),
            help=f"Seconds {' and '.join(common.planner_label(p) for p in timed)} may search "
            "(each; they run when you press Run planners).",
        )
    if s.realtime_jobs:
        caps = st.columns(max(3, min(4, len(s.realtime_jobs))))
        for k, job in enumerate(s.realtime_jobs):
            key = f"{P}swap_{job.id}"
            common.init_widget(key, job.swap_cap)
            caps[k % len(caps)].number_input(
                f"Swap cap: {job.id}",
                min_value=0,
                max_value=max(2 * s.cluster.gpus, job.swap_cap),
                step=1,
                key=key,
                on_change=_apply_controls,
                help="GPUs this real-time job may gain plus release from one step to the next.",
            )
    p1, p2 = st.columns([4, 1])
    with p1:
        chosen = common.choose_planners(
            PLANNER_NAMES,
            "plan_planners",
            help=f"{common.planner_label(BASELINE)} is always run as the baseline for the "
            f"deltas. {' and '.join(common.planner_label(p) for p in searching)} search up to the "
            "time limit and run only when you press Run.",
        )
    with p2:
        st.write("")
        run = st.button("Run planners", type="primary", key="plan_run", width="stretch")

if st.session_state.get("plan_control_error"):
    st.error(st.session_state["plan_control_error"])

s = common.scenario()  # controls may have changed it
store = common.stored_plans(s)
wanted = [BASELINE, *[p for p in chosen if p != BASELINE]]
to_run = [p for p in wanted if run or (p not in store["plans"] and not PLANNERS[p].searches)]
time_limit = float(st.session_state["plan_time_limit"])


def _run_planner(name: str) -> None:
    label = common.planner_label(name)
    if not PLANNERS[name].accepts("progress"):
        plan = solve(s, name, **planner_options(name, time_limit=time_limit))
    else:
        bar = st.progress(0.0, text=f"{label}: building the model ...")

        def progress(info: dict) -> None:
            elapsed = float(info.get("elapsed_s", 0.0))
            inc, bound, gap = info.get("incumbent"), info.get("bound"), info.get("gap")
            parts = [f"{elapsed:.1f}s of {time_limit:g}s"]
            if inc is not None:
                parts.append(f"incumbent {inc:,.1f}")
            if bound is not None:
                parts.append(f"bound {bound:,.1f}")
            if gap is not None:
                parts.append(f"gap {gap:.2%}")
            bar.progress(min(1.0, elapsed / time_limit), text=f"{label}: " + " · ".join(parts))

        options = planner_options(name, time_limit=time_limit, progress=progress)
        plan = solve(s, name, **options)
        bar.progress(1.0, text=f"{label}: {common.status_words(plan.stats)}")
    violations = check(s, plan)
    if violations:
        count = views.plural(len(violations), "violation")
        store["errors"][name] = f"{count}, first: {violations[0]}"
    else:
        store["errors"].pop(name, None)
    store["plans"][name] = plan


if to_run:
    running = ", ".join(common.planner_label(n) for n in to_run)
    with st.status(f"Planning with {running} ...", expanded=True) as status:
        for name in to_run:
            line = st.empty()
            line.write(f"{common.planner_label(name)} ...")
            _run_planner(name)
            stats = store["plans"][name].stats
            line.write(
                f"{common.planner_label(name)}: {common.format_ms(stats.get('runtime_ms', 0.0))}"
                + (f" · {common.status_words(stats)}" if "status" in stats else "")
            )
        status.update(
            label="Planned: " + ", ".join(common.planner_label(n) for n in to_run),
            state="complete",
            expanded=False,
        )

plans = {p: store["plans"][p] for p in wanted if p in store["plans"]}
for name in chosen:
    if PLANNERS[name].searches and name not in plans:
        st.info(
            f"{common.planner_label(name)} runs when you press **Run planners** (it searches "
            "up to the time limit)."
        )
for name, message in store["errors"].items():
    st.error(f"{name} produced an illegal plan: {message}")
if not plans:
    st.stop()

# --- KPI cards ---------------------------------------------------------------------------------
values = {name: metrics(s, plan) for name, plan in plans.items()}
base = values.get(BASELINE)
st.subheader(
    "KPIs per planner",
    help=f"Deltas are against {common.planner_label(BASELINE)}, the published baseline.",
)
# --- as-run: what the real scheduler did, when the workload came from a history -------------
as_run = history_import.as_run_for(s)
# At most four cards a row: their labels carry units ("Utilization (of GPU-h)"), which five or
# six side by side clip.
shown_cards = len(values) + (as_run is not None)
per_row = min(shown_cards, 4)
cards = [col for k in range(0, shown_cards, per_row) for col in st.columns(per_row)]
if as_run is not None:
    with cards[shown_cards - 1]:
        history_import.as_run_card(as_run, values)
cards = cards[: len(values)]
most = ceiling(s).coverage  # the most real-time coverage on any cluster


for col, (name, m) in zip(cards, values.items(), strict=True):
    with col, st.container(border=True):
        st.markdown(f"**{common.planner_label(name)}**")
        b = base if name != BASELINE else None

        def d(key: str, m=m, b=b) -> float | None:
            return None if b is None else m[key] - b[key]

        common.metric_vs_fifo(
            "Utilization (of GPU-h)",
            f"{m['utilization']:.1%}",
            d("utilization"),
            f"{(d('utilization') or 0) * 100:+.1f} pp",
            "Share of GPU-hours running batch work or serving real-time demand. "
            "GPUs a service holds above its demand are allocated but not utilized.",
        )
        gain = m["value"] / b["value"] - 1 if b is not None and b["value"] > 0 else None
        common.metric_vs_fifo(
            "Value (weighted GPU-h)",
            f"{m['value']:,.1f}",
            d("value"),
            f"{gain:+.1%}" if gain is not None else f"{d('value') or 0:+,.1f}",
            "Priority-weighted GPU-hours: batch GPU-hours delivered in the horizon, each "
            "weighted by its job's priority",
        )
        common.metric_vs_fifo(
            "Objective (weighted GPU-h)",
            f"{m['objective']:,.1f}",
            d("objective"),
            f"{d('objective') or 0:+,.1f}",
            "In weighted GPU-hours: decayed priority-weighted batch GPU-hours minus the "
            "penalty weight times the real-time GPU-hours not served (what the planners "
            "maximise)",
        )
        common.metric_vs_fifo(
            "Completed jobs",
            f"{m['completed_jobs']:,}/{m['batch_jobs']:,}",
            d("completed_jobs"),
            f"{d('completed_jobs') or 0:+,d}",
            "Batch jobs whose work is all done within the horizon, of all batch jobs",
        )
        common.metric_vs_fifo(
            "Real-time coverage",
            f"{m['rt_coverage']:.1%}",
            d("rt_coverage"),
            f"{(d('rt_coverage') or 0) * 100:+.1f} pp",
            "Served / demanded real-time GPU-hours",
        )
        st.caption(
            f"Allocated {m['allocated_fraction']:.1%} of GPU-hours (given to a job, used or "
            f"not) vs {m['utilization']:.1%} utilized · planned in "
            f"{common.format_ms(m['runtime_ms'])}"
        )
        if m["slo_met"] is not None:
            target = s.policy.rt_coverage_target
            st.caption(
                f"Coverage target {target:.1%}: "
                + (
                    "met"
                    if m["slo_met"]
                    else f"**missed** (no plan on any cluster serves over {most:.2%})"
                    if most < target - 1e-12
                    else "**missed** (no plan of this planner reaches it)"
                )
            )
        if PLANNERS[name].reports:
            st.caption(common.solver_summary(plans[name].stats))

# --- utilization against value, and why each planner differs from FIFO (core.compare) ---------
chart_col, why_col = st.columns([3, 2], vertical_alignment="center")
with chart_col:
    st.plotly_chart(
        charts.utilization_value_figure(history_import.with_as_run(values, as_run)),
        key="plan_chart_uv",
        config={"displayModeBar": False},
    )
with why_col, st.container(border=True, key="plan_divergence"):
    base_label = common.planner_label(BASELINE)
    st.markdown(f"**Utilization vs value, against {base_label}**")
    others = [n for n in plans if n != BASELINE]
    if BASELINE not in plans or not others:
        st.caption(f"Run another planner beside {base_label} to see where their value differs.")
    for name in others if BASELINE in plans else []:
        why = explain_divergence(s, plans[BASELINE], plans[name], BASELINE.upper(), name)
        markdown_safe = "".join(f"\\{c}" if c in "\\`*_[]<>#|~$" else c for c in why)
        st.markdown(f"**{common.planner_label(name)}.** {markdown_safe}")

# --- per GPU type, on a cluster with nodes (SPEC section 8; metrics' by_gpu_type) ------------
if s.cluster.nodes:
    st.subheader(
        "Per GPU type",
        help="Utilization: share of the type's GPU-hours running batch work or serving "
        "real-time demand. Cost: the type's GPU-hours at its price (else the policy's); idle "
        "cost: the part of it no job held.",
    )
    with st.container(key="plan_gpu_types"):
        st.caption(f"Cluster: {cluster_table.cluster_words(s.cluster)}.")
        hours = s.cluster.horizon_steps * s.cluster.step_hours
        st.plotly_chart(
            charts.gpu_type_figure(values, hours, common.planner_label),
            key="plan_chart_gpu_types",
            config=charts.STATIC,
        )
        st.dataframe(
            tables.gpu_type_table(s, values, common.planner_label),
            hide_index=True,
            width="stretch",
            key="plan_gpu_types_table",
            column_config={
                "utilization": st.column_config.NumberColumn("utilization", format="percent"),
                "allocated": st.column_config.NumberColumn("allocated", format="percent"),
                "idle GPU-h": st.column_config.NumberColumn("idle GPU-h", format="%.1f"),
                "cost": st.column_config.NumberColumn("cost", format="%.2f"),
                "idle cost": st.column_config.NumberColumn("idle cost", format="%.2f"),
            },
        )

# --- idle capacity, waits and every job (core.tables) ----------------------------------------
st.subheader(
    "Idle capacity, waits and jobs",
    help="Idle: GPU-hours nobody holds. Reserved idle: real-time GPUs held above demand "
    "(FIFO's peak reservation). Fragmented: idle GPUs outside any free aligned block the "
    "smallest waiting job could use. Waits: start minus arrival of the jobs a plan started.",
)
idle_col, wait_col = st.columns([3, 2])
with idle_col:
    st.plotly_chart(
        charts.idle_breakdown_figure(values), key="plan_chart_idle", config=charts.STATIC
    )
with wait_col:
    st.plotly_chart(
        charts.wait_figure({n: tables.wait_hours(s, p) for n, p in plans.items()}),
        key="plan_chart_wait",
        config=charts.STATIC,
    )
jobs_table = tables.job_table(s, plans)
unfinished = {
    name: [o.job.id for o in job_outcomes(s, plan) if not o.completed]
    for name, plan in plans.items()
}
st.caption(views.unfinished_words({common.planner_label(n): ids for n, ids in unfinished.items()}))
with st.expander(f"Per job, planners side by side ({len(jobs_table)} batch jobs)"):
    st.dataframe(
        jobs_table, hide_index=True, width="stretch", key="plan_jobs_table", placeholder="—"
    )
teams_table = tables.team_table(s, plans)
if not teams_table.empty:
    with st.expander("Per team: GPU-hours, value, completed jobs, wait"):
        st.dataframe(teams_table, hide_index=True, width="stretch", key="plan_teams_table")

# --- grids ---------------------------------------------------------------------------------------
st.subheader(
    "GPU x time grids",
    help="One colour per job; grey cells are idle; pale real-time "
    "cells are reserved above demand. Hover a cell for job, type, priority and time.",
)
names = list(plans)
colour_options = {"job": "job", "type": "job type", "team": "team"}
common.init_widget("plan_colour_by", charts.default_colour_by(s))
colour_by = st.radio(
    "Colour the grids by",
    list(colour_options),
    key="plan_colour_by",
    format_func=colour_options.get,
    horizontal=True,
    on_change=common.remember,
    args=("plan_colour_by",),
    help="With many jobs one colour per job is hard to read: colour by job type or team; "
    "hovering a cell still names its job.",
)
common.colour_legend(charts.grid_legend(s, list(plans.values()), colour_by))
for row_start in range(0, len(names), 2):
    row = st.columns(2)
    for col, name in zip(row, names[row_start : row_start + 2], strict=False):
        with col:
            common.show_grid(
                s,
                plans[name],
                common.planner_label(name),
                key=f"plan_grid_{name}",
                show_legend=False,
                colour_by=colour_by,
            )

if s.realtime_jobs:
    rt_ids = [j.id for j in s.realtime_jobs]
    rt_pick = rt_ids[0]
    if len(rt_ids) > 1:
        rt_pick = st.selectbox("Real-time job", rt_ids, key="plan_rt_job")
    st.plotly_chart(
        charts.realtime_figure(s, plans, rt_pick),
        key="plan_chart_rt",
        config={"displayModeBar": False},
    )

# --- exports -----------------------------------------------------------------------------------
st.subheader("Download a plan")
export = st.selectbox("Plan to export", names, key="plan_export", format_func=common.planner_label)
files = plan_exports(s, plans[export])
cols = st.columns([*[1] * len(files), 2])  # (the last label is the long one)
for col, (file_name, text) in zip(cols, files.items(), strict=False):
    col.download_button(
        file_name,
        text,
        file_name=export_name(s, export, file_name),
        key=f"plan_dl_{file_name}",
        mime="application/json" if file_name.endswith(".json") else "text/csv",
        width="stretch",
    )
cols[-1].download_button(
    "summary.csv (all planners)",
    summary_to_csv(s, plans, as_run),
    file_name=export_name(s, "summary", "") + ".csv",
    key="plan_dl_summary",
    mime="text/csv",
    width="stretch",
    help="KPIs, every batch job and every team, one column per planner: a file to hand on."
    + (" Its last column is what your scheduler ran (KPIs only)." if as_run is not None else ""),
)
