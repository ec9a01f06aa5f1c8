"""Capacity what-ifs: scenario transforms, sweeps on a Dask client, and sizing (SPEC section 7).

The transforms are pure: each takes a valid `Scenario` and returns another one, validated again by
the model (a point the model rejects, e.g. a running block on a GPU that no longer exists, raises
`ScenarioError`, which a sweep reports in that point's row). A sweep is the product of the
parameter lists, every planner at every point, one Dask task per point and planner; the rows are
sorted by (point, planner) in the order given, so the table never depends on how many workers
ran it or in which order they finished. The engine is Dask distributed: a `LocalCluster` of
single-threaded worker processes by default, or any running Dask cluster by address (the same
code path). One thread per worker: BLAS/OpenMP through the workers' environment, HiGHS by
`single_threaded_highs` before a worker's first `full` run.
"""

from __future__ import annotations

import itertools
import math
import os
import sys
import time
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from typing import Any

from .model import MAX_CELLS, MAX_GPUS, BatchJob, RealtimeJob, Scenario, ScenarioError
from .views import plural

PARAMETER_COLUMNS = ("gpus", "demand_scale", "work_scale", "penalty_weight", "decay", "planner")
ERROR_COLUMN = "error"
TARGETS = ("coverage", "completed")
# Environment of every local worker process: one thread for BLAS/OpenMP, as for the task thread.
WORKER_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
SCHEDULER_ENV = "DASK_SCHEDULER_ADDRESS"

Progress = Callable[[int, int, dict[str, Any]], None]


# ---------------------------------------------------------------------------------------------
# Transforms


def _largest_power_of_two(n: int) -> int:
    return 1 << (max(1, n).bit_length() - 1)


def with_gpus(scenario: Scenario, gpus: int) -> Scenario:
    """The scenario on a cluster of `gpus` GPUs.

    Every job's `gpus_max` is clipped to the cluster (batch: to the largest power of two that
    fits) and `gpus_min` to the new `gpus_max`, so each job stays within its own range. Real-time
    `previous_gpus` lose the GPUs that no longer exist. Running blocks are inherited as they are
    where they all still fit; where one lies outside the smaller cluster, the running work is
    placed again from GPU 0, largest block first (so each stays aligned), and the real-time sets
    held at the start move onto the GPUs it leaves, as many as each held: on a cluster of another
    size, where work runs now is no fact (an import places it on the trace's cluster). Running
    work that does not fit at all, or real-time floors that no longer fit beside it, make the
    point raise a `ScenarioError` naming the job.
    """
    _check_gpus(gpus)
    gpus = int(gpus)
    cluster = scenario.cluster
    if cluster.nodes:
        if gpus == cluster.gpus:
            return scenario
        raise ScenarioError(
            f"sweep: the cluster is node groups ({cluster.gpus} GPUs): it changes size by its "
            f"node counts (sweep --nodes GROUP=LIST, size --vary GROUP=LIST), not to {gpus} GPUs"
        )
    if gpus * cluster.horizon_steps > MAX_CELLS:
        raise ScenarioError(
            f"sweep: {gpus} GPUs x {cluster.horizon_steps} steps exceeds the limit of "
            f"{MAX_CELLS:,} grid cells"
        )
    batch_cap = _largest_power_of_two(gpus)
    jobs = []
    for job in scenario.jobs:
        if isinstance(job, BatchJob):
            high = min(job.gpus_max, batch_cap)
            jobs.append(replace(job, gpus_max=high, gpus_min=min(job.gpus_min, high)))
        else:
            high = min(job.gpus_max, gpus)
            previous = job.previous_gpus
            if previous is not None:
                previous = tuple(g for g in previous if g < gpus)
            jobs.append(
                replace(
                    job, gpus_max=high, gpus_min=min(job.gpus_min, high), previous_gpus=previous
                )
            )
    if any(j.running and j.running.gpu_start + j.running.gpus > gpus for j in scenario.batch_jobs):
        jobs = _running_placed_again(jobs, gpus)
    return replace(scenario, cluster=replace(cluster, gpus=gpus), jobs=tuple(jobs))


