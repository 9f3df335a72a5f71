"""Evaluator-major scoring of a whole sweep.

Each metric or judge is loaded once (on its first cache miss) and scores every item of every system
in the run directory.  Items are keyed like any other call (evaluator + version + params + content
hashes of exactly the inputs it reads), so a narration shared by several systems is scored once,
re-running resumes where it stopped, and a fully scored sweep loads no model.  Every (system,
example) gets its rows: a missing output becomes ``missing_output`` rows without any call.

A task with its own ``evaluation`` (:class:`omnistory_core.tasks.Task`; ViStoryBench) hands the
runner its units per scope instead (:func:`evaluate_task`): one per item, per group (story) or per
run (system), each a pool of inputs and the candidate inputs it lacks; every evaluator scores the
units of its declared ``scope`` through the same stages, store and statuses, its rows carrying that
``scope`` (``example_id``: the item id, the group id, ``""`` for the run).

An evaluator that could not answer (see :mod:`omnistory_eval.outcomes`) gives ``error``
rows carrying the cause.  Such outcomes never reach the store — and any an older version stored
are ignored — so the next run computes them again without being asked to.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from omnistory_core.components import Evaluator
from omnistory_core.contract import Failure, StoryExample
from omnistory_core.engine.hashing import MediaHasher
from omnistory_core.engine.job import example_inputs
from omnistory_core.engine.stage import (
    ComponentStats,
    LazyComponent,
    StageDevices,
    StageItem,
    run_stage,
)
from omnistory_core.engine.store import CallRecord, Store
from omnistory_core.jobdir import MANIFEST, JobDir, JobDirError, discover_job_dirs
from omnistory_core.scores import ScoreRow
from omnistory_core.tasks import DEFAULT_TASK
from omnistory_eval.outcomes import record_error_cause

CANDIDATE_MODALITY = {
    "candidate_text": "text",
    "candidate_image": "image",
    "candidate_speech": "speech",
}


class RunDirError(JobDirError):
    """A run directory that cannot be evaluated."""


@dataclass(frozen=True)
class PoolUnit:
    """One unit an evaluator scores: its system, the ``example_id`` its rows carry, its inputs and
    the candidate inputs it lacks (an evaluator reading one of those gets ``missing_output``)."""

    system: str
    example_id: str
    pool: Mapping[str, Any]
    missing: frozenset[str] | set[str] = frozenset()


@dataclass
class EvaluationResult:
    rows: list[ScoreRow]
    stats: dict[str, ComponentStats] = field(default_factory=dict)
    items: dict[str, int] = field(default_factory=dict)  # evaluator -> items needing a score
    #: evaluator -> one record per (system, example): call key, status and the evaluator's detail
    #: (raw judge response, parse status, repairs, transcripts, ...) for auditing
    audit: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


def discover_systems(run_dir: Path) -> list[JobDir]:
    """Complete job directories (with a manifest) below ``run_dir``, or ``run_dir`` itself."""
    return [job for job in discover_job_dirs(run_dir) if job.complete]


@dataclass(frozen=True)
class FoundJob:
    """A job directory as its manifest alone describes it (any task's: the rest of the
    directory is the task's own layout)."""

    path: Path
    manifest: dict[str, Any]

    @property
    def system_id(self) -> str:
        return str(self.manifest.get("system_id") or self.path.name)

    @property
    def task(self) -> str:
        node = self.manifest.get("task")
        name = node.get("name") if isinstance(node, dict) else node
        return str(name or DEFAULT_TASK)

    @property
    def complete(self) -> bool:
        return self.manifest.get("status") == "complete"


def discover_manifests(run_dir: Path) -> list[FoundJob]:
    """The complete job directories of ``run_dir`` (itself, or its children holding a
    ``manifest.json``), read from their manifests only, in path order."""
    import json

    root = Path(run_dir)
    if (root / MANIFEST).is_file():
        paths = [root]
    elif root.is_dir():
        paths = sorted(child for child in root.iterdir() if (child / MANIFEST).is_file())
    else:
        paths = []
    found = []
    for path in paths:
        try:
            manifest = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
        except ValueError as exc:
            raise RunDirError(f"{path / MANIFEST}: not valid JSON: {exc}") from None
        if not isinstance(manifest, dict):
            raise RunDirError(f"{path / MANIFEST}: expected a JSON object")
        job = FoundJob(path, manifest)
        if job.complete:
            found.append(job)
    return found


def example_pool(example: StoryExample, media: MediaHasher) -> dict[str, Any]:
    """The evaluation inputs of one example that every system shares: the current page, the
    book metadata, the conditions and the reference answer (an oracle's pool: evaluators read
    the reference by design)."""
    return example_inputs(example, media, oracle=True)


def candidate_pool(
    job: JobDir, example: StoryExample, media: MediaHasher
) -> tuple[dict[str, Any], set[str]]:
    """All evaluation inputs for one (system, example) and the candidate inputs that are missing.
    (The dry run builds the same pools from a job's plan: :mod:`omnistory_eval.plan`.)"""
    pool = example_pool(example, media)
    missing: set[str] = set()
    for name, modality in CANDIDATE_MODALITY.items():
        path = job.candidate(example.index, modality)
        if path is None:
            missing.add(name)
        elif modality == "text":
            pool[name] = path.read_text(encoding="utf-8")
        else:
            pool[name] = media(path)
    plan = job.plan(example.index)
    if plan is None:
        missing.add("candidate_plan")
    else:
        pool["candidate_plan"] = plan
    return pool, missing


def outcome_error(evaluator: Evaluator, outcome: CallRecord | Failure | None) -> str | None:
    """Why an outcome is an ``error`` (the evaluator did not answer), or None."""
    if outcome is None:
        return None
    if isinstance(outcome, Failure):
        return " ".join(outcome.message.split()) or outcome.category
    cause = record_error_cause(outcome)
    if cause is None and outcome.status == "ok":
        # e.g. an answer awaiting repair
        pending: Callable[[dict[str, Any]], str | None] | None
        pending = getattr(evaluator, "result_error", None)
        cause = pending(outcome.output or {}) if callable(pending) else None
    return cause


def rows_for(
    evaluator: Evaluator,
    system: str,
    example_id: str,
    outcome: CallRecord | Failure | None,
    scope: str = "item",
) -> list[ScoreRow]:
    kind = evaluator.kind
    base: dict[str, Any] = dict(
        system=system,
        example_id=example_id,
        kind=kind,
        track=evaluator.track,
        evaluator=evaluator.name,
        scope=scope,
    )
    if outcome is None:
        return [
            ScoreRow(**base, criterion=c, score=None, status="missing_output")
            for c in evaluator.criteria
        ]
    cause = outcome_error(evaluator, outcome)
    if cause is not None:
        return [
            ScoreRow(**base, criterion=c, score=None, status="error", cause=cause)
            for c in evaluator.criteria
        ]
    assert isinstance(outcome, CallRecord)
    scores = outcome.output.get("scores") or {} if outcome.status == "ok" else {}
    ok = outcome.status == "ok" and outcome.output.get("status", "ok") == "ok"
    rows = []
    for criterion in evaluator.criteria:
        value = scores.get(criterion)
        if ok and value is not None:
            rows.append(ScoreRow(**base, criterion=criterion, score=float(value), status="ok"))
        else:
            rows.append(ScoreRow(**base, criterion=criterion, score=None, status="invalid"))
    return rows


class ResultStore:
    """The store as the evaluation stages see it: results only.

    An infrastructure error is a fact about this run, not about the item: it is not written, and
    one written by an earlier version reads as absent, so the next run computes it again."""

    def __init__(self, store: Store):
        self._store = store

    def __getattr__(self, name: str) -> Any:  # root, lock, put_blob, blob_path ...
        return getattr(self._store, name)

    def get(self, key: str) -> CallRecord | None:
        record = self._store.get(key)
        if record is not None and record_error_cause(record) is not None:
            return None
        return record

    def put(self, record: CallRecord) -> None:
        if record_error_cause(record) is None:
            self._store.put(record)


def evaluate_systems(
    systems: list[JobDir],
    examples: list[StoryExample],
    evaluators: Iterable[Evaluator],
    store: Store,
    *,
    progress: Callable[[str, int], Callable[[int], None]] | None = None,
    retry_failures: bool = False,
    blocked: dict[str, str] | None = None,
    devices: StageDevices | None = None,
    prior: Mapping[str, ComponentStats] | None = None,
) -> EvaluationResult:
    """Score every (system, example) with every evaluator.  ``blocked``: evaluator key -> why it
    cannot run here (the pre-flight's finding): it is not loaded and its items get ``error``
    rows with that cause.  ``devices``: see :func:`score_units`."""
    media = MediaHasher()
    units: list[PoolUnit] = []
    for system in systems:
        for example in examples:
            pool, missing = candidate_pool(system, example, media)
            units.append(PoolUnit(system.system_id, example.id, pool, missing))
    return score_units(
        {"item": units},
        evaluators,
        store,
        progress=progress,
        retry_failures=retry_failures,
        blocked=blocked,
        devices=devices,
        prior=prior,
    )


def evaluate_task(
    evaluation: Any,
    evaluators: Iterable[Evaluator],
    store: Store,
    *,
    progress: Callable[[str, int], Callable[[int], None]] | None = None,
    retry_failures: bool = False,
    blocked: dict[str, str] | None = None,
    devices: StageDevices | None = None,
    prior: Mapping[str, ComponentStats] | None = None,
) -> EvaluationResult:
    """Score the units a task's ``evaluation`` returned (``units``: scope -> units with
    ``system``, ``example_id``, ``pool``, ``missing``), each evaluator those of its scope.
    ``devices``: see :func:`score_units`."""
    return score_units(
        task_units(evaluation),
        evaluators,
        store,
        progress=progress,
        retry_failures=retry_failures,
        blocked=blocked,
        devices=devices,
        prior=prior,
    )


def task_units(evaluation: Any) -> dict[str, list[Any]]:
    """scope -> units of a task's evaluation (a mapping, or an object with ``units``)."""
    units = evaluation.get("units") if isinstance(evaluation, Mapping) else evaluation.units
    return {str(scope): list(found) for scope, found in dict(units or {}).items()}


def unprovided_inputs(
    evaluator: Evaluator, units: Mapping[str, Sequence[Any]]
) -> tuple[str, list[str]] | None:
    """(scope, names) when an evaluator reads inputs the units of its scope do not provide (a
    metric of another task), or when its scope has no units; None when it fits."""
    scope = str(getattr(evaluator, "scope", "item"))
    found = units.get(scope)
    if found is None:
        return scope, list(evaluator.reads)
    provided: set[str] = set()
    for unit in found:
        provided |= set(unit.pool) | set(unit.missing)
    absent = [name for name in evaluator.reads if name not in provided]
    return (scope, absent) if absent and found else None


def score_units(
    units: Mapping[str, Sequence[Any]],
    evaluators: Iterable[Evaluator],
    store: Store,
    *,
    progress: Callable[[str, int], Callable[[int], None]] | None = None,
    retry_failures: bool = False,
    blocked: dict[str, str] | None = None,
    devices: StageDevices | None = None,
    prior: Mapping[str, ComponentStats] | None = None,
) -> EvaluationResult:
    """Every evaluator over the units of its ``scope`` (``units``: scope -> units), evaluator
    major: a unit lacking an input the evaluator reads gets ``missing_output`` rows and no call;
    the others are keyed and computed once each through the store.

    ``devices``: the device runner of ``engine.devices``
    (:func:`omnistory_core.engine.replicas.stage_devices`): the calls of an evaluator that needs
    a GPU then run on replicas spread over the free devices, as generation stages do (a
    tensor-parallel one gets its ``gpus()`` devices per replica), and so does a stage-end pass
    that takes it (the judges' JSON repair model).  Each evaluator is still one stage over the
    whole sweep, so it is loaded at most once per device; the records, and so the rows, are the
    ones this process would have computed.  None: every evaluator in this process.

    ``prior``: per evaluator key, what the sweep's stream computed before this pass
    (:mod:`omnistory_eval.sooner`): its calls found in the store here count as calls, and its
    model loads as loads, so the stats are those of a pass that made them itself."""
    progress = progress or (lambda label, total: lambda n: None)
    blocked = blocked or {}
    # a ResultStore stands in for the Store (get and put filtered, everything else delegated)
    store = cast(Store, store if isinstance(store, ResultStore) else ResultStore(store))
    result = EvaluationResult(rows=[])
    for evaluator in evaluators:
        scope = str(getattr(evaluator, "scope", "item"))
        stats = result.stats.setdefault(evaluator.key(), ComponentStats())
        items, owners = [], []
        for unit in units.get(scope, ()):
            owners.append((unit.system, unit.example_id))
            if set(unit.missing) & set(evaluator.reads):
                items.append(None)
            else:
                items.append({name: unit.pool[name] for name in evaluator.reads})
        stage_items = [StageItem(n, item) for n, item in enumerate(items) if item is not None]
        result.items[evaluator.key()] = len(stage_items)
        if evaluator.key() in blocked:
            why = Failure("unavailable", blocked[evaluator.key()])
            outcomes: dict[int, Any] = {item.index: why for item in stage_items}
        else:
            lazy = LazyComponent(evaluator, stats)
            outcomes = run_stage(
                lazy,
                stage_items,
                store,
                retry_failures=retry_failures,
                advance=progress(f"{evaluator.kind:<6} {evaluator.name}", len(stage_items)),
                devices=devices,
            )
            _report_load_failure(evaluator, outcomes)
            _credit(stats, outcomes, (prior or {}).get(evaluator.key()))
            outcomes = _finalize(evaluator, outcomes, store, devices)
            lazy.release()
        for n, (system_id, example_id) in enumerate(owners):
            outcome = outcomes.get(n)
            result.rows.extend(rows_for(evaluator, system_id, example_id, outcome, scope))
            record = audit_record(system_id, example_id, outcome, outcome_error(evaluator, outcome))
            if scope != "item":  # item records keep the fields they always had
                record["scope"] = scope
            result.audit.setdefault(evaluator.key(), []).append(record)
    return result


def _credit(
    stats: ComponentStats, outcomes: Mapping[int, Any], before: ComponentStats | None
) -> None:
    """Count the calls ``before`` computed that this stage found in the store as calls (one
    per key; the rest of its items stay cache hits), and its loads as loads."""
    if before is None:
        return
    found = {o.key for o in outcomes.values() if isinstance(o, CallRecord)} - stats.computed
    theirs = found & before.computed
    stats.calls += len(theirs)
    stats.cache_hits -= len(theirs)
    stats.loads += before.loads
    stats.computed |= theirs


def _finalize(
    evaluator: Evaluator,
    outcomes: dict[int, Any],
    store: Store,
    devices: StageDevices | None,
) -> dict[int, Any]:
    """The evaluator's stage-end pass (e.g. the judges' JSON repair), when it has one.  The
    device runner is handed on only to a pass that takes ``devices`` (an older third-party
    ``finalize_stage(outcomes, store)`` keeps working, in this process)."""
    finalize: Callable[..., dict[int, Any] | None] | None
    finalize = getattr(evaluator, "finalize_stage", None)
    if not callable(finalize):
        return outcomes
    if devices is not None and _takes_devices(finalize):
        return finalize(outcomes, store, devices=devices) or outcomes
    return finalize(outcomes, store) or outcomes


def _takes_devices(fn: Callable[..., Any]) -> bool:
    import inspect

    try:
        parameters = inspect.signature(fn).parameters
    except (TypeError, ValueError):  # a builtin or C callable: no signature to read
        return False
    return "devices" in parameters or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()
    )


