"""Story-Adapter through the expert's real calling code against the stand-in checkout
(storyadapter_standin.py) on the tiny SDXL: round 0 with the onstage references or text alone,
then refinement rounds on the previous round's whole story."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from omnistory_storyadapter.expert import StoryAdapter, fix_prompt, refinement_scales
from PIL import Image

from omnistory_core.api import Failure, Media, ParamError


def test_scales_and_the_scripts_leftover_substitutions() -> None:
    assert refinement_scales(5, 0.3, 0.5) == pytest.approx([0.3, 0.35, 0.4, 0.45, 0.5])
    assert fix_prompt("Robinson meets Friday") == (
        "a man, wearing tattered sailor clothes. meets a chimpanzee."
    )


def test_round_zero_then_refinement_on_the_whole_story(
    storyadapter_source, sdxl_for_adapter, ip_adapter, tmp_path
) -> None:
    pixels = np.random.default_rng(0).integers(0, 256, (40, 40, 3), dtype=np.uint8)
    path = tmp_path / "ref.png"
    Image.fromarray(pixels).save(path)
    ref = Media(str(path), hashlib.sha256(path.read_bytes()).hexdigest())
    items = [
        {"image_prompt": "Ann in the park", "character_refs": [{"images": [ref]}]},
        {"image_prompt": "An empty bench", "character_refs": []},
        {"image_prompt": "", "character_refs": []},
    ]
    common = dict(
        source_dir=str(storyadapter_source),
        model=str(sdxl_for_adapter),
        image_encoder=str(ip_adapter["image_encoder"]),
        ip_ckpt=str(ip_adapter["ip_ckpt"]),
        seed=42,
        steps=2,
    )
    expert = StoryAdapter(rounds=2, **common)
    first, second, empty = expert.run_one({"items": items})
    assert isinstance(first, Image.Image) and isinstance(second, Image.Image)
    assert isinstance(empty, Failure) and empty.category == "unusable_image_prompt"
    calls = expert.adapter.calls
    assert [(c["n_images"], c["scale"]) for c in calls] == [
        (1, 0.3),  # round 0: the onstage reference
        (0, 0.3),  # nobody onstage: text alone
        (2, 0.3),  # round 1: both shots' round-0 images
        (2, 0.3),
        (2, 0.5),  # round 2
        (2, 0.5),
    ]
    assert {size for c in calls[2:] for size in c["sizes"]} == {(256, 256)}
    assert {(c["seed"], c["steps"], c["style"]) for c in calls} == {(42, 2, "comic")}
    text_only = StoryAdapter(rounds=0, mode="text_only", **common)
    text_only.run_one({"items": items[:1]})
    assert [c["n_images"] for c in text_only.adapter.calls] == [0]
    with pytest.raises(ParamError, match="UCSC-VLAA/story-adapter"):
        StoryAdapter(source_dir=str(tmp_path))
