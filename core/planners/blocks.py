"""Aligned power-of-two blocks on free GPUs: the earliest-window search the planners share.

Free GPUs are one Python integer per step used as a bitset (bit g set: GPU g free); the aligned
free blocks of a size at a step are a bitset too, with a bit at each block's first GPU (which
aligned blocks are free on a boolean grid is `core.plan.free_blocks`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np

from ..nodes import Group, group_starts


def bool_to_bitsets(free: np.ndarray) -> list[int]:
    """One bitset per step from a (gpus x steps) boolean grid (bit g: row g is True)."""
    packed = np.packbits(free, axis=0, bitorder="little")  # (ceil(gpus / 8) x steps)
    return [int.from_bytes(column.tobytes(), "little") for column in packed.T]


def bitsets_to_bool(sets: list[int], gpus: int) -> np.ndarray:
    """(steps x gpus) boolean array from one bitset per step."""
    width = (gpus + 7) // 8
    raw = b"".join(s.to_bytes(width, "little") for s in sets)
    bits = np.unpackbits(np.frombuffer(raw, dtype=np.uint8), bitorder="little")
    return bits.reshape(len(sets), width * 8)[:, :gpus].astype(bool)


def earliest_window(
    blocks_at: Callable[[int], int],
    steps: int,
    d: int,
    arrival: int,
    walls: list[int],
) -> tuple[int, int] | None:
    """(start, blocks) of the earliest start >= arrival where some aligned block (a bit of
    `blocks_at(t)`) stays free for d steps (cut at the horizon), or None.

    A sliding window over the steps, its AND kept in two stacks (the classic queue of two
    stacks): `front` holds the ANDs of [t, middle) for the starts t still to try, `back` the AND
    of [middle, end). Each step is pushed once and moved to the front once, so one query costs
    O(steps) bitset ANDs whatever the duration. A step with no free block (a wall: free only
    shrinks, so it stays one) restarts the window after it and is recorded in `walls`, skip
    pointers (`walls[t]` is t, or a later step with no wall known between: length steps + 1)
    that later searches jump with path compression.
    """
    if arrival >= steps:
        return None
    s = first_open(walls, arrival)
    front: list[int] = []
    end = s
    back = -1  # every bit: the AND of no steps
    while s < steps:
        stop = min(s + d, steps)
        while end < stop:
            here = blocks_at(end)
            if not here:
                walls[end] = end + 1
                s = end = first_open(walls, end + 1)
                if front:
                    front = []
                back = -1
                break
            back &= here
            end += 1
        else:
            window = front[-1] & back if front else back
            if window:
                return s, window
            if not front:
                acc = -1
                for t in range(end - 1, s - 1, -1):
                    acc &= blocks_at(t)
                    front.append(acc)
                back = -1
            front.pop()
            s += 1
    return None


def first_open(skips: list[int], t: int) -> int:
    """The first step >= t that skip pointers do not pass over (`skips[t]` is t, or a later
    step with nothing open between), with path compression on the way: the walls of
    `earliest_window`, the full steps of the allocator's fluid bound."""
    root = t
    while skips[root] != root:
        root = skips[root]
    while skips[t] != root:
        skips[t], t = root, skips[t]
    return root


@functools.cache
def aligned_starts(gpus: int) -> dict[int, int]:
    """Per block size (1, 2, 4, ... up to gpus): the bitset of the first GPUs of its aligned
    blocks."""
    out = {}
    g = 1
    while g <= gpus:
        out[g] = sum(1 << b for b in range(0, gpus - g + 1, g))
        g *= 2
    return out


