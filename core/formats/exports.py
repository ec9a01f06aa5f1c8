"""The plan exports of SPEC section 3: grid.csv, assignments.csv, realtime.csv, metrics.json."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..model import Scenario
from ..plan import Plan, batch_placements, holdings, report
from .cells import plain_number, write_csv
from .grid import grid_to_csv


def assignments_to_csv(scenario: Scenario, plan: Plan) -> str:
    placements = batch_placements(scenario, plan)
    rows = []
    for job in scenario.batch_jobs:
        p = placements.get(job.id)
        rows.append(
            {
                "job_id": job.id,
                "type": job.type,
                "priority": plain_number(job.priority),
                "gpu_start": p.gpu_start if p else "",
                "gpus": p.gpus if p else "",
                "start_step": p.start_step if p else "",
                "end_step": p.end_step if p else "",
            }
        )
    return write_csv(
        rows, ("job_id", "type", "priority", "gpu_start", "gpus", "start_step", "end_step")
    )


def realtime_to_csv(scenario: Scenario, plan: Plan) -> str:
    held = holdings(scenario, plan)
    rows = []
    for job in scenario.realtime_jobs:
        allocated = held[scenario.job_index(job.id)]
        for t, demand in enumerate(job.demand):
            n = int(allocated[t])
            rows.append(
                {
                    "step": t,
                    "job_id": job.id,
                    "demand": plain_number(demand),
                    "allocated": n,
                    "shortfall": plain_number(round(max(0.0, demand - n), 9)),
                }
            )
    return write_csv(rows, ("step", "job_id", "demand", "allocated", "shortfall"))


def metrics_to_json(values: Mapping[str, Any]) -> str:
    return json.dumps(json_safe(dict(values)), indent=2) + "\n"


def json_safe(value: Any) -> Any:
    """Plain JSON values: numpy scalars as Python numbers, inf and NaN as null."""
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def plan_exports(scenario: Scenario, plan: Plan) -> dict[str, str]:
    """The four exports of SPEC section 3, by file name."""
    return {
        "grid.csv": grid_to_csv(scenario, plan),
        "assignments.csv": assignments_to_csv(scenario, plan),
        "realtime.csv": realtime_to_csv(scenario, plan),
        "metrics.json": metrics_to_json(report(scenario, plan)),
    }


def write_exports(scenario: Scenario, plan: Plan, folder: str | Path) -> list[Path]:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in plan_exports(scenario, plan).items():
        path = folder / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
