"""core.views: what the pages show, checked on hand-computed values and a few properties."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core import views
from core.analysis import idle_windows
from core.formats import load_scenario
from core.model import Cluster, ScenarioError
from core.plan import Plan
from tests.budget import examples
from tests.paths import SCENARIOS_DIR


@pytest.fixture(scope="module")
def example(scenarios_dir):
    return load_scenario(scenarios_dir / "example.json")


# --- built-ins and uploads ---------------------------------------------------------------------


def test_builtins_put_example_then_the_benchmarks_in_their_order_then_the_rest():
    names = ["zeta", "scale-64", "example", "mixed-control", "alpha", "rolling-surge"]
    bench = ("mixed-control", "training-heavy", "scale-64")
    assert views.builtin_order(names, bench) == [
        "example",
        "mixed-control",
        "scale-64",
        "alpha",
        "rolling-surge",
        "zeta",
    ]


@pytest.mark.parametrize(
    ("jobs", "demand", "name"),
    [
        ("team-a_jobs.csv", "team-a_demand.csv", "team-a"),  # shared stem
        ("jobs.csv", "demand.csv", "jobs+demand"),  # nothing shared: both stems
        ("Q3 jobs.CSV", "Q3 demand.csv", "Q3"),  # spaces and upper-case extension
        ("prod-jobs.csv", "realtime.csv", "prod-jobs+realtime"),  # different stems
        ("cluster_b.jobs.csv", "cluster_b.demand.csv", "cluster_b"),
    ],
)
def test_a_csv_pair_is_named_after_its_files(jobs, demand, name):
    assert views.pair_name(jobs, demand) == name


def test_named_pair_replaces_name_and_description_and_keeps_the_rest(example):
    named = views.named_pair(example, "a_jobs.csv", "a_demand.csv")
    assert named.name == "a"
    assert "a_jobs.csv" in named.description and "a_demand.csv" in named.description
    assert f"{example.cluster.gpus} GPUs" in named.description
    assert named.jobs == example.jobs and named.cluster == example.cluster


@pytest.mark.parametrize(
    ("names", "headers", "kind", "says"),
    [
        ([], {}, "empty", ""),
        (["jobs.csv"], {"jobs.csv": {"id", "type"}}, "waiting", "add demand.csv"),
        (["d.csv"], {"d.csv": {"step", "job_id", "demand"}}, "waiting", "add jobs.csv"),
        # any other lone CSV is read at once, for its own message (binary, a sacct as .csv)
        (["x.csv"], {"x.csv": {"a"}}, "ready", ""),
        (["s.json"], {}, "ready", ""),
        (["a.csv", "b.csv"], {}, "ready", ""),  # two files: load (and report what is wrong)
    ],
)
def test_upload_state_waits_for_the_second_file_of_a_pair(names, headers, kind, says):
    state = views.upload_state(names, headers)
    assert state.kind == kind and says in state.message


def test_a_blank_csv_is_read_at_once_not_waited_on():
    # "empty.csv: add the other file of the pair" where a blank .json said "file is empty"
    for data in (b"", b"  \n", b"\xef\xbb\xbf\n"):
        state = views.upload_state(["empty.csv"], {"empty.csv": views.csv_header(data)})
        assert state.kind == "ready"


def test_csv_pair_tells_jobs_from_demand_by_header_in_any_order():
    headers = {
        "d.csv": views.csv_header(b"step,job_id,demand\n0,a,1\n"),
        "j.csv": views.csv_header(b"\xef\xbb\xbfid,type,priority\n"),
    }
    assert views.csv_pair(["d.csv", "j.csv"], headers) == ("j.csv", "d.csv")
    assert views.csv_pair(["d.csv"], headers) is None
    assert views.csv_pair(["d.csv", "d2.csv"], {**headers, "d2.csv": {"step"}}) is None


def test_loaded_message_counts_the_jobs(example):
    text = views.loaded_message(example, ["mine.json"])
    assert text.startswith(f"Loaded {len(example.jobs)} jobs")
    assert f"{len(example.batch_jobs)} batch" in text and "from mine.json" in text


def test_pair_fit_hints_say_how_to_fix_a_pair_that_does_not_fit():
    cluster = Cluster(gpus=8, horizon_steps=24)
    past = "demand.csv: row 30: step 30 is past the horizon of 24 steps"
    short = "demand.csv: job 'chat' has no demand for step 12; one row per step 0..23 is needed"
    for problem in (past, short):
        hints = views.pair_fit_hints([problem], cluster)
        assert len(hints) == 1 and "0..23" in hints[0] and "horizon" in hints[0]
    big = "job 'big': gpus_max 16 is larger than the cluster's 8 GPUs"
    hints = views.pair_fit_hints([big], cluster)
    assert len(hints) == 1 and "8 GPUs" in hints[0]
    assert views.pair_fit_hints(["jobs.csv: row 2: priority must be > 0"], cluster) == []


@pytest.mark.parametrize(
    ("message", "shown"),
    [
        ("h.csv: rows were sorted", "rows were sorted"),
        ("h.csv: h.csv: rows were sorted", "rows were sorted"),
        ("rows were sorted", "rows were sorted"),
        ("other.csv: x", "other.csv: x"),
    ],
)
def test_a_warning_names_its_file_once(message, shown):
    assert views.without_name_prefix("h.csv", message) == shown


def test_with_cluster_repeats_demand_over_a_longer_horizon_and_validates(example):
    longer = views.with_cluster(
        example, gpus=example.cluster.gpus, horizon_steps=48, step_minutes=60, start=None
    )
    for old, new in zip(example.realtime_jobs, longer.realtime_jobs, strict=True):
        assert new.demand == old.demand + old.demand
    shorter = views.with_cluster(
        example, gpus=example.cluster.gpus, horizon_steps=6, step_minutes=60, start=None
    )
    assert all(len(j.demand) == 6 for j in shorter.realtime_jobs)
    biggest = max(j.gpus_min for j in example.jobs)
    with pytest.raises(ScenarioError):
        views.with_cluster(example, gpus=biggest // 2 or 1, horizon_steps=24, step_minutes=60,
                           start=None)  # fmt: skip


def test_cluster_fields_give_the_controls_back_to_with_cluster(example):
    fields = views.cluster_fields(example.cluster)
    assert set(fields) == set(views.CLUSTER_FIELDS)
    start = datetime.combine(fields["date"], fields["time"])
    same = views.with_cluster(
        example,
        gpus=fields["gpus"],
        horizon_steps=fields["steps"],
        step_minutes=fields["minutes"],
        start=start,
    )
    assert same is example
    no_start = views.cluster_fields(Cluster(gpus=8))
    assert no_start["date"] is None and no_start["time"] is None


def _on_steps(s, minutes: int):
    return views.with_cluster(
        s,
        gpus=s.cluster.gpus,
        horizon_steps=s.cluster.horizon_steps,
        step_minutes=minutes,
        start=s.cluster.start,
    )


def test_step_change_words_say_what_is_kept_and_what_moved():
    s = load_scenario(SCENARIOS_DIR / "mixed-control.json")
    words = views.step_change_words(_on_steps(s, 7), 60)
    assert "Step changed from 60 to 7 min: the step numbers are kept, not the hours" in words
    assert "now spans 2.8 h instead of 24 h" in words
    assert "'eval-0' still arrives at step 19, which is now 2.2 h after the start" in words
    assert "halves the value of batch work in 2.7 h instead of 22.8 h" in words
    assert "each job takes more steps" in words


def test_keep_hours_converts_exactly_or_says_why_not():
    s = load_scenario(SCENARIOS_DIR / "mixed-control.json")
    finer = views.keep_hours(_on_steps(s, 15), 60)
    assert finer.cluster.horizon_steps == 96
    for old, new in zip(s.jobs, finer.jobs, strict=True):
        if old.is_realtime:
            assert new.demand == tuple(d for d in old.demand for _ in range(4))
        else:
            assert new.arrival_step == 4 * old.arrival_step
            if old.running is not None:
                assert new.running.remaining_steps == 4 * old.running.remaining_steps
    assert finer.policy.half_life_hours(15) == pytest.approx(s.policy.half_life_hours(60))
    # and back: 15 -> 60 min is exact on the converted scenario, and gives the original
    assert views.keep_hours(_on_steps(finer, 60), 15).jobs == s.jobs
    with pytest.raises(ScenarioError, match="7 min is not a whole fraction or multiple of 60"):
        views.keep_hours(_on_steps(s, 7), 60)
    with pytest.raises(ScenarioError, match="running steps left 5 x 60 min does not fall"):
        views.keep_hours(_on_steps(s, 120), 60)


# --- demand forecast ---------------------------------------------------------------------------


def test_default_capacity_comes_from_the_current_demand_not_gpus_max():
    hours = pd.date_range("2026-01-01", periods=2 * 168, freq="h")
    history = pd.Series(np.r_[np.full(168, 50.0), np.full(168, 120.0)], index=hours)
    # The last week averages 120 per hour; the job asks for 3 GPUs on average: 40 per GPU.
    assert views.default_capacity(history, [2.0, 4.0, 3.0]) == 40.0
    assert views.default_capacity(history, [0.0, 0.0]) == 1.0
    assert views.default_capacity(history.iloc[:0], [3.0]) == 1.0
    # Two significant digits: 120 / 7 = 17.14... -> 17.
    assert views.default_capacity(history, [7.0]) == 17.0


@given(st.floats(0.5, 1e6), st.floats(0.05, 512))
def test_default_capacity_maps_the_recent_mean_to_the_current_mean_within_rounding(level, gpus):
    hours = pd.date_range("2026-01-01", periods=168, freq="h")
    capacity = views.default_capacity(pd.Series(level, index=hours), [gpus])
    assert level / capacity == pytest.approx(gpus, rel=0.06)


def _scenario_starting(example, start):
    return example.replace(cluster=Cluster(gpus=example.cluster.gpus, start=start))


def test_a_start_right_after_the_history_uses_the_forecast_by_clock(example):
    end = pd.Timestamp("2026-08-16 23:00")
    window = views.aligned_hours(end, _scenario_starting(example, datetime(2026, 8, 17, 5)))
    assert window.hours[:3] == (5, 6, 7) and window.note == ""


def test_a_start_far_after_the_history_is_aligned_by_weekday_and_hour(example):
    end = pd.Timestamp("2020-01-05 23:00")  # a Sunday; the first forecast hour is Mon 00:00
    start = datetime(2026, 8, 19, 14)  # a Wednesday, 14:00
    window = views.aligned_hours(end, _scenario_starting(example, start))
    first = end + pd.Timedelta(hours=1 + window.hours[0])
    assert (first.day_of_week, first.hour) == (start.weekday(), start.hour)
    assert window.hours[0] < 168
    assert "shifted" in window.note and "same weekday and hour" in window.note


def test_a_start_before_the_history_ends_is_aligned_too(example):
    end = pd.Timestamp("2026-08-20 23:00")
    start = datetime(2026, 8, 17, 9)  # a Monday, before the history ends
    window = views.aligned_hours(end, _scenario_starting(example, start))
    first = end + pd.Timedelta(hours=1 + window.hours[0])
    assert (first.day_of_week, first.hour) == (0, 9)
    assert "before" in window.note


def test_a_history_before_the_start_ends_on_the_weekday_and_hour_before_step_0(example):
    hours = pd.date_range("2026-07-01", periods=4 * 168, freq="h")  # a Wednesday 00:00 on
    history = pd.Series(np.arange(len(hours), dtype=float), index=hours)
    history.iloc[-200] = np.nan  # a missing hour stays missing
    start = datetime(2026, 8, 17, 5)  # Monday 05:00; the history ends Tuesday 2026-07-28 23:00
    window = views.aligned_hours(history.index[-1], _scenario_starting(example, start))
    assert window.hours[0] == 19 * 24 + 5
    gpus = views.history_before_start(history, window, capacity=4.0, weeks=2)
    # the hour before step 0 is a Monday 04:00: the history's last one is Tuesday 23:00, so its
    # last 43 hours go, and the one it then ends on is Monday 04:00
    end = len(hours) - 43
    assert hours[end - 1].day_name() == "Monday" and hours[end - 1].hour == 4
    assert len(gpus) == 2 * 168 and gpus[-1] == (end - 1) / 4.0 and gpus[0] == (end - 336) / 4
    assert np.isnan(gpus[-200 + 43])
    right_after = views.aligned_hours(history.index[-1], _scenario_starting(example, None))
    assert views.history_before_start(history, right_after, 2.0)[-1] == (len(hours) - 1) / 2.0


def test_the_unit_of_a_history_is_its_column_name():
    assert views.traffic_unit("concurrent_sessions") == "concurrent_sessions"
    assert views.traffic_unit("") == "traffic units" and views.traffic_unit(None) == "traffic units"


# --- horizon & risk ----------------------------------------------------------------------------


def test_realised_metrics_have_thousands_separators():
    m = {
        "utilization": 0.8123,
        "allocated_fraction": 0.9,
        "value": 114907.04,
        "completed_jobs": 1203,
        "batch_jobs": 1500,
        "rt_coverage": 1.0,
        "rt_shortfall_gpu_hours": 1234.5,
        "changed_fraction_mean": 0.05,
        "moved_jobs": 1402,
        "planner_ms_mean": 20795.6,
        "rt_shortfall_episodes": 1234,
        "rt_idle_served_gpu_hours": 2048.25,
        "burst_guard_held_starts": 1500,
    }
    row = views.realised_metrics_table({"Allocator (fast)": m}).iloc[0]
    assert row["held back"] == "1,500"  # (empty without the guard: below)
    assert row["episodes"] == "1,234" and row["on idle"] == "2,048.25"
    assert row["value"] == "114,907.0"
    assert row["completed"] == "1,203/1,500"
    assert row["utilization"] == "81.2%" and row["rt coverage"] == "100.0%"
    assert row["shortfall"] == "1,234.50" and row["moved"] == "1,402"
    assert row["per plan"] == "20.8 s"
    # turned for the page: a row per metric, a column per planner, then what it measures
    turned = views.realised_metrics_by_row({"FIFO": m | {"value": 1.0}, "Allocator (fast)": m})
    assert list(turned.columns) == ["metric", "FIFO", "Allocator (fast)", "what it measures"]
    assert len(turned) == len(views.REALISED_METRICS) == 12
    unguarded = {k: v for k, v in m.items() if k != "burst_guard_held_starts"}
    assert views.realised_metrics_table({"FIFO": unguarded}).iloc[0]["held back"] == ""
    by = turned.set_index("metric")
    assert by.at["value", "FIFO"] == "1.0" and by.at["value", "Allocator (fast)"] == "114,907.0"
    assert by.at["batch jobs done", "FIFO"] == "1,203/1,500"
    assert by.at["time per re-plan", "Allocator (fast)"] == "20.8 s"


def _plan_with_idle(cells: list[tuple[int, int]], gpus: int = 8, steps: int = 6) -> Plan:
    grid = np.zeros((gpus, steps), dtype=np.int32)
    for g, t in cells:
        grid[g, t] = -1
    return Plan(grid)


def test_the_union_of_overlapping_windows_counts_each_gpu_hour_once():
    windows = pd.DataFrame(
        {  # GPUs 0-3 for steps 0-3 and GPUs 0-7 for steps 2-3: overlap of 4 GPUs x 2 steps
            "gpu_start": [0, 0],
            "gpus": [4, 8],
            "start_step": [0, 2],
            "end_step": [4, 4],
        }
    )
    assert views.idle_union_gpu_hours(windows, 60) == 4 * 4 + 8 * 2 - 4 * 2
    assert views.idle_union_gpu_hours(windows, 30) == (4 * 4 + 8 * 2 - 4 * 2) / 2
    assert views.windows_overlap(windows)
    assert not views.windows_overlap(windows.iloc[:1])


@settings(deadline=None, max_examples=examples(60))
@given(st.sets(st.tuples(st.integers(0, 7), st.integers(0, 5)), max_size=48))
def test_the_union_of_1x1_windows_is_exactly_the_idle_cells(idle):
    plan = _plan_with_idle(sorted(idle))
    windows = idle_windows(plan, 1, 1, step_minutes=60)
    union = views.idle_union_gpu_hours(windows, 60)
    # 1x1 windows cover every idle cell and nothing else: the union is exactly the idle hours,
    # and never more than the windows' plain sum (which may count an overlap twice).
    assert union == len(idle)
    assert union <= float(windows["gpu_hours"].sum()) + 1e-9


# --- estimators --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("row", "finish", "warning"),
    [
        # 48 GPU-h on 8 GPUs of 1 h: 6 steps from step 2 -> ends at step 8, fits in 24.
        ({"gpus_min": 4, "gpus_max": 8, "gpu_hours": 48, "arrival_step": 2}, 8, None),
        # 400 GPU-h on 8 GPUs: 50 steps > 24.
        ({"gpus_min": 4, "gpus_max": 8, "gpu_hours": 400, "arrival_step": 0}, 50, "after the"),
        # gpus_max above the cluster is capped to its 8 GPUs: 160 / 8 = 20 steps.
        ({"gpus_min": 8, "gpus_max": 32, "gpu_hours": 160, "arrival_step": 0}, 20, None),
        # needs 16 GPUs at least on an 8-GPU cluster.
        ({"gpus_min": 16, "gpus_max": 16, "gpu_hours": 16, "arrival_step": 0}, 2, "never run"),
    ],
)
def test_fit_check_gives_the_earliest_finish_and_warns(row, finish, warning):
    check = views.fit_check(row, Cluster(gpus=8, horizon_steps=24))
    assert check.earliest_finish_step == finish
    if warning is None:
        assert check.fits
    else:
        assert not check.fits and warning in check.warnings[0]


def test_step_time_reads_as_a_clock_when_the_cluster_has_a_start():
    assert views.step_time(Cluster(gpus=8), 3) == "step 3"
    c = Cluster(gpus=8, start=datetime(2026, 8, 17))  # a Monday
    assert views.step_time(c, 14) == "step 14 (Mon 14:00)"


def test_a_published_utilization_equal_to_fifos_says_so():
    from core.bench import PUBLISHED

    scale = PUBLISHED["scale-64"]
    assert views.published_utilization_text(scale, "fifo") == "44.9%"
    assert views.published_utilization_text(scale, "allocator") == "44.9% (=FIFO)"
    assert views.published_utilization_text(PUBLISHED["training-heavy"], "allocator") == "87.0%"
    assert views.published_utilization_text(PUBLISHED["training-heavy"], "backfill") == ""


def test_everything_published_for_a_row_fits_one_cell():
    from core.bench import PUBLISHED

    scale = PUBLISHED["scale-64"]
    assert (
        views.published_text(scale, "allocator", 0.159, "27/30")
        == "util. 44.9% (=FIFO) · +15.9% · done 27/30"
    )
    assert views.published_text(PUBLISHED["mixed-control"], "fifo") == "util. 51.6%"
    assert views.published_text(PUBLISHED["mixed-control"], "backfill", float("nan")) == ""


@pytest.mark.parametrize(
    ("change", "shown", "words"),
    [
        (None, "", (None, False)),
        (0.0, "+0.0 pp", ("same as FIFO", False)),
        (-1e-12, "-0.0 pp", ("same as FIFO", False)),
        (-0.0001, "-0.0 pp", ("≈ FIFO", False)),  # rounds to zero: no red arrow
        (0.0004, "+0.0%", ("≈ FIFO", False)),
        (-0.002, "-0.2 pp", ("-0.2 pp", True)),
        (3.0, "+3", ("+3", True)),
        (0.1, "+10.0%", ("+10.0%", True)),
    ],
)
def test_a_card_says_a_change_only_where_it_shows(change, shown, words):
    assert views.change_words(change, shown, "FIFO") == words


def test_two_saved_runs_read_side_by_side_with_their_settings_and_changes(scenarios_dir):
    from core.model import Policy

    a = load_scenario(scenarios_dir / "example.json")
    b = a.replace(
        name="other", policy=Policy(penalty_weight=5, decay=0.97, rt_coverage_target=0.99)
    )
    left = {"utilization": 0.8646, "rt_coverage": 1.0, "objective": 1415.1019, "completed_jobs": 3}
    left |= {"wait_hours_p50": None, "team_fairness": 0.9}
    right = {"utilization": 0.9, "rt_coverage": 0.99996, "objective": 1400.0, "completed_jobs": 5}
    right |= {"wait_hours_p50": 2.0, "team_fairness": 0.9}
    table = views.saved_comparison(a, left, b, right)
    rows = {r[""]: (r["A"], r["B"], r["B - A"]) for r in table.to_dict("records")}
    assert rows["workload"] == ("example", "other", "differs")
    assert rows["cluster"] == ("8 GPUs x 24 steps of 60 min",) * 2 + ("",)
    assert rows["penalty weight"] == (f"{a.policy.penalty_weight:g}", "5", "differs")
    assert rows["coverage target"] == ("none", "99.0%", "differs")
    assert rows["utilization"] == ("86.5%", "90.0%", "+3.5 pp")
    assert rows["real-time coverage"] == ("100.0%", "100.0%", "same")  # -0.004 pp rounds away
    assert rows["objective"] == ("1,415.1", "1,400.0", "-15.1")
    assert rows["completed jobs"] == ("3", "5", "+2")
    assert rows["wait p50 (h)"] == ("—", "2.0", "")  # no value on one side: no change to say
    assert rows["team fairness (Jain)"] == ("0.900", "0.900", "same")
    assert "cost" not in rows  # a KPI neither run has is left out
    assert list(rows)[:5] == [
        "workload",
        "cluster",
        "penalty weight",
        "reward decay",
        "coverage target",
    ]


def test_unfinished_jobs_are_counted_and_at_most_a_few_named():
    many = [f"job-{k}" for k in range(40)]
    words = views.unfinished_words({"FIFO": many, "Allocator (fast)": ["a", "b"], "Full": []})
    assert words == (
        "Not completed in the horizon: FIFO: 40 (job-0, job-1, job-2, job-3, job-4, job-5, "
        "job-6, job-7 and 32 more); Allocator (fast): 2 (a, b); Full: none"
    )


def test_a_count_says_its_noun_in_the_singular_only_for_one():
    assert views.plural(1, "day") == "1 day" and views.plural(0.5, "day") == "0.5 days"
    assert views.plural(3, "plan") == "3 plans" and views.plural(1200, "run") == "1,200 runs"


def test_a_benchmark_rows_proof_in_words():
    assert views.proof_text(None, None) == ""  # a planner without a bound
    assert views.proof_text(0.0, 0.43) == "optimal (0.4 s)"
    assert views.proof_text(0.0142, None) == "gap 1.42%"
    assert views.proof_text(float("inf"), None) == "no bound"
    assert views.proof_text(float("nan"), None) == ""  # (a missing value in a frame)


def test_replay_estimate_by_hand():
    """Re-plans x (forecasts + planners): rolling-surge (16 GPUs, 3 days, 2 services) over one
    day, hourly, with FIFO and the allocator, and with `thorough` at a 2 s limit instead."""
    s = load_scenario(SCENARIOS_DIR / "rolling-surge.json")
    assert (s.cluster.gpus, s.cluster.horizon_steps, len(s.realtime_jobs)) == (16, 72, 2)
    gpu_jobs = 16 * len(s.jobs) / 3  # GPUs x the jobs of a day's window
    fast = 24 * (2 * 0.04 + 2 * gpu_jobs / 35e6)
    assert views.replay_estimate_s(s, 1, 60, ["fifo", "allocator"]) == pytest.approx(fast)
    searching = views.replay_estimate_s(s, 1, 60, ["fifo", "thorough"], {"thorough"}, 2.0)
    assert searching == pytest.approx(24 * (2 * 0.04 + gpu_jobs / 35e6 + 2.0))
    assert views.replay_estimate_s(s, 0.5, 120, ["fifo"]) == pytest.approx(
        6 * (2 * 0.04 + gpu_jobs / 35e6)
    )


def test_a_day_of_a_big_import_replays_on_opening_a_week_waits(example):
    """A 1,024-GPU import of 1,903 jobs (measured: 1.8 s for FIFO and the allocator over its
    day) opens replayed; a week of it (13 s measured over 7 days at 12,167 jobs) and any replay
    with a planner that searches at every re-plan wait for the button."""

    def copies(n: int, steps: int):
        batch = [j for j in example.batch_jobs if j.running is None]
        jobs = [replace(j, id=f"{j.id}-{k}") for k in range(n // len(batch)) for j in batch]
        rt = [replace(j, demand=j.demand * (steps // 24)) for j in example.realtime_jobs]
        cluster = Cluster(1024, 60, steps, example.cluster.start)
        return example.replace(cluster=cluster, jobs=(*jobs, *rt))

    day, week = copies(1903, 24), copies(12167, 168)
    assert views.replay_estimate_s(day, 1, 60, ["fifo", "allocator"]) < views.AUTO_REPLAY_SECONDS
    assert views.replay_estimate_s(week, 7, 60, ["fifo", "allocator"]) > views.AUTO_REPLAY_SECONDS
    assert views.replay_estimate_s(example, 1, 60, ["thorough"], {"thorough"}, 2.0) > 10


@pytest.mark.parametrize(
    "seconds, text", [(0.2, "1 s"), (40, "40 s"), (89.4, "89 s"), (150, "2 min"), (7200, "2.0 h")]
)
def test_duration_text(seconds, text):
    assert views.duration_text(seconds) == text


def test_job_differences_say_what_tells_two_workloads_apart(example):
    """Saved & compare dropped its per-job table for a swap cap changed on Plan & compare and
    said only "different jobs or clusters"; the differences are now named."""
    rt = example.realtime_jobs[0]
    capped = example.replace(
        jobs=tuple(
            replace(j, swap_cap=j.swap_cap + 1) if j.id == rt.id else j for j in example.jobs
        )
    )
    assert views.job_differences(example, capped) == [
        f"{rt.id}: swap_cap {rt.swap_cap} vs {rt.swap_cap + 1}"
    ]
    assert views.job_differences(example, example) == []
    raised = [replace(rt, demand=tuple(d + 1 for d in rt.demand))]
    other = capped.replace(
        cluster=Cluster(16, 60, example.cluster.horizon_steps, example.cluster.start),
        jobs=(*example.batch_jobs[1:], *raised),
    )
    lines = views.job_differences(example, other)
    assert lines[0].startswith("cluster: 8 GPUs x ") and " vs 16 GPUs x " in lines[0]
    assert lines[1] == f"only in A: 1 job ({example.batch_jobs[0].id})"
    assert lines[2] == f"{rt.id}: demand differs"
    many = views.job_differences(example, other, most=2)
    assert len(many) == 3 and many[-1] == "and 1 more"


def test_burst_guard_text_names_the_guarded_services():
    from types import SimpleNamespace

    def result(**metrics):
        return SimpleNamespace(metrics=metrics)

    fifo = result()  # fifo and backfill say nothing of the guard
    assert views.burst_guard_text([fifo]) == ""
    assert views.burst_guard_text([fifo, result(burst_guarded=[])], "off") == ""
    assert (
        views.burst_guard_text([fifo, result(burst_guarded=[])], "auto")
        == ", no service bursty enough to guard"
    )
    assert (
        views.burst_guard_text([fifo, result(burst_guarded=["a", "b"])])
        == ", serving guarded against bursts: a, b"
    )
    many = result(burst_guarded=[f"s{k}" for k in range(5)])
    assert views.burst_guard_text([many]) == (
        ", serving guarded against bursts: s0, s1, s2 and 2 more"
    )
