"""The twelve paper judges (and four hosted-API alternatives) as ``Judge`` components.

A judge renders each item with :func:`.render.render_prompt`, sends the batch to its backend and
validates every answer with :func:`.parsing.parse_judge_response`.  Each item yields an
:class:`EvalResult`:

* valid answer: ``status="ok"``, the four criterion scores as floats;
* invalid answer: ``status="invalid"``, all scores ``None``; a non-empty one is marked
  ``repair_status="pending"`` for the stage-end :func:`.repair.repair_stage`, an empty one
  ``"not_eligible"``;
* inference failure (server unreachable or failing after retries, out of memory, engine error):
  ``status="error"`` with ``detail["inference_status"] == "error"``: not an answer, so neither a
  score nor ``invalid``; the evaluation runner never caches it and retries it on the next run;
* request rejected for its content (HTTP 400, unreadable attachment, prompt over the context):
  ``status="invalid"``, ``detail["error_kind"] == "request"``; never sent to repair.

``detail`` keeps, for audit: judge id, checkpoint, track, backend, raw response, finish reason,
usage, parse method and failure, rationales, repair status.

Parameters (config keys): ``backend`` (``vllm`` / ``openai`` / ``transformers``; default: the
paper's), the backend's own options (see each backend module), and output-changing overrides of
the paper's settings: ``checkpoint``, ``max_new_tokens``, ``seed``, ``temperature``, ``top_p``,
``repetition_penalty``.
"""

from __future__ import annotations

import warnings
from typing import Any, ClassVar

from omnistory_core.components import EvalResult, Judge
from omnistory_core.evaluation.judges.backends.base import Backend, Generation
from omnistory_core.evaluation.judges.backends.registry import create_backend
from omnistory_core.evaluation.judges.parsing import parse_judge_response
from omnistory_core.evaluation.judges.render import TRACK_READS, JudgeInputError, render_prompt
from omnistory_core.evaluation.judges.rubric import criteria_for
from omnistory_core.evaluation.judges.specs import (
    HOSTED_SPECS,
    JUDGE_SPECS,
    REPAIR_SPEC,
    JudgeSpec,
)
from omnistory_core.evaluation.outcomes import REQUEST_REJECTED

#: Bump whenever rendered prompts, parsing or result semantics change (it keys the result cache).
JUDGE_PROTOCOL_VERSION = "e4-1"

RUNTIME_PARAMS = (
    "backend",
    "base_url",
    "model",
    "api_key_env",
    "concurrency",
    "timeout",
    "max_retries",
    "max_retry_wait",
    "media",
    "max_tokens_field",
    "vllm_extras",
    "gpu_memory_utilization",
    "tensor_parallel_size",
    "max_num_seqs",
    "swap_space",
    "engine_kwargs",
    "device",
    "dtype",
    "model_class",
    "trust_remote_code",
    "repair",
)


def result_from_generation(
    spec: JudgeSpec,
    generation: Generation,
    *,
    backend: str,
    checkpoint: str | None = None,
    served_model: str | None = None,
) -> EvalResult:
    """Validate one raw answer and package it as an :class:`EvalResult` (pure)."""
    keys = criteria_for(spec.track)
    detail: dict[str, Any] = {
        "judge": spec.id,
        "checkpoint": checkpoint or spec.checkpoint or served_model,
        "served_model": served_model,
        "track": spec.track,
        "backend": backend,
        "raw_response": generation.text,
        "finish_reason": generation.finish_reason,
        "usage": generation.usage,
        "attempts": generation.attempts,
    }
    if generation.error is not None:
        detail.update(
            inference_status="error",
            error=generation.error,
            error_kind=generation.error_kind,
            parse_method="not_attempted",
            failure=f"inference failed: {generation.error}",
            rationales=None,
            repair_status="not_eligible",
        )
        status = "invalid" if generation.error_kind == REQUEST_REJECTED else "error"
        return EvalResult(scores=dict.fromkeys(keys), status=status, detail=detail)
    parsed = parse_judge_response(generation.text, spec.track)
    detail.update(
        inference_status="ok",
        parse_method=parsed.method,
        failure=parsed.failure,
        rationales=parsed.rationales,
    )
    if parsed.ok:
        detail["repair_status"] = "not_needed"
        scores = {k: float(parsed.scores[k]) for k in keys}
        return EvalResult(scores=scores, status="ok", detail=detail)
    detail["repair_status"] = "pending" if parsed.method == "unresolved" else "not_eligible"
    return EvalResult(scores=dict.fromkeys(keys), status="invalid", detail=detail)


