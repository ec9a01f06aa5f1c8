"""The workload as the app edits it: editor tables round-trip, forecast alignment, uploads."""

from __future__ import annotations

import csv
import dataclasses
from datetime import datetime

import pandas as pd
import pytest
from hypothesis import given, settings

from core import views, workload
from core.formats import load_scenario, scenario_from_tables, scenario_to_json, scenario_to_tables
from core.model import Cluster, Scenario, ScenarioError
from tests.budget import examples
from tests.paths import SCENARIOS_DIR
from tests.strategies import scenarios


@settings(max_examples=examples(60), deadline=None)
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
        ("gpu_hours", None, "gpu_hours is empty"),  # batch work needs its size
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


CHOOSE_TYPE = "choose training, batch_inference, quantization or realtime"
POWER_OF_TWO = "enter a power of two: 1, 2, 4, 8, ..."


@pytest.mark.parametrize(
    "typed, issues",
    [
        # only an id: the type, then the cells every type needs
        (
            {"id": "new"},
            [
                f"type is empty; {CHOOSE_TYPE}",
                "priority is empty; enter a number > 0 (higher is more valuable)",
                "gpus_min is empty; enter a whole number of GPUs (a power of two for a batch type)",
                "gpus_max is empty; enter a whole number of GPUs (a power of two for a batch type)",
            ],
        ),
        # a batch type: its work too, and powers of two
        (
            {"type": "training", "priority": 2.0},
            [
                "id is empty; enter a job id, unique in the workload",
                f"gpus_min is empty; {POWER_OF_TWO}",
                f"gpus_max is empty; {POWER_OF_TWO}",
                "gpu_hours is empty; enter the work in GPU-hours, a number > 0",
            ],
        ),
        # real-time: no gpu_hours; swap_cap starts at 0 in the editor
        (
            {"id": "svc", "type": "realtime", "gpus_max": 2},
            [
                "priority is empty; enter a number > 0 (higher is more valuable)",
                "gpus_min is empty; enter a whole number of GPUs >= 0",
            ],
        ),
        # all typed but the work: that cell alone
        (
            {"id": "q", "type": "quantization", "priority": 1.0, "gpus_min": 1, "gpus_max": 1},
            ["gpu_hours is empty; enter the work in GPU-hours, a number > 0"],
        ),
    ],
)
def test_a_half_typed_new_row_names_every_empty_cell_and_what_it_needs(typed, issues):
    # A new row without a type said "type None is not one of ...", and one cell at a time.
    s = load_scenario(SCENARIOS_DIR / "mixed-control.json")
    jobs, demand = workload.editor_tables(s)
    added = pd.DataFrame([typed], index=pd.Index([len(jobs) + 1], name="row"))
    edited = pd.concat([jobs, added.astype({c: jobs.dtypes[c] for c in typed})])
    result = workload.scenario_from_editor(s, edited, demand)
    assert not result.ok and result.row_issues == {len(jobs): issues}
    table = workload.issues_table(edited, result)
    assert set(table["row"]) == {len(jobs) + 1}
    assert set(table["job"]) == {typed.get("id", workload.NO_ID)}


def test_a_half_typed_jobs_csv_row_names_its_row_and_empty_cells():
    from core.formats import scenario_from_tables

    s = load_scenario(SCENARIOS_DIR / "example.json")
    jobs_csv, demand_csv = scenario_to_tables(s)
    header = jobs_csv.splitlines()[0]
    half = "x" + "," * header.count(",")  # an id and nothing else
    with pytest.raises(ScenarioError) as caught:
        scenario_from_tables(jobs_csv + half + "\n", demand_csv, s)
    row = len(s.jobs) + 2
    assert caught.value.problems[:2] == [
        f"jobs.csv: row {row}: job 'x': type is empty; {CHOOSE_TYPE}",
        f"jobs.csv: row {row}: job 'x': priority is empty; enter a number > 0 (higher is more "
        "valuable)",
    ]


REALTIME_ROW, BATCH_ROW = 1, 2  # chat-api and dpo-13b in mixed-control


