"""OmniGen2 through the experts' real calling code against the stand-in checkout
(omnigen2_standin.py): the official adaptation's call per shot, the checkout's identity in the
key, the refusal of a missing checkout, and the page editor's contract on Omni-StoryBench."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import numpy as np
import pytest
from omnistory_omnigen2.experts import REFERENCE_NOTE, OmniGen2, OmniGen2References
from PIL import Image

from omnistory_core.api import Failure, Media, ParamError

TINY = {"height": 64, "width": 64, "steps": 2}


def media(tmp_path, name: str, seed: int) -> Media:
    pixels = np.random.default_rng(seed).integers(0, 256, (48, 48, 3), dtype=np.uint8)
    path = tmp_path / f"{name}.png"
    Image.fromarray(pixels).save(path)
    return Media(str(path), hashlib.sha256(path.read_bytes()).hexdigest())


def test_each_shot_gets_its_characters_references_and_the_servers_sentence(
    omnigen2_source, omnigen2_model, tmp_path
) -> None:
    expert = OmniGen2References(
        source_dir=str(omnigen2_source),
        model=str(omnigen2_model),
        seed=0,
        reference_note=True,
        jpeg_quality=95,
        negative_prompt="blurry",
        **TINY,
    )
    refs = [{"images": [media(tmp_path, "a", 1)]}, {"images": [media(tmp_path, "b", 2)]}]
    items = [
        {"image_prompt": "Two friends", "character_refs": refs},
        {"image_prompt": "An empty room", "character_refs": []},
        {"image_prompt": "  ", "character_refs": refs},
    ]
    both, nobody, empty = expert.run_batch(items)
    assert both.size == nobody.size == (64, 64) and isinstance(empty, Failure)
    first, second = expert.pipe.calls
    assert first["prompt"] == "Two friends" + REFERENCE_NOTE  # appended with no space
    assert len(first["input_images"]) == 2 and second["input_images"] is None
    assert (first["max_sequence_length"], first["align_res"], first["cfg_range"]) == (
        1024,
        False,
        (0.0, 1.0),
    )
    assert first["negative_prompt"] == "blurry" and first["generator_device"] == "cpu"
    # the checkout is identified by its code, not its path
    assert expert.output_params()["source_tree"] == expert.source_digest
    assert "source_dir" not in expert.output_params()


def test_a_missing_checkout_is_one_line_naming_the_repository_and_parameter(tmp_path) -> None:
    with pytest.raises(ParamError) as info:
        OmniGen2References(source_dir=str(tmp_path))
    message = str(info.value)
    assert "\n" not in message and "image.source_dir" in message
    assert "https://github.com/VectorSpaceLab/OmniGen2" in message
    env = {**os.environ, "OMNISTORY_SOURCE_IMAGE_OMNIGEN2": ""}
    proc = subprocess.run(
        [sys.executable, "-m", "omnistory_core", "system=omnigen2_base", "dataset=vistory_fixture",
         f"output_root={tmp_path / 'out'}"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "image.source_dir is not set" in proc.stderr
    assert "git clone https://github.com/VectorSpaceLab/OmniGen2" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "out" / "store").exists()


def test_page_editor_keeps_the_component_contract(omnigen2_source, omnigen2_model) -> None:
    from omnistory_testkit import check_component

    report = check_component(
        OmniGen2, source_dir=str(omnigen2_source), model=str(omnigen2_model), **TINY
    )
    assert {"light_import", "outputs", "cache", "deterministic"} <= set(report.passed), str(report)
