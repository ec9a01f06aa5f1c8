"""`check` itself under test: one edited cell of a legal plan, and the constraint it must name.

A legal plan comes from a fast planner on a random scenario; one cell is then removed, moved to
an idle GPU of the same step, or claimed a second time in an imported grid. What `check` must
report is worked out from the five constraints (the reasoning is in each `expected_*` helper),
never by asking `check`: the exact set of constraint numbers, all on the edited job.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from core.formats import grid_to_csv, plan_from_grid_csv
from core.model import BatchJob, RealtimeJob, Scenario
from core.plan import IDLE, Plan, check
from core.planners import solve
from tests.budget import examples
from tests.strategies import scenarios

FAST_PLANNERS = ("fifo", "backfill", "allocator")
SETTINGS = settings(
    max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@st.composite
def legal_plans(draw) -> tuple[Scenario, Plan]:
    scenario = draw(scenarios())
    plan = solve(scenario, draw(st.sampled_from(FAST_PLANNERS)))
    assert check(scenario, plan) == []  # the planners' own property; the premise here
    return scenario, plan


@dataclass(frozen=True)
class Block:
    """A legal batch job's block: GPUs [low, low + gpus) held over steps [start, end)."""

    low: int
    gpus: int
    start: int
    end: int


def block_of(plan: Plan, j: int) -> Block:
    gpus, steps = np.nonzero(plan.grid == j)
    start = int(steps.min())
    return Block(int(gpus.min()), int((steps == start).sum()), start, int(steps.max()) + 1)


def held_cells(plan: Plan, kind: type, scenario: Scenario) -> list[tuple[int, int, int]]:
    """(job index, gpu, step) of every cell held by a job of `kind`."""
    return [
        (int(plan.grid[g, t]), int(g), int(t))
        for g, t in zip(*np.nonzero(plan.grid != IDLE), strict=True)
        if isinstance(scenario.jobs[plan.grid[g, t]], kind)
    ]


def constraints_on(scenario: Scenario, plan: Plan, job_id: str) -> set[int]:
    violations = check(scenario, plan)
    assert {v.job_id for v in violations} <= {job_id}, [str(v) for v in violations]
    return {v.constraint for v in violations}


def expected_after_batch_removal(scenario: Scenario, job: BatchJob, b: Block, t: int) -> set[int]:
    """What breaks when a batch job loses one cell at step t.

    Blocks of 4 or more keep n - 1 cells at t, never a power of two: 3. A pair keeps one GPU,
    still a block: at a later step the block resizes (5); at its first step the job now starts
    on 1 GPU, which running work may not (2, and check stops there), gpus_min 2 forbids (2), and
    which needs duration(job, 1) steps where it holds 1 (5 unless those agree). A single GPU
    loses a step: its only step (not started, legal; running work must be held: 5), its last
    step or a middle one (too short, or a gap: 5), or its first step, which is legal exactly
    when the job ran to the horizon (it now starts one step later and is cut one step earlier),
    except for running work, which must hold its block from step 0 (5).
    """
    T = scenario.cluster.horizon_steps
    if b.gpus >= 4:
        return {3}
    if b.gpus == 2:
        if t > b.start:
            return {5}
        if job.running is not None:
            return {2}
        broken = {2} if job.gpus_min > 1 else set()
        alone = min(scenario.duration(job, 1), T - b.start)
        if b.end - b.start >= 2 or alone != 1:
            broken.add(5)
        return broken
    if b.end - b.start == 1:
        return {5} if job.running is not None else set()
    if t == b.start and job.running is None and b.end == T:
        return set()
    return {5}


def expected_after_batch_move(job: BatchJob, b: Block, t: int) -> set[int]:
    """What breaks when one cell of a batch job moves to an idle GPU of the same step.

    Two aligned blocks of the same size are equal or disjoint, so n - 1 GPUs of one block plus a
    GPU outside it are never a block: 3 for n >= 2. A single GPU moves: at its only step it is
    just placed elsewhere (legal), unless running work leaves its inherited GPU at step 0 (2);
    otherwise the block moves while held (5).
    """
    if b.gpus >= 2:
        return {3}
    if job.running is not None and t == b.start:
        return {2}
    return {5} if b.end - b.start >= 2 else set()


def expected_realtime(job: RealtimeJob, grid: np.ndarray, j: int) -> set[int]:
    """Constraints 2 and 4 restated over sets: held counts in range, swaps per step in the cap."""
    held = [set(np.nonzero(grid[:, t] == j)[0].tolist()) for t in range(grid.shape[1])]
    broken = set()
    if any(not job.gpus_min <= len(h) <= job.gpus_max for h in held):
        broken.add(2)
    chain = ([set(job.previous_gpus)] if job.previous_gpus is not None else []) + held
    if any(
        len(before ^ after) > job.swap_cap for before, after in zip(chain, chain[1:], strict=False)
    ):
        broken.add(4)
    return broken


@SETTINGS
@given(legal_plans(), st.data())
def test_removing_one_batch_cell(case, data):
    scenario, plan = case
    cells = held_cells(plan, BatchJob, scenario)
    assume(cells)
    j, g, t = data.draw(st.sampled_from(cells))
    job, block = scenario.jobs[j], block_of(plan, j)
    expected = expected_after_batch_removal(scenario, job, block, t)
    event(f"n={block.gpus} running={job.running is not None} expected={sorted(expected)}")

    edited = Plan(plan.grid.copy())
    edited.grid[g, t] = IDLE
    assert constraints_on(scenario, edited, job.id) == expected


