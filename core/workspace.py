"""Saved scenarios and runs in an embedded SQLite workspace (one file, WAL mode).

A workspace keeps named scenarios (their canonical JSON) and, for each, the runs made on it:
planner, policy, metrics and the grid. Every call opens its own short connection, so threads
and app sessions can save at once (WAL lets readers go on while one writer commits; writers
wait up to `timeout` seconds for each other). Anything the database refuses (a corrupt or
locked file, a folder without permission) becomes a `WorkspaceError` with a message: the
caller's active scenario is never touched.

Location: `GPUPLAN_WORKSPACE` when set, else `workspace.sqlite` in the user's data folder
(platformdirs: ~/.local/share/gpuplan on Linux).
"""

from __future__ import annotations

import io
import json
import os
import sqlite3
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from .model import Scenario, ScenarioError
from .plan import Plan

ENV_VAR = "GPUPLAN_WORKSPACE"
SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS scenarios (
    name TEXT PRIMARY KEY,
    saved_at TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    scenario TEXT NOT NULL REFERENCES scenarios(name) ON DELETE CASCADE,
    planner TEXT NOT NULL,
    saved_at TEXT NOT NULL,
    policy TEXT NOT NULL,
    metrics TEXT NOT NULL,
    grid BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_by_scenario ON runs(scenario);
"""


class WorkspaceError(ScenarioError):
    """The workspace database could not be used; the message says what to do."""


def default_path() -> Path:
    """GPUPLAN_WORKSPACE, else workspace.sqlite in the user's data folder."""
    chosen = os.environ.get(ENV_VAR)
    if chosen:
        return Path(chosen).expanduser()
    from platformdirs import user_data_dir

    return Path(user_data_dir("gpuplan", appauthor=False)) / "workspace.sqlite"


@dataclass(frozen=True)
class SavedScenario:
    name: str
    saved_at: str
    jobs: int
    gpus: int
    runs: int


@dataclass(frozen=True)
class SavedRun:
    id: int
    scenario: str
    planner: str
    saved_at: str
    metrics: dict[str, Any]


class Workspace:
    """Named scenarios and their runs in one SQLite file."""

    def __init__(self, path: str | Path | None = None, timeout: float = 10.0):
        self.path = Path(path).expanduser() if path is not None else default_path()
        self.timeout = timeout
        with self._connect() as db:
            db.executescript(_SCHEMA)
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    # -- scenarios --------------------------------------------------------------------------

    def save_scenario(self, name: str, scenario: Scenario) -> None:
        """Save (or replace) a scenario under `name`; its runs are kept when it is unchanged."""
        from .formats import scenario_to_json

        name = _name(name)
        body = scenario_to_json(scenario)
        with self._connect() as db:
            old = db.execute("SELECT body FROM scenarios WHERE name = ?", (name,)).fetchone()
            if old is not None and old[0] != body:
                db.execute("DELETE FROM runs WHERE scenario = ?", (name,))  # runs of another
            db.execute(
                "INSERT INTO scenarios (name, saved_at, body) VALUES (?, ?, ?) "
                "ON CONFLICT(name) DO UPDATE SET saved_at = excluded.saved_at, "
                "body = excluded.body",
                (name, _now(), body),
            )

    def scenarios(self) -> list[SavedScenario]:
        with self._connect() as db:
            rows = db.execute(
                "SELECT s.name, s.saved_at, s.body, COUNT(r.id) FROM scenarios s "
                "LEFT JOIN runs r ON r.scenario = s.name GROUP BY s.name ORDER BY s.saved_at DESC"
            ).fetchall()
        out = []
        for name, saved_at, body, runs in rows:
            doc = json.loads(body)
            out.append(
                SavedScenario(name, saved_at, len(doc["jobs"]), doc["cluster"]["gpus"], runs)
            )
        return out

    def load_scenario(self, name: str) -> Scenario:
        from .formats import scenario_from_json

        with self._connect() as db:
            row = db.execute("SELECT body FROM scenarios WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise WorkspaceError(f"workspace {self.path}: no saved scenario named {name!r}")
        return scenario_from_json(row[0], f"saved scenario {name!r}")

    def delete_scenario(self, name: str) -> None:
        with self._connect() as db:
            db.execute("DELETE FROM runs WHERE scenario = ?", (name,))
            db.execute("DELETE FROM scenarios WHERE name = ?", (name,))

    # -- runs -------------------------------------------------------------------------------

    def save_run(self, name: str, scenario: Scenario, plan: Plan) -> int:
        """Keep a plan of the saved scenario `name` (saved first if it is not there yet)."""
        from .formats import json_safe, scenario_to_json
        from .plan import report

        name = _name(name)
        with self._connect() as db:
            row = db.execute("SELECT body FROM scenarios WHERE name = ?", (name,)).fetchone()
        if row is None or row[0] != scenario_to_json(scenario):
            self.save_scenario(name, scenario)
        policy = json.dumps(json.loads(scenario_to_json(scenario))["policy"])
        values = json.dumps(json_safe(report(scenario, plan)))
        with self._connect() as db:
            cursor = db.execute(
                "INSERT INTO runs (scenario, planner, saved_at, policy, metrics, grid) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (name, plan.planner, _now(), policy, values, _pack(plan.grid)),
            )
            return int(cursor.lastrowid)

    def runs(self, name: str | None = None) -> list[SavedRun]:
        query = "SELECT id, scenario, planner, saved_at, metrics FROM runs"
        args: tuple = ()
        if name is not None:
            query += " WHERE scenario = ?"
            args = (name,)
        with self._connect() as db:
            rows = db.execute(query + " ORDER BY id", args).fetchall()
        return [SavedRun(i, s, p, at, json.loads(m)) for i, s, p, at, m in rows]

    def load_run(self, run_id: int) -> tuple[Scenario, Plan]:
        """The saved scenario and the plan of one run (its grid, planner and reported stats)."""
        with self._connect() as db:
            row = db.execute(
                "SELECT scenario, planner, metrics, grid FROM runs WHERE id = ?", (run_id,)
            ).fetchone()
        if row is None:
            raise WorkspaceError(f"workspace {self.path}: no run number {run_id}")
        name, planner, values, grid = row
        scenario = self.load_scenario(name)
        plan = Plan(_unpack(grid), planner)
        shape = (scenario.cluster.gpus, scenario.cluster.horizon_steps)
        if plan.grid.shape != shape:
            raise WorkspaceError(f"workspace {self.path}: run {run_id} has a grid of another size")
        reported = json.loads(values)
        plan.stats["runtime_ms"] = reported.get("runtime_ms", 0.0)
        for key in ("status", "bound", "gap"):  # what a searching planner reported
            if key in reported:
                plan.stats[key] = reported[key]
        return scenario, plan

    def delete_run(self, run_id: int) -> None:
        with self._connect() as db:
            db.execute("DELETE FROM runs WHERE id = ?", (run_id,))

    # -- the connection ---------------------------------------------------------------------

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """One short transaction; every database failure becomes a WorkspaceError."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, timeout=self.timeout)
        except (OSError, sqlite3.Error) as e:
            raise WorkspaceError(_advice(self.path, e)) from None
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA foreign_keys=ON")
            with db:  # commits, or rolls back on error
                yield db
        except sqlite3.Error as e:
            raise WorkspaceError(_advice(self.path, e)) from None
        finally:
            db.close()


def _advice(path: Path, error: Exception) -> str:
    text = str(error)
    if "locked" in text or "busy" in text:
        return (
            f"workspace {path}: the database is locked by another program; try again, or "
            f"choose another file with {ENV_VAR}"
        )
    if "not a database" in text or "malformed" in text or "corrupt" in text:
        return (
            f"workspace {path}: the file is not a readable gpuplan workspace ({text}); move it "
            f"away or choose another file with {ENV_VAR}"
        )
    return f"workspace {path}: cannot be used ({text}); choose another file with {ENV_VAR}"


def _name(name: str) -> str:
    if not isinstance(name, str) or not name.strip():
        raise WorkspaceError("a saved scenario needs a non-empty name")
    name = name.strip()
    if len(name) > 200 or any(ord(c) < 32 for c in name):
        raise WorkspaceError("a saved scenario's name must be at most 200 printable characters")
    return name


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _pack(grid: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(grid, dtype=np.int32), allow_pickle=False)
    return zlib.compress(buffer.getvalue())


def _unpack(blob: bytes) -> np.ndarray:
    try:
        return np.load(io.BytesIO(zlib.decompress(blob)), allow_pickle=False)
    except (zlib.error, ValueError, OSError) as e:
        raise WorkspaceError(f"a saved grid cannot be read ({e})") from None
