"""``check_component(cls, task=NAME)`` for a planner, image expert or backbone of a task with its
own generation (``Task.harness``, :mod:`omnistory_core.kit.harness`): the same contract as on
the Omni-StoryBench demo, checked on the task's bundled fixture through the task's own job path.

The checks (each raises :class:`~omnistory_testkit.ConformanceError` naming the component, the
check and the fix): ``identity``; ``reads`` (within the task's declared inputs for the kind:
``python -m omnistory_core tasks --inputs NAME``); ``light_import``; ``outputs`` (every call
succeeds, and every example ends with the task's outputs, each a file that decodes: a planner's
plan must lead to its image); ``cache`` (a second run over the same store computes and loads
nothing); ``runtime_params`` / ``output_params`` (keys kept / changed, the keys the task's stage
computes, a story-level component's included); ``deterministic`` (the same records in a second,
empty store); ``failures`` (a call that raises becomes a failure record of exactly the examples
it covered, one item or one group, shown in the job's records file; the neighbours are
computed).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from omnistory_testkit._common import (
    _POISON,
    ConformanceError,
    ConformanceReport,
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

#: the output files a task's media kinds are checked as
_DECODERS = {"image": "png", "speech": "wav"}


def check_task_component(
    cls: type,
    task: Any,
    params: Mapping[str, Any],
    *,
    examples: int = 2,
    vary: Mapping[str, Any] | None = None,
    expect_failures: Mapping[str, str] | None = None,
    identity: Callable[[type, ConformanceReport], None],
) -> ConformanceReport:
    """The component contract on ``task``'s fixture (module docstring); ``examples``: how many
    records of each group of the fixture (a ViStoryBench story) to run.  ``expect_failures``
    maps a fixture example id to a part of the failure message the component itself returns for
    it by design (the official method refuses that record); each must fail so, every other
    example must succeed.  ``identity``: the identity check of the component's kind (the
    caller's, so that this module does not import it back)."""
    params = dict(params)
    vary = dict(vary or {})
    harness = task.harness()
    report, _ = begin_report(cls, examples, identity, _reads_of(task), load_demo=False)
    ctx = _Ctx(cls, task, harness, params, examples)
    ctx.expected = dict(expect_failures or {})
    report.examples = len(harness.examples(examples))
    with tempfile.TemporaryDirectory(prefix="omnistory-check-") as tmp:
        root = Path(tmp)
        first = ctx.run(root / "store-a", "outputs")
        report.keys = list(first.keys.values())
        report.calls["first run"] = first.stats.calls
        _check_outputs(ctx, first, report)
        _check_cache(ctx, root, first, report)
        _check_runtime_params(ctx, root, first, vary, report)
        _check_output_params(ctx, first, vary, report)
        _check_deterministic(ctx, root, first, report)
        _check_failures(ctx, root, report)
    return report


class _Ctx:
    """The component under test on its task: builds its system and runs it through the
    harness, counting its loads."""

    def __init__(self, cls: type, task: Any, harness: Any, params: dict, per_group: int):
        self.cls, self.task, self.harness = cls, task, harness
        self.params, self.per_group = params, per_group
        self.kind = str(cls.kind)
        self.loads = 0
        #: example id -> part of the failure message it returns by design
        self.expected: dict[str, str] = {}

    def expected_failure(self, example: str, record: Any) -> bool:
        """Whether ``record`` is the failure the caller declared for ``example``."""
        want = self.expected.get(example)
        return want is not None and not _ok(record) and want in _describe(record)

    def config(self, params: Mapping[str, Any]) -> dict[str, Any]:
        node = {"name": self.cls.name, **params}
        return self.harness.system(self.kind, node, int(params.get("seed", 0)))

    def run(
        self, store_dir: Path, check: str, *, params: Mapping[str, Any] | None = None, wrap=None
    ) -> Any:
        from omnistory_core.errors import ConfigError, PluginError
        from omnistory_core.kit.jobs import Store

        counter: list[int] = []
        runnable = _counting(wrap(self.cls) if wrap else self.cls, counter)
        config = self.config(self.params if params is None else params)
        try:
            registry = registry_with(runnable)
            with _quiet("omnistory"):
                run = self.harness.run(
                    registry, config, self.kind, Store(store_dir), per_group=self.per_group
                )
        except (ConfigError, PluginError) as exc:
            raise _fail(self.cls, check, f"the task refused the component: {exc}") from exc
        except ConformanceError:
            raise
        except Exception as exc:
            raise _fail(
                self.cls,
                check,
                f"the run crashed with {type(exc).__name__}: {exc} (a component's failure must be"
                " data: return a Failure or raise for the item, never take down the run)",
            ) from exc
        self.loads = len(counter)
        return run

    def keys(self, params: Mapping[str, Any]) -> dict[str, str]:
        registry = registry_with(self.cls)
        return self.harness.call_keys(
            registry, self.config(params), self.kind, per_group=self.per_group
        )


