"""Pure plotly figure builders for the app: data in, `go.Figure` out, never streamlit.

The GPU x time grid is drawn as ONE heatmap with a categorical colour mapping (a stepped
colourscale over category codes), not one trace per cell, so 64 GPUs x 48 steps stays fast. Each job
keeps its colour across planners (colour by position in `scenario.jobs`); real-time GPUs held above
the step's demand get a pale shade of the job's colour, which is exactly where `allocated_fraction`
and `utilization` part ways.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from .model import BatchJob, RealtimeJob, Scenario
from .plan import IDLE, Plan, holdings
from .planners import BASELINE, PLANNER_COLOURS, PLANNER_NAMES

IDLE_COLOUR = "#e9ecef"
# Batch jobs: blues, greens, oranges, yellows, browns (Okabe-Ito first, then Tableau), cycled.
# Real-time jobs: dark reds and purples only, so serving is never mistaken for batch work; their
# pale shade marks GPUs held above demand.
JOB_COLOURS = (
    "#0072B2",
    "#E69F00",
    "#009E73",
    "#56B4E9",
    "#F0E442",
    "#9C755F",
    "#4E79A7",
    "#F28E2B",
    "#59A14F",
    "#76B7B2",
    "#EDC948",
    "#3969AC",
    "#80BA5A",
    "#B6992D",
    "#008695",
    "#A0CBE8",
    "#FFBE7D",
    "#8CD17D",
    "#499894",
    "#86BCB6",
    "#D4A6C8",
    "#BAB0AC",
    "#F1CE63",
    "#79706E",
)
REALTIME_COLOURS = ("#C0392B", "#6C3483", "#922B21", "#A04000", "#4A235A", "#78281F")
# Above this many cells the grid's hover names only GPU and step (the per-cell text would
# dominate the figure's size); above MAX_DRAWN_CELLS a page should offer grid.csv instead.
MAX_HOVER_CELLS = 200_000
MAX_DRAWN_CELLS = 2_000_000
# Planner order and colours come from the registry, so a new planner needs nothing here.
PLANNER_ORDER = PLANNER_NAMES
METRIC_COLOURS = {"utilization": "#0072B2", "value": "#E69F00", "allocated": "#9aa5b1"}
# What a scheduler really did (an imported history's as-run metrics): grey, after the planners,
# because it is no planner and its "grid" is not a legal one.
AS_RUN = "as-run"
AS_RUN_COLOURS = {"utilization": "#6c757d", "value": "#b8bfc6"}


COLOUR_BY = ("job", "type", "team")  # what one colour of a grid stands for
TYPE_COLOURS = {
    "training": "#0072B2",
    "batch_inference": "#009E73",
    "quantization": "#CC79A7",
    "realtime": "#D55E00",
}
NO_TEAM = "no team"


JOB_COLOURS_UP_TO = 24  # jobs: beyond, grids are coloured by job type by default


def default_colour_by(scenario: Scenario) -> str:
    """How a grid is coloured unless the planner chooses: one colour per job while the legend
    stays readable, else by job type (an import of hundreds of jobs; the hover names the job)."""
    return "job" if len(scenario.jobs) <= JOB_COLOURS_UP_TO else "type"


def job_colours(scenario: Scenario, by: str = "job") -> list[str]:
    """One colour per job, stable for a scenario: by job (real-time jobs in warm/dark tones), by
    job type, or by team (jobs of one group share a colour; the hover still names the job)."""
    if by not in COLOUR_BY:
        raise ValueError(f"colour by one of {', '.join(COLOUR_BY)}, got {by!r}")
    if by == "type":
        return [TYPE_COLOURS.get(job.type, "#6c757d") for job in scenario.jobs]
    if by == "team":
        teams = list(dict.fromkeys(_group(job, by) for job in scenario.jobs))
        colour = {t: JOB_COLOURS[k % len(JOB_COLOURS)] for k, t in enumerate(teams)}
        return [colour[_group(job, by)] for job in scenario.jobs]
    out, batch_k, rt_k = [], 0, 0
    for job in scenario.jobs:
        if isinstance(job, RealtimeJob):
            out.append(REALTIME_COLOURS[rt_k % len(REALTIME_COLOURS)])
            rt_k += 1
        else:
            out.append(JOB_COLOURS[batch_k % len(JOB_COLOURS)])
            batch_k += 1
    return out


def _group(job: Any, by: str) -> str:
    """The legend label of a job's colour: its id, its type or its team."""
    if by == "type":
        return str(job.type)
    if by == "team":
        return str(getattr(job, "team", None) or NO_TEAM)
    return str(job.id)


def pale(colour: str, amount: float = 0.6) -> str:
    """A colour mixed with white (amount 0: unchanged, 1: white)."""
    r, g, b = (int(colour[k : k + 2], 16) for k in (1, 3, 5))
    mix = [round(c + (255 - c) * amount) for c in (r, g, b)]
    return "#" + "".join(f"{c:02x}" for c in mix)


def step_labels(scenario: Scenario) -> list[str]:
    """Clock labels for the steps ('Mon 05:00'), or 'step t' when the cluster has no start."""
    c = scenario.cluster
    if c.start is None:
        return [f"step {t}" for t in range(c.horizon_steps)]
    return [
        (c.start + timedelta(minutes=c.step_minutes * t)).strftime("%a %H:%M")
        for t in range(c.horizon_steps)
    ]


