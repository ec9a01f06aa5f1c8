"""The plan (a GPU x step grid), the single legality checker and the metrics of SPEC section 1.

Every planner returns a `Plan`; `check` is the one definition of a legal plan, used by the tests,
the command line, grid imports and the app alike; `metrics` computes every SPEC metric from the
grid alone, so all planners are measured on the same definitions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple, NotRequired, TypedDict

import numpy as np

from .model import BatchJob, Policy, RealtimeJob, Scenario, is_power_of_two
from .nodes import (
    allowed_gpus,
    block_problem,
    group_of_gpu,
    group_starts,
    groups_of,
    type_allowed,
    type_names,
)

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
    if scenario.cluster.nodes:
        allowed = allowed_gpus(scenario.cluster, job)
        rows = np.array([allowed >> g & 1 for g in range(grid.shape[0])], dtype=bool)
        wrong = held & ~rows[:, None]
        if wrong.any():
            g, t = (int(x[0]) for x in np.nonzero(wrong))
            group = group_of_gpu(scenario.cluster, g)
            yield Violation(
                3,
                job.id,
                g,
                t,
                f"holds a GPU of type '{group.gpu_type.name}' (group '{group.name}'), "
                f"which the job may not use",
            )
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


def _shape_problem(
    scenario: Scenario, job: BatchJob, low: int, high: int, count: int
) -> str | None:
    if high - low + 1 != count:
        return f"GPUs {low}..{high} are not one contiguous block"
    if not is_power_of_two(count) or (low % count and not scenario.cluster.nodes):
        return (
            f"block [{low}, {high + 1}) of {count} GPUs is not a power-of-two block aligned to "
            f"its size"
        )
    if scenario.cluster.nodes:
        return block_problem(scenario.cluster, job, low, count)
    return None


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

    # 3: at each step the job's GPUs form one contiguous, aligned, power-of-two block (on a
    # cluster with nodes: a legal block of an allowed group, section 8).
    for t, low, high, count in zip(held_steps, lows, highs, per_step, strict=True):
        problem = _shape_problem(scenario, job, int(low), int(high), int(count))
        if problem:
            yield Violation(3, job.id, int(low), int(t), problem)
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
    expected = min(scenario.duration_at(job, n, b), T - start)
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
    # SPEC section 7: waits, idle capacity, cost, fairness, deadlines.
    wait_hours_p50: float | None
    wait_hours_p90: float | None
    unstarted_jobs: int
    idle_gpu_hours: float
    reserved_idle_gpu_hours: float
    fragmented_gpu_hours: float
    cost: float | None
    idle_cost: float | None
    cost_per_value: float | None
    team_fairness: float | None
    late_jobs: int | None
    # SPEC section 8, on a cluster with nodes only: per GPU type (`by_gpu_type`).
    by_gpu_type: NotRequired[dict[str, dict[str, Any]]]


@dataclass(frozen=True)
class JobOutcome:
    """What a plan does for one batch job (a row of assignments.csv and the per-job tables)."""

    job: BatchJob
    placement: Placement | None
    completed: bool  # its block ends within the horizon
    finish_step: int | None  # step after its last step of work (end exclusive), when completed
    delivered_gpu_hours: float  # work done: GPU-hours held, times the speed there (section 8)

    @property
    def started(self) -> bool:
        return self.placement is not None

    @property
    def wait_steps(self) -> int | None:
        """start - arrival for jobs this plan started (None when not started or running)."""
        if self.placement is None or self.job.running is not None:
            return None
        return self.placement.start_step - self.job.arrival_step

    @property
    def late(self) -> bool | None:
        """Not completed by its deadline (None when the job has no deadline)."""
        deadline = self.job.deadline_step
        if deadline is None:
            return None
        return self.finish_step is None or self.finish_step > deadline

    def lateness_steps(self) -> int | None:
        """Steps its completion falls after the deadline (0 when on time; None when the job has
        no deadline or does not complete within the horizon)."""
        if self.job.deadline_step is None or self.finish_step is None:
            return None
        return max(0, self.finish_step - self.job.deadline_step)


def job_outcomes(
    scenario: Scenario,
    plan: Plan,
    placements: dict[str, Placement] | None = None,
    held: np.ndarray | None = None,
) -> list[JobOutcome]:
    """One outcome per batch job, in scenario order (placements and holdings when known)."""
    T, hours = scenario.cluster.horizon_steps, scenario.cluster.step_hours
    placements = batch_placements(scenario, plan) if placements is None else placements
    held = (holdings(scenario, plan) if held is None else held).sum(axis=1)
    out = []
    for j, job in enumerate(scenario.jobs):
        if not isinstance(job, BatchJob):
            continue
        p = placements.get(job.id)
        finish = None
        delivered = float(held[j]) * hours
        if p is not None:
            end = p.start_step + scenario.duration_at(job, p.gpus, p.gpu_start)
            finish = end if end <= T else None
            if scenario.cluster.nodes:  # work in reference GPU-hours (section 8)
                delivered *= scenario.speed_at(job, p.gpu_start)
        out.append(JobOutcome(job, p, finish is not None, finish, delivered))
    return out


@dataclass(frozen=True)
class TeamOutcome:
    team: str
    jobs: int
    gpu_hours: float  # batch GPU-hours plus real-time GPU-hours served
    value: float
    completed_jobs: int
    batch_jobs: int
    wait_hours_p50: float | None


NO_TEAM = "(no team)"


def team_outcomes(
    scenario: Scenario,
    plan: Plan,
    held: np.ndarray | None = None,
    outcomes: list[JobOutcome] | None = None,
) -> list[TeamOutcome]:
    """Per team (jobs without one under NO_TEAM): GPU-hours delivered, value, completed, wait.

    Empty when no job names a team.
    """
    if all(job.team is None for job in scenario.jobs):
        return []
    hours = scenario.cluster.step_hours
    held = (holdings(scenario, plan) if held is None else held).astype(float)
    served = {
        scenario.job_index(job.id): float(
            np.minimum(held[scenario.job_index(job.id)], np.asarray(job.demand)).sum()
        )
        for job in scenario.realtime_jobs
    }
    outcomes = {o.job.id: o for o in outcomes or job_outcomes(scenario, plan, held=held)}
    teams: dict[str, dict[str, Any]] = {}
    for j, job in enumerate(scenario.jobs):
        row = teams.setdefault(
            job.team or NO_TEAM,
            {"jobs": 0, "gpu_hours": 0.0, "value": 0.0, "completed": 0, "batch": 0, "waits": []},
        )
        row["jobs"] += 1
        if isinstance(job, RealtimeJob):
            row["gpu_hours"] += served[j] * hours
            continue
        o = outcomes[job.id]
        row["batch"] += 1
        row["gpu_hours"] += o.delivered_gpu_hours
        row["value"] += job.priority * o.delivered_gpu_hours
        row["completed"] += int(o.completed)
        if o.wait_steps is not None:
            row["waits"].append(o.wait_steps * hours)
    return [
        TeamOutcome(
            team,
            r["jobs"],
            r["gpu_hours"],
            r["value"],
            r["completed"],
            r["batch"],
            float(np.percentile(r["waits"], 50)) if r["waits"] else None,
        )
        for team, r in sorted(teams.items())
    ]


def jain_index(values: Any) -> float | None:
    """Jain's fairness index (sum x)^2 / (n sum x^2): 1 when equal, 1/n when one takes all."""
    x = np.asarray(values, dtype=float)
    if len(x) == 0 or not (x**2).sum() > 0:
        return None
    return float(x.sum() ** 2 / (len(x) * (x**2).sum()))


