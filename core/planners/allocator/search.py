"""Phase 3, cheap local search over the packing order.

A few orderings and size rules, then first-improvement moves on the order: promote a job left
out or cut short, shrink a job to a narrower block, swap two neighbours, within a budget of
re-packings (on small problems a budget of work: a move costs only the jobs it places again).
Plans compare on decayed batch reward, ties to more GPU-steps delivered. `_polish` descends the
final plan once more under wider moves on small problems.
"""

from __future__ import annotations

from .packing import _VARIANTS, _Candidate, _Packed, _Packer


def _polish(
    packer: _Packer, candidates: list[_Candidate], result: _Packed, packs: float
) -> _Packed:
    """The final plan's batch work descended again on the GPUs its serving leaves (`packer`),
    by the wider moves of `_wide_move` until one pays (the main descent tried the others),
    within a budget of work of `packs`; kept where it earns more. For small problems, where a
    packing is cheap: these moves reach plans two of the main descent's moves away whose first
    loses (the other size rule and then a promotion; a job moved a few places). The jobs pinned
    on windows go first in the order, and, where there are any, also stay on their windows."""
    order = list(result.order)
    listed = {c.index for c in order}  # jobs pinned on a window are not in the order: first
    pinned = [p for p in result.placements if p[0] not in listed]
    placed = {p[0] for p in pinned}
    tries = [(packer, [c for c in candidates if c.index in placed] + order, ())]
    if pinned:
        free = list(packer.free)
        for _, b, g, start, end in pinned:
            for t in range(start, end):
                free[t] &= ~(((1 << g) - 1) << b)
        held = _Packer(packer.gpus, packer.steps, packer.discount, free, packer.grid is not None)
        tries.append((held, order, pinned))
    best = None
    for packer, order, pins in tries:
        start = packer.pack(order, result.rule)
        incumbent = (start, order, result.rule, packer.trace)
        extra = [0.0, 0.0]
        for index, _, g, begin, end in pins:
            priority = next(c.priority for c in candidates if c.index == index)
            extra[0] += priority * g * (packer.discount[end] - packer.discount[begin])
            extra[1] += g * (end - begin)
        # where the descent went on under the other size rule (it tied), also without that move
        for wide in ("tried", "same rule"):
            found, _ = _descend(packer, incumbent, packs, True, wide)
            placements, reward, cells = found[0]
            found = ((placements + list(pins), reward + extra[0], cells + extra[1]), *found[1:])
            if found[0][1:] > (result.reward, result.cells) and (
                best is None or found[0][1:] > best[0][1:]
            ):
                best = found
            if found[2] == result.rule:
                break
    return result if best is None else _Packed(*best[0], best[1], best[2])


def _search(
    packer: _Packer,
    candidates: list[_Candidate],
    packs: int,
    start: tuple[list[_Candidate], str] | None = None,
    by_work: bool = False,
    variants: tuple = _VARIANTS,
) -> tuple:
    """Greedy packings under a few orderings, then first-improvement moves; the best plan wins.

    Moves, tried on the incumbent's jobs in its order: *promote* packs a job that is left
    unplaced (or cut short) first, the rest in the incumbent's order; *shrink* forbids a placed
    job its current block size and the larger ones, so it takes a narrower, longer block and
    leaves room beside it; once those are exhausted, promote any job, then *swap* neighbours.
    Plans compare on the decayed batch reward (the real-time part of the objective is fixed by
    then), ties to more GPU-steps delivered. Where the moves run out with packings left, a
    second descent starts from the best ordering of the other size rule. With `start` (an
    order and its size rule), that order is packed instead of the orderings. Returns the best
    (placements, reward, GPU-steps, order, size rule) found within `packs` packings; `by_work`:
    a move's packing costs the share of the jobs it places again (see `_descend`), so `packs`
    is a budget of work.
    """
    if not candidates:
        return _Packed([], 0.0, 0.0, [], "value")
    starts = (
        [start] if start else [(sorted(candidates, key=k), rule) for k, rule in variants[:packs]]
    )
    packed = []
    for k, (order, size_rule) in enumerate(starts):
        # the orderings the screen packed on this packer are not packed again
        screened = packer.screened.get(k) if start is None else None
        if screened is None:
            screened = packer.pack(order, size_rule), packer.trace
            if start is None:
                packer.screened[k] = screened
        result, trace = screened
        packed.append((result, order, size_rule, trace))
    packs -= len(packed)
    # stable: among equal plans the earlier ordering
    packed.sort(key=lambda item: item[0][1:], reverse=True)
    best, packs = _descend(packer, packed[0], packs, by_work)
    # Budget left once the moves are exhausted: descend from the best start of the other size
    # rule too (each rule reaches plans the other's moves cannot).
    other = next((p for p in packed if p[2] != packed[0][2]), None)
    if packs > 0 and other is not None:
        found, packs = _descend(packer, other, packs, by_work)
        if found[0][1:] > best[0][1:]:
            best = found
    result, order, rule = best
    return _Packed(*result, order, rule)


