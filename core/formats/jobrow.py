"""One job as one table row: the codec shared by jobs.csv and the app's job editor.

A row maps column names to cells. Cells may be text (a CSV file) or typed values (the editor's
nullable columns); both are read by the same rules, so a row means the same in either place:

- a blank cell (empty text, None, NaN) is "not given"; text cells are stripped of surrounding
  spaces and of the ' that exports put in front of formula characters;
- `previous_gpus` is GPU numbers separated by spaces or commas; `[]` means "held no GPU before
  step 0" and blank means "unknown: step 0 is free" (README, Decisions);
- the three `running_*` cells go together: some given and others blank is an error, never a
  job silently not running;
- a column that does not apply to the row's type (gpu_hours on a realtime row, swap_cap on a
  batch one) must hold a valid value or nothing: the job ignores a valid one, and `read_row`
  says which; an invalid one (-5) is refused, not passed over.

Messages name the job and the field ("job 'a': priority must be a number"); callers add the
file and row.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from ..model import (
    BATCH_TYPES,
    JOB_TYPES,
    MAX_NUMBER,
    REALTIME_TYPE,
    Job,
    RealtimeJob,
    ScenarioError,
    clipped,
    shown,
)
from .cells import number_cell, text_cell
from .scenario_json import job_from_dict

JOBS_COLUMNS = (
    "id",
    "type",
    "priority",
    "arrival_step",
    "gpus_min",
    "gpus_max",
    "gpu_hours",
    "swap_cap",
)
JOBS_OPTIONAL_COLUMNS = (
    "running_gpu_start",
    "running_gpus",
    "running_remaining_steps",
    "previous_gpus",
    "gpu_hours_actual",
    "team",
    "deadline_step",
)
ROW_COLUMNS = (*JOBS_COLUMNS, *JOBS_OPTIONAL_COLUMNS)
TEXT_COLUMNS = ("id", "type", "previous_gpus", "team")
RUNNING_COLUMNS = ("running_gpu_start", "running_gpus", "running_remaining_steps")
INT_COLUMNS = (
    "arrival_step",
    "gpus_min",
    "gpus_max",
    "swap_cap",
    *RUNNING_COLUMNS,
    "deadline_step",
)
# The cells every row needs, by type (None: the type is not known yet, so the ones all types
# need); arrival_step (0) and the realtime swap_cap of the editor (0) have defaults.
REQUIRED_COLUMNS: dict[str | None, tuple[str, ...]] = {
    None: ("priority", "gpus_min", "gpus_max"),
    **{t: ("priority", "gpus_min", "gpus_max", "gpu_hours") for t in BATCH_TYPES},
    REALTIME_TYPE: ("priority", "gpus_min", "gpus_max", "swap_cap"),
}
_EXPECTED_CELL = {
    "id": "enter a job id, unique in the workload",
    "type": f"choose {', '.join(JOB_TYPES[:-1])} or {JOB_TYPES[-1]}",
    "priority": "enter a number > 0 (higher is more valuable)",
    "gpu_hours": "enter the work in GPU-hours, a number > 0",
    "swap_cap": "enter the GPUs it may gain plus release per step, a whole number >= 0",
}
# Columns one kind of job has and the other has not (README, Decisions: a valid value there is
# ignored and said to be, an invalid one refused).
BATCH_ONLY_COLUMNS = (
    "arrival_step",
    "gpu_hours",
    "gpu_hours_actual",
    "deadline_step",
    *RUNNING_COLUMNS,
)
REALTIME_ONLY_COLUMNS = ("swap_cap", "previous_gpus")
_APPLIES_TO = {
    **dict.fromkeys(BATCH_ONLY_COLUMNS, "batch types"),
    **dict.fromkeys(REALTIME_ONLY_COLUMNS, "realtime"),
}
# previous_gpus: blank = nothing known (step 0 is free); NO_GPUS = held no GPU before step 0.
NO_GPUS = "[]"


def job_to_row(job: Job) -> dict[str, Any]:
    """Every column of ROW_COLUMNS: the job's value, or None where the column does not apply."""
    row: dict[str, Any] = dict.fromkeys(ROW_COLUMNS)
    row.update(
        id=job.id,
        type=job.type,
        priority=job.priority,
        gpus_min=job.gpus_min,
        gpus_max=job.gpus_max,
        team=job.team,
    )
    if isinstance(job, RealtimeJob):
        row["swap_cap"] = job.swap_cap
        if job.previous_gpus is not None:
            row["previous_gpus"] = " ".join(str(g) for g in job.previous_gpus) or NO_GPUS
        return row
    row.update(
        arrival_step=job.arrival_step,
        gpu_hours=job.gpu_hours,
        gpu_hours_actual=job.gpu_hours_actual,
        deadline_step=job.deadline_step,
    )
    if job.running is not None:
        row.update(
            running_gpu_start=job.running.gpu_start,
            running_gpus=job.running.gpus,
            running_remaining_steps=job.running.remaining_steps,
        )
    return row


