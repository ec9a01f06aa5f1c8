"""Session state and shared widgets for the pages; the only UI module besides the pages.

Everything a browser session sees lives in `st.session_state` (never module globals), so two
sessions never share a scenario. The active scenario is always a valid `Scenario`: loads, uploads
and editor edits replace it only when they validate, otherwise they leave an error and change
nothing. The pure work (uploads, editor tables, controls, forecast alignment) lives in
`core.workload`; its names are re-exported here for the pages.
"""

from __future__ import annotations

import math
import runpy
import threading
from pathlib import Path
from typing import Any

import streamlit as st

from core import views
from core.formats import load_scenario
from core.model import JOB_TYPES, Scenario, ScenarioError
from core.planners import PLANNER_LABELS, SolveStatus
from core.planners.allocator import search_words
from core.workload import (  # noqa: F401  (re-exported for the pages)
    JOB_TABLE_COLUMNS,
    KEEP,
    NO_GPUS,
    EditResult,
    ForecastWindow,
    PendingEdits,
    default_capacity,
    editor_tables,
    forecast_window,
    ignored_lines,
    issues_table,
    scenario_from_editor,
    scenario_from_uploads,
    with_controls,
)

ROOT = Path(__file__).resolve().parent.parent
SCENARIO_DIR = ROOT / "data" / "scenarios"
DEFAULT_SCENARIOS = ("mixed-control", "example")

# Session-state keys that are not widgets.
K_SCENARIO, K_SOURCE, K_VERSION = "scenario", "scenario_source", "scenario_version"
K_PLANS = "plans"
K_UPLOAD_ERROR, K_UPLOADED_IDS = "upload_error", "uploaded_ids"
# Widget keys derived from the scenario: dropped when a new scenario arrives so they re-read it
# (and their values kept by `remember` across pages with them).
SCENARIO_CONTROL_PREFIX = "ctl_scn_"


# ---------------------------------------------------------------------------------------------
# Built-in scenarios


def builtin_scenarios() -> dict[str, Path]:
    """Scenario files under data/scenarios: `example` and the seven benchmarks first."""
    from core.bench import BENCHMARKS

    paths = {p.stem: p for p in sorted(SCENARIO_DIR.glob("*.json"))}
    return {n: paths[n] for n in views.builtin_order(paths, BENCHMARKS)}


def default_scenario_name() -> str:
    """The scenario a new session opens on: the first of DEFAULT_SCENARIOS that exists."""
    names = builtin_scenarios()
    return next((n for n in DEFAULT_SCENARIOS if n in names), next(iter(names), "example"))


@st.cache_data(show_spinner=False, max_entries=64)
def _load_cached(path: str, mtime: float) -> Scenario:
    """Pure and keyed by (path, mtime): loading a built-in file is safe to share."""
    return load_scenario(path)


def load_builtin(name: str) -> Scenario:
    path = builtin_scenarios()[name]
    return _load_cached(str(path), path.stat().st_mtime)


# ---------------------------------------------------------------------------------------------
# The active scenario


def scenario() -> Scenario:
    """The session's active (always valid) scenario; the default one on first open."""
    if K_SCENARIO not in st.session_state:
        name = default_scenario_name()
        set_scenario(load_builtin(name), f"built-in: {name}")
    return st.session_state[K_SCENARIO]


def scenario_version() -> int:
    scenario()
    return int(st.session_state.get(K_VERSION, 0))


def scenario_source() -> str:
    scenario()
    return str(st.session_state.get(K_SOURCE, ""))


def set_scenario(new: Scenario, source: str | None = None, *, reset_controls: bool = True) -> None:
    """Make `new` the active scenario; editors re-read it (new version)."""
    st.session_state[K_SCENARIO] = new
    st.session_state.pop(K_UPLOAD_ERROR, None)  # a stale upload error no longer applies
    if source is not None:
        st.session_state[K_SOURCE] = source
    st.session_state[K_VERSION] = int(st.session_state.get(K_VERSION, 0)) + 1
    if reset_controls:
        prefixes = (SCENARIO_CONTROL_PREFIX, "keep_" + SCENARIO_CONTROL_PREFIX)
        for key in [k for k in st.session_state if str(k).startswith(prefixes)]:
            del st.session_state[key]


def renew_editors() -> None:
    """New editor widgets, drawn afresh from their data (their keys carry the version), with
    the scenario unchanged."""
    st.session_state[K_VERSION] = scenario_version() + 1


# ---------------------------------------------------------------------------------------------
# The Workload editors' pending edits: tables that do not validate yet are kept here (widgets
# lose their state when the page is left) and drawn again until fixed or discarded.

K_PENDING_EDITS = "wl_pending_edits"  # PendingEdits
K_EDITORS_DRAWN = "wl_editors_drawn"  # (version, jobs, demand): editors drawn from pending edits


