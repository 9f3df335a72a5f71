"""The end-of-sweep evaluation as a dry run (``engine.dry_run=true``) plans it: nothing is scored,
loaded or asked over the network.

The evaluation (:func:`omnistory_eval.runner.evaluate_systems`) is evaluator-major:
each metric and judge scores every distinct item of every system of the sweep directory once, an
item keyed by :func:`~omnistory_core.engine.stage.item_key` over exactly the inputs the evaluator
reads.  Those are the system's candidate outputs, as its job directory holds them
(``generated.txt`` read back as text, the image and the speech by content hash, the plan of
``plans.jsonl``), and the example's own fields (current page, metadata, conditions, reference;
:func:`~omnistory_eval.runner.example_pool`).  The dry run builds the same items from
each job's plan (``candidates`` in its ``dry_run.json``, see
:func:`omnistory_core.engine.dryrun.plan_job`):

* an output whose generation record is stored and usable is known, so its items have their real
  keys; a stored failure, or a modality a failed plan blocks, is a missing output: a
  ``missing_output`` row and no evaluator call;
* an output still to generate stands for itself as ``{"__upstream_call__": <its call key>,
  "modality": ...}``: two systems that share that generation call share the evaluator item, which
  is counted once, as the run dedupes it.  Such an item is never in the store.

The count is therefore exact when every output the evaluators read is already generated.  For
outputs still to generate it assumes, like the generation plan, that every call succeeds, and
also that different generation calls make different outputs: the run scores identical outputs
once whatever made them (``tts=noop`` gives one tone per gender), so there ``calls`` is an upper
bound.  Complete job directories of earlier runs in the same sweep directory are scored by the
evaluation too; they are read exactly as the evaluation reads them.

A task with its own ``evaluation`` (ViStoryBench) is planned from the units that evaluation
gives (:func:`plan_task_evaluation`): each evaluator's units of its scope, keyed as the run keys
them, from outputs already on disk (``evaluate --dry-run``, :func:`print_run_plan`, or the
complete job directories of a sweep's dry run).  A call may make several judge requests: the
task says how many (its evaluation's ``planned_requests``), each row then has ``requests`` and
whether that count is an upper bound; the cost of a priced evaluator comes from its own
``pricing()`` and ``estimate()``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from omnistory_core.components import Media
from omnistory_core.contract import StoryExample
from omnistory_core.engine.dryrun import JOB_FILE, PlanSettings, ReadOnlyStore, component_row
from omnistory_core.engine.hashing import MediaHasher
from omnistory_core.engine.stage import declaration_of, item_key, needs_recompute
from omnistory_core.engine.store import Store
from omnistory_core.errors import ConfigError
from omnistory_core.jobdir import JobDir, JobDirError
from omnistory_core.kit.planning.usage import Pricing, count_tokens, image_tokens, price_of
from omnistory_eval.runner import (
    CANDIDATE_MODALITY,
    ResultStore,
    RunDirError,
    candidate_pool,
    discover_systems,
    example_pool,
)

__all__ = [
    "UPSTREAM",
    "EvaluationPlan",
    "EvaluationPlanError",
    "PlannedSystem",
    "plan_evaluation",
    "plan_sweep_evaluation",
    "plan_task_evaluation",
    "planned_pool",
    "print_run_plan",
    "systems_to_evaluate",
]

#: the key naming the generation call of an output still to make (see the module docstring)
UPSTREAM = "__upstream_call__"
#: candidate input -> the entry of a job's ``candidates`` that gives it
CANDIDATES: dict[str, str] = {**CANDIDATE_MODALITY, "candidate_plan": "plan"}
#: what stands in for an output still to generate when a hosted judge's prompt is counted
STAND_INS = {"candidate_text": "reference_text", "candidate_image": "reference_image"}
#: how each caller asks to score with the other evaluators when some cannot run
COMMAND_PARTIAL = "--allow-partial"  # evaluate --dry-run
SWEEP_PARTIAL = "evaluation.allow_partial=true"  # a sweep's dry run


class EvaluationPlanError(ConfigError):
    """The evaluation cannot start as configured (an unknown evaluator, a bad setting): the
    real evaluation's pre-flight stops on it too."""


