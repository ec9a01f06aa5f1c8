"""Full mode's status and proof: whether a plan reaches a bound, which grid is kept (legal and
better than the warm start) and the `SolveStatus`, bound and gap its stats report."""

from __future__ import annotations

import math
from typing import Any

from ...model import Scenario
from ...plan import Plan, check, metrics, objective, plan_rank, ranks_above
from .. import SolveStatus


def _reaches(scenario: Scenario, plan: Plan, bound: float, mip_gap: float) -> bool:
    """True when the plan is within the MIP gap of the bound (and meets a coverage target)."""
    if metrics(scenario, plan)["slo_met"] is False or not math.isfinite(bound):
        return False
    value = objective(scenario, plan)
    return bound - value <= max(mip_gap * abs(value), 1e-6 * max(1.0, abs(value)))


def _closed(scenario: Scenario, outcome: dict[str, Any], warm: Plan, mip_gap: float) -> bool:
    """True when a legal candidate (or the warm start) reaches the outcome's bound."""
    plans = [Plan(grid, "full", {}) for grid in outcome["grids"]] + [warm]
    return any(
        not check(scenario, plan) and _reaches(scenario, plan, outcome["bound"], mip_gap)
        for plan in plans
    )


def _fallback(warm: Plan, base: dict[str, Any], status: SolveStatus, message: str) -> Plan:
    stats = dict(base)
    stats.update(
        status=status, message=message, bound=math.inf, gap=math.inf, objective_source="allocator"
    )
    return Plan(warm.grid, "full", stats)


def _relative_gap(value: float, bound: float) -> float:
    """(bound - value) / |value|, 0 when they agree, inf when the bound is unknown."""
    if not math.isfinite(bound) or not math.isfinite(value):
        return math.inf
    diff = bound - value
    if diff <= 1e-9 * max(1.0, abs(value)):
        return 0.0
    return diff / abs(value) if abs(value) > 1e-12 else math.inf


def _choose(
    scenario: Scenario,
    warm: Plan,
    warm_objective: float,
    base: dict[str, Any],
    outcome: dict[str, Any],
) -> Plan:
    """Keep a MIP grid only if it is legal and strictly better than the warm start (a grid
    that meets the coverage target beats one that misses it; then J)."""
    stats = dict(base)
    stats["solver_status"] = outcome["solver_status"]
    stats["mip_nodes"] = outcome["mip_nodes"]
    bound = outcome["bound"]
    chosen, source, status = warm, "allocator", None
    best = plan_rank(scenario, warm) if math.isfinite(warm_objective) else (False, -1.0, -math.inf)
    for grid in outcome["grids"]:
        candidate = Plan(grid, "full", {})
        violations = check(scenario, candidate)
        if violations:
            status = SolveStatus.CHECK_FAILED
            stats["message"] = f"MIP solution rejected by check: {violations[0]}"
            continue
        key = plan_rank(scenario, candidate)
        if ranks_above(key, best):
            chosen, source, best = candidate, "mip", key
    if source == "mip":
        status = None  # a legal improvement was found: report how the solver ended
    if not math.isfinite(warm_objective) and source != "mip":
        status = status or SolveStatus.NO_LEGAL_PLAN
        stats.setdefault("message", "neither the warm start nor the MIP gave a legal plan")
    value = objective(scenario, chosen)
    met = best[0]
    if math.isfinite(bound) and met:
        bound = max(bound, value)  # the solver's tolerance may leave it a hair below
    if status is None:
        status = _status(outcome, source)
        if status is SolveStatus.SOLVER_FAILED:
            stats["message"] = f"HiGHS stopped with status {outcome['solver_status']}"
        elif status is SolveStatus.INFEASIBLE:
            stats["message"] = "the scenario admits no legal plan"
            if scenario.policy.rt_coverage_target is not None and math.isfinite(warm_objective):
                status = SolveStatus.SLO_INFEASIBLE
                stats["message"] = (
                    f"no plan reaches the coverage target "
                    f"{scenario.policy.rt_coverage_target:g} (proved); the plan with the most "
                    f"coverage found is returned"
                )
    if status is SolveStatus.OPTIMAL and not met:  # proved: nothing reaches the target
        status = SolveStatus.SLO_INFEASIBLE
    if not met:
        stats.setdefault(
            "message",
            f"coverage target {scenario.policy.rt_coverage_target:g} not reached; the plan "
            f"with the most coverage found is returned",
        )
    gap = _relative_gap(value, bound) if met else math.inf
    stats.update(status=status, bound=float(bound), gap=gap, objective_source=source)
    return Plan(chosen.grid, "full", stats)


def _status(outcome: dict[str, Any], source: str) -> SolveStatus:
    if outcome["optimal"]:
        return SolveStatus.OPTIMAL
    if outcome["time_limit"]:
        improved = source == "mip"
        return SolveStatus.TIME_LIMIT_IMPROVED if improved else SolveStatus.TIME_LIMIT_WARM_START
    if outcome["infeasible"]:
        return SolveStatus.INFEASIBLE
    return SolveStatus.SOLVER_FAILED
