"""Capacity what-ifs: the transforms keep scenarios valid, sweeps on real Dask clusters agree
with a single worker row for row, and `size` finds a size the plan one step below misses."""

from __future__ import annotations

import csv
import io
import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.formats import load_scenario
from core.model import BatchJob, Cluster, Policy, RealtimeJob, Running, Scenario, ScenarioError
from core.plan import check, metrics
from core.planners import solve
from core.sweep import (
    ERROR_COLUMN,
    PARAMETER_COLUMNS,
    WORKER_ENV,
    SweepPoint,
    batch_note,
    ceiling,
    ceiling_at,
    dask_client,
    hold_batch,
    meets_targets,
    run_point,
    run_sweep,
    scale_demand,
    scale_work,
    size,
    smallest_sizes,
    sweep_columns,
    sweep_points,
    sweep_to_csv,
    with_gpus,
    with_policy,
)
from tests.budget import examples
from tests.strategies import scenarios

ROOT = Path(__file__).resolve().parent.parent
MIXED = ROOT / "data" / "scenarios" / "mixed-control.json"
# Runtimes are wall clock; everything else in a row must match exactly.
TIMING_COLUMNS = {"runtime_ms"}


@pytest.fixture(scope="module")
def mixed() -> Scenario:
    return load_scenario(MIXED)


def gpuplan(*args: object, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "core", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )


def without_timing(text: str) -> list[dict[str, str]]:
    rows = list(csv.DictReader(io.StringIO(text)))
    return [{k: v for k, v in row.items() if k not in TIMING_COLUMNS} for row in rows]


# ---------------------------------------------------------------------------------------------
# Transforms: properties


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.integers(1, 40))
def test_with_gpus_keeps_every_job_in_range_or_names_the_point_invalid(scenario, gpus):
    try:
        moved = with_gpus(scenario, gpus)
    except ScenarioError as exc:
        # Only pinned work can make a smaller cluster invalid: a running block outside it, or
        # real-time floors that no longer fit beside what runs and what was held.
        assert gpus < scenario.cluster.gpus
        assert (
            "running block" in str(exc)
            or "real-time gpus_min" in str(exc)
            or ("previous_gpus" in str(exc))
        )
        return
    assert moved.cluster.gpus == gpus
    assert [j.id for j in moved.jobs] == [j.id for j in scenario.jobs]
    # running work stays where it is unless a block of it lies outside the smaller cluster
    stays = all(
        j.running.gpu_start + j.running.gpus <= gpus for j in scenario.batch_jobs if j.running
    )
    for before, after in zip(scenario.jobs, moved.jobs, strict=True):
        assert after.gpus_min <= after.gpus_max <= gpus
        assert after.gpus_max == min(before.gpus_max, after.gpus_max)
        assert after.priority == before.priority
        if isinstance(after, BatchJob):
            assert after.gpu_hours == before.gpu_hours and after.sizes()
            assert after.running == before.running or (
                not stays
                and (after.running.gpus, after.running.remaining_steps)
                == (before.running.gpus, before.running.remaining_steps)
            )
        else:
            assert after.demand == before.demand
            assert len(after.previous_gpus or ()) <= len(before.previous_gpus or ())
            if stays:
                assert set(after.previous_gpus or ()) <= set(before.previous_gpus or ())
    plan = solve(moved, "allocator")
    assert check(moved, plan) == []


@settings(max_examples=examples(40), deadline=None)
@given(scenarios(), st.integers(0, 16))
def test_a_larger_cluster_changes_nothing_but_its_size(scenario, extra):
    moved = with_gpus(scenario, scenario.cluster.gpus + extra)
    assert moved.jobs == scenario.jobs
    assert moved.cluster == replace(scenario.cluster, gpus=scenario.cluster.gpus + extra)


@settings(max_examples=examples(40), deadline=None)
@given(scenarios(), st.sampled_from([0.0, 0.5, 1.0, 1.3, 2.0]), st.sampled_from([0.25, 1, 1.5]))
def test_scales_multiply_demand_and_work_and_nothing_else(scenario, demand_factor, work_factor):
    moved = scale_work(scale_demand(scenario, demand_factor), work_factor)
    assert moved.cluster == scenario.cluster and moved.policy == scenario.policy
    for before, after in zip(scenario.jobs, moved.jobs, strict=True):
        if isinstance(before, RealtimeJob):
            assert after.demand == pytest.approx([d * demand_factor for d in before.demand])
            assert (after.gpus_min, after.gpus_max, after.swap_cap) == (
                before.gpus_min,
                before.gpus_max,
                before.swap_cap,
            )
        else:
            assert after.gpu_hours == pytest.approx(before.gpu_hours * work_factor)
            assert after.running == before.running
    assert check(moved, solve(moved, "allocator")) == []


# ---------------------------------------------------------------------------------------------
# Transforms: hand-checked values


