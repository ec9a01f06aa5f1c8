"""The allocator on a cluster with node groups, GPU types and speeds (SPEC section 8).

Three steps, each its own module: serving takes a lane of GPUs per service on its allowed types,
the ones batch work values least, and follows demand within swap_cap (`serving`); the batch
jobs are packed in an order, each at the option (size, group, earliest start) where it delivers
most at its speed there, best fit within nodes (`packing`); the order is searched, counted in
packings so that a scenario always gets the same plan (`search`). On small problems windows
are cut out of serving for waiting jobs (`windows`), serving is laid out again around the batch
blocks (the relay), and last serving is split exactly among the services around the blocks
(`split`: the lanes round each service's demand up on its own); `thorough` also holds jobs to
groups, drops jobs and cuts windows out of serving alone. On small clusters the queue
baselines' plans are compared too and the better legal plan returned (the guard).

`plan_allocator` and `plan_thorough` come here for every cluster that lists nodes; a cluster
without nodes keeps the section 1 allocator, whose plans are unchanged.
"""

from __future__ import annotations

import copy
import itertools
from time import monotonic

import numpy as np

from ...model import RealtimeJob, Scenario
from ...nodes import gpu_group_index, groups_of, options
from ...plan import IDLE, Plan, check, discounts, pin_running, plan_rank, ranks_above
from ..blocks import bitsets_to_bool, bool_to_bitsets
from .packing import NodePacker
from .search import search, starting_orders
from .serving import LANE_RULES, SERVICE_ORDERS, legal_sets, serving_sets
from .split import exact_split
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
PIN_PACKS = 24  # packings per search with a job held to a group (thorough's `_pins`)
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
    if small:
        plan, trials = _moves(
            scenario, plan, order, packer, serving, how, base.grid, name, deadline
        )
    plan.stats["packings"] = sum(item[2].packs for item in screened) + packer.packs + trials
    if G * T <= GUARD_CELLS:
        plan = _guard(scenario, plan)
    return plan


def _moves(scenario: Scenario, plan: Plan, order, packer, serving, how, pinned, name, deadline):
    """A small problem's moves after the search: (thorough) jobs held to groups, windows cut
    out of serving, the relay, (thorough) jobs dropped and windows cut out of serving alone,
    and serving split exactly; the plan and the packings they made."""
    c = scenario.cluster
    G, T = c.gpus, c.horizon_steps
    running = bool_to_bitsets(pinned != IDLE)
    discount = packer.discount
    thorough = name == "thorough"
    trials = 0
    if thorough:
        plan, order, trials = _pins(scenario, plan, order, packer, serving, pinned, deadline)
    if not scenario.realtime_jobs:
        return plan, trials
    plan, windows = improve(
        scenario,
        plan,
        order,
        running,
        lambda busy: serving_sets(scenario, busy, *how),
        lambda s: NodePacker(scenario, _free(G, T, running, s), discount),
        lambda s, p: _grid(pinned, s, p),
        every_start=True,
        budget=WINDOW_TRIALS * (10 if thorough else 1),
    )
    plan, relays = _relay(scenario, plan, order, running, discount, pinned, how)
    trials += windows + relays
    if thorough:
        plan, drops = _drop(scenario, plan, order, running, discount, pinned, packer, deadline)
        plan, inserts = _insert(
            scenario, plan, order, running, discount, pinned, WINDOW_TRIALS * 10, deadline
        )
        trials += drops + inserts
    return split_again(scenario, plan), trials


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


def _pins(scenario: Scenario, plan: Plan, order, packer: NodePacker, serving, pinned, deadline):
    """Each job held to each group it may use but does not hold, and the order searched again
    (a short search): the packer gives a job its most rewarding option, which may take the
    only GPUs another job may use (a job of two types on the slow one, where the job of that
    type alone needs it). Kept where it ranks higher; the plan, its order and the packings."""
    best, best_rank = plan, plan_rank(scenario, plan)
    packs = 0
    group_of = gpu_group_index(scenario.cluster)
    for j in list(packer.options):
        rows = np.nonzero((best.grid == j).any(axis=1))[0]
        held = int(group_of[rows[0]]) if len(rows) else None
        for group in sorted({o.group.index for o in packer.options[j]} - {held}):
            if deadline is not None and monotonic() > deadline:
                return best, order, packs
            held_to = copy.copy(packer)
            held_to.options = dict(packer.options)
            held_to.options[j] = [o for o in packer.options[j] if o.group.index == group]
            held_to.packs = 0
            placed, _, got = search(held_to, PIN_PACKS, 0, deadline)
            packs += held_to.packs
            candidate = Plan(_grid(pinned, serving, placed), plan.planner)
            if scenario.realtime_jobs:
                candidate = split_again(scenario, candidate, checked=False)
            rank = plan_rank(scenario, candidate)
            if ranks_above(rank, best_rank) and not check(scenario, candidate):
                best, best_rank, order = candidate, rank, got
    return best, order, packs


