"""The RetinaFace port against what facexlib builds it from: torchvision's ResNet-50 (the body,
parameter for parameter and output for output) and torchvision's ``nms`` (the suppression).
Needs a torchvision matching the installed torch; scripts/test.sh runs it where there is one."""

from __future__ import annotations

import numpy as np
import pytest
from vsb_metric_images import require_torchvision

torch = pytest.importorskip("torch")


def test_retinaface_body_is_torchvisions_resnet50():
    require_torchvision()
    from omnistory_vistorybench.metrics._retinaface import ResNet50Body
    from torchvision.models import resnet50
    from torchvision.models._utils import IntermediateLayerGetter

    torch.manual_seed(0)
    reference = IntermediateLayerGetter(
        resnet50(weights=None), {"layer2": 1, "layer3": 2, "layer4": 3}
    ).eval()
    ours = ResNet50Body().eval()
    assert list(ours.state_dict()) == list(reference.state_dict())  # facexlib's key names
    ours.load_state_dict(reference.state_dict(), strict=True)
    x = torch.randn(1, 3, 75, 93)  # odd sizes: the feature maps are ceil(size / stride)
    with torch.no_grad():
        want = list(reference(x).values())
        got = ours(x)
    assert [tuple(t.shape) for t in got] == [tuple(t.shape) for t in want]
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(got, want, strict=True))


def test_retinaface_suppression_is_torchvisions_nms():
    require_torchvision()
    from omnistory_vistorybench.metrics._retinaface import nms
    from torchvision.ops import nms as tv_nms

    rng = np.random.default_rng(1)
    corners = rng.uniform(0, 80, (200, 2)).astype(np.float32)
    sizes = rng.uniform(5, 40, (200, 2)).astype(np.float32)
    boxes = np.hstack([corners, corners + sizes])
    scores = rng.uniform(0.9, 1.0, 200).astype(np.float32)
    for threshold in (0.2, 0.4, 0.7):
        want = tv_nms(torch.from_numpy(boxes), torch.from_numpy(scores), threshold)
        assert nms(boxes, scores, threshold) == want.tolist()
