"""Scenario files in and out: bad input names file, job or row, and field; round trips are exact."""

from __future__ import annotations

import copy
import json
import math
import warnings
from pathlib import Path

import pytest
from hypothesis import given, settings

from core import formats
from core.formats import (
    MAX_UPLOAD_BYTES,
    decode_upload,
    grid_to_csv,
    load_scenario,
    plan_exports,
    plan_from_grid_csv,
    scenario_from_dict,
    scenario_from_json,
    scenario_from_tables,
    scenario_to_dict,
    scenario_to_json,
    scenario_to_tables,
    spreadsheet_safe,
    write_csv,
)
from core.model import MAX_DEMAND, MAX_NUMBER, Scenario, ScenarioError
from core.plan import check, metrics
from core.planners import PLANNER_NAMES, solve
from tests.budget import examples
from tests.strategies import scenarios

BASE = {
    "name": "base",
    "description": "valid base for the bad-input table",
    "cluster": {"gpus": 8, "step_minutes": 60, "horizon_steps": 4, "start": "2026-08-17T00:00:00"},
    "policy": {"penalty_weight": 8, "decay": 0.97, "reward_weight": 1},
    "jobs": [
        {
            "id": "sft",
            "type": "training",
            "priority": 5,
            "arrival_step": 0,
            "gpus_min": 2,
            "gpus_max": 4,
            "gpu_hours": 8,
            "running": {"gpu_start": 0, "gpus": 4, "remaining_steps": 2},
        },
        {
            "id": "eval",
            "type": "batch_inference",
            "priority": 2,
            "arrival_step": 1,
            "gpus_min": 1,
            "gpus_max": 2,
            "gpu_hours": 3,
        },
        {
            "id": "chat",
            "type": "realtime",
            "priority": 8,
            "gpus_min": 1,
            "gpus_max": 4,
            "swap_cap": 2,
            "demand": [1, 2, 3, 2],
            "previous_gpus": [6, 7],
        },
    ],
}


def mutate(path: str, value=None, delete: bool = False):
    """A function that sets (or deletes) one field of a copy of BASE, addressed like a.b.0.c."""

    def apply(doc: dict) -> dict:
        doc = copy.deepcopy(doc)
        *parents, last = path.split(".")
        node = doc
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        if isinstance(node, list):
            last = int(last)
        if delete:
            del node[last]
        else:
            node[last] = value
        return doc

    return apply


