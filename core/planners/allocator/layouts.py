"""Which GPUs serving gains and releases: three layouts, named for what they keep for batch work.

- `FillBrokenBlocks`: buddy best fit; serving fills aligned blocks that running work or other
  serving already broke, so whole blocks stay free.
- `KeepLowGpusFree`: serving gains the highest free GPUs and releases its lowest.
- `KeepHighGpusFree`: serving gains the lowest free GPUs (beside running blocks, which usually
  sit low) and releases its highest.

`BatchHeldFirst` is the per-step bitset of GPUs batch work holds before serving is placed (a job
a pin placed first), which serving steps aside from while its swap cap lets it.
"""

from __future__ import annotations

from ..blocks import (
    aligned_starts,
    low_bits,
    spread,
    top_bits,
)


class BatchHeldFirst(list):
    """Per step, the bitset of GPUs batch work holds before serving is placed, where some of it
    starts after step 0 (a job `restarts.pin` placed first; inherited running blocks only
    shrink): `later[t]` has the GPUs it takes at a later step and not at t, which serving
    leaves while its swap cap lets it (`_Serving._step_aside`)."""

    def __init__(self, masks) -> None:
        super().__init__(masks)
        self.later, taken = [0] * len(self), 0
        for t in range(len(self) - 1, -1, -1):
            self.later[t] = taken & ~self[t]
            taken |= self[t]


class FillBrokenBlocks:
    """The buddy best-fit layout of serving GPUs, and the aligned-block arithmetic behind it.

    A gain takes the free GPU whose wholly free aligned block is smallest (serving fills blocks
    that running work or other serving already broke; ties to the highest GPU); a release gives
    back the GPU in the largest aligned block made only of free GPUs and the job's own; a trade
    is worth it while it frees a larger block than it breaks. `ahead`: the GPUs a service that
    holds its target gains at the next step (as this layout would give them now) are kept from
    lower-priority services at this step, in gains and trades, unless nothing else is free: a
    low-priority service then does not take the GPU beside a growing high-priority one, which
    would have to break a whole block a step later.
    """

    def __init__(self, gpus: int, ahead: bool = False):
        starts = aligned_starts(gpus)
        self.sizes, self.align = list(starts), list(starts.values())
        self.ahead = ahead

    def starts(self, mask: int) -> list[int]:
        """For each block size (1, 2, 4, ...): a bit at the first GPU of every aligned block
        that lies wholly in mask."""
        out = [mask]
        here = mask
        for k in range(1, len(self.sizes)):
            here = here & (here >> self.sizes[k - 1]) & self.align[k]
            out.append(here)
            if not here:
                out.extend([0] * (len(self.sizes) - k - 1))
                break
        return out

    def best_gain(self, free: int) -> int:
        """The free GPU (as a bit) whose wholly free aligned block is smallest; ties: highest."""
        levels = self.starts(free)
        for k, here in enumerate(levels):
            if not here:
                break
            size = self.sizes[k]
            parents = levels[k + 1] if k + 1 < len(levels) else 0
            only = here & ~(parents | (parents << size))  # blocks whose parent is not whole
            if only:
                return 1 << (only.bit_length() - 1 + size - 1)
        return 0

    def gains(self, free: int, count: int) -> int:
        """`count` free GPUs to gain (fewer if fewer are free), as a mask: `best_gain` applied
        `count` times, computed level by level. Taking GPUs of a block whose parent is not whole
        changes no other block's parent, so the smallest such blocks go first (highest first,
        each top-down: its own halves are then smaller still) without recomputing the levels."""
        out = 0
        levels = self.starts(free)
        for k, here in enumerate(levels):
            if count <= 0 or not here:
                break
            size = self.sizes[k]
            parents = levels[k + 1] if k + 1 < len(levels) else 0
            only = here & ~(parents | (parents << size))
            if not only:
                continue
            whole = min(only.bit_count(), count // size)
            taken = top_bits(only, whole)
            rest = only ^ taken
            out |= spread(taken, size)
            count -= whole * size
            if rest and count:  # the next block, top-down
                top = rest.bit_length() - 1 + size
                out |= ((1 << count) - 1) << (top - count)
                count = 0
        return out

    def best_release(self, held: int, free: int) -> int:
        """The held GPU in the largest aligned block made only of free GPUs and the job's own;
        ties: lowest."""
        levels = self.starts(free | held)
        for k in range(len(levels) - 1, -1, -1):
            spread = levels[k]
            if not spread:
                continue
            width = 1
            while width < self.sizes[k]:
                spread |= spread << width
                width *= 2
            candidates = held & spread
            if candidates:
                return candidates & -candidates
        return held & -held

    def releases(self, held: int, free: int, count: int) -> int:
        """`count` GPUs to give back, as a mask: best_release applied `count` times (free | held
        does not change as the job gives GPUs back, so the blocks are computed once)."""
        levels = self.starts(free | held)
        out = 0
        for k in range(len(levels) - 1, -1, -1):
            spread = levels[k]
            if not spread:
                continue
            width = 1
            while width < self.sizes[k]:
                spread |= spread << width
                width *= 2
            candidates = held & spread & ~out
            while candidates and count:
                low = candidates & -candidates
                out |= low
                candidates ^= low
                count -= 1
            if not count:
                break
        return out

    def improves(self, out: int, into: int, free: int) -> bool:
        """Trading `out` for `into` frees a larger aligned block than it breaks."""
        return self.level(into, free) < self.level(out, free)

    def level(self, bit: int, mask: int) -> int:
        """The size of the largest aligned block around `bit` that lies wholly in mask."""
        position = bit.bit_length() - 1
        size = 0
        for h in self.sizes:
            block = ((1 << h) - 1) << (position - position % h)
            if mask & block != block:
                break
            size = h
        return size


class KeepLowGpusFree(FillBrokenBlocks):
    """The simpler layout: serving gains the highest free GPUs and releases its lowest."""

    def best_gain(self, free: int) -> int:
        return 1 << (free.bit_length() - 1) if free else 0

    def gains(self, free: int, count: int) -> int:
        return top_bits(free, count)

    def best_release(self, held: int, free: int) -> int:
        return held & -held

    def releases(self, held: int, free: int, count: int) -> int:
        out = 0
        for _ in range(count):
            low = held & -held
            out |= low
            held ^= low
        return out

    def improves(self, out: int, into: int, free: int) -> bool:
        return into > out


class KeepHighGpusFree(FillBrokenBlocks):
    """The mirror layout: serving gains the lowest free GPUs (beside running blocks, which
    usually sit low) and releases its highest, leaving the high blocks whole."""

    def best_gain(self, free: int) -> int:
        return free & -free

    def gains(self, free: int, count: int) -> int:
        return low_bits(free, count)

    def best_release(self, held: int, free: int) -> int:
        return 1 << (held.bit_length() - 1) if held else 0

    def releases(self, held: int, free: int, count: int) -> int:
        out = 0
        for _ in range(count):
            top = 1 << (held.bit_length() - 1)
            out |= top
            held ^= top
        return out

    def improves(self, out: int, into: int, free: int) -> bool:
        return into < out