def test_with_gpus_on_mixed_control_by_hand(mixed):
    four = with_gpus(mixed, 4)
    jobs = {j.id: j for j in four.jobs}
    assert (jobs["train-0"].gpus_min, jobs["train-0"].gpus_max) == (4, 4)  # was 4..8
    assert (jobs["chat-api"].gpus_min, jobs["chat-api"].gpus_max) == (1, 4)  # was 1..5
    assert jobs["chat-api"].previous_gpus == ()  # held 6 and 7, which are gone
    assert jobs["sft-7b"].running == Running(0, 2, 5)
    # 24 GPUs: batch blocks are powers of two, so 8 stays the largest (and 16 would be allowed).
    assert {j.id: j.gpus_max for j in with_gpus(mixed, 24).batch_jobs}["train-0"] == 8


def test_with_gpus_clips_a_realtime_floor_and_a_batch_floor():
    scenario = Scenario(
        "floors",
        Cluster(16, 60, 2),
        (
            BatchJob("big", "training", 1, gpus_min=8, gpus_max=16, gpu_hours=16),
            RealtimeJob("api", 1, gpus_min=6, gpus_max=6, swap_cap=6, demand=(6, 6)),
        ),
    )
    moved = with_gpus(scenario, 4)
    big, api = moved.jobs
    assert (big.gpus_min, big.gpus_max) == (4, 4)
    assert (api.gpus_min, api.gpus_max) == (4, 4)
    assert api.demand == (6.0, 6.0)  # demand is what it is: above the cluster means shortfall


def test_running_work_outside_a_smaller_cluster_is_placed_again_from_gpu_0():
    scenario = Scenario(
        "placed",
        Cluster(16, 60, 4),
        (
            BatchJob("a", "training", 2, 8, 8, gpu_hours=24, running=Running(8, 8, 3)),
            BatchJob("b", "training", 1, 2, 2, gpu_hours=4, running=Running(4, 2, 2)),
            RealtimeJob("api", 4, 1, 4, swap_cap=2, demand=(2, 2, 2, 2), previous_gpus=(0, 1)),
        ),
    )
    a, b, api = with_gpus(scenario, 12).jobs
    assert (a.running, b.running) == (Running(0, 8, 3), Running(8, 2, 2))  # largest first
    assert api.previous_gpus == (10, 11)  # as many as it held, beside the running work
    moved = with_gpus(scenario, 12)
    plan = solve(moved, "allocator")
    assert check(moved, plan) == [] and metrics(moved, plan)["rt_coverage"] == 1.0
    assert with_gpus(scenario, 16).jobs == scenario.jobs  # where it all fits, nothing moves
    with pytest.raises(
        ScenarioError,
        match=r"job 'a': running block does not fit: the running "
        r"work \(2 jobs\) holds 10 GPUs, more than a cluster of 8",
    ):
        with_gpus(scenario, 8)


def test_a_point_whose_running_block_no_longer_fits_is_an_error_naming_the_job(mixed):
    with pytest.raises(ScenarioError, match="job 'sft-7b': running block"):
        with_gpus(mixed, 1)
    # Two GPUs: sft-7b's running block takes both, chat-api's floor of 1 has no room.
    with pytest.raises(ScenarioError, match="real-time gpus_min"):
        with_gpus(mixed, 2)
    row = run_point(mixed, SweepPoint(2, penalty_weight=8, decay=0.97), "allocator")
    assert "real-time gpus_min" in row[ERROR_COLUMN] and "utilization" not in row


def test_scales_by_hand(mixed):
    jobs = {j.id: j for j in scale_work(scale_demand(mixed, 1.5), 2).jobs}
    assert jobs["chat-api"].demand[12] == pytest.approx(4.25 * 1.5)
    assert jobs["dpo-13b"].gpu_hours == 58
    assert jobs["sft-7b"].running.remaining_steps == 5  # running work is inherited as is
    history = RealtimeJob("h", 1, 0, 2, 1, demand=(1.0,), history=(2.0, float("nan"), 4.0))
    job = scale_demand(Scenario("h", Cluster(2, 60, 1), (history,)), 0.5).jobs[0]
    assert job.history[0] == 1.0 and job.history[2] == 2.0 and job.history[1] != job.history[1]
    actual = BatchJob("a", "training", 1, 1, 1, gpu_hours=2, gpu_hours_actual=3)
    job = scale_work(Scenario("a", Cluster(1, 60, 4), (actual,)), 1.5).jobs[0]
    assert (job.gpu_hours, job.gpu_hours_actual) == (3.0, 4.5)


def test_with_policy_sets_the_fields_and_the_coverage_target_when_the_model_has_it(mixed):
    moved = with_policy(mixed, penalty_weight=5, decay=0.9)
    assert (moved.policy.penalty_weight, moved.policy.decay) == (5, 0.9)
    assert moved.policy.reward_weight == mixed.policy.reward_weight
    if hasattr(Policy(), "rt_coverage_target"):
        assert with_policy(mixed, rt_coverage_target=0.95).policy.rt_coverage_target == 0.95
    else:
        with pytest.raises(ScenarioError, match="rt_coverage_target"):
            with_policy(mixed, rt_coverage_target=0.95)
    with pytest.raises(ScenarioError, match="decay"):
        with_policy(mixed, decay=1.5)


