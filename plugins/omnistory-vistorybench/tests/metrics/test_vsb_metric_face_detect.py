"""Face detection and alignment of CIDS's realistic humans against independent numpy references:
SCRFD's decoding, suppression and threshold steps (tiny ONNX graphs, batched or not, fixed or
free input size), ArcFace's 5-point alignment, RetinaFace's priors, decoding and suppression (the
port loaded from a facexlib-style checkpoint) and facexlib's alignment, on drawn faces whose
landmarks are known; then face_mix with the detectors: face-less crops are dropped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from vsb_face_models import build_scrfd, draw_face, retinaface_state, save_retinaface

from omnistory_core.api import ComponentError

cv2 = pytest.importorskip("cv2")
pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")

from omnistory_vistorybench.metrics import _retinaface as rf  # noqa: E402
from omnistory_vistorybench.metrics import _scrfd as scrfd  # noqa: E402

STRIDES = (8, 16, 32)


# -- independent references ---------------------------------------------------------------------
def iou_plus_one(a: np.ndarray, b: np.ndarray) -> float:
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]) + 1)
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]) + 1)
    inter = w * h
    area = (a[2] - a[0] + 1) * (a[3] - a[1] + 1) + (b[2] - b[0] + 1) * (b[3] - b[1] + 1)
    return inter / (area - inter)


def reference_scrfd(outputs: dict[str, np.ndarray], size: int, scale: float, threshold: float):
    """SCRFD's detections written out cell by cell: [(score, box, points)] after greedy
    suppression at IoU 0.4 (the +1 pixel areas), highest score first."""
    found = []
    for stride in STRIDES:
        cells = size // stride
        scores = outputs[f"score_{stride}"].reshape(-1)
        dist = outputs[f"bbox_{stride}"].reshape(-1, 4) * stride
        kps = outputs[f"kps_{stride}"].reshape(-1, 10) * stride
        row = 0
        for y in range(cells):
            for x in range(cells):
                for _anchor in range(2):
                    if scores[row] >= threshold:
                        cx, cy = x * stride, y * stride
                        d = dist[row]
                        box = np.array([cx - d[0], cy - d[1], cx + d[2], cy + d[3]]) / scale
                        pts = np.array(
                            [[cx + kps[row, 2 * i], cy + kps[row, 2 * i + 1]] for i in range(5)]
                        )
                        found.append((float(scores[row]), box, pts / scale))
                    row += 1
    found.sort(key=lambda f: -f[0])
    kept: list[tuple[float, np.ndarray, np.ndarray]] = []
    for face in found:
        if all(iou_plus_one(face[1], k[1]) <= 0.4 for k in kept):
            kept.append(face)
    return kept


def constant_outputs(size: int, seed: int, high: float) -> dict[str, np.ndarray]:
    """Random SCRFD outputs for a fixed ``size`` input, scores below ``high``."""
    rng = np.random.default_rng(seed)
    out = {}
    for stride in STRIDES:
        rows = (size // stride) ** 2 * 2
        out[f"score_{stride}"] = rng.uniform(0.0, high, (rows, 1))
        out[f"bbox_{stride}"] = rng.uniform(0.2, 1.5, (rows, 4))
        out[f"kps_{stride}"] = rng.uniform(-1.0, 1.0, (rows, 10))
    return out


def lstsq_similarity(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """The least-squares similarity ``[[a, -b, tx], [b, a, ty]]`` mapping src to dst."""
    rows, rhs = [], []
    for (x, y), (u, v) in zip(src, dst, strict=True):
        rows += [[x, -y, 1, 0], [y, x, 0, 1]]
        rhs += [u, v]
    a, b, tx, ty = np.linalg.lstsq(np.array(rows, float), np.array(rhs, float), rcond=None)[0]
    return np.array([[a, -b, tx], [b, a, ty]])


def similarity(angle_deg: float, scale: float, shift: tuple[float, float]) -> np.ndarray:
    t = np.deg2rad(angle_deg)
    return np.array(
        [
            [scale * np.cos(t), -scale * np.sin(t), shift[0]],
            [scale * np.sin(t), scale * np.cos(t), shift[1]],
        ]
    )


def apply(matrix: np.ndarray, points: np.ndarray) -> np.ndarray:
    return points @ matrix[:, :2].T + matrix[:, 2]


def dots_image(points: np.ndarray, width: int, height: int) -> np.ndarray:
    """A black BGR image with a white disc (radius 3) at each point."""
    image = np.zeros((height, width, 3), np.uint8)
    ys, xs = np.mgrid[:height, :width]
    for x, y in points:
        image[(xs - x) ** 2 + (ys - y) ** 2 <= 9] = 255
    return image


def centroids(image: np.ndarray, points: np.ndarray, radius: float = 6.0) -> np.ndarray:
    """The brightness centroid near each of ``points``."""
    grey = image.astype(float).mean(axis=2)
    ys, xs = np.mgrid[: grey.shape[0], : grey.shape[1]]
    out = []
    for x, y in points:
        near = ((xs - x) ** 2 + (ys - y) ** 2 <= radius**2) * grey
        out.append([(near * xs).sum() / near.sum(), (near * ys).sum() / near.sum()])
    return np.array(out)


def bilinear_warp(image: np.ndarray, matrix: np.ndarray, size: int, border: Any) -> np.ndarray:
    """Inverse-mapped bilinear warp in numpy (what warpAffine computes, up to its 1/32-pixel
    coordinate rounding)."""
    inverse = np.linalg.inv(np.vstack([matrix, [0, 0, 1]]))[:2]
    ys, xs = np.mgrid[:size, :size].astype(float)
    sx = inverse[0, 0] * xs + inverse[0, 1] * ys + inverse[0, 2]
    sy = inverse[1, 0] * xs + inverse[1, 1] * ys + inverse[1, 2]
    h, w = image.shape[:2]
    padded = np.empty((h + 2, w + 2, 3))
    padded[:] = border
    padded[1:-1, 1:-1] = image
    x0, y0 = np.floor(sx).astype(int), np.floor(sy).astype(int)
    fx, fy = (sx - x0)[..., None], (sy - y0)[..., None]

    def at(y: np.ndarray, x: np.ndarray) -> np.ndarray:
        return padded[np.clip(y + 1, 0, h + 1), np.clip(x + 1, 0, w + 1)]

    out = (
        at(y0, x0) * (1 - fx) * (1 - fy)
        + at(y0, x0 + 1) * fx * (1 - fy)
        + at(y0 + 1, x0) * (1 - fx) * fy
        + at(y0 + 1, x0 + 1) * fx * fy
    )
    return out


# -- SCRFD ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("batched", [False, True])
def test_scrfd_decoding_and_suppression_match_the_reference(tmp_path: Path, batched: bool):
    outputs = constant_outputs(32, seed=4, high=1.0)
    model = build_scrfd(tmp_path / "scrfd.onnx", size=32, batched=batched, outputs=outputs)
    detector = scrfd.ScrfdDetector().load(model)
    assert detector.input_size == (32, 32) and detector.batched is batched
    image = draw_face(50, 40, None)[:, :, ::-1].copy()  # 50 wide, 40 high: scale 25 / 40
    found = detector.candidates(image)
    for threshold in (0.45, 0.8):
        dets, kps = detector.select(found, threshold)
        want = reference_scrfd(outputs, 32, 25 / 40, threshold)
        assert len(dets) == len(want) > 1
        assert np.allclose(dets[:, 4], [w[0] for w in want], atol=1e-6)
        assert np.allclose(dets[:, :4], np.stack([w[1] for w in want]), atol=1e-3)
        assert np.allclose(kps, np.stack([w[2] for w in want]), atol=1e-3)
    # the letterbox: the image resized into the top-left corner, black elsewhere
    canvas, scale = scrfd.letterbox(image, (32, 32))
    assert scale == 25 / 40 and canvas[25:].max() == 0 and canvas[:25, :32].max() > 0


def test_threshold_steps_find_a_face_down_to_015(tmp_path: Path):
    steps = scrfd.thresholds()
    assert steps == [0.45, 0.35, 0.45 - 0.1 - 0.1, 0.45 - 0.1 - 0.1 - 0.1]
    image = draw_face(32, 32, None)[:, :, ::-1].copy()
    for top, found in ((0.3, True), (0.15, True), (0.149, False)):
        outputs = constant_outputs(32, seed=5, high=0.1)
        outputs["score_16"][3, 0] = top  # the only candidate above 0.1
        path = build_scrfd(tmp_path / f"scrfd_{top}.onnx", size=32, outputs=outputs)
        landmarks = scrfd.ScrfdDetector().load(path).first_face(image)
        if not found:
            assert landmarks is None
            continue
        (best,) = [w for w in reference_scrfd(outputs, 32, 1.0, 0.11)]
        assert np.allclose(landmarks, best[2], atol=1e-4)


def test_scrfd_with_a_free_input_size_uses_640_and_finds_a_bright_face(tmp_path: Path):
    detector = scrfd.ScrfdDetector().load(build_scrfd(tmp_path / "free.onnx"))
    assert detector.input_size == scrfd.DET_SIZE
    face = draw_face(120, 100, (30, 20, 90, 85))[:, :, ::-1].copy()
    landmarks = detector.first_face(face)
    assert landmarks is not None and landmarks.shape == (5, 2)
    assert (30 <= landmarks[:, 0]).all() and (landmarks[:, 0] <= 90).all()
    assert detector.first_face(draw_face(120, 100, None)[:, :, ::-1].copy()) is None


def test_scrfd_refuses_other_graphs(tmp_path: Path):
    from test_vsb_metric_arcface import build_tiny_glintr

    with pytest.raises(ComponentError, match="not an SCRFD detector with keypoints"):
        scrfd.ScrfdDetector().load(build_tiny_glintr(tmp_path / "glintr.onnx"))
    (tmp_path / "junk.onnx").write_bytes(b"not onnx")
    with pytest.raises(ComponentError, match="cannot be loaded as an ONNX model"):
        scrfd.ScrfdDetector().load(tmp_path / "junk.onnx")


def test_norm_crop_puts_known_landmarks_on_arcfaces_template():
    truth = similarity(12.0, 1.8, (60.0, 35.0))  # template -> image
    landmarks = apply(truth, scrfd.ARCFACE_TEMPLATE.astype(float))
    matrix = scrfd.arcface_matrix(landmarks)
    assert np.allclose(matrix, lstsq_similarity(landmarks, scrfd.ARCFACE_TEMPLATE), atol=1e-6)
    inverse = np.linalg.inv(np.vstack([truth, [0, 0, 1]]))[:2]
    assert np.allclose(matrix, inverse, atol=1e-6)
    image = dots_image(landmarks, 260, 280)
    aligned = scrfd.norm_crop(image, landmarks)
    assert aligned.shape == (112, 112, 3) and aligned.dtype == np.uint8
    assert np.allclose(centroids(aligned, scrfd.ARCFACE_TEMPLATE), scrfd.ARCFACE_TEMPLATE, atol=0.3)
    reference = bilinear_warp(image, matrix, 112, 0.0)
    assert np.abs(aligned - reference).mean() < 1.0
    # noisy landmarks: still the least-squares similarity
    noisy = landmarks + np.random.default_rng(0).normal(0, 1.5, landmarks.shape)
    assert np.allclose(
        scrfd.arcface_matrix(noisy), lstsq_similarity(noisy, scrfd.ARCFACE_TEMPLATE), atol=1e-6
    )


# -- RetinaFace (facexlib) ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def retinaface(tmp_path_factory) -> Path:
    return save_retinaface(tmp_path_factory.mktemp("facexlib") / rf.RETINAFACE_FILE)


def reference_priors(height: int, width: int) -> np.ndarray:
    rows = []
    for sizes, step in (((16, 32), 8), ((64, 128), 16), ((256, 512), 32)):
        for i in range(-(-height // step)):
            for j in range(-(-width // step)):
                for size in sizes:
                    cx, cy = (j + 0.5) * step / width, (i + 0.5) * step / height
                    rows.append([cx, cy, size / width, size / height])
    return np.array(rows)


def iou(a: np.ndarray, b: np.ndarray) -> float:
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = w * h
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def test_retinaface_loads_facexlib_checkpoints(retinaface: Path, tmp_path: Path):
    net = rf.load_retinaface(str(retinaface))
    assert isinstance(net, rf.RetinaFace) and not net.training
    # without the DataParallel prefix it loads the same
    bare = tmp_path / "bare.pth"
    torch.save(retinaface_state(prefix=""), bare)
    rf.load_retinaface(str(bare))
    wrong = tmp_path / "wrong.pth"
    torch.save({"body.conv1.weight": torch.zeros(1)}, wrong)
    with pytest.raises(ComponentError, match="does not fit RetinaFace-ResNet50"):
        rf.load_retinaface(str(wrong))
    with pytest.raises(ComponentError, match="retinaface_weights="):
        rf.load_retinaface(None)


def test_retinaface_detection_matches_the_reference(retinaface: Path):
    net = rf.load_retinaface(str(retinaface))
    bgr = draw_face(96, 80, (20, 10, 70, 66))[:, :, ::-1].copy()
    got = rf.detect_faces(net, bgr)
    # the network's raw outputs, decoded and suppressed by hand
    x = torch.from_numpy(bgr.astype(np.float32).transpose(2, 0, 1).copy())[None]
    x = x - torch.tensor([104.0, 117.0, 123.0]).view(1, 3, 1, 1)
    with torch.no_grad():
        loc, conf, marks = (t[0].numpy().astype(float) for t in net(x))
    priors = reference_priors(80, 96)
    assert len(priors) == len(loc) == len(conf)  # the network's cells are the priors'
    faces = []
    for p, d, c, m in zip(priors, loc, conf, marks, strict=True):
        if c[1] <= 0.97:
            continue
        cx, cy = p[0] + d[0] * 0.1 * p[2], p[1] + d[1] * 0.1 * p[3]
        w, h = p[2] * np.exp(d[2] * 0.2), p[3] * np.exp(d[3] * 0.2)
        box = np.array([(cx - w / 2) * 96, (cy - h / 2) * 80, (cx + w / 2) * 96, (cy + h / 2) * 80])
        pts = [(p[0] + m[2 * k] * 0.1 * p[2], p[1] + m[2 * k + 1] * 0.1 * p[3]) for k in range(5)]
        faces.append((c[1], box, np.array(pts) * [96, 80]))
    assert len(faces) > 1
    faces.sort(key=lambda f: -f[0])
    kept: list[Any] = []
    for face in faces:
        if all(iou(face[1], k[1]) <= 0.4 for k in kept):
            kept.append(face)
    assert got.shape == (len(kept), 15)
    assert np.allclose(got[:, 4], [k[0] for k in kept], atol=1e-6)
    assert np.allclose(got[:, :4], np.stack([k[1] for k in kept]), atol=1e-3)
    assert np.allclose(got[:, 5:].reshape(-1, 5, 2), np.stack([k[2] for k in kept]), atol=1e-3)
    assert rf.detect_faces(net, draw_face(96, 80, None)[:, :, ::-1].copy()).shape == (0, 15)


def test_facexlib_alignment_puts_known_landmarks_on_its_template():
    template = rf.face_template(112)
    assert np.allclose(template[0], [192.98138 * 112 / 512, 239.94708 * 112 / 512])
    truth = similarity(-9.0, 1.4, (-10.0, -15.0))  # the crop corner lies outside
    landmarks = apply(truth, template)
    image = dots_image(landmarks, 220, 200)
    aligned = rf.warp_face(image, landmarks)
    assert aligned.shape == (112, 112, 3)
    assert np.allclose(centroids(aligned, template), template, atol=0.3)
    matrix = lstsq_similarity(landmarks, template)
    assert np.abs(aligned - bilinear_warp(image, matrix, 112, rf.BORDER_BGR)).mean() < 1.0
    # outside the image: facexlib's grey border
    assert tuple(aligned[0, 0]) == rf.BORDER_BGR


# -- face_mix with the detectors ------------------------------------------------------------------
@pytest.fixture(scope="module")
def pretrain(tmp_path_factory, retinaface: Path) -> dict[str, str]:
    from omnistory_vistorybench.metrics._face_nets import InceptionResnetV1
    from omnistory_vistorybench.metrics.face import ARCFACE_FILE, FACENET_FILE, SCRFD_FILE
    from test_vsb_metric_arcface import build_tiny_glintr

    root = tmp_path_factory.mktemp("pretrain_detect")
    glintr = build_tiny_glintr(root / ARCFACE_FILE, seed=2)
    build_scrfd(glintr.parent / SCRFD_FILE)  # beside glintr100.onnx, as in the pack
    torch.manual_seed(0)
    (root / FACENET_FILE).parent.mkdir(parents=True)
    torch.save(InceptionResnetV1().state_dict(), root / FACENET_FILE)
    return {
        "arcface_weights": str(glintr),
        "facenet_weights": str(root / FACENET_FILE),
        "retinaface_weights": str(retinaface),
        "face_models": "arcface,facenet",
    }


def test_face_mix_finds_aligns_and_drops_faceless_crops(pretrain: dict[str, str]):
    from omnistory_vistorybench.metrics.face import build_face_mix
    from PIL import Image

    mix = build_face_mix(pretrain, "cpu")
    face = Image.fromarray(draw_face(120, 100, (30, 20, 90, 85), seed=1))
    empty = Image.fromarray(draw_face(90, 70, None, seed=2))
    encoded = mix.encode([empty, face])
    assert encoded.indices == [1] and set(encoded.features[0]) == {"arcface", "facenet"}
    # each model's feature is its network on the face its detector aligned
    bgr = np.asarray(face)[:, :, ::-1].copy()
    arcface = mix.embedders["arcface"]
    detector = scrfd.ScrfdDetector().load(
        str(Path(pretrain["arcface_weights"]).parent / "scrfd_10g_bnkps.onnx")
    )
    aligned = scrfd.norm_crop(bgr, detector.first_face(bgr), 112)
    assert np.allclose(
        encoded.features[0]["arcface"], arcface.embed_faces(aligned[None])[0], atol=1e-5
    )
    warped = rf.warp_face(
        bgr, rf.detect_faces(rf.load_retinaface(pretrain["retinaface_weights"]), bgr)[0, 5:15]
    )
    facenet = mix.embedders["facenet"]
    assert np.allclose(
        encoded.features[0]["facenet"], facenet.embed_faces(warped[None])[0], atol=1e-5
    )
    # whole crops (the option): every crop is a face, resized whole
    whole = build_face_mix({**pretrain, "face_alignment": "whole_crop"}, "cpu")
    both = whole.encode([empty, face])
    assert both.indices == [0, 1]
    assert not np.allclose(both.features[1]["arcface"], encoded.features[0]["arcface"], atol=1e-3)
    with pytest.raises(ComponentError, match="unknown face_alignment"):
        build_face_mix({**pretrain, "face_alignment": "sideways"}, "cpu")
    # the detectors' weights: SCRFD beside glintr100.onnx unless named; RetinaFace named
    with pytest.raises(ComponentError, match="retinaface_weights="):
        build_face_mix({**pretrain, "retinaface_weights": None}, "cpu")
    with pytest.raises(ComponentError, match="scrfd_weights="):
        build_face_mix({**pretrain, "scrfd_weights": "/nowhere/scrfd.onnx"}, "cpu")
    mix.unload()
