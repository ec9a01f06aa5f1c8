"""The Workload page's node table (core.cluster_table) and the jobs table's section 8 fields
(core.workload): table <-> cluster, and one message naming the group or job and the field."""

from __future__ import annotations

import pandas as pd
import pytest

from core import cluster_table, views, workload
from core.formats import load_scenario
from core.model import Cluster
from tests.paths import SCENARIOS_DIR


@pytest.fixture(scope="module")
def mixed():
    return load_scenario(SCENARIOS_DIR / "mixed-nodes.json")


def edited(table: pd.DataFrame, row: int, **cells) -> pd.DataFrame:
    out = table.astype(object)
    for column, value in cells.items():
        out.iloc[row, out.columns.get_loc(column)] = value
    return out


def test_the_node_table_round_trips_to_the_same_cluster(mixed):
    table = cluster_table.node_table(mixed.cluster)
    assert list(table["group"]) == ["h100x8", "a10x4"]
    assert list(table["gpu_type"]) == ["H100", "A10"]
    assert list(table["gpus_per_node"]) == [8, 4] and list(table["count"]) == [1, 2]
    assert list(table["speed"]) == [1.0, 0.5]
    result = cluster_table.scenario_from_node_table(mixed, table)
    assert result.ok and result.scenario is mixed  # nothing changed: the same scenario


def test_a_cluster_without_nodes_has_an_empty_table_and_one_group_to_start():
    plain = Cluster(gpus=8)
    assert cluster_table.node_table(plain).empty
    assert cluster_table.cluster_words(plain) == "8 GPUs"
    start = cluster_table.one_group(plain)
    assert start.gpus == 8 and cluster_table.cluster_words(start) == "1 x 8 GPU (node) = 8 GPUs"


def test_cluster_words_say_the_groups_and_the_total(mixed):
    assert (
        cluster_table.cluster_words(mixed.cluster)
        == "1 x 8 H100 (h100x8) + 2 x 4 A10 (a10x4) = 16 GPUs"
    )


def test_more_nodes_and_a_new_row_of_a_known_type(mixed):
    table = edited(cluster_table.node_table(mixed.cluster), 1, count=4)
    table.loc[len(table)] = ["a10b", "A10", 4, 1, None, None, None]  # the type's fields above
    result = cluster_table.scenario_from_node_table(mixed, table)
    assert result.ok, result.problem
    c = result.scenario.cluster
    assert c.gpus == 8 + 16 + 4
    assert [(n.group, n.count) for n in c.nodes] == [("h100x8", 1), ("a10x4", 4), ("a10b", 1)]
    assert c.gpu_type("A10").speed == 0.5 and c.gpu_type("A10").memory_gb == 24
    assert result.scenario.jobs == mixed.jobs


def test_a_new_type_with_its_speed_is_added(mixed):
    table = cluster_table.node_table(mixed.cluster).astype(object)
    table.loc[len(table)] = ["b200x8", "B200", 8, 1, 2.0, 192, 6.0]
    result = cluster_table.scenario_from_node_table(mixed, table)
    assert result.ok, result.problem
    assert result.scenario.cluster.gpu_type("B200").speed == 2.0


@pytest.mark.parametrize(
    ("row", "cells", "message"),
    [
        # a type the cluster does not know, without its speed: a typo, not a new type
        (
            1,
            {"gpu_type": "A1O", "speed": None},
            "group 'a10x4': type 'A1O' is not a GPU type of the cluster (known: H100, A10); "
            "give its speed to add it",
        ),
        (1, {"speed": 0}, "group 'a10x4': speed must be > 0, got 0"),
        (0, {"speed": -1}, "group 'h100x8': speed must be > 0, got -1"),
        # GPUs that do not add up to whole nodes
        (0, {"count": 1.5}, "group 'h100x8': nodes must be a whole number >= 0, got 1.5"),
        (
            1,
            {"gpus_per_node": 0},
            "group 'a10x4': GPUs per node must be a whole number >= 1, got 0",
        ),
        (1, {"gpus_per_node": None}, "group 'a10x4': GPUs per node is empty (a whole number >= 1)"),
        (1, {"memory_gb": -24}, "group 'a10x4': memory GB must be >= 0, got -24"),
        (1, {"cost_per_gpu_hour": -1}, "group 'a10x4': price per GPU-hour must be >= 0, got -1"),
        (1, {"group": "h100x8"}, "group 'h100x8': group names another row too (names must differ)"),
        (1, {"group": " "}, "row 2: group is empty (give the nodes a name)"),
        (1, {"gpu_type": None}, "group 'a10x4': type is empty (name the GPU model, e.g. H100)"),
        # jobs no allowed group can hold any more: the job and its field
        (
            0,
            {"memory_gb": 16},
            "job 'train': no GPU of the cluster is allowed by its min_gpu_memory_gb 40",
        ),
        (
            0,
            {"gpus_per_node": 2, "count": 1},
            "job 'train': gpus_min 4 fits no allowed group as one block: h100x8 (2 a node x 1)",
        ),
        (
            1,
            {"gpu_type": "H100", "speed": None, "memory_gb": None, "cost_per_gpu_hour": None},
            "job 'chat': gpu_types names 'A10', which is not a GPU type of the cluster "
            "(known: H100)",
        ),
    ],
)
def test_bad_node_table_cells_give_one_message_naming_group_and_field(mixed, row, cells, message):
    table = edited(cluster_table.node_table(mixed.cluster), row, **cells)
    result = cluster_table.scenario_from_node_table(mixed, table)
    assert not result.ok and result.problem == message