# (change, words the message must contain): one row per rule of SPEC section 3.
BAD_SCENARIOS = [
    (mutate("jobs.0.gpu_hours", delete=True), ["job 'sft'", "gpu_hours", "missing"]),
    (mutate("jobs.1.colour", "red"), ["job 'eval'", "colour", "unknown"]),
    (mutate("jobs.1.priority", "high"), ["job 'eval'", "priority", "number"]),
    (mutate("jobs.1.priority", -1), ["job 'eval'", "priority", "> 0"]),
    (mutate("jobs.1.gpu_hours", -3), ["job 'eval'", "gpu_hours", "> 0"]),
    (mutate("jobs.1.gpus_max", 3), ["job 'eval'", "gpus_max", "power of two"]),
    (mutate("jobs.1.gpus_min", 4), ["job 'eval'", "gpus_min", "larger than gpus_max"]),
    (mutate("jobs.1.gpus_max", 16), ["job 'eval'", "gpus_max", "8 GPUs"]),
    (mutate("jobs.1.arrival_step", 1.5), ["job 'eval'", "arrival_step", "whole number"]),
    (mutate("jobs.1.type", "finetune"), ["job 'eval'", "type", "finetune"]),
    (mutate("jobs.1.id", "sft"), ["job 'sft'", "id", "more than one"]),
    (mutate("jobs.1.id", ""), ["id", "non-empty"]),
    (mutate("jobs.2.demand", [1, 2, 3]), ["job 'chat'", "demand", "3 values", "4"]),
    (mutate("jobs.2.demand", [1, -2, 3, 2]), ["job 'chat'", "demand[1]", ">= 0"]),
    (mutate("jobs.2.demand", [1, "NaN", 3, 2]), ["job 'chat'", "demand[1]", "number"]),
    (mutate("jobs.2.swap_cap", -1), ["job 'chat'", "swap_cap", ">= 0"]),
    (mutate("jobs.2.previous_gpus", [6, 9]), ["job 'chat'", "previous_gpus", "GPU 9"]),
    (mutate("jobs.2.previous_gpus", [6, 6]), ["job 'chat'", "previous_gpus", "twice"]),
    (mutate("jobs.2.previous_gpus", [3, 7]), ["job 'chat'", "previous_gpus", "overlaps", "'sft'"]),
    (mutate("jobs.0.running.gpu_start", 2), ["job 'sft'", "running.gpu_start", "aligned"]),
    (mutate("jobs.0.running.gpus", 3), ["job 'sft'", "running.gpus", "power of two"]),
    (
        mutate("jobs.0.running.remaining_steps", delete=True),
        ["job 'sft'", "running", "remaining_steps"],
    ),
    (mutate("cluster.gpus", 0), ["cluster", "gpus", ">= 1"]),
    (mutate("cluster.gpus", 70_000), ["cluster", "gpus", "65,536"]),
    (mutate("cluster.horizon_steps", 20_000), ["cluster", "horizon_steps", "10,080"]),
    (
        mutate("cluster", {"gpus": 65_536, "horizon_steps": 200}),
        ["cluster", "grid cells", "10,000,000"],
    ),
    (mutate("cluster.start", "yesterday"), ["cluster", "start", "ISO"]),
    (mutate("policy.decay", 1.5), ["policy", "decay", "(0, 1]"]),
    (mutate("policy.penalty_weight", -2), ["policy", "penalty_weight", ">= 0"]),
    (mutate("policy.temperature", 1), ["policy", "temperature", "unknown"]),
    (mutate("jobs", "none"), ["jobs", "list"]),
    (mutate("jobs.2.gpus_min", 7), ["job 'chat'", "gpus_min", "larger than gpus_max"]),
    # SPEC section 7's optional fields
    (mutate("policy.rt_coverage_target", 1.2), ["policy", "rt_coverage_target", "(0, 1]"]),
    (mutate("policy.rt_coverage_target", 0), ["policy", "rt_coverage_target", "> 0"]),
    (mutate("policy.gpu_hour_cost", -1), ["policy", "gpu_hour_cost", ">= 0"]),
    (mutate("jobs.1.team", 7), ["job 'eval'", "team", "string"]),
    (mutate("jobs.2.team", " "), ["job 'chat'", "team", "non-empty"]),
    (mutate("jobs.1.deadline_step", -1), ["job 'eval'", "deadline_step", ">= 0"]),
    (mutate("jobs.1.deadline_step", 2.5), ["job 'eval'", "deadline_step", "whole number"]),
    (mutate("jobs.2.deadline_step", 3), ["job 'chat'", "deadline_step", "unknown"]),
    # issue 11: hostile values are refused with a message, never an OverflowError or a crash later
    (mutate("cluster.gpus", 10**400), ["cluster", "gpus", "exceeds the limit"]),  # > any float
    (mutate("jobs.1.gpu_hours", 10**400), ["job 'eval'", "gpu_hours", "exceeds the limit"]),
    (mutate("policy.penalty_weight", 10**30), ["policy", "penalty_weight", "exceeds the limit"]),
    (mutate("jobs.1.gpu_hours", 1e308), ["job 'eval'", "gpu_hours", "exceeds the limit"]),
    # more work than 8 GPUs do in the longest horizon (8 x 10,080 GPU-hours)
    (mutate("jobs.1.gpu_hours", 80_641), ["job 'eval'", "gpu_hours", "longest horizon"]),
    (mutate("jobs.1.gpu_hours_actual", 1e6), ["job 'eval'", "gpu_hours_actual", "longest"]),
    (mutate("jobs.0.running.remaining_steps", 2.5), ["running.remaining_steps", "whole number"]),
    (mutate("jobs.1.id", " eval"), ["job id", "space"]),  # one rule: no surrounding spaces
    (mutate("jobs.1.id", "eval "), ["job id", "space"]),
    (mutate("jobs.1.id", "ev\ud800"), ["job id", "surrogate"]),  # lone surrogate
    (mutate("jobs.2.team", "\udfff"), ["job 'chat'", "team", "surrogate"]),
    (mutate("jobs.1.team", " research"), ["job 'eval'", "team", "space"]),
    (mutate("name", "n\udc80"), ["scenario", "name", "surrogate"]),
    (mutate("cluster.start", "9999-12-31T23:00"), ["cluster", "start", "too late"]),
    (mutate("cluster.start", "0001-01-01T00:00"), ["cluster", "start", "too early"]),
    (mutate("jobs.2.history", [1] * 100_001), ["job 'chat'", "history", "100,000"]),
    (mutate("jobs.2.demand", [1, 1e13, 1, 1]), ["job 'chat'", "demand[1]", "limit"]),
    # a type as the JSON has it, not as Python prints it ("None", "'x'"), and not at any length
    (mutate("jobs.0.type", None), ["job 'sft'", "type null is not one of", "training"]),
    (mutate("jobs.0.type", "x" * 10_000), ["job 'sft'", 'type "xxxx', "(10002 characters)"]),
    (mutate("jobs.0.type", ["training"]), ["job 'sft'", "type a list is not one of"]),
]