def editor_data(s: Scenario) -> tuple[Any, Any, str]:
    """(jobs, demand, note): the tables to draw the Workload editors from.

    The scenario's tables, unless edits that do not validate yet are pending and the editors
    lost them (the page was left): then the editors are drawn anew from those edits, so they
    show again with their errors. Pending edits made on tables that have changed since (another
    workload, a swap cap, the horizon) are dropped, and the note says so.
    """
    jobs, demand = editor_tables(s)
    note = ""
    pending = st.session_state.get(K_PENDING_EDITS)
    if pending is not None and not pending.made_on(jobs, demand):
        st.session_state.pop(K_PENDING_EDITS)
        pending = None
        note = (
            "Edits that were not valid yet were dropped: the workload changed under them "
            f"({scenario_source()})."
        )
    drawn = st.session_state.get(K_EDITORS_DRAWN)
    if drawn is not None and drawn[0] != scenario_version():
        drawn = None
    if pending is None:
        if st.session_state.pop(K_EDITORS_DRAWN, None) is not None and drawn is not None:
            renew_editors()  # edits fixed, reverted or discarded: back to the scenario's tables
        return jobs, demand, note
    if f"wl_jobs_{scenario_version()}" in st.session_state:  # the editors hold the edits
        return (drawn[1], drawn[2], note) if drawn is not None else (jobs, demand, note)
    if drawn is not None and pending.shows(drawn[1], drawn[2]):
        return drawn[1], drawn[2], note
    renew_editors()
    jobs = pending.renumbered()
    st.session_state[K_EDITORS_DRAWN] = (scenario_version(), jobs, pending.demand)
    return jobs, pending.demand, note


def keep_pending_edits(s: Scenario, jobs: Any, demand: Any) -> None:
    """Keep the editors' tables that do not validate (the scenario `s` stays active)."""
    base_jobs, base_demand = editor_tables(s)
    st.session_state[K_PENDING_EDITS] = PendingEdits(base_jobs, base_demand, jobs, demand)


def discard_pending_edits() -> None:
    """Drop pending edits: the editors are drawn from the active scenario again."""
    st.session_state.pop(K_PENDING_EDITS, None)
    st.session_state.pop(K_EDITORS_DRAWN, None)
    renew_editors()


K_UPLOAD_DONE, K_UPLOADER_VERSION = "upload_done", "uploader_version"
K_UPLOAD_REFUSED = "upload_refused"  # the (emptied) uploader a refused upload's error belongs to


def uploader_key() -> str:
    """The file uploader's key: a new one empties the uploader (after picking a built-in)."""
    return f"wl_upload_{int(st.session_state.setdefault(K_UPLOADER_VERSION, 0))}"


def clear_uploader() -> None:
    st.session_state[K_UPLOADER_VERSION] = int(st.session_state.get(K_UPLOADER_VERSION, 0)) + 1
    for key in (K_UPLOAD_ERROR, K_UPLOADED_IDS, K_UPLOAD_DONE, K_UPLOAD_REFUSED):
        st.session_state.pop(key, None)


def load_uploads(files: list[Any]) -> views.UploadState:
    """Load newly uploaded files (JSON, or the jobs/demand CSV pair); errors keep the scenario.

    One CSV alone waits for the other file of the pair. Files are taken out of the uploader (a
    new, empty one) once read, loaded or not, so that they are never read again with the next
    files; a refusal's error stays until the uploader holds files again. A loaded upload
    becomes the active scenario and the page reruns, so the sidebar (drawn before the
    uploader) shows it at once.
    """
    names = [f.name for f in files]
    headers = {f.name: views.csv_header(f.getvalue()) for f in files}
    state = views.upload_state(names, headers)
    if state.kind != "ready":
        refused_here = st.session_state.get(K_UPLOAD_REFUSED) == uploader_key()
        if files or not refused_here:  # (the uploader emptied after a refusal keeps its error)
            st.session_state.pop(K_UPLOAD_ERROR, None)
            st.session_state.pop(K_UPLOAD_REFUSED, None)
        st.session_state.pop(K_UPLOADED_IDS, None)
        return state
    ids = tuple(sorted(str(getattr(f, "file_id", f.name)) for f in files))
    if st.session_state.get(K_UPLOADED_IDS) == ids:
        return state  # already handled on an earlier rerun: do not undo later edits
    st.session_state[K_UPLOADED_IDS] = ids
    try:
        new, source = scenario_from_uploads([(f.name, f.getvalue()) for f in files], scenario())
    except ScenarioError as e:
        clear_uploader()
        st.session_state[K_UPLOAD_ERROR] = e.problems
        st.session_state[K_UPLOAD_REFUSED] = uploader_key()
        st.rerun()
    pair = views.csv_pair(names, headers)
    if pair is not None:
        new = views.named_pair(new, *pair)
    set_scenario(new, source)
    clear_uploader()  # loaded files leave the uploader too: the next upload is read alone
    st.session_state[K_UPLOAD_DONE] = views.loaded_message(new, names)
    st.rerun()
    return state