@pytest.mark.parametrize(
    ("lists", "message"),
    [
        ({"gpus": []}, "gpus has no values"),  # an empty list
        ({"gpus": [0]}, "gpus must be >= 1"),  # no cluster
        ({"gpus": [8.5]}, "gpus must be a whole number"),  # half a GPU
        ({"gpus": [8, 70_000]}, "gpus 70,000 is above the limit of 65,536"),  # past the model
        ({"demand_scale": [-1]}, "demand_scale must be >= 0"),  # negative demand
        ({"work_scale": [0]}, "work_scale must be > 0"),  # batch work must stay positive
        ({"work_scale": [float("nan")]}, "work_scale must be a finite number"),
        ({"penalty_weight": [-2]}, "penalty_weight must be >= 0"),
        ({"decay": [1.2]}, "decay must be in"),  # decay above 1
    ],
)
def test_sweep_points_rejects_bad_lists(mixed, lists, message):
    with pytest.raises(ScenarioError, match=message):
        sweep_points(mixed, **lists)


def test_sweep_points_is_the_product_in_order_with_the_scenarios_own_defaults(mixed):
    points = sweep_points(mixed, gpus=[8, 16], demand_scale=[1, 1.2])
    assert [(p.gpus, p.demand_scale) for p in points] == [(8, 1), (8, 1.2), (16, 1), (16, 1.2)]
    assert {(p.work_scale, p.penalty_weight, p.decay) for p in points} == {(1.0, 8.0, 0.97)}


# ---------------------------------------------------------------------------------------------
# Sweeps on real Dask clusters

SWEEP_ARGS = ("--gpus", "2,8,16", "--demand-scale", "1,1.5", "--planners", "fifo,allocator")


