"""The Capacity page on a cluster of node groups (SPEC section 8) in headless Chromium: the
mixed-nodes scenario, a small mix sizing, the answer, the cost-against-coverage chart and the
table of every mix tried.

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


def test_capacity_sizes_a_mix_of_nodes_and_names_the_cheapest(app_url, page):  # noqa: F811
    from playwright.sync_api import expect

    page.goto(app_url)
    page.get_by_role("heading", name="Workload", level=1).wait_for()
    settle(page)
    choose(page, "Built-in scenario", "mixed-nodes")
    go(page, "Capacity", "Capacity")
    no_exception(page)
    # one input per node group instead of the GPU-count list; 0..2x today's counts by default
    assert page.get_by_role("textbox", name="GPUs (comma list)").count() == 0
    h100 = page.get_by_role("textbox", name="h100x8: nodes to try")
    expect(h100).to_have_value("0,1,2")
    a10 = page.get_by_role("textbox", name="a10x4: nodes to try")
    expect(a10).to_have_value("0,1,2,3,4")
    h100.fill("1")
    h100.press("Enter")
    settle(page)
    a10.fill("0,1,2")
    a10.press("Enter")
    settle(page)
    page.get_by_role("button", name="Size the mix").click()
    settle(page)
    no_exception(page)
    # by hand: 1 H100 node alone (24/h) cannot also serve chat (held to A10s); one A10 node
    # more (27.20/h) is the cheapest mix that can
    answer = page.get_by_test_id("stAlertContentSuccess")
    expect(answer).to_contain_text("Buy 1 x 8 H100 (h100x8) + 1 x 4 A10 (a10x4) = 12 GPUs")
    expect(answer).to_contain_text("27.20 per hour")
    engine = page.get_by_test_id("stCaptionContainer").filter(has_text="runs on")
    expect(engine).to_contain_text("3 mixes x 2 planners = 6 runs on")
    chart = page.locator(".st-key-cap_mix_chart .js-plotly-plot")
    chart.wait_for(timeout=60000)
    expect(chart).to_contain_text("Cost per hour against real-time coverage")
    expect(chart).to_contain_text("cheapest: 1 x h100x8 + 1 x a10x4")
    assert chart.locator(".scatterlayer .point").count() >= 6  # 3 mixes x 2 planners, stars
    table = page.locator(".st-key-cap_mix_rows").get_by_test_id("stDataFrame")
    table.locator("td").first.wait_for(state="attached")
    cells = " | ".join(table.locator("td").all_text_contents())
    assert "1 x h100x8 + 2 x a10x4" in cells and "Allocator (fast)" in cells
    page.get_by_test_id("stDownloadButton").filter(has_text="Download sweep.csv").wait_for()
    screenshot(page, "capacity-mix")

    # no A10 node: chat (held to A10s) has nowhere to run, so no mix tried meets the targets
    a10.fill("0")
    a10.press("Enter")
    settle(page)
    page.get_by_role("button", name="Size the mix").click()
    settle(page)
    no_exception(page)
    expect(page.get_by_test_id("stAlertContentError")).to_contain_text(
        "No mix tried meets the targets"
    )
    expect(page.get_by_test_id("stAlertContentWarning").first).to_contain_text(
        "No mix tried can hold the workload"
    )
    screenshot(page, "capacity-mix-none")