def free_blocks(free: np.ndarray, size: int) -> np.ndarray:
    """Which aligned blocks of `size` GPUs are wholly free: `free` is (GPUs x ...) bool, the
    result (GPUs // size x ...), row k for the block [k * size, (k + 1) * size). GPUs past the
    last whole block belong to none. The one definition, for planners, metrics and analysis."""
    blocks = free.shape[0] // size
    return free[: blocks * size].reshape(blocks, size, *free.shape[1:]).all(axis=1)


def fragmented_cells(
    scenario: Scenario, plan: Plan, placements: dict[str, Placement] | None = None
) -> np.ndarray:
    """Per step, the idle GPUs that lie in no fully idle aligned block of size g*, where g* is
    the smallest gpus_min among batch jobs waiting at that step (arrived, not running from the
    start, not yet started); 0 where no job waits."""
    G, T = plan.grid.shape
    idle = plan.grid == IDLE
    placements = batch_placements(scenario, plan) if placements is None else placements
    if scenario.cluster.nodes:
        return _fragmented_on_nodes(scenario, idle, placements)
    smallest = np.full(T, G + 1, dtype=np.int64)
    steps = np.arange(T)
    for job in scenario.batch_jobs:
        if job.running is not None:
            continue
        p = placements.get(job.id)
        started = p.start_step if p is not None else T
        waiting = (steps >= job.arrival_step) & (steps < started)
        smallest[waiting] = np.minimum(smallest[waiting], job.gpus_min)
    out = np.zeros(T, dtype=np.int64)
    for g in np.unique(smallest[smallest <= G]):
        g = int(g)
        at = np.nonzero(smallest == g)[0]
        part = idle[:, at]
        in_block = np.zeros_like(part)
        blocks = free_blocks(part, g)  # (blocks, steps)
        in_block[: len(blocks) * g] = np.repeat(blocks, g, axis=0)
        out[at] = (part & ~in_block).sum(axis=0)
    return out


