"""Stand-ins: every installed model component replaced by an instant, deterministic twin.

:func:`make_standin_site` writes a tiny distribution (a folder to put on ``PYTHONPATH``) whose
plugin registers, for every planner, backbone, image and TTS expert the other installed plugins
register, a stand-in with the same kind, name, version, ``reads``, ``produces``, ``unit``,
declared ``parameters`` and ``runtime_params``.  It loads before them (its entry point sorts
first), so the real classes are ignored with one warning line each while their configs, presets
and suites stay in place: a preset of any task composes exactly as it would with the real model,
and every cache key has the same inputs and parameters.  What the stand-ins return is derived
from a hash of their inputs (a group-unit one: one output per item of the group):

* a planner: a valid plan; a backbone: narration, a small image, a short tone and a full plan;
* an image expert: an 8x8 image; a TTS expert: a 0.1 s tone.

``OMNISTORY_STANDIN_DELAY_S`` makes every call sleep that long (a stand-in for model time;
``OMNISTORY_STANDIN_DELAYS='{"planner/gpt": 2.0}'`` sets some components' own),
``OMNISTORY_STANDIN_LOAD_S`` every load of a GPU component's stand-in (a stand-in for a model
load; ``OMNISTORY_STANDIN_LOAD_LOG=PATH`` appends one JSON line per load, with its start and end);
``OMNISTORY_STANDIN_LOG=PATH`` appends one JSON line per finished call (component, a digest of its
inputs and parameters, pid, ``CUDA_VISIBLE_DEVICES``, the GPUs it needs, the times it started and
ended, and the
content digests of its inputs and outputs as the engine keys them), so a test can tell that no
call was made twice and on which devices calls ran, and a timeline can tell when a call's inputs
existed (the call that output them ended).  A stand-in needs the GPUs its real
component says it needs (``uses_gpu``, ``gpus()``).  Built-in components (template, copy,
espeak, noop, ...) are left alone.  A stand-in's records declare ``{"stand_in": ...}``
(:class:`_StandIn`): the same keys as the real component's, never served to it (nor its to the
stand-in).

``make_standin_site(directory, evaluators=True)`` replaces every installed metric and judge too,
so that a sweep of stand-ins is scored end to end without weights: a stand-in evaluator has its
real one's kind, name, version, ``reads``, ``scope``, ``unit``, track, criteria, score range,
declared parameters (so the same call keys) and GPU needs (``uses_gpu``, ``gpus()``: a judge's
``tensor_parallel_size``), and returns scores derived from a hash of its inputs (within its
``score_range``; a judge the rubric's 1-10), always valid, so no judge answer awaits the JSON
repair pass.  Calls and loads sleep and are logged as above.  Off by default: a site made
without it leaves the real evaluators in place (scored, say, by a local judge server).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import time
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

DISTRIBUTION = "omnistory-standins"
#: sorts before every other entry-point name, so the stand-ins register first
ENTRY_POINT = "0_standins"
MODULE = "omnistory_standins_plugin"
STANDIN_KINDS = ("planner", "backbone", "image", "tts")
#: replaced too with ``make_standin_site(..., evaluators=True)``
EVALUATOR_KINDS = ("metric", "judge")

_HEADER = '''"""Stand-ins for the installed model components (omnistory_testkit.standins)."""
from omnistory_core.hookspecs import hookimpl
from omnistory_testkit.standins import standin_classes

KEEP = frozenset(KEEP_COMPONENTS)
DECLARED = DECLARATIONS
'''

_PLUGIN = """

@hookimpl
def register_planners(register):
    for cls in standin_classes("planner", KEEP, DECLARED):
        register(cls)


@hookimpl
def register_backbones(register):
    for cls in standin_classes("backbone", KEEP, DECLARED):
        register(cls)


@hookimpl
def register_image_experts(register):
    for cls in standin_classes("image", KEEP, DECLARED):
        register(cls)


@hookimpl
def register_tts_experts(register):
    for cls in standin_classes("tts", KEEP, DECLARED):
        register(cls)
"""


_EVALUATOR_HOOKS = """