@dataclass
class PlannedSystem:
    """One system the evaluation will score: a job of this sweep (``candidates``, from its
    plan) or a complete job directory of an earlier run (``outputs``, read as the evaluation
    reads it)."""

    system: str
    job_dir: Path
    spec: dict[str, Any]
    fingerprint: str | None
    store: str | None
    candidates: dict[int, dict[str, Any]] | None = None
    outputs: JobDir | None = None


@dataclass
class EvaluationPlan:
    """Rows per evaluator (``components`` rows, in evaluation order) and what the table cannot
    say: notes, and what keeps an evaluator from running here."""

    rows: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    cannot_run_here: list[str] = field(default_factory=list)
    systems: int = 0


def _symbolic(call_key: str, modality: str) -> dict[str, str]:
    return {UPSTREAM: call_key, "modality": modality}


def _is_symbolic(value: Any) -> bool:
    return isinstance(value, Mapping) and UPSTREAM in value


def _read_back(text: str) -> str:
    """A narration as the evaluation reads it from ``generated.txt`` (universal newlines)."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def planned_pool(
    example: StoryExample,
    outputs: Mapping[str, Any] | None,
    media: MediaHasher,
    store: Store,
) -> tuple[dict[str, Any], set[str]]:
    """As :func:`~omnistory_eval.runner.candidate_pool`, from one example's entry of a
    job's ``candidates`` instead of its job directory: (inputs, missing candidate inputs)."""
    pool = example_pool(example, media)
    missing: set[str] = set()
    for name, modality in CANDIDATES.items():
        value = (outputs or {}).get(modality)
        if value is None:
            missing.add(name)
        elif "pending" in value:
            pool[name] = _symbolic(str(value["pending"]), modality)
        elif "blob" in value:
            path = store.blob_path(str(value["blob"]), str(value.get("ext", "")))
            pool[name] = Media(path=str(path), sha256=str(value["blob"]))
        elif modality == "text":
            pool[name] = _read_back(str(value["value"]))
        else:
            pool[name] = value["value"]
    return pool, missing


def systems_to_evaluate(sweep_dir: Path, jobs: list[tuple[Path, dict[str, Any]]]) -> list:
    """What the end-of-sweep evaluation will find in ``sweep_dir``: the planned jobs (``(job dir,
    its dry_run.json)``) and every other complete job directory, in the evaluation's order.
    Raises :class:`~omnistory_core.jobdir.JobDirError` as the evaluation would."""
    planned: dict[Path, PlannedSystem] = {}
    for job_dir, job in jobs:
        dataset = job.get("dataset") or {}
        planned[job_dir.resolve()] = PlannedSystem(
            system=str(job.get("system_id")),
            job_dir=job_dir,
            spec=dict(dataset.get("spec") or {}),
            fingerprint=dataset.get("fingerprint"),
            store=job.get("store"),
            candidates={int(c["index"]): c for c in job.get("candidates") or []},
        )
    systems = list(planned.values())
    for found in discover_systems(sweep_dir):
        if found.path.resolve() in planned:
            continue  # rewritten by this sweep
        dataset = found.manifest.get("dataset") or {}
        systems.append(
            PlannedSystem(
                system=found.system_id,
                job_dir=found.path,
                spec={k: v for k, v in dataset.items() if k not in ("n_examples", "fingerprint")},
                fingerprint=dataset.get("fingerprint"),
                store=found.manifest.get("store"),
                outputs=found,
            )
        )
    systems.sort(key=lambda s: s.job_dir)
    names = [s.system for s in systems]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        raise RunDirError(f"{sweep_dir}: several job directories claim system ids {sorted(dupes)}")
    return systems


# -- cost of a hosted judge -------------------------------------------------------------------
def _pricing(evaluator: Any) -> Pricing | None:
    """The price of a hosted API judge's model (``judge.<id>.prices``, else the dry run's
    reference table); None for an evaluator that calls no paid API (its cost is 0)."""
    if not getattr(evaluator, "hosted", False):
        return None
    name = f"{evaluator.kind}.{evaluator.name}"
    model = evaluator.params.get("model")
    if not model:
        return Pricing(None, f"no model set: {name}.model names the hosted model")
    return price_of(str(model), evaluator.params.get("prices"), f"{name}.prices")


