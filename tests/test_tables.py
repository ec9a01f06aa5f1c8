"""The per-job, per-team and KPI tables the pages show and the summary export writes."""

from __future__ import annotations

import numpy as np

from core.model import Cluster, Policy, Scenario
from core.plan import Plan
from core.tables import job_table, kpi_table, team_table, wait_hours
from tests.test_outcomes import GRID, JOBS


def _scenario():
    return Scenario("small", Cluster(4, 60, 4), JOBS, Policy(gpu_hour_cost=2.0))


def test_unstarted_jobs_come_first_and_every_planner_has_its_columns():
    s = _scenario()
    plans = {"by hand": Plan(GRID.copy()), "empty": Plan(np.full((4, 4), -1))}
    table = job_table(s, plans)
    assert list(table["job"])[0] == "C"  # highest priority among the unstarted ones first
    assert set(table["job"]) == {"A", "B", "C"}
    a = table.set_index("job").loc["A"]
    assert a["by hand: start"] == 1 and a["by hand: end"] == 3 and a["by hand: wait h"] == 1
    assert a["by hand: completed"] and a["by hand: late"]  # deadline step 1
    assert a.isna()["empty: start"] and not a["empty: completed"]
    assert "team" in table.columns


def test_waits_team_and_kpi_tables():
    s = _scenario()
    plan = Plan(GRID.copy())
    assert sorted(wait_hours(s, plan)) == [1.0, 2.0]
    teams = team_table(s, {"p": plan}).set_index("team")
    assert teams.loc["x", "GPU-hours"] == 6.5 and teams.loc["y", "completed"] == "1/2"
    kpis = kpi_table(s, {"p": plan}).set_index("KPI")["p"]
    assert kpis["cost"] == 32 and kpis["late jobs"] == 1 and kpis["idle (GPU-h)"] == 7
    no_price = kpi_table(s.replace(policy=Policy()), {"p": plan})
    assert "cost" not in set(no_price["KPI"])  # null for every planner: left out