@pytest.mark.parametrize(
    "change, words", BAD_SCENARIOS, ids=[" ".join(w[:2]) for _, w in BAD_SCENARIOS]
)
def test_bad_scenario_is_named_in_the_message(change, words):
    text = json.dumps(change(BASE))
    with pytest.raises(ScenarioError) as raised:
        scenario_from_json(text, "bad.json")
    message = str(raised.value)
    assert message.startswith("bad.json: "), message
    for word in words:
        assert word in message, f"{word!r} not in {message!r}"


@pytest.mark.parametrize(
    "text, words",
    [
        # a key given twice: the last one used to win silently
        ('{"name": "a", "name": "b"}', ["bad.json", "'name'", "twice"]),
        ('{"cluster": {"gpus": 8, "gpus": 4}}', ["bad.json", "'gpus'", "twice"]),
        # thousands of levels: a message, not RecursionError
        ("[" * 100_000 + "]" * 100_000, ["bad.json", "nested too deeply"]),
        ('{"jobs": ' + "[" * 50_000 + "]" * 50_000 + "}", ["bad.json", "nested too deeply"]),
        # more digits than Python converts: a message, not ValueError
        ('{"cluster": {"gpus": 1' + "0" * 5000 + "}}", ["bad.json", "more than 4,300 digits"]),
    ],
)
def test_hostile_json_text_is_refused_with_a_message(text, words):
    with pytest.raises(ScenarioError) as raised:
        scenario_from_json(text, "bad.json")
    for word in words:
        assert word in str(raised.value), f"{word!r} not in {raised.value}"


def test_integral_floats_are_integers_and_every_planner_plans_them():
    doc = copy.deepcopy(BASE)
    doc["cluster"].update(gpus=8.0, horizon_steps=4.0, step_minutes=60.0)
    doc["jobs"][0].update(gpus_min=2.0, gpus_max=4.0, arrival_step=0.0, deadline_step=3.0)
    doc["jobs"][0]["running"] = {"gpu_start": 0.0, "gpus": 4.0, "remaining_steps": 2.0}
    doc["jobs"][2].update(swap_cap=2.0, previous_gpus=[6.0, 7.0])
    scenario = scenario_from_json(json.dumps(doc))
    expected = copy.deepcopy(BASE)
    expected["jobs"][0]["deadline_step"] = 3
    assert scenario == scenario_from_dict(expected)
    r = scenario.jobs[0].running
    assert all(type(v) is int for v in (r.gpu_start, r.gpus, r.remaining_steps))
    for planner in PLANNER_NAMES:
        plan = solve(scenario, planner)
        assert check(scenario, plan) == [], planner


def test_every_planner_works_at_the_limits_without_numpy_warnings():
    """The largest accepted values: work the cluster can hold in the longest horizon, numbers
    at MAX_NUMBER, demand at MAX_DEMAND. Every plan is legal, metrics finite, no warning."""
    doc = {
        "name": "limits",
        "cluster": {"gpus": 8, "horizon_steps": 24, "start": "2026-01-01T00:00"},
        "policy": {
            "penalty_weight": MAX_NUMBER,
            "reward_weight": MAX_NUMBER,
            "decay": 1e-15,
            "gpu_hour_cost": MAX_NUMBER,
            "rt_coverage_target": 1,
        },
        "jobs": [
            # 8 GPUs x 10,080 steps: exactly the bound
            {"id": "big", "type": "training", "priority": MAX_NUMBER, "gpus_min": 1,
             "gpus_max": 8, "gpu_hours": 8 * 10_080},
            {"id": "pin", "type": "training", "priority": 1e-15, "gpus_min": 1, "gpus_max": 1,
             "gpu_hours": 1e-15,
             "running": {"gpu_start": 0, "gpus": 1, "remaining_steps": int(MAX_NUMBER)}},
            {"id": "late", "type": "quantization", "priority": MAX_NUMBER, "gpus_min": 1,
             "gpus_max": 2, "gpu_hours": 1, "arrival_step": int(MAX_NUMBER),
             "deadline_step": int(MAX_NUMBER)},
            {"id": "rt", "type": "realtime", "priority": MAX_NUMBER, "gpus_min": 0,
             "gpus_max": 4, "swap_cap": int(MAX_NUMBER), "demand": [MAX_DEMAND] * 24,
             "history": [MAX_DEMAND, 0] * 3},
        ],
    }  # fmt: skip
    scenario = scenario_from_dict(doc)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for planner in PLANNER_NAMES:
            options = {"time_limit": 2} if planner == "full" else {}
            plan = solve(scenario, planner, **options)
            assert check(scenario, plan) == [], planner
            values = metrics(scenario, plan)
            assert math.isfinite(values["objective"]) and math.isfinite(values["value"])
            plan_exports(scenario, plan)