def _running_placed_again(jobs: list, gpus: int) -> list:
    """`jobs` with the running blocks side by side from GPU 0, largest first (a power of two
    after larger ones starts aligned), then the real-time sets held at the start on the GPUs
    after them, as many as each still holds."""
    running = sorted(
        (k for k, job in enumerate(jobs) if isinstance(job, BatchJob) and job.running),
        key=lambda k: (-jobs[k].running.gpus, jobs[k].running.gpu_start),
    )
    held = sum(jobs[k].running.gpus for k in running)
    if held > gpus:
        raise ScenarioError(
            f"job '{jobs[running[0]].id}': running block does not fit: the running work "
            f"({len(running)} job{'s' * (len(running) > 1)}) holds {held} GPUs, more than a "
            f"cluster of {gpus}"
        )
    out, start = list(jobs), 0
    for k in running:
        out[k] = replace(jobs[k], running=replace(jobs[k].running, gpu_start=start))
        start += jobs[k].running.gpus
    free = iter(range(start, gpus))
    for k, job in enumerate(jobs):  # (their sets already clipped to the cluster, as above)
        if isinstance(job, RealtimeJob) and job.previous_gpus is not None:
            count = len(job.previous_gpus)
            out[k] = replace(job, previous_gpus=tuple(itertools.islice(free, count)))
    return out


def scale_demand(scenario: Scenario, factor: float) -> Scenario:
    """Real-time `demand` and `history` multiplied by `factor` (>= 0); gaps in history stay gaps."""
    _check_scale("demand_scale", factor, allow_zero=True)
    factor = float(factor)
    jobs = []
    for job in scenario.jobs:
        if isinstance(job, RealtimeJob):
            history = job.history
            if history is not None:
                history = tuple(h if math.isnan(h) else h * factor for h in history)
            job = replace(job, demand=tuple(d * factor for d in job.demand), history=history)
        jobs.append(job)
    return replace(scenario, jobs=tuple(jobs))


def scale_work(scenario: Scenario, factor: float) -> Scenario:
    """Batch `gpu_hours` (and `gpu_hours_actual`) multiplied by `factor` (> 0).

    Running jobs keep their `remaining_steps`: what is already on the cluster is inherited as is.
    """
    _check_scale("work_scale", factor, allow_zero=False)
    factor = float(factor)
    jobs = []
    for job in scenario.jobs:
        if isinstance(job, BatchJob):
            actual = job.gpu_hours_actual
            job = replace(
                job,
                gpu_hours=job.gpu_hours * factor,
                gpu_hours_actual=None if actual is None else actual * factor,
            )
        jobs.append(job)
    return replace(scenario, jobs=tuple(jobs))


def with_policy(
    scenario: Scenario,
    *,
    penalty_weight: float | None = None,
    decay: float | None = None,
    rt_coverage_target: float | None = None,
) -> Scenario:
    """The scenario with some policy fields set (the `Policy` validates them)."""
    changes: dict[str, Any] = {}
    if penalty_weight is not None:
        changes["penalty_weight"] = penalty_weight
    if decay is not None:
        changes["decay"] = decay
    if rt_coverage_target is not None:
        if not hasattr(scenario.policy, "rt_coverage_target"):
            raise ScenarioError("policy: this version has no rt_coverage_target field")
        changes["rt_coverage_target"] = rt_coverage_target
    if not changes:
        return scenario
    return replace(scenario, policy=replace(scenario.policy, **changes))


def _check_scale(name: str, value: object, *, allow_zero: bool, owner: str = "sweep") -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ScenarioError(f"{owner}: {name} must be a finite number, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ScenarioError(f"{owner}: {name} must be {bound}, got {value!r}")


def _check_gpus(value: object) -> None:
    """A cluster size: a whole number from 1 to the model's limit."""
    _check_count("gpus", value, minimum=1)
    if value > MAX_GPUS:
        raise ScenarioError(f"sweep: gpus {int(value):,} is above the limit of {MAX_GPUS:,} GPUs")


def _check_count(name: str, value: object, *, minimum: int, owner: str = "sweep") -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value != int(value)
    ):
        raise ScenarioError(f"{owner}: {name} must be a whole number, got {value!r}")
    if value < minimum:
        raise ScenarioError(f"{owner}: {name} must be >= {minimum}, got {value!r}")


# ---------------------------------------------------------------------------------------------
# Points


@dataclass(frozen=True)
class SweepPoint:
    """One point of a sweep: the cluster size, the two scales and the policy."""

    gpus: int
    demand_scale: float = 1.0
    work_scale: float = 1.0
    penalty_weight: float = 8.0
    decay: float = 0.97
    # SPEC section 8: node counts per group ((group, count) pairs; `gpus` is then theirs)
    nodes: tuple[tuple[str, int], ...] | None = None

    def apply(self, scenario: Scenario) -> Scenario:
        """The base scenario moved to this point (raises ScenarioError when it is invalid)."""
        if self.nodes is not None:
            from .mix import with_nodes

            moved = with_nodes(scenario, self.nodes)
        else:
            moved = with_gpus(scenario, self.gpus)
        if self.demand_scale != 1:
            moved = scale_demand(moved, self.demand_scale)
        if self.work_scale != 1:
            moved = scale_work(moved, self.work_scale)
        return with_policy(moved, penalty_weight=self.penalty_weight, decay=self.decay)