@pytest.mark.slow
@SETTINGS
@given(legal_plans(), st.data())
def test_moving_one_batch_cell_to_an_idle_gpu_of_the_same_step(case, data):
    scenario, plan = case
    moves = [
        (j, g, t, int(to))
        for j, g, t in held_cells(plan, BatchJob, scenario)
        for to in np.nonzero(plan.grid[:, t] == IDLE)[0]
    ]
    assume(moves)
    j, g, t, to = data.draw(st.sampled_from(moves))
    job, block = scenario.jobs[j], block_of(plan, j)
    expected = expected_after_batch_move(job, block, t)
    event(f"n={block.gpus} running={job.running is not None} expected={sorted(expected)}")

    edited = Plan(plan.grid.copy())
    edited.grid[g, t], edited.grid[to, t] = IDLE, j
    violations = check(scenario, edited)
    assert constraints_on(scenario, edited, job.id) == expected
    if expected == {3}:
        assert [(v.gpu is not None, v.step) for v in violations] == [(True, t)]


@pytest.mark.slow
@SETTINGS
@given(legal_plans(), st.data())
def test_removing_one_realtime_cell(case, data):
    """Below gpus_min it breaks 2; the release (or the gain it turns into) may exceed the cap."""
    scenario, plan = case
    cells = held_cells(plan, RealtimeJob, scenario)
    assume(cells)
    j, g, t = data.draw(st.sampled_from(cells))
    job = scenario.jobs[j]
    edited = Plan(plan.grid.copy())
    edited.grid[g, t] = IDLE
    expected = expected_realtime(job, edited.grid, j)
    below_min = int((plan.grid[:, t] == j).sum()) - 1 < job.gpus_min
    assert (2 in expected) == below_min  # the edit changes one count, at step t
    event(f"expected={sorted(expected)}")

    assert constraints_on(scenario, edited, job.id) == expected
    for v in check(scenario, edited):
        if v.constraint == 2:
            assert v.step == t


@pytest.mark.slow
@SETTINGS
@given(legal_plans(), st.data())
def test_moving_one_realtime_cell_to_an_idle_gpu_of_the_same_step(case, data):
    """The count stays, so only the swap cap can break: legal when both moves fit within it."""
    scenario, plan = case
    moves = [
        (j, g, t, int(to))
        for j, g, t in held_cells(plan, RealtimeJob, scenario)
        for to in np.nonzero(plan.grid[:, t] == IDLE)[0]
    ]
    assume(moves)
    j, g, t, to = data.draw(st.sampled_from(moves))
    job = scenario.jobs[j]
    edited = Plan(plan.grid.copy())
    edited.grid[g, t], edited.grid[to, t] = IDLE, j
    expected = expected_realtime(job, edited.grid, j)
    assert 2 not in expected
    event(f"expected={sorted(expected)}")

    assert constraints_on(scenario, edited, job.id) == expected


def _with_extra_row(scenario: Scenario, plan: Plan, gpu: int, step: int, job_id: str) -> str:
    """grid.csv of the plan with one more row: (step, gpu) claimed by `job_id` after its holder."""
    rows = list(csv.reader(io.StringIO(grid_to_csv(scenario, plan))))
    header = rows[0]
    at = {name: k for k, name in enumerate(header)}
    copy = next(r for r in rows[1:] if (r[at["step"]], r[at["gpu"]]) == (str(step), str(gpu)))
    extra = list(copy)
    extra[at["job_id"]] = job_id
    extra[at["type"]] = scenario.jobs[scenario.job_index(job_id)].type
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows([*rows, extra])
    return out.getvalue()


@SETTINGS
@given(legal_plans(), st.data())
def test_claiming_a_held_cell_for_another_job_is_constraint_1(case, data):
    """The grid keeps the first holder, so the second claim is the one violation."""
    scenario, plan = case
    cells = held_cells(plan, object, scenario)
    assume(cells and len(scenario.jobs) >= 2)
    holder, g, t = data.draw(st.sampled_from(cells))
    other = data.draw(st.sampled_from([k for k in range(len(scenario.jobs)) if k != holder]))
    claimant, holder_id = scenario.jobs[other].id, scenario.jobs[holder].id

    imported = plan_from_grid_csv(scenario, _with_extra_row(scenario, plan, g, t, claimant))
    assert imported.same_grid(plan)
    violations = check(scenario, imported)
    assert [(v.constraint, v.job_id, v.gpu, v.step) for v in violations] == [(1, claimant, g, t)]
    assert f"'{holder_id}'" in violations[0].message


@SETTINGS
@given(legal_plans(), st.data())
def test_repeating_a_row_of_the_same_job_changes_nothing(case, data):
    """A cell its own job claims twice is still one cell: legal by construction."""
    scenario, plan = case
    cells = held_cells(plan, object, scenario)
    assume(cells)
    j, g, t = data.draw(st.sampled_from(cells))
    imported = plan_from_grid_csv(
        scenario, _with_extra_row(scenario, plan, g, t, scenario.jobs[j].id)
    )
    assert imported.same_grid(plan) and imported.conflicts == ()
    assert check(scenario, imported) == []
