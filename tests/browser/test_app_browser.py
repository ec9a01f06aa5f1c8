"""The real app in headless Chromium: every page, a comparison, the grid export, a bad upload.

Starts `streamlit run app.py` on a free localhost port and stops it afterwards. Needs Debian's
`chromium` at /usr/bin/chromium (the README's test command installs it); skipped without it.
Full-page screenshots (1400 px wide) land in tests/browser/artifacts/ for review.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.paths import ROOT, SCENARIOS_DIR

ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
PAGES = [  # (url path, sidebar link, title): each URL is the page's file name in pages/
    ("", "Workload", "Workload"),
    ("plan_compare", "Plan & compare", "Plan & compare"),
    ("demand_forecast", "Demand forecast", "Demand forecast"),
    ("horizon_risk", "Horizon & risk", "Horizon & risk"),
    ("capacity", "Capacity", "Capacity"),
    ("benchmarks", "Benchmarks", "Benchmarks"),
    ("saved", "Saved & compare", "Saved workloads & runs"),
]
TITLES = [link for _, link, _ in PAGES]  # what the sidebar lists
CHART_PAGES = ("plan_compare", "demand_forecast", "horizon_risk", "benchmarks")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not Path(CHROMIUM).exists(),
        reason=f"Debian chromium is not installed at {CHROMIUM} (apt-get install chromium)",
    ),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def start_app(env: dict[str, str] | None = None):
    """`streamlit run app.py` on a free localhost port; yields its URL, stops it afterwards."""
    port = _free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            "app.py",
            "--server.port",
            str(port),
            "--server.address",
            "127.0.0.1",
            "--server.headless",
            "true",
            "--browser.gatherUsageStats",
            "false",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**(env if env is not None else os.environ), "PYTHONUNBUFFERED": "1"},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                output = process.stdout.read().decode(errors="replace") if process.stdout else ""
                pytest.fail(f"streamlit did not start on port {port}:\n{output[-2000:]}")
            time.sleep(0.3)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def app_url(tmp_path_factory):
    workspace = tmp_path_factory.mktemp("workspace") / "workspace.sqlite"
    with start_app({**os.environ, "GPUPLAN_WORKSPACE": str(workspace)}) as url:
        yield url


@pytest.fixture
def fresh_url(tmp_path):
    """A server no session has used yet: Streamlit still reads pages/ as folder navigation."""
    with start_app({**os.environ, "GPUPLAN_WORKSPACE": str(tmp_path / "ws.sqlite")}) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 900}, accept_downloads=True)
    page = context.new_page()
    yield page
    context.close()


def settle(page, timeout: float = 120) -> None:
    """Wait until the script run is over (the app marks its state on the root element)."""
    page.wait_for_timeout(300)
    page.wait_for_selector(
        '[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=timeout * 1000
    )
    page.wait_for_timeout(300)


def go(page, link: str, title: str) -> None:
    """Navigate inside the session (the sidebar), so the session state is kept."""
    page.get_by_test_id("stSidebar").get_by_role("link", name=link).click()
    page.get_by_role("heading", name=title, level=1).wait_for()
    settle(page)


def choose(page, label: str, option: str) -> None:
    """Pick an option of an st.selectbox: type into its combobox, then click the match."""
    box = page.get_by_test_id("stSelectbox").filter(has_text=label).locator("input")
    box.click()
    box.press_sequentially(option, delay=20)
    page.get_by_role("option").filter(has_text=option).first.click()
    settle(page)


def toggle_planner(page, label: str) -> None:
    """Turn a planner on or off: the pages list them as pills (toggle buttons) under "Planners"."""
    pills = page.get_by_test_id("stButtonGroup").filter(has_text="Planners")
    pills.get_by_role("button", name=label, exact=True).click()
    settle(page)


def no_exception(page) -> None:
    shown = page.get_by_test_id("stException")
    assert shown.count() == 0, shown.first.inner_text()


def screenshot(page, name: str) -> None:
    """A full-page picture: the app scrolls inside its main block, so grow the viewport."""
    ARTIFACTS.mkdir(exist_ok=True)
    height = page.evaluate("() => document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
    page.set_viewport_size({"width": 1400, "height": min(int(height) + 60, 12000)})
    page.wait_for_timeout(800)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
    page.set_viewport_size({"width": 1400, "height": 900})


def sidebar_pages(page) -> list[str]:
    """The page titles the sidebar lists, in order (the text of every link in it)."""
    sidebar = page.get_by_test_id("stSidebar")
    links = sidebar.get_by_role("link")
    # the menu is drawn by the router's run, which may still be streaming in when the heading
    # shows (seen on a loaded machine): wait for its last link before reading them all
    links.nth(len(TITLES) - 1).wait_for(timeout=60_000)
    return [link.get_by_test_id("stMarkdownContainer").inner_text().strip() for link in links.all()]


@pytest.mark.parametrize(
    ("first_path", "title"),
    [("", "Workload"), ("plan_compare", "Plan & compare"), ("benchmarks", "Benchmarks")],
    ids=["root", "deep-link-plan", "deep-link-benchmarks"],
)
def test_first_open_of_a_fresh_server_lists_exactly_the_app_pages(
    fresh_url, browser, first_path, title
):
    # The first request of a fresh server, when Streamlit still treats pages/ as its older folder
    # navigation (every .py file a page): the sidebar still lists the router's pages and
    # nothing else, and a deep link opens its page without a "Page not found" dialog.
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    try:
        page = context.new_page()
        page.goto(f"{fresh_url}/{first_path}")
        # a fresh server's first run imports everything: give it longer than a later page
        page.get_by_role("heading", name=title, level=1).wait_for(timeout=90_000)
        settle(page)
        assert sidebar_pages(page) == TITLES
        assert page.get_by_test_id("stSidebarNav").count() == 0  # no file list of pages/
        sidebar_text = page.get_by_test_id("stSidebar").inner_text()
        for stem in ("common", "plan compare", "horizon risk", "app"):
            assert stem not in sidebar_text.lower().split("\n")
        assert page.get_by_role("dialog").count() == 0
        assert page.url.rstrip("/").endswith(first_path)
        no_exception(page)
        # The layout is the router's (wide): the main block is wider than Streamlit's 736 px.
        width = page.evaluate(
            "() => document.querySelector('[data-testid=\"stMainBlockContainer\"]')"
            ".getBoundingClientRect().width"
        )
        assert width > 800
        # And a second session on the same server sees the same pages.
        other = context.new_page()
        other.goto(fresh_url)
        other.get_by_role("heading", name="Workload", level=1).wait_for()
        settle(other)
        assert sidebar_pages(other) == TITLES
    finally:
        context.close()


def test_every_page_opens_with_its_explanation_and_charts(app_url, page):
    page.goto(app_url)
    page.get_by_role("heading", name="Workload", level=1).wait_for()
    settle(page)
    for url_path, link, title in PAGES:
        if url_path:
            go(page, link, title)
        assert page.url.rstrip("/").endswith(url_path)
        no_exception(page)
        assert page.get_by_test_id("stCaptionContainer").first.inner_text().strip()
        if url_path in CHART_PAGES:
            page.locator(".js-plotly-plot").first.wait_for(timeout=30000)  # drawn after the run
        if url_path == "demand_forecast":  # which member won, its backtest, its coverage
            said = (
                page.get_by_test_id("stMarkdownContainer")
                .filter(has_text="How well it forecasts this history")
                .first.inner_text()
            )
            assert "most weight on" in said and "x seasonal naive's" in said
            assert "interval held" in said
        screenshot(page, url_path or "workload")


def test_compare_planners_and_check_the_downloaded_grid(app_url, page, tmp_path):
    page.goto(app_url)
    page.get_by_role("heading", name="Workload", level=1).wait_for()
    settle(page)
    with page.expect_download() as scenario_download:
        page.get_by_test_id("stDownloadButton").filter(has_text=".json").first.click()
    scenario_file = tmp_path / "scenario.json"
    scenario_download.value.save_as(scenario_file)

    go(page, "Plan & compare", "Plan & compare")
    page.get_by_role("button", name="Run planners").click()
    settle(page)
    no_exception(page)
    for label in ("FIFO (peak reservation)", "Backfill (conservative)", "Allocator (fast)"):
        assert page.get_by_text(label, exact=True).count() >= 1
    # Three grids (one heatmap each), the utilization-vs-value chart and the real-time chart.
    page.locator(".js-plotly-plot .heatmaplayer").nth(2).wait_for(timeout=30000)
    assert page.locator(".js-plotly-plot").count() >= 5
    utilization = page.get_by_test_id("stMetric").filter(has_text="Utilization")
    assert utilization.count() == 3 and "%" in utilization.first.inner_text()

    choose(page, "Plan to export", "Allocator (fast)")
    settle(page)
    with page.expect_download() as grid_download:
        page.get_by_test_id("stDownloadButton").filter(has_text="grid.csv").click()
    grid_file = tmp_path / "grid.csv"
    grid_download.value.save_as(grid_file)
    assert grid_file.read_text().startswith("step,gpu,job_id")

    gpuplan = Path(sys.executable).with_name("gpuplan")  # the installed console script
    command = [str(gpuplan)] if gpuplan.exists() else [sys.executable, "-m", "core"]
    checked = subprocess.run(
        [*command, "check", str(scenario_file), str(grid_file)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.startswith("legal:")


def test_the_thorough_allocator_runs_on_request_beside_the_fast_one(app_url, page):
    page.goto(f"{app_url}/plan_compare")
    page.get_by_role("heading", name="Plan & compare", level=1).wait_for()
    settle(page)
    toggle_planner(page, "Allocator (thorough)")
    no_exception(page)
    # a search: it waits for the button rather than running on every change
    assert page.get_by_text("Allocator (thorough) runs when you press").count() == 1
    page.get_by_role("button", name="Run planners").click()
    settle(page)
    no_exception(page)
    utilization = page.get_by_test_id("stMetric").filter(has_text="Utilization")
    assert utilization.count() == 4  # FIFO, backfill, the fast allocator and the thorough one
    summary = page.get_by_test_id("stCaptionContainer").filter(has_text="search finished")
    assert summary.count() == 1, "the thorough card says how its search ended"
    page.locator(".js-plotly-plot .heatmaplayer").nth(3).wait_for(timeout=30000)
    screenshot(page, "plan_compare_thorough")


def test_an_uploaded_csv_pair_becomes_the_named_active_workload(app_url, page, tmp_path):
    from playwright.sync_api import expect

    from core.formats import load_scenario, scenario_from_json, scenario_to_tables

    page.goto(app_url)
    page.get_by_role("heading", name="Workload", level=1).wait_for()
    settle(page)
    example = load_scenario(SCENARIOS_DIR / "example.json")
    jobs_csv, demand_csv = scenario_to_tables(example)
    files = [tmp_path / "team-a_jobs.csv", tmp_path / "team-a_demand.csv"]
    files[0].write_text(jobs_csv)
    files[1].write_text(demand_csv)
    page.get_by_test_id("stFileUploaderDropzoneInput").set_input_files([str(f) for f in files])
    success = page.get_by_test_id("stAlertContentSuccess")
    success.wait_for(timeout=30000)
    settle(page)
    no_exception(page)
    assert f"Loaded {len(example.jobs)} jobs" in success.inner_text()
    assert "team-a_jobs.csv" in success.inner_text()
    # The sidebar, the heading and the built-in selector follow the upload at once.
    expect(page.get_by_test_id("stSidebar")).to_contain_text("Active workload: team-a")
    assert page.get_by_role("heading", name="team-a", level=3).count() == 1
    selector = page.get_by_test_id("stSelectbox").filter(has_text="Built-in scenario")
    shown = selector.locator("input").get_attribute("placeholder") or selector.inner_text()
    assert "team-a: pick a built-in" in shown
    assert page.get_by_test_id("stAlertContentError").count() == 0
    # The JSON download is named after the pair, and it is the uploaded workload.
    with page.expect_download() as download:
        page.get_by_test_id("stDownloadButton").filter(has_text="team-a.json").click()
    assert download.value.suggested_filename == "team-a.json"
    saved = tmp_path / "team-a.json"
    download.value.save_as(saved)
    loaded = scenario_from_json(saved.read_text(), saved.name)
    assert loaded.name == "team-a" and loaded.jobs == example.jobs
    screenshot(page, "workload-uploaded")


def test_a_broken_upload_shows_an_error_and_keeps_the_scenario(app_url, page, tmp_path):
    page.goto(app_url)
    page.get_by_role("heading", name="Workload", level=1).wait_for()
    settle(page)
    before = active_name(page)
    broken = tmp_path / "broken.json"
    broken.write_text('{"cluster": {"gpus": 8}, "jobs": [{"id": "a", "type": "training"')
    page.get_by_test_id("stFileUploaderDropzoneInput").set_input_files(str(broken))
    error = page.get_by_test_id("stAlertContentError")
    error.wait_for(timeout=30000)
    settle(page)
    assert "broken.json" in error.inner_text() and "not valid JSON" in error.inner_text()
    assert active_name(page) == before
    no_exception(page)


def active_name(page) -> str:
    """The scenario name the sidebar shows (`Active workload: NAME`)."""
    line = (
        page.get_by_test_id("stSidebar")
        .get_by_test_id("stMarkdownContainer")
        .filter(has_text="Active workload")
    )
    return line.first.inner_text().split(":", 1)[1].strip()


def test_two_sessions_never_share_a_scenario(app_url, browser):
    from playwright.sync_api import expect

    first, second = (browser.new_context(viewport={"width": 1400, "height": 900}) for _ in range(2))
    try:
        a, b = first.new_page(), second.new_page()
        for p in (a, b):
            p.goto(app_url)
            p.get_by_role("heading", name="Workload", level=1).wait_for()
            settle(p)
        default = active_name(b)
        assert active_name(a) == default
        other = next(p.stem for p in sorted(SCENARIOS_DIR.glob("*.json")) if p.stem != default)
        choose(a, "Built-in scenario", other)
        expect(a.get_by_test_id("stSidebar")).to_contain_text(f"Active workload: {other}")
        b.reload()
        b.get_by_role("heading", name="Workload", level=1).wait_for()
        settle(b)
        assert active_name(b) == default
        assert active_name(a) == other
    finally:
        first.close()
        second.close()


def test_divergence_scenario_explains_utilization_against_value(app_url, page):
    from playwright.sync_api import expect

    page.goto(app_url)
    page.get_by_role("heading", name="Workload", level=1).wait_for()
    settle(page)
    choose(page, "Built-in scenario", "scale-64-divergence")
    expect(page.get_by_test_id("stSidebar")).to_contain_text("Active workload: scale-64-divergence")
    go(page, "Plan & compare", "Plan & compare")
    page.get_by_role("button", name="Run planners").click()
    settle(page)
    no_exception(page)
    why = page.locator(".st-key-plan_divergence")
    expect(why).to_contain_text("Allocator (fast).", timeout=30000)
    text = why.inner_text()
    assert "Same utilization (allocator 44.6%, FIFO 44.6%)" in text
    assert "the same completed jobs (27 of 30), +19.8% value" in text
    for job in ("batch-27", "training-28", "batch-29", "sweep-21", "sweep-22", "sweep-23"):
        assert f"{job} (priority" in text, job
    assert "Backfill (conservative)." in text  # every planner run beside FIFO is explained
    page.locator(".js-plotly-plot").first.wait_for(timeout=30000)
    screenshot(page, "plan-divergence")

    go(page, "Benchmarks", "Benchmarks")  # the scenario beside the published figures
    page.get_by_test_id("stDataFrame").first.wait_for(timeout=120000)
    no_exception(page)
    expect(
        page.get_by_test_id("stCaptionContainer").filter(has_text="reproduces the scale")
    ).to_be_visible()
    screenshot(page, "benchmarks-divergence")


def test_capacity_runs_a_small_sweep_and_draws_the_chart(app_url, page):
    page.goto(f"{app_url}/capacity")
    page.get_by_role("heading", name="Capacity", level=1).wait_for()
    settle(page)
    no_exception(page)
    gpus = page.get_by_role("textbox", name="GPUs (comma list)")
    gpus.fill("8,16,24,32")
    gpus.press("Enter")
    settle(page)
    demand = page.get_by_role("textbox", name="Demand scales")
    demand.fill("1,1.5")
    demand.press("Enter")
    settle(page)
    page.get_by_role("button", name="Run sweep").click()
    settle(page)
    no_exception(page)
    chart = page.locator(".js-plotly-plot").first
    chart.wait_for(timeout=60000)
    text = chart.inner_text()
    assert "demand x1" in text and "demand x1.5" in text  # one panel column per demand scale
    assert "real-time coverage" in text and "completed jobs" in text
    engine = page.get_by_test_id("stCaptionContainer").filter(has_text="runs on")
    assert "16 runs on 2 worker(s)" in engine.inner_text()  # 8 points x 2 planners
    page.get_by_test_id("stDownloadButton").filter(has_text="Download sweep.csv").wait_for()
    screenshot(page, "capacity")

    # Cancel: add the MIP planner (seconds a point), start, cancel; the last sweep stays.
    toggle_planner(page, "Full (Pyomo + HiGHS)")
    page.get_by_role("button", name="Run sweep").click()
    page.get_by_role("button", name="Cancel").click(timeout=60000)
    settle(page)
    no_exception(page)
    assert page.get_by_text("Sweep cancelled").count() == 1
    assert "16 runs on" in engine.inner_text()  # the finished sweep, not the cancelled one
