"""A job's stage graph, written once: the run, the dry run and the sweep's progress view walk it.

A job is one stage of its source (a planner's plans or a backbone's calls) over every example,
then one stage per expert (image, then speech) for each modality the source does not make; an
expert's inputs are plan fields, so its stage is known only once the source's records are.
:meth:`JobWalk.stages` is that graph as a generator: it yields each :class:`Stage` (its group,
component, items, the ``derived_failure`` that says whether an ok record of it is still
unusable) and is sent that stage's records, per example index; it returns the job's
:class:`Walked` plans, narrations and media.  Its drivers:

* :func:`omnistory_core.engine.job.run_job` computes each stage through the store
  (:func:`~omnistory_core.engine.stage.run_stage`);
* :func:`omnistory_core.engine.dryrun.plan_job` answers each stage from the store, read only, and
  prices it: a record still to make is None, and the plan it would give is *symbolic* (each plan
  field names its upstream call, :func:`symbolic_plan_fields`), so an expert call planned on it
  has the key every system sharing that upstream call gives it;
* the sweep's progress view counts the dry run's calls, named by :meth:`Stage.names`.

A :class:`JobWalk` keeps what it derived (the items and keys of a stage, the plan parsed from a
record) for the next walk of the same job: a job that plans its calls for the progress view and
then runs derives each only once, and again only where a record changed in between.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, TypeVar

from omnistory_core.components import Component
from omnistory_core.contract import Failure, Plan, StoryExample
from omnistory_core.engine.stage import (
    CallUnits,
    ComponentStats,
    StageItem,
    call_units,
    item_key,
    split_record,
    unit_of,
)
from omnistory_core.engine.store import CallRecord

__all__ = [
    "PLAN_PATHS",
    "STAGE_MODALITY",
    "Answers",
    "JobWalk",
    "PlanOutcome",
    "Stage",
    "Walked",
    "backbone_outcome",
    "blocked_by",
    "drive",
    "expert_stages",
    "plan_fields_needed",
    "plan_inputs",
    "plan_outcome",
    "plan_record",
    "planner_text",
    "project",
    "source_group",
    "symbolic_key",
    "symbolic_plan_fields",
]

#: which output modality a stage produces
STAGE_MODALITY = {"image": "image", "tts": "speech"}

#: plan input name (what an expert declares in ``reads``) -> plan schema path
PLAN_PATHS: dict[str, str] = {
    "narration": "narration",
    "image_prompt": "image_prompt",
    **{f: f"speech.{f}" for f in ("utterance", "speaker", "emotion", "speed", "pitch", "gender")},
}

#: a stage's records per example index: a record, the failure that blocked the call, or (a dry
#: run) None for a call still to make
Answers = Mapping[int, CallRecord | Failure | None]

T = TypeVar("T")


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


# -- the shape of a system ---------------------------------------------------------------------
def source_group(components: Mapping[str, Component]) -> str:
    """The group that plans: ``backbone`` when the system has one, else ``planner``."""
    return "backbone" if "backbone" in components else "planner"


def expert_stages(components: Mapping[str, Component]) -> dict[str, Component]:
    """The experts of a system by the modality they make (``image``, ``speech``)."""
    return {STAGE_MODALITY[g]: components[g] for g in ("image", "tts") if g in components}


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


def project(component: Component, pool: Mapping[str, Any]) -> dict[str, Any]:
    """Exactly the inputs the component declared: nothing else reaches it."""
    return {name: pool[name] for name in component.reads}


def plan_inputs(plan: Plan) -> dict[str, Any]:
    """A complete plan as the inputs an expert may read."""
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


def symbolic_plan_fields(upstream_key: str) -> dict[str, Any]:
    """Plan fields of an upstream call that is still to make (or whose plan is not looked at):
    values naming the call and the field, so an expert's key built from them is the same in
    every system that shares the upstream call (the dry run's and the progress view's name for
    an expert call)."""
    return {name: {"__upstream_call__": upstream_key, "field": name} for name in PLAN_PATHS}


def symbolic_key(component: Component, pool: Mapping[str, Any], upstream_key: str) -> str:
    """The symbolic key of its call on one example (see :func:`symbolic_plan_fields`)."""
    return item_key(component, project(component, {**pool, **symbolic_plan_fields(upstream_key)}))


# -- one example's plan, from its source record ----------------------------------------------------
def plan_outcome(record: CallRecord | Failure) -> PlanOutcome:
    """A planner's record parsed into its plan (or the failure that leaves it without one)."""
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
    outcome = PlanOutcome(
        raw, parsed.plan, parsed.failure, list(parsed.repairs), record.usage, record.key
    )
    if parsed.plan is not None:
        outcome.fields = plan_inputs(parsed.plan)
    return outcome