def test_two_rows_of_one_type_must_agree_on_its_speed(mixed):
    table = cluster_table.node_table(mixed.cluster).astype(object)
    table.loc[len(table)] = ["a10b", "A10", 4, 1, 0.6, 24, 0.8]
    result = cluster_table.scenario_from_node_table(mixed, table)
    assert result.problem == (
        "group 'a10b': speed 0.6 differs from 0.5 on group 'a10x4' of the same type A10 "
        "(a type has one speed)"
    )


def test_an_empty_table_or_no_nodes_at_all_is_refused(mixed):
    empty = cluster_table.node_table(mixed.cluster).iloc[0:0]
    assert "node table is empty" in cluster_table.scenario_from_node_table(mixed, empty).problem
    none = edited(edited(cluster_table.node_table(mixed.cluster), 0, count=0), 1, count=0)
    assert "holds no GPUs" in cluster_table.scenario_from_node_table(mixed, none).problem


def test_a_horizon_change_keeps_the_nodes(mixed):
    longer = views.with_cluster(mixed, gpus=1, horizon_steps=24, step_minutes=60, start=None)
    assert longer.cluster.nodes == mixed.cluster.nodes and longer.cluster.gpus == 16


# --- the jobs table's section 8 fields ---------------------------------------------------------


def test_the_jobs_table_has_the_section_8_fields_only_with_nodes(mixed):
    jobs, demand = workload.editor_tables(mixed)
    by_id = jobs.set_index("id")
    assert by_id.loc["chat", "gpu_types"] == "A10"
    assert by_id.loc["train", "min_gpu_memory_gb"] == 40
    assert not by_id.loc["q", "multi_node"] and by_id.loc["bi", "multi_node"]
    assert pd.isna(by_id.loc["chat", "multi_node"])  # batch only
    result = workload.scenario_from_editor(mixed, jobs, demand)
    assert result.ok and result.scenario == mixed  # speed {A10: 0.9} is kept from the file
    plain = load_scenario(SCENARIOS_DIR / "example.json")
    assert not set(workload.NODE_JOB_COLUMNS) & set(workload.editor_tables(plain)[0].columns)


def test_edited_section_8_job_fields_are_planned(mixed):
    jobs, demand = workload.editor_tables(mixed)
    jobs = edited(jobs, 2, gpu_types="H100, A10", min_gpu_memory_gb=20)
    jobs = edited(jobs, 1, multi_node=False)
    result = workload.scenario_from_editor(mixed, jobs, demand)
    assert result.ok, result.row_issues
    by_id = {j.id: j for j in result.scenario.jobs}
    bi, train = by_id["bi"], by_id["train"]
    assert bi.gpu_types == ("H100", "A10") and bi.min_gpu_memory_gb == 20
    assert train.multi_node is False


@pytest.mark.parametrize(
    ("row", "cells", "issue"),
    [
        # an unknown type
        (
            2,
            {"gpu_types": "H100, A100"},
            "gpu_types names 'A100', which is not a GPU type of the cluster (known: H100, A10)",
        ),
        # a job no allowed group can hold
        (
            1,
            {"gpu_types": "A10"},
            "no GPU of the cluster is allowed by its gpu_types A10 and min_gpu_memory_gb 40",
        ),
        (
            2,
            {"min_gpu_memory_gb": 100},
            "no GPU of the cluster is allowed by its min_gpu_memory_gb 100",
        ),
        (
            1,
            {"gpus_min": 16, "gpus_max": 16, "min_gpu_memory_gb": None, "multi_node": False},
            "gpus_min 16 fits no allowed group as one block: h100x8 (8 a node x 1), a10x4 "
            "(4 a node x 2); multi_node is false",
        ),
        (2, {"min_gpu_memory_gb": -1}, "min_gpu_memory_gb must be >= 0, got -1.0"),
    ],
)
def test_bad_job_fields_name_the_row_and_the_field(mixed, row, cells, issue):
    jobs, demand = workload.editor_tables(mixed)
    result = workload.scenario_from_editor(mixed, edited(jobs, row, **cells), demand)
    assert not result.ok
    assert result.row_issues == {row: [issue]}
    table = workload.issues_table(edited(jobs, row, **cells), result)
    assert list(table["job"]) == [mixed.jobs[row].id]


def test_multi_node_false_on_a_service_is_a_cell_it_ignores(mixed):
    jobs, demand = workload.editor_tables(mixed)
    result = workload.scenario_from_editor(mixed, edited(jobs, 0, multi_node=False), demand)
    assert result.ok and result.scenario == mixed
    assert result.ignored == {
        0: ["multi_node false does not apply to a realtime job (batch types only)"]
    }


def test_saved_comparison_tells_two_mixes_of_the_same_size_apart(mixed):
    table = cluster_table.node_table(mixed.cluster).astype(object)
    table.iloc[0, table.columns.get_loc("gpu_type")] = "H200"
    table.iloc[0, table.columns.get_loc("speed")] = 1.4
    table.iloc[0, table.columns.get_loc("memory_gb")] = 141
    other = cluster_table.scenario_from_node_table(mixed, table).scenario
    lines = views.job_differences(mixed, other)
    assert any("8 H100 (h100x8)" in line and "8 H200 (h100x8)" in line for line in lines), lines
