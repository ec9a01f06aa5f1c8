"""The scheduling model of SPEC section 1: a cluster, a policy and the jobs that compete for it.

Every object here is a frozen dataclass that validates itself on construction, so code past the
edge (planners, checker, metrics) trusts what it is given. Messages name the job and the field;
the file and row are added by `core.formats`, which knows them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

from . import nodes
from .nodes import GpuType, NodeGroup

# Limits checked before anything proportional to the grid is allocated (SPEC section 3).
MAX_GPUS = 65_536
MAX_STEPS = 10_080
# An imported history's default step: traces are timed to the second and a plan rounds each job
# up to whole steps, so an hour would round a 10-minute job up sixfold.
IMPORT_STEP_MINUTES = 15
MAX_CELLS = 10_000_000
MAX_JOBS = 100_000
MAX_HISTORY_STEPS = 100_000  # hourly values before step 0 a real-time job may carry (11 years)
# Every number in a scenario is at most this in size: far beyond real values, small enough that
# no product the planners and metrics form overflows a float or an int64.
MAX_NUMBER = 1e15
# Demand and history values read from files: smaller again, so that forecasts built on them
# (the rolling simulation's upper quantiles) still lie within MAX_NUMBER.
MAX_DEMAND = 1e12
# Cluster starts: the longest horizon from the start, and the longest history before it, must
# stay within the dates pandas handles (1677-09-22 .. 2262-04-11), which charts and the rolling
# simulation use.
EARLIEST_HISTORY = datetime(1678, 1, 1)
LATEST_END = datetime(2262, 1, 1)

BATCH_TYPES = ("training", "batch_inference", "quantization")
REALTIME_TYPE = "realtime"
JOB_TYPES = (*BATCH_TYPES, REALTIME_TYPE)
JobType = Literal["training", "batch_inference", "quantization", "realtime"]


class ScenarioError(ValueError):
    """Input that breaks a rule of the model; the message names file, row or job, and field."""

    def __init__(self, message: str, problems: Sequence[str] | None = None):
        self.problems = list(problems) if problems else [message]
        super().__init__(message)

    def with_prefix(self, prefix: str) -> ScenarioError:
        """The same error with a location (usually the file name) in front of every problem."""
        problems = [f"{prefix}: {p}" for p in self.problems]
        return ScenarioError(_join(problems), problems)


def shown(text: str) -> str:
    """Text safe to put in a message: lone surrogates written as \\udxxx escapes."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def clipped(text: str) -> str:
    """A value's text in a message, not at any length: past 40 characters, its first 30 and
    how long it is."""
    return text if len(text) <= 40 else f"{text[:30]}... ({len(text)} characters)"


def _short(value: object) -> str:
    return clipped(repr(value))


def _join(problems: Sequence[str]) -> str:
    if len(problems) == 1:
        return problems[0]
    shown = "; ".join(problems[:5])
    more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
    return f"{len(problems)} problems: {shown}{more}"