@hookimpl
def register_metrics(register):
    for cls in standin_classes("metric", KEEP):
        register(cls)


@hookimpl
def register_judges(register):
    for cls in standin_classes("judge", KEEP):
        register(cls)
"""


def make_standin_site(
    directory: str | Path,
    evaluators: bool = False,
    keep: Sequence[str] = (),
    models: bool = True,
    declarations: bool = True,
) -> Path:
    """Write the stand-in distribution into ``directory`` and return it (put it on PYTHONPATH).
    ``evaluators``: every metric and judge is replaced by a stand-in too; ``keep``: components
    (``kind/name``, e.g. ``image/nanobanana``) left real (an API component against a local
    server); ``models=False``: the planners, backbones and experts are not (a task's own
    generation runs as it is); ``declarations=False``: the stand-ins declare no parameters, as
    those before 2026-12 did (every given parameter enters the key, also one the real component
    leaves out at its default): how the store-reuse golden file of 07ff5fc was written."""
    site = Path(directory)
    info = site / f"{DISTRIBUTION.replace('-', '_')}-0.0.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {DISTRIBUTION}\nVersion: 0.0.0\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(
        f"[omnistory]\n{ENTRY_POINT} = {MODULE}\n", encoding="utf-8"
    )
    (info / "RECORD").write_text("", encoding="utf-8")
    plugin = _HEADER.replace("KEEP_COMPONENTS", repr(sorted(set(keep))))
    plugin = plugin.replace("DECLARATIONS", repr(bool(declarations)))
    plugin += (_PLUGIN if models else "") + (_EVALUATOR_HOOKS if evaluators else "")
    (site / f"{MODULE}.py").write_text(plugin, encoding="utf-8")
    return site


@functools.lru_cache(maxsize=1)
def _real_components() -> dict[str, list[type]]:
    """The model components other installed plugins register (built-ins excluded)."""
    import importlib.metadata as md

    from omnistory_core.plugins import COMPONENT_HOOKS

    found: dict[str, list[type]] = {kind: [] for kind in (*STANDIN_KINDS, *EVALUATOR_KINDS)}
    for ep in sorted(md.entry_points(group="omnistory"), key=lambda e: e.name):
        if ep.name == ENTRY_POINT or ep.value == "omnistory_core.builtin":
            continue
        try:
            module = ep.load()
        except Exception:  # noqa: BLE001 - a broken plugin is reported by the real loader
            continue
        for hook, kind in COMPONENT_HOOKS.items():
            fn = getattr(module, hook, None)
            if kind in found and fn is not None:
                try:
                    fn(register=found[kind].append)
                except Exception:  # noqa: BLE001
                    continue
    return found


def standin_classes(kind: str, keep: Collection[str] = (), declarations: bool = True) -> list[type]:
    """One stand-in class per real component of ``kind`` (but those ``keep`` names); with
    ``declarations``, a model stand-in declares its real component's parameters."""
    if kind in EVALUATOR_KINDS:
        return [
            _evaluator_standin(kind, real)
            for real in _real_components()[kind]
            if f"{kind}/{real.name}" not in keep
        ]
    base = {"planner": _Planner, "backbone": _Backbone, "image": _Image, "tts": _TTS}[kind]
    out = []
    for real in _real_components()[kind]:
        if f"{kind}/{real.name}" in keep:
            continue
        attrs: dict[str, Any] = {
            "name": real.name,
            "version": real.version,
            "reads": tuple(real.reads),
            # the real declaration: the same checks, defaults and config node (a preset of any
            # task composes as with the real component), so the same cache keys
            "parameters": getattr(real, "parameters", None) if declarations else None,
            "runtime_params": tuple(getattr(real, "runtime_params", ())),
            "description": f"STAND-IN for {real.__module__}.{real.__qualname__}",
            "__module__": __name__,
        }
        if kind == "backbone":
            attrs["produces"] = frozenset(real.produces)
        if getattr(real, "unit", "item") != "item":  # one call per group, as the real one
            attrs["unit"] = real.unit
        for name in ("uses_gpu", "gpus"):  # where the engine runs it: as the real one
            if hasattr(real, name):
                attrs[name] = getattr(real, name)
        out.append(type(f"StandIn_{kind}_{real.name}", (base,), attrs))
    return out


