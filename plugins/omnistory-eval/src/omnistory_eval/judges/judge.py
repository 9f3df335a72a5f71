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

Parameters: declared once in :data:`JUDGE_PARAMETERS` (type, default, one-line doc), with each
judge's own defaults from its :class:`.specs.JudgeSpec` (backend, seed, answer length), and checked
when the judge is built: ``--set judge.<id>.tmperature=0`` is refused in one line naming the judge,
the key and the known keys (exit 2) before anything is scored; ``python -m omnistory_core plugins
--params judge=<id>`` lists them.  Output-changing ones (``checkpoint``, ``max_new_tokens``,
``seed``, ``temperature``, ``top_p``, ``repetition_penalty``, ``max_model_len``; a hosted judge's
``model``) key the cached results; the backend settings (endpoint, key, concurrency, timeouts,
retries, engine memory, swap space, device, repair model) do not.  A judge needs no yaml: the
twelve paper judges and the hosted alternatives are presets in code (backend + checkpoint + prompt
framing, :mod:`.specs`), and ``conf/judge/`` keeps only the panels.

The stage-end JSON repair follows the judge's backend unless ``repair.backend`` is set: a judge
served over the OpenAI protocol (``backend=openai``) repairs through its own server and model
(``base_url``, ``model``, key and client settings; any ``repair.*`` key set overrides one), every
other judge through the paper's repair model on vLLM.  A repair model that cannot run here is a
pre-flight warning, not a blocker: the answers that need it stay ``error`` until it can.

On devices (``engine.devices`` with two or more, see :func:`omnistory_eval.runner.score_units`)
a judge needs ``tensor_parallel_size`` GPUs per replica on vLLM (a hosted judge none, any other
one), and its JSON repair model runs as a stage of its own on replicas too
(:class:`.repair.RepairComponent`), not in the evaluation's process.

``batch=true`` (``backend=openai`` only; a hosted judge on the OpenAI API) judges a stage's items
through the provider's batch API at half the price (:mod:`omnistory_core.kit.batches`): the judge
takes every pending item at once and hands the store's root (``bind_store``) to its backend, whose
ledger lets a re-run poll the batches it submitted.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any, ClassVar

from omnistory_core.components import EvalResult, Judge
from omnistory_core.kit.batches import BATCH_MODE_BATCH_SIZE, BATCH_PARAM_NAMES, batch_parameters
from omnistory_core.kit.planning.usage import parse_price_table
from omnistory_core.params import Param, ParamError, label, with_defaults
from omnistory_eval.judges.backends.base import Backend, Generation
from omnistory_eval.judges.backends.registry import create_backend
from omnistory_eval.judges.parsing import parse_judge_response
from omnistory_eval.judges.render import TRACK_READS, JudgeInputError, render_prompt
from omnistory_eval.judges.repair import REPAIR_ROLE
from omnistory_eval.judges.rubric import criteria_for
from omnistory_eval.judges.specs import (
    HOSTED_SPECS,
    JUDGE_SPECS,
    PAPER_SWAP_SPACE_GIB,
    REPAIR_SPEC,
    JudgeSpec,
)
from omnistory_eval.outcomes import REQUEST_REJECTED

#: Bump whenever rendered prompts, parsing or result semantics change (it keys the result cache).
JUDGE_PROTOCOL_VERSION = "e4-1"


#: the stage-end JSON repair model's options by default: on (App. E.3.1), backend null = the
#: judge's (see PaperJudge.repair_options)
REPAIR_DEFAULT: dict[str, Any] = {
    "backend": None,
    "base_url": None,
    "model": None,
    "api_key_env": None,
    "concurrency": None,
}

