"""Full mode's per-GPU model (the placement MIP of the package docstring) in Pyomo: its index
data, its rows and its decoding; the shape model, the MIP start and the solver phases are
mixins from `shapes`, `warm` and `phases`."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...model import BatchJob, RealtimeJob, Scenario
from ...nodes import allowed_gpus, group_starts, groups_of, needs_nodes, options
from ...plan import IDLE, free_blocks, pin_running
from .phases import _SolverPhases
from .shapes import _ShapeModel
from .warm import _WarmStart


def _estimate_terms(scenario: Scenario) -> int:
    """An upper bound on the model's terms, computed before any placement is enumerated."""
    G, T = scenario.cluster.gpus, scenario.cluster.horizon_steps
    terms = 3 * G * T * len(scenario.realtime_jobs)
    for job in scenario.batch_jobs:
        if job.running is None:
            starts = max(0, T - job.arrival_step)
            terms += sum(
                (G // g) * starts * min(T, scenario.duration(job, g)) for g in job.sizes() if g <= G
            )
    return terms


class _FullModel(_ShapeModel, _WarmStart, _SolverPhases):
    """The placement model of the module docstring: index data first, Pyomo objects on build."""

    def __init__(self, scenario: Scenario):
        self.scenario = scenario
        c = scenario.cluster
        self.G, self.T = c.gpus, c.horizon_steps
        policy = scenario.policy
        self.discount = policy.decay ** np.arange(self.T, dtype=float)
        self.reward_weight = policy.reward_weight
        self.penalty = policy.reward_weight * policy.penalty_weight

        pinned = np.full((self.G, self.T), IDLE, dtype=np.int32)
        pin_running(scenario, pinned)
        self.pinned = pinned
        self.free = pinned == IDLE
        self.constant = 0.0
        for i, job in enumerate(scenario.jobs):
            if isinstance(job, BatchJob) and job.running is not None:
                cells_per_step = (pinned == i).sum(axis=0)
                weight = job.priority
                if scenario.cluster.nodes:
                    weight = weight * scenario.speed_at(job, job.running.gpu_start)
                self.constant += self.reward_weight * weight * float(cells_per_step @ self.discount)

        # Placements: (job index, size, block, start, end); end exclusive, cut at T.
        self.placements: list[tuple[int, int, int, int, int]] = []
        self.rewards: list[float] = []
        self.terms = 0
        cumulative = np.concatenate([[0.0], np.cumsum(self.discount)])
        # Blocks by size: block k of size g starts at block_start[g][k]; block_of[g][gpu] is
        # the block of g holding that GPU (-1: none). Without nodes block k is [k*g, (k+1)*g).
        self.block_start: dict[int, list[int]] = {}
        self.block_of: dict[int, np.ndarray] = {}
        on_nodes = needs_nodes(scenario)
        if on_nodes:
            self._node_placements(cumulative)
        for i, job in enumerate(scenario.jobs):
            if not isinstance(job, BatchJob) or job.running is not None:
                continue
            if on_nodes:
                break
            for size in job.sizes():
                if size > self.G:
                    continue
                end_offset = scenario.duration(job, size)
                blocks = free_blocks(self.free, size)
                busy_before = np.concatenate(
                    [np.zeros((blocks.shape[0], 1), dtype=np.int64), np.cumsum(~blocks, axis=1)],
                    axis=1,
                )
                for start in range(job.arrival_step, self.T):
                    end = min(start + end_offset, self.T)
                    ok = busy_before[:, end] - busy_before[:, start] == 0
                    reward = (
                        self.reward_weight
                        * job.priority
                        * size
                        * float(cumulative[end] - cumulative[start])
                    )
                    for block in np.nonzero(ok)[0]:
                        self.placements.append((i, size, int(block), start, end))
                        self.rewards.append(reward)
                        self.terms += end - start
        self.realtime = [
            (i, job) for i, job in enumerate(scenario.jobs) if isinstance(job, RealtimeJob)
        ]
        # where each real-time job may hold GPUs: free cells of its allowed types
        self.allowed = [self.free.copy() for _ in self.realtime]
        if scenario.cluster.nodes:
            for k, (_i, job) in enumerate(self.realtime):
                mask = allowed_gpus(scenario.cluster, job)
                rows = np.array([mask >> g & 1 for g in range(self.G)], dtype=bool)
                self.allowed[k] &= rows[:, None]
        self.terms += len(self.realtime) * int(self.free.sum()) * 3
        self.model: Any = None
        self.infeasible = False  # a constraint without variables that cannot hold
        self.n_variables = 0
        self.n_constraints = 0

    def _node_placements(self, cumulative: np.ndarray) -> None:
        """The placements on a cluster with node groups (SPEC section 8): every legal block of
        an allowed group, the duration and the reward at the job's speed there."""
        scenario, c = self.scenario, self.scenario.cluster
        sizes = sorted({g for job in scenario.batch_jobs for g in job.sizes()})
        for size in sizes:
            starts = 0
            for group in groups_of(c):
                starts |= group_starts(group, size)
            first = [b for b in range(self.G) if starts >> b & 1]
            self.block_start[size] = first
            of = np.full(self.G, -1, dtype=np.int64)
            for k, b in enumerate(first):
                of[b : b + size] = k
            self.block_of[size] = of
        for i, job in enumerate(scenario.jobs):
            if not isinstance(job, BatchJob) or job.running is not None:
                continue
            for option in options(scenario, job):
                size = option.gpus
                index = {b: k for k, b in enumerate(self.block_start[size])}
                firsts = [b for b in self.block_start[size] if option.starts >> b & 1]
                if not firsts:
                    continue
                blocks = np.stack([self.free[b : b + size].all(axis=0) for b in firsts])
                busy_before = np.concatenate(
                    [np.zeros((len(firsts), 1), dtype=np.int64), np.cumsum(~blocks, axis=1)],
                    axis=1,
                )
                for start in range(job.arrival_step, self.T):
                    end = min(start + option.duration, self.T)
                    ok = busy_before[:, end] - busy_before[:, start] == 0
                    reward = (
                        self.reward_weight
                        * job.priority
                        * option.speed
                        * size
                        * float(cumulative[end] - cumulative[start])
                    )
                    for r in np.nonzero(ok)[0]:
                        self.placements.append((i, size, index[firsts[r]], start, end))
                        self.rewards.append(reward)
                        self.terms += end - start

    def first_gpu(self, size: int, block: int) -> int:
        """The first GPU of block `block` of `size`."""
        if self.block_start:
            return self.block_start[size][block]
        return block * size

    def block_holding(self, size: int, gpu: int) -> int:
        """The block of `size` that holds GPU `gpu` (-1: none)."""
        if self.block_of:
            return int(self.block_of[size][gpu])
        return gpu // size

    # -- building --------------------------------------------------------------------------

    def build(self) -> None:
        import pyomo.environ as pyo

        self.pyo = pyo
        m = self.model = pyo.ConcreteModel(name=self.scenario.name)
        m.place = pyo.Var(range(len(self.placements)), domain=pyo.Binary)
        self.hold_cells = [
            (k, g, t)
            for k in range(len(self.realtime))
            for g in range(self.G)
            for t in range(self.T)
            if self.allowed[k][g, t]
        ]
        m.hold = pyo.Var(self.hold_cells, domain=pyo.Binary)
        m.count = pyo.Var(
            [(k, t) for k, (_i, job) in enumerate(self.realtime) for t in range(self.T)],
            domain=pyo.Integers,
            bounds=lambda _m, k, _t: (self.realtime[k][1].gpus_min, self.realtime[k][1].gpus_max),
        )
        m.short = pyo.Var(
            [(k, t) for k in range(len(self.realtime)) for t in range(self.T)],
            domain=pyo.NonNegativeReals,
        )
        m.rows = pyo.ConstraintList()
        self._run_at_most_once()
        self._one_job_per_gpu_step()
        self._realtime_range_and_shortfall()
        self._swap_cap()
        self._coverage_target()
        self._objective()
        self.n_variables = sum(len(v) for v in m.component_objects(pyo.Var))
        self.n_constraints = len(m.rows)

    def _run_at_most_once(self) -> None:
        """Constraint 5: a batch job has at most one placement (it runs once or waits)."""
        by_job: dict[int, list[int]] = {}
        for p, (i, *_rest) in enumerate(self.placements):
            by_job.setdefault(i, []).append(p)
        m = self.model
        for indices in by_job.values():
            if len(indices) > 1:
                m.rows.add(self.pyo.quicksum(m.place[p] for p in indices) <= 1)

    def _one_job_per_gpu_step(self) -> None:
        """Constraint 1: per cell, block occupancy of every size plus real-time holds <= 1."""
        pyo, m = self.pyo, self.model
        active: dict[tuple[int, int, int], list[int]] = {}
        for p, (_i, size, block, start, end) in enumerate(self.placements):
            for t in range(start, end):
                active.setdefault((size, block, t), []).append(p)
        m.busy = pyo.Var(list(active), domain=pyo.NonNegativeReals, bounds=(0, 1))
        for key, indices in active.items():
            m.rows.add(m.busy[key] == pyo.quicksum(m.place[p] for p in indices))
        sizes = sorted({key[0] for key in active})
        n_rt = len(self.realtime)
        for g in range(self.G):
            for t in range(self.T):
                if not self.free[g, t]:
                    continue
                keys = [(s, self.block_holding(s, g), t) for s in sizes]
                terms = [m.busy[key] for key in keys if key in active]
                terms += [m.hold[k, g, t] for k in range(n_rt) if self.allowed[k][g, t]]
                if len(terms) > 1:
                    m.rows.add(pyo.quicksum(terms) <= 1)

    def _realtime_range_and_shortfall(self) -> None:
        """Constraint 2 for real-time jobs, and short[t] >= demand[t] - count[t]."""
        pyo, m = self.pyo, self.model
        for k, (_i, job) in enumerate(self.realtime):
            for t in range(self.T):
                held = [m.hold[k, g, t] for g in range(self.G) if self.allowed[k][g, t]]
                if not held:  # every GPU is pinned: the job holds none
                    self.infeasible |= job.gpus_min > 0
                    m.count[k, t].fix(0, skip_validation=True)
                    m.short[k, t].fix(job.demand[t])
                    continue
                count = m.count[k, t]
                m.rows.add(count == pyo.quicksum(held))
                if job.demand[t] > 0:
                    demand = job.demand[t]
                    m.rows.add(m.short[k, t] + count >= demand)
                    fraction = demand - math.floor(demand)
                    if fraction > 1e-9:  # rounding cut: the hull of integer count, short >= 0
                        m.rows.add(m.short[k, t] + fraction * count >= fraction * math.ceil(demand))
                else:
                    m.short[k, t].fix(0.0)

    def _swap_cap(self) -> None:
        """Constraint 4: GPUs gained plus released per step (from previous_gpus at 0) <= cap."""
        pyo, m = self.pyo, self.model
        swap_cells = []
        for k, (_i, job) in enumerate(self.realtime):
            if job.swap_cap >= min(self.G, 2 * job.gpus_max):
                continue  # the cap can never bind
            first = 0 if job.previous_gpus is not None else 1
            swap_cells += [(k, g, t) for g in range(self.G) for t in range(first, self.T)]
        m.swap = pyo.Var(swap_cells, bounds=(0, 1))
        by_step: dict[tuple[int, int], list] = {}
        for k, g, t in swap_cells:
            now = self._held(k, g, t)
            before = self._held(k, g, t - 1)
            if isinstance(now, float) and isinstance(before, float):
                m.swap[k, g, t].fix(abs(now - before))
            else:
                m.rows.add(m.swap[k, g, t] >= now - before)
                m.rows.add(m.swap[k, g, t] >= before - now)
            by_step.setdefault((k, t), []).append(m.swap[k, g, t])
        for (k, _t), swaps in by_step.items():
            m.rows.add(pyo.quicksum(swaps) <= self.realtime[k][1].swap_cap)

    @property
    def allowed_shortfall(self) -> float:
        """Units of shortfall `policy.rt_coverage_target` allows (inf without a target)."""
        target = self.scenario.policy.rt_coverage_target
        demanded = sum(sum(job.demand) for _i, job in self.realtime)
        if target is None or demanded <= 0:
            return math.inf
        return (1.0 - target) * demanded + 1e-9 * demanded

    def _coverage_target(self) -> None:
        """The SLO row: served >= target x demanded, i.e. total shortfall <= (1 - target) x
        demanded (short is at least the shortfall, and never more at an optimum)."""
        allowed = self.allowed_shortfall
        if math.isfinite(allowed):
            m = self.model
            self.model.rows.add(self.pyo.quicksum(m.short.values()) <= allowed)

    def _held(self, k: int, g: int, t: int) -> Any:
        """hold[k, g, t] as a variable, or a constant where the cell is pinned or before 0."""
        if t < 0:
            return 1.0 if g in (self.realtime[k][1].previous_gpus or ()) else 0.0
        return self.model.hold[k, g, t] if self.allowed[k][g, t] else 0.0

    def _objective(self) -> None:
        """J: discounted batch reward minus weighted real-time shortfall, pinned work constant."""
        pyo, m = self.pyo, self.model
        reward = pyo.quicksum(r * m.place[p] for p, r in enumerate(self.rewards))
        penalty = pyo.quicksum(
            self.penalty * job.priority * m.short[k, t]
            for k, (_i, job) in enumerate(self.realtime)
            for t in range(self.T)
            if job.demand[t] > 0
        )
        m.J = pyo.Objective(expr=self.constant + reward - penalty, sense=pyo.maximize)

    # -- decoding ------------------------------------------------------------------------------

    def decode(self) -> np.ndarray:
        """The grid of the solution loaded into the Pyomo variables."""
        m = self.model
        grid = self.pinned.copy()
        for p, (i, size, block, start, end) in enumerate(self.placements):
            value = m.place[p].value
            if value is not None and value > 0.5:
                first = self.first_gpu(size, block)
                grid[first : first + size, start:end] = i
        for k, g, t in self.hold_cells:
            value = m.hold[k, g, t].value
            if value is not None and value > 0.5:
                grid[g, t] = self.realtime[k][0]
        return grid
