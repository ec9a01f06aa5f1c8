"""grid.csv (SPEC section 3): one row per held cell, `step,gpu,job_id`, then time and type.

Written by the plan exports and read back by `gpuplan check` and imports; a cell claimed twice
is kept as a conflict for `check` to report.
"""

from __future__ import annotations

from datetime import timedelta

import numpy as np

from ..model import Scenario, ScenarioError
from ..nodes import groups_of
from ..plan import IDLE, Conflict, Plan
from .cells import number_cell, plain_number, read_csv, text_cell, write_csv

GRID_COLUMNS = ("step", "gpu", "job_id")


def step_times(scenario: Scenario) -> list[str]:
    """Each step's start as ISO minutes ('' for every step when the cluster has no start)."""
    c = scenario.cluster
    if c.start is None:
        return [""] * c.horizon_steps
    return [
        (c.start + timedelta(minutes=c.step_minutes * t)).isoformat(timespec="minutes")
        for t in range(c.horizon_steps)
    ]


def grid_to_csv(scenario: Scenario, plan: Plan) -> str:
    """grid.csv: one row per held cell (step, gpu, job_id), then time and type."""
    times = step_times(scenario)
    gpus, steps = np.nonzero(plan.grid.T != IDLE)[::-1]
    order = np.lexsort((gpus, steps))
    ids = [job.id for job in scenario.jobs]
    types = [job.type for job in scenario.jobs]
    rows = [
        {
            "step": int(steps[k]),
            "gpu": int(gpus[k]),
            "job_id": ids[plan.grid[gpus[k], steps[k]]],
            "time": times[steps[k]],
            "type": types[plan.grid[gpus[k], steps[k]]],
        }
        for k in order
    ]
    columns: tuple[str, ...] = (*GRID_COLUMNS, "time", "type")
    if scenario.cluster.nodes:  # section 8: which node and GPU type each cell is on
        node, gpu_type = gpu_nodes(scenario)
        for row in rows:
            row["node"], row["gpu_type"] = node[row["gpu"]], gpu_type[row["gpu"]]
        columns += ("node", "gpu_type")
    return write_csv(rows, columns)


def gpu_nodes(scenario: Scenario) -> tuple[list[str], list[str]]:
    """Per GPU, its node (`<group>-<index>`) and its GPU type."""
    node, gpu_type = [], []
    for group in groups_of(scenario.cluster):
        for g in range(group.offset, group.end):
            node.append(group.node_name(group.node_of(g)))
            gpu_type.append(group.gpu_type.name)
    return node, gpu_type


def plan_from_grid_csv(scenario: Scenario, text: str, name: str = "grid.csv") -> Plan:
    """A plan from grid.csv rows; a cell claimed twice is kept as a conflict for `check`."""
    G, T = scenario.cluster.gpus, scenario.cluster.horizon_steps
    # counted before the rows are parsed (1.5 million take seconds); blank lines are no rows
    lines = sum(1 for line in text.splitlines() if line.strip()) - 1
    if lines > G * T * 2:
        raise ScenarioError(f"{name}: {lines:,} rows for a grid of {G * T:,} cells")
    _, rows = read_csv(text, name, GRID_COLUMNS, ("time", "type", "node", "gpu_type"))
    plan = Plan.empty(scenario, planner="imported")
    conflicts = []
    for line, row in rows:
        where = f"{name}: row {line}"
        # (integral floats are whole numbers, as a spreadsheet writes them: 2.0 is step 2)
        step = plain_number(number_cell(where, "step", row["step"]))
        gpu = plain_number(number_cell(where, "gpu", row["gpu"]))
        job_id = text_cell(row["job_id"])
        if not isinstance(step, int) or not 0 <= step < T:
            raise ScenarioError(f"{where}: step {row['step']!r} is not a step 0..{T - 1}")
        if not isinstance(gpu, int) or not 0 <= gpu < G:
            raise ScenarioError(f"{where}: gpu {row['gpu']!r} is not a GPU 0..{G - 1}")
        if not scenario.has_job(job_id):
            raise ScenarioError(f"{where}: job_id '{job_id}' is not a job of the scenario")
        j = scenario.job_index(job_id)
        held = plan.grid[gpu, step]
        if held == IDLE:
            plan.grid[gpu, step] = j
        elif held != j:
            conflicts.append(Conflict(gpu, step, job_id, scenario.jobs[held].id))
    plan.conflicts = tuple(conflicts)
    return plan
