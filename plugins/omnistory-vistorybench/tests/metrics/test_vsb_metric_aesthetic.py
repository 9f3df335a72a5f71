"""aesthetic-predictor-v2.5 from a tiny random SigLIP checkpoint and a random head file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from vsb_metric_images import build_tiny_siglip, media_of, noise, write_image

from omnistory_core.api import ComponentError

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from omnistory_vistorybench.metrics.aesthetic import (  # noqa: E402
    AestheticMetric,
    AestheticPredictor,
    build_head,
)

HEAD_KEYS = [f"scoring_head.{i}.{p}" for i in (0, 2, 4, 6, 8) for p in ("weight", "bias")]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("aesthetic")
    encoder = build_tiny_siglip(root / "siglip")
    torch.manual_seed(1)
    head = root / "aesthetic_predictor_v2_5.pth"
    torch.save(build_head(32).state_dict(), head)
    return {"encoder": encoder, "head": head}


@pytest.fixture(scope="module")
def predictor(checkpoint) -> AestheticPredictor:
    return AestheticPredictor(device="cpu").load(str(checkpoint["encoder"]), checkpoint["head"])


def test_head_layout(checkpoint):
    state = torch.load(checkpoint["head"], weights_only=True)
    assert sorted(state) == sorted(HEAD_KEYS)
    assert tuple(state["scoring_head.0.weight"].shape) == (1024, 32)  # input follows hidden_size
    assert tuple(state["scoring_head.8.weight"].shape) == (1, 16)
    assert tuple(build_head(1152).state_dict()["scoring_head.0.weight"].shape) == (1024, 1152)


def test_wrong_head_is_refused(checkpoint, tmp_path):
    wrong = tmp_path / "head.pth"
    torch.save(build_head(64).state_dict(), wrong)
    with pytest.raises(ComponentError, match="not an aesthetic head"):
        AestheticPredictor().load(str(checkpoint["encoder"]), wrong)


def test_faithful_preprocessing_is_resize_and_to_tensor_only(predictor, checkpoint):
    from PIL import Image

    image = Image.fromarray(noise(50, 70, seed=2))
    pixels = predictor.preprocess(image)
    assert tuple(pixels.shape) == (3, 378, 378)
    expected = np.asarray(image.resize((378, 378), Image.Resampling.BILINEAR), np.float32) / 255.0
    assert torch.allclose(pixels, torch.from_numpy(expected).permute(2, 0, 1))
    assert 0.0 <= float(pixels.min()) and float(pixels.max()) <= 1.0
    normalised = AestheticPredictor(faithful=False).load(
        str(checkpoint["encoder"]), checkpoint["head"]
    )
    assert normalised.mean == (0.5, 0.5, 0.5) and normalised.std == (0.5, 0.5, 0.5)
    other = normalised.preprocess(image)
    assert torch.allclose(other, (pixels - 0.5) / 0.5)
    assert float(other.min()) < 0.0


def test_scores_follow_the_reference_computation(predictor, checkpoint):
    from PIL import Image
    from transformers import SiglipVisionModel

    images = [Image.fromarray(noise(40 + i, 60, seed=i)) for i in range(3)]
    scores = predictor.score(images, batch_size=2)
    assert len(scores) == 3 and all(np.isfinite(scores))
    assert predictor.score(images, batch_size=3) == pytest.approx(scores, abs=1e-5)
    tower = SiglipVisionModel.from_pretrained(str(checkpoint["encoder"])).eval()
    head = build_head(32)
    head.load_state_dict(torch.load(checkpoint["head"], weights_only=True))
    head.eval()
    pixels = torch.stack([predictor.preprocess(im) for im in images])
    with torch.no_grad():
        pooled = tower(pixel_values=pixels).pooler_output
        expected = head.scoring_head(pooled / pooled.norm(dim=-1, keepdim=True))[:, 0]
    assert scores == pytest.approx(expected.tolist(), abs=1e-5)
    alternative = AestheticPredictor(faithful=False).load(
        str(checkpoint["encoder"]), checkpoint["head"]
    )
    assert alternative.score(images) != pytest.approx(scores, abs=1e-6)


@pytest.fixture
def story(tmp_path: Path) -> dict:
    out = tmp_path / "out"
    shots = {i: write_image(out / f"shot_{i:02d}.png", noise(40, 50, seed=i)) for i in (1, 2)}
    extra = write_image(out / "shot_07.png", noise(40, 50, seed=7))
    return {
        "candidate_shots": {1: shots[1], 2: shots[2], 3: None},
        "story_images": [shots[1], shots[2], extra],
    }


def metric_for(checkpoint, **params) -> AestheticMetric:
    m = AestheticMetric(
        encoder=str(checkpoint["encoder"]), head=str(checkpoint["head"]), device="cpu", **params
    )
    m.load()
    return m


def test_metric_story_mean(checkpoint, predictor, story):
    from PIL import Image

    metric = metric_for(checkpoint, image_batch=2)
    assert (metric.track, metric.scope, metric.criteria) == (
        "quality",
        "group",
        ("aesthetic_score",),
    )
    (result,) = metric.run_batch([story])
    per_image = predictor.score([Image.open(m.path).convert("RGB") for m in story["story_images"]])
    assert result.status == "ok"
    assert result.scores["aesthetic_score"] == pytest.approx(np.mean(per_image), abs=1e-5)
    assert [d["score"] for d in result.detail["images"]] == pytest.approx(per_image, abs=1e-5)
    # faithful=false: the shot images only, normalised
    (alt,) = metric_for(checkpoint, faithful=False).run_batch([story])
    assert len(alt.detail["images"]) == 2 and alt.scores != result.scores


def test_metric_edge_cases(checkpoint, story, tmp_path):
    metric = metric_for(checkpoint)
    empty = {"candidate_shots": {1: None}, "story_images": []}
    assert metric.run_batch([empty])[0].scores == {"aesthetic_score": 0.0}
    alt = metric_for(checkpoint, faithful=False).run_batch([empty])[0]
    assert alt.status == "invalid" and alt.scores == {"aesthetic_score": None}
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"\x89PNG broken")
    story["story_images"].append(media_of(bad))
    assert metric.run_batch([story])[0].status == "invalid"
    with pytest.raises(ComponentError, match="skipped: metric=aesthetic"):
        AestheticMetric(encoder=str(checkpoint["encoder"])).load()