def test_the_base_of_the_table_is_valid():
    scenario = scenario_from_dict(BASE)
    assert [j.id for j in scenario.jobs] == ["sft", "eval", "chat"]


@pytest.mark.parametrize(
    "data, words",
    [
        (b"", ["up.json", "empty"]),
        (b"   \n", ["up.json", "empty"]),
        (b"\xff\xfe\x00{", ["up.json", "UTF-8"]),
        (b"x" * (MAX_UPLOAD_BYTES + 1), ["up.json", "upload limit"]),
    ],
)
def test_bad_uploads(data, words):
    with pytest.raises(ScenarioError) as raised:
        decode_upload(data, "up.json")
    for word in words:
        assert word in str(raised.value)


def test_invalid_json_names_line_and_column():
    with pytest.raises(ScenarioError, match=r"bad.json: not valid JSON at line 2, column"):
        scenario_from_json('{"name": "x",\n "cluster": }', "bad.json")


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('{"name": "exam', "line 1, column 10: a string starts here and is never closed"),
        ('{"name": "a\tb"}', "line 1, column 12: a raw control character (a newline or tab)"),
        ('{"name": "x",}', "line 1, column 14: Expecting property name enclosed in double quotes"),
    ],
)
def test_every_json_reader_says_what_broke_in_a_whole_sentence(text, words):
    from core.formats.history import ImportRules, import_history

    for read in (
        lambda: scenario_from_json(text, "bad.json"),
        lambda: ImportRules.from_json(text, "bad.json"),
        lambda: import_history(text.encode(), "kubectl", name="bad.json"),
    ):
        with pytest.raises(ScenarioError) as raised:
            read()
        assert str(raised.value).startswith(f"bad.json: not valid JSON at {words}")
        assert not str(raised.value).endswith(" at")


def test_cluster_limits_are_checked_before_jobs_are_read():
    doc = mutate("cluster.gpus", 65_537)(BASE)
    doc["jobs"] = [{"id": "x"}]  # would fail too, but the cluster limit comes first
    with pytest.raises(ScenarioError, match="65,536"):
        scenario_from_dict(doc)


def test_json_round_trip_is_exact():
    scenario = scenario_from_dict(BASE)
    again = scenario_from_json(scenario_to_json(scenario))
    assert again == scenario
    assert scenario_to_dict(again) == scenario_to_dict(scenario)


@settings(max_examples=examples(60), deadline=None)
@given(scenarios())
def test_json_to_csv_pair_to_json_is_exact(scenario):
    jobs_csv, demand_csv = scenario_to_tables(scenario)
    again = scenario_from_tables(jobs_csv, demand_csv, scenario)
    assert again == scenario
    assert scenario_to_json(again) == scenario_to_json(scenario)


def test_csv_pair_keeps_history_and_pinned_work():
    doc = copy.deepcopy(BASE)
    doc["jobs"][2]["history"] = [1, None, 2.5]
    scenario = scenario_from_dict(doc)
    jobs_csv, demand_csv = scenario_to_tables(scenario)
    assert "running_gpus" in jobs_csv.splitlines()[0]
    assert "-3,chat,1" in demand_csv and "-2,chat,\n" in demand_csv
    assert scenario_from_tables(jobs_csv, demand_csv, scenario) == scenario


HEADER = "id,type,priority,arrival_step,gpus_min,gpus_max,gpu_hours,swap_cap"