def _digest(component: Any, item: dict[str, Any]) -> bytes:
    """Different components (and different parameters) give different outputs, as models do."""

    def plain(value: Any) -> Any:
        return getattr(value, "sha256", value)

    text = json.dumps(
        [component.key(), component.output_params(), {k: plain(v) for k, v in item.items()}],
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(text.encode("utf-8")).digest()


def _sleep(component: Any = None) -> None:
    """``OMNISTORY_STANDIN_DELAY_S`` seconds, or the component's own in
    ``OMNISTORY_STANDIN_DELAYS`` (JSON: ``{"planner/claude": 2.0}``)."""
    delay = float(os.environ.get("OMNISTORY_STANDIN_DELAY_S") or 0)
    own = os.environ.get("OMNISTORY_STANDIN_DELAYS")
    if own and component is not None:
        delay = float(json.loads(own).get(component.key(), delay))
    if delay > 0:
        time.sleep(delay)


def _content(value: Any) -> str:
    """An input's or output's content digest as the engine's call keys read it (16 hex digits)."""
    from omnistory_core.engine.hashing import digest

    kind, _, text = digest(value).partition(":")
    return f"{kind}:{text[:16]}"


def _outputs(result: Any) -> list[str]:
    """What a stand-in's result gives downstream, as a later call's input digests name it: a
    plan's fields (as the engine parses them), the stored PNG or WAV (as a file input)."""
    from omnistory_core.components import Audio, BackboneOutput, Media, PlannerResponse

    if isinstance(result, BackboneOutput):
        fields = [result.text, *(_plan_fields(result.plan) or {}).values()]
        media = [_outputs(m) for m in (result.image, result.speech) if m is not None]
        return [_content(v) for v in fields if isinstance(v, str)] + sum(media, [])
    if isinstance(result, PlannerResponse):
        from omnistory_core.engine.walk import plan_inputs
        from omnistory_core.plan_schema import parse_plan

        plan = parse_plan(result.text).plan
        return [_content(v) for v in plan_inputs(plan).values()] if plan is not None else []
    from omnistory_core.engine.stage import _png_bytes, _wav_bytes

    if isinstance(result, Audio):
        data = _wav_bytes(result)
    elif hasattr(result, "convert"):  # a PIL image
        data = _png_bytes(result)
    else:
        return []
    return [_content(Media(path="", sha256=hashlib.sha256(data).hexdigest()))]


def _plan_fields(plan: dict[str, Any] | str | None) -> dict[str, Any] | None:
    """A backbone's plan as the fields an expert reads (its speech fields flattened; a
    stand-in's plan is always a dict)."""
    if not isinstance(plan, dict) or not plan:
        return None
    return {**{k: v for k, v in plan.items() if k != "speech"}, **(plan.get("speech") or {})}


def _log(
    component: Any,
    digest: bytes,
    start: float | None = None,
    item: dict[str, Any] | None = None,
    result: Any = None,
) -> None:
    from omnistory_core.engine.devices import gpus_needed

    path = os.environ.get("OMNISTORY_STANDIN_LOG")
    if not path:
        return
    line = json.dumps(
        {
            "component": component.key(),
            "digest": digest.hex(),
            "pid": os.getpid(),
            "devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "gpus": gpus_needed(component),
            "start": start,
            "end": time.time(),
            "inputs": sorted({_content(v) for v in (item or {}).values()}),
            "outputs": _outputs(result),
        }
    )
    # one write of a short line to an O_APPEND file: lines of concurrent processes never mix
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode("utf-8"))
    finally:
        os.close(fd)