class FreeBlocks:
    """Free GPUs per step and, per block size, the aligned free blocks of each step (cached;
    a placement makes the cache of its steps stale). Free only shrinks."""

    def __init__(
        self,
        free: np.ndarray | list[int],
        gpus: int,
        steps: int,
        align: dict[int, int] | None = None,
        shared: bool = False,
    ):
        """`align`: per size, the legal first GPUs (default: the multiples of the size; a node
        group's own, `core.nodes.group_starts`, for a view of one group). `shared`: keep the
        list `free` itself, which other views of the same cluster share (`NodeFree`)."""
        self.gpus, self.steps = gpus, steps
        if isinstance(free, np.ndarray):
            self.free = bool_to_bitsets(free)
        else:
            self.free = free if shared else list(free)
        self.align = aligned_starts(gpus) if align is None else align
        # the GPUs a block of 1 may use: all of them, or a group's
        self.singles = self.align.get(1, 0)
        self.every = self.singles == (1 << gpus) - 1
        # cache[g]: per step, the aligned free blocks of g, or None where a placement made it
        # stale; made on a size's first search. The blocks of 1 are the free GPUs themselves.
        self.cache: dict[int, list[int | None]] = {1: self.free}  # type: ignore[dict-item]
        # walls[g]: skip pointers over the steps where no aligned block of g is free (free only
        # shrinks, so a wall stays one): searches jump them (`earliest_window`).
        self.walls: dict[int, list[int]] = {}
        # seen[g]: recent answers (arrival, duration, earliest start or `steps` when none) for
        # blocks of g. A window of g for d steps from s holds one of any smaller size and
        # duration, and free only shrinks: an answer bounds every query it dominates.
        self.seen: dict[int, list[tuple[int, int, int]]] = {g: [] for g in self.align}
        # failed[g]: the minimal (arrival, duration) of the queries for g that found nothing.
        self.failed: dict[int, list[tuple[int, int]]] = {g: [] for g in self.align}

    def blocks_at(self, g: int) -> Callable[[int], int]:
        """t -> the bitset of first GPUs of the aligned blocks of g wholly free at step t. A
        block of g is two free halves, so it comes from the half size's entry when that one is
        fresh (sizes are usually searched smallest first)."""
        if g == 1:
            if self.every:
                return self.free.__getitem__
            free, singles = self.free, self.singles
            return lambda t: free[t] & singles
        free, align = self.free, self.align[g]
        cache = self.cache.setdefault(g, [None] * self.steps)
        half = g // 2
        halves = self.cache.get(half)

        def blocks(t: int) -> int:
            here = cache[t]
            if here is None:
                lower = halves[t] if halves is not None else None
                if lower is not None:
                    here = lower & (lower >> half) & align
                else:
                    here, k = free[t], 1
                    while k < g:
                        here &= here >> k
                        k <<= 1
                    here &= align
                cache[t] = here
            return here

        return blocks

    def earliest(self, g: int, d: int, arrival: int) -> tuple[int, int] | None:
        """`earliest_window` for g GPUs, d steps, from arrival: (start, blocks) or None."""
        if g not in self.align or self.known_to_fail(g, d, arrival):
            return None
        start = self.known_bound(g, d, arrival)
        found = None
        if start < self.steps:
            walls = self.walls.setdefault(g, list(range(self.steps + 1)))
            found = earliest_window(self.blocks_at(g), self.steps, d, start, walls)
        if found is None:  # kept as a Pareto frontier: the queries it dominates fail too
            failed = self.failed[g]
            failed[:] = [(a, e) for a, e in failed if a < arrival or e < d]
            failed.append((arrival, d))
            return None
        answers = self.seen[g]
        answers.append((arrival, d, found[0]))
        if len(answers) > 16:
            del answers[0]
        return found

    def known_to_fail(self, g: int, d: int, arrival: int) -> bool:
        """An earlier query of g or a smaller size, from no later and for no longer, found
        nothing (and free only shrinks)."""
        h = g
        while h >= 1:
            for a, e in self.failed[h]:
                if a <= arrival and e <= d:
                    return True
            h //= 2
        return False

    def known_bound(self, g: int, d: int, arrival: int) -> int:
        """The latest earliest-start answer that bounds a query for g GPUs, d steps, from
        arrival (at least arrival)."""
        bound = arrival
        h = g
        while h >= 1:
            for a, e, s in self.seen[h]:
                if a <= arrival and e <= d and s > bound:
                    bound = s
            h //= 2
        return bound

    def free_over(self, start: int, end: int) -> int:
        """The GPUs free at every step of [start, end), as a bitset."""
        window = self.free[start]
        for t in range(start + 1, end):
            window &= self.free[t]
        return window

    def take(self, gpu_start: int, g: int, start: int, end: int) -> None:
        """GPUs [gpu_start, gpu_start + g) are no longer free over steps [start, end)."""
        block = ~(((1 << g) - 1) << gpu_start)
        free = self.free
        for t in range(start, end):
            free[t] &= block
        self.stale(start, end)

    def stale(self, start: int, end: int) -> None:
        """Forget the cached blocks of steps [start, end) (their free GPUs changed)."""
        stale = [None] * (end - start)
        for g, masks in self.cache.items():
            if g > 1:  # the blocks of 1 are `free`, just updated
                masks[start:end] = stale