BAD_TABLES = [
    # (jobs.csv, demand.csv, words)
    ("id,type,priority\nx,training,1\n", "step,job_id,demand\n", ["jobs.csv", "missing column"]),
    (
        "id,type,priority,arrival_step,gpus_min,gpus_max,gpu_hours,swap_cap,colour\n",
        "step,job_id,demand\n",
        ["jobs.csv", "unknown column", "colour"],
    ),
    (
        "id,type,priority,arrival_step,gpus_min,gpus_max,gpu_hours,swap_cap\n"
        "a,training,high,0,1,2,4,\n",
        "step,job_id,demand\n",
        ["jobs.csv: row 2", "job 'a'", "priority", "number"],
    ),
    (
        "id,type,priority,arrival_step,gpus_min,gpus_max,gpu_hours,swap_cap\n"
        "a,training,1,0,1,3,4,\n",
        "step,job_id,demand\n",
        ["jobs.csv: row 2", "gpus_max", "power of two"],
    ),
    (
        "id,type,priority,arrival_step,gpus_min,gpus_max,gpu_hours,swap_cap\n"
        "c,realtime,1,,1,2,,1\n",
        "step,job_id,demand\n0,c,1\n1,c,x\n",
        ["demand.csv: row 3", "demand", "number"],
    ),
    (
        "id,type,priority,arrival_step,gpus_min,gpus_max,gpu_hours,swap_cap\n"
        "c,realtime,1,,1,2,,1\n",
        "step,job_id,demand\n0,c,1\n",
        ["demand.csv", "job 'c'", "step 1"],
    ),
    (
        "id,type,priority,arrival_step,gpus_min,gpus_max,gpu_hours,swap_cap\n"
        "c,realtime,1,,1,2,,1\n",
        "step,job_id,demand\n0,c,1\n1,c,1\n0,d,2\n1,d,2\n",
        ["demand.csv: row 4", "job_id 'd'"],
    ),
    (
        "id,type,priority,arrival_step,gpus_min,gpus_max,gpu_hours,swap_cap\n"
        "a,training,1,0,1,2,4,\na,training,1,0,1,2,4,\n",
        "step,job_id,demand\n",
        ["jobs.csv", "job 'a'", "more than one"],
    ),
    (
        "id,type,priority,arrival_step,gpus_min,gpus_max,gpu_hours,swap_cap\n"
        "a,training,1,0,1,2,4\n",
        "step,job_id,demand\n",
        ["jobs.csv: row 2", "7 cells"],
    ),
    # issue 11: a history step far before 0 is refused before anything is built for it
    (
        HEADER + "c,realtime,1,,1,2,,1\n",
        "step,job_id,demand\n-100000000,c,1\n0,c,1\n1,c,1\n",
        ["demand.csv: row 2", "step -100000000", "history limit"],
    ),
    (
        HEADER + "c,realtime,1,,1,2,,1\n",
        "step,job_id,demand\n-1000000000000000000000,c,1\n0,c,1\n1,c,1\n",
        ["demand.csv: row 2", "history limit"],
    ),
    # running start and steps given, GPUs blank: an error, not silently "not running"
    (
        HEADER + ",running_gpu_start,running_gpus,running_remaining_steps\n"
        "a,training,1,0,1,2,4,,0,,2\n",
        "step,job_id,demand\n",
        ["jobs.csv: row 2", "job 'a'", "running_gpus is empty"],
    ),
    (
        HEADER + ",running_gpu_start,running_gpus,running_remaining_steps\n"
        "c,realtime,1,,1,2,,1,0,2,2\n",
        "step,job_id,demand\n0,c,1\n1,c,1\n",
        ["jobs.csv: row 2", "job 'c'", "cannot be running"],
    ),
    # an invalid value in a column the row's type does not use: refused, not dropped
    (
        HEADER + "\nc,realtime,1,,1,2,-5,1\n",
        "step,job_id,demand\n0,c,1\n1,c,1\n",
        ["jobs.csv: row 2", "job 'c'", "gpu_hours -5 does not apply to a realtime job"],
    ),
    (
        HEADER + "\na,training,1,0,1,2,4,-1\n",
        "step,job_id,demand\n",
        ["jobs.csv: row 2", "job 'a'", "swap_cap -1 does not apply to a training job"],
    ),
    # integers too large for a float, and numbers with absurdly many digits
    (
        HEADER + "\na,training,1,0,1,2,1" + "0" * 400 + ",\n",
        "step,job_id,demand\n",
        ["jobs.csv: row 2", "gpu_hours", "longer than 64 characters"],
    ),
    (
        HEADER + "\na,training,1,0,1,2,1" + "0" * 60 + ",\n",
        "step,job_id,demand\n",
        ["jobs.csv: row 2", "gpu_hours", "exceeds the limit"],
    ),
    (
        HEADER + "\nc,realtime,1,,1,2,,1\n",
        "step,job_id,demand\n0,c,1" + "0" * 60 + "\n1,c,1\n",
        ["jobs.csv: row 2", "demand[0]", "limit"],
    ),
    (
        HEADER + "\na,training,1,0,1,2,2.5,\nb,training,1,0.5,1,2,2,\n",
        "step,job_id,demand\n",
        ["jobs.csv: row 3", "arrival_step", "whole number"],
    ),
    # " a" and "a" are one id (cells are stripped), so two rows are a duplicate
    (
        HEADER + "\n a,training,1,0,1,2,4,\na ,training,1,0,1,2,4,\n",
        "step,job_id,demand\n",
        ["jobs.csv", "job 'a'", "more than one"],
    ),
]