def _reads_of(task: Any):
    def check(cls: type, report: ConformanceReport) -> None:
        reads = getattr(cls, "reads", None)
        if not isinstance(reads, tuple | list) or not all(isinstance(r, str) for r in reads):
            raise _fail(cls, "reads", f"reads must be a tuple of input names, got {reads!r}")
        allowed = task.readable(cls.kind, oracle=bool(cls.oracle))
        unknown = [r for r in reads if r not in allowed]
        if unknown:
            raise _fail(
                cls,
                "reads",
                f"{unknown} not in the inputs a {cls.kind} may read on task {task.name}:"
                f" {', '.join(allowed) or 'none'} (python -m omnistory_core tasks --inputs"
                f" {task.name})",
            )
        if len(set(reads)) != len(reads):
            raise _fail(cls, "reads", f"duplicate names in reads {list(reads)}")
        if not reads:
            raise _fail(cls, "reads", "reads is empty: a component reads at least one input")
        report.passed.append("reads")

    return check


def _describe(record: Any) -> str:
    failure = getattr(record, "failure", None)
    if isinstance(failure, dict):
        return f"{failure.get('category')}: {failure.get('message')}"
    return f"{getattr(record, 'category', '?')}: {getattr(record, 'message', record)}"


def _ok(record: Any) -> bool:
    return getattr(record, "status", None) == "ok"


# -- the checks ----------------------------------------------------------------------------------


def _check_outputs(ctx: _Ctx, run: Any, report: ConformanceReport) -> None:
    cls = ctx.cls
    store = run.state["store"] if isinstance(run.state, dict) else None
    for example, record in run.records.items():
        where = f"{ctx.task.name} fixture example {example}"
        if record is None:
            raise _fail(cls, "outputs", f"{where}: no record in the store after the run")
        if ctx.expected_failure(example, record):
            report.notes.append(f"{where} failed as expected: {_describe(record)}")
            continue
        if example in ctx.expected:
            raise _fail(
                cls,
                "outputs",
                f"{where} was expected to fail with {ctx.expected[example]!r} but gave"
                f" {_describe(record) if not _ok(record) else 'an output'}",
            )
        if not _ok(record):
            raise _fail(
                cls,
                "outputs",
                f"{where} failed: {_describe(record)} (check_component needs parameters that"
                " make every fixture example succeed offline)",
            )
    for slot in ctx.task.outputs:
        outputs = run.state.get("outputs", {}) if isinstance(run.state, dict) else {}
        for example, record in (outputs.get(slot.name) or {}).items():
            where = f"{ctx.task.name} fixture example {example}"
            if example in ctx.expected:
                continue
            if not _ok(record):
                raise _fail(
                    cls,
                    "outputs",
                    f"{where} has no {slot.name}: {_describe(record)} (the {cls.kind}'s output"
                    f" must lead to every {slot.name} of the task)",
                )
            _check_blob(cls, store, record.output, _DECODERS.get(slot.media, ""), where)
    report.passed.append("outputs")


def _check_blob(cls: type, store: Any, out: Mapping[str, Any], ext: str, where: str) -> None:
    sha = out.get("blob")
    if not sha or store is None:
        raise _fail(cls, "outputs", f"{where}: no {ext or 'output'} file in the record")
    path = store.blob_path(sha, out.get("ext", ext))
    try:
        if ext == "png":
            from PIL import Image

            with Image.open(path) as img:
                img.verify()
        elif ext == "wav":
            import soundfile as sf

            if sf.info(str(path)).frames <= 0:
                raise ValueError("no samples")
    except Exception as exc:  # noqa: BLE001 - any decoding problem is the finding
        raise _fail(cls, "outputs", f"{where}: the {ext} file does not decode: {exc}") from exc


def _check_cache(ctx: _Ctx, root: Path, first: Any, report: ConformanceReport) -> None:
    again = ctx.run(root / "store-a", "cache")
    report.calls["second run, same store"] = again.stats.calls
    if again.stats.calls:
        raise _fail(
            ctx.cls,
            "cache",
            f"a second run over the same store computed {again.stats.calls} call(s) again: its"
            f" cache keys are not stable across runs"
            f"{_key_difference(first.component, again.component)}; output_params() and the"
            " declared reads must not depend on time, object ids or anything but the parameters",
        )
    if ctx.loads:
        raise _fail(
            ctx.cls,
            "cache",
            f"load() ran {ctx.loads} time(s) during a fully cached run: load weights and clients"
            " in load(), which the engine calls only on a cache miss, never in __init__",
        )
    report.passed.append("cache")


def _check_runtime_params(ctx: _Ctx, root: Path, first: Any, vary, report) -> None:
    cls = ctx.cls
    runtime = [p for p in getattr(cls, "runtime_params", ()) if p != "batch_size"]
    if not runtime:
        report.skipped["runtime_params"] = "the component declares no runtime parameters"
        return
    values = _values(cls, ctx.params, first.component)
    changed = _variations(
        cls, ctx.params, runtime, values, vary, "runtime_params", report, build=_builder(ctx)
    )
    if not changed:
        report.skipped["runtime_params"] = "no runtime parameter could be varied"
        return
    run = ctx.run(root / "store-a", "runtime_params", params={**ctx.params, **changed})
    if run.stats.calls or ctx.loads:
        raise _fail(
            cls,
            "runtime_params",
            f"changing runtime parameter(s) {changed} changed the cache keys ({run.stats.calls}"
            f" calls again){_key_difference(first.component, run.component)}; a runtime"
            " parameter must stay out of output_params()",
        )
    report.passed.append(f"runtime_params ({', '.join(sorted(changed))})")


