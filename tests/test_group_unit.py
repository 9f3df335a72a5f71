"""Group-level calls (``Component.unit = "group"``), through the real CLI with a plugin that ships a
storyboard image expert, a storyboard voice and a storyboard planner: one cached call per book, the
expert sees every page of the book in order (each shot conditioned on the previous one), a re-run
makes no call, a wrong-length answer fails every page of its book, the dry run and the sweep's
progress view count one call per book."""

from __future__ import annotations

import hashlib
import json
import sys
import textwrap
from pathlib import Path

import pytest
from omnistory_testing import load_json, run_cli
from PIL import Image

from omnistory_core.data import load_demo
from omnistory_core.engine.sweep_progress import read_sweep_progress

PACKAGE = "omnistory_storyboard"
PLUGIN = """
from omnistory_core.hookspecs import hookimpl


@hookimpl
def register_image_experts(register):
    from omnistory_storyboard.components import StoryboardImage

    register(StoryboardImage)


@hookimpl
def register_tts_experts(register):
    from omnistory_storyboard.components import StoryboardVoice

    register(StoryboardVoice)


@hookimpl
def register_planners(register):
    from omnistory_storyboard.components import StoryboardPlanner

    register(StoryboardPlanner)
"""
COMPONENTS = """
import hashlib
import json
import os

import numpy as np
from PIL import Image

from omnistory_core.components import (
    Audio, ComponentError, ImageExpert, Planner, PlannerResponse, TTSExpert,
)


def log(kind, items):
    with open(os.environ["STORYBOARD_LOG"], "a") as fh:
        fh.write(json.dumps({"kind": kind, "texts": [i["current_text"] for i in items]}) + "\\n")


def shade(previous, text):
    return hashlib.sha256(f"{previous}|{text}".encode()).digest()[0]


class StoryboardImage(ImageExpert):
    name = "storyboard"
    version = "1"
    unit = "group"
    reads = ("current_text", "image_prompt")
    parameters = ()

    def run_one(self, group):
        items = group["items"]
        log("image", items)
        if os.environ.get("STORYBOARD_SHORT"):
            items = items[:-1]
        shots, previous = [], 0
        for item in items:  # each shot is conditioned on the one before it
            previous = shade(previous, item["current_text"])
            shots.append(Image.new("RGB", (8, 8), (previous, 0, 0)))
        return shots


class StoryboardVoice(TTSExpert):
    name = "storyboard"
    version = "1"
    unit = "group"
    reads = ("current_text", "utterance")
    parameters = ()

    def run_one(self, group):
        log("tts", group["items"])
        out = []
        for n, item in enumerate(group["items"]):
            if item["current_text"].startswith(os.environ.get("STORYBOARD_BAD_VOICE", "\\0")):
                out.append(ComponentError("no voice for this page", category="empty_output"))
            else:
                out.append(Audio(np.full(160 * (n + 1), 0.1, dtype=np.float32), 16000))
        return out


class StoryboardPlanner(Planner):
    name = "storyboard"
    version = "1"
    unit = "group"
    reads = ("current_text",)
    parameters = ()

    def run_one(self, group):
        log("planner", group["items"])
        plans = []
        for n, item in enumerate(group["items"]):
            plan = {
                "narration": f"Page {n} goes on.",
                "image_prompt": f"shot {n} of {len(group['items'])}: {item['current_text'][:20]}",
                "speech": {"speaker": "Pip", "utterance": "Look!", "emotion": "happy",
                           "speed": "normal", "pitch": "normal", "gender": "male"},
            }
            plans.append(PlannerResponse(json.dumps(plan), usage={"calls": 1}))
        return plans
"""


