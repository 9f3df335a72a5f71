"""Character consistency (``cids_cross_mean``, ``cids_self_mean``, ``occm``,
``copy_paste_score``): the official CIDS algorithm over pluggable detectors and encoders.

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

The detector and the encoders are looked up by name in :data:`DETECTORS` and :data:`ENCODERS`
(``register_detector`` / ``register_encoder`` add more).  Built in: the ``clip`` encoder
(:class:`.clip_encoder.CLIPImageEncoder`).  Declared but not available in this environment yet:
the ``groundingdino`` detector (transformers 4.x: it will run in its own environment) and the
``face_mix`` / ``arcface`` encoders of ``realistic_human`` characters; a story that needs one is
an ``error`` row (recomputed once it exists), never a 0.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
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

DetectorFactory = Callable[[Mapping[str, Any]], Detector]
EncoderFactory = Callable[[Mapping[str, Any]], Encoder]

#: detectors by name: a factory taking the metric's parameters
DETECTORS: dict[str, DetectorFactory] = {}
#: encoders by name: a factory taking the metric's parameters
ENCODERS: dict[str, EncoderFactory] = {}
#: the tag whose characters the face encoder embeds; every other tag uses ``object_encoder``
FACE_TAG = "realistic_human"
CRITERIA = ("cids_cross_mean", "cids_self_mean", "occm", "copy_paste_score")


def register_detector(name: str, factory: DetectorFactory) -> None:
    DETECTORS[name] = factory


def register_encoder(name: str, factory: EncoderFactory) -> None:
    ENCODERS[name] = factory


def _not_available(what: str, why: str) -> Callable[[Mapping[str, Any]], Any]:
    def factory(params: Mapping[str, Any]) -> Any:
        raise ComponentError(f"skipped: {what} is not available: {why}", "model_error")

    return factory


def _clip(params: Mapping[str, Any]) -> Encoder:
    from omnistory_vistorybench.metrics.clip_encoder import CLIPImageEncoder

    return CLIPImageEncoder(
        device=resolve_device(params.get("device")),
        batch_size=int(params.get("image_batch") or 16),
    ).load(str(params.get("clip_model") or OFFICIAL_CLIP))


register_encoder("clip", _clip)
register_detector(
    "groundingdino",
    _not_available(
        "the GroundingDINO detector",
        "it needs transformers 4.x and runs in its own environment (not implemented yet)",
    ),
)
for _face in ("face_mix", "arcface"):
    register_encoder(
        _face,
        _not_available(f"the {_face} face encoder", "the face models are not implemented yet"),
    )


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
    ):
        self.detector = detector
        self.encoder_for = encoder_for
        self.prompt = prompt
        self.faithful = faithful

    def references(self, key: str, info: Mapping[str, Any]) -> tuple[list[Any], list[Any]]:
        """(reference features, [primary, mirrored primary] features) of one character."""
        from PIL import ImageOps

        encoder = self.encoder_for(str(info.get("tag") or ""))
        by_path = {media_path(m): m for m in info.get("refs") or []}
        paths = vmath.cids_reference_filter([p for p in by_path if p], faithful=self.faithful)
        images = [self._open(by_path[p]) for p in paths]
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
        if not any(m is not None for m in outputs.values()):
            return _invalid("no output image for this story")
        try:
            refs = {k: self.references(k, info) for k, info in characters.items()}
            matched, occm, shots = self.match_shots(item, characters, refs)
        except StoryUnscorable as exc:
            return _invalid(str(exc))
        return self.aggregate(characters, refs, matched, occm, shots)

    def match_shots(
        self,
        item: Mapping[str, Any],
        characters: Mapping[str, Mapping[str, Any]],
        refs: Mapping[str, tuple[list[Any], list[Any]]],
    ) -> tuple[dict[str, list[Any]], list[vmath.OccmShot], dict[int, Any]]:
        outputs = candidate_shots(item)
        matched: dict[str, list[Any]] = {k: [] for k in characters}
        occm: list[vmath.OccmShot] = []
        detail: dict[int, Any] = {}
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
            detail[index] = self._assign(keys, characters, refs, crops, matched)
        return matched, occm, detail

    def _assign(
        self,
        keys: list[str],
        characters: Mapping[str, Mapping[str, Any]],
        refs: Mapping[str, tuple[list[Any], list[Any]]],
        crops: list[Any],
        matched: dict[str, list[Any]],
    ) -> dict[str, Any]:
        """Match one shot's crops to its characters; returns the shot's detail."""
        import numpy as np

        shot: dict[str, Any] = {"boxes": len(crops), "cross_sim": {k: 0.0 for k in keys}}
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
        for r, cand in vmath.assign_characters(sim, valid).items():
            key = keys[r]
            shot["cross_sim"][key] = round(float(np.mean(rows[r][cand])), vmath.CIDS_DECIMALS)
            matched[key].append(crops[cand])
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


def _invalid(reason: str) -> EvalResult:
    return EvalResult(dict.fromkeys(CRITERIA), status="invalid", detail={"error": reason})


class CIDSMetric(Metric):
    """``cids``: character identity consistency, on-stage character count and copy-paste.

    Reads (group scope), per item::

        {"candidate_shots": {shot_index: Media | None, ...},   # story order
         "characters": {key: {"name": str, "tag": str, "refs": [Media, ...]}, ...},
         "shots": [{"index": int, "character_key": [key, ...], ...}, ...]}

    ``candidate_shots`` holds the listed output of each shot (None: none listed; a Media whose
    file is missing scores OCCM with D=0).  Scores: ``cids_cross_mean`` and ``cids_self_mean``
    (cosine-like, [-1, 1]), ``occm`` ([0, 100]), ``copy_paste_score`` ([0, 1], lower is
    better; the official key).  A story without any output, with a character that has no usable
    reference, or (faithful) a shot listing an undefined character, is an ``invalid`` row.

    Parameters: ``detector`` (a name in :data:`DETECTORS`; ``groundingdino``, the official, is
    not available yet), ``detector_checkpoint``, ``box_threshold`` / ``text_threshold`` (0.25),
    ``prompt`` (``"character"``), ``object_encoder`` (``clip``) with ``clip_model``
    (``openai/clip-vit-large-patch14``), ``face_encoder`` (``face_mix``, the official default;
    ``arcface`` without the multi-face ensemble) for ``realistic_human`` characters, ``device``,
    ``image_batch``, ``faithful``.
    """

    name = "cids"
    version = "1"
    track = "character"
    criteria = CRITERIA
    scope = "group"
    score_range = (-1.0, 100.0)
    reads = ("candidate_shots", "characters", "shots")
    description = "CIDS (detector + encoders + Hungarian matching), OCCM and copy-paste rate"
    parameters = (
        Param("detector", str, "groundingdino", "detector name (see cids.DETECTORS)"),
        Param("detector_checkpoint", (str, None), None, "the detector's weights, if it needs any"),
        Param("box_threshold", float, 0.25, "detector box threshold (the official: 0.25)"),
        Param("text_threshold", float, 0.25, "detector text threshold (the official: 0.25)"),
        Param("prompt", str, "character", "detector prompt (the official: character)"),
        Param("object_encoder", str, "clip", "encoder of non-realistic_human characters"),
        Param("clip_model", str, OFFICIAL_CLIP, "CLIP checkpoint: hub id or local directory"),
        Param("face_encoder", str, "face_mix", "encoder of realistic_human characters"),
        Param("device", (str, None), "auto", "auto | cpu | cuda[:N]", runtime=True),
        Param("image_batch", int, 16, "crops per forward pass", runtime=True, ge=1),
        Param("faithful", bool, True, "keep the official quirks (see math.FIDELITY)"),
    )

    def __init__(self, **params: Any):
        super().__init__(**params)
        self._detector: Detector | None = None
        self._encoders: dict[str, Encoder] = {}

    @classmethod
    def checkpoints(cls, params: dict[str, Any]) -> list[str]:
        if (params.get("object_encoder") or "clip") != "clip":
            return []
        return [str(params.get("clip_model") or OFFICIAL_CLIP)]

    def load(self) -> None:
        self._detector = self._build(DETECTORS, str(self.params["detector"]), "detector")
        name = str(self.params["object_encoder"])
        self._encoders = {name: self._build(ENCODERS, name, "encoder")}

    def unload(self) -> None:
        self._detector = None
        self._encoders = {}
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
    "FACE_TAG",
    "StoryScorer",
    "StoryUnscorable",
    "register_detector",
    "register_encoder",
]