def is_power_of_two(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


def powers_of_two_between(low: int, high: int) -> list[int]:
    """The powers of two g with low <= g <= high, smallest first."""
    sizes, g = [], 1
    while g <= high:
        if g >= low:
            sizes.append(g)
        g *= 2
    return sizes


def _check_number(
    owner: str,
    name: str,
    value: object,
    *,
    integer: bool = False,
    minimum: float | None = None,
    strictly_positive: bool = False,
) -> None:
    """Raise a ScenarioError unless value is a finite (integer) number in range."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ScenarioError(f"{owner}: {name} must be a number, got {_short(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ScenarioError(f"{owner}: {name} must be finite, got {value!r}")
    if abs(value) > MAX_NUMBER:  # exact for ints of any size: no float conversion
        raise ScenarioError(f"{owner}: {name} {_short(value)} exceeds the limit of {MAX_NUMBER:g}")
    if integer and value != int(value):
        raise ScenarioError(f"{owner}: {name} must be a whole number, got {value!r}")
    if strictly_positive and value <= 0:
        raise ScenarioError(f"{owner}: {name} must be > 0, got {value!r}")
    if minimum is not None and value < minimum:
        raise ScenarioError(f"{owner}: {name} must be >= {minimum:g}, got {value!r}")


@dataclass(frozen=True)
class Cluster:
    """G identical GPUs planned over T steps of step_minutes each."""

    gpus: int
    step_minutes: int = 60
    horizon_steps: int = 24
    start: datetime | None = None
    # SPEC section 8 (`core.nodes`): the GPU types and the groups of nodes; both empty for a
    # cluster of identical GPUs.
    gpu_types: tuple[GpuType, ...] = ()
    nodes: tuple[NodeGroup, ...] = ()

    def __post_init__(self) -> None:
        _check_number("cluster", "gpus", self.gpus, integer=True, minimum=1)
        _check_number("cluster", "step_minutes", self.step_minutes, integer=True, minimum=1)
        _check_number("cluster", "horizon_steps", self.horizon_steps, integer=True, minimum=1)
        if self.gpus > MAX_GPUS:
            raise ScenarioError(f"cluster: gpus {self.gpus} exceeds the limit of {MAX_GPUS:,}")
        if self.horizon_steps > MAX_STEPS:
            raise ScenarioError(
                f"cluster: horizon_steps {self.horizon_steps} exceeds the limit of {MAX_STEPS:,}"
            )
        if self.gpus * self.horizon_steps > MAX_CELLS:
            raise ScenarioError(
                f"cluster: gpus x horizon_steps = {self.gpus * self.horizon_steps:,} grid cells "
                f"exceeds the limit of {MAX_CELLS:,}"
            )
        if self.step_minutes > 7 * 24 * 60:
            raise ScenarioError(f"cluster: step_minutes {self.step_minutes} exceeds one week")
        object.__setattr__(self, "gpus", int(self.gpus))
        object.__setattr__(self, "step_minutes", int(self.step_minutes))
        object.__setattr__(self, "horizon_steps", int(self.horizon_steps))
        if self.start is not None:
            _check_start(self.start, self.step_minutes)
        object.__setattr__(self, "gpu_types", tuple(self.gpu_types))
        object.__setattr__(self, "nodes", tuple(self.nodes))
        _check_nodes(self)

    @property
    def heterogeneous(self) -> bool:
        """Whether the cluster describes nodes (section 8) rather than one pool of GPUs."""
        return bool(self.nodes)

    def gpu_type(self, name: str) -> GpuType | None:
        return next((t for t in self.gpu_types if t.name == name), None)

    @property
    def step_hours(self) -> float:
        return self.step_minutes / 60.0

    @property
    def cells(self) -> int:
        return self.gpus * self.horizon_steps


def _check_nodes(c: Cluster) -> None:
    """Section 8's rules on the types and groups: names, speeds, and GPUs that add up."""
    if not c.nodes:
        if c.gpu_types:
            raise ScenarioError("cluster: gpu_types is given without nodes (nodes name the types)")
        return
    names: set[str] = set()
    for k, t in enumerate(c.gpu_types):
        if not isinstance(t, GpuType):
            raise ScenarioError(f"cluster: gpu_types[{k}] must be a GPU type")
        owner = f"cluster: gpu type {shown(str(t.name))[:40]!r}"
        if not isinstance(t.name, str) or not t.name.strip() or _text_problem(t.name):
            raise ScenarioError(f"cluster: gpu type name {_short(t.name)} must be a non-empty name")
        if t.name in names:
            raise ScenarioError(f"{owner}: is listed twice")
        names.add(t.name)
        _check_number(owner, "speed", t.speed, strictly_positive=True)
        for name in ("memory_gb", "cost_per_gpu_hour"):
            if getattr(t, name) is not None:
                _check_number(owner, name, getattr(t, name), minimum=0)
    groups: set[str] = set()
    total = 0
    for k, n in enumerate(c.nodes):
        if not isinstance(n, NodeGroup):
            raise ScenarioError(f"cluster: nodes[{k}] must be a node group")
        if not isinstance(n.group, str) or not n.group.strip() or _text_problem(n.group):
            raise ScenarioError(f"cluster: nodes[{k}]: group {_short(n.group)} must be a name")
        owner = f"cluster: group {n.group!r}"
        if n.group in groups:
            raise ScenarioError(f"{owner}: is listed twice")
        groups.add(n.group)
        if n.gpu_type not in names:
            known = ", ".join(sorted(names)) or "none"
            raise ScenarioError(
                f"{owner}: gpu_type {_short(n.gpu_type)} is not in gpu_types (known: {known})"
            )
        _check_number(owner, "gpus_per_node", n.gpus_per_node, integer=True, minimum=1)
        _check_number(owner, "count", n.count, integer=True, minimum=0)
        total += int(n.gpus_per_node) * int(n.count)
    if total != c.gpus:
        raise ScenarioError(
            f"cluster: gpus is {c.gpus} but the nodes hold {total} "
            f"({' + '.join(f'{n.count} x {n.gpus_per_node} in {n.group}' for n in c.nodes)})"
        )
    object.__setattr__(
        c,
        "nodes",
        tuple(NodeGroup(n.group, n.gpu_type, int(n.gpus_per_node), int(n.count)) for n in c.nodes),
    )


def _check_start(start: object, step_minutes: int) -> None:
    """The longest horizon after the start and the longest history before it have dates."""
    if not isinstance(start, datetime):
        raise ScenarioError(f"cluster: start must be a datetime, got {start!r}")
    wall = start.replace(tzinfo=None)
    longest = timedelta(minutes=step_minutes * MAX_STEPS)
    if wall < EARLIEST_HISTORY + timedelta(hours=MAX_HISTORY_STEPS + 24):
        raise ScenarioError(
            f"cluster: start {start.isoformat()} is too early: {MAX_HISTORY_STEPS:,} hours of "
            f"history before it must stay after {EARLIEST_HISTORY:%Y-%m-%d}"
        )
    if wall > LATEST_END - longest - timedelta(days=1):
        raise ScenarioError(
            f"cluster: start {start.isoformat()} is too late: the longest horizon "
            f"({MAX_STEPS:,} steps of {step_minutes} min) from it must end before "
            f"{LATEST_END:%Y-%m-%d}"
        )


@dataclass(frozen=True)
class Policy:
    """How the objective trades batch value against real-time shortfall."""

    penalty_weight: float = 8.0
    decay: float = 0.97
    reward_weight: float = 1.0
    # Optional: the share of demanded real-time GPU-hours a plan must serve where feasible
    # (the penalty prices shortfall; the target forbids it), and the price of a GPU-hour.
    rt_coverage_target: float | None = None
    gpu_hour_cost: float | None = None

    def __post_init__(self) -> None:
        _check_number("policy", "penalty_weight", self.penalty_weight, minimum=0)
        _check_number("policy", "decay", self.decay, strictly_positive=True)
        _check_number("policy", "reward_weight", self.reward_weight, strictly_positive=True)
        if self.decay > 1:
            raise ScenarioError(f"policy: decay must be in (0, 1], got {self.decay!r}")
        if self.rt_coverage_target is not None:
            _check_number(
                "policy", "rt_coverage_target", self.rt_coverage_target, strictly_positive=True
            )
            if self.rt_coverage_target > 1:
                raise ScenarioError(
                    f"policy: rt_coverage_target must be in (0, 1], got {self.rt_coverage_target!r}"
                )
        if self.gpu_hour_cost is not None:
            _check_number("policy", "gpu_hour_cost", self.gpu_hour_cost, minimum=0)

    def half_life_hours(self, step_minutes: int) -> float:
        """Hours after which a GPU-step of batch work is worth half as much (inf for decay 1)."""
        if self.decay >= 1.0:
            return math.inf
        return math.log(0.5) / math.log(self.decay) * step_minutes / 60.0


@dataclass(frozen=True)
class Running:
    """A batch job already on the cluster: it holds [gpu_start, gpu_start+gpus) from step 0."""

    gpu_start: int
    gpus: int
    remaining_steps: int


@dataclass(frozen=True)
class BatchJob:
    """Training, batch inference or quantization: one aligned block held until the work is done."""

    id: str
    type: JobType
    priority: float
    gpus_min: int
    gpus_max: int
    gpu_hours: float
    arrival_step: int = 0
    running: Running | None = None
    gpu_hours_actual: float | None = None  # true work, known only to the rolling simulation
    team: str | None = None
    deadline_step: int | None = None  # the step by which the job should have completed
    # SPEC section 8: the GPU types it may use (None: all), the memory it needs, its own speed
    # per type ((type, factor) pairs), and whether its block may span nodes.
    gpu_types: tuple[str, ...] | None = None
    min_gpu_memory_gb: float | None = None
    speed: tuple[tuple[str, float], ...] | None = None
    multi_node: bool = True

    def __post_init__(self) -> None:
        _check_id(self.id)
        owner = f"job '{self.id}'"
        _check_team(owner, self.team)
        _check_type_fields(self, owner)
        _check_speed_fields(self, owner)
        if self.deadline_step is not None:
            _check_number(owner, "deadline_step", self.deadline_step, integer=True, minimum=0)
            object.__setattr__(self, "deadline_step", int(self.deadline_step))
        if self.type not in BATCH_TYPES:
            raise ScenarioError(f"{owner}: type {self.type!r} is not a batch type {BATCH_TYPES}")
        _check_number(owner, "priority", self.priority, strictly_positive=True)
        _check_number(owner, "arrival_step", self.arrival_step, integer=True, minimum=0)
        _check_number(owner, "gpus_min", self.gpus_min, integer=True, minimum=1)
        _check_number(owner, "gpus_max", self.gpus_max, integer=True, minimum=1)
        _check_number(owner, "gpu_hours", self.gpu_hours, strictly_positive=True)
        for name in ("gpus_min", "gpus_max"):
            object.__setattr__(self, name, int(getattr(self, name)))
            if not is_power_of_two(int(getattr(self, name))):
                raise ScenarioError(f"{owner}: {name} {getattr(self, name)} is not a power of two")
        if self.gpus_min > self.gpus_max:
            raise ScenarioError(
                f"{owner}: gpus_min {self.gpus_min} is larger than gpus_max {self.gpus_max}"
            )
        if self.gpu_hours_actual is not None:
            _check_number(owner, "gpu_hours_actual", self.gpu_hours_actual, strictly_positive=True)
        if self.running is not None:
            r = self.running
            for name in ("gpu_start", "gpus", "remaining_steps"):
                _check_number(
                    owner,
                    f"running.{name}",
                    getattr(r, name),
                    integer=True,
                    minimum=0 if name == "gpu_start" else 1,
                )
            r = Running(int(r.gpu_start), int(r.gpus), int(r.remaining_steps))
            object.__setattr__(self, "running", r)  # integral floats (2.0) as ints
            if not is_power_of_two(r.gpus):
                raise ScenarioError(f"{owner}: running.gpus {r.gpus} is not a power of two")
        object.__setattr__(self, "gpus_min", int(self.gpus_min))
        object.__setattr__(self, "gpus_max", int(self.gpus_max))
        object.__setattr__(self, "arrival_step", int(self.arrival_step))

    @property
    def is_realtime(self) -> bool:
        return False

    def sizes(self) -> list[int]:
        """Allowed block sizes, smallest first."""
        if self.running is not None:
            return [self.running.gpus]
        return powers_of_two_between(self.gpus_min, self.gpus_max)


@dataclass(frozen=True)
class RealtimeJob:
    """Inference serving: an elastic set of GPUs re-chosen every step, driven by demand."""

    id: str
    priority: float
    gpus_min: int
    gpus_max: int
    swap_cap: int
    demand: tuple[float, ...]
    previous_gpus: tuple[int, ...] | None = None
    history: tuple[float, ...] | None = None  # hourly values before step 0, seeds forecasts
    type: JobType = field(default=REALTIME_TYPE)
    team: str | None = None
    gpu_types: tuple[str, ...] | None = None  # SPEC section 8, as for batch jobs
    min_gpu_memory_gb: float | None = None

    def __post_init__(self) -> None:
        _check_id(self.id)
        owner = f"job '{self.id}'"
        _check_team(owner, self.team)
        _check_type_fields(self, owner)
        if self.type != REALTIME_TYPE:
            raise ScenarioError(f"{owner}: type {self.type!r} is not 'realtime'")
        _check_number(owner, "priority", self.priority, strictly_positive=True)
        _check_number(owner, "gpus_min", self.gpus_min, integer=True, minimum=0)
        _check_number(owner, "gpus_max", self.gpus_max, integer=True, minimum=0)
        _check_number(owner, "swap_cap", self.swap_cap, integer=True, minimum=0)
        for name in ("gpus_min", "gpus_max", "swap_cap"):
            object.__setattr__(self, name, int(getattr(self, name)))
        if self.gpus_min > self.gpus_max:
            raise ScenarioError(
                f"{owner}: gpus_min {self.gpus_min} is larger than gpus_max {self.gpus_max}"
            )
        object.__setattr__(
            self, "demand", tuple(float(d) for d in _numbers(owner, "demand", self.demand))
        )
        if self.history is not None:
            sized = isinstance(self.history, Sequence) and not isinstance(self.history, str)
            if sized and len(self.history) > MAX_HISTORY_STEPS:
                raise ScenarioError(
                    f"{owner}: history has {len(self.history):,} values, more than the "
                    f"limit of {MAX_HISTORY_STEPS:,} hours"
                )
            object.__setattr__(
                self,
                "history",
                tuple(float(h) for h in _numbers(owner, "history", self.history, allow_nan=True)),
            )
        if self.previous_gpus is not None:
            gpus = tuple(self.previous_gpus)
            for i, g in enumerate(gpus):
                _check_number(owner, f"previous_gpus[{i}]", g, integer=True, minimum=0)
            if len(set(gpus)) != len(gpus):
                raise ScenarioError(f"{owner}: previous_gpus lists a GPU twice")
            object.__setattr__(self, "previous_gpus", tuple(sorted(int(g) for g in gpus)))
        for name in ("gpus_min", "gpus_max", "swap_cap"):
            object.__setattr__(self, name, int(getattr(self, name)))

    @property
    def is_realtime(self) -> bool:
        return True


Job = BatchJob | RealtimeJob


def _check_id(job_id: object) -> None:
    if not isinstance(job_id, str) or not job_id.strip():
        raise ScenarioError(f"job id must be a non-empty string, got {_short(job_id)}")
    problem = _text_problem(job_id)
    if problem:
        raise ScenarioError(f"job id {shown(job_id[:40])!r}: {problem}")


def _check_type_fields(job: BatchJob | RealtimeJob, owner: str) -> None:
    """gpu_types (distinct names) and min_gpu_memory_gb; whether the names exist is the
    scenario's check, which knows the cluster."""
    if job.gpu_types is not None:
        names = job.gpu_types
        if isinstance(names, str) or not isinstance(names, Sequence):
            raise ScenarioError(f"{owner}: gpu_types must be a list of GPU type names")
        if not names:
            raise ScenarioError(f"{owner}: gpu_types is empty (leave it out to allow every type)")
        for name in names:
            if not isinstance(name, str) or not name.strip():
                raise ScenarioError(f"{owner}: gpu_types holds {_short(name)}, not a type name")
        if len(set(names)) != len(names):
            raise ScenarioError(f"{owner}: gpu_types lists a type twice")
        object.__setattr__(job, "gpu_types", tuple(names))
    if job.min_gpu_memory_gb is not None:
        _check_number(owner, "min_gpu_memory_gb", job.min_gpu_memory_gb, minimum=0)


def _check_speed_fields(job: BatchJob, owner: str) -> None:
    """A batch job's own speed per type (stored as (name, factor) pairs) and multi_node."""
    if job.speed is not None:
        pairs = job.speed.items() if isinstance(job.speed, dict) else job.speed
        checked = []
        for pair in pairs:
            if not isinstance(pair, tuple | list) or len(pair) != 2:
                raise ScenarioError(f"{owner}: speed must map GPU type names to factors")
            name, factor = pair
            if not isinstance(name, str):
                raise ScenarioError(f"{owner}: speed keys must be GPU type names")
            _check_number(owner, f"speed[{name!r}]", factor, strictly_positive=True)
            checked.append((name, float(factor)))
        object.__setattr__(job, "speed", tuple(checked))
    if not isinstance(job.multi_node, bool):
        raise ScenarioError(
            f"{owner}: multi_node must be true or false, got {_short(job.multi_node)}"
        )


def _check_team(owner: str, team: object) -> None:
    if team is None:
        return
    if not isinstance(team, str) or not team.strip():
        raise ScenarioError(f"{owner}: team must be a non-empty string, got {_short(team)}")
    problem = _text_problem(team)
    if problem:
        raise ScenarioError(f"{owner}: team {problem}")


def _text_problem(text: str) -> str | None:
    """Why an id, team or name cannot be used as is (None when it can).

    Files and the editor strip the spaces around cells, so the model refuses them: ' a' and 'a'
    can never be two jobs, and an exported grid always matches its scenario.
    """
    if len(text) > 200 or any(ord(c) < 32 for c in text):
        return "must be at most 200 printable characters"
    if text != text.strip():
        return "must not start or end with a space"
    if any("\ud800" <= c <= "\udfff" for c in text):
        return "holds a lone surrogate (not a character; the text is broken)"
    return None


def _numbers(owner: str, name: str, values: object, *, allow_nan: bool = False) -> list[float]:
    if isinstance(values, str | bytes) or not isinstance(values, Sequence):
        raise ScenarioError(f"{owner}: {name} must be a list of numbers")
    out = []
    for i, v in enumerate(values):
        if allow_nan and (v is None or (isinstance(v, float) and math.isnan(v))):
            out.append(math.nan)
            continue
        _check_number(owner, f"{name}[{i}]", v, minimum=0)
        out.append(v)
    return out


def duration_steps(job: BatchJob, gpus: int, step_minutes: int) -> int:
    """Steps a batch job needs on a block of `gpus` (linear scaling; running jobs as given)."""
    if job.running is not None and gpus == job.running.gpus:
        return job.running.remaining_steps
    return max(1, math.ceil(job.gpu_hours * 60.0 / (gpus * step_minutes) - 1e-9))


@dataclass(frozen=True)
class Scenario:
    """A cluster, a policy and the jobs: the input every planner and the checker share."""

    name: str
    cluster: Cluster
    jobs: tuple[Job, ...]
    policy: Policy = field(default_factory=Policy)
    description: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "jobs", tuple(self.jobs))
        problems = list(_scenario_problems(self))
        if problems:
            raise ScenarioError(_join(problems), problems)
        object.__setattr__(self, "_index", {job.id: i for i, job in enumerate(self.jobs)})

    @property
    def batch_jobs(self) -> list[BatchJob]:
        return [j for j in self.jobs if isinstance(j, BatchJob)]

    @property
    def realtime_jobs(self) -> list[RealtimeJob]:
        return [j for j in self.jobs if isinstance(j, RealtimeJob)]

    def job_index(self, job_id: str) -> int:
        """Position of a job in `jobs`: the number the grid stores for it."""
        return self._index[job_id]  # type: ignore[attr-defined]

    def has_job(self, job_id: str) -> bool:
        return job_id in self._index  # type: ignore[attr-defined]

    def duration(self, job: BatchJob, gpus: int) -> int:
        return duration_steps(job, gpus, self.cluster.step_minutes)

    def duration_at(self, job: BatchJob, gpus: int, gpu_start: int) -> int:
        """Steps on the block of `gpus` from GPU gpu_start: at its group's speed (section 8)."""
        if not self.cluster.nodes:
            return duration_steps(job, gpus, self.cluster.step_minutes)
        speed = nodes.placement_speed(self, job, gpu_start)
        return nodes.duration_on(job, gpus, self.cluster.step_minutes, speed)

    def speed_at(self, job: BatchJob, gpu_start: int) -> float:
        """The job's work per GPU-hour on the group of GPU gpu_start (1 without nodes)."""
        if not self.cluster.nodes:
            return 1.0
        return nodes.placement_speed(self, job, gpu_start)

    def replace(self, **changes: object) -> Scenario:
        """A copy with some fields changed, validated again."""
        from dataclasses import replace

        return replace(self, **changes)