def _relay(scenario: Scenario, plan: Plan, order, running, discount, pinned, how):
    """Serving laid out again around the plan's batch blocks (shared, every fraction of a unit
    served: the GPUs those blocks leave earn batch work nothing; and split exactly, `split`),
    then the batch work packed again around it, in the same order, and serving split exactly
    around that; kept where it ranks higher and passes the checker, and repeated. Serving laid
    out first breaks the nodes batch work needs; laid out last around batch blocks that already
    fit, it fills what they leave."""
    best, best_rank = plan, plan_rank(scenario, plan)
    packs = 0
    improved = True
    while improved:
        improved = False
        busy = _blocks_busy(best, order, running)
        layouts = [serving_sets(scenario, busy, how[0], how[1], False, True)]
        exact = exact_split(scenario, busy)
        if exact is not None:
            layouts.append(exact)
        for serving in layouts:
            if not legal_sets(scenario, serving):
                continue
            packs += 1
            candidate = _repack(scenario, serving, order, running, discount, pinned, plan.planner)
            rank = plan_rank(scenario, candidate)
            if ranks_above(rank, best_rank) and not check(scenario, candidate):
                best, best_rank, improved = candidate, rank, True
    return best, packs


def _drop(scenario: Scenario, plan: Plan, order, running, discount, pinned, packer, deadline):
    """Each placed job in turn packed last or left out, the others packed again around serving
    split exactly around their blocks (where this job's block goes to serving) or around every
    block (where it goes to the others): a job whose block costs serving more than it earns
    gives way, to serving or to jobs that cost it less. Kept where it ranks higher and passes
    the checker."""
    best, best_rank = plan, plan_rank(scenario, plan)
    packs = 0
    split_of = None  # the plan `around_all` was split around (it changes only with `best`)
    for j in order:
        if deadline is not None and monotonic() > deadline:
            break
        if not (best.grid == j).any():
            continue
        others = [k for k in order if k != j]
        tries = []
        around_others = exact_split(scenario, _blocks_busy(best, others, running))
        if around_others is not None:
            tries += [(around_others, others + [j]), (around_others, others)]
        if split_of is not best:
            around_all, split_of = exact_split(scenario, _blocks_busy(best, order, running)), best
        if around_all is not None:  # (the others in every starting order: the plan's was
            # chosen around other serving)
            for start in starting_orders(packer):
                tries.append((around_all, [k for k in start if k != j]))
        for serving, again in tries:
            packs += 1
            candidate = _repack(scenario, serving, again, running, discount, pinned, plan.planner)
            rank = plan_rank(scenario, candidate)
            if ranks_above(rank, best_rank) and not check(scenario, candidate):
                best, best_rank = candidate, rank
    return best, packs


def _insert(
    scenario: Scenario, plan: Plan, order, running, discount, pinned, budget: int, deadline
):
    """Windows cut out of serving alone: a job that waits (or never starts) takes, at each of
    its options and each start before its own, the legal block that holds no other batch work
    and the fewest serving cells, every other block stays where it is, serving is split
    exactly around them (`split`) and the jobs still unplaced packed into what is left. The
    job's best window, where it ranks higher and passes the checker, is kept and the moves
    repeat from it (at most `budget` trials). Where `windows` lays serving out again in lanes
    around the window and packs everything again, this moves only serving."""
    T = scenario.cluster.horizon_steps
    jobs = scenario.jobs
    services = [i for i, j in enumerate(jobs) if isinstance(j, RealtimeJob)]
    best, best_rank = plan, plan_rank(scenario, plan)
    trials = 0
    improved = True
    while improved and trials < budget:
        improved = False
        serving = np.isin(best.grid, services)
        batch = (best.grid != IDLE) & ~serving
        for i in order:
            job = jobs[i]
            steps = np.nonzero((best.grid == i).any(axis=0))[0]
            began = int(steps[0]) if len(steps) else T
            if began <= job.arrival_step:
                continue
            others = batch & (best.grid != i)
            found, found_rank = None, best_rank
            for option in options(scenario, job):
                for start in range(job.arrival_step, min(began, T)):
                    if trials >= budget or (deadline is not None and monotonic() > deadline):
                        break
                    end = min(start + option.duration, T)
                    first = _open_block(best.grid, others, option, start, end)
                    if first is None:
                        continue
                    trials += 1
                    grid = np.where(others, best.grid, IDLE)
                    grid[first : first + option.gpus, start:end] = i
                    candidate = _fill(scenario, grid, order, discount, best.planner)
                    if candidate is None:
                        continue
                    rank = plan_rank(scenario, candidate)
                    if ranks_above(rank, found_rank) and not check(scenario, candidate):
                        found, found_rank = candidate, rank
            if found is not None:
                best, best_rank, improved = found, found_rank, True
                break
            if trials >= budget:
                break
    return best, trials


