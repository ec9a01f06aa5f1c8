"""The full planner: exact on tiny instances (against brute force), legal and never worse."""

from __future__ import annotations

import dataclasses
import math
import random
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings

from core.formats import load_scenario
from core.model import BatchJob, Cluster, Policy, RealtimeJob, Running, Scenario
from core.plan import IDLE, Plan, check, metrics, objective, pin_running
from core.planners import full as full_module
from core.planners import solve
from core.planners.fifo import plan_backfill
from core.planners.full import FullParams, plan_full
from tests.budget import examples
from tests.strategies import scenarios, tiny_scenarios

STATS_KEYS = (
    "status",
    "bound",
    "gap",
    "build_ms",
    "solve_ms",
    "allocator_objective",
    "objective_source",
)


def brute_force_optimum(scenario: Scenario) -> tuple[float, np.ndarray | None]:
    """Best J over every legal plan: all batch placement combinations, real-time sets by DP.

    Batch jobs are enumerated outright (every size, aligned block and start, or not placed);
    for each combination the single real-time job's best sequence of GPU sets is found by
    dynamic programming over all subsets of GPUs, step by step, under range and swap cap (and,
    with `policy.rt_coverage_target`, over the shortfall so far: only sequences whose coverage
    reaches the target count).
    """
    G, T = scenario.cluster.gpus, scenario.cluster.horizon_steps
    policy = scenario.policy
    discount = policy.decay ** np.arange(T)
    base = np.full((G, T), IDLE, dtype=np.int32)
    pin_running(scenario, base)
    realtime = [(i, j) for i, j in enumerate(scenario.jobs) if isinstance(j, RealtimeJob)]
    assert len(realtime) <= 1, "the brute force handles at most one real-time job"
    options, batch_indices = _batch_options(scenario)
    best = (-math.inf, None)

    def search(k: int, grid: np.ndarray, reward: float) -> None:
        nonlocal best
        if k == len(options):
            rt_value, full_grid = _realtime_dp(scenario, realtime, grid)
            if reward + rt_value > best[0]:
                best = (reward + rt_value, full_grid)
            return
        i = batch_indices[k]
        job = scenario.jobs[i]
        for choice in options[k]:
            if choice is None:
                search(k + 1, grid, reward)
                continue
            low, size, start, end = choice
            if (grid[low : low + size, start:end] != IDLE).any():
                continue
            placed = grid.copy()
            placed[low : low + size, start:end] = i
            gain = policy.reward_weight * job.priority * size * discount[start:end].sum()
            search(k + 1, placed, reward + gain)

    pinned_reward = sum(
        policy.reward_weight * job.priority * float((base == i).sum(axis=0) @ discount)
        for i, job in enumerate(scenario.jobs)
        if isinstance(job, BatchJob) and job.running is not None
    )
    search(0, base, pinned_reward)
    return best


def _batch_options(scenario: Scenario):
    """Per queued batch job: None (not placed) and every (low GPU, size, start, end)."""
    G, T = scenario.cluster.gpus, scenario.cluster.horizon_steps
    options: list[list[tuple[int, int, int, int] | None]] = []
    batch_indices = []
    for i, job in enumerate(scenario.jobs):
        if not isinstance(job, BatchJob) or job.running is not None:
            continue
        choices: list[tuple[int, int, int, int] | None] = [None]
        for size in job.sizes():
            for low in range(0, G - size + 1, size):
                for start in range(job.arrival_step, T):
                    end = min(T, start + scenario.duration(job, size))
                    choices.append((low, size, start, end))
        options.append(choices)
        batch_indices.append(i)
    return options, batch_indices


_QUARTER = 4  # shortfall is counted in quarter GPUs (demand in the tests is a multiple of 1/4)