def _prompt_tokens(evaluator: Any, inputs: Mapping[str, Any]) -> int | None:
    """Input tokens of one hosted judge request (text: :func:`count_tokens`; image: width x
    height / 750); an output still to generate counts as the reference it is compared with.
    None when unknown (an audio attachment, no stand-in)."""
    from omnistory_eval.judges.render import JudgeInputError, render_prompt

    spec = getattr(evaluator, "spec", None)
    if spec is None:
        return None
    item = dict(inputs)
    for name, value in inputs.items():
        if _is_symbolic(value):
            stand_in = inputs.get(STAND_INS.get(name, ""))
            if stand_in is None:
                return None
            item[name] = stand_in
    try:
        rendered = render_prompt(spec.id, item)
    except JudgeInputError:  # the run records it as invalid before sending anything
        return 0
    tokens = 0
    for message in rendered.messages:
        content = message["content"]
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for part in parts:
            if part.get("type") == "text":
                tokens += count_tokens(str(part["text"]))
            elif part.get("type") == "image":
                try:
                    tokens += image_tokens(Path(part["image"]).read_bytes())
                except OSError:
                    return None
            else:
                return None
    return tokens


def _estimate(evaluator: Any, inputs: Mapping[str, Any], pricing: Pricing) -> dict[str, Any]:
    tokens_out = int(evaluator.params.get("max_new_tokens") or 0)  # an upper bound
    tokens_in = _prompt_tokens(evaluator, inputs)
    estimate: dict[str, Any] = {"input_tokens": tokens_in, "output_tokens": tokens_out}
    if tokens_in is not None and pricing.price is not None:
        estimate["cost_usd"] = pricing.price.cost(tokens_in, tokens_out)
        if evaluator.params.get("batch"):  # a provider batch bills a share of the price
            from omnistory_core.kit.batches import BATCH_DISCOUNT

            estimate["cost_usd"] *= BATCH_DISCOUNT
            estimate["batch"] = True
    return estimate


# -- the plan -----------------------------------------------------------------------------------
def plan_evaluation(
    systems: list[PlannedSystem],
    examples: list[StoryExample],
    evaluators: list[Any],
    store: Store,
    settings: PlanSettings | None = None,
    blocked: Mapping[str, str] | None = None,
) -> EvaluationPlan:
    """The evaluator rows: per evaluator the distinct items still to score (``calls``), those the
    store holds (``cached``), loads, estimates, and ``items`` / ``missing_output`` (the
    (system, example) pairs scored, and those without the outputs the evaluator reads).
    ``blocked``: evaluator key -> why the pre-flight stops it (it gets ``error`` rows, no call)."""
    from omnistory_eval.judges.judge import is_pending

    settings = settings or PlanSettings()
    blocked = blocked or {}
    results = ResultStore(store)  # as the evaluation reads the store: errors are not results
    mode = "none"  # the end-of-sweep evaluation recomputes no stored result (only errors)
    media = MediaHasher()
    pools: dict[tuple[int, int], tuple[dict[str, Any], set[str]]] = {}
    for s, system in enumerate(systems):
        for example in examples:
            if system.outputs is not None:
                pools[(s, example.index)] = candidate_pool(system.outputs, example, media)
            else:
                outputs = (system.candidates or {}).get(example.index)
                pools[(s, example.index)] = planned_pool(example, outputs, media, store)
    plan = EvaluationPlan(systems=len(systems))
    for evaluator in evaluators:
        key = evaluator.key()
        if key in plan.rows:  # listed twice: the second pass finds everything scored
            continue
        pricing = _pricing(evaluator)
        tally = _Tally()  # pending: call key -> made of known outputs only
        awaiting_repair = 0
        entries = (
            (*pools[(s, example.index)], None) for s in range(len(systems)) for example in examples
        )
        for call, inputs, _ in _new_calls(evaluator, entries, key in blocked, tally):
            known = not any(_is_symbolic(v) for v in inputs.values())
            record = results.get(call) if known else None
            if record is not None and not needs_recompute(
                record, mode, declaration=declaration_of(evaluator)
            ):
                tally.cached.add(call)
                awaiting_repair += bool(record.status == "ok" and is_pending(record.output))
                continue
            tally.pending[call] = known
            if pricing is not None:
                tally.estimates[call] = _estimate(evaluator, inputs, pricing)
        cost_note = None
        if pricing is not None and pricing.price is not None:
            cost_note = "no token estimate for audio input (an audio attachment)"
        _add_row(
            plan,
            evaluator,
            tally,
            settings,
            blocked,
            pricing.source if pricing else None,
            cost_note,
            items=tally.items,
            missing_output=tally.missing_output,
            calls_on_outputs_to_generate=sum(1 for known in tally.pending.values() if not known),
        )
        plan.notes.extend(_stage_end_notes(evaluator, len(tally.pending), awaiting_repair))
    return plan


