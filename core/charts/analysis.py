"""What core.analysis finds in a plan: the coverage-risk strip and the idle windows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from .style import JOB_COLOURS, _label_ticks, pale


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
