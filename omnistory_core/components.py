"""Component base classes: planners, backbones, image experts, TTS experts, metrics, judges.

A component is a class registered through a plugin hook.  It declares

* ``kind`` and ``name`` (``planner/template``), and a ``version`` that must change whenever its
  outputs would change for the same inputs and parameters;
* ``reads``: the named inputs it consumes.  The engine builds only those inputs for it, and the
  call's cache key hashes only those, so an image expert that ignores the plan is not re-run per
  planner, and a component cannot see anything it did not declare (the reference included);
* ``parameters``: its parameters, declared once with type, default and doc
  (:class:`omnistory_core.params.Param`); they are validated when the component is built, and
  ``runtime=True`` ones (concurrency, timeouts, endpoints) stay out of the cache key while every
  other parameter goes into it.  ``runtime_params`` names runtime parameters of a component that
  declares none;
* ``oracle = True`` if it reads the reference (only allowed with ``allow_oracle=true``);
* ``baseline = True`` for a heuristic stand-in that is not a model (the ``template`` and ``copy``
  planners): a system led by one is reported under the ``baseline`` paradigm.

A system is the stages its components imply: a :class:`Planner` writes a plan that an image expert
and a TTS expert render (orchestration); a :class:`Backbone` makes the modalities in its
``produces`` natively and hands the plan fields of the others to experts (semi-orchestration T+I
or T+S), or makes all three (any-to-any).

Heavy libraries are imported in ``load()``, never at module import.

Which example a call is on, for logging only: :func:`current_example` (or ``self.example_id``)
inside ``run_one``, :func:`current_examples` inside a ``run_batch`` of several items.  The engine
sets it around every call; it is never part of the call key (one call stands for every example
with the same inputs), so a component must not let it change what it returns.

What a call returns is checked by the engine against the kind's output types (see each kind's
class); a wrong type, or a backbone modality outside ``produces``, is that example's
``contract_error`` failure, naming the field, the type expected and returned, and the
component's method as ``file:line``.

Inputs a component may declare in ``reads``:

======================  ===============================================================
``current_image``       :class:`Media` of the current page illustration x_i
``current_text``        the current narration t_i
``metadata``            book metadata (dict)
``conditions``          next-page conditions c_{i+1} (dict)
``narration``           plan narration (image and TTS experts)
``image_prompt``        plan image prompt
``utterance`` ...       plan speech fields: ``utterance speaker emotion speed pitch gender``
``reference_text``      oracle only: gold next narration
``reference_image``     oracle only: :class:`Media` of the gold next illustration
``reference_speech``    oracle only: dict of the target speech fields
======================  ===============================================================
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, ClassVar

from omnistory_core.contract import Failure
from omnistory_core.errors import ConfigError
from omnistory_core.params import Param, check_declaration, key_params, resolve_params

EXAMPLE_INPUTS = ("current_image", "current_text", "metadata", "conditions")
PLAN_INPUTS = (
    "narration",
    "image_prompt",
    "utterance",
    "speaker",
    "emotion",
    "speed",
    "pitch",
    "gender",
)
REFERENCE_INPUTS = ("reference_text", "reference_image", "reference_speech")
CANDIDATE_INPUTS = ("candidate_text", "candidate_image", "candidate_speech", "candidate_plan")
ALL_INPUTS = EXAMPLE_INPUTS + PLAN_INPUTS + REFERENCE_INPUTS
EVALUATION_INPUTS = EXAMPLE_INPUTS + REFERENCE_INPUTS + CANDIDATE_INPUTS
KINDS = ("planner", "image", "tts", "backbone", "judge", "metric")


@dataclass(frozen=True)
class Media:
    """A file input (image or audio), identified by content hash."""

    path: str
    sha256: str

    def read_bytes(self) -> bytes:
        with open(self.path, "rb") as fh:
            return fh.read()

    def open_image(self):  # -> PIL.Image.Image
        from PIL import Image

        with Image.open(io.BytesIO(self.read_bytes())) as img:
            return img.convert("RGB")


@dataclass
class PlannerResponse:
    """What a planner returns: its raw text (parsed by the engine with `parse_plan`) and usage."""

    text: str
    usage: dict[str, Any] = field(default_factory=dict)


@dataclass
class Audio:
    """A mono waveform in [-1, 1]."""

    samples: Any  # numpy.ndarray, float32, shape (n,)
    sample_rate: int


#: what a backbone may declare in ``produces``
BACKBONE_MODALITIES: frozenset[str] = frozenset({"text", "image", "speech"})
#: how a component is called: once per item, or once per group of items (a story)
UNITS: tuple[str, ...] = ("item", "group")
#: what one scored item of an evaluator is (the scores table keeps it per row)
SCOPES: tuple[str, ...] = ("item", "group", "run")


@dataclass
class BackboneOutput:
    """What a backbone returns for one example: one store record holds all of it.

    * ``text`` -- the next-page narration;
    * ``image`` -- the next illustration (``PIL.Image.Image``, :class:`Media` or PNG bytes);
    * ``speech`` -- the spoken character utterance (:class:`Audio` or :class:`Media`);
    * ``plan`` -- what the experts need for the modalities the backbone does not produce: the
      ``image_prompt`` and/or ``speech`` fields of the plan schema, as a dict, or the model's raw
      text (a ``str``), which the engine parses with the plan parser's repairs (or a
      :class:`~omnistory_core.contract.Plan`);
    * ``failures`` -- per omitted modality, why (a :class:`Failure` with its category); a produced
      modality that is ``None`` with no entry here is recorded as ``backbone_no_<modality>``;
    * ``usage`` -- token counts, cost, passes: anything JSON-able.

    ``image`` and ``speech`` are given only for modalities in the backbone's ``produces``: any
    other is refused as a ``contract_error`` of the example, as is a field of the wrong type.
    """

    text: str | None = None
    image: Any = None  # PIL.Image.Image | bytes | None
    speech: Audio | None = None
    plan: dict[str, Any] | str | None = None
    failures: dict[str, Failure] = field(default_factory=dict)
    usage: dict[str, Any] = field(default_factory=dict)


def check_produces(cls: type) -> frozenset[str]:
    """A backbone's ``produces``: a non-empty subset of text/image/speech that includes text."""
    produces = getattr(cls, "produces", None)
    if not isinstance(produces, frozenset | set) or not produces:
        raise ConfigError(
            f"{cls.__name__}.produces must be a non-empty frozenset of"
            f" {sorted(BACKBONE_MODALITIES)}"
        )
    unknown = set(produces) - BACKBONE_MODALITIES
    if unknown:
        raise ConfigError(f"{cls.__name__}.produces has unknown modalities {sorted(unknown)}")
    if "text" not in produces:
        raise ConfigError(
            f"{cls.__name__}.produces lacks 'text': nothing else can write the narration"
        )
    return frozenset(produces)


