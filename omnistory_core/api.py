"""The public API for plugins: everything a plugin may import from omnistory_core, in one place.

A plugin imports from here (``from omnistory_core.api import Planner, Param, hookimpl``); the
names listed in ``__all__`` are the supported surface, kept importable (and type-checked: the
package ships ``py.typed``) across releases.  Any other module of omnistory_core is internal and
may change without notice; the older locations of these names (``omnistory_core.components``,
``omnistory_core.engine.job.ConfigError``, ``omnistory_core.kit.retry``, ...) keep working.
Tests of a plugin also use the test kit, :mod:`omnistory_testkit` (``check_component``,
``FakeServer``, ``run_cli``), which is public too.

Importing this module is light: no torch, no model stacks, no SDK (``openai`` and ``anthropic``
are imported by the planners only when they make a client).

What is here:

* **Components**: the base class of each kind (:class:`Planner`, :class:`Backbone`,
  :class:`ImageExpert`, :class:`TTSExpert`, :class:`Metric`, :class:`Judge`), what they return
  (:class:`PlannerResponse`, :class:`BackboneOutput`, :class:`Audio`, :class:`EvalResult`,
  :class:`Failure`), what they read (:class:`Media`, the ``*_INPUTS`` names) and the labels of
  the contract; :data:`hookimpl` to register them.
* **Parameters**: :class:`Param` and :func:`with_defaults` (see :mod:`omnistory_core.params`).
* **Errors**: :class:`ConfigError` (a configuration that cannot work: exit 2), its subclasses
  :class:`ParamError` and :class:`PlannerConfigError`; :class:`ComponentError` (one item failed,
  with a failure category); :class:`SettingsError` and :class:`CheckoutError` (bad settings of
  image experts and source checkouts, both ``ValueError``).
* **Planners**: the prompt variants and the request of one example (:func:`get_variant`,
  :func:`build_request`); :class:`VLMPlanner` (any SDK), :class:`OpenAIChatPlanner`
  (OpenAI-compatible Chat Completions, vLLM included), replies and usage for API planners.
* **Provider batches**: :func:`batch_parameters` (the ``batch*`` parameters of a component on a
  provider batch API) and :data:`BATCH_DISCOUNT` (see :mod:`omnistory_core.kit.batches`).
* **Retries**: the one retry policy of planners, judges and plugins
(:mod:`omnistory_core.kit.retry`).
* **Experts**: the helpers the diffusers image experts share, speaker voices, source checkouts.
"""

from __future__ import annotations

from omnistory_core.builtin.espeak_tts import EspeakTTS
from omnistory_core.components import (
    ALL_INPUTS,
    BACKBONE_MODALITIES,
    CANDIDATE_INPUTS,
    EVALUATION_INPUTS,
    EXAMPLE_INPUTS,
    KINDS,
    PLAN_INPUTS,
    REFERENCE_INPUTS,
    Audio,
    Backbone,
    BackboneOutput,
    Component,
    ComponentError,
    EvalResult,
    Evaluator,
    ImageExpert,
    Judge,
    Media,
    Metric,
    Planner,
    PlannerResponse,
    TTSExpert,
)
from omnistory_core.contract import (
    EMOTIONS,
    GENDERS,
    LABELS,
    MODALITIES,
    PITCHES,
    SPEEDS,
    Failure,
)
from omnistory_core.errors import ConfigError
from omnistory_core.hookspecs import hookimpl
from omnistory_core.kit.batches import BATCH_DISCOUNT, batch_parameters
from omnistory_core.kit.checkout import Checkout, CheckoutError, git_revision
from omnistory_core.kit.diffusion import (
    DTYPE_NAMES,
    SEED_MODES,
    SettingsError,
    arrays_to_images,
    boolean,
    call_with_fallback,
    chunked,
    exception_failure,
    generator_seed,
    item_seed,
    key_without_defaults,
    non_negative_float,
    parse_seed_mode,
    parse_settings,
    positive_int,
    release_cuda_memory,
    resolve_device,
    resolve_dtype,
    setting,
)
from omnistory_core.kit.planning.base import (
    BASE_DEFAULTS,
    BASE_PARAMETERS,
    BASE_RUNTIME,
    PlannerConfigError,
    VLMPlanner,
)
from omnistory_core.kit.planning.messages import (
    PlannerRequest,
    anthropic_messages,
    build_request,
    encode_image,
    openai_chat_messages,
)
from omnistory_core.kit.planning.openai_chat import NO_KEY, OPENAI_REQUIREMENT, OpenAIChatPlanner
from omnistory_core.kit.planning.prompts import PROMPT_VARIANTS, PromptVariant, get_variant
from omnistory_core.kit.planning.replies import (
    TRUNCATION_REASONS,
    ModelReply,
    reply_from_anthropic_message,
    reply_from_chat_completion,
)
from omnistory_core.kit.planning.usage import Price, parse_price_table, usage_record
from omnistory_core.kit.retry import (
    RETRYABLE_STATUSES,
    CallOutcome,
    ErrorInfo,
    RetryPolicy,
    call_with_retries,
    classify_api_error,
    map_bounded,
    parse_retry_after,
)
from omnistory_core.kit.voices import (
    VoiceLabels,
    check_label_table,
    resolve_gender,
    voice_for,
    voice_labels,
)
from omnistory_core.params import Param, ParamError, with_defaults
from omnistory_core.plan_schema import parse_plan, plan_json_schema, plan_response_format

