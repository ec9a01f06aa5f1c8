"""The README's picture of the app: docs/img/plan_compare.png.

Starts the app as scripts/run-app does (`streamlit run app.py`, here headless on a free localhost
port, with a throw-away workspace), opens Plan & compare in Debian's chromium through Playwright,
presses "Run planners", waits for the charts and saves a full-page screenshot.

    bash scripts/setup && .venv/bin/python scripts/screenshot.py [--out PATH]

Needs /usr/bin/chromium (`bash scripts/test` installs it); never downloads a browser.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from PIL import Image  # installed with streamlit
from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
VIEWPORT = {"width": 1400, "height": 1000}
EXTRA_PLANNERS = ["Full (Pyomo + HiGHS)"]  # shown beside FIFO, backfill and the allocator
DEFAULT_OUT = ROOT / "docs" / "img" / "plan_compare.png"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running_app(workspace: Path) -> Iterator[str]:
    """The app on a free port, as scripts/run-app starts it; yields its URL, stops it after."""
    port = free_port()
    streamlit = Path(sys.executable).parent / "streamlit"
    command = [str(streamlit)] if streamlit.exists() else [sys.executable, "-m", "streamlit"]
    env = {
        **os.environ,
        "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "1"),
        "GPUPLAN_WORKSPACE": str(workspace),  # never the user's saved scenarios
        "PYTHONUNBUFFERED": "1",
    }
    process = subprocess.Popen(
        [
            *command,
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
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                output = process.stdout.read().decode(errors="replace") if process.stdout else ""
                sys.exit(f"streamlit did not start on port {port}:\n{output[-2000:]}")
            time.sleep(0.3)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def capture(url: str, out: Path) -> None:
    """Plan & compare after "Run planners": KPI cards, charts and tables, the whole page."""
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport=VIEWPORT)
            page.goto(f"{url}/plan_compare", wait_until="networkidle", timeout=120_000)
            page.get_by_role("heading", name="Plan & compare", level=1).wait_for(timeout=120_000)
            button = page.get_by_role("button", name="Run planners")
            button.wait_for(timeout=60_000)
            for label in EXTRA_PLANNERS:  # the default pills are fifo, backfill, allocator
                pill = page.get_by_role("button", name=label, exact=True)
                if pill.get_attribute("aria-pressed") != "true":  # leave it on if it is on
                    pill.click()
                    page.wait_for_timeout(1_000)
            button.click()
            # The searching planners run now; the status box ends with "Planned: ...".
            page.get_by_text("Planned:").first.wait_for(timeout=180_000)
            page.locator(".js-plotly-plot").first.wait_for(timeout=60_000)
            page.wait_for_function(  # Streamlit is idle: no "Running..." widget left
                "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')",
                timeout=120_000,
            )
            page.wait_for_timeout(2_000)  # the plotly figures finish their first draw
            # Streamlit scrolls inside <section data-testid="stMain">, so full_page alone sees
            # one viewport: grow the viewport to the content's height first, then take it all.
            height = page.evaluate(
                "() => document.querySelector('[data-testid=\"stMain\"]').scrollHeight"
            )
            page.set_viewport_size({"width": VIEWPORT["width"], "height": int(height)})
            page.wait_for_timeout(2_000)  # the charts re-lay out at the new size
            out.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(out), full_page=True)
            # The download buttons at the foot say nothing about the plans: cut them off.
            foot = page.get_by_role("heading", name="Download a plan").bounding_box()
        finally:
            browser.close()
    shrink(out, int(foot["y"]) - 16 if foot else None)


def shrink(png: Path, height: int | None) -> None:
    """Cut the picture at `height` px and store it with a 256-colour palette (about a third of
    the bytes; a page of flat colours and text loses nothing visible)."""
    with Image.open(png) as image:
        picture = image.convert("RGB")
    if height is not None and 0 < height < picture.height:
        picture = picture.crop((0, 0, picture.width, height))
    picture.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(png, optimize=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="PNG to write")
    args = parser.parse_args(argv)
    if not Path(CHROMIUM).exists():
        sys.exit(f"Debian chromium is not installed at {CHROMIUM} (apt-get install chromium)")
    with tempfile.TemporaryDirectory() as tmp, running_app(Path(tmp) / "ws.sqlite") as url:
        capture(url, args.out.resolve())
    size_kb = args.out.stat().st_size / 1024
    print(f"wrote {args.out} ({size_kb:,.0f} KB)")


if __name__ == "__main__":
    main()