def _time_axis(scenario: Scenario, max_ticks: int = 12) -> dict[str, Any]:
    """Ticks with the step number over the clock time; the weekday only where the day changes."""
    c = scenario.cluster
    T = c.horizon_steps
    nice = (1, 2, 3, 4, 6, 8, 12, 24, 48, 96, 168, 336, 672, 1344, 2688, 5376, 10752)
    every = next((n for n in nice if T / n <= max_ticks), T)
    ticks = list(range(0, T, every))
    text = [str(t) for t in ticks]
    if c.start is not None:
        text, last_day = [], None
        for t in ticks:
            when = c.start + timedelta(minutes=c.step_minutes * t)
            day = when.date()
            clock = when.strftime("%a %H:%M") if day != last_day else when.strftime("%H:%M")
            text.append(f"{t}<br>{clock}")
            last_day = day
    title = f"step ({c.step_minutes} min each)"
    return {"tickvals": ticks, "ticktext": text, "title": title, "range": [-0.5, T - 0.5]}


def serving_mask(scenario: Scenario, plan: Plan) -> np.ndarray:
    """(G, T) True where a real-time GPU is held beyond ceil(demand) at that step (reserved idle).

    Which of a job's GPUs counts as serving is arbitrary; the lowest-numbered ones do.
    """
    grid = plan.grid
    above = np.zeros(grid.shape, dtype=bool)
    for job in scenario.realtime_jobs:
        j = scenario.job_index(job.id)
        held = grid == j
        rank = np.cumsum(held, axis=0)  # 1-based rank of each held GPU within its step
        need = np.ceil(np.asarray(job.demand, dtype=float) - 1e-9)
        above |= held & (rank > need[None, :])
    return above


def grid_legend(
    scenario: Scenario, plans: Sequence[Plan] = (), by: str = "job"
) -> list[tuple[str, str]]:
    """(label, colour) for every job (or type, or team) holding a cell in any plan, then shades.

    The grids share one legend: colours are fixed per job, whichever planner drew the grid.
    """
    colours = job_colours(scenario, by)
    present: set[int] = set()
    reserved: set[int] = set()
    for plan in plans:
        present |= set(np.unique(plan.grid[plan.grid != IDLE]).tolist())
        above = serving_mask(scenario, plan)
        reserved |= set(np.unique(plan.grid[above]).tolist())
    jobs = scenario.jobs
    entries = list(
        dict.fromkeys(
            (_group(job, by), colours[j]) for j, job in enumerate(jobs) if j in present or not plans
        )
    )
    entries += list(
        dict.fromkeys(
            (f"{_group(jobs[j], by)}: held above demand", pale(colours[j]))
            for j in sorted(reserved)
        )
    )
    entries.append(("idle", IDLE_COLOUR))
    return entries


def grid_figure(
    scenario: Scenario,
    plan: Plan,
    title: str | None = None,
    *,
    height: int | None = None,
    show_legend: bool = True,
    colour_by: str = "job",
) -> go.Figure:
    """GPU x time Gantt grid: one heatmap, one colour per job (or per type or team), idle cells
    visible, and a hover that names the job of every cell."""
    grid = plan.grid
    G, T = grid.shape
    colours = job_colours(scenario, colour_by)
    above = serving_mask(scenario, plan)
    # Category codes index the distinct colours (idle first), so the colour scale stays small
    # however many jobs there are; the hover tells jobs of a shared colour apart.
    rt_positions = [scenario.job_index(j.id) for j in scenario.realtime_jobs]
    palette = list(
        dict.fromkeys([IDLE_COLOUR, *colours, *(pale(colours[j]) for j in rt_positions)])
    )
    code_of = {colour: k for k, colour in enumerate(palette)}
    job_code = np.array([code_of[c] for c in colours] or [0], dtype=np.int32)
    codes = np.where(grid == IDLE, 0, job_code[np.maximum(grid, 0)]).astype(np.int32)
    for j in rt_positions:
        codes[(grid == j) & above] = code_of[pale(colours[j])]
    K = len(palette)
    scale = []
    for k, colour in enumerate(palette):
        scale += [[k / K, colour], [(k + 1) / K, colour]]

    labels = step_labels(scenario)
    hover = None if G * T > MAX_HOVER_CELLS else _grid_hover(scenario, plan, above, labels)

    fig = go.Figure(
        go.Heatmap(
            z=codes,
            x=list(range(T)),
            y=list(range(G)),
            zmin=-0.5,
            zmax=K - 0.5,
            colorscale=scale,
            showscale=False,
            text=hover,
            hovertemplate="%{text}<extra></extra>"
            if hover is not None
            else "GPU %{y} · step %{x}<extra></extra>",
            xgap=1 if T <= 96 else 0,
            ygap=1 if G <= 128 else 0,
        )
    )
    return _finish_grid(fig, scenario, plan, title, height, show_legend, colour_by)


def _grid_hover(scenario: Scenario, plan: Plan, above: np.ndarray, labels: list[str]) -> np.ndarray:
    """Per cell: job, type, priority, serving or reserved, GPU, step and clock time."""
    grid = plan.grid
    G, T = grid.shape
    jobs = scenario.jobs
    describe = []
    for job in jobs:
        if isinstance(job, BatchJob):
            describe.append(f"<b>{job.id}</b><br>{job.type}, priority {job.priority:g}")
        else:
            describe.append(f"<b>{job.id}</b><br>realtime, priority {job.priority:g}")
    demand = {scenario.job_index(j.id): j.demand for j in scenario.realtime_jobs}
    hover = np.empty((G, T), dtype=object)
    for g in range(G):
        for t in range(T):
            j = int(grid[g, t])
            where = f"GPU {g} · step {t} · {labels[t]}"
            if j == IDLE:
                hover[g, t] = f"idle<br>{where}"
            elif j in demand:
                state = "reserved above demand" if above[g, t] else "serving"
                hover[g, t] = f"{describe[j]}<br>{state} (demand {demand[j][t]:g})<br>{where}"
            else:
                hover[g, t] = f"{describe[j]}<br>{where}"
    return hover