@pytest.fixture(scope="module")
def one_worker_csv(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("one")
    result = gpuplan("sweep", MIXED, *SWEEP_ARGS, "--workers", "1", "--out", out)
    assert result.returncode == 0, result.stderr
    assert "[12/12]" in result.stderr  # progress, one line per finished task
    assert "12 run(s)" in result.stdout and "4 invalid" in result.stdout  # 2 points x 2 planners
    return (out / "sweep.csv").read_text()


@pytest.mark.slow
def test_the_sweep_csv_has_the_columns_and_the_rows_a_planner_would_compute(one_worker_csv):
    rows = list(csv.DictReader(io.StringIO(one_worker_csv)))
    header = one_worker_csv.splitlines()[0].split(",")
    assert tuple(header[:6]) == PARAMETER_COLUMNS and header[-1] == ERROR_COLUMN
    assert "runtime_ms" in header and "rt_coverage" in header and "completed_jobs" in header
    assert [(r["gpus"], r["demand_scale"], r["planner"]) for r in rows[:4]] == [
        ("2", "1.0", "fifo"),
        ("2", "1.0", "allocator"),
        ("2", "1.5", "fifo"),
        ("2", "1.5", "allocator"),
    ]
    assert all("real-time gpus_min" in r["error"] for r in rows[:4])
    mixed = load_scenario(MIXED)
    for row in rows[4:]:
        point = SweepPoint(int(row["gpus"]), float(row["demand_scale"]), 1.0, 8.0, 0.97)
        moved = point.apply(mixed)
        expected = metrics(moved, solve(moved, row["planner"]))
        assert row["error"] == ""
        for key in ("utilization", "value", "objective", "rt_coverage", "completed_jobs"):
            assert float(row[key]) == pytest.approx(expected[key], rel=1e-12), key


@pytest.mark.slow
def test_a_sweep_takes_a_history_window_and_the_csv_pair_as_plan_does(tmp_path):
    """INPUT as `plan` reads it: a sacct window sweeps as its imported scenario does, and the CSV
    pair (no cluster of its own) is read on the largest size and planned on each."""
    from core.formats import scenario_to_tables

    sacct = ROOT / "tests" / "formats" / "fixtures" / "sacct_quirks.txt"
    window = ("--start", "2026-08-17T00:00:00", "--window-days", "1")
    sizes = ("--gpus", "8,16", "--planners", "fifo,allocator", "--workers", "1")
    direct = gpuplan("sweep", sacct, *window, *sizes, "--out", tmp_path / "direct")
    assert direct.returncode == 0, direct.stderr
    imported = gpuplan("import", sacct, *window[:2], "--out", tmp_path / "w.json", "--no-progress")
    assert imported.returncode == 0, imported.stderr
    via_file = gpuplan("sweep", tmp_path / "w.json", *sizes, "--out", tmp_path / "file")
    assert via_file.returncode == 0, via_file.stderr

    def rows(folder: str) -> list[dict]:
        table = csv.DictReader((tmp_path / folder / "sweep.csv").open())
        return [{k: v for k, v in r.items() if k not in TIMING_COLUMNS} for r in table]

    assert rows("direct") == rows("file") and len(rows("direct")) == 4
    assert {r["error"] for r in rows("direct")} == {""}

    mixed = load_scenario(MIXED)
    jobs_csv, demand_csv = scenario_to_tables(mixed)
    (tmp_path / "jobs.csv").write_text(jobs_csv)
    (tmp_path / "demand.csv").write_text(demand_csv)
    pair = (tmp_path / "jobs.csv", tmp_path / "demand.csv")
    swept = gpuplan("sweep", *pair, *sizes, "--out", tmp_path / "pair")
    assert swept.returncode == 0, swept.stderr
    for row in rows("pair"):  # the pair's scenario (its own name and policy) on each size
        planned = gpuplan("plan", *pair, "--gpus", row["gpus"], "--planner", row["planner"])
        assert planned.returncode == 0, planned.stderr
        expected = json.loads(planned.stdout)
        for key in ("utilization", "value", "objective", "rt_coverage", "completed_jobs"):
            assert float(row[key]) == pytest.approx(expected[key], rel=1e-12), key


@pytest.mark.slow
def test_two_local_workers_give_the_same_sweep_csv_as_one(one_worker_csv, tmp_path):
    result = gpuplan("sweep", MIXED, *SWEEP_ARGS, "--workers", "2", "--out", tmp_path)
    assert result.returncode == 0, result.stderr
    assert "2 worker(s), 2 thread(s)" in result.stdout
    assert without_timing((tmp_path / "sweep.csv").read_text()) == without_timing(one_worker_csv)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_an_external_scheduler_and_worker_give_the_same_sweep_csv(one_worker_csv, tmp_path):
    dask = Path(sys.executable).parent / "dask"
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # the worker imports this checkout's core
    logs = tmp_path / "logs"
    logs.mkdir()
    processes = []
    try:
        processes.append(
            subprocess.Popen(
                [dask, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
                stdout=subprocess.DEVNULL,
                stderr=(logs / "scheduler.log").open("w"),
                env=env,
            )
        )
        processes.append(
            subprocess.Popen(
                [dask, "worker", address, "--nthreads", "1", "--nworkers", "1"]
                + ["--host", "127.0.0.1", "--no-dashboard"],
                stdout=subprocess.DEVNULL,
                stderr=(logs / "worker.log").open("w"),
                env=env,
                cwd=tmp_path,
            )
        )
        _wait_for_worker(address, logs)
        out = tmp_path / "out"
        result = gpuplan("sweep", MIXED, *SWEEP_ARGS, "--scheduler", address, "--out", out)
        assert result.returncode == 0, result.stderr
        assert f"1 worker(s), 1 thread(s) at {address}" in result.stdout
        assert without_timing((out / "sweep.csv").read_text()) == without_timing(one_worker_csv)
        # DASK_SCHEDULER_ADDRESS takes the same path.
        out2 = tmp_path / "out2"
        by_env = gpuplan(
            "sweep",
            MIXED,
            *SWEEP_ARGS,
            "--out",
            out2,
            env={**env, "DASK_SCHEDULER_ADDRESS": address},
        )
        assert by_env.returncode == 0, by_env.stderr
        assert address in by_env.stdout
        assert without_timing((out2 / "sweep.csv").read_text()) == without_timing(one_worker_csv)
    finally:
        for process in reversed(processes):
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


def _wait_for_worker(address: str, logs: Path) -> None:
    from distributed import Client

    deadline = time.monotonic() + 60
    while True:
        try:
            with Client(address, timeout="5s") as client:
                client.wait_for_workers(1, timeout=30)
                return
        except (OSError, TimeoutError) as exc:
            if time.monotonic() > deadline:
                pytest.fail(f"no Dask worker at {address}: {exc}\n{_tail(logs)}")
            time.sleep(0.5)


def _tail(logs: Path) -> str:
    return "\n".join(f"{p.name}: {p.read_text()[-800:]}" for p in sorted(logs.iterdir()))


@pytest.mark.slow
def test_run_sweep_in_process_sorts_rows_and_cancels_pending_tasks_when_progress_raises(mixed):
    points = sweep_points(mixed, gpus=[8, 16], demand_scale=[1, 1.5])
    seen = []
    with dask_client(2) as client:
        rows = run_sweep(
            client, mixed, points, ["allocator", "fifo"], progress=lambda d, n, r: seen.append(d)
        )
        assert seen == list(range(1, 9))
        assert [(r["gpus"], r["demand_scale"], r["planner"]) for r in rows] == [
            (p.gpus, p.demand_scale, planner) for p in points for planner in ("allocator", "fifo")
        ]

        def cancel(done, total, row):
            raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            run_sweep(client, mixed, points * 4, ["allocator"], progress=cancel)
        # Nothing of the cancelled sweep is left running on the cluster.
        deadline = time.monotonic() + 20
        while client.processing() and any(client.processing().values()):
            assert time.monotonic() < deadline, client.processing()
            time.sleep(0.1)
    assert sweep_columns(rows)[-1] == ERROR_COLUMN
    assert sweep_to_csv(rows).count("\n") == len(rows) + 1


def test_smallest_sizes_reads_the_sweep_rows(mixed):
    rows = [
        run_point(mixed, SweepPoint(g, 1.0, 1.0, 8.0, 0.97), "allocator") for g in (2, 8, 16, 24)
    ]
    [entry] = smallest_sizes(rows, coverage=0.99, completed=0.8)
    assert entry["gpus"] == 24 and entry["planner"] == "allocator"
    assert meets_targets(rows[0], coverage=0.5) == {"coverage": False}  # the invalid point
    [none] = smallest_sizes(rows, completed=1.0)
    assert none["gpus"] is None


# ---------------------------------------------------------------------------------------------
# Sizing


def test_size_on_mixed_control_meets_the_targets_and_one_step_below_does_not(mixed):
    result = size(mixed, coverage=0.99, completed=0.8, step=8)
    gpus = result["gpus"]
    assert gpus is not None and gpus % 8 == 0
    tried = {row["gpus"]: row for row in result["tried"]}
    assert tried[gpus]["meets"] and tried[gpus]["rt_coverage"] >= 0.99
    assert tried[gpus]["completed_jobs"] / tried[gpus]["batch_jobs"] >= 0.8
    # Independently: the plan one step below misses at least one target.
    below = with_gpus(mixed, gpus - 8)
    values = metrics(below, solve(below, "allocator"))
    assert values["rt_coverage"] < 0.99 or values["completed_jobs"] / values["batch_jobs"] < 0.8
    assert sorted(tried) == [row["gpus"] for row in result["tried"]]


@pytest.mark.slow
def test_size_says_which_target_no_size_up_to_the_limit_meets(mixed):
    # Within the ceiling (9 of 11 can complete, coverage 100%), but 16 GPUs complete 6/11.
    result = gpuplan("size", MIXED, "--completed", "0.8", "--max-gpus", "16")
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)
    assert printed["gpus"] is None
    assert printed["ceiling"] == {"coverage": 1.0, "completed": pytest.approx(9 / 11)}
    assert list(printed["failed"]) == ["completed"]
    assert "at 16 GPUs 6/11 batch jobs complete" in printed["failed"]["completed"]
    assert [row["gpus"] for row in printed["tried"]] == [8, 16]
    assert "no size up to 16 GPUs meets completed" in result.stderr


@pytest.mark.slow
def test_size_above_the_ceiling_tries_no_size_and_names_the_jobs(mixed):
    # train-1 arrives at step 11 and needs ceil(89 / 4) = 23 steps on its largest block (4
    # GPUs), train-4 20: neither ends within 24 steps on any cluster, so 9/11 is the most.
    result = gpuplan("size", MIXED, "--completed", "1.0", "--coverage", "0.99")
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)
    assert printed["gpus"] is None and printed["tried"] == []
    assert list(printed["failed"]) == ["completed"]  # coverage 100% is reachable
    assert result.stderr == (
        "size: no cluster size completes 100% of the batch jobs: at most 81.8% on any number "
        "of GPUs (train-1 arrives at step 11 and needs 23 steps on 4 GPUs, past the 24-step "
        "horizon; train-4 arrives at step 11 and needs 20 steps on 4 GPUs, past the 24-step "
        "horizon)\n"
    )
    # chat-api (gpus_max 5) at 1.5x its demand, whose peak is 4.25: 6.375 GPUs
    busy = size(scale_demand(mixed, 1.5), coverage=0.99)
    assert busy["tried"] == [] and busy["ceiling"]["coverage"] < 0.99
    assert (
        "chat-api: demand above gpus_max 5 at 7 steps of 24 (peak 6.375)"
        in (busy["failed"]["coverage"])
    )