def _descend(packer, incumbent, packs, by_work=False, wide: str = ""):
    """First-improvement moves from `incumbent` (result, order, size rule, trace) within
    `packs` packings; returns the best (result, order, size rule) and the packings left. Each
    move packs from the incumbent's packing (`_Packer.pack`'s `base`): the jobs before the
    first it moves are not placed again, and where the packing comes back to the incumbent's
    state the rest is not placed either. `by_work`: such a packing costs only the share of the
    jobs it placed (a move that changes nothing downstream is nearly free). `wide`: the moves
    of `_next_move` count as tried until one improves the incumbent, and `_wide_move`'s go
    first ("tried"; "same rule": without its change of size rule)."""
    best, best_order, best_rule, best_trace = incumbent
    tried: set[tuple[str, int, int]] = set()
    if wide:  # the incumbent's own moves were tried: the wider ones first
        while (move := _next_move(best[0], best_order, tried, rival=not by_work)) is not None:
            tried.add(move)
        if wide == "same rule":
            tried.add(("rule", 0, 0))
    while packs > 0:
        move = _next_move(best[0], best_order, tried, rival=not by_work)
        if move is None and wide:
            move = _wide_move(best_order, tried, best[0])
        if move is None:
            break
        tried.add(move)
        if move[0] == "rule":
            rule = "early" if best_rule == "value" else "value"
            result = packer.pack(best_order, rule)
            packs -= 1
            if result[1:] >= best[1:]:  # on a tie too: the moves are tried again under it
                better = result[1:] > best[1:]
                best, best_rule, best_trace = result, rule, packer.trace
                tried = set() if better else {move}
            continue
        order = _moved(best_order, move, best[0])
        result = packer.pack(order, best_rule, (best_order, best, best_trace))
        packs -= packer.work / len(order) if by_work else 1
        if result[1:] > best[1:]:
            best, best_order, best_trace = result, order, packer.trace
            tried.clear()
    return (best, best_order, best_rule), packs


def _moved(order: list[_Candidate], move: tuple[str, int, int], placements) -> list[_Candidate]:
    """The order after a move (kind, position, to): "insert" the job at `position` before
    position `to` (earlier), "demote" it to just after position `to` (later), "swap" it with
    the next one, "shrink" it to the sizes narrower than the one it is placed at, "pair" it and
    the job at position `to` (it first) to just after the job at `to + 1`."""
    kind, position, to = move
    job = order[position]
    if kind == "insert":
        return order[:to] + [job] + order[to:position] + order[position + 1 :]
    if kind == "demote":
        return order[:position] + order[position + 1 : to + 1] + [job] + order[to + 1 :]
    if kind == "pair":  # the job, then the one at `to`, just after the job next to that one
        return (
            order[:to]
            + [order[to + 1], job, order[to]]
            + order[to + 2 : position]
            + order[position + 1 :]
        )
    if kind == "swap":
        out = list(order)
        out[position], out[position + 1] = out[position + 1], out[position]
        return out
    placed_size = next(p[2] for p in placements if p[0] == job.index)
    keep = job.sizes.index(placed_size)
    narrower = job._replace(
        sizes=job.sizes[:keep],
        durations=job.durations[:keep],
        shapes=tuple(shape for shape in job.shapes if shape[0] < placed_size),
    )
    return order[:position] + [narrower] + order[position + 1 :]


