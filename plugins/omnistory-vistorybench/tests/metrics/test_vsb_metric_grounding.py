"""The ``groundingdino`` detector loaded from a tiny random GroundingDINO checkpoint that the
test builds (config -> random weights -> save_pretrained, with a tiny BERT tokenizer), and
CIDS end to end over it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from omnistory_testkit.metric_checkpoints import build_tiny_clip
from omnistory_vistorybench.metrics import cids
from omnistory_vistorybench.metrics.clip_encoder import Detection, Detector
from omnistory_vistorybench.metrics.grounding import (
    GroundingDinoDetector,
    preprocess_caption,
    select_boxes,
)
from vsb_metric_images import halves, noise, write_image

from omnistory_core.api import ComponentError

#: the tiny tokenizer's words; anything else is [UNK]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "character", "person", "."]
NUM_QUERIES = 12


def build_tiny_grounding_dino(directory: Path, seed: int = 0) -> Path:
    """A GroundingDinoForObjectDetection (Swin 8-dim, BERT 32-dim, 12 queries) and its
    processor (BertTokenizer from a vocab file; images resized to 128-192 px, so that the
    extra feature level stays above 1x1 for its GroupNorm), save_pretrained like the hub's
    IDEA-Research/grounding-dino-tiny.  Measured: ~0.16M parameters, about a second per
    detection on one loaded CPU core."""
    import torch
    from transformers import (
        BertTokenizer,
        GroundingDinoConfig,
        GroundingDinoForObjectDetection,
        GroundingDinoProcessor,
    )

    try:
        from transformers import GroundingDinoImageProcessor as ImageProcessor
    except ImportError:  # pragma: no cover - the PIL backend of transformers 5 without torchvision
        from transformers import GroundingDinoImageProcessorPil as ImageProcessor

    directory.mkdir(parents=True, exist_ok=True)
    vocab = directory / "vocab.txt"
    vocab.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    tokenizer = BertTokenizer(str(vocab))
    config = GroundingDinoConfig(
        backbone_config=dict(
            model_type="swin",
            embed_dim=8,
            depths=[1, 1, 1, 1],
            num_heads=[1, 1, 1, 1],
            window_size=4,
            image_size=32,
            out_indices=[2, 3, 4],
        ),
        text_config=dict(
            model_type="bert",
            vocab_size=len(VOCAB),
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=32,
            max_position_embeddings=32,
        ),
        # GroupNorm(32, d_model) needs d_model % 32 == 0; two decoder layers for the tied heads
        d_model=32,
        encoder_layers=1,
        decoder_layers=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        num_queries=NUM_QUERIES,
        encoder_n_points=1,
        decoder_n_points=1,
        max_text_len=16,
    )
    torch.manual_seed(seed)
    GroundingDinoForObjectDetection(config).save_pretrained(directory)
    image_processor = ImageProcessor(size={"shortest_edge": 128, "longest_edge": 192})
    GroundingDinoProcessor(image_processor=image_processor, tokenizer=tokenizer).save_pretrained(
        directory
    )
    return directory


@pytest.fixture(scope="module")
def tiny_dino(tmp_path_factory) -> Path:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    return build_tiny_grounding_dino(tmp_path_factory.mktemp("grounding_dino"))


def reference_detection(checkpoint: Path, image: Any, threshold: float) -> tuple[list, list]:
    """The official ``predict`` written out with transformers' classes (not the detector)."""
    import torch
    from transformers import AutoProcessor, GroundingDinoForObjectDetection

    model = GroundingDinoForObjectDetection.from_pretrained(str(checkpoint)).eval()
    processor = AutoProcessor.from_pretrained(str(checkpoint))
    inputs = processor(images=image, text="character.", return_tensors="pt")
    with torch.no_grad():
        out = model(**inputs)
    probs = out.logits.sigmoid()[0].max(dim=1).values
    mask = probs > threshold
    boxes, scores = out.pred_boxes[0][mask], probs[mask]
    order = sorted(range(len(scores)), key=lambda i: -float(scores[i]))
    return [boxes[i].tolist() for i in order], [float(scores[i]) for i in order]


def test_caption_as_the_official_preprocesses_it():
    assert preprocess_caption("character") == "character."
    assert preprocess_caption("  Character. ") == "character."


def test_select_boxes_thresholds_and_sorts():
    import torch

    logits = torch.tensor(
        [[-5.0, 0.0, float("-inf")], [2.0, -1.0, float("-inf")], [-9.0, -9.0, float("-inf")]]
    )
    boxes = torch.tensor([[0.5, 0.5, 0.2, 0.2], [0.3, 0.3, 0.1, 0.1], [0.9, 0.9, 0.1, 0.1]])
    det = select_boxes(logits, boxes, 0.25)
    # query 0: sigmoid(0) = 0.5, query 1: sigmoid(2) ~ 0.88, query 2: ~1e-4 (dropped)
    assert det.logits == pytest.approx([1 / (1 + np.exp(-2.0)), 0.5])
    assert det.boxes == [pytest.approx((0.3, 0.3, 0.1, 0.1)), pytest.approx((0.5, 0.5, 0.2, 0.2))]
    assert len(select_boxes(logits, boxes, 0.9)) == 0
    assert len(select_boxes(logits, boxes, 0.5)) == 1  # strictly above, as the official ">"