def _finish_grid(
    fig: go.Figure,
    scenario: Scenario,
    plan: Plan,
    title: str | None,
    height: int | None,
    show_legend: bool,
    colour_by: str = "job",
) -> go.Figure:
    G = plan.grid.shape[0]
    legend = grid_legend(scenario, [plan], colour_by) if show_legend else []
    if show_legend:
        for name, colour in legend:
            fig.add_trace(
                go.Scatter(
                    x=[None],
                    y=[None],
                    mode="markers",
                    name=name,
                    marker={
                        "symbol": "square",
                        "size": 12,
                        "color": colour,
                        "line": {"width": 1, "color": "#adb5bd"},
                    },
                    hoverinfo="skip",
                )
            )
    # up to 28 px a GPU, at least 4, and no more than 960 px for the grid (a 1,024-GPU import is
    # an overview there: hover a cell, or download grid.csv)
    grid_px = min(G * min(28, max(4, 640 // max(G, 1))), 960)
    legend_rows = math.ceil(len(legend) / 4)
    fig.update_layout(
        title=title,
        height=height or max(220, grid_px + 110 + 24 * legend_rows),
        margin={"l": 50, "r": 10, "t": 40 if title else 10, "b": 10},
        plot_bgcolor="white",
        showlegend=show_legend,
        # below the time axis's ticks and title: 64 px under the grid, however tall it is
        legend={
            "orientation": "h",
            "yanchor": "top",
            "y": -64 / grid_px,
            "x": 0,
            "font": {"size": 11},
        },
    )
    fig.update_xaxes(
        **_time_axis(scenario, max_ticks=7), showgrid=False, zeroline=False, tickangle=0
    )
    fig.update_yaxes(
        title="GPU",
        autorange="reversed",
        showgrid=False,
        zeroline=False,
        dtick=1 if G <= 16 else (8 if G <= 128 else None),
    )
    return fig


def _planner_rows(metrics_by_planner: Mapping[str, Mapping[str, Any]]) -> list[str]:
    known = [p for p in PLANNER_ORDER if p in metrics_by_planner]
    return known + [p for p in metrics_by_planner if p not in known]


def _bar_colours(planners: Sequence[str], metric: str) -> list[str]:
    return [AS_RUN_COLOURS[metric] if p == AS_RUN else METRIC_COLOURS[metric] for p in planners]


def utilization_value_figure(
    metrics_by_planner: Mapping[str, Mapping[str, Any]], baseline: str = BASELINE
) -> go.Figure:
    """Utilization and priority-weighted value per planner, both as an index (baseline = 100).

    Side-by-side bars make the divergence plain: a plan can hold utilization level while its
    value climbs (or the reverse). Bar labels carry the absolute numbers.
    """
    planners = _planner_rows(metrics_by_planner)
    base = metrics_by_planner.get(baseline)
    util = np.array([float(metrics_by_planner[p]["utilization"]) for p in planners])
    value = np.array([float(metrics_by_planner[p]["value"]) for p in planners])
    if base is not None and float(base["utilization"]) > 0 and float(base["value"]) > 0:
        util_index = util / float(base["utilization"]) * 100
        value_index = value / float(base["value"]) * 100
        axis_title = f"index: {baseline} = 100"
    else:
        util_index = util / max(util.max(), 1e-12) * 100
        value_index = value / max(value.max(), 1e-12) * 100
        axis_title = "index: best planner = 100"
    fig = go.Figure()
    fig.add_trace(
        go.Bar(
            name="utilization (GPU-time doing work)",
            x=planners,
            y=util_index,
            marker_color=_bar_colours(planners, "utilization"),
            text=[f"{u:.1%}" for u in util],
            textposition="outside",
            hovertemplate="%{x}: utilization %{text} (index %{y:.0f})<extra></extra>",
        )
    )
    fig.add_trace(
        go.Bar(
            name="value (priority-weighted GPU-hours)",
            x=planners,
            y=value_index,
            marker_color=_bar_colours(planners, "value"),
            # (the unit under the number while four bars' width holds it; the legend has it)
            text=[
                f"{v:,.0f}<br>weighted GPU-h" if len(planners) <= 3 else f"{v:,.0f}" for v in value
            ],
            textposition="outside",
            customdata=value,
            hovertemplate="%{x}: value %{customdata:,.1f} priority-weighted GPU-hours "
            "(index %{y:.0f})<extra></extra>",
        )
    )
    top = float(max(util_index.max(initial=0), value_index.max(initial=0)))
    fig.add_hline(y=100, line_dash="dot", line_color="#6c757d", layer="below")  # under labels
    fig.update_layout(
        barmode="group",
        height=360,
        uniformtext={"minsize": 10, "mode": "show"},  # labels stay readable beside many bars
        title="Utilization vs priority-weighted value (bar height: index; label: absolute)",
        margin={"l": 50, "r": 10, "t": 50, "b": 10},
        plot_bgcolor="white",
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 0},
        yaxis={"title": axis_title, "range": [0, top * 1.18 + 1], "gridcolor": "#eee"},
    )
    return fig


def realtime_figure(
    scenario: Scenario, plans: Mapping[str, Plan], job_id: str | None = None
) -> go.Figure:
    """A real-time job's demand (step line) against the GPUs each planner gave it."""
    rt = scenario.realtime_jobs
    fig = go.Figure()
    if not rt:
        fig.update_layout(
            height=120, annotations=[{"text": "no real-time jobs", "showarrow": False}]
        )
        return fig
    job = next((j for j in rt if j.id == job_id), rt[0])
    j = scenario.job_index(job.id)
    steps = list(range(scenario.cluster.horizon_steps))
    labels = step_labels(scenario)
    fig.add_trace(
        go.Scatter(
            x=steps,
            y=list(job.demand),
            name="demand",
            mode="lines",
            line={"shape": "hv", "color": "#212529", "width": 3},
            customdata=labels,
            hovertemplate="%{customdata}: demand %{y:g}<extra></extra>",
        )
    )
    dashes = ("solid", "dash", "dot", "longdash", "dashdot")
    names = _planner_rows(plans)
    drawn: dict[str, np.ndarray] = {}
    for k, name in enumerate(names):
        held = holdings(scenario, plans[name])[j]
        # Earlier planners are drawn wider, so a later one on the very same steps lies on top of
        # it without hiding it; the legend says when two allocations coincide.
        same = next((other for other, h in drawn.items() if np.array_equal(h, held)), None)
        drawn[name] = held
        fig.add_trace(
            go.Scatter(
                x=steps,
                y=held.tolist(),
                name=f"{name} allocated" + (f" (same as {same})" if same else ""),
                mode="lines",
                line={
                    "shape": "hv",
                    "dash": dashes[k % len(dashes)],
                    "width": 2 + 2.5 * (len(names) - 1 - k),
                    "color": PLANNER_COLOURS.get(name),
                },
                opacity=0.9 if k == len(names) - 1 else 0.55,
                customdata=labels,
                hovertemplate="%{customdata}: " + name + " holds %{y} GPUs<extra></extra>",
            )
        )
    # the legend under the time axis, a row per three entries (above the plot, four or more
    # planners ran into the title)
    rows = math.ceil((1 + len(names)) / 3)
    fig.update_layout(
        height=280 + 24 * rows,
        title=f"Real-time '{job.id}': demand vs GPUs allocated",
        margin={"l": 50, "r": 10, "t": 40, "b": 10 + 24 * rows},
        plot_bgcolor="white",
        legend={"orientation": "h", "yanchor": "top", "y": -0.32, "x": 0},
        yaxis={"title": "GPUs", "gridcolor": "#eee", "rangemode": "tozero"},
    )
    fig.update_xaxes(**_time_axis(scenario))
    return fig


def forecast_figure(
    forecast: pd.DataFrame,
    history: pd.Series | None = None,
    *,
    level: float = 0.9,
    history_hours: int = 336,
    unit: str = "traffic",
    highlight: tuple[Any, Any] | None = None,
    step_0: pd.Timestamp | None = None,
) -> go.Figure:
    """Recent history, the forecast mean and its central interval band; `highlight` shades a
    span of time (e.g. the scenario's horizon). With `step_0` (a history without dates of its
    own: an import of a relative trace) time is drawn as hours from that step, not as dates."""

    def when(index: Any) -> Any:
        if step_0 is None:
            return index
        return (pd.DatetimeIndex(index) - step_0) / pd.Timedelta(hours=1)

    fig = go.Figure()
    if history is not None and len(history):
        recent = history.iloc[-history_hours:]
        fig.add_trace(
            go.Scatter(
                x=when(recent.index),
                y=recent.to_numpy(),
                name="history",
                mode="lines",
                line={"color": "#6c757d", "width": 1},
            )
        )
    x = when(forecast.index)
    fig.add_trace(
        go.Scatter(
            x=x,
            y=forecast["upper"],
            mode="lines",
            line={"width": 0},
            showlegend=False,
            hoverinfo="skip",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=x,
            y=forecast["lower"],
            mode="lines",
            line={"width": 0},
            fill="tonexty",
            fillcolor="rgba(0,114,178,0.2)",
            name=f"{level:.0%} interval",
            hoverinfo="skip",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=x,
            y=forecast["mean"],
            mode="lines",
            name="forecast mean",
            line={"color": "#0072B2", "width": 2},
        )
    )
    if highlight is not None:
        start, end = when(list(highlight))
        fig.add_vrect(
            x0=start,
            x1=end,
            fillcolor="rgba(230,159,0,0.12)",
            line_width=0,
            annotation_text="scenario horizon",
            annotation_position="top left",
        )
    fig.update_layout(
        height=340,
        title="Weekly demand profile: history and forecast",
        margin={"l": 50, "r": 10, "t": 50, "b": 10},
        plot_bgcolor="white",
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 0.45},
        yaxis={"title": unit, "gridcolor": "#eee", "rangemode": "tozero"},
    )
    if step_0 is not None:
        fig.update_xaxes(title="hours from step 0", dtick=24, gridcolor="#eee")
    return fig


def _label_ticks(labels: Sequence[str], max_ticks: int = 12) -> dict[str, Any]:
    """Every k-th of a sequence of step labels as ticks on an integer axis (no slanted text)."""
    n = len(labels)
    every = max(1, math.ceil(n / max_ticks))
    ticks = list(range(0, n, every))
    return {
        "tickvals": ticks,
        "ticktext": [str(labels[t]) for t in ticks],
        "tickangle": 0,
        "range": [-0.5, n - 0.5],
    }


def gpu_path_figure(
    labels: Sequence[str],
    needed_mean: Sequence[float],
    needed_upper: Sequence[float] | None,
    path: Sequence[float],
    allocated: Sequence[float] | None = None,
    swap_cap: int | None = None,
    allocated_name: str | None = None,
    upper_name: str = "GPUs at the upper quantile",
) -> go.Figure:
    """GPUs the forecast needs (mean, a quantile) against the path under the swap cap, one
    value per step (`labels` name the steps)."""
    x = list(range(len(labels)))
    hover = "%{customdata}: %{y} GPUs<extra>%{fullData.name}</extra>"
    fig = go.Figure()
    if needed_upper is not None:
        fig.add_trace(
            go.Scatter(
                x=x,
                y=list(needed_upper),
                name=upper_name,
                mode="lines",
                line={"color": "#9aa5b1", "dash": "dot", "shape": "hv"},
                customdata=list(labels),
                hovertemplate=hover,
            )
        )
    fig.add_trace(
        go.Scatter(
            x=x,
            y=list(needed_mean),
            name="GPUs at the forecast mean",
            mode="lines",
            line={"color": "#0072B2", "shape": "hv"},
            customdata=list(labels),
            hovertemplate=hover,
        )
    )
    cap = f" (swap cap {swap_cap})" if swap_cap is not None else ""
    fig.add_trace(
        go.Scatter(
            x=x,
            y=list(path),
            name=f"GPU path{cap}",
            mode="lines",
            line={"color": "#D55E00", "shape": "hv", "width": 3},
            customdata=list(labels),
            hovertemplate=hover,
        )
    )
    if allocated is not None:
        fig.add_trace(
            go.Scatter(
                x=x,
                y=list(allocated),
                name=allocated_name or "plan allocation",
                mode="lines",
                line={"color": "#009E73", "shape": "hv", "dash": "dash"},
                customdata=list(labels),
                hovertemplate=hover,
            )
        )
    fig.update_layout(
        height=320,
        title="GPUs needed and the path under the swap cap",
        margin={"l": 50, "r": 10, "t": 50, "b": 10},
        plot_bgcolor="white",
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 0.3},
        yaxis={"title": "GPUs", "gridcolor": "#eee", "rangemode": "tozero"},
        xaxis=_label_ticks(labels),
    )
    return fig


