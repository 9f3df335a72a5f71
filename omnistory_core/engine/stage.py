"""Run one component over many items: cache lookup, per-key locking, batching, failures as data."""

from __future__ import annotations

import io
import json
import logging
import numbers
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeGuard, cast

from omnistory_core.components import (
    Audio,
    BackboneOutput,
    Component,
    ComponentError,
    EvalResult,
    ImageOutput,
    Media,
    PlannerResponse,
    calling_examples,
)
from omnistory_core.contract import Failure, Plan
from omnistory_core.engine.failures import (
    ComponentUnavailable,
    ContractError,
    exception_failure,
    method_location,
    retry_mode,
    should_recompute,
    show_traceback,
    unavailable_message,
)
from omnistory_core.engine.hashing import call_key
from omnistory_core.engine.store import CallRecord, Store

log = logging.getLogger("omnistory")

__all__ = [
    "CacheMiss",
    "CallUnits",
    "ComponentStats",
    "Encoded",
    "LazyComponent",
    "StageDevices",
    "StageItem",
    "StageRun",
    "call_units",
    "encode_result",
    "exception_failure",
    "is_failure",
    "item_key",
    "run_stage",
    "split_record",
    "unit_of",
]


@dataclass
class ComponentStats:
    calls: int = 0  # real model invocations (cache misses computed by this process)
    cache_hits: int = 0
    failures: int = 0
    loads: int = 0
    #: keys this process computed (not serialized): lets reports tell spend from cache hits
    computed: set[str] = field(default_factory=set, repr=False)

    def to_dict(self) -> dict[str, int]:
        return {
            "calls": self.calls,
            "cache_hits": self.cache_hits,
            "failures": self.failures,
            "loads": self.loads,
        }


class LazyComponent:
    """Loads its component on first use only, so a fully cached run loads no model at all."""

    def __init__(self, component: Component, stats: ComponentStats):
        self.component = component
        self.stats = stats
        self.loaded = False

    def ensure_loaded(self) -> Component:
        if not self.loaded:
            self.component.load()
            self.loaded = True
            self.stats.loads += 1
        return self.component

    def release(self) -> None:
        if self.loaded:
            self.component.unload()
            self.loaded = False


@dataclass
class StageItem:
    """One unit of work: the inputs a component declared, or the upstream failure that blocks it.

    ``key``: its call key when the caller knows it already (else computed from the inputs);
    ``group``: which group of items it belongs to (a story), for a component whose ``unit`` is
    ``group`` (see :func:`call_units`); ``example``: the id of its example, which the component
    can read during the call for logging (:func:`~omnistory_core.components.current_example`),
    never part of the key."""

    index: int
    inputs: dict[str, Any] | None = None
    blocked_by: Failure | None = None
    key: str | None = None
    group: str | None = None
    example: str | None = None


def unit_of(component: Component) -> str:
    """``item`` (one call per item) or ``group`` (one call per group of items)."""
    return str(getattr(component, "unit", "item"))


@dataclass
class CallUnits:
    """A stage's items as its component is called on them: one call per item, or for a
    group-unit component one call per group (indexed by its first member) covering its unblocked
    members in order; a blocked item stays on its own, as its failure."""

    items: list[StageItem]
    #: a group call's index -> the indices of the items it covers, in order
    members: dict[int, list[int]] = field(default_factory=dict)

    def split(
        self, results: dict[int, CallRecord | Failure | None]
    ) -> dict[int, CallRecord | Failure | None]:
        """Per-call results -> per-item results (a group call's record split per member)."""
        out: dict[int, CallRecord | Failure | None] = {}
        for index, result in results.items():
            members = self.members.get(index)
            if members is None:
                out[index] = result
                continue
            for position, member in enumerate(members):
                out[member] = split_record(result, position)
        return out


def call_units(component: Component, items: list[StageItem]) -> CallUnits:
    """The calls of ``component`` on ``items`` (see :class:`CallUnits`).  A group call's inputs
    are ``{"items": [each member's inputs, in order]}``."""
    if unit_of(component) != "group":
        return CallUnits(items)
    groups: dict[str, list[StageItem]] = {}
    for item in items:
        if item.blocked_by is None:
            groups.setdefault(_group_id(item), []).append(item)
    units: list[StageItem] = []
    members: dict[int, list[int]] = {}
    for item in items:
        if item.blocked_by is not None:
            units.append(item)
            continue
        group = groups[_group_id(item)]
        if group[0] is not item:
            continue
        inputs = {"items": [m.inputs or {} for m in group]}
        key = item_key(component, inputs)
        example = item.group if item.group is not None else item.example
        units.append(
            StageItem(item.index, inputs, None, key=key, group=item.group, example=example)
        )
        members[item.index] = [m.index for m in group]
    return CallUnits(units, members)