def _fragmented_on_nodes(
    scenario: Scenario, idle: np.ndarray, placements: dict[str, Placement]
) -> np.ndarray:
    """Section 8's fragmentation, per group: g* is the smallest gpus_min among the waiting jobs
    that may use the group's type, and the group's idle GPUs count where they lie in no fully
    idle legal block of g* (whole nodes when g* is larger than a node)."""
    G, T = idle.shape
    steps = np.arange(T)
    out = np.zeros(T, dtype=np.int64)
    waiting = []
    for job in scenario.batch_jobs:
        if job.running is not None:
            continue
        p = placements.get(job.id)
        started = p.start_step if p is not None else T
        waiting.append((job, (steps >= job.arrival_step) & (steps < started)))
    for group in groups_of(scenario.cluster):
        if group.gpus == 0:
            continue
        smallest = np.full(T, G + 1, dtype=np.int64)
        for job, at in waiting:
            if type_allowed(job, group.gpu_type):
                smallest[at] = np.minimum(smallest[at], job.gpus_min)
        part_all = idle[group.offset : group.end]
        for g in np.unique(smallest[smallest <= G]):
            g = int(g)
            at = np.nonzero(smallest == g)[0]
            part = part_all[:, at]
            in_block = np.zeros_like(part)
            starts = group_starts(group, g) >> group.offset
            while starts:
                b = (starts & -starts).bit_length() - 1
                starts &= starts - 1
                whole = part[b : b + g].all(axis=0)
                in_block[b : b + g] |= whole[None, :]
            out[at] += (part & ~in_block).sum(axis=0)
    return out


def by_gpu_type(scenario: Scenario, plan: Plan, counts: np.ndarray) -> dict[str, dict[str, Any]]:
    """Section 8's per-type metrics: GPUs, utilization (batch cells plus real-time cells that
    serve demand), allocated fraction, idle GPU-hours and cost (the type's price, else the
    policy's; None when neither is set)."""
    c = scenario.cluster
    T, hours = c.horizon_steps, c.step_hours
    grid = plan.grid
    rt_index = {scenario.job_index(j.id): j for j in scenario.realtime_jobs}
    # Each real-time job's served share of what it holds, per step.
    share = np.ones((len(scenario.jobs) + 1, T))
    for j, job in rt_index.items():
        held = counts[j].astype(float)
        demand = np.asarray(job.demand, dtype=float)
        share[j] = np.where(held > 0, np.minimum(held, demand) / np.maximum(held, 1), 0.0)
    held_cell = grid != IDLE
    served_cell = np.where(held_cell, share[grid, np.arange(T)[None, :]], 0.0)
    out: dict[str, dict[str, Any]] = {}
    for name in type_names(c):
        rows = [g for g in groups_of(c) if g.gpu_type.name == name]
        gpus = sum(g.gpus for g in rows)
        cells = gpus * T
        held = sum(int(held_cell[g.offset : g.end].sum()) for g in rows)
        served = sum(float(served_cell[g.offset : g.end].sum()) for g in rows)
        gtype = rows[0].gpu_type if rows else c.gpu_type(name)
        price = gtype.cost_per_gpu_hour if gtype is not None else None
        if price is None:
            price = scenario.policy.gpu_hour_cost
        out[name] = {
            "gpus": gpus,
            "utilization": served / cells if cells else 0.0,
            "allocated_fraction": held / cells if cells else 0.0,
            "idle_gpu_hours": (cells - held) * hours,
            "cost": cells * hours * price if price is not None else None,
        }
    return out