def _scenario_problems(s: Scenario):
    """Cross-field rules: unique ids, sizes within the cluster, demand length, pinned work fits."""
    if not isinstance(s.name, str) or not s.name.strip():
        yield "scenario: name must be a non-empty string"
    elif len(s.name) > 200 or any("\ud800" <= c <= "\udfff" for c in s.name):
        yield "scenario: name must be at most 200 characters, without lone surrogates"
    if isinstance(s.description, str) and any("\ud800" <= c <= "\udfff" for c in s.description):
        yield "scenario: description holds a lone surrogate (not a character)"
    if len(s.jobs) > MAX_JOBS:
        yield f"scenario: {len(s.jobs):,} jobs exceeds the limit of {MAX_JOBS:,}"
        return
    seen: set[str] = set()
    for job in s.jobs:
        if job.id in seen:
            yield f"job '{job.id}': id is used by more than one job"
        seen.add(job.id)
        yield from _job_in_cluster_problems(s, job)
    yield from _pinned_problems(s)


def _job_in_cluster_problems(s: Scenario, job: Job):
    """One job against the cluster: sizes, demand length, work the horizon can hold."""
    G, T = s.cluster.gpus, s.cluster.horizon_steps
    owner = f"job '{job.id}'"
    problem = _type_problem(s.cluster, job, owner)
    if problem:
        yield problem
        return
    if job.gpus_max > G:
        yield f"{owner}: gpus_max {job.gpus_max} is larger than the cluster's {G} GPUs"
    if isinstance(job, RealtimeJob):
        if len(job.demand) != T:
            yield (f"{owner}: demand has {len(job.demand)} values, expected one per step ({T})")
        for g in job.previous_gpus or ():
            if g >= G:
                yield f"{owner}: previous_gpus lists GPU {g}, the cluster has GPUs 0..{G - 1}"
                break
        return
    capacity = G * MAX_STEPS * s.cluster.step_hours
    for name in ("gpu_hours", "gpu_hours_actual"):
        work = getattr(job, name)
        if work is not None and work > capacity:
            yield (
                f"{owner}: {name} {work:g} is more than the whole cluster does in the "
                f"longest horizon ({G} GPUs x {MAX_STEPS:,} steps of "
                f"{s.cluster.step_minutes} min = {capacity:,.0f} GPU-hours)"
            )
    if job.running is not None:
        r = job.running
        if r.gpu_start + r.gpus > G:
            yield (
                f"{owner}: running block [{r.gpu_start}, {r.gpu_start + r.gpus}) lies "
                f"outside the cluster's {G} GPUs"
            )
        elif s.cluster.nodes:
            problem = nodes.block_problem(s.cluster, job, r.gpu_start, r.gpus)
            if problem:
                yield f"{owner}: running {problem}"
        elif r.gpu_start % r.gpus:
            yield (
                f"{owner}: running.gpu_start {r.gpu_start} is not aligned to its block of "
                f"{r.gpus} (gpu_start must be a multiple of gpus)"
            )