def test_size_with_coverage_alone_says_what_share_of_the_batch_jobs_completes(mixed):
    """Issue 53: batch work that is not a target is named, with its share at the answer."""
    result = size(mixed, coverage=0.99, step=8)
    gpus = result["gpus"]
    assert gpus is not None and result["targets"] == {"coverage": 0.99}
    at = with_gpus(mixed, gpus)
    values = metrics(at, solve(at, "allocator"))
    assert result["batch"] == {
        "target": False,
        "gpus": gpus,
        "completed_share": values["completed_jobs"] / values["batch_jobs"],
        "completed_jobs": values["completed_jobs"],
        "batch_jobs": values["batch_jobs"],
    }
    n, m = values["completed_jobs"], values["batch_jobs"]
    assert batch_note(result) == (
        f"batch work is not a target; at {gpus} GPUs {n / m:.1%} of batch jobs complete "
        f"({n} of {m})"
    )
    assert "batch" not in size(mixed, coverage=0.99, completed=0.5, step=8)
    # no size up to the limit: the share at the largest size tried, said as such
    short = size(mixed, coverage=0.99, step=8, max_gpus=8)
    assert short["gpus"] is None and short["batch"]["gpus"] == 8
    assert "at 8 GPUs (the largest size tried)" in batch_note(short)


