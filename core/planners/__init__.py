"""The planners behind one registry and one entry point: `solve(scenario, planner, params)`.

Each planner is a function `(scenario, params) -> Plan` in its own module with a validated,
frozen parameter dataclass beside it. `PLANNERS` is the only list of planners: the command line,
`bench`, the charts and the app's pages read names, labels, colours, roles and options from it,
so a new planner is one module plus one `PlannerSpec` below. `solve` times every planner the
same way (runtime_ms: the planner itself, input parsed, output not written).
"""

from __future__ import annotations

import dataclasses
import importlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ..model import Scenario
from ..plan import Plan


class SolveStatus(StrEnum):
    """How a planner that searches (today: `full`) ended; the value is what metrics.json says."""

    OPTIMAL = "optimal"  # proved optimal within the MIP gap
    TIME_LIMIT_IMPROVED = "time_limit_improved"  # stopped by the limit, better than the start
    TIME_LIMIT_WARM_START = "time_limit_warm_start"  # stopped by the limit, start kept
    INFEASIBLE = "infeasible"  # the scenario admits no legal plan
    SLO_INFEASIBLE = "slo_infeasible"  # no legal plan meets policy.rt_coverage_target
    SOLVER_FAILED = "solver_failed"  # the solver raised or stopped for another reason
    UNAVAILABLE = "unavailable"  # Pyomo or HiGHS missing
    CHECK_FAILED = "check_failed"  # the solver's grid broke a constraint; start kept
    TOO_LARGE = "too_large"  # the model was not built (too many terms); start kept
    NO_LEGAL_PLAN = "no_legal_plan"  # neither the start nor the solver gave a legal plan

    @property
    def solver_ran(self) -> bool:
        """False when the plan is the warm start because no solve took place."""
        return self not in (SolveStatus.UNAVAILABLE, SolveStatus.TOO_LARGE)

    @property
    def words(self) -> str:
        """The status for people ("optimal (proved)", "not solved: model too large", ...)."""
        return _STATUS_WORDS[self]


_STATUS_WORDS = {
    SolveStatus.OPTIMAL: "optimal (proved)",
    SolveStatus.TIME_LIMIT_IMPROVED: "time limit reached, improved on the allocator",
    SolveStatus.TIME_LIMIT_WARM_START: "time limit reached, allocator's plan kept",
    SolveStatus.INFEASIBLE: "no legal plan exists",
    SolveStatus.SLO_INFEASIBLE: "coverage target cannot be met (proved), most coverage kept",
    SolveStatus.SOLVER_FAILED: "solver failed, allocator's plan kept",
    SolveStatus.UNAVAILABLE: "not solved: Pyomo/HiGHS unavailable, allocator's plan kept",
    SolveStatus.CHECK_FAILED: "solver's plan rejected by the checker, allocator's plan kept",
    SolveStatus.TOO_LARGE: "not solved: model too large, allocator's plan kept",
    SolveStatus.NO_LEGAL_PLAN: "no legal plan found",
}


@dataclass(frozen=True)
class NoParams:
    """A planner without options (the queue baselines)."""


@dataclass(frozen=True)
class PlannerSpec:
    """One registered planner: what the CLI, bench, charts and pages need to know of it."""

    name: str
    label: str
    colour: str
    module: str
    function: str
    params_module: str
    params_class: str
    description: str
    # "baseline": the reference every gain is measured against (exactly one planner);
    # "fast": the recommended hot path; "search": searches up to its time limit for a better
    # plan; "exact": proves a bound, takes its time limit.
    role: str = "fast"
    # Stats beyond the SPEC metrics that the planner reports (shown beside its metrics).
    reports: tuple[str, ...] = ()
    # Chosen when a page opens.
    default: bool = True

    @property
    def exact(self) -> bool:
        return self.role == "exact"

    @property
    def searches(self) -> bool:
        """It spends up to its time limit (seconds, not milliseconds): run once, on request."""
        return self.role in ("search", "exact")

    @property
    def params(self) -> type:
        """The planner's parameter dataclass (imported on first use)."""
        return getattr(importlib.import_module(self.params_module), self.params_class)

    def option_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(self.params))

    def accepts(self, option: str) -> bool:
        return option in self.option_names()

    def make_params(self, **options: Any) -> Any:
        """Its parameters from the options it accepts; others (meant for other planners) ignored."""
        names = self.option_names()
        return self.params(**{k: v for k, v in options.items() if k in names})

    def run(self) -> Callable[..., Plan]:
        return getattr(importlib.import_module(self.module), self.function)


