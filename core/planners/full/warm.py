"""Full mode's warm start: the plan it starts from (the given one, the allocator's, or
backfill's) and that plan's values in the per-GPU model's variables (HiGHS's MIP start)."""

from __future__ import annotations

import numpy as np

from ...model import BatchJob, Scenario
from ...plan import Plan, check


def _warm_start(scenario: Scenario, given: Plan | None) -> tuple[Plan, str]:
    """The plan to start from: the one given, else the allocator's; backfill if that fails.

    A warm start that `check` rejects is never returned, so it is replaced by backfill's plan
    (legal by construction) with a note in the stats.
    """
    from ..fifo import plan_backfill

    if given is not None:
        warm, source = Plan(given.grid.copy(), "full", {}), "the given warm start"
    else:
        try:
            from ..allocator import plan_allocator

            warm, source = Plan(plan_allocator(scenario).grid.copy(), "full", {}), "allocator"
        except Exception as exc:  # the allocator missing or failing must not stop full mode
            note = f"allocator failed ({type(exc).__name__}: {exc}); warm start is backfill"
            return Plan(plan_backfill(scenario).grid.copy(), "full", {}), note
    violations = check(scenario, warm)
    if violations:
        note = f"{source} is illegal ({violations[0]}); warm start is backfill"
        return Plan(plan_backfill(scenario).grid.copy(), "full", {}), note
    return warm, ""


class _WarmStart:
    """The MIP start of `_FullModel` (a mixin: the model's index data is `_FullModel`'s)."""

    def set_start(self, grid: np.ndarray) -> None:
        """Give every variable its value in a legal grid: HiGHS's MIP start."""
        m = self.model
        for p in range(len(self.placements)):
            m.place[p].set_value(0)
        for p in self._placements_of(grid):
            m.place[p].set_value(1)
        self._start_occupancy_and_realtime(grid)

    def _start_occupancy_and_realtime(self, grid: np.ndarray) -> None:
        """The start's block occupancy, real-time holds, counts, shortfalls and swaps."""
        m = self.model
        occupancy = {key: 0 for key in m.busy}
        for p, (_i, size, block, start, end) in enumerate(self.placements):
            if m.place[p].value:
                for t in range(start, end):
                    occupancy[size, block, t] += 1
        for key, value in occupancy.items():
            m.busy[key].set_value(value)
        for k, g, t in self.hold_cells:
            m.hold[k, g, t].set_value(int(grid[g, t] == self.realtime[k][0]))
        for k, (i, job) in enumerate(self.realtime):
            counts = (grid == i).sum(axis=0)
            for t in range(self.T):
                m.count[k, t].set_value(int(counts[t]))
                if not m.short[k, t].fixed:
                    m.short[k, t].set_value(max(0.0, job.demand[t] - float(counts[t])))
        for key in m.swap:
            if not m.swap[key].fixed:
                k, g, t = key
                now = float(self.pyo.value(self._held(k, g, t)))
                before = float(self.pyo.value(self._held(k, g, t - 1)))
                m.swap[key].set_value(abs(now - before))

    def _placements_of(self, grid: np.ndarray) -> list[int]:
        """The placement of every queued batch job that holds cells in a legal grid."""
        lookup = {
            (i, size, block, start): p
            for p, (i, size, block, start, _end) in enumerate(self.placements)
        }
        chosen = []
        for i, job in enumerate(self.scenario.jobs):
            if not isinstance(job, BatchJob) or job.running is not None:
                continue
            gpus, steps = np.nonzero(grid == i)
            if len(steps) == 0:
                continue
            low = int(gpus.min())
            size = int(gpus.max()) - low + 1
            p = lookup.get((i, size, self.block_holding(size, low), int(steps.min())))
            if p is not None:
                chosen.append(p)
        return chosen
