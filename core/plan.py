"""The plan (a GPU x step grid), the single legality checker and the metrics of SPEC section 1.

Every planner returns a `Plan`; `check` is the one definition of a legal plan, used by the tests,
the command line, grid imports and the app alike; `metrics` computes every SPEC metric from the
grid alone, so all planners are measured on the same definitions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypedDict

import numpy as np

from .model import BatchJob, RealtimeJob, Scenario, is_power_of_two

IDLE = -1

CONSTRAINTS = {
    1: "one job per GPU per step",
    2: "demand range",
    3: "power-of-two blocks",
    4: "swap cap",
    5: "no preemption",
}


@dataclass(frozen=True)
class Conflict:
    """A cell claimed by a second job in an imported grid (the grid itself keeps the first)."""

    gpu: int
    step: int
    job_id: str
    holder_id: str


@dataclass(eq=False)
class Plan:
    """The grid (GPU x step -> job index into `scenario.jobs`, -1 idle) and how it was made.

    `stats` carries what the planner knows beyond the grid: runtime_ms, and for `full` the
    solver's status, bound and gap. `conflicts` only ever comes from imported grids.
    """

    grid: np.ndarray
    planner: str = "manual"
    stats: dict[str, Any] = field(default_factory=dict)
    conflicts: tuple[Conflict, ...] = ()

    def __post_init__(self) -> None:
        self.grid = np.asarray(self.grid, dtype=np.int32)
        if self.grid.ndim != 2:
            raise ValueError(f"a plan's grid must be 2-D (GPU x step), got {self.grid.shape}")

    @classmethod
    def empty(cls, scenario: Scenario, planner: str = "manual") -> Plan:
        c = scenario.cluster
        return cls(np.full((c.gpus, c.horizon_steps), IDLE, dtype=np.int32), planner)

    def same_grid(self, other: Plan) -> bool:
        return self.grid.shape == other.grid.shape and bool(np.array_equal(self.grid, other.grid))


@dataclass(frozen=True)
class Placement:
    """Where and when a batch job runs within the horizon (end_step exclusive, cut at T)."""

    job_id: str
    gpu_start: int
    gpus: int
    start_step: int
    end_step: int


@dataclass(frozen=True)
class Violation:
    constraint: int
    job_id: str
    gpu: int | None
    step: int | None
    message: str

    def __str__(self) -> str:
        where = []
        if self.gpu is not None:
            where.append(f"GPU {self.gpu}")
        if self.step is not None:
            where.append(f"step {self.step}")
        at = f" at {', '.join(where)}" if where else ""
        return (
            f"constraint {self.constraint} ({CONSTRAINTS[self.constraint]}): "
            f"job '{self.job_id}'{at}: {self.message}"
        )


def pin_running(scenario: Scenario, grid: np.ndarray) -> None:
    """Write every running batch job's inherited block into the grid (steps 0..remaining-1)."""
    for i, job in enumerate(scenario.jobs):
        if isinstance(job, BatchJob) and job.running is not None:
            r = job.running
            grid[r.gpu_start : r.gpu_start + r.gpus, : r.remaining_steps] = i


def holdings(scenario: Scenario, plan: Plan) -> np.ndarray:
    """GPUs each job holds at each step: an array (jobs x steps)."""
    n_jobs = len(scenario.jobs)
    grid = plan.grid
    steps = grid.shape[1]
    codes = (grid.astype(np.int64) + 1) + (n_jobs + 1) * np.arange(steps, dtype=np.int64)[None, :]
    counts = np.bincount(codes.ravel(), minlength=(n_jobs + 1) * steps)
    return counts.reshape(steps, n_jobs + 1).T[1:]


