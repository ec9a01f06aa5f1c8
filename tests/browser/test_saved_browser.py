"""The Saved page in headless Chromium: a saved workload survives a browser reload.

Runs its own app server with GPUPLAN_WORKSPACE pointing at a fresh SQLite file, so the test
never touches the user's workspace.
"""

from __future__ import annotations

import os

import pytest

from tests.browser.test_app_browser import (  # noqa: F401  (fixtures: browser, page)
    ROOT,
    browser,
    choose,
    go,
    no_exception,
    page,
    screenshot,
    settle,
    start_app,
)

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def app_url(tmp_path_factory):
    workspace = tmp_path_factory.mktemp("workspace") / "workspace.sqlite"
    with start_app({**os.environ, "GPUPLAN_WORKSPACE": str(workspace)}) as url:
        yield url


def test_a_saved_workload_survives_a_browser_reload(app_url, page):  # noqa: F811
    page.goto(app_url)
    page.get_by_role("heading", name="Workload", level=1).wait_for()
    settle(page)
    choose(page, "Built-in scenario", "example")
    go(page, "Saved & compare", "Saved workloads & runs")
    name = page.get_by_test_id("stTextInput").filter(has_text="Name").locator("input")
    name.fill("capacity review")
    name.press("Enter")
    settle(page)
    page.get_by_role("button", name="Save workload").click()
    settle(page)
    saved = page.get_by_test_id("stAlertContentSuccess")
    assert "Saved the workload as 'capacity review'" in saved.inner_text()

    page.reload()  # a new session: nothing of the old one but the workspace file
    page.get_by_role("heading", name="Saved workloads & runs", level=1).wait_for()
    settle(page)
    assert "Active workload: mixed-control" in page.get_by_test_id("stSidebar").inner_text()
    table = page.get_by_test_id("stDataFrame").first
    table.wait_for()
    picked = page.get_by_test_id("stSelectbox").filter(has_text="Saved workload")
    assert "capacity review" in picked.locator("input").input_value()
    page.get_by_role("button", name="Open as active workload").click()
    settle(page)
    sidebar = page.get_by_test_id("stSidebar").inner_text()
    # example's workload, under the name it was saved as
    assert "Active workload: capacity review" in sidebar and "saved: capacity review" in sidebar
    assert "8 GPUs x 24 steps of 60 min · 5 batch + 1 real-time jobs" in sidebar
    no_exception(page)
    screenshot(page, "saved")
