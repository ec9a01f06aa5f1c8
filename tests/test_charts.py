"""core.charts: pure figure builders (no streamlit), one heatmap for the whole grid."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
from hypothesis import given, settings

from core import charts
from core.formats import load_scenario
from core.model import BatchJob, Cluster, RealtimeJob, Scenario
from core.plan import IDLE, holdings, metrics
from core.planners import solve
from tests.budget import examples
from tests.paths import SCENARIOS_DIR
from tests.strategies import scenarios


def _big_scenario(scenarios_dir: Path) -> Scenario:
    """64 GPUs x 48 steps, built from scale-64 with its horizon doubled."""
    base = load_scenario(scenarios_dir / "scale-64.json")
    jobs = tuple(
        replace(j, demand=tuple(j.demand) * 2) if isinstance(j, RealtimeJob) else j
        for j in base.jobs
    )
    return base.replace(cluster=replace(base.cluster, horizon_steps=48), jobs=jobs)


def heatmaps(fig: go.Figure) -> list[go.Heatmap]:
    return [t for t in fig.data if isinstance(t, go.Heatmap)]


def test_a_64_by_48_grid_is_one_heatmap_not_one_trace_per_cell(scenarios_dir):
    s = _big_scenario(scenarios_dir)
    plan = solve(s, "allocator")
    fig = charts.grid_figure(s, plan, "allocator")
    (heat,) = heatmaps(fig)
    assert np.asarray(heat.z).shape == (64, 48)
    # Besides the heatmap only legend swatches: at most one per job, two shades, idle.
    assert len(fig.data) <= 1 + 2 * len(s.jobs) + 1
    # The colour scale has one step per distinct colour, not per job.
    assert len(heat.colorscale) == 2 * len({c for _, c in heat.colorscale})
    assert all(t.x == (None,) for t in fig.data if isinstance(t, go.Scatter))


@settings(max_examples=examples(25), deadline=None)
@given(scenarios(max_gpus=16, max_steps=8, max_jobs=5))
def test_every_cell_has_its_job_colour_and_hover(s):
    plan = solve(s, "fifo")
    fig = charts.grid_figure(s, plan)
    (heat,) = heatmaps(fig)
    z, text = np.asarray(heat.z), np.asarray(heat.text)
    colours = charts.job_colours(s)
    scale = heat.colorscale
    for g in range(s.cluster.gpus):
        for t in range(s.cluster.horizon_steps):
            j = int(plan.grid[g, t])
            code = int(z[g, t])
            colour = scale[2 * code][1]
            if j == IDLE:
                assert code == 0 and colour == charts.IDLE_COLOUR and "idle" in text[g, t]
                continue
            job = s.jobs[j]
            assert colour in (colours[j], charts.pale(colours[j]))
            assert f"<b>{job.id}</b>" in text[g, t]
            assert f"priority {job.priority:g}" in text[g, t]
            assert (job.type if isinstance(job, BatchJob) else "realtime") in text[g, t]
            assert f"GPU {g} · step {t}" in text[g, t]


@settings(max_examples=examples(25), deadline=None)
@given(scenarios(max_gpus=16, max_steps=8, max_jobs=5))
def test_reserved_above_demand_counts_the_gpus_held_beyond_ceil_demand(s):
    plan = solve(s, "fifo")
    above = charts.serving_mask(s, plan)
    held = holdings(s, plan)
    expected = 0
    for job in s.realtime_jobs:
        n = held[s.job_index(job.id)]
        expected += int(np.maximum(0, n - np.ceil(np.asarray(job.demand) - 1e-9)).sum())
    assert int(above.sum()) == expected
    assert not (above & (plan.grid == IDLE)).any()


@pytest.mark.slow
def test_a_job_keeps_its_colour_across_planners(scenarios_dir):
    s = load_scenario(scenarios_dir / "example.json")
    figs = [charts.grid_figure(s, solve(s, p)) for p in ("fifo", "allocator")]
    for fig, planner in zip(figs, ("fifo", "allocator"), strict=True):
        (heat,) = heatmaps(fig)
        z, plan = np.asarray(heat.z), solve(s, planner)
        for j, colour in enumerate(charts.job_colours(s)):
            cells = (plan.grid == j) & ~charts.serving_mask(s, plan)
            codes = set(np.unique(z[cells]).tolist())
            assert len(codes) <= 1
            assert all(heat.colorscale[2 * c][1] == colour for c in codes)


def test_utilization_and_value_are_indexed_to_fifo(scenarios_dir):
    s = load_scenario(scenarios_dir / "example.json")
    values = {p: metrics(s, solve(s, p)) for p in ("fifo", "allocator")}
    fig = charts.utilization_value_figure(values)
    util, value = fig.data
    assert list(util.x) == ["fifo", "allocator"]
    assert util.y[0] == pytest.approx(100) and value.y[0] == pytest.approx(100)
    assert value.y[1] == pytest.approx(values["allocator"]["value"] / values["fifo"]["value"] * 100)
    assert util.text[1] == f"{values['allocator']['utilization']:.1%}"


def test_step_labels_follow_the_clock():
    s = Scenario(
        "s",
        Cluster(
            gpus=2,
            step_minutes=30,
            horizon_steps=3,
            start=pd.Timestamp("2026-08-17 23:00").to_pydatetime(),
        ),
        (),
    )
    assert charts.step_labels(s) == ["Mon 23:00", "Mon 23:30", "Tue 00:00"]
    assert charts.step_labels(s.replace(cluster=Cluster(gpus=2, horizon_steps=2))) == [
        "step 0",
        "step 1",
    ]


def test_risk_strip_and_idle_windows_draw_their_input():
    risk = np.array([[0.0, 0.5, 1.0], [0.2, 0.2, 0.2]])
    fig = charts.coverage_risk_figure(risk, ["a", "b", "c"], ["fifo", "allocator"])
    (heat,) = heatmaps(fig)
    assert np.array_equal(np.asarray(heat.z), risk) and (heat.zmin, heat.zmax) == (0, 1)
    windows = pd.DataFrame(
        {"gpu_start": [0, 4], "gpus": [4, 2], "start_step": [1, 3], "end_step": [5, 4]}
    )
    fig = charts.idle_windows_figure(windows, gpus=8, steps=6)
    assert len(fig.data) == 2
    assert min(fig.data[0].x) == 0.5 and max(fig.data[0].x) == 4.5
    assert min(fig.data[1].y) == 3.5 and max(fig.data[1].y) == 5.5


def test_demand_figure_draws_each_real_time_demand_and_its_cap(scenarios_dir):
    s = load_scenario(scenarios_dir / "example.json")
    fig = charts.demand_figure(s)
    rt = s.realtime_jobs
    assert len(fig.data) == 2 * len(rt)
    for k, job in enumerate(rt):
        assert list(fig.data[2 * k].y) == list(job.demand)
        assert set(fig.data[2 * k + 1].y) == {job.gpus_max}


def test_a_grid_coloured_by_type_or_team_has_one_legend_entry_per_group(scenarios_dir):
    s = load_scenario(scenarios_dir / "scale-64.json")
    plan = solve(s, "allocator")
    by_type = charts.grid_legend(s, [plan], by="type")
    types = {j.type for j in s.jobs}
    shades = [label for label, _ in by_type if label.endswith("held above demand")]
    assert {label for label, _ in by_type} - set(shades) == types | {"idle"}
    teams = {j.team or charts.NO_TEAM for j in s.jobs}
    by_team = charts.grid_legend(s, [plan], by="team")
    assert {label for label, _ in by_team if "held above" not in label} <= teams | {"idle"}
    # The cells keep their per-job hover whatever the colours stand for.
    fig = charts.grid_figure(s, plan, colour_by="type", show_legend=False)
    text = heatmaps(fig)[0].text
    held = np.argwhere(plan.grid != IDLE)[0]
    assert s.jobs[plan.grid[tuple(held)]].id in text[held[0]][held[1]]
    with pytest.raises(ValueError, match="colour by"):
        charts.job_colours(s, by="priority")


def test_a_large_import_is_coloured_by_type_and_its_grid_stays_a_screen_tall(scenarios_dir):
    small = load_scenario(scenarios_dir / "mixed-control.json")
    assert charts.default_colour_by(small) == "job"
    big = Scenario(
        "import",
        Cluster(gpus=1024, horizon_steps=4),
        tuple(
            BatchJob(f"j{k}", "training", 1, gpus_min=1, gpus_max=1, gpu_hours=1.0)
            for k in range(charts.JOB_COLOURS_UP_TO + 1)
        ),
    )
    assert charts.default_colour_by(big) == "type"
    plan = solve(big, "fifo")
    fig = charts.grid_figure(big, plan, colour_by=charts.default_colour_by(big))
    legend = [t.name for t in fig.data if isinstance(t, go.Scatter)]
    assert sorted(legend) == ["idle", "training"]  # not one entry per job
    assert fig.layout.height == 960 + 110 + 24  # the grid at most 960 px, one legend row
    assert charts.grid_figure(small, solve(small, "fifo")).layout.height < 960


def test_coinciding_real_time_allocations_are_both_visible_and_said(scenarios_dir):
    s = load_scenario(scenarios_dir / "mixed-control.json")
    fifo = solve(s, "fifo")
    plans = {"fifo": fifo, "backfill": solve(s, "backfill")}
    job = s.realtime_jobs[0].id
    fig = charts.realtime_figure(s, plans, job)
    lines = {t.name: t for t in fig.data if t.name != "demand"}
    fifo_line, backfill_line = (
        lines["fifo allocated"],
        next(t for n, t in lines.items() if n.startswith("backfill")),
    )
    j = s.job_index(job)
    if np.array_equal(holdings(s, fifo)[j], holdings(s, plans["backfill"])[j]):
        assert backfill_line.name == "backfill allocated (same as fifo)"
    # The earlier line is wider, so the later one drawn on top never hides it.
    assert fifo_line.line.width > backfill_line.line.width


def test_the_utilization_value_chart_names_its_index_and_its_absolute_labels():
    m = {
        "fifo": {"utilization": 0.5, "value": 1200.0},
        "allocator": {"utilization": 0.75, "value": 3000.0},
    }
    fig = charts.utilization_value_figure(m)
    assert fig.layout.yaxis.title.text == "index: fifo = 100"
    util, value = fig.data
    assert list(util.y) == pytest.approx([100, 150]) and list(value.y) == pytest.approx([100, 250])
    assert list(util.text) == ["50.0%", "75.0%"]
    assert list(value.text) == ["1,200<br>weighted GPU-h", "3,000<br>weighted GPU-h"]


def test_the_utilization_value_chart_stays_readable_with_four_bars():
    m = {
        name: {"utilization": 0.5 + k / 10, "value": 1000.0 * (k + 1)}
        for k, name in enumerate(("fifo", "backfill", "allocator", "thorough"))
    }
    fig = charts.utilization_value_figure(m)
    _, value = fig.data
    assert list(value.text) == ["1,000", "2,000", "3,000", "4,000"]  # the unit is the legend's
    assert "weighted GPU-hours" in value.name
    assert fig.layout.uniformtext.minsize == 10 and fig.layout.uniformtext.mode == "show"
    (line,) = fig.layout.shapes
    assert line.y0 == 100 and line.layer == "below"  # the baseline never strikes a label


def test_the_fragmented_idle_is_stacked_on_the_idle_it_is_part_of():
    m = {
        "fifo": {
            "idle_gpu_hours": 30.0,
            "fragmented_gpu_hours": 10.0,
            "reserved_idle_gpu_hours": 5.0,
        },
        "allocator": {"idle_gpu_hours": 8.0, "fragmented_gpu_hours": 0.0},
    }
    usable, fragmented, reserved = charts.idle_breakdown_figure(m).data
    assert list(usable.y) == [20.0, 8.0] and usable.offsetgroup == fragmented.offsetgroup
    assert list(fragmented.base) == [20.0, 8.0] and list(fragmented.y) == [10.0, 0.0]
    assert list(fragmented.text) == ["30", "8"]  # the idle total on top of its bar
    assert list(reserved.y) == [5.0, 0.0] and reserved.offsetgroup != usable.offsetgroup


def test_an_undated_history_is_drawn_in_hours_from_step_0():
    hours = pd.date_range("2025-12-22", periods=48, freq="h")  # the forecaster's assumed dates
    history = pd.Series(np.arange(48.0), index=hours)
    future = pd.date_range(hours[-1] + pd.Timedelta(hours=1), periods=24, freq="h")
    forecast = pd.DataFrame({"mean": 1.0, "lower": 0.5, "upper": 1.5}, index=future)
    step_0 = future[0]
    fig = charts.forecast_figure(forecast, history, highlight=(future[0], future[5]), step_0=step_0)
    drawn = {t.name: list(t.x) for t in fig.data if t.name in ("history", "forecast mean")}
    assert drawn["history"][0] == -48 and drawn["history"][-1] == -1
    assert drawn["forecast mean"] == list(range(24))
    assert (fig.layout.shapes[0].x0, fig.layout.shapes[0].x1) == (0, 5)
    assert fig.layout.xaxis.title.text == "hours from step 0"
    dated = charts.forecast_figure(forecast, history)  # a dated history keeps its dates
    assert list(dated.data[0].x) == list(hours)


# --- SPEC section 8: the grid banded by node group, and the per-type comparison ---------------


def test_the_grid_of_a_cluster_with_nodes_is_banded_by_group_and_node():
    from core.charts.nodes import GROUP_LINE, NODE_LINE

    s = load_scenario(SCENARIOS_DIR / "mixed-nodes.json")
    fig = charts.grid_figure(s, solve(s, "allocator"))
    lines = sorted((shape.y0, shape.line.width) for shape in fig.layout.shapes)
    # h100x8 is GPUs 0-7, a10x4 is 8-15 in two nodes: a group line at 8, a node line at 12
    assert lines == [(7.5, GROUP_LINE["width"]), (11.5, NODE_LINE["width"])]
    labels = [(a.text, a.y) for a in fig.layout.annotations]
    assert labels == [
        ("<b>h100x8</b><br>H100 · 1 x 8", 3.5),
        ("<b>a10x4</b><br>A10 · 2 x 4", 11.5),
    ]
    hover = fig.data[0].text
    assert "GPU 13 · node a10x4-1 (A10)" in hover[13][0]


def test_the_grid_without_nodes_has_no_bands():
    s = load_scenario(SCENARIOS_DIR / "example.json")
    fig = charts.grid_figure(s, solve(s, "fifo"))
    assert not fig.layout.shapes and not fig.layout.annotations
    assert fig.layout.yaxis.title.text == "GPU"


def test_the_per_type_figure_and_table_carry_each_planners_figures():
    from core import tables
    from core.plan import metrics

    s = load_scenario(SCENARIOS_DIR / "mixed-nodes.json")
    values = {p: metrics(s, solve(s, p)) for p in ("fifo", "allocator")}
    table = tables.gpu_type_table(s, values)
    assert list(zip(table["GPU type"], table["planner"], strict=True)) == [
        ("H100", "fifo"),
        ("H100", "allocator"),
        ("A10", "fifo"),
        ("A10", "allocator"),
    ]
    for row in table.itertuples():
        per_type = values[row.planner]["by_gpu_type"][row[1]]
        assert row.utilization == per_type["utilization"] and row.cost == per_type["cost"]
        hours = s.cluster.horizon_steps * s.cluster.step_hours
        assert row[-1] == pytest.approx(
            per_type["idle_gpu_hours"] * per_type["cost"] / (row.GPUs * hours)
        )
    fig = charts.gpu_type_figure(values, 12.0)
    util = [t for t in fig.data if t.xaxis == "x"]
    assert [t.name for t in util] == ["fifo", "allocator"]
    assert list(util[0].x) == ["H100 · 8 GPUs", "A10 · 8 GPUs"]
    assert list(util[0].y) == [
        values["fifo"]["by_gpu_type"][t]["utilization"] for t in ("H100", "A10")
    ]
    plain = load_scenario(SCENARIOS_DIR / "example.json")
    assert tables.gpu_type_table(plain, {"fifo": metrics(plain, solve(plain, "fifo"))}).empty