#: the ids of the examples the engine is calling a component on, one per item of the current
#: ``run_batch`` call (a group-unit call: its group's id); a context variable, so threads and
#: replicas computing other chunks each see their own
_EXAMPLES: ContextVar[tuple[str, ...]] = ContextVar("omnistory_examples", default=())


def current_examples() -> tuple[str, ...]:
    """The example ids of the current call, one per item passed to ``run_batch``, in order
    (a group-unit call: one group id per item, e.g. ``demo/book``); ``()`` outside a call.

    For logging only: it is not part of the call key, and a call computed once for several
    examples with the same inputs is named by the first of them."""
    return _EXAMPLES.get()


def current_example() -> str | None:
    """The example id of the current call when it is on one item (always so inside ``run_one``
    under the default ``run_batch``), else None.  For logging only, as
    :func:`current_examples`."""
    ids = _EXAMPLES.get()
    return ids[0] if len(ids) == 1 else None


@contextmanager
def calling_examples(ids: Sequence[str]) -> Iterator[None]:
    """Set :func:`current_examples` to ``ids`` for the duration of one call (the engine's and the
    isolation worker's side of it)."""
    token = _EXAMPLES.set(tuple(str(i) for i in ids))
    try:
        yield
    finally:
        _EXAMPLES.reset(token)


class ComponentError(Exception):
    """Raised by a component for one item; becomes a `model_error` failure (or its category)."""

    def __init__(self, message: str, category: str = "model_error"):
        super().__init__(message)
        self.category = category


#: the ``output_params()`` key under which local weights' fingerprints join a call key
WEIGHTS_KEY = "__weights__"


