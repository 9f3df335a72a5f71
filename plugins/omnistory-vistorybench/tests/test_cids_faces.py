"""CIDS's face path end to end through the real command line, against an independent
implementation of the official rules.

A story of two realistic humans (Ann, Bob) is drawn here: their references (one of Ann's has no
face: its crop is dropped), and shots with a face-less box beside the faces, a shot whose only
box is face-less (nobody is matched there) and a shot with two faces for one character.
``evaluate --outputs`` scores it with ``metric=cids`` on tiny models built by the tests and
loaded by the metric's own loading code: a tiny SCRFD and glintr100-like ONNX pair for ArcFace,
a RetinaFace-ResNet50 checkpoint and random FaceNet weights, a tiny CLIP.  The detector of
character boxes (GroundingDINO, tested on its own in metrics/test_vsb_metric_grounding.py) is
replaced in the command's process by boxes scripted per image size, registered through
``cids.register_detector`` from a ``sitecustomize`` module.

The reference below re-implements ``cids_evaluator.py``'s story loop (top-1 reference boxes,
face-less reference crops dropped, candidates by decreasing logit, the Hungarian assignment of
characters to the candidates in which a face was found, cross/self means rounded to 4 decimals,
the mirrored copy-paste softmax, OCCM) on per-crop face features.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from omnistory_testkit import run_cli

torch = pytest.importorskip("torch")
pytest.importorskip("cv2")
pytest.importorskip("onnxruntime")
pytest.importorskip("transformers")

sys.path.insert(0, str(Path(__file__).parent / "metrics"))
from test_vsb_metric_arcface import build_tiny_glintr  # noqa: E402
from vsb_face_models import build_scrfd, draw_face, save_retinaface  # noqa: E402
from vsb_metric_images import build_tiny_clip  # noqa: E402

ANN, BOB = (240, 200, 180), (190, 215, 250)
ANN_LATER = (232, 206, 172)  # Ann in another light: her self-similarity is below 1
#: image name -> (width, height, [(face tint or None, (x1, y1, x2, y2), detector score)])
IMAGES: dict[str, tuple[int, int, list[tuple[Any, tuple[int, int, int, int], float]]]] = {
    "Ann/00.jpg": (130, 150, [(ANN, (20, 24, 110, 130), 0.9)]),
    "Ann/01.jpg": (126, 140, [(None, (16, 20, 106, 120), 0.8)]),  # no face in its crop
    "Bob/00.jpg": (134, 150, [(BOB, (20, 24, 110, 130), 0.9)]),
    "shot_01.png": (
        320,
        160,
        [
            (None, (216, 20, 300, 130), 0.95),  # the best logit, and face-less
            (ANN, (10, 20, 100, 126), 0.9),
            (BOB, (110, 20, 200, 126), 0.8),
        ],
    ),
    "shot_02.png": (150, 110, [(None, (20, 10, 110, 100), 0.9)]),  # Ann's shot: no face
    "shot_03.png": (
        240,
        150,
        [(ANN, (10, 20, 100, 126), 0.7), (BOB, (120, 20, 210, 126), 0.85)],
    ),
    "shot_04.png": (210, 150, [(ANN_LATER, (10, 20, 100, 126), 0.6)]),
}
SHOTS = [(1, ["Ann", "Bob"]), (2, ["Ann"]), (3, ["Bob"]), (4, ["Ann", "Bob"])]

SITECUSTOMIZE = '''
import json, os
from omnistory_vistorybench.metrics import cids
from omnistory_vistorybench.metrics.clip_encoder import Detection


class Scripted:
    """Boxes per image size ("WxH"), normalised (cx, cy, w, h) with their logits."""

    def __init__(self, table):
        self.table = table

    def detect(self, image, prompt):
        rows = self.table.get("%dx%d" % image.size, [])
        return Detection([r[0] for r in rows], [r[1] for r in rows])


def _scripted(params):
    with open(os.environ["VSB_SCRIPTED_BOXES"], encoding="utf-8") as f:
        return Scripted(json.load(f))


cids.register_detector("scripted", _scripted)
'''


def paint(width: int, height: int, faces: list[Any], seed: int) -> np.ndarray:
    """A dark image with each face drawn in its box (the same face pixels wherever it is)."""
    image = draw_face(width, height, None, seed=seed)
    for tint, (x1, y1, x2, y2), _ in faces:
        if tint is not None:
            patch = draw_face(x2 - x1, y2 - y1, (6, 8, x2 - x1 - 6, y2 - y1 - 4), tint, seed=7)
            image[y1:y2, x1:x2] = patch
    return image


def normalised(box: tuple[int, int, int, int], width: int, height: int) -> list[float]:
    x1, y1, x2, y2 = box
    return [(x1 + x2) / 2 / width, (y1 + y2) / 2 / height, (x2 - x1) / width, (y2 - y1) / height]


@pytest.fixture(scope="module")
def story(tmp_path_factory) -> dict[str, Any]:
    from PIL import Image

    root = tmp_path_factory.mktemp("cids_faces")
    data, out = root / "data" / "ViStory" / "01", root / "outputs"
    shots_dir = out / "drawn" / "base" / "en" / "20250301_100000" / "01" / "shots"
    boxes: dict[str, list[Any]] = {}
    for i, (name, (width, height, faces)) in enumerate(IMAGES.items()):
        path = shots_dir / name if name.startswith("shot") else data / "image" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(paint(width, height, faces, seed=i)).save(path, quality=100)
        boxes[f"{width}x{height}"] = [
            (normalised(box, width, height), score) for _, box, score in faces
        ]
    characters = {
        key: {
            "tag": "realistic_human",
            "name_en": key,
            "name_ch": key,
            "prompt_en": f"{key}, a person",
            "prompt_ch": key,
        }
        for key in ("Ann", "Bob")
    }
    shots = [
        {
            "index": index,
            "Plot Correspondence": {"en": "p", "ch": "p"},
            "Setting Description": {"en": "s", "ch": "s"},
            "Shot Perspective Design": {"en": "c", "ch": "c"},
            "Characters Appearing": {"en": keys, "ch": keys},
            "Static Shot Description": {"en": "a", "ch": "a"},
        }
        for index, keys in SHOTS
    ]
    story_json = {"Story_type": {"en": "Test", "ch": "Test"}, "Characters": characters}
    story_json["Shots"] = shots
    (data / "story.json").write_text(json.dumps(story_json), encoding="utf-8")
    site = root / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    (root / "boxes.json").write_text(json.dumps(boxes), encoding="utf-8")
    return {"root": root, "data": data, "outputs": out, "site": site, "boxes": boxes}


@pytest.fixture(scope="module")
def weights(tmp_path_factory) -> dict[str, str]:
    from omnistory_vistorybench.metrics._face_nets import InceptionResnetV1
    from omnistory_vistorybench.metrics.face import (
        ARCFACE_FILE,
        FACENET_FILE,
        RETINAFACE_FILE,
        SCRFD_FILE,
    )

    pretrain = tmp_path_factory.mktemp("pretrain")
    glintr = build_tiny_glintr(pretrain / ARCFACE_FILE, seed=5)
    build_scrfd(glintr.parent / SCRFD_FILE)
    torch.manual_seed(3)
    facenet = pretrain / FACENET_FILE
    facenet.parent.mkdir(parents=True)
    torch.save(InceptionResnetV1().state_dict(), facenet)
    return {
        "arcface_weights": str(glintr),
        "facenet_weights": str(facenet),
        "retinaface_weights": str(save_retinaface(pretrain / "facexlib" / RETINAFACE_FILE)),
        "face_models": "arcface,facenet",
        "clip_model": str(build_tiny_clip(pretrain / "clip")),
    }


# -- the reference --------------------------------------------------------------------------------
def crops_of(path: Path, story: dict[str, Any]) -> list[Any]:
    """The candidate crops of an image, by decreasing logit."""
    from omnistory_vistorybench.metrics.math import crop_rect
    from PIL import Image

    with Image.open(path) as img:
        image = img.convert("RGB")
    width, height = image.size
    rows = sorted(story["boxes"].get(f"{width}x{height}", []), key=lambda r: -r[1])
    # the official box arithmetic (tested in metrics/test_vsb_metric_math.py)
    rects = [crop_rect(box, width, height) for box, _ in rows]
    return [image.crop(rect) for rect in rects if rect is not None]


class Faces:
    """Per-crop face features from the metric's face_mix (None: no model found a face)."""

    def __init__(self, params: dict[str, str]):
        from omnistory_vistorybench.metrics.face import build_face_mix

        self.mix = build_face_mix(params, "cpu")

    def feature(self, crop: Any) -> Any:
        encoded = self.mix.encode([crop])
        return encoded.features[0] if encoded.indices else None

    @staticmethod
    def sim(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> float:
        common = [m for m in a if m in b]
        return sum(float(a[m] @ b[m]) for m in common) / len(common) if common else 0.0


def reference(story: dict[str, Any], faces: Faces) -> dict[str, Any]:
    from PIL import ImageOps
    from scipy.optimize import linear_sum_assignment

    refs, mirrors = {}, {}
    for key in ("Ann", "Bob"):
        crops = [
            crops_of(p, story)[0] for p in sorted((story["data"] / "image" / key).glob("*.jpg"))
        ]
        feats = [(c, faces.feature(c)) for c in crops]
        kept = [(c, f) for c, f in feats if f is not None]
        assert kept, key
        refs[key] = [f for _, f in kept]
        primary = kept[0][0]
        pair = [faces.feature(primary), faces.feature(ImageOps.mirror(primary))]
        pair = [f for f in pair if f is not None]
        mirrors[key] = pair * 2 if len(pair) == 1 else pair
    shots_dir = next(story["outputs"].rglob("shots"))
    matched: dict[str, list[Any]] = {"Ann": [], "Bob": []}
    occm, assigned = [], {}
    for index, keys in SHOTS:
        crops = crops_of(shots_dir / f"shot_{index:02d}.png", story)
        occm.append(100 * math.exp(-abs(len(crops) - len(keys)) / (1e-6 + len(keys))))
        feats = [faces.feature(c) for c in crops]
        sim = np.full((len(keys), len(crops)), -1e6)
        for r, key in enumerate(keys):
            for k, f in enumerate(feats):
                if f is not None:  # a face-less box stays invalid
                    sim[r, k] = max(faces.sim(f, ref) for ref in refs[key])
        if not crops or (sim == -1e6).all():
            assigned[index] = {}
            continue
        rows, cols = linear_sum_assignment(-sim)
        pairs = zip(rows, cols, strict=True)
        assigned[index] = {keys[r]: int(c) for r, c in pairs if sim[r, c] != -1e6}
        for key, c in assigned[index].items():
            matched[key].append(feats[c])
    cross, self_, rates = [], [], []
    for key in ("Ann", "Bob"):
        feats = matched[key]
        if not feats:
            cross.append(0.0)
            self_.append(0.0)
            continue
        cross.append(
            round(float(np.mean([[faces.sim(f, r) for r in refs[key]] for f in feats])), 4)
        )
        pairs = [
            faces.sim(feats[i], feats[j])
            for i in range(len(feats))
            for j in range(i + 1, len(feats))
        ]
        self_.append(round(float(np.mean(pairs)), 4) if pairs else 1.0)
        probs = []
        for f in feats:
            s = (
                np.clip([faces.sim(f, mirrors[key][0]), faces.sim(f, mirrors[key][1])], -1, 1)
                / 0.01
            )
            e = np.exp(s - s.max())
            probs.append(e[0] / e.sum())
        rates.append(float(np.mean(probs)))
    return {
        "assigned": assigned,
        "cids_cross_mean": round(sum(cross) / 2, 4),
        "cids_self_mean": round(sum(self_) / 2, 4),
        "occm": round(sum(occm) / len(occm), 4),
        "copy_paste_score": sum(rates) / len(rates) if rates else 0.0,
    }


def test_the_face_path_of_cids_through_the_command_line(story: dict[str, Any], weights):
    settings = {**weights, "detector": "scripted", "device": "cpu"}
    flags = [arg for k, v in settings.items() for arg in ("--set", f"metric.cids.{k}={v}")]
    env = {
        "PYTHONPATH": str(story["site"]),
        "VSB_SCRIPTED_BOXES": str(story["root"] / "boxes.json"),
    }
    run_dir = story["root"] / "scores"
    done = run_cli(
        "evaluate",
        "--task",
        "vistorybench",
        "--outputs",
        str(story["outputs"]),
        f"dataset.root={story['data'].parent.parent}",
        str(run_dir),
        "--metrics",
        "cids",
        *flags,
        "--no-report",
        "--no-progress",
        cwd=story["root"],
        env=env,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = [json.loads(x) for x in (run_dir / "scores.jsonl").read_text().splitlines()]
    scores = {r["criterion"]: r for r in lines if r["evaluator"] == "cids"}
    faces = Faces({k: v for k, v in weights.items() if k != "clip_model"})
    want = reference(story, faces)
    # the scenario holds what it is meant to: a face-less box beside faces, a shot matching nobody
    assert want["assigned"][2] == {} and set(want["assigned"][1]) == {"Ann", "Bob"}
    assert want["assigned"][1] == {"Ann": 1, "Bob": 2}  # not the face-less best-logit box 0
    assert want["cids_self_mean"] < 1.0
    for key in ("cids_cross_mean", "cids_self_mean", "occm", "copy_paste_score"):
        assert scores[key]["status"] == "ok", scores[key]
        assert scores[key]["score"] == pytest.approx(want[key], abs=1e-6), key
    # the matches, from the metric's audit detail
    audit = run_dir / "audit" / "metric-cids.jsonl"
    detail = json.loads(audit.read_text(encoding="utf-8").splitlines()[0])["detail"]
    for index, expected in want["assigned"].items():
        shot = detail["shots"][str(index)]
        got = {k for k, v in shot["cross_sim"].items() if v != 0.0}
        assert got == set(expected), (index, shot)