def _group_id(item: StageItem) -> str:
    # an item without a group is a group of its own
    return item.group if item.group is not None else f"\0{item.index}"


def split_record(record: CallRecord | Failure | None, position: int) -> CallRecord | Failure | None:
    """One member's record of a group call: its own output or failure, under the call's key.  A
    failed call (or one still to make, None) is every member's."""
    if not isinstance(record, CallRecord) or record.status != "ok":
        return record
    entries = record.output.get("items")
    if not isinstance(entries, list) or position >= len(entries):
        return CallRecord(
            key=record.key,
            component=record.component,
            status="failure",
            failure={
                "category": "model_error",
                "message": f"{record.component}: the stored group call has no item {position}",
            },
        )
    entry = entries[position]
    return CallRecord(
        key=record.key,
        component=record.component,
        status=str(entry.get("status", "failure")),
        output=dict(entry.get("output") or {}),
        failure=entry.get("failure"),
        usage=record.usage,
        seconds=record.seconds,
        declared=record.declared,
    )


@dataclass
class Encoded:
    """A result already encoded into the store (by an isolated worker process)."""

    status: str
    output: dict[str, Any]
    failure: dict[str, str] | None
    usage: dict[str, Any]


def encode_result(
    kind: str,
    result: Any,
    store: Store,
    produces: frozenset[str] | None = None,
    owner: type | None = None,
) -> tuple[str, dict, dict | None, dict]:
    """Turn a component's return value into (status, output, failure, usage) for a CallRecord.

    ``produces``: a backbone's modalities, so that one it left out is recorded in the record;
    ``owner``: the component's class, so that an exception says where its code broke.  A value
    of the wrong type raises :class:`ContractError` (a ``contract_error`` of the call)."""
    if isinstance(result, Encoded):
        return result.status, result.output, result.failure, result.usage
    if isinstance(result, Failure):
        return "failure", {}, result.to_dict(), {}
    if isinstance(result, BaseException):
        return "failure", {}, exception_failure(result, owner).to_dict(), {}
    if owner is not None and getattr(owner, "unit", "item") == "group":
        return _encode_group(kind, result, store, produces, owner)
    return _encode_one(kind, result, store, produces, owner)


def _encode_group(
    kind: str, result: Any, store: Store, produces: frozenset[str] | None, owner: type
) -> tuple[str, dict, dict | None, dict]:
    """A group call's list of outputs: one entry per item, each encoded as an item's result
    would be (one bad output fails its item only); usage summed over the items."""
    if not isinstance(result, list | tuple):
        raise _contract(
            owner, kind, "its result", "a list with one output per item of the group", result
        )
    entries: list[dict[str, Any]] = []
    usage: dict[str, Any] = {}
    for out in result:
        try:
            if isinstance(out, Failure | BaseException):
                status, output, failure, item_usage = encode_result(kind, out, store, None, owner)
            else:
                status, output, failure, item_usage = _encode_one(kind, out, store, produces, owner)
        except Exception as exc:  # malformed output or empty waveform: this item only
            status, output, failure, item_usage = (
                "failure",
                {},
                exception_failure(exc, owner).to_dict(),
                {},
            )
        entry: dict[str, Any] = {"status": status, "output": output}
        if failure is not None:
            entry["failure"] = failure
        entries.append(entry)
        for name, value in item_usage.items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                usage[name] = usage.get(name, 0) + value
            else:
                usage.setdefault(name, value)
    return "ok", {"items": entries}, None, usage


# -- the output contract ---------------------------------------------------------------------
#: what each output field may be, as a contract error names it
IMAGE_TYPES = "a PIL.Image.Image, a Media or PNG bytes"
SPEECH_TYPES = "an Audio (or a Media of a sound file)"


def _type_name(value: Any) -> str:
    """``str``, ``numpy.ndarray``, ``PIL.Image``: what a contract error says was returned."""
    cls = type(value)
    module = cls.__module__ or ""
    if module == "builtins" or module.startswith("omnistory_core."):
        return cls.__name__
    return f"{module.split('.')[0]}.{cls.__name__}"


