"""The GPU x time grid of a plan: one heatmap with a categorical colour mapping, its hover and
its shared legend."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from ..model import BatchJob, Scenario
from ..plan import IDLE, Plan
from .nodes import band_by_node, gpu_where
from .style import IDLE_COLOUR, MAX_HOVER_CELLS, _group, _time_axis, job_colours, pale, step_labels


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
    gpus = gpu_where(scenario.cluster)
    for g in range(G):
        for t in range(T):
            j = int(grid[g, t])
            where = f"{gpus[g]} · step {t} · {labels[t]}"
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
    return band_by_node(fig, scenario.cluster)