def test_a_job_refused_for_its_demand_is_not_also_missing_from_jobs_csv(scenarios_dir):
    example = load_scenario(scenarios_dir / "example.json")
    jobs_csv, demand_csv = scenario_to_tables(example)
    lines = demand_csv.splitlines()
    step, job_id, _ = lines[2].split(",")
    lines[2] = f"{step},{job_id},1e18"
    with pytest.raises(ScenarioError) as raised:
        scenario_from_tables(jobs_csv, "\n".join(lines) + "\n", example)
    [problem] = raised.value.problems  # one problem, not a second "is not a real-time job"
    assert f"job '{job_id}': demand[{step}] 1e+18 exceeds the limit of 1e+15" in problem


def test_both_files_of_a_bad_pair_say_what_is_wrong_at_once():
    base = scenario_from_dict(mutate("cluster.horizon_steps", 2)({**BASE, "jobs": []}))
    jobs_csv = "id,type,priority,arrival_step,gpus_min,gpus_max\nt,training,1,0,1,1\n"
    demand_csv = "step,job_id,demand\n5,c,1\n"  # past the horizon of 2 steps
    with pytest.raises(ScenarioError) as raised:
        scenario_from_tables(jobs_csv, demand_csv, base)
    problems = raised.value.problems
    assert len(problems) == 2
    assert problems[0].startswith("demand.csv: row 2") and "past the horizon" in problems[0]
    assert problems[1].startswith("jobs.csv") and "gpu_hours" in problems[1]


@pytest.mark.parametrize("jobs_csv, demand_csv, words", BAD_TABLES)
def test_bad_tables_name_file_row_and_field(jobs_csv, demand_csv, words):
    base = scenario_from_dict(mutate("cluster.horizon_steps", 2)({**BASE, "jobs": []}))
    with pytest.raises(ScenarioError) as raised:
        scenario_from_tables(jobs_csv, demand_csv, base)
    for word in words:
        assert word in str(raised.value), f"{word!r} not in {raised.value}"
    for problem in raised.value.problems:  # the file and row are said once, not twice
        assert problem.count(".csv") == 1 + problem.count("in jobs.csv"), problem
        assert problem.count(": row ") <= 1, problem


def test_table_cells_are_read_by_one_rule():
    """Integral floats are integers, cells are stripped, ids match across the two files."""
    base = scenario_from_dict(mutate("cluster.horizon_steps", 2)({**BASE, "jobs": []}))
    jobs_csv = (
        HEADER + ",previous_gpus\n a ,training,1,1.0,2.0,4,8, ,\nc,realtime,1,,1,2,,1.0,[ ]\n"
    )
    scenario = scenario_from_tables(jobs_csv, "step,job_id,demand\n0, c ,1\n1,c,2\n", base)
    a, c = scenario.jobs
    assert (a.id, a.arrival_step, a.gpus_min) == ("a", 1, 2)
    assert type(a.arrival_step) is int and type(a.gpus_min) is int
    assert (c.id, c.swap_cap, c.previous_gpus, c.demand) == ("c", 1, (), (1.0, 2.0))


@pytest.mark.parametrize(
    "value, expected",
    [
        ("=SUM(A1)", "'=SUM(A1)"),
        ("+1", "'+1"),
        ("-cmd", "'-cmd"),
        ("@x", "'@x"),
        ("ok", "ok"),
        (-3, -3),
        (2.5, 2.5),
    ],
)
def test_spreadsheet_formulas_are_neutralised(value, expected):
    assert spreadsheet_safe(value) == expected


def test_a_grid_written_by_a_spreadsheet_reads_its_whole_floats_as_steps_and_gpus():
    scenario = scenario_from_dict(BASE)
    plan = solve(scenario, "fifo")
    header, *rows = grid_to_csv(scenario, plan).splitlines()
    floats = [
        ",".join([f"{r.split(',')[0]}.0", f"{r.split(',')[1]}.0", *r.split(",")[2:]]) for r in rows
    ]
    assert floats and all(".0," in r for r in floats)
    assert plan_from_grid_csv(scenario, "\n".join([header, *floats]) + "\n").same_grid(plan)


