"""Qwen-Image-Edit-2509 through the experts' own load() on the tiny checkpoint (qwen_tiny.py):
the official story chain (character references, then the previous shot; a shot with nothing to
edit fails alone), the Next-Scene rule and LoRA, and the page editor on Omni-StoryBench's demo
pages."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from omnistory_qwen_edit.experts import QwenEdit, QwenEditStory
from omnistory_qwen_edit.pipeline import NOTE_CHARACTERS_ONLY, NOTE_WITH_PREVIOUS
from PIL import Image
from qwen_tiny import LORA_FILE, TINY

from omnistory_core.api import ComponentError, Failure, Media


@pytest.fixture
def reference(tmp_path):
    def make(name: str, seed: int) -> Media:
        pixels = np.random.default_rng(seed).integers(0, 256, (96, 96, 3), dtype=np.uint8)
        path = tmp_path / f"{name}.png"
        Image.fromarray(pixels).save(path)
        return Media(str(path), hashlib.sha256(path.read_bytes()).hexdigest())

    return make


def shot(prompt: str, *refs: Media) -> dict:
    return {
        "image_prompt": prompt,
        "character_refs": [{"key": f"c{i}", "images": [m]} for i, m in enumerate(refs)],
    }


def story_expert(model, **params) -> QwenEditStory:
    return QwenEditStory(
        model=str(model), seed=0, seed_mode="fixed", jpeg_quality=95, **{**TINY, **params}
    )


def recorded(expert):
    """Record the prompt and image count of every pipeline call (the real pipeline still runs)."""
    calls = []
    original = type(expert.pipe).__call__

    def spy(pipe, **kwargs):
        calls.append((kwargs["prompt"], len(kwargs["image"])))
        return original(pipe, **kwargs)

    expert.pipe.__class__ = type("Recorded", (type(expert.pipe),), {"__call__": spy})
    return calls


def test_story_chain_conditions_each_shot_and_fails_only_the_empty_one(
    tiny_qwen_edit, reference
) -> None:
    expert = story_expert(tiny_qwen_edit, prompt_prefix="Next Scene: ")
    expert.load()
    calls = recorded(expert)
    a, b = reference("a", 1), reference("b", 2)
    story = {"items": [shot("empty sky"), shot("Ann waves", a), shot("Ann and Bo", a, b)]}
    first, second, third = expert.run_one(story)
    assert isinstance(first, Failure) and "HTTP 400" in first.message
    assert second.size == third.size == (64, 64)
    # shot 2: its character only; shot 3: both characters, then shot 2's image
    assert calls == [
        ("Next Scene: Ann waves" + NOTE_CHARACTERS_ONLY, 1),
        ("Next Scene: Ann and Bo" + NOTE_WITH_PREVIOUS, 3),
    ]


def test_next_scene_chain_gives_later_shots_only_the_previous_shot(
    tiny_qwen_edit, tiny_lora, reference
) -> None:
    plain = story_expert(tiny_qwen_edit, chain="next_scene")
    plain.load()
    calls = recorded(plain)
    a, b = reference("a", 1), reference("b", 2)
    story = {"items": [shot("one", a, b), shot("two", a), shot("three")]}
    outputs = plain.run_one(story)
    assert all(isinstance(o, Image.Image) for o in outputs)
    assert [n for _, n in calls] == [2, 1, 1]
    lora = story_expert(
        tiny_qwen_edit, chain="next_scene", lora=str(tiny_lora), lora_weight_name=LORA_FILE
    )
    with_lora = lora.run_one({"items": story["items"][:1]})[0]
    assert np.abs(np.asarray(with_lora, float) - np.asarray(outputs[0], float)).mean() > 0.5
    missing = story_expert(tiny_qwen_edit, lora=str(tiny_lora), lora_weight_name="absent.bin")
    with pytest.raises(ComponentError, match="with the LoRA"):
        missing.load()


def test_page_editor_edits_omnistorybench_pages(tiny_qwen_edit) -> None:
    from omnistory_testkit import demo_items

    # the demo's current pages, with an image prompt as a planner writes one
    items = [
        {"image_prompt": "The fox looks out of the window.", "current_image": i["current_image"]}
        for i in demo_items(2)
    ]
    assert all(isinstance(item["current_image"], Media) for item in items)
    expert = QwenEdit(model=str(tiny_qwen_edit), seed=0, **TINY)
    assert expert.reads == ("image_prompt", "current_image")
    first, second = expert.run_batch(items)
    assert first.size == second.size == (64, 64)
    again = QwenEdit(model=str(tiny_qwen_edit), seed=0, **TINY).run_one(items[0])
    assert np.array_equal(np.asarray(again), np.asarray(first))  # deterministic per seed
    assert QwenEdit(model="m", seed=0).output_params()["diffusers"]  # the pipeline code's version
