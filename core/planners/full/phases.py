"""Full mode's solver phases on the per-GPU model: restricted (real-time GPUs fixed), packed,
shape (batch jobs at their shapes) and the full model, on one APPSI HiGHS instance."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ...plan import IDLE, Plan, check, objective, plan_rank, ranks_above
from .params import FullParams, _Clock, _ProgressReporter
from .status import _reaches


class _SolverPhases:
    """The HiGHS runs of a `_FullModel` (a mixin: the Pyomo model is `_FullModel`'s)."""

    def solve(
        self,
        clock: _Clock,
        mip_gap: float,
        reporter: _ProgressReporter | None,
        start: np.ndarray | None,
        base: dict[str, Any],
        params: FullParams,
        shapes: set[tuple[int, int, int]] | None = None,
        bound: float = math.inf,
    ) -> dict[str, Any]:
        """Run HiGHS (restricted phase, shape phase, then the full model) from the start grid
        (set with `set_start`); candidate grids, bound, status.

        `shapes` are the (job, size, start step) of the count model's solution and `bound` its
        bound: the shape phase keeps every batch job at its shape there (any aligned block) and
        chooses real-time GPUs; a legal plan that reaches `bound` ends the solve, proved.
        """
        free_variables = sum(
            1 for v in self.model.component_data_objects(self.pyo.Var) if not v.fixed
        )
        if free_variables == 0 or self.infeasible:
            # Nothing to decide (or nothing legal): the pinned grid is the only candidate.
            value = self.constant - sum(
                self.penalty * job.priority * job.demand[t]
                for _i, job in self.realtime
                for t in range(self.T)
                if not self.free[:, t].any()
            )
            return {
                "grids": [self.decode()],
                "bound": value if not self.infeasible else math.inf,
                "optimal": not self.infeasible,
                "time_limit": False,
                "infeasible": self.infeasible,
                "solver_status": "infeasible" if self.infeasible else "nothing to decide",
                "mip_nodes": 0,
            }
        solver = self._instance(params, base)
        grids = []
        if start is not None and self.realtime and clock.left() > 4 * clock.MIN_PHASE_S:
            # Restricted phase: real-time GPUs as in the start, batch placements free. It
            # solves in a fraction of the time and hands the full model a better start; its
            # bound is not a bound of the full model and is not reported. The real-time columns
            # are fixed in HiGHS itself, so one instance serves every phase.
            share = params.restricted_share * clock.left()
            with self._fixed_realtime(solver):
                restricted = self._run_highs(
                    solver, lambda: min(share, clock.left()), reporter, True, base, False
                )
            base["restricted_objective"] = restricted["incumbent"]
            if restricted["grid"] is not None:
                grids.append(restricted["grid"])
                plan = Plan(restricted["grid"], "full", {})
                legal = not check(self.scenario, plan)
                if legal and _reaches(self.scenario, plan, bound, mip_gap):
                    restricted.update(grids=grids, bound=bound, optimal=True, time_limit=False)
                    return restricted
                if legal and ranks_above(
                    plan_rank(self.scenario, plan),
                    plan_rank(self.scenario, Plan(start, "full", {})),
                ):
                    start = restricted["grid"]
        if shapes is not None:
            # The packed phase (each batch job at its shape on one block, packed greedily) and
            # the shape phase (at its shape, any block) are restrictions: their bounds are not
            # reported; their plans are legal plans of the full model. The packed phase's plan
            # is a MIP start of the shape phase.
            packed = self._pack(shapes)
            phases = (
                ("packed", params.restricted_share, lambda p: p in packed, False),
                (
                    "shape",
                    params.shape_share,
                    lambda p: self.placements[p][:2] + (self.placements[p][3],) in shapes,
                    True,
                ),
            )
            for name, share_of_left, allowed, from_packed in phases:
                if clock.left() <= 4 * clock.MIN_PHASE_S:
                    break
                share = share_of_left * clock.left()
                with self._only_placements(solver, allowed):
                    phase = self._run_highs(
                        solver,
                        lambda share=share: min(share, clock.left()),
                        reporter,
                        from_packed,
                        base,
                        False,
                    )
                base[f"{name}_objective"] = phase["incumbent"]
                if phase["grid"] is None:
                    continue
                grids.append(phase["grid"])
                plan = Plan(phase["grid"], "full", {})
                legal = not check(self.scenario, plan)
                if legal and _reaches(self.scenario, plan, bound, mip_gap):
                    phase.update(grids=grids, bound=bound, optimal=True, time_limit=False)
                    return phase
                if legal and (
                    start is None
                    or ranks_above(
                        plan_rank(self.scenario, plan),
                        plan_rank(self.scenario, Plan(start, "full", {})),
                    )
                ):
                    start = phase["grid"]
            if start is not None:
                self.set_start(start)  # the best legal plan so far starts the full model
        full = self._solve_full(solver, clock, reporter, start is not None, base, grids)
        full["grids"] = grids
        return full

    def _solve_full(self, solver, clock: _Clock, reporter, warm: bool, base, grids: list):
        """The full model's phase (its grids appended to `grids`); where the value HiGHS
        reports is not its solution's (seen with presolve on: the solution handed back was the
        start, the value a better one's), once more without a MIP start or presolve."""
        full = self._run_highs(solver, clock.left, reporter, warm, base, True)
        if full["grid"] is not None:
            grids.append(full["grid"])
        if not full["inconsistent"] or clock.left() <= 4 * clock.MIN_PHASE_S:
            return full
        presolve = solver.highs_options.get("presolve")
        solver.highs_options["presolve"] = "off"
        try:
            full = self._run_highs(solver, clock.left, reporter, False, base, True)
        finally:
            if presolve is None:
                solver.highs_options.pop("presolve")
            else:
                solver.highs_options["presolve"] = presolve
        full["solver_status"] += " (solved again without the MIP start and presolve)"
        if full["grid"] is not None:
            grids.append(full["grid"])
        return full

    def _instance(self, params: FullParams, base: dict[str, Any]) -> Any:
        """The APPSI HiGHS solver holding the model (built once; later solves reuse it)."""
        from pyomo.contrib.appsi.solvers import Highs

        build_started = time.perf_counter()
        solver = Highs()
        solver.config.mip_gap = max(0.0, float(params.mip_gap))
        solver.config.load_solution = False
        solver.config.stream_solver = False
        solver.highs_options = {"mip_abs_gap": 1e-7}
        if self.columns > params.large_model_columns:
            # HiGHS's MIP presolve and probing cannot be interrupted and on large models they
            # alone outlast the time limit; without them the limit holds (the bound then comes
            # from the relaxation).
            solver.highs_options["presolve"] = "off"
        solver.set_instance(self.model)
        for name in (
            "check_for_new_or_removed_constraints",
            "check_for_new_or_removed_vars",
            "check_for_new_or_removed_params",
            "check_for_new_objective",
            "update_constraints",
            "update_vars",
            "update_params",
            "update_named_expressions",
            "update_objective",
        ):
            setattr(solver.update_config, name, False)
        base["build_ms"] += (time.perf_counter() - build_started) * 1000.0
        return solver

    def _pack(self, shapes: set[tuple[int, int, int]]) -> set[int]:
        """One placement per shape: in order of start (larger first), the lowest aligned block
        free for its whole run; a shape that finds none is left out."""
        by_shape: dict[tuple[int, int, int], list[int]] = {}
        for p, (i, size, _block, start, _end) in enumerate(self.placements):
            if (i, size, start) in shapes:
                by_shape.setdefault((i, size, start), []).append(p)
        grid = self.pinned.copy()
        packed = set()
        for key in sorted(by_shape, key=lambda key: (key[2], -key[1])):
            for p in by_shape[key]:  # blocks in ascending order
                i, size, block, start, end = self.placements[p]
                first = self.first_gpu(size, block)
                cells = grid[first : first + size, start:end]
                if (cells == IDLE).all():
                    cells[:] = i
                    packed.add(p)
                    break
        return packed

    @contextlib.contextmanager
    def _only_placements(self, solver: Any, allowed: Callable[[int], bool]):
        """Within the block, every placement p that is not `allowed(p)` is fixed to 0 in HiGHS
        (with presolve on, which removes them at once however large the model)."""
        highs = solver._solver_model
        columns = solver._pyomo_var_to_solver_var_map
        m = self.model
        index = np.array(
            [
                columns[id(m.place[p])]
                for p in range(len(self.placements))
                if not allowed(p) and id(m.place[p]) in columns
            ],
            dtype=np.int32,
        )
        lp = highs.getLp()
        lower = np.asarray(lp.col_lower_)[index]
        upper = np.asarray(lp.col_upper_)[index]
        zero = np.zeros(len(index))
        highs.changeColsBounds(len(index), index, zero, zero)
        options = dict(solver.highs_options)
        solver.highs_options = {**options, "presolve": "on"}
        try:
            yield
        finally:
            highs.changeColsBounds(len(index), index, lower, upper)
            solver.highs_options = options

    @contextlib.contextmanager
    def _fixed_realtime(self, solver: Any):
        """Within the block, every real-time hold and count column is fixed at its start value
        in HiGHS (the Pyomo variables are untouched); the bounds come back afterwards."""
        highs = solver._solver_model
        columns = solver._pyomo_var_to_solver_var_map
        variables = [
            v
            for component in (self.model.hold, self.model.count)
            for v in component.values()
            if not v.fixed and id(v) in columns
        ]
        index = np.array([columns[id(v)] for v in variables], dtype=np.int32)
        lp = highs.getLp()
        lower = np.asarray(lp.col_lower_)[index]
        upper = np.asarray(lp.col_upper_)[index]
        value = np.array([round(v.value or 0.0) for v in variables], dtype=float)
        highs.changeColsBounds(len(index), index, value, value)
        try:
            yield
        finally:
            highs.changeColsBounds(len(index), index, lower, upper)

    def _run_highs(
        self,
        solver: Any,
        time_limit: Callable[[], float],
        reporter: _ProgressReporter | None,
        warm_start: bool,
        base: dict[str, Any],
        reports_bound: bool,
    ) -> dict[str, Any]:
        """One HiGHS solve of the model as it stands, given `time_limit()` seconds."""
        from pyomo.contrib.appsi.base import TerminationCondition

        solver.config.warmstart = warm_start
        solver.config.time_limit = max(0.0, float(time_limit()))
        highs = solver._solver_model  # the underlying highspy.Highs: callbacks live there
        if reporter is not None:
            reporter.reports_bound = reports_bound
            highs.cbMipImprovingSolution.subscribe(reporter.on_event)
            highs.cbMipInterrupt.subscribe(reporter.on_event)
        solve_started = time.perf_counter()
        try:
            results = solver.solve(self.model)
        finally:
            base["solve_ms"] += (time.perf_counter() - solve_started) * 1000.0
            if reporter is not None:
                highs.cbMipImprovingSolution.unsubscribe(reporter.on_event)
                highs.cbMipInterrupt.unsubscribe(reporter.on_event)

        info = highs.getInfo()
        model_status = highs.getModelStatus()
        grid = None
        incumbent = math.nan
        inconsistent = False
        if results.best_feasible_objective is not None:
            results.solution_loader.load_vars()  # also the next phase's MIP start
            grid = self.decode()
            incumbent = float(results.best_feasible_objective)
            # HiGHS 1.16 can report a MIP start of a maximising model with an objective
            # constant at more than its value and stop there, claiming it optimal (see
            # `solve_shapes`): the objective is J exactly, so the grid's J must agree
            value = objective(self.scenario, Plan(grid, "full", {}))
            if abs(value - incumbent) > 1e-6 * max(1.0, abs(value)):
                inconsistent, incumbent = True, value
        bound = results.best_objective_bound
        if bound is None or not math.isfinite(bound):
            bound = math.inf
        condition = results.termination_condition
        if reporter is not None:
            reporter.final(incumbent, bound)
        return {
            "grid": grid,
            "incumbent": incumbent,
            "bound": float(bound),
            "optimal": condition == TerminationCondition.optimal and not inconsistent,
            "inconsistent": inconsistent,
            "time_limit": condition == TerminationCondition.maxTimeLimit,
            "infeasible": condition == TerminationCondition.infeasible,
            "solver_status": highs.modelStatusToString(model_status)
            if hasattr(highs, "modelStatusToString")
            else str(model_status),
            "mip_nodes": int(max(0, info.mip_node_count)),
        }
