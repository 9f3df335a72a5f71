"""What the engine does around a component, for a test that drives the component by hand.

A test that calls ``run_one`` / ``run_batch`` itself still wants its items, keys and registry to be
the engine's, so that what it asserts holds in a real run.  These helpers are that, without a
plugin's tests reaching into the engine's modules (which change without notice):

* :func:`demo_examples`, :func:`demo_items`, :func:`example_items` -- the bundled demo examples,
  and every input the engine builds for an example (what a planner or a backbone reads);
* :func:`fixture_items`, :func:`fixture_call_keys` -- the same for any task's bundled fixture
  (``task="vistorybench"``: each shot's inputs as its job builds them, and a component's call
  keys there); :func:`demo_items` and :func:`run_job` take ``task=`` too;
* :func:`media` -- a dataset file as the :class:`~omnistory_core.api.Media` the engine hands on;
* :func:`inputs_for`, :func:`call_key` -- what of an input pool reaches a component (its
  ``reads``), and the cache key of one call;
* :func:`recomputed` -- whether a rerun recomputes a stored failure;
* :func:`config_node` -- the config node the core generates from declared parameters;
* :func:`installed_registry`, :func:`job_config`, :func:`resolve_system`,
  :func:`build_component` -- the installed components, and a system composed from a config, as
  ``python -m omnistory_core`` builds them;
* :func:`check_produces`, :func:`paradigm_of` -- a backbone's ``produces`` as registration checks
  it, and the paper's paradigm it gives;
* :func:`prefetch_checkpoints` -- the hub ids ``python -m omnistory_core prefetch`` downloads;
* :func:`open_store`, :func:`run_job`, :func:`materialize` -- components run over examples
  through a call store, and the job folder a run writes.

Importing this module is light: the engine is imported by the helpers when called.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any


def demo_examples(limit: int | None = None) -> list[Any]:
    """The bundled demo examples (all, or the first ``limit``), validated like the official
    release: ``StoryExample`` objects (``.metadata``, ``.current.text``, ``.conditions``, ...)."""
    from omnistory_core.data.demo import load_demo

    return load_demo(limit)


def example_items(examples: Iterable[Any], *, oracle: bool = False) -> list[dict[str, Any]]:
    """Per example, everything a component could read about it, as the engine builds it: the
    example inputs (``current_image`` as hashed :class:`Media`, ``current_text``, ``metadata``,
    ``conditions``) and, with ``oracle``, the reference ones.  Each file is hashed once."""
    from omnistory_core.engine.job import MediaHasher, example_inputs

    hasher = MediaHasher()
    return [example_inputs(example, hasher, oracle=oracle) for example in examples]


def demo_items(
    limit: int | None = 2, *, oracle: bool = False, task: str | None = None, kind: str = "image"
) -> list[dict[str, Any]]:
    """:func:`example_items` of the first ``limit`` demo examples (None: all of them); with
    ``task``, that task's fixture items (:func:`fixture_items`, ``limit`` per group)."""
    if _harness_of(task) is not None:
        return list(fixture_items(task, kind=kind, per_group=limit).values())
    return example_items(demo_examples(limit), oracle=oracle)


def _task(task: str | None) -> Any:
    from omnistory_core.plugins import load_plugins
    from omnistory_core.tasks import DEFAULT_TASK

    return load_plugins().task(task or DEFAULT_TASK)


def _harness_of(task: str | None) -> Any:
    """The task's harness (``Task.harness``), or None for a task the core's engine runs."""
    if task is None:
        return None
    found = _task(task)
    return found.harness() if found.harness is not None else None


def fixture_items(
    task: str | None = None, *, kind: str = "image", per_group: int | None = 2
) -> dict[str, dict[str, Any]]:
    """Per example id of ``task``'s bundled fixture, every input a ``kind`` component may read,
    as the task's job builds it (ViStoryBench: a shot's ``shot_prompt``, ``shot``,
    ``character_refs``, ...; a backbone's page view).  ``per_group``: the first records of each
    group (story, book).  Omni-StoryBench: the demo's examples (``per_group`` of them)."""
    harness = _harness_of(task)
    if harness is None:
        examples = demo_examples(per_group)
        return {ex.id: item for ex, item in zip(examples, example_items(examples), strict=True)}
    return harness.items(per_group, kind)