def audit_record(
    system: str,
    example_id: str,
    outcome: CallRecord | Failure | None,
    error: str | None = None,
) -> dict[str, Any]:
    if outcome is None:
        return {"system": system, "example_id": example_id, "status": "missing_output"}
    if isinstance(outcome, Failure):
        return {
            "system": system,
            "example_id": example_id,
            "status": "error",
            "cause": error or outcome.message,
            "failure": outcome.to_dict(),
        }
    output = outcome.output or {}
    status = output.get("status", "ok") if outcome.status == "ok" else "failure"
    record = {
        "system": system,
        "example_id": example_id,
        "call_key": outcome.key,
        "status": "error" if error is not None else status,
        "scores": output.get("scores"),
        "detail": output.get("detail"),
        "failure": outcome.failure,
    }
    if error is not None:
        record["cause"] = error
    return record


def status_counts(rows: Iterable[ScoreRow]) -> dict[str, dict[str, int]]:
    """evaluator key -> rows per status (ok, invalid, error, missing_output)."""
    out: dict[str, dict[str, int]] = {}
    for row in rows:
        counts = out.setdefault(
            f"{row.kind}/{row.evaluator}",
            dict.fromkeys(("ok", "invalid", "error", "missing_output"), 0),
        )
        counts[row.status] = counts.get(row.status, 0) + 1
    return out


def _report_load_failure(evaluator: Evaluator, outcomes: dict[int, Any]) -> None:
    """A model that could not load (e.g. "skipped: <model> not available offline; run the prefetch
    command") leaves its rows ``error``; say so once, loudly, instead of per row."""
    import sys

    for outcome in outcomes.values():
        failure = getattr(outcome, "failure", None) or {}
        message = failure.get("message", "") if isinstance(failure, dict) else ""
        if message.startswith("load failed:"):
            print(
                f"[omnistory] {evaluator.key()}: {message[len('load failed:') :].strip()}"
                " (its rows are 'error' and are recomputed next run; python -m omnistory_core"
                " prefetch"
                f" {evaluator.kind}={evaluator.name})",
                file=sys.stderr,
            )
            return


def merge_rows(existing: Iterable[ScoreRow], new: list[ScoreRow]) -> list[ScoreRow]:
    """Replace the rows of the evaluators just run; keep everything else already in the table."""
    replaced = {(r.kind, r.evaluator) for r in new}
    kept = [r for r in existing if (r.kind, r.evaluator) not in replaced]
    return kept + new
