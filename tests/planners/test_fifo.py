"""The published baselines: placements asserted by hand, legality on random scenarios."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from core.formats import grid_to_csv, plan_from_grid_csv
from core.model import BatchJob, Cluster, RealtimeJob, Running, Scenario
from core.plan import batch_placements, check, holdings
from core.planners import solve
from tests.budget import examples
from tests.strategies import scenarios


def where(scenario: Scenario, planner: str) -> dict[str, tuple[int, int, int]]:
    """job -> (start_step, gpu_start, gpus)."""
    placed = batch_placements(scenario, solve(scenario, planner))
    return {k: (p.start_step, p.gpu_start, p.gpus) for k, p in placed.items()}


def gap_scenario() -> Scenario:
    """B needs the whole cluster, so it waits; C fits in the gap beside A."""
    return Scenario(
        "gap",
        Cluster(4, 60, 6),
        (
            BatchJob("A", "training", 1, 2, 2, gpu_hours=4),  # 2 steps on 2 GPUs
            BatchJob("B", "training", 1, 4, 4, gpu_hours=8),  # 2 steps on 4 GPUs
            BatchJob("C", "batch_inference", 1, 2, 2, gpu_hours=4),
        ),
    )


def test_fifo_never_starts_before_the_previous_job():
    assert where(gap_scenario(), "fifo") == {"A": (0, 0, 2), "B": (2, 0, 4), "C": (4, 0, 2)}


def test_backfill_uses_the_earlier_gap():
    assert where(gap_scenario(), "backfill") == {"A": (0, 0, 2), "B": (2, 0, 4), "C": (0, 2, 2)}


def test_size_that_starts_earliest_wins_ties_to_the_larger():
    s = Scenario(
        "sizes",
        Cluster(4, 60, 8),
        (
            BatchJob("old", "training", 1, 2, 2, 20, running=Running(0, 2, 3)),
            BatchJob("flex", "training", 1, 1, 4, gpu_hours=8),
            BatchJob("wide", "training", 1, 1, 4, gpu_hours=4, arrival_step=5),
        ),
    )
    placed = where(s, "fifo")
    # flex: 4 GPUs only at step 3, 2 or 1 GPUs at step 0: the larger of those, on [2, 4)
    assert placed["flex"] == (0, 2, 2)
    # wide arrives at 5; flex (4 steps on 2) holds [2, 4) to step 3; all 4 GPUs are free at 5
    assert placed["wide"] == (5, 0, 4)
    assert placed["old"] == (0, 0, 2)


def test_arrival_order_then_file_order():
    s = Scenario(
        "order",
        Cluster(2, 60, 6),
        (
            BatchJob("second", "training", 1, 2, 2, 4, arrival_step=1),
            BatchJob("first", "training", 1, 2, 2, 4, arrival_step=0),
            BatchJob("third", "training", 9, 2, 2, 4, arrival_step=1),  # priority is ignored
        ),
    )
    assert where(s, "fifo") == {"first": (0, 0, 2), "second": (2, 0, 2), "third": (4, 0, 2)}


def test_job_that_cannot_start_in_the_horizon_waits():
    s = Scenario(
        "late",
        Cluster(2, 60, 3),
        (
            BatchJob("hog", "training", 1, 2, 2, 6),
            BatchJob("next", "training", 1, 2, 2, 2),
        ),
    )
    assert where(s, "fifo") == {"hog": (0, 0, 2)}


def test_peak_reservation_on_the_highest_gpus_for_the_whole_horizon():
    s = Scenario(
        "peak",
        Cluster(8, 60, 4),
        (
            RealtimeJob("chat", 1, gpus_min=1, gpus_max=6, swap_cap=1, demand=(0.5, 2.3, 1, 0)),
            BatchJob("fill", "training", 1, 1, 8, gpu_hours=4),
        ),
    )
    plan = solve(s, "fifo")
    assert (plan.grid[5:8] == 0).all()  # ceil(2.3) = 3 GPUs: 5, 6, 7 at every step
    assert (plan.grid[:5] != 0).all()
    # the batch job takes the lowest aligned block that is free: [0, 4)
    assert where(s, "fifo")["fill"] == (0, 0, 4)


def test_peak_reservation_is_clipped_and_walks_from_previous_gpus():
    s = Scenario(
        "walk",
        Cluster(8, 60, 4),
        (
            RealtimeJob(
                "chat",
                1,
                gpus_min=1,
                gpus_max=4,
                swap_cap=1,
                demand=(9, 9, 9, 9),
                previous_gpus=(0, 1),
            ),
        ),
    )
    plan = solve(s, "fifo")
    assert check(s, plan) == []
    # clip(9) -> 4 GPUs, reached from 2 at one gain per step
    assert list(holdings(s, plan)[0]) == [3, 4, 4, 4]


@settings(max_examples=examples(150), deadline=None)
@given(scenarios())
def test_baselines_are_legal_and_their_grids_round_trip(scenario):
    for planner in ("fifo", "backfill"):
        plan = solve(scenario, planner)
        violations = check(scenario, plan)
        assert violations == [], [str(v) for v in violations]
        again = plan_from_grid_csv(scenario, grid_to_csv(scenario, plan))
        assert again.same_grid(plan) and again.conflicts == ()
        assert np.array_equal(holdings(scenario, again), holdings(scenario, plan))


@settings(max_examples=examples(60), deadline=None)
@given(scenarios(max_gpus=12, max_realtime=0, allow_running=False))
def test_the_head_of_the_queue_goes_to_the_same_place_in_both(scenario):
    """The rules differ only for later jobs: the first queued job sees the same empty grid."""
    queue = sorted(scenario.batch_jobs, key=lambda j: j.arrival_step)  # sort is stable
    if not queue:
        return
    head = queue[0].id
    assert where(scenario, "fifo").get(head) == where(scenario, "backfill").get(head)


def _earliest_by_definition(free: np.ndarray, g: int, d: int, arrival: int):
    """The first start >= arrival with an aligned block of g free for d steps (cut at the
    horizon), and the lowest such block, by looking at every cell."""
    gpus, steps = free.shape
    for s in range(arrival, steps):
        for b in range(0, gpus - g + 1, g):
            if free[b : b + g, s : min(s + d, steps)].all():
                return s, b
    return None


@settings(max_examples=examples(300), deadline=None)
@given(
    st.integers(1, 40).flatmap(
        lambda gpus: st.tuples(
            st.just(gpus),
            st.integers(1, 30).flatmap(
                lambda steps: st.tuples(
                    st.lists(st.booleans(), min_size=gpus * steps, max_size=gpus * steps),
                    st.lists(
                        st.tuples(st.integers(0, 5), st.integers(1, 40), st.integers(0, steps)),
                        min_size=1,
                        max_size=12,
                    ),
                    st.just(steps),
                )
            ),
        )
    )
)
def test_the_shared_window_search_places_where_the_definition_says(case):
    # Queries (size, duration, arrival) on a random free grid, each answer taken before the
    # next (free only shrinks, so the cached blocks, skip pointers and start bounds are all
    # exercised): every answer is the definition's, on the lowest-indexed block.
    from core.planners.blocks import FreeBlocks

    gpus, (cells, queries, steps) = case
    free = np.array(cells, dtype=bool).reshape(gpus, steps)
    blocks = FreeBlocks(free, gpus, steps)
    for log_g, d, arrival in queries:
        g = 2**log_g
        expected = _earliest_by_definition(free, g, d, arrival) if g <= gpus else None
        found = blocks.earliest(g, d, arrival)
        got = None if found is None else (found[0], (found[1] & -found[1]).bit_length() - 1)
        assert got == expected
        if found is not None:
            s, b = got
            end = min(s + d, steps)
            blocks.take(b, g, s, end)
            free[b : b + g, s:end] = False