__all__ = [
    # -- components and what they exchange
    "ALL_INPUTS",
    "Audio",
    "BACKBONE_MODALITIES",
    "Backbone",
    "BackboneOutput",
    "CANDIDATE_INPUTS",
    "Component",
    "EVALUATION_INPUTS",
    "EXAMPLE_INPUTS",
    "EspeakTTS",
    "EvalResult",
    "Evaluator",
    "Failure",
    "ImageExpert",
    "Judge",
    "KINDS",
    "Media",
    "Metric",
    "PLAN_INPUTS",
    "Planner",
    "PlannerResponse",
    "REFERENCE_INPUTS",
    "TTSExpert",
    "hookimpl",
    # -- the contract's labels and the plan schema
    "EMOTIONS",
    "GENDERS",
    "LABELS",
    "MODALITIES",
    "PITCHES",
    "SPEEDS",
    "parse_plan",
    "plan_json_schema",
    "plan_response_format",
    # -- parameters
    "Param",
    "with_defaults",
    # -- errors
    "CheckoutError",
    "ComponentError",
    "ConfigError",
    "ParamError",
    "PlannerConfigError",
    "SettingsError",
    # -- API planners
    "BASE_DEFAULTS",
    "BASE_PARAMETERS",
    "BASE_RUNTIME",
    "ModelReply",
    "NO_KEY",
    "OPENAI_REQUIREMENT",
    "OpenAIChatPlanner",
    "PROMPT_VARIANTS",
    "PlannerRequest",
    "PromptVariant",
    "Price",
    "TRUNCATION_REASONS",
    "VLMPlanner",
    "anthropic_messages",
    "build_request",
    "encode_image",
    "get_variant",
    "openai_chat_messages",
    "parse_price_table",
    "reply_from_anthropic_message",
    "reply_from_chat_completion",
    "usage_record",
    # -- provider batches
    "BATCH_DISCOUNT",
    "batch_parameters",
    # -- the one retry policy
    "CallOutcome",
    "ErrorInfo",
    "RETRYABLE_STATUSES",
    "RetryPolicy",
    "call_with_retries",
    "classify_api_error",
    "map_bounded",
    "parse_retry_after",
    # -- experts: diffusers helpers, voices, source checkouts
    "Checkout",
    "DTYPE_NAMES",
    "SEED_MODES",
    "VoiceLabels",
    "arrays_to_images",
    "boolean",
    "call_with_fallback",
    "check_label_table",
    "chunked",
    "exception_failure",
    "generator_seed",
    "git_revision",
    "item_seed",
    "key_without_defaults",
    "non_negative_float",
    "parse_seed_mode",
    "parse_settings",
    "positive_int",
    "release_cuda_memory",
    "resolve_device",
    "resolve_dtype",
    "resolve_gender",
    "setting",
    "voice_for",
    "voice_labels",
]
