"""Clusters with nodes (SPEC section 8) in the charts: the GPU x time grid's GPU axis banded by
node group (a label per group with its type and nodes, thin lines between nodes, strong ones
between groups), and the planners' utilization and cost per GPU type. Without nodes the grid is
drawn as before."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..model import Cluster
from ..nodes import groups_of
from ..planners import PLANNER_COLOURS
from ..tables import idle_cost
from .style import _planner_rows

NODE_LINE = {"color": "#343a40", "width": 1.5, "dash": "dot"}
GROUP_LINE = {"color": "#212529", "width": 3}
MAX_NODE_LINES = 200  # past this many nodes only the groups are drawn (lines would merge)
LABEL_MARGIN = 96  # px right of the grid for the group labels


def group_label(name: str, gpu_type: str, count: int, per_node: int) -> str:
    """'h100x8<br>H100 · 1 x 8': the group, its type, its nodes x GPUs a node."""
    return f"<b>{name}</b><br>{gpu_type} · {count} x {per_node}"


def band_by_node(fig: go.Figure, cluster: Cluster) -> go.Figure:
    """Node and group boundaries across the grid, and each group's label at its middle (no-op
    without nodes)."""
    if not cluster.nodes:
        return fig
    groups = [g for g in groups_of(cluster) if g.gpus]
    nodes = sum(g.count for g in groups)
    for k, g in enumerate(groups):
        if nodes <= MAX_NODE_LINES:
            for node in range(1, g.count):
                _line(fig, g.offset + node * g.gpus_per_node, NODE_LINE)
        if k:
            _line(fig, g.offset, GROUP_LINE)
        fig.add_annotation(
            x=1.0,
            xref="paper",
            xanchor="left",
            xshift=6,
            y=g.offset + g.gpus / 2 - 0.5,
            yref="y",
            text=group_label(g.name, g.gpu_type.name, g.count, g.gpus_per_node),
            showarrow=False,
            align="left",
            font={"size": 11, "color": "#212529"},
        )
    fig.update_layout(margin={"r": LABEL_MARGIN})
    fig.update_yaxes(title="GPU (by node group)")
    return fig


def _line(fig: go.Figure, gpu: int, style: dict) -> None:
    """A horizontal line across the grid between GPU gpu - 1 and GPU gpu."""
    fig.add_shape(
        type="line",
        xref="paper",
        x0=0,
        x1=1,
        yref="y",
        y0=gpu - 0.5,
        y1=gpu - 0.5,
        line=style,
        layer="above",
    )


def gpu_where(cluster: Cluster) -> list[str]:
    """Per GPU, what the hover says of it: 'GPU 9 · node a10x4-0 (A10)'; 'GPU 9' without nodes."""
    if not cluster.nodes:
        return [f"GPU {g}" for g in range(cluster.gpus)]
    out = []
    for group in groups_of(cluster):
        for gpu in range(group.offset, group.end):
            node = group.node_name(group.node_of(gpu))
            out.append(f"GPU {gpu} · node {node} ({group.gpu_type.name})")
    return out


def gpu_type_figure(
    metrics_by_planner: Mapping[str, Mapping[str, Any]],
    horizon_hours: float,
    label: Callable[[str], str] = str,
) -> go.Figure:
    """Per GPU type, each planner's utilization and (where types are priced) the part of the
    type's cost spent on idle GPUs, side by side (from metrics' `by_gpu_type`): where a
    planner's work lands on a mixed cluster, and what the idle GPUs of each type cost."""
    planners = _planner_rows(metrics_by_planner)
    per_type = {p: metrics_by_planner[p].get("by_gpu_type") or {} for p in planners}
    types = list(dict.fromkeys(t for p in planners for t in per_type[p]))
    first = next((per_type[p] for p in planners if per_type[p]), {})
    gpus = {t: first.get(t, {}).get("gpus", 0) for t in types}
    cost = {t: first.get(t, {}).get("cost") for t in types}
    priced = any(c is not None for c in cost.values())
    fig = make_subplots(
        rows=1,
        cols=2 if priced else 1,
        subplot_titles=[
            "Utilization by GPU type",
            "Idle cost by GPU type (of the type's cost)",
        ][: 2 if priced else 1],
        horizontal_spacing=0.12,
    )
    util_ticks = [f"{t} · {gpus[t]} GPUs" for t in types]
    cost_ticks = [f"{t} · cost {cost[t]:,.0f}" if cost[t] is not None else t for t in types]
    for p in planners:
        colour = PLANNER_COLOURS.get(p, "#6c757d")
        util = [per_type[p].get(t, {}).get("utilization") for t in types]
        fig.add_trace(
            go.Bar(
                name=label(p),
                x=util_ticks,
                y=util,
                marker_color=colour,
                text=[None if u is None else f"{u:.0%}" for u in util],
                textposition="outside",
                legendgroup=p,
                hovertemplate=f"{label(p)} · %{{x}}: utilization %{{y:.1%}}<extra></extra>",
            ),
            row=1,
            col=1,
        )
        if priced:
            idle = [idle_cost(per_type[p].get(t), horizon_hours) for t in types]
            fig.add_trace(
                go.Bar(
                    name=label(p),
                    x=cost_ticks,
                    y=idle,
                    marker_color=colour,
                    text=[None if c is None else f"{c:,.0f}" for c in idle],
                    textposition="outside",
                    legendgroup=p,
                    showlegend=False,
                    hovertemplate=f"{label(p)} · %{{x}}: idle cost %{{y:,.2f}}<extra></extra>",
                ),
                row=1,
                col=2,
            )
    fig.update_layout(
        barmode="group",
        height=340,
        margin={"l": 50, "r": 10, "t": 70, "b": 10},
        plot_bgcolor="white",
        uniformtext={"minsize": 9, "mode": "show"},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.14, "x": 0},
    )
    fig.update_yaxes(tickformat=".0%", range=[0, 1.15], gridcolor="#eee", row=1, col=1)
    if priced:
        top = max((c for c in cost.values() if c is not None), default=1.0)
        fig.update_yaxes(range=[0, top * 1.1 + 1e-9], gridcolor="#eee", row=1, col=2)
    return fig