def _open_block(grid: np.ndarray, others: np.ndarray, option, start: int, end: int):
    """The legal first GPU of the option whose block over [start, end) holds no other batch
    work and the fewest cells that are not idle, lowest first; None where there is none."""
    best, best_cost = None, None
    starts, g = option.starts, option.gpus
    while starts:
        b = (starts & -starts).bit_length() - 1
        starts &= starts - 1
        if others[b : b + g, start:end].any():
            continue
        cost = int((grid[b : b + g, start:end] != IDLE).sum())
        if best_cost is None or cost < best_cost:
            best, best_cost = b, cost
    return best


def _fill(scenario: Scenario, grid: np.ndarray, order, discount, name: str) -> Plan | None:
    """Serving split exactly around the batch blocks of `grid` (which holds no serving), then
    the jobs of `order` it does not hold packed into what is left; None where the split finds
    no legal layout."""
    sets = exact_split(scenario, bool_to_bitsets(grid != IDLE))
    if sets is None:
        return None
    c = scenario.cluster
    held = set(np.unique(grid).tolist())
    left = [k for k in order if k not in held]
    for i, per_step in sets.items():
        grid[bitsets_to_bool(per_step, c.gpus).T] = i
    if left:
        packer = NodePacker(scenario, bool_to_bitsets(grid == IDLE), discount)
        for p in packer.pack(left)[0]:
            grid[p.gpu_start : p.gpu_start + p.gpus, p.start : p.end] = p.job
    return Plan(grid, name)


def _blocks_busy(plan: Plan, jobs, running: list[int]) -> list[int]:
    """Per step, the GPUs running work and the blocks of `jobs` in the plan hold."""
    busy = list(running)
    for i in jobs:
        rows, cols = np.nonzero(plan.grid == i)
        if len(rows):
            block = ((1 << int(rows.max() - rows.min() + 1)) - 1) << int(rows.min())
            for t in range(int(cols.min()), int(cols.max()) + 1):
                busy[t] |= block
    return busy


def _repack(scenario: Scenario, serving, order, running, discount, pinned, name: str) -> Plan:
    """The batch work packed in `order` around `serving`, then serving split exactly around
    the blocks packed (not checked)."""
    c = scenario.cluster
    packer = NodePacker(scenario, _free(c.gpus, c.horizon_steps, running, serving), discount)
    plan = Plan(_grid(pinned, serving, packer.pack(order)[0]), name)
    return split_again(scenario, plan, checked=False)


def split_again(scenario: Scenario, plan: Plan, checked: bool = True) -> Plan:
    """The plan with its serving split exactly among the services around its batch blocks
    (`split`), where that ranks higher and (`checked`) passes the checker; else the plan."""
    services = [i for i, j in enumerate(scenario.jobs) if isinstance(j, RealtimeJob)]
    serving = np.isin(plan.grid, services)
    sets = exact_split(scenario, bool_to_bitsets((plan.grid != IDLE) & ~serving))
    if sets is None:
        return plan
    grid = plan.grid.copy()
    grid[serving] = IDLE
    for i, per_step in sets.items():
        grid[bitsets_to_bool(per_step, grid.shape[0]).T] = i
    candidate = Plan(grid, plan.planner, dict(plan.stats))
    if ranks_above(plan_rank(scenario, candidate), plan_rank(scenario, plan)) and not (
        checked and check(scenario, candidate)
    ):
        return candidate
    return plan


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
