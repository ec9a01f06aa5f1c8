"""Aligned power-of-two blocks on a free mask: the search both queue baselines share."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np


def block_free_matrix(free: np.ndarray, size: int) -> np.ndarray:
    """(blocks x steps): True where every GPU of aligned block k ([k*size, (k+1)*size)) is free.

    Blocks that would run past the last GPU (e.g. a block of 16 at GPU 16 on a 24-GPU cluster)
    do not exist.
    """
    n_blocks = free.shape[0] // size
    return free[: n_blocks * size].reshape(n_blocks, size, free.shape[1]).all(axis=1)


def window_free(block_free: np.ndarray, duration: int) -> np.ndarray:
    """(blocks x steps): True where a block is free from step s for `duration` steps (cut at T)."""
    steps = block_free.shape[1]
    busy = np.zeros((block_free.shape[0], steps + 1), dtype=np.int32)
    np.cumsum(~block_free, axis=1, out=busy[:, 1:])
    starts = np.arange(steps)
    ends = np.minimum(starts + duration, steps)
    return (busy[:, ends] - busy[:, starts]) == 0


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
    best: tuple[int, int, int] | None = None
    for size in sorted(sizes, reverse=True):
        if size > free.shape[0] or earliest >= steps:
            continue
        ok = window_free(block_free_matrix(free, size), duration(size))[:, earliest:]
        if not ok.size:
            continue
        any_block = ok.any(axis=0)
        if not any_block.any():
            continue
        offset = int(np.argmax(any_block))
        start = earliest + offset
        if best is None or start < best[0]:
            block = int(np.argmax(ok[:, offset]))
            best = (start, block * size, size)
    return best
