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

The detector and the encoders are looked up by name in :data:`.cids_scoring.DETECTORS` and
:data:`.cids_scoring.ENCODERS` (its ``register_detector`` / ``register_encoder`` add more).
Built in:

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

from collections.abc import Callable, Mapping
from typing import Any

from omnistory_core.api import ComponentError, EvalResult, Metric, Param
from omnistory_vistorybench.metrics._arcface import ARCFACE_FILE
from omnistory_vistorybench.metrics._common import (
    candidate_shots,
    release_torch_memory,
    shot_character_keys,
    shot_index,
    shot_text,
    story_characters,
    story_shots,
)
from omnistory_vistorybench.metrics._face_crops import RETINAFACE_FILE, SCRFD_FILE
from omnistory_vistorybench.metrics.cids_needs import preflight_needs
from omnistory_vistorybench.metrics.cids_scoring import (
    CRITERIA,
    DETECTORS,
    ENCODERS,
    FACE_TAG,
    JUDGE_MAX_TOKENS,
    LOOPBACK,
    REF_MODES,
    StoryScorer,
    judge_name,
)
from omnistory_vistorybench.metrics.clip_encoder import (
    OFFICIAL_CLIP,
    Detector,
    Encoder,
)
from omnistory_vistorybench.metrics.face import (
    ADAFACE_FILE,
    FACE_ALIGNMENTS,
    FACENET_FILE,
    OFFICIAL_FACE_MODELS,
    scrfd_weights,
)
from omnistory_vistorybench.metrics.single_action import (
    SingleCharacterAction,
    read_rubric,
    rubric_sha256,
)


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
    task = "vistorybench"
    track = "character"
    criteria = CRITERIA
    scope = "group"
    score_range = (-1.0, 100.0)
    reads = ("candidate_shots", "characters", "shots", "character_images")
    description = "CIDS (detector + encoders + Hungarian matching), OCCM and copy-paste rate"
    parameters = (
        Param("detector", str, "groundingdino", "detector name (see cids_scoring.DETECTORS)"),
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
        Param("faithful", bool, True, "keep the official quirks (see quirks.FIDELITY)"),
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
        """What ``evaluate`` checks before scoring anything: see
        :func:`.cids_needs.preflight_needs`."""
        return preflight_needs(self.params, self.name)

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


__all__ = ["CIDSMetric"]
