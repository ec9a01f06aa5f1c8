"""The allocator's tunables: how much search each problem size gets, and which phases run."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class AllocatorParams:
    """The allocator's tunables; the defaults are the ones its benchmarks were measured with.

    The local search re-packs the batch work at most `max_packs` times, fewer on large clusters
    (`pack_budget` is in units of batch jobs x GPUs x steps), so the hot path keeps its speed;
    problems smaller than `small_work` such units (about 18 packings of 8 batch jobs on 8 GPUs x 24
    steps; twice that without serving, which has no layouts to screen and no real-time moves) get as
    many packings as fit in it, up to `small_packs`: a packing costs about its size, so their search
    takes about as long as on one of the 8-GPU benchmarks (there a move's packing costs the share of
    the jobs it places again: a budget of work; a real-time trial re-packs with a descent of a
    quarter of it; window pairs and a polish of the final plan's batch work under wider moves
    follow, which take about as long again), and where one descent runs out of moves, a second
    starts from the other size rule's best ordering. Larger problems up to `fast_work` units keep
    the same search but get as many packings as a budget of that much work affords, at least
    `max_packs` and at most twice that: 45,000 units is training-heavy's 18 packings (13 jobs x 8
    GPUs x 24 steps), the slowest 8-GPU benchmark, so no benchmark takes longer than it, and one of
    8 jobs gets 29 (realtime-peak and the gap script's day-shape small-0, whose descents need about
    30). Each real-time layout is screened with the first `screen` orderings. Clusters of up to
    `grid_gpus` GPUs on horizons of up to 48 steps search the free blocks of every GPU and step at
    once (`blocks.FreeGrid`, one integer for the whole grid) instead of computing and caching them
    per step (the one integer grows with the cluster, so above that size `FreeBlocks` is the
    cheaper). The real-time moves of the local search: at most `max_windows` pinned windows (as many
    more tried where one fails to improve the plan, each for another job) and `max_rt_moves` blocks
    kept clear of serving (as many more at the later start where serving fits beside the block; one
    tried again with a lead-in counts once), fewer on large clusters (`rt_budget`, the same units as
    `pack_budget`; no windows beyond it), and never below `policy.rt_coverage_target`. On clusters
    of up to `guard_cells` GPU-steps the plan is compared with the queue baselines' and the better
    one returned: a last-resort guard, off by default (0), because the allocator's own plan does not
    lose to them (a Hypothesis property in tests/planners/test_slo.py) and the baselines cost as
    much again as the allocator on 8 GPUs. It always runs when the plan misses the coverage target.
    `restarts`: on small problems (the path above; also problems of up to `restart_work` units,
    none by default, every size in `ThoroughParams`) phases 1-6 plan this many tighter scenarios
    (`restarts.py`; a round that wins leaves the next `restarts._FOLLOW` = 16 more, up to twice
    this many in all) and the best plan is kept; 0 turns them off. They close most of the gap to
    the optimum but multiply a plan's time many times over, so they are not the default at the
    benchmarks' size (`restart_work=0`): the 8-GPU benchmarks keep their milliseconds. At that
    size the small path's own search (`small_work` raised, `restarts=0`) gets most of what they
    buy for a fraction of their time (docs/benchmarks.md has the table).
    `kicks`: on the small path (and wherever the restarts run), last, the final plan's batch
    work is packed again around its serving by an iterated local search (`_kicked`): this many
    times, two or three jobs of the best order found are moved to random places and the order is
    packed and descended a little; the plan it ends on replaces the final one where that ranks
    higher. The descents stop at orders no single move improves, and packings on these clusters
    are cheap, so the kicks reach orders many moves away, beyond where a descent stops. The
    restarts' best plans that serve otherwise (up to `_OTHER_SERVING`) get `_OTHER_KICKS` kicks
    each too: a serving that lost to the final plan's may win once the batch work around it is
    packed better (wide small-7214, tests/planners/test_kicks.py); 0 turns it off.
    `pins`: where restarts run (not with `restarts=0`) and there is serving, after them, this
    many plans each move one batch job of the best plan to another aligned block at the same
    steps and lay out serving and the rest anew around it (`restarts.pin`: serving decides
    which blocks are left, and no move after it takes a block from serving whole); the best
    plan is kept (the winner planned again with restarts around it), and those that lost and
    serve otherwise are kicked too. Each pin costs one more plan; 0 turns them off.
    `give_up_serving`: a window may also take a serving GPU whose unit of demand is worth less than
    the batch work (its job gives it up), and a service short of a whole unit takes the GPU of a
    lower-priority one that covers less (a hand-over); the rolling horizon turns it off, because
    there demand is a forecast and serving given up against it turns into realised shortfall when
    demand comes in above it.
    """

    max_packs: int = 18
    fast_work: int = 45_000
    small_work: int = 27_000
    small_packs: int = 60
    screen: int = 1
    pack_budget: int = 200_000_000
    grid_gpus: int = 128
    max_rt_moves: int = 3
    max_windows: int = 1
    rt_budget: int = 50_000_000
    guard_cells: int = 0
    give_up_serving: bool = True
    restarts: int = 48
    restart_work: int = 0
    kicks: int = 300
    pins: int = 6

    def __post_init__(self) -> None:
        for name in ("max_packs", "pack_budget", "rt_budget", "small_packs"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"Expected {name} to be an integer >= 1.")
        for name in (
            "screen",
            "grid_gpus",
            "max_rt_moves",
            "max_windows",
            "guard_cells",
            "small_work",
            "fast_work",
            "restarts",
            "restart_work",
            "kicks",
            "pins",
        ):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 0:
                raise ValueError(f"Expected {name} to be an integer >= 0.")
        if not isinstance(self.give_up_serving, bool):
            raise ValueError("Expected give_up_serving to be True or False.")


# `restart_work` that reaches every problem (the units overflow no Python int)
_EVERY_SIZE = 1 << 62


@dataclass(frozen=True)
class ThoroughParams(AllocatorParams):
    """`thorough`'s parameters: the allocator's, with its restarts, pins and kicks at every
    size (`restart_work`), within `time_limit` seconds for the whole call (the search stops
    where it is and keeps its best plan; a plan under way when the limit passes is finished
    first, so the call may overrun the limit by one plan's time). `progress`
    hears {"elapsed_s", "incumbent"} at most every `progress_every_s` seconds."""

    restart_work: int = _EVERY_SIZE
    time_limit: float = 10.0
    progress: Callable[[dict[str, float]], None] | None = field(default=None, compare=False)
    progress_every_s: float = 0.25

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("time_limit", "progress_every_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"Expected {name} to be a number.")
            if not 0 < value <= 1e9:  # (a number of seconds, not inf or nan)
                raise ValueError(f"Expected {name} to be a number of seconds above 0.")
        if self.progress is not None and not callable(self.progress):
            raise ValueError("Expected progress to be callable.")
