"""Inception v3 probabilities and the Inception Score from a random state dict file.

The network is fixed in size (27.2M parameters), so it is built once for the module."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from vsb_metric_images import media_of, noise, require_torchvision

from omnistory_core.api import ComponentError

torch = pytest.importorskip("torch")

from omnistory_vistorybench.metrics import math as vm  # noqa: E402
from omnistory_vistorybench.metrics.inception import (  # noqa: E402
    IMAGENET_MEAN,
    IMAGENET_STD,
    InceptionClassifier,
    InceptionScoreMetric,
    preprocess,
    torchvision_available,
)

#: torchvision's published parameter count of inception_v3 (aux head included)
TORCHVISION_PARAMS = 27_161_264


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    from omnistory_vistorybench.metrics._inception_net import build_inception_v3

    torch.manual_seed(0)
    net = build_inception_v3()
    for module in net.modules():  # variance-keeping weights, so that outputs depend on inputs
        if isinstance(module, torch.nn.Conv2d):
            torch.nn.init.kaiming_normal_(module.weight, nonlinearity="relu")
        elif isinstance(module, torch.nn.Linear):
            torch.nn.init.normal_(module.weight, std=0.05)
    path = tmp_path_factory.mktemp("inception") / "inception_v3_google-0cc3c7bd.pth"
    torch.save(net.state_dict(), path)
    return path


@pytest.fixture(scope="module")
def classifier(checkpoint) -> InceptionClassifier:
    return InceptionClassifier(backend="builtin").load(checkpoint)


def test_network_is_torchvisions(classifier, checkpoint):
    assert sum(p.numel() for p in classifier.model.parameters()) == TORCHVISION_PARAMS
    keys = set(torch.load(checkpoint, weights_only=True))
    for key in (
        "Conv2d_1a_3x3.conv.weight",
        "Conv2d_1a_3x3.bn.running_var",
        "Mixed_5b.branch_pool.conv.weight",
        "Mixed_6e.branch7x7dbl_5.bn.bias",
        "Mixed_7c.branch3x3dbl_3b.conv.weight",
        "AuxLogits.conv1.conv.weight",
        "AuxLogits.fc.bias",
        "fc.weight",
    ):
        assert key in keys


def test_same_network_as_torchvision_when_importable(classifier, checkpoint):
    require_torchvision()
    assert torchvision_available()
    from torchvision.models import inception_v3

    reference = inception_v3(
        weights=None, aux_logits=True, init_weights=False, transform_input=False
    )
    reference.load_state_dict(torch.load(checkpoint, weights_only=True), strict=True)
    x = torch.randn(2, 3, 299, 299)
    with torch.no_grad():
        assert torch.allclose(reference.eval()(x), classifier.model(x), atol=1e-4)


def test_preprocessing_resizes_the_short_side_and_crops_the_centre():
    from PIL import Image

    columns = (np.arange(598) % 256).astype(np.uint8)
    array = np.stack([np.tile(columns, (299, 1))] * 3, axis=-1)  # 598 x 299: no resize
    pixels = preprocess(Image.fromarray(array))
    assert tuple(pixels.shape) == (3, 299, 299)
    first = float(pixels[0, 0, 0]) * IMAGENET_STD[0] + IMAGENET_MEAN[0]
    assert round(first * 255) == 150  # crop left = round((598 - 299) / 2) = round(149.5) = 150
    wide = preprocess(Image.fromarray(noise(300, 400, seed=1)))  # resized to 398 x 299 first
    assert tuple(wide.shape) == (3, 299, 299)


def test_preprocessing_matches_torchvision_when_importable():
    require_torchvision()
    from PIL import Image
    from torchvision import transforms

    official = transforms.Compose(
        [
            transforms.Resize(299),
            transforms.CenterCrop(299),
            transforms.ToTensor(),
            transforms.Normalize(mean=IMAGENET_MEAN, std=IMAGENET_STD),
        ]
    )
    for h, w in ((300, 400), (512, 333), (299, 299), (100, 120)):
        image = Image.fromarray(noise(h, w, seed=h))
        assert torch.allclose(preprocess(image), official(image), atol=1e-6)


@pytest.fixture(scope="module")
def two_images():
    from PIL import Image

    return [Image.fromarray(noise(120 + 10 * i, 150, seed=i)) for i in range(2)]


@pytest.fixture(scope="module")
def two_probs(classifier, two_images):
    return classifier.probabilities(two_images, batch_size=1)


def test_probabilities_and_score(two_probs):
    assert two_probs.shape == (2, 1000)
    assert np.allclose(two_probs.sum(axis=1), 1.0, atol=1e-5) and (two_probs >= 0).all()
    assert not np.allclose(two_probs[0], two_probs[1])
    score, std = vm.inception_score(two_probs)
    assert 1.0 <= score <= 2.0 and std == 0.0


def test_metric(checkpoint, two_images, two_probs, tmp_path):
    media = []
    for i, image in enumerate(two_images):
        image.save(tmp_path / f"shot_{i}.png")
        media.append(media_of(tmp_path / f"shot_{i}.png"))
    metric = InceptionScoreMetric(checkpoint=str(checkpoint), device="cpu", backend="builtin")
    assert (metric.track, metric.scope, metric.criteria) == (
        "diversity",
        "run",
        ("inception_score",),
    )
    metric.load()
    (result,) = metric.run_batch([{"candidate_images": [*media, None]}])
    assert result.status == "ok" and result.detail["images"] == 2
    # a fresh load of the file, another batch size: the same numbers
    expected = vm.inception_score(two_probs)[0]
    assert result.scores["inception_score"] == pytest.approx(expected, rel=1e-6)
    assert result.detail["backend"] == "builtin"
    assert metric.run_batch([{"candidate_images": []}])[0].scores == {"inception_score": 0.0}
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"broken")
    assert (
        metric.run_batch([{"candidate_images": [media[0], media_of(bad)]}])[0].status == "invalid"
    )


def test_metric_alternative_and_missing_weights(checkpoint, tmp_path, monkeypatch):
    alt = InceptionScoreMetric(checkpoint=str(checkpoint), faithful=False, backend="builtin")
    (result,) = alt.run_batch([{"candidate_images": []}])
    assert result.status == "invalid" and result.scores == {"inception_score": None}
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    with pytest.raises(ComponentError, match="inception_v3_google-0cc3c7bd.pth"):
        InceptionScoreMetric().load()
    wrong = tmp_path / "wrong.pth"
    torch.save({"fc.weight": torch.zeros(2, 2)}, wrong)
    with pytest.raises(ComponentError, match="not Inception v3 weights"):
        InceptionScoreMetric(checkpoint=str(wrong), backend="builtin").load()