def fixture_call_keys(
    cls: type, task: str | None = None, *, per_group: int | None = 2, **params: Any
) -> dict[str, str]:
    """Per example id of ``task``'s fixture, the call key of ``cls`` built with ``params`` in
    the task's smallest system, as its job computes it (a story-level component: its story's
    call), without calling anything."""
    from omnistory_testkit._common import registry_with

    harness = _harness_of(task or getattr(cls, "task", None))
    if harness is None:
        raise ValueError("fixture_call_keys: the task runs on the core's engine; use call_key")
    config = harness.system(str(cls.kind), {"name": cls.name, **params}, int(params.get("seed", 0)))
    return harness.call_keys(registry_with(cls), config, str(cls.kind), per_group=per_group)


def media(path: str | os.PathLike[str]) -> Any:
    """A dataset file as the engine hands it to a component: a :class:`Media` with its SHA-256."""
    from omnistory_core.components import Media
    from omnistory_core.engine.hashing import sha256_file

    return Media(path=str(path), sha256=sha256_file(str(path)))


def inputs_for(component: Any, pool: Mapping[str, Any]) -> dict[str, Any]:
    """Exactly the inputs of ``pool`` the component declared in ``reads``: all that reaches it."""
    from omnistory_core.engine.job import project

    return project(component, dict(pool))


def call_key(component: Any, inputs: Mapping[str, Any]) -> str:
    """The cache key of one call of ``component`` on ``inputs`` (its identity, version, output
    parameters and the inputs): two calls with one key are computed once."""
    from omnistory_core.engine.stage import item_key

    return item_key(component, dict(inputs))


def recomputed(failure: Mapping[str, Any] | None, retry_failures: str = "errors") -> bool:
    """Whether a rerun with ``engine.retry_failures=RETRY_FAILURES`` (``errors``, the default;
    ``all``; ``none``) recomputes a stored failure (its record, as ``Failure.to_dict()``)."""
    from omnistory_core.engine.failures import should_recompute

    return should_recompute(failure, retry_failures)


def config_node(cls: type) -> dict[str, Any] | None:
    """The config node the core generates for a component that declares ``parameters``
    (``kind=name`` with no yaml file): its name and every declared default, without ``seed``;
    None for a component without a declaration."""
    from omnistory_core.params import config_node as generated

    return generated(cls)


def installed_registry() -> Any:
    """The components of the built-in and installed plugins, as the CLI sees them:
    ``.component(kind, name)`` is the class ``kind=name`` selects, ``.names(kind)`` the names,
    ``.config_paths`` the config folders the plugins add."""
    from omnistory_core.plugins import load_plugins

    return load_plugins()


def job_config(cfg: Any) -> dict[str, Any]:
    """A composed config (``DictConfig``, with or without its ``hydra`` node) as the plain job
    config :func:`resolve_system` and :func:`build_component` take."""
    from omnistory_core.engine.system import job_config as plain

    return plain(cfg)


def resolve_system(job: Mapping[str, Any], registry: Any) -> Any:
    """The system a job config runs (``.paradigm``, ``.groups``, ``.system_id``, ``.specs``), or
    the ``ConfigError`` saying why none can."""
    from omnistory_core.engine.system import resolve_system as resolve

    return resolve(job, registry)


def build_component(
    registry: Any,
    kind: str,
    node: Mapping[str, Any],
    *,
    seed: int,
    allow_oracle: bool = False,
) -> Any:
    """The component a config node (``name`` and parameters) builds, as the engine builds it:
    ``seed`` unless the node sets one, oracle components refused without ``allow_oracle``."""
    from omnistory_core.engine.job import build_component as build

    return build(registry, kind, node, seed=seed, allow_oracle=allow_oracle)