def sweep_points(
    scenario: Scenario,
    *,
    gpus: Sequence[int] | None = None,
    demand_scale: Sequence[float] | None = None,
    work_scale: Sequence[float] | None = None,
    penalty_weight: Sequence[float] | None = None,
    decay: Sequence[float] | None = None,
    nodes: Mapping[str, Sequence[int]] | None = None,
) -> list[SweepPoint]:
    """The product of the lists in the order given (gpus, or the node mixes, outermost); an
    omitted list is the scenario's own value (1 for the scales). `nodes`: {group: counts}, the
    mixes of `core.mix.mixes`, instead of gpus. Empty lists and bad values raise
    ScenarioError."""
    if nodes is not None:
        if gpus is not None:
            raise ScenarioError("sweep: give --gpus or --nodes, not both")
        from .mix import mix_gpus, mixes

        rest = sweep_points(
            scenario,
            demand_scale=demand_scale,
            work_scale=work_scale,
            penalty_weight=penalty_weight,
            decay=decay,
        )
        return [
            replace(point, gpus=mix_gpus(scenario, mix), nodes=mix)
            for mix in mixes(scenario, nodes)
            for point in rest
        ]
    check_point_lists(
        gpus=gpus,
        demand_scale=demand_scale,
        work_scale=work_scale,
        penalty_weight=penalty_weight,
        decay=decay,
    )
    lists = {
        "gpus": [scenario.cluster.gpus] if gpus is None else list(gpus),
        "demand_scale": [1.0] if demand_scale is None else list(demand_scale),
        "work_scale": [1.0] if work_scale is None else list(work_scale),
        "penalty_weight": [scenario.policy.penalty_weight]
        if penalty_weight is None
        else list(penalty_weight),
        "decay": [scenario.policy.decay] if decay is None else list(decay),
    }
    return [
        SweepPoint(int(g), float(d), float(w), float(p), float(k))
        for g, d, w, p, k in itertools.product(*lists.values())
    ]


def check_point_lists(**lists: Sequence[float] | None) -> None:
    """The lists of `sweep_points` that are given (gpus, demand_scale, work_scale,
    penalty_weight, decay), checked without a scenario: the command line refuses them before it
    reads a large history. Empty lists and bad values raise ScenarioError."""
    for name, values in lists.items():
        if values is None:
            continue
        if not values:
            raise ScenarioError(f"sweep: {name} has no values")
        for value in values:
            if name == "gpus":  # (past the limit no point could plan: refused, not an error row)
                _check_gpus(value)
            elif name == "penalty_weight":
                _check_scale(name, value, allow_zero=True)
            elif name == "decay":
                _check_scale(name, value, allow_zero=False)
                if value > 1:
                    raise ScenarioError(f"sweep: decay must be in (0, 1], got {value!r}")
            elif name in ("demand_scale", "work_scale"):
                _check_scale(name, value, allow_zero=name == "demand_scale")
            else:
                raise TypeError(f"check_point_lists: unknown list {name!r}")


def meets_targets(
    row: Mapping[str, Any], coverage: float | None = None, completed: float | None = None
) -> dict[str, bool]:
    """Target name -> met, for the targets given (a row with an error meets none)."""
    out: dict[str, bool] = {}
    ok = not row.get(ERROR_COLUMN)
    if coverage is not None:
        out["coverage"] = ok and row["rt_coverage"] >= coverage - 1e-12
    if completed is not None:
        out["completed"] = ok and completed_fraction(row) >= completed - 1e-12
    return out


def completed_fraction(row: Mapping[str, Any]) -> float:
    """Completed batch jobs / batch jobs (1.0 with no batch jobs)."""
    total = row["batch_jobs"]
    return row["completed_jobs"] / total if total else 1.0


def smallest_sizes(
    rows: Sequence[Mapping[str, Any]],
    coverage: float | None = None,
    completed: float | None = None,
) -> list[dict[str, Any]]:
    """Per planner and setting of the other parameters, the smallest swept `gpus` whose row
    meets every given target (None when none does): what a sweep says about sizing."""
    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for row in rows:
        key = tuple(row[c] for c in PARAMETER_COLUMNS if c != "gpus")
        groups.setdefault(key, []).append(row)
    out = []
    for key, group in groups.items():
        meeting = [r["gpus"] for r in group if all(meets_targets(r, coverage, completed).values())]
        entry = dict(zip([c for c in PARAMETER_COLUMNS if c != "gpus"], key, strict=True))
        entry["gpus"] = min(meeting) if meeting else None
        out.append(entry)
    return out


