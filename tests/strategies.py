"""Hypothesis strategies for random valid scenarios, shared by every planner's tests.

They cover what breaks naive planners: odd cluster sizes (blocks of 16 on 24 GPUs), running jobs
pinned anywhere aligned, real-time `previous_gpus` of any size within reach of the range, swap
caps 0..4, fractional demand, arrivals after the horizon and jobs cut by it.
"""

from __future__ import annotations

from hypothesis import strategies as st

from core.model import (
    BATCH_TYPES,
    BatchJob,
    Cluster,
    Policy,
    RealtimeJob,
    Running,
    Scenario,
    ScenarioError,
)

ODD_SIZES = (1, 3, 5, 6, 12, 24)


def _power_at_most(draw, limit: int, low: int = 1) -> int:
    sizes = [g for g in (1, 2, 4, 8, 16, 32, 64) if low <= g <= limit]
    return draw(st.sampled_from(sizes))


@st.composite
def scenarios(
    draw,
    max_gpus: int = 24,
    max_steps: int = 12,
    max_jobs: int = 6,
    max_realtime: int = 2,
    integer_demand: bool = False,
    allow_running: bool = True,
) -> Scenario:
    """A random valid scenario; invalid combinations are rejected, not repaired."""
    gpus = draw(
        st.one_of(
            st.integers(1, max_gpus),
            st.sampled_from([g for g in ODD_SIZES if g <= max_gpus] or [1]),
        )
    )
    steps = draw(st.integers(1, max_steps))
    step_minutes = draw(st.sampled_from([30, 60, 60, 120]))
    step_hours = step_minutes / 60
    taken: set[int] = set()
    jobs: list = []

    for k in range(draw(st.integers(0, max_jobs))):
        gpus_min = _power_at_most(draw, gpus)
        gpus_max = _power_at_most(draw, gpus, gpus_min)
        gpu_hours = draw(st.sampled_from([0.5, 1, 2, 3, 5, 8, 13])) * step_hours * gpus_min
        running = None
        if allow_running and draw(st.integers(0, 3)) == 0:
            size = draw(st.sampled_from([g for g in (1, 2, 4, 8, 16) if g <= gpus]))
            starts = [
                b
                for b in range(0, gpus - size + 1, size)
                if not taken.intersection(range(b, b + size))
            ]
            if starts:
                start = draw(st.sampled_from(starts))
                taken.update(range(start, start + size))
                running = Running(start, size, draw(st.integers(1, steps + 2)))
        jobs.append(
            BatchJob(
                id=f"b{k}",
                type=draw(st.sampled_from(BATCH_TYPES)),
                priority=draw(st.sampled_from([1, 2, 3, 5, 8, 0.5])),
                gpus_min=gpus_min,
                gpus_max=gpus_max,
                gpu_hours=gpu_hours,
                arrival_step=draw(st.integers(0, steps)),
                running=running,
            )
        )

    for k in range(draw(st.integers(0, max_realtime))):
        free = sorted(set(range(gpus)) - taken)
        gpus_max = draw(st.integers(0, min(gpus, 6)))
        gpus_min = draw(st.integers(0, gpus_max))
        swap_cap = draw(st.integers(0, 4))
        if integer_demand:
            demand = draw(st.lists(st.integers(0, gpus_max + 1), min_size=steps, max_size=steps))
        else:
            demand = draw(
                st.lists(
                    st.sampled_from([0, 0.5, 1, 1.5, 2, 3, 4.25, 6]), min_size=steps, max_size=steps
                )
            )
        previous = None
        if free and draw(st.booleans()):
            count = draw(st.integers(0, min(len(free), gpus_max + swap_cap)))
            previous = tuple(draw(st.permutations(free))[:count])
            taken.update(previous)
        jobs.append(
            RealtimeJob(
                id=f"rt{k}",
                priority=draw(st.sampled_from([1, 4, 8])),
                gpus_min=gpus_min,
                gpus_max=gpus_max,
                swap_cap=swap_cap,
                demand=tuple(demand),
                previous_gpus=previous,
            )
        )

    draw(st.randoms()).shuffle(jobs)  # file order matters to fifo: vary it
    policy = Policy(
        penalty_weight=draw(st.sampled_from([0, 5, 8, 10])),
        decay=draw(st.sampled_from([1.0, 0.97, 0.8])),
    )
    try:
        return Scenario("random", Cluster(gpus, step_minutes, steps), tuple(jobs), policy)
    except ScenarioError:
        from hypothesis import reject

        reject()


def tiny_scenarios(max_gpus: int = 4, max_steps: int = 4, max_jobs: int = 3):
    """Scenarios small enough for brute-force enumeration of every legal plan."""
    return scenarios(
        max_gpus=max_gpus,
        max_steps=max_steps,
        max_jobs=max_jobs,
        max_realtime=1,
        integer_demand=True,
    )


