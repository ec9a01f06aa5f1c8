"""The allocator on a cluster with node groups, GPU types and speeds (SPEC section 8).

Three steps, each its own module: serving takes a lane of GPUs per service on its allowed types,
the ones batch work values least, and follows demand within swap_cap (`serving`); the batch
jobs are packed in an order, each at the option (size, group, earliest start) where it delivers
most at its speed there, best fit within nodes (`packing`); the order is searched, counted in
packings so that a scenario always gets the same plan (`search`). On small clusters the queue
baselines' plans are compared too and the better legal plan returned (the guard).

`plan_allocator` and `plan_thorough` come here for every cluster that lists nodes; a cluster
without nodes keeps the section 1 allocator, whose plans are unchanged.
"""

from __future__ import annotations

import itertools

import numpy as np

from ...model import Scenario
from ...nodes import groups_of, options
from ...plan import IDLE, Plan, check, discounts, pin_running, plan_rank, ranks_above
from ..blocks import bitsets_to_bool, bool_to_bitsets
from .packing import NodePacker
from .search import search, starting_orders
from .serving import LANE_RULES, SERVICE_ORDERS, legal_sets, serving_sets
from .windows import improve

# Packing budget in option-steps (a job's options x the horizon, summed over the jobs): a
# packing costs about that many bitset operations. Small problems get up to MAX_PACKS packings,
# large ones fewer, and the largest (an openb day: 1,800 jobs on 6,212 GPUs) one ordering.
PACK_BUDGET = 400_000
MAX_PACKS = 60
# Without services, a small problem's search gets this many times the packings: there are no
# layouts to screen, runner-up, windows or relay to pay for, and the search is all there is
# (a median batch-only dev draw then spends about 500 packings, one with services 240).
BATCH_ONLY_FACTOR = 4
RUNNERS_UP = 3  # the serving layouts after the screen's best that thorough searches too (fast: 1)
WINDOW_TRIALS = 48  # windows cut out of serving per plan (`windows`; thorough: ten times)
GUARD_CELLS = 4096  # clusters of up to this many GPU-steps are checked against the baselines


