"""Character consistency (``cids_cross_mean``, ``cids_self_mean``, ``occm``,
``copy_paste_score``) and single-character action (``single_character_action``): the official
CIDS algorithm over pluggable detectors and encoders.

Per story, as the official evaluator (``bench/content/cids_evaluator.py``) does:

1. **References.**  For each story character (story order), its reference files (sorted; only
   ``.jpg`` with ``faithful``) are detected with the prompt ``"character"`` and cropped to the
   top-logit box (an image without a box is skipped); the crops are embedded with the
   character's encoder.  No crop, or no embeddable crop: the whole reference images instead.
   Still nothing: the story cannot be scored (the official asserts).  The first embeddable
   reference is the *primary* one; it and its mirror image are embedded for copy-paste.
2. **Shots.**  For each story shot with a listed output: a missing file scores OCCM with D=0;
   a shot without characters is skipped; otherwise every box on the output (by decreasing
   logit) is a candidate crop.  ``S[c, k]`` = max over character ``c``'s references of
   ``sim(crop k, ref)``, the Hungarian assignment (:func:`.math.assign_characters`) gives each
   character at most one crop, and the matched crops are collected per character.  OCCM
   compares D (usable boxes) with E (listed characters).
3. **Story.**  Per character: cross = mean of (matched crops x references), self = mean of the
   strict upper triangle of (crops x crops) (1.0 for one crop), copy-paste rate from the
   similarities to the primary reference and its mirror; characters never matched count 0.0.
   The story values are the means of :mod:`.math`.
4. **Single-character action** (only with a judge endpoint, :mod:`.single_action`): one VLM
   question per matched crop of each shot that reached the assignment.

The detector and the encoders are looked up by name in :data:`DETECTORS` and :data:`ENCODERS`
(``register_detector`` / ``register_encoder`` add more).  Built in:

* ``groundingdino`` (the official detector; :class:`.grounding.GroundingDinoDetector`,
  transformers' port of GroundingDINO on an HF checkpoint, a documented departure);
* ``clip`` (:class:`.clip_encoder.CLIPImageEncoder`), for every tag but ``realistic_human``;
* ``face_mix`` (:class:`.face.FaceMixEncoder`, the official default of ``realistic_human``):
  the mean per-model cosine over ``face_models`` (FaceNet and AdaFace are ports loaded from the
  official weight files, ArcFace runs the official ``glintr100.onnx`` with onnxruntime; a model
  whose weights parameter names no file raises a ``skipped:`` error);
* ``arcface`` (the official's single-model alternative): ArcFace's cosine alone.

A story that needs a model that is not available is an ``error`` row (recomputed once it
exists), never a 0.  :mod:`omnistory_vistorybench.fidelity` lists where these ports differ from
the official, and the options that depart from it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from omnistory_core.api import ComponentError, EvalResult, Metric, Param
from omnistory_vistorybench.metrics import math as vmath
from omnistory_vistorybench.metrics._common import (
    candidate_shots,
    media_exists,
    media_path,
    open_rgb,
    release_torch_memory,
    resolve_device,
    shot_character_keys,
    shot_index,
    shot_text,
    story_characters,
    story_shots,
)
from omnistory_vistorybench.metrics.clip_encoder import (
    OFFICIAL_CLIP,
    Detection,
    Detector,
    Encoded,
    Encoder,
)
from omnistory_vistorybench.metrics.face import (
    ADAFACE_FILE,
    ARCFACE_FILE,
    FACE_ALIGNMENTS,
    FACENET_FILE,
    OFFICIAL_FACE_MODELS,
    RETINAFACE_FILE,
    SCRFD_FILE,
    scrfd_weights,
)
from omnistory_vistorybench.metrics.single_action import (
    ActionShot,
    SingleCharacterAction,
    read_rubric,
    rubric_sha256,
)

DetectorFactory = Callable[[Mapping[str, Any]], Detector]
EncoderFactory = Callable[[Mapping[str, Any]], Encoder]

#: detectors by name: a factory taking the metric's parameters
DETECTORS: dict[str, DetectorFactory] = {}
#: encoders by name: a factory taking the metric's parameters
ENCODERS: dict[str, EncoderFactory] = {}
#: the tag whose characters the face encoder embeds; every other tag uses ``object_encoder``
FACE_TAG = "realistic_human"
ACTION = "single_character_action"
#: hosts whose judge server runs on this machine: no key, no bill
LOOPBACK = ("localhost", "127.0.0.1", "::1")
#: the judge's max_tokens (the official's), the dry run's output bound per question
JUDGE_MAX_TOKENS = 512
#: CIDS's references: the dataset's (``origin``) or the method's ``chars/`` (``mid-gen``)
REF_MODES = ("origin", "mid-gen")
CRITERIA = (
    "cids_cross_mean",
    "cids_self_mean",
    "occm",
    "copy_paste_score",
    "single_character_action",
)


def register_detector(name: str, factory: DetectorFactory) -> None:
    DETECTORS[name] = factory


def register_encoder(name: str, factory: EncoderFactory) -> None:
    ENCODERS[name] = factory


def _clip(params: Mapping[str, Any]) -> Encoder:
    from omnistory_vistorybench.metrics.clip_encoder import CLIPImageEncoder

    return CLIPImageEncoder(
        device=resolve_device(params.get("device")),
        batch_size=int(params.get("image_batch") or 16),
    ).load(str(params.get("clip_model") or OFFICIAL_CLIP))


def _groundingdino(params: Mapping[str, Any]) -> Detector:
    from omnistory_vistorybench.metrics.grounding import (
        OFFICIAL_GROUNDING_DINO,
        GroundingDinoDetector,
    )

    return GroundingDinoDetector(
        device=resolve_device(params.get("device")),
        box_threshold=float(params.get("box_threshold", 0.25)),
        text_threshold=float(params.get("text_threshold", 0.25)),
    ).load(str(params.get("detector_checkpoint") or OFFICIAL_GROUNDING_DINO))


def _face_mix(params: Mapping[str, Any]) -> Encoder:
    from omnistory_vistorybench.metrics.face import build_face_mix

    return build_face_mix(params, resolve_device(params.get("device")))


def _arcface(params: Mapping[str, Any]) -> Encoder:
    from omnistory_vistorybench.metrics.face import build_arcface

    return build_arcface(params, resolve_device(params.get("device")))


register_encoder("clip", _clip)
register_detector("groundingdino", _groundingdino)
register_encoder("face_mix", _face_mix)
register_encoder("arcface", _arcface)


def judge_name(key: str, info: Mapping[str, Any], faithful: bool = True) -> str:
    """The character name the single-character judge is told: the English one with
    ``faithful`` (the official reloads every story in English, so a ``ch`` run's judge reads
    ``name_en``), else the name in the run's language."""
    name = info.get("name_en") if faithful else None
    return str(name or info.get("name") or key)