def check_produces(cls: type) -> frozenset[str]:
    """A backbone's ``produces`` as registration checks it (a non-empty subset of text, image and
    speech that includes text), or the ``ConfigError`` saying what is wrong."""
    from omnistory_core.components import check_produces as checked

    return checked(cls)


def paradigm_of(produces: frozenset[str] | None) -> str:
    """The paper's paradigm of a backbone that produces ``produces`` (None: a planner's system)."""
    from omnistory_core.engine.system import paradigm_of as paradigm

    return paradigm(produces)


def prefetch_checkpoints(kind: str, cls: type, params: Mapping[str, Any]) -> list[str]:
    """The hub ids ``python -m omnistory_core prefetch`` downloads for a ``kind`` component of
    class ``cls`` with ``params`` (local directories need nothing)."""
    from omnistory_eval.prefetch import component_checkpoints

    return component_checkpoints(kind, cls, dict(params))


def open_store(root: str | os.PathLike[str]) -> Any:
    """The engine's call store under ``root`` (created if missing): runs that share it share their
    computed calls, as jobs of one sweep do."""
    from omnistory_core.engine.store import Store

    return Store(root)


def run_job(
    *,
    examples: list[Any] | None = None,
    components: Mapping[str, Any],
    store: Any,
    retry_failures: str = "errors",
    task: str | None = None,
    per_group: int | None = 2,
) -> Any:
    """Run a system's components over ``examples`` through ``store``, stage by stage, as a job
    does.  ``components`` maps groups to components (``planner``, ``image``, ``tts``, or
    ``backbone`` and an expert per modality it does not produce); ``retry_failures`` says which
    stored failures are recomputed.  The result has ``stats`` per component key (``calls``,
    ``loads``, ``failures``, ``cache_hits``, ...).

    With ``task`` (a task with its own generation, ViStoryBench): ``components`` maps the
    group of the component to run to its class (or ``(class, params)``), which runs in the
    task's smallest system over the first ``per_group`` records of each group of its fixture, as
    the task's job runs it; the result (an ``omnistory_core.kit.harness.HarnessRun``) has the
    component's ``records`` and ``keys`` per example id, its ``stats`` and the built
    ``component``."""
    harness = _harness_of(task)
    if harness is not None:
        return _run_on_task(harness, components, store, retry_failures, per_group)
    from omnistory_core.engine.job import run_job as run

    if examples is None:
        raise ValueError("run_job: give the examples to run (demo_examples())")
    return run(
        examples=list(examples),
        components=dict(components),
        store=store,
        retry_failures=retry_failures,
    )


def _run_on_task(
    harness: Any,
    components: Mapping[str, Any],
    store: Any,
    retry_failures: str,
    per_group: int | None,
) -> Any:
    from omnistory_testkit._common import registry_with

    if len(components) != 1:
        raise ValueError(
            "run_job(task=...): give the one component to run, {group: Class or (Class, params)};"
            " the task completes its system with built-in components"
        )
    ((group, value),) = components.items()
    cls, params = value if isinstance(value, tuple) else (value, {})
    config = harness.system(group, {"name": cls.name, **params}, int(params.get("seed", 0)))
    return harness.run(
        registry_with(cls),
        config,
        group,
        store,
        per_group=per_group,
        retry_failures=retry_failures,
    )


def materialize(job_dir: str | os.PathLike[str], result: Any, store: Any) -> dict[str, int]:
    """Write a job folder from a :func:`run_job` result, as a run does (``text/``, ``image/``,
    ``speech/``, ``plans.jsonl``, ``missing.txt``, ...); returns the missing outputs per
    modality."""
    from omnistory_core.engine.outputs import materialize as write

    return write(Path(job_dir), result, store)


__all__ = [
    "build_component",
    "call_key",
    "check_produces",
    "config_node",
    "demo_examples",
    "demo_items",
    "example_items",
    "fixture_call_keys",
    "fixture_items",
    "inputs_for",
    "installed_registry",
    "job_config",
    "materialize",
    "media",
    "open_store",
    "paradigm_of",
    "prefetch_checkpoints",
    "recomputed",
    "resolve_system",
    "run_job",
]
