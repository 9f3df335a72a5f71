"""What the two conformance checks share: the report and error types, the plugin registry built
for a run, and the checks and helpers both use (identity, light import, parameter variations).

:mod:`omnistory_testkit.conformance` (generation components) and
:mod:`omnistory_testkit.evaluator_conformance` (metrics and judges) both import from here; the
public names stay importable from ``omnistory_testkit`` and
``omnistory_testkit.conformance``.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import types
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

#: libraries a plugin must import in ``load()``, never at module import
HEAVY_MODULES: tuple[str, ...] = (
    "torch",
    "transformers",
    "diffusers",
    "accelerate",
    "tensorflow",
    "jax",
    "vllm",
    "onnxruntime",
)


#: the built-in components that complete a system around the component under test
_UPSTREAM = {"planner": "template", "image": "noop", "tts": "noop"}


_HOOKS = {
    "planner": "register_planners",
    "image": "register_image_experts",
    "tts": "register_tts_experts",
    "backbone": "register_backbones",
}


_EVALUATOR_HOOKS = {"metric": "register_metrics", "judge": "register_judges"}


_POISON = "check_component: deliberate failure of this item"


class ConformanceError(AssertionError):
    """A component that breaks the contract: names the component, the check and the fix."""


@dataclass
class ConformanceReport:
    """What :func:`check_component` checked.

    ``passed`` lists the checks that ran and held; ``skipped`` maps a check (or sub-check) to why
    it could not run; ``calls`` counts the component's computed calls per run; ``notes`` lists
    per-example failures of a backbone's modalities that are data, not contract violations;
    ``task`` names the task it was checked on.
    """

    component: str
    version: str
    examples: int
    task: str = ""
    passed: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)
    keys: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        on = f" of task {self.task}" if self.task else ""
        lines = [f"{self.component} v{self.version}: {self.examples} examples{on}"]
        lines += [f"  ok       {name}" for name in self.passed]
        lines += [f"  skipped  {name}: {why}" for name, why in self.skipped.items()]
        lines += [f"  note     {note}" for note in self.notes]
        return "\n".join(lines)


def _fail(cls: type, check: str, message: str) -> ConformanceError:
    return ConformanceError(
        f"check_component({getattr(cls, 'kind', '?')}/{getattr(cls, 'name', '?')}): {check}:"
        f" {message}"
    )


def _plugin_module(name: str, registrations: dict[str, list[type]]) -> types.ModuleType:
    """A plugin module like an installed plugin's, with one ``register_*`` hook per kind."""
    from omnistory_core.hookspecs import hookimpl

    module = types.ModuleType(name)
    for hook, classes in registrations.items():

        def impl(register, _classes=tuple(classes)):
            for c in _classes:
                register(c)

        impl.__name__ = hook
        setattr(module, hook, hookimpl(impl))
    return module


def registry_with(*classes: type) -> Any:
    """A plugin registry holding ``classes`` (through the same hook path as an installed plugin)
    and the built-in components that complete a system around them, nothing else installed."""
    from omnistory_core import plugins

    registry = plugins.Registry()
    pm = plugins._make_manager()
    wanted: dict[str, list[type]] = {}
    for c in classes:
        hook = {**_HOOKS, **_EVALUATOR_HOOKS}.get(getattr(c, "kind", ""), "register_planners")
        wanted.setdefault(hook, []).append(c)
    taken = {(getattr(c, "kind", None), getattr(c, "name", None)) for c in classes}
    plugins._register_plugin(
        pm,
        registry,
        "check_component",
        lambda: _plugin_module("omnistory_check_component", wanted),
        "check-component",
        "0",
        strict=True,
    )
    from omnistory_core.builtin import images, noop_tts, planners

    builtin = [
        c
        for c in (
            *planners.PLANNERS,
            *images.IMAGE_EXPERTS,
            noop_tts.NoopTTS,
        )
        if (c.kind, c.name) not in taken
    ]
    upstream: dict[str, list[type]] = {}
    for c in builtin:
        upstream.setdefault(_HOOKS[c.kind], []).append(c)
    plugins._register_plugin(
        pm,
        registry,
        "builtin",
        lambda: _plugin_module("omnistory_check_component_builtin", upstream),
        "omnistory-core",
        "0",
        strict=True,
    )
    pm.check_pending()
    return registry


def _system_config(cls: type, params: Mapping[str, Any], seed: int) -> dict[str, Any]:
    node = {"name": cls.name, **params}
    kind = cls.kind
    if kind == "backbone":
        cfg: dict[str, Any] = {"backbone": node}
        produces = frozenset(getattr(cls, "produces", ()))
        if "image" not in produces:
            cfg["image"] = {"name": _UPSTREAM["image"]}
        if "speech" not in produces:
            cfg["tts"] = {"name": _UPSTREAM["tts"]}
        return {**cfg, "seed": seed}
    cfg = {group: {"name": name} for group, name in _UPSTREAM.items()}
    cfg[kind] = node
    return {**cfg, "seed": seed}


