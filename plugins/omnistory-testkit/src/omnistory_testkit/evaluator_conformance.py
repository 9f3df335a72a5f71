"""``check_component`` for metrics and judges: score a tiny run of built-in systems on the bundled
demo through the evaluation runner and assert the evaluator contract.

The run: the built-in ``template`` planner, ``copy`` image expert and ``noop`` TTS expert over the
first demo examples (every candidate modality present), written as a job directory like a real
sweep's.  The evaluator under test is registered through an in-process pluggy plugin (the same hook
path as an installed plugin), built from its parameters as ``evaluate`` builds it, put through the
same pre-flight, and scores that directory with
:func:`omnistory_eval.runner.evaluate_systems` -- the runner behind
``python -m omnistory_core evaluate``.

What is checked (each one raises :class:`~omnistory_testkit.ConformanceError`, naming the
evaluator, the check and what to change):

``identity``          ``kind`` (``metric``/``judge``), ``name``, ``version``, ``track`` and
                      ``criteria`` are set; the plugin hook accepts the class
``reads``             every declared input is among ``EVALUATION_INPUTS``
``light_import``      importing the class's module imports no heavy library
``outputs``           the pre-flight finds nothing missing; every (system, example) gets one row
                      per criterion with a valid status, none ``error``; ``EvalResult.scores``
                      names exactly the criteria; every score is a finite number inside the
                      declared range, and every criterion is scored on at least one example
``cache``             a second evaluation over the same store computes nothing, loads nothing and
                      gives the same rows
``runtime_params``    changing a runtime parameter keeps every result key (nothing recomputed)
``output_params``     changing any other parameter changes the result key
``deterministic``     the same parameters in a separate store give identical statuses and scores
``failures``          an item whose call raises becomes that example's ``error`` (with its cause)
                      or ``invalid`` rows, never a score; its neighbours keep theirs
``unreadable_input``  a candidate image or speech file that does not decode is ``invalid`` or
                      ``error``, never a score, and does not take its neighbours down (for a
                      judge, which may send the bytes to its model unread, a score is a note;
                      a story- or run-scope unit may be scored on its readable files when its
                      audit detail names the unreadable one)
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omnistory_testkit._common import (
    _POISON,
    ConformanceError,
    ConformanceReport,
    _check_hook_accepts,
    _check_name_and_version,
    _counting,
    _declaration,
    _fail,
    _key_difference,
    _Poison,
    _quiet,
    _values,
    _variations,
    begin_report,
    registry_with,
)

#: the built-in system whose outputs are scored: every candidate modality, offline, deterministic
STANDIN_SYSTEM: dict[str, dict[str, str]] = {
    "planner": {"name": "template"},
    "image": {"name": "copy"},
    "tts": {"name": "noop"},
}


@dataclass
class _Scored:
    """One evaluation of the stand-in run by the evaluator under test."""

    rows: list[Any]  # ScoreRow of the evaluator
    audit: list[dict[str, Any]]  # per (system, example): call key, status, scores, detail
    stats: Any  # ComponentStats
    component: Any
    loads: int


@dataclass
class _Context:
    cls: type
    params: dict[str, Any]
    root: Path
    score_range: tuple[float, float] | None
    #: the run directory the stand-in systems wrote, and how its units are read (per scope)
    run_dir: Path
    read_units: Callable[[Path], dict[str, list[Any]]]
    units: dict[str, list[Any]]

    @property
    def scope(self) -> str:
        return str(getattr(self.cls, "scope", "item"))

    @property
    def scoped(self) -> list[Any]:
        return self.units.get(self.scope, [])


def check_evaluator(
    cls: type,
    params: Mapping[str, Any],
    *,
    examples: int = 2,
    vary: Mapping[str, Any] | None = None,
    score_range: tuple[float, float] | None = None,
    task: Any = None,
) -> ConformanceReport:
    """The evaluator contract (module docstring) for ``cls`` built with ``params``; called by
    :func:`omnistory_testkit.check_component` for a metric or judge.  ``task``: a task with its
    own evaluation (``Task.evaluation``) and harness, whose stand-in jobs over its fixture are
    scored instead of the demo's (its units of the evaluator's ``scope``)."""
    params = dict(params)
    vary = dict(vary or {})
    own = task is not None and task.evaluation is not None
    reads = _task_reads(task) if own else _check_reads
    report, demo = begin_report(cls, examples, _check_identity, reads, load_demo=not own)
    with tempfile.TemporaryDirectory(prefix="omnistory-check-") as tmp:
        root = Path(tmp)
        if own:
            run_dir, read_units = _task_standin_run(task, root)
        else:
            run_dir, read_units = _standin_run(demo, root), _demo_units(demo)
        ctx = _Context(
            cls=cls,
            params=params,
            root=root,
            score_range=_score_range(cls, score_range),
            run_dir=run_dir,
            read_units=read_units,
            units=read_units(run_dir),
        )
        report.examples = len(ctx.scoped)
        first = _evaluate(ctx, params, root / "store-a", check="outputs", preflight=True)
        report.keys = sorted({str(a.get("call_key")) for a in first.audit if a.get("call_key")})
        report.calls["first evaluation"] = first.stats.calls
        _check_outputs(ctx, first, report)
        _check_cache(ctx, first, report)
        _check_runtime_params(ctx, first, vary, report)
        _check_output_params(ctx, first, vary, report)
        _check_deterministic(ctx, first, report)
        _check_failures(ctx, first, report)
        _check_unreadable_input(ctx, first, report)
    return report


# -- the run and its evaluation --------------------------------------------------------------------


def _demo_units(demo: list[Any]) -> Callable[[Path], dict[str, list[Any]]]:
    """The demo run's units, as ``evaluate`` builds them: one per (system, example)."""

    def read(run_dir: Path) -> dict[str, list[Any]]:
        from omnistory_eval.runner import PoolUnit, candidate_pool, discover_systems

        from omnistory_core.engine.hashing import MediaHasher

        media = MediaHasher()
        units = []
        for system in discover_systems(run_dir):
            for example in demo:
                pool, missing = candidate_pool(system, example, media)
                units.append(PoolUnit(system.system_id, example.id, pool, frozenset(missing)))
        return {"item": units}

    return read