def test_hold_batch_takes_as_runs_share_at_most_the_ceiling(mixed):
    bound = ceiling(mixed).completed  # 9 of 11
    hold = hold_batch(mixed, {"completed_jobs": 5, "batch_jobs": 11})
    assert hold is not None and hold.completed == 5 / 11
    assert hold.note().startswith("batch completion held at as-run's 45.5% (5 of 11 jobs)")
    held = size(mixed, coverage=0.99, step=8, hold=hold)
    assert held["targets"]["completed"] == 5 / 11 and held["targets"]["completed_from"] == "as-run"
    assert "batch" not in held
    tried = {row["gpus"]: row for row in held["tried"]}
    assert tried[held["gpus"]]["completed_jobs"] >= 5
    # a share given on the command line wins over the hold
    assert size(mixed, completed=0.5, step=8, hold=hold)["targets"] == {"completed": 0.5}
    # as-run completed more than any plan can: held at the ceiling, and said so
    above = hold_batch(mixed, {"completed_jobs": 11, "batch_jobs": 11})
    assert above is not None and above.completed == bound < 1.0
    assert above.fields()["as_run_completed"] == 1.0
    assert "the most any size reaches (as-run completed 100.0%, 11 of 11 jobs)" in above.note()
    assert hold_batch(mixed, {"completed_jobs": 0, "batch_jobs": 0}) is None  # nothing to hold
    assert hold_batch(mixed, None) is None


@pytest.mark.slow
def test_size_cli_on_a_scenario_with_coverage_alone_says_batch_is_not_a_target(mixed):
    result = gpuplan("size", MIXED, "--coverage", "0.99", "--no-progress")
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)
    gpus = printed["gpus"]
    at = with_gpus(mixed, gpus)
    values = metrics(at, solve(at, "allocator"))
    n, m = values["completed_jobs"], values["batch_jobs"]
    assert printed["batch"] == {
        "target": False,
        "gpus": gpus,
        "completed_share": pytest.approx(n / m),
        "completed_jobs": n,
        "batch_jobs": m,
    }
    assert result.stderr == (
        f"size: batch work is not a target; at {gpus} GPUs {n / m:.1%} of batch jobs complete "
        f"({n} of {m})\n"
    )


def test_ceiling_by_hand():
    s = Scenario(
        "ceiling",
        Cluster(8, 60, 4),
        (
            # served at most min(demand, 2): 1 + 2 + 2 + 2 of 10
            RealtimeJob("api", 2, 1, 2, swap_cap=2, demand=(1, 3, 2, 4)),
            # from 1 GPU, one more a step: 2, 3, 4, 4 GPUs, so 2 + 3 + 3 + 3 of 12
            RealtimeJob("chat", 1, 1, 4, swap_cap=1, demand=(3, 3, 3, 3), previous_gpus=(4,)),
            BatchJob("ok", "training", 1, 1, 1, gpu_hours=1),
            BatchJob("late", "training", 1, 1, 4, gpu_hours=12, arrival_step=2),  # 3 steps on 4
            BatchJob("run", "training", 1, 2, 2, gpu_hours=10, running=Running(0, 2, 5)),
        ),
    )
    c = ceiling(s)
    assert c.coverage == pytest.approx(18 / 22) and c.completed == pytest.approx(1 / 3)
    assert c.coverage_limits == (
        "api: demand above gpus_max 2 at 2 steps of 4 (peak 4)",
        "chat: from its 1 GPU at the start, swap_cap 1 trails its demand at step 0",
    )
    assert c.completed_limits == (
        "late arrives at step 2 and needs 3 steps on 4 GPUs, past the 4-step horizon",
        "run runs 5 more steps, past the 4-step horizon",
    )
    assert c.misses(coverage=18 / 22, completed=1 / 3) == {}  # at the ceiling is reachable
    assert set(c.misses(coverage=0.9, completed=0.5)) == {"coverage", "completed"}
    # a sweep point's scales move it: half the demand is within api's gpus_max and chat's ramp
    assert ceiling_at(s, demand_scale=0.5).coverage == 1.0
    assert ceiling_at(s, work_scale=0.5).completed == pytest.approx(2 / 3)  # late: 2 steps


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(max_gpus=8), st.sampled_from([1, 4]))
def test_no_plan_on_any_cluster_passes_the_ceiling(scenario, times):
    bound = ceiling(scenario)
    moved = with_gpus(scenario, scenario.cluster.gpus * times)
    for planner in ("fifo", "backfill", "allocator"):
        values = metrics(moved, solve(moved, planner))
        assert values["rt_coverage"] <= bound.coverage + 1e-9
        assert values["completed_jobs"] <= round(bound.completed * values["batch_jobs"])


