"""UNO through the experts' real calling code against the stand-in checkout (uno_standin.py):
the weight locations reach UNO through its environment variables (and only while loading), the
references are sized by UNO's rule, every shot is drawn with the official settings."""

from __future__ import annotations

import hashlib
import os

import numpy as np
import pytest
from omnistory_uno.experts import Uno, UnoReferences
from PIL import Image

from omnistory_core.api import Media, ParamError

TINY = {"height": 64, "width": 64, "steps": 2}


def media(tmp_path, name: str, size: tuple[int, int]) -> Media:
    pixels = np.random.default_rng(len(name)).integers(0, 256, (size[1], size[0], 3), np.uint8)
    path = tmp_path / f"{name}.png"
    Image.fromarray(pixels).save(path)
    return Media(str(path), hashlib.sha256(path.read_bytes()).hexdigest())


def weights(files) -> dict[str, str]:
    return {key: str(path) for key, path in files.items()}


def test_shots_are_drawn_with_the_official_call_and_reference_sizes(
    uno_source, uno_weights, tmp_path
) -> None:
    before = {var: os.environ.get(var) for var in ("FLUX_DEV", "AE", "LORA", "T5", "CLIP")}
    expert = UnoReferences(source_dir=str(uno_source), seed=42, **weights(uno_weights), **TINY)
    one = [{"images": [media(tmp_path, "wide", (300, 200))]}]
    two = one + [{"images": [media(tmp_path, "tall", (100, 250))]}]
    items = [
        {"image_prompt": "One hero", "character_refs": one},
        {"image_prompt": "Two heroes", "character_refs": two},
        {"image_prompt": "Nobody", "character_refs": []},
    ]
    outputs = expert.run_batch(items)
    assert [o.size for o in outputs] == [(64, 64)] * 3
    calls = expert.pipe.calls
    assert calls[0]["ref_sizes"] == [(512, 336)]  # one reference: long side 512, cut to 16
    assert calls[1]["ref_sizes"] == [(320, 208), (128, 320)]  # several: 320
    assert calls[2]["ref_sizes"] == []
    assert {(c["seed"], c["guidance"], c["num_steps"], c["pe"]) for c in calls} == {
        (42, 4.0, 2, "d")
    }
    assert expert.pipe.model["rank"] == 512  # only_lora with the official rank
    # UNO's variables were set for loading only
    assert {var: os.environ.get(var) for var in before} == before


def test_a_fixed_reference_size_and_a_missing_checkout(uno_source, uno_weights) -> None:
    fixed = UnoReferences(source_dir=str(uno_source), ref_size=320, **weights(uno_weights))
    assert fixed.reference_size(1) == 320
    with pytest.raises(ParamError, match=r"image.source_dir is not set.*bytedance/UNO"):
        UnoReferences(source_dir=None)


def test_current_image_editor_keeps_the_component_contract(uno_source, uno_weights) -> None:
    from omnistory_testkit import check_component

    report = check_component(Uno, source_dir=str(uno_source), **weights(uno_weights), **TINY)
    assert {"light_import", "outputs", "cache", "deterministic"} <= set(report.passed), str(report)