def job_from_row(
    row: Mapping[str, Any],
    *,
    demand: Sequence[float] | None = None,
    history: Sequence[float] | None = None,
    defaults: Mapping[str, Any] | None = None,
) -> Job:
    """A validated job from one row; a real-time job's demand and history come from the caller.

    `defaults` fill blank cells (the editor starts a new service with swap_cap 0).
    """
    return read_row(row, demand=demand, history=history, defaults=defaults)[0]


def read_row(
    row: Mapping[str, Any],
    *,
    demand: Sequence[float] | None = None,
    history: Sequence[float] | None = None,
    defaults: Mapping[str, Any] | None = None,
) -> tuple[Job, list[str]]:
    """(the job, the cells it ignores): as `job_from_row`, and for each valid value in a column
    that does not apply to the row's type, a line saying so ("gpu_hours 5 does not apply to a
    realtime job (batch types only)"). An invalid value there is refused, as anywhere."""
    job_id, job_type, cells = _read_cells(row, defaults)
    owner = f"job '{shown(job_id)}'"
    raw: dict[str, Any] = {"id": job_id, "type": job_type, "team": cells["team"]}
    raw.update((c, cells[c]) for c in ("priority", "gpus_min", "gpus_max"))
    if job_type == REALTIME_TYPE:
        pinned = [c for c in RUNNING_COLUMNS if cells[c] is not None]
        if pinned:
            raise ScenarioError(
                f"{owner}: {', '.join(pinned)} given, but a realtime job cannot be running "
                f"(clear the running cells, or keep a batch type)"
            )
        if demand is None:
            raise ScenarioError(f"{owner}: has no demand")
        raw.update(swap_cap=cells["swap_cap"], demand=list(demand))
        raw["previous_gpus"] = parse_previous_gpus(owner, cells["previous_gpus"])
        raw["history"] = list(history) if history is not None else None
    else:
        raw.update(
            arrival_step=cells["arrival_step"] if cells["arrival_step"] is not None else 0,
            gpu_hours=cells["gpu_hours"],
            gpu_hours_actual=cells["gpu_hours_actual"],
            deadline_step=cells["deadline_step"],
        )
        running = [cells[c] for c in RUNNING_COLUMNS]
        if any(v is not None for v in running):
            blank = [c for c, v in zip(RUNNING_COLUMNS, running, strict=True) if v is None]
            if blank:
                raise ScenarioError(
                    f"{owner}: {', '.join(blank)} {'is' if len(blank) == 1 else 'are'} empty; a "
                    f"running job needs {', '.join(RUNNING_COLUMNS)}"
                )
            keys = ("gpu_start", "gpus", "remaining_steps")
            raw["running"] = dict(zip(keys, running, strict=True))
    job = job_from_dict({k: v for k, v in raw.items() if v is not None}, 0)
    ignored = [
        f"{column} {_shown_value(cells[column])} does not apply to a {job_type} job "
        f"({_APPLIES_TO[column]} only)"
        for column in _not_applying(job_type)
        if cells[column] is not None
    ]
    return job, ignored


def _read_cells(
    row: Mapping[str, Any], defaults: Mapping[str, Any] | None
) -> tuple[str, str, dict[str, Any]]:
    """(id, type, the other cells as the model wants them), or every problem of the row at
    once: a half-typed row hears about each cell it still needs and what belongs there."""
    job_id, job_type = _text(row.get("id")), _text(row.get("type"))
    owner = f"job '{shown(job_id)}'" if job_id is not None else ""
    problems = []
    if job_id is None:
        problems.append(f"id is empty; {_EXPECTED_CELL['id']}")
    if job_type is None:
        problems.append(f"type is empty; {_EXPECTED_CELL['type']}")
    elif job_type not in JOB_TYPES:
        problems.append(f"type {job_type!r} is not one of {', '.join(JOB_TYPES)}")
    cells: dict[str, Any] = {}
    unreadable = set()
    for column in ROW_COLUMNS:
        if column not in ("id", "type"):
            try:
                cells[column] = cell_value(owner, column, row.get(column))
            except ScenarioError as e:
                problems.extend(e.problems)
                cells[column] = None
                unreadable.add(column)
    for column, value in (defaults or {}).items():
        if cells.get(column) is None and column not in unreadable:
            cells[column] = value
    for column in REQUIRED_COLUMNS.get(job_type, REQUIRED_COLUMNS[None]):
        if cells[column] is None and column not in unreadable:
            problems.append(f"{column} is empty; {_expected(column, job_type)}")
    if job_type in JOB_TYPES:
        problems.extend(_misplaced_problems(job_type, cells))
    if problems:
        # cell_value names the job when it can; without an id, the caller's row names it
        named = [
            p.removeprefix(": ") if not owner else p if p.startswith(owner) else f"{owner}: {p}"
            for p in problems
        ]
        raise ScenarioError("; ".join(named), named)
    assert job_id is not None and job_type is not None  # (both given: no problem above)
    return job_id, job_type, cells