# ---------------------------------------------------------------------------------------------
# One task


def run_point(
    scenario: Scenario,
    point: SweepPoint,
    planner: str,
    options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One row: the point's parameters, then every metric of the plan, then `error` ("" when
    the point is valid and the plan legal). Runs in a Dask worker; pure apart from the clock."""
    row: dict[str, Any] = {**asdict(point), "planner": planner}
    mix = row.pop("nodes")
    if mix is not None:
        row.update({f"nodes_{group}": count for group, count in mix})
    out = run_point_on(scenario, point.apply, planner, options)
    return {**row, **{k: v for k, v in out.items() if k not in row}}


def run_point_on(
    scenario: Scenario,
    transform: Callable[[Scenario], Scenario],
    planner: str,
    options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """`run_point`'s metrics and `error` for the scenario `transform` makes (an invalid one is
    an error row); `cost_per_hour` too on a cluster of node groups."""
    from .plan import check, report
    from .planners import planner_spec, solve

    row: dict[str, Any] = {}
    try:
        moved = transform(scenario)
    except ScenarioError as exc:
        row[ERROR_COLUMN] = str(exc)
        return row
    if moved.cluster.nodes:
        from .mix import cost_per_hour

        row["cost_per_hour"] = cost_per_hour(moved)
    if planner_spec(planner).exact:  # the MIP planner: HiGHS on one thread in this process
        single_threaded_highs()
    try:
        plan = solve(moved, planner, **dict(options or {}))
    except Exception as exc:  # one failing run is reported in its row, the sweep goes on
        row[ERROR_COLUMN] = f"internal error: {planner} failed: {type(exc).__name__}: {exc}"
        return row
    values = report(moved, plan)  # the keys of metrics.json
    values.pop("planner", None)
    for name, per_type in values.pop("by_gpu_type", {}).items():  # flat, for the CSV
        values[f"utilization_{name}"] = per_type["utilization"]
        values[f"cost_{name}"] = per_type["cost"]
    row.update(values)
    violations = check(moved, plan)
    row[ERROR_COLUMN] = (
        f"internal error: the {planner} plan breaks {len(violations)} constraint(s); "
        f"first: {violations[0]}"
        if violations
        else ""
    )
    return row


_HIGHS_PINNED: list[bool] = []


def single_threaded_highs() -> bool:
    """Start this process's HiGHS scheduler with one thread (once), so a `full` run in a worker
    uses one thread however many cores the node has.

    HiGHS keeps one global scheduler per process, sized by the `threads` option of the first
    solve; the full planner never sets the option (0: take the existing scheduler), so one tiny
    solve with threads=1 here fixes it for every later solve in this worker. Returns whether
    the scheduler is single-threaded (False when an earlier solve already sized it otherwise).
    """
    if not _HIGHS_PINNED:
        try:
            import highspy
            from pyomo.common.tee import capture_output

            with capture_output(capture_fd=True):  # HiGHS's banner, as Pyomo hides it
                highs = highspy.Highs()
                highs.setOptionValue("output_flag", False)
                highs.setOptionValue("threads", 1)
                highs.addVar(0.0, 1.0)
                highs.addRow(0.0, 1.0, 1, [0], [1.0])
                status = highs.run()
            _HIGHS_PINNED.append(status == highspy.HighsStatus.kOk)
        except Exception:  # no highspy: the full planner falls back to the allocator anyway
            _HIGHS_PINNED.append(False)
    return _HIGHS_PINNED[0]


# ---------------------------------------------------------------------------------------------
# The engine


def default_workers() -> int:
    return max(1, min(4, os.cpu_count() or 1))


def max_local_workers() -> int:
    """The most local worker processes a sweep starts: four per core."""
    return 4 * max(1, os.cpu_count() or 1)


def open_client(
    workers: int | None = None, scheduler: str | None = None, connect_timeout: str = "20s"
) -> Any:
    """A Dask client: to `scheduler` (or env DASK_SCHEDULER_ADDRESS) when given, otherwise to a
    new LocalCluster of `workers` single-threaded worker processes on 127.0.0.1, dashboard off.
    Close it with `close_client`, which also stops a LocalCluster made here."""
    from distributed import Client

    address = scheduler or os.environ.get(SCHEDULER_ENV) or None
    if address:
        try:
            return Client(address, timeout=connect_timeout)
        except (OSError, TimeoutError, ValueError) as exc:
            raise ScenarioError(
                f"scheduler {address}: cannot connect ({type(exc).__name__}: {exc})"
            ) from None
    cluster = local_cluster(workers)
    try:
        return Client(cluster)
    except BaseException:
        cluster.close()
        raise


def close_client(client: Any) -> None:
    """Close a client from `open_client`, and its LocalCluster if it has one."""
    cluster = client.cluster
    try:
        client.close()
    finally:
        if cluster is not None:
            cluster.close()


@contextmanager
def dask_client(workers: int | None = None, scheduler: str | None = None) -> Iterator[Any]:
    """`open_client` as a context manager: closed (with its LocalCluster) on exit."""
    client = open_client(workers, scheduler)
    try:
        yield client
    finally:
        close_client(client)


def local_cluster(workers: int | None = None) -> Any:
    """A LocalCluster of `workers` worker processes with one thread each, on 127.0.0.1."""
    from distributed import LocalCluster

    n = default_workers() if workers is None else workers
    _check_count("workers", n, minimum=1)
    most = max_local_workers()
    if n > most:  # (each is a Python process; past the cores they only take turns)
        raise ScenarioError(
            f"sweep: workers {n} is more than {most}, four per core of this machine; for more, "
            "start a Dask cluster and give its scheduler"
        )
    with _spawn_without_main():
        return LocalCluster(
            n_workers=int(n),
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            env=dict(WORKER_ENV),
        )


@contextmanager
def _spawn_without_main() -> Iterator[None]:
    """Worker processes are spawned, and spawning re-runs the parent's `__main__` in each child:
    under Streamlit that is the app script, which cannot run outside a session. Sweep tasks
    live in core, so workers never need `__main__`: it is hidden while they start."""
    main = sys.modules.get("__main__")
    placeholder = types.ModuleType("__main__")
    sys.modules["__main__"] = placeholder
    try:
        yield
    finally:
        if main is not None and sys.modules.get("__main__") is placeholder:
            sys.modules["__main__"] = main


def engine_label(client: Any) -> str:
    """A short description of the cluster behind a client, e.g. '2 workers (2 threads) at ...'."""
    nthreads = client.nthreads()
    return (
        f"{len(nthreads)} worker(s), {sum(nthreads.values())} thread(s) at "
        f"{client.scheduler.address}"
    )


def run_sweep(
    client: Any,
    scenario: Scenario,
    points: Sequence[SweepPoint],
    planners: Sequence[str],
    *,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    progress: Progress | None = None,
) -> list[dict[str, Any]]:
    """Every planner at every point as Dask tasks; rows sorted by (point, planner) as given.

    `progress(done, total, row)` is called as each task finishes (from `as_completed`). If it
    raises (a cancel, an interrupt), the tasks still pending are cancelled before it propagates.
    """
    from distributed import as_completed

    from .planners import PLANNER_NAMES

    if not points:
        raise ScenarioError("sweep: no points")
    if not planners:
        raise ScenarioError("sweep: no planners")
    for planner in planners:
        if planner not in PLANNER_NAMES:
            raise ScenarioError(
                f"sweep: unknown planner {planner!r}; choose from {', '.join(PLANNER_NAMES)}"
            )
    options = options or {}
    [base] = client.scatter([scenario], broadcast=True, hash=False)
    futures = {}
    for i, point in enumerate(points):
        for j, planner in enumerate(planners):
            future = client.submit(
                run_point,
                base,
                point,
                planner,
                dict(options.get(planner, {})),
                key=f"gpuplan-sweep-{time.monotonic_ns()}-{i}-{j}",
                pure=False,
            )
            futures[future] = (i, j)
    total, done = len(futures), 0
    results: dict[tuple[int, int], dict[str, Any]] = {}
    try:
        for future in as_completed(futures):
            row = future.result()
            results[futures[future]] = row
            done += 1
            if progress is not None:
                progress(done, total, row)
    finally:
        pending = [f for f in futures if not f.done()]
        if pending:
            client.cancel(pending)
        client.cancel([base])
    return [results[key] for key in sorted(results)]


def sweep_columns(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The parameter columns, then every metric key in first-seen order, then `error`."""
    columns = list(PARAMETER_COLUMNS)
    for row in rows:
        for key in row:
            if key not in columns and key != ERROR_COLUMN:
                columns.append(key)
    return [*columns, ERROR_COLUMN]


