"""The contract between omnistory_core and its plugins: what a component is, returns and reads.

A plugin imports its base class, records, labels, parameters, errors and ``hookimpl`` from here
(``from omnistory_core.api import Planner, Param, hookimpl``).  The public surface of the core is
three places, each kept importable (and type-checked: the package ships ``py.typed``) across
releases:

* ``omnistory_core.api`` (this module) -- the contract, listed in ``__all__``;
* ``omnistory_core.kit.*`` -- helpers for plugin authors, each module's ``__all__`` being its
  public surface: :mod:`~omnistory_core.kit.planning` (prompt variants, requests,
  :class:`VLMPlanner`, :class:`OpenAIChatPlanner`, replies, usage and prices),
  :mod:`~omnistory_core.kit.batches` (provider batch APIs), :mod:`~omnistory_core.kit.retry` (the
  one retry policy), :mod:`~omnistory_core.kit.diffusion` (settings, seeds and devices of the
  diffusers experts), :mod:`~omnistory_core.kit.voices`, :mod:`~omnistory_core.kit.checkout`,
  :mod:`~omnistory_core.kit.hub`, ...;
* :mod:`omnistory_testkit` -- the test kit (``check_component``, ``FakeServer``, ``run_cli``,
  :mod:`omnistory_testkit.engine`), for a plugin's tests.

Any other module of omnistory_core is internal and may change without notice.

Importing this module is light: no torch, no model stacks, no SDK.

What is here:

* **Components**: the base class of each kind (:class:`Planner`, :class:`Backbone`,
  :class:`ImageExpert`, :class:`TTSExpert`, :class:`Metric`, :class:`Judge`) and the kinds; what
  they return (:class:`PlannerResponse`, :class:`BackboneOutput`, :class:`Audio`,
  :class:`EvalResult`, :class:`ImageOutput`, :class:`Failure`) and read (:class:`Media`, the
  ``*_INPUTS`` names);
  :data:`hookimpl` to register them; :func:`current_example` / :func:`current_examples`, the
  example a call is on (for logging: never part of the call key).
* **Labels and the plan**: the contract's labels (:data:`EMOTIONS`, ...) and the plan schema a
  planner's reply is parsed against (:func:`parse_plan`, :func:`plan_json_schema`,
  :func:`plan_response_format`).
* **Parameters**: :class:`Param` and :func:`with_defaults` (see :mod:`omnistory_core.params`).
* **Errors**: :class:`ConfigError` (a configuration that cannot work: exit 2), its subclasses
  :class:`ParamError` and :class:`PlannerConfigError`; :class:`ComponentError` (one item failed,
  with a failure category); :class:`SettingsError` and :class:`CheckoutError` (bad settings of
  image experts and source checkouts, both ``ValueError``).
"""

from __future__ import annotations

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
    ImageOutput,
    Judge,
    Media,
    Metric,
    Planner,
    PlannerResponse,
    TTSExpert,
    current_example,
    current_examples,
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
from omnistory_core.data.errors import DatasetError, Problem
from omnistory_core.errors import ConfigError, UserError
from omnistory_core.hookspecs import hookimpl
from omnistory_core.kit.checkout import CheckoutError
from omnistory_core.kit.diffusion import SettingsError
from omnistory_core.kit.planning.base import PlannerConfigError
from omnistory_core.params import Param, ParamError, with_defaults
from omnistory_core.plan_schema import (
    json_object_end,
    parse_plan,
    plan_json_schema,
    plan_response_format,
)
from omnistory_core.scores import STATUSES
from omnistory_core.tasks import (
    SCOPES,
    Aggregation,
    Column,
    OutputSlot,
    PaperTable,
    Scope,
    Task,
    Track,
)

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
    "EvalResult",
    "Evaluator",
    "Failure",
    "ImageExpert",
    "ImageOutput",
    "Judge",
    "KINDS",
    "Media",
    "Metric",
    "PLAN_INPUTS",
    "Planner",
    "PlannerResponse",
    "REFERENCE_INPUTS",
    "TTSExpert",
    "current_example",
    "current_examples",
    "hookimpl",
    # -- the contract's labels and the plan schema
    "EMOTIONS",
    "GENDERS",
    "LABELS",
    "MODALITIES",
    "PITCHES",
    "SPEEDS",
    "json_object_end",
    "parse_plan",
    "plan_json_schema",
    "plan_response_format",
    # -- tasks (a benchmark's declaration) and the scores table's statuses
    "SCOPES",
    "STATUSES",
    "Aggregation",
    "Column",
    "OutputSlot",
    "PaperTable",
    "Scope",
    "Task",
    "Track",
    # -- parameters
    "Param",
    "with_defaults",
    # -- errors
    "CheckoutError",
    "DatasetError",
    "Problem",
    "UserError",
    "ComponentError",
    "ConfigError",
    "ParamError",
    "PlannerConfigError",
    "SettingsError",
]
