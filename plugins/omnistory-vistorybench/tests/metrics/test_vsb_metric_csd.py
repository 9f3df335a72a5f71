"""The CSD style encoder loaded from a tiny random state dict file, and the story metric."""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

import numpy as np
import pytest
from vsb_metric_images import noise, require_torchvision, write_image

from omnistory_core.api import ComponentError

torch = pytest.importorskip("torch")

from omnistory_vistorybench.metrics.csd import CSDEncoder, CSDMetric  # noqa: E402

TINY = dict(image_size=32, patch_size=8, width=32, layers=2, heads=2, embed_dim=16)

#: parameter names of the official checkpoint's layout (CSD_CLIP over CLIP's ViT)
OFFICIAL_KEYS = (
    "backbone.conv1.weight",
    "backbone.class_embedding",
    "backbone.positional_embedding",
    "backbone.ln_pre.weight",
    "backbone.transformer.resblocks.0.attn.in_proj_weight",
    "backbone.transformer.resblocks.0.attn.out_proj.bias",
    "backbone.transformer.resblocks.1.ln_1.weight",
    "backbone.transformer.resblocks.1.mlp.c_fc.weight",
    "backbone.transformer.resblocks.1.mlp.c_proj.bias",
    "backbone.transformer.resblocks.1.ln_2.bias",
    "backbone.ln_post.weight",
    "last_layer_style",
    "last_layer_content",
)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    from omnistory_vistorybench.metrics._csd_net import CSDStyleNet

    torch.manual_seed(0)
    state = CSDStyleNet(**TINY).state_dict()
    state["backbone.extra_buffer"] = torch.zeros(1)  # strict=False: an unexpected key is fine
    path = tmp_path_factory.mktemp("csd") / "csd_vit-tiny.pth"
    torch.save(state, path)
    return path


@pytest.fixture(scope="module")
def encoder(checkpoint) -> CSDEncoder:
    return CSDEncoder(**TINY).load(checkpoint)


def test_checkpoint_layout(checkpoint):
    keys = set(torch.load(checkpoint, weights_only=True))
    assert set(OFFICIAL_KEYS) <= keys
    assert "backbone.proj" not in keys  # CSD drops the ViT's projection for its heads


def test_load_report_and_refusal(encoder, tmp_path):
    assert encoder.load_report == {"missing_keys": [], "unexpected_keys": ["backbone.extra_buffer"]}
    wrong = tmp_path / "wrong.pth"
    torch.save({"model_state_dict": {"a": torch.zeros(1)}}, wrong)
    with pytest.raises(ComponentError, match="refusing to score with random weights"):
        CSDEncoder(**TINY).load(wrong)


def test_preprocess_bicubic_antialiased_clip_normalised(encoder):
    from PIL import Image

    image = Image.fromarray(noise(60, 80, seed=3))
    pixels = encoder.preprocess(image)
    assert tuple(pixels.shape) == (3, 32, 32) and pixels.dtype == torch.float32
    raw = torch.from_numpy(np.asarray(image, dtype=np.float32) / 255.0).permute(2, 0, 1)[None]
    for mode, antialias, same in (("bicubic", True, True), ("bilinear", True, False)):
        resized = torch.nn.functional.interpolate(
            raw, size=(32, 32), mode=mode, align_corners=False, antialias=antialias
        )
        mean = torch.tensor([0.48145466, 0.4578275, 0.40821073]).view(1, 3, 1, 1)
        std = torch.tensor([0.26862954, 0.26130258, 0.27577711]).view(1, 3, 1, 1)
        assert torch.allclose(pixels, ((resized - mean) / std)[0], atol=1e-6) is same


def test_preprocess_matches_torchvision_when_importable(encoder):
    require_torchvision()
    import torchvision.transforms.v2 as T
    from PIL import Image

    image = Image.fromarray(noise(60, 80, seed=3))
    raw = torch.from_numpy(np.asarray(image, dtype=np.float32) / 255.0)[None].permute(0, 3, 1, 2)
    official = T.Compose(
        [
            T.Resize((32, 32), interpolation=T.InterpolationMode.BICUBIC),
            T.Normalize((0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711)),
        ]
    )(raw)[0]
    assert torch.allclose(encoder.preprocess(image), official, atol=1e-5)


def test_embeddings_shape_norm_determinism(encoder, checkpoint):
    from PIL import Image

    images = [Image.fromarray(noise(40 + i, 50, seed=i)) for i in range(3)]
    rows = encoder.embed(images, batch_size=2)
    assert rows.shape == (3, 16)
    assert np.allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)
    again = CSDEncoder(**TINY).load(checkpoint).embed(images, batch_size=3)
    assert np.allclose(rows, again, atol=1e-5)