class NodeFree:
    """The free GPUs of a cluster with node groups, seen through one `FreeBlocks` per group
    (and multi_node setting): each view searches its group's legal blocks, all share one list
    of free bitsets, and a placement in any view makes the others' caches stale."""

    def __init__(self, free: np.ndarray | list[int], gpus: int, steps: int):
        self.gpus, self.steps = gpus, steps
        self.free = bool_to_bitsets(free) if isinstance(free, np.ndarray) else free
        self.views: dict[tuple[int, bool], FreeBlocks] = {}

    def view(self, group: Group, multi_node: bool = True) -> FreeBlocks:
        """The view of one `core.nodes.Group` (made on first use)."""
        key = (group.index, multi_node)
        view = self.views.get(key)
        if view is None:
            align = {}
            g = 1
            while g <= group.gpus:
                starts = group_starts(group, g, multi_node)
                if starts:
                    align[g] = starts
                g *= 2
            view = self.views[key] = FreeBlocks(self.free, self.gpus, self.steps, align, True)
        return view

    def take(self, gpu_start: int, g: int, start: int, end: int) -> None:
        """GPUs [gpu_start, gpu_start + g) are no longer free over steps [start, end)."""
        block = ~(((1 << g) - 1) << gpu_start)
        free = self.free
        for t in range(start, end):
            free[t] &= block
        for view in self.views.values():
            view.stale(start, end)


def top_bits(mask: int, count: int) -> int:
    """The `count` highest set bits of mask (all of them if it has fewer)."""
    if count <= 0:
        return 0
    if mask.bit_count() <= count:
        return mask
    if count == 1:  # the common case (serving gains a GPU at a time)
        return 1 << (mask.bit_length() - 1)
    low, high = 0, mask.bit_length()  # the lowest cut keeping >= count bits above it
    while low < high:
        middle = (low + high + 1) // 2
        if (mask >> middle).bit_count() >= count:
            low = middle
        else:
            high = middle - 1
    return mask >> low << low


def low_bits(mask: int, count: int) -> int:
    """The `count` lowest set bits of mask (all of them if it has fewer)."""
    if count <= 0:
        return 0
    if mask.bit_count() <= count:
        return mask
    if count == 1:
        return mask & -mask
    low, high = 1, mask.bit_length()  # the shortest prefix holding >= count bits
    while low < high:
        middle = (low + high) // 2
        if (mask & ((1 << middle) - 1)).bit_count() >= count:
            high = middle
        else:
            low = middle + 1
    return mask & ((1 << low) - 1)


def spread(starts: int, size: int) -> int:
    """Every GPU of the aligned blocks of `size` whose first GPUs are the bits of starts."""
    width = 1
    while width < size:
        starts |= starts << width
        width *= 2
    return starts


def mask_of(gpus: Sequence[int]) -> int:
    """The bitset of the GPUs listed."""
    mask = 0
    for g in gpus:
        mask |= 1 << g
    return mask