def planner_text(outcome: PlanOutcome) -> str | Failure:
    """The narration of a planner's plan, or why there is none."""
    if outcome.plan is None:
        return outcome.failure or Failure("upstream_failed", "no plan")
    if not outcome.plan.narration.strip():
        return Failure("empty_output", "empty narration")
    return outcome.plan.narration


def backbone_outcome(
    record: CallRecord | Failure, backbone: Component, needed: tuple[str, ...]
) -> tuple[PlanOutcome, str | Failure, dict[str, CallRecord | Failure]]:
    """Split one backbone record into the plan fields experts need, the narration and the native
    media, each modality with its own failure."""
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

    text = _backbone_text(out.get("text"), omitted, backbone)
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
    return _backbone_plan(record, out.get("plan"), text, needed), text, native


def _backbone_text(raw: Any, omitted: Mapping[str, Failure], backbone: Component) -> str | Failure:
    if not isinstance(raw, str):
        return omitted.get("text") or Failure(
            "backbone_no_text", f"{backbone.key()} returned no text"
        )
    if not raw.strip():
        return omitted.get("text") or Failure("empty_output", f"{backbone.key()}: empty narration")
    return raw


def _backbone_plan(
    record: CallRecord, raw_plan: Any, text: str | Failure, needed: tuple[str, ...]
) -> PlanOutcome:
    """The plan fields a backbone gave (parsed with the plan parser's repairs) and the narration."""
    from omnistory_core.plan_schema import parse_partial_plan

    partial = parse_partial_plan(raw_plan, needed) if needed else None
    fields = {
        name: partial.values[path]
        for name, path in PLAN_PATHS.items()
        if partial is not None and path in partial.values
    }
    if isinstance(text, str):
        fields["narration"] = text
    return PlanOutcome(
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


def blocked_by(
    component: Component, pool: Mapping[str, Any], outcome: PlanOutcome, text: str | Failure
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


def plan_record(outcome: PlanOutcome) -> dict[str, Any] | None:
    """The plan as the experts saw it: complete (a planner) or the fields a backbone gave."""
    if outcome.plan is not None:
        return outcome.plan.to_dict()
    if not outcome.fields:
        return None
    plan: dict[str, Any] = {}
    for name, value in outcome.fields.items():
        path = PLAN_PATHS[name]
        if path.startswith("speech."):
            plan.setdefault("speech", {})[path.split(".", 1)[1]] = value
        else:
            plan[path] = value
    return plan


# -- the walk --------------------------------------------------------------------------------------
@dataclass
class Stage:
    """One stage of a job: ``component`` (of ``group``: planner, backbone, image or tts) over
    ``items``, one per example (a group-unit component is called once per group of them,
    :func:`~omnistory_core.engine.stage.call_units`).  ``derived_failure`` (source stages) says
    whether an ok record of a call is still unusable downstream (an unparseable plan);
    ``symbolic`` (expert stages) makes each example's inputs as the dry run names a call planned
    on a plan still to make (:meth:`names`; made only when asked for)."""

    group: str
    component: Component
    items: list[StageItem]
    derived_failure: Callable[[CallRecord], bool] | None = None
    symbolic: Callable[[], list[StageItem]] | None = None

    @property
    def is_expert(self) -> bool:
        return self.group in STAGE_MODALITY

    @property
    def label(self) -> str:
        """What the progress bars call it (its last word is the component)."""
        if self.is_expert:
            return f"{STAGE_MODALITY[self.group]:<8} {self.component.key()}"
        return f"{'plans' if self.group == 'planner' else 'backbone'}    {self.component.key()}"

    @cached_property
    def units(self) -> CallUnits:
        """The stage's calls (a group-unit component's: one per group)."""
        return call_units(self.component, self.items)

    @cached_property
    def calls(self) -> dict[int, tuple[str, int | None]]:
        """Per example with a call, the call's key and, for a member of a group call, its
        position in the call."""
        out: dict[int, tuple[str, int | None]] = {}
        for unit in self.units.items:
            if unit.blocked_by is not None:
                continue
            key = unit.key or item_key(self.component, unit.inputs or {})
            members = self.units.members.get(unit.index)
            if members is None:
                out[unit.index] = (key, None)
            else:
                out.update({m: (key, n) for n, m in enumerate(members)})
        return out

    @cached_property
    def outputs(self) -> dict[int, str]:
        """Per example with a call, the name of the output it gets: the call's key, or for a
        member of a group call ``<key>#<position>`` (distinct per member)."""
        return {
            index: key if position is None else f"{key}#{position}"
            for index, (key, position) in self.calls.items()
        }

    def unit_id(self, unit: StageItem) -> int | str:
        """What identifies a call across walks whose plans differ: its example, or the group a
        group-unit component calls it in."""
        if unit_of(self.component) == "group" and unit.group is not None:
            return unit.group
        return unit.index

    def names(self) -> dict[int | str, str]:
        """Per call (:meth:`unit_id`), its symbolic key: what the dry run and the progress view
        call it before its upstream plan is known (:func:`symbolic_key`)."""
        symbolic = call_units(self.component, self.symbolic() if self.symbolic else [])
        return {
            self.unit_id(u): u.key or item_key(self.component, u.inputs or {})
            for u in symbolic.items
        }

    def resolved(self) -> dict[str, str | None]:
        """What each symbolic name (:meth:`names`) turned out to be: the real key of the call, or
        None where every example it was planned for is blocked by its plan."""
        real = {
            self.unit_id(u): u.key or item_key(self.component, u.inputs or {})
            for u in self.units.items
            if u.blocked_by is None
        }
        return {name: real.get(unit) for unit, name in self.names().items()}


@dataclass
class Walked:
    """What a walk of a job found: per example its plan, narration (or why there is none) and,
    per modality, its record (None: a call still to make, in a dry run)."""

    plans: dict[int, PlanOutcome]
    text: dict[int, str | Failure]
    media: dict[str, dict[int, CallRecord | Failure | None]]


def drive(stages: Generator[Stage, Answers, Walked], answer: Callable[[Stage], Answers]) -> Walked:
    """Walk ``stages``, answering each stage with ``answer(stage)``; the walk's result."""
    stage = next(stages)
    while True:
        try:
            stage = stages.send(answer(stage))
        except StopIteration as done:
            return done.value


#: the narration of a plan still to make, as the dry run assumes it (not a failure)
PLANNED_TEXT = "(planned)"


class JobWalk:
    """The stage graph of one job: ``examples`` through ``components`` (groups -> components, as
    :func:`omnistory_core.engine.job.run_job` takes them), with ``pools``, per example index,
    everything a component could read about it
    (:func:`omnistory_core.engine.job.example_inputs`)."""

    def __init__(
        self,
        examples: list[StoryExample],
        components: dict[str, Component],
        pools: Mapping[int, Mapping[str, Any]],
    ):
        self.examples = examples
        self.components = components
        self.pools = pools
        self.group = source_group(components)
        self.source = components[self.group]
        self.needed = plan_fields_needed(expert_stages(components))
        self._made: dict[tuple[Any, ...], tuple[Any, Any]] = {}

    def stages(
        self, stats: Mapping[str, ComponentStats] | None = None
    ) -> Generator[Stage, Answers, Walked]:
        """The job's stages in order; send each one's records (see the module docstring).
        ``stats``: the run's counts, told of every plan the parser refused."""
        source = self._source_stage()
        answers = yield source
        plans, text, native = self._plans(source, answers, stats)
        media: dict[str, dict[int, CallRecord | Failure | None]] = dict(native)
        for group in ("image", "tts"):
            if group in self.components:
                answers = yield self._expert_stage(group, plans, text, source.outputs)
                media[STAGE_MODALITY[group]] = {ex.index: answers[ex.index] for ex in self.examples}
        return Walked(plans, text, media)

    # -- an expert's stage before the source stage is done ---------------------------------------
    def source_stage(self) -> Stage:
        """The job's first stage (the one :meth:`stages` yields first), to run in waves with."""
        return self._source_stage()

    def ready(self, group: str, done: Iterable[int]) -> list[StoryExample]:
        """The examples the expert of ``group`` can be called on once the source records of the
        examples ``done`` exist: each of them, or for a group-unit expert the members of groups
        all of whose examples are done (a group call's key covers every member)."""
        done = set(done)
        if unit_of(self.components[group]) != "group":
            return [ex for ex in self.examples if ex.index in done]
        pending = {self._group_of(ex) for ex in self.examples if ex.index not in done}
        return [ex for ex in self.examples if self._group_of(ex) not in pending]

    def wave(self, group: str, answers: Answers, examples: list[StoryExample]) -> Stage:
        """The stage of the expert of ``group`` over ``examples`` only, from their source records
        ``answers`` (per example index): the items, keys and inputs :meth:`stages` gives those
        examples once the whole source stage is done, so computing a wave now and the rest
        later makes exactly the calls of the full stage (start sooner,
        :func:`omnistory_core.engine.job.run_job`).  No stats are counted here: the full walk
        counts each refused plan once."""
        source = self._source_stage()
        plans, text, _native = self._plans(source, answers, None, examples)
        return self._expert_stage(group, plans, text, source.outputs, examples)

    # -- what is derived once ----------------------------------------------------------------
    def _once(self, slot: tuple[Any, ...], inputs: Any, make: Callable[[], T]) -> T:
        """``make()``, or what it made for ``slot`` before from equal ``inputs``."""
        made = self._made.get(slot)
        if made is not None and made[0] == inputs:
            return made[1]
        value = make()
        self._made[slot] = (inputs, value)
        return value

    def _group_of(self, example: StoryExample) -> str:
        """The group a group-unit component calls an example in: its book."""
        return f"{example.source}/{example.book}"

    def _source_stage(self) -> Stage:
        return self._once(("source",), None, self._make_source_stage)

    def _make_source_stage(self) -> Stage:
        source = self.source
        items = []
        for ex in self.examples:
            inputs = project(source, self.pools[ex.index])
            key = item_key(source, inputs) if unit_of(source) == "item" else None
            items.append(
                StageItem(ex.index, inputs, key=key, group=self._group_of(ex), example=ex.id)
            )
        return Stage(self.group, source, items, derived_failure=self._derived_failure())

    def _derived_failure(self) -> Callable[[CallRecord], bool]:
        """An ok source call whose plan or outputs are unusable (retry_failures=all redoes it)."""

        def item_unusable(record: CallRecord, position: int | None) -> bool:
            outcome, text, native = self._outcome(record, position)
            if self.group == "planner":
                return isinstance(text, Failure)
            return (
                isinstance(text, Failure)
                or any(isinstance(v, Failure) for v in native.values())
                or outcome.failure is not None
                or bool(outcome.problems)
            )

        if unit_of(self.source) == "item":
            return lambda record: item_unusable(record, None)

        def group_unusable(record: CallRecord) -> bool:
            members = record.output.get("items") or []
            split = (split_record(record, n) for n in range(len(members)))
            return any(
                isinstance(r, CallRecord) and item_unusable(r, n) for n, r in enumerate(split)
            )

        return group_unusable

    def _outcome(
        self, record: CallRecord | Failure, position: int | None
    ) -> tuple[PlanOutcome, str | Failure, dict[str, CallRecord | Failure]]:
        """One example's plan, narration and native media from its source record."""

        def make() -> tuple[PlanOutcome, str | Failure, dict[str, CallRecord | Failure]]:
            if self.group == "planner":
                outcome = plan_outcome(record)
                return outcome, planner_text(outcome), {}
            return backbone_outcome(record, self.source, self.needed)

        if isinstance(record, Failure):  # pragma: no cover - a source has no upstream
            return make()
        return self._once(("outcome", record.key, position), record, make)

    # -- the source's records -> plans -----------------------------------------------------------
    def _plans(
        self,
        source: Stage,
        answers: Answers,
        stats: Mapping[str, ComponentStats] | None,
        examples: list[StoryExample] | None = None,
    ) -> tuple[
        dict[int, PlanOutcome],
        dict[int, str | Failure],
        dict[str, dict[int, CallRecord | Failure | None]],
    ]:
        produces: frozenset[str] = getattr(self.source, "produces", frozenset())
        native: dict[str, dict[int, CallRecord | Failure | None]] = {
            m: {} for m in ("image", "speech") if self.group == "backbone" and m in produces
        }
        plans: dict[int, PlanOutcome] = {}
        text: dict[int, str | Failure] = {}
        for ex in self.examples if examples is None else examples:
            record = answers[ex.index]
            key, position = source.calls[ex.index]
            if record is None:  # still to make: assume it succeeds
                fields = symbolic_plan_fields(source.outputs[ex.index])
                plans[ex.index] = PlanOutcome(None, None, None, key=key, fields=fields)
                text[ex.index] = PLANNED_TEXT
                for modality in native:
                    native[modality][ex.index] = None
                continue
            outcome, ex_text, own = self._outcome(record, position)
            plans[ex.index], text[ex.index] = outcome, ex_text
            for modality, value in own.items():
                native[modality][ex.index] = value
            if stats is not None and self._refused(record, outcome):
                stats[self.source.key()].failures += 1
        return plans, text, native

    def _refused(self, record: CallRecord | Failure, outcome: PlanOutcome) -> bool:
        """A planner's ok call whose plan the parser refused (a failure of the call's output)."""
        ok = isinstance(record, CallRecord) and record.status == "ok"
        return self.group == "planner" and ok and outcome.failure is not None

    # -- the experts ---------------------------------------------------------------------------
    def _expert_stage(
        self,
        group: str,
        plans: Mapping[int, PlanOutcome],
        text: Mapping[int, str | Failure],
        upstream: Mapping[int, str],
        examples: list[StoryExample] | None = None,
    ) -> Stage:
        """The stage of the expert of ``group`` on the plans (of ``examples``, default all);
        ``upstream``: per example, the name of the source call's output its plan comes from."""
        examples = self.examples if examples is None else examples
        items = [self._expert_item(group, ex, plans[ex.index], text[ex.index]) for ex in examples]

        def symbolic() -> list[StageItem]:
            return [
                self._symbolic_item(group, ex, upstream[ex.index])
                for ex in examples
                if ex.index in upstream
            ]

        return Stage(group, self.components[group], items, symbolic=symbolic)

    def _expert_item(
        self, group: str, example: StoryExample, plan: PlanOutcome, text: str | Failure
    ) -> StageItem:
        """One example's item of an expert stage: its inputs, plan fields included, or the
        failure that blocks it."""
        component = self.components[group]

        def make() -> StageItem:
            pool = {**self.pools[example.index], **plan.fields}
            blocked = blocked_by(component, pool, plan, text)
            inputs = None if blocked else project(component, pool)
            key = None
            if inputs is not None and unit_of(component) == "item":
                key = item_key(component, inputs)
            return StageItem(
                example.index,
                inputs,
                blocked,
                key=key,
                group=self._group_of(example),
                example=example.id,
            )

        return self._once(("expert", group, example.index), (plan, text), make)

    def _symbolic_item(self, group: str, example: StoryExample, upstream: str) -> StageItem:
        """One example's item of an expert stage as planned on its upstream call ``upstream``
        before that call's plan is known (:func:`symbolic_plan_fields`)."""
        component = self.components[group]

        def make() -> StageItem:
            pool = {**self.pools[example.index], **symbolic_plan_fields(upstream)}
            inputs = project(component, pool)
            key = item_key(component, inputs) if unit_of(component) == "item" else None
            return StageItem(
                example.index, inputs, key=key, group=self._group_of(example), example=example.id
            )

        return self._once(("symbolic", group, example.index), upstream, make)
