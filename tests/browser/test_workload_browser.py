"""The Workload page in headless Chromium: typing into the editor's grid, its pending edits,
the cluster controls and the uploader, as a planner meets them.

Screenshots (1400 px wide) land in tests/browser/artifacts/ for review.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser.test_app_browser import (  # noqa: F401  (app_url, browser, page: fixtures)
    CHROMIUM,
    app_url,
    browser,
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


def open_workload(tab, url: str) -> None:
    tab.goto(url)
    tab.get_by_role("heading", name="Workload", level=1).wait_for()
    settle(tab)


def jobs_editor(tab):
    return tab.get_by_test_id("stDataFrame").first


def type_into_cell(tab, column: str, row: int, text: str) -> None:
    """Type `text` into the jobs editor's cell (column label, 0-based row) as a user does:
    select it with the keyboard, open its editor with Enter, replace the value, Enter.

    The grid is drawn on a canvas; its hidden accessible table says which cell is selected.
    """
    from playwright.sync_api import expect

    editor = jobs_editor(tab)
    editor.scroll_into_view_if_needed()
    header = editor.locator("th[role=columnheader]")
    header.first.wait_for(state="attached")  # the accessible table fills in after the canvas
    headers = [h.strip() for h in header.all_text_contents()]
    target = headers.index(column) + 1  # aria column index of the cell
    box = editor.bounding_box()
    tab.mouse.click(box["x"] + 100, box["y"] + 35 + 17)  # row 1's id cell (header 35 px)
    selected = editor.locator("td[aria-selected=true]").first
    expect(selected).to_have_attribute("id", "glide-cell-2-0")
    start = 2
    for _ in range(target - start):
        tab.keyboard.press("ArrowRight")
    for _ in range(row):
        tab.keyboard.press("ArrowDown")
    expect(selected).to_have_attribute("id", f"glide-cell-{target}-{row}")
    tab.keyboard.press("Enter")
    overlay = tab.locator(".gdg-input")  # the cell's editor, drawn over the grid
    overlay.wait_for()
    overlay.press("Control+A")
    overlay.press_sequentially(text, delay=30)  # keystrokes: the grid filters them
    expect(overlay).to_have_value(text)
    overlay.press("Enter")
    settle(tab)


def issues_text(tab) -> str:
    """The cells of the issues table under the editors (the page's last data frame; drawn on a
    canvas, read from its hidden accessible table)."""
    if tab.get_by_test_id("stAlertContentError").count() == 0:
        return ""
    table = tab.get_by_test_id("stDataFrame").last
    return " | ".join(table.locator("td").all_text_contents())


def test_a_typed_minus_sign_reaches_validation(app_url, page):  # noqa: F811
    open_workload(page, app_url)
    type_into_cell(page, "gpu_hours", 3, "-5")  # row 4, train-0
    no_exception(page)
    assert jobs_editor(page).locator("#glide-cell-8-3").inner_text() == "-5"
    error = page.get_by_test_id("stAlertContentError")
    assert "not active" in error.first.inner_text()
    assert page.get_by_text("Edits are valid and active.").count() == 0
    text = issues_text(page)
    assert "train-0" in text and "gpu_hours must be > 0, got -5.0" in text
    screenshot(page, "workload-editor-negative")


def test_pending_edits_survive_navigation_until_discarded(app_url, page):  # noqa: F811
    open_workload(page, app_url)
    type_into_cell(page, "priority", 4, "7")  # train-1: a valid edit, active at once ...
    type_into_cell(page, "gpus_min", 2, "3")  # ... then dpo-13b's: not a power of two
    assert "gpus_min 3 is not a power of two" in issues_text(page)

    go(page, "Plan & compare", "Plan & compare")
    no_exception(page)
    go(page, "Workload", "Workload")
    no_exception(page)
    editor = jobs_editor(page)
    assert editor.locator("#glide-cell-6-2").inner_text() == "3"  # both edits are back
    assert editor.locator("#glide-cell-4-4").inner_text() == "7"
    text = issues_text(page)
    assert "dpo-13b" in text and "gpus_min 3 is not a power of two" in text
    assert "not active" in page.get_by_test_id("stAlertContentError").first.inner_text()
    screenshot(page, "workload-pending-edits-after-navigation")

    page.get_by_role("button", name="Discard edits").click()
    settle(page)
    no_exception(page)
    assert page.get_by_test_id("stAlertContentError").count() == 0
    assert jobs_editor(page).locator("#glide-cell-6-2").inner_text() == "4"
    assert jobs_editor(page).locator("#glide-cell-4-4").inner_text() == "7"  # was active


def cluster_expander(tab):
    return tab.get_by_test_id("stExpander").filter(has_text="Cluster and horizon")


def set_number(tab, label: str, value: str) -> None:
    box = tab.get_by_role("spinbutton", name=label)
    box.fill(value)
    box.press("Enter")
    settle(tab)


def test_the_cluster_expander_stays_open_through_several_edits(app_url, page):  # noqa: F811
    from playwright.sync_api import expect

    open_workload(page, app_url)
    expander = cluster_expander(page)
    expander.locator("summary").click()
    gpus = page.get_by_role("spinbutton", name="GPUs")
    expect(gpus).to_be_visible()
    set_number(page, "GPUs", "16")
    expect(gpus).to_be_visible()  # still open: the next field is one click away
    set_number(page, "Horizon (steps)", "48")
    expect(gpus).to_be_visible()
    no_exception(page)
    sidebar = page.get_by_test_id("stSidebar")
    expect(sidebar).to_contain_text("16 GPUs x 48 steps of 60 min")
    expect(page.get_by_role("spinbutton", name="GPUs")).to_have_value("16")
    screenshot(page, "workload-cluster-open-after-edits")


def test_a_step_change_says_what_it_keeps(app_url, page):  # noqa: F811
    from playwright.sync_api import expect

    open_workload(page, app_url)
    cluster_expander(page).locator("summary").click()
    set_number(page, "Step (minutes)", "7")
    no_exception(page)
    note = page.get_by_test_id("stAlert").filter(has_text="Step changed from 60 to 7 min")
    expect(note).to_be_visible()
    assert "2.7 h instead of 22.8 h" in note.inner_text()
    expect(page.get_by_text("No exact conversion keeps the hours")).to_be_visible()
    screenshot(page, "workload-step-change-note")

    set_number(page, "Step (minutes)", "30")  # a whole fraction of the 60 min the steps meant
    page.get_by_role("button", name="Keep the hours instead: 48 steps of 30 min").click()
    settle(page)
    no_exception(page)
    expect(page.get_by_test_id("stSidebar")).to_contain_text("8 GPUs x 48 steps of 30 min")
    expect(page.get_by_text("Converted to keep the hours")).to_be_visible()
    expect(page.get_by_role("spinbutton", name="Horizon (steps)")).to_have_value("48")
    screenshot(page, "workload-step-change-hours-kept")


def _pair_files(folder, prefix: str, *, drop: str | None = None) -> list[str]:
    """The example scenario as a jobs/demand CSV pair named `prefix`_jobs.csv and so on,
    without the column `drop` when given."""
    from core.formats import load_scenario, scenario_to_tables
    from tests.paths import SCENARIOS_DIR

    jobs_csv, demand_csv = scenario_to_tables(load_scenario(SCENARIOS_DIR / "example.json"))
    if drop is not None:
        lines = jobs_csv.splitlines()
        k = lines[0].split(",").index(drop)
        jobs_csv = "\n".join(
            ",".join(c for i, c in enumerate(line.split(",")) if i != k) for line in lines
        )
    files = [folder / f"{prefix}_jobs.csv", folder / f"{prefix}_demand.csv"]
    files[0].write_text(jobs_csv)
    files[1].write_text(demand_csv)
    return [str(f) for f in files]


def test_a_second_upload_is_read_alone(app_url, page, tmp_path):  # noqa: F811
    from playwright.sync_api import expect

    open_workload(page, app_url)
    drop_zone = page.get_by_test_id("stFileUploaderDropzoneInput")
    drop_zone.set_input_files(_pair_files(tmp_path, "team-a"))
    settle(page)
    expect(page.get_by_test_id("stSidebar")).to_contain_text("Active workload: team-a")
    expect(page.get_by_test_id("stAlertContentSuccess")).to_contain_text("Loaded")
    assert page.get_by_test_id("stFileChip").count() == 0  # the uploader is empty again

    page.get_by_test_id("stFileUploaderDropzoneInput").set_input_files(
        _pair_files(tmp_path, "nogh", drop="gpu_hours")
    )
    settle(page)
    no_exception(page)
    error = page.get_by_test_id("stAlertContentError")
    expect(error).to_contain_text("nogh_jobs.csv: missing column gpu_hours")
    assert "team-a" not in error.inner_text() and "together" not in error.inner_text()
    expect(page.get_by_test_id("stSidebar")).to_contain_text("Active workload: team-a")
    screenshot(page, "workload-second-upload-error")


def test_an_empty_csv_says_the_file_is_empty(app_url, page, tmp_path):  # noqa: F811
    from playwright.sync_api import expect

    open_workload(page, app_url)
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    page.get_by_test_id("stFileUploaderDropzoneInput").set_input_files(str(empty))
    settle(page)
    no_exception(page)
    expect(page.get_by_test_id("stAlertContentError")).to_contain_text("empty.csv: file is empty")
    assert page.get_by_text("add the other file of the pair").count() == 0
    screenshot(page, "workload-empty-csv")


def test_the_uploaders_say_the_limit_their_labels_say(app_url, page, tmp_path):  # noqa: F811
    from playwright.sync_api import expect

    from core.formats import MAX_HISTORY_UPLOAD_MB, MAX_UPLOAD_MB

    open_workload(page, app_url)
    workload_uploader = page.get_by_test_id("stFileUploader").first
    expect(workload_uploader).to_contain_text(f"up to {MAX_UPLOAD_MB} MB each")
    expect(workload_uploader).to_contain_text(f"{MAX_UPLOAD_MB}MB per file")  # Streamlit's hint
    page.get_by_test_id("stExpander").filter(has_text="Import a scheduler history").locator(
        "summary"
    ).click()
    settle(page)
    history = page.get_by_test_id("stFileUploader").filter(has_text="History file")
    expect(history).to_contain_text(f"up to {MAX_HISTORY_UPLOAD_MB} MB")
    expect(history).to_contain_text(f"{MAX_HISTORY_UPLOAD_MB}MB per file")

    big = tmp_path / "big.json"  # past the limit: the uploader refuses it, nothing is read
    big.write_bytes(b" " * (MAX_UPLOAD_MB + 1) * 1024 * 1024)
    page.get_by_test_id("stFileUploaderDropzoneInput").first.set_input_files(str(big))
    settle(page)
    no_exception(page)
    chip = workload_uploader.get_by_test_id("stFileChip")
    expect(chip).to_contain_text(f"File must be {MAX_UPLOAD_MB}.0MB or smaller")
    expect(page.get_by_test_id("stSidebar")).to_contain_text("Active workload: mixed-control")
    screenshot(page, "workload-upload-limits")