def test_a_grid_of_more_rows_than_twice_its_cells_is_refused_by_its_count():
    scenario = scenario_from_dict(BASE)
    cells = scenario.cluster.gpus * scenario.cluster.horizon_steps
    header, first, *_ = grid_to_csv(scenario, solve(scenario, "fifo")).splitlines()
    at_limit = "\n".join([header, *[first] * (2 * cells)]) + "\n\n"  # a blank line is no row
    assert plan_from_grid_csv(scenario, at_limit).conflicts == ()  # (the same cell, one job)
    over = at_limit + first + "\n"
    with pytest.raises(ScenarioError, match=f"grid.csv: {2 * cells + 1:,} rows for a grid of "):
        plan_from_grid_csv(scenario, over)


def test_hostile_job_id_is_neutralised_in_export_and_recovered_on_import():
    doc = mutate("jobs.1.id", '=HYPERLINK("x")')(BASE)
    scenario = scenario_from_dict(doc)
    plan = solve(scenario, "fifo")
    text = grid_to_csv(scenario, plan)
    assert "'=HYPERLINK" in text
    assert not any(line.split(",")[2].startswith("=") for line in text.splitlines()[1:])
    assert plan_from_grid_csv(scenario, text).same_grid(plan)
    assert write_csv([{"a": -1}], ["a"]) == "a\n-1\n"  # numbers stay numbers


@pytest.mark.parametrize(
    "text, words",
    [
        ("step,gpu\n0,0\n", ["grid.csv", "missing column", "job_id"]),
        ("step,gpu,job_id\n0,9,sft\n", ["grid.csv: row 2", "gpu", "0..7"]),
        ("step,gpu,job_id\n7,0,sft\n", ["grid.csv: row 2", "step", "0..3"]),
        ("step,gpu,job_id\n0,0,ghost\n", ["grid.csv: row 2", "job_id 'ghost'"]),
        ("step,gpu,job_id\nx,0,sft\n", ["grid.csv: row 2", "step", "number"]),
        ("step,gpu,job_id\n2.5,0,sft\n", ["grid.csv: row 2", "step '2.5' is not a step 0..3"]),
    ],
)
def test_bad_grid_imports(text, words):
    scenario = scenario_from_dict(BASE)
    with pytest.raises(ScenarioError) as raised:
        plan_from_grid_csv(scenario, text)
    for word in words:
        assert word in str(raised.value)


def test_optional_fields_round_trip_through_json_and_the_csv_pair():
    doc = copy.deepcopy(BASE)
    doc["policy"].update(rt_coverage_target=0.95, gpu_hour_cost=2.5)
    doc["jobs"][0]["team"] = "research"
    doc["jobs"][1].update(team="=evil", deadline_step=3)
    doc["jobs"][2]["team"] = "serving"
    scenario = scenario_from_json(json.dumps(doc))
    assert scenario.policy.rt_coverage_target == 0.95
    assert scenario.policy.gpu_hour_cost == 2.5
    assert [j.team for j in scenario.jobs] == ["research", "=evil", "serving"]
    assert scenario.jobs[1].deadline_step == 3
    assert scenario_from_json(scenario_to_json(scenario)) == scenario
    jobs_csv, demand_csv = scenario_to_tables(scenario)
    assert "'=evil" in jobs_csv  # neutralised for spreadsheets, recovered on import
    assert scenario_from_tables(jobs_csv, demand_csv, scenario) == scenario


# ---------------------------------------------------------------------------------------------
# read(): the format is detected from the files, and what is missing is said


def test_read_detects_json_and_the_csv_pair_in_any_order(tmp_path):
    scenario = scenario_from_dict(BASE)
    (tmp_path / "s.json").write_text(scenario_to_json(scenario))
    jobs_csv, demand_csv = scenario_to_tables(scenario)
    (tmp_path / "jobs.csv").write_text(jobs_csv)
    (tmp_path / "demand.csv").write_text(demand_csv)
    assert formats.read(tmp_path / "s.json") == scenario
    pair = [tmp_path / "demand.csv", tmp_path / "jobs.csv"]
    assert formats.read(pair, base=scenario) == scenario
    assert formats.read(list(reversed(pair)), format="csv-pair", base=scenario) == scenario