def sweep_to_csv(rows: Sequence[Mapping[str, Any]]) -> str:
    """sweep.csv: one row per point and planner, spreadsheet-safe (core.formats.write_csv)."""
    from .formats import write_csv

    return write_csv(rows, sweep_columns(rows))


# ---------------------------------------------------------------------------------------------
# Sizing


@dataclass(frozen=True)
class Ceiling:
    """What no number of GPUs lifts: the most real-time coverage and the largest share of
    completed batch jobs any plan reaches on a cluster of any size, each with the jobs that hold
    it below all (a line per job: what limits it). Both are bounds every plan obeys, so a target
    above one is missed at every size; one at or below it may still be missed by a planner."""

    coverage: float
    completed: float
    coverage_limits: tuple[str, ...] = ()
    completed_limits: tuple[str, ...] = ()

    def misses(self, coverage: float | None, completed: float | None) -> dict[str, str]:
        """Target name -> why no cluster size meets it, for the given targets above the
        ceiling (at most three jobs named, then how many more)."""
        out = {}
        if coverage is not None and self.coverage < coverage - 1e-12:
            out["coverage"] = (
                f"no cluster size reaches {coverage * 100:g}% real-time coverage: at most "
                f"{self.coverage:.2%} on any number of GPUs ({_first(self.coverage_limits)})"
            )
        if completed is not None and self.completed < completed - 1e-12:
            out["completed"] = (
                f"no cluster size completes {completed * 100:g}% of the batch jobs: at most "
                f"{self.completed:.1%} on any number of GPUs ({_first(self.completed_limits)})"
            )
        return out


