"""`VLMPlanner`: the shared body of every API/VLM planner.

A subclass supplies the client (``make_client``), one API call (``send``) and, if its SDK needs
it, error classification (``classify_error``); :class:`~omnistory_core.kit.planning.openai_chat.
OpenAIChatPlanner` supplies all three for OpenAI-compatible Chat Completions servers.  This class
owns everything else, identically for all planners: parameter defaults and validation, the prompt
variant, the request (image + text), bounded concurrency inside :meth:`run_batch`, retries with
backoff honouring ``Retry-After`` (:mod:`omnistory_core.kit.retry`, shared with the judges),
timeouts
as ``timeout`` failures, other API errors as ``model_error`` failures, and usage/cost.

Parameters: a subclass declares them (``parameters``, see :mod:`omnistory_core.params`), usually
as :data:`BASE_PARAMETERS` with its own defaults and additions
(:func:`~omnistory_core.params.with_defaults`); they are validated when it is built, listed by
``plugins --params``, and its config node is generated.  A subclass that only sets
``param_defaults`` (the older way) still works, checked by :meth:`VLMPlanner._check_params`.

Provider batches: a subclass that names its :attr:`VLMPlanner.batch_provider` (``openai`` or
``anthropic``), declares :func:`~omnistory_core.kit.batches.batch_parameters` and supplies
:meth:`VLMPlanner.batch_body` and :meth:`VLMPlanner.batch_reply` runs with ``batch=true`` through
that provider's batch API (:mod:`omnistory_core.kit.batches`: half price, a ledger under the store
so that a re-run polls instead of resubmitting, per-item fallback on the synchronous path).  A
planner without one (the vLLM planners) refuses ``batch=true`` when it is built.

Secrets: ``api_key_env`` names an environment variable; its value is read when the client is made
(on the first call, in :meth:`load`), handed to the SDK client and never kept on the planner,
written, logged or put in a failure message (messages are scrubbed of it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from omnistory_core.components import EXAMPLE_INPUTS, ComponentError, Planner, PlannerResponse
from omnistory_core.contract import Failure
from omnistory_core.kit.batches import (
    BATCH_DISCOUNT,
    BATCH_MODE_BATCH_SIZE,
    BATCH_PENDING,
    PROVIDER_LIMITS,
    AnthropicBatches,
    BatchAPI,
    BatchLedger,
    BatchOutcome,
    BatchSettings,
    OpenAIBatches,
    public_url,
    retrying,
    run_batches,
)
from omnistory_core.kit.batches import custom_id as batch_custom_id
from omnistory_core.kit.planning.messages import PlannerRequest, build_request
from omnistory_core.kit.planning.prompts import PROMPT_VARIANTS, get_variant
from omnistory_core.kit.planning.replies import ModelReply
from omnistory_core.kit.planning.usage import (
    Price,
    Pricing,
    count_tokens,
    image_tokens,
    parse_price_table,
    price_of,
    usage_record,
)
from omnistory_core.kit.retry import (
    ErrorInfo,
    RetryPolicy,
    call_with_retries,
    classify_api_error,
    map_bounded,
)
from omnistory_core.params import Param, ParamError, declared, resolve_params


class PlannerConfigError(ParamError):
    """A planner parameter that cannot work; the message names the parameter.

    A :class:`~omnistory_core.params.ParamError`, so a ``ConfigError`` (exit 2) and a
    ``ValueError``."""


#: parameters every VLM planner accepts, with their defaults
BASE_DEFAULTS: dict[str, Any] = {
    "model": None,
    # -- runtime only (not in the cache key) --
    "base_url": None,
    "api_key_env": None,
    "max_concurrency": 4,
    "timeout_s": 120.0,
    "max_retries": 3,
    "retry_base_delay_s": 1.0,
    "retry_max_delay_s": 60.0,
    "prices": None,
    # -- output-changing (in the cache key) --
    "prompt": "default",
    "narration_target_chars": None,
    "image_max_side": None,
    "max_tokens": 2048,
    "temperature": None,
    "top_p": None,
    "seed": 0,
}
BASE_RUNTIME: tuple[str, ...] = (
    "base_url",
    "api_key_env",
    "max_concurrency",
    "timeout_s",
    "max_retries",
    "retry_base_delay_s",
    "retry_max_delay_s",
    "prices",
)

#: the declared form of :data:`BASE_DEFAULTS` (``seed`` is implicit in every declaration)
BASE_PARAMETERS: tuple[Param, ...] = (
    Param("model", str, None, "model name sent to the API"),
    Param("base_url", (str, None), None, "API base URL; null: the SDK's default", runtime=True),
    Param(
        "api_key_env",
        (str, None),
        None,
        "NAME of the environment variable holding the API key (the key never goes in a config)",
        runtime=True,
    ),
    Param("max_concurrency", int, 4, "requests in flight at most", runtime=True, ge=1),
    Param("timeout_s", float, 120.0, "seconds per request", runtime=True, gt=0),
    Param("max_retries", int, 3, "retries after the first attempt", runtime=True, ge=0),
    Param(
        "retry_base_delay_s",
        float,
        1.0,
        "first backoff wait without Retry-After (doubles per retry)",
        runtime=True,
        gt=0,
    ),
    Param("retry_max_delay_s", float, 60.0, "longest backoff wait", runtime=True, gt=0),
    Param(
        "prices",
        (dict, None),
        None,
        "USD per million tokens: {model: {input_per_mtok, output_per_mtok}}; null or a missing"
        " model: no cost recorded (never a cost of 0)",
        runtime=True,
    ),
    Param(
        "prompt",
        str,
        "default",
        "prompt variant: default (narration ~107 characters, like the references) | paper_like"
        " (no length rule) | official (the official orchestration rules, no length target)",
        choices=tuple(sorted(PROMPT_VARIANTS)),
    ),
    Param(
        "narration_target_chars",
        (int, None),
        None,
        "override the variant's narration length target (characters)",
        ge=1,
    ),
    Param(
        "image_max_side",
        (int, None),
        None,
        "downscale page images whose longer side exceeds this (pixels); null: send as they are",
        ge=1,
    ),
    Param("max_tokens", int, 2048, "output token limit", ge=1),
    Param("temperature", (float, None), None, "sampling temperature; null: the API's default"),
    Param("top_p", (float, None), None, "nucleus sampling; null: the API's default"),
)


class VLMPlanner(Planner):
    """Base class of the API and vLLM planners (image + text in, Plan JSON text out)."""

    reads = EXAMPLE_INPUTS
    version = "1"
    default_batch_size = 64
    runtime_params: ClassVar[tuple[str, ...]] = BASE_RUNTIME
    param_defaults: ClassVar[dict[str, Any]] = BASE_DEFAULTS
    #: pip requirements beyond omnistory-core and the plugin's own distribution
    requirements: ClassVar[tuple[str, ...]] = ()
    #: whether a call without the API key can work at all (a local vLLM server needs none)
    api_key_required: ClassVar[bool] = True
    #: the provider batch API behind ``batch=true`` (``openai`` | ``anthropic``); None: none
    batch_provider: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        params = declared(cls)
        if params is not None:  # the declaration is the source of the defaults
            cls.param_defaults = {p.name: p.default for p in params if p.name != "batch_size"}

    def __init__(self, **params: Any):
        if "batch" in params and "batch" not in self.param_defaults:
            if params["batch"]:
                raise PlannerConfigError(
                    f"planner={self.name}: planner.batch=true is not supported: this planner has"
                    " no provider batch API (batch=true is for the hosted planners, e.g. gpt and"
                    " claude); drop planner.batch"
                )
            params = {k: v for k, v in params.items() if k != "batch"}
        if type(self).parameters is not None:
            merged = resolve_params(type(self), params, error=PlannerConfigError, prefix="planner.")
        else:
            unknown = sorted(set(params) - set(self.param_defaults) - {"batch_size"})
            if unknown:
                raise PlannerConfigError(
                    f"planner={self.name}: unknown parameter(s) {', '.join(unknown)}; known: "
                    f"{', '.join(sorted(self.param_defaults))}"
                )
            merged = {**self.param_defaults, **params}
        super().__init__(**merged)
        self._check_params()
        self._variant = get_variant(str(merged["prompt"]))
        try:
            self._prices: dict[str, Price] = parse_price_table(
                merged["prices"], where=f"planner={self.name}: planner.prices"
            )
        except ValueError as exc:
            raise PlannerConfigError(str(exc)) from None
        self._client: Any = None
        self._store_root: Path | None = None

    # -- parameters ----------------------------------------------------------------------------
    def _check_params(self) -> None:
        p = self.params
        checks: list[tuple[str, bool, str]] = [
            ("model", isinstance(p["model"], str) and bool(p["model"].strip()), "a model name"),
            ("max_concurrency", _is_int(p["max_concurrency"], 1), "an integer >= 1"),
            ("max_tokens", _is_int(p["max_tokens"], 1), "an integer >= 1"),
            ("max_retries", _is_int(p["max_retries"], 0), "an integer >= 0"),
            (
                "narration_target_chars",
                p["narration_target_chars"] is None or _is_int(p["narration_target_chars"], 1),
                "null or an integer >= 1",
            ),
            (
                "image_max_side",
                p["image_max_side"] is None or _is_int(p["image_max_side"], 1),
                "null or an integer >= 1",
            ),
            (
                "api_key_env",
                p["api_key_env"] is None
                or (isinstance(p["api_key_env"], str) and bool(p["api_key_env"].strip())),
                "null or the name of an environment variable",
            ),
            ("prompt", str(p["prompt"]) in _variant_names(), f"one of {_variant_names()}"),
        ]
        checks += [
            (k, _is_number(p[k]) and p[k] > 0, "a number > 0")
            for k in ("timeout_s", "retry_base_delay_s", "retry_max_delay_s")
        ]
        checks += [
            (k, p[k] is None or _is_number(p[k]), "null or a number")
            for k in ("temperature", "top_p")
        ]
        for key, ok, expected in checks:
            if not ok:
                raise self._bad(key, expected)
        if p.get("batch") and self.batch_provider not in PROVIDER_LIMITS:
            raise self._bad("batch", "false: this planner has no provider batch API")

    def _bad(self, key: str, expected: str) -> PlannerConfigError:
        """The error for parameter ``key`` (subclasses use it in their own checks)."""
        return PlannerConfigError(
            f"planner={self.name}: planner.{key} must be {expected}, got {self.params[key]!r}"
        )

    @property
    def model(self) -> str:
        return str(self.params["model"])

    @property
    def policy(self) -> RetryPolicy:
        return RetryPolicy(
            max_retries=int(self.params["max_retries"]),
            base_delay_s=float(self.params["retry_base_delay_s"]),
            max_delay_s=float(self.params["retry_max_delay_s"]),
        )

    def output_params(self) -> dict[str, Any]:
        """The cache-key parameters, plus a digest of the prompt wording the variant sends."""
        params = super().output_params()
        params["prompt_sha256"] = self._variant.digest(self.params["narration_target_chars"])
        return params

    @property
    def batch_size(self) -> int:
        """In batch mode every pending item of the stage, so that they go in one provider batch
        (``batch_size`` still overrides it), else the usual."""
        if self.params.get("batch") and not self.params.get("batch_size"):
            return BATCH_MODE_BATCH_SIZE
        return super().batch_size

    def sampling_params(self) -> dict[str, Any]:
        """The non-null sampling parameters shared by the chat APIs."""
        return {k: self.params[k] for k in ("temperature", "top_p") if self.params[k] is not None}

    # -- secrets -------------------------------------------------------------------------------
    def _api_key(self) -> str | None:
        name = self.params["api_key_env"]
        value = os.environ.get(name) if name else None
        if value:
            return value
        if self.api_key_required:
            where = f"environment variable {name}" if name else "no planner.api_key_env"
            raise ComponentError(
                f"planner={self.name}: no API key ({where} is not set); set the variable named by "
                "planner.api_key_env",
                category="model_error",
            )
        return None

    def _scrub(self, text: str) -> str:
        name = self.params["api_key_env"]
        value = os.environ.get(name) if name else None
        if value and len(value) >= 4 and value in text:
            text = text.replace(value, "***REDACTED***")
        return text

    # -- lifecycle -----------------------------------------------------------------------------
    def bind_store(self, root: Any) -> None:
        """The store's root: the batch ledger lives under ``<root>/batches/planner-<name>/``."""
        self._store_root = Path(root)

    def load(self) -> None:
        if self._client is None:
            self._client = self.make_client(self._api_key())

    def unload(self) -> None:
        client, self._client = self._client, None
        close = getattr(client, "close", None)
        if callable(close):
            close()

    # -- calls ---------------------------------------------------------------------------------
    def run_batch(self, items: list[dict[str, Any]]) -> list[Any]:
        self.load()
        if self.params.get("batch"):
            return self._run_batched(items)
        return map_bounded(self._plan_one, items, int(self.params["max_concurrency"]))

    def run_one(self, item: dict[str, Any]) -> Any:
        return self.run_batch([item])[0]

    # -- the dry run's estimates -------------------------------------------------------------
    def pricing(self) -> Pricing | None:
        """The hosted model's price (its ``prices``, else the reference table); None for a
        planner that calls no paid API (a local vLLM server needs no key)."""
        model = self.params.get("model")
        if not self.api_key_required or not model:
            return None
        return price_of(str(model), self.params.get("prices"), f"{self.kind}.prices")

    def estimate(
        self, inputs: dict[str, Any], pricing: Any, output_tokens: int | None
    ) -> dict[str, Any]:
        """Tokens of the real request (prompt text + image) and its cost; a provider batch
        bills :data:`~omnistory_core.kit.batches.BATCH_DISCOUNT` of the standard price."""
        try:
            request = self.build_request(inputs)
        except ValueError:  # the run records this call as failed before sending anything
            return {"input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0}
        tokens_in = (
            count_tokens(request.system)
            + count_tokens(request.text)
            + image_tokens(request.image.data)
        )
        tokens_out = (
            output_tokens if output_tokens is not None else int(self.params.get("max_tokens") or 0)
        )
        estimate: dict[str, Any] = {"input_tokens": tokens_in, "output_tokens": tokens_out}
        if pricing is not None and pricing.price is not None:
            estimate["cost_usd"] = pricing.price.cost(tokens_in, tokens_out)
            if self.params.get("batch"):
                estimate["cost_usd"] *= BATCH_DISCOUNT
                estimate["batch"] = True
        return estimate

    def build_request(self, item: Mapping[str, Any]) -> PlannerRequest:
        return build_request(
            dict(item),
            self._variant,
            target_chars=self.params["narration_target_chars"],
            image_max_side=self.params["image_max_side"],
        )

    def _plan_one(self, item: dict[str, Any]) -> PlannerResponse | Failure:
        try:
            request = self.build_request(item)
        except ValueError as exc:
            return Failure("model_error", str(exc))
        client = self._client
        outcome = call_with_retries(
            lambda: self.send(client, request), self.classify_error, self.policy
        )
        if outcome.error is not None:
            tries = f"{outcome.attempts} attempt{'s' if outcome.attempts != 1 else ''}"
            return Failure(
                outcome.error.category, self._scrub(f"{outcome.error.message} ({tries})")
            )
        reply: ModelReply = outcome.value
        return self._response(reply, attempts=outcome.attempts, waited_s=outcome.waited_s)

    def _response(self, reply: ModelReply, **usage: Any) -> PlannerResponse:
        """The planner's answer: the reply's text and its usage (tokens, cost, ``usage``)."""
        record = usage_record(
            self.model,
            reply.input_tokens,
            reply.output_tokens,
            self._prices,
            extra=reply.extra_usage,
            **usage,
        )
        return PlannerResponse(text=reply.text if isinstance(reply.text, str) else "", usage=record)

    # -- provider batches ----------------------------------------------------------------------
    def batch_api(self) -> BatchAPI:
        """The protocol of :attr:`batch_provider`."""
        if self.batch_provider == "anthropic":
            return AnthropicBatches()
        return OpenAIBatches()

    def batch_ledger(self) -> BatchLedger:
        """Where this planner's submitted requests are recorded (in memory without a store)."""
        return BatchLedger(
            self._store_root,
            f"{self.kind}-{self.name}",
            provider=str(self.batch_provider),
            endpoint=public_url(getattr(self._client, "base_url", "")),
        )

    def _run_batched(self, items: list[dict[str, Any]]) -> list[Any]:
        """``run_batch`` with ``batch=true``: one provider batch for the items (several past the
        limits); the items without a batch result go through :meth:`_plan_one`."""
        results: list[Any] = [None] * len(items)
        ids: dict[int, str] = {}
        first: dict[str, int] = {}  # custom_id -> an item that builds it
        for index, item in enumerate(items):
            try:
                body = self.batch_body(self.build_request(item))
            except ValueError as exc:
                results[index] = Failure("model_error", str(exc))
                continue
            cid = batch_custom_id(body)
            ids[index] = cid
            first.setdefault(cid, index)
        api = self.batch_api()
        outcomes = run_batches(
            api,
            self._client,
            list(first),
            # built again when its batch is written: one batch's bodies in memory, not all
            lambda cid: self.batch_body(self.build_request(items[first[cid]])),
            self.batch_ledger(),
            BatchSettings.from_params(self.params, api.limits),
            call=retrying(self.classify_error, self.policy, scrub=self._scrub),
            label=f"planner={self.name}",
        )
        synchronous: list[int] = []
        for index, cid in ids.items():
            outcome = outcomes[cid]
            result = self._batch_result(outcome) if outcome.status == "ok" else None
            if result is not None:
                results[index] = result
            elif outcome.status in ("ok", "fallback"):
                synchronous.append(index)
            else:
                category = BATCH_PENDING if outcome.status == "pending" else outcome.category
                results[index] = Failure(category, self._scrub(outcome.reason))
        answers = map_bounded(
            self._plan_one, [items[i] for i in synchronous], int(self.params["max_concurrency"])
        )
        for index, answer in zip(synchronous, answers, strict=True):
            if isinstance(answer, PlannerResponse):
                answer.usage["batch_fallback_calls"] = 1
            results[index] = answer
        return results

    def _batch_result(self, outcome: BatchOutcome) -> PlannerResponse | None:
        """The response of a batch answer; None when it cannot be read (sent again then)."""
        try:
            reply = self.batch_reply(outcome.response)
        except (AttributeError, TypeError, ValueError):
            return None
        return self._response(reply, batch_id=outcome.batch_id)

    # -- subclass hooks ------------------------------------------------------------------------
    def batch_body(self, request: PlannerRequest) -> dict[str, Any]:
        """The JSON body of one request as a batch line carries it (the synchronous request's)."""
        raise NotImplementedError

    def batch_reply(self, response: Any) -> ModelReply:
        """A batch answer (the SDK's reply object) -> :class:`ModelReply`."""
        raise NotImplementedError

    def make_client(self, api_key: str | None) -> Any:
        """Create the SDK client (``max_retries=0``: retries are ours)."""
        raise NotImplementedError

    def send(self, client: Any, request: PlannerRequest) -> ModelReply:
        """One API call; raise the SDK's exception on error."""
        raise NotImplementedError

    def classify_error(self, exc: BaseException) -> ErrorInfo:
        """Map an exception of ``send`` to a failure category and a retry decision.

        Subclasses pass their SDK's timeout and connection error types to
        :func:`classify_api_error`; HTTP status errors are recognised by duck typing.
        """
        return classify_api_error(exc)


def _is_int(value: Any, minimum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _variant_names() -> list[str]:
    return sorted(PROMPT_VARIANTS)


__all__ = [
    "BASE_DEFAULTS",
    "BASE_PARAMETERS",
    "BASE_RUNTIME",
    "ModelReply",
    "PlannerConfigError",
    "VLMPlanner",
]
