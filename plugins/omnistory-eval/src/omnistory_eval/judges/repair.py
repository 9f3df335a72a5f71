"""The stage-end JSON repair pass (App. E.3.1 "JSON repair", E.4 repair prompt, E.5 / F.6).

After every judge of a stage has finished, :func:`repair_stage` sends each answer that is non-empty
and still invalid after local normalization to the repair model (Qwen3-30B-A3B-Instruct-2507) with
the shared repair prompt, its schema instantiated with the originating track's four keys, under
structured decoding that allows only that schema or ``{"unrecoverable": true}``.  Empty answers and
inference failures are never sent.

A repair is accepted only if it validates and every score it gives appears in the judge's raw
answer (:func:`unsupported_scores`); a repair that supplies a score absent from the raw answer is
rejected and recorded (``repair_status="rejected_invented_score"``), as the paper dropped seven such
speech records.  An accepted repair keeps the originating judge's identity: the result's
``detail["judge"]`` is unchanged and the repair model is recorded under ``detail["repair"]``.
"""

from __future__ import annotations

import copy
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from omnistory_core.components import EvalResult, Judge
from omnistory_eval.judges import prompts
from omnistory_eval.judges.backends.base import Backend, Generation
from omnistory_eval.judges.backends.registry import create_backend
from omnistory_eval.judges.parsing import parse_judge_response
from omnistory_eval.judges.render import RenderedPrompt
from omnistory_eval.judges.rubric import criteria_for, repair_json_schema
from omnistory_eval.judges.specs import REPAIR_SPEC

#: the parameter under which a replica worker rebuilds a judge's JSON repair model
#: (:class:`RepairComponent`): never a user's parameter.  Here, not in ``judge``, which imports
#: this module: the judge class reads it to rebuild a repair component.
REPAIR_ROLE = "__repair_model__"

# an integer token, optionally written "8.0"; "8.5" and digits inside words do not count
_NUMBER = re.compile(r"(?<![\w.])(\d+)(?:\.0+)?(?![\w]|\.\d)")


@dataclass(frozen=True)
class RepairRequest:
    """One answer to repair: the originating track, the raw answer and its parse error."""

    track: str
    raw_response: str
    parse_error: str

    def prompt(self) -> RenderedPrompt:
        """The repair model's messages and its structured-decoding schema."""
        return RenderedPrompt(
            judge_id=REPAIR_SPEC.id,
            track=self.track,
            messages=prompts.repair_messages(
                track=self.track, raw_response=self.raw_response, parse_error=self.parse_error
            ),
            media=(),
            json_schema=repair_json_schema(self.track),
        )


class Repairer(Protocol):
    """Anything that answers repair requests, one raw string (or an exception) per request."""

    checkpoint: str

    def generate_repairs(self, requests: Sequence[RepairRequest]) -> list[str | BaseException]: ...


class RepairModel:
    """The paper's repair model behind a judge backend (``vllm`` by default, or ``openai``).

    Takes the same backend parameters as a judge (``base_url``, ``model``, ``concurrency``, ...);
    decoding is REPAIR_SPEC's: seed 0, greedy, at most 1024 new tokens, context 8192.
    """

    def __init__(self, backend: str = "vllm", **params: Any):
        self.backend_name = backend
        self.params = params
        self.checkpoint = str(params.get("checkpoint") or REPAIR_SPEC.checkpoint)
        self._backend: Backend | None = None

    def load(self) -> None:
        if self._backend is None:
            self._backend = create_backend(self.backend_name, REPAIR_SPEC, dict(self.params))
            self._backend.load()

    def unload(self) -> None:
        if self._backend is not None:
            self._backend.close()
            self._backend = None

    def generate_repairs(self, requests: Sequence[RepairRequest]) -> list[str | BaseException]:
        self.load()
        assert self._backend is not None, "load() sets the backend"
        generations: list[Generation] = self._backend.generate([r.prompt() for r in requests])
        return [
            RuntimeError(g.error) if g.error is not None else (g.text or "") for g in generations
        ]


# -- invented-score check ----------------------------------------------------------------------


def _key_pattern(key: str) -> re.Pattern[str]:
    words = [re.escape(w) for w in key.split("_")]
    return re.compile(r"[\s_\-]*".join(words), re.I)


def _numbers(text: str) -> list[int]:
    return [int(m.group(1)) for m in _NUMBER.finditer(text)]