@dataclass
class _Tally:
    """One evaluator's pass over its items, in both plans (Omni-StoryBench's pools, a task's
    units): the distinct calls still to make (call key -> what that plan records per call), the
    calls the store holds, the cost estimates of the calls to make, and the items scored or
    lacking an output the evaluator reads."""

    pending: dict[str, Any] = field(default_factory=dict)
    cached: set[str] = field(default_factory=set)
    estimates: dict[str, dict[str, Any]] = field(default_factory=dict)
    items: int = 0
    missing_output: int = 0


_Unit = TypeVar("_Unit")


def _new_calls(
    evaluator: Any,
    entries: Iterable[tuple[Mapping[str, Any], Collection[str], _Unit]],
    blocked: bool,
    tally: _Tally,
) -> Iterator[tuple[str, dict[str, Any], _Unit]]:
    """Over ``entries`` (inputs, missing candidate inputs, what the caller needs of the item):
    counts the items into ``tally`` and yields ``(call key, inputs, unit)`` once per call not yet
    in ``tally.pending`` or ``tally.cached``; a ``blocked`` evaluator makes no call.  Lazy on
    purpose: the caller files each yielded call under pending or cached before the next item is
    looked at, so that the next occurrence of the same call is skipped, as the run dedupes it."""
    reads = tuple(evaluator.reads)
    for pool, missing, unit in entries:
        if set(missing) & set(reads):
            tally.missing_output += 1
            continue
        tally.items += 1
        if blocked:
            continue
        inputs = {name: pool[name] for name in reads}
        call = item_key(evaluator, inputs)
        if call in tally.pending or call in tally.cached:
            continue
        yield call, inputs, unit


def _add_row(
    plan: EvaluationPlan,
    evaluator: Any,
    tally: _Tally,
    settings: PlanSettings,
    blocked: Mapping[str, str],
    price_source: str | None,
    cost_note: str | None,
    **fields: Any,
) -> dict[str, Any]:
    """The evaluator's ``components`` row from its ``tally``, with ``fields`` after ``stage``,
    filed in ``plan`` (and a blocked evaluator under ``cannot_run_here``); returned so a plan can
    add to it."""
    key = evaluator.key()
    seconds, seconds_source = settings.seconds_per_call(key, getattr(evaluator, "uses_gpu", None))
    entry: dict[str, Any] = {
        "price_source": price_source,
        "seconds_per_call": seconds,
        "seconds_source": seconds_source,
    }
    if cost_note is not None:
        entry["cost_note"] = cost_note
    calls = len(tally.pending)
    per_key = [tally.estimates[k] for k in tally.pending if k in tally.estimates]
    row = component_row(calls, len(tally.cached), 1 if calls else 0, entry, per_key)
    row.update(stage="evaluation", **fields)
    plan.rows[key] = row
    if key in blocked:
        plan.cannot_run_here.append(f"{key}: {blocked[key]} (its items get 'error' rows)")
    return row


