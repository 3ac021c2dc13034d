"""The report page (``--html DIR``) in a real headless browser: the browser lane (``make test-browser``, run by
.ci/run after it installs Debian's Chromium), marked ``browser`` and left out of ``make test``.

Chromium (``/usr/bin/chromium``, or ``GRADCHECK_CHROMIUM``) driven by Playwright (the ``browser`` extra), once with
JavaScript on (the page loads with no console message, no failed or outside request) and once with it off (the page
has no script, so every part must render and fold out as it is). A fault variant's page is kept as a screenshot,
``build/test-artifacts/report-page.png`` (``GRADCHECK_TEST_ARTIFACTS`` for another folder). Without Chromium or
Playwright each test skips and says which is missing.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from conftest import ROOT, TESTS, cli
from page_check import checked

LONG_FIT = TESTS / "programs" / "exec" / "long_fit.py"
TRAINING = TESTS / "programs" / "exec" / "training_loop.py"
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]  # fmt: skip
PARTS = ("#verdict", "#s0-findings", "#s0-curves", "#s0-dataflow", "#s0-params", "#s0-suppressed", "#s0-notes")
pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]


def _chromium() -> str:
    found = os.environ.get("GRADCHECK_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.skip("Chromium is not installed (Debian: apt-get install chromium; .ci/run installs it)")
    return found


@pytest.fixture(scope="module")
def browser():
    executable = _chromium()
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="Playwright is not installed (pip install '.[browser]')"
    )
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=FLAGS, timeout=120_000)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """A training loop's fault page (exec), a scenario fault variant's page with a dataflow mark (run), and a loop
    whose two gradients accumulate for one cause (one group of two findings, folded)."""
    root = tmp_path_factory.mktemp("pages")
    made = {
        "exec": cli("exec", "--html", str(root / "exec"), str(LONG_FIT), "--iters", "2000", "--forget-zero-from", "50"),
        "run": cli("run", "chains", "--fault", "no-backward", "--passes", "2", "--quiet", "--html", str(root / "run")),
        "grouped": cli("exec", "--html", str(root / "grouped"), str(TRAINING), "--mistake", "new-tape-zero"),
    }  # fmt: skip
    for name, proc in made.items():
        assert proc.returncode == 1, f"{name}: {proc.stderr[-2000:]}"
        checked(root / name)
    return root


def _artifacts() -> Path:
    folder = Path(os.environ.get("GRADCHECK_TEST_ARTIFACTS") or ROOT / "build" / "test-artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.mark.parametrize("name", ["exec", "run"])
def test_the_page_loads_with_no_console_message_and_no_request_but_itself(browser, pages, name):
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    page = context.new_page()
    said, asked, failed = [], [], []
    page.on("console", lambda message: said.append(f"{message.type}: {message.text}"))
    page.on("pageerror", lambda error: said.append(f"pageerror: {error}"))
    page.on("request", lambda request: asked.append(request.url))
    page.on("requestfailed", lambda request: failed.append(request.url))
    url = (pages / name / "index.html").as_uri()
    page.goto(url, wait_until="load")
    page.wait_for_load_state("networkidle")
    assert said == [] and failed == [] and asked == [url], (said, failed, asked)
    for part in PARTS:
        box = page.locator(part).bounding_box()
        assert box and box["width"] > 300 and box["height"] > 20, (part, box)
        assert box["x"] >= 0 and box["x"] + box["width"] <= 1200, (part, box)  # nothing spills past the page
    charts = page.locator("#s0-curves svg.chart")
    assert charts.count() >= 2
    for k in range(charts.count()):
        box = charts.nth(k).bounding_box()
        assert box["width"] > 200 and box["height"] > 100
        assert charts.nth(k).locator("polyline").count() >= 1
    nodes = page.locator("#s0-dataflow svg.dataflow g.node")
    assert nodes.count() >= 3 and nodes.first.bounding_box()["width"] > 10
    context.close()


def test_without_javascript_every_part_renders_and_the_lists_fold_out(browser, pages):
    context = browser.new_context(java_script_enabled=False, viewport={"width": 1200, "height": 900})
    page = context.new_page()
    page.goto((pages / "run" / "index.html").as_uri())
    marked = page.locator('#s0-dataflow g.node rect[stroke="red"]')
    assert marked.count() >= 1 and marked.first.bounding_box()["width"] > 20  # the chain break, drawn
    site = page.locator("#s0-findings .source .site").first
    assert "wp.launch" in site.inner_text() and site.bounding_box()["height"] > 5
    page.goto((pages / "grouped" / "index.html").as_uri())
    folded = page.locator("#s0-findings details").first
    assert not folded.locator("li").first.is_visible()
    folded.locator("summary").click()  # <details> opens without a script
    assert folded.locator("li").count() == 2 and folded.locator("li").nth(1).is_visible()
    context.close()


def test_a_screenshot_of_a_fault_variant_s_page_is_kept(browser, pages):
    context = browser.new_context(viewport={"width": 1200, "height": 1400})
    page = context.new_page()
    page.goto((pages / "exec" / "index.html").as_uri())
    shot = _artifacts() / "report-page.png"
    page.screenshot(path=str(shot), full_page=True)
    context.close()
    from PIL import Image

    with Image.open(shot) as image:
        assert image.width == 1200 and image.height >= 1400
        colours = image.convert("RGB").resize((60, 70)).getcolors(maxcolors=4096)
    assert colours is None or len(colours) > 20  # a page drawn, not a blank one