def _label(owner: type | None, kind: str) -> str:
    key = getattr(owner, "key", None)
    return str(key()) if callable(key) else kind


def _contract(
    owner: type | None, kind: str, field_name: str, expected: str, value: Any
) -> ContractError:
    """The error of a returned ``value`` that is not what ``field_name`` takes: one line naming
    the field, the type expected and the one returned; the method that returned it is its
    ``where`` (``file:line``)."""
    return ContractError(
        f"{_label(owner, kind)} returned {_type_name(value)} for {field_name}, expected {expected}",
        method_location(owner),
    )


def _is_pil_image(value: Any) -> bool:
    # PIL is imported by whoever made the image: no image can exist without the module loaded
    module = sys.modules.get("PIL.Image")
    return module is not None and isinstance(value, module.Image)


def _image_bytes(value: Any, field_name: str, owner: type | None, kind: str) -> bytes:
    """A returned illustration as the bytes to store (PNG bytes are kept as they are)."""
    if isinstance(value, bytes | bytearray):
        return bytes(value)
    if isinstance(value, Media):
        return _png_bytes(value.open_image())
    if _is_pil_image(value):
        return _png_bytes(value)
    raise _contract(owner, kind, field_name, IMAGE_TYPES, value)


def _speech_bytes(value: Any, field_name: str, owner: type | None, kind: str) -> bytes:
    """A returned waveform as the WAV bytes to store (a sound file as Media is decoded and
    written the way an Audio is)."""
    if isinstance(value, Media):
        import soundfile as sf

        samples, rate = sf.read(value.path, dtype="float32", always_2d=False)
        if getattr(samples, "ndim", 1) > 1:
            samples = samples.mean(axis=1)  # a mono waveform, as Audio is
        value = Audio(samples=samples, sample_rate=int(rate))
    if not isinstance(value, Audio):
        raise _contract(owner, kind, field_name, SPEECH_TYPES, value)
    rate = value.sample_rate
    if (
        isinstance(rate, bool)
        or not isinstance(rate, numbers.Real)
        or rate <= 0
        or int(rate) != rate
    ):
        raise _contract(owner, kind, f"{field_name}.sample_rate", "a positive int", rate)
    try:
        import numpy as np

        np.asarray(value.samples, dtype=np.float32)
    except (TypeError, ValueError):
        raise _contract(
            owner, kind, f"{field_name}.samples", "an array of floats in [-1, 1]", value.samples
        ) from None
    return _wav_bytes(value)


def _encode_one(
    kind: str,
    result: Any,
    store: Store,
    produces: frozenset[str] | None,
    owner: type | None = None,
) -> tuple[str, dict, dict | None, dict]:
    """One output of the component's kind (not a failure) -> (status, output, failure, usage)."""
    if kind == "planner":
        if isinstance(result, str):
            result = PlannerResponse(text=result)
        elif isinstance(result, Plan):  # a parsed plan: stored as the JSON the parser reads
            result = PlannerResponse(text=json.dumps(result.to_dict(), ensure_ascii=False))
        if not isinstance(result, PlannerResponse):
            raise _contract(owner, kind, "its result", "a PlannerResponse, str or Plan", result)
        if not isinstance(result.text, str):
            raise _contract(owner, kind, "PlannerResponse.text", "str", result.text)
        return "ok", {"text": result.text}, None, _usage(result.usage, owner, kind, "Planner")
    if kind == "image":
        usage: dict[str, Any] = {}
        if isinstance(result, ImageOutput):
            usage = _usage(result.usage, owner, kind, "ImageOutput")
            result = result.image
        data = _image_bytes(result, "the image", owner, kind)
        return "ok", {"blob": store.put_blob(data, "png"), "ext": "png"}, None, usage
    if kind == "tts":
        data = _speech_bytes(result, "the speech", owner, kind)
        return "ok", {"blob": store.put_blob(data, "wav"), "ext": "wav"}, None, {}
    if kind == "backbone":
        if not isinstance(result, BackboneOutput):
            raise _contract(owner, kind, "its result", "a BackboneOutput", result)
        out = encode_backbone_output(result, store, produces, owner)
        for modality in sorted(produces or ()):
            present = out.get(modality) if modality != "text" else out.get("text")
            if present is None and modality not in out["failures"]:
                out["failures"][modality] = {
                    "category": f"backbone_no_{modality}",
                    "message": f"{_label(owner, kind)} returned no {modality}",
                }
        return "ok", out, None, _usage(result.usage, owner, kind, "BackboneOutput")
    if kind in ("metric", "judge"):
        if not isinstance(result, EvalResult):
            raise _contract(owner, kind, "its result", "an EvalResult", result)
        if not isinstance(result.scores, dict):
            raise _contract(owner, kind, "EvalResult.scores", "a dict", result.scores)
        out = {"scores": result.scores, "status": result.status, "detail": result.detail}
        return "ok", out, None, dict(result.detail.get("usage", {}) or {})
    raise ValueError(f"no encoder for component kind {kind!r}")