def _plan(digest: bytes) -> dict[str, Any]:
    from omnistory_core.contract import EMOTIONS, GENDERS, PITCHES, SPEEDS

    tag = digest.hex()[:8]
    return {
        "narration": f'Stand-in page {tag}. "Look!" said Pip.',
        "image_prompt": f"a stand-in illustration {tag}",
        "speech": {
            # distinct per source, as real models' lines are: no chance collision of TTS inputs
            "utterance": f"Look, {tag}!",
            "speaker": "Pip",
            "emotion": EMOTIONS[digest[0] % len(EMOTIONS)],
            "speed": SPEEDS[digest[1] % len(SPEEDS)],
            "pitch": PITCHES[digest[2] % len(PITCHES)],
            "gender": GENDERS[digest[3] % len(GENDERS)],
        },
    }


def _image(digest: bytes):
    from PIL import Image

    return Image.new("RGB", (8, 8), (digest[0], digest[1], digest[2]))


def _tone(digest: bytes):
    import numpy as np

    from omnistory_core.components import Audio

    rate = 16000
    t = np.arange(rate // 10) / rate
    freq = 150 + digest[0]
    # quiet noise seeded by the whole digest: the pitch alone has 256 values, and two sources
    # sharing a waveform would collide in the judges' content-addressed cache
    noise = np.random.default_rng(int.from_bytes(digest[:8], "big")).standard_normal(t.size)
    wave = 0.2 * np.sin(2 * np.pi * freq * t) + 0.001 * noise
    return Audio(wave.astype(np.float32), rate)


def _params_ok(self, **params: Any) -> None:
    from omnistory_core.components import Component

    Component.__init__(self, **params)


def _load(self) -> None:
    """A model load: ``OMNISTORY_STANDIN_LOAD_S`` seconds for a stand-in of a GPU component
    (a hosted API loads nothing), one line in ``OMNISTORY_STANDIN_LOAD_LOG`` (component, pid,
    ``CUDA_VISIBLE_DEVICES``), so a test can count loads per component and device."""
    from omnistory_core.engine.devices import gpus_needed

    if gpus_needed(self) == 0:
        return
    start = time.time()
    delay = float(os.environ.get("OMNISTORY_STANDIN_LOAD_S") or 0)
    if delay > 0:
        time.sleep(delay)
    path = os.environ.get("OMNISTORY_STANDIN_LOAD_LOG")
    if not path:
        return
    line = json.dumps(
        {
            "component": self.key(),
            "pid": os.getpid(),
            "devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "start": start,
            "end": time.time(),
        }
    )
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode("utf-8"))
    finally:
        os.close(fd)


from omnistory_core.components import Backbone, ImageExpert, Planner, TTSExpert  # noqa: E402


class _StandIn:
    """What every stand-in is beyond its real component's declarations: marked ``stand_in`` and
    with an identity of its own in the store.  Its call keys equal the real component's (same
    name, version, parameters, inputs), but every record it writes declares
    ``{"stand_in": ...}``, and the engine recomputes a record made under another declaration:
    a stand-in's result is never served to the real component, nor the real one's to it."""

    stand_in = True

    @classmethod
    def call_declaration(cls) -> dict[str, Any]:
        return {**super().call_declaration(), "stand_in": DISTRIBUTION}  # type: ignore[misc]


def _per_item(one: Any) -> Any:
    """``run_one`` of a stand-in: one output per item, or a group call's list (``unit =
    "group"``: ``{"items": [...]}``), one output per item of the group."""

    def run_one(self, item):
        if getattr(self, "unit", "item") == "group":
            return [one(self, sub) for sub in item["items"]]
        return one(self, item)

    return run_one


def _plan_of(self, item):
    from omnistory_core.components import PlannerResponse

    start = time.time()
    _sleep(self)
    digest = _digest(self, item)
    result = PlannerResponse(json.dumps(_plan(digest)))
    _log(self, digest, start, item, result)
    return result


class _Planner(_StandIn, Planner):
    __init__ = _params_ok
    load = _load
    run_one = _per_item(_plan_of)


def _page_of(self, item):
    from omnistory_core.components import BackboneOutput

    start = time.time()
    _sleep(self)
    digest = _digest(self, item)
    plan = _plan(digest)
    result = BackboneOutput(
        text=plan["narration"],
        image=_image(digest) if "image" in self.produces else None,
        speech=_tone(digest) if "speech" in self.produces else None,
        plan={k: v for k, v in plan.items() if k != "narration"},
    )
    _log(self, digest, start, item, result)
    return result