def workspace() -> Any:
    """The saved-scenario workspace (GPUPLAN_WORKSPACE, else the user's data folder).

    Raises WorkspaceError with a message when the file cannot be used.
    """
    from core.workspace import default_path

    return _workspace_at(str(default_path()))


def saved_workloads() -> None:
    """The workspace's saved workloads in an expander, each one a click from active (the Saved
    & compare page saves, deletes and compares them)."""
    from core.workspace import WorkspaceError

    try:
        saved = workspace().scenarios()
    except WorkspaceError as e:
        st.caption(f"Saved workloads are not available: {e}")
        return
    with st.expander(f"Saved workloads ({len(saved)})"):
        if not saved:
            st.caption("None yet: save the active workload on the Saved & compare page.")
        for k, item in enumerate(saved):
            left, right = st.columns([4, 1])
            left.markdown(
                f"**{item.name}** · {item.gpus} GPUs · {item.jobs} jobs · "
                f"{views.plural(item.runs, 'run')} · "
                f"saved {item.saved_at[:16].replace('T', ' ')} UTC"
            )
            if right.button("Open", key=f"wl_saved_open_{k}", width="stretch"):
                try:
                    set_scenario(workspace().load_scenario(item.name), f"saved: {item.name}")
                except WorkspaceError as e:
                    st.error(f"{e}. The active workload is unchanged.")
                else:
                    st.rerun()


@st.cache_resource(show_spinner=False)
def _workspace_at(path: str) -> Any:
    """One Workspace object per file and process (it opens a short connection per call)."""
    from core.workspace import Workspace

    return Workspace(path)


# ---------------------------------------------------------------------------------------------
# Shared widgets


_ROUTER = threading.local()  # per script-run thread: is app.py's router running this page?


def run_routed(page: Any) -> None:
    """Run the page chosen by app.py's `st.navigation`, marked as routed (see page_header)."""
    _ROUTER.active = True
    try:
        page.run()
    finally:
        _ROUTER.active = False


def run_router() -> None:
    """Run app.py (the frame and the navigation), which then runs the requested page."""
    runpy.run_path(str(ROOT / "app.py"), run_name="__gpuplan_router__")


def page_header(title: str, explanation: str) -> None:
    """The page's title and one-line explanation; a page run without the router gets it.

    On a freshly started server Streamlit may run a file of pages/ directly (its older
    folder-based navigation, used until the first `st.navigation` call): then the router runs
    instead, so the page always has its frame, its sidebar and its URL.
    """
    if not getattr(_ROUTER, "active", False):
        run_router()
        st.stop()
    st.title(title)
    st.caption(explanation)


def sidebar_summary() -> None:
    s = scenario()
    c = s.cluster
    with st.sidebar:
        st.markdown(f"**Active workload:** `{s.name}`")
        st.caption(
            f"{c.gpus:,} GPUs x {c.horizon_steps:,} steps of {c.step_minutes} min · "
            f"{len(s.batch_jobs):,} batch + {len(s.realtime_jobs):,} real-time jobs · "
            f"{scenario_source()}"
        )


def colour_legend(entries: list[tuple[str, str]]) -> None:
    """A row of colour chips (label, colour): one legend shared by side-by-side charts."""
    from html import escape

    chips = "".join(
        f'<span style="display:inline-flex;align-items:center;margin:0 14px 4px 0;'
        f'font-size:0.85rem"><span style="width:14px;height:14px;background:{colour};'
        f'border:1px solid #adb5bd;border-radius:2px;margin-right:5px;display:inline-block">'
        f"</span>{escape(label)}</span>"
        for label, colour in entries
    )
    st.markdown(f'<div style="line-height:1.6">{chips}</div>', unsafe_allow_html=True)


def remember(key: str) -> None:
    """on_change callback: keep a widget's value after its page is left (widgets are cleaned)."""
    st.session_state["keep_" + key] = st.session_state[key]


def init_widget(key: str, default: Any) -> None:
    """Give a widget key its remembered value (or the default) before the widget is drawn."""
    if key not in st.session_state:
        st.session_state[key] = st.session_state.get("keep_" + key, default)


def metric_vs_fifo(
    label: str, value: str, change: float | None, text: str, help: str | None = None
) -> None:
    """A KPI card's metric with its change vs FIFO (`views.change_words`): coloured with an
    arrow only where the change shows at the card's precision."""
    words, coloured = views.change_words(change, text, "FIFO")
    if coloured:
        st.metric(label, value, words, help=help)
    else:
        st.metric(label, value, words, delta_color="off", delta_arrow="off", help=help)