def _usage(usage: Any, owner: type | None, kind: str, cls: str) -> dict[str, Any]:
    if not isinstance(usage, dict):
        raise _contract(owner, kind, f"{cls}.usage", "a dict", usage)
    return dict(usage)


def encode_backbone_output(
    result: BackboneOutput,
    store: Store,
    produces: frozenset[str] | None = None,
    owner: type | None = None,
) -> dict[str, Any]:
    """One record for everything a backbone made: narration, plan, media blobs, and per-modality
    failures (an image that cannot be read or an empty waveform fails that modality only).

    A field of the wrong type, or a modality outside ``produces`` (when given), raises
    :class:`ContractError`: the call fails as a whole, since the backbone's code is wrong, not
    this example's output."""
    kind = "backbone"
    for name, value in (("image", result.image), ("speech", result.speech)):
        if produces is not None and value is not None and name not in produces:
            raise ContractError(
                f"{_label(owner, kind)} returned {_type_name(value)} for BackboneOutput.{name}"
                f" but its produces is {sorted(produces)}: declare {name!r} in produces, or"
                f" return {name}=None and put what an expert needs in the plan",
                method_location(owner),
            )
    if result.text is not None and not isinstance(result.text, str):
        raise _contract(owner, kind, "BackboneOutput.text", "a str", result.text)
    plan = result.plan
    if isinstance(plan, Plan):
        plan = plan.to_dict()
    if plan is not None and not isinstance(plan, dict | str):
        raise _contract(owner, kind, "BackboneOutput.plan", "a dict, str or Plan", plan)
    try:
        json.dumps(plan)  # the plan lives in the record: it must be JSON
    except (TypeError, ValueError) as exc:
        raise _contract(
            owner, kind, "BackboneOutput.plan", f"JSON-able values ({exc})", plan
        ) from None
    declared = result.failures or {}
    if not isinstance(declared, dict):
        raise _contract(owner, kind, "BackboneOutput.failures", "a dict of Failure", declared)
    for name, failure in declared.items():
        if not isinstance(failure, Failure):
            raise _contract(owner, kind, f"BackboneOutput.failures[{name!r}]", "a Failure", failure)
    failures = {m: f.to_dict() for m, f in declared.items()}
    out: dict[str, Any] = {"text": result.text, "plan": plan}
    encoders: tuple[tuple[str, Any, Callable[..., bytes], str], ...] = (
        ("image", result.image, _image_bytes, "png"),
        ("speech", result.speech, _speech_bytes, "wav"),
    )
    for modality, value, encode, ext in encoders:
        if value is None:
            continue
        try:
            data = encode(value, f"BackboneOutput.{modality}", owner, kind)
            out[modality] = {"blob": store.put_blob(data, ext), "ext": ext}
        except ContractError:
            raise
        except Exception as exc:  # noqa: BLE001 - recorded per modality, the others survive
            failures[modality] = exception_failure(exc, owner).to_dict()
    out["failures"] = failures
    return out


def _png_bytes(image: Any) -> bytes:
    buf = io.BytesIO()
    image.convert("RGB").save(buf, format="PNG")
    return buf.getvalue()


def _wav_bytes(audio: Audio) -> bytes:
    import numpy as np
    import soundfile as sf

    samples = np.asarray(audio.samples, dtype=np.float32).reshape(-1)
    if samples.size == 0:
        raise ComponentError("empty waveform", category="empty_output")
    buf = io.BytesIO()
    sf.write(
        buf, np.clip(samples, -1.0, 1.0), int(audio.sample_rate), format="WAV", subtype="PCM_16"
    )
    return buf.getvalue()


