"""Consistent self-attention on the tiny SDXL (sdxl_tiny.py), loaded through the expert's own
load(): the shots of one story share the ID shots' keys and values, stories share nothing."""

from __future__ import annotations

import numpy as np
import pytest
from omnistory_storydiffusion.expert import StoryDiffusion
from PIL import Image
from sdxl_tiny import TINY

from omnistory_core.api import Failure

CAST = [
    {"key": "Ann", "description": "a girl in a red coat"},
    {"key": "Bo", "description": "a grey dog"},
]


def shot(index: int, names: list[str], script: str) -> dict:
    fields = {"camera": "Mid shot", "plot": f"Part {index}.", "scene": "A park", "script": script}
    return {"shot": {**fields, "index": index, "character_names": names}, "characters": CAST}


STORY = {
    "items": [
        shot(1, ["Ann"], "Ann stands."),
        shot(2, ["Bo"], "Bo runs."),
        shot(3, ["Ann", "Bo"], "Ann throws a ball to Bo."),
    ]
}
OTHER = {"items": [shot(1, ["Ann"], "Ann sits."), shot(2, [], "An empty bench.")]}


def expert(model, **params) -> StoryDiffusion:
    made = StoryDiffusion(model=str(model), seed=42, **{**TINY, **params})
    made.load()
    return made


def pixels(image) -> np.ndarray:
    assert isinstance(image, Image.Image), image
    return np.asarray(image, dtype=np.int16)


@pytest.fixture(scope="module")
def sd(tiny_sdxl):
    return expert(tiny_sdxl)


def test_later_shots_read_the_id_shots_keys_and_values(sd, tiny_sdxl) -> None:
    lengths: list[tuple[str, int, int]] = []
    hooks = [
        module.register_forward_hook(
            lambda m, args, out, name=name: lengths.append((name, args[0].shape[1], 0))
        )
        for name, module in sd.pipe.unet.named_modules()
        if name.startswith("up_blocks") and name.endswith("attn1.to_k")
    ]
    try:
        outputs = sd.run_one(STORY)
    finally:
        for hook in hooks:
            hook.remove()
    assert all(isinstance(o, Image.Image) for o in outputs)
    assert set(sd.bank.tokens) == {"[Ann]", "[Bo]"}  # one bank per ID shot, this story's
    own = min(n for _, n, _ in lengths)
    assert max(n for _, n, _ in lengths) > own  # some keys came from the banks
    # without sharing (nothing kept in the banks) the ID shots are unchanged, the shared one not
    alone = expert(tiny_sdxl, rate_32=0.0, rate_64=0.0).run_one(STORY)
    assert np.array_equal(pixels(alone[0]), pixels(outputs[0]))
    assert np.array_equal(pixels(alone[1]), pixels(outputs[1]))
    assert np.abs(pixels(alone[2]) - pixels(outputs[2])).max() > 0


def test_no_story_reads_another_storys_banks(sd, tiny_sdxl) -> None:
    sd.run_one(STORY)
    after = sd.run_one(OTHER)
    assert set(sd.bank.tokens) == {"[Ann]"}
    fresh = expert(tiny_sdxl).run_one(OTHER)
    for a, b in zip(after, fresh, strict=True):
        assert np.array_equal(pixels(a), pixels(b))


def test_a_character_never_alone_fails_its_shots_only_when_asked(tiny_sdxl) -> None:
    story = {"items": [shot(1, ["Ann", "Bo"], "Together."), shot(2, ["Ann"], "Alone.")]}
    strict = expert(tiny_sdxl, missing_id="fail").run_one(story)
    assert isinstance(strict[0], Failure) and "[Bo] never appear" in strict[0].message
    assert isinstance(strict[1], Image.Image)
    lenient = expert(tiny_sdxl).run_one(story)
    assert all(isinstance(o, Image.Image) for o in lenient)
