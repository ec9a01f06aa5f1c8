"""The Capacity page's mix views (core.mix_views): counts to try, the cheapest mix meeting the
targets per planner, what is missed where none does, and the rows as table, chart and CSV."""

from __future__ import annotations

import pandas as pd
import pytest

from core import charts, mix_views
from core.mix import size_mix
from core.model import BatchJob, Cluster, RealtimeJob, Scenario, ScenarioError
from core.nodes import GpuType, NodeGroup
from core.sweep import PARAMETER_COLUMNS, run_point, sweep_to_csv
from tests.test_mix import two_groups


def row(big: int, small: int, planner: str, coverage: float, done: int, error: str = ""):
    """A sweep row of the `two_groups` cluster (4 A GPUs at 3/h a big node, 1 B at 1/h a small
    one), of 4 batch jobs."""
    out = {"gpus": 4 * big + small, "nodes_big": big, "nodes_small": small, "planner": planner}
    if not error:
        out.update(rt_coverage=coverage, completed_jobs=done, batch_jobs=4, utilization=0.5)
        out.update(utilization_A=0.6, utilization_B=0.4)
    return {**out, "error": error}


SCENARIO = two_groups(1, 1, [])
ROWS = [
    row(0, 2, "fifo", 1.0, 4, error="job 't': fits no allowed group"),  # 2/h, invalid
    row(0, 2, "allocator", 1.0, 4, error="job 't': fits no allowed group"),
    row(1, 0, "fifo", 0.5, 4),  # 12/h: coverage missed
    row(1, 0, "allocator", 0.9, 4),
    row(1, 1, "fifo", 0.98, 3),  # 13/h: the allocator meets both
    row(1, 1, "allocator", 1.0, 4),
    row(1, 2, "fifo", 1.0, 4),  # 14/h: both meet; fifo's cheapest
    row(1, 2, "allocator", 1.0, 4),
    row(2, 0, "fifo", 1.0, 4),  # 24/h: meets, dearer
    row(2, 0, "allocator", 1.0, 4),
]


@pytest.mark.parametrize(
    ("count", "counts"),
    [
        (0, [0, 1, 2]),  # a group of no nodes today: try a few
        (1, [0, 1, 2]),
        (3, [0, 1, 2, 3, 4, 5, 6]),
        (10, [0, 5, 8, 10, 12, 15, 20]),  # past 7 counts: a spread from 0 to twice as many
    ],
)
def test_default_counts_run_from_none_to_twice_today(count, counts):
    assert mix_views.default_counts(count) == counts


def test_points_leave_out_the_mix_of_no_gpus_and_bad_counts_name_the_group():
    vary = mix_views.parse_counts(SCENARIO, {"big": "0,1", "small": "2, 0"})
    assert vary == {"big": [0, 1], "small": [0, 2]}
    points = mix_views.mix_points(SCENARIO, vary)
    assert [p.nodes for p in points] == [
        (("big", 0), ("small", 2)),
        (("big", 1), ("small", 0)),
        (("big", 1), ("small", 2)),
    ]
    with pytest.raises(ScenarioError, match="Nodes: small: 'x' is not a whole number"):
        mix_views.parse_counts(SCENARIO, {"big": "1", "small": "1,x"})
    with pytest.raises(ScenarioError, match="every mix of these counts holds no GPUs"):
        mix_views.mix_points(SCENARIO, {"big": [0], "small": [0]})


def test_the_cheapest_meeting_mix_per_planner_and_the_one_to_buy():
    table = mix_views.mix_table(SCENARIO, ROWS, 0.99, 0.8)
    assert list(table["mix"][:3]) == ["2 x small", "2 x small", "1 x big"]
    assert list(table["cost_per_hour"]) == [2.0, 2.0, 12.0, 12.0, 13.0, 13.0, 14.0, 14.0, 24, 24]
    assert list(table["meets"]) == [False, False, False, False, False, True, True, True, True, True]
    cheapest = table[table["cheapest"]]
    assert list(zip(cheapest["planner"], cheapest["mix"], strict=True)) == [
        ("allocator", "1 x big + 1 x small"),
        ("fifo", "1 x big + 2 x small"),
    ]
    assert pd.isna(table.loc[0, "rt_coverage"]) and table.loc[0, "error"]  # invalid: no metrics
    assert table.loc[4, "completed_share"] == 0.75 and table.loc[5, "utilization_B"] == 0.4
    entries = mix_views.cheapest_mixes(SCENARIO, table, 0.99, 0.8, ["fifo", "allocator"])
    assert [(e["planner"], e["nodes"], e["gpus"], e["cost_per_hour"]) for e in entries] == [
        ("fifo", {"big": 1, "small": 2}, 6, 14.0),
        ("allocator", {"big": 1, "small": 1}, 5, 13.0),
    ]
    best = mix_views.answer(entries)
    assert best["planner"] == "allocator"
    assert mix_views.answer_words(SCENARIO, best) == (
        "1 x 4 A (big) + 1 x 1 B (small) = 5 GPUs, 13.00 per hour"
    )


def test_the_table_reads_cheapest_first_with_the_invalid_mixes_last():
    table = mix_views.cheapest_first(mix_views.mix_table(SCENARIO, ROWS, 0.99, 0.8))
    assert list(table.columns[:6]) == [
        "mix",
        "planner",
        "meets",
        "cheapest",
        "gpus",
        "cost_per_hour",
    ]
    assert list(table["cost_per_hour"]) == [12.0, 12.0, 13.0, 13.0, 14.0, 14.0, 24, 24, 2.0, 2.0]