def stored_failures(record: CallRecord) -> list[dict[str, Any]]:
    """The failures a record holds: the call's, a backbone's per-modality ones, an evaluator
    result kept for audit whose inference failed, or those of a group call's items."""
    if record.status != "ok":
        return [record.failure or {"category": "model_error"}]
    entries = record.output.get("items")
    if isinstance(entries, list):
        members = (split_record(record, n) for n in range(len(entries)))
        return [f for m in members if isinstance(m, CallRecord) for f in stored_failures(m)]
    if record.output.get("failures"):  # a backbone call that left a modality out
        return [dict(f) for f in record.output["failures"].values()]
    detail = record.output.get("detail") or {}
    if isinstance(detail, dict) and detail.get("inference_status") == "error":
        return [{"category": "model_error"}]
    return []


def is_failure(record: CallRecord) -> bool:
    """A failed call, including evaluator results kept for audit whose inference failed."""
    return bool(stored_failures(record))


def needs_recompute(
    record: CallRecord,
    mode: str,
    derived: Callable[[CallRecord], bool] | None = None,
    declaration: dict[str, Any] | None = None,
) -> bool:
    """Whether a stored record is recomputed under ``engine.retry_failures`` = ``mode``.

    ``derived`` says whether an ok record still left an output missing downstream (an unparseable
    plan): deterministic, so only ``all`` recomputes it.  ``declaration``: the component's
    :meth:`~omnistory_core.components.Component.call_declaration`; a record made under another
    one is recomputed whatever the mode, as a record under another key would be."""
    if declaration is not None and declaration_changed(record, declaration):
        return True
    failures = stored_failures(record)
    if failures:
        return any(should_recompute(f, mode) for f in failures)
    return mode == "all" and derived is not None and derived(record)


def declaration_changed(record: CallRecord, declaration: dict[str, Any]) -> bool:
    """Whether ``record`` was made under another declaration than ``declaration`` (a backbone's
    ``produces``).  A record written before records kept their declaration is judged by what it
    holds: a modality the backbone now produces that it has neither an output nor a failure for,
    or one it no longer produces that it has an output or a ``backbone_no_*`` failure for."""
    if record.declared or set(declaration) - {"produces"}:
        # a declaration beyond ``produces`` (a stand-in's) never matches a record made without
        # one, and a record that has one is never another component's
        return _canonical(record.declared) != _canonical(declaration)
    produces = declaration.get("produces")
    if not produces or record.status != "ok":
        return False
    entries = record.output.get("items")
    outputs = (
        [dict(e.get("output") or {}) for e in entries if e.get("status") == "ok"]
        if isinstance(entries, list)
        else [record.output]
    )
    return any(_holds_other_modalities(out, set(produces)) for out in outputs)


def declaration_of(component: Any) -> dict[str, Any]:
    """A component's :meth:`~omnistory_core.components.Component.call_declaration` (an isolated
    one's is its real class's); ``{}`` for an object that declares none."""
    declare = getattr(component, "call_declaration", None)
    value = declare() if callable(declare) else None
    return dict(value) if isinstance(value, dict) else {}


def _canonical(value: dict[str, Any]) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _holds_other_modalities(output: dict[str, Any], produces: set[str]) -> bool:
    failures = output.get("failures") or {}
    for modality in ("image", "speech"):
        made = output.get(modality) is not None
        failure = failures.get(modality)
        if modality in produces and not made and failure is None:
            return True
        missing = isinstance(failure, dict) and failure.get("category") == f"backbone_no_{modality}"
        if modality not in produces and (made or missing):
            return True
    return False


class CacheMiss(Exception):
    """``run_stage(cache_only=True)`` met a call that has no usable record."""


def item_key(component: Component, inputs: dict[str, Any]) -> str:
    """The cache key of one call (a group call's: of ``{"items": [...]}``, every item's inputs,
    files by content)."""
    return call_key(component.key(), component.version, component.output_params(), inputs)


class StageDevices(Protocol):
    """Runs the claimable calls of a stage on replicas of its component on other devices
    (:class:`omnistory_core.engine.replicas.ReplicaRunner`); given to :func:`run_stage` by the
    job when ``engine.devices`` makes a device pool."""

    def wants(self, component: Component) -> bool:
        """Whether this component's calls run on devices (it needs a GPU)."""
        ...

    def run(self, stage: StageRun) -> None:
        """Compute every call of ``stage`` still to claim (and the ones whose owner died)."""
        ...