class FreeGrid:
    """The free GPUs of every step in one integer, and the aligned free blocks of each size.

    Bit `t * gpus + g` is set while GPU g is free at step t (for a block size above 1: while the
    aligned block that starts at g is wholly free); the steps from `steps` to `2 * steps` are
    always free, so a window cut by the horizon needs no special case. The earliest start of
    a window of d steps on any block is then the lowest bit of a few shifted ANDs of one
    integer, where a per-step scan costs a Python iteration a step; a placement clears its
    cells in one AND, and each larger size is two halves ANDed again when next searched. Meant
    for clusters of up to about a hundred GPUs on short horizons (the allocator's hot path):
    the integer holds `2 * steps * gpus` bits, and beyond that size `FreeBlocks` is faster.
    The allocator's packer writes `earliest`, `free_over` and `take` out in its own loop (a
    method call per size and job shows in its time); tests hold both to the definition.
    """

    __slots__ = ("geometry", "sizes")

    def __init__(self, free: Sequence[int], gpus: int, steps: int):
        geometry = _grid_geometry(gpus, steps)
        x = geometry.beyond
        for t, mask in enumerate(free):
            x |= mask << (t * gpus)
        self.geometry = geometry
        self.sizes = {1: x}  # the larger sizes are made when first searched

    def earliest(self, g: int, d: int, arrival: int) -> tuple[int, int] | None:
        """(start, blocks): the earliest start >= arrival where some aligned block of g stays
        free for d steps (cut at the horizon), and the bitset of the first GPUs of every such
        block at that start; None if there is none (as `earliest_window`)."""
        geometry = self.geometry
        x = self.sizes.get(g)
        if x is None:
            x = self._size(g)
            if x is None:  # no aligned block of g on this cluster
                return None
        if arrival >= geometry.steps:
            return None
        for shift in geometry.shifts[d if d < geometry.steps else geometry.steps]:
            x &= x >> shift
        x &= geometry.starts[arrival]
        if not x:
            return None
        start = ((x & -x).bit_length() - 1) // geometry.gpus
        return start, (x >> (start * geometry.gpus)) & geometry.all_gpus

    def free_over(self, start: int, end: int) -> int:
        """The GPUs free at every step of [start, end), as a bitset."""
        x = self.sizes[1]
        for shift in self.geometry.shifts[end - start]:
            x &= x >> shift
        return (x >> (start * self.geometry.gpus)) & self.geometry.all_gpus

    def take(self, gpu_start: int, g: int, start: int, end: int) -> None:
        """GPUs [gpu_start, gpu_start + g) are no longer free over steps [start, end)."""
        geometry = self.geometry
        cells = ((((1 << g) - 1) << gpu_start) * geometry.repeat[end - start]) << (
            start * geometry.gpus
        )
        self.sizes = {1: self.sizes[1] & ~cells}

    def _size(self, g: int) -> int | None:
        """The aligned blocks of g: two free halves (made and kept on the way)."""
        return grid_blocks(self.sizes, self.geometry.aligned, g)


def grid_blocks(sizes: dict[int, int], aligned: dict[int, int], g: int) -> int | None:
    """`FreeGrid`'s aligned free blocks of size g (its `sizes[g]`), from two free halves, made
    and kept in `sizes` on the way; None where the cluster has no aligned block of g
    (`aligned` is the geometry's)."""
    if g not in aligned:
        return None
    half = g // 2
    while half not in sizes:  # the sizes made so far are 1, 2, 4, ... up to some size
        half //= 2
    x = sizes[half]
    while half < g:
        x &= (x >> half) & aligned[2 * half]
        half *= 2
        sizes[half] = x
    return x


class _GridGeometry:
    """The constants of `FreeGrid` for one cluster size and horizon (built once)."""

    def __init__(self, gpus: int, steps: int):
        self.gpus, self.steps, self.all_gpus = gpus, steps, (1 << gpus) - 1
        # repeat[n]: bit t * gpus for t < n (a mask times it is that mask at n steps)
        self.repeat = [((1 << (gpus * n)) - 1) // self.all_gpus for n in range(2 * steps + 1)]
        every = self.all_gpus * self.repeat[steps]  # every GPU at every step of the horizon
        self.beyond = every << (steps * gpus)
        self.starts = [every >> (a * gpus) << (a * gpus) for a in range(steps)]
        # shifts[d]: ANDing x >> s for these s leaves bit (t, g) set where (t..t+d-1, g) all are
        self.shifts = [()]
        for d in range(1, steps + 1):
            out, k = [], 1
            while 2 * k <= d:
                out.append(k * gpus)
                k *= 2
            if k < d:
                out.append((d - k) * gpus)
            self.shifts.append(tuple(out))
        self.aligned = {
            g: starts * self.repeat[2 * steps] for g, starts in aligned_starts(gpus).items()
        }


@functools.lru_cache(maxsize=32)  # a few cluster shapes at a time
def _grid_geometry(gpus: int, steps: int) -> _GridGeometry:
    return _GridGeometry(gpus, steps)