@pytest.mark.slow
def test_size_cli_prints_the_size_and_every_size_tried():
    result = gpuplan("size", MIXED, "--coverage", "0.99", "--completed", "0.8")
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)
    assert printed["gpus"] == 24
    assert [(row["gpus"], row["meets"]) for row in printed["tried"]] == [
        (8, False),
        (16, False),
        (24, True),
        (32, True),
    ]
    # each size on stderr as it is planned, in the order tried (32 first: the search doubles)
    assert result.stderr.splitlines() == [
        "size: 8 GPUs misses coverage, completed",
        "size: 16 GPUs misses coverage, completed",
        "size: 32 GPUs meets the targets",
        "size: 24 GPUs meets the targets",
    ]
    quiet = gpuplan("size", MIXED, "--coverage", "0.99", "--completed", "0.8", "--no-progress")
    assert quiet.returncode == 0 and quiet.stderr == ""
    assert json.loads(quiet.stdout)["gpus"] == 24


@settings(max_examples=examples(25), deadline=None)
@given(scenarios(max_gpus=8), st.sampled_from([1, 2, 4]), st.sampled_from([0.5, 0.9, 1.0]))
def test_size_answer_meets_and_the_step_below_misses(scenario, step, target):
    result = size(scenario, coverage=target, completed=target / 2, step=step, max_gpus=32)
    tried = {row["gpus"]: row for row in result["tried"]}
    if result["gpus"] is None:
        if not tried:  # a target above the ceiling: missed at every size
            assert result["failed"] == ceiling(scenario).misses(target, target / 2) != {}
            return
        assert result["failed"] and not tried[result["max_gpus"]]["meets"]
        return
    assert tried[result["gpus"]]["meets"]
    if result["gpus"] - step >= step:
        assert not tried[result["gpus"] - step]["meets"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("sweep", MIXED, "--gpus", "8,x"), "--gpus: 'x' is not a number"),
        (("sweep", MIXED, "--gpus", ""), "--gpus: '' is not a number"),  # empty list
        (("sweep", MIXED, "--gpus", "8,,16"), "--gpus: '' is not a number"),
        (("sweep", MIXED, "--demand-scale", "-1"), "demand_scale must be >= 0"),
        (("sweep", MIXED, "--work-scale", "0"), "work_scale must be > 0"),
        (("sweep", MIXED, "--penalty", "five"), "--penalty: 'five' is not a number"),
        (("sweep", MIXED, "--planners", "fifo,best"), "--planners: 'best'"),
        (("sweep", MIXED, "--workers", "0"), "--workers: must be at least 1"),
        (("sweep", "missing.json"), "missing.json"),
        (("sweep", MIXED, "--scheduler", "nonsense://x"), "scheduler nonsense://x: cannot connect"),
        (("size", MIXED, "--coverage", "high"), "--coverage: 'high' is not a number"),
        (("size", MIXED, "--coverage", "1.5"), "coverage must be in [0, 1]"),
        (("size", MIXED, "--completed", "0.5", "--step", "0"), "step must be >= 1"),
        (("size", MIXED), "give at least one target"),
        (("size", "missing.json"), "give at least one target"),  # said before any input is read
        (("sweep", MIXED, "--out", "{a_file}"), "is a file, not a folder"),  # before the input
        (("sweep", "missing.txt", "--gpus", "8,0"), "gpus must be >= 1"),  # the lists, too
        (("sweep", "missing.txt", "--decay", "1.5"), "decay must be in (0, 1]"),
        (("sweep", MIXED, "--window-days", "2"), "--window-days applies to a scheduler history"),
        (("sweep", "{jobs}", "{demand}"), "the CSV pair carries no cluster: give --gpus"),
    ],
)
def test_bad_values_exit_2_with_one_error_line(args, message, tmp_path):
    from core.formats import scenario_to_tables

    (tmp_path / "a_file").write_text("")
    jobs_csv, demand_csv = scenario_to_tables(load_scenario(MIXED))
    (tmp_path / "jobs.csv").write_text(jobs_csv)
    (tmp_path / "demand.csv").write_text(demand_csv)
    files = {name: tmp_path / f"{name}.csv" for name in ("jobs", "demand")}
    args = tuple(str(a).format(a_file=tmp_path / "a_file", **files) for a in args)
    if args[0] == "sweep" and "--out" not in args:
        args = (*args, "--out", tmp_path)
    result = gpuplan(*args)
    assert result.returncode == 2, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert message in lines[0]
    assert not (tmp_path / "sweep.csv").exists()


# ---------------------------------------------------------------------------------------------
# The chart


