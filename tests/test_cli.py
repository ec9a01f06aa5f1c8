"""The command line as a user runs it: exports, check's exit codes, one-line errors."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.formats import load_scenario
from core.plan import metrics
from core.planners import solve
from core.workspace import Workspace
from tests.paths import ROOT


def gpuplan(*args: str, cwd: Path = ROOT, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "core", *map(str, args)],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        # this checkout's core, whatever the cwd (the venv may have another one installed)
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


@pytest.fixture(scope="session")
def example(scenarios_dir) -> Path:
    return scenarios_dir / "example.json"


@pytest.fixture(scope="module")
def fifo_out(tmp_path_factory, example) -> Path:
    out = tmp_path_factory.mktemp("fifo")
    result = gpuplan("plan", example, "--planner", "fifo", "--out", out)
    assert result.returncode == 0, result.stderr
    return out


@pytest.mark.slow
def test_plan_writes_the_four_exports_and_prints_the_metrics(fifo_out, example):
    assert sorted(p.name for p in fifo_out.iterdir()) == [
        "assignments.csv",
        "grid.csv",
        "metrics.json",
        "realtime.csv",
    ]
    printed = json.loads((fifo_out / "metrics.json").read_text())
    scenario = load_scenario(example)
    expected = metrics(scenario, solve(scenario, "fifo"))
    for key in (
        "utilization",
        "allocated_fraction",
        "value",
        "objective",
        "completed_jobs",
        "rt_coverage",
    ):
        assert printed[key] == pytest.approx(expected[key])
    assert printed["planner"] == "fifo"
    header = (fifo_out / "grid.csv").read_text().splitlines()[0]
    assert header.startswith("step,gpu,job_id")
    rt = list(csv.DictReader((fifo_out / "realtime.csv").open()))
    assert len(rt) == 24 and {"demand", "allocated", "shortfall"} <= set(rt[0])


@pytest.mark.slow
def test_check_accepts_the_exported_grid(fifo_out, example):
    result = gpuplan("check", example, fifo_out / "grid.csv")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("legal")


@pytest.mark.slow
def test_check_names_the_constraint_when_one_cell_moves(fifo_out, tmp_path, example):
    rows = list(csv.DictReader((fifo_out / "grid.csv").open()))
    taken = {(r["step"], r["gpu"]) for r in rows}
    # one cell of dpo-13b's block moves to a (step, GPU) that nobody holds
    cell = next(r for r in rows if r["job_id"] == "dpo-13b")
    cell["step"], cell["gpu"] = next(
        (str(t), str(g)) for t in range(24) for g in range(8) if (str(t), str(g)) not in taken
    )
    moved = tmp_path / "moved.csv"
    with moved.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    result = gpuplan("check", example, moved)
    assert result.returncode == 1
    assert "illegal" in result.stdout and "job 'dpo-13b'" in result.stdout
    assert "constraint 3 (power-of-two blocks)" in result.stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, words",
    [
        (("plan", "missing.json"), ["missing.json", "no such file"]),
        (("plan", "{bad}"), ["bad.json", "not valid JSON"]),
        (("plan", "{jobs}"), ["jobs.csv", "demand.csv is needed"]),  # half of the CSV pair
        (("check", "{example}", "{bad_grid}"), ["grid.csv", "row 2", "job_id 'ghost'"]),
        (("check", "{example}", "{example}"), ["example.json", "missing column"]),
    ],
)
def test_bad_input_exits_2_with_one_line(args, words, tmp_path, example):
    bad = tmp_path / "bad.json"
    bad.write_text('{"cluster": ')
    bad_grid = tmp_path / "grid.csv"
    bad_grid.write_text("step,gpu,job_id\n0,0,ghost\n")
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("id,type,priority,arrival_step,gpus_min,gpus_max,gpu_hours,swap_cap\n")
    filled = [a.format(bad=bad, example=example, bad_grid=bad_grid, jobs=jobs) for a in args]
    result = gpuplan(*filled, cwd=tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for word in words:
        assert word in lines[0]
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_module_and_console_script_agree(example):
    result = gpuplan("plan", example, "--planner", "backfill")
    assert result.returncode == 0
    assert json.loads(result.stdout)["planner"] == "backfill"


# --- plan: several planners, a table for people, the MIP's progress ---------------------------


@pytest.mark.slow
def test_plan_compares_several_planners_in_one_call(example, tmp_path):
    result = gpuplan("plan", example, "--planner", "fifo,allocator", "--out", tmp_path)
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)
    s = load_scenario(example)
    assert list(shown) == ["fifo", "allocator"]
    for name in shown:
        expected = metrics(s, solve(s, name))
        assert shown[name]["value"] == pytest.approx(expected["value"])
        assert (tmp_path / name / "grid.csv").exists()  # one export folder per planner


@pytest.mark.slow
def test_plan_prints_a_table_with_the_gain_over_fifo(example):
    result = gpuplan("plan", example, "--planner", "fifo,allocator", "--format", "table")
    assert result.returncode == 0, result.stderr
    header, fifo_line, alloc_line = result.stdout.strip().splitlines()
    assert header.split()[:4] == ["planner", "util.", "allocated", "value"]
    s = load_scenario(example)
    fifo, alloc = (metrics(s, solve(s, n)) for n in ("fifo", "allocator"))
    assert fifo_line.split()[0] == "fifo" and f"{fifo['utilization']:.1%}" in fifo_line
    gain = alloc["value"] / fifo["value"] - 1
    assert f"{gain:+.1%}" in alloc_line
    assert f"{alloc['completed_jobs']}/{alloc['batch_jobs']}" in alloc_line
    assert not result.stdout.lstrip().startswith("{")  # JSON only when asked (the default)


@pytest.mark.slow
def test_the_mip_reports_its_progress_on_stderr_and_json_stays_clean(example):
    result = gpuplan("plan", example, "--planner", "full", "--time-limit", "2")
    assert result.returncode == 0, result.stderr
    json.loads(result.stdout)  # stdout is the metrics alone
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("full: ") and " after " in last and last.endswith(" s")
    quiet = gpuplan("plan", example, "--planner", "full", "--time-limit", "2", "--no-progress")
    assert quiet.returncode == 0 and quiet.stderr == ""


@pytest.mark.slow
def test_the_thorough_search_says_how_it_ended_and_what_won(scenarios_dir):
    peak = scenarios_dir / "realtime-peak.json"
    result = gpuplan("plan", peak, "--planner", "allocator,thorough", "--time-limit", "30")
    assert result.returncode == 0, result.stderr
    reports = json.loads(result.stdout)  # stdout is the metrics alone
    assert reports["thorough"]["objective"] > reports["allocator"]["objective"]
    assert reports["thorough"]["time_limit_reached"] is False
    assert reports["thorough"]["restarts"]["kept"] == [["after", "training-1", 18]]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("thorough: search finished · ")
    assert "won by: training-1 starting at step 18 or later" in last
    cut = gpuplan("plan", peak, "--planner", "thorough", "--time-limit", "0.001")
    assert cut.returncode == 0, cut.stderr
    assert json.loads(cut.stdout)["time_limit_reached"] is True
    assert cut.stderr.strip().splitlines()[-1].startswith("thorough: time limit reached · ")


@pytest.mark.slow
def test_bench_runs_a_search_once_and_leaves_it_out_of_a_generated_shape(tmp_path):
    result = gpuplan(
        "bench", "--planners", "allocator", "thorough", "--scenarios", str(ROOT / "data"
        / "scenarios" / "example.json"), "--generated", "16", "20", "24", "--repeat", "3",
        "--json", "--time-limit", "5", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [(r["scenario"], r["planner"]) for r in rows] == [
        ("example", "allocator"),
        ("example", "thorough"),
        ("generated-16x20x24", "allocator"),
    ]
    assert all(r["legal"] for r in rows)
    assert rows[1]["time_limit_reached"] is False and "time_limit_reached" not in rows[0]
    assert rows[1]["objective"] >= rows[0]["objective"]


@pytest.mark.slow
def test_a_target_no_plan_reaches_is_said_with_the_most_coverage_there_is(tmp_path):
    # 2 GPUs, demand 3 a step: 2/3 coverage at most against a 90% target
    from core.formats.scenario_json import scenario_to_json
    from core.model import BatchJob, Cluster, Policy, RealtimeJob, Scenario

    chat = RealtimeJob("chat", 4, 0, 2, swap_cap=2, demand=(3.0, 3.0, 3.0))
    job = BatchJob("train", "training", 5, 1, 2, 2.0)
    path = tmp_path / "short.json"
    path.write_text(
        scenario_to_json(
            Scenario("t", Cluster(2, 60, 3), (chat, job), Policy(rt_coverage_target=0.9))
        )
    )
    result = gpuplan("plan", path, "--planner", "full", "--time-limit", "20")
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)
    assert shown["status"] == "slo_infeasible" and shown["slo_met"] is False
    assert shown["most_coverage"] == pytest.approx(2 / 3) and shown["most_coverage_proved"]
    assert shown["rt_coverage"] == pytest.approx(2 / 3)
    assert "most coverage 66.7% (proved)" in result.stderr.strip().splitlines()[-1]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("planners", "says"),
    [
        ("fifo,nope", "unknown planner 'nope'"),  # a name not in the registry
        ("fifo,fifo", "named twice"),  # the same planner twice
        (",", "unknown planner"),  # nothing named
    ],
)
def test_a_bad_planner_list_is_refused_with_exit_2(example, planners, says):
    result = gpuplan("plan", example, "--planner", planners)
    assert result.returncode == 2 and says in result.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, words",
    [
        # argument errors: one `error:` line, not a usage block
        (("plan", "{example}", "--time-limit", "-1"), ["--time-limit", "must be > 0"]),
        (("plan", "{example}", "--time-limit", "inf"), ["--time-limit", "finite"]),
        (("simulate", "{example}", "--days", "0"), ["--days", "must be > 0"]),
        (("simulate", "{example}", "--days", "1e308"), ["--days", "at most 70,560"]),
        (("simulate", "{example}", "--replan-minutes", "7"), ["--replan-minutes 7", "60-minute"]),
        (("forecast", "h.csv", "--horizon", "100000000"), ["--horizon", "at most 10,080"]),
        (("forecast", "h.csv", "--level", "1e-300"), ["--level", "0.001 and 0.999"]),
        (("bench", "--repeat", "0"), ["--repeat", "at least 1"]),
        (("bench", "--generated", "8", "0", "24"), ["--generated", "at least 1"]),
        (("bench", "--generated", "100000", "10", "10"), ["gpus 100000", "65,536"]),
        (("plan",), ["required", "INPUT"]),
        # --out onto a file, under a missing folder, or under a file
        (("plan", "{example}", "--out", "{a_file}"), ["--out", "is a file, not a folder"]),
        (("simulate", "{example}", "--out", "{a_file}/sub"), ["is a file", "cannot be made"]),
        (("forecast", "h.csv", "--out", "{a_file}/f.csv"), ["is a file", "cannot be made"]),
        (("forecast", "h.csv", "--out", "{tmp}"), ["--out", "is a folder, not a file"]),
    ],
)
def test_argument_and_output_errors_are_one_line(args, words, example, tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    filled = [a.format(example=example, a_file=a_file, tmp=tmp_path) for a in args]
    result = gpuplan(*filled, cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for word in words:
        assert word in lines[0], lines[0]


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_out_in_a_folder_without_permission_is_one_line(example, tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    result = gpuplan("plan", example, "--out", locked / "out", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "no permission" in result.stderr


@pytest.mark.slow
def test_plan_check_and_simulate_read_the_csv_pair_and_a_history(tmp_path, scenarios_dir):
    from core.formats import scenario_to_tables

    scenario = load_scenario(scenarios_dir / "mixed-control.json")
    jobs_csv, demand_csv = scenario_to_tables(scenario)
    (tmp_path / "team_jobs.csv").write_text(jobs_csv)
    (tmp_path / "team_demand.csv").write_text(demand_csv)
    pair = [tmp_path / "team_demand.csv", tmp_path / "team_jobs.csv"]  # any order

    refused = gpuplan("plan", *pair)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert "CSV pair carries no cluster" in refused.stderr and "--gpus" in refused.stderr

    start = scenario.cluster.start.isoformat()
    planned = gpuplan("plan", *pair, "--gpus", "8", "--start", start, "--planner", "fifo")
    assert planned.returncode == 0, planned.stderr
    fifo = metrics(scenario, solve(scenario, "fifo"))
    assert json.loads(planned.stdout)["value"] == fifo["value"]

    out = tmp_path / "out"
    assert gpuplan("plan", *pair, "--gpus", "8", "--out", out).returncode == 0
    checked = gpuplan("check", *pair, out / "grid.csv", "--gpus", "8")
    assert checked.returncode == 0 and checked.stdout.startswith("legal:")

    sacct = ROOT / "tests" / "formats" / "fixtures" / "sacct_quirks.txt"
    history = gpuplan("plan", sacct, "--planner", "fifo,allocator")
    assert history.returncode == 0, history.stderr
    assert set(json.loads(history.stdout)) == {"fifo", "allocator"}
    simulated = gpuplan("simulate", sacct, "--days", "1", "--planner", "fifo")
    assert simulated.returncode == 0, simulated.stderr


@pytest.mark.slow
def test_simulate_takes_the_demand_quantile_and_writes_risk_and_idle_windows(tmp_path, example):
    out = tmp_path / "sim"
    result = gpuplan("simulate", example, "--days", "1", "--demand-quantile", "0.95", "--out", out)
    assert result.returncode == 0, result.stderr
    realised = json.loads((out / "metrics.json").read_text())
    with (out / "coverage_risk.csv").open() as f:
        risk = list(csv.DictReader(f))
    with (out / "idle_windows.csv").open() as f:
        windows = list(csv.DictReader(f))
    scenario = load_scenario(out / "scenario.json")
    steps = scenario.cluster.horizon_steps
    assert len(risk) == steps * len(scenario.realtime_jobs)
    assert all(0.0 <= float(r["risk"]) <= 1.0 for r in risk)
    # the windows are disjoint, so their GPU-hours never exceed the idle GPU-hours
    assert sum(float(w["gpu_hours"]) for w in windows) <= realised["idle_gpu_hours"] + 1e-9
    bad = gpuplan("simulate", example, "--demand-quantile", "1")
    assert bad.returncode == 2 and "--demand-quantile" in bad.stderr


@pytest.mark.slow
def test_simulate_reports_its_re_plans_on_stderr_and_keeps_stdout_the_metrics(example):
    result = gpuplan(
        "simulate", example, "--days", "1", "--planner", "thorough", "--time-limit", "0.2"
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["planner"] == "thorough"
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith("simulate (thorough): ") and "step " in lines[0]
    assert lines[-1].startswith("simulate (thorough): 24 re-plans in ")  # hourly, one day
    quiet = gpuplan("simulate", example, "--days", "1", "--no-progress")
    assert quiet.returncode == 0 and quiet.stderr == ""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("shape", "words"),
    [
        (["8", "10000000", "24"], "generated case: 10,000,000 jobs is outside 1..100,000"),
        (["100000", "10", "24"], "cluster: gpus 100000 exceeds the limit of 65,536"),
        (["4096", "10", "4096"], "exceeds the limit of 10,000,000"),
    ],
)
def test_bench_refuses_a_generated_shape_past_the_limits_before_any_run(shape, words):
    run = gpuplan("bench", "--planners", "fifo", "--repeat", "1", "--generated", *shape)
    assert run.returncode == 2 and run.stdout == ""  # not even the benchmarks ran first
    assert run.stderr.startswith("error: ") and words in run.stderr
    assert run.stderr.count("\n") == 1


def test_a_sweep_refuses_more_local_workers_than_four_per_core():
    from core.model import ScenarioError
    from core.sweep import local_cluster, max_local_workers

    assert max_local_workers() == 4 * (os.cpu_count() or 1)
    with pytest.raises(ScenarioError, match=r"sweep: workers \d+ is more than \d+, four per core"):
        local_cluster(max_local_workers() + 1)  # refused before a process starts


@pytest.mark.slow
def test_bench_times_a_generated_shape_with_progress_on_stderr(tmp_path):
    result = gpuplan(
        "bench", "--planners", "fifo", "allocator", "--scenarios", str(ROOT / "data" / "scenarios"
        / "example.json"), "--generated", "16", "20", "120", "--repeat", "2", "--json",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    rows = [r for r in json.loads(result.stdout) if r["scenario"] == "generated-16x20x120"]
    assert [r["planner"] for r in rows] == ["fifo", "allocator"]
    assert all(r["legal"] and r["gpus"] == 16 and r["jobs"] == 20 for r in rows)
    assert "generated: 16 GPUs, 20 jobs, 120 steps, seed 0: allocator, run 2 of 2" in result.stderr


@pytest.mark.slow
def test_two_scenario_files_are_not_taken_for_a_csv_pair(scenarios_dir):
    run = gpuplan("plan", scenarios_dir / "example.json", scenarios_dir / "mixed-control.json")
    assert run.returncode == 2
    assert run.stderr == (
        "error: example.json, mixed-control.json: give one scenario or history file, or "
        "jobs.csv together with demand.csv\n"
    )  # not "the CSV pair carries no cluster: give --gpus"


@pytest.mark.slow
def test_simulate_replans_hourly_in_whole_steps_unless_told_otherwise(tmp_path, scenarios_dir):
    from core.formats import scenario_to_json
    from core.model import Cluster

    example = load_scenario(scenarios_dir / "example.json")
    c = example.cluster
    seven = tmp_path / "seven.json"  # 7-minute steps: hourly is every 63 minutes
    seven.write_text(scenario_to_json(example.replace(cluster=Cluster(c.gpus, 7, c.horizon_steps))))
    run = gpuplan("simulate", seven, "--planner", "fifo", "--days", "0.5", "--no-progress")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["replans"] == 12  # 720 minutes / 63, rounded up
    told = gpuplan("simulate", seven, "--replan-minutes", "60", "--no-progress")
    assert told.returncode == 2
    assert "--replan-minutes 60 is not a whole number of the scenario's 7-minute steps" in (
        told.stderr
    )


@pytest.mark.slow
def test_window_options_on_a_scenario_are_refused_not_dropped(scenarios_dir):
    example = scenarios_dir / "example.json"
    run = gpuplan("plan", example, "--gpus", "64", "--window-days", "5")
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.startswith("error: example.json: --window-days, --gpus apply to a ")
    assert gpuplan("plan", example).returncode == 0  # without them, as before


@pytest.mark.slow
def test_inputs_read_once_are_read_like_files(example, tmp_path):
    """Standard input ("-") and a process substitution: the format is detected from the head and
    the input read whole, though such an input can be read only once."""

    def plan_of(run: subprocess.CompletedProcess) -> dict:
        return {k: v for k, v in json.loads(run.stdout).items() if k != "runtime_ms"}

    from_file = gpuplan("plan", example, "--planner", "allocator")
    assert from_file.returncode == 0, from_file.stderr
    from_stdin = gpuplan("plan", "-", "--planner", "allocator", stdin=example.read_text())
    assert from_stdin.returncode == 0, from_stdin.stderr
    assert plan_of(from_stdin) == plan_of(from_file)

    command = f"{sys.executable} -m core plan <(cat '{example}') --planner allocator"
    substituted = subprocess.run(
        ["bash", "-c", command],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert substituted.returncode == 0, substituted.stderr
    assert plan_of(substituted) == plan_of(from_file)

    log = ROOT / "tests" / "formats" / "fixtures" / "helios_cluster_log.csv"
    out = tmp_path / "new" / "window.json"  # a folder that does not exist yet is made
    piped = gpuplan("import", "-", "--out", out, stdin=log.read_text())
    assert piped.returncode == 0, piped.stderr
    assert load_scenario(out).jobs and (out.parent / "as_run.json").is_file()

    empty = gpuplan("plan", "-", stdin="")
    assert (empty.returncode, empty.stderr) == (2, "error: stdin: file is empty\n")


@pytest.mark.slow
def test_output_files_in_a_missing_folder_are_written_there(tmp_path, scenarios_dir):
    history = ROOT / "data" / "histories" / "chat_requests_hourly.csv"
    out = tmp_path / "reports" / "week" / "forecast.csv"
    run = gpuplan("forecast", history, "--horizon", "24", "--out", out)
    assert run.returncode == 0, run.stderr
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 24 and run.stdout == ""


@pytest.mark.slow
def test_plan_reads_a_history_past_the_upload_limit_as_import_does(tmp_path):
    """A history as INPUT is read from its path up to the import's limit, not the 20 MB of an
    upload; reading one that large says so on stderr (a small one's errors stay one line)."""
    export = tmp_path / "sacct.txt"
    made = subprocess.run(
        [sys.executable, ROOT / "scripts" / "make_sacct.py", "--jobs", "90000", "--out", export],
        capture_output=True,
        timeout=120,
    )
    assert made.returncode == 0 and export.stat().st_size > 21 * 2**20
    planned = gpuplan("plan", export, "--planner", "fifo")
    assert planned.returncode == 0, planned.stderr
    assert planned.stderr.startswith("reading sacct.txt (")
    imported = gpuplan("import", export, "--out", tmp_path / "window.json")
    assert imported.returncode == 0, imported.stderr
    first, last = imported.stderr.splitlines()  # what it reads, then how long that took
    assert first.startswith("import: reading sacct.txt (") and first.endswith(" MB) ...")
    assert last.startswith("import: read in ") and last.endswith(" s")
    quiet = gpuplan("import", export, "--out", tmp_path / "window.json", "--no-progress")
    assert (quiet.returncode, quiet.stderr, quiet.stdout) == (0, "", imported.stdout)
    window = load_scenario(tmp_path / "window.json")
    assert json.loads(planned.stdout) | {"runtime_ms": 0} == metrics(
        window, solve(window, "fifo")
    ) | {"runtime_ms": 0}
    # every command that reads a SCENARIO reads a history the same way
    workspace = tmp_path / "ws.sqlite"
    saved = gpuplan("workspace", "--workspace", workspace, "save", export, "--name", "sacct")
    assert saved.returncode == 0, saved.stderr
    kept = Workspace(workspace).load_scenario("sacct")
    assert kept.cluster == window.cluster
    assert [j.id for j in kept.jobs] == [j.id for j in window.jobs]


@pytest.mark.slow
def test_size_answers_on_a_history_window_as_on_its_imported_scenario(tmp_path):
    """`size` takes INPUT like plan: "how many GPUs do we need" straight from sacct."""
    sacct = ROOT / "tests" / "formats" / "fixtures" / "sacct_quirks.txt"
    window = ("--start", "2026-08-17T00:00:00", "--window-days", "1")
    targets = ("--coverage", "0.99", "--completed", "0.9", "--no-progress")
    direct = gpuplan("size", sacct, *window, *targets)
    assert direct.returncode == 0, direct.stderr
    imported = gpuplan("import", sacct, *window[:2], "--out", tmp_path / "w.json", "--no-progress")
    assert imported.returncode == 0, imported.stderr
    via_file = gpuplan("size", tmp_path / "w.json", *targets)
    assert via_file.returncode == 0, via_file.stderr

    def sizes(run: subprocess.CompletedProcess) -> list:
        return [(r["gpus"], r["meets"]) for r in json.loads(run.stdout)["tried"]]

    assert json.loads(direct.stdout)["gpus"] == json.loads(via_file.stdout)["gpus"] == 24
    assert sizes(direct) == sizes(via_file) == [(8, False), (16, False), (24, True), (32, True)]


# A day on a cluster (its peak in use, 26 GPUs, rounded up to 32): chat-api on 2 GPUs all day,
# three 8-GPU trainings from 01:00 to 21:00 (72000 s, COMPLETED) and a fourth 20-hour one still
# pending. By hand, as-run completed 3 of the 4 batch jobs in the window: 75%.
STARVED_SACCT = (
    """\
JobIDRaw|JobID|JobName|User|Account|Partition|QOS|Priority|Submit|Eligible|Start|End|\
ElapsedRaw|TimelimitRaw|State|AllocTRES|ReqTRES|NNodes|NodeList
2000|2000|chat-api|svc|web|serving|normal|2000|2026-08-16T11:00:00|2026-08-16T11:00:00|\
2026-08-16T12:00:00|Unknown|129600|UNLIMITED|RUNNING|billing=4,cpu=4,gres/gpu=2,mem=32G,node=1|\
billing=4,cpu=4,gres/gpu=2,mem=32G,node=1|1|gpu09
"""
    + "".join(
        f"210{i}|210{i}|train-{i}|alice|nlp|gpu|normal|500|2026-08-17T01:00:00|2026-08-17T01:00:00|"
        "2026-08-17T01:00:00|2026-08-17T21:00:00|72000|1440|COMPLETED|"
        "billing=8,cpu=8,gres/gpu=8,mem=64G,node=1|billing=8,cpu=8,gres/gpu=8,mem=64G,node=1|1|"
        f"gpu0{i}\n"
        for i in (1, 2, 3)
    )
    + (
        "2104|2104|train-4|alice|nlp|gpu|normal|500|2026-08-17T01:00:00|2026-08-17T01:00:00|"
        "Unknown|Unknown|0|1200|PENDING||billing=8,cpu=8,gres/gpu=8,mem=64G,node=1|1|"
        "None assigned\n"
    )
)
DAY = ("--start", "2026-08-17T00:00:00", "--window-days", "1")


@pytest.mark.slow
def test_size_with_only_coverage_holds_a_historys_batch_completion_at_as_run(tmp_path):
    """Issue 53: coverage alone is met on 4 GPUs, where no training completes; on a history
    `size` also holds batch completion at what the real scheduler completed, and says so."""
    sacct = tmp_path / "sacct.txt"
    sacct.write_text(STARVED_SACCT)
    run = gpuplan("size", sacct, *DAY, "--coverage", "0.99", "--step", "4")
    assert run.returncode == 0, run.stderr
    printed = json.loads(run.stdout)
    assert printed["targets"] == {
        "coverage": 0.99,
        "completed": 3 / 4,
        "completed_from": "as-run",
        "as_run_completed_jobs": 3,
        "as_run_batch_jobs": 4,
    }
    assert "batch" not in printed  # (batch work is a target here)
    tried = {row["gpus"]: row for row in printed["tried"]}
    answer = tried[printed["gpus"]]
    assert answer["meets"] and answer["completed_jobs"] / answer["batch_jobs"] >= 3 / 4
    assert answer["rt_coverage"] >= 0.99
    assert not tried[printed["gpus"] - 4]["meets"]  # (the step below completes fewer)
    assert printed["gpus"] == 28  # three trainings side by side and chat-api's 2 GPUs
    lines = run.stderr.splitlines()
    assert lines[0] == (
        "size: batch completion held at as-run's 75.0% (3 of 4 jobs); give --completed to "
        "choose another share, or --completed any"
    )
    assert lines.count(lines[0]) == 1 and lines[1].startswith("size: 4 GPUs ")
    # --completed any: coverage alone, and the result says plainly what batch work gets
    anyway = gpuplan("size", sacct, *DAY, "--coverage", "0.99", "--step", "4", "--completed", "any")
    assert anyway.returncode == 0, anyway.stderr
    starved = json.loads(anyway.stdout)
    assert starved["gpus"] == 4 and starved["targets"] == {"coverage": 0.99}
    assert starved["batch"] == {
        "target": False,
        "gpus": 4,
        "completed_share": 0.0,
        "completed_jobs": 0,
        "batch_jobs": 4,
    }
    assert "held at" not in anyway.stderr
    assert anyway.stderr.splitlines()[-1] == (
        "size: batch work is not a target; at 4 GPUs 0.0% of batch jobs complete (0 of 4)"
    )
    # a share given is the target, as before
    given = gpuplan("size", sacct, *DAY, "--coverage", "0.99", "--completed", "0.5", "--step", "4")
    assert json.loads(given.stdout)["targets"] == {"coverage": 0.99, "completed": 0.5}
    assert "held at" not in given.stderr and "not a target" not in given.stderr
    # the scenario `gpuplan import` wrote holds the same, from the as_run.json beside it
    out = tmp_path / "day" / "scenario.json"
    imported = gpuplan("import", sacct, *DAY[:2], "--out", out, "--no-progress")
    assert imported.returncode == 0, imported.stderr
    via_file = gpuplan("size", out, "--coverage", "0.99", "--step", "4")
    assert via_file.returncode == 0, via_file.stderr
    assert json.loads(via_file.stdout)["targets"] == printed["targets"]
    assert json.loads(via_file.stdout)["gpus"] == 28
    assert via_file.stderr.splitlines()[0] == lines[0] + " (as-run from as_run.json)"
    # ... but not once its batch jobs were edited: then batch work is plainly no target
    edited = json.loads(out.read_text())
    edited["jobs"] = [j for j in edited["jobs"] if j["id"] != "2104"]
    out.write_text(json.dumps(edited))
    changed = gpuplan("size", out, "--coverage", "0.99", "--step", "4")
    assert changed.returncode == 0, changed.stderr
    assert "held at" not in changed.stderr and "not a target" in changed.stderr


@pytest.mark.slow
def test_a_reader_that_stops_early_ends_the_output_quietly():
    """`gpuplan ... | head -1`: once the reader has gone, no "cannot write (Broken pipe)" error;
    the exit status says so, as other tools' do (141 = 128 + SIGPIPE)."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # a reader that has already gone: the first write breaks the pipe
    try:
        run = subprocess.run(
            [sys.executable, "-m", "core", "plan", str(ROOT / "data/scenarios/example.json")],
            cwd=ROOT,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    finally:
        os.close(write_end)
    assert (run.returncode, run.stderr) == (141, "")


@pytest.mark.slow
def test_the_csv_pair_reads_from_standard_input_or_a_pipe_too(tmp_path, scenarios_dir):
    from core.formats import scenario_to_tables

    scenario = load_scenario(scenarios_dir / "mixed-control.json")
    jobs_csv, demand_csv = scenario_to_tables(scenario)
    (tmp_path / "jobs.csv").write_text(jobs_csv)
    (tmp_path / "demand.csv").write_text(demand_csv)
    options = ("--gpus", "8", "--planner", "fifo")

    def plan_of(run: subprocess.CompletedProcess) -> dict:
        assert run.returncode == 0, run.stderr
        return {k: v for k, v in json.loads(run.stdout).items() if k != "runtime_ms"}

    files = plan_of(gpuplan("plan", tmp_path / "jobs.csv", tmp_path / "demand.csv", *options))
    piped = gpuplan("plan", "-", tmp_path / "demand.csv", *options, stdin=jobs_csv)
    assert plan_of(piped) == files
    (tmp_path / "demand.txt").write_text(demand_csv)  # any name: its columns say what it is
    assert plan_of(gpuplan("plan", tmp_path / "jobs.csv", tmp_path / "demand.txt", *options)) == (
        files
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, stdin, says",
    [
        # a demand step no horizon holds: the file and row, not a traceback or the cluster
        (("plan", "{jobs}", "{demand_inf}", "--gpus", "8"), None, "d.csv: row 2: step must be"),
        (("plan", "{jobs}", "{demand_far}", "--gpus", "8"), None, "d.csv: row 2: step 20000 is"),
        (("check", "{example}", "-", "-"), "x", "standard input ('-') is given for more than one"),
        (("plan", "{log}", "--rules", "/dev/zero"), None, "zero: file is larger than the upload"),
        (("forecast", "{history}", "--out", "{tmp}/new/"), None, "new/ is a folder, not a file"),
        (("import", "{history}", "--out", "-"), None, "'-' is no file name here"),
        (("import", "{log}", "--out", "/dev/full"), None, "/dev/full: cannot write (No space"),
    ],
)
def test_odd_inputs_and_outputs_are_one_line_naming_what_is_wrong(
    args, stdin, says, tmp_path, example, scenarios_dir
):
    from core.formats import scenario_to_tables

    jobs_csv, demand_csv = scenario_to_tables(load_scenario(example))
    (tmp_path / "jobs.csv").write_text(jobs_csv)
    header, first, *_ = demand_csv.splitlines()
    step, *rest = first.split(",")
    for name, value in (("demand_inf", "inf"), ("demand_far", "20000")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "d.csv").write_text(f"{header}\n{','.join([value, *rest])}\n")
    fill = {
        "jobs": tmp_path / "jobs.csv",
        "demand_inf": tmp_path / "demand_inf" / "d.csv",
        "demand_far": tmp_path / "demand_far" / "d.csv",
        "example": example,
        "history": ROOT / "data" / "histories" / "chat_requests_hourly.csv",
        "log": ROOT / "tests" / "formats" / "fixtures" / "helios_cluster_log.csv",
        "tmp": tmp_path,
    }
    if "/dev/full" in args and not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    run = gpuplan(*[a.format(**fill) for a in args], stdin=stdin)
    assert run.returncode == 2, run.stdout + run.stderr
    assert run.stderr.count("\n") == 1 and run.stderr.startswith("error: "), run.stderr
    assert says in run.stderr, run.stderr


def test_a_command_loads_only_its_own_module_and_help_lists_them_all():
    """The registry imports the command being run and no other (pip's lazy command loading);
    `gpuplan --help` still lists every command with its summary."""
    from core.cli import COMMANDS

    probe = (
        "import sys; from core.cli import _parser; _parser(only='check'); "
        "print(sorted(m for m in sys.modules if m.startswith('core.cli.')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=True
    ).stdout
    loaded = {name.rsplit(".", 1)[1] for name in eval(out)}
    commands = {command.module for command in COMMANDS.values()}
    assert loaded & commands == {"check"}
    listing = subprocess.run(
        [sys.executable, "-m", "core", "--help"], capture_output=True, text=True, cwd=ROOT
    ).stdout
    listing = " ".join(listing.split())  # (argparse wraps the long summaries)
    for name, command in COMMANDS.items():
        assert name in listing and command.summary in listing
