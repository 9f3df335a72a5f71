"""The HTML report in headless Chromium: pages load, images decode, audio files exist and load,
filters work, screenshots are taken."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from chromium_cdp import Chromium, chromium_binary
from PIL import Image

from omnistory_core.report.command import build_report

pytestmark = pytest.mark.skipif(
    chromium_binary() is None,
    reason="no chromium binary on PATH (Debian: apt-get install chromium chromium-driver)",
)

IMAGES = "Array.from(document.images).map(i => [i.getAttribute('src'), i.complete, i.naturalWidth])"
AUDIO = """Promise.all(Array.from(document.querySelectorAll('audio')).map(a => new Promise(done => {
  const report = () => done([a.src, a.duration, a.error ? a.error.code : null]);
  if (a.readyState >= 1 || a.error) { report(); return; }
  a.addEventListener('loadedmetadata', report); a.addEventListener('error', report); a.load();
})))"""
VISIBLE = (
    "sel => Array.from(document.querySelectorAll(sel)).filter(e => e.style.display !== 'none')"
)


def _visible(browser: Chromium, selector: str) -> int:
    return browser.evaluate(f"({VISIBLE})({json.dumps(selector)}).length")


def _type(browser: Chromium, selector: str, value: str) -> None:
    browser.evaluate(
        f"(() => {{ const el = document.querySelector({json.dumps(selector)});"
        f" el.value = {json.dumps(value)}; el.dispatchEvent(new Event('input')); }})()"
    )


def _assert_screenshot(path: Path) -> None:
    with Image.open(path) as img:
        assert img.format == "PNG" and img.size[0] >= 800 and img.size[1] >= 600
        assert len(img.convert("RGB").getcolors(1 << 20) or []) > 10  # not a blank page


def test_report_in_headless_chromium(synthetic_run, tmp_path):
    out = build_report(
        synthetic_run.scores,
        tmp_path / "report",
        synthetic_run.run_dir,
        examples=synthetic_run.examples,
        bootstrap=50,
        weight_draws=50,
        print_table=False,
    )
    with Chromium(tmp_path / "profile") as browser:
        browser.navigate((out / "index.html").as_uri())
        assert browser.evaluate("document.title") == "Omni-StoryBench report"
        images = browser.evaluate(IMAGES)
        assert len(images) == 5  # the five figures
        assert all(complete and width > 0 for _, complete, width in images), images
        assert _visible(browser, "#leaderboard tbody tr") == 3
        oracle_row = browser.evaluate(
            "document.querySelector('#leaderboard tr[data-oracle=\"1\"]').textContent"
        )
        assert "oracle-c" in oracle_row and "ORACLE" in oracle_row
        _type(browser, "input[data-target='#leaderboard']", "orch")
        assert _visible(browser, "#leaderboard tbody tr") == 1
        _type(browser, "input[data-target='#leaderboard']", "")
        browser.evaluate(
            "document.querySelector('input.hide-oracle[data-target=\"#leaderboard\"]').click()"
        )
        assert _visible(browser, "#leaderboard tbody tr") == 2
        assert _visible(browser, "#examplelist tbody tr") == 4
        browser.screenshot(tmp_path / "index.png")
        _assert_screenshot(tmp_path / "index.png")

        example = next((out / "examples").glob("book1_*.html"))
        browser.navigate(example.as_uri())
        images = browser.evaluate(IMAGES)
        assert len(images) == 2 + 3  # current page, reference, one per system
        assert all(complete and width > 0 for _, complete, width in images), images
        audio = browser.evaluate(AUDIO)
        assert len(audio) == 3
        for src, duration, error in audio:
            path = Path(unquote(urlparse(src).path))
            assert path.is_file() and path.is_relative_to(out)
            assert error is None and duration == pytest.approx(0.25, abs=0.01)
        assert _visible(browser, "#cards .card") == 3
        browser.evaluate("document.querySelector('input.hide-oracle').click()")
        assert _visible(browser, "#cards .card") == 2
        browser.screenshot(tmp_path / "example.png")
        _assert_screenshot(tmp_path / "example.png")

        failed = next((out / "examples").glob("book2_*.html"))
        browser.navigate(failed.as_uri())
        text = browser.evaluate("document.querySelector('#cards').innerText")
        assert "failure: plan_json_error" in text
        assert len(browser.evaluate(AUDIO)) == 2
