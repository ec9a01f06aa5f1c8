"""The shape model of full mode (see the package docstring): a relaxation without blocks or
per-GPU columns, solved first in highspy for a bound on J and the shapes its shape phase
realizes."""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from ...plan import free_blocks
from .params import _ProgressReporter


class _ShapeModel:
    """The shape model of a `_FullModel` (a mixin: the index data is `_FullModel`'s)."""

    @property
    def columns(self) -> int:
        """Binary columns of the full model: placements plus real-time holds."""
        return len(self.placements) + len(self.realtime) * int(self.free.sum())

    @property
    def shapes(self) -> list[tuple[int, int, int, int, float]]:
        """Every (job, size, start, end, reward) some aligned block admits: a placement without
        its block."""
        if not hasattr(self, "_shapes"):
            seen: dict[tuple[int, int, int], tuple[int, int, int, int, float]] = {}
            for (i, size, _block, start, end), reward in zip(
                self.placements, self.rewards, strict=True
            ):
                seen.setdefault((i, size, start), (i, size, start, end, reward))
            self._shapes = list(seen.values())
        return self._shapes

    def _shape_program(self, integer: bool) -> tuple[Any, dict[str, int]]:
        """The shape model as a highspy.Highs (maximising J) and where its columns start.

        It keeps what every legal plan must satisfy and forgets where things are. A batch job
        chooses a shape (size and start) or none; a real-time job only its count per step.
        Per step and per size g >= 2: the jobs of size >= g hold size/g distinct wholly free
        aligned g-blocks, so at most as many as are free at that step; and the batch cells plus
        the counts fit in the free GPUs. A count moves by at most swap_cap a step (gains plus
        releases are at least the change in count; from previous_gpus at step 0); shortfall
        rows, their rounding cuts and the coverage row are the full model's. Where a job
        starts is known (previous_gpus): a block it starts in stays out of the whole-block
        count until it pays the swaps to leave (`_previous_rows`). So every legal plan is a
        solution of this model with the same J, and its optimum (or any dual bound HiGHS
        proves on it) bounds J. It has a column per shape rather than per block and no
        per-GPU columns: HiGHS solves it in a fraction of the full model's time.
        """
        import highspy
        from pyomo.common.tee import capture_output

        shapes, R, T = self.shapes, len(self.realtime), self.T
        Y = len(shapes)
        count0, short0 = Y, Y + R * T
        n_cols = short0 + R * T
        cost = np.zeros(n_cols)
        lower = np.zeros(n_cols)
        upper = np.ones(n_cols)
        cost[:Y] = [reward for *_rest, reward in shapes]
        rows: list[tuple[float, float, list[int], list[float]]] = []
        by_job: dict[int, list[int]] = {}
        for n, (i, *_rest) in enumerate(shapes):
            by_job.setdefault(i, []).append(n)
        rows += [(-math.inf, 1.0, ns, [1.0] * len(ns)) for ns in by_job.values() if len(ns) > 1]
        active: list[list[int]] = [[] for _ in range(T)]
        for n, (_i, _size, start, end, _reward) in enumerate(shapes):
            for t in range(start, end):
                active[t].append(n)
        largest = max((size for _i, size, *_rest in shapes), default=1)
        levels = [1 << k for k in range(1, largest.bit_length())]
        whole_blocks = {g: free_blocks(self.free, g) for g in levels}
        whole = {g: blocks.sum(axis=0) for g, blocks in whole_blocks.items()}
        tracks, stays, occupied, shared, n_extra = self._previous_columns(levels, n_cols)
        cost = np.concatenate([cost, np.zeros(n_extra)])
        lower = np.concatenate([lower, np.zeros(n_extra)])
        upper = np.concatenate([upper, np.ones(n_extra)])
        self._previous_rows(rows, tracks, stays, occupied, shared, count0)
        n_cols += n_extra
        for t in range(T):
            cols = active[t] + [count0 + k * T + t for k in range(R)]
            values = [float(shapes[n][1]) for n in active[t]] + [1.0] * R
            rows.append((-math.inf, float(self.free[:, t].sum()), cols, values))
            for g in levels:
                big = [n for n in active[t] if shapes[n][1] >= g]
                if big:
                    values = [shapes[n][1] / g for n in big]
                    held = [
                        shared.get((g, block), firsts[0]) + t
                        for (level, block), firsts in occupied.items()
                        if level == g and whole_blocks[g][block, t]
                    ]
                    rows.append(
                        (-math.inf, float(whole[g][t]), big + held, values + [1.0] * len(held))
                    )
        for k, (_i, job) in enumerate(self.realtime):
            for t in range(T):
                c, sh = count0 + k * T + t, short0 + k * T + t
                lower[c], upper[c] = job.gpus_min, job.gpus_max
                upper[sh] = math.inf
                cost[sh] = -self.penalty * job.priority
                demand = job.demand[t]
                rows.append((demand, math.inf, [sh, c], [1.0, 1.0]))
                fraction = demand - math.floor(demand)
                if fraction > 1e-9:  # the full model's rounding cut (count is integer)
                    rows.append((fraction * math.ceil(demand), math.inf, [sh, c], [1.0, fraction]))
                if t > 0:
                    rows.append((-job.swap_cap, job.swap_cap, [c, c - 1], [1.0, -1.0]))
            if job.previous_gpus is not None:
                held = len(job.previous_gpus)
                c = count0 + k * T
                lower[c] = max(lower[c], held - job.swap_cap)
                upper[c] = min(upper[c], held + job.swap_cap)
        if math.isfinite(self.allowed_shortfall):
            shorts = list(range(short0, short0 + R * T))
            rows.append((-math.inf, self.allowed_shortfall, shorts, [1.0] * len(shorts)))
        starts = np.cumsum([0] + [len(r[2]) for r in rows])
        indices = np.array([c for r in rows for c in r[2]], dtype=np.int32)
        values = np.array([v for r in rows for v in r[3]], dtype=float)
        inf = highspy.kHighsInf
        with capture_output(capture_fd=True):  # the banner HiGHS prints when it is created
            h = highspy.Highs()
            h.setOptionValue("output_flag", False)
        h.addVars(n_cols, np.maximum(lower, -inf), np.minimum(upper, inf))
        h.changeColsCost(n_cols, np.arange(n_cols, dtype=np.int32), cost)
        if rows:
            h.addRows(
                len(rows),
                np.array([max(r[0], -inf) for r in rows]),
                np.array([min(r[1], inf) for r in rows]),
                len(indices),
                starts[:-1].astype(np.int32),
                indices,
                values,
            )
        if integer:
            integral = np.arange(short0, dtype=np.int32)  # shapes and counts
            integral = np.concatenate(
                [integral, *(np.arange(first, first + 2 * T) for first in stays.values())]
            ).astype(np.int32)
            h.changeColsIntegrality(
                len(integral), integral, np.full(len(integral), highspy.HighsVarType.kInteger)
            )
        h.changeObjectiveSense(highspy.ObjSense.kMaximize)
        h.changeObjectiveOffset(self.constant)
        return h, {
            "count": count0,
            "short": short0,
            "columns": n_cols,
            "tracks": tracks,
            "stays": stays,
            "shared": shared,
        }

    def _previous_columns(self, levels: list[int], first: int) -> tuple[Any, ...]:
        """The columns of `_previous_rows`, numbered from `first`: (tracks, stays (first
        column per track: stays[t], then leaves[t]), occupied (per block, its tracks' stays),
        shared (per block more than one job starts in, a column per step), how many)."""
        tracks = self._previous_tracks(levels)
        stays: dict[tuple[int, int, int], int] = {}
        n_extra = 0
        for k, g, block, _held in tracks:
            stays[k, g, block] = first + n_extra
            n_extra += 2 * self.T
        occupied: dict[tuple[int, int], list[int]] = {}
        for k, g, block, _held in tracks:
            occupied.setdefault((g, block), []).append(stays[k, g, block])
        shared: dict[tuple[int, int], int] = {}
        for key, firsts in occupied.items():
            if len(firsts) > 1:
                shared[key] = first + n_extra
                n_extra += self.T
        return tracks, stays, occupied, shared, n_extra

    def _previous_tracks(self, levels: list[int]) -> list[tuple[int, int, int, int]]:
        """(job k, size g, block, GPUs of previous_gpus in it) for every aligned g-block a
        swap-capped real-time job starts in."""
        tracks = []
        for k, (_i, job) in enumerate(self.realtime):
            if not job.previous_gpus or job.swap_cap >= min(self.G, 2 * job.gpus_max):
                continue
            for g in levels:
                held: dict[int, int] = {}
                for gpu in job.previous_gpus:
                    if gpu // g < self.G // g:
                        held[gpu // g] = held.get(gpu // g, 0) + 1
                tracks += [(k, g, block, n) for block, n in sorted(held.items())]
        return tracks

    def _previous_rows(self, rows, tracks, stays, occupied, shared, count0) -> None:
        """Where a real-time job starts (previous_gpus) costs swaps to leave: a block it has
        held since before step 0 is not wholly free for batch work until it leaves, and
        leaving releases every GPU it holds there (all of previous_gpus in it at step 0, at
        least one later). Gains plus releases are 2 x releases + the change in count, so per
        size, 2 x the blocks left (weighted so at step 0) + count[t] - count[t-1] <= swap_cap.
        `stays[t]` is 1 while the job has held the block at every step so far."""
        T = self.T
        for k, g, _block, _held in tracks:
            stay = stays[k, g, _block]
            leave = stay + T
            rows.append((1.0, math.inf, [stay, leave], [1.0, 1.0]))  # held before step 0
            for t in range(1, T):
                rows.append((0.0, math.inf, [stay + t, leave + t, stay + t - 1], [1.0, 1.0, -1.0]))
        by_level: dict[tuple[int, int], list[tuple[int, int]]] = {}
        for k, g, block, held in tracks:
            by_level.setdefault((k, g), []).append((stays[k, g, block] + T, held))
        for (k, _g), leaves in by_level.items():
            job = self.realtime[k][1]
            c = count0 + k * T
            cols = [leave for leave, _held in leaves] + [c]
            values = [2.0 * held for _leave, held in leaves] + [1.0]
            rows.append((-math.inf, job.swap_cap + len(job.previous_gpus), cols, values))
            for t in range(1, T):
                cols = [leave + t for leave, _held in leaves] + [c + t, c + t - 1]
                values = [2.0] * len(leaves) + [1.0, -1.0]
                rows.append((-math.inf, float(job.swap_cap), cols, values))
        for key, column in shared.items():
            for first in occupied[key]:
                for t in range(T):
                    rows.append((0.0, math.inf, [column + t, first + t], [1.0, -1.0]))

    def relaxation_bound(self, time_limit: float) -> float:
        """The LP bound of the shape model (inf if not solved): an upper bound on J."""
        import highspy

        h, _layout = self._shape_program(integer=False)
        h.setOptionValue("time_limit", max(0.05, float(time_limit)))
        h.run()
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            return math.inf
        value = h.getInfo().objective_function_value
        return value + 1e-6 * max(1.0, abs(value))  # LP tolerances: stay on the safe side

    def _shape_start(self, grid: np.ndarray, layout: dict[str, int]) -> np.ndarray:
        """A legal grid as a solution of the shape model (its MIP start)."""
        values = np.zeros(layout["columns"])
        column = {(i, size, start): n for n, (i, size, start, *_rest) in enumerate(self.shapes)}
        for p in self._placements_of(grid):
            i, size, _block, start, _end = self.placements[p]
            values[column[i, size, start]] = 1.0
        for k, (i, job) in enumerate(self.realtime):
            counts = (grid == i).sum(axis=0)
            for t in range(self.T):
                values[layout["count"] + k * self.T + t] = counts[t]
                values[layout["short"] + k * self.T + t] = max(0.0, job.demand[t] - counts[t])
        stayed: dict[tuple[int, int], np.ndarray] = {}
        for k, g, block, _held in layout["tracks"]:
            touched = (grid[block * g : (block + 1) * g] == self.realtime[k][0]).any(axis=0)
            stays = np.logical_and.accumulate(touched)
            leaves = np.concatenate([[True], stays[:-1]]) & ~touched
            first = layout["stays"][k, g, block]
            values[first : first + self.T] = stays
            values[first + self.T : first + 2 * self.T] = leaves
            stayed[g, block] = stayed.get((g, block), np.zeros(self.T, dtype=bool)) | stays
        for (g, block), column in layout["shared"].items():
            values[column : column + self.T] = stayed[g, block]
        return values

    def solve_shapes(
        self,
        time_limit: float,
        start: np.ndarray | None,
        mip_gap: float,
        reporter: _ProgressReporter | None,
    ) -> dict[str, Any]:
        """Solve the shape model: its bound (valid for J) and the (job, size, start) of its best
        solution (None when it has none), for the full model's shape phase.

        HiGHS 1.16 can take a MIP start of this maximising model with an objective constant at
        more than its value and stop at the root claiming it optimal: the objective it reports
        is then not its solution's (uniform-priority, with the allocator's plan of 362.65 as
        the start: "optimal" at 410.65, the solution 362.65, the optimum 375.29). Where the two
        disagree, the model is solved again without the start in the time left."""
        started = time.perf_counter()
        shaped = self._solve_shapes(time_limit, start, mip_gap, reporter)
        if not shaped.pop("inconsistent") or start is None:
            return shaped
        left = time_limit - (time.perf_counter() - started)
        if left <= 0.05:
            shaped.update(optimal=False, solver_status="MIP start scored inconsistently")
            return shaped
        again = self._solve_shapes(left, None, mip_gap, reporter)
        again.pop("inconsistent")
        again["build_ms"] += shaped["build_ms"]
        again["solver_status"] += " (solved again without the MIP start)"
        return again

    def _solve_shapes(self, time_limit, start, mip_gap, reporter) -> dict[str, Any]:
        import highspy

        build_started = time.perf_counter()
        h, layout = self._shape_program(integer=True)
        build_s = time.perf_counter() - build_started
        h.setOptionValue("time_limit", max(0.05, float(time_limit) - build_s))
        h.setOptionValue("mip_rel_gap", max(0.0, float(mip_gap)))
        h.setOptionValue("mip_abs_gap", 1e-7)
        if start is not None:
            solution = highspy.HighsSolution()
            solution.col_value = list(self._shape_start(start, layout))
            solution.value_valid = True
            h.setSolution(solution)
        best_bound = [math.inf]  # HiGHS's dual bound only falls; a restart may forget it

        def on_event(event: Any) -> None:
            value = event.data_out.mip_dual_bound
            if abs(value) < 1e30:
                best_bound[0] = min(best_bound[0], float(value))
            if reporter is not None:
                reporter.on_event(event)

        if reporter is not None:
            reporter.reports_incumbent = False  # a shape solution is not yet a plan
            h.cbMipImprovingSolution.subscribe(on_event)
        h.cbMipInterrupt.subscribe(on_event)
        try:
            h.run()
        finally:
            if reporter is not None:
                h.cbMipImprovingSolution.unsubscribe(on_event)
                reporter.reports_incumbent = True
            h.cbMipInterrupt.unsubscribe(on_event)
        status = h.getModelStatus()
        info = h.getInfo()
        bound = float(info.mip_dual_bound)
        if not abs(bound) < 1e30:
            bound = math.inf
        bound = min(bound, best_bound[0])
        chosen, inconsistent = None, False
        if info.primal_solution_status == 2:  # kSolutionStatusFeasible
            values = np.asarray(h.getSolution().col_value)
            lp = h.getLp()
            scored = float(np.dot(lp.col_cost_, values)) + lp.offset_
            reported = float(info.objective_function_value)
            inconsistent = abs(scored - reported) > 1e-6 * max(1.0, abs(scored))
            chosen = {
                (i, size, start)
                for (i, size, start, *_rest), value in zip(self.shapes, values, strict=False)
                if value > 0.5
            }
        if status == highspy.HighsModelStatus.kOptimal and not inconsistent:
            bound = max(bound, float(info.objective_function_value))
        return {
            "bound": bound,
            "infeasible": status == highspy.HighsModelStatus.kInfeasible,
            "optimal": status == highspy.HighsModelStatus.kOptimal and not inconsistent,
            "incumbent": float(info.objective_function_value) if chosen is not None else math.nan,
            "shapes": chosen,
            "solver_status": h.modelStatusToString(status),
            "mip_nodes": int(max(0, info.mip_node_count)),
            "build_ms": build_s * 1000.0,
            "inconsistent": inconsistent,
        }
