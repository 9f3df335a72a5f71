"""One job = one system over one dataset, run stage-major through the content-addressed store.

Order: all plans, then all images, then all speech.  A model is loaded on the first cache miss of
its stage and released before the next stage, so peak memory is the largest stage, not the sum.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omnistory_core.components import (
    PLAN_INPUTS,
    REFERENCE_INPUTS,
    Component,
    Media,
)
from omnistory_core.contract import Failure, Plan, StoryExample
from omnistory_core.engine.hashing import sha256_file
from omnistory_core.engine.stage import ComponentStats, LazyComponent, StageItem, run_stage
from omnistory_core.engine.store import CallRecord, Store
from omnistory_core.plugins import Registry

log = logging.getLogger("omnistory")

#: stage order of an orchestration system
STAGES: tuple[str, ...] = ("planner", "image", "tts")
#: which output modality a stage produces
STAGE_MODALITY = {"image": "image", "tts": "speech"}
#: component kinds that generate outputs (and must never see the reference unless oracle)
GENERATION_KINDS = ("planner", "image", "tts", "backbone")
#: config keys that describe how a component runs rather than what it is
RESERVED_KEYS = {"name", "runner"}


class ConfigError(Exception):
    """A configuration that cannot run (unknown component, oracle without the flag, ...)."""


@dataclass
class PlanOutcome:
    """The planner stage's result for one example."""

    raw: str | None
    plan: Plan | None
    failure: Failure | None
    repairs: list[str] = field(default_factory=list)
    usage: dict[str, Any] = field(default_factory=dict)
    key: str | None = None


@dataclass
class JobResult:
    examples: list[StoryExample]
    plans: dict[int, PlanOutcome]
    media: dict[str, dict[int, CallRecord | Failure]]
    stats: dict[str, ComponentStats]
    components: dict[str, Component]


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


class MediaHasher:
    """Hash each dataset file once per process."""

    def __init__(self) -> None:
        self._cache: dict[str, Media] = {}

    def __call__(self, path: str) -> Media:
        media = self._cache.get(path)
        if media is None:
            media = self._cache[path] = Media(path=path, sha256=sha256_file(path))
        return media


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


def run_job(
    *,
    examples: list[StoryExample],
    components: dict[str, Component],
    store: Store,
    retry_failures: bool = False,
    progress: Callable[[str, int], Callable[[int], None]] | None = None,
) -> JobResult:
    """Run planner -> image -> tts over the examples, stage-major, through the store."""
    from omnistory_core.plan import parse_plan

    media = MediaHasher()
    stats = {c.key(): ComponentStats() for c in components.values()}
    pools = {
        ex.index: example_inputs(ex, media, oracle=any(c.oracle for c in components.values()))
        for ex in examples
    }
    progress = progress or (lambda label, total: lambda n: None)

    # -- stage 1: plans -------------------------------------------------------------------
    planner = components["planner"]
    lazy = LazyComponent(planner, stats[planner.key()])
    records = run_stage(
        lazy,
        [StageItem(ex.index, project(planner, pools[ex.index])) for ex in examples],
        store,
        retry_failures=retry_failures,
        advance=progress(f"plans    {planner.key()}", len(examples)),
    )
    lazy.release()
    plans: dict[int, PlanOutcome] = {}
    for ex in examples:
        record = records[ex.index]
        if isinstance(record, Failure):  # pragma: no cover - planners have no upstream
            plans[ex.index] = PlanOutcome(None, None, record)
        elif record.status != "ok":
            plans[ex.index] = PlanOutcome(
                None,
                None,
                Failure.from_dict(record.failure or {"category": "model_error"}),
                key=record.key,
            )
        else:
            raw = record.output.get("text", "")
            parsed = parse_plan(raw)
            plans[ex.index] = PlanOutcome(
                raw, parsed.plan, parsed.failure, list(parsed.repairs), record.usage, record.key
            )
            if parsed.failure is not None:
                stats[planner.key()].failures += 1

    # -- stages 2 and 3: experts ----------------------------------------------------------
    media_results: dict[str, dict[int, CallRecord | Failure]] = {}
    for stage in ("image", "tts"):
        component = components[stage]
        items = []
        for ex in examples:
            pool = dict(pools[ex.index])
            outcome = plans[ex.index]
            needs_plan = any(r in PLAN_INPUTS for r in component.reads)
            blocked = None
            if outcome.plan is not None:
                pool.update(plan_inputs(outcome.plan))
            if needs_plan and outcome.plan is None:
                # A failed plan leaves all three outputs missing (as in the paper); each modality
                # carries the plan's failure category so the failure table can attribute it.
                reason = outcome.failure or Failure("upstream_failed", "no plan")
                blocked = Failure(reason.category, f"plan failed: {reason.message}")
            items.append(
                StageItem(ex.index, None if blocked else project(component, pool), blocked)
            )
        lazy = LazyComponent(component, stats[component.key()])
        media_results[STAGE_MODALITY[stage]] = run_stage(
            lazy,
            items,
            store,
            retry_failures=retry_failures,
            advance=progress(f"{STAGE_MODALITY[stage]:<8} {component.key()}", len(examples)),
        )
        lazy.release()
    return JobResult(examples, plans, media_results, stats, components)


def store_for(output_root: str | Path) -> Store:
    return Store(Path(output_root) / "store")