def coverage_risk_figure(
    risk: np.ndarray | Sequence[float] | Sequence[Sequence[float]],
    x: Sequence[Any] | None = None,
    rows: Sequence[str] | None = None,
    title: str = "Coverage risk: P(demand > GPUs allocated)",
) -> go.Figure:
    """A strip (one row per job) coloured by the probability that demand exceeds allocation."""
    z = np.atleast_2d(np.asarray(risk, dtype=float))
    labels = [str(v) for v in x] if x is not None else [str(t) for t in range(z.shape[1])]
    names = list(rows) if rows is not None else [f"row {k}" for k in range(z.shape[0])]
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=list(range(z.shape[1])),
            y=names,
            zmin=0,
            zmax=1,
            xgap=1 if z.shape[1] <= 96 else 0,
            ygap=2,
            customdata=np.broadcast_to(np.array(labels, dtype=object), z.shape),
            colorscale=[[0, "#e8f5e9"], [0.1, "#fff3bf"], [0.5, "#f59f00"], [1, "#c92a2a"]],
            colorbar={"title": "risk", "tickformat": ".0%", "len": 0.9, "thickness": 12},
            hovertemplate="%{y} · %{customdata}<br>P(shortfall) = %{z:.1%}<extra></extra>",
        )
    )
    fig.update_layout(
        height=130 + 34 * z.shape[0],
        title=title,
        margin={"l": 110, "r": 10, "t": 40, "b": 10},
        plot_bgcolor="white",
        xaxis=_label_ticks(labels),
        yaxis={"autorange": "reversed"},
    )
    return fig


