"""The history import in headless Chromium: a real openb day and the sacct fixture go through the
Workload page's preview into Plan & compare, where as-run stands beside fifo and the allocator.

Screenshots (1400 px wide) land in tests/browser/artifacts/ for review.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core.formats.history import ImportWindow, import_history
from core.plan import metrics
from core.planners import solve
from tests.browser.test_app_browser import (  # noqa: F401  (browser, page: fixtures)
    CHROMIUM,
    browser,
    go,
    no_exception,
    page,
    screenshot,
    settle,
    start_app,
)
from tests.paths import ROOT, TRACES_DIR

SACCT = ROOT / "tests" / "formats" / "fixtures" / "sacct_quirks.txt"
TRACES = TRACES_DIR if TRACES_DIR.is_dir() else Path("/work/shared/traces")
OPENB = TRACES / "openb_pod_list_default.csv"
OPENB_DAY = 24 * 140  # hours from the trace start: a busy day with four weeks before it
EXPANDER = "Import a scheduler history"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not Path(CHROMIUM).exists(),
        reason=f"Debian chromium is not installed at {CHROMIUM} (apt-get install chromium)",
    ),
]


@pytest.fixture(scope="module")
def app_url(tmp_path_factory):
    workspace = tmp_path_factory.mktemp("workspace") / "workspace.sqlite"
    with start_app({**os.environ, "GPUPLAN_WORKSPACE": str(workspace)}) as url:
        yield url


def open_import(tab, app_url: str, file: Path):
    tab.goto(app_url)
    tab.get_by_role("heading", name="Workload", level=1).wait_for()
    settle(tab)
    expander = tab.get_by_test_id("stExpander").filter(has_text=EXPANDER)
    expander.get_by_text(EXPANDER).first.click()
    expander.get_by_test_id("stFileUploaderDropzoneInput").first.set_input_files(str(file))
    tab.get_by_role("button", name="Load this window").wait_for(timeout=60000)
    settle(tab)
    no_exception(tab)
    return expander


def set_number(expander, label: str, value: float) -> None:
    box = expander.get_by_role("spinbutton", name=label)
    box.fill(f"{value:g}")
    box.press("Enter")


def load_and_compare(tab, name: str) -> str:
    """Load the previewed window, open Plan & compare; the as-run card's text."""
    tab.get_by_role("button", name="Load this window").click()
    settle(tab)
    tab.get_by_text("This window is the active workload").wait_for(timeout=30000)
    no_exception(tab)
    go(tab, "Plan & compare", "Plan & compare")
    tab.locator(".js-plotly-plot").first.wait_for(timeout=60000)
    settle(tab)
    no_exception(tab)
    card = tab.locator(".st-key-plan_as_run")
    card.wait_for(timeout=30000)
    screenshot(tab, f"{name}_plan")
    return card.inner_text()


@pytest.mark.skipif(not OPENB.is_file(), reason=f"the real openb pod list is not at {OPENB}")
def test_an_openb_day_imports_and_shows_as_run_beside_the_planners(app_url, page):  # noqa: F811
    expander = open_import(page, app_url, OPENB)
    set_number(expander, "Start (hours from the trace start)", OPENB_DAY)
    settle(page)
    expected = import_history(OPENB, window=ImportWindow(start=OPENB_DAY))
    w, b = expected.summary["window"], expected.summary["batch"]
    text = expander.inner_text()
    assert f"Window {w['start']} to {w['end']}" in text
    cards = expander.get_by_test_id("stMetric")
    assert cards.filter(has_text="Cluster GPUs").inner_text().endswith(f"{w['gpus']:,}")
    assert cards.filter(has_text="Batch jobs").inner_text().endswith(f"{b['jobs']:,}")
    expander.locator(".js-plotly-plot").first.wait_for(timeout=30000)
    screenshot(page, "history_openb_preview")

    card = load_and_compare(page, "history_openb")
    as_run = expected.as_run
    assert "As run (your scheduler)" in card
    assert f"{as_run['utilization']:.1%}" in card and "not a legal grid" in card
    s = expected.scenario
    for planner in ("fifo", "allocator"):
        m = metrics(s, solve(s, planner))
        assert page.get_by_text(f"{m['utilization']:.1%}", exact=True).count() >= 1


def test_the_sacct_fixture_imports_and_shows_as_run(app_url, page):  # noqa: F811
    expander = open_import(page, app_url, SACCT)
    text = expander.inner_text()
    assert "Slurm sacct" in text and "sacct_quirks.txt" in text
    screenshot(page, "history_sacct_preview")
    card = load_and_compare(page, "history_sacct")
    expected = import_history(SACCT, window=ImportWindow(start="2026-08-17T00:00:00"))
    as_run = expected.as_run
    assert f"{as_run['completed_jobs']}/{as_run['batch_jobs']}" in card
    assert "Over what really ran" in card and "Allocator (fast)" in card


SERVING = TRACES / "alibaba_v2025_dlrm_even_apps.csv"
SNAPSHOT = TRACES / "openb_pod_list_multigpu20.csv"


@pytest.mark.skipif(not SERVING.is_file(), reason=f"the real serving trace is not at {SERVING}")
def test_the_serving_trace_previews_every_row_and_as_run_coverage(app_url, page):  # noqa: F811
    expander = open_import(page, app_url, SERVING)
    expected = import_history(SERVING)
    s, a = expected.summary, expected.as_run
    text = expander.inner_text()
    assert "Serving instances (Alibaba 2025 trace)" in text
    rows = s["rows"]
    assert f"File rows: {rows['total']:,} = {rows['used']:,} used" in text
    assert f"real-time coverage {a['rt_coverage']:.1%}" in text
    cards = expander.get_by_test_id("stMetric")
    assert cards.filter(has_text="Real-time groups").inner_text().endswith(str(len(s["realtime"])))
    expander.locator(".js-plotly-plot").first.wait_for(timeout=30000)
    screenshot(page, "history_serving_preview")
    card = load_and_compare(page, "history_serving")
    assert f"{a['rt_coverage']:.1%}" in card


@pytest.mark.skipif(not SNAPSHOT.is_file(), reason=f"the real pod snapshot is not at {SNAPSHOT}")
def test_a_pod_list_without_times_previews_as_a_snapshot(app_url, page):  # noqa: F811
    expander = open_import(page, app_url, SNAPSHOT)
    text = expander.inner_text()
    assert "Read as a packing snapshot (the file has no times)" in text
    assert "File rows: 8,324 = 7,236 used + 1,088 no GPUs" in text
    screenshot(page, "history_snapshot_preview")


def test_a_loaded_snapshot_is_planned_without_an_as_run_card(app_url, page, tmp_path):  # noqa: F811
    # (a hand-made snapshot: planning the real one's 7,236 pods three times is slow, not more)
    snapshot = tmp_path / "snapshot.csv"
    snapshot.write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
        "p0,8000,16384,1,1000\np1,8000,16384,2,1000\np2,16000,32768,3,1000\n"
    )
    open_import(page, app_url, snapshot)
    page.get_by_role("button", name="Load this window").click()
    settle(page)
    page.get_by_text("This window is the active workload").wait_for(timeout=30000)
    go(page, "Plan & compare", "Plan & compare")
    page.locator(".js-plotly-plot").first.wait_for(timeout=60000)
    settle(page)
    no_exception(page)
    assert page.get_by_text("Allocator (fast)").count() >= 1
    assert page.locator(".st-key-plan_as_run").count() == 0  # nothing ran: no as-run card
    screenshot(page, "history_snapshot_plan")