def _realtime_dp(scenario, realtime, grid):
    """(best real-time value, grid with the real-time job's sets) given the batch grid."""
    if not realtime:
        return 0.0, grid
    G, T = scenario.cluster.gpus, scenario.cluster.horizon_steps
    policy = scenario.policy
    i, job = realtime[0]
    states = np.arange(1 << G)
    members = (states[:, None] >> np.arange(G)[None, :]) & 1  # (S, G)
    count = members.sum(axis=1)
    changes = np.array([[bin(a ^ b).count("1") for b in states] for a in states])
    target = policy.rt_coverage_target
    limit = 0  # shortfall allowed, in quarters (a single bucket without a target)
    if target is not None:
        limit = math.floor((1 - target) * sum(job.demand) * _QUARTER + 1e-6)
    value = np.full((len(states), limit + 1), -math.inf)
    if job.previous_gpus is not None:
        value[sum(1 << g for g in job.previous_gpus), 0] = 0.0
    else:
        value[:, 0] = 0.0
    back = []
    for t in range(T):
        free = grid[:, t] == IDLE
        allowed = (
            (members[:, ~free].sum(axis=1) == 0) & (count >= job.gpus_min) & (count <= job.gpus_max)
        )
        short = np.maximum(0.0, job.demand[t] - count)
        step_value = -policy.reward_weight * policy.penalty_weight * job.priority * short
        if t == 0 and job.previous_gpus is None:
            reach = np.zeros((len(states), len(states)))  # step 0 is free
        else:
            reach = np.where(changes <= job.swap_cap, 0.0, -math.inf)
        total = value[:, None, :] + reach[:, :, None]  # from x to y, per bucket
        came_from = total.argmax(axis=0)  # (S, B)
        best_from = total.max(axis=0)
        shift = np.rint(short * _QUARTER).astype(int) if target is not None else 0 * count
        new = np.full_like(value, -math.inf)
        moved = np.full(value.shape, -1, dtype=int)
        for y in np.nonzero(allowed)[0]:
            d = shift[y]
            if d <= limit:
                new[y, d:] = best_from[y, : limit + 1 - d] + step_value[y]
                moved[y, d:] = came_from[y, : limit + 1 - d]
        value = new
        back.append((moved, shift))
    last, bucket = np.unravel_index(int(value.argmax()), value.shape)
    best = float(value[last, bucket])
    if best == -math.inf:
        return -math.inf, None
    out = grid.copy()
    state = int(last)
    for t in range(T - 1, -1, -1):
        out[members[state].astype(bool), t] = i
        moved, shift = back[t]
        state, bucket = int(moved[state, bucket]), bucket - int(shift[state])
    return best, out


def _allocator_objective(scenario: Scenario) -> float:
    """J of the allocator's plan (the default warm start); backfill's until it exists."""
    try:
        from core.planners.allocator import plan_allocator
    except ImportError:
        return objective(scenario, plan_backfill(scenario))
    return objective(scenario, plan_allocator(scenario))


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-6 * max(1.0, abs(a), abs(b))


def tiny_contended(seed: int) -> Scenario:
    """A small random scenario with more work than GPU-steps: 2-4 GPUs, 3-5 steps, 2-4 jobs."""
    rng = random.Random(seed)
    G, T = rng.choice([2, 3, 4, 4]), rng.choice([3, 4, 5])
    step_minutes = rng.choice([30, 60])
    sizes = [g for g in (1, 2, 4) if g <= G]
    jobs: list = []
    taken: set[int] = set()
    for k in range(rng.randint(2, 3 if G == 4 and T == 5 else 4)):
        low = rng.choice(sizes)
        high = rng.choice([g for g in sizes if g >= low])
        running = None
        if k == 0 and rng.random() < 0.4:
            size = rng.choice(sizes[:2])
            start = rng.randrange(0, G - size + 1, size)
            running = Running(start, size, rng.randint(1, T + 1))
            taken.update(range(start, start + size))
        jobs.append(
            BatchJob(
                f"b{k}",
                "training",
                rng.choice([1, 2, 3, 5]),
                low,
                high,
                gpu_hours=rng.choice([0.5, 1, 2, 3, 4]) * low * step_minutes / 60,
                arrival_step=rng.randint(0, T - 1),
                running=running,
            )
        )
    if rng.random() < 0.7:
        free = [g for g in range(G) if g not in taken]
        gpus_max, swap_cap = rng.randint(1, G), rng.randint(0, 2)
        previous = None
        if rng.random() < 0.6:
            previous = tuple(rng.sample(free, min(len(free), rng.randint(0, gpus_max))))
        reachable = len(free) if previous is None else len(previous) + swap_cap
        jobs.append(
            RealtimeJob(
                "rt",
                rng.choice([1, 2, 4]),
                min(rng.randint(0, 1), reachable),
                gpus_max,
                swap_cap,
                tuple(rng.choice([0, 0.5, 1, 2, 3]) for _ in range(T)),
                previous_gpus=previous,
            )
        )
    rng.shuffle(jobs)
    policy = Policy(penalty_weight=rng.choice([0, 1, 5, 8]), decay=rng.choice([1.0, 0.97, 0.8]))
    return Scenario(f"tiny-{seed}", Cluster(G, step_minutes, T), tuple(jobs), policy)