def _builder(ctx: _Ctx):
    def build(params: Mapping[str, Any]) -> None:
        ctx.keys(params)  # builds the system (parameters checked), calls nothing

    return build


def _check_output_params(ctx: _Ctx, first: Any, vary, report) -> None:
    cls = ctx.cls
    base = ctx.keys(ctx.params)
    runtime = set(getattr(cls, "runtime_params", ())) | {"batch_size"}
    values = _values(cls, ctx.params, first.component)
    keyed = set(first.component.output_params()) | {
        name for name, p in _declaration(cls).items() if not p.runtime
    }
    names = sorted(k for k in values if k not in runtime and (k in keyed or k in vary))
    for name in sorted(set(values) - runtime - set(names)):
        report.skipped[f"output_params.{name}"] = (
            "not in output_params() with these parameters: the component says it changes nothing"
        )
    changed = _variations(
        cls, ctx.params, names, values, vary, "output_params", report, build=_builder(ctx)
    )
    example = next(iter(base))
    for name, other in changed.items():
        if ctx.keys({**ctx.params, name: other})[example] == base[example]:
            raise _fail(
                cls,
                "output_params",
                f"changing {name} from {values[name]!r} to {other!r} keeps the cache key, so a"
                " run with the new value would reuse outputs made with the old one; declare it"
                " runtime only if it cannot change outputs",
            )
    if not changed:
        report.skipped["output_params"] = "no output parameter could be varied"
        return
    report.passed.append(f"output_params ({', '.join(sorted(changed))})")


def _check_deterministic(ctx: _Ctx, root: Path, first: Any, report) -> None:
    other = ctx.run(root / "store-b", "deterministic")
    for example, a in first.records.items():
        b = other.records.get(example)
        same = (
            b is not None
            and a.status == b.status
            and a.output == b.output
            and a.failure == b.failure
        )
        if not same:
            raise _fail(
                ctx.cls,
                "deterministic",
                f"{ctx.task.name} fixture example {example}: the same parameters and seed gave"
                " different results in two runs; seed every random generator from"
                " self.params['seed'] (and the inputs), so a rerun reproduces the outputs",
            )
    report.passed.append("deterministic")


def _check_failures(ctx: _Ctx, root: Path, report: ConformanceReport) -> None:
    from omnistory_core.components import Component

    cls = ctx.cls
    groups = {e.id: e.group for e in ctx.harness.examples(ctx.per_group)}
    if len(groups) < 2:
        report.skipped["failures"] = "needs two fixture examples"
        return
    methods = ["run_one", "run_batch"] if cls.run_one is not Component.run_one else ["run_batch"]
    for n, method in enumerate(methods):
        poison = _Poison(method)
        run = ctx.run(root / f"store-c{n}", "failures", wrap=poison)
        if poison.fired:
            break
    else:
        report.skipped["failures"] = "the component was never called with a poisoned item"
        return
    failed = {e: r for e, r in run.records.items() if r is not None and not _ok(r)}
    poisoned = sorted(e for e, r in failed.items() if _POISON in _describe(r))
    if not poisoned:
        raise _fail(
            cls,
            "failures",
            f"{method}() raised for one call but no failure was recorded"
            f" ({[_describe(r) for r in failed.values()]}): a call that fails must come back as"
            " the exception or a Failure, never as a placeholder output",
        )
    # one call covers one example, or a story-level component's whole group
    story = getattr(cls, "unit", "item") == "group"
    covered = [e for e in groups if groups[e] == groups[poisoned[0]]] if story else poisoned[:1]
    if poisoned != sorted(covered):
        raise _fail(
            cls,
            "failures",
            f"{method}() raised for one call, covering {sorted(covered)}, but {poisoned} failed"
            " with its error: one call's failure must not be copied to the others",
        )
    bad = {
        e: _describe(r)
        for e, r in run.records.items()
        if e not in poisoned and not _ok(r) and not ctx.expected_failure(e, r)
    }
    if bad:
        raise _fail(
            cls,
            "failures",
            f"one call's failure took its neighbours down: {bad} (return one result per item;"
            " the engine retries a failed batch item by item)",
        )
    with _quiet("omnistory"):  # the run's failure summary would only repeat the deliberate one
        rows = ctx.harness.write_job(run, root / "job-c")
    for example in poisoned:
        row = rows.get(example) or {}
        if row.get("status") == "ok" or _POISON not in json.dumps(row):
            raise _fail(cls, "failures", f"the job's records do not show the failure: {row}")
    report.passed.append(f"failures (through {method})")


__all__ = ["check_task_component"]