class Component:
    kind: ClassVar[str]
    name: ClassVar[str]
    version: ClassVar[str] = "0"
    reads: ClassVar[tuple[str, ...]] = ()
    runtime_params: ClassVar[tuple[str, ...]] = ()
    oracle: ClassVar[bool] = False
    baseline: ClassVar[bool] = False
    default_batch_size: ClassVar[int] = 1
    description: ClassVar[str] = ""
    #: ``item``: one call per item; ``group``: one cached call per group of items (a story), whose
    #: inputs are ``{"items": [each item's inputs, in order]}`` and whose result is a list with one
    #: output per item (methods that condition a shot on the previous one)
    unit: ClassVar[str] = "item"
    #: declared parameters (``None``: undeclared, any key is accepted unchecked)
    parameters: ClassVar[tuple[Param, ...] | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.unit not in UNITS:
            raise ConfigError(f"{cls.__qualname__}.unit must be one of {UNITS}, got {cls.unit!r}")
        scope = getattr(cls, "scope", "item")
        if scope not in SCOPES:
            raise ConfigError(f"{cls.__qualname__}.scope must be one of {SCOPES}, got {scope!r}")
        if cls.__dict__.get("parameters") is not None:
            cls.parameters = tuple(cls.__dict__["parameters"])
            check_declaration(cls.__qualname__, cls.parameters)
        if cls.parameters is not None:
            extra = cls.__dict__.get("runtime_params", ())
            runtime = [p.name for p in cls.parameters if p.runtime]
            cls.runtime_params = tuple(dict.fromkeys([*extra, *runtime]))

    def __init__(self, **params: Any):
        if type(self).parameters is not None:
            params = resolve_params(type(self), params)
        self.params = params

    # -- lifecycle -------------------------------------------------------------------------
    def load(self) -> None:
        """Load weights / open clients.  Called once, on the first cache miss."""

    def unload(self) -> None:
        """Release memory before the next heavy stage."""

    def bind_store(self, root: Any) -> None:
        """Told, before its stage runs, where the engine's store is (a :class:`pathlib.Path`).

        A component that keeps state of its own beside the cached calls (the ids of submitted
        provider batches, say) keeps it under ``root``; most components ignore it.  Called in the
        engine's process and again in an isolated or replica worker, before ``load()``."""

    # -- calls -----------------------------------------------------------------------------
    def run_batch(self, items: list[dict[str, Any]]) -> list[Any]:
        """Produce one result per item (same order).

        An item result may be the kind's output type, a :class:`Failure`, or an Exception
        instance (recorded as a failure).  Raising fails the whole batch; the engine then retries
        item by item so one bad example never takes down its neighbours.
        """
        ids = current_examples()
        if len(ids) != len(items):  # called outside the engine: no ids to narrow to
            return [self.run_one(item) for item in items]
        out = []
        for item, example in zip(items, ids, strict=True):
            with calling_examples([example]):  # run_one sees its own example's id
                out.append(self.run_one(item))
        return out

    def run_one(self, item: dict[str, Any]) -> Any:
        raise NotImplementedError

    # -- cost, for the dry run ------------------------------------------------------------
    def pricing(self) -> Any:
        """How this component's calls are billed: an object with ``price`` (or None) and
        ``source`` (where the price comes from or what to set), as
        :func:`omnistory_core.kit.pricing.price_of` returns; None for a component that calls
        no paid API (the default).  The dry run prices calls through this and :meth:`estimate`,
        so the engine knows no provider."""
        return None

    def estimate(
        self, inputs: dict[str, Any], pricing: Any, output_tokens: int | None
    ) -> dict[str, Any]:
        """One call's estimate (``input_tokens``, ``output_tokens``, ``cost_usd``) when
        :meth:`pricing` is not None; ``output_tokens`` is ``engine.plan.output_tokens``."""
        return {"input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0}

    # -- identity --------------------------------------------------------------------------
    @classmethod
    def key(cls) -> str:
        return f"{cls.kind}/{cls.name}"

    @classmethod
    def call_declaration(cls) -> dict[str, Any]:
        """What the class declares that shapes a call's stored result beyond its ``reads`` and
        output parameters (which the call key hashes already): empty here, a backbone's
        ``produces``.  The engine binds it to every record it writes and recomputes a record made
        under another declaration, so fixing a declaration is enough for the next run."""
        return {}

    @property
    def example_id(self) -> str | None:
        """The example the engine is calling this component on, for logging: see
        :func:`current_example`.  Never part of the call key."""
        return current_example()

    def output_params(self) -> dict[str, Any]:
        """The parameters that change outputs (part of every cache key); with local weights
        (:meth:`weights_files`), their content fingerprints under ``__weights__``."""
        params = key_params(type(self), self.params)
        weights = self.weights_fingerprints()
        if weights:
            params[WEIGHTS_KEY] = weights
        return params

    def weights_files(self) -> dict[str, str]:
        """The local weights this component loads, by what names them: each declared
        ``weights=True`` parameter whose value is a local file or directory.  A component that
        finds a file itself (a library's default download path) adds it here."""
        from omnistory_core.fingerprints import local_weights

        out: dict[str, str] = {}
        for param in type(self).parameters or ():
            if param.weights:
                path = local_weights(self.params.get(param.name))
                if path is not None:
                    out[param.name] = str(path)
        return out

    def weights_fingerprints(self) -> dict[str, str]:
        """:meth:`weights_files` -> their content fingerprints (hashed once per file state)."""
        from omnistory_core.fingerprints import weights_fingerprint

        return {name: weights_fingerprint(path) for name, path in self.weights_files().items()}

    @property
    def batch_size(self) -> int:
        return int(self.params.get("batch_size") or self.default_batch_size)


class Planner(Component):
    """VLM -> Plan.  Returns :class:`PlannerResponse` (raw text) per item, or a ``str`` (the raw
    text) or a :class:`~omnistory_core.contract.Plan` (already parsed)."""

    kind = "planner"
    reads = EXAMPLE_INPUTS


class Backbone(Component):
    """A semi-orchestration or any-to-any model.  Returns one :class:`BackboneOutput` per item.

    ``produces`` is the non-empty set of modalities (``text``, ``image``, ``speech``) the model
    generates natively; the engine asks experts for the others, from the plan fields the backbone
    returns: ``{"text", "image"}`` is semi-orchestration T+I (a TTS expert speaks
    ``plan["speech"]``), ``{"text", "speech"}`` is T+S (an image expert draws
    ``plan["image_prompt"]``), all three is any-to-any.  However many passes the model makes inside
    ``run_one``, one call per example is one cached record, shared by every system that differs only
    in its experts.
    """

    kind = "backbone"
    produces: ClassVar[frozenset[str]] = frozenset()
    reads = EXAMPLE_INPUTS

    @classmethod
    def call_declaration(cls) -> dict[str, Any]:
        """``produces``: a record made under another one (a modality the backbone no longer
        claims, or one it now does) is recomputed."""
        return {"produces": sorted(getattr(cls, "produces", ()) or ())}


@dataclass
class ImageOutput:
    """An image expert's image with what its call used: a hosted model's tokens, images, cost
    (anything JSON-able; the numbers are summed in the manifest like a planner's usage).

    ``image`` is what an image expert may return otherwise: a ``PIL.Image.Image``, a
    :class:`Media` or PNG bytes."""

    image: Any
    usage: dict[str, Any] = field(default_factory=dict)


class ImageExpert(Component):
    """Prompt [+ current image] -> image.  Returns a ``PIL.Image.Image``, a :class:`Media` (an
    image file) or PNG bytes, or an :class:`ImageOutput` (one of those with the call's usage)."""

    kind = "image"
    reads = ("image_prompt",)


@dataclass
class EvalResult:
    """What a metric or judge returns for one item.

    ``scores`` maps every criterion of the evaluator to a float, or ``None`` where that criterion
    could not be scored.  ``status`` is ``"ok"``, ``"invalid"`` (the evaluator answered; the answer
    or the item's input is unusable) or ``"error"`` (the evaluator itself failed: never cached,
    recomputed next run); ``missing_output`` is decided before the evaluator is called.
    ``detail`` is kept for audit (raw judge response, parse status, repairs, transcripts, ...) and
    must be JSON-able.
    """

    scores: dict[str, float | None]
    status: str = "ok"
    detail: dict[str, Any] = field(default_factory=dict)


class Evaluator(Component):
    """Base of metrics and judges.  Items carry the declared ``reads`` among
    ``EVALUATION_INPUTS`` (candidate_* are the system's outputs, reference_* the gold data);
    ``run_batch`` returns one :class:`EvalResult` (or Failure/Exception) per item."""

    track: ClassVar[str]  # one of the task's tracks (Omni-StoryBench: text, image, speech, omni)
    criteria: ClassVar[tuple[str, ...]]
    #: what one scored item is: ``item`` (an Omni-StoryBench transition, a ViStoryBench shot),
    #: ``group`` (a story: the item's inputs hold every shot of it) or ``run`` (all of a
    #: system's outputs at once, e.g. Inception Score); the scores table keeps it per row
    scope: ClassVar[str] = "item"
    #: the closed interval every score lies in, e.g. ``(0.0, 1.0)``; None: undeclared (a judge
    #: then has the rubric's 1-10).  ``omnistory_testkit.check_component`` holds scores to it.
    score_range: ClassVar[tuple[float, float] | None] = None


class Metric(Evaluator):
    kind = "metric"


class Judge(Evaluator):
    kind = "judge"


class TTSExpert(Component):
    """Utterance + voice attributes -> speech.  Returns :class:`Audio` (or a :class:`Media` of a
    sound file)."""

    kind = "tts"
    reads = ("utterance", "speaker", "emotion", "speed", "pitch", "gender")


__all__ = [
    "ALL_INPUTS",
    "Audio",
    "BACKBONE_MODALITIES",
    "Backbone",
    "BackboneOutput",
    "Component",
    "ComponentError",
    "CANDIDATE_INPUTS",
    "EVALUATION_INPUTS",
    "EXAMPLE_INPUTS",
    "EvalResult",
    "Evaluator",
    "Judge",
    "Metric",
    "Failure",
    "ImageExpert",
    "ImageOutput",
    "KINDS",
    "Media",
    "PLAN_INPUTS",
    "Planner",
    "PlannerResponse",
    "REFERENCE_INPUTS",
    "TTSExpert",
    "WEIGHTS_KEY",
    "calling_examples",
    "current_example",
    "current_examples",
]