def planner_label(name: str) -> str:
    return PLANNER_LABELS.get(name, name)


def choose_planners(options: list[str], key: str, help: str) -> list[str]:
    """The planners to run, as toggles wrapped onto as many rows as the column needs: every
    option and whether it is on stay in view (a multiselect, or pills left on one row in a
    column, scroll their first options out of sight once three or four are shown)."""
    return st.pills(
        "Planners",
        options,
        selection_mode="multi",
        key=key,
        format_func=planner_label,
        on_change=remember,
        args=(key,),
        help=help,
        wrap=True,
    )


def format_ms(ms: float) -> str:
    """A planner's runtime for people: '1.4 ms', '850 ms', '20.8 s'."""
    if ms >= 1000:
        return f"{ms / 1000:,.1f} s"
    return f"{ms:,.1f} ms" if ms < 100 else f"{ms:,.0f} ms"


def status_words(stats: dict[str, Any]) -> str:
    """A solver status in words ('optimal (proved)'), or 'done' for planners without one."""
    status = stats.get("status")
    if status is None:
        return "done"
    try:
        return SolveStatus(status).words
    except ValueError:
        return str(status)


def solver_summary(stats: dict[str, Any]) -> str:
    """Status, bound and gap of a planner that proves a bound, in words; no 'inf' on screen;
    for a search without a bound (thorough), how it ended and what won."""
    status = stats.get("status")
    if status is None and "time_limit_reached" in stats:
        return search_words(stats)
    message = str(stats.get("message") or "")
    if status is not None and message.startswith("not solved"):  # why, e.g. too little time
        advice = (
            " Raise the time limit to solve it."
            if status == SolveStatus.TIME_LIMIT_WARM_START
            else ""
        )
        return f"N{message[1:]}; no bound was computed.{advice}"
    if status is not None and not SolveStatus(status).solver_ran:
        return f"{status_words(stats)}: no bound was computed"
    bound, gap = stats.get("bound"), stats.get("gap")
    parts = [status_words(stats)]
    most = stats.get("most_coverage")  # a coverage target no plan reaches
    if most is not None:
        if stats.get("most_coverage_proved"):
            parts.append(f"{most:.1%} is the most any plan reaches (proved)")
        else:
            parts.append(f"{most:.1%} is the most found (not proved the most there is)")
    if bound is not None and math.isfinite(bound):
        parts.append(f"bound {bound:,.1f}")
    if gap is not None and math.isfinite(gap):
        parts.append(f"gap {gap:.2%}")
    return " · ".join(parts)


def format_hours(hours: float) -> str:
    if math.isinf(hours):
        return "never (no decay)"
    if hours >= 48:
        return f"{hours / 24:.1f} days"
    return f"{hours:.1f} h"


JOB_TYPE_OPTIONS = list(JOB_TYPES)


# ---------------------------------------------------------------------------------------------
# Plan & compare: controls applied to the scenario, and the session's plans


def stored_plans(s: Scenario) -> dict[str, Any]:
    """The session's plans for exactly this scenario (dropped when the scenario changed)."""
    store = st.session_state.get(K_PLANS)
    if not store or store["scenario"] != s:
        store = {"scenario": s, "plans": {}, "errors": {}}
        st.session_state[K_PLANS] = store
    return store


def ensure_plans(s: Scenario, names: list[str]) -> dict[str, Any]:
    """The session's plans of `s`, solving the (fast) ones that are missing."""
    from core.planners import solve

    store = stored_plans(s)
    for name in names:
        if name not in store["plans"]:
            store["plans"][name] = solve(s, name)
    return {n: store["plans"][n] for n in names if n in store["plans"]}


def show_grid(
    s: Scenario,
    plan: Any,
    title: str,
    key: str,
    *,
    show_legend: bool = True,
    colour_by: str | None = None,
) -> None:
    """The GPU x time grid chart, or a note when the grid is too large to draw in a browser;
    coloured by job, or by type past `charts.JOB_COLOURS_UP_TO` jobs, unless `colour_by`."""
    from core import charts

    colour_by = colour_by or charts.default_colour_by(s)
    cells = int(plan.grid.size)
    if cells > charts.MAX_DRAWN_CELLS:
        st.info(f"{title}: {cells:,} cells are too many to draw; download grid.csv instead.")
        return
    st.plotly_chart(
        charts.grid_figure(s, plan, title, show_legend=show_legend, colour_by=colour_by),
        key=key,
        config={"displayModeBar": False},
    )


if __name__ == "__main__":  # Streamlit's older folder navigation ran this helper as a page
    run_router()
