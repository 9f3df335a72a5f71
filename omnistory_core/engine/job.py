"""One job = one system over one dataset, run stage-major through the content-addressed store.

Order: all plans (a planner) or all backbone calls, then all images, then all speech (each expert
stage only for a modality the backbone does not make).  A model is loaded on the first cache miss of
its stage and released before the next stage, so peak memory is the largest stage, not the sum.
The stages are :mod:`omnistory_core.engine.walk`'s; this module computes them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from omnistory_core.components import (
    REFERENCE_INPUTS,
    Component,
)
from omnistory_core.contract import Failure, StoryExample
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
    run_stage,
)
from omnistory_core.engine.store import CallRecord, Store
from omnistory_core.engine.walk import (
    PLAN_PATHS,
    STAGE_MODALITY,
    Answers,
    JobWalk,
    PlanOutcome,
    Stage,
    drive,
    project,
    source_group,
)
from omnistory_core.errors import ConfigError
from omnistory_core.plugins import Registry

log = logging.getLogger("omnistory")

__all__ = [
    "PLAN_PATHS",
    "STAGE_MODALITY",
    "ComponentUnavailable",
    "ConfigError",
    "JobResult",
    "MediaHasher",
    "PlanOutcome",
    "build_component",
    "example_inputs",
    "job_walk",
    "project",
    "run_job",
    "source_group",
]

#: stage order of an orchestration system
STAGES: tuple[str, ...] = ("planner", "image", "tts")
#: every group a system may have, in stage order
GROUPS: tuple[str, ...] = ("planner", "backbone", "image", "tts")
#: component kinds that generate outputs (and must never see the reference unless oracle)
GENERATION_KINDS = ("planner", "image", "tts", "backbone")
#: config keys that describe how a component runs rather than what it is
RESERVED_KEYS = {"name", "runner", "default_choice"}


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


def job_walk(
    examples: list[StoryExample],
    components: dict[str, Component],
    media: MediaHasher | None = None,
) -> JobWalk:
    """The stage graph of one job (:class:`~omnistory_core.engine.walk.JobWalk`): walk it once to
    plan the job and again to run it, and what the first walk derived serves the second.
    ``media``: a hasher to share between jobs (each dataset file is hashed once)."""
    media = media or MediaHasher()
    oracle = any(c.oracle for c in components.values())
    pools = {ex.index: example_inputs(ex, media, oracle=oracle) for ex in examples}
    return JobWalk(examples, components, pools)


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
    walk: JobWalk | None = None,
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
    stage starts, what the calls it planned by their upstream call
    (:func:`~omnistory_core.engine.walk.symbolic_key`) turned out to be: the real key, or None
    where the plan failed and there is no call (the sweep's progress view counts calls by real key
    as soon as it can).  ``walk``: the job's :func:`job_walk` of these examples and components,
    when it was walked already (to plan the job): what that walk derived is not derived again.
    """
    mode = retry_mode(retry_failures)
    walk = walk or job_walk(examples, components)
    unavailable = preflight(components.values())
    if unavailable:
        try:
            return _run_job(walk, store, mode, None, cache_only=True, stats=stats)
        except CacheMiss:
            component, exc = unavailable[0]
            message = unavailable_message(component, exc)
            if len(unavailable) > 1:
                others = ", ".join(f"{c.kind}={c.name}" for c, _ in unavailable[1:])
                message += f" (also cannot run: {others})"
            raise ComponentUnavailable(message) from None
    return _run_job(
        walk,
        store,
        mode,
        progress,
        devices=devices,
        stats=stats,
        on_expert_keys=on_expert_keys,
    )


def _run_job(
    walk: JobWalk,
    store: Store,
    mode: str,
    progress: Callable[[str, int], Callable[[int], None]] | None,
    cache_only: bool = False,
    devices: StageDevices | None = None,
    stats: dict[str, ComponentStats] | None = None,
    on_expert_keys: Callable[[str, dict[str, str | None]], None] | None = None,
) -> JobResult:
    """Walk the job's stages, computing each through the store."""
    if stats is None:
        stats = {}
    stats.clear()
    stats.update({c.key(): ComponentStats() for c in walk.components.values()})
    bars = progress or (lambda label, total: lambda n: None)

    def compute(stage: Stage) -> Answers:
        if on_expert_keys is not None and stage.is_expert:
            on_expert_keys(stage.component.key(), stage.resolved())
        lazy = LazyComponent(stage.component, stats[stage.component.key()])
        records = run_stage(
            lazy,
            stage.items,
            store,
            retry_failures=mode,
            advance=bars(stage.label, len(stage.items)),
            derived_failure=stage.derived_failure,
            load_failure="raise",
            cache_only=cache_only,
            devices=devices,
        )
        lazy.release()
        return records

    walked = drive(walk.stages(stats), compute)
    # a run answers every call: no record is None
    media = cast(dict[str, dict[int, CallRecord | Failure]], walked.media)
    return JobResult(walk.examples, walked.plans, media, stats, walk.components, walked.text)


def store_for(output_root: str | Path) -> Store:
    return Store(Path(output_root) / "store")