def plan_on_nodes(
    scenario: Scenario,
    packs: int | None = None,
    kicks: int = 0,
    name: str = "allocator",
    deadline: float | None = None,
) -> Plan:
    """The node-aware allocator's plan (always legal); `packs`, `kicks` and a deadline (a
    `time.monotonic()` value) set its effort (`plan_thorough` raises them)."""
    c = scenario.cluster
    G, T = c.gpus, c.horizon_steps
    base = Plan.empty(scenario, name)
    pin_running(scenario, base.grid)
    running = bool_to_bitsets(base.grid != IDLE)
    discount = discounts(scenario)
    # Each way of laying out serving, screened by its starting orders' packings (one where
    # packings are dear, which also lays each group first only where they are cheap); the
    # best is searched.
    queued_options = sum(
        len(options(scenario, j)) for j in scenario.batch_jobs if j.running is None
    )
    cheap = packs is not None or queued_options * T * MAX_PACKS <= PACK_BUDGET
    rules = LANE_RULES
    if cheap:
        rules = (*LANE_RULES, *_group_orders(c))
    layouts = [("slow-small", "priority", False, False)]
    if scenario.realtime_jobs:
        layouts = [
            (rule, order, priced, shared)
            for shared in (False, True)
            for priced in ((False, True) if cheap else (False,))
            for order in SERVICE_ORDERS
            for rule in rules
        ]
    screened, seen = [], set()
    for how in layouts:
        serving = serving_sets(scenario, running, *how)
        key = tuple(tuple(s) for s in serving.values())
        if key in seen or not legal_sets(scenario, serving):
            continue
        seen.add(key)
        packer = NodePacker(scenario, _free(G, T, running, serving), discount)
        rank = _screen(scenario, base.grid, serving, packer, cheap)
        screened.append((rank, serving, packer, how))
    if scenario.realtime_jobs and cheap:
        screened += _batch_first(scenario, base.grid, running, discount, seen)
    if not screened:  # (no layout kept every service legal: the baselines' reservation)
        from ..fifo import plan_fifo

        plan = plan_fifo(scenario)
        plan.planner, plan.stats["guard"] = name, "fifo"
        return plan
    best_rank, serving, packer, how = max(screened, key=lambda item: _sortable(item[0]))
    small, packs, kicks = _effort(scenario, packer, packs, kicks)
    if packs > 1:
        placed, _, order = search(packer, packs, kicks, deadline)
    else:
        order = _one_order(packer)
        placed, _ = packer.pack(order)
    plan = Plan(_grid(base.grid, serving, placed), name)
    if small:  # the runners-up of the screen searched too (its one packing misjudges some)
        ranked = sorted(screened, key=lambda item: _sortable(item[0]), reverse=True)
        runners = RUNNERS_UP if name == "thorough" else 1
        for _, other, other_packer, other_how in ranked[1 : runners + 1]:
            got, _, got_order = search(other_packer, packs, kicks, deadline)
            candidate = Plan(_grid(base.grid, other, got), name)
            if ranks_above(plan_rank(scenario, candidate), plan_rank(scenario, plan)):
                plan, serving, packer, how, order = (
                    candidate,
                    other,
                    other_packer,
                    other_how,
                    got_order,
                )
    trials = 0
    if small and scenario.realtime_jobs:
        plan, trials = improve(
            scenario,
            plan,
            order,
            running,
            lambda busy: serving_sets(scenario, busy, *how),
            lambda s: NodePacker(scenario, _free(G, T, running, s), discount),
            lambda s, p: _grid(base.grid, s, p),
            every_start=True,
            budget=WINDOW_TRIALS * (10 if name == "thorough" else 1),
        )
    if small and scenario.realtime_jobs:
        plan, relays = _relay(scenario, plan, order, running, discount, base.grid, how)
        trials += relays
    plan.stats["packings"] = sum(item[2].packs for item in screened) + packer.packs + trials
    if G * T <= GUARD_CELLS:
        plan = _guard(scenario, plan)
    return plan