def idle_windows_figure(
    windows: pd.DataFrame, gpus: int, steps: int, labels: Sequence[str] | None = None
) -> go.Figure:
    """Idle windows as rectangles on the GPU x time plane (columns gpu_start, gpus,
    start_step, end_step; end exclusive)."""
    fig = go.Figure()
    palette = JOB_COLOURS
    for k, row in enumerate(windows.itertuples(index=False)):
        g0, n = int(row.gpu_start), int(row.gpus)
        s0, s1 = int(row.start_step), int(row.end_step)
        colour = palette[k % len(palette)]
        fig.add_trace(
            go.Scatter(
                x=[s0 - 0.5, s1 - 0.5, s1 - 0.5, s0 - 0.5, s0 - 0.5],
                y=[g0 - 0.5, g0 - 0.5, g0 + n - 0.5, g0 + n - 0.5, g0 - 0.5],
                fill="toself",
                mode="lines",
                line={"color": colour},
                fillcolor=pale(colour, 0.4),
                name=f"{n} GPUs x {s1 - s0} steps",
                hovertemplate=(
                    f"GPUs {g0}..{g0 + n - 1}, steps {s0}..{s1 - 1}"
                    f"{' (' + labels[s0] + ')' if labels else ''}<extra></extra>"
                ),
            )
        )
    fig.update_layout(
        height=max(260, min(700, gpus * 10 + 120)),
        title="Idle windows",
        margin={"l": 50, "r": 10, "t": 40, "b": 10},
        plot_bgcolor="white",
        showlegend=len(windows) <= 12,
        xaxis={
            "title": "time" if labels else "step",
            "range": [-0.5, steps - 0.5],
            "gridcolor": "#eee",
            **(_label_ticks(labels, max_ticks=6) if labels else {}),
        },
        yaxis={"title": "GPU", "range": [gpus - 0.5, -0.5], "gridcolor": "#eee"},
    )
    return fig