def _job_cells(grid: np.ndarray, n_jobs: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """For each job, the (gpus, steps) of the cells it holds, sorted by step then GPU."""
    steps_major = grid.T  # (T, G): ravel order is step-major, GPU-minor
    flat = steps_major.ravel()
    order = np.argsort(flat, kind="stable")
    sorted_jobs = flat[order]
    bounds = np.searchsorted(sorted_jobs, np.arange(n_jobs + 1))
    G = grid.shape[0]
    cells = []
    for j in range(n_jobs):
        idx = order[bounds[j] : bounds[j + 1]]
        cells.append((idx % G, idx // G))
    return cells


def batch_placements(scenario: Scenario, plan: Plan) -> dict[str, Placement]:
    """Each placed batch job's block, read off the grid at its first held step."""
    cells = _job_cells(plan.grid, len(scenario.jobs))
    out = {}
    for j, job in enumerate(scenario.jobs):
        if not isinstance(job, BatchJob):
            continue
        gpus, steps = cells[j]
        if len(steps) == 0:
            continue
        first = steps[0]
        at_first = gpus[steps == first]
        out[job.id] = Placement(
            job.id, int(at_first.min()), int(len(at_first)), int(first), int(steps.max()) + 1
        )
    return out


def check(scenario: Scenario, plan: Plan) -> list[Violation]:
    """Every violation of the five constraints of SPEC section 1, with job, GPU and step."""
    G, T = scenario.cluster.gpus, scenario.cluster.horizon_steps
    grid = plan.grid
    if grid.shape != (G, T):
        return [
            Violation(
                1,
                "*",
                None,
                None,
                f"grid is {grid.shape[0]} GPUs x {grid.shape[1]} steps, the scenario has {G} x {T}",
            )
        ]
    n_jobs = len(scenario.jobs)
    bad = (grid < IDLE) | (grid >= n_jobs)
    if bad.any():
        g, t = (int(x[0]) for x in np.nonzero(bad))
        return [Violation(1, "?", g, t, f"cell holds unknown job number {int(grid[g, t])}")]

    violations = [
        Violation(1, c.job_id, c.gpu, c.step, f"cell is already held by job '{c.holder_id}'")
        for c in plan.conflicts
    ]
    cells = _job_cells(grid, n_jobs)
    for j, job in enumerate(scenario.jobs):
        if isinstance(job, RealtimeJob):
            violations.extend(_check_realtime(scenario, grid, j, job))
        else:
            violations.extend(_check_batch(scenario, job, *cells[j]))
    return violations


def _check_realtime(scenario: Scenario, grid: np.ndarray, j: int, job: RealtimeJob):
    held = grid == j  # (G, T)
    counts = held.sum(axis=0)
    for t in np.nonzero((counts < job.gpus_min) | (counts > job.gpus_max))[0]:
        yield Violation(
            2,
            job.id,
            None,
            int(t),
            f"holds {int(counts[t])} GPUs, allowed {job.gpus_min}..{job.gpus_max}",
        )
    if job.previous_gpus is not None:
        before = np.zeros((grid.shape[0], 1), dtype=bool)
        before[list(job.previous_gpus), 0] = True
        first_step = 0
    else:
        before = held[:, :1]
        first_step = 1
    previous = np.concatenate([before, held[:, :-1]], axis=1)[:, first_step:]
    changed = previous != held[:, first_step:]
    swaps = changed.sum(axis=0)
    for k in np.nonzero(swaps > job.swap_cap)[0]:
        t = int(k) + first_step
        g = int(np.nonzero(changed[:, k])[0][0])
        yield Violation(
            4, job.id, g, t, f"gains plus releases {int(swaps[k])} GPUs, swap_cap is {job.swap_cap}"
        )


def _check_batch(scenario: Scenario, job: BatchJob, gpus: np.ndarray, steps: np.ndarray):
    if len(steps) == 0:
        if job.running is not None:
            yield Violation(
                5,
                job.id,
                job.running.gpu_start,
                0,
                "is running but holds no GPU: running work must be held as given",
            )
        return
    T = scenario.cluster.horizon_steps
    held_steps, first_cell, per_step = np.unique(steps, return_index=True, return_counts=True)
    lows = np.minimum.reduceat(gpus, first_cell)
    highs = np.maximum.reduceat(gpus, first_cell)
    start = int(held_steps[0])
    b, n = int(lows[0]), int(per_step[0])

    # 3: at each step the job's GPUs form one contiguous, aligned, power-of-two block.
    for t, low, high, count in zip(held_steps, lows, highs, per_step, strict=True):
        if high - low + 1 != count:
            yield Violation(
                3,
                job.id,
                int(low),
                int(t),
                f"GPUs {int(low)}..{int(high)} are not one contiguous block",
            )
            return
        if not is_power_of_two(int(count)) or low % count:
            yield Violation(
                3,
                job.id,
                int(low),
                int(t),
                f"block [{int(low)}, {int(high) + 1}) of {int(count)} GPUs is not a "
                f"power-of-two block aligned to its size",
            )
            return
    # 2: the block size is allowed (running work: exactly the inherited block).
    if job.running is not None:
        r = job.running
        if (b, n) != (r.gpu_start, r.gpus):
            yield Violation(
                2,
                job.id,
                b,
                start,
                f"holds [{b}, {b + n}), its running block is "
                f"[{r.gpu_start}, {r.gpu_start + r.gpus})",
            )
            return
    elif not job.gpus_min <= n <= job.gpus_max:
        yield Violation(
            2, job.id, b, start, f"block of {n} GPUs, allowed {job.gpus_min}..{job.gpus_max}"
        )
    # 5: one block, held without gaps from a start no earlier than arrival, for its duration.
    changed = np.nonzero((lows != b) | (per_step != n))[0]
    if len(changed):
        t = int(held_steps[changed[0]])
        yield Violation(
            5, job.id, int(lows[changed[0]]), t, f"moves or resizes from [{b}, {b + n}) at step {t}"
        )
        return
    gaps = np.nonzero(np.diff(held_steps) != 1)[0]
    if len(gaps):
        t = int(held_steps[gaps[0]]) + 1
        yield Violation(5, job.id, b, t, f"is interrupted at step {t} and resumes later")
        return
    if job.running is not None:
        if start != 0:
            yield Violation(5, job.id, b, start, "is running but does not hold its block at 0")
            return
    elif start < job.arrival_step:
        yield Violation(
            5,
            job.id,
            b,
            start,
            f"starts at step {start}, before its arrival_step {job.arrival_step}",
        )
    expected = min(scenario.duration(job, n), T - start)
    held = int(held_steps[-1]) - start + 1
    if held != expected:
        yield Violation(
            5,
            job.id,
            b,
            start + min(held, expected),
            f"holds its block for {held} steps, its work needs {expected} "
            f"(from step {start}, cut at the horizon)",
        )


class Metrics(TypedDict):
    """The metrics of SPEC section 1, the same definitions for every planner (metrics.json keys).

    What a planner reports beyond these (a solver's status, bound and gap, its timings) stays
    in `Plan.stats`; `report` puts the two side by side for the exports.
    """

    planner: str
    utilization: float
    allocated_fraction: float
    value: float
    objective: float
    completed_jobs: int
    started_jobs: int
    batch_jobs: int
    rt_shortfall_gpu_hours: float
    rt_coverage: float
    # rt_coverage >= policy.rt_coverage_target (within 1e-9); None when the policy sets none
    slo_met: bool | None
    runtime_ms: float


def metrics(scenario: Scenario, plan: Plan) -> Metrics:
    """Every metric of SPEC section 1, computed from the grid alone."""
    c, policy = scenario.cluster, scenario.policy
    G, T = c.gpus, c.horizon_steps
    held = holdings(scenario, plan).astype(float)
    is_batch = np.array([isinstance(j, BatchJob) for j in scenario.jobs], dtype=bool)
    priority = np.array([j.priority for j in scenario.jobs], dtype=float)
    discount = policy.decay ** np.arange(T, dtype=float)

    batch_held = held[is_batch]
    batch_cells = float(batch_held.sum())
    reward = float(priority[is_batch] @ (batch_held @ discount)) if len(batch_held) else 0.0

    rt = scenario.realtime_jobs
    if rt:
        rt_held = held[~is_batch]
        demand = np.array([j.demand for j in rt], dtype=float)
        served = np.minimum(rt_held, demand)
        shortfall = np.maximum(0.0, demand - rt_held)
        rt_allocated = float(rt_held.sum())
        penalty = float(priority[~is_batch] @ shortfall.sum(axis=1))
        demanded, served_total = float(demand.sum()), float(served.sum())
        shortfall_total = float(shortfall.sum())
    else:
        rt_allocated = penalty = demanded = served_total = shortfall_total = 0.0

    placements = batch_placements(scenario, plan)
    by_id = {j.id: j for j in scenario.batch_jobs}
    completed = sum(
        1
        for p in placements.values()
        if p.start_step + scenario.duration(by_id[p.job_id], p.gpus) <= T
    )
    cells = G * T
    coverage = served_total / demanded if demanded > 0 else 1.0
    target = policy.rt_coverage_target
    return {
        "planner": plan.planner,
        "utilization": (batch_cells + served_total) / cells,
        "allocated_fraction": (batch_cells + rt_allocated) / cells,
        "value": float(priority[is_batch] @ batch_held.sum(axis=1)) * c.step_hours
        if len(batch_held)
        else 0.0,
        "objective": policy.reward_weight * (reward - policy.penalty_weight * penalty),
        "completed_jobs": completed,
        "started_jobs": len(placements),
        "batch_jobs": len(by_id),
        "rt_shortfall_gpu_hours": shortfall_total * c.step_hours,
        "rt_coverage": coverage,
        "slo_met": None if target is None else bool(coverage >= target - 1e-9),
        "runtime_ms": float(plan.stats.get("runtime_ms", 0.0)),
    }


def report(scenario: Scenario, plan: Plan) -> dict[str, Any]:
    """metrics.json's content: the metrics, then what the planner reported beyond them."""
    out: dict[str, Any] = dict(metrics(scenario, plan))
    for key, value in plan.stats.items():
        out.setdefault(key, value)
    return out


def objective(scenario: Scenario, plan: Plan) -> float:
    return metrics(scenario, plan)["objective"]
