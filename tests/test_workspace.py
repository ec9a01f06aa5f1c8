"""The SQLite workspace on a real database file: save, reopen, runs, concurrency, failures."""

from __future__ import annotations

import sqlite3
import threading

import numpy as np
import pytest

from core.formats import load_scenario
from core.plan import metrics
from core.planners import solve
from core.workspace import Workspace, WorkspaceError, default_path


@pytest.fixture
def example(scenarios_dir):
    return load_scenario(scenarios_dir / "example.json")


def test_a_saved_scenario_and_its_run_come_back_exactly(tmp_path, example):
    path = tmp_path / "ws.sqlite"
    Workspace(path).save_scenario("my day", example)
    plan = solve(example, "allocator")
    run_id = Workspace(path).save_run("my day", example, plan)
    reopened = Workspace(path)  # as after a reload: a new object on the same file
    assert reopened.load_scenario("my day") == example
    (saved,) = reopened.scenarios()
    assert (saved.name, saved.jobs, saved.gpus, saved.runs) == ("my day", len(example.jobs), 8, 1)
    scenario, loaded = reopened.load_run(run_id)
    assert scenario == example and np.array_equal(loaded.grid, plan.grid)
    assert loaded.planner == "allocator"
    (run,) = reopened.runs("my day")
    assert run.metrics["value"] == pytest.approx(metrics(example, plan)["value"])


def test_delete_and_replace(tmp_path, example):
    ws = Workspace(tmp_path / "ws.sqlite")
    ws.save_run("a", example, solve(example, "fifo"))
    ws.save_run("b", example, solve(example, "fifo"))
    ws.delete_scenario("a")
    assert [s.name for s in ws.scenarios()] == ["b"] and [r.scenario for r in ws.runs()] == ["b"]
    # the same name with another scenario: its old runs no longer describe it, so they go
    ws.save_scenario("b", example.replace(name="changed"))
    assert ws.runs("b") == [] and ws.load_scenario("b").name == "changed"
    run_id = ws.save_run("b", ws.load_scenario("b"), solve(ws.load_scenario("b"), "fifo"))
    ws.delete_run(run_id)
    assert ws.runs() == []


def test_two_threads_saving_at_once_lose_nothing(tmp_path, example):
    path = tmp_path / "ws.sqlite"
    Workspace(path)
    plan = solve(example, "fifo")
    errors: list[BaseException] = []

    def save(worker: int) -> None:
        try:
            ws = Workspace(path)
            for k in range(15):
                ws.save_run(f"w{worker}-{k}", example, plan)
        except BaseException as e:  # noqa: BLE001 - the assertion below reports it
            errors.append(e)

    threads = [threading.Thread(target=save, args=(w,)) for w in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    ws = Workspace(path)
    assert len(ws.scenarios()) == 30 and len(ws.runs()) == 30
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_corrupt_file_gives_a_message(tmp_path):
    path = tmp_path / "ws.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(WorkspaceError, match="not a readable gpuplan workspace"):
        Workspace(path)


def test_a_locked_database_gives_a_message_and_changes_nothing(tmp_path, example):
    path = tmp_path / "ws.sqlite"
    ws = Workspace(path, timeout=0.2)
    ws.save_scenario("kept", example)
    holder = sqlite3.connect(path)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(WorkspaceError, match="locked"):
            ws.save_scenario("other", example)
    finally:
        holder.rollback()
        holder.close()
    assert [s.name for s in ws.scenarios()] == ["kept"]


def test_missing_names_and_runs_are_errors(tmp_path):
    ws = Workspace(tmp_path / "ws.sqlite")
    with pytest.raises(WorkspaceError, match="no saved scenario named 'nope'"):
        ws.load_scenario("nope")
    with pytest.raises(WorkspaceError, match="no run number 7"):
        ws.load_run(7)
    with pytest.raises(WorkspaceError, match="non-empty name"):
        ws.save_scenario("  ", None)


def test_a_folder_that_cannot_be_written_gives_a_message(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(WorkspaceError, match="cannot be used"):
        Workspace(blocker / "ws.sqlite")


def test_the_environment_chooses_the_default_location(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUPLAN_WORKSPACE", str(tmp_path / "chosen.sqlite"))
    assert default_path() == tmp_path / "chosen.sqlite"
    monkeypatch.delenv("GPUPLAN_WORKSPACE")
    assert default_path().name == "workspace.sqlite" and "gpuplan" in str(default_path())


def test_the_workspace_command_saves_lists_exports_and_deletes(tmp_path, scenarios_dir, capsys):
    from core.cli import main

    ws = str(tmp_path / "ws.sqlite")
    example = scenarios_dir / "example.json"
    assert main(["workspace", "--workspace", ws, "save", str(example), "--planners", "fifo"]) == 0
    assert main(["workspace", "--workspace", ws, "list"]) == 0
    listed = capsys.readouterr().out
    assert "example  (8 GPUs, 6 jobs" in listed and "run 1: fifo" in listed
    out = tmp_path / "back.json"
    assert main(["workspace", "--workspace", ws, "export", "example", "--out", str(out)]) == 0
    assert load_scenario(out) == load_scenario(example)
    assert main(["workspace", "--workspace", ws, "delete", "example"]) == 0
    assert main(["workspace", "--workspace", ws, "delete", "example"]) == 2
    assert "no saved scenario named 'example'" in capsys.readouterr().err


def test_reading_a_workspace_that_is_not_there_creates_nothing(tmp_path, capsys):
    from core.cli import main

    ws = tmp_path / "not" / "yet" / "ws.sqlite"
    assert main(["workspace", "--workspace", str(ws), "list"]) == 0
    out, err = capsys.readouterr()
    assert out == "" and f"workspace: {ws} (none yet" in err
    for action in (["export", "example"], ["delete", "example"]):
        assert main(["workspace", "--workspace", str(ws), *action]) == 2
        assert "no such file (nothing saved there yet)" in capsys.readouterr().err
    assert not (tmp_path / "not").exists()  # no folder, no database