def _type_problem(c: Cluster, job: Job, owner: str) -> str | None:
    """Section 8 on one job: its type names exist, and some allowed group can hold it."""
    known = nodes.type_names(c)
    named = [("gpu_types", n) for n in job.gpu_types or ()]
    if isinstance(job, BatchJob):
        named += [("speed", n) for n, _ in job.speed or ()]
    for what, name in named:
        if name not in known:
            return (
                f"{owner}: {what} names {name!r}, which is not a GPU type of the cluster "
                f"(known: {', '.join(known)})"
            )
    plain = job.gpu_types is None and job.min_gpu_memory_gb is None
    if plain and (isinstance(job, RealtimeJob) or job.multi_node or not c.nodes):
        return None
    allowed = nodes.allowed_groups(c, job)
    if not allowed:
        why = []
        if job.gpu_types is not None:
            why.append(f"gpu_types {', '.join(job.gpu_types)}")
        if job.min_gpu_memory_gb is not None:
            why.append(f"min_gpu_memory_gb {job.min_gpu_memory_gb:g}")
        return f"{owner}: no GPU of the cluster is allowed by its {' and '.join(why)}"
    if isinstance(job, RealtimeJob):
        room = sum(g.gpus for g in allowed)
        if room < job.gpus_min:
            return (
                f"{owner}: gpus_min {job.gpus_min} is more than the {room} GPUs of its "
                f"allowed types"
            )
        return None
    g = job.running.gpus if job.running is not None else job.gpus_min
    if not nodes.block_starts(c, job, g, allowed):
        where = ", ".join(f"{x.name} ({x.gpus_per_node} a node x {x.count})" for x in allowed)
        return f"{owner}: gpus_min {g} fits no allowed group as one block: {where}" + (
            "; multi_node is false" if not job.multi_node else ""
        )
    return None