def _assert_full_matches_brute_force(scenario: Scenario) -> None:
    optimum, grid = brute_force_optimum(scenario)
    assert grid is not None
    brute = Plan(grid, "brute")
    assert check(scenario, brute) == []
    assert _close(objective(scenario, brute), optimum)

    plan = plan_full(scenario, time_limit=30.0, mip_gap=0.0)  # warm start: the allocator
    assert check(scenario, plan) == []
    assert objective(scenario, plan) >= _allocator_objective(scenario) - 1e-9
    assert plan.stats["status"] == "optimal", plan.stats
    assert _close(objective(scenario, plan), optimum), (objective(scenario, plan), optimum)
    assert plan.stats["bound"] >= optimum - 1e-6 * max(1.0, abs(optimum))
    relaxation = full_module._FullModel(scenario).relaxation_bound(10.0)
    assert relaxation >= optimum - 1e-6 * max(1.0, abs(optimum))


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(36))
def test_full_finds_the_brute_force_optimum(seed):
    _assert_full_matches_brute_force(tiny_contended(seed))


@settings(
    max_examples=examples(15),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(tiny_scenarios())
def test_full_finds_the_brute_force_optimum_on_edge_cases(scenario):
    assume(scenario.batch_jobs or scenario.realtime_jobs)
    assume(brute_force_optimum(scenario)[1] is not None)  # some admit no legal plan at all
    _assert_full_matches_brute_force(scenario)


@settings(
    max_examples=examples(12),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(scenarios(max_gpus=12, max_steps=8, max_jobs=5))
def test_full_plans_are_legal_and_never_worse_than_the_allocator(scenario):
    plan = plan_full(scenario, time_limit=3.0)  # warm start: the allocator
    assert check(scenario, plan) == []
    assert all(key in plan.stats for key in STATS_KEYS)
    value = objective(scenario, plan)
    assert value >= plan.stats["allocator_objective"] - 1e-9
    assert value >= _allocator_objective(scenario) - 1e-9
    assert plan.stats["bound"] >= value - 1e-9
    assert plan.stats["gap"] >= 0.0


@pytest.mark.slow
def test_default_warm_start_is_the_allocator(scenarios_dir):
    allocator = pytest.importorskip("core.planners.allocator")
    scenario = load_scenario(scenarios_dir / "example.json")
    warm = allocator.plan_allocator(scenario)
    plan = plan_full(scenario, time_limit=5.0)
    assert check(scenario, plan) == []
    assert "warm_start_note" not in plan.stats
    assert _close(plan.stats["allocator_objective"], objective(scenario, warm))
    assert objective(scenario, plan) >= objective(scenario, warm) - 1e-9


def test_example_through_solve_reports_every_stat(scenarios_dir):
    scenario = load_scenario(scenarios_dir / "example.json")
    plan = solve(scenario, "full", time_limit=5.0, mip_gap=0.0)
    assert plan.planner == "full"
    assert check(scenario, plan) == []
    stats = plan.stats
    assert all(key in stats for key in STATS_KEYS)
    assert stats["status"] == "optimal"
    assert stats["gap"] == 0.0
    assert _close(stats["bound"], objective(scenario, plan))
    assert stats["objective_source"] in ("mip", "allocator")
    assert stats["build_ms"] > 0 and stats["solve_ms"] > 0


def _contended() -> Scenario:
    """Eight GPUs, a running job, a swap-capped real-time job and more batch work than fits."""
    jobs = [
        BatchJob("run", "training", 3, 4, 4, 20, running=Running(0, 4, 3)),
        RealtimeJob(
            "chat", 8, 1, 4, 1, tuple([1, 2, 3, 3, 2, 1, 1, 2, 3, 4, 2, 1]), previous_gpus=(6, 7)
        ),
        *(
            BatchJob(f"b{k}", "training", 1 + k % 4, 1, 4, 6 + 3 * k, arrival_step=k % 5)
            for k in range(8)
        ),
    ]
    return Scenario("contended", Cluster(8, 60, 12), tuple(jobs), Policy())


@pytest.mark.slow
def test_repeated_solves_in_one_process_agree(scenarios_dir):
    scenario = _contended()
    warm = plan_backfill(scenario)
    first = plan_full(scenario, time_limit=20.0, mip_gap=0.0, warm_start=warm)
    second = plan_full(scenario, time_limit=20.0, mip_gap=0.0, warm_start=warm)
    third = plan_full(load_scenario(scenarios_dir / "example.json"), time_limit=5.0)
    for plan, s in ((first, scenario), (second, scenario)):
        assert check(s, plan) == []
        assert plan.stats["status"] == "optimal"
    assert _close(objective(scenario, first), objective(scenario, second))
    assert check(load_scenario(scenarios_dir / "example.json"), third) == []
    assert third.stats["status"] not in ("solver_failed", "unavailable")


def test_progress_hook_sees_incumbent_and_bound():
    scenario = _contended()
    events: list[dict] = []
    plan = plan_full(
        scenario,
        time_limit=20.0,
        mip_gap=0.0,
        warm_start=plan_backfill(scenario),
        progress=events.append,
    )
    assert events, "the hook was never called"
    assert all(set(e) == {"elapsed_s", "incumbent", "bound", "gap"} for e in events)
    final = events[-1]
    assert _close(final["incumbent"], objective(scenario, plan))
    assert _close(final["bound"], plan.stats["bound"])
    elapsed = [e["elapsed_s"] for e in events]
    assert elapsed == sorted(elapsed)
    assert plan.stats["status"] == "optimal"
    optimum = objective(scenario, plan)
    # Bounds shown are bounds of the full model (never the restricted phase's), incumbents only
    # improve and are never better than the optimum.
    assert all(e["bound"] >= optimum - 1e-6 for e in events)
    incumbents = [e["incumbent"] for e in events if not math.isnan(e["incumbent"])]
    assert incumbents == sorted(incumbents)
    assert all(value <= optimum + 1e-6 for value in incumbents)


def test_a_failing_progress_hook_does_not_stop_the_solve():
    scenario = _contended()

    def broken(_event):
        raise RuntimeError("display went away")

    plan = plan_full(scenario, time_limit=20.0, warm_start=plan_backfill(scenario), progress=broken)
    assert plan.stats["status"] == "optimal"
    assert check(scenario, plan) == []


def test_missing_solver_returns_the_warm_start(monkeypatch):
    scenario = _contended()
    warm = plan_backfill(scenario)
    monkeypatch.setitem(sys.modules, "pyomo.contrib.appsi.solvers", None)
    plan = plan_full(scenario, warm_start=warm)
    assert plan.stats["status"] == "unavailable"
    assert plan.stats["objective_source"] == "allocator"
    assert plan.stats["bound"] == math.inf
    assert plan.same_grid(warm)


def test_solver_failure_returns_the_warm_start(monkeypatch):
    scenario = _contended()
    warm = plan_backfill(scenario)

    def explode(*_args, **_kwargs):
        raise RuntimeError("HiGHS crashed")

    monkeypatch.setattr(full_module._FullModel, "solve", explode)
    plan = plan_full(scenario, warm_start=warm)
    assert plan.stats["status"] == "solver_failed"
    assert "HiGHS crashed" in plan.stats["message"]
    assert plan.same_grid(warm)


@pytest.mark.slow
def test_an_illegal_mip_grid_is_rejected_by_check(monkeypatch):
    scenario = _contended()
    warm = plan_backfill(scenario)

    def corrupt(self):
        grid = self.pinned.copy()
        grid[:, :] = 2  # one batch job everywhere: breaks blocks and preemption
        return grid

    monkeypatch.setattr(full_module._FullModel, "decode", corrupt)
    plan = plan_full(scenario, time_limit=5.0, warm_start=warm)
    assert plan.stats["status"] == "check_failed"
    assert plan.stats["objective_source"] == "allocator"
    assert plan.same_grid(warm)
    assert check(scenario, plan) == []


def test_zero_time_limit_keeps_the_warm_start_when_nothing_better_is_found():
    scenario = _contended()
    warm = plan_backfill(scenario)
    plan = plan_full(scenario, time_limit=0.0, warm_start=warm)
    assert check(scenario, plan) == []
    assert objective(scenario, plan) >= objective(scenario, warm) - 1e-9
    if plan.stats["objective_source"] == "allocator":
        assert plan.same_grid(warm)
        assert plan.stats["status"] in ("time_limit_warm_start", "optimal")
    else:
        assert plan.stats["status"] in ("time_limit_improved", "optimal")


@pytest.mark.slow
def test_large_model_path_bounds_with_the_relaxation():
    scenario = _contended()
    warm = plan_backfill(scenario)
    exact = plan_full(scenario, time_limit=20.0, mip_gap=0.0, warm_start=warm)
    events: list[dict] = []
    plan = plan_full(
        scenario,
        time_limit=20.0,
        mip_gap=0.0,
        warm_start=warm,
        progress=events.append,
        large_model_columns=0,
    )
    assert check(scenario, plan) == []
    relaxation = plan.stats["relaxation_bound"]
    assert relaxation >= objective(scenario, exact) - 1e-6
    # (the bound may exceed it by float noise where the plan reaches it: bound >= J always)
    assert plan.stats["bound"] <= relaxation + 1e-9 * max(1.0, abs(relaxation))
    assert plan.stats["bound"] >= objective(scenario, plan) - 1e-9
    # The shape model's bound is shown once it is solved, before the full model starts; the
    # bounds shown while it solves are its dual bounds, never below it.
    bounds = [e["bound"] for e in events]
    assert relaxation in bounds
    assert all(b >= relaxation - 1e-9 for b in bounds[: bounds.index(relaxation)])
    assert objective(scenario, plan) >= objective(scenario, warm) - 1e-9


def test_a_model_too_large_to_build_returns_the_warm_start():
    scenario = _contended()
    warm = plan_backfill(scenario)
    plan = plan_full(scenario, warm_start=warm, max_model_terms=10)
    assert plan.stats["status"] == "too_large"
    assert plan.stats["objective_source"] == "allocator"
    assert plan.same_grid(warm)
    assert full_module._estimate_terms(scenario) >= full_module._FullModel(scenario).terms


@pytest.mark.slow
def test_concurrent_solves_from_two_threads_both_finish():
    from concurrent.futures import ThreadPoolExecutor

    scenario = _contended()
    warm = plan_backfill(scenario)
    with ThreadPoolExecutor(max_workers=2) as pool:
        params = FullParams(time_limit=20.0, mip_gap=0.0, warm_start=warm)
        futures = [pool.submit(plan_full, scenario, params) for _ in range(2)]
        plans = [f.result(timeout=120) for f in futures]
    # Solves are serialised; the time limit is each call's, waiting included, so the second
    # may stop at its limit: both are legal, at least as good as the start, one is proved.
    values = [objective(scenario, p) for p in plans]
    for plan, value in zip(plans, values, strict=True):
        assert check(scenario, plan) == []
        assert plan.stats["status"] in ("optimal", "time_limit_improved", "time_limit_warm_start")
        assert value >= objective(scenario, warm) - 1e-9
    proved = [v for p, v in zip(plans, values, strict=True) if p.stats["status"] == "optimal"]
    assert proved and all(v <= proved[0] + 1e-6 * max(1.0, abs(v)) for v in values)


def test_an_illegal_warm_start_is_replaced_by_backfill():
    scenario = _contended()
    illegal = Plan.empty(scenario)  # the running job is missing: constraint 5
    assert check(scenario, illegal)
    plan = plan_full(scenario, time_limit=0.0, warm_start=illegal)
    assert check(scenario, plan) == []
    assert "illegal" in plan.stats["warm_start_note"]
    assert _close(plan.stats["allocator_objective"], objective(scenario, plan_backfill(scenario)))


def test_command_line_full_writes_exports_with_solver_metrics(tmp_path, capsys, scenarios_dir):
    import json

    from core.cli import main

    out = tmp_path / "out"
    code = main(
        [
            "plan",
            str(scenarios_dir / "example.json"),
            "--planner",
            "full",
            "--time-limit",
            "5",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    printed = json.loads(capsys.readouterr().out)  # stdout is the metrics and nothing else
    written = json.loads((out / "metrics.json").read_text())
    assert sorted(p.name for p in out.iterdir()) == [
        "assignments.csv",
        "grid.csv",
        "metrics.json",
        "realtime.csv",
    ]
    for shown in (printed, written):
        assert shown["planner"] == "full"
        assert all(key in shown for key in STATS_KEYS)
        assert shown["bound"] >= shown["objective"] - 1e-9
    assert main(["check", str(scenarios_dir / "example.json"), str(out / "grid.csv")]) == 0


def _with_target(scenario: Scenario, target: float) -> Scenario:
    return dataclasses.replace(
        scenario, policy=dataclasses.replace(scenario.policy, rt_coverage_target=target)
    )


@pytest.mark.slow
@pytest.mark.parametrize("seed", [s for s in range(40) if tiny_contended(s).realtime_jobs][:20])
@pytest.mark.parametrize("target", [0.6, 0.9, 1.0])
def test_full_with_a_coverage_target_matches_the_brute_force(seed, target):
    # The SLO row: the optimum over plans whose coverage reaches the target; where none does,
    # the plan comes back legal with slo_met False and the status says the target is
    # infeasible (proved), never an exception, and it is the best of the plans with the most
    # coverage there is: the brute force's, found with the shortfall priced far above any
    # reward (one real-time job: its coverage is the only thing that price can buy), then
    # with that coverage as the target.
    scenario = _with_target(tiny_contended(seed), target)
    optimum, grid = brute_force_optimum(scenario)
    plan = plan_full(scenario, time_limit=30.0, mip_gap=0.0)
    assert check(scenario, plan) == []
    m = metrics(scenario, plan)
    if grid is None:
        assert m["slo_met"] is False
        assert plan.stats["status"] == "slo_infeasible", plan.stats
        priced = dataclasses.replace(
            scenario,
            policy=dataclasses.replace(
                scenario.policy, penalty_weight=1e9, rt_coverage_target=None
            ),
        )
        most = metrics(scenario, Plan(brute_force_optimum(priced)[1], "brute"))["rt_coverage"]
        assert m["rt_coverage"] == pytest.approx(most, abs=1e-9)
        assert plan.stats["most_coverage_proved"] is True, plan.stats
        if most > 0:
            best, _ = brute_force_optimum(_with_target(scenario, most))
        else:
            best, _ = brute_force_optimum(_with_target(scenario, None))
        assert _close(m["objective"], best), (m["objective"], best)
        assert plan.stats["bound"] >= best - 1e-6 * max(1.0, abs(best))
        return
    assert metrics(scenario, Plan(grid, "brute"))["slo_met"] is True
    assert m["slo_met"] is True
    assert plan.stats["status"] == "optimal", plan.stats
    assert _close(m["objective"], optimum), (m["objective"], optimum)
    assert plan.stats["bound"] >= optimum - 1e-6 * max(1.0, abs(optimum))


@pytest.mark.slow
def test_bench_shows_bound_gap_and_time_to_proof_for_the_planner_that_reports_them():
    from core.bench import SCENARIO_DIR, format_table, run_bench

    rows = run_bench([SCENARIO_DIR / "example.json"], ["allocator", "full"], time_limit=20.0)
    allocator, full = rows
    assert (allocator["bound"], allocator["gap"], allocator["proof_s"]) == (None, None, None)
    assert full["bound"] >= full["objective"] - 1e-9
    assert full["gap"] >= 0.0
    if full["status"] == "optimal":
        assert 0.0 < full["proof_s"] <= full["runtime_ms"] / 1000.0 + 1e-9
    else:
        assert full["proof_s"] is None
    header, *lines = format_table(rows).splitlines()
    assert "bound" in header and "gap" in header and "proof s" in header
    assert len([line for line in lines if line.split()[:1] == ["example"]]) == 2


def test_a_time_limit_too_short_to_build_the_model_returns_the_warm_start_and_says_so():
    # The limit is the whole call's: with next to nothing left once the warm start exists, the
    # model is not built (building alone would overrun it) and the warm start comes back.
    scenario = _contended()
    warm = plan_backfill(scenario)
    plan = plan_full(scenario, time_limit=1e-6, warm_start=warm)
    assert plan.same_grid(warm)
    assert plan.stats["status"] == "time_limit_warm_start"
    assert plan.stats["message"].startswith("not solved:")
    assert plan.stats["objective_source"] == "allocator"


def test_a_model_too_slow_to_build_in_time_is_still_proved_by_the_shape_bound(
    monkeypatch, scenarios_dir
):
    """scale-64 in a time limit its full model would not be built in (54,456 terms, about 2 s
    at the estimate): the small shape model's bound is reached by the warm start, which proves
    it optimal. It used to come back unsolved at once, with no bound."""
    from core.planners import full

    scenario = load_scenario(scenarios_dir / "scale-64.json")
    monkeypatch.setattr(full._Clock, "BUILD_S_PER_TERM", 1.0)  # never time to build it
    plan = plan_full(scenario, time_limit=60)
    assert plan.stats["status"] == "optimal" and plan.stats["gap"] == 0.0
    assert plan.stats["bound"] == pytest.approx(objective(scenario, plan), rel=1e-9)
    # Without a shape phase to run (nothing to place), the estimate still refuses in time.
    tiny = _contended()
    monkeypatch.setattr(full._Clock, "MIN_PHASE_S", 1e9)
    plan = plan_full(tiny, time_limit=60, warm_start=plan_backfill(tiny))
    assert plan.stats["status"] == "time_limit_warm_start"
    assert "too little to build the model" in plan.stats["message"]


@pytest.mark.slow
def test_a_solve_whose_reported_value_is_not_its_plans_is_not_taken_for_a_proof():
    # Wide small-31074 with a 95% target no plan reaches. Started from a plan covering 84.33%,
    # HiGHS (1.16, presolve on) reported the serving model's optimum at 84.79% but handed back
    # the start, and full said 84.33% was the most there is, proved. The objective is J exactly,
    # so a solution whose J is not the reported value is solved again (no start, no presolve).
    from core.bench import small_case
    from core.planners.allocator import AllocatorParams, _plan

    scenario = small_case(31074, wide=True, slo=0.95)
    start = _plan(scenario, AllocatorParams(), False)  # without its own search for coverage
    assert metrics(scenario, start)["rt_coverage"] == pytest.approx(0.8433, abs=5e-5)
    plan = plan_full(scenario, time_limit=60.0, mip_gap=0.0, warm_start=start)
    assert plan.stats["most_coverage_proved"] is True
    assert metrics(scenario, plan)["rt_coverage"] == pytest.approx(0.8479, abs=5e-5)
    assert plan.stats["most_coverage"] == pytest.approx(0.8479, abs=5e-5)
