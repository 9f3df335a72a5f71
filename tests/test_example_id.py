"""A component can tell which example it is on, for logging, through the real CLI:
``omnistory_core.api.current_example()`` (or ``self.example_id``) inside ``run_one``, and
``current_examples()`` inside a ``run_batch`` of several items, also in an isolated worker.  The
id is not part of the call key: examples with the same inputs share one call, which is told the
first of them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from omnistory_testkit import run_cli
from test_output_checks import write_plugin

QUIET = "engine.progress=false"
PACKAGE = "omnistory_chatty"

HOOKS = """
from omnistory_core.api import hookimpl


@hookimpl
def register_planners(register):
    from omnistory_chatty.components import ChattyPlanner

    register(ChattyPlanner)


@hookimpl
def register_image_experts(register):
    from omnistory_chatty.components import ChattyImage

    register(ChattyImage)


@hookimpl
def register_tts_experts(register):
    from omnistory_chatty.components import ChattyTTS

    register(ChattyTTS)
"""

COMPONENTS = """
import json
import os

import numpy as np
from PIL import Image

from omnistory_core.api import (
    Audio, ImageExpert, Planner, PlannerResponse, TTSExpert, current_example, current_examples,
)


def note(who, **seen):
    with open(os.environ["CHATTY_LOG"], "a") as fh:
        fh.write(json.dumps({"who": who, **seen}) + "\\n")


class ChattyPlanner(Planner):
    name = "chatty"
    version = "1"
    reads = ("current_text",)
    parameters = ()

    def run_one(self, item):
        note("planner", example=current_example(), attribute=self.example_id, pid=os.getpid())
        plan = {
            "narration": "The story goes on.",
            "image_prompt": "the same picture for every page",
            "speech": {"speaker": "Pip", "utterance": item["current_text"][:20],
                       "emotion": "happy", "speed": "normal", "pitch": "normal",
                       "gender": "male"},
        }
        return PlannerResponse(json.dumps(plan))


class ChattyImage(ImageExpert):
    name = "chatty"
    version = "1"
    reads = ("image_prompt",)
    parameters = ()

    def run_one(self, item):
        note("image", example=current_example())
        return Image.new("RGB", (8, 8), (200, 100, 50))


class ChattyTTS(TTSExpert):
    name = "chatty"
    version = "1"
    default_batch_size = 3
    parameters = ()

    def run_batch(self, items):
        note("tts", examples=list(current_examples()), example=current_example(), pid=os.getpid())
        return [Audio(np.full(800, 0.1, dtype=np.float32), 16000) for _ in items]
"""


@pytest.mark.parametrize("isolated", [False, True], ids=["in-process", "isolated-worker"])
def test_components_are_told_their_example(tmp_path: Path, isolated: bool) -> None:
    write_plugin(
        tmp_path / "site",
        {f"{PACKAGE}/__init__.py": HOOKS, f"{PACKAGE}/components.py": COMPONENTS},
        dist="omnistory-chatty",
        package=PACKAGE,
    )
    log = tmp_path / "seen.jsonl"
    env = {
        "PYTHONPATH": str(tmp_path / "site"),
        "PYTHONDONTWRITEBYTECODE": "1",
        "CHATTY_LOG": str(log),
    }
    runner = [f"++tts.runner.python={sys.executable}"] if isolated else []
    proc = run_cli(
        "planner=chatty", "image=chatty", "tts=chatty", "dataset.limit=3", "output_root=out",
        QUIET, *runner, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    job = tmp_path / "out/runs/demo/chatty-chatty-chatty"
    rows = [json.loads(line) for line in (job / "records.jsonl").read_text().splitlines()]
    ids = [row["example_id"] for row in rows]
    assert len(set(ids)) == 3 and (job / "missing.txt").read_text() == ""
    seen = [json.loads(line) for line in log.read_text().splitlines()]

    # run_one under the default run_batch: its own example, as a function and as an attribute
    planner = [s for s in seen if s["who"] == "planner"]
    assert [(s["example"], s["attribute"]) for s in planner] == [(i, i) for i in ids]
    # the same prompt for every example is one call (the id is not in its key): told the first
    image = [s for s in seen if s["who"] == "image"]
    assert image == [{"who": "image", "example": ids[0]}]
    stats = json.loads((job / "stats.json").read_text())["components"]
    assert stats["image/chatty"]["calls"] == 1 and stats["image/chatty"]["cache_hits"] == 2
    # a run_batch of three items: every id in order, and no single "current" one
    tts = [s for s in seen if s["who"] == "tts"]
    assert [(s["examples"], s["example"]) for s in tts] == [(ids, None)]
    # isolated: the batch ran in the worker process, which was told the ids all the same
    assert (tts[0]["pid"] != planner[0]["pid"]) == isolated