def test_no_meeting_mix_says_which_target_is_missed():
    table = mix_views.mix_table(SCENARIO, ROWS, 0.99, 1.0)  # every job: fifo needs 2 small
    assert list(table[table["cheapest"]]["mix"]) == ["1 x big + 1 x small", "1 x big + 2 x small"]
    low = [r for r in ROWS if r["nodes_big"] == 1 and r["nodes_small"] == 0]
    part = mix_views.mix_table(SCENARIO, low, 0.99, 0.8)
    entries = mix_views.cheapest_mixes(SCENARIO, part, 0.99, 0.8, ["fifo", "allocator"])
    assert all(e["nodes"] is None for e in entries)
    assert entries[1]["missed"] == {
        "coverage": "real-time coverage below 99% at every mix tried: at most 90.00% (1 x big)"
    }
    assert mix_views.answer(entries) is None
    assert mix_views.answer_words(SCENARIO, None) == "No mix tried meets the targets."
    # each target met by some mix, never both at once
    apart = [row(1, 0, "fifo", 1.0, 2), row(1, 1, "fifo", 0.5, 4)]
    part = mix_views.mix_table(SCENARIO, apart, 0.99, 0.8)
    assert list(mix_views.missed_targets(part, 0.99, 0.8)) == ["both"]
    # only invalid mixes
    bad = mix_views.mix_table(SCENARIO, ROWS[:2], 0.99, 0.8)
    entries = mix_views.cheapest_mixes(SCENARIO, bad, 0.99, 0.8, ["fifo", "allocator"])
    assert list(mix_views.reasons(entries).values()) == [["fifo", "allocator"]]
    assert "no mix tried can hold the workload" in next(iter(mix_views.reasons(entries)))


def test_without_prices_mixes_are_ranked_by_gpus():
    types = (GpuType("A", 1.0, 80), GpuType("B", 0.5, 24))
    nodes = (NodeGroup("big", "A", 4, 1), NodeGroup("small", "B", 1, 1))
    unpriced = Scenario("u", Cluster(5, 60, 6, gpu_types=types, nodes=nodes), ())
    assert not mix_views.priced(unpriced) and mix_views.priced(SCENARIO)
    rows = [row(2, 0, "fifo", 1.0, 4), row(0, 3, "fifo", 1.0, 4), row(1, 0, "fifo", 1.0, 4)]
    table = mix_views.mix_table(unpriced, rows, 0.99, 0.8)
    assert table["cost_per_hour"].isna().all()
    assert list(table[table["cheapest"]]["mix"]) == ["3 x small"]  # 3 GPUs, the fewest
    points = mix_views.chart_points(table, "gpus")
    assert list(points["x"]) == [8, 3, 4]
    figure = charts.mix_figure(points, "gpus", 0.99)
    assert figure.layout.xaxis.title.text.startswith("GPUs (no price set")


def test_chart_points_and_the_figure_name_every_mix_and_star_the_cheapest():
    table = mix_views.mix_table(SCENARIO, ROWS, 0.99, 0.8)
    points = mix_views.chart_points(table, "cost_per_hour")
    assert len(points) == 8  # the invalid mix has no coverage to plot
    assert points.iloc[0]["hover"] == (
        "1 x big (4 GPUs, 12.00/h)<br>coverage 50.00%, completed 100% (4/4)<br>misses a target"
    )
    entries = mix_views.cheapest_mixes(SCENARIO, table, 0.99, 0.8, ["fifo", "allocator"])
    best = mix_views.answer(entries)
    figure = charts.mix_figure(points, "cost_per_hour", 0.99, best, {"fifo": "FIFO"})
    stars = [t for t in figure.data if t.marker.symbol == "star"]
    assert sorted((t.name, t.x[0]) for t in stars) == [
        ("FIFO: cheapest meeting the targets", 14.0),
        ("allocator: cheapest meeting the targets", 13.0),
    ]
    hollow = [t for t in figure.data if t.name.endswith("misses a target")]
    assert all(t.marker.color == "white" for t in hollow)
    assert sum(len(t.x) for t in figure.data if t.marker.symbol != "star") == 8
    [note] = figure.layout.annotations[1:]  # (the first: the coverage target's line)
    assert note.text == "<b>cheapest: 1 x big + 1 x small</b>" and note.x == 13.0


def test_the_csv_rows_keep_every_sweep_column_with_the_mix_and_meets():
    table = mix_views.mix_table(SCENARIO, ROWS, 0.99, 0.8)
    text = sweep_to_csv(mix_views.rows_for_csv(table, ROWS))
    header, first, *_ = text.splitlines()
    assert header.split(",")[:8] == [*PARAMETER_COLUMNS, "mix", "nodes_big"]
    assert first.startswith("2,,,,,fifo,2 x small,0,2,")
    assert {"nodes_big", "nodes_small", "meets", "error"} <= set(header.split(","))
    assert len(text.splitlines()) == 1 + len(ROWS)


def test_planned_mixes_give_the_answer_size_mix_gives():
    # the hand-counted case of tests/test_mix.py: big=1 with two small nodes (14/h)
    rt = RealtimeJob("chat", 8, 0, 2, 2, (2.0,) * 6)
    train = BatchJob("t", "training", 1, 4, 4, 24.0, gpu_types=("A",))
    s = two_groups(1, 0, [rt, train])
    vary = {"big": [0, 1, 2], "small": [0, 1, 2, 3]}
    rows = [run_point(s, p, "allocator") for p in mix_views.mix_points(s, vary)]
    table = mix_views.mix_table(s, rows, 1.0, 1.0)
    [entry] = mix_views.cheapest_mixes(s, table, 1.0, 1.0, ["allocator"])
    expected = size_mix(s, vary, 1.0, 1.0, "allocator")
    assert entry["nodes"] == expected["nodes"] == {"big": 1, "small": 2}
    assert (entry["gpus"], entry["cost_per_hour"]) == (expected["gpus"], 14.0)