def test_detector_from_a_tiny_checkpoint(tiny_dino):
    from PIL import Image

    image = Image.fromarray(noise(50, 70, seed=1))
    detector = GroundingDinoDetector(box_threshold=0.25).load(str(tiny_dino))
    assert isinstance(detector, Detector)
    det = detector.detect(image, "character")
    boxes, scores = reference_detection(tiny_dino, image, 0.25)
    assert len(det) == len(scores) > 0
    assert np.allclose(det.logits, scores, atol=1e-5)
    assert np.allclose(np.asarray(det.boxes), np.asarray(boxes), atol=1e-5)
    assert list(det.logits) == sorted(det.logits, reverse=True)
    assert all(0.0 <= v <= 1.0 for box in det.boxes for v in box)
    # every query at threshold 0, none above 1: the threshold is what filters
    detector.box_threshold = 0.0
    assert len(detector.detect(image, "character")) == NUM_QUERIES
    detector.box_threshold = 1.0
    assert detector.detect(image, "character") == Detection([], [])
    detector.box_threshold = 0.25
    # a grey-level image goes in as RGB; deterministic across calls
    grey = image.convert("L")
    assert detector.detect(grey, "character") == detector.detect(grey.convert("RGB"), "character")
    detector.unload()
    with pytest.raises(RuntimeError, match="before load"):
        detector.detect(image, "character")


def test_missing_checkpoint_is_skipped(tmp_path):
    metric = cids.CIDSMetric(detector_checkpoint=str(tmp_path / "nowhere"))
    with pytest.raises(ComponentError, match="skipped:"):
        metric.load()


def test_cids_end_to_end_on_the_tiny_models(tiny_dino, tmp_path):
    """The official default detector and the CLIP encoder, both from tiny checkpoints: the
    metric runs its real loading paths, and OCCM follows the detector's box counts."""
    clip = build_tiny_clip(tmp_path / "clip")
    ref = write_image(tmp_path / "refs" / "A" / "00.jpg", halves((255, 0, 0), (0, 0, 255), 40, 40))
    shots = {
        1: write_image(tmp_path / "out" / "shot_01.png", noise(60, 80, seed=2)),
        2: write_image(tmp_path / "out" / "shot_02.png", noise(64, 64, seed=3)),
    }
    item = {
        "candidate_shots": shots,
        "characters": {"A": {"name": "Ann", "tag": "non_human", "refs": [ref]}},
        "shots": [{"index": 1, "character_key": ["A"]}, {"index": 2, "character_key": ["A"]}],
    }
    metric = cids.CIDSMetric(detector_checkpoint=str(tiny_dino), clip_model=str(clip), device="cpu")
    assert metric.checkpoints(metric.params) == [str(tiny_dino), str(clip)]
    metric.load()
    (result,) = metric.run_batch([item])
    assert result.status == "ok", result.detail
    detector = GroundingDinoDetector().load(str(tiny_dino))
    counts = [
        len([b for b in detector.detect(_open(m), "character").boxes if _usable(b, _open(m))])
        for m in shots.values()
    ]
    expected = sum(100 * np.exp(-abs(d - 1) / (1e-6 + 1)) for d in counts) / 2
    assert result.scores["occm"] == pytest.approx(round(expected, 4))
    assert result.detail["shots"]["1"]["boxes"] == counts[0]
    assert -1.0 <= result.scores["cids_cross_mean"] <= 1.0
    assert result.scores["single_character_action"] is None  # no judge configured


def _open(media: Any) -> Any:
    from PIL import Image

    with Image.open(media.path) as img:
        return img.convert("RGB")


def _usable(box: Any, image: Any) -> bool:
    from omnistory_vistorybench.metrics.math import crop_rect

    return crop_rect(box, *image.size) is not None


def _cached(model: str) -> bool:
    from omnistory_core.kit.hub import cached_snapshot

    return cached_snapshot(model) is not None


@pytest.mark.weights
def test_real_grounding_dino_tiny():
    """The official detector's converted weights, where the hub cache has them (the same code
    path as the tiny checkpoint above, at the real size: 900 queries, 800 px)."""
    from omnistory_vistorybench.metrics.grounding import OFFICIAL_GROUNDING_DINO

    pytest.importorskip("transformers")
    if not _cached(OFFICIAL_GROUNDING_DINO):
        pytest.skip(f"needs {OFFICIAL_GROUNDING_DINO} in the hub cache (prefetch it)")
    from PIL import Image

    detector = GroundingDinoDetector().load(OFFICIAL_GROUNDING_DINO)
    canvas = np.full((480, 640, 3), 235, np.uint8)
    canvas[120:420, 250:390] = (40, 40, 160)  # a tall figure-like block
    canvas[60:130, 285:355] = (220, 180, 150)  # and a head
    logits, boxes = detector.raw(Image.fromarray(canvas), "character")
    assert logits.shape[0] == boxes.shape[0] == 900
    det = detector.detect(Image.fromarray(canvas), "character")
    assert all(score > 0.25 for score in det.logits)
    assert list(det.logits) == sorted(det.logits, reverse=True)
    assert all(0.0 <= v <= 1.0 for box in det.boxes for v in box)