def discounts(scenario: Scenario) -> list[float]:
    """Prefix sums of decay^t: a GPU-step at step t earns priority x (discounts[t + 1] -
    discounts[t]); a plain list, for the planners' hot paths that index it per cell."""
    T = scenario.cluster.horizon_steps
    return np.concatenate(([0.0], np.cumsum(scenario.policy.decay ** np.arange(T)))).tolist()


class Value(NamedTuple):
    """The objective of SPEC section 1 and its real-time parts, from the holdings alone."""

    reward: float  # priority x decayed batch GPU-steps
    penalty: float  # priority x real-time shortfall, before penalty_weight
    objective: float
    batch_cells: float
    demanded: float
    served: float
    shortfall: float
    rt_allocated: float
    reserved_idle: float

    @property
    def coverage(self) -> float:
        return self.served / self.demanded if self.demanded > 0 else 1.0

    def slo_met(self, policy: Policy) -> bool | None:
        target = policy.rt_coverage_target
        return None if target is None else bool(self.coverage >= target - 1e-9)


def plan_rank(scenario: Scenario, plan: Plan) -> tuple[bool, float, float]:
    """Where a plan ranks under the coverage rule every planner follows: (coverage target met
    or none set, coverage where it is missed, objective); higher is better. `ranks_above`
    compares two."""
    v = plan_value(scenario, holdings(scenario, plan), job_speeds(scenario, plan))
    met = v.slo_met(scenario.policy) is not False
    return met, 0.0 if met else v.coverage, v.objective


def ranks_above(key: tuple[bool, float, float], than: tuple[bool, float, float]) -> bool:
    """Whether the rank `key` is strictly above `than`: the target and coverage decide first,
    then the objective by more than a relative 1e-9 (so that rounding in a sum never does)."""
    if key[:2] != than[:2]:
        return key[:2] > than[:2]
    return key[2] > than[2] + 1e-9 * max(1.0, abs(than[2]))


def job_speeds(
    scenario: Scenario, plan: Plan, placements: dict[str, Placement] | None = None
) -> np.ndarray | None:
    """Per job, its speed on the group it holds (section 8: a batch cell earns priority x
    speed); None on a cluster without nodes, where every speed is 1."""
    if not scenario.cluster.nodes:
        return None
    placements = batch_placements(scenario, plan) if placements is None else placements
    out = np.ones(len(scenario.jobs), dtype=float)
    for j, job in enumerate(scenario.jobs):
        p = placements.get(job.id)
        if p is not None and isinstance(job, BatchJob):
            out[j] = scenario.speed_at(job, p.gpu_start)
    return out


def plan_value(scenario: Scenario, counts: np.ndarray, speeds: np.ndarray | None = None) -> Value:
    """`Value` of the holdings `counts` (jobs x steps, as `holdings` gives them); `speeds`
    per job (`job_speeds`) on a cluster with nodes."""
    policy = scenario.policy
    held = counts.astype(float)
    is_batch = np.array([isinstance(j, BatchJob) for j in scenario.jobs], dtype=bool)
    priority = np.array([j.priority for j in scenario.jobs], dtype=float)
    if speeds is not None:
        priority = priority * np.where(is_batch, speeds, 1.0)
    discount = policy.decay ** np.arange(scenario.cluster.horizon_steps, dtype=float)

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
        reserved_idle = float(np.maximum(0.0, rt_held - demand).sum())
    else:
        rt_allocated = penalty = demanded = served_total = shortfall_total = 0.0
        reserved_idle = 0.0
    return Value(
        reward,
        penalty,
        policy.reward_weight * (reward - policy.penalty_weight * penalty),
        batch_cells,
        demanded,
        served_total,
        shortfall_total,
        rt_allocated,
        reserved_idle,
    )