def _identity_attrs(cls: type) -> dict[str, Any]:
    """What a subclass made here must repeat so it is the same component to the engine."""
    return {
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__,
        # a subclass recomputes runtime_params from its own namespace: hand it the full tuple
        "runtime_params": tuple(getattr(cls, "runtime_params", ())),
    }


def _counting(cls: type, counter: list[int]) -> type:
    """``cls`` with its ``load`` counted, construction included (a load from ``__init__``)."""

    def load(self):
        counter.append(1)
        return cls.load(self)

    return type(
        cls.__name__,
        (cls,),
        {"load": load, **_identity_attrs(cls)},
    )


class _Poison:
    """Makes ``cls`` raise for the first item it is given, and only for that item, through
    ``run_one`` (so a ``run_batch`` that swallows its items' exceptions shows) or ``run_batch``."""

    def __init__(self, method: str) -> None:
        self.method = method
        self.signature: str | None = None
        self.fired = 0
        self._lock = threading.Lock()

    def poisoned(self, item: Mapping[str, Any]) -> bool:
        from omnistory_core.engine.hashing import digest

        signature = json.dumps({k: digest(v) for k, v in sorted(item.items())})
        with self._lock:
            if self.signature is None:
                self.signature = signature
            hit = self.signature == signature
            self.fired += hit
        return hit

    def __call__(self, cls: type) -> type:
        poison = self
        attrs: dict[str, Any] = _identity_attrs(cls)
        if self.method == "run_one":

            def run_one(self, item):
                if poison.poisoned(item):
                    raise RuntimeError(_POISON)
                return cls.run_one(self, item)

            attrs["run_one"] = run_one
        else:

            def run_batch(self, items):
                if any([poison.poisoned(item) for item in items]):
                    raise RuntimeError(_POISON)
                return cls.run_batch(self, items)

            attrs["run_batch"] = run_batch
        return type(cls.__name__, (cls,), attrs)


def _build(registry: Any, cfg: dict[str, Any], oracle: bool) -> dict[str, Any]:
    from omnistory_core.engine.job import build_component
    from omnistory_core.engine.system import resolve_system

    system = resolve_system(cfg, registry)
    return {
        group: build_component(registry, group, node, seed=int(cfg["seed"]), allow_oracle=oracle)
        for group, node in system.specs.items()
    }


@contextmanager
def _quiet(name: str) -> Iterator[None]:
    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _check_name_and_version(cls: type, kind: str) -> None:
    from omnistory_core.components import Component

    name = cls.__dict__.get("name", getattr(cls, "name", None))
    if not isinstance(name, str) or not name or any(c in name for c in " /=,\t\n"):
        raise _fail(
            cls,
            "identity",
            f"name {name!r} must be a non-empty string without spaces, '/', '=' or ','"
            f" (users type {kind}=<name>)",
        )
    version = getattr(cls, "version", None)
    if not isinstance(version, str) or not version.strip():
        raise _fail(
            cls,
            "identity",
            f"version {version!r} must be a non-empty string (bump it whenever outputs change)",
        )
    if version == Component.version and not any(
        "version" in vars(k) for k in cls.__mro__ if k is not Component
    ):
        raise _fail(
            cls,
            "identity",
            "no version of its own (it inherits the base class's '0'); set version = '1'"
            " and bump it whenever outputs change",
        )


_IMPORT_PROBE = r"""
import importlib, json, sys, traceback
heavy, target = set(json.loads(sys.argv[1])), sys.argv[2]
import omnistory_core, omnistory_core.components, omnistory_core.contract
already = {name.partition(".")[0] for name in sys.modules}
seen = {}

class Watch:
    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        if top in heavy and top not in already and top not in seen:
            frames = [f for f in traceback.extract_stack()[:-1]
                      if "importlib" not in f.filename and not f.filename.startswith("<")]
            seen[top] = " <- ".join(f"{f.filename}:{f.lineno}" for f in reversed(frames[-3:]))
        return None

sys.meta_path.insert(0, Watch())
importlib.import_module(target)
print("HEAVY=" + json.dumps(seen))
"""


