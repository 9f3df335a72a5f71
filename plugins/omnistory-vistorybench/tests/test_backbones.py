"""Backbones on ViStoryBench: a backbone that makes images draws every shot from the shot seen as
a page (merged prompt, first onstage reference or a blank canvas); its narration and speech are
ignored; a configuration that cannot work is one line before any call."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from omnistory_testkit.runs import run_task_job
from omnistory_vistorybench.backbones import CANVAS_SIDE, blank_canvas, page_view

from omnistory_core.api import ConfigError, Media

SHOTS = {"01": [1, 2, 3, 4, 5, 7], "02": [1, 2, 3]}


@pytest.mark.parametrize(
    ("backbone", "paradigm"),
    [("example_omni", "any-to-any"), ("example_ti", "semi-orchestration (T+I)")],
)
def test_an_image_making_backbone_writes_every_shot(
    tmp_path: Path, backbone: str, paradigm: str
) -> None:
    args = (
        "task=vistorybench",
        f"backbone={backbone}",
        "dataset=vistory_fixture",
        "engine.progress=false",
        f"engine.store={tmp_path / 'store'}",
    )
    manifest = run_task_job(tmp_path / "job", *args)
    assert manifest["system_id"] == backbone and manifest["paradigm"] == paradigm
    assert manifest["stages"] == ["backbone"] and manifest["missing"] == {"image": 0}
    run = tmp_path / "job" / manifest["layout"]["run_dir"]
    for story, shots in SHOTS.items():
        written = sorted(p.name for p in (run / story / "shots").glob("*.png"))
        assert written == [f"shot_{i:02d}.png" for i in shots]
    rows = [json.loads(x) for x in (tmp_path / "job" / "records.jsonl").read_text().splitlines()]
    assert {r["status"] for r in rows} == {"ok"}
    again = run_task_job(tmp_path / "job", *args)
    assert again["stats"][f"backbone/{backbone}"]["calls"] == 0


def test_a_shot_becomes_a_page_with_its_merged_prompt_and_first_reference() -> None:
    canvas = blank_canvas()
    ref = Media(path="/r.png", sha256="0" * 64)
    pool = {
        "shot_prompt": "Close-up;Pip runs;...",
        "current_image": ref,
        "character_refs": [{"key": "Pip", "name": "Pip", "images": [ref]}],
        "shot": {"story_type": "Children's picture book", "scene": "a meadow"},
    }
    page = page_view(pool, canvas)
    assert page["current_image"] is ref and page["current_text"] == "Close-up;Pip runs;..."
    assert page["conditions"]["text_instruction"] == "Close-up;Pip runs;..."
    assert page["conditions"]["scene"] == "a meadow"
    assert page["metadata"]["characters"] == [{"name": "Pip"}]
    nobody = page_view({**pool, "current_image": None, "character_refs": []}, canvas)
    assert nobody["current_image"] == canvas and Path(canvas.path).is_file()
    from PIL import Image

    with Image.open(canvas.path) as img:
        assert img.size == (CANVAS_SIDE, CANVAS_SIDE)


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (("backbone=example_ts",), "makes ['speech', 'text'] and no image"),
        (("backbone=example_omni", "image=copy_paste"), "image=copy_paste cannot run beside"),
        (("backbone=example_ti", "tts=espeak"), "tts=espeak cannot run beside"),
    ],
)
def test_a_backbone_that_cannot_work_is_refused_before_any_call(
    tmp_path: Path, extra: tuple[str, ...], says: str
) -> None:
    with pytest.raises(ConfigError, match=says.replace("[", r"\[").replace("]", r"\]")):
        run_task_job(tmp_path / "job", "task=vistorybench", "dataset=vistory_fixture", *extra)
    assert not (tmp_path / "job").exists()