def ceiling_at(scenario: Scenario, demand_scale: float = 1.0, work_scale: float = 1.0) -> Ceiling:
    """The `Ceiling` of the scenario with demand and work scaled as a sweep point scales them
    (the cluster size and the policy do not move it)."""
    if demand_scale != 1:
        scenario = scale_demand(scenario, demand_scale)
    if work_scale != 1:
        scenario = scale_work(scenario, work_scale)
    return ceiling(scenario)


def _first(lines: Sequence[str], shown: int = 3) -> str:
    more = len(lines) - shown
    return "; ".join(lines[:shown]) + (f"; and {more:,} more" if more > 0 else "")


def ceiling(scenario: Scenario) -> Ceiling:
    """The scenario's `Ceiling`. With GPUs to spare, each real-time job holds `gpus_max` from
    the step its swap cap reaches it (from its `previous_gpus` at most `swap_cap` more a step;
    step 0 is free without them) and covers min(demand, that); each batch job starts at its
    arrival (running work: at step 0, as it runs) on its largest block, and completes where that
    ends within the horizon."""
    T = scenario.cluster.horizon_steps
    demanded = served = 0.0
    coverage_limits = []
    for job in scenario.realtime_jobs:
        start = None if job.previous_gpus is None else len(job.previous_gpus)
        above_max, peak, ramp = 0, 0.0, []
        for t, d in enumerate(job.demand):
            reach = (
                job.gpus_max if start is None else min(job.gpus_max, start + job.swap_cap * (t + 1))
            )
            demanded += d
            served += min(d, reach)
            if d > job.gpus_max + 1e-9:
                above_max += 1
                peak = max(peak, d)
            elif d > reach + 1e-9:
                ramp.append(t)
        if above_max:
            coverage_limits.append(
                f"{job.id}: demand above gpus_max {job.gpus_max} at {plural(above_max, 'step')} "
                f"of {T} (peak {peak:.4g})"
            )
        if ramp:
            when = f"step {ramp[0]}"
            if len(ramp) > 1:
                when = f"{plural(len(ramp), 'step')} (steps {ramp[0]}-{ramp[-1]})"
            coverage_limits.append(
                f"{job.id}: from its {plural(start, 'GPU')} at the start, swap_cap "
                f"{job.swap_cap} trails its demand at {when}"
            )
    completed_limits = []
    batch = scenario.batch_jobs
    for job in batch:
        g = job.sizes()[-1]
        steps = scenario.duration(job, g)
        if job.running is not None and steps > T:
            completed_limits.append(f"{job.id} runs {steps} more steps, past the {T}-step horizon")
        elif job.running is None and job.arrival_step + steps > T:
            completed_limits.append(
                f"{job.id} arrives at step {job.arrival_step} and needs {steps} steps on "
                f"{plural(g, 'GPU')}, past the {T}-step horizon"
            )
    return Ceiling(
        served / demanded if demanded > 0 else 1.0,
        (len(batch) - len(completed_limits)) / len(batch) if batch else 1.0,
        tuple(coverage_limits),
        tuple(completed_limits),
    )