def write_plugin(site: Path) -> None:
    """A distribution as pip would leave it: metadata with the entry point and a package."""
    info = site / "omnistory_storyboard-0.1.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: omnistory-storyboard\nVersion: 0.1.0\n"
    )
    (info / "entry_points.txt").write_text(f"[omnistory]\nstoryboard = {PACKAGE}\n")
    (info / "RECORD").write_text("")
    (site / PACKAGE).mkdir(parents=True, exist_ok=True)
    (site / PACKAGE / "__init__.py").write_text(textwrap.dedent(PLUGIN))
    (site / PACKAGE / "components.py").write_text(textwrap.dedent(COMPONENTS))


def cli(tmp_path: Path, *args: str, progress: bool = False, **env: str):
    """``python -m omnistory_core`` on the demo's first 6 pages (two books) with the plugin."""
    write_plugin(tmp_path / "site")
    env = {
        "PYTHONPATH": str(tmp_path / "site"),
        "PYTHONDONTWRITEBYTECODE": "1",
        "STORYBOARD_LOG": str(tmp_path / "calls.jsonl"),
        **env,
    }
    return run_cli(
        *args,
        "dataset.limit=6",
        "output_root=out",
        f"engine.progress={str(progress).lower()}",
        "evaluation.report=false",
        cwd=tmp_path,
        env=env,
    )


def calls_logged(tmp_path: Path) -> list[dict]:
    path = tmp_path / "calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def books() -> list[list[str]]:
    """The current text of the demo's first 6 pages by book, in dataset order."""
    by_book: dict[str, list[str]] = {}
    for example in load_demo(limit=6):
        by_book.setdefault(example.book, []).append(example.current.text)
    return list(by_book.values())


JOB = Path("out/runs/demo/template-storyboard-storyboard")


def test_one_call_per_book_conditioned_in_order_and_a_rerun_makes_none(tmp_path: Path) -> None:
    expected = books()
    assert [len(b) for b in expected] == [4, 2]
    run = cli(tmp_path, "planner=template", "image=storyboard", "tts=storyboard")
    assert run.returncode == 0, run.stderr[-3000:]
    job = tmp_path / JOB
    stats = load_json(job / "stats.json")["components"]
    assert stats["image/storyboard"]["calls"] == 2 and stats["tts/storyboard"]["calls"] == 2
    logged = calls_logged(tmp_path)
    assert [c["texts"] for c in logged if c["kind"] == "image"] == expected
    assert [c["texts"] for c in logged if c["kind"] == "tts"] == expected
    # each page's image, from the book's one call, is conditioned on the page before it
    for book, first in zip(expected, (0, 4), strict=True):
        previous = 0
        for n, text in enumerate(book):
            previous = hashlib.sha256(f"{previous}|{text}".encode()).digest()[0]
            with Image.open(job / f"image/{first + n}/generated.png") as image:
                assert image.convert("RGB").getpixel((0, 0)) == (previous, 0, 0)
    rows = [json.loads(line) for line in (job / "records.jsonl").read_text().splitlines()]
    assert all(r["image"]["status"] == "ok" and r["speech"]["status"] == "ok" for r in rows)
    assert (job / "missing.txt").read_text() == ""

    again = cli(tmp_path, "planner=template", "image=storyboard", "tts=storyboard")
    assert again.returncode == 0, again.stderr[-3000:]
    stats = load_json(job / "stats.json")["components"]
    assert stats["image/storyboard"]["calls"] == 0 and stats["tts/storyboard"]["calls"] == 0
    assert stats["image/storyboard"]["cache_hits"] == 2
    assert len(calls_logged(tmp_path)) == len(logged)  # nothing called


def test_a_wrong_length_fails_every_page_of_its_book_and_the_next_run_retries(
    tmp_path: Path,
) -> None:
    short = cli(tmp_path, "planner=template", "image=storyboard", "tts=noop", STORYBOARD_SHORT="1")
    assert short.returncode == 0, short.stderr[-3000:]
    job = tmp_path / "out/runs/demo/template-storyboard-noop"
    missing = [line.split("\t") for line in (job / "missing.txt").read_text().splitlines()]
    assert [(int(m[0]), m[1], m[2]) for m in missing] == [
        (i, "image", "model_error") for i in range(6)
    ]
    assert "image/storyboard returned 3 outputs for a group of 4 items" in missing[0][3]
    assert "image/storyboard returned 1 outputs for a group of 2 items" in missing[4][3]

    fixed = cli(tmp_path, "planner=template", "image=storyboard", "tts=noop")
    assert fixed.returncode == 0, fixed.stderr[-3000:]
    assert (job / "missing.txt").read_text() == ""
    assert load_json(job / "stats.json")["components"]["image/storyboard"]["calls"] == 2


