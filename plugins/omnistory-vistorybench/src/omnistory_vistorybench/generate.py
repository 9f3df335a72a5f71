"""One ViStoryBench job: an image expert over every shot of the dataset, written as a job directory.

:func:`generate` is the task's ``generate`` (the Hydra task calls it once per job).  It

1. resolves the system from the config: an image expert is required (``image=NAME`` or a system
   preset) and a planner is optional (``planner=NAME``, in its ViStoryBench form, see
   :mod:`omnistory_vistorybench.planning`); a TTS expert or backbone is refused, and the
   Omni-StoryBench defaults (``default_choice``) step aside;
2. reads the ViStory dataset (``dataset.root``, ``split``, ``language``, ``stories``; the bundled
   fixture for ``dataset=vistory_fixture``), failing in one line naming the bad file before
   anything is written;
3. builds each shot's inputs (:func:`~.shots.shot_inputs`; the names are the task's ``inputs``) and
   runs the planner stage (when there is a planner: each shot's ``image_prompt`` becomes its
   plan's)
   and the image stage through the engine's store, so a re-run makes no call and a component
   shared by several systems (the same planner or expert on the same inputs) is called once per
   distinct input.  A shot whose plan failed has no image: its record carries the plan's failure;
   a group-unit expert (one call per story) is called on the story's other shots;
4. writes the job directory::

       outputs/<method>/<mode>/<lang>/<YYYYMMDD_HHMMSS>/<story>/shots/shot_<NN>.png
       records.jsonl   one row per shot: ok + path, or the failure (category, message); with
                       a planner, its call (plan_key) and the image prompt drawn
       missing.txt     one line per shot without an image
       stats.json      calls, cache hits, failures, loads per component; missing per category
       manifest.json   task, system, components, dataset fingerprint, seed, layout, config

   ``<method>`` is the system id, ``<mode>`` is ``task.mode`` (``base``) or the mode derived
   from the settings the command line changed, ``<lang>`` the dataset language and the
   timestamp ``task.run_timestamp``, else the one a previous run of this job directory used,
   else this job's start time (claimed, so sibling runs never share one): see
   :mod:`omnistory_vistorybench.runs`, which also names the job directory, one per run.  The
   run's folder holds this run's images only: a shot that failed this time, or a story no longer
   in the split, loses its stale image; nothing outside the run's folder is touched.

A failure of the model on one shot is a record; a component that cannot load stops the job.
With ``engine.dry_run=true`` the job is planned instead (:mod:`omnistory_vistorybench.dryrun`):
the calls each stage would make and those the store holds, nothing loaded or written but the plan.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from omnistory_core.api import Component, ConfigError, Failure
from omnistory_core.kit.jobs import (
    CacheMiss,
    CallRecord,
    ComponentStats,
    LazyComponent,
    MediaHasher,
    StageItem,
    Store,
    run_stage,
)
from omnistory_vistorybench import declared, runs
from omnistory_vistorybench.declared import INPUTS
from omnistory_vistorybench.job_outputs import (
    OUTPUTS_DIR,
    _format,
    existing_timestamp,
    finish_job,
    job_manifest,
    layout_info,
    run_settings,
    write_job_outputs,
)
from omnistory_vistorybench.shots import (
    LoadedDataset,
    ShotSystem,
    apply_plans,
    load_dataset,
    project,
    shot_pools,
)

log = logging.getLogger("omnistory")

#: groups of the primary config a ViStoryBench job has no stage for
UNUSED_GROUPS: dict[str, str] = {
    "tts": "ViStoryBench makes no speech",
}


# -- the job ------------------------------------------------------------------------------------


def generate(cfg: Any, output_dir: str | Path) -> dict[str, Any]:
    """Run one ViStoryBench job of ``cfg`` into ``output_dir``; returns the manifest."""
    from omnistory_core.kit.jobs import check_missing, install_log_filter, load_plugins

    started = time.time()
    install_log_filter()
    output_dir = Path(output_dir)
    registry = load_plugins()
    config = plain_config(cfg)
    system = resolve_shot_system(config, registry)
    run = runs.identity(config, runs.job_overrides())
    mode = run_settings(config, run)[0]
    data = load_dataset(config.get("dataset") or {})
    engine = config.get("engine") or {}
    component = build_image_expert(registry, system, config)
    planner = build_planner(registry, system, config)
    if engine.get("dry_run"):  # plan only: nothing loaded, called, stored or written but the plan
        from omnistory_vistorybench.dryrun import dry_run

        return dry_run(config, system, data, component, planner, output_dir)
    settings = runs.system_settings(
        {"planner": planner, "image": component}, int(config.get("seed") or 0)
    )
    runs.check_same_run(output_dir, run, settings)
    # claimed before any call: a fixed timestamp another run holds is refused first
    method_root = output_dir / OUTPUTS_DIR / system.system_id / mode / data.spec["language"]
    earlier = run.run_timestamp or existing_timestamp(method_root)
    timestamp = runs.claim_timestamp(
        output_dir, run, earlier or _format(started), fixed=run.run_timestamp is not None
    )
    described = component_description(component, registry)
    store = Store(Path(str(engine.get("store") or "outputs/store")).resolve())
    media = MediaHasher()
    pools = shot_pools(data, media)
    if system.backbone:
        from omnistory_vistorybench.backbones import page_pools

        pools = page_pools(pools)
    stats: dict[str, ComponentStats] = {}
    plans: dict[int, CallRecord | Failure] = {}
    if planner is not None:
        plans, planner_stats = run_planner_stage(planner, data, pools, store, engine)
        stats.update(planner_stats)
    blocked = apply_plans(pools, plans)
    results, image_stats = run_image_stage(component, system, data, store, engine, pools, blocked)
    stats.update(image_stats)
    if system.backbone:
        from omnistory_vistorybench.backbones import shot_images

        results = shot_images(results)
    rows, missing_lines, written = write_job_outputs(
        output_dir, system.system_id, mode, timestamp, data, results, store, plans
    )
    manifest = job_manifest(
        system=system,
        described=described,
        planner=component_description(planner, registry) if planner is not None else None,
        registry=registry,
        data=data,
        layout_info=layout_info(system.system_id, mode, data.spec["language"], timestamp),
        stats=stats,
        rows=rows,
        store=store,
        config=config,
        started=started,
        run={**run.to_dict(), "timestamp": timestamp, "settings": settings},
    )
    from omnistory_vistorybench.hosted import stage_usage

    manifest["usage"] = {component.kind: stage_usage(results)}
    finish_job(output_dir, rows, missing_lines, written, stats, manifest)
    missing = len(rows) - len(written)
    check_missing({"image": missing}, engine.get("fail_on_missing", False), expected=len(rows))
    return manifest


def plain_config(cfg: Any) -> dict[str, Any]:
    """The job config as plain containers, interpolations resolved; a group named with
    ``<group>.name=...`` on the command line is a choice, not a default."""
    from omegaconf import DictConfig, OmegaConf

    from omnistory_core.kit.jobs import named_on_command_line

    if isinstance(cfg, DictConfig):
        plain = cast(dict[str, Any], OmegaConf.to_container(cfg, resolve=True))
    else:
        plain = dict(cfg)
    for group in named_on_command_line():
        if isinstance(plain.get(group), dict):
            plain[group].pop("default_choice", None)
    return plain


def resolve_shot_system(config: Mapping[str, Any], registry: Any) -> ShotSystem:
    """The image expert this job runs, or a :class:`ConfigError` naming what works instead."""
    from omnistory_core.kit.jobs import explicit
    from omnistory_vistorybench.backbones import backbone_spec

    images = ", ".join(registry.names("image")) or "none installed"
    backbone = backbone_spec(config, registry)
    if backbone is not None:
        system_id = str(config.get("system_id") or backbone["name"])
        return ShotSystem(system_id=system_id, image=backbone, backbone=True)
    for group, why in UNUSED_GROUPS.items():
        node = config.get(group)
        if explicit(node):
            raise ConfigError(
                f"{group}={node['name']} is not supported by task vistorybench: {why}; drop"
                f" {group}=... and choose image=NAME (installed: {images})"
            )
    planner = config.get("planner")
    planner_spec: dict[str, Any] | None = None
    if explicit(planner):
        from omnistory_vistorybench.planning import shot_planner_class

        cls = registry.component("planner", str(planner["name"]))
        # a planner that reads a book page is refused here, before anything runs
        shot_planner_class(cls, ", ".join(registry.names("planner")))
        planner_spec = dict(planner)
    image = config.get("image")
    if not explicit(image):
        raise ConfigError(
            f"task vistorybench needs an image expert: choose image=NAME (installed: {images})"
            " or a system preset such as system=copy_paste"
        )
    cls = registry.component("image", str(image["name"]))
    unknown = [name for name in cls.reads if name not in INPUTS]
    if unknown:
        others = [
            t.name
            for t in registry.tasks.values()
            if t.name != declared.NAME and set(unknown) <= set(t.inputs)
        ]
        hint = f"; task {others[0]} offers them: use it without task=vistorybench" if others else ""
        raise ConfigError(
            f"image={cls.name} reads {unknown}, which task vistorybench does not provide; its"
            f" inputs are {', '.join(INPUTS)}{hint}"
        )
    system_id = str(config.get("system_id") or cls.name)
    return ShotSystem(system_id=system_id, image=dict(image), planner=planner_spec)


# -- the image stage ----------------------------------------------------------------------------


def build_image_expert(registry: Any, system: ShotSystem, config: Mapping[str, Any]) -> Component:
    """The image expert, built (parameters checked) but not loaded; a hosted image model in its
    ViStoryBench form (:mod:`omnistory_vistorybench.hosted`)."""
    from omnistory_core.kit.jobs import build_component
    from omnistory_vistorybench.hosted import build_hosted, is_hosted

    if system.backbone:
        return build_component(
            registry,
            "backbone",
            system.image,
            seed=int(config.get("seed") or 0),
            allow_oracle=bool(config.get("allow_oracle")),
        )
    cls = registry.component("image", str(system.image["name"]))
    if is_hosted(cls):
        return build_hosted(cls, system.image, seed=int(config.get("seed") or 0))
    return build_component(
        registry,
        "image",
        system.image,
        seed=int(config.get("seed") or 0),
        allow_oracle=bool(config.get("allow_oracle")),
    )


def component_description(component: Component, registry: Any) -> dict[str, Any]:
    from omnistory_core.kit.jobs import component_manifest

    return component_manifest(component, registry)


def build_planner(registry: Any, system: ShotSystem, config: Mapping[str, Any]) -> Component | None:
    """The planner in its ViStoryBench form, built (parameters checked) but not loaded; None
    when the system has none."""
    if system.planner is None:
        return None
    from omnistory_vistorybench.planning import build_shot_planner

    runner = system.planner.get("runner") or {}
    if isinstance(runner, Mapping) and runner.get("python"):
        raise ConfigError(
            f"planner={system.planner['name']}: planner.runner.python is not supported by task"
            " vistorybench (its planner forms run in the job's process); drop it"
        )
    return build_shot_planner(
        registry,
        system.planner,
        seed=int(config.get("seed") or 0),
        allow_oracle=bool(config.get("allow_oracle")),
    )


def run_planner_stage(
    planner: Component,
    data: LoadedDataset,
    pools: Mapping[int, dict[str, Any]],
    store: Store,
    engine: Mapping[str, Any],
) -> tuple[dict[int, CallRecord | Failure], dict[str, ComponentStats]]:
    """Every shot's planner record, from the store or computed (a re-run makes no call; systems
    sharing the planner share its calls)."""
    from omnistory_vistorybench.planning import unusable_plan

    items = [
        StageItem(r.index, project(planner, pools[r.index]), group=r.group, example=r.id)
        for r in data.records
    ]
    return run_stage_of(planner, "planner", items, store, engine, derived_failure=unusable_plan)


def run_image_stage(
    component: Component,
    system: ShotSystem,
    data: LoadedDataset,
    store: Store,
    engine: Mapping[str, Any],
    pools: Mapping[int, dict[str, Any]] | None = None,
    blocked: Mapping[int, Failure] | None = None,
) -> tuple[dict[int, CallRecord | Failure], dict[str, ComponentStats]]:
    """Every shot's image, from the store or computed; per-record index, and the stats.

    ``pools``: the shots' inputs (built here when None); ``blocked``: shots not to draw (their
    plan failed), which keep that failure.  Items carry their story as ``group``, so a
    group-unit expert is called once per story."""
    if pools is None:
        pools = shot_pools(data, MediaHasher())
    blocked = blocked or {}
    items = [
        StageItem(r.index, blocked_by=blocked[r.index], group=r.group, example=r.id)
        if r.index in blocked
        else StageItem(r.index, project(component, pools[r.index]), group=r.group, example=r.id)
        for r in data.records
    ]
    return run_stage_of(component, "image", items, store, engine, runner=system.image.get("runner"))


def run_stage_of(
    component: Component,
    label: str,
    items: list[StageItem],
    store: Store,
    engine: Mapping[str, Any],
    *,
    runner: Any = None,
    derived_failure: Any = None,
) -> tuple[dict[int, CallRecord | Failure], dict[str, ComponentStats]]:
    """One stage through the store: cache hits, calls, progress; a component that cannot run
    here (no key, no weights) is fine when every call is cached."""
    from omnistory_core.kit.jobs import (
        ComponentUnavailable,
        maybe_isolate,
        preflight,
        progress_bars,
        unavailable_message,
    )

    devices = stage_devices(engine, store, component)
    runnable = maybe_isolate(component, runner, store.root)
    stats = ComponentStats()
    lazy = LazyComponent(runnable, stats)
    retry = engine.get("retry_failures", "errors")
    unavailable = preflight([runnable])
    if unavailable:
        try:
            results = run_stage(
                lazy,
                items,
                store,
                retry_failures=retry,
                derived_failure=derived_failure,
                cache_only=True,
            )
        except CacheMiss:
            raise ComponentUnavailable(unavailable_message(*unavailable[0])) from None
        return results, {component.key(): stats}
    with progress_bars(bool(engine.get("progress", True))) as bars:
        results = run_stage(
            lazy,
            items,
            store,
            retry_failures=retry,
            advance=bars(f"{label:<8} {component.key()}", len(items)),
            derived_failure=derived_failure,
            load_failure="raise",
            devices=devices,
        )
    lazy.release()
    return results, {component.key(): stats}


def stage_devices(engine: Mapping[str, Any], store: Store, component: Component) -> Any:
    """``engine.devices`` as the core reads it: replicas on a device pool, or None."""
    from omnistory_core.kit.jobs import DeviceError
    from omnistory_core.kit.jobs import stage_devices as core_stage_devices

    try:
        return core_stage_devices(
            engine.get("devices"), engine.get("device_locks") or None, store.root, [component]
        )
    except DeviceError as exc:
        raise ConfigError(str(exc)) from None


__all__ = ["generate", "resolve_shot_system"]
