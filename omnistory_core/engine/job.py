"""One job = one system over one dataset, run stage-major through the content-addressed store.

Order: all plans (a planner) or all backbone calls, then all images, then all speech (each expert
stage only for a modality the backbone does not make).  A model is loaded on the first cache miss of
its stage and released before the next stage, so peak memory is the largest stage, not the sum.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from omnistory_core.components import (
    REFERENCE_INPUTS,
    Component,
)
from omnistory_core.contract import Failure, Plan, StoryExample
from omnistory_core.engine.failures import (
    ComponentUnavailable,
    preflight,
    retry_mode,
    unavailable_message,
)
from omnistory_core.engine.hashing import MediaHasher
from omnistory_core.engine.stage import (
    CacheMiss,
    ComponentStats,
    LazyComponent,
    StageDevices,
    StageItem,
    item_key,
    run_stage,
)
from omnistory_core.engine.store import CallRecord, Store
from omnistory_core.errors import ConfigError
from omnistory_core.plugins import Registry

log = logging.getLogger("omnistory")

__all__ = [
    "ComponentUnavailable",
    "ConfigError",
    "JobResult",
    "PlanOutcome",
    "build_component",
    "run_job",
]

#: stage order of an orchestration system
STAGES: tuple[str, ...] = ("planner", "image", "tts")
#: every group a system may have, in stage order
GROUPS: tuple[str, ...] = ("planner", "backbone", "image", "tts")
#: which output modality a stage produces
STAGE_MODALITY = {"image": "image", "tts": "speech"}
#: component kinds that generate outputs (and must never see the reference unless oracle)
GENERATION_KINDS = ("planner", "image", "tts", "backbone")
#: config keys that describe how a component runs rather than what it is
RESERVED_KEYS = {"name", "runner", "default_choice"}


@dataclass
class PlanOutcome:
    """The planning stage's result for one example (a planner's plan or a backbone's plan fields).

    ``fields`` are the plan inputs experts may read (``image_prompt``, ``utterance``, ...,
    ``narration``); ``problems`` says, per plan path, why a field a backbone should have given is
    unusable.  ``plan`` is set only for a complete plan (orchestration).
    """

    raw: str | None
    plan: Plan | None
    failure: Failure | None
    repairs: list[str] = field(default_factory=list)
    usage: dict[str, Any] = field(default_factory=dict)
    key: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)
    problems: dict[str, Failure] = field(default_factory=dict)


@dataclass
class JobResult:
    examples: list[StoryExample]
    plans: dict[int, PlanOutcome]
    media: dict[str, dict[int, CallRecord | Failure]]
    stats: dict[str, ComponentStats]
    components: dict[str, Component]
    #: per example: the narration, or why there is none
    text: dict[int, str | Failure] = field(default_factory=dict)


def build_component(
    registry: Registry, kind: str, spec: Mapping[str, Any], *, seed: int, allow_oracle: bool
) -> Component:
    if "name" not in spec:
        raise ConfigError(f"the {kind} config has no 'name'")
    cls = registry.component(kind, str(spec["name"]))
    if cls.oracle and not allow_oracle:
        raise ConfigError(
            f"{kind}={cls.name} is an oracle component: it reads the reference answer and exists"
            " only to validate metrics. Enable it explicitly with allow_oracle=true."
        )
    # Evaluators read the reference by design; generation components only when declared oracle.
    forbidden = [r for r in cls.reads if r in REFERENCE_INPUTS and not cls.oracle]
    if forbidden and kind in GENERATION_KINDS:
        raise ConfigError(f"{cls.key()} reads {forbidden} but is not declared oracle")
    params = {k: v for k, v in spec.items() if k not in RESERVED_KEYS}
    params.setdefault("seed", seed)
    return cls(**params)


def example_inputs(example: StoryExample, media: MediaHasher, oracle: bool) -> dict[str, Any]:
    """Everything a component could read about one example (reference fields only for oracles)."""
    pool: dict[str, Any] = {
        "current_image": media(example.current.image),
        "current_text": example.current.text,
        "metadata": example.metadata,
        "conditions": example.conditions,
    }
    if oracle:
        pool["reference_text"] = example.reference.next_page.text
        pool["reference_image"] = media(example.reference.next_page.image)
        pool["reference_speech"] = example.reference.speech.to_dict()
    return pool


def plan_inputs(plan: Plan) -> dict[str, Any]:
    speech = plan.speech
    return {
        "narration": plan.narration,
        "image_prompt": plan.image_prompt,
        "utterance": speech.utterance,
        "speaker": speech.speaker,
        "emotion": speech.emotion,
        "speed": speech.speed,
        "pitch": speech.pitch,
        "gender": speech.gender,
    }


def project(component: Component, pool: dict[str, Any]) -> dict[str, Any]:
    """Exactly the inputs the component declared: nothing else reaches it."""
    return {name: pool[name] for name in component.reads}


#: plan input name (what an expert declares in ``reads``) -> plan schema path
PLAN_PATHS: dict[str, str] = {
    "narration": "narration",
    "image_prompt": "image_prompt",
    **{f: f"speech.{f}" for f in ("utterance", "speaker", "emotion", "speed", "pitch", "gender")},
}


def source_group(components: Mapping[str, Component]) -> str:
    """The group that plans: ``backbone`` when the system has one, else ``planner``."""
    return "backbone" if "backbone" in components else "planner"


def expert_stages(components: Mapping[str, Component]) -> dict[str, Component]:
    """The experts of a system by the modality they make (``image``, ``speech``)."""
    return {STAGE_MODALITY[g]: components[g] for g in ("image", "tts") if g in components}


def symbolic_plan_fields(upstream_key: str) -> dict[str, Any]:
    """Plan fields of an upstream call that is still to make (or whose plan is not looked at):
    values naming the call and the field, so an expert's key built from them is the same in
    every system that shares the upstream call (the dry run's and the progress view's name for
    an expert call)."""
    return {name: {"__upstream_call__": upstream_key, "field": name} for name in PLAN_PATHS}


def symbolic_key(component: Component, pool: Mapping[str, Any], upstream_key: str) -> str:
    """The symbolic key of its call on one example (see :func:`symbolic_plan_fields`)."""
    return item_key(component, project(component, {**pool, **symbolic_plan_fields(upstream_key)}))


def plan_fields_needed(experts: Mapping[str, Component]) -> tuple[str, ...]:
    """The plan fields the experts read (in order, once each; the narration is the text)."""
    return tuple(
        dict.fromkeys(
            PLAN_PATHS[r]
            for c in experts.values()
            for r in c.reads
            if r in PLAN_PATHS and r != "narration"
        )
    )


def run_job(
    *,
    examples: list[StoryExample],
    components: dict[str, Component],
    store: Store,
    retry_failures: bool | str = "errors",
    progress: Callable[[str, int], Callable[[int], None]] | None = None,
    devices: StageDevices | None = None,
    stats: dict[str, ComponentStats] | None = None,
    on_expert_keys: Callable[[str, dict[str, str | None]], None] | None = None,
) -> JobResult:
    """Run the system's stages over the examples, stage-major, through the store.

    ``components`` maps groups to components: ``planner``, ``image``, ``tts`` (orchestration) or
    ``backbone`` plus an expert for each modality it does not produce (see
    :func:`omnistory_core.engine.system.system_shape`).  First the planner or backbone for every
    example, then each expert over all examples.

    ``retry_failures`` (``errors`` / ``all`` / ``none``) says which stored failures are
    recomputed.  A component that fails its ``preflight()`` check, or cannot load when its stage
    first needs it, raises :class:`ComponentUnavailable`; the check fails the job before any call
    unless every output is already in the store (a cached re-run needs no API key).

    ``devices``: where the stages of components that need a GPU run (replicas on a device pool,
    :class:`omnistory_core.engine.replicas.ReplicaRunner`); None: in this process.  ``stats``: a
    dict to fill with each component's counts as they happen (a progress view reads it);
    ``on_expert_keys(component key, {symbolic key: real key or None})``: told, as each expert
    stage starts, what the calls it planned by their upstream call (:func:`symbolic_key`) turned
    out to be: the real key, or None where the plan failed and there is no call (the sweep's
    progress view counts calls by real key as soon as it can).
    """
    mode = retry_mode(retry_failures)
    unavailable = preflight(components.values())
    if unavailable:
        try:
            return _run_job(examples, components, store, mode, None, cache_only=True, stats=stats)
        except CacheMiss:
            component, exc = unavailable[0]
            message = unavailable_message(component, exc)
            if len(unavailable) > 1:
                others = ", ".join(f"{c.kind}={c.name}" for c, _ in unavailable[1:])
                message += f" (also cannot run: {others})"
            raise ComponentUnavailable(message) from None
    return _run_job(
        examples,
        components,
        store,
        mode,
        progress,
        devices=devices,
        stats=stats,
        on_expert_keys=on_expert_keys,
    )


def _run_job(
    examples: list[StoryExample],
    components: dict[str, Component],
    store: Store,
    mode: str,
    progress: Callable[[str, int], Callable[[int], None]] | None,
    cache_only: bool = False,
    devices: StageDevices | None = None,
    stats: dict[str, ComponentStats] | None = None,
    on_expert_keys: Callable[[str, dict[str, str | None]], None] | None = None,
) -> JobResult:
    media = MediaHasher()
    if stats is None:
        stats = {}
    stats.clear()
    stats.update({c.key(): ComponentStats() for c in components.values()})
    pools = {
        ex.index: example_inputs(ex, media, oracle=any(c.oracle for c in components.values()))
        for ex in examples
    }
    progress = progress or (lambda label, total: lambda n: None)

    # -- stage 1: plans (a planner) or native outputs + plans (a backbone) --------------------
    group = source_group(components)
    source = components[group]
    experts = expert_stages(components)
    needed = plan_fields_needed(experts)

    def derived_failure(record: CallRecord) -> bool:
        """An ok call whose plan or outputs are unusable (retry_failures=all recomputes it)."""
        if group == "planner":
            outcome = _plan_outcome(record, ComponentStats())
            return isinstance(_planner_text(outcome), Failure)
        outcome, ex_text, ex_native = _backbone_outcome(record, source, needed)
        return (
            isinstance(ex_text, Failure)
            or any(isinstance(v, Failure) for v in ex_native.values())
            or outcome.failure is not None
            or bool(outcome.problems)
        )

    lazy = LazyComponent(source, stats[source.key()])
    records = run_stage(
        lazy,
        [StageItem(ex.index, project(source, pools[ex.index])) for ex in examples],
        store,
        retry_failures=mode,
        advance=progress(
            f"{'plans' if group == 'planner' else 'backbone'}    {source.key()}", len(examples)
        ),
        derived_failure=derived_failure,
        load_failure="raise",
        cache_only=cache_only,
        devices=devices,
    )
    lazy.release()
    if group == "planner":
        plans = {ex.index: _plan_outcome(records[ex.index], stats[source.key()]) for ex in examples}
        text = {ex.index: _planner_text(plans[ex.index]) for ex in examples}
        native: dict[str, dict[int, CallRecord | Failure]] = {}
    else:
        # the source is a backbone here (Component itself declares no produces)
        produces: frozenset[str] = getattr(source, "produces", frozenset())
        plans, text, native = {}, {}, {m: {} for m in ("image", "speech") if m in produces}
        for ex in examples:
            outcome, ex_text, ex_native = _backbone_outcome(records[ex.index], source, needed)
            plans[ex.index], text[ex.index] = outcome, ex_text
            for modality, value in ex_native.items():
                native[modality][ex.index] = value

    # -- experts: one stage per modality the source does not make ------------------------------
    media_results: dict[str, dict[int, CallRecord | Failure]] = dict(native)
    for stage in ("image", "tts"):
        if stage not in components:
            continue
        component = components[stage]
        items = []
        resolved: dict[str, str | None] = {}
        for ex in examples:
            pool = dict(pools[ex.index])
            pool.update(plans[ex.index].fields)
            blocked = _blocked(component, pool, plans[ex.index], text[ex.index])
            inputs = None if blocked else project(component, pool)
            items.append(StageItem(ex.index, inputs, blocked))
            upstream = plans[ex.index].key
            if on_expert_keys is not None and upstream is not None:
                name = symbolic_key(component, pools[ex.index], upstream)
                resolved[name] = None if inputs is None else item_key(component, inputs)
        if on_expert_keys is not None:
            on_expert_keys(component.key(), resolved)
        lazy = LazyComponent(component, stats[component.key()])
        media_results[STAGE_MODALITY[stage]] = run_stage(
            lazy,
            items,
            store,
            retry_failures=mode,
            advance=progress(f"{STAGE_MODALITY[stage]:<8} {component.key()}", len(examples)),
            load_failure="raise",
            cache_only=cache_only,
            devices=devices,
        )
        lazy.release()
    return JobResult(examples, plans, media_results, stats, components, text)


def _plan_outcome(record: CallRecord | Failure, stats: ComponentStats) -> PlanOutcome:
    from omnistory_core.plan_schema import parse_plan

    if isinstance(record, Failure):  # pragma: no cover - planners have no upstream
        return PlanOutcome(None, None, record)
    if record.status != "ok":
        return PlanOutcome(
            None,
            None,
            Failure.from_dict(record.failure or {"category": "model_error"}),
            key=record.key,
        )
    raw = record.output.get("text", "")
    parsed = parse_plan(raw)
    if parsed.failure is not None:
        stats.failures += 1
    outcome = PlanOutcome(
        raw, parsed.plan, parsed.failure, list(parsed.repairs), record.usage, record.key
    )
    if parsed.plan is not None:
        outcome.fields = plan_inputs(parsed.plan)
    return outcome


def _planner_text(outcome: PlanOutcome) -> str | Failure:
    if outcome.plan is None:
        return outcome.failure or Failure("upstream_failed", "no plan")
    if not outcome.plan.narration.strip():
        return Failure("empty_output", "empty narration")
    return outcome.plan.narration


def _backbone_outcome(
    record: CallRecord | Failure, backbone: Component, needed: tuple[str, ...]
) -> tuple[PlanOutcome, str | Failure, dict[str, CallRecord | Failure]]:
    """Split one backbone record into the plan fields experts need, the narration and the native
    media, each modality with its own failure."""
    from omnistory_core.plan_schema import parse_partial_plan

    produces = getattr(backbone, "produces", frozenset())
    if isinstance(record, Failure) or record.status != "ok":
        failure = (
            record
            if isinstance(record, Failure)
            else Failure.from_dict(record.failure or {"category": "model_error"})
        )
        key = None if isinstance(record, Failure) else record.key
        native = {m: failure for m in ("image", "speech") if m in produces}
        return PlanOutcome(None, None, failure, key=key), failure, native
    out = record.output
    omitted = {m: Failure.from_dict(f) for m, f in (out.get("failures") or {}).items()}

    def missing(modality: str) -> Failure:
        return omitted.get(modality) or Failure(
            f"backbone_no_{modality}", f"{backbone.key()} returned no {modality}"
        )

    text: str | Failure
    raw_text = out.get("text")
    if not isinstance(raw_text, str):
        text = missing("text")
    elif not raw_text.strip():
        text = omitted.get("text") or Failure("empty_output", f"{backbone.key()}: empty narration")
    else:
        text = raw_text
    native: dict[str, CallRecord | Failure] = {}
    for modality in ("image", "speech"):
        if modality not in produces:
            continue
        blob = out.get(modality)
        native[modality] = (
            CallRecord(key=record.key, component=record.component, status="ok", output=blob)
            if isinstance(blob, dict) and blob.get("blob")
            else missing(modality)
        )
    raw_plan = out.get("plan")
    partial = parse_partial_plan(raw_plan, needed) if needed else None
    fields = {
        name: partial.values[path]
        for name, path in PLAN_PATHS.items()
        if partial is not None and path in partial.values
    }
    if isinstance(text, str):
        fields["narration"] = text
    outcome = PlanOutcome(
        raw=raw_plan
        if isinstance(raw_plan, str) or raw_plan is None
        else json.dumps(raw_plan, ensure_ascii=False, sort_keys=True),
        plan=None,
        failure=partial.failure if partial is not None else None,
        repairs=list(partial.repairs) if partial is not None else [],
        usage=record.usage,
        key=record.key,
        fields=fields,
        problems={} if partial is None else dict(partial.problems),
    )
    return outcome, text, native


def _blocked(
    component: Component, pool: dict[str, Any], outcome: PlanOutcome, text: str | Failure
) -> Failure | None:
    """Why an expert cannot run on this example (the first plan input it lacks), or None."""
    for name in component.reads:
        if name not in PLAN_PATHS or name in pool:
            continue
        if outcome.plan is None and outcome.failure is not None:
            # A failed plan leaves every output that needs it missing (as in the paper); each
            # modality carries the plan's category so the failure table can attribute it.
            return replace(outcome.failure, message=f"plan failed: {outcome.failure.message}")
        if name == "narration" and isinstance(text, Failure):
            return replace(text, message=f"no narration for {component.key()}: {text.message}")
        problem = outcome.problems.get(PLAN_PATHS[name])
        if problem is not None:
            return problem
        return Failure("upstream_failed", f"no plan field {PLAN_PATHS[name]} for {component.key()}")
    return None


def store_for(output_root: str | Path) -> Store:
    return Store(Path(output_root) / "store")