def benchmark_figure(rows: pd.DataFrame) -> go.Figure:
    """Utilization per scenario and planner; a published figure is a black bar over its planner's
    bar (same offset group), so measured and published sit side by side."""
    fig = go.Figure()
    planners = [p for p in PLANNER_ORDER if p in set(rows["planner"])]
    for planner in planners:
        part = rows[rows["planner"] == planner]
        fig.add_trace(
            go.Bar(
                x=part["scenario"],
                y=part["utilization"],
                name=planner,
                offsetgroup=planner,
                marker_color=PLANNER_COLOURS.get(planner),
                hovertemplate="%{x}: %{y:.1%}<extra>" + planner + "</extra>",
            )
        )
    if "published_utilization" in rows:
        first = True
        for planner in planners:
            part = rows[(rows["planner"] == planner) & rows["published_utilization"].notna()]
            if part.empty:
                continue
            fig.add_trace(
                go.Scatter(
                    x=part["scenario"],
                    y=part["published_utilization"],
                    mode="markers",
                    name="published",
                    legendgroup="published",
                    showlegend=first,
                    offsetgroup=planner,
                    marker={
                        "symbol": "line-ew-open",
                        "size": 18,
                        "color": "#212529",
                        "line": {"width": 3, "color": "#212529"},
                    },
                    hovertemplate="%{x}: published " + planner + " %{y:.1%}<extra></extra>",
                )
            )
            first = False
    fig.update_layout(
        barmode="group",
        scattermode="group",
        height=380,
        title="Utilization by scenario and planner (black: published)",
        margin={"l": 50, "r": 10, "t": 50, "b": 10},
        plot_bgcolor="white",
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 0.45},
        yaxis={"tickformat": ".0%", "gridcolor": "#eee", "range": [0, 1.05]},
    )
    return fig


def stability_figure(
    replans: Mapping[str, pd.DataFrame], labels: Sequence[str] | None = None
) -> go.Figure:
    """Per planner, the share of still-future planned cells each re-plan changed (columns
    `step`, `changed_fraction` of `core.rolling.simulate`'s replans table)."""
    fig = go.Figure()
    for name in _planner_rows(replans):
        table = replans[name]
        steps = table["step"].astype(int).tolist()
        when = [labels[s] if labels is not None and s < len(labels) else str(s) for s in steps]
        fig.add_trace(
            go.Scatter(
                x=steps,
                y=table["changed_fraction"],
                name=name,
                mode="lines+markers",
                marker={"size": 4},
                customdata=when,
                line={"color": PLANNER_COLOURS.get(name)},
                hovertemplate="%{customdata}: %{y:.1%} of future cells changed"
                "<extra>" + name + "</extra>",
            )
        )
    layout_x: dict[str, Any] = {"title": "re-plan at step", "gridcolor": "#eee"}
    if labels is not None:  # (the ticks are then times: the title says so)
        layout_x.update(_label_ticks(labels), title="re-plan at")
    fig.update_layout(
        height=300,
        title="Plan stability: cells changed by each re-plan",
        margin={"l": 50, "r": 10, "t": 50, "b": 10},
        plot_bgcolor="white",
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 0.5},
        yaxis={"tickformat": ".0%", "gridcolor": "#eee", "rangemode": "tozero"},
        xaxis=layout_x,
    )
    return fig


def demand_figure(scenario: Scenario) -> go.Figure:
    """Every real-time job's demand per step (GPUs wanted), with its gpus_max as a dotted cap."""
    fig = go.Figure()
    steps = list(range(scenario.cluster.horizon_steps))
    labels = step_labels(scenario)
    colours = job_colours(scenario)
    for job in scenario.realtime_jobs:
        colour = colours[scenario.job_index(job.id)]
        fig.add_trace(
            go.Scatter(
                x=steps,
                y=list(job.demand),
                name=job.id,
                mode="lines",
                line={"shape": "hv", "color": colour, "width": 2.5},
                customdata=labels,
                hovertemplate="%{customdata}: %{y:g} GPUs<extra>" + job.id + "</extra>",
            )
        )
        fig.add_trace(
            go.Scatter(
                x=[steps[0] - 0.5, steps[-1] + 0.5],
                y=[job.gpus_max, job.gpus_max],
                mode="lines",
                name=f"{job.id} gpus_max",
                showlegend=False,
                line={"color": colour, "dash": "dot", "width": 1},
                hovertemplate=f"{job.id}: gpus_max {job.gpus_max}<extra></extra>",
            )
        )
    fig.update_layout(
        height=360,
        title="Real-time demand (dotted: gpus_max)",
        margin={"l": 50, "r": 10, "t": 50, "b": 10},
        plot_bgcolor="white",
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 0.5},
        yaxis={"title": "GPUs", "gridcolor": "#eee", "rangemode": "tozero"},
    )
    fig.update_xaxes(**_time_axis(scenario, max_ticks=8), tickangle=0)
    return fig