def _expected(column: str, job_type: str | None) -> str:
    """What a required cell holds, said to whoever left it empty."""
    if column in ("gpus_min", "gpus_max"):
        if job_type == REALTIME_TYPE:
            return "enter a whole number of GPUs >= 0"
        if job_type in BATCH_TYPES:
            return "enter a power of two: 1, 2, 4, 8, ..."
        return "enter a whole number of GPUs (a power of two for a batch type)"
    return _EXPECTED_CELL[column]


def _not_applying(job_type: str) -> tuple[str, ...]:
    """The columns a job of this type has no field for (a realtime row's running cells are
    refused on their own: a dropped pin would be a job silently not running)."""
    if job_type == REALTIME_TYPE:
        return tuple(c for c in BATCH_ONLY_COLUMNS if c not in RUNNING_COLUMNS)
    return REALTIME_ONLY_COLUMNS


def _misplaced_problems(job_type: str, cells: Mapping[str, Any]) -> list[str]:
    """Invalid values in columns the type does not use: a typo or a wrong type, not to be
    passed over silently."""
    problems = []
    for column in _not_applying(job_type):
        value = cells[column]
        rule = None if value is None else _broken_rule(column, value)
        if rule is not None:
            problems.append(
                f"{column} {_shown_value(value)} does not apply to a {job_type} job "
                f"({_APPLIES_TO[column]} only) and is not valid either ({rule}); clear the cell"
            )
    return problems


def _broken_rule(column: str, value: Any) -> str | None:
    """The rule `value` breaks as a value of `column` wherever the column applies, or None.
    (Only the columns one type lacks are asked about; the running cells are not among them.)"""
    if column == "previous_gpus":
        try:
            values = parse_previous_gpus("", value) or []
        except ScenarioError:
            return "must be GPU numbers separated by spaces, or []"
    else:
        values = [value]
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int | float):
            return "must be a number"
        if isinstance(v, float) and not math.isfinite(v):
            return "must be finite"
        if abs(v) > MAX_NUMBER:  # (exact for ints of any size)
            return f"must be at most {MAX_NUMBER:g}"
        if column in ("gpu_hours", "gpu_hours_actual"):
            if v <= 0:
                return "must be > 0"
        elif v != int(v) or v < 0:
            return "must be a whole number >= 0"
    return None


def _shown_value(value: Any) -> str:
    """A cell's value in a message: text quoted, numbers as typed, none of it overlong."""
    if isinstance(value, str):
        text = repr(shown(value))
    else:
        text = f"{value:g}" if isinstance(value, float) else str(value)
    return clipped(text)


def parse_previous_gpus(owner: str, text: str | None) -> list[int] | None:
    """None for blank (unknown), [] for `[]` (held nothing), else the listed GPU numbers."""
    if text is None:
        return None
    if text.replace(" ", "") == NO_GPUS:
        return []
    gpus = []
    for part in text.strip("[]").replace(",", " ").split():
        gpus.append(number_cell(owner, "previous_gpus", part))
    if not gpus:
        raise ScenarioError(f"{owner}: previous_gpus {text!r} lists no GPU (write [] for none)")
    return gpus


def _text(value: Any) -> str | None:
    if value is None or _is_missing(value):
        return None
    return text_cell(str(value)) or None


def cell_value(owner: str, column: str, value: Any) -> Any:
    """A cell as the model wants it: None when blank, text for text columns, else a number."""
    if value is None or _is_missing(value):
        return None
    if column in TEXT_COLUMNS:
        return _text(value)
    if isinstance(value, str):
        return number_cell(owner, column, value, required=False)
    if hasattr(value, "item") and not isinstance(value, int | float):
        value = value.item()  # numpy scalars as Python numbers
    return value


def _is_missing(value: Any) -> bool:
    if isinstance(value, float):
        return math.isnan(value)
    pandas = sys.modules.get("pandas")  # only pandas' own tables can hold its NA
    return pandas is not None and (value is pandas.NA or value is pandas.NaT)