def _check_light_import(cls: type, report: ConformanceReport) -> None:
    module = cls.__module__
    if module in ("__main__", "builtins") or "<" in module:
        report.skipped["light_import"] = f"the class lives in {module!r}, not an importable module"
        return
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p and os.path.exists(p)),
    }
    proc = subprocess.run(
        [sys.executable, "-c", _IMPORT_PROBE, json.dumps(HEAVY_MODULES), module],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    line = next((x for x in proc.stdout.splitlines() if x.startswith("HEAVY=")), None)
    if proc.returncode != 0 or line is None:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        report.skipped["light_import"] = f"importing {module} in a fresh interpreter failed: {last}"
        return
    heavy = json.loads(line[len("HEAVY=") :])
    if heavy:
        where = "; ".join(f"{name} imported at {frames}" for name, frames in sorted(heavy.items()))
        raise _fail(
            cls,
            "light_import",
            f"importing {module} imports {', '.join(sorted(heavy))} ({where}): plugin discovery"
            " imports every plugin, so import heavy libraries inside load() or run_one()",
        )
    report.passed.append("light_import")


def _key_difference(a: Any, b: Any) -> str:
    pa, pb = a.output_params(), b.output_params()
    diff = sorted(k for k in set(pa) | set(pb) if pa.get(k) != pb.get(k))
    if diff:
        shown = ", ".join(f"{k}: {pa.get(k)!r} then {pb.get(k)!r}" for k in diff)
        return f" (output_params() differ: {shown})"
    return ""


def _declaration(cls: type) -> dict[str, Any]:
    """The class's declared parameters (``omnistory_core.params.Param``) by name, if any."""
    return {p.name: p for p in getattr(cls, "parameters", None) or ()}


def _other_value(value: Any, param: Any = None) -> tuple[bool, Any]:
    """Another valid value for a parameter (respecting its declared choices and bounds), or
    (False, why there is none)."""
    if param is not None and param.choices is not None:
        others = [c for c in param.choices if c != value]
        if not others:
            return False, f"the only choice is {value!r}"
        return True, others[0]
    if isinstance(value, bool):
        candidates: list[Any] = [not value]
    elif isinstance(value, int):
        candidates = [value + 1, value - 1]
    elif isinstance(value, float):
        # halving stays inside the usual ranges (strengths, temperatures, guidance)
        candidates = [value / 2, value * 1.5] if value else [0.5, -0.5]
    elif isinstance(value, str):
        candidates = [f"{value}-changed"]
    else:
        return (
            False,
            f"no other value known for {type(value).__name__} {value!r} (give one in vary=)",
        )
    problem: str | None = None
    for other in candidates:
        problem = param.problem(other) if param is not None else None
        if problem is None:
            return True, other
    return False, f"no other value of {value!r} is valid ({problem}); give one in vary="


def _values(cls: type, params: Mapping[str, Any], component: Any) -> dict[str, Any]:
    """The parameters the component was built with (declared defaults filled in) and ``seed``."""
    values = dict(getattr(component, "params", {}) or {})
    for name, value in params.items():
        values.setdefault(name, value)
    values.setdefault("seed", int(params.get("seed", 0)))
    return values


def _variations(
    cls: type,
    params: Mapping[str, Any],
    names: list[str],
    values: Mapping[str, Any],
    vary: Mapping[str, Any],
    check: str,
    report: ConformanceReport,
    build: Any = None,
) -> dict[str, Any]:
    """For each name, another value the component accepts (else a skip reason in the report).
    ``build(params)`` builds the component with those parameters (default: in its system)."""
    declaration = _declaration(cls)
    out: dict[str, Any] = {}
    for name in names:
        if name in vary:
            out[name] = vary[name]
            continue
        if name not in values:
            report.skipped[f"{check}.{name}"] = "no value given or declared"
            continue
        ok, other = _other_value(values[name], declaration.get(name))
        if not ok:
            report.skipped[f"{check}.{name}"] = other
            continue
        try:
            if build is not None:
                build({**params, name: other})
            else:
                _build(
                    registry_with(cls),
                    _system_config(cls, {**params, name: other}, int(params.get("seed", 0))),
                    bool(cls.oracle),
                )
        except Exception as exc:  # noqa: BLE001 - a value the component refuses is not varied
            report.skipped[f"{check}.{name}"] = f"{other!r} is refused: {exc}"
            continue
        out[name] = other
    return out


def begin_report(
    cls: type,
    examples: int,
    identity: Callable[[type, ConformanceReport], None],
    reads: Callable[[type, ConformanceReport], None],
    *,
    load_demo: bool = True,
) -> tuple[ConformanceReport, list[Any]]:
    """The checks every kind starts with (identity, reads, light import) and the demo examples
    the engine runs (none with ``load_demo=False``: a task's own fixture is run instead): the
    start of :func:`check_component` for any component."""
    report = ConformanceReport(
        component=f"{getattr(cls, 'kind', '?')}/{getattr(cls, 'name', '?')}",
        version=str(getattr(cls, "version", "?")),
        examples=examples,
    )
    identity(cls, report)
    reads(cls, report)
    _check_light_import(cls, report)
    if not load_demo:
        return report, []

    from omnistory_core.data.demo import load_demo as demo_examples

    demo = demo_examples(limit=examples)
    if not demo:
        raise ConformanceError("the bundled demo dataset has no examples")
    report.examples = len(demo)
    return report, demo


def _check_hook_accepts(cls: type, report: ConformanceReport) -> None:
    """The last identity check of every kind: the plugin hook path registers the class."""
    try:
        registry_with(cls)
    except Exception as exc:  # noqa: BLE001 - whatever the hook path refuses, say it
        raise _fail(cls, "identity", f"the plugin hook refuses it: {exc}") from exc
    report.passed.append("identity")