#: every judge's parameters; a judge class gets its spec's backend, seed and max_new_tokens as
#: defaults.  Output-changing ones are keyed only when set (``key_at_default=False``), so the keys
#: of results stored before the declaration stay valid.
JUDGE_PARAMETERS: tuple[Param, ...] = (
    Param(
        "backend",
        str,
        "vllm",
        "vllm (offline engine) | openai (any OpenAI-compatible server) | transformers",
        runtime=True,
        choices=("vllm", "openai", "transformers"),
    ),
    Param(
        "checkpoint",
        (str, None),
        None,
        "hub id or local directory of the weights (null: the paper's checkpoint)",
        key_at_default=False,
    ),
    Param("seed", int, 0, "decoding seed (the paper: 0; 1234 for the omni judges)"),
    Param("max_new_tokens", int, 1024, "answer length limit (Table 6)", ge=1),
    Param(
        "temperature",
        (float, None),
        None,
        "sampling temperature (null: the paper's 0, greedy)",
        ge=0,
        key_at_default=False,
    ),
    Param("top_p", (float, None), None, "null: the paper's 1", gt=0, le=1, key_at_default=False),
    Param(
        "repetition_penalty",
        (float, None),
        None,
        "null: the paper's 1 (none)",
        gt=0,
        key_at_default=False,
    ),
    Param(
        "max_model_len",
        (int, None),
        None,
        "vllm: context limit in tokens (null: Table 6's)",
        ge=1,
        key_at_default=False,
    ),
    # -- openai backend --
    Param(
        "base_url",
        (str, None),
        None,
        "openai: server address, e.g. http://127.0.0.1:8000/v1",
        runtime=True,
    ),
    Param(
        "model",
        (str, None),
        None,
        "openai: served model name (null: the checkpoint id)",
        runtime=True,
    ),
    Param(
        "api_key_env",
        (str, None),
        None,
        "openai: environment variable holding the API key (null: none, the placeholder EMPTY)",
        runtime=True,
    ),
    Param(
        "concurrency",
        (int, None),
        None,
        "openai: requests in flight at most (null: the paper's max_num_seqs)",
        runtime=True,
        ge=1,
    ),
    Param("timeout", float, 600, "openai: seconds per request", runtime=True, gt=0),
    Param("max_retries", int, 5, "openai: retries of a failed request", runtime=True, ge=0),
    Param(
        "max_retry_wait",
        float,
        120.0,
        "openai: longest wait before one retry, s (Retry-After is capped at it)",
        runtime=True,
        gt=0,
    ),
    Param(
        "media",
        str,
        "data_url",
        "openai: data_url (inline base64) | file_url (file:// paths, for a server started with"
        " --allowed-local-media-path)",
        runtime=True,
        choices=("data_url", "file_url"),
    ),
    Param(
        "max_tokens_field",
        str,
        "max_tokens",
        "openai: the request field of the answer length",
        runtime=True,
        choices=("max_tokens", "max_completion_tokens"),
    ),
    Param(
        "vllm_extras",
        bool,
        True,
        "openai: send vLLM's non-OpenAI fields (repetition penalty, chat-template switches, stop"
        " tokens); false for hosted APIs",
        runtime=True,
    ),
    # the provider's batch API (OpenAI's: a hosted judge), half price; see
    # omnistory_core.kit.batches
    *batch_parameters("openai", doc_prefix="openai: "),
    # -- vllm backend --
    Param(
        "gpu_memory_utilization",
        (float, None),
        None,
        "vllm: share of GPU memory (null: the paper's, 0.9; 0.95 for omni)",
        runtime=True,
        gt=0,
        le=1,
    ),
    Param("tensor_parallel_size", int, 1, "vllm: GPUs per model", runtime=True, ge=1),
    Param(
        "max_num_seqs",
        (int, None),
        None,
        "vllm: sequences per engine step (null: the paper's)",
        runtime=True,
        ge=1,
    ),
    Param(
        "swap_space",
        (float, None),
        PAPER_SWAP_SPACE_GIB,
        "vllm: GiB of CPU swap (the paper's 8; null: the engine's default)",
        runtime=True,
        ge=0,
    ),
    Param("engine_kwargs", dict, {}, "vllm: extra vllm.LLM arguments", runtime=True),
    # -- transformers backend --
    Param(
        "device", (str, None), None, "transformers: cuda | cpu (null: cuda if any)", runtime=True
    ),
    Param(
        "dtype",
        (str, None),
        None,
        "transformers: torch dtype (null: bfloat16 on GPU, float32 on CPU)",
        runtime=True,
    ),
    Param(
        "model_class",
        str,
        "AutoModelForSeq2SeqLM",
        "transformers: the auto class that loads the checkpoint",
        runtime=True,
    ),
    Param(
        "trust_remote_code",
        bool,
        False,
        "transformers: run the checkpoint's own code",
        runtime=True,
    ),
    # -- stage end --
    Param(
        "repair",
        (dict, bool),
        REPAIR_DEFAULT,
        "JSON repair model options (backend, base_url, model, ... as above; backend null: an"
        " openai judge repairs through its own server and model, any other through the paper's"
        " model on vllm), or false to skip",
        runtime=True,
    ),
)
#: what the repair model accepts (the backend settings, not the judge's decoding)
REPAIR_KEYS = frozenset(
    {p.name for p in JUDGE_PARAMETERS}
    - {"repair", "seed", "max_new_tokens", "temperature", "top_p", "repetition_penalty"}
    # the stage-end repair is a handful of calls made at once: never worth a 24-hour batch
    - set(BATCH_PARAM_NAMES)
)
#: what a repair through the judge's own OpenAI-protocol server takes from the judge
SAME_SERVER_KEYS = (
    "base_url",
    "api_key_env",
    "concurrency",
    "timeout",
    "max_retries",
    "max_retry_wait",
    "media",
    "max_tokens_field",
    "vllm_extras",
)
REPAIR_WARNING = (
    "its JSON repair model cannot run here; answers that need repair stay 'error' until it can"
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
        assert parsed.scores is not None  # an ok parse has every criterion
        scores: dict[str, float | None] = {k: float(parsed.scores[k]) for k in keys}
        return EvalResult(scores=scores, status="ok", detail=detail)
    detail["repair_status"] = "pending" if parsed.method == "unresolved" else "not_eligible"
    return EvalResult(scores=dict.fromkeys(keys), status="invalid", detail=detail)


def spec_parameters(spec: JudgeSpec) -> tuple[Param, ...]:
    """:data:`JUDGE_PARAMETERS` with ``spec``'s defaults; a hosted judge's ``model`` (which model
    answers) keys its results once set."""
    params = with_defaults(
        JUDGE_PARAMETERS,
        backend=spec.backend,
        seed=spec.seed,
        max_new_tokens=spec.max_new_tokens,
        vllm_extras=spec.vllm_extras,
        trust_remote_code=spec.trust_remote_code,
    )
    if spec.checkpoint:
        return params
    hosted = (
        Param(
            "model",
            (str, None),
            None,
            "the hosted model that answers, e.g. gpt-5.4 (part of the result key)",
            key_at_default=False,
        ),
        Param(
            "prices",
            (dict, None),
            None,
            "USD per million tokens, {model: {input_per_mtok, output_per_mtok}}: the dry run's"
            " cost estimate (null: the reference table, else no estimate)",
            runtime=True,
        ),
    )
    return with_defaults(params, *hosted, api_key_env="OPENAI_API_KEY")


class PaperJudge(Judge):
    """Base of the judge components; a subclass only names its :class:`JudgeSpec`."""

    spec: ClassVar[JudgeSpec]
    version = JUDGE_PROTOCOL_VERSION
    parameters = JUDGE_PARAMETERS
    #: a hosted API judge (no checkpoint of its own): priced per token, uses no GPU here
    hosted: ClassVar[bool] = False
    #: False for a hosted judge; None: unknown here (a local model, or one behind a server)
    uses_gpu: ClassVar[bool | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        spec = cls.__dict__.get("spec")
        if spec is not None and "parameters" not in cls.__dict__:
            cls.parameters = spec_parameters(spec)
        super().__init_subclass__(**kwargs)
        if spec is None:
            return
        cls.name = spec.id
        cls.track = spec.track
        cls.criteria = criteria_for(spec.track)
        cls.reads = TRACK_READS[spec.track]
        cls.default_batch_size = spec.batch_size
        cls.description = f"{spec.track} judge {spec.title} ({spec.checkpoint or 'hosted API'})"
        if not spec.checkpoint:
            cls.hosted = True
            cls.uses_gpu = False  # read by the dry run's GPU-hours and the device pool

    @classmethod
    def checkpoints(cls, params: Mapping[str, Any]) -> list[str]:
        """Hub ids ``load()`` reads (for prefetch and cache-first loading): the judge's checkpoint
        (``checkpoint`` overrides the spec's), none behind a server (``backend=openai``)."""
        if str(params.get("backend") or cls.spec.backend) == "openai":
            return []
        checkpoint = params.get("checkpoint") or cls.spec.checkpoint
        return [str(checkpoint)] if checkpoint else []

    def __new__(cls, **params: Any) -> Any:
        # a replica worker rebuilds a component from its kind, name and parameters: this
        # judge's JSON repair model comes back as the judge's name with the repair role
        if REPAIR_ROLE in params:
            from omnistory_eval.judges.repair import RepairComponent

            return RepairComponent.rebuilt(cls, params)
        return super().__new__(cls)

    def __init__(self, **params: Any):
        super().__init__(**params)
        repair = self.params["repair"]
        if repair is True:
            repair = dict(REPAIR_DEFAULT)
        if isinstance(repair, dict):
            unknown = sorted(str(k) for k in repair if k not in REPAIR_KEYS)
            if unknown:
                raise ParamError(
                    f"{label(type(self))}: unknown repair parameter(s) {', '.join(unknown)};"
                    f" known: {', '.join(sorted(REPAIR_KEYS))}"
                )
            self.params["repair"] = self.repair_options(repair)
        if self.hosted:
            try:  # checked here, so a malformed table stops the command before any call
                parse_price_table(self.params.get("prices"), where=f"judge.{self.name}.prices")
            except ValueError as exc:
                raise ParamError(f"{label(type(self))}: {exc}") from None
        self._backend: Backend | None = None
        self._repair_problem: str | None = None
        self._repair_unavailable: list[str] = []  # why, as the pre-flight found it
        self._store_root: Any = None

    def repair_options(self, repair: Mapping[str, Any]) -> dict[str, Any]:
        """The repair model's options, its backend resolved: as given when ``repair.backend`` is
        set; else, for an OpenAI-protocol judge, its own server and model (for each key not set in
        ``repair``); else the paper's repair model on vLLM."""
        options = dict(repair)
        if options.get("backend"):
            return options
        if self.backend_name != "openai":
            options["backend"] = "vllm"
            return options
        options["backend"] = "openai"
        for key in SAME_SERVER_KEYS:
            if options.get(key) is None:
                options[key] = self.params.get(key)
        if options.get("model") is None and options.get("checkpoint") is None:
            # the judge's own model repairs: record it, not the paper's repair checkpoint
            checkpoint = self.params.get("checkpoint") or self.spec.checkpoint or None
            options["model"] = self.params.get("model") or checkpoint
            options["checkpoint"] = checkpoint or options["model"]
        return options

    @property
    def backend_name(self) -> str:
        return str(self.params.get("backend") or self.spec.backend)

    def gpus(self) -> int | None:
        """GPUs one replica needs (``engine.devices``): a hosted judge none, a vLLM engine its
        ``tensor_parallel_size``; None (one, as for any model) otherwise."""
        if self.hosted:
            return 0
        if str(self.params.get("backend") or self.spec.backend) == "vllm":
            return int(self.params.get("tensor_parallel_size") or 1)
        return None

    @property
    def batch_size(self) -> int:
        """With ``batch=true`` every pending item of the stage (one provider batch), else the
        spec's."""
        if self.params.get("batch") and not self.params.get("batch_size"):
            return BATCH_MODE_BATCH_SIZE
        return super().batch_size

    def bind_store(self, root: Any) -> None:
        """The store's root, for the backend's batch ledger (``<root>/batches/judge-<id>/``)."""
        self._store_root = root
        bind = getattr(self._backend, "bind_store", None)
        if callable(bind):
            bind(root)

    def _batch_problem(self) -> str | None:
        # checked at pre-flight and load, not when built: every parameter stays variable on its
        # own (a cached run with batch=true and another backend calls nothing, so it is fine)
        if self.params.get("batch") and self.backend_name != "openai":
            return (
                f"batch=true needs backend=openai (a provider batch API behind base_url), not"
                f" backend={self.backend_name}"
            )
        return None

    def load(self) -> None:
        problem = self._batch_problem()
        if problem:
            raise ValueError(f"judge {self.spec.id}: {problem}")
        if self._backend is None:
            self._backend = create_backend(self.backend_name, self.spec, dict(self.params))
            bind = getattr(self._backend, "bind_store", None)
            if callable(bind) and self._store_root is not None:
                bind(self._store_root)
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
            assert self._backend is not None, "load() sets the backend"
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

    def finalize_stage(
        self, outcomes: dict[int, Any], store: Any, devices: Any = None
    ) -> dict[int, Any]:
        """Stage-end JSON repair of this judge's stored results (the runner's hook).

        ``repair`` parameter: a mapping of :class:`.repair.RepairModel` options (``backend``,
        ``base_url``, ``model``, ...) or false to skip.  Repaired results replace the stored ones
        under the same call key, so a resumed run neither repeats nor loses a repair; results
        still pending (repair skipped or the repair model unavailable) are retried next run.
        ``devices``: the evaluation's device runner; the repair model then runs as a stage on
        replicas (:func:`.repair.repair_on_devices`) instead of in this process.
        """
        from omnistory_core.engine.store import CallRecord
        from omnistory_eval.judges.repair import RepairModel, repair_on_devices, repair_stage

        options = self.params.get("repair")
        if not options or self._repair_unavailable:
            # unavailable: the pre-flight said so (one warning); pending answers stay error rows
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
        if devices is not None:
            repaired_by_key, problem = repair_on_devices(self, results, keys, store, devices)
            if problem is not None:
                self._repair_skipped(problem, len(keys) - len(repaired_by_key))
        else:
            options = dict(options)
            repairer = RepairModel(backend=str(options.pop("backend", None) or "vllm"), **options)
            try:
                repaired = repair_stage(results, repairer).results
            except Exception as exc:  # noqa: BLE001 - keep the stage's results; retry next run
                self._repair_skipped(f"{type(exc).__name__}: {exc}", len(keys))
                return outcomes
            finally:
                repairer.unload()
            repaired_by_key = dict(zip(keys, repaired, strict=True))
        updated = {}
        for key, result in repaired_by_key.items():
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

    def _repair_skipped(self, why: str, pending: int) -> None:
        """The repair model failed: its answers stay ``error`` rows with the cause, repaired by
        the next run."""
        self._repair_problem = f"JSON repair model unavailable: {why}"
        warnings.warn(
            f"judge {self.spec.id}: JSON repair skipped ({why}); "
            f"{pending} answers await repair (status error) and are repaired next run",
            stacklevel=3,
        )

    def _repair_cannot_run(self, why: str) -> None:
        """The pre-flight found the repair model cannot run here: skip the pass, say why."""
        self._repair_unavailable.append(why)
        self._repair_problem = "JSON repair model unavailable: " + "; ".join(
            self._repair_unavailable
        )

    def result_error(self, output: dict[str, Any]) -> str | None:
        """Why a stored answer is not final yet: it awaits the stage-end JSON repair (the repair
        model could not run).  Until repaired it is an ``error`` row, not ``invalid``: the paper's
        invalid is an answer unusable *after* the permitted repair."""
        if self.params.get("repair") and is_pending(output):
            return self._repair_problem or "answer awaits the stage-end JSON repair"
        return None

    def preflight_needs(self) -> list[Any]:
        """What this judge needs to run (checked by ``evaluate`` before scoring anything)."""
        from omnistory_eval.preflight import backend_needs

        needs = backend_needs(
            self.backend_name, self.spec, dict(self.params), f"judge.{self.spec.id}", "judge"
        )
        repair = self.params.get("repair")
        if repair:
            options = dict(repair) if isinstance(repair, dict) else {}
            own = {(n.check, n.target) for n in needs}
            # the judge's own server repairing adds nothing to check; the rest is a warning
            needs += [
                n
                for n in backend_needs(
                    str(options.get("backend") or "vllm"),
                    REPAIR_SPEC,
                    options,
                    f"judge.{self.spec.id}.repair",
                    "JSON repair model",
                    opt_out=f"judge.{self.spec.id}.repair=false",
                    warning=REPAIR_WARNING,
                    on_problem=self._repair_cannot_run,
                )
                if (n.check, n.target) not in own
            ]
        problem = self._batch_problem()
        if problem:
            from omnistory_eval.preflight import Need

            where = f"judge.{self.spec.id}"
            remedy = f"--set {where}.backend=openai {where}.base_url=..., or {where}.batch=false"
            needs.append(Need("config", f"{where}.batch", remedy, detail=problem))
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