class PaperJudge(Judge):
    """Base of the judge components; a subclass only names its :class:`JudgeSpec`."""

    spec: ClassVar[JudgeSpec]
    version = JUDGE_PROTOCOL_VERSION
    runtime_params = RUNTIME_PARAMS

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        spec = cls.__dict__.get("spec")
        if spec is None:
            return
        cls.name = spec.id
        cls.track = spec.track
        cls.criteria = criteria_for(spec.track)
        cls.reads = TRACK_READS[spec.track]
        cls.default_batch_size = spec.batch_size
        cls.description = f"{spec.track} judge {spec.title} ({spec.checkpoint or 'hosted API'})"

    def __init__(self, **params: Any):
        super().__init__(**params)
        self._backend: Backend | None = None
        self._repair_problem: str | None = None

    @property
    def backend_name(self) -> str:
        return str(self.params.get("backend") or self.spec.backend)

    def load(self) -> None:
        if self._backend is None:
            self._backend = create_backend(self.backend_name, self.spec, dict(self.params))
            self._backend.load()

    def unload(self) -> None:
        if self._backend is not None:
            self._backend.close()
            self._backend = None

    def run_batch(self, items: list[dict[str, Any]]) -> list[Any]:
        """One :class:`EvalResult` per item; an item with unusable inputs yields its
        :class:`JudgeInputError` instead (its neighbours are still judged)."""
        results: list[Any] = [None] * len(items)
        prompts, positions = [], []
        for i, item in enumerate(items):
            try:
                prompts.append(render_prompt(self.spec.id, item))
                positions.append(i)
            except JudgeInputError as exc:
                results[i] = exc
        if prompts:
            self.load()
            generations = self._backend.generate(prompts)
            if len(generations) != len(prompts):
                raise RuntimeError(
                    f"judge {self.spec.id}: backend returned {len(generations)} answers for "
                    f"{len(prompts)} prompts"
                )
            for i, generation in zip(positions, generations, strict=True):
                results[i] = result_from_generation(
                    self.spec,
                    generation,
                    backend=self.backend_name,
                    checkpoint=self.params.get("checkpoint"),
                    served_model=self.params.get("model"),
                )
        return results

    def finalize_stage(self, outcomes: dict[int, Any], store: Any) -> dict[int, Any]:
        """Stage-end JSON repair of this judge's stored results (the runner's hook).

        ``repair`` parameter: a mapping of :class:`.repair.RepairModel` options (``backend``,
        ``base_url``, ``model``, ...) or false to skip.  Repaired results replace the stored ones
        under the same call key, so a resumed run neither repeats nor loses a repair; results
        still pending (repair skipped or the repair model unavailable) are retried next run.
        """
        from omnistory_core.engine.store import CallRecord
        from omnistory_core.evaluation.judges.repair import RepairModel, repair_stage

        options = self.params.get("repair")
        if not options:
            return outcomes
        records: dict[str, Any] = {}
        for outcome in outcomes.values():
            if isinstance(outcome, CallRecord) and outcome.status == "ok":
                records.setdefault(outcome.key, outcome)
        keys = [k for k, r in records.items() if is_pending(r.output)]
        if not keys:
            return outcomes
        results = [_result_of(records[k].output) for k in keys]
        self.unload()  # the judge's weights go before the repair model's arrive
        options = dict(options)
        repairer = RepairModel(backend=str(options.pop("backend", "vllm")), **options)
        try:
            repaired = repair_stage(results, repairer).results
        except Exception as exc:  # noqa: BLE001 - keep the stage's results; retry next run
            self._repair_problem = f"JSON repair model unavailable: {type(exc).__name__}: {exc}"
            warnings.warn(
                f"judge {self.spec.id}: JSON repair skipped ({type(exc).__name__}: {exc}); "
                f"{len(keys)} answers await repair (status error) and are repaired next run",
                stacklevel=2,
            )
            return outcomes
        finally:
            repairer.unload()
        updated = {}
        for key, result in zip(keys, repaired, strict=True):
            old = records[key]
            record = CallRecord(
                key=old.key,
                component=old.component,
                status="ok",
                output={"scores": result.scores, "status": result.status, "detail": result.detail},
                failure=None,
                usage=old.usage,
                seconds=old.seconds,
            )
            store.put(record)
            updated[key] = record
        return {
            n: updated.get(getattr(o, "key", None), o) if isinstance(o, CallRecord) else o
            for n, o in outcomes.items()
        }

    def result_error(self, output: dict[str, Any]) -> str | None:
        """Why a stored answer is not final yet: it awaits the stage-end JSON repair (the repair
        model could not run).  Until repaired it is an ``error`` row, not ``invalid``: the paper's
        invalid is an answer unusable *after* the permitted repair."""
        if self.params.get("repair") and is_pending(output):
            return self._repair_problem or "answer awaits the stage-end JSON repair"
        return None

    def preflight_needs(self) -> list[Any]:
        """What this judge needs to run (checked by ``evaluate`` before scoring anything)."""
        from omnistory_core.evaluation.preflight import backend_needs

        needs = backend_needs(
            self.backend_name, self.spec, dict(self.params), f"judge.{self.spec.id}", "judge"
        )
        repair = self.params.get("repair")
        if repair:
            options = dict(repair) if isinstance(repair, dict) else {}
            needs += backend_needs(
                str(options.get("backend") or "vllm"),
                REPAIR_SPEC,
                options,
                f"judge.{self.spec.id}.repair",
                "JSON repair model",
                opt_out=f"judge.{self.spec.id}.repair=false",
            )
        return needs