def unsupported_scores(raw: str, scores: dict[str, int], track: str) -> dict[str, int]:
    """The repaired scores that the raw answer does not contain.

    For a criterion whose key occurs in the raw answer, its score must appear as a number between
    an occurrence of that key and the next criterion key.  Scores of criteria whose key does not
    occur (misspelt, say) must be matched, one each, by numbers found outside those spans.
    """
    keys = criteria_for(track)
    hits = sorted(
        (m.start(), m.end(), key) for key in keys for m in _key_pattern(key).finditer(raw)
    )
    spans: dict[str, list[tuple[int, int]]] = {}
    for i, (_start, end, key) in enumerate(hits):
        stop = hits[i + 1][0] if i + 1 < len(hits) else len(raw)
        spans.setdefault(key, []).append((end, stop))
    covered = sorted(s for v in spans.values() for s in v)
    outside, pos = [], 0
    for begin, stop in covered:
        outside.append(raw[pos:begin])
        pos = max(pos, stop)
    outside.append(raw[pos:])
    pool = Counter(n for part in outside for n in _numbers(part))
    invented: dict[str, int] = {}
    for key in keys:
        if key not in scores:
            continue
        score = scores[key]
        if key in spans:
            if not any(score in _numbers(raw[a:b]) for a, b in spans[key]):
                invented[key] = score
        elif pool[score] > 0:
            pool[score] -= 1
        else:
            invented[key] = score
    return invented


def _is_unrecoverable(text: str) -> bool:
    import json

    try:
        value = json.loads(text.strip())
    except ValueError:
        return False
    return isinstance(value, dict) and value.get("unrecoverable") is True


# -- the pass ----------------------------------------------------------------------------------


@dataclass
class RepairStageResult:
    """Results after repair (same order as given) and counts by repair status."""

    results: list[EvalResult]
    summary: dict[str, Any] = field(default_factory=dict)


def is_repair_candidate(result: Any) -> bool:
    """Non-empty, successfully generated, still invalid, not yet repaired."""
    if not isinstance(result, EvalResult) or result.status != "invalid":
        return False
    d = result.detail
    return (
        d.get("inference_status") == "ok"
        and d.get("repair_status") == "pending"
        and isinstance(d.get("raw_response"), str)
        and bool(d["raw_response"].strip())
    )


def apply_repair(result: EvalResult, response: str | BaseException, checkpoint: str) -> EvalResult:
    """A copy of ``result`` updated with one repair answer (pure)."""
    detail = copy.deepcopy(result.detail)
    track = detail["track"]
    keys = criteria_for(track)
    record: dict[str, Any] = {"model": checkpoint}
    detail["repair"] = record
    if isinstance(response, BaseException):
        record["error"] = f"{type(response).__name__}: {response}"
        detail["repair_status"] = "failed"
        return EvalResult(scores=dict.fromkeys(keys), status="invalid", detail=detail)
    record["raw_response"] = response
    if _is_unrecoverable(response):
        detail["repair_status"] = "unrecoverable"
        return EvalResult(scores=dict.fromkeys(keys), status="invalid", detail=detail)
    parsed = parse_judge_response(response, track)
    if not parsed.ok:
        record["failure"] = parsed.failure
        detail["repair_status"] = "failed"
        return EvalResult(scores=dict.fromkeys(keys), status="invalid", detail=detail)
    assert parsed.scores is not None  # an ok parse has every criterion
    invented = unsupported_scores(detail["raw_response"], parsed.scores, track)
    if invented:
        record["invented_scores"] = invented
        record["rejected_scores"] = parsed.scores
        detail["repair_status"] = "rejected_invented_score"
        return EvalResult(scores=dict.fromkeys(keys), status="invalid", detail=detail)
    detail.update(
        repair_status="succeeded",
        parse_method="repaired",
        rationales=parsed.rationales,
    )
    record["initial_failure"] = detail.get("failure")
    detail["failure"] = None
    return EvalResult(scores={k: float(parsed.scores[k]) for k in keys}, status="ok", detail=detail)


def repair_stage(results: Sequence[Any], repairer: Repairer) -> RepairStageResult:
    """Repair every eligible judge result of a finished stage; other results pass through.

    ``results`` are the :class:`EvalResult` objects the stage's judges returned (other objects,
    such as exceptions, pass through untouched).  Returns new results; the inputs are not changed.
    """
    out: list[Any] = list(results)
    todo = [i for i, r in enumerate(results) if is_repair_candidate(r)]
    requests = [
        RepairRequest(
            track=results[i].detail["track"],
            raw_response=results[i].detail["raw_response"],
            parse_error=results[i].detail.get("failure") or "unknown parse error",
        )
        for i in todo
    ]
    responses: list[str | BaseException] = repairer.generate_repairs(requests) if requests else []
    if len(responses) != len(requests):
        raise RuntimeError(
            f"repair model returned {len(responses)} answers for {len(requests)} requests"
        )
    for i, response in zip(todo, responses, strict=True):
        out[i] = apply_repair(results[i], response, repairer.checkpoint)
    statuses = Counter(
        r.detail.get("repair_status", "unknown") for r in out if isinstance(r, EvalResult)
    )
    summary = {
        "model": repairer.checkpoint,
        "candidates": len(requests),
        "repair_status_counts": dict(sorted(statuses.items())),
    }
    return RepairStageResult(results=out, summary=summary)


# -- the pass on devices -----------------------------------------------------------------------
#: keys the repair calls; bump whenever the repair prompt, parsing or acceptance change
REPAIR_PROTOCOL_VERSION = "1"