def metrics(scenario: Scenario, plan: Plan) -> Metrics:
    """Every metric of SPEC sections 1 and 7, computed from the grid alone."""
    c, policy = scenario.cluster, scenario.policy
    G, T = c.gpus, c.horizon_steps
    counts = holdings(scenario, plan)
    is_batch = np.array([isinstance(j, BatchJob) for j in scenario.jobs], dtype=bool)
    priority = np.array([j.priority for j in scenario.jobs], dtype=float)
    placements = batch_placements(scenario, plan)
    speeds = job_speeds(scenario, plan, placements)
    if speeds is not None:
        priority = priority * speeds
    v = plan_value(scenario, counts, speeds)
    batch_cells, served_total = v.batch_cells, v.served

    outcomes = job_outcomes(scenario, plan, placements, counts)
    completed = sum(o.completed for o in outcomes)
    started = sum(o.started for o in outcomes)
    waits = [o.wait_steps * c.step_hours for o in outcomes if o.wait_steps is not None]
    cells = G * T
    hours = c.step_hours
    batch_held = counts[is_batch]
    value = float(priority[is_batch] @ batch_held.sum(axis=1)) * hours if len(batch_held) else 0.0
    idle_hours = float((plan.grid == IDLE).sum()) * hours
    price = policy.gpu_hour_cost
    cost = cells * hours * price if price is not None else None
    types = by_gpu_type(scenario, plan, counts) if c.nodes else None
    if types is not None:
        # a type's price overrides the policy's for its GPUs; the cost is known when every
        # GPU has one, and its idle cost is priced per type
        costs = [t["cost"] for t in types.values() if t["gpus"]]
        cost = sum(costs) if all(x is not None for x in costs) else None
        price = cost / (cells * hours) if cost is not None else None
    teams = team_outcomes(scenario, plan, counts, outcomes)
    deadlines = [o for o in outcomes if o.job.deadline_step is not None]
    out: Metrics = {
        "planner": plan.planner,
        "utilization": (batch_cells + served_total) / cells,
        "allocated_fraction": (batch_cells + v.rt_allocated) / cells,
        "value": value,
        "objective": v.objective,
        "completed_jobs": completed,
        "started_jobs": started,
        "batch_jobs": len(outcomes),
        "rt_shortfall_gpu_hours": v.shortfall * c.step_hours,
        "rt_coverage": v.coverage,
        "slo_met": v.slo_met(policy),
        "runtime_ms": float(plan.stats.get("runtime_ms", 0.0)),
        "wait_hours_p50": float(np.percentile(waits, 50)) if waits else None,
        "wait_hours_p90": float(np.percentile(waits, 90)) if waits else None,
        "unstarted_jobs": len(outcomes) - started,
        "idle_gpu_hours": idle_hours,
        "reserved_idle_gpu_hours": v.reserved_idle * hours,
        "fragmented_gpu_hours": float(fragmented_cells(scenario, plan, placements).sum()) * hours,
        "cost": cost,
        "idle_cost": (idle_hours + v.reserved_idle * hours) * price if price is not None else None,
        "cost_per_value": cost / value if cost is not None and value > 0 else None,
        "team_fairness": jain_index([t.gpu_hours for t in teams]) if teams else None,
        "late_jobs": sum(bool(o.late) for o in deadlines) if deadlines else None,
    }
    if types is not None:
        out["by_gpu_type"] = types
    return out


def report(scenario: Scenario, plan: Plan) -> dict[str, Any]:
    """metrics.json's content: the metrics, then what the planner reported beyond them."""
    out: dict[str, Any] = dict(metrics(scenario, plan))
    for key, value in plan.stats.items():
        out.setdefault(key, value)
    return out


def objective(scenario: Scenario, plan: Plan) -> float:
    return metrics(scenario, plan)["objective"]
