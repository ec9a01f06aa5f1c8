"""Nodes and GPU types (SPEC section 8) in headless Chromium: the mixed-nodes scenario's node
table, a bad cell's one message, the grids banded by node group and the per-type figures on
Plan & compare.

Screenshots (1400 px wide) land in tests/browser/artifacts/ for review.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser.test_app_browser import (  # noqa: F401  (app_url, browser, page: fixtures)
    CHROMIUM,
    app_url,
    browser,
    choose,
    go,
    no_exception,
    page,
    screenshot,
    settle,
)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not Path(CHROMIUM).exists(),
        reason=f"Debian chromium is not installed at {CHROMIUM} (apt-get install chromium)",
    ),
]


def node_editor(tab):
    expander = tab.get_by_test_id("stExpander").filter(has_text="Nodes and GPU types")
    return expander.get_by_test_id("stDataFrame").first


def type_into(tab, editor, column: str, row: int, text: str) -> None:
    """Type into a cell of a data editor (column label, 0-based row) with the keyboard, as a
    user does: select the first cell, move to the target, Enter, type, Enter."""
    from playwright.sync_api import expect

    editor.scroll_into_view_if_needed()
    header = editor.locator("th[role=columnheader]")
    header.first.wait_for(state="attached")
    headers = [h.strip() for h in header.all_text_contents()]
    target = headers.index(column) + 1  # aria column index of the cell
    box = editor.bounding_box()
    tab.mouse.click(box["x"] + 80, box["y"] + 35 + 17)  # a cell of row 1
    selected = editor.locator("td[aria-selected=true]").first
    expect(selected).to_have_attribute("id", "glide-cell-1-0")
    for _ in range(target - 1):
        tab.keyboard.press("ArrowRight")
    for _ in range(row):
        tab.keyboard.press("ArrowDown")
    expect(selected).to_have_attribute("id", f"glide-cell-{target}-{row}")
    tab.keyboard.press("Enter")
    overlay = tab.locator(".gdg-input")
    overlay.wait_for()
    overlay.press("Control+A")
    overlay.press_sequentially(text, delay=30)
    overlay.press("Enter")
    settle(tab)


def test_mixed_nodes_edit_plan_and_per_type_figures(app_url, page):  # noqa: F811
    from playwright.sync_api import expect

    page.goto(app_url)
    page.get_by_role("heading", name="Workload", level=1).wait_for()
    settle(page)
    choose(page, "Built-in scenario", "mixed-nodes")
    no_exception(page)
    words = "1 x 8 H100 (h100x8) + 2 x 4 A10 (a10x4) = 16 GPUs"
    expect(page.get_by_text(f"Cluster: {words}")).to_be_visible()
    editor = node_editor(page)
    cells = " | ".join(editor.locator("td").all_text_contents())
    assert "h100x8" in cells and "a10x4" in cells and "A10" in cells
    screenshot(page, "nodes-workload-mixed")

    # a speed of 0: one message naming the group and the field; the cluster stays
    type_into(page, editor, "speed", 1, "0")
    no_exception(page)
    error = page.get_by_test_id("stAlertContentError")
    expect(error.first).to_contain_text("group 'a10x4': speed must be > 0, got 0")
    assert error.count() == 1
    expect(page.get_by_text(f"Cluster: {words}")).to_be_visible()
    screenshot(page, "nodes-workload-bad-speed")
    page.get_by_role("button", name="Discard", exact=True).click()
    settle(page)
    assert page.get_by_test_id("stAlertContentError").count() == 0

    # one more A10 node: the cluster grows to 20 GPUs
    type_into(page, node_editor(page), "nodes", 1, "3")
    no_exception(page)
    expect(
        page.get_by_text("Cluster: 1 x 8 H100 (h100x8) + 3 x 4 A10 (a10x4) = 20 GPUs")
    ).to_be_visible()

    go(page, "Plan & compare", "Plan & compare")
    page.get_by_role("button", name="Run planners").click()
    settle(page)
    no_exception(page)
    page.get_by_role("heading", name="Per GPU type").wait_for()
    page.locator(".js-plotly-plot .heatmaplayer").nth(2).wait_for(timeout=30000)
    section = page.locator(".st-key-plan_gpu_types")
    table = section.get_by_test_id("stDataFrame")
    table.locator("td").first.wait_for(state="attached")
    text = " | ".join(table.locator("td").all_text_contents())
    # (the grid's accessible table holds the raw numbers: shares, GPU-hours, cost)
    for figure in ("H100 | 8 | FIFO (peak reservation)", "A10 | 12 | Allocator (fast)", "115.2"):
        assert figure in text, figure
    chart = section.locator(".js-plotly-plot")
    expect(chart).to_contain_text("Utilization by GPU type")
    expect(chart).to_contain_text("A10 · 12 GPUs")
    expect(chart).to_contain_text("50%")  # H100's utilization on every planner
    grid = (
        page.locator(".js-plotly-plot")
        .filter(has_text="FIFO (peak reservation)")
        .filter(has_text="h100x8")
    )
    expect(grid).to_contain_text("h100x8")
    expect(grid).to_contain_text("A10 · 3 x 4")
    screenshot(page, "nodes-plan-compare-mixed")