CAPACITY_METRICS = (
    ("value", "value (priority GPU-h)", None),
    ("rt_coverage", "real-time coverage", ".0%"),
    ("utilization", "utilization", ".0%"),
    ("completed_share", "completed jobs", ".0%"),  # of the batch jobs: as the target is set
)
_CAPACITY_DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")


def capacity_figure(
    rows: pd.DataFrame, marks: Sequence[Mapping[str, Any]] = (), title: str | None = None
) -> go.Figure:
    """Value, coverage, utilization and completed jobs against GPUs: one panel row per metric,
    one column per demand scale, one line per planner (dashes tell apart the settings of the
    other swept parameters). `marks` (core.sweep.smallest_sizes entries) put a star on each
    line at the smallest size meeting the targets. Invalid points (an `error`) are left out."""
    from plotly.subplots import make_subplots

    valid = rows
    if "error" in rows:
        valid = rows[rows["error"].fillna("").astype(str) == ""]
    if len(valid):  # completed jobs as a share of the batch jobs (none: all of them done)
        done, jobs = valid["completed_jobs"], valid["batch_jobs"]
        valid = valid.assign(
            completed_share=(done / jobs.where(jobs > 0)).fillna(1.0),
            completed_text=[f" ({int(d)}/{int(b)})" for d, b in zip(done, jobs, strict=True)],
        )
    scales = sorted(valid["demand_scale"].unique()) if len(valid) else [1.0]
    others = [
        c
        for c in ("work_scale", "penalty_weight", "decay")
        if c in valid and valid[c].nunique() > 1
    ]
    fig = make_subplots(
        rows=len(CAPACITY_METRICS),
        cols=len(scales),
        shared_xaxes=True,
        column_titles=[f"demand x{s:g}" for s in scales],
        vertical_spacing=0.05,
        horizontal_spacing=0.04,
    )
    planners = [p for p in PLANNER_ORDER if p in set(valid.get("planner", []))]
    settings = sorted({tuple(r) for r in valid[others].itertuples(index=False)}) if others else [()]
    marked = {
        (m["planner"], m["demand_scale"], *(m[c] for c in others)): m["gpus"]
        for m in marks
        if m.get("gpus") is not None
    }
    for planner in planners:
        for k, setting in enumerate(settings):
            name = planner + "".join(f" {c}={v:g}" for c, v in zip(others, setting, strict=True))
            colour = PLANNER_COLOURS.get(planner, "#333333")
            dash = _CAPACITY_DASHES[k % len(_CAPACITY_DASHES)]
            part = valid[valid["planner"] == planner]
            for c, v in zip(others, setting, strict=True):
                part = part[part[c] == v]
            for col, scale in enumerate(scales, start=1):
                line = part[part["demand_scale"] == scale].sort_values("gpus")
                star = marked.get((planner, scale, *setting))
                for row_no, (metric, label, fmt) in enumerate(CAPACITY_METRICS, start=1):
                    number = "%{y:.1%}" if fmt else "%{y:,.4g}"
                    counts = metric == "completed_share"
                    if counts:
                        number += "%{customdata}"
                    fig.add_trace(
                        go.Scatter(
                            x=line["gpus"],
                            y=line[metric],
                            customdata=line["completed_text"] if counts else None,
                            mode="lines+markers",
                            name=name,
                            legendgroup=name,
                            showlegend=row_no == 1 and col == 1,
                            line={"color": colour, "dash": dash, "width": 2},
                            marker={"size": 6},
                            hovertemplate=f"%{{x}} GPUs: {label} {number}<extra>{name}</extra>",
                        ),
                        row=row_no,
                        col=col,
                    )
                    at = line[line["gpus"] == star]
                    if star is not None and len(at):
                        fig.add_trace(
                            go.Scatter(
                                x=at["gpus"],
                                y=at[metric],
                                mode="markers",
                                name=f"{name}: smallest size meeting the targets",
                                legendgroup=name,
                                showlegend=False,
                                marker={
                                    "symbol": "star",
                                    "size": 16,
                                    "color": colour,
                                    "line": {"width": 1, "color": "#212529"},
                                },
                                hovertemplate=(
                                    f"{name}: smallest size meeting the targets, "
                                    f"%{{x}} GPUs<extra></extra>"
                                ),
                            ),
                            row=row_no,
                            col=col,
                        )
    for row_no, (_, label, fmt) in enumerate(CAPACITY_METRICS, start=1):
        for col in range(1, len(scales) + 1):
            fig.update_yaxes(
                tickformat=fmt or ",",
                gridcolor="#eee",
                rangemode="tozero",
                range=[0, 1.05] if fmt else None,
                title=label if col == 1 else None,
                row=row_no,
                col=col,
            )
            if row_no == len(CAPACITY_METRICS):
                fig.update_xaxes(title="GPUs", row=row_no, col=col)
    fig.update_xaxes(gridcolor="#eee")
    fig.update_layout(
        height=210 * len(CAPACITY_METRICS) + 120,
        title={
            "text": title
            or "Capacity what-ifs against GPUs (stars: smallest size meeting the targets)",
            "y": 0.99,
            "yanchor": "top",
        },
        margin={"l": 70, "r": 20, "t": 110, "b": 50},
        plot_bgcolor="white",
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.04, "x": 0.0},
    )
    return fig


