"""Planners side by side: utilization against value, real-time allocations, benchmarks, plan
stability, unused GPU-hours and waits."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ..model import Scenario
from ..plan import Plan, holdings
from ..planners import BASELINE, PLANNER_COLOURS
from .style import (
    PLANNER_ORDER,
    _bar_colours,
    _label_ticks,
    _planner_rows,
    _time_axis,
    step_labels,
)


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