@pytest.mark.parametrize(
    "files, words",
    [
        (["jobs.csv"], ["jobs.csv", "jobs half", "demand.csv is needed"]),
        (["demand.csv"], ["demand.csv", "jobs.csv is needed"]),
        (["jobs.csv", "demand.csv"], ["carries only jobs and demand"]),  # no base given
        (["s.json", "t.json"], ["s.json, t.json", "give one scenario .json"]),
        (["notes.txt"], ["notes.txt", "not a format gpuplan reads"]),
        (["jobs.csv", "notes.txt"], ["not a format gpuplan reads"]),
    ],
)
def test_read_says_what_is_missing(tmp_path, files, words):
    scenario = scenario_from_dict(BASE)
    jobs_csv, demand_csv = scenario_to_tables(scenario)
    texts = {
        "jobs.csv": jobs_csv,
        "demand.csv": demand_csv,
        "s.json": scenario_to_json(scenario),
        "t.json": scenario_to_json(scenario),
        "notes.txt": "hello, world\n",
    }
    for name in files:
        (tmp_path / name).write_text(texts[name])
    with pytest.raises(ScenarioError) as raised:
        formats.read([tmp_path / n for n in files])
    for word in words:
        assert word in str(raised.value), f"{word!r} not in {raised.value}"


def test_a_registered_format_is_detected_and_gets_its_options(tmp_path):
    seen = {}

    def reader(text: str, name: str, *, days: int = 1) -> Scenario:
        seen.update(name=name, days=days)
        return scenario_from_dict(BASE)

    formats.register("toy", lambda name, head: head.startswith("TOY"), reader)
    try:
        (tmp_path / "trace.log").write_text("TOY trace\n")
        assert formats.read(tmp_path / "trace.log", days=3) == scenario_from_dict(BASE)
        assert seen == {"name": "trace.log", "days": 3}
        (tmp_path / "other.log").write_text("other\n")
        with pytest.raises(ScenarioError, match=r"or one of .*\btoy\)"):
            formats.read(tmp_path / "other.log")
    finally:
        del formats.FORMATS["toy"]


# ---------------------------------------------------------------------------------------------
# Bounded reads: at most limit + 1 bytes, whatever the file says its size is

_ENDLESS_READS = """
import os, resource, sys, threading
resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[1]), int(sys.argv[1])))
from core.formats import read, read_text
from core.model import ScenarioError

def refused(path):
    try:
        read_text(path)
    except ScenarioError as e:
        return str(e)
    return "accepted"

fifo = os.path.join(sys.argv[2], "endless.json")
os.mkfifo(fifo)

def write_forever():
    with open(fifo, "wb") as f:
        try:
            while True:
                f.write(b" " * 65536)
        except BrokenPipeError:
            pass

threading.Thread(target=write_forever, daemon=True).start()
print(refused("/dev/zero"))
print(refused(fifo))
try:
    read("/dev/zero")
except ScenarioError as e:
    print(e)
"""


@pytest.mark.slow
def test_dev_zero_and_endless_pipes_are_refused_without_reading_them_whole(tmp_path):
    import subprocess
    import sys

    # the child's address space: what the interpreter needs plus ~600 MB, far below "endless"
    cap = 600 * 2**20 + _address_space()
    result = subprocess.run(
        [sys.executable, "-c", _ENDLESS_READS, str(cap), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    assert len(lines) == 3, result.stdout
    assert "zero: file is larger than the upload limit of 20 MB" in lines[0]
    assert "endless.json" in lines[1] and "upload limit" in lines[1]
    assert "upload limit" in lines[2]


def _address_space() -> int:
    """This interpreter's current virtual size: a child starts from about the same."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 2**31


def test_uploads_are_read_at_most_limit_plus_one_bytes():
    class Endless:
        asked: list[int] = []

        def read(self, n: int = -1) -> bytes:
            self.asked.append(n)
            return b"x" * n

    with pytest.raises(ScenarioError, match="up.json: file is .* upload limit"):
        decode_upload(Endless(), "up.json", limit=1000)
    assert Endless.asked == [1001]


@pytest.mark.parametrize(
    "fixture, fmt",
    [
        ("sacct_quirks.txt", "slurm"),
        ("kubectl_pods.json", "kubectl"),  # JSON too, but not a scenario
        ("helios_cluster_log.csv", "helios"),
        ("acme_trace.csv", "acme"),
    ],
)
def test_read_detects_the_history_imports(fixture, fmt):
    path = Path(__file__).resolve().parent / "formats" / "fixtures" / fixture
    assert formats.detect([(path.name, path.read_text())]).name == fmt
    scenario = formats.read(path)
    assert scenario.jobs and scenario == formats.read(path, format=fmt)