@pytest.mark.parametrize(
    "row, column, value, issue",
    [
        # batch-only cells of a real-time row: -5 was silently dropped
        (
            REALTIME_ROW,
            "gpu_hours",
            -5.0,
            "gpu_hours -5 does not apply to a realtime job (batch types only) and is not valid "
            "either (must be > 0); clear the cell",
        ),
        (
            REALTIME_ROW,
            "arrival_step",
            -3,
            "arrival_step -3 does not apply to a realtime job (batch types only) and is not "
            "valid either (must be a whole number >= 0); clear the cell",
        ),
        (REALTIME_ROW, "deadline_step", -1, "deadline_step -1 does not apply to a realtime job"),
        # real-time-only cells of a batch row
        (
            BATCH_ROW,
            "swap_cap",
            -1,
            "swap_cap -1 does not apply to a training job (realtime only) and is not valid "
            "either (must be a whole number >= 0); clear the cell",
        ),
        (BATCH_ROW, "previous_gpus", "six", "previous_gpus 'six' does not apply to a training"),
    ],
)
def test_an_invalid_value_in_a_cell_the_type_does_not_use_is_refused(row, column, value, issue):
    s = load_scenario(SCENARIOS_DIR / "mixed-control.json")
    jobs, demand = workload.editor_tables(s)
    jobs.iloc[row, jobs.columns.get_loc(column)] = value
    result = workload.scenario_from_editor(s, jobs, demand)
    assert not result.ok and list(result.row_issues) == [row]
    assert result.row_issues[row][0].startswith(issue), result.row_issues


@pytest.mark.parametrize(
    "row, column, value, line",
    [
        (REALTIME_ROW, "gpu_hours", 5.0, "gpu_hours 5 does not apply to a realtime job"),
        (REALTIME_ROW, "deadline_step", 3, "deadline_step 3 does not apply to a realtime job"),
        (BATCH_ROW, "swap_cap", 2, "swap_cap 2 does not apply to a training job (realtime only)"),
        (BATCH_ROW, "previous_gpus", "6 7", "previous_gpus '6 7' does not apply to a training"),
    ],
)
def test_a_valid_value_in_a_cell_the_type_does_not_use_is_said_to_be_ignored(
    row, column, value, line
):
    s = load_scenario(SCENARIOS_DIR / "mixed-control.json")
    jobs, demand = workload.editor_tables(s)
    jobs.iloc[row, jobs.columns.get_loc(column)] = value
    result = workload.scenario_from_editor(s, jobs, demand)
    assert result.ok and result.scenario == s  # the job has no such field: nothing changes
    [said] = workload.ignored_lines(jobs, result)
    assert said.startswith(f"row {row + 1}, job '{s.jobs[row].id}': {line}"), said


def test_a_batch_row_turned_realtime_says_which_of_its_cells_are_dropped():
    s = load_scenario(SCENARIOS_DIR / "mixed-control.json")
    jobs, demand = workload.editor_tables(s)
    row = [j.id for j in s.jobs].index("train-0")
    jobs.iloc[row, jobs.columns.get_loc("type")] = "realtime"
    result = workload.scenario_from_editor(s, jobs, demand)
    assert result.ok and result.scenario.jobs[row].is_realtime
    assert workload.ignored_lines(jobs, result) == [
        f"row {row + 1}, job 'train-0': arrival_step 2 does not apply to a realtime job (batch "
        "types only)",
        f"row {row + 1}, job 'train-0': gpu_hours 140 does not apply to a realtime job (batch "
        "types only)",
    ]


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
    with pytest.raises(ScenarioError, match="give one scenario .json"):
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


def _batch_row(s: Scenario) -> int:
    return next(k for k, j in enumerate(s.jobs) if not j.is_realtime and j.running is None)


def test_running_start_and_steps_without_gpus_is_an_error_not_silently_idle(scenarios_dir):
    s = load_scenario(scenarios_dir / "example.json")
    jobs, demand = workload.editor_tables(s)
    row = _batch_row(s)
    jobs.loc[jobs.index[row], ["running_gpu_start", "running_remaining_steps"]] = [0, 2]
    result = workload.scenario_from_editor(s, jobs, demand)
    assert not result.ok
    assert any("running_gpus is empty" in issue for issue in result.row_issues[row])


def test_a_running_job_turned_realtime_keeps_its_pin_or_says_why_not(scenarios_dir):
    s = load_scenario(scenarios_dir / "example.json")
    row = next(k for k, j in enumerate(s.jobs) if not j.is_realtime and j.running is not None)
    jobs, demand = workload.editor_tables(s)
    jobs.iloc[row, jobs.columns.get_loc("type")] = "realtime"
    jobs.iloc[row, jobs.columns.get_loc("swap_cap")] = 1
    result = workload.scenario_from_editor(s, jobs, demand)
    assert not result.ok
    assert any("cannot be running" in issue for issue in result.row_issues[row])