def size(
    scenario: Scenario,
    coverage: float | None = None,
    completed: float | None = None,
    planner: str = "allocator",
    step: int = 8,
    max_gpus: int | None = None,
    options: Mapping[str, Any] | None = None,
    progress: Callable[[int, dict[str, Any]], None] | None = None,
    hold: BatchHold | None = None,
) -> dict[str, Any]:
    """The smallest multiple of `step` GPUs at which the plan meets every given target.

    Exponential search (step, 2 step, 4 step, ... up to max_gpus), then binary search between the
    last size that missed and the first that met. The targets need not be monotone in the size,
    so the answer is then verified one step below and walked down while that still meets them:
    the answer meets every target and the size one step below misses one (or is below `step`).
    Returns `gpus` (None when no size up to max_gpus meets the targets, with `failed` naming
    each target missed at the largest size tried), the scenario's `ceiling` and the metrics at
    every size tried; `progress(gpus, row)` hears each size as it is tried (its row has `meets`
    per target). A target above the ceiling is missed at every size: then no size is tried, and
    `failed` names the jobs that hold the ceiling down.

    `hold` (from `hold_batch`, with no `completed` given): batch completion is a target too, at
    the share the hold says, and `targets` says where it came from (`completed_from`). With no
    completed target at all, `batch` says so and what share of the batch jobs completes at the
    answer (`batch_outcome`): a size that meets coverage alone may starve the batch work.
    """
    if hold is not None and completed is None:
        completed = hold.completed
    else:
        hold = None
    step, top = _size_range(scenario, coverage, completed, step, max_gpus)
    bound = ceiling(scenario)
    targets: dict[str, Any] = {
        k: v for k, v in (("coverage", coverage), ("completed", completed)) if v is not None
    }
    if hold is not None:
        targets.update(hold.fields())
    result: dict[str, Any] = {
        "gpus": None,
        "planner": planner,
        "step": step,
        "max_gpus": top,
        "targets": targets,
        "ceiling": {"coverage": bound.coverage, "completed": bound.completed},
    }
    unreachable = bound.misses(coverage, completed)
    if unreachable:
        if completed is None:
            result["batch"] = batch_outcome(None)
        return {**result, "failed": unreachable, "tried": []}

    tried: dict[int, dict[str, Any]] = {}

    def evaluate(gpus: int) -> bool:
        if gpus not in tried:
            point = SweepPoint(
                gpus,
                penalty_weight=scenario.policy.penalty_weight,
                decay=scenario.policy.decay,
            )
            row = run_point(scenario, point, planner, options)
            row["meets"] = meets_targets(row, coverage, completed)
            tried[gpus] = row
            if progress is not None:
                progress(gpus, row)
        return all(tried[gpus]["meets"].values())

    high = _search(evaluate, step, top)
    result["gpus"] = high
    if high is None:
        worst = tried[top]
        result["failed"] = {
            name: _miss_reason(name, worst, coverage, completed)
            for name, met in worst["meets"].items()
            if not met
        }
    if completed is None:  # batch work is not a target: what share it gets at the answer
        result["batch"] = batch_outcome(tried[top if high is None else high])
    result["tried"] = [
        {**tried[g], "meets": all(tried[g]["meets"].values())} for g in sorted(tried)
    ]
    return result


def _search(evaluate: Callable[[int], bool], step: int, top: int) -> int | None:
    """`size`'s search: the smallest multiple of `step` up to `top` that `evaluate` accepts and
    one step below does not (None when `top` is not accepted)."""
    # Exponential: the first size that meets, and the last one that did not.
    low, high, gpus = 0, None, step
    while True:
        if evaluate(gpus):
            high = gpus
            break
        low = gpus
        if gpus >= top:
            return None
        gpus = min(top, gpus * 2)
    # Binary search on multiples of step in (low, high].
    while high - low > step:
        middle = (low + high) // 2 // step * step
        if middle <= low:
            break
        if evaluate(middle):
            high = middle
        else:
            low = middle
    # Verify below and walk down while the size one step below still meets the targets.
    while high - step >= step and evaluate(high - step):
        high -= step
    return high


@dataclass(frozen=True)
class BatchHold:
    """The batch completion `size` holds an answer at when only coverage is asked for: what
    the real scheduler completed in a history's window (as-run), or the ceiling where as-run
    completed more than any plan of the model can (its durations round up to whole steps)."""

    completed: float  # the target held
    completed_jobs: int  # as-run's
    batch_jobs: int

    @property
    def as_run(self) -> float:
        return self.completed_jobs / self.batch_jobs

    def fields(self) -> dict[str, Any]:
        """What `size`'s `targets` adds: where the completed target came from, as-run's count."""
        out: dict[str, Any] = {
            "completed_from": "as-run",
            "as_run_completed_jobs": self.completed_jobs,
            "as_run_batch_jobs": self.batch_jobs,
        }
        if self.completed < self.as_run - 1e-12:
            out["as_run_completed"] = self.as_run  # (held at the ceiling instead)
        return out

    def note(self) -> str:
        """One line for the user, said before the search."""
        counted = f"{self.completed_jobs:,} of {self.batch_jobs:,} jobs"
        if self.completed < self.as_run - 1e-12:
            held = (
                f"batch completion held at {self.completed:.1%}, the most any size reaches "
                f"(as-run completed {self.as_run:.1%}, {counted})"
            )
        else:
            held = f"batch completion held at as-run's {self.as_run:.1%} ({counted})"
        return f"{held}; give --completed to choose another share, or --completed any"


