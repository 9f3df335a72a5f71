"""One job = one system over one dataset, run stage-major through the content-addressed store.

Order: all plans (a planner) or all backbone calls, then all images, then all speech (each expert
stage only for a modality the backbone does not make).  A model is loaded on the first cache miss of
its stage and released before the next stage, so peak memory is the largest stage, not the sum.
The stages are :mod:`omnistory_core.engine.walk`'s; this module computes them.

*Start sooner* (``engine.start_sooner``, on by default): where an expert's model stays loaded
between chunks anyway -- it runs on the sweep's warm pool (:mod:`omnistory_core.engine.pool`),
whose servers outlive a stage -- the expert's stage does not wait for the whole planning stage.
It runs in *waves* over the examples whose plans exist (:meth:`JobWalk.wave`), each a
:func:`~omnistory_core.engine.stage.run_stage` of those examples' items, while the source stage
goes on for the rest.  Each wave's items are the ones the full stage gives those examples (the
same keys, inputs and claiming through the store's locks), so the calls, records and job outputs
are those of the stage-major order; only when they are made changes.  Where the model would be
loaded again per wave (a component in this process, no pool) or the pool's memory budget cannot
hold the job's models together, the order stays stage-major.  While an expert waits for its
first wave, its model is *pre-loaded* where the sweep's scheduler has a device to spare
(:meth:`~omnistory_core.engine.replicas.ReplicaRunner.preload`): the load its first wave needs
happens while the plans are being made.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
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
    start_sooner: bool = True,
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
    ``start_sooner``: let expert stages that run on the sweep's warm pool start on the plans that
    exist while planning goes on (see the module docstring); False: strictly stage-major.
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
        early=early_experts(walk.components, devices) if start_sooner else (),
    )


def early_experts(
    components: Mapping[str, Component], devices: StageDevices | None
) -> tuple[str, ...]:
    """The expert groups (``image``, ``tts``) whose stages may start before planning ends: those
    whose calls run on the sweep's warm pool, where a model stays loaded between waves, as many
    in stage order as the pool's per-device memory budget holds together with a pooled source
    (more would make the pool unload and reload models between waves)."""
    warm = getattr(devices, "warm", None)
    if devices is None or warm is None:
        return ()
    from omnistory_core.engine.pool import footprint_gb, pool_settings

    try:
        budget = pool_settings(warm).get("budget_gb")
    except (OSError, ValueError):
        return ()
    source = components[source_group(components)]
    resident = footprint_gb(source) if devices.wants(source) else 0.0
    early: list[str] = []
    for group in ("image", "tts"):
        component = components.get(group)
        if component is None or not devices.wants(component):
            continue
        resident += footprint_gb(component)
        if budget is not None and resident > float(budget):
            break
        early.append(group)
    return tuple(early)


def _run_job(
    walk: JobWalk,
    store: Store,
    mode: str,
    progress: Callable[[str, int], Callable[[int], None]] | None,
    cache_only: bool = False,
    devices: StageDevices | None = None,
    stats: dict[str, ComponentStats] | None = None,
    on_expert_keys: Callable[[str, dict[str, str | None]], None] | None = None,
    early: tuple[str, ...] = (),
) -> JobResult:
    """Walk the job's stages, computing each through the store; the expert groups of ``early``
    in waves while the source stage goes on (:class:`_Waves`)."""
    if stats is None:
        stats = {}
    stats.clear()
    stats.update({c.key(): ComponentStats() for c in walk.components.values()})
    bars = progress or (lambda label, total: lambda n: None)
    advances: dict[str, Callable[[int], None]] = {}

    def advance_of(stage: Stage) -> Callable[[int], None]:
        """One bar per stage, however many waves compute it."""
        if stage.group not in advances:
            advances[stage.group] = bars(stage.label, len(walk.examples))
        return advances[stage.group]

    def compute(
        stage: Stage, on_result: Callable[[list[int], CallRecord | Failure], None] | None = None
    ) -> dict[int, CallRecord | Failure]:
        if on_expert_keys is not None and stage.is_expert:
            on_expert_keys(stage.component.key(), stage.resolved())
        lazy = LazyComponent(stage.component, stats[stage.component.key()])
        try:
            return run_stage(
                lazy,
                stage.items,
                store,
                retry_failures=mode,
                advance=advance_of(stage),
                derived_failure=stage.derived_failure,
                load_failure="raise",
                cache_only=cache_only,
                devices=devices,
                on_result=on_result,
            )
        finally:
            lazy.release()

    waves = None
    if early and not cache_only:

        def preload(component: Component) -> Callable[..., None] | None:
            start = getattr(devices, "preload", None)
            if start is None:
                return None

            def loaded() -> None:
                stats[component.key()].loads += 1

            return start(component, loaded)

        waves = _Waves(walk, early, compute, preload)

    def answer(stage: Stage) -> Answers:
        if waves is None:
            return compute(stage)
        if not stage.is_expert:
            return waves.source(stage)
        done = waves.finished(stage.group)
        rest = [item for item in stage.items if item.index not in done]
        if len(rest) == len(stage.items):
            return compute(stage)
        records: dict[int, CallRecord | Failure] = {i: done[i] for i in done}
        if rest:  # pragma: no cover - the last wave takes every example with a plan
            records.update(compute(replace(stage, items=rest)))
        return records

    walked = drive(walk.stages(stats), answer)
    # a run answers every call: no record is None
    media = cast(dict[str, dict[int, CallRecord | Failure]], walked.media)
    return JobResult(walk.examples, walked.plans, media, stats, walk.components, walked.text)


class _Waves:
    """Start sooner: the expert stages of ``groups`` computed in waves over the examples whose
    source records exist, one thread per expert, while the source stage runs.

    The source stage tells each final record as it lands (``run_stage(on_result=...)``); an
    expert's thread takes the examples that became ready (:meth:`JobWalk.ready`) -- a batch of
    the expert's ``batch_size`` or, once the source is done, the rest -- and computes their
    :meth:`JobWalk.wave` through ``compute``.  When the walk reaches the expert's stage, its
    records are those of the waves (:meth:`finished`).  An error in one thread stops the
    others after their current wave and is raised in the job's thread."""

    def __init__(
        self,
        walk: JobWalk,
        groups: tuple[str, ...],
        compute: Callable[..., dict[int, CallRecord | Failure]],
        preload: Callable[[Component], Callable[..., None] | None] | None = None,
    ):
        self.walk = walk
        #: starts a pre-load of an expert's component while it waits for its first wave
        #: (:meth:`~omnistory_core.engine.replicas.ReplicaRunner.preload`); returns its stop
        self.preload = preload
        self.groups = groups
        self.compute = compute
        self.plans: dict[int, CallRecord | Failure] = {}
        self.source_done = False
        #: the source stage failed: no further wave
        self.stopped = False
        self.errors: list[BaseException] = []
        self.results: dict[str, dict[int, CallRecord | Failure]] = {g: {} for g in groups}
        self._cond = threading.Condition()
        self._threads: list[threading.Thread] = []

    def source(self, stage: Stage) -> Answers:
        """Compute the source stage with the experts' waves running beside it."""
        units = stage.units

        def landed(indices: list[int], record: CallRecord | Failure) -> None:
            split = units.split({i: record for i in indices})  # a group call: per member
            with self._cond:
                self.plans.update({i: r for i, r in split.items() if r is not None})
                self._cond.notify_all()

        self._threads = [
            threading.Thread(target=self._run, args=(g,), name=f"waves-{g}", daemon=True)
            for g in self.groups
        ]
        for thread in self._threads:
            thread.start()
        try:
            records = self.compute(stage, landed)
        except BaseException:
            # the job fails: no wave starts after it (a sweep in this process goes on with
            # its next job), the ones running end first
            with self._cond:
                self.stopped = True
                self._cond.notify_all()
            for thread in self._threads:
                thread.join()
            raise
        with self._cond:
            self.source_done = True
            self._cond.notify_all()
        return records

    def finished(self, group: str) -> dict[int, CallRecord | Failure]:
        """The records the waves of ``group`` made (none when the group has no waves), once
        every wave thread is done; a wave's error is raised here."""
        for thread in self._threads:
            thread.join()
        self._threads = []
        if self.errors:
            raise self.errors[0]
        return self.results.get(group, {})

    def _next(self, group: str, done: set[int]) -> dict[int, CallRecord | Failure] | None:
        """Wait for the next wave of ``group``: the source records of its examples (None: no
        wave is left)."""
        size = max(1, int(getattr(self.walk.components[group], "batch_size", 1) or 1))
        with self._cond:
            while True:
                if self.errors or self.stopped:
                    return None
                ready = [
                    ex.index for ex in self.walk.ready(group, self.plans) if ex.index not in done
                ]
                if ready and (len(ready) >= size or self.source_done):
                    return {i: self.plans[i] for i in ready}
                if self.source_done:
                    return None
                self._cond.wait()

    def _run(self, group: str) -> None:
        done: set[int] = set()
        # the first plans take a while (job start-up, the planner's calls): the model's load,
        # which the first wave needs anyway, goes on meanwhile on a device no stage needs now
        stop = self.preload(self.walk.components[group]) if self.preload else None
        try:
            while (answers := self._next(group, done)) is not None:
                if stop is not None:
                    stop()  # the wave's stage asks for itself from now on
                examples = [ex for ex in self.walk.examples if ex.index in answers]
                records = self.compute(self.walk.wave(group, answers, examples))
                self.results[group].update(records)
                done.update(answers)
        except BaseException as exc:  # noqa: BLE001 - raised in the job's thread
            with self._cond:
                self.errors.append(exc)
                self._cond.notify_all()
        finally:
            if stop is not None:
                stop(wait=True)


def store_for(output_root: str | Path) -> Store:
    return Store(Path(output_root) / "store")