def _effort(
    scenario: Scenario, packer: NodePacker, packs: int | None, kicks: int
) -> tuple[bool, int, int]:
    """Whether the problem is small (searched with kicks, windows and the relay), and the
    search's packings and kicks: as given, else as many as the budget allows."""
    units = sum(len(o) for o in packer.options.values()) * scenario.cluster.horizon_steps
    small = packs is not None or units * MAX_PACKS <= PACK_BUDGET
    if packs is None:
        packs = max(1, min(MAX_PACKS, PACK_BUDGET // max(1, units)))
        if small and not scenario.realtime_jobs:
            packs *= BATCH_ONLY_FACTOR
        kicks = packs // 2 if small else 0
    return small, packs, kicks


def _relay(scenario: Scenario, plan: Plan, order, running, discount, pinned, how):
    """Serving laid out again around the plan's batch blocks (shared, every fraction of a unit
    served: the GPUs those blocks leave earn batch work nothing), then the batch work packed
    again around it, in the same order; kept where it ranks higher and passes the checker,
    and repeated. Serving laid out first breaks the nodes batch work needs; laid out last
    around batch blocks that already fit, it fills what they leave."""
    c = scenario.cluster
    G, T = c.gpus, c.horizon_steps
    best, best_rank = plan, plan_rank(scenario, plan)
    packs = 0
    improved = True
    while improved:
        improved = False
        busy = list(running)
        for i in order:
            rows, cols = np.nonzero(best.grid == i)
            if len(rows):
                block = ((1 << int(rows.max() - rows.min() + 1)) - 1) << int(rows.min())
                for t in range(int(cols.min()), int(cols.max()) + 1):
                    busy[t] |= block
        serving = serving_sets(scenario, busy, how[0], how[1], False, True)
        if not legal_sets(scenario, serving):
            break
        packer = NodePacker(scenario, _free(G, T, running, serving), discount)
        packs += 1
        candidate = Plan(_grid(pinned, serving, packer.pack(order)[0]), plan.planner)
        rank = plan_rank(scenario, candidate)
        if ranks_above(rank, best_rank) and not check(scenario, candidate):
            best, best_rank, improved = candidate, rank, True
    return best, packs


def _batch_first(scenario: Scenario, pinned, running, discount, seen) -> list[tuple]:
    """Serving laid out around a packing of the batch work alone (each starting order's), on
    the GPUs that packing leaves at each step: where serving's own choice breaks the nodes the
    batch work needs, this keeps them whole (and a shortfall it causes is priced)."""
    c = scenario.cluster
    G, T = c.gpus, c.horizon_steps
    out = []
    alone = NodePacker(scenario, _free(G, T, running, {}), discount)
    how = ("slow-small", "priority", False, True)
    for order in starting_orders(alone)[:2]:
        placed, _ = alone.pack(order)
        busy = list(running)
        for p in placed:
            block = ((1 << p.gpus) - 1) << p.gpu_start
            for t in range(p.start, p.end):
                busy[t] |= block
        serving = serving_sets(scenario, busy, *how)
        key = tuple(tuple(x) for x in serving.values())
        if key in seen or not legal_sets(scenario, serving):
            continue
        seen.add(key)
        packer = NodePacker(scenario, _free(G, T, running, serving), discount)
        grid = _grid(pinned, serving, packer.pack(order)[0])
        out.append((plan_rank(scenario, Plan(grid)), serving, packer, how))
    return out


def _screen(
    scenario: Scenario, pinned, serving: dict[int, list[int]], packer: NodePacker, every: bool
) -> tuple[bool, float, float]:
    """A serving layout's rank: its best packing among the starting orders (`every`; else the
    first only, where packings are dear). One order misjudges layouts: the layout whose first
    order packs best is often not the one whose search ends best."""
    orders = starting_orders(packer) if every else [_one_order(packer)]
    best = None
    for order in orders:
        rank = plan_rank(scenario, Plan(_grid(pinned, serving, packer.pack(order)[0])))
        if best is None or ranks_above(rank, best):
            best = rank
    return best


def _group_orders(cluster) -> list[str]:
    """Lane rules that put the groups in every order (up to 3 groups; else each one first)."""
    indices = [g.index for g in groups_of(cluster)]
    if len(indices) > 3:
        return [f"first:{k}" for k in indices]
    return ["order:" + ",".join(map(str, p)) for p in itertools.permutations(indices)]


def _sortable(rank: tuple[bool, float, float]) -> tuple[float, float, float]:
    return (float(rank[0]), rank[1], rank[2])


def _free(G: int, T: int, running: list[int], serving: dict[int, list[int]]) -> list[int]:
    """Per step, the GPUs neither running work nor serving holds."""
    every = (1 << G) - 1
    out = []
    for t in range(T):
        held = running[t]
        for sets in serving.values():
            held |= sets[t]
        out.append(every & ~held)
    return out


def _grid(pinned: np.ndarray, serving: dict[int, list[int]], placed) -> np.ndarray:
    grid = pinned.copy()
    for i, sets in serving.items():
        grid[bitsets_to_bool(sets, grid.shape[0]).T] = i
    for p in placed:
        grid[p.gpu_start : p.gpu_start + p.gpus, p.start : p.end] = p.job
    return grid


def _one_order(packer: NodePacker) -> list[int]:
    from .search import starting_orders

    return starting_orders(packer)[0]


def _guard(scenario: Scenario, plan: Plan) -> Plan:
    """The better of the plan and the queue baselines' (by the coverage rule, then J)."""
    from ..fifo import plan_backfill, plan_fifo

    best, best_rank = plan, plan_rank(scenario, plan)
    for baseline in (plan_fifo, plan_backfill):
        other = baseline(scenario)
        rank = plan_rank(scenario, other)
        if ranks_above(rank, best_rank):
            best, best_rank = other, rank
            best.stats["guard"] = other.planner
    if best is not plan:
        best = Plan(best.grid.copy(), plan.planner, {**plan.stats, **best.stats})
    return best