def test_one_item_of_a_group_fails_alone(tmp_path: Path) -> None:
    expected = books()
    bad = expected[0][1]
    run = cli(
        tmp_path, "planner=template", "image=noop", "tts=storyboard", STORYBOARD_BAD_VOICE=bad
    )
    assert run.returncode == 0, run.stderr[-3000:]
    job = tmp_path / "out/runs/demo/template-noop-storyboard"
    missing = [line.split("\t") for line in (job / "missing.txt").read_text().splitlines()]
    assert [(m[0], m[1], m[2]) for m in missing] == [("1", "speech", "empty_output")]
    assert "no voice for this page" in missing[0][3]


@pytest.mark.parametrize("launcher", ["omnistory", "basic"])
def test_dry_run_and_progress_view_count_one_call_per_group(tmp_path: Path, launcher: str) -> None:
    """The omnistory launcher plans every job up front; under the basic one each job plans itself
    before it runs."""
    grid = (
        "-m",
        "planner=template,storyboard",
        "image=storyboard,noop",
        "tts=noop",
        f"hydra/launcher={launcher}",
    )
    dry = cli(tmp_path, *grid, "engine.dry_run=true", "sweep_name=dry")
    assert dry.returncode == 0, dry.stderr[-3000:]
    rows = load_json(tmp_path / "out/sweeps/dry/sweep_plan.json")["components"]
    assert rows["planner/storyboard"]["calls"] == 2  # one per book
    assert rows["image/storyboard"]["calls"] == 2 * 2  # one per book, per planner
    # a group planner's pages are distinct calls downstream, though they share one call
    assert rows["image/noop"]["calls"] == 6 * 2
    assert not calls_logged(tmp_path)

    run = cli(tmp_path, *grid, "sweep_name=run", progress=True)
    assert run.returncode == 0, run.stderr[-3000:]
    stats = load_json(tmp_path / "out/sweeps/run/sweep_stats.json")["components"]
    progress = read_sweep_progress(tmp_path / "out/sweeps/run")
    for key in ("planner/storyboard", "image/storyboard", "image/noop"):
        row = progress.components[key]
        assert (row.planned, row.calls, row.to_do) == (stats[key]["calls"],) * 2 + (0,), key
    assert stats["planner/storyboard"]["calls"] == 2 and stats["image/storyboard"]["calls"] == 4
    assert sum(c["kind"] == "planner" for c in calls_logged(tmp_path)) == 2

    again = cli(tmp_path, *grid, "engine.dry_run=true", "sweep_name=dry")
    assert again.returncode == 0, again.stderr[-3000:]
    rows = load_json(tmp_path / "out/sweeps/dry/sweep_plan.json")["components"]
    assert rows["image/storyboard"]["calls"] == 0 and rows["image/storyboard"]["cached"] == 4
    assert rows["planner/storyboard"]["cached"] == 2


def test_a_group_call_runs_in_a_worker_too(tmp_path: Path) -> None:
    run = cli(
        tmp_path,
        "planner=template",
        "image=storyboard",
        "tts=noop",
        f"++image.runner.python={sys.executable}",
    )
    assert run.returncode == 0, run.stderr[-3000:]
    job = tmp_path / "out/runs/demo/template-storyboard-noop"
    assert (job / "missing.txt").read_text() == ""
    assert load_json(job / "stats.json")["components"]["image/storyboard"]["calls"] == 2
    assert [c["texts"] for c in calls_logged(tmp_path) if c["kind"] == "image"] == books()
