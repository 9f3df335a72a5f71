"""The face encoders of CIDS: FaceNet and AdaFace loaded from random state dicts that the test
saves at the official file names, the face_mix ensemble, and CIDS over realistic humans."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from omnistory_vistorybench.metrics import cids
from omnistory_vistorybench.metrics.clip_encoder import Detection, Encoder
from omnistory_vistorybench.metrics.face import (
    ADAFACE_FILE,
    FACENET_FILE,
    AdaFaceEmbedder,
    FaceMixEncoder,
    FaceNetEmbedder,
    adaface_state_dict,
    build_face_mix,
    face_model_names,
    face_pixels,
)
from vsb_metric_images import halves, noise, write_image

from omnistory_core.api import ComponentError

torch = pytest.importorskip("torch")
BILINEAR = 2  # PIL.Image.Resampling.BILINEAR (Image.resize defaults to bicubic)


@pytest.fixture(scope="module")
def pretrain(tmp_path_factory) -> Path:
    """A ``data/pretrain``-like folder with random FaceNet and AdaFace weights at the official
    file names (AdaFace as a Lightning checkpoint: ``state_dict`` with ``model.`` and ``head.``
    entries, plus training metadata)."""
    from omnistory_vistorybench.metrics._face_nets import InceptionResnetV1, ir_backbone

    root = tmp_path_factory.mktemp("pretrain")
    torch.manual_seed(0)
    facenet = root / FACENET_FILE
    facenet.parent.mkdir(parents=True)
    torch.save(InceptionResnetV1().state_dict(), facenet)
    torch.manual_seed(1)
    backbone = ir_backbone(100).state_dict()
    state = {f"model.{k}": v for k, v in backbone.items()}
    state["head.kernel"] = torch.randn(512, 8)
    adaface = root / ADAFACE_FILE
    adaface.parent.mkdir(parents=True)
    torch.save({"epoch": 3, "global_step": 10, "state_dict": state}, adaface)
    return root


def opencv_face(image: Any) -> np.ndarray:
    """A crop resized whole to 112x112 (bilinear), as float BGR: what the models get."""
    rgb = np.asarray(image.convert("RGB").resize((112, 112), BILINEAR), np.float32)
    return rgb[:, :, ::-1]


def crops() -> list[Any]:
    from PIL import Image

    return [
        Image.fromarray(noise(60, 40, seed=1)),
        Image.fromarray(noise(90, 90, seed=2)).convert("L"),
        Image.fromarray(halves((250, 10, 10), (10, 10, 250), 50, 70)),
    ]


def test_face_pixels_are_whole_crops_in_bgr():
    from PIL import Image

    image = Image.fromarray(halves((255, 0, 0), (0, 0, 255), 20, 30))
    (bgr,) = face_pixels([image], size=8)
    assert bgr.shape == (8, 8, 3) and bgr.dtype == np.uint8
    assert tuple(bgr[0, 0]) == (0, 0, 255) and tuple(bgr[0, -1]) == (255, 0, 0)
    assert face_pixels([]).shape == (0, 112, 112, 3)


def test_facenet_from_the_official_file_name(pretrain):
    from omnistory_vistorybench.metrics._face_nets import InceptionResnetV1

    embedder = FaceNetEmbedder(batch_size=2).load(str(pretrain / FACENET_FILE))
    images = crops()
    rows = embedder.embed(images)
    assert rows.shape == (3, 512) and rows.dtype == np.float32
    assert np.allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)
    # the official input, written out: the face as OpenCV holds it (BGR), / 255, 112x112
    net = InceptionResnetV1()
    net.load_state_dict(torch.load(pretrain / FACENET_FILE, weights_only=True))
    net.eval()
    bgr = np.stack([opencv_face(im) for im in images])
    with torch.no_grad():
        want = net(torch.from_numpy(bgr.copy() / 255.0).permute(0, 3, 1, 2).float()).numpy()
    assert np.allclose(rows, want, atol=1e-4)
    # channel order matters: RGB input would give other embeddings
    with torch.no_grad():
        rgb = net(torch.from_numpy(bgr[:, :, :, ::-1].copy() / 255.0).permute(0, 3, 1, 2).float())
    assert not np.allclose(rows, rgb.numpy(), atol=1e-4)
    embedder.unload()
    with pytest.raises(RuntimeError, match="before load"):
        embedder.embed(images)


def test_adaface_from_the_official_checkpoint(pretrain, tmp_path):
    from omnistory_vistorybench.metrics._face_nets import ir_backbone

    raw = torch.load(pretrain / ADAFACE_FILE, weights_only=True)
    plain = adaface_state_dict(raw)
    assert "input_layer.0.weight" in plain and not any(k.startswith("head") for k in plain)
    assert adaface_state_dict(plain) == plain  # a bare backbone state dict loads as it is
    embedder = AdaFaceEmbedder(batch_size=3).load(str(pretrain / ADAFACE_FILE))
    images = crops()[:2]
    rows = embedder.embed(images)
    assert rows.shape == (2, 512)
    # AdaFace's to_input, written out: BGR, (x / 255 - 0.5) / 0.5
    net = ir_backbone(100)
    net.load_state_dict(plain)
    net.eval()
    bgr = np.stack([opencv_face(im) for im in images])
    with torch.no_grad():
        want, _ = net(torch.from_numpy((bgr / 255.0 - 0.5) / 0.5).permute(0, 3, 1, 2).float())
    assert np.allclose(rows, want.numpy(), atol=1e-4)
    # a bare state dict saved by itself loads through the same path
    bare = tmp_path / "adaface_backbone.pt"
    torch.save(plain, bare)
    again = AdaFaceEmbedder().load(str(bare)).embed(images)
    assert np.allclose(rows, again, atol=1e-5)


def test_weights_that_do_not_fit_or_are_missing(pretrain, tmp_path):
    wrong = tmp_path / "wrong.pt"
    torch.save({"conv.weight": torch.zeros(1)}, wrong)
    with pytest.raises(ComponentError, match="does not fit InceptionResnetV1"):
        FaceNetEmbedder().load(str(wrong))
    with pytest.raises(ComponentError, match="does not fit IRBackbone"):
        AdaFaceEmbedder().load(str(wrong))
    with pytest.raises(ComponentError, match="skipped: .*facenet_weights="):
        FaceNetEmbedder().load(None)
    with pytest.raises(ComponentError, match="not found"):
        AdaFaceEmbedder().load(str(tmp_path / "nowhere.ckpt"))
    pickled = tmp_path / "pickled.ckpt"
    torch.save({"state_dict": {}, "hyper_parameters": Path("x")}, pickled)
    with pytest.raises(ComponentError, match="weights_only"):
        AdaFaceEmbedder().load(str(pickled))


class Fixed:
    """A face model stand-in whose features are given per face colour (the BGR of its first
    pixel; dependencies of FaceMixEncoder, which is the unit under test here)."""

    size = 112

    def __init__(self, rows: dict[tuple[int, int, int], list[float]]):
        self.rows = rows

    def embed_faces(self, bgr: np.ndarray) -> np.ndarray:
        out = np.array([self.rows[tuple(int(v) for v in face[0, 0])] for face in bgr], float)
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    def unload(self) -> None:
        pass


RED_BGR, BLUE_BGR = (0, 0, 255), (255, 0, 0)


def test_face_mix_averages_the_models_in_common():
    from PIL import Image

    a, b = Image.new("RGB", (10, 10), (255, 0, 0)), Image.new("RGB", (20, 10), (0, 0, 255))
    mix = FaceMixEncoder(
        {
            "adaface": Fixed({RED_BGR: [1, 0], BLUE_BGR: [0, 1]}),
            "facenet": Fixed({RED_BGR: [1, 0], BLUE_BGR: [1, 1]}),
        }
    )
    assert isinstance(mix, Encoder)
    encoded = mix.encode([a, b])
    assert encoded.indices == [0, 1] and set(encoded.features[0]) == {"adaface", "facenet"}
    sim = mix.similarity(encoded.features, encoded.features)
    # (a, b): adaface 0, facenet cos 45 degrees: mean
    assert sim[0, 1] == pytest.approx((0.0 + np.sqrt(0.5)) / 2)
    assert np.allclose(np.diag(sim), 1.0)
    # a feature missing one model: only the model in common counts; none in common: 0.0
    only_ada = {"adaface": encoded.features[1]["adaface"]}
    assert mix.similarity([encoded.features[0]], [only_ada])[0, 0] == pytest.approx(0.0)
    only_fn = {"facenet": encoded.features[1]["facenet"]}
    assert mix.similarity([only_fn], [encoded.features[1]])[0, 0] == pytest.approx(1.0)
    assert mix.similarity([only_ada], [only_fn])[0, 0] == 0.0
    assert not mix.encode([])
    with pytest.raises(ValueError):
        FaceMixEncoder({})


class FindsRed:
    """An aligner that finds a face only in a red crop (the whole crop, resized)."""

    def __init__(self) -> None:
        self.calls = 0

    def faces(self, images: Any, size: int) -> list[Any]:
        self.calls += 1
        return [f if tuple(f[0, 0]) == RED_BGR else None for f in face_pixels(images, size)]


def test_a_crop_without_any_models_face_is_dropped():
    from PIL import Image

    red, blue = Image.new("RGB", (8, 8), (255, 0, 0)), Image.new("RGB", (9, 9), (0, 0, 255))
    finder = FindsRed()
    rows = {RED_BGR: [1, 0], BLUE_BGR: [0, 1]}
    mix = FaceMixEncoder(
        {"adaface": Fixed(rows), "facenet": Fixed(rows)},
        {"adaface": finder, "facenet": finder},
    )
    encoded = mix.encode([blue, red, blue])
    assert encoded.indices == [1] and set(encoded.features[0]) == {"adaface", "facenet"}
    assert finder.calls == 1  # models sharing a face finder share its detections
    # one model finds the face, the other embeds the whole crop: every crop stays, the blue
    # ones with the whole-crop model's feature only
    partial = FaceMixEncoder({"adaface": Fixed(rows), "facenet": Fixed(rows)}, {"adaface": finder})
    encoded = partial.encode([blue, red])
    assert encoded.indices == [0, 1]
    assert set(encoded.features[0]) == {"facenet"} and len(encoded.features[1]) == 2


def test_build_face_mix_from_parameters(pretrain):
    # the official trio, ArcFace first: a skipped error naming its weights parameter
    with pytest.raises(ComponentError, match="skipped: the arcface face model .*arcface_weights="):
        build_face_mix({}, "cpu")
    with pytest.raises(ComponentError, match="unknown face model 'dlib'"):
        build_face_mix({"face_models": ["dlib"]}, "cpu")
    with pytest.raises(ComponentError, match="at least one"):
        build_face_mix({"face_models": []}, "cpu")
    with pytest.raises(ComponentError, match="adaface_weights="):
        build_face_mix({"face_models": ["adaface"]}, "cpu")
    assert face_model_names(" adaface, facenet ") == ["adaface", "facenet"]
    facenet = {"face_models": "facenet", "facenet_weights": str(pretrain / FACENET_FILE)}
    # the official alignment needs facexlib's RetinaFace; whole crops need nothing more
    with pytest.raises(ComponentError, match="retinaface_weights="):
        build_face_mix(facenet, "cpu")
    mix = build_face_mix({**facenet, "face_alignment": "whole_crop"}, "cpu")
    assert list(mix.embedders) == ["facenet"] and not mix.aligners


class WholeImage:
    """A detector that finds the whole image once (CIDS's detector is not under test)."""

    def detect(self, image: Any, prompt: str) -> Detection:
        return Detection([(0.5, 0.5, 1.0, 1.0)], [0.9])


class Unused:
    """The object encoder of a story without object characters: never asked."""

    def encode(self, images: Any) -> Any:
        raise AssertionError("the object encoder was used for a realistic human")

    def similarity(self, a: Any, b: Any) -> Any:
        raise AssertionError("the object encoder was used for a realistic human")


def test_cids_scores_realistic_humans_with_face_mix(pretrain, tmp_path, monkeypatch):
    monkeypatch.setitem(cids.DETECTORS, "whole", lambda params: WholeImage())
    ref_array, shot_array = noise(48, 40, seed=5), noise(64, 80, seed=6)
    ref = write_image(tmp_path / "refs" / "H" / "00.jpg", ref_array, quality=100)
    shot = write_image(tmp_path / "out" / "shot_01.png", shot_array)
    item = {
        "candidate_shots": {1: shot},
        "characters": {"H": {"name": "Hal", "tag": "realistic_human", "refs": [ref]}},
        "shots": [{"index": 1, "character_key": ["H"]}],
    }
    monkeypatch.setitem(cids.ENCODERS, "unused", lambda params: Unused())
    metric = cids.CIDSMetric(
        detector="whole",
        object_encoder="unused",  # the only character is a realistic human
        face_models="facenet",  # a comma-separated string, as from the command line
        facenet_weights=str(pretrain / FACENET_FILE),
        face_alignment="whole_crop",  # crops embedded whole (the option)
        device="cpu",
    )
    metric.load()
    (result,) = metric.run_batch([item])
    assert result.status == "ok", result.detail
    from PIL import Image

    embedder = FaceNetEmbedder().load(str(pretrain / FACENET_FILE))
    with Image.open(ref.path) as r, Image.open(shot.path) as s:
        a, b = embedder.embed([r.convert("RGB"), s.convert("RGB")])
    assert result.scores["cids_cross_mean"] == round(float(np.dot(a, b)), 4)
    assert result.scores["cids_self_mean"] == 1.0 and result.scores["occm"] == 100.0
