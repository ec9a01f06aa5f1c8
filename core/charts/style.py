"""What every figure shares: colours (fixed per job, per planner, per job type), the time axis
and step labels, the planners' order, and the plotly config of small explanatory charts."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from ..model import RealtimeJob, Scenario
from ..planners import PLANNER_NAMES

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


def _planner_rows(metrics_by_planner: Mapping[str, Mapping[str, Any]]) -> list[str]:
    known = [p for p in PLANNER_ORDER if p in metrics_by_planner]
    return known + [p for p in metrics_by_planner if p not in known]


def _bar_colours(planners: Sequence[str], metric: str) -> list[str]:
    return [AS_RUN_COLOURS[metric] if p == AS_RUN else METRIC_COLOURS[metric] for p in planners]


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


# Plotly config for small explanatory charts: no mode bar.
STATIC = {"displayModeBar": False}