def _stage_end_notes(evaluator: Any, calls: int, awaiting_repair: int) -> list[str]:
    """What the stage-end pass after an evaluator's calls may add (the judges' JSON repair):
    it cannot be planned, since it runs only on answers that fail to parse."""
    if not callable(getattr(evaluator, "finalize_stage", None)):
        return []
    key = evaluator.key()
    options = evaluator.params.get("repair") if isinstance(evaluator.params, Mapping) else None
    if "repair" in evaluator.params and not options:
        return []  # repair=false: no pass
    if not options:
        return [f"{key}: its stage-end pass (finalize_stage) cannot be planned; not in the table."]
    from omnistory_eval.judges.specs import REPAIR_SPEC

    options = dict(options) if isinstance(options, Mapping) else {}
    model = options.get("model") or options.get("checkpoint") or REPAIR_SPEC.checkpoint
    return [
        f"{key}: the stage-end JSON repair pass cannot be planned (it runs only on answers that"
        f" fail to parse): at most {calls + awaiting_repair} call(s) of the repair model {model}"
        f" ({options.get('backend') or 'vllm'}; {calls} answer(s) still to get, {awaiting_repair}"
        " stored answer(s) awaiting repair) and 1 load if any; not in the table."
    ]


def plan_task_evaluation(
    evaluation: Any,
    evaluators: list[Any],
    store: Store,
    settings: PlanSettings | None = None,
    blocked: Mapping[str, str] | None = None,
) -> EvaluationPlan:
    """The evaluator rows of a task's own evaluation (its units per scope, from outputs on
    disk): per evaluator the distinct calls still to make and those the store holds, the units
    scored and those lacking an output, the judge requests the calls make (``requests``, with
    ``requests_upper_bound``) and, for an evaluator with a ``pricing()``, the cost its
    ``estimate()`` gives per call."""
    from omnistory_eval.runner import task_units

    settings = settings or PlanSettings()
    blocked = blocked or {}
    results = ResultStore(store)
    units = task_units(evaluation)
    requests_of: Callable[[Any, Any], tuple[int, bool] | None] | None
    requests_of = getattr(evaluation, "planned_requests", None)
    systems = getattr(evaluation, "systems", None) or []
    plan = EvaluationPlan(systems=len(systems))
    for evaluator in evaluators:
        key = evaluator.key()
        if key in plan.rows:
            continue
        scope = str(getattr(evaluator, "scope", "item"))
        try:
            pricing = evaluator.pricing() if callable(getattr(evaluator, "pricing", None)) else None
        except ValueError as exc:  # a malformed price table: the remedy is the setting
            raise EvaluationPlanError(f"{key}: {' '.join(str(exc).split())}") from None
        tally = _Tally()  # pending: call key -> judge requests it makes
        upper_bound = False
        entries = ((unit.pool, unit.missing, unit) for unit in units.get(scope, ()))
        for call, inputs, unit in _new_calls(evaluator, entries, key in blocked, tally):
            record = results.get(call)
            if record is not None and not needs_recompute(
                record, "none", declaration=declaration_of(evaluator)
            ):
                tally.cached.add(call)
                continue
            counted = requests_of(evaluator, unit) if requests_of is not None else None
            if counted is not None:
                tally.pending[call] = int(counted[0])
                upper_bound = upper_bound or bool(counted[1])
            else:
                tally.pending[call] = 0
            if pricing is not None:
                tally.estimates[call] = evaluator.estimate(inputs, pricing, settings.output_tokens)
        cost_note = None
        if pricing is not None and getattr(pricing, "price", None) is None:
            cost_note = str(getattr(pricing, "source", "no price"))
        row = _add_row(
            plan,
            evaluator,
            tally,
            settings,
            blocked,
            getattr(pricing, "source", None) if pricing is not None else None,
            cost_note,
            scope=scope,
            items=tally.items,
            missing_output=tally.missing_output,
        )
        if requests_of is not None and any(tally.pending.values()):
            row["requests"] = sum(tally.pending.values())
            row["requests_upper_bound"] = upper_bound
    describe: Callable[[list[Any], dict[str, Any]], list[str]] | None
    describe = getattr(evaluation, "request_notes", None)
    if callable(describe):
        plan.notes.extend(describe(evaluators, plan.rows))
    return plan