@pytest.fixture
def story(tmp_path: Path) -> dict:
    out, ref = tmp_path / "out", tmp_path / "ref"
    shots = {i: write_image(out / f"shot_{i:02d}.png", noise(40, 48, seed=i)) for i in (1, 2, 3)}
    extra = write_image(out / "shot_09.png", noise(40, 48, seed=9))  # not a story shot
    return {
        "candidate_shots": {1: shots[1], 2: shots[2], 3: shots[3], 4: None},
        "story_images": [shots[1], shots[2], shots[3], extra],
        "characters": {
            "A": {
                "name": "A",
                "tag": "non_human",
                "refs": [write_image(ref / "A.jpg", noise(36, 36, seed=20))],
            },
            "B": {"name": "B", "tag": "non_human", "refs": []},
        },
        "shots": [
            {"index": 1, "character_key": ["A"]},
            {"index": 2, "character_key": ["B"]},  # no reference: A's (faithful) or skipped
            {"index": 3, "character_key": []},  # nobody: A's (faithful) or skipped
            {"index": 4, "character_key": ["A"]},  # no output
        ],
    }


@pytest.fixture
def metric(checkpoint) -> CSDMetric:
    m = CSDMetric(checkpoint=str(checkpoint), device="cpu", image_batch=2, **TINY)
    m.load()
    return m


def cos(a, b) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_metric_faithful(metric, encoder, story):
    (result,) = metric.run_batch([story])
    assert result.status == "ok"
    from PIL import Image

    emb = {
        m.path: encoder.embed([Image.open(m.path).convert("RGB")])[0] for m in story["story_images"]
    }
    ref = encoder.embed([Image.open(story["characters"]["A"]["refs"][0].path).convert("RGB")])[0]
    pool = [emb[m.path] for m in story["story_images"]]
    expected_self = np.mean([cos(a, b) for a, b in combinations(pool, 2)])
    assert result.scores["self_csd"] == pytest.approx(expected_self, abs=1e-5)
    shots = [emb[story["candidate_shots"][i].path] for i in (1, 2, 3)]
    assert result.scores["cross_csd"] == pytest.approx(
        np.mean([cos(s, ref) for s in shots]), abs=1e-5
    )
    assert [s["characters"] for s in result.detail["shots"]] == [["A"], ["A"], ["A"]]
    assert result.detail["images"] == 4
    assert -1.0 <= result.scores["self_csd"] <= 1.0 and -1.0 <= result.scores["cross_csd"] <= 1.0


def test_metric_alternative(checkpoint, encoder, story):
    metric = CSDMetric(checkpoint=str(checkpoint), faithful=False, **TINY)
    (result,) = metric.run_batch([story])
    from PIL import Image

    shots = [
        encoder.embed([Image.open(story["candidate_shots"][i].path).convert("RGB")])[0]
        for i in (1, 2, 3)
    ]
    ref = encoder.embed([Image.open(story["characters"]["A"]["refs"][0].path).convert("RGB")])[0]
    expected_self = np.mean([cos(a, b) for a, b in combinations(shots, 2)])  # shots only
    assert result.scores["self_csd"] == pytest.approx(expected_self, abs=1e-5)
    assert result.scores["cross_csd"] == pytest.approx(cos(shots[0], ref), abs=1e-5)  # shot 1 only
    faithful = CSDMetric(checkpoint=str(checkpoint), **TINY).run_batch([story])[0]
    assert faithful.scores != result.scores


def test_metric_without_outputs(metric, checkpoint, story):
    empty = dict(story, candidate_shots={1: None}, story_images=[])
    (result,) = metric.run_batch([empty])
    assert result.status == "ok" and result.scores == {"self_csd": 0.0, "cross_csd": 0.0}
    alt = CSDMetric(checkpoint=str(checkpoint), faithful=False, **TINY).run_batch([empty])[0]
    assert alt.status == "invalid" and alt.scores == {"self_csd": None, "cross_csd": None}
    one = dict(
        story,
        candidate_shots={1: story["candidate_shots"][1]},
        story_images=[story["candidate_shots"][1]],
    )
    assert metric.run_batch([one])[0].scores["self_csd"] == 0.0


def test_metric_unreadable_image(metric, story, tmp_path):
    bad = tmp_path / "out" / "shot_07.png"
    bad.write_bytes(b"not an image")
    from vsb_metric_images import media_of

    story["story_images"].append(media_of(bad))
    (result,) = metric.run_batch([story])
    assert result.status == "invalid" and "cannot open image" in result.detail["error"]


def test_metric_needs_a_checkpoint(tmp_path):
    with pytest.raises(ComponentError, match="skipped: metric=csd"):
        CSDMetric().load()
    with pytest.raises(ComponentError, match="not found"):
        CSDMetric(checkpoint=str(tmp_path / "absent.pth")).load()