def is_pending(output: dict[str, Any]) -> bool:
    """A stored judge output that awaits the repair pass."""
    detail = output.get("detail") or {}
    return (
        output.get("status") == "invalid"
        and detail.get("inference_status") == "ok"
        and detail.get("repair_status") == "pending"
    )


def _result_of(output: dict[str, Any]) -> EvalResult:
    return EvalResult(
        scores=dict(output.get("scores") or {}),
        status=str(output.get("status")),
        detail=dict(output.get("detail") or {}),
    )


# -- text (E.4.1) -----------------------------------------------------------------------------
class Qwen3TextJudge(PaperJudge):
    spec = JUDGE_SPECS["text-qwen3-30b-a3b"]


class SeedOSSTextJudge(PaperJudge):
    spec = JUDGE_SPECS["text-seed-oss-36b"]


class LlamaNemotronTextJudge(PaperJudge):
    spec = JUDGE_SPECS["text-llama-nemotron-49b"]


# -- image (E.4.2) ----------------------------------------------------------------------------
class Qwen3VLImageJudge(PaperJudge):
    spec = JUDGE_SPECS["image-qwen3-vl-32b"]


class InternVLImageJudge(PaperJudge):
    spec = JUDGE_SPECS["image-internvl35-38b"]


class ExaoneImageJudge(PaperJudge):
    spec = JUDGE_SPECS["image-exaone45-33b"]


# -- speech (E.4.3) ---------------------------------------------------------------------------
class AudioFlamingoNextSpeechJudge(PaperJudge):
    spec = JUDGE_SPECS["speech-audio-flamingo-next"]


class MossAudioSpeechJudge(PaperJudge):
    spec = JUDGE_SPECS["speech-moss-audio-8b"]


class KimiAudioSpeechJudge(PaperJudge):
    spec = JUDGE_SPECS["speech-kimi-audio-7b"]


# -- integrated (E.4.4) -----------------------------------------------------------------------
class Qwen3OmniJudge(PaperJudge):
    spec = JUDGE_SPECS["omni-qwen3-omni-30b"]


class NemotronOmniJudge(PaperJudge):
    spec = JUDGE_SPECS["omni-nemotron3-nano-omni"]


class Gemma4OmniJudge(PaperJudge):
    spec = JUDGE_SPECS["omni-gemma4-12b"]


PAPER_JUDGES: tuple[type[PaperJudge], ...] = (
    Qwen3TextJudge,
    SeedOSSTextJudge,
    LlamaNemotronTextJudge,
    Qwen3VLImageJudge,
    InternVLImageJudge,
    ExaoneImageJudge,
    AudioFlamingoNextSpeechJudge,
    MossAudioSpeechJudge,
    KimiAudioSpeechJudge,
    Qwen3OmniJudge,
    NemotronOmniJudge,
    Gemma4OmniJudge,
)


# -- hosted-API alternatives (not in the paper's panels) ---------------------------------------
class HostedTextJudge(PaperJudge):
    spec = HOSTED_SPECS["text-hosted"]


class HostedImageJudge(PaperJudge):
    spec = HOSTED_SPECS["image-hosted"]


class HostedSpeechJudge(PaperJudge):
    spec = HOSTED_SPECS["speech-hosted"]


class HostedOmniJudge(PaperJudge):
    spec = HOSTED_SPECS["omni-hosted"]


HOSTED_JUDGES: tuple[type[PaperJudge], ...] = (
    HostedTextJudge,
    HostedImageJudge,
    HostedSpeechJudge,
    HostedOmniJudge,
)
