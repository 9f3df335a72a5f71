"""CIDS per story, as the official evaluator computes it (the algorithm in :mod:`.cids`):
the detectors and encoders by name (:data:`DETECTORS`, :data:`ENCODERS`; ``register_detector``
and ``register_encoder`` add more), the reference crops, the Hungarian matching of shot crops to
characters, and the story's cross, self, OCCM and copy-paste values (:class:`StoryScorer`).

Below :mod:`.cids` (the ``cids`` metric: its parameters, loading and batching).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from omnistory_core.api import EvalResult
from omnistory_vistorybench.metrics import math as vmath
from omnistory_vistorybench.metrics._common import (
    candidate_shots,
    media_exists,
    media_path,
    open_rgb,
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
from omnistory_vistorybench.metrics.single_action import (
    ActionShot,
    SingleCharacterAction,
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


def _invalid(reason: str) -> EvalResult:
    return EvalResult(dict.fromkeys(CRITERIA), status="invalid", detail={"error": reason})


__all__ = [
    "ACTION",
    "CRITERIA",
    "DETECTORS",
    "ENCODERS",
    "FACE_TAG",
    "StoryScorer",
    "StoryUnscorable",
    "register_detector",
    "register_encoder",
]