_SPECS = (
    PlannerSpec(
        name="fifo",
        label="FIFO (peak reservation)",
        colour="#6C757D",
        module="core.planners.fifo",
        function="plan_fifo",
        params_module="core.planners",
        params_class="NoParams",
        description="the published baseline: peak reservation for serving, batch jobs in "
        "arrival order, never starting before the previous one",
        role="baseline",
    ),
    PlannerSpec(
        name="backfill",
        label="Backfill (conservative)",
        colour="#A9B4BE",
        module="core.planners.fifo",
        function="plan_backfill",
        params_module="core.planners",
        params_class="NoParams",
        description="as FIFO, but a later job may use an earlier gap (conservative backfilling)",
        role="comparison",
    ),
    PlannerSpec(
        name="allocator",
        label="Allocator (fast)",
        colour="#0072B2",
        module="core.planners.allocator",
        function="plan_allocator",
        params_module="core.planners.allocator",
        params_class="AllocatorParams",
        description="serving follows demand within the swap cap; batch work packed by value "
        "into aligned blocks; a cheap local search on top",
        role="fast",
    ),
    PlannerSpec(
        name="thorough",
        label="Allocator (thorough)",
        colour="#56B4E9",
        module="core.planners.allocator",
        function="plan_thorough",
        params_module="core.planners.allocator",
        params_class="ThoroughParams",
        description="the allocator, then re-planned on tighter problems (a job left out, held "
        "to a size or delayed, serving priced otherwise), with jobs pinned to other blocks and "
        "the batch work re-packed, up to a time limit; for one decision, not for sweeps",
        role="search",
        reports=("time_limit_reached",),
        default=False,
    ),
    PlannerSpec(
        name="full",
        label="Full (Pyomo + HiGHS)",
        colour="#009E73",
        module="core.planners.full",
        function="plan_full",
        params_module="core.planners.full",
        params_class="FullParams",
        description="the allocator's plan warm-starts a Pyomo placement model solved by HiGHS "
        "within a time limit; reports bound and gap",
        role="exact",
        reports=("status", "bound", "gap"),
        default=False,
    ),
)

PLANNERS: Mapping[str, PlannerSpec] = {spec.name: spec for spec in _SPECS}
PLANNER_NAMES = tuple(PLANNERS)
PLANNER_LABELS = {name: spec.label for name, spec in PLANNERS.items()}
PLANNER_COLOURS = {name: spec.colour for name, spec in PLANNERS.items()}
BASELINE = next(name for name, spec in PLANNERS.items() if spec.role == "baseline")
FAST = next(name for name, spec in PLANNERS.items() if spec.role == "fast")


def planner_spec(name: str) -> PlannerSpec:
    if name not in PLANNERS:
        raise ValueError(f"unknown planner {name!r}; choose one of {', '.join(PLANNER_NAMES)}")
    return PLANNERS[name]


def planner_options(name: str, **options: Any) -> dict[str, Any]:
    """The subset of `options` the named planner accepts (e.g. a time limit only for `full`)."""
    accepted = planner_spec(name).option_names()
    return {k: v for k, v in options.items() if k in accepted}


def default_planners() -> list[str]:
    return [name for name, spec in PLANNERS.items() if spec.default]


def solve(scenario: Scenario, planner: str = FAST, params: Any = None, **options: Any) -> Plan:
    """Plan a scenario with the named planner; the plan's stats carry runtime_ms.

    `params` is the planner's parameter dataclass; keyword options build one instead (for a
    single call, e.g. `solve(s, "full", time_limit=2)`); an option the planner does not accept
    is an error here, so a typo never goes unnoticed.
    """
    spec = planner_spec(planner)
    if params is None:
        unknown = sorted(set(options) - set(spec.option_names()))
        if unknown:
            raise TypeError(f"planner {planner!r} has no option {', '.join(unknown)}")
        params = spec.params(**options)
    elif options:
        params = dataclasses.replace(params, **options)
    function = spec.run()
    started = time.perf_counter()
    plan = function(scenario, params)
    plan.stats.setdefault("runtime_ms", (time.perf_counter() - started) * 1000.0)
    plan.planner = planner
    return plan