def run_stage(
    lazy: LazyComponent,
    items: list[StageItem],
    store: Store,
    *,
    retry_failures: bool | str = False,
    advance: Callable[[int], None] | None = None,
    derived_failure: Callable[[CallRecord], bool] | None = None,
    load_failure: str = "record",
    cache_only: bool = False,
    devices: StageDevices | None = None,
    on_result: Callable[[list[int], CallRecord | Failure], None] | None = None,
) -> dict[int, CallRecord | Failure]:
    """Compute (or fetch) the component's result for every item.

    Returns, per item index, the :class:`CallRecord` (ok or failure) or the upstream
    :class:`Failure` that blocked the call.  Identical keys within the stage are computed once.
    A group-unit component is called once per group of items (:func:`call_units`) and its
    records are split back per item.

    ``retry_failures``: ``errors`` / ``all`` / ``none`` (``True``/``False`` = all/none), which
    stored failures are recomputed; ``derived_failure``: see :func:`needs_recompute`.
    ``load_failure``: ``record`` makes every item of a component that cannot load a failure of
    this run (not stored); ``raise`` raises :class:`ComponentUnavailable` instead.
    ``cache_only``: raise :class:`CacheMiss` instead of computing anything.
    ``devices``: run the calls on replicas on other devices when it ``wants`` the component.
    ``on_result(indices, result)``: told of each call's final result as it lands (the indices of
    :func:`call_units`' calls it answers), so a caller can start on it before the stage ends.

    Calls are claimed a batch at a time (the key locks of one ``batch_size`` chunk), so several
    processes sharing the store -- jobs of a sweep, or replicas of this stage on other devices --
    split a stage's calls between them instead of one claiming them all.
    """
    mode = retry_mode(retry_failures)
    component = lazy.component
    bind = getattr(component, "bind_store", None)
    if callable(bind):
        bind(Path(store.root))
    units = call_units(component, items)
    sizes = {index: len(members) for index, members in units.members.items()}
    stage = StageRun(
        lazy, store, mode, derived_failure, advance or (lambda n: None), load_failure, sizes
    )
    stage.on_result = on_result
    for item in units.items:
        stage.add(item)
    pending: list[str] = []
    for key in stage.keyed:
        record = store.get(key)
        if stage.usable(record):
            stage.finish(key, record, computed=False)
        else:
            pending.append(key)
    if pending and cache_only:
        raise CacheMiss(f"{component.key()}: {len(pending)} call(s) not in the store")
    stage.pending.extend(pending)
    if pending:
        if devices is not None and devices.wants(component):
            devices.run(stage)
        else:
            stage.run_here()
    if not units.members:
        return stage.results
    return cast(dict[int, CallRecord | Failure], units.split(dict(stage.results)))


