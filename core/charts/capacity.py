"""Capacity what-ifs (core.sweep): value, coverage, utilization and completed jobs against GPUs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from ..planners import PLANNER_COLOURS
from .style import PLANNER_ORDER

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

    valid = _capacity_points(rows)
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
            _add_capacity_lines(fig, valid, planner, k, others, setting, scales, marked)
    _capacity_axes(fig, len(scales))
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


def _capacity_points(rows: pd.DataFrame) -> pd.DataFrame:
    """The valid rows (no `error`), with completed jobs as a share of the batch jobs (none: all
    of them done) and its count as hover text."""
    valid = rows
    if "error" in rows:
        valid = rows[rows["error"].fillna("").astype(str) == ""]
    if len(valid):
        done, jobs = valid["completed_jobs"], valid["batch_jobs"]
        valid = valid.assign(
            completed_share=(done / jobs.where(jobs > 0)).fillna(1.0),
            completed_text=[f" ({int(d)}/{int(b)})" for d, b in zip(done, jobs, strict=True)],
        )
    return valid


def _add_capacity_lines(
    fig: go.Figure,
    valid: pd.DataFrame,
    planner: str,
    k: int,
    others: list[str],
    setting: tuple[Any, ...],
    scales: list[Any],
    marked: dict[tuple[Any, ...], Any],
) -> None:
    """One planner's line at setting `k` of the other swept parameters in every panel, with a
    star at the smallest size meeting the targets where `marked` has one."""
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
            legend = row_no == 1 and col == 1
            trace = _capacity_line(line, metric, label, fmt, name, colour, dash, legend)
            fig.add_trace(trace, row=row_no, col=col)
            at = line[line["gpus"] == star]
            if star is not None and len(at):
                fig.add_trace(_capacity_star(at, metric, name, colour), row=row_no, col=col)


def _capacity_line(
    line: pd.DataFrame,
    metric: str,
    label: str,
    fmt: str | None,
    name: str,
    colour: str,
    dash: str,
    legend: bool,
) -> go.Scatter:
    """One metric of one line against GPUs (completed jobs: their count in the hover)."""
    number = "%{y:.1%}" if fmt else "%{y:,.4g}"
    counts = metric == "completed_share"
    if counts:
        number += "%{customdata}"
    return go.Scatter(
        x=line["gpus"],
        y=line[metric],
        customdata=line["completed_text"] if counts else None,
        mode="lines+markers",
        name=name,
        legendgroup=name,
        showlegend=legend,
        line={"color": colour, "dash": dash, "width": 2},
        marker={"size": 6},
        hovertemplate=f"%{{x}} GPUs: {label} {number}<extra>{name}</extra>",
    )


def _capacity_star(at: pd.DataFrame, metric: str, name: str, colour: str) -> go.Scatter:
    """The star on a line at the smallest size meeting the targets."""
    return go.Scatter(
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
        hovertemplate=(f"{name}: smallest size meeting the targets, %{{x}} GPUs<extra></extra>"),
    )


def _capacity_axes(fig: go.Figure, n_scales: int) -> None:
    """Each panel row's metric on its y axes (shares from 0 to 105%), GPUs under the last row."""
    for row_no, (_, label, fmt) in enumerate(CAPACITY_METRICS, start=1):
        for col in range(1, n_scales + 1):
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


def mix_figure(
    points: pd.DataFrame,
    ranked_by: str = "cost_per_hour",
    coverage: float | None = None,
    buy: Mapping[str, Any] | None = None,
    labels: Mapping[str, str] | None = None,
) -> go.Figure:
    """Cost per hour (GPUs where mixes are ranked by GPUs) against real-time coverage: one
    point per mix and planner (core.mix_views.chart_points), filled where the mix meets the
    targets, hollow where it misses one; a star on each planner's cheapest meeting mix, the
    coverage target as a dashed line and `buy` (the cheapest answer) named beside its star."""
    labels = labels or {}
    fig = go.Figure()
    planners = [p for p in PLANNER_ORDER if p in set(points.get("planner", []))]
    for k, planner in enumerate(planners):
        part = points[points["planner"] == planner]
        colour = PLANNER_COLOURS.get(planner, "#333333")
        name = labels.get(planner, planner)
        # planners often land on the same point: each later one drawn smaller, inside
        size = max(6, 16 - 4 * k)
        for meets, words in ((True, "meets the targets"), (False, "misses a target")):
            some = part[part["meets"] == meets]
            if not len(some):
                continue
            fig.add_trace(
                go.Scatter(
                    x=some["x"],
                    y=some["rt_coverage"],
                    mode="markers",
                    name=f"{name}: {words}",
                    legendgroup=planner,
                    marker={
                        "size": size,
                        "color": colour if meets else "white",
                        "line": {"width": 2, "color": colour},
                        "symbol": "circle",
                    },
                    text=some["hover"],
                    hovertemplate="%{text}<extra>" + name + "</extra>",
                )
            )
        star = part[part["cheapest"]]
        if len(star):
            fig.add_trace(
                go.Scatter(
                    x=star["x"],
                    y=star["rt_coverage"],
                    mode="markers",
                    name=f"{name}: cheapest meeting the targets",
                    legendgroup=planner,
                    marker={
                        "symbol": "star",
                        "size": size + 12,
                        "color": colour,
                        "line": {"width": 1.5, "color": "#212529"},
                    },
                    text=star["hover"],
                    hovertemplate="cheapest: %{text}<extra>" + name + "</extra>",
                )
            )
    by_gpus = ranked_by == "gpus"
    if coverage is not None:
        fig.add_hline(
            y=coverage,
            line={"dash": "dash", "color": "#6c757d", "width": 1},
            annotation_text=f"coverage target {coverage * 100:g}%",
            annotation_position="bottom right",
        )
    if buy is not None:
        at = points[(points["cheapest"]) & (points["planner"] == buy["planner"])]
        if len(at):
            fig.add_annotation(
                x=at["x"].iloc[0],
                y=at["rt_coverage"].iloc[0],
                text=f"<b>cheapest: {buy['mix']}</b>",
                showarrow=True,
                arrowhead=2,
                ax=0,
                ay=-45,
                bgcolor="rgba(255,255,255,0.85)",
                bordercolor="#212529",
            )
    low = float(points["rt_coverage"].min()) if len(points) else 0.0
    fig.update_layout(
        title={
            "text": (
                f"{'GPUs' if by_gpus else 'Cost per hour'} against real-time coverage, one point "
                "per mix and planner (filled: meets the targets; star: cheapest that does)"
            ),
        },
        xaxis={
            "title": "GPUs (no price set: mixes ranked by GPUs)" if by_gpus else "cost per hour",
            "gridcolor": "#eee",
            "tickformat": "," if by_gpus else ",.2f",
            "rangemode": "tozero",
        },
        yaxis={
            "title": "real-time coverage",
            "tickformat": ".0%",
            "gridcolor": "#eee",
            "range": [max(0.0, min(low, coverage or 1.0) - 0.05), 1.015],
        },
        height=480,
        margin={"l": 70, "r": 20, "t": 90, "b": 60},
        plot_bgcolor="white",
        legend={"orientation": "h", "yanchor": "top", "y": -0.15, "x": 0.0},
    )
    return fig
