"""The HTML report in headless Chromium: pages load, images decode, audio files exist and load,
filters work, screenshots are taken."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from chromium_cdp import Chromium, chromium_binary
from omnistory_report import figures
from omnistory_report.command import build_report
from omnistory_testkit import run_cli
from PIL import Image

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
        # one image per figure, only figures with data (narration lengths, Figures 3-7, 12-14)
        assert len(images) == browser.evaluate("document.querySelectorAll('figure img').length")
        assert len(images) >= 6 and "figures/fig_narration_lengths.png" in [i[0] for i in images]
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


EMPTY_TABLES = """Array.from(document.querySelectorAll('table')).filter(t => {
  const cells = Array.from(t.querySelectorAll('tbody td')).map(c => c.innerText.trim());
  return cells.filter(c => c !== '' && c !== '\u2014').length === 0;
}).map(t => t.id || t.closest('div, dd, main').innerText.slice(0, 80))"""


def test_readme_demo_report_shows_only_what_has_data(tmp_path):
    """The report of the README's demo command (`-m suite=demo`, no evaluation): what the run
    produced first, no empty figure or table, one line on how to get scores."""
    # evaluation.metrics=[]: suite=demo scores with the real-weight stand-ins when
    # omnistory-eval[real] is installed; this page is the one without scores
    done = run_cli("-m", "suite=demo", "evaluation.metrics=[]", cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    run_dir = tmp_path / "outputs" / "sweeps" / "demo"
    out = run_dir / "report"
    # the figures the page shows, rebuilt here so their data can be asked for
    check = build_report(
        run_dir / "scores.jsonl", tmp_path / "check", run_dir, bootstrap=10, print_table=False
    )
    shown = re.findall(r'<img src="(figures/[^"]+)"', (check / "index.html").read_text())
    assert shown and all(figures.empty_reason(check / src) is None for src in shown)
    with Chromium(tmp_path / "profile") as browser:
        browser.navigate((out / "index.html").as_uri())
        text = browser.evaluate("document.querySelector('main').innerText")
        assert text.lstrip().startswith("This run")
        assert text.count("No scores yet") == 1 and "--dry-run" in text
        for absent in ("No system has", "(no data)", "Leaderboard\n", "Not enough systems"):
            assert absent not in text, absent
        images = browser.evaluate(IMAGES)
        assert [src for src, _, _ in images] == shown
        assert all(complete and width > 0 for _, complete, width in images), images
        assert browser.evaluate("document.querySelectorAll('main table').length") >= 4
        assert browser.evaluate(EMPTY_TABLES) == []
        outputs = browser.evaluate(
            "Array.from(document.querySelectorAll('.run-tables table')[0].rows).slice(1)"
            ".map(r => Array.from(r.cells).map(c => c.innerText))"
        )
        assert len(outputs) == 6 and all(row[2:5] == ["10", "10", "0"] for row in outputs)
        browser.screenshot(tmp_path / "demo-index.png")
        _assert_screenshot(tmp_path / "demo-index.png")

        viewer = browser.evaluate(
            "Array.from(document.links).filter(a => a.innerText === 'Open the per-example viewer')"
            ".map(a => a.getAttribute('href'))"
        )
        assert len(viewer) == 1 and (out / viewer[0]).is_file()
        browser.navigate(next((out / "examples").glob("*lost-moon_page_002__page_003*")).as_uri())
        assert browser.evaluate(EMPTY_TABLES) == []
        characters = browser.evaluate(
            "Array.from(document.querySelectorAll('.example-input table.records'))"
            ".map(t => [t.rows[0].innerText, t.rows.length])"
        )
        assert len(characters) == 2  # the book's characters and the next page's
        assert "personality" in characters[0][0] and characters[0][1] == 4  # header + 3
        assert "speech_intent" in characters[1][0]
        panel = browser.evaluate("document.querySelector('.example-input').innerText")
        assert '{"' not in panel and "[{" not in panel  # no raw JSON
        images = browser.evaluate(IMAGES)
        assert len(images) == 2 + 2 and all(c and w > 0 for _, c, w in images), images

        browser.navigate(next((out / "systems").glob("template_copy_espeak-*.html")).as_uri())
        assert browser.evaluate(EMPTY_TABLES) == []
        header = browser.evaluate("document.querySelector('#sysrows thead').innerText")
        assert "speech" in header and "BERT" not in header  # no columns of dashes
        assert browser.evaluate("document.querySelectorAll('#sysrows tbody tr').length") == 10


def _stand_ins_installed() -> list[str]:
    from omnistory_eval.metrics.real import installed_stand_ins

    return installed_stand_ins()


#: scripts/test.sh installs the real-weight stand-ins: there this test must not skip
REQUIRED = os.environ.get("OMNISTORY_REQUIRE_REAL") == "1"


@pytest.mark.skipif(
    len(_stand_ins_installed()) < 3 and not REQUIRED,
    reason="the real-weight stand-ins: pip install './plugins/omnistory-eval[real]'",
)
@pytest.mark.slow(seconds=60)
def test_readme_first_command_opens_on_a_leaderboard_with_real_numbers(tmp_path):
    """README command 1 (`-m suite=demo` with omnistory-eval[real]): the first screen of the
    report is the stand-in leaderboard, filled with numbers, and its figure; the paper's
    leaderboard, which would hold only dashes, is one line under it."""
    assert len(_stand_ins_installed()) == 3, "omnistory-eval[real] is not fully installed"
    # three transitions of the ten: the same path, in a third of the scoring time
    done = run_cli("-m", "suite=demo", "dataset.limit=3", cwd=tmp_path, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    printed = done.stdout + done.stderr
    assert "Stand-in metrics with real weights" in printed
    assert "Omni-StoryBench leaderboard" not in printed  # no table of dashes
    out = tmp_path / "outputs" / "sweeps" / "demo" / "report"
    with Chromium(tmp_path / "profile") as browser:
        browser.navigate((out / "index.html").as_uri())
        text = browser.evaluate("document.querySelector('main').innerText")
        assert text.lstrip().startswith("Leaderboard: stand-in metrics with real weights")
        assert "not the paper's checkpoints" in text.splitlines()[0]
        rows = browser.evaluate(
            "Array.from(document.querySelectorAll('#standin tbody tr'))"
            ".map(r => Array.from(r.cells).map(c => c.innerText.trim()))"
        )
        assert sorted(r[1] for r in rows) == ["copy_copy_espeak", "template_copy_espeak"]
        for row in rows:
            assert row[2] == "3"  # N
            numbers = [float(c.split()[0]) for c in row[3:] if c != "not scored"]
            assert len(numbers) == 5 and all(0.0 <= v <= 1.0 for v in numbers), row
        # the table and its figure are on the first screen (1400x1000), the figure loaded
        top = browser.evaluate(
            "[document.querySelector('#standin').getBoundingClientRect().top,"
            " document.querySelector('.stand-in-figure img').getBoundingClientRect().top]"
        )
        assert all(0 < y < 1000 for y in top), top
        figure = browser.evaluate(
            "(i => [i.complete, i.naturalWidth])(document.querySelector('.stand-in-figure img'))"
        )
        assert figure[0] and figure[1] > 0, figure
        assert "has no scores yet" in text and "--judges all" in text
        browser.screenshot(tmp_path / "first-screen.png")
        _assert_screenshot(tmp_path / "first-screen.png")