class RepairComponent(Judge):
    """A judge's JSON repair model as a component, so that the evaluation's device runner can
    run it on replicas like any stage (``engine.devices``): one call per answer awaiting repair,
    keyed by that answer, returning the repaired :class:`EvalResult` (:func:`apply_repair`,
    invented scores rejected, in the worker).

    A replica worker rebuilds a component from its kind, name and parameters through the
    plugin registry: this one travels as its judge (same kind and name) with the parameter
    :data:`REPAIR_ROLE` holding the repair options, which the judge class turns back
    into a :class:`RepairComponent` (``PaperJudge.__new__``).  Its calls are stored under its own
    :meth:`key` (the judge's key + ``/repair``), so they never mix with the judge's calls."""

    reads = ("pending",)
    criteria = ()
    track = ""
    #: the judges' protocol version (a worker checks it against this process's)
    version = REPAIR_PROTOCOL_VERSION

    def __init__(self, judge: type, options: Mapping[str, Any]):
        super().__init__()
        self.judge = judge
        self.name = str(judge.name)  # type: ignore[misc] - the judge's: the worker rebuilds it
        self.track = str(judge.track)  # type: ignore[misc]
        self.criteria = tuple(judge.criteria)  # type: ignore[misc]
        self.options = {str(k): v for k, v in dict(options).items()}
        self.params = {REPAIR_ROLE: self.options}
        self._model: RepairModel | None = None

    @classmethod
    def rebuilt(cls, judge: type, params: Mapping[str, Any]) -> RepairComponent:
        """The repair component a worker gets for ``judge`` built with the repair role."""
        options = params[REPAIR_ROLE]
        if not isinstance(options, Mapping):
            raise ValueError(f"judge {judge.name}: {REPAIR_ROLE} must be a mapping of options")
        return cls(judge, options)

    def key(self) -> str:  # type: ignore[override] - per judge, not per class
        return f"{self.kind}/{self.name}/repair"

    @property
    def backend_name(self) -> str:
        return str(self.options.get("backend") or "vllm")

    @property
    def checkpoint(self) -> str:
        return str(self.options.get("checkpoint") or REPAIR_SPEC.checkpoint)

    def output_params(self) -> dict[str, Any]:
        # the model answering (REPAIR_SPEC fixes the decoding); endpoints and keys do not count
        model = self.options.get("model")
        return {"checkpoint": self.checkpoint, **({"model": model} if model else {})}

    @property
    def batch_size(self) -> int:
        return REPAIR_BATCH_SIZE

    def gpus(self) -> int | None:
        """As a judge: a vLLM engine's ``tensor_parallel_size``, else one GPU."""
        if self.backend_name == "vllm":
            return int(self.options.get("tensor_parallel_size") or 1)
        return None

    def load(self) -> None:
        if self._model is None:
            options = dict(self.options)
            options.pop("backend", None)
            self._model = RepairModel(backend=self.backend_name, **options)
        self._model.load()

    def unload(self) -> None:
        if self._model is not None:
            self._model.unload()
            self._model = None

    def run_batch(self, items: list[dict[str, Any]]) -> list[Any]:
        if self._model is None:
            self.load()
        assert self._model is not None
        pending = [_pending_result(item.get("pending")) for item in items]
        return repair_stage(pending, self._model).results


#: answers per repair call chunk on a replica: enough for the engine's batching, small enough
#: that a large repair pass spreads over several devices
REPAIR_BATCH_SIZE = 16


def _pending_result(value: Any) -> EvalResult:
    output = value if isinstance(value, dict) else {}
    return EvalResult(
        scores=dict(output.get("scores") or {}),
        status=str(output.get("status")),
        detail=dict(output.get("detail") or {}),
    )


def repair_on_devices(
    judge: Any, results: Sequence[EvalResult], keys: Sequence[str], store: Any, devices: Any
) -> tuple[dict[str, EvalResult], str | None]:
    """Repair ``results`` (the pending answers stored under ``keys``) as a stage of the judge's
    :class:`RepairComponent` through the device runner: call key -> repaired result, and why
    the others were not repaired (the repair model could not load or failed), or None."""
    from omnistory_core.engine.stage import ComponentStats, LazyComponent, StageItem, run_stage

    component = RepairComponent(type(judge), judge.params["repair"])
    items = [
        StageItem(n, {"pending": {"scores": r.scores, "status": r.status, "detail": r.detail}})
        for n, r in enumerate(results)
    ]
    lazy = LazyComponent(component, ComponentStats())
    try:
        outcomes = run_stage(lazy, items, store, devices=devices)
    finally:
        lazy.release()
    judge.repair_stats = lazy.stats
    repaired: dict[str, EvalResult] = {}
    problem: str | None = None
    for n, key in enumerate(keys):
        outcome = outcomes.get(n)
        output = getattr(outcome, "output", None)
        if getattr(outcome, "status", None) == "ok" and isinstance(output, dict):
            repaired[key] = _pending_result(output)
        elif problem is None:
            failure = getattr(outcome, "failure", None) or {}
            message = failure.get("message") if isinstance(failure, dict) else None
            problem = str(message or getattr(outcome, "message", None) or "no repair made")
    return repaired, problem