def task_plan_notes(evaluation: Any, plan: EvaluationPlan, environment: list[str]) -> list[str]:
    """The general notes of a task evaluation's plan (what it counts, and how)."""
    systems = getattr(evaluation, "systems", None) or []
    counts = {scope: len(found) for scope, found in dict(evaluation.units).items()}
    notes = [
        f"evaluation rows (metric/..., judge/...): {len(systems)} system(s) read from the"
        " outputs on disk; units per scope: "
        + ", ".join(f"{scope} {n}" for scope, n in counts.items())
        + "; each distinct unit scored once per evaluator and keyed as the evaluation keys it"
        " (calls: units still to score; cached: results the store holds).",
    ]
    if any(r.get("price_source") for r in plan.rows.values()):
        notes.append(
            "evaluation est_cost_usd: each priced evaluator's estimate of its requests (input"
            " tokens counted on the prompts it would send; output tokens: engine.plan"
            ".output_tokens, else its max_tokens, an upper bound)."
        )
    if environment:
        notes.append(_partial_note(COMMAND_PARTIAL))
    return notes


def _partial_note(setting: str) -> str:
    """The note that the pre-flight would stop on the 'cannot run here' lines unless
    ``setting`` (the option that scores with the other evaluators)."""
    return (
        "the evaluation's pre-flight stops on what 'evaluation cannot run here' lists, unless"
        f" {setting} (then those evaluators make no call)."
    )


def print_run_plan(
    run_dir: Path,
    *,
    metrics: list[str],
    judges: list[str],
    overrides: list[str],
    store_path: Path | None = None,
    allow_partial: bool = False,
    task: str | None = None,
    outputs: Path | None = None,
    dataset: dict[str, Any] | None = None,
) -> int:
    """``evaluate --dry-run``: the plan of the evaluation ``evaluate`` would run with the same
    arguments, printed as the sweep's dry run prints its table; nothing is scored, loaded or
    asked over the network.  Returns 2 when the evaluation could not start as configured."""
    import sys

    from omnistory_core.engine.dryrun import add_components, merge_plans, render_plan
    from omnistory_core.errors import ConfigError
    from omnistory_eval.task_runs import run_task

    settings = PlanSettings()
    selected = run_task(run_dir, task, outputs)
    try:
        if selected.evaluation is not None:
            result = _plan_task_run(
                selected,
                run_dir,
                metrics,
                judges,
                overrides,
                store_path,
                allow_partial,
                outputs,
                dataset,
                settings,
            )
        else:
            if outputs is not None:
                raise EvaluationPlanError(
                    f"--outputs: task {selected.name} reads its job directories only"
                )
            result = _plan_job_dirs(
                run_dir, metrics, judges, overrides, store_path, allow_partial, settings
            )
    except ConfigError as exc:
        print(f"omnistory evaluate: error: {exc}", file=sys.stderr)
        return 2
    plan = merge_plans([], settings)
    add_components(plan, result.rows, settings)
    plan["jobs"] = result.systems
    plan["evaluation_cannot_run_here"] = result.cannot_run_here
    plan["notes"] += result.notes
    print(render_plan(plan, title=f"evaluation dry run of {run_dir}"), flush=True)
    return 0


def _plan_task_run(
    task: Any,
    run_dir: Path,
    metrics: list[str],
    judges: list[str],
    overrides: list[str],
    store_path: Path | None,
    allow_partial: bool,
    outputs: Path | None,
    dataset: dict[str, Any] | None,
    settings: PlanSettings,
    planned: list[Path] | None = None,
) -> EvaluationPlan:
    from omnistory_eval.runner import task_units
    from omnistory_eval.task_runs import check_scopes, task_evaluation_of

    evaluation = task_evaluation_of(
        task, run_dir, outputs=outputs, dataset=dataset, planned=planned
    )
    recorded = getattr(evaluation, "store", None)
    store_root = Path(store_path or recorded or run_dir / "store")
    evaluators, blocked, environment, unchecked = _planned_evaluators(
        metrics, judges, overrides, store_root, allow_partial
    )
    check_scopes(task, evaluators, task_units(evaluation))
    result = plan_task_evaluation(
        evaluation, evaluators, ReadOnlyStore(store_root), settings, blocked
    )
    result.cannot_run_here += environment
    result.notes = task_plan_notes(evaluation, result, environment) + unchecked + result.notes
    return result


