"""Utilization against value between two plans of one scenario, in a sentence a person can check.

Utilization counts GPU-steps, completions count jobs, value weighs each delivered GPU-hour by its
job's priority: two plans can tie on the first two and still differ on the third (the published
scale test), or complete fewer jobs and deliver more value (mixed-control). `compare_plans`
reads the two plans' metrics and, job by job, what each did with the batch work
(`core.plan.job_outcomes`); `explain_divergence` turns that into a short explanation naming
the jobs that differ.
"""

from __future__ import annotations

from dataclasses import dataclass

from .model import Scenario
from .plan import JobOutcome, Plan, job_outcomes, metrics

# Utilization differences up to this many points (as a fraction) read as "the same".
SAME_UTILIZATION = 0.005
# At most this many jobs are named per list; the rest are counted.
MAX_NAMED = 6


def status(outcome: JobOutcome) -> str:
    """'completed', 'cut' (started, cut by the horizon) or 'waiting' (never started)."""
    if outcome.completed:
        return "completed"
    return "cut" if outcome.started else "waiting"


_RANK = {"waiting": 0, "cut": 1, "completed": 2}


@dataclass(frozen=True)
class Divergence:
    """Two plans side by side: headline metrics, and the batch jobs whose outcome differs.

    `gained` holds (base outcome, plan outcome) for jobs the plan took further (waiting -> cut or
    completed, cut -> completed); `lost` the jobs the base plan took further. Both in file order.
    """

    base_name: str
    name: str
    base_utilization: float
    utilization: float
    base_value: float
    value: float
    base_completed: int
    completed: int
    batch_jobs: int
    gained: tuple[tuple[JobOutcome, JobOutcome], ...]
    lost: tuple[tuple[JobOutcome, JobOutcome], ...]

    @property
    def value_gain(self) -> float | None:
        """Value relative to the base plan's (None when the base delivered none)."""
        return self.value / self.base_value - 1 if self.base_value > 0 else None

    @property
    def same_utilization(self) -> bool:
        return abs(self.utilization - self.base_utilization) <= SAME_UTILIZATION + 1e-12


def compare_plans(
    scenario: Scenario,
    base_plan: Plan,
    plan: Plan,
    base_name: str = "FIFO",
    name: str = "the allocator",
) -> Divergence:
    """The metrics of both plans and the batch jobs whose outcome differs between them."""
    base_m, m = metrics(scenario, base_plan), metrics(scenario, plan)
    gained, lost = [], []
    pairs = zip(job_outcomes(scenario, base_plan), job_outcomes(scenario, plan), strict=True)
    for old, new in pairs:
        if _RANK[status(new)] > _RANK[status(old)]:
            gained.append((old, new))
        elif _RANK[status(new)] < _RANK[status(old)]:
            lost.append((old, new))
    return Divergence(
        base_name=base_name,
        name=name,
        base_utilization=base_m["utilization"],
        utilization=m["utilization"],
        base_value=base_m["value"],
        value=m["value"],
        base_completed=base_m["completed_jobs"],
        completed=m["completed_jobs"],
        batch_jobs=m["batch_jobs"],
        gained=tuple(gained),
        lost=tuple(lost),
    )


def explain_divergence(
    scenario: Scenario,
    base_plan: Plan,
    plan: Plan,
    base_name: str = "FIFO",
    name: str = "the allocator",
) -> str:
    """Utilization, completions and value of `plan` against `base_plan`, and the jobs behind them.

    e.g. "Same utilization (allocator 44.6%, FIFO 44.6%), the same completed jobs (27 of 30),
    +19.8% value: allocator ran higher-priority jobs instead: it completed batch-27 (priority 3),
    ...; FIFO completed sweep-21 (priority 1), ... in their place. ..."
    """
    return describe(compare_plans(scenario, base_plan, plan, base_name, name))


def describe(d: Divergence) -> str:
    """The explanation of a `Divergence` (see `explain_divergence`)."""
    figures = f"{d.name} {d.utilization:.1%}, {d.base_name} {d.base_utilization:.1%}"
    if d.same_utilization:
        utilization = f"Same utilization ({figures})"
    elif d.utilization > d.base_utilization:
        utilization = f"Higher utilization ({figures})"
    else:
        utilization = f"Lower utilization ({figures})"
    if d.completed == d.base_completed:
        completed = f"the same completed jobs ({d.completed:,} of {d.batch_jobs:,})"
    else:
        more = "more" if d.completed > d.base_completed else "fewer"
        completed = (
            f"{more} completed jobs ({d.completed:,} vs {d.base_completed:,} of {d.batch_jobs:,})"
        )
    gain = d.value_gain
    if gain is None:
        value = f"value {d.value:,.0f} (against none)"
    elif abs(gain) < 5e-4:
        value = "the same value"
    else:
        value = f"{gain:+.1%} value"
    head = f"{utilization}, {completed}, {value}"

    if not d.gained and not d.lost:
        return (
            f"{head}: every batch job has the same outcome on both plans (completed, cut by the "
            "horizon, or waiting); they differ only in when and on how many GPUs jobs run."
        )
    gained = _deeds([new for _, new in d.gained])
    lost = _deeds([old for old, _ in d.lost])
    if d.gained and d.lost:
        reason = (
            f"{d.name} ran {_kind_of_work(d)} instead: it {gained}; "
            f"{d.base_name} {lost} in their place"
        )
    elif d.gained:
        reason = f"{d.name} also {gained}, which {d.base_name} did not"
    else:
        reason = f"{d.base_name} also {lost}, which {d.name} did not"
    text = f"{head}: {reason}."
    if gain is not None and gain > 0 and d.completed < d.base_completed:
        text += (
            " A completed job counts once whatever its size and priority; value weighs every "
            "GPU-hour delivered by its job's priority."
        )
    elif gain is not None and gain > 0 and d.same_utilization:
        text += (
            " About as much work ran on both plans; value weighs each GPU-hour by its job's "
            "priority."
        )
    return text


def _kind_of_work(d: Divergence) -> str:
    """'higher-priority jobs' when what the plan took further outranks what it gave up."""
    gained = sum(new.job.priority for _, new in d.gained) / len(d.gained)
    lost = sum(old.job.priority for old, _ in d.lost) / len(d.lost)
    if gained > lost:
        return "higher-priority jobs"
    if gained < lost:
        return "lower-priority jobs"
    return "other jobs"


def _deeds(outcomes: list[JobOutcome]) -> str:
    """'completed a (priority 3), b (priority 5) and ran c (priority 8) until the horizon'."""
    completed = [o for o in outcomes if o.completed]
    cut = [o for o in outcomes if o.started and not o.completed]
    phrases = []
    if completed:
        phrases.append(f"completed {_names(completed)}")
    if cut:
        phrases.append(
            f"ran {_names(cut)} until the horizon cut {'it' if len(cut) == 1 else 'them'}"
        )
    return " and ".join(phrases)


def _names(outcomes: list[JobOutcome]) -> str:
    named = [f"{o.job.id} (priority {o.job.priority:g})" for o in outcomes[:MAX_NAMED]]
    if len(outcomes) > MAX_NAMED:
        named.append(f"{len(outcomes) - MAX_NAMED} more")
    return ", ".join(named)