def _wide_move(order, tried, placements):
    """The moves of a wider neighbourhood, once `_next_move`'s are exhausted: pack the order
    under the other size rule; move a job cut short or left out and a job at least two places
    before it that is placed to start after the first arrives (nearest first) as a pair, the
    first ahead, to just after the job next to the second; insert a job at any earlier position
    (nearest first), then at any later one (farthest first). A pair move reaches an order two
    single moves away, where neither pays alone (wide small-28: b3, b10, b0, b1, b6 -> b10, b6,
    b3, b0, b1: b6 then starts where b10 ends and b3 after it, where b3 took b6's room)."""
    if ("rule", 0, 0) not in tried:
        return ("rule", 0, 0)
    placed = {p[0]: p for p in placements}
    for position, job in enumerate(order):
        where = placed.get(job.index)
        if where is not None and where[4] - where[3] >= job.durations[job.sizes.index(where[2])]:
            continue
        for before in range(position - 2, -1, -1):
            rival = placed.get(order[before].index)
            if (
                rival is not None
                and rival[3] >= job.arrival
                and ("pair", position, before) not in tried
            ):
                return ("pair", position, before)
    for position in range(3, len(order)):
        for to in range(position - 2, 0, -1):  # (to position - 1 is a swap of neighbours)
            if ("insert", position, to) not in tried:
                return ("insert", position, to)
    for position in range(len(order) - 2):
        for to in range(len(order) - 1, position + 1, -1):
            if ("demote", position, to) not in tried:
                return ("demote", position, to)
    return None


def _next_move(
    placements: list[tuple[int, int, int, int, int]],
    order: list[_Candidate],
    tried: set[tuple[str, int, int]],
    rival: bool = False,
) -> tuple[str, int, int] | None:
    """The first untried move on the incumbent, as (kind, position, to): promote a job cut
    short or left out (insert it at position 0, or with `rival`, just before the first job placed
    at or after its arrival, so that the jobs already running then keep their places), or shrink a
    placed job that could run narrower; then promote any job; then swap two neighbours.

    `rival` is for larger problems, whose descent runs out of budget: promoted to the front, a
    left-out job takes the place of one that ran before it arrived, which then has to move, and a
    budget of 18 packings rarely gets that far (day-shape small-17,
    tests/planners/test_allocator.py). On small problems it makes plans worse (the wide shape's
    small-6) and is not used there."""
    placed = {p[0]: p for p in placements}
    for position, job in enumerate(order):
        where = placed.get(job.index)
        short = where is None or where[4] - where[3] < job.durations[job.sizes.index(where[2])]
        if short and position > 0:
            to = _first_rival(order, position, placed, job.arrival) if rival else 0
            if ("insert", position, to) not in tried:
                return ("insert", position, to)
        if where is not None and where[2] > job.sizes[0] and ("shrink", position, 0) not in tried:
            return ("shrink", position, 0)
    for position in range(1, len(order)):
        if ("insert", position, 0) not in tried:
            return ("insert", position, 0)
    for position in range(len(order) - 1):
        if ("swap", position, 0) not in tried:
            return ("swap", position, 0)
    return None


def _first_rival(order, position: int, placed: dict, arrival: int) -> int:
    """The position of the first job before `position` placed at or after `arrival`, else 0."""
    for k in range(position):
        where = placed.get(order[k].index)
        if where is not None and where[3] >= arrival:
            return k
    return 0