def _plan_job_dirs(
    run_dir: Path,
    metrics: list[str],
    judges: list[str],
    overrides: list[str],
    store_path: Path | None,
    allow_partial: bool,
    settings: PlanSettings,
) -> EvaluationPlan:
    """The story-continuation pools of the complete job directories of ``run_dir``."""
    from omnistory_core.data.cache import load_examples

    systems = systems_to_evaluate(run_dir, [])
    if not systems:
        raise EvaluationPlanError(f"{run_dir}: no complete job directory (manifest.json) found")
    fingerprints = {s.fingerprint for s in systems}
    if len(fingerprints) > 1:
        raise EvaluationPlanError(
            f"{run_dir}: systems were run on different datasets: {fingerprints}"
        )
    store_root = Path(store_path or systems[0].store or run_dir / "store")
    evaluators, blocked, environment, unchecked = _planned_evaluators(
        metrics, judges, overrides, store_root, allow_partial
    )
    examples, _ = load_examples(systems[0].spec)
    result = plan_evaluation(
        systems, examples, evaluators, ReadOnlyStore(store_root), settings, blocked
    )
    result.cannot_run_here += environment
    result.notes = unchecked + result.notes
    return result


def _planned_evaluators(
    metrics: list[str],
    judges: list[str],
    overrides: list[str],
    store_root: Path,
    allow_partial: bool,
    partial_setting: str = COMMAND_PARTIAL,
) -> tuple[list[Any], dict[str, str], list[str], list[str]]:
    """The evaluators built as the evaluation builds them and their pre-flight without the
    network: (evaluators, blocked, 'cannot run here' lines, a note on what was not checked).
    A bad setting raises :class:`EvaluationPlanError` unless ``allow_partial`` (the error names
    ``partial_setting``, the way to ask for it: the option of ``evaluate`` or the sweep's key)."""
    from omnistory_core.errors import ConfigError, PluginError
    from omnistory_eval.evaluators import build_evaluators
    from omnistory_eval.preflight import NOT_ASKED, NOT_PROBED, causes_by_evaluator, preflight

    try:
        evaluators = build_evaluators(metrics, judges, overrides, store_root)
    except (ConfigError, PluginError, ValueError) as exc:
        raise EvaluationPlanError(" ".join(str(exc).split())) from None
    problems = preflight(evaluators, network=False)
    config = [p for p in problems if p.check == "config"]
    if config and not allow_partial:
        raise EvaluationPlanError(
            "; ".join(f"{p.line()} ({p.remedy})" for p in config)
            + f" (the evaluation's pre-flight stops on this; {partial_setting} scores with the"
            " others)"
        )
    blocked = causes_by_evaluator(config) if allow_partial else {}
    unchecked = [p for p in problems if p.detail in (NOT_PROBED, NOT_ASKED)]
    environment = [p for p in problems if p.check != "config" and p not in unchecked]
    lines = list(dict.fromkeys(f"{p.line()}; {p.remedy}" for p in environment))
    notes = []
    if unchecked:
        notes.append(
            "not checked (a dry run makes no network call): "
            + ", ".join(dict.fromkeys(f"{p.evaluator} {p.check} {p.target}" for p in unchecked))
            + "; the evaluation's pre-flight checks them."
        )
    return evaluators, blocked, lines, notes


def _own_evaluation_task(sweep_dir: Path) -> Any:
    """The task of the complete job directories of ``sweep_dir`` when it brings its own
    evaluation, else None (Omni-StoryBench's pools; an empty sweep directory)."""
    from omnistory_core.plugins import load_plugins
    from omnistory_eval.runner import discover_manifests

    try:
        names = {job.task for job in discover_manifests(sweep_dir)}
    except JobDirError:
        return None
    # the jobs this dry run planned name their task when it is not the core's (ViStoryBench)
    names |= {str(job["task"]) for _, job in _read_jobs(sweep_dir) if job.get("task")}
    if len(names) != 1:
        return None
    try:
        task = load_plugins().task(names.pop())
    except Exception:  # noqa: BLE001 - an unknown task: the evaluation says so when it runs
        return None
    return task if task.evaluation is not None else None


def _read_jobs(sweep_dir: Path) -> list[tuple[Path, dict[str, Any]]]:
    return [
        (path.parent, json.loads(path.read_text("utf-8")))
        for path in sorted(sweep_dir.glob(f"*/{JOB_FILE}"))
    ]


