"""Batch work packed on node groups in a given order, each job where it delivers most.

A job's options are every (size, allowed group) with its duration at its speed there
(`core.nodes.options`). For each, the earliest start where a legal block stays free for the
whole run is found (`blocks.NodeFree`: one view per group); the job takes the option whose
reward, priority x speed x GPUs x the decayed steps it runs, is largest (ties: the earlier
start, the larger block, the lower GPU). Reward decays with the start, so the earliest start is
an option's best. Within the start found, a block in a node that is already partly held is
preferred to one that opens a fresh node (best fit), so whole nodes stay free for the jobs
that need them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...model import BatchJob, Scenario
from ...nodes import Option, options
from ..blocks import NodeFree

# Blocks looked at per placement for the best fit (the lowest ones first).
_FIT_CANDIDATES = 16


@dataclass(frozen=True)
class Placed:
    job: int  # grid index
    gpu_start: int
    gpus: int
    start: int
    end: int  # exclusive, cut at the horizon
    reward: float


class NodePacker:
    """The free GPUs left by serving and running work, and the jobs' options on them."""

    def __init__(self, scenario: Scenario, free: list[int], discount: list[float]):
        self.scenario = scenario
        c = scenario.cluster
        self.G, self.T = c.gpus, c.horizon_steps
        self.free = free
        self.discount = discount  # prefix sums of decay^t (`core.plan.discounts`)
        self.options: dict[int, list[Option]] = {}
        for i, job in enumerate(scenario.jobs):
            if isinstance(job, BatchJob) and job.running is None:
                self.options[i] = options(scenario, job)
        self.packs = 0

    def pack(self, order: list[int]) -> tuple[list[Placed], float]:
        """Each job of `order` (grid indices) at its best option on what is still free."""
        self.packs += 1
        space = NodeFree(list(self.free), self.G, self.T)
        placed, total = [], 0.0
        for i in order:
            best = self.best(space, i)
            if best is None:
                continue
            space.take(best.gpu_start, best.gpus, best.start, best.end)
            placed.append(best)
            total += best.reward
        return placed, total

    def best(self, space: NodeFree, i: int) -> Placed | None:
        job = self.scenario.jobs[i]
        D, T = self.discount, self.T
        weight = self.scenario.policy.reward_weight * job.priority
        best, best_key = None, None
        for option in self.options[i]:
            view = space.view(option.group, job.multi_node)
            found = view.earliest(option.gpus, option.duration, job.arrival_step)
            if found is None:
                continue
            start, blocks = found
            end = min(start + option.duration, T)
            reward = weight * option.speed * option.gpus * (D[end] - D[start])
            key = (-reward, start, -option.gpus)
            if best_key is not None and key >= best_key:
                continue
            gpu = self._fit(space, option, blocks, start)
            best_key = key
            best = Placed(i, gpu, option.gpus, start, end, reward)
        return best

    def _fit(self, space: NodeFree, option: Option, blocks: int, start: int) -> int:
        """The block to take among `blocks` (first GPUs) at `start`: within one node, the one
        whose node has the fewest free GPUs (it is already broken); else the lowest."""
        lowest = (blocks & -blocks).bit_length() - 1
        n = option.group.gpus_per_node
        if option.gpus >= n or blocks & (blocks - 1) == 0:
            return lowest
        free = space.free[start]
        node_mask = (1 << n) - 1
        offset = option.group.offset
        best, best_free = lowest, None
        rest = blocks
        for _ in range(_FIT_CANDIDATES):
            if not rest:
                break
            b = (rest & -rest).bit_length() - 1
            rest &= rest - 1
            node_first = offset + (b - offset) // n * n
            left = (free >> node_first & node_mask).bit_count()
            if best_free is None or left < best_free:
                best, best_free = b, left
                if left == option.gpus:
                    break
        return best