def _task_standin_run(task: Any, root: Path) -> tuple[Path, Callable[[Path], dict[str, list]]]:
    """The task's stand-in jobs over its fixture (its harness's), and how their units are read
    (the task's own evaluation, as ``evaluate`` reads them)."""
    from omnistory_eval.runner import task_units

    if task.harness is None:
        raise ConformanceError(
            f"task {task.name} has its own evaluation but no harness (Task.harness): the test kit"
            " cannot make the jobs an evaluator is checked on"
        )
    run_dir = root / "run"
    jobs = [Path(p).relative_to(run_dir) for p in task.harness().standin_run(run_dir)]

    def read(where: Path) -> dict[str, list[Any]]:
        config = {"outputs": None, "dataset": {}}
        return task_units(task.evaluation([where / job for job in jobs], config))

    return run_dir, read


def _task_reads(task: Any) -> Callable[[type, ConformanceReport], None]:
    """The ``reads`` check against the task's declared inputs of the evaluator's scope."""

    def check(cls: type, report: ConformanceReport) -> None:
        reads = getattr(cls, "reads", None)
        if not isinstance(reads, tuple | list) or not all(isinstance(r, str) for r in reads):
            raise _fail(cls, "reads", f"reads must be a tuple of input names, got {reads!r}")
        scope = str(getattr(cls, "scope", "item"))
        allowed = task.readable(cls.kind, scope=scope)
        unknown = [r for r in reads if r not in allowed]
        if unknown:
            raise _fail(
                cls,
                "reads",
                f"{unknown} not in the inputs a {cls.kind} of {scope} scope may read on task"
                f" {task.name}: {', '.join(allowed)} (python -m omnistory_core tasks --inputs"
                f" {task.name})",
            )
        if len(set(reads)) != len(reads) or not reads:
            raise _fail(cls, "reads", f"reads {list(reads)} must be distinct and not empty")
        report.passed.append("reads")

    return check


