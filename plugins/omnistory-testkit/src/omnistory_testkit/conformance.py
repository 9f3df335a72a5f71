"""``check_component``: run a component through the real engine on the bundled demo and assert the
contract every component must keep.

What is checked (each one raises :class:`ConformanceError`, an ``AssertionError``, naming the
component, the check and what to change):

``identity``        ``kind``, ``name`` and ``version`` are set; the plugin hook accepts the class;
                    the plugin's own hook module (``plugin_module``, else the ``omnistory`` entry
                    points of the installed distribution that ships the class) loads and
                    validates as ``load_plugins`` loads it: a misspelt hook name
                    (``register_tts_expert``) is named with a did-you-mean
``reads``           every declared input is in its kind's vocabulary (``omnistory_core.components``)
``light_import``    importing the class's module in a fresh interpreter imports no heavy library
                    (torch, transformers, diffusers, ...) that ``omnistory_core`` itself does not
``outputs``         on the demo examples the component's calls succeed and return its kind's type
                    (plan text, a decodable PNG, a decodable WAV, a ``BackboneOutput`` that makes
                    the modalities in ``produces`` and the plan fields the experts need)
``cache``           ``load()`` runs once, on the first cache miss; a second run over the same store
                    computes nothing and loads nothing
``runtime_params``  changing a runtime parameter keeps every cache key
``output_params``   changing an output parameter (and the seed) changes the cache key
``deterministic``   the same parameters and seed in a separate store give identical records and
                    blobs
``failures``        an item whose call raises becomes a ``Failure`` record (in the store and in
                    ``records.jsonl``), its neighbours are still computed, the run does not crash

The component runs in a complete system: a planner with the built-in ``noop`` image and TTS
experts, an image or TTS expert after the built-in ``template`` planner, a backbone with the
``noop`` expert for each modality it does not make.  The class is registered for the run through a
pluggy plugin made in-process (the same hook path as an installed plugin), so it need not be
installed.

A metric or judge is checked as an evaluator instead (a tiny built-in run scored through the
evaluation runner): see :mod:`omnistory_testkit.evaluator_conformance`.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omnistory_testkit._common import (
    _EVALUATOR_HOOKS,
    _HOOKS,
    _POISON,
    HEAVY_MODULES,
    ConformanceError,
    ConformanceReport,
    _build,
    _check_hook_accepts,
    _check_name_and_version,
    _counting,
    _declaration,
    _fail,
    _key_difference,
    _Poison,
    _quiet,
    _system_config,
    _values,
    _variations,
    begin_report,
    registry_with,
)

_GENERATION_KINDS = tuple(_HOOKS)
_MODALITY_OF_KIND = {"planner": "text", "backbone": "text", "image": "image", "tts": "speech"}
_CACHED_LOAD = (
    "load() ran {n} time(s) during a fully cached run (every item from the store): load weights"
    " and clients in load(), which the engine calls only on a cache miss, never in __init__"
)


@dataclass
class _Run:
    result: Any  # JobResult
    store: Any  # Store
    component: Any  # the instance under test
    loads: int  # load() calls counted during the run (construction included)
    records: dict[int, Any]  # example index -> the component's CallRecord (or blocking Failure)


def check_component(
    cls: type,
    /,
    *,
    task: str | None = None,
    examples: int = 2,
    vary: Mapping[str, Any] | None = None,
    params: Mapping[str, Any] | None = None,
    score_range: tuple[float, float] | None = None,
    plugin_module: Any = None,
    expect_failures: Mapping[str, str] | None = None,
    **kwargs: Any,
) -> ConformanceReport:
    """Run ``cls`` with parameters ``kwargs`` through the engine on the first ``examples`` demo
    examples and assert the component contract (see the module docstring).

    Give parameters that make it run offline: a tiny checkpoint your tests build, the base URL of
    a local :class:`~omnistory_testkit.FakeServer`, ...  ``vary`` maps a parameter to another
    valid value for the cache-key checks (by default numbers and flags are changed, text gets a
    suffix, and anything else is skipped with its reason in the report).  ``params`` passes
    parameters whose names clash with these keywords.  Returns a :class:`ConformanceReport`;
    raises :class:`ConformanceError` on the first violation.

    A metric or judge (``kind`` ``metric``/``judge``) is checked as an evaluator instead: a tiny
    run of built-in systems on the demo is scored through the evaluation runner (see
    :mod:`omnistory_testkit.evaluator_conformance`); ``score_range`` ``(low, high)`` bounds
    its scores (default: the class's ``score_range``, 1-10 for a judge).

    ``plugin_module`` (a module or its dotted name): the plugin's hook module, checked as the
    plugin loader checks it; by default the entry points of the installed distribution that
    ships ``cls`` are (a class defined in a test module has none, and nothing is checked).

    ``task``: the task it is checked on (default: the class's ``task`` attribute, else
    Omni-StoryBench).  On a task with its own generation (``Task.harness``, ViStoryBench) the
    component runs on that task's bundled fixture through the task's job path, ``examples``
    records of each group (story) of it, and ``reads`` is held to the task's declared inputs
    (:mod:`omnistory_testkit.task_conformance`); a metric or judge scores the task's stand-in
    jobs through the task's evaluation.  ``expect_failures`` (such a task only) maps a fixture
    example id to a part of the failure message the component returns for it by design (the
    official method refuses that record, say a shot with nothing to edit): it must fail so,
    and every other example must succeed.
    """
    params = {**dict(params or {}), **kwargs}
    _check_plugin_module(cls, plugin_module)
    on = task_of(cls, task)
    if expect_failures and (getattr(cls, "kind", None) in _EVALUATOR_HOOKS or on.harness is None):
        raise ConformanceError(
            f"check_component({getattr(cls, 'name', cls)}): expect_failures is for a generation"
            f" component on a task that runs its own fixture (task {on.name} here; every example"
            " must succeed)"
        )
    if getattr(cls, "kind", None) in _EVALUATOR_HOOKS:
        from omnistory_testkit.evaluator_conformance import check_evaluator

        report = check_evaluator(
            cls,
            params,
            examples=examples,
            vary=vary or {},
            score_range=score_range,
            task=on if on.evaluation is not None else None,
        )
        report.task = on.name
        return report
    if on.harness is not None:
        from omnistory_testkit.task_conformance import check_task_component

        report = check_task_component(
            cls,
            on,
            params,
            examples=examples,
            vary=vary,
            expect_failures=expect_failures,
            identity=_check_identity,
        )
        report.task = on.name
        return report
    report, demo = begin_report(cls, examples, _check_identity, _check_reads)
    report.task = on.name
    if getattr(cls, "unit", "item") == "group":
        # a book-level component: the first examples of two books, so that one book's call has
        # a neighbour
        demo = _per_book(examples)
        report.examples = len(demo)
    with tempfile.TemporaryDirectory(prefix="omnistory-check-") as tmp:
        root = Path(tmp)
        first = _run(cls, params, demo, root / "store-a")
        report.keys = [getattr(r, "key", "") for r in first.records.values()]
        report.calls["first run"] = first.result.stats[cls.key()].calls
        _check_outputs(cls, first, report)
        _check_cache(cls, params, demo, root, first, report)
        _check_runtime_params(cls, params, demo, root, first, vary or {}, report)
        _check_output_params(cls, params, demo, first, vary or {}, report)
        _check_deterministic(cls, params, demo, root, first, report)
        _check_failures(cls, params, demo, root, report)
    return report


def task_of(cls: type, task: str | None = None) -> Any:
    """The task a component is checked on: ``task``, else its ``task`` attribute, else the
    default (Omni-StoryBench); a task that is not installed is one ``ConformanceError``."""
    from omnistory_core.errors import PluginError
    from omnistory_core.plugins import load_plugins
    from omnistory_core.tasks import DEFAULT_TASK

    name = task or getattr(cls, "task", None) or DEFAULT_TASK
    try:
        return load_plugins().task(str(name))
    except PluginError as exc:
        raise ConformanceError(f"check_component({getattr(cls, 'name', cls)}): {exc}") from exc


# -- the plugin's hook module -------------------------------------------------------------------


def _hook_modules(cls: type, plugin_module: Any) -> list[tuple[str, Any]]:
    """(name, loader) of each hook module to check: ``plugin_module``, else the ``omnistory``
    entry points of the distribution(s) that ship the class's top-level package."""
    import importlib
    import importlib.metadata as md

    from omnistory_core.plugins import ENTRY_POINT_GROUP

    if plugin_module is not None:
        if isinstance(plugin_module, str):
            return [(plugin_module, lambda: importlib.import_module(plugin_module))]
        return [(getattr(plugin_module, "__name__", "plugin_module"), lambda: plugin_module)]
    top = str(getattr(cls, "__module__", "")).split(".")[0]
    dists = set(md.packages_distributions().get(top, []))
    if not dists:
        return []
    return [
        (ep.name, ep.load)
        for ep in md.entry_points(group=ENTRY_POINT_GROUP)
        if ep.dist is not None and ep.dist.name in dists
    ]


def _check_plugin_module(cls: type, plugin_module: Any) -> None:
    """identity: the plugin's hook module loads and validates, as the plugin loader sees it.
    Installed, a module that does not validate is one warning line and the plugin's components
    are simply missing, which its own tests would never notice."""
    import pluggy

    from omnistory_core.plugins import check_plugin_module

    for name, load in _hook_modules(cls, plugin_module):
        try:
            check_plugin_module(load, name)
        except pluggy.PluginValidationError as exc:
            flat = "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())
            raise _fail(
                cls,
                "identity",
                f"the plugin module {name!r} does not validate, so the plugin loader refuses the"
                f" whole plugin: {flat}",
            ) from exc
        except Exception as exc:  # noqa: BLE001 - an import error, a hook that raises: say it
            raise _fail(
                cls,
                "identity",
                f"the plugin module {name!r} cannot be loaded ({type(exc).__name__}: {exc}), so"
                " the plugin loader skips the whole plugin",
            ) from exc


# -- helpers -------------------------------------------------------------------------------------


def _run(
    cls: type,
    params: Mapping[str, Any],
    demo: list[Any],
    store_dir: Path,
    *,
    wrap: Any = None,
    check: str = "outputs",
) -> _Run:
    from omnistory_core.engine.job import run_job
    from omnistory_core.engine.store import Store
    from omnistory_core.errors import ConfigError, PluginError

    counter: list[int] = []
    runnable = _counting(wrap(cls) if wrap else cls, counter)
    seed = int(params.get("seed", 0))
    try:
        registry = registry_with(runnable)
        components = _build(registry, _system_config(cls, params, seed), bool(cls.oracle))
    except (ConfigError, PluginError) as exc:
        raise _fail(cls, check, f"the engine refused the component: {exc}") from exc
    store = Store(store_dir)
    try:
        # every stored record counts as a result here, also a failure the default mode would
        # retry: what is checked is that a complete store is reused, not the retry policy
        result = run_job(examples=demo, components=components, store=store, retry_failures=False)
    except ConfigError as exc:  # the engine's own refusal, e.g. a component that cannot load
        raise _fail(cls, check, f"the engine stopped the run: {exc}") from exc
    except Exception as exc:
        raise _fail(
            cls,
            check,
            f"the run crashed with {type(exc).__name__}: {exc} (a component's failure must be"
            " data: return a Failure or raise for the item, never take down the run)",
        ) from exc
    component = components[_group(cls)]
    records = _component_records(cls, result, component, store, demo)
    return _Run(result, store, component, len(counter), records)


def _book(example: Any) -> str:
    """The group a group-unit component is called on an example in (the engine's: its book)."""
    return f"{example.source}/{example.book}"


def _per_book(examples: int, books: int = 2) -> list[Any]:
    """The first ``examples`` demo examples of each of the first ``books`` books."""
    from omnistory_core.data.demo import load_demo

    out: list[Any] = []
    seen: dict[str, int] = {}
    for example in load_demo(None):
        book = _book(example)
        if book not in seen and len(seen) == books:
            continue
        if seen.get(book, 0) < examples:
            out.append(example)
            seen[book] = seen.get(book, 0) + 1
    return out


def _group(cls: type) -> str:
    """The system group the component under test fills (its kind)."""
    return str(cls.kind)


def _component_records(cls, result, component, store, demo) -> dict[int, Any]:
    """Per example, the component's own call record (or the failure that blocked the call)."""
    from omnistory_core.engine.stage import item_key

    if cls.kind in ("image", "tts"):
        return dict(result.media["image" if cls.kind == "image" else "speech"])
    # the planner or backbone: recompute its keys exactly as the engine did
    out: dict[int, Any] = {}
    for ex, inputs in zip(demo, _inputs(cls, component, result, demo), strict=True):
        out[ex.index] = store.get(item_key(component, inputs))
    return out


def _inputs(cls: type, component: Any, result: Any, demo: list[Any]) -> list[dict[str, Any]]:
    """The inputs the engine handed the component, per example (``job.project`` of the pool)."""
    from omnistory_core.engine.job import MediaHasher, example_inputs, project

    media = MediaHasher()
    items = []
    for ex in demo:
        pool = dict(example_inputs(ex, media, oracle=bool(cls.oracle)))
        if cls.kind in ("image", "tts"):
            pool.update(result.plans[ex.index].fields)
        items.append(project(component, pool))
    return items


def _describe(record: Any) -> str:
    failure = getattr(record, "failure", None)
    if isinstance(failure, dict):
        return f"{failure.get('category')}: {failure.get('message')}"
    return f"{getattr(record, 'category', '?')}: {getattr(record, 'message', record)}"


# -- the checks ----------------------------------------------------------------------------------


def _check_identity(cls: type, report: ConformanceReport) -> None:
    from omnistory_core.components import Component

    if not (isinstance(cls, type) and issubclass(cls, Component)):
        raise _fail(cls, "identity", f"{cls!r} is not a subclass of omnistory_core Component")
    kind = getattr(cls, "kind", None)
    if kind not in _GENERATION_KINDS:
        raise _fail(
            cls,
            "identity",
            f"kind {kind!r}: check_component runs generation components"
            f" ({', '.join(_GENERATION_KINDS)}); subclass Planner, ImageExpert, TTSExpert or"
            " Backbone",
        )
    _check_name_and_version(cls, kind)
    _check_hook_accepts(cls, report)


def _check_reads(cls: type, report: ConformanceReport) -> None:
    from omnistory_core.components import EXAMPLE_INPUTS, PLAN_INPUTS, REFERENCE_INPUTS

    reads = getattr(cls, "reads", None)
    if not isinstance(reads, tuple | list) or not all(isinstance(r, str) for r in reads):
        raise _fail(cls, "reads", f"reads must be a tuple of input names, got {reads!r}")
    allowed = EXAMPLE_INPUTS + (PLAN_INPUTS if cls.kind in ("image", "tts") else ())
    if cls.oracle:
        allowed += REFERENCE_INPUTS
    unknown = [r for r in reads if r not in allowed]
    if unknown:
        hint = (
            " (reference_* inputs only for oracle = True components)"
            if set(unknown) & set(REFERENCE_INPUTS)
            else ""
        )
        raise _fail(
            cls,
            "reads",
            f"{unknown} not in the inputs a {cls.kind} may read: {', '.join(allowed)}{hint}",
        )
    if len(set(reads)) != len(reads):
        raise _fail(cls, "reads", f"duplicate names in reads {list(reads)}")
    if not reads:
        raise _fail(cls, "reads", "reads is empty: a component reads at least one input")
    report.passed.append("reads")


def _check_outputs(cls: type, run: _Run, report: ConformanceReport) -> None:
    from omnistory_core.contract import Failure

    missing: dict[str, list[str]] = {}
    for index, record in sorted(run.records.items()):
        example = next(ex for ex in run.result.examples if ex.index == index)
        where = f"demo example {example.id}"
        if record is None:
            raise _fail(cls, "outputs", f"{where}: no record in the store after the run")
        if isinstance(record, Failure):
            raise _fail(
                cls,
                "outputs",
                f"{where}: never called, blocked upstream ({_describe(record)}); the built-in"
                " template planner's plan should feed it",
            )
        if record.status != "ok":
            raise _fail(
                cls,
                "outputs",
                f"{where} failed: {_describe(record)} (check_component needs parameters that"
                " make every demo example succeed offline)",
            )
        for modality, why in _check_output_value(cls, run, index, record, where).items():
            missing.setdefault(modality, [])
            if why is not None:
                missing[modality].append(why)
    # a backbone may miss a modality on one example (that is data, counted in the failure
    # table), but one it never makes, or whose plan fields never reach the expert, is a bug
    for modality, reasons in missing.items():
        if len(reasons) == len(run.records):
            native = modality in getattr(cls, "produces", ())
            raise _fail(
                cls,
                "outputs",
                f"no demo example has {modality}"
                + (
                    " although the backbone declares it in produces"
                    if native
                    else f"; a backbone without {modality} must return the plan fields for it"
                )
                + f" ({reasons[0]})",
            )
        report.notes.extend(reasons)
    report.passed.append("outputs")


def _check_output_value(
    cls: type, run: _Run, index: int, record: Any, where: str
) -> dict[str, str | None]:
    """Check one ok record; for a backbone, return per modality None (made, or handed to its
    expert) or why not (a per-modality failure of the example, which is data)."""
    from omnistory_core.contract import Failure

    out = record.output
    if cls.kind == "planner":
        if not isinstance(out.get("text"), str):
            raise _fail(cls, "outputs", f"{where}: the planner's text is not a string")
        return {}
    if cls.kind in ("image", "tts"):
        _check_blob(cls, run, out, "png" if cls.kind == "image" else "wav", where)
        return {}
    produces = frozenset(getattr(cls, "produces", ()))
    failures = out.get("failures") or {}
    outcome: dict[str, str | None] = {}
    for modality in ("text", "image", "speech"):
        value = out.get(modality)
        if modality not in produces:
            if value is not None:
                raise _fail(
                    cls,
                    "outputs",
                    f"{where}: BackboneOutput.{modality} is set but {modality!r} is not in"
                    f" produces {sorted(produces)}; declare it or leave it None",
                )
            blocked = run.result.media["image" if modality == "image" else "speech"].get(index)
            outcome[modality] = (
                f"{where}: the {'image' if modality == 'image' else 'tts'} expert could not run"
                f" on the backbone's plan ({blocked.category}: {blocked.message})"
                if isinstance(blocked, Failure)
                else None
            )
            continue
        if modality in failures:
            failure = failures[modality]
            outcome[modality] = f"{where}: {failure.get('category')}: {failure.get('message')}"
            continue
        if modality == "text":
            if not isinstance(value, str) or not value.strip():
                raise _fail(cls, "outputs", f"{where}: an empty narration and no failure for it")
        else:
            _check_blob(cls, run, value or {}, "png" if modality == "image" else "wav", where)
        outcome[modality] = None
    return outcome


def _check_blob(cls: type, run: _Run, out: Mapping[str, Any], ext: str, where: str) -> None:
    sha = out.get("blob")
    if not sha:
        raise _fail(cls, "outputs", f"{where}: no {ext} artifact in the record")
    path = run.store.blob_path(sha, out.get("ext", ext))
    try:
        if ext == "png":
            from PIL import Image

            with Image.open(path) as img:
                img.verify()
        else:
            import soundfile as sf

            info = sf.info(str(path))
            if info.frames <= 0:
                raise ValueError("no samples")
    except Exception as exc:  # noqa: BLE001 - any decoding problem is the finding
        raise _fail(cls, "outputs", f"{where}: the {ext} artifact does not decode: {exc}") from exc


def _check_cache(cls, params, demo, root, first: _Run, report: ConformanceReport) -> None:
    n = len(demo)
    stats = first.result.stats[cls.key()]
    # load() may run more than once on a miss (an idempotent guard in run_batch is fine); what
    # matters is that a run with nothing to compute never reaches it
    again = _run(cls, params, demo, root / "store-a", check="cache")
    again_stats = again.result.stats[cls.key()]
    report.calls["second run, same store"] = again_stats.calls
    if again_stats.calls or again_stats.cache_hits != stats.calls + stats.cache_hits:
        changed = _key_difference(first.component, again.component)
        raise _fail(
            cls,
            "cache",
            f"a second run over the same store computed {again_stats.calls} of {n} items again"
            f" (loads: {again_stats.loads}): its cache keys are not stable across runs"
            f"{changed}; output_params() and the declared reads must not depend on time,"
            " object ids or anything but the parameters",
        )
    if again.loads:
        raise _fail(cls, "cache", _CACHED_LOAD.format(n=again.loads))
    report.passed.append("cache")


def _check_runtime_params(cls, params, demo, root, first: _Run, vary, report) -> None:
    runtime = [p for p in getattr(cls, "runtime_params", ()) if p != "batch_size"]
    if not runtime:
        report.skipped["runtime_params"] = "the component declares no runtime parameters"
        return
    values = _values(cls, params, first.component)
    changed = _variations(cls, params, runtime, values, vary, "runtime_params", report)
    if not changed:
        report.skipped["runtime_params"] = "no runtime parameter could be varied"
        return
    run = _run(cls, {**params, **changed}, demo, root / "store-a", check="runtime_params")
    stats = run.result.stats[cls.key()]
    if stats.calls:
        raise _fail(
            cls,
            "runtime_params",
            f"changing runtime parameter(s) {changed} changed the cache keys ({stats.calls}"
            f" items computed again){_key_difference(first.component, run.component)};"
            " a runtime parameter must stay out of output_params()",
        )
    if run.loads:
        raise _fail(cls, "runtime_params", _CACHED_LOAD.format(n=run.loads))
    report.passed.append(f"runtime_params ({', '.join(sorted(changed))})")


def _check_output_params(cls, params, demo, first: _Run, vary, report) -> None:
    from omnistory_core.engine.stage import item_key

    inputs = _inputs(cls, first.component, first.result, demo)[0]
    base_key = item_key(first.component, inputs)
    runtime = set(getattr(cls, "runtime_params", ())) | {"batch_size"}
    values = _values(cls, params, first.component)
    # a parameter counts as an output parameter when the class declares it (not runtime) or its
    # output_params() names it; one it leaves out on purpose (seed under a fixed load seed) is
    # its own statement that it changes nothing
    keyed = set(first.component.output_params()) | {
        name for name, p in _declaration(cls).items() if not p.runtime
    }
    names = sorted(k for k in values if k not in runtime and (k in keyed or k in vary))
    for name in sorted(set(values) - runtime - set(names)):
        report.skipped[f"output_params.{name}"] = (
            "not in output_params() with these parameters: the component says it changes nothing"
        )
    changed = _variations(cls, params, names, values, vary, "output_params", report)
    for name, other in changed.items():
        registry = registry_with(cls)
        config = _system_config(cls, {**params, name: other}, int(params.get("seed", 0)))
        component = _build(registry, config, bool(cls.oracle))[_group(cls)]
        if item_key(component, inputs) == base_key:
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


def _check_deterministic(cls, params, demo, root, first: _Run, report) -> None:
    other = _run(cls, params, demo, root / "store-b", check="deterministic")
    for index, a in sorted(first.records.items()):
        b = other.records.get(index)
        example = next(ex.id for ex in demo if ex.index == index)
        if b is None or a.status != b.status or a.output != b.output or a.failure != b.failure:
            raise _fail(
                cls,
                "deterministic",
                f"demo example {example}: the same parameters and seed gave different results in"
                f" two runs ({_difference(a, b)}); seed every random generator from"
                " self.params['seed'] (and the inputs), so a rerun reproduces the outputs",
            )
    report.passed.append("deterministic")


def _difference(a: Any, b: Any) -> str:
    if b is None:
        return "no record in the second run"
    if a.status != b.status:
        return f"status {a.status} then {b.status}"
    keys = sorted(k for k in set(a.output) | set(b.output) if a.output.get(k) != b.output.get(k))
    parts = []
    for k in keys:
        va, vb = a.output.get(k), b.output.get(k)
        if isinstance(va, dict) and "blob" in va:
            va, vb = va.get("blob"), (vb or {}).get("blob")
        parts.append(f"{k}: {str(va)[:60]!r} then {str(vb)[:60]!r}")
    return "; ".join(parts) or f"failure {a.failure} then {b.failure}"


def _check_failures(cls, params, demo, root, report) -> None:
    from omnistory_core.components import Component
    from omnistory_core.engine.outputs import materialize

    if len(demo) < 2:
        report.skipped["failures"] = "needs two demo examples (examples >= 2)"
        return
    # run_one first: a run_batch that catches its items' exceptions and substitutes a placeholder
    # would hide a real failure; a class whose run_batch never calls run_one is poisoned there
    methods = ["run_one", "run_batch"] if cls.run_one is not Component.run_one else ["run_batch"]
    for n, method in enumerate(methods):
        poison = _Poison(method)
        run = _run(cls, params, demo, root / f"store-c{n}", wrap=poison, check="failures")
        if poison.fired:
            break
    else:
        report.skipped["failures"] = "the component was never called with a poisoned item"
        return
    failed = {
        i: r for i, r in run.records.items() if r is not None and getattr(r, "status", "") != "ok"
    }
    poisoned = [i for i, r in failed.items() if _POISON in _describe(r)]
    if not poisoned:
        raise _fail(
            cls,
            "failures",
            f"{method}() raised for one item but no failure was recorded"
            f" ({len(failed)} failures: {[_describe(r) for r in failed.values()]}): an item that"
            " fails must come back as the exception or a Failure, never as a placeholder output",
        )
    # one call covers one example, or a book-level component's whole book
    books = {ex.index: _book(ex) for ex in demo}
    story = getattr(cls, "unit", "item") == "group"
    covered = sorted(i for i in books if books[i] == books[poisoned[0]]) if story else poisoned[:1]
    if sorted(poisoned) != covered:
        raise _fail(
            cls,
            "failures",
            f"{method}() raised for one call but {len(poisoned)} items failed with its error"
            f" (the call covered {len(covered)}): one call's failure must not be copied to the"
            " others",
        )
    index = poisoned[0]
    bad = {
        i: _describe(r)
        for i, r in run.records.items()
        if i not in poisoned and getattr(r, "status", "") != "ok"
    }
    if bad:
        raise _fail(
            cls,
            "failures",
            f"one item's failure took its neighbours down: {bad} (return one result per item;"
            " the engine retries a failed batch item by item)",
        )
    stored = run.store.get(run.records[index].key)
    if stored is None or stored.status != "failure":
        raise _fail(cls, "failures", "the failure was not stored as a record")
    job = root / "job-c"
    with _quiet("omnistory"):  # the run's failure summary would only repeat the deliberate one
        materialize(job, run.result, run.store)
    rows = {
        r["index"]: r
        for r in map(json.loads, (job / "records.jsonl").read_text(encoding="utf-8").splitlines())
    }
    entry = rows[index][_MODALITY_OF_KIND[cls.kind]]
    if entry.get("status") != "failure" or _POISON not in str(entry.get("message", "")):
        raise _fail(cls, "failures", f"records.jsonl does not show the failure: {entry}")
    report.passed.append(f"failures (through {method})")


__all__ = [
    "HEAVY_MODULES",
    "ConformanceError",
    "ConformanceReport",
    "check_component",
    "registry_with",
    "task_of",
]