class _Backbone(_StandIn, Backbone):
    __init__ = _params_ok
    load = _load
    run_one = _per_item(_page_of)


def _image_of(self, item):
    start = time.time()
    _sleep(self)
    digest = _digest(self, item)
    result = _image(digest)
    _log(self, digest, start, item, result)
    return result


def _tone_of(self, item):
    start = time.time()
    _sleep(self)
    digest = _digest(self, item)
    result = _tone(digest)
    _log(self, digest, start, item, result)
    return result


class _Image(_StandIn, ImageExpert):
    __init__ = _params_ok
    load = _load
    run_one = _per_item(_image_of)


class _TTS(_StandIn, TTSExpert):
    __init__ = _params_ok
    load = _load
    run_one = _per_item(_tone_of)


# -- metrics and judges ------------------------------------------------------------------------
#: what a stand-in evaluator copies from its real one: identity, inputs, what a score is, how its
#: calls are keyed and batched, and where the engine runs it (its GPU needs)
_EVALUATOR_ATTRS = (
    "version",
    "reads",
    "scope",
    "unit",
    "track",
    "criteria",
    "score_range",
    "parameters",
    "runtime_params",
    "default_batch_size",
    "uses_gpu",
    "gpus",
    "hosted",
    "spec",
)


def _evaluator_standin(kind: str, real: type) -> type:
    base = {"metric": _Metric, "judge": _Judge}[kind]
    attrs: dict[str, Any] = {
        "name": real.name,
        "description": f"STAND-IN for {real.__module__}.{real.__qualname__}",
        "__module__": __name__,
    }
    for name in _EVALUATOR_ATTRS:
        if name in ("uses_gpu", "gpus", "hosted", "spec") and not hasattr(real, name):
            continue
        attrs[name] = getattr(real, name)
    attrs["reads"] = tuple(attrs["reads"])
    attrs["criteria"] = tuple(attrs["criteria"])
    attrs["runtime_params"] = tuple(attrs["runtime_params"] or ())
    return type(f"StandIn_{kind}_{real.name}", (base,), attrs)


def _plain_deep(value: Any) -> Any:
    """Inputs as their content: media by sha256 at any depth (a story's shots, say)."""
    sha = getattr(value, "sha256", None)
    if isinstance(sha, str):
        return sha
    if isinstance(value, dict):
        return {str(k): _plain_deep(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain_deep(v) for v in value]
    return value


def _evaluator_digest(component: Any, item: dict[str, Any]) -> bytes:
    text = json.dumps(
        [component.key(), component.output_params(), _plain_deep(item)],
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(text.encode("utf-8")).digest()


def _scores(component: Any, digest: bytes) -> dict[str, float | None]:
    """One score per criterion from the digest: a judge's rubric 1-10, else within the
    declared ``score_range`` (0-1 when undeclared)."""
    out: dict[str, float | None] = {}
    for n, criterion in enumerate(component.criteria):
        byte = digest[n % len(digest)]
        if component.kind == "judge" and component.score_range is None:
            out[criterion] = float(1 + byte % 10)
        else:
            low, high = component.score_range or (0.0, 1.0)
            out[criterion] = round(low + (high - low) * byte / 255, 6)
    return out


from omnistory_core.components import EvalResult, Judge, Metric  # noqa: E402


class _EvaluatorStandIn(_StandIn):
    __init__ = _params_ok
    load = _load

    def run_one(self, item):
        start = time.time()
        _sleep(self)
        digest = _evaluator_digest(self, item)
        _log(self, digest, start, item)
        return EvalResult(
            scores=_scores(self, digest), status="ok", detail={"standin": digest.hex()[:16]}
        )


class _Metric(_EvaluatorStandIn, Metric):
    criteria = ()
    track = "text"


class _Judge(_EvaluatorStandIn, Judge):
    criteria = ()
    track = "text"
