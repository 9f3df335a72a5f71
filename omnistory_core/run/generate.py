"""Generation: one system over the dataset, written as a job directory.

:func:`run_system` resolves the system from the config (refusing an incoherent one before any
model is loaded), runs the engine stage by stage through the store, writes the candidate layout
of the official evaluator and the job's ``manifest.json``.  The Hydra task in
:mod:`omnistory_core.app` calls it once per job.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from omegaconf import DictConfig, OmegaConf

from omnistory_core.redaction import install_log_filter
from omnistory_core.tasks import selected_task

log = logging.getLogger("omnistory")


def named_on_command_line() -> set[str]:
    """Groups whose component was named by a ``<group>.name=...`` override of this Hydra job
    (empty outside a Hydra app)."""
    try:
        from hydra.core.hydra_config import HydraConfig

        overrides = list(HydraConfig.get().overrides.task)
    except Exception:  # noqa: BLE001 - not inside a Hydra app (tests calling run directly)
        return set()
    named = set()
    for override in overrides:
        key = override.split("=", 1)[0].lstrip("+~")
        group, _, leaf = key.partition(".")
        if leaf == "name":
            named.add(group)
    return named


def _stage_devices(cfg: DictConfig, store_root: Path, components: dict[str, Any]) -> Any:
    """``engine.devices`` / ``engine.device_locks`` -> the job's device runner (or None)."""
    from omnistory_core.engine.devices import DeviceError
    from omnistory_core.engine.replicas import stage_devices
    from omnistory_core.errors import ConfigError

    try:
        return stage_devices(
            cfg.engine.get("devices"),
            cfg.engine.get("device_locks") or None,
            store_root,
            components.values(),
        )
    except DeviceError as exc:
        raise ConfigError(str(exc)) from None


def _job_progress(cfg: DictConfig, system_id: str, stats: dict[str, Any]) -> Any:
    """In a ``-m`` sweep: the job's reports to the sweep's progress view (else None)."""
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        hydra = HydraConfig.get()
    except Exception:  # noqa: BLE001 - not inside a Hydra app (tests calling run directly)
        return None
    if hydra.mode != RunMode.MULTIRUN or hydra.job.num is None:
        return None
    from omnistory_core.engine.sweep_progress import JobProgress

    return JobProgress(hydra.sweep.dir, int(hydra.job.num), system_id, stats)


@dataclass
class PreparedSystem:
    """A job's system, resolved and built (nothing loaded): what running or planning it needs."""

    registry: Any
    config: dict[str, Any]  # the resolved config as plain containers
    system: Any  # omnistory_core.engine.system.SystemPlan
    spec: dict[str, Any]  # the dataset spec
    examples: list[Any]
    fingerprint: Any
    components: dict[str, Any]


def check_task_inputs(specs: dict[str, Any], registry: Any, task: Any) -> None:
    """Refuse a component that reads an input the task does not offer (an expert of another
    benchmark), in one line naming the tasks that do, before any model is built or called."""
    from omnistory_core.components import REFERENCE_INPUTS
    from omnistory_core.errors import ConfigError

    for group, node in specs.items():
        cls = registry.component(group, str(node["name"]))
        offered = set(task.inputs) | (set(REFERENCE_INPUTS) if cls.oracle else set())
        unknown = [name for name in cls.reads if name not in offered]
        if not unknown:
            continue
        others = [
            t.name
            for t in registry.tasks.values()
            if t.name != task.name and set(unknown) <= set(t.inputs)
        ]
        hint = (
            f"; task {others[0]} offers {'it' if len(unknown) == 1 else 'them'}: add"
            f" task={others[0]}"
            if others
            else ""
        )
        raise ConfigError(
            f"{group}={cls.name} reads {', '.join(unknown)}, which task {task.name} does not"
            f" offer (its inputs: {', '.join(task.inputs)}){hint}"
        )


def prepare_system(cfg: DictConfig) -> PreparedSystem:
    """Resolve the system of ``cfg`` (refusing an incoherent one), read the dataset and build
    the components (their constructors check their parameters; nothing is loaded)."""
    return prepare_config(job_config(cfg))


def job_config(cfg: DictConfig) -> dict[str, Any]:
    """A job's config as plain containers, interpolations resolved, as its system is resolved
    from it (a group's component named on the command line is a choice, not a default)."""
    plain_cfg = cast(dict[str, Any], OmegaConf.to_container(cfg, resolve=True))
    for group in named_on_command_line():
        if isinstance(plain_cfg.get(group), dict):
            plain_cfg[group].pop("default_choice", None)  # `++tts.name=espeak` is a choice
    return plain_cfg


def prepare_config(plain_cfg: dict[str, Any]) -> PreparedSystem:
    """:func:`prepare_system` from a :func:`job_config` (no Hydra composition: the sweep's
    watch prepares the jobs from the configs they wrote, :mod:`omnistory_core.run.watch`)."""
    from omnistory_core.data.cache import load_examples
    from omnistory_core.engine.job import build_component
    from omnistory_core.engine.system import resolve_system
    from omnistory_core.plugins import load_plugins

    registry = load_plugins()
    system = resolve_system(plain_cfg, registry)  # refuses incoherent systems before any load
    check_task_inputs(system.specs, registry, selected_task(plain_cfg))
    spec = dict(plain_cfg["dataset"])
    examples, fingerprint = load_examples(spec)
    seed, allow_oracle = int(plain_cfg["seed"]), bool(plain_cfg["allow_oracle"])
    components = {
        group: build_component(registry, group, node, seed=seed, allow_oracle=allow_oracle)
        for group, node in system.specs.items()
    }
    return PreparedSystem(registry, plain_cfg, system, spec, examples, fingerprint, components)


