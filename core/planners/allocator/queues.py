"""Phase 5, never below the queues: fifo's and backfill's own plans, kept where they score higher.

Their serving reservation and packing rules are reproduced, so the allocator never returns less
than either (`tests/planners/test_slo.py`); where the fluid bound on their reservation is no
better than the plan, they are not packed.
"""

from __future__ import annotations

from ..fifo import reserved_sets
from .packing import _VARIANTS, _free_masks, _Packed, _Packer, _use_grid
from .serving import _coverage_key, _overlaps


def _no_worse_than_the_queues(scenario, running, batch, discount, params, realtime, result):
    """The incumbent, or the queue baselines' own plans where one scores higher (target met
    first, then J): their serving reservation with their batch packing reproduced (arrival
    order, earliest start, lowest-indexed block; fifo never before the previous job's start),
    so the allocator never returns less than fifo or backfill. A buddy block choice can lose
    to the lowest one (a long job on the one aligned block a wide job needs), and a search
    that tries a few orderings cannot rule that out. `batch` is (candidates, their
    `_FluidBound`)."""
    G, T = scenario.cluster.gpus, scenario.cluster.horizon_steps
    candidates, fluid = batch
    met, price, _ = _coverage_key(scenario, realtime)
    best = (met, result.reward + price)
    serving = reserved_sets(scenario)
    if _overlaps(serving, running):  # held for a pinned job (`restarts.pin`)
        return realtime, result
    met_q, price_q, _ = _coverage_key(scenario, serving)
    free = _free_masks(G, running, serving)
    tolerance = 1e-9 * max(1.0, abs(best[1]))
    if met_q < met or (met_q == met and fluid.reward(free) + price_q <= best[1] + tolerance):
        return realtime, result  # no packing on their reservation could score higher
    packer = _Packer(G, T, discount, free, _use_grid(params, G, T))
    order = sorted(candidates, key=_VARIANTS[-1][0])
    for rule in ("fifo", "backfill"):
        placements, reward, cells = packer.pack(order, rule)
        score = (met_q, reward + price_q)
        if score[0] > best[0] or (score[0] == best[0] and score[1] > best[1] + tolerance):
            best, realtime, result = score, serving, _Packed(placements, reward, cells, order, rule)
    return realtime, result