@pytest.mark.parametrize(
    "text, expected",
    [
        (None, None),  # blank: unknown, step 0 is free
        ("", None),
        ("[]", ()),  # held no GPU before step 0
        ("[ ]", ()),
        ("6 7", (6, 7)),
        ("6,7", (6, 7)),
        ("[6, 7]", (6, 7)),
    ],
)
def test_previous_gpus_means_the_same_in_the_editor_and_in_jobs_csv(text, expected, scenarios_dir):
    """One codec: the editor and jobs.csv read previous_gpus by the README's rule."""
    s = load_scenario(scenarios_dir / "example.json")
    k = next(i for i, j in enumerate(s.jobs) if j.is_realtime)
    jobs, demand = workload.editor_tables(s)
    # free GPUs 6 and 7 of the running block so [6, 7] is a legal previous set
    base = s.replace(jobs=tuple(j for j in s.jobs if j.is_realtime or j.running is None))
    jobs = jobs[[j.is_realtime or j.running is None for j in s.jobs]]
    k = [j.id for j in base.jobs].index(s.jobs[k].id)
    jobs.iloc[k, jobs.columns.get_loc("previous_gpus")] = text
    from_editor = workload.scenario_from_editor(base, jobs, demand)
    assert from_editor.ok, from_editor.row_issues
    assert from_editor.scenario.jobs[k].previous_gpus == expected
    jobs_csv, demand_csv = scenario_to_tables(base)
    header, *rows = jobs_csv.splitlines()
    columns = header.split(",")
    if "previous_gpus" not in columns:
        columns.append("previous_gpus")
        rows = [r + "," for r in rows]
    cells = next(csv.reader([rows[k]]))
    cells[columns.index("previous_gpus")] = text or ""
    rows[k] = ",".join(f'"{c}"' if "," in c else c for c in cells)
    text_csv = "\n".join([",".join(columns), *rows]) + "\n"
    from_csv = scenario_from_tables(text_csv, demand_csv, base)
    assert from_csv.jobs[k].previous_gpus == expected


def test_editor_cells_are_stripped_like_csv_cells(scenarios_dir):
    s = load_scenario(scenarios_dir / "example.json")
    jobs, demand = workload.editor_tables(s)
    row = _batch_row(s)
    jobs.iloc[row, jobs.columns.get_loc("id")] = "  fresh-id "
    result = workload.scenario_from_editor(s, jobs, demand)
    assert result.ok and result.scenario.jobs[row].id == "fresh-id"


def test_controls_set_or_clear_the_coverage_target(scenarios_dir):
    from core.formats import load_scenario
    from core.workload import KEEP, with_controls

    s = load_scenario(scenarios_dir / "mixed-control.json")
    common = {"decay": s.policy.decay, "penalty_weight": s.policy.penalty_weight, "swap_caps": {}}
    with_target = with_controls(s, coverage_target=0.99, **common)
    assert with_target.policy.rt_coverage_target == 0.99
    assert with_controls(with_target, coverage_target=KEEP, **common) is with_target
    assert with_controls(with_target, coverage_target=None, **common).policy == s.policy


def test_pending_edits_apply_while_their_tables_are_unchanged():
    s = load_scenario(SCENARIOS_DIR / "mixed-control.json")
    jobs, demand = workload.editor_tables(s)
    edited = jobs.copy()
    edited.loc[3, "gpus_min"] = 3
    pending = workload.PendingEdits(jobs, demand, edited, demand)
    assert pending.shows(edited, demand) and not pending.shows(jobs, demand)
    # a policy or cluster-size change leaves the tables as they were: the edits still apply
    other_policy = s.replace(policy=dataclasses.replace(s.policy, penalty_weight=6.0))
    assert pending.made_on(*workload.editor_tables(other_policy))
    bigger = s.replace(cluster=dataclasses.replace(s.cluster, gpus=16))
    assert pending.made_on(*workload.editor_tables(bigger))
    # a changed job or a longer horizon would be undone by the edited tables: they do not
    service = s.realtime_jobs[0]
    capped = s.replace(
        jobs=tuple(dataclasses.replace(j, swap_cap=3) if j is service else j for j in s.jobs)
    )
    assert not pending.made_on(*workload.editor_tables(capped))
    longer = views.with_cluster(s, gpus=8, horizon_steps=48, step_minutes=60, start=s.cluster.start)
    assert not pending.made_on(*workload.editor_tables(longer))