@st.composite
def node_scenarios(draw, max_steps: int = 10, max_jobs: int = 6, max_realtime: int = 2):
    """A random valid scenario on node groups (SPEC section 8): 2-3 groups of 1, 2, 4 or 8 GPUs
    a node, 2-3 types of different speeds and memories, jobs allowed some types only, needing
    memory, with their own speed on a type, or held to one node; a running job on a legal
    block; services on some types. Invalid combinations are rejected, not repaired."""
    from core.nodes import GpuType, NodeGroup, allowed_gpus, block_starts

    names = draw(st.sampled_from([("a", "b"), ("a", "b", "c")]))
    speeds = {n: draw(st.sampled_from([0.25, 0.5, 0.75, 1.0, 1.5])) for n in names}
    memory = {n: draw(st.sampled_from([None, 16, 24, 40, 80])) for n in names}
    types = tuple(GpuType(n, speeds[n], memory[n]) for n in names)
    groups = tuple(
        NodeGroup(
            f"g{k}",
            draw(st.sampled_from(names)),
            draw(st.sampled_from([1, 2, 4, 8])),
            draw(st.integers(1, 2)),
        )
        for k in range(draw(st.integers(2, 3)))
    )
    total = sum(g.gpus for g in groups)
    if total > 24:
        from hypothesis import reject

        reject()
    steps = draw(st.integers(2, max_steps))
    cluster = Cluster(total, 60, steps, gpu_types=types, nodes=groups)
    jobs: list = []
    taken = 0
    for k in range(draw(st.integers(1, max_jobs))):
        gpus_min = _power_at_most(draw, min(total, 8))
        gpus_max = _power_at_most(draw, min(total, 16), gpus_min)
        extra: dict = {}
        if draw(st.integers(0, 3)) == 0:
            extra["gpu_types"] = tuple(draw(st.sets(st.sampled_from(names), min_size=1)))
        if draw(st.integers(0, 4)) == 0:
            extra["min_gpu_memory_gb"] = draw(st.sampled_from([20, 32, 64]))
        if draw(st.integers(0, 3)) == 0:
            extra["speed"] = ((draw(st.sampled_from(names)), draw(st.sampled_from([0.5, 2.0]))),)
        if draw(st.integers(0, 3)) == 0:
            extra["multi_node"] = False
        job = BatchJob(
            id=f"b{k}",
            type=draw(st.sampled_from(BATCH_TYPES)),
            priority=draw(st.sampled_from([1, 2, 3, 5, 8, 0.5])),
            gpus_min=gpus_min,
            gpus_max=gpus_max,
            gpu_hours=draw(st.sampled_from([0.5, 1, 2, 3, 5, 8, 13])) * gpus_min,
            arrival_step=draw(st.integers(0, steps)),
            **extra,
        )
        starts = block_starts(cluster, job, gpus_min)
        if draw(st.integers(0, 3)) == 0 and starts:
            firsts = [b for b in range(total) if starts >> b & 1]
            first = draw(st.sampled_from(firsts))
            block = ((1 << gpus_min) - 1) << first
            if not taken & block:
                taken |= block
                job = BatchJob(
                    **{
                        **job.__dict__,
                        "running": Running(first, gpus_min, draw(st.integers(1, steps + 1))),
                    }
                )
        jobs.append(job)
    for k in range(draw(st.integers(0, max_realtime))):
        extra = {}
        if draw(st.booleans()):
            extra["gpu_types"] = tuple(draw(st.sets(st.sampled_from(names), min_size=1)))
        gpus_max = draw(st.integers(0, 4))
        job = RealtimeJob(
            id=f"rt{k}",
            priority=draw(st.sampled_from([1, 4, 8])),
            gpus_min=draw(st.integers(0, min(1, gpus_max))),
            gpus_max=gpus_max,
            swap_cap=draw(st.integers(0, 3)),
            demand=tuple(
                draw(st.lists(st.sampled_from([0, 0.5, 1, 2, 3.5]), min_size=steps, max_size=steps))
            ),
            **extra,
        )
        if draw(st.booleans()):
            free = [
                g
                for g in range(total)
                if allowed_gpus(cluster, job) >> g & 1 and not taken >> g & 1
            ]
            count = draw(st.integers(0, min(len(free), gpus_max + job.swap_cap)))
            previous = tuple(free[-count:]) if count else ()
            for g in previous:
                taken |= 1 << g
            job = RealtimeJob(**{**job.__dict__, "previous_gpus": previous})
        jobs.append(job)
    draw(st.randoms()).shuffle(jobs)
    policy = Policy(
        penalty_weight=draw(st.sampled_from([0, 5, 8, 10])),
        decay=draw(st.sampled_from([1.0, 0.97, 0.8])),
    )
    try:
        return Scenario("random-nodes", cluster, tuple(jobs), policy)
    except ScenarioError:
        from hypothesis import reject

        reject()