def hold_batch(scenario: Scenario, as_run: Mapping[str, Any] | None) -> BatchHold | None:
    """The `BatchHold` of a history's window from its as-run metrics (`ImportResult.as_run`):
    as-run's completed / batch jobs, at most the scenario's ceiling. None with no as-run or no
    batch jobs in it (nothing to hold)."""
    if not as_run or not as_run.get("batch_jobs") or as_run.get("snapshot"):
        return None  # (a packing snapshot has no as-run: nothing ran)
    done, total = int(as_run["completed_jobs"]), int(as_run["batch_jobs"])
    return BatchHold(min(done / total, ceiling(scenario).completed), done, total)


def batch_outcome(row: Mapping[str, Any] | None) -> dict[str, Any]:
    """`size`'s `batch` when batch completion is not a target: the share of batch jobs that
    completes in `row` (the answer, or the largest size tried when none meets the targets;
    None where nothing was planned)."""
    out: dict[str, Any] = {"target": False, "gpus": None, "completed_share": None}
    out |= {"completed_jobs": None, "batch_jobs": None}
    if row is not None and not row.get(ERROR_COLUMN):
        out |= {
            "gpus": row["gpus"],
            "completed_share": completed_fraction(row),
            "completed_jobs": row["completed_jobs"],
            "batch_jobs": row["batch_jobs"],
        }
    return out


def batch_note(result: Mapping[str, Any]) -> str | None:
    """One line for a `size` result whose batch work is not a target (None when it is)."""
    batch = result.get("batch")
    if batch is None:
        return None
    said = "batch work is not a target"
    if batch["completed_share"] is None:
        return said
    if not batch["batch_jobs"]:
        return f"{said}; there are no batch jobs"
    where = f"at {batch['gpus']:,} GPUs"
    if result.get("gpus") is None:
        where += " (the largest size tried)"
    return (
        f"{said}; {where} {batch['completed_share']:.1%} of batch jobs complete "
        f"({batch['completed_jobs']:,} of {batch['batch_jobs']:,})"
    )


def check_targets(coverage: float | None, completed: float | None) -> None:
    """`size`'s targets: at least one, each a share in [0, 1]."""
    if coverage is None and completed is None:
        raise ScenarioError("size: give at least one target (coverage or completed)")
    for name, value in (("coverage", coverage), ("completed", completed)):
        if value is not None:
            _check_scale(name, value, allow_zero=True, owner="size")
            if value > 1:
                raise ScenarioError(f"size: {name} must be in [0, 1], got {value!r}")


def _size_range(
    scenario: Scenario,
    coverage: float | None,
    completed: float | None,
    step: int,
    max_gpus: int | None,
) -> tuple[int, int]:
    """The checked targets' step and the largest multiple of it `size` may try."""
    check_targets(coverage, completed)
    _check_count("step", step, minimum=1, owner="size")
    step = int(step)
    limit_by_cells = MAX_CELLS // scenario.cluster.horizon_steps
    if max_gpus is None:
        max_gpus = max(step, 16 * scenario.cluster.gpus)
    _check_count("max_gpus", max_gpus, minimum=1, owner="size")
    max_gpus = min(int(max_gpus), MAX_GPUS, limit_by_cells)
    top = max_gpus // step * step
    if top < step:
        raise ScenarioError(f"size: max_gpus {max_gpus} is smaller than step {step}")
    return step, top


def _miss_reason(
    name: str, row: Mapping[str, Any], coverage: float | None, completed: float | None
) -> str:
    if row.get(ERROR_COLUMN):
        return f"at {row['gpus']} GPUs the scenario is invalid: {row[ERROR_COLUMN]}"
    if name == "coverage":
        return f"at {row['gpus']} GPUs rt_coverage is {row['rt_coverage']:.4f} < {coverage:g}"
    return (
        f"at {row['gpus']} GPUs {row['completed_jobs']}/{row['batch_jobs']} batch jobs "
        f"complete ({completed_fraction(row):.3f} < {completed:g})"
    )
