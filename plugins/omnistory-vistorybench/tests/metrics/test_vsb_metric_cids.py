"""CIDS, OCCM and copy-paste end to end: a scripted detector, an exact test encoder for the
goldens, and the CLIP encoder loaded from a tiny random checkpoint."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from omnistory_vistorybench.metrics import cids
from omnistory_vistorybench.metrics.clip_encoder import (
    CLIPImageEncoder,
    Detection,
    Detector,
    Encoded,
    Encoder,
)
from vsb_metric_images import build_tiny_clip, halves, noise, write_image

from omnistory_core.api import ComponentError, Media

RED, GREEN, BLUE, WHITE, BLACK = (255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 255), (0, 0, 0)
PALETTE = np.array([RED, GREEN, BLUE, WHITE, BLACK], dtype=np.float64)

WHOLE = (0.5, 0.5, 1.0, 1.0)
LEFT = (0.25, 0.5, 0.5, 1.0)
RIGHT = (0.75, 0.5, 0.5, 1.0)


class SizeDetector:
    """Boxes scripted by image size (each test image has its own size)."""

    def __init__(self, boxes: dict[tuple[int, int], list[tuple[tuple[float, ...], float]]]):
        self.boxes = boxes
        self.calls: list[tuple[tuple[int, int], str]] = []

    def detect(self, image: Any, prompt: str) -> Detection:
        self.calls.append((image.size, prompt))
        found = self.boxes.get(image.size, [])
        return Detection([b for b, _ in found], [score for _, score in found])


class HalvesEncoder:
    """Features: the palette colour nearest each half's mean, one-hot, left ++ right, unit norm.
    Mirroring swaps the halves, so the copy-paste softmax sees a difference."""

    def encode(self, images: Any) -> Encoded:
        feats = []
        for image in images:
            a = np.asarray(image.convert("RGB"), dtype=np.float64)
            w = a.shape[1] // 2
            parts = []
            for half in (a[:, :w], a[:, w:]):
                mean = half.reshape(-1, 3).mean(axis=0)
                onehot = np.zeros(len(PALETTE))
                onehot[np.argmin(((PALETTE - mean) ** 2).sum(axis=1))] = 1.0
                parts.append(onehot)
            feats.append(np.concatenate(parts) / math.sqrt(2))
        return Encoded(list(range(len(images))), feats)

    def similarity(self, a: Any, b: Any) -> np.ndarray:
        return np.stack(list(a)) @ np.stack(list(b)).T


def test_protocols():
    assert isinstance(SizeDetector({}), Detector)
    assert isinstance(HalvesEncoder(), Encoder)
    assert isinstance(CLIPImageEncoder(), Encoder)
    assert Detection([LEFT, RIGHT, WHOLE], [0.2, 0.9, 0.5]).order() == [1, 2, 0]
    with pytest.raises(ValueError):
        Detection([LEFT], [])


@pytest.fixture
def story(tmp_path: Path) -> dict[str, Any]:
    """Characters A (refs: red|green .jpg, blue .png), B (blue .jpg), C (white, never drawn);
    shots 1-6 as in the comments."""
    ref = tmp_path / "refs"
    out = tmp_path / "out"
    characters = {
        "A": {
            "name": "Ann",
            "tag": "non_human",
            "refs": [
                write_image(ref / "A" / "01.png", halves(BLUE, BLUE, 43, 43)),
                write_image(ref / "A" / "00.jpg", halves(RED, GREEN, 40, 40), quality=95),
            ],
        },
        "B": {
            "name": "Bo",
            "tag": "unrealistic_human",
            "refs": [write_image(ref / "B" / "00.jpg", halves(BLUE, BLUE, 41, 41))],
        },
        "C": {
            "name": "Cy",
            "tag": "non_human",
            "refs": [write_image(ref / "C" / "00.jpg", halves(WHITE, WHITE, 42, 42))],
        },
    }
    shot1 = np.concatenate([halves(RED, GREEN, 50, 50), halves(BLUE, BLUE, 50, 50)], axis=1)
    shot2 = np.concatenate([halves(RED, RED, 50, 51), halves(BLACK, BLACK, 50, 51)], axis=1)
    shots = [
        {"index": 1, "character_key": ["A", "B"]},  # A -> left (copy of A's ref), B -> right
        {"index": 2, "character_key": ["A", "B"]},  # one box (red|red): A; B unmatched
        {"index": 3, "character_key": ["A"]},  # no output listed: skipped
        {"index": 4, "character_key": ["B"]},  # listed but missing: OCCM with D=0
        {"index": 5, "character_key": []},  # nobody onstage: skipped
        {"index": 6, "character_key": ["B"]},  # nothing detected: D=0
    ]
    candidate_shots = {
        1: write_image(out / "shot_01.png", shot1),
        2: write_image(out / "shot_02.png", shot2),
        3: None,
        4: Media(str(out / "shot_04.png"), "0" * 64),
        5: write_image(out / "shot_05.png", noise(50, 104)),
        6: write_image(out / "shot_06.png", noise(50, 103)),
    }
    boxes = {
        (40, 40): [(WHOLE, 0.9)],
        (41, 41): [(WHOLE, 0.8), (LEFT, 0.3)],  # top-1 only for references
        (43, 43): [(WHOLE, 0.9)],
        (42, 42): [(WHOLE, 0.9)],
        (100, 50): [(RIGHT, 0.8), (LEFT, 0.9)],
        (102, 50): [(LEFT, 0.7)],
        (104, 50): [(LEFT, 0.7)],
    }
    return {
        "item": {"candidate_shots": candidate_shots, "characters": characters, "shots": shots},
        "detector": SizeDetector(boxes),
    }


def scorer(story: dict[str, Any], faithful: bool = True) -> cids.StoryScorer:
    encoder = HalvesEncoder()
    return cids.StoryScorer(story["detector"], lambda tag: encoder, faithful=faithful)


OCCM_FAITHFUL = round(
    (100 + 100 * math.exp(-1 / 2.000001) + 2 * 100 * math.exp(-1 / 1.000001)) / 4, 4
)


def test_story_goldens_faithful(story):
    result = scorer(story).score(story["item"])
    assert result.status == "ok", result.detail
    # A: crops (R|G), (R|R) vs ref (R|G): cross (1 + 0.5) / 2, self 0.5
    # B: one crop (B|B): cross 1, self 1.0;  C: never matched, 0 / 0
    assert result.scores["cids_cross_mean"] == round((0.75 + 1.0 + 0.0) / 3, 4) == 0.5833
    assert result.scores["cids_self_mean"] == 0.5
    # shots 1 (2 of 2), 2 (1 of 2), 4 (missing: 0 of 1), 6 (0 of 1)
    assert OCCM_FAITHFUL == 58.5573
    assert result.scores["occm"] == OCCM_FAITHFUL
    # A: crop 1 is its reference (p0 = 1), crop 2 is symmetric (0.5): 0.75; B symmetric: 0.5
    assert result.scores["copy_paste_score"] == pytest.approx((0.75 + 0.5) / 2)
    chars = result.detail["characters"]
    assert chars["A"]["crops"] == 2 and chars["B"]["crops"] == 1 and chars["C"]["crops"] == 0
    assert result.detail["shots"]["2"]["cross_sim"] == {"A": 0.5, "B": 0.0}
    assert result.detail["shots"]["4"] == {
        "missing_file": str(Path(story["item"]["candidate_shots"][4].path))
    }


def test_story_detector_calls(story):
    scorer(story).score(story["item"])
    sizes = [size for size, prompt in story["detector"].calls if prompt == "character"]
    # faithful: the .png reference of A is never read; shots 3, 4 and 5 are never detected on
    assert (43, 43) not in sizes and (104, 50) not in sizes
    assert sizes.count((100, 50)) == 1 and sizes.count((103, 50)) == 1


def test_story_goldens_alternative(story):
    result = scorer(story, faithful=False).score(story["item"])
    assert result.status == "ok"
    # A's blue .png reference joins: cross rows [1, 0] and [0.5, 0] -> 0.375; B's single crop
    # has no self value (left out): self mean (0.5 + 0) / 2
    assert result.scores["cids_cross_mean"] == pytest.approx((0.375 + 1.0 + 0.0) / 3)
    assert result.scores["cids_self_mean"] == pytest.approx(0.25)
    assert result.scores["occm"] == pytest.approx(
        (100 + 100 * math.exp(-1 / 2.000001) + 2 * 100 * math.exp(-1 / 1.000001)) / 4
    )


def test_undefined_character(story):
    story["item"]["shots"][0]["character_key"] = ["A", "B", "Z"]
    bad = scorer(story).score(story["item"])
    assert bad.status == "invalid" and "Z" in bad.detail["error"]
    ok = scorer(story, faithful=False).score(story["item"])
    assert ok.status == "ok" and ok.scores["occm"] == pytest.approx(
        (100 + 100 * math.exp(-1 / 2.000001) + 2 * 100 * math.exp(-1 / 1.000001)) / 4
    )


def test_unscorable_stories(story):
    # images in the story's folder, none at a shot index: the official scores every value 0;
    # the alternative leaves the story out
    item = dict(story["item"], candidate_shots={1: None})
    zero = scorer(story).score(item)
    assert zero.status == "ok"
    assert [zero.scores[k] for k in cids.CRITERIA[:4]] == [0.0, 0.0, 0.0, 0.0]
    assert scorer(story, faithful=False).score(item).status == "invalid"
    item = dict(story["item"])
    item["characters"] = dict(item["characters"], D={"name": "D", "tag": "non_human", "refs": []})
    result = scorer(story).score(item)
    assert result.status == "invalid" and "'D'" in result.detail["error"]
    assert set(result.scores) == set(cids.CRITERIA) and not any(result.scores.values())


def test_reference_without_box_uses_the_whole_image(story):
    story["detector"].boxes[(40, 40)] = []
    result = scorer(story).score(story["item"])
    assert result.scores["cids_cross_mean"] == 0.5833  # the whole image is the same crop here


@pytest.fixture
def registered(story, monkeypatch):
    monkeypatch.setitem(cids.DETECTORS, "sizes", lambda params: story["detector"])
    monkeypatch.setitem(cids.ENCODERS, "halves", lambda params: HalvesEncoder())


def test_metric_class(story, registered):
    metric = cids.CIDSMetric(detector="sizes", object_encoder="halves")
    assert (metric.track, metric.scope, metric.criteria) == (
        "character",
        "group",
        (
            "cids_cross_mean",
            "cids_self_mean",
            "occm",
            "copy_paste_score",
            "single_character_action",
        ),
    )
    metric.load()
    (result,) = metric.run_batch([story["item"]])
    assert result.scores["occm"] == OCCM_FAITHFUL and result.scores["cids_self_mean"] == 0.5
    # no judge endpoint: the criterion is not produced (an invalid row for it alone)
    assert result.status == "ok" and result.scores["single_character_action"] is None


def test_realistic_humans_need_the_face_encoder(story, registered):
    """The official face_mix trio includes ArcFace, which is not available: an error row."""
    story["item"]["characters"]["B"]["tag"] = "realistic_human"
    metric = cids.CIDSMetric(detector="sizes", object_encoder="halves")
    (result,) = metric.run_batch([story["item"]])
    assert result.status == "error" and "arcface face model" in result.detail["error"]
    assert set(result.scores) == set(cids.CRITERIA) and not any(result.scores.values())
    metric = cids.CIDSMetric(detector="sizes", object_encoder="halves", face_encoder="arcface")
    (result,) = metric.run_batch([story["item"]])
    assert result.status == "error" and "arcface" in result.detail["error"]


def test_unknown_detector_and_encoder():
    with pytest.raises(ComponentError, match="unknown detector"):
        cids.CIDSMetric(detector="nope").load()
    with pytest.raises(ComponentError, match="unknown encoder"):
        cids.CIDSMetric(detector="nope", object_encoder="nope")._build(
            cids.ENCODERS, "nope", "encoder"
        )


# -- the CLIP path ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory) -> Path:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    return build_tiny_clip(tmp_path_factory.mktemp("clip"))


def test_clip_encoder_from_a_tiny_checkpoint(tiny_clip):
    from PIL import Image

    encoder = CLIPImageEncoder(batch_size=2).load(str(tiny_clip))
    images = [Image.fromarray(noise(30 + i, 40, seed=i)) for i in range(3)]
    rows = encoder.embed(images)
    assert rows.shape == (3, 16) and rows.dtype == np.float32
    assert np.allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)
    again = CLIPImageEncoder(batch_size=3).load(str(tiny_clip)).embed(images)
    assert np.allclose(rows, again, atol=1e-5)  # deterministic, batching does not matter
    encoded = encoder.encode(images)
    sim = encoder.similarity(encoded.features, encoded.features)
    assert encoded.indices == [0, 1, 2] and np.allclose(np.diag(sim), 1.0, atol=1e-5)
    # the reference computation, written out with transformers
    import torch
    from transformers import CLIPImageProcessor, CLIPModel

    model = CLIPModel.from_pretrained(str(tiny_clip)).eval()
    pixels = CLIPImageProcessor.from_pretrained(str(tiny_clip))(images=images, return_tensors="pt")
    with torch.no_grad():
        out = model.get_image_features(**pixels)
    feats = out if isinstance(out, torch.Tensor) else out.pooler_output
    feats = torch.nn.functional.normalize(feats, dim=1).numpy()
    assert np.allclose(rows, feats, atol=1e-5)


def test_metric_with_clip(story, tiny_clip, monkeypatch):
    monkeypatch.setitem(cids.DETECTORS, "sizes", lambda params: story["detector"])
    metric = cids.CIDSMetric(detector="sizes", clip_model=str(tiny_clip), device="cpu")
    assert metric.checkpoints(metric.params) == [str(tiny_clip)]
    official = cids.CIDSMetric().checkpoints(cids.CIDSMetric().params)
    assert official == ["IDEA-Research/grounding-dino-tiny", "openai/clip-vit-large-patch14"]
    metric.load()
    first = metric.run_batch([story["item"]])[0]
    second = metric.run_batch([story["item"]])[0]
    assert first.status == "ok" and first.scores == second.scores
    assert first.scores["occm"] == OCCM_FAITHFUL  # counts do not depend on the encoder
    for key in ("cids_cross_mean", "cids_self_mean"):
        assert -1.0 <= first.scores[key] <= 1.0
    assert 0.0 <= first.scores["copy_paste_score"] <= 1.0
    metric.unload()
