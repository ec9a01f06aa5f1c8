"""Demand over time: the forecast and its interval, the GPUs it needs against the swap-capped
path, a scenario's real-time demand, and an imported history's GPUs in use."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ..model import Scenario
from .style import JOB_COLOURS, REALTIME_COLOURS, _label_ticks, _time_axis, job_colours, step_labels


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


SHOWN_GROUPS = 6  # real-time groups drawn one by one; past it the rest are summed


def history_demand_figure(frame: pd.DataFrame, gpus: int) -> go.Figure:
    """A history window's GPUs per step, stacked: each real-time group's demand (what its
    services wanted, creation to deletion, time-weighted) under the batch GPUs really held,
    against the cluster size; a line shows the real-time GPUs really served where that is less
    than the demand (pods never scheduled, or scheduled late). Past `SHOWN_GROUPS` groups the
    largest are drawn and the rest summed, so the legend stays readable.

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
    if len(groups) > SHOWN_GROUPS:
        by_size = sorted(groups, key=lambda g: -float(frame[g].sum()))
        kept, rest = by_size[: SHOWN_GROUPS - 1], by_size[SHOWN_GROUPS - 1 :]
        others = f"{len(rest)} other services"
        frame = frame.assign(**{others: frame[rest].sum(axis=1)})
        groups = [*kept, others]
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
    served = frame["as_run_realtime_gpus"].to_numpy()
    wanted = frame[groups].sum(axis=1).to_numpy() if groups else np.zeros(len(frame))
    if (wanted - served > 1e-3).any():  # (what ran of it, where the cluster fell short)
        fig.add_trace(
            go.Scatter(
                x=x,
                y=served,
                name="real-time served (as run)",
                mode="lines",
                line={"shape": "hv", "width": 1.5, "color": "#212529", "dash": "dash"},
                hovertemplate="%{x}: %{y:.1f} GPUs served<extra>as run</extra>",
            )
        )
    held = frame["as_run_batch_gpus"].to_numpy() + wanted
    peak = float(held.max(initial=0.0))
    fig.update_layout(
        # (the legend under the time axis, a row per entry: the plot keeps its height)
        height=340 + 22 * len(fig.data),
        title="GPUs wanted (real-time) and held (batch) in the window",
        margin={"l": 50, "r": 10, "t": 40, "b": 10},
        plot_bgcolor="white",
        legend={"orientation": "h", "yanchor": "top", "y": -0.3, "x": 0},
        yaxis={"title": "GPUs", "gridcolor": "#eee", "range": [0, max(gpus, peak) * 1.08 + 0.5]},
        xaxis={"title": x_title, "gridcolor": "#eee"},
    )
    return fig
