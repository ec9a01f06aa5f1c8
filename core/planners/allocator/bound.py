"""An upper bound on any batch packing: the batch work's fluid relaxation on the GPUs serving
leaves.

The real-time moves and the queue check skip a trial this bound says cannot win.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..blocks import (
    first_open,
)
from .packing import _Candidate


class _FluidBound:
    """An upper bound on the decayed reward of any packing of the batch work on given free GPUs.

    The relaxation lets a job spread its cells over any free GPUs at any steps from its arrival,
    up to the most cells any of its sizes holds (`g x min(d_g, steps - arrival)`), each cell
    earning `priority x decay^t`. Jobs are suffixes of the steps and a cell's reward is a
    product of the job's priority and the step's weight (non-increasing), so taking jobs by
    priority, each on the earliest free cells, is optimal for the relaxation: an exchange that
    gives an earlier cell to the higher priority never loses.
    """

    def __init__(self, candidates: Sequence[_Candidate], discount: list[float], steps: int):
        self.candidates, self.steps = candidates, steps  # the batch work it bounds
        self.weights = [discount[t + 1] - discount[t] for t in range(steps)]
        jobs = []  # (-priority, arrival, the most cells any of its sizes holds)
        for c in candidates:
            pairs = zip(c.sizes, c.durations, strict=True)
            jobs.append(
                (-c.priority, c.arrival, max(g * min(d, steps - c.arrival) for g, d in pairs))
            )
        self.jobs = sorted(jobs)

    def reward(self, free: list[int]) -> float:
        """The bound on the GPUs `free` leaves, per step; linear in the steps and jobs (steps
        left without room are skipped for good, path-compressed)."""
        weights, T = self.weights, self.steps
        room = [m.bit_count() for m in free]
        after = [t if room[t] else t + 1 for t in range(T)] + [T]  # a step with room, or later
        total = 0.0
        for minus_priority, arrival, cells in self.jobs:
            t = first_open(after, arrival)
            earned = 0.0
            while cells and t < T:
                here = room[t]
                if here > cells:
                    room[t] = here - cells
                    earned += cells * weights[t]
                    break
                cells -= here
                earned += here * weights[t]
                room[t] = 0
                after[t] = t + 1
                t = first_open(after, t + 1)
            total -= minus_priority * earned
        return total
