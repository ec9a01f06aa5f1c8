"""The workload as the app edits it: editor tables round-trip, forecast alignment, uploads."""

from __future__ import annotations

from datetime import datetime

import pandas as pd
import pytest
from hypothesis import given, settings

from core import workload
from core.io import load_scenario, scenario_to_json, scenario_to_tables
from core.model import Cluster, Scenario, ScenarioError
from tests.strategies import scenarios


@settings(max_examples=60, deadline=None)
@given(scenarios(max_gpus=16, max_steps=8, max_jobs=6))
def test_editor_tables_round_trip_to_the_same_scenario(s):
    jobs, demand = workload.editor_tables(s)
    result = workload.scenario_from_editor(s, jobs, demand)
    assert result.ok, (result.row_issues, result.general)
    assert result.scenario == s


@pytest.mark.parametrize(
    "column, value, message",
    [
        ("gpus_max", 3, "gpus_max 3 is not a power of two"),  # not 2^k
        ("priority", 0, "priority must be > 0"),  # priorities are positive
        ("gpu_hours", None, "missing field 'gpu_hours'"),  # batch work needs its size
        ("type", "gaming", "type 'gaming' is not one of"),  # unknown type
        ("gpus_max", 64, "larger than the cluster's"),  # cluster-level rule, still on its row
    ],
)
def test_a_broken_cell_is_reported_on_its_row(column, value, message, scenarios_dir):
    s = load_scenario(scenarios_dir / "example.json")
    jobs, demand = workload.editor_tables(s)
    row = next(k for k, j in enumerate(s.jobs) if not j.is_realtime and j.running is None)
    jobs.iloc[row, jobs.columns.get_loc(column)] = value
    result = workload.scenario_from_editor(s, jobs, demand)
    assert not result.ok
    assert list(result.row_issues) == [row]
    assert any(message in issue for issue in result.row_issues[row]), result.row_issues


def test_a_duplicate_id_is_reported_on_both_rows(scenarios_dir):
    s = load_scenario(scenarios_dir / "example.json")
    jobs, demand = workload.editor_tables(s)
    batch = [k for k, j in enumerate(s.jobs) if not j.is_realtime and j.running is None]
    jobs.iloc[batch[1], jobs.columns.get_loc("id")] = s.jobs[batch[0]].id
    result = workload.scenario_from_editor(s, jobs, demand)
    assert sorted(result.row_issues) == sorted(batch[:2])


def test_uploads_accept_json_or_the_csv_pair_in_any_order(scenarios_dir):
    base = load_scenario(scenarios_dir / "example.json")
    other = (
        load_scenario(scenarios_dir / "mixed-control.json")
        if (scenarios_dir / "mixed-control.json").exists()
        else base
    )
    new, source = workload.scenario_from_uploads(
        [("x.json", scenario_to_json(other).encode())], base
    )
    assert new == other and "x.json" in source
    jobs_csv, demand_csv = scenario_to_tables(base)
    new, _ = workload.scenario_from_uploads(
        [("d.csv", demand_csv.encode()), ("j.csv", jobs_csv.encode())], base
    )
    assert new == base
    with pytest.raises(ScenarioError, match="need a jobs CSV"):
        workload.scenario_from_uploads([("j.csv", jobs_csv.encode())], base)
    with pytest.raises(ScenarioError, match="upload one scenario .json"):
        workload.scenario_from_uploads([("a.json", b"{}"), ("b.json", b"{}")], base)
    with pytest.raises(ScenarioError, match="not UTF-8"):
        workload.scenario_from_uploads([("x.json", b"\xff\xfe\x00")], base)


def test_forecast_window_lines_steps_up_with_the_clock():
    s = Scenario(
        "s", Cluster(gpus=2, step_minutes=30, horizon_steps=4, start=datetime(2026, 8, 17, 6)), ()
    )
    end = pd.Timestamp("2026-08-17 02:00")  # forecast hour 0 is 03:00
    window = workload.forecast_window(end, s)
    assert window.hours == (3, 3, 4, 4) and window.note == ""
    late = workload.forecast_window(pd.Timestamp("2026-08-18 00:00"), s)
    assert late.hours == (0, 0, 1, 1) and "before the history ends" in late.note
    clockless = s.replace(cluster=Cluster(gpus=2, horizon_steps=3))
    assert workload.forecast_window(end, clockless).hours == (0, 1, 2)


def test_default_capacity_makes_the_peak_need_gpus_max():
    capacity = workload.default_capacity(4321.0, 6)
    assert 4321.0 / capacity <= 6 < 4321.0 / capacity + 1
    assert workload.default_capacity(0.0, 4) == 1.0
