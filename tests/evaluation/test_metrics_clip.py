"""CLIP image similarity through CLIPModel/CLIPProcessor.from_pretrained on a tiny checkpoint."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from omnistory_eval.metrics.clip import CLIPMetric, image_features  # noqa: E402
from omnistory_testkit.metric_checkpoints import build_tiny_clip  # noqa: E402
from PIL import Image  # noqa: E402

from omnistory_core.components import ComponentError, Media  # noqa: E402


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory):
    return build_tiny_clip(tmp_path_factory.mktemp("clip"))


@pytest.fixture(scope="module")
def metric(tiny_clip):
    m = CLIPMetric(model=str(tiny_clip), device="cpu", batch_size=2)
    m.load()
    yield m
    m.unload()


def save_image(path, array, mode=None):
    img = Image.fromarray(array)
    if mode:
        img = img.convert(mode)
    img.save(path)
    return Media(str(path), hashlib.sha256(path.read_bytes()).hexdigest())


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    d = tmp_path_factory.mktemp("imgs")
    rng = np.random.default_rng(0)
    arrays = [(rng.random((48, 64, 3)) * 255).astype("uint8") for _ in range(3)]
    return {
        "a": save_image(d / "a.png", arrays[0]),
        "b": save_image(d / "b.png", arrays[1]),
        "c": save_image(d / "c.jpg", arrays[2]),
        "a_rgba": save_image(d / "a_rgba.png", arrays[0], "RGBA"),
        "gray": save_image(d / "gray.png", arrays[1], "L"),
        "gray_rgb": save_image(
            d / "gray_rgb.png", np.asarray(Image.fromarray(arrays[1]).convert("L").convert("RGB"))
        ),
    }


def reference_cosine(model_dir, path_a, path_b):
    """Eq. 2 written out with transformers directly (independent of the metric's code)."""
    from transformers import CLIPModel, CLIPProcessor

    model = CLIPModel.from_pretrained(model_dir).eval()
    proc = CLIPProcessor.from_pretrained(model_dir)
    imgs = [Image.open(p).convert("RGB") for p in (path_a, path_b)]
    with torch.no_grad():
        out = model.get_image_features(**proc(images=imgs, return_tensors="pt"))
    feats = out if isinstance(out, torch.Tensor) else out.pooler_output
    a, b = feats[0], feats[1]
    return float(a @ b / (a.norm() * b.norm()))


def test_defaults_are_the_paper_checkpoint():
    assert CLIPMetric().params["model"] == "openai/clip-vit-base-patch32"
    assert (CLIPMetric.track, CLIPMetric.criteria) == ("image", ("cosine",))


def test_cosine_matches_equation_2(metric, tiny_clip, images):
    (res,) = metric.run_batch([{"candidate_image": images["a"], "reference_image": images["b"]}])
    assert res.status == "ok"
    expected = reference_cosine(tiny_clip, images["a"].path, images["b"].path)
    assert res.scores["cosine"] == pytest.approx(expected, abs=1e-5)
    assert -1.0 <= res.scores["cosine"] <= 1.0


def test_identical_images_score_one(metric, images):
    (res,) = metric.run_batch([{"candidate_image": images["c"], "reference_image": images["c"]}])
    assert res.scores["cosine"] == pytest.approx(1.0, abs=1e-5)


def test_images_are_converted_to_rgb(metric, images):
    rgba, rgb = metric.run_batch(
        [
            {"candidate_image": images["a_rgba"], "reference_image": images["b"]},
            {"candidate_image": images["a"], "reference_image": images["b"]},
        ]
    )
    assert rgba.scores["cosine"] == pytest.approx(rgb.scores["cosine"], abs=1e-5)
    gray, gray_rgb = metric.run_batch(
        [
            {"candidate_image": images["gray"], "reference_image": images["c"]},
            {"candidate_image": images["gray_rgb"], "reference_image": images["c"]},
        ]
    )
    assert gray.scores["cosine"] == pytest.approx(gray_rgb.scores["cosine"], abs=1e-5)


def test_batched_equals_one_by_one(tiny_clip, images):
    pairs = [("a", "b"), ("b", "c"), ("c", "a"), ("gray", "a")]
    batch = [{"candidate_image": images[x], "reference_image": images[y]} for x, y in pairs]
    together = CLIPMetric(model=str(tiny_clip), device="cpu", batch_size=8)
    together.load()
    alone = CLIPMetric(model=str(tiny_clip), device="cpu", batch_size=1)
    alone.load()
    scores_batched = [r.scores["cosine"] for r in together.run_batch(batch)]
    scores_single = [alone.run_batch([item])[0].scores["cosine"] for item in batch]
    assert scores_batched == pytest.approx(scores_single, abs=1e-5)


def test_reference_embeddings_are_reused_and_bounded(tiny_clip, images):
    m = CLIPMetric(model=str(tiny_clip), device="cpu", cache_size=2)
    m.load()
    m.run_batch(
        [
            {"candidate_image": images["a"], "reference_image": images["b"]},
            {"candidate_image": images["c"], "reference_image": images["b"]},
        ]
    )
    assert len(m._cache) <= 2
    (again,) = m.run_batch([{"candidate_image": images["a"], "reference_image": images["c"]}])
    assert again.status == "ok"


def test_unreadable_image_invalidates_only_its_item(metric, images, tmp_path):
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"not a png")
    bad = Media(str(broken), "deadbeef")
    bad_res, good_res = metric.run_batch(
        [
            {"candidate_image": bad, "reference_image": images["a"]},
            {"candidate_image": images["b"], "reference_image": images["a"]},
        ]
    )
    assert bad_res.status == "invalid" and bad_res.scores == {"cosine": None}
    assert "broken.png" in bad_res.detail["error"]
    assert good_res.status == "ok"


def test_image_features_accepts_both_transformers_return_types():
    from transformers.modeling_outputs import BaseModelOutputWithPooling

    t = torch.ones(2, 8)
    assert image_features(t) is t
    assert image_features(BaseModelOutputWithPooling(pooler_output=t)) is t
    with pytest.raises(TypeError, match="pooler_output"):
        image_features(object())


def test_missing_checkpoint_is_reported_as_skipped(tmp_path):
    with pytest.raises(ComponentError, match="^skipped: .*not available offline"):
        CLIPMetric(model=str(tmp_path / "nothing-here"), device="cpu").load()