def _standin_run(demo: list[Any], root: Path) -> Path:
    """The built-in system's job directory over ``demo`` (as a sweep writes it)."""
    from omnistory_core.engine.job import build_component, run_job
    from omnistory_core.engine.outputs import materialize
    from omnistory_core.engine.store import Store
    from omnistory_core.engine.system import resolve_system

    registry = registry_with()
    system = resolve_system({**STANDIN_SYSTEM, "seed": 0}, registry)
    components = {
        group: build_component(registry, group, node, seed=0, allow_oracle=False)
        for group, node in system.specs.items()
    }
    store = Store(root / "generation-store")
    result = run_job(examples=demo, components=components, store=store)
    job = root / "run" / system.system_id
    materialize(job, result, store)
    manifest = {
        "status": "complete",
        "system_id": system.system_id,
        "dataset": {"name": "demo", "limit": len(demo), "fingerprint": "check_component"},
        "store": str(store.root),
    }
    (job / "manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return job.parent


def _build(cls: type, params: Mapping[str, Any], wrap: Any = None, counter: Any = None) -> Any:
    """The evaluator as ``evaluate`` builds it: from the registry, through the plugin hook."""
    from omnistory_core.engine.job import build_component

    runnable = wrap(cls) if wrap else cls
    if counter is not None:
        runnable = _counting(runnable, counter)
    registry = registry_with(runnable)
    return build_component(
        registry, cls.kind, {"name": cls.name, **params}, seed=0, allow_oracle=False
    )


def _evaluate(
    ctx: _Context,
    params: Mapping[str, Any],
    store_dir: Path,
    *,
    check: str,
    wrap: Any = None,
    units: dict[str, list[Any]] | None = None,
    preflight: bool = False,
) -> _Scored:
    from omnistory_eval.runner import score_units

    from omnistory_core.engine.store import Store
    from omnistory_core.errors import ConfigError, PluginError

    cls = ctx.cls
    counter: list[int] = []
    try:
        component = _build(cls, params, wrap, counter)
    except (ConfigError, PluginError, TypeError, ValueError) as exc:
        raise _fail(cls, check, f"the engine refused the evaluator: {exc}") from exc
    if preflight:
        from omnistory_eval.preflight import preflight as run_preflight

        problems = run_preflight([component])
        if problems:
            listed = "; ".join(f"{p.check} {p.target}: {p.detail}" for p in problems)
            raise _fail(
                cls,
                check,
                f"the evaluate pre-flight finds it cannot run here ({listed}); give parameters"
                " that make it run offline (a tiny checkpoint, a FakeServer base_url)",
            )
    try:
        with _quiet("omnistory"):
            result = score_units(units or ctx.units, [component], Store(store_dir))
    except Exception as exc:  # noqa: BLE001 - a crash of the whole evaluation is the finding
        raise _fail(
            cls,
            check,
            f"the evaluation crashed ({type(exc).__name__}: {exc}); one item's problem must be"
            " that item's result (an EvalResult with status 'invalid', or an exception), and"
            " detail must be JSON-able",
        ) from exc
    return _Scored(
        rows=[r for r in result.rows if r.evaluator == cls.name],
        audit=result.audit.get(cls.key(), []),
        stats=result.stats[cls.key()],
        component=component,
        loads=len(counter),
    )


def _example(row_or_audit: Any) -> str:
    if isinstance(row_or_audit, dict):
        return f"{row_or_audit['system']} / demo example {row_or_audit['example_id']}"
    return f"{row_or_audit.system} / demo example {row_or_audit.example_id}"


def _by_cell(rows: list[Any]) -> dict[tuple[str, str, str], tuple[str, float | None]]:
    return {(r.system, r.example_id, r.criterion): (r.status, r.score) for r in rows}


def _same_cell(a: tuple[str, float | None] | None, b: tuple[str, float | None] | None) -> bool:
    """The same row, up to float rounding: an item scored alone (after its batch failed) may
    differ from the batched score in the last bits (a batched matmul sums in another order), and
    that is not a neighbour's failure leaking into it."""
    if a is None or b is None or a[0] != b[0]:
        return a == b
    if a[1] is None or b[1] is None:
        return a[1] == b[1]
    return math.isclose(a[1], b[1], rel_tol=1e-6, abs_tol=1e-9)


# -- the checks ------------------------------------------------------------------------------------


def _check_identity(cls: type, report: ConformanceReport) -> None:
    from omnistory_core.components import Evaluator
    from omnistory_core.plugins import load_plugins

    # a track of any installed task (Omni-StoryBench's text/image/speech/omni, ViStoryBench's ...)
    tracks = sorted({t for task in load_plugins().tasks.values() for t in task.track_names})

    kind = getattr(cls, "kind", None)
    if not (isinstance(cls, type) and issubclass(cls, Evaluator)) or kind not in (
        "metric",
        "judge",
    ):
        raise _fail(
            cls,
            "identity",
            f"{cls!r} (kind {kind!r}) is not a subclass of omnistory_core Metric or Judge",
        )
    _check_name_and_version(cls, kind)
    track = getattr(cls, "track", None)
    if track not in tracks:
        raise _fail(
            cls,
            "identity",
            f"track {track!r} must be one of the installed tasks' tracks, {', '.join(tracks)}"
            " (where the report puts the scores)",
        )
    criteria = getattr(cls, "criteria", None)
    if (
        not isinstance(criteria, tuple | list)
        or not criteria
        or not all(isinstance(c, str) and c.strip() for c in criteria)
        or len(set(criteria)) != len(criteria)
    ):
        raise _fail(
            cls,
            "identity",
            f"criteria {criteria!r} must be a non-empty tuple of distinct names (the keys of"
            " EvalResult.scores, one scores.jsonl row each)",
        )
    _check_hook_accepts(cls, report)


def _check_reads(cls: type, report: ConformanceReport) -> None:
    from omnistory_core.components import EVALUATION_INPUTS

    reads = getattr(cls, "reads", None)
    if not isinstance(reads, tuple | list) or not all(isinstance(r, str) for r in reads):
        raise _fail(cls, "reads", f"reads must be a tuple of input names, got {reads!r}")
    unknown = [r for r in reads if r not in EVALUATION_INPUTS]
    if unknown:
        raise _fail(
            cls,
            "reads",
            f"{unknown} not in the inputs a {cls.kind} may read: {', '.join(EVALUATION_INPUTS)}",
        )
    if len(set(reads)) != len(reads):
        raise _fail(cls, "reads", f"duplicate names in reads {list(reads)}")
    if not reads:
        raise _fail(cls, "reads", "reads is empty: an evaluator reads at least one input")
    report.passed.append("reads")


def _score_range(cls: type, given: tuple[float, float] | None) -> tuple[float, float] | None:
    declared = given if given is not None else getattr(cls, "score_range", None)
    if declared is None and getattr(cls, "kind", None) == "judge":
        from omnistory_eval.judges.rubric import SCORE_MAX, SCORE_MIN

        declared = (SCORE_MIN, SCORE_MAX)
    if declared is None:
        return None
    low, high = (float(v) for v in declared)
    if not low <= high:
        raise ValueError(f"score_range {declared!r}: low must not exceed high")
    return low, high


def _check_outputs(ctx: _Context, run: _Scored, report: ConformanceReport) -> None:
    cls = ctx.cls
    criteria = tuple(cls.criteria)
    expected = len(ctx.scoped) * len(criteria)
    if len(run.rows) != expected:
        raise _fail(
            cls,
            "outputs",
            f"{len(run.rows)} scores rows for {len(ctx.scoped)} {ctx.scope} units x"
            f" {len(criteria)} criteria ({expected} expected)",
        )
    for row in run.rows:
        if row.kind != cls.kind or row.track != cls.track:
            raise _fail(
                cls, "outputs", f"{_example(row)}: row of kind/track {row.kind}/{row.track}"
            )
        if row.status == "missing_output":
            raise _fail(
                cls,
                "outputs",
                f"{_example(row)}: missing_output although the built-in system made every"
                f" candidate; check reads {list(cls.reads)}",
            )
        if row.status == "error":
            raise _fail(
                cls,
                "outputs",
                f"{_example(row)}: the evaluator could not answer ({row.cause}); check_component"
                " needs parameters that make it run offline (a tiny checkpoint, a FakeServer"
                " base_url), and run_batch must return one EvalResult per item",
            )
    for record in run.audit:
        status = record.get("status")
        where = _example(record)
        if status not in ("ok", "invalid"):
            raise _fail(
                cls,
                "outputs",
                f"{where}: EvalResult.status {status!r}; use 'ok', 'invalid' (the answer or the"
                " input is unusable) or 'error' (the evaluator could not answer)",
            )
        scores = record.get("scores")
        if not isinstance(scores, dict):
            raise _fail(cls, "outputs", f"{where}: EvalResult.scores is {scores!r}, not a dict")
        extra = sorted(set(scores) - set(criteria))
        missing = sorted(set(criteria) - set(scores))
        if extra or missing:
            raise _fail(
                cls,
                "outputs",
                f"{where}: EvalResult.scores keys {sorted(scores)} are not the criteria"
                f" {list(criteria)} (extra: {extra}, missing: {missing}); give every criterion,"
                " None where it cannot be scored",
            )
    low_high = ctx.score_range
    scored: set[str] = set()
    for row in run.rows:
        if row.status != "ok":
            report.notes.append(f"{_example(row)}: {row.criterion} is {row.status}")
            continue
        value = row.score
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            raise _fail(
                cls,
                "outputs",
                f"{_example(row)}: {row.criterion} = {value!r} is not a finite number; a score"
                " that cannot be given is None with status 'invalid'",
            )
        if low_high is not None and not low_high[0] <= value <= low_high[1]:
            raise _fail(
                cls,
                "outputs",
                f"{_example(row)}: {row.criterion} = {value!r} is outside the declared range"
                f" {low_high[0]:g} to {low_high[1]:g}",
            )
        scored.add(row.criterion)
    unscored = [c for c in criteria if c not in scored]
    if unscored:
        detail = next((a.get("detail") for a in run.audit if a.get("status") != "ok"), None)
        raise _fail(
            cls,
            "outputs",
            f"no demo example got a score for {unscored} (every row invalid; first detail:"
            f" {str(detail)[:200]}); check_component needs parameters with which it scores",
        )
    if low_high is None:
        report.skipped["outputs.score_range"] = (
            "no score_range declared (a class attribute or check_component(score_range=...))"
        )
    report.passed.append("outputs")


def _check_cache(ctx: _Context, first: _Scored, report: ConformanceReport) -> None:
    cls = ctx.cls
    again = _evaluate(ctx, ctx.params, ctx.root / "store-a", check="cache")
    report.calls["second evaluation, same store"] = again.stats.calls
    if again.stats.calls:
        raise _fail(
            cls,
            "cache",
            f"a second evaluation over the same store computed {again.stats.calls} of"
            f" {len(first.audit)} items again: its result keys are not stable across runs"
            f"{_key_difference(first.component, again.component)}; output_params() must depend"
            " on the parameters only",
        )
    if again.loads or again.stats.loads:
        raise _fail(
            cls,
            "cache",
            f"load() ran {max(again.loads, again.stats.loads)} time(s) during a fully cached"
            " evaluation: load weights and clients in load(), which the runner calls only on a"
            " cache miss, never in __init__",
        )
    if _by_cell(again.rows) != _by_cell(first.rows):
        raise _fail(cls, "cache", "the rows read back from the store differ from the first ones")
    report.passed.append("cache")


def _builder(ctx: _Context) -> Any:
    return lambda params: _build(ctx.cls, params)


def _check_runtime_params(ctx: _Context, first: _Scored, vary: Mapping[str, Any], report) -> None:
    cls = ctx.cls
    runtime = [p for p in getattr(cls, "runtime_params", ()) if p != "batch_size"]
    if not runtime:
        report.skipped["runtime_params"] = "the evaluator declares no runtime parameters"
        return
    values = _values(cls, ctx.params, first.component)
    changed = _variations(
        cls, ctx.params, runtime, values, vary, "runtime_params", report, build=_builder(ctx)
    )
    if not changed:
        report.skipped["runtime_params"] = "no runtime parameter could be varied"
        return
    run = _evaluate(ctx, {**ctx.params, **changed}, ctx.root / "store-a", check="runtime_params")
    if run.stats.calls:
        raise _fail(
            cls,
            "runtime_params",
            f"changing runtime parameter(s) {changed} changed the result keys ({run.stats.calls}"
            f" items computed again){_key_difference(first.component, run.component)}; a"
            " runtime parameter must stay out of output_params()",
        )
    if run.loads or run.stats.loads:
        raise _fail(
            cls,
            "runtime_params",
            "load() ran during a fully cached evaluation: load in load(), never in __init__",
        )
    report.passed.append(f"runtime_params ({', '.join(sorted(changed))})")


def _first_item(ctx: _Context) -> dict[str, Any]:
    unit = next(u for u in ctx.scoped if not set(u.missing) & set(ctx.cls.reads))
    return {name: unit.pool[name] for name in ctx.cls.reads}


def _check_output_params(ctx: _Context, first: _Scored, vary: Mapping[str, Any], report) -> None:
    from omnistory_core.engine.stage import item_key

    cls = ctx.cls
    item = _first_item(ctx)
    base_key = item_key(first.component, item)
    runtime = set(getattr(cls, "runtime_params", ())) | {"batch_size"}
    values = _values(cls, ctx.params, first.component)
    keyed = set(first.component.output_params()) | {
        name for name, p in _declaration(cls).items() if not p.runtime
    }
    names = sorted(k for k in values if k not in runtime and (k in keyed or k in vary))
    for name in sorted(set(values) - runtime - set(names)):
        report.skipped[f"output_params.{name}"] = (
            "not in output_params() with these parameters: the evaluator says it changes nothing"
        )
    changed = _variations(
        cls, ctx.params, names, values, vary, "output_params", report, build=_builder(ctx)
    )
    for name, other in changed.items():
        component = _build(cls, {**ctx.params, name: other})
        if item_key(component, item) == base_key:
            raise _fail(
                cls,
                "output_params",
                f"changing {name} from {values[name]!r} to {other!r} keeps the result key, so an"
                " evaluation with the new value would reuse scores made with the old one;"
                " declare it runtime only if it cannot change scores",
            )
    if not changed:
        report.skipped["output_params"] = "no output parameter could be varied"
        return
    report.passed.append(f"output_params ({', '.join(sorted(changed))})")


def _check_deterministic(ctx: _Context, first: _Scored, report: ConformanceReport) -> None:
    other = _evaluate(ctx, ctx.params, ctx.root / "store-b", check="deterministic")
    a, b = _by_cell(first.rows), _by_cell(other.rows)
    for cell in sorted(a):
        if a[cell] != b.get(cell):
            system, example, criterion = cell
            raise _fail(
                ctx.cls,
                "deterministic",
                f"{system} / demo example {example}: {criterion} was {a[cell]} then"
                f" {b.get(cell)} with the same parameters in a separate store; seed every random"
                " generator from self.params['seed'] (and the inputs), so a rerun reproduces the"
                " scores",
            )
    report.passed.append("deterministic")


def _mentions(record: dict[str, Any], needle: str) -> bool:
    return needle in json.dumps(record, default=str)


def _check_neighbours(ctx: _Context, first: _Scored, run: _Scored, hit: set[str], check: str):
    """Every example other than ``hit`` keeps the rows of the first evaluation."""
    before = _by_cell(first.rows)
    for cell, value in sorted(_by_cell(run.rows).items()):
        if cell[1] in hit:
            continue
        if not _same_cell(before.get(cell), value):
            system, example, criterion = cell
            raise _fail(
                ctx.cls,
                check,
                f"one example's failure changed its neighbour {system} / demo example {example}:"
                f" {criterion} was {before.get(cell)}, now {value} (return one result per item;"
                " the runner retries a failed batch item by item)",
            )


def _check_failed_rows(
    ctx: _Context,
    run: _Scored,
    example: str,
    check: str,
    what: str,
    notes: list[str] | None = None,
) -> None:
    """The rows of the failed example: ``invalid`` or ``error`` with its cause, never a score
    (with ``notes``, a score is noted there instead of failing the check)."""
    for row in run.rows:
        if row.example_id != example:
            continue
        if row.status == "ok" and notes is not None:
            notes.append(f"{_example(row)}: {what}, and {row.criterion} = {row.score!r}")
            continue
        if row.status == "ok":
            raise _fail(
                ctx.cls,
                check,
                f"{what}, yet {_example(row)} has the score {row.criterion} = {row.score!r}: an"
                " item that fails must come back as an exception or an EvalResult with status"
                " 'invalid' (scores None), never as a placeholder score",
            )
        if row.status == "error" and not (row.cause or "").strip():
            raise _fail(ctx.cls, check, f"{_example(row)}: an error row without its cause")
        if row.status not in ("invalid", "error"):
            raise _fail(ctx.cls, check, f"{_example(row)}: {what}, but its row is {row.status}")


def _check_failures(ctx: _Context, first: _Scored, report: ConformanceReport) -> None:
    from omnistory_core.components import Component

    cls = ctx.cls
    if len(ctx.scoped) < 2:
        report.skipped["failures"] = f"needs two {ctx.scope} units (examples >= 2)"
        return
    methods = ["run_one", "run_batch"] if cls.run_one is not Component.run_one else ["run_batch"]
    for n, method in enumerate(methods):
        poison = _Poison(method)
        run = _evaluate(ctx, ctx.params, ctx.root / f"store-c{n}", check="failures", wrap=poison)
        if poison.fired:
            break
    else:
        report.skipped["failures"] = "the evaluator was never called with a poisoned item"
        return
    what = f"{method}() raised for this example's item"
    hit = {a["example_id"] for a in run.audit if _mentions(a, _POISON)}
    if not hit:
        # the exception vanished: find the example whose rows changed, or say none did
        before = _by_cell(first.rows)
        changed = {c[1] for c, v in _by_cell(run.rows).items() if not _same_cell(before.get(c), v)}
        if changed:
            example = sorted(changed)[0]
            raise _fail(
                cls,
                "failures",
                f"{method}() raised for one item, and demo example {example}'s rows changed"
                " without its error in the row's cause or the audit detail; keep the exception"
                " (or its message in EvalResult.detail)",
            )
        raise _fail(
            cls,
            "failures",
            f"{method}() raised for one item but no row or audit record shows it: every example"
            " kept its score; an item that fails must never come back as a placeholder score",
        )
    if len(hit) != 1:
        raise _fail(
            cls,
            "failures",
            f"{method}() raised for one item but {len(hit)} examples carry its error: one"
            " item's failure must not be copied to the others",
        )
    (example,) = hit
    _check_failed_rows(ctx, run, example, "failures", what)
    _check_neighbours(ctx, first, run, hit, "failures")
    report.passed.append(f"failures (through {method})")


def _media_files(value: Any, inside: Path) -> list[Path]:
    """The files of the Media in ``value`` (at any depth) that lie under ``inside``: a system's
    outputs, not the dataset's files."""
    found: list[Path] = []
    path = getattr(value, "path", None)
    if isinstance(path, str) and getattr(value, "sha256", None):
        # not resolved: a job's output may be a link into the store, outside the run
        if Path(os.path.abspath(path)).is_relative_to(Path(os.path.abspath(inside))):
            found.append(Path(path))
    elif isinstance(value, Mapping):
        for item in value.values():
            found += _media_files(item, inside)
    elif isinstance(value, list | tuple):
        for item in value:
            found += _media_files(item, inside)
    return found


def _reported(run: _Scored, example: str, name: str) -> bool:
    """Whether the audit record of ``example`` names the file ``name`` (its detail says what it
    could not read)."""
    return any(
        a.get("example_id") == example and name in json.dumps(a, default=str) for a in run.audit
    )


def _check_unreadable_input(ctx: _Context, first: _Scored, report: ConformanceReport) -> None:
    cls = ctx.cls
    corrupt_dir = ctx.root / "run-corrupt"
    shutil.copytree(ctx.run_dir, corrupt_dir)
    units = ctx.read_units(corrupt_dir)
    target: tuple[Any, str, Path] | None = None
    for unit in units.get(ctx.scope, []):
        for name in cls.reads:
            files = [f for f in _media_files(unit.pool.get(name), corrupt_dir) if f.is_file()]
            files = [f for f in files if f.suffix.lower() in (".png", ".jpg", ".jpeg", ".wav")]
            if files:
                target = (unit, name, files[0])
                break
        if target is not None:
            break
    if target is None:
        report.skipped["unreadable_input"] = "the evaluator reads no candidate image or speech"
        return
    unit, name, path = target
    os.unlink(path)  # the copy may be a link to the store's blob: replace, never write through
    path.write_bytes(b"not an image or a sound")
    units = ctx.read_units(corrupt_dir)  # read again: the inputs' hashes are the files' now
    what = f"its {name} ({path.name}) does not decode"
    run = _evaluate(ctx, ctx.params, ctx.root / "store-a", check="unreadable_input", units=units)
    # every unit that reads the file (a run's split and its lite split may share it)
    hit = {
        u.example_id
        for u in units.get(ctx.scope, [])
        if any(path in _media_files(u.pool.get(n), corrupt_dir) for n in cls.reads)
    }
    # a judge may hand the file's bytes to its model unread: then the server's answer decides (a
    # real API rejects it, an 'invalid' row; a FakeServer answers anything), so a score is a note
    notes = report.notes if cls.kind == "judge" else None
    for example in sorted(hit):
        scored = any(r.example_id == example and r.status == "ok" for r in run.rows)
        if scored and ctx.scope != "item" and _reported(run, example, path.name):
            # a story or a run of many files may be scored on the readable ones, provided the
            # unreadable one is said (the official means skip what they cannot read): a note
            report.notes.append(f"{example}: scored without {path.name}, which it reports")
        else:
            _check_failed_rows(ctx, run, example, "unreadable_input", what, notes)
    _check_neighbours(ctx, first, run, hit, "unreadable_input")
    report.passed.append(f"unreadable_input ({name})")


__all__ = ["STANDIN_SYSTEM", "check_evaluator"]