def test_capacity_figure_has_a_column_per_demand_scale_a_line_per_planner_and_the_stars(mixed):
    import pandas as pd

    from core.charts import CAPACITY_METRICS, capacity_figure

    points = sweep_points(mixed, gpus=[2, 8, 16, 24], demand_scale=[1, 1.5])
    rows = [run_point(mixed, p, planner) for p in points for planner in ("fifo", "allocator")]
    marks = smallest_sizes(rows, coverage=0.99, completed=0.8)
    fig = capacity_figure(pd.DataFrame(rows), marks)
    titles = [a.text for a in fig.layout.annotations]
    assert titles == ["demand x1", "demand x1.5"]
    lines = [t for t in fig.data if t.mode == "lines+markers"]
    assert len(lines) == 2 * 2 * len(CAPACITY_METRICS)  # planners x scales x metrics
    assert sorted(t.name for t in lines if t.showlegend) == ["allocator", "fifo"]
    assert all(list(t.x) == [8, 16, 24] for t in lines)  # the invalid 2-GPU point is left out
    stars = [t for t in fig.data if t.mode == "markers"]
    # Only allocator at demand x1 meets both targets (at 24); fifo never in this grid.
    assert {(t.name.split(":")[0], tuple(t.x)) for t in stars} == {("allocator", (24,))}
    assert len(stars) == len(CAPACITY_METRICS)
    # Completed jobs are a share of the batch jobs, as the target is set, with the counts on hover
    (done,) = [
        t
        for t in lines
        if t.name == "allocator" and t.yaxis == "y7" and "completed" in t.hovertemplate
    ]
    at_24 = next(r for r in rows if r["planner"] == "allocator" and r["gpus"] == 24)
    share = at_24["completed_jobs"] / at_24["batch_jobs"]
    assert list(done.y)[-1] == pytest.approx(share) and 0.8 <= share <= 1
    assert list(done.customdata)[-1] == f" ({at_24['completed_jobs']}/{at_24['batch_jobs']})"


# ---------------------------------------------------------------------------------------------
# One thread per worker

THREADS_AFTER_FULL = """
import re, sys
import highspy, pyomo.environ
from core.formats import load_scenario
from core.planners import solve
from core.sweep import single_threaded_highs
def threads():
    return int(re.search(r"Threads:\\s+(\\d+)", open("/proc/self/status").read()).group(1))
before = threads()  # whatever the libraries started at import (pyarrow's pool, say)
if sys.argv[1] == "pin":
    assert single_threaded_highs()
scenario = load_scenario(sys.argv[2])
assert solve(scenario, "full", time_limit=2).stats["status"] != "solver_failed"
print(threads() - before)
"""


@pytest.mark.slow
@pytest.mark.skipif(
    (os.cpu_count() or 1) < 2 or not Path("/proc/self/status").exists(),
    reason="needs Linux and 2+ cores (HiGHS sizes its default scheduler by the core count)",
)
def test_pinned_highs_runs_the_full_planner_on_one_os_thread():
    def threads(mode: str) -> int:
        result = subprocess.run(
            [sys.executable, "-c", THREADS_AFTER_FULL, mode, str(MIXED)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            # BLAS pools off (as the workers have them), so the count is HiGHS's alone
            env={**os.environ, **WORKER_ENV, "PYTHONPATH": str(ROOT)},
        )
        assert result.returncode == 0, result.stderr
        return int(result.stdout.strip().splitlines()[-1])

    assert threads("pin") == 0  # HiGHS started no thread of its own
    assert threads("default") > 0  # without the pin HiGHS adds threads for the cores


@pytest.mark.slow
def test_a_full_sweep_task_pins_highs_in_its_worker(mixed):
    def pinned() -> list[bool]:
        import core.sweep

        return list(core.sweep._HIGHS_PINNED)

    with dask_client(1) as client:
        [row] = run_sweep(
            client,
            mixed,
            [SweepPoint(8, 1.0, 1.0, 8.0, 0.97)],
            ["full"],
            options={"full": {"time_limit": 2.0}},
        )
        assert row["error"] == "" and row["objective"] >= 0
        assert list(client.run(pinned).values()) == [[True]]


SCRIPT_WITHOUT_MAIN_GUARD = """
import sys
from pathlib import Path
marker = Path(sys.argv[1])
marker.write_text(marker.read_text() + "ran\\n" if marker.exists() else "ran\\n")
from core.formats import load_scenario
from core.sweep import dask_client, run_sweep, sweep_points
scenario = load_scenario(sys.argv[2])
with dask_client(1) as client:
    rows = run_sweep(client, scenario, sweep_points(scenario), ["allocator"])
print(rows[0]["error"] == "")
"""


@pytest.mark.slow
def test_workers_never_rerun_the_script_that_started_them(tmp_path):
    # Under Streamlit the parent's __main__ is the app script; a spawned worker must not run it.
    script, marker = tmp_path / "script.py", tmp_path / "marker.txt"
    script.write_text(SCRIPT_WITHOUT_MAIN_GUARD)
    result = subprocess.run(
        [sys.executable, str(script), str(marker), str(MIXED)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "True"
    assert marker.read_text() == "ran\n"  # once: in the parent only
