"""Phase 2, batch packing: every queued job seen before any is placed.

Jobs go in an order (value per GPU-step first, or another of `_VARIANTS`), each to the size and
earliest start (not before its arrival) that earn it the most decayed value (ties: the size that
ends first, then the narrower block), on an aligned block chosen buddy-style: a block whose
parent is already partly used wins over one that would split a whole free parent, so a later
job that needs 8 GPUs still finds 8. A job cut by the horizon still earns its cells.

Free GPUs are one bitset per step, with a cache of aligned-free-block masks per size and step;
the earliest window of a block is a sliding-window AND kept in two stacks, linear in the horizon.
On clusters of up to 128 GPUs and two days of steps the packer keeps every step's free GPUs in
one integer instead (`blocks.FreeGrid`), where the earliest window of every block is a few
shifted ANDs. A packing can start from an earlier one (`base`): the jobs before the first that
moved keep their places, and where the packing rejoins the earlier state the rest is reused.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

from ...model import BatchJob, Scenario
from ...model import duration_steps as duration
from ...plan import (
    discounts,
)
from ..blocks import (
    FreeBlocks,
    FreeGrid,
    aligned_starts,
    grid_blocks,
    spread,
)
from .params import AllocatorParams


class _Packed(NamedTuple):
    """A packing of the batch work and how it was reached."""

    placements: list[tuple[int, int, int, int, int]]  # (job, first GPU, GPUs, start, end)
    reward: float  # decayed batch reward
    cells: float  # GPU-steps delivered
    order: list  # the `_Candidate`s in the order they were packed
    rule: str  # the size rule: "value" or "early"


class _Candidate(NamedTuple):
    """One batch job as the allocator sees it (a named tuple: the search makes and reads
    thousands of them)."""

    index: int  # position in scenario.jobs: the number the grid stores
    priority: float
    arrival: int
    sizes: tuple[int, ...]
    durations: tuple[int, ...]
    work: float
    worth: float  # priority x decay^arrival: what a GPU-step of it earns at its earliest start
    # (size, duration) pairs in the order the packer searches them: the most a size could earn
    # from the arrival first (ties: the earlier end, the wider), so that the sizes which cannot
    # beat the best found are skipped (the choice is the same in any order); empty: as listed
    shapes: tuple[tuple[int, int], ...] = ()


def _free_masks(gpus: int, running: list[int], realtime: dict[int, list[int]]) -> list[int]:
    taken = list(running)
    for sets in realtime.values():
        for t, mask in enumerate(sets):
            taken[t] |= mask
    all_gpus = (1 << gpus) - 1
    return [all_gpus & ~m for m in taken]


def _running_masks(scenario: Scenario, steps: int) -> list[int]:
    """Per step, the bitset of GPUs held by inherited running batch blocks."""
    masks = [0] * steps
    for job in scenario.batch_jobs:
        if job.running is not None:
            r = job.running
            block = ((1 << r.gpus) - 1) << r.gpu_start
            for t in range(min(r.remaining_steps, steps)):
                masks[t] |= block
    return masks


def _candidates(scenario: Scenario, discount: list[float] | None = None) -> list[_Candidate]:
    T, decay = scenario.cluster.horizon_steps, scenario.policy.decay
    discount = discount or discounts(scenario)
    minutes = scenario.cluster.step_minutes
    out = []
    for i, job in enumerate(scenario.jobs):
        if not isinstance(job, BatchJob) or job.running is not None or job.arrival_step >= T:
            continue
        sizes = tuple(job.sizes())
        durations = tuple([duration(job, g, minutes) for g in sizes])
        a = job.arrival_step
        shapes = ((sizes[0], durations[0]),)
        if len(sizes) > 1:  # what each size could earn per unit of priority from the
            # arrival, the most first; ties to the earlier end, then the wider
            keyed = []
            for g, d in zip(sizes, durations, strict=True):
                end = a + d if a + d < T else T
                keyed.append((g * (discount[end] - discount[a]), -end, g, d))
            keyed.sort(key=lambda k: k[:3], reverse=True)
            shapes = tuple([(g, d) for _, _, g, d in keyed])
        out.append(
            _Candidate(
                i,
                float(job.priority),
                a,
                sizes,
                durations,
                float(job.gpu_hours),
                job.priority * decay**a,
                shapes,
            )
        )
    return out


# Orderings (by value per GPU-step first: the first one by what it earns at its arrival, which
# puts work that can only start once decay has taken its value last) and size rules.
_VARIANTS: tuple[tuple[Callable[[_Candidate], tuple], str], ...] = (
    (lambda c: (-c.worth, c.arrival, -c.work, c.index), "value"),
    (lambda c: (-c.priority, -c.work, c.index), "value"),
    (lambda c: (-c.priority, -c.sizes[-1], -c.work, c.index), "early"),
    (lambda c: (-c.priority, c.work, c.index), "value"),
    (lambda c: (c.arrival, c.index), "early"),
)
# The fast path's searches start from one more: by value at arrival times GPU-hours, the jobs
# worth most on their own first. On the small path it makes some draws better and others worse
# (day small-7271), so that path keeps the five.
_FAST_VARIANTS = (*_VARIANTS[:4], (lambda c: (-c.work * c.worth, c.index), "value"), _VARIANTS[4])


# Beyond two days of hourly steps `FreeBlocks`, whose start bounds and skipped walls pay off on
# long horizons, wins over a per-step scan, and the integers of `FreeGrid` (two bits a step per
# GPU, per size) grow with the horizon.
_GRID_STEPS = 48


def _use_grid(params: AllocatorParams, gpus: int, steps: int) -> bool:
    return gpus <= params.grid_gpus and steps <= _GRID_STEPS


class _Packer:
    """Places batch blocks on free GPUs: `FreeGrid` on small clusters and short horizons,
    per-step free bitsets with per-size aligned-block caches (`FreeBlocks`) otherwise."""

    def __init__(
        self, gpus: int, steps: int, discount: list[float], free: list[int], use_grid: bool
    ):
        self.gpus, self.steps, self.discount, self.free = gpus, steps, discount, free
        self.screened: dict[int, tuple] = {}  # `_search`'s k-th ordering: (packing, trace)
        self.trace: list[tuple[dict, int, float, float]] | None = None  # of the last packing
        self.work = 0  # the jobs the last packing placed itself (not taken from a base)
        self.align = aligned_starts(gpus)
        self.grid = FreeGrid(free, gpus, steps) if use_grid else None

    def pack(
        self, order: Sequence[_Candidate], size_rule: str, base: tuple | None = None
    ) -> tuple[list[tuple[int, int, int, int, int]], float, float]:
        """Place jobs in order; returns placements (index, gpu_start, gpus, start, end),
        the decayed reward and the GPU-steps delivered.

        Size rules: "value" (the size whose window earns most), "early" (the size that starts
        earliest, ties to the larger), and the queue baselines' own: "backfill" (as "early", on
        the lowest-indexed block) and "fifo" (as "backfill", never before the previous job's
        start).

        On `FreeGrid`, `self.trace` is then the state after each job (free GPUs, placements,
        reward, GPU-steps). `base` is (order, packing, trace) of an earlier packing with the
        same rule on this packer: the jobs this order shares with it at the front take their
        places from its trace, and once both orders have placed the same jobs and reach the
        same state (free GPUs, reward, GPU-steps), the rest goes as it went there, so that
        packing is returned as it is: it holds the same cells for the same reward and GPU-steps
        as the whole order's packing (jobs may sit on each other's blocks), no better and no
        worse, which is all the descent asks of a move."""
        if self.grid is not None:
            return self._pack_grid(order, size_rule, base)
        # Larger clusters search `FreeBlocks`, which caches blocks per step and bounds starts.
        T, discount = self.steps, self.discount
        space = FreeBlocks(self.free, self.gpus, T)
        search = space.earliest
        placements = []
        reward = cells = 0.0
        by_value, queue = size_rule == "value", size_rule in ("fifo", "backfill")
        previous = 0  # the last placed job's start (the "fifo" rule starts none before it)
        self.trace = None
        for job in order:
            arrival = max(job.arrival, previous) if size_rule == "fifo" else job.arrival
            best = self._choose(job, arrival, search, by_value)
            if best is not None:
                start, g, end, blocks = best
                if queue:  # the lowest-indexed block, as the queue baselines take
                    b = (blocks & -blocks).bit_length() - 1
                else:
                    b = self._pick_block(blocks, space.free_over(start, end), g)
                previous = start
                space.take(b, g, start, end)
                placements.append((job.index, b, g, start, end))
                reward += job.priority * g * (discount[end] - discount[start])
                cells += g * (end - start)
        self.work = len(order)
        return placements, reward, cells

    def _pack_grid(self, order, size_rule: str, base: tuple | None):
        """`pack` on `FreeGrid`'s integers, its searches (`earliest`, `free_over`, `take`)
        written out here: the hot path of small clusters, where a method call per size and job
        shows in the plan's time. So is the value rule's choice of size and start (`_choose`;
        the descent packs by that rule nearly always, so a call per job shows too);
        the earliest-start rules' is `_earliest_on_grid`. `sizes` is as the grid's (the free
        GPUs at size 1, the aligned free blocks per larger size, made when first searched and
        dropped at each placement)."""
        discount = self.discount
        geometry = self.grid.geometry
        gpus, all_gpus, repeat = geometry.gpus, geometry.all_gpus, geometry.repeat
        shifts, starts, aligned = geometry.shifts, geometry.starts, geometry.aligned
        queue, fifo = size_rule in ("fifo", "backfill"), size_rule == "fifo"
        base = None if fifo else base
        first, (sizes, placements, reward, cells), trace = self._resume(order, base)
        moved = set()  # the jobs placed here or there but not both, so far
        previous = 0  # the last placed job's start (the "fifo" rule starts none before it)
        T, by_value, earliest = self.steps, size_rule == "value", self._earliest_on_grid
        grid = (T, shifts, starts, gpus, aligned)
        start = size = end = 0  # the best size's window so far (read once one is found)
        for k in range(first, len(order)):
            job = order[k]
            arrival = max(job.arrival, previous) if fifo else job.arrival
            if arrival >= T:
                blocks = 0
            elif by_value:  # `_choose`'s score compared a field at a time: the value, the
                # earlier end, the narrower (building its tuples is a good share of the time)
                best, blocks = -math.inf, 0
                priority, shapes = job.priority, job.shapes
                for g, d in shapes or zip(job.sizes, job.durations, strict=True):
                    if blocks:  # no start beats its arrival: skip sizes that cannot win there
                        e = arrival + d if arrival + d < T else T
                        value = priority * g * (discount[e] - discount[arrival])
                        if value < best and shapes:  # `shapes` go by that value, the most
                            # first (a power of two times a positive priority keeps their
                            # order): none after one below the best can win either
                            break
                        if value < best or (
                            value == best and (e > end or (e == end and g >= size))
                        ):
                            continue
                    x = sizes.get(g)
                    if x is None:  # (None again: no aligned block of g on this cluster)
                        x = grid_blocks(sizes, aligned, g) or 0
                    if not x & starts[arrival]:  # no block of g free at any step from then on
                        continue
                    for shift in shifts[d if d < T else T]:
                        x &= x >> shift
                    x &= starts[arrival]
                    if not x:
                        continue
                    s = ((x & -x).bit_length() - 1) // gpus
                    e = s + d if s + d < T else T
                    value = priority * g * (discount[e] - discount[s])
                    if value < best or (value == best and (e > end or (e == end and g >= size))):
                        continue
                    best, start, size, end, blocks = value, s, g, e, x
            else:
                start, size, end, blocks = earliest(job, arrival, sizes, grid)
            if blocks:
                g = size
                blocks = (blocks >> (start * gpus)) & all_gpus
                b = (
                    (blocks & -blocks).bit_length() - 1  # the queue baselines': the lowest
                    if queue or not blocks & (blocks - 1)
                    else self._pick_on_grid(blocks, sizes[1], start, end, g)
                )
                previous = start
                cut = ((((1 << g) - 1) << b) * repeat[end - start]) << (start * gpus)
                sizes = {1: sizes[1] & ~cut}
                placements.append((job.index, b, g, start, end))
                reward += job.priority * g * (discount[end] - discount[start])
                cells += g * (end - start)
            trace.append((sizes, len(placements), reward, cells))
            if base is not None and self._rejoins(order, k, base, moved):
                self.work = k + 1 - first
                return base[1]
        self.work = len(order) - first
        return placements, reward, cells

    def _resume(self, order, base: tuple | None):
        """Where `_pack_grid` starts: (the first job to place, the state before it (free
        sizes, placements, reward, GPU-steps), the trace so far, also `self.trace`); from the
        base's trace after the jobs `order` shares with it at the front, if any (the free
        blocks made of that state's larger sizes are kept too), else from the grid's free
        state before any job (its larger sizes made here serve every packing's first job: a
        placement makes a new dict)."""
        first = 0 if base is None else self._shared_front(order, base)
        if not first:
            self.trace = []
            return 0, (self.grid.sizes, [], 0.0, 0.0), self.trace
        sizes, placed, reward, cells = base[2][first - 1]
        self.trace = base[2][:first]
        return first, (sizes, base[1][0][:placed], reward, cells), self.trace

    @staticmethod
    def _earliest_on_grid(job: _Candidate, arrival: int, sizes: dict, grid: tuple):
        """`_choose` by the earliest-start rules with `FreeGrid.earliest` written out, on the
        grid's `sizes` (arrival before the horizon; `grid` is `_pack_grid`'s steps and
        geometry): (start, size, end, the aligned blocks free from then on the grid's bits),
        blocks 0 where no size fits. The earliest start wins, ties to the wider."""
        T, shifts, starts, gpus, aligned = grid
        best = (T, 0, T, 0)
        for g, d in job.shapes or zip(job.sizes, job.durations, strict=True):
            # no start beats its arrival: skip sizes that cannot win
            if arrival > best[0] or (arrival == best[0] and g <= best[1]):
                continue
            x = sizes.get(g)
            if x is None:  # (None again: no aligned block of g on this cluster)
                x = grid_blocks(sizes, aligned, g) or 0
            if not x & starts[arrival]:  # no block of g free at any step from then on
                continue
            for shift in shifts[d if d < T else T]:
                x &= x >> shift
            x &= starts[arrival]
            if not x:
                continue
            start = ((x & -x).bit_length() - 1) // gpus
            if start < best[0] or (start == best[0] and g > best[1]):
                best = (start, g, start + d if start + d < T else T, x)
        return best

    @staticmethod
    def _shared_front(order, base: tuple) -> int:
        """How many jobs `order` shares with the base's order at the front (the same objects)."""
        base_order = base[0]
        shared, first = min(len(order), len(base_order)), 0
        while first < shared and order[first] is base_order[first]:
            first += 1
        return first

    def _choose(self, job: _Candidate, arrival: int, search, by_value: bool):
        """The job's size and earliest start by the size rule (by value, or earliest): (start,
        size, end, blocks), or None where no size fits."""
        T, discount = self.steps, self.discount
        best = None  # (score, start, size, end, block mask)
        for g, d in job.shapes or zip(job.sizes, job.durations, strict=True):
            if best is not None:  # no start beats its arrival: skip sizes that cannot win
                if by_value:
                    e = arrival + d if arrival + d < T else T
                    bound = (job.priority * g * (discount[e] - discount[arrival]), -e, -g)
                else:
                    bound = (-arrival, g)
                if bound <= best[0]:
                    continue
            found = search(g, d, arrival)
            if found is None:
                continue
            start, blocks = found
            end = start + d if start + d < T else T
            if by_value:
                score = (job.priority * g * (discount[end] - discount[start]), -end, -g)
            else:
                score = (-start, g)
            if best is None or score > best[0]:
                best = (score, start, g, end, blocks)
        return None if best is None else best[1:]

    def _rejoins(self, order, k: int, base: tuple, moved: set) -> bool:
        """After job k: both orders have placed the same jobs so far, and this packing's
        state (free GPUs, reward, GPU-steps) is the base's there (its trace is then the
        base's)."""
        base_order, _, base_trace = base
        if k >= len(base_order):
            return False
        if order[k] is not base_order[k]:
            moved ^= {id(order[k]), id(base_order[k])}
        here = self.trace[-1]
        if moved or here[0][1] != base_trace[k][0][1] or here[2:] != base_trace[k][2:]:
            return False
        self.trace = base_trace
        return True

    def _pick_on_grid(self, blocks: int, free: int, start: int, end: int, g: int) -> int:
        """`_pick_block` on the grid's free GPUs `free`, for a window [start, end)."""
        geometry = self.grid.geometry
        for shift in geometry.shifts[end - start]:
            free &= free >> shift
        return self._pick_block(blocks, (free >> (start * geometry.gpus)) & geometry.all_gpus, g)

    def _pick_block(self, blocks: int, window: int, g: int) -> int:
        """Buddy best fit: among feasible blocks, one whose parent is not wholly free, lowest.
        Where no parent of a size is whole, one with no parent of that size at all (past the
        last aligned block of it, as GPUs 8-11 of 12 for size 8) goes first: it can never
        break one."""
        candidates = blocks
        h = g * 2
        while candidates & (candidates - 1) and h <= self.gpus:
            parents = window
            k = 1
            while k < h:
                parents &= parents >> k
                k <<= 1
            parents &= self.align[h]
            if not parents:
                outside = candidates & ~spread(self.align[h], h)
                if outside:
                    candidates = outside
                break
            keep = candidates & ~spread(parents, h)
            if keep:
                candidates = keep
                break
            h *= 2
        return (candidates & -candidates).bit_length() - 1
