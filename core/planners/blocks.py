"""Aligned power-of-two blocks on a free mask: the earliest-start search both queue baselines
share (which aligned blocks are free is `core.plan.free_blocks`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np


def window_free(block_free: np.ndarray, duration: int) -> np.ndarray:
    """(blocks x steps): True where a block is free from step s for `duration` steps (cut at T)."""
    steps = block_free.shape[1]
    busy = np.zeros((block_free.shape[0], steps + 1), dtype=np.int32)
    np.cumsum(~block_free, axis=1, out=busy[:, 1:])
    d = max(1, min(duration, steps))
    ok = np.empty(block_free.shape, dtype=bool)
    full = steps - d + 1  # starts whose whole window fits in the horizon
    np.equal(busy[:, d:], busy[:, :full], out=ok[:, :full])
    np.equal(busy[:, steps:], busy[:, full:steps], out=ok[:, full:])  # cut at the horizon
    return ok


def earliest_block(
    free: np.ndarray,
    sizes: Sequence[int],
    duration: Callable[[int], int],
    earliest: int,
) -> tuple[int, int, int] | None:
    """(start, gpu_start, gpus) of the earliest feasible start at or after `earliest`.

    The lowest-indexed free aligned block wins at that start; among sizes, the one that starts
    earliest, ties to the larger. None when nothing fits within the horizon.
    """
    steps = free.shape[1]
    if earliest >= steps:
        return None
    later = free[:, earliest:]  # nothing before `earliest` matters: skip it
    wanted = {size for size in sizes if size <= free.shape[0]}
    best: tuple[int, int, int] | None = None
    size, block_free = 1, later
    while wanted and size <= max(wanted):
        if size > 1:  # a block of 2g is free where both of its halves are: pair the g-blocks
            pairs = block_free.shape[0] // 2
            block_free = block_free[0 : 2 * pairs : 2] & block_free[1 : 2 * pairs : 2]
        if size in wanted:
            ok = window_free(block_free, duration(size))
            any_block = ok.any(axis=0)
            if any_block.any():
                offset = int(np.argmax(any_block))
                start = earliest + offset
                # ascending sizes: a later (larger) size wins ties on the start
                if best is None or start <= best[0]:
                    best = (start, int(np.argmax(ok[:, offset])) * size, size)
        size *= 2
    return best