def plan_for_progress(
    cfg: DictConfig, media: Any = None, prepared: PreparedSystem | None = None
) -> dict[str, list[str]]:
    """The calls a job of ``cfg`` will make, per component, as the sweep's progress view counts
    them (a launcher plans every job of a sweep with it before starting any).  ``prepared``:
    the job's :func:`prepare_system`, when the caller has it already."""
    from omnistory_core.engine.dryrun import ReadOnlyStore, planned_calls
    from omnistory_core.engine.job import job_walk

    prepared = prepared or prepare_system(cfg)
    store = ReadOnlyStore(Path(cfg.engine.store).resolve())
    walk = job_walk(prepared.examples, prepared.components, media)
    return planned_calls(walk, store, cfg.engine.retry_failures)


def pooled_specs(cfg: DictConfig, prepared: PreparedSystem) -> set[str]:
    """The warm-pool servers a job of ``cfg`` may use: the spec
    (:func:`~omnistory_core.engine.pool.component_spec`) of each of its components that runs on
    devices, as isolated as the job runs it (``runner.python``).  A sweep keeps a server loaded
    while a job still to finish needs it."""
    from omnistory_core.engine.devices import gpus_needed
    from omnistory_core.engine.isolation import maybe_isolate
    from omnistory_core.engine.pool import component_spec

    store_root = Path(cfg.engine.store).resolve()
    specs = set()
    for group, node in prepared.system.specs.items():
        component = maybe_isolate(prepared.components[group], node.get("runner"), store_root)
        if gpus_needed(component) > 0:
            specs.add(component_spec(component))
    return specs


def run_system(cfg: DictConfig, output_dir: Path) -> dict[str, Any]:
    """Run one system over the dataset and write its job directory; returns the manifest."""
    from omnistory_core.engine.failures import check_missing
    from omnistory_core.engine.isolation import maybe_isolate
    from omnistory_core.engine.job import job_walk, run_job
    from omnistory_core.engine.outputs import materialize
    from omnistory_core.engine.progress import progress_bars
    from omnistory_core.engine.store import Store
    from omnistory_core.run.manifest import job_manifest, write_manifest

    started = time.time()
    install_log_filter()
    prepared = prepare_system(cfg)
    registry, plain_cfg, system = prepared.registry, prepared.config, prepared.system
    spec, examples, fingerprint = prepared.spec, prepared.examples, prepared.fingerprint
    components = prepared.components
    if bool(cfg.engine.get("dry_run", False)):  # plan only: nothing loaded, called or stored
        from omnistory_core.run.plan import dry_run_system

        return dry_run_system(cfg, system, components, examples, output_dir)
    store = Store(Path(cfg.engine.store).resolve())
    devices = _stage_devices(cfg, store.root, components)
    for group, node in system.specs.items():
        components[group] = maybe_isolate(components[group], node.get("runner"), store.root)
    oracle = any(c.oracle for c in components.values())
    label = f"{system.system_id}{' [ORACLE]' if oracle else ''}"
    log.info("system %s: %d examples from dataset %s", label, len(examples), spec.get("name"))
    stats: dict[str, Any] = {}
    tracker = _job_progress(cfg, system.system_id, stats)
    if tracker is not None:  # the sweep's watch plans this job from it
        tracker.describe(plain_cfg)
    state = "failed"
    try:
        # one stage graph for the job: planned for the progress view, then run, derived once
        walk = job_walk(examples, components)
        if tracker is not None and not tracker.planned():  # the launcher may have planned it
            from omnistory_core.engine.dryrun import planned_calls

            tracker.plan(planned_calls(walk, store, cfg.engine.retry_failures))
        # in a sweep the sweep's view shows every job at once; a single run draws its own bars
        with progress_bars(bool(cfg.engine.progress) and tracker is None) as bars:
            result = run_job(
                examples=examples,
                components=components,
                store=store,
                retry_failures=cfg.engine.retry_failures,
                progress=tracker.progress if tracker is not None else bars,
                devices=devices,
                stats=stats,
                on_expert_keys=tracker.resolve if tracker is not None else None,
                walk=walk,
                start_sooner=bool(cfg.engine.get("start_sooner", True)),
            )
        state = "done"
    finally:
        if tracker is not None:
            tracker.close(state)
    missing = materialize(output_dir, result, store)
    manifest = job_manifest(
        system=system,
        components=components,
        registry=registry,
        result=result,
        store=store,
        spec=spec,
        n_examples=len(examples),
        fingerprint=fingerprint,
        seed=int(cfg.seed),
        missing=missing,
        config=plain_cfg,
        started=started,
    )
    write_manifest(output_dir, manifest)
    log.info(
        "wrote %s (missing: text %d, image %d, speech %d)",
        output_dir,
        missing["text"],
        missing["image"],
        missing["speech"],
    )
    check_missing(missing, cfg.engine.get("fail_on_missing", False), expected=3 * len(examples))
    return manifest