def _typed_room_problems(s: Scenario, holder: dict[int, str]):
    """Each service's gpus_min fits in the GPUs of its allowed types left free at step 0."""
    busy = 0
    for g in holder:
        busy |= 1 << g
    for job in s.realtime_jobs:
        if job.gpu_types is None and job.min_gpu_memory_gb is None:
            continue  # every GPU: the check below on the whole cluster says it
        held = len(job.previous_gpus) if job.previous_gpus is not None else 0
        room = (nodes.allowed_gpus(s.cluster, job) & ~busy).bit_count()
        if job.gpus_min - held > room:
            yield (
                f"job '{job.id}': gpus_min {job.gpus_min} needs {job.gpus_min - held} more "
                f"GPUs of its allowed types at step 0 than the {room} left free by running "
                f"jobs and previous_gpus"
            )


def _pinned_problems(s: Scenario):
    """Running blocks and previous real-time sets must not overlap, and must leave room."""
    G = s.cluster.gpus
    holder: dict[int, str] = {}
    for job in s.jobs:
        if isinstance(job, BatchJob) and job.running is not None:
            gpus = range(job.running.gpu_start, job.running.gpu_start + job.running.gpus)
        elif isinstance(job, RealtimeJob) and job.previous_gpus:
            gpus = job.previous_gpus
            if s.cluster.nodes:
                allowed = nodes.allowed_gpus(s.cluster, job)
                outside = [g for g in gpus if g < G and not allowed >> g & 1]
                if outside:
                    yield (
                        f"job '{job.id}': previous_gpus lists GPU {outside[0]}, of a type the "
                        f"job may not use"
                    )
        else:
            continue
        for g in gpus:
            if g in holder and g < G:
                what = "running block" if isinstance(job, BatchJob) else "previous_gpus"
                yield (f"job '{job.id}': {what} overlaps job '{holder[g]}' on GPU {g}")
                break
            holder[g] = job.id
    free_at_start = G - len([g for g in holder if g < G])
    needed = 0
    for job in s.realtime_jobs:
        held = len(job.previous_gpus) if job.previous_gpus is not None else 0
        if job.previous_gpus is not None:
            if held - job.swap_cap > job.gpus_max:
                yield (
                    f"job '{job.id}': previous_gpus holds {held} GPUs; with swap_cap "
                    f"{job.swap_cap} it cannot get down to gpus_max {job.gpus_max} at step 0"
                )
            if held + job.swap_cap < job.gpus_min:
                yield (
                    f"job '{job.id}': previous_gpus holds {held} GPUs; with swap_cap "
                    f"{job.swap_cap} it cannot reach gpus_min {job.gpus_min} at step 0"
                )
        needed += max(0, job.gpus_min - held)
    if s.cluster.nodes:
        yield from _typed_room_problems(s, holder)
    if needed > free_at_start:
        yield (
            f"scenario: real-time gpus_min needs {needed} more GPUs at step 0 than the "
            f"{free_at_start} left free by running jobs and previous_gpus"
        )