def plan_sweep_evaluation(
    sweep_dir: Path,
    *,
    metrics: list[str],
    judges: list[str],
    overrides: list[str],
    allow_partial: bool = False,
    settings: PlanSettings | None = None,
) -> EvaluationPlan:
    """The evaluation :func:`omnistory_core.run.sweep.finish_sweep` would run at the end of this
    dry-run sweep, planned.  Builds the evaluators as it does (their constructors check every
    setting; nothing is loaded) and runs their pre-flight without the network: an unknown
    evaluator or a bad setting raises :class:`EvaluationPlanError` (unless ``allow_partial``,
    which blocks the evaluator as the evaluation would); a missing package, checkpoint or key is
    listed under ``cannot_run_here``."""
    from omnistory_core.data.cache import load_examples

    settings = settings or PlanSettings()
    plan = EvaluationPlan()
    task = _own_evaluation_task(sweep_dir)
    if task is not None:
        # its jobs' outputs are read from disk: the complete job directories of earlier runs
        from omnistory_core.errors import UserError

        # the jobs this dry run planned: the task reads their plans (the outputs they will make)
        planned = [path for path, job in _read_jobs(sweep_dir) if job.get("task") == task.name]
        try:
            result = _plan_task_run(
                task,
                sweep_dir,
                metrics,
                judges,
                overrides,
                None,
                allow_partial,
                None,
                None,
                settings,
                planned,
            )
        except EvaluationPlanError:
            raise
        except UserError as exc:  # the runs or their dataset: the evaluation would stop on it
            plan.notes.append(f"evaluation: not planned, the evaluation would stop: {exc}")
            return plan
        if planned:
            result.notes.append(
                f"evaluation (task {task.name}): the {len(planned)} job(s) this dry run planned"
                " are scored on the outputs they will make (stored ones by content; one still to"
                " generate is keyed by the call that makes it, assumed to succeed: an upper"
                " bound), other complete job directories of the sweep directory as they are."
            )
        else:
            result.notes.append(
                f"evaluation (task {task.name}): planned over the complete job directories"
                " already in the sweep directory; the outputs of jobs still to run are not in it."
            )
        return result
    try:
        systems = systems_to_evaluate(sweep_dir, _read_jobs(sweep_dir))
    except JobDirError as exc:  # RunDirError included
        plan.notes.append(f"evaluation: not planned, the evaluation would stop: {exc}")
        return plan
    if not systems:
        plan.notes.append("evaluation: no system to evaluate (every job failed).")
        return plan
    fingerprints = {s.fingerprint for s in systems}
    if len(fingerprints) > 1:
        plan.notes.append(
            f"evaluation: not planned, the evaluation would stop: {sweep_dir}: systems were run"
            f" on different datasets: {fingerprints}"
        )
        return plan
    first = systems[0]
    store_root = Path(first.store or sweep_dir / "store")
    evaluators, blocked, environment, unchecked = _planned_evaluators(
        metrics, judges, overrides, store_root, allow_partial, SWEEP_PARTIAL
    )
    examples, _ = load_examples(first.spec)
    result = plan_evaluation(
        systems, examples, evaluators, ReadOnlyStore(store_root), settings, blocked
    )
    result.cannot_run_here += environment
    earlier = sum(1 for s in systems if s.outputs is not None)
    notes = [
        f"evaluation rows (metric/..., judge/...): the end-of-sweep evaluation of {len(systems)}"
        " system(s)"
        + (f" ({earlier} of them complete job directories of earlier runs)" if earlier else "")
        + " x "
        + f"{len(examples)} example(s), each distinct item scored once per evaluator and keyed"
        " as the evaluation keys it. Items of outputs still to generate are keyed by the"
        " generation call that makes them (shared by the systems sharing that call), assuming"
        " every such call succeeds (a failure means a missing_output row and no call) and makes"
        " an output no other call makes (identical outputs of different calls are scored once:"
        " an upper bound there); exact once the outputs are generated.",
    ]
    if any(r.get("price_source") for r in result.rows.values()):
        notes.append(
            "evaluation est_cost_usd (hosted judges): input tokens counted on the prompt the"
            " judge would send (an output still to generate counted as its reference), output"
            " tokens = the judge's max_new_tokens (an upper bound)."
        )
    if environment:
        notes.append(_partial_note(SWEEP_PARTIAL))
    result.notes = notes + unchecked + result.notes
    return result