class StageRun:
    """One stage's bookkeeping, shared by the threads that compute its calls: the items by key,
    the results, the keys still to claim, the keys other processes hold, and the stats."""

    def __init__(
        self,
        lazy: LazyComponent,
        store: Store,
        mode: str,
        derived_failure: Callable[[CallRecord], bool] | None,
        advance: Callable[[int], None],
        load_failure: str,
        sizes: dict[int, int] | None = None,
    ):
        self.lazy = lazy
        self.component = lazy.component
        self.stats = lazy.stats
        self.store = store
        self.mode = mode
        self.derived_failure = derived_failure
        self.advance = advance
        self.load_failure = load_failure
        self.results: dict[int, CallRecord | Failure] = {}
        #: how many items a call at this index stands for (a group call: its members), else 1
        self.sizes: dict[int, int] = sizes or {}
        self.keyed: dict[str, list[int]] = {}
        self.inputs_by_key: dict[str, dict[str, Any]] = {}
        #: the example id a call is made for (its first item's), told to the component
        self.example_by_key: dict[str, str | None] = {}
        #: what the component declares beyond its key (bound to each record it writes)
        self.declaration: dict[str, Any] = declaration_of(self.component)
        #: keys with no usable record, in item order; ``pending[cursor:]`` are still to claim
        self.pending: list[str] = []
        self.cursor = 0
        #: keys another process held when this one tried them: waited for at the end
        self.theirs: list[str] = []
        #: why the component could not load (its remaining calls fail for this run, unstored)
        self.load_error: Failure | None = None
        self._claim_lock = threading.Lock()
        self._result_lock = threading.RLock()
        #: told of each final result as it lands (see :func:`run_stage`)
        self.on_result: Callable[[list[int], CallRecord | Failure], None] | None = None

    @property
    def batch_size(self) -> int:
        return max(1, self.component.batch_size)

    def add(self, item: StageItem) -> None:
        if item.blocked_by is not None:
            self.results[item.index] = item.blocked_by
            self.advance(1)
            if self.on_result is not None:
                self.on_result([item.index], item.blocked_by)
            return
        key = item.key or item_key(self.component, item.inputs or {})
        self.keyed.setdefault(key, []).append(item.index)
        self.inputs_by_key.setdefault(key, item.inputs or {})
        self.example_by_key.setdefault(key, item.example)

    def usable(self, record: CallRecord | None) -> TypeGuard[CallRecord]:
        return record is not None and not needs_recompute(
            record, self.mode, self.derived_failure, self.declaration
        )

    def finish(self, key: str, record: CallRecord, computed: bool) -> None:
        with self._result_lock:
            for n, index in enumerate(self.keyed[key]):
                self.results[index] = record
                if computed and n == 0:
                    self.stats.calls += 1
                    self.stats.computed.add(key)
                else:
                    self.stats.cache_hits += 1
                if record.status != "ok":
                    self.stats.failures += 1
            self.advance(sum(self.sizes.get(index, 1) for index in self.keyed[key]))
        if self.on_result is not None:
            self.on_result(list(self.keyed[key]), record)

    def count_load(self) -> None:
        with self._result_lock:
            self.stats.loads += 1

    # -- claiming ---------------------------------------------------------------------------
    def unclaimed(self) -> int:
        """Keys no one of this stage has tried to claim yet."""
        return len(self.pending) - self.cursor

    def unclaimed_keys(self) -> list[str]:
        """Those keys, in the order they will be claimed."""
        with self._claim_lock:
            return self.pending[self.cursor :]

    def claim(self) -> list[tuple[str, Any]]:
        """Lock up to ``batch_size`` keys still to compute: the next chunk.
        A key whose record appeared meanwhile is finished as a cache hit; a key another process
        holds is left to :meth:`wait_theirs`.  Empty: nothing left to claim."""
        size = self.batch_size
        chunk: list[tuple[str, Any]] = []
        with self._claim_lock:
            while self.cursor < len(self.pending) and len(chunk) < size:
                key = self.pending[self.cursor]
                self.cursor += 1
                lock = self.store.lock(key)
                if lock.acquire(blocking=False):
                    record = self.store.get(key)
                    if self.usable(record):
                        lock.release()
                        self.finish(key, record, computed=False)
                    else:
                        chunk.append((key, lock))
                else:
                    self.theirs.append(key)
        return chunk

    def skip_done(self) -> None:
        """Finish, as cache hits, unclaimed keys whose record another process has written
        meanwhile (so no replica is started for calls that are already made)."""
        with self._claim_lock:
            rest = self.pending[self.cursor :]
            left = []
            for key in rest:
                record = self.store.get(key)
                if self.usable(record):
                    self.finish(key, record, computed=False)
                else:
                    left.append(key)
            self.pending[self.cursor :] = left

    def wait_theirs(self) -> Iterator[tuple[str, Any]]:
        """Wait for each key another process held; yields, locked, those it left without a
        usable record (it died or failed to write): they are this process's to compute."""
        while True:
            with self._claim_lock:
                if not self.theirs:
                    return
                key = self.theirs.pop(0)
            lock = self.store.lock(key)
            lock.acquire(blocking=True)
            record = self.store.get(key)
            if self.usable(record):
                lock.release()
                self.finish(key, record, computed=False)
            else:
                yield key, lock

    # -- computing --------------------------------------------------------------------------
    def run_here(self) -> None:
        """Every call in this process, a claimed chunk at a time, then the others' leftovers."""
        while chunk := self.claim():
            self.compute(self.lazy.ensure_loaded, chunk)
        for entry in self.wait_theirs():
            self.compute(self.lazy.ensure_loaded, [entry])

    def fail_load(self, chunk: list[tuple[str, Any]], exc: BaseException) -> None:
        """The component could not load: ``raise`` mode raises (locks released), ``record``
        mode makes the chunk's calls failures of this run, not stored, so the next run retries."""
        owner = type(getattr(self.component, "_component", self.component))
        show_traceback(f"{self.component.key()} could not load", exception_failure(exc, owner))
        if self.load_failure == "raise":
            for _, lock in chunk:
                lock.release()
            raise ComponentUnavailable(unavailable_message(self.component, exc)) from exc
        if self.load_error is None:
            failure = exception_failure(exc, owner)
            self.load_error = Failure(
                failure.category,
                f"load failed: {failure.message}",
                exception=failure.exception,
                where=failure.where,
                traceback=failure.traceback,
            )
        self.fail_chunk(chunk, self.load_error)

    def fail_chunk(self, chunk: list[tuple[str, Any]], failure: Failure) -> None:
        for key, lock in chunk:
            record = CallRecord(
                key=key, component=self.component.key(), status="failure", failure=failure.to_dict()
            )
            self.finish(key, record, computed=False)
            lock.release()

    def checked_group(self, key: str, out: Any) -> Any:
        """A group call's result, or a ``model_error`` naming the component and the lengths when
        it does not hold one output per item of the group (every member then fails)."""
        if unit_of(self.component) != "group":
            return out
        expected = len(self.inputs_by_key[key].get("items") or [])
        if isinstance(out, Encoded):
            entries = out.output.get("items") if out.status == "ok" else None
            got = len(entries) if isinstance(entries, list) else None
        else:
            got = len(out) if isinstance(out, list | tuple) else None
        if got is None or got == expected:
            return out
        return Failure(
            "model_error",
            f"{self.component.key()} returned {got} outputs for a group of {expected} items",
        )

    def examples_of(self, keys: list[str]) -> Any:
        """The context in which the component is called on ``keys``: each call's example id
        (:func:`~omnistory_core.components.current_examples`), or none when a caller of
        :func:`run_stage` did not name the examples."""
        ids = [self.example_by_key.get(k) for k in keys]
        if any(i is None for i in ids):
            return calling_examples(())
        return calling_examples([str(i) for i in ids])

    def show_tracebacks(self, key: str, record: CallRecord) -> None:
        """``OMNISTORY_VERBOSE=1``: each exception of this call, with its traceback, on stderr."""
        example = self.example_by_key.get(key)
        where = f" on example {example}" if example else ""
        for failure in stored_failures(record):
            show_traceback(f"{self.component.key()} failed{where} (call {key[:12]})", failure)

    def compute(self, loaded: Callable[[], Any], chunk: list[tuple[str, Any]]) -> None:
        """Run one claimed chunk on the instance ``loaded()`` returns (loading it on first use),
        store each result and release its lock.  One bad item never sinks its batch-mates."""
        if self.load_error is not None:
            self.fail_chunk(chunk, self.load_error)
            return
        try:
            instance = loaded()
        except Exception as exc:
            self.fail_load(chunk, exc)
            return
        component = self.component
        owner = type(getattr(component, "_component", component))  # an isolated one: the real class
        try:
            t0 = time.perf_counter()
            with self.examples_of([k for k, _ in chunk]):
                outputs = instance.run_batch([self.inputs_by_key[k] for k, _ in chunk])
            if len(outputs) != len(chunk):
                raise RuntimeError(
                    f"{component.key()} returned {len(outputs)} results for {len(chunk)} items"
                )
            per_item = (time.perf_counter() - t0) / len(chunk)
            pairs = list(zip(chunk, outputs, strict=True))
        except Exception as batch_exc:  # one bad item must not sink its batch-mates
            if len(chunk) == 1:
                pairs, per_item = [(chunk[0], batch_exc)], 0.0
            else:
                pairs, per_item = [], 0.0
                for entry in chunk:
                    try:
                        with self.examples_of([entry[0]]):
                            out = instance.run_batch([self.inputs_by_key[entry[0]]])[0]
                    except Exception as exc:
                        out = exc
                    pairs.append((entry, out))
        for (key, lock), out in pairs:
            out = self.checked_group(key, out)
            try:
                try:
                    status, output, failure, usage = encode_result(
                        component.kind, out, self.store, getattr(component, "produces", None), owner
                    )
                except Exception as exc:  # malformed return value or empty waveform
                    status, output, failure, usage = (
                        "failure",
                        {},
                        exception_failure(exc, owner).to_dict(),
                        {},
                    )
                record = CallRecord(
                    key=key,
                    component=component.key(),
                    status=status,
                    output=output,
                    failure=failure,
                    usage=usage,
                    seconds=round(per_item, 6),
                    declared=self.declaration,
                )
                self.show_tracebacks(key, record)
                held = getattr(lock, "held", None)
                if callable(held) and not held():
                    # stalled past its lease: the key may be another process's now, whose record
                    # is the one that counts; wait for it like any key held elsewhere
                    log.warning(
                        "%s: the lock on %s lapsed while computing it; not writing this result",
                        component.key(),
                        key[:12],
                    )
                    with self._claim_lock:
                        self.theirs.append(key)
                    continue
                self.store.put(record)
                self.finish(key, record, computed=True)
            finally:
                lock.release()