class StoryUnscorable(Exception):
    """The story cannot be scored from its inputs (an ``invalid`` row)."""


def _crops(image: Any, detection: Detection, order: list[int]) -> list[Any]:
    """The usable crops of ``image`` for the boxes of ``detection`` in ``order``."""
    w, h = image.size
    out = []
    for i in order:
        rect = vmath.crop_rect(detection.boxes[i], w, h)
        if rect is not None:
            out.append(image.crop(rect))
    return out


def _duplicate_single(encoded: Encoded) -> list[Any]:
    """The (original, mirrored) features of the primary reference; one of them missing: the
    other twice, as the official code does."""
    feats = list(encoded.features)
    return feats * 2 if len(feats) == 1 else feats[:2]


class StoryScorer:
    """One story through steps 1-3 of the module docstring."""

    def __init__(
        self,
        detector: Detector,
        encoder_for: Callable[[str], Encoder],
        *,
        prompt: str = "character",
        faithful: bool = True,
        action: SingleCharacterAction | None = None,
        ref_mode: str = "origin",
    ):
        self.detector = detector
        self.encoder_for = encoder_for
        self.prompt = prompt
        self.faithful = faithful
        #: ``origin`` (the dataset's references) or ``mid-gen`` (the method's ``chars/``)
        self.ref_mode = ref_mode
        self.generated: list[Any] = []
        #: the single-character-action judge; None: the criterion is not produced
        self.action = action

    def reference_media(self, key: str, info: Mapping[str, Any]) -> list[Any]:
        """The reference images of one character: the dataset's (``origin``; only ``.jpg``
        with ``faithful``, sorted), or with ``mid-gen`` the method's own image of it, the
        first ``chars/`` file whose name before its first dot is the key or contains the
        character's English name (the official's rule); none: the story is not scorable."""
        if self.ref_mode == "mid-gen":
            name = judge_name(key, info, faithful=True)
            for media in self.generated:
                stem = os.path.basename(str(media_path(media))).split(".")[0]
                if stem == key or name in stem:
                    return [media]
            raise StoryUnscorable(f"character {key!r}: no image of it among the method's chars/")
        by_path = {media_path(m): m for m in info.get("refs") or []}
        paths = vmath.cids_reference_filter([p for p in by_path if p], faithful=self.faithful)
        return [by_path[p] for p in paths]

    def references(self, key: str, info: Mapping[str, Any]) -> tuple[list[Any], list[Any]]:
        """(reference features, [primary, mirrored primary] features) of one character."""
        from PIL import ImageOps

        encoder = self.encoder_for(str(info.get("tag") or ""))
        images = [self._open(m) for m in self.reference_media(key, info)]
        crops = []
        for image in images:
            det = self.detector.detect(image, self.prompt)
            if len(det):
                crops.extend(_crops(image, det, det.order()[:1]))
        encoded = encoder.encode(crops) if crops else Encoded()
        if not encoded:
            crops = images
            encoded = encoder.encode(images) if images else Encoded()
        if not encoded:
            raise StoryUnscorable(f"character {key!r}: no usable reference image")
        primary = crops[encoded.indices[0]]
        mirrored = encoder.encode([primary, ImageOps.mirror(primary)])
        if not mirrored:
            raise StoryUnscorable(f"character {key!r}: the primary reference cannot be embedded")
        return list(encoded.features), _duplicate_single(mirrored)

    def _open(self, media: Any) -> Any:
        try:
            return open_rgb(media)
        except Exception as exc:  # an unreadable file: the story is not scorable
            raise StoryUnscorable(f"{media_path(media)}: cannot open image: {exc}") from exc

    def score(self, item: Mapping[str, Any]) -> EvalResult:
        characters = story_characters(item)
        outputs = candidate_shots(item)
        self.generated = list(item.get("character_images") or [])
        if not any(m is not None for m in outputs.values()) and not self.faithful:
            # the official scores a story whose folder has images but none at a shot index
            # (every value 0); the alternative leaves it out
            return _invalid("no output image at a shot index of this story")
        try:
            refs = {k: self.references(k, info) for k, info in characters.items()}
            matched, occm, shots, actions = self.match_shots(item, characters, refs)
        except StoryUnscorable as exc:
            return _invalid(str(exc))
        result = self.aggregate(characters, refs, matched, occm, shots)
        return self.single_character_action(result, actions)

    def single_character_action(self, result: EvalResult, actions: list[ActionShot]) -> EvalResult:
        """``result`` with the single-character-action value (None without a judge); a judge
        request that failed makes the story an ``error`` row, its CIDS values kept in detail."""
        if self.action is None:
            result.scores[ACTION] = None
            result.detail[ACTION] = {"status": "not produced: no judge endpoint configured"}
            return result
        outcome = self.action.score(actions)
        result.detail[ACTION] = {"shots": outcome.detail}
        if outcome.error is not None:
            computed = dict(result.scores, **{ACTION: outcome.value})
            detail = dict(result.detail, error=outcome.error, computed_scores=computed)
            return EvalResult(dict.fromkeys(CRITERIA), status="error", detail=detail)
        result.scores[ACTION] = outcome.value
        return result

    def match_shots(
        self,
        item: Mapping[str, Any],
        characters: Mapping[str, Mapping[str, Any]],
        refs: Mapping[str, tuple[list[Any], list[Any]]],
    ) -> tuple[dict[str, list[Any]], list[vmath.OccmShot], dict[int, Any], list[ActionShot]]:
        """Per character its matched crops, the OCCM shots, each shot's detail, and the shots
        that reached the assignment (for single-character action)."""
        outputs = candidate_shots(item)
        matched: dict[str, list[Any]] = {k: [] for k in characters}
        occm: list[vmath.OccmShot] = []
        detail: dict[int, Any] = {}
        actions: list[ActionShot] = []
        for shot in story_shots(item):
            index = shot_index(shot)
            listed = shot_character_keys(shot)
            keys = [k for k in listed if k in characters]
            # faithful: E counts undefined keys too, as the official's len(character_key)
            expected = len(listed) if self.faithful else len(keys)
            media = outputs.get(index)
            if media is None:
                continue
            if not media_exists(media):
                occm.append(vmath.OccmShot(expected, 0, file_missing=True))
                detail[index] = {"missing_file": media_path(media)}
                continue
            if not expected:
                continue
            image = self._open(media)
            det = self.detector.detect(image, self.prompt)
            crops = _crops(image, det, det.order())
            if crops and len(keys) < len(listed) and self.faithful:
                # the official looks each listed key's tag up here and fails on an undefined one
                undefined = [k for k in listed if k not in characters]
                raise StoryUnscorable(f"shot {index} lists undefined characters {undefined}")
            occm.append(vmath.OccmShot(expected, len(crops)))
            pairs: list[tuple[str, Any]] | None = [] if self.action is not None else None
            detail[index] = self._assign(keys, characters, refs, crops, matched, pairs)
            if pairs is not None and detail[index].get("assigned"):
                script = shot_text(shot, "script") or ""
                named = [(k, self.judge_name(k, characters[k]), c) for k, c in pairs]
                actions.append(ActionShot(index, script, named))
        return matched, occm, detail, actions

    def judge_name(self, key: str, info: Mapping[str, Any]) -> str:
        return judge_name(key, info, self.faithful)

    def _assign(
        self,
        keys: list[str],
        characters: Mapping[str, Mapping[str, Any]],
        refs: Mapping[str, tuple[list[Any], list[Any]]],
        crops: list[Any],
        matched: dict[str, list[Any]],
        pairs: list[tuple[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """Match one shot's crops to its characters; returns the shot's detail, whose
        ``assigned`` says whether the shot reached the assignment (it had crops and some
        character's encoder embedded one).  The matched ``(key, crop)`` go to ``pairs``."""
        import numpy as np

        shot: dict[str, Any] = {"boxes": len(crops), "cross_sim": {k: 0.0 for k in keys}}
        shot["assigned"] = False
        if not crops:
            return shot
        sim = np.full((len(keys), len(crops)), vmath.INVALID_SIMILARITY)
        valid = np.zeros_like(sim, dtype=bool)
        rows: dict[int, dict[int, Any]] = {}
        per_encoder: dict[int, Encoded] = {}  # crops embedded once per encoder, not per row
        for r, key in enumerate(keys):
            encoder = self.encoder_for(str(characters[key].get("tag") or ""))
            encoded = per_encoder.setdefault(id(encoder), encoder.encode(crops))
            if not encoded:
                continue
            matrix = np.asarray(encoder.similarity(encoded.features, refs[key][0]))
            best = matrix.max(axis=1)
            rows[r] = {}
            for local, cand in enumerate(encoded.indices):
                sim[r, cand] = best[local]
                valid[r, cand] = True
                rows[r][cand] = matrix[local]
        shot["assigned"] = bool(rows)
        assignment = vmath.assign_characters(sim, valid)
        for r in sorted(assignment):  # the shot's character order, as the official's loop
            cand = assignment[r]
            key = keys[r]
            shot["cross_sim"][key] = round(float(np.mean(rows[r][cand])), vmath.CIDS_DECIMALS)
            matched[key].append(crops[cand])
            if pairs is not None:
                pairs.append((key, crops[cand]))
        return shot

    def aggregate(
        self,
        characters: Mapping[str, Mapping[str, Any]],
        refs: Mapping[str, tuple[list[Any], list[Any]]],
        matched: Mapping[str, list[Any]],
        occm: list[vmath.OccmShot],
        shots: dict[int, Any],
    ) -> EvalResult:
        import numpy as np

        per_char: list[tuple[float | None, float | None]] = []
        rates: list[float] = []
        char_detail: dict[str, Any] = {}
        for key, info in characters.items():
            crops = matched.get(key) or []
            encoder = self.encoder_for(str(info.get("tag") or ""))
            encoded = encoder.encode(crops) if crops else Encoded()
            if not encoded:
                per_char.append((0.0, 0.0))
                char_detail[key] = {"crops": len(crops), "cross": 0.0, "self": 0.0}
                continue
            feats = encoded.features
            cross, self_sim = vmath.character_cids(
                encoder.similarity(feats, refs[key][0]),
                encoder.similarity(feats, feats),
                faithful=self.faithful,
            )
            pair = np.asarray(encoder.similarity(feats, refs[key][1]))
            rate = vmath.copy_paste_character(pair[:, 0], pair[:, 1])
            per_char.append((cross, self_sim))
            rates.append(rate)
            char_detail[key] = {
                "crops": len(crops),
                "cross": cross,
                "self": self_sim,
                "copy_paste": rate,
            }
        cross_mean, self_mean = vmath.story_cids(per_char, faithful=self.faithful)
        scores = {
            "cids_cross_mean": cross_mean,
            "cids_self_mean": self_mean,
            "occm": vmath.occm_story(occm, faithful=self.faithful),
            "copy_paste_score": vmath.copy_paste_story(rates, faithful=self.faithful),
        }
        detail = {"characters": char_detail, "shots": {str(k): v for k, v in shots.items()}}
        return EvalResult(scores, detail=detail)


def _looks_local(checkpoint: str) -> bool:
    """Whether a checkpoint names a folder on this machine rather than a hub id ``org/name``."""
    return checkpoint.startswith(("/", ".", "~")) or Path(checkpoint).exists()


def _checkpoint_need(checkpoint: str, param: str) -> dict[str, str]:
    """A hub id: a ``weights`` need (local cache, then the hub); a local folder that is absent:
    a ``config`` problem naming the parameter (no hub lookup can find it)."""
    label = f"metric.{CIDSMetric.name}.{param}"
    if _looks_local(checkpoint):
        path = Path(os.path.expanduser(checkpoint))
        if path.exists():
            return {"check": "weights", "target": str(path), "remedy": f"correct {label}"}
        return {
            "check": "config",
            "target": label,
            "detail": f"{path} does not exist",
            "remedy": f"--set {label}= to an HF checkpoint directory or hub id",
        }
    return {
        "check": "weights",
        "target": checkpoint,
        "remedy": f"run `python -m omnistory_core prefetch metric=cids` where the hub is"
        f" reachable (same HF_HOME), or --set {label}= to a local directory",
    }


def _invalid(reason: str) -> EvalResult:
    return EvalResult(dict.fromkeys(CRITERIA), status="invalid", detail={"error": reason})


class CIDSMetric(Metric):
    """``cids``: character identity consistency, on-stage character count, copy-paste and
    single-character action.

    Reads (group scope), per item::

        {"candidate_shots": {shot_index: Media | None, ...},   # story order
         "characters": {key: {"name": str, "name_en": str, "tag": str,
                              "refs": [Media, ...]}, ...},
         "shots": [{"index": int, "character_key": [key, ...], ...}, ...]}

    ``candidate_shots`` holds the listed output of each shot (None: none listed; a Media whose
    file is missing scores OCCM with D=0).  Scores: ``cids_cross_mean`` and ``cids_self_mean``
    (cosine-like, [-1, 1]), ``occm`` ([0, 100]), ``copy_paste_score`` ([0, 1], lower is
    better; the official key), ``single_character_action`` (0-4, an integer with
    ``faithful``; None -- an ``invalid`` row for that criterion -- without a judge endpoint, see
    :mod:`.single_action`).  A story without any output, with a character that has no usable
    reference, or (faithful) a shot listing an undefined character, is an ``invalid`` row; a
    story whose model is not available or whose judge request failed is an ``error`` row.

    Parameters: ``detector`` (a name in :data:`DETECTORS`; ``groundingdino``, the official) with
    ``detector_checkpoint`` (an HF GroundingDINO directory or hub id; null:
    ``IDEA-Research/grounding-dino-tiny``), ``box_threshold`` / ``text_threshold`` (0.25),
    ``prompt`` (``"character"``), ``object_encoder`` (``clip``) with ``clip_model``
    (``openai/clip-vit-large-patch14``), ``face_encoder`` (``face_mix``, the official default;
    ``arcface`` without the multi-face ensemble) for ``realistic_human`` characters, with
    ``face_models`` (the official ``arcface, adaface, facenet``), ``arcface_weights``
    (insightface's ``antelopev2/glintr100.onnx``), ``facenet_weights``
    (``20180402-114759-vggface2.pt``) and ``adaface_weights``
    (``adaface_ir101_webface12m.ckpt``); the judge of single-character action:
    ``judge_base_url`` (null: not produced), ``judge_api_key_env``, ``judge_model`` (gpt-4.1),
    ``judge_max_tries`` (10), ``rubric_dir`` (the official ``user_prompts`` folder; the rubric's
    hash is in the cache key); ``device``, ``image_batch``, ``faithful``; runtime:
    ``judge_timeout``, ``judge_max_retries``, ``judge_retry_base_delay_s``,
    ``judge_max_retry_wait_s``, ``judge_concurrency``.
    """

    name = "cids"
    version = "3"
    track = "character"
    criteria = CRITERIA
    scope = "group"
    score_range = (-1.0, 100.0)
    reads = ("candidate_shots", "characters", "shots", "character_images")
    description = "CIDS (detector + encoders + Hungarian matching), OCCM and copy-paste rate"
    parameters = (
        Param("detector", str, "groundingdino", "detector name (see cids.DETECTORS)"),
        Param(
            "detector_checkpoint",
            (str, None),
            None,
            "groundingdino: HF checkpoint directory or hub id (null: grounding-dino-tiny)",
            weights=True,
        ),
        Param("box_threshold", float, 0.25, "detector box threshold (the official: 0.25)"),
        Param("text_threshold", float, 0.25, "detector text threshold (the official: 0.25)"),
        Param("prompt", str, "character", "detector prompt (the official: character)"),
        Param(
            "ref_mode",
            str,
            "origin",
            "origin: the dataset's reference images | mid-gen: the method's own character"
            " images (chars/), the paper's Table S8",
            choices=REF_MODES,
        ),
        Param("object_encoder", str, "clip", "encoder of non-realistic_human characters"),
        Param(
            "clip_model",
            str,
            OFFICIAL_CLIP,
            "CLIP checkpoint: hub id or local directory",
            weights=True,
        ),
        Param("face_encoder", str, "face_mix", "encoder of realistic_human characters"),
        Param(
            "face_models",
            (list, str),
            list(OFFICIAL_FACE_MODELS),
            "face_mix members, a list or comma-separated (the official: arcface, adaface, facenet)",
        ),
        Param(
            "arcface_weights",
            (str, None),
            None,
            f"path of ArcFace's {ARCFACE_FILE} (insightface's antelopev2 pack)",
            weights=True,
        ),
        Param(
            "facenet_weights",
            (str, None),
            None,
            f"path of FaceNet's {FACENET_FILE}",
            weights=True,
        ),
        Param(
            "adaface_weights",
            (str, None),
            None,
            f"path of AdaFace's {ADAFACE_FILE}",
            weights=True,
        ),
        Param(
            "face_alignment",
            str,
            "official",
            "official: faces found and aligned (SCRFD for ArcFace, RetinaFace for AdaFace and"
            " FaceNet), face-less crops dropped | whole_crop: every crop embedded whole",
            choices=FACE_ALIGNMENTS,
        ),
        Param(
            "scrfd_weights",
            (str, None),
            None,
            f"ArcFace's face detector {SCRFD_FILE} (null: beside arcface_weights)",
            weights=True,
        ),
        Param(
            "retinaface_weights",
            (str, None),
            None,
            f"AdaFace's and FaceNet's face detector, facexlib's {RETINAFACE_FILE}",
            weights=True,
        ),
        Param(
            "judge_base_url",
            (str, None),
            None,
            "single_character_action judge endpoint (null: the criterion is not produced)",
        ),
        Param("judge_api_key_env", str, "OPENAI_API_KEY", "environment variable with the key"),
        Param("judge_model", str, "gpt-4.1", "judge model (the official: gpt-4.1)"),
        Param("judge_max_tries", int, 10, "answers asked for before giving up", ge=1),
        Param(
            "rubric_dir",
            (str, None),
            None,
            "the official user_prompts folder (its single-character rubric's hash is keyed)",
            runtime=True,
        ),
        Param("judge_timeout", float, 120.0, "seconds per request", runtime=True, gt=0),
        Param("judge_max_retries", int, 5, "retries of a failed request", runtime=True, ge=0),
        Param("judge_retry_base_delay_s", float, 1.0, "first backoff", runtime=True, ge=0),
        Param("judge_max_retry_wait_s", float, 60.0, "longest wait", runtime=True, ge=0),
        Param("judge_concurrency", int, 4, "questions in flight", runtime=True, ge=1),
        Param(
            "judge_prices",
            (dict, None),
            None,
            "the dry run's price table {model: {input_per_mtok, output_per_mtok}} (null: the"
            " reference table)",
            runtime=True,
        ),
        Param("device", (str, None), "auto", "auto | cpu | cuda[:N]", runtime=True),
        Param("image_batch", int, 16, "crops per forward pass", runtime=True, ge=1),
        Param("faithful", bool, True, "keep the official quirks (see math.FIDELITY)"),
    )

    def __init__(self, **params: Any):
        super().__init__(**params)
        self._detector: Detector | None = None
        self._encoders: dict[str, Encoder] = {}
        self._action: SingleCharacterAction | None = None

    @classmethod
    def checkpoints(cls, params: dict[str, Any]) -> list[str]:
        """The hub checkpoints to prefetch: the GroundingDINO and CLIP ones in use."""
        from omnistory_vistorybench.metrics.grounding import OFFICIAL_GROUNDING_DINO

        out = []
        if (params.get("detector") or "groundingdino") == "groundingdino":
            out.append(str(params.get("detector_checkpoint") or OFFICIAL_GROUNDING_DINO))
        if (params.get("object_encoder") or "clip") == "clip":
            out.append(str(params.get("clip_model") or OFFICIAL_CLIP))
        return out

    def output_params(self) -> dict[str, Any]:
        """The key parameters plus, with a judge, the single-character rubric's hash (its
        folder is runtime)."""
        out = super().output_params()
        if not self.params.get("judge_base_url"):
            return out
        try:
            out["single_character_rubric_sha256"] = rubric_sha256(
                read_rubric(self.params.get("rubric_dir"))
            )
        except ComponentError:
            pass
        return out

    # -- the pre-flight --------------------------------------------------------------------
    def weights_files(self) -> dict[str, str]:
        """The declared weights files, and SCRFD's default file beside ``arcface_weights``
        when the official face path finds faces with it."""
        from omnistory_core.kit.fingerprints import local_weights

        found = super().weights_files()
        official = str(self.params.get("face_alignment") or "official") == "official"
        if official and "scrfd_weights" not in found:
            path = local_weights(scrfd_weights(self.params))
            if path is not None:
                found["scrfd_weights"] = str(path)
        return found

    def preflight_needs(self) -> list[dict[str, str]]:
        """What ``evaluate`` checks before scoring anything, from the parameters alone (which
        characters a story holds is unknown here): the detector's and CLIP's checkpoints; the
        face weights the face encoder's models name (a named file that is absent stops the
        evaluation; an unset one is a warning, since only ``realistic_human`` characters need
        it and their stories become ``error`` rows); with ``judge_base_url``, the rubric, the
        judge's server and, for a remote one, its key."""
        needs: list[dict[str, str]] = []
        if str(self.params.get("detector") or "groundingdino") == "groundingdino":
            from omnistory_vistorybench.metrics.grounding import OFFICIAL_GROUNDING_DINO

            checkpoint = str(self.params.get("detector_checkpoint") or OFFICIAL_GROUNDING_DINO)
            needs.append(_checkpoint_need(checkpoint, "detector_checkpoint"))
        if str(self.params.get("object_encoder") or "clip") == "clip":
            checkpoint = str(self.params.get("clip_model") or OFFICIAL_CLIP)
            needs.append(_checkpoint_need(checkpoint, "clip_model"))
        needs.extend(self._face_needs())
        needs.extend(self._judge_needs())
        return needs

    def _face_needs(self) -> list[dict[str, str]]:
        """The weights files of the face models the face encoder runs."""
        from omnistory_vistorybench.metrics.face import FACE_MODELS, face_model_names

        encoder = str(self.params.get("face_encoder") or "face_mix")
        if encoder == "arcface":
            models = ["arcface"]
        elif encoder == "face_mix":
            models = face_model_names(self.params.get("face_models", OFFICIAL_FACE_MODELS))
        else:  # a registered encoder of its own: it says what it lacks when built
            return []
        needs: list[dict[str, str]] = []
        if str(self.params.get("face_alignment") or "official") == "official":
            needs.extend(self._detector_needs(models))
        for model in models:
            if model not in FACE_MODELS:
                continue  # an unknown name: build_face_mix names the known ones per story
            param = FACE_MODELS[model][1]
            value = self.params.get(param)
            label = f"metric.{self.name}.{param}"
            if not value:
                needs.append(
                    {
                        "check": "config",
                        "target": label,
                        "detail": f"not set: the {model} face model has no weights",
                        "remedy": f"--set {label}=PATH, or --set metric.{self.name}.face_models="
                        " listing the face models you have",
                        "warning": f"stories with {FACE_TAG} characters get 'error' rows",
                    }
                )
                continue
            path = Path(os.path.expanduser(str(value)))
            if not path.exists():
                needs.append(
                    {
                        "check": "config",
                        "target": label,
                        "detail": f"{path} does not exist",
                        "remedy": f"--set {label}= to the {model} weights file",
                    }
                )
            if model == "arcface":  # the official glintr100.onnx runs on onnxruntime
                needs.append(
                    {
                        "check": "package",
                        "target": "onnxruntime",
                        "remedy": "pip install onnxruntime (or onnxruntime-gpu)",
                    }
                )
        return needs

    def _detector_needs(self, models: list[str]) -> list[dict[str, str]]:
        """The face detectors of the official alignment: SCRFD for ArcFace, RetinaFace for
        AdaFace and FaceNet (an unset one only warns, like the face weights)."""
        wanted = []
        if "arcface" in models:
            wanted.append(("scrfd_weights", scrfd_weights(self.params), "ArcFace's SCRFD"))
        if any(m in models for m in ("adaface", "facenet")):
            value = self.params.get("retinaface_weights")
            wanted.append(("retinaface_weights", value, "AdaFace's and FaceNet's RetinaFace"))
        needs: list[dict[str, str]] = []
        if wanted:  # both alignments warp with OpenCV, as insightface and facexlib do
            needs.append(
                {
                    "check": "package",
                    "target": "cv2",
                    "remedy": "pip install opencv-python-headless (the metrics extra has it)",
                }
            )
        for param, value, what in wanted:
            label = f"metric.{self.name}.{param}"
            if not value:
                needs.append(
                    {
                        "check": "config",
                        "target": label,
                        "detail": f"not set: {what} face detector has no weights",
                        "remedy": f"--set {label}=PATH, or --set metric.{self.name}"
                        ".face_alignment=whole_crop (a documented departure)",
                        "warning": f"stories with {FACE_TAG} characters get 'error' rows",
                    }
                )
            elif not Path(os.path.expanduser(str(value))).exists():
                needs.append(
                    {
                        "check": "config",
                        "target": label,
                        "detail": f"{Path(os.path.expanduser(str(value)))} does not exist",
                        "remedy": f"--set {label}= to {what} weights file",
                    }
                )
        return needs

    def _judge_needs(self) -> list[dict[str, str]]:
        """With ``judge_base_url``: the single-character rubric, the server, the key."""
        from urllib.parse import urlparse

        from omnistory_vistorybench.metrics.prompt_align import chat_base_url

        base_url = chat_base_url(self.params.get("judge_base_url"))
        if not base_url:
            return []  # single_character_action is not produced: no judge to reach
        prefix = f"metric.{self.name}"
        needs: list[dict[str, str]] = []
        try:
            read_rubric(self.params.get("rubric_dir"))
        except ComponentError as exc:
            needs.append(
                {
                    "check": "config",
                    "target": f"{prefix}.rubric_dir",
                    "remedy": f"--set {prefix}.rubric_dir=<ViStoryBench checkout>"
                    f"/vistorybench/bench/prompt_align/user_prompts (or {prefix}.judge_base_url"
                    "=null to leave single_character_action out)",
                    "detail": str(exc).removeprefix("skipped: ").split(";")[0],
                }
            )
        needs.append(
            {
                "check": "server",
                "target": base_url,
                "remedy": f"start the judge's server or correct {prefix}.judge_base_url",
            }
        )
        env = str(self.params.get("judge_api_key_env") or "")
        if env and urlparse(base_url).hostname not in LOOPBACK:  # a local server needs no key
            needs.append(
                {
                    "check": "key",
                    "target": env,
                    "remedy": f"export {env}=<key> ({prefix}.judge_api_key_env)",
                }
            )
        return needs

    # -- the dry run's estimates -------------------------------------------------------------
    def pricing(self) -> Any:
        """The judge model's price (``judge_prices``, else the reference table); None without a
        judge (no request) or for a server on this machine (a loopback host bills nothing)."""
        from urllib.parse import urlparse

        from omnistory_core.kit.planning.usage import price_of

        base_url = self.params.get("judge_base_url")
        if not base_url:
            return None
        if urlparse(str(base_url)).hostname in LOOPBACK:
            return None
        where = f"metric.{self.name}.judge_prices"
        return price_of(str(self.params["judge_model"]), self.params.get("judge_prices"), where)

    def estimate(
        self, inputs: dict[str, Any], pricing: Any, output_tokens: int | None
    ) -> dict[str, Any]:
        """One story's single-character questions, an upper bound: one per onstage character
        of each shot with an output (matching is unknown before running), each the rubric, the
        shot's script, the name line and the 512x512 crop; output tokens ``output_tokens``
        each, else the judge's max_tokens (512).  Unknown rubric: the input is unknown."""
        from omnistory_core.kit.planning.usage import count_tokens

        faithful = bool(self.params.get("faithful", True))
        characters = story_characters(inputs)
        outputs = candidate_shots(inputs)
        questions = [
            (shot_text(shot, "script") or "", judge_name(k, characters[k], faithful))
            for shot in story_shots(inputs)
            if outputs.get(shot_index(shot)) is not None
            for k in shot_character_keys(shot)
            if k in characters
        ]
        per_answer = output_tokens if output_tokens is not None else JUDGE_MAX_TOKENS
        tokens_out = per_answer * len(questions)
        if not questions:
            return {"input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0}
        try:
            rubric = count_tokens(read_rubric(self.params.get("rubric_dir")))
        except ComponentError:
            return {"input_tokens": None, "output_tokens": tokens_out}
        image = -(-512 * 512 // 750)  # the crop as sent, resized (the estimate prompt_align uses)
        tokens_in = sum(
            rubric
            + count_tokens(script)
            + count_tokens(f"Evaluated Character Name is {name}")
            + image
            for script, name in questions
        )
        estimate: dict[str, Any] = {"input_tokens": tokens_in, "output_tokens": tokens_out}
        if pricing is not None and getattr(pricing, "price", None) is not None:
            estimate["cost_usd"] = pricing.price.cost(tokens_in, tokens_out)
        return estimate

    def load(self) -> None:
        self._detector = self._build(DETECTORS, str(self.params["detector"]), "detector")
        name = str(self.params["object_encoder"])
        self._encoders = {name: self._build(ENCODERS, name, "encoder")}
        self._action = SingleCharacterAction.from_params(self.params)

    def unload(self) -> None:
        self._detector = None
        for encoder in self._encoders.values():
            unload = getattr(encoder, "unload", None)
            if callable(unload):
                unload()
        self._encoders = {}
        if self._action is not None:
            self._action.close()
        self._action = None
        release_torch_memory()

    def _build(
        self, registry: Mapping[str, Callable[[Mapping[str, Any]], Any]], name: str, what: str
    ) -> Any:
        factory = registry.get(name)
        if factory is None:
            raise ComponentError(
                f"skipped: unknown {what} {name!r}; known: {', '.join(sorted(registry))}",
                "model_error",
            )
        return factory(self.params)

    def encoder_for(self, tag: str) -> Encoder:
        """The encoder of a character tag, built on first use (a face encoder that is not
        available raises ComponentError: the story becomes an ``error`` row)."""
        key = "face_encoder" if tag == FACE_TAG else "object_encoder"
        name = str(self.params[key])
        if name not in self._encoders:
            self._encoders[name] = self._build(ENCODERS, name, "encoder")
        return self._encoders[name]

    def score_story(self, item: dict[str, Any]) -> EvalResult:
        if self._detector is None:
            self.load()
        assert self._detector is not None
        scorer = StoryScorer(
            self._detector,
            self.encoder_for,
            prompt=str(self.params.get("prompt") or "character"),
            faithful=bool(self.params.get("faithful", True)),
            action=self._action,
            ref_mode=str(self.params.get("ref_mode") or "origin"),
        )
        try:
            return scorer.score(item)
        except ComponentError as exc:  # a model this story needs is missing: retried next run
            return EvalResult(dict.fromkeys(CRITERIA), status="error", detail={"error": str(exc)})

    def run_batch(self, items: list[dict[str, Any]]) -> list[EvalResult]:
        return [self.score_story(item) for item in items]


__all__ = [
    "CIDSMetric",
    "CRITERIA",
    "DETECTORS",
    "ENCODERS",
    "ACTION",
    "FACE_TAG",
    "StoryScorer",
    "StoryUnscorable",
    "register_detector",
    "register_encoder",
]