def history_demand_figure(frame: pd.DataFrame, gpus: int) -> go.Figure:
    """A history window's GPUs in use per step, stacked: each real-time group's demand (what its
    services held, time-weighted) under the batch GPUs really held, against the cluster size.

    `frame` is `core.formats.history.demand_frame` (optionally with an `hours` column for traces
    with relative times): one column per real-time job, `as_run_batch_gpus`, `as_run_realtime_gpus`.
    """
    if "time" in frame:
        x, x_title = frame["time"], None
    elif "hours" in frame:
        x, x_title = frame["hours"], "hours from the trace start"
    else:
        x, x_title = frame["step"], "step"
    groups = [
        c
        for c in frame.columns
        if c not in ("step", "time", "hours", "as_run_batch_gpus", "as_run_realtime_gpus")
    ]
    fig = go.Figure()
    for k, group in enumerate(groups):
        fig.add_trace(
            go.Scatter(
                x=x,
                y=frame[group],
                name=f"real-time demand: {group}",
                mode="lines",
                stackgroup="held",
                line={"shape": "hv", "width": 1.5, "color": REALTIME_COLOURS[k % 6]},
                hovertemplate="%{x}: %{y:.1f} GPUs<extra>" + group + "</extra>",
            )
        )
    fig.add_trace(
        go.Scatter(
            x=x,
            y=frame["as_run_batch_gpus"],
            name="batch GPUs held (as run, blocks rounded up)",
            mode="lines",
            stackgroup="held",
            line={"shape": "hv", "width": 1.5, "color": JOB_COLOURS[0]},
            hovertemplate="%{x}: %{y:.1f} batch GPUs<extra>as run</extra>",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=[x.iloc[0], x.iloc[-1]] if len(x) else [],
            y=[gpus, gpus],
            name=f"cluster: {gpus:,} GPUs",
            mode="lines",
            line={"color": "#343a40", "dash": "dot", "width": 1.5},
            hoverinfo="skip",
        )
    )
    held = frame["as_run_batch_gpus"].to_numpy() + frame["as_run_realtime_gpus"].to_numpy()
    peak = float(held.max(initial=0.0))
    fig.update_layout(
        height=340,
        title="GPUs in use in the window, as run",
        margin={"l": 50, "r": 10, "t": 50, "b": 10},
        plot_bgcolor="white",
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 0.4},
        yaxis={"title": "GPUs", "gridcolor": "#eee", "range": [0, max(gpus, peak) * 1.08 + 0.5]},
        xaxis={"title": x_title, "gridcolor": "#eee"},
    )
    return fig


# Plotly config for small explanatory charts: no mode bar.
STATIC = {"displayModeBar": False}
IDLE_PARTS = (  # (label, colour): the kinds of GPU-hours nobody uses
    ("idle, usable", "#ADB5BD"),  # in blocks the smallest waiting job could take
    ("idle, fragmented", "#6C757D"),
    ("reserved above demand", "#E8A0A0"),
)


def idle_breakdown_figure(metrics_by_planner: Mapping[str, Mapping[str, Any]]) -> go.Figure:
    """GPU-hours nobody uses, per planner: the idle ones in one bar, split into those in blocks
    the smallest waiting job could take and the fragmented rest (a part of the idle, so stacked
    on it, labelled with the idle total), and those reserved above demand beside it."""
    planners = _planner_rows(metrics_by_planner)

    def of(key: str) -> np.ndarray:
        return np.array([float(metrics_by_planner[p].get(key) or 0.0) for p in planners])

    idle, reserved = of("idle_gpu_hours"), of("reserved_idle_gpu_hours")
    fragmented = np.minimum(of("fragmented_gpu_hours"), idle)
    parts = (  # (values, base, text, bar group)
        (idle - fragmented, None, None, "idle"),
        (fragmented, idle - fragmented, [f"{v:,.0f}" for v in idle], "idle"),
        (reserved, None, [f"{v:,.0f}" for v in reserved], "reserved"),
    )
    fig = go.Figure()
    for (label, colour), (values, base, text, group) in zip(IDLE_PARTS, parts, strict=True):
        fig.add_trace(
            go.Bar(
                name=label,
                x=planners,
                y=values,
                base=base,
                offsetgroup=group,
                marker_color=colour,
                text=text,
                textposition="outside" if text is not None else None,
                hovertemplate="%{x}: %{y:,.1f} GPU-hours " + label + "<extra></extra>",
            )
        )
    fig.update_layout(
        barmode="group",
        height=320,
        title="Unused GPU-hours by kind",
        margin={"l": 50, "r": 10, "t": 50, "b": 10},
        plot_bgcolor="white",
        legend={"orientation": "h", "yanchor": "top", "y": -0.12, "x": 0},  # (under the axis)
        yaxis={"title": "GPU-hours", "gridcolor": "#eee", "rangemode": "tozero"},
    )
    return fig


def wait_figure(waits_by_planner: Mapping[str, Sequence[float]]) -> go.Figure:
    """The distribution of batch waits (hours from arrival to start) per planner, one box each
    with every job as a point."""
    fig = go.Figure()
    for name in _planner_rows(waits_by_planner):
        waits = list(waits_by_planner[name])
        fig.add_trace(
            go.Box(
                y=waits,
                name=name,
                boxpoints="all",
                jitter=0.4,
                pointpos=0,
                marker_color=PLANNER_COLOURS.get(name, "#6C757D"),
                hovertemplate=name + ": waited %{y:g} h<extra></extra>",
            )
        )
    fig.update_layout(
        height=320,
        title="Wait from arrival to start (started jobs)",
        margin={"l": 50, "r": 10, "t": 50, "b": 10},
        plot_bgcolor="white",
        showlegend=False,
        yaxis={"title": "hours", "gridcolor": "#eee", "rangemode": "tozero"},
    )
    return fig
