"""One ViStoryBench job: an image expert over every shot of the dataset, written as a job directory.

:func:`generate` is the task's ``generate`` (the Hydra task calls it once per job).  It

1. resolves the system from the config: an image expert is required (``image=NAME`` or a system
   preset) and a planner is optional (``planner=NAME``, in its ViStoryBench form, see
   :mod:`omnistory_vistorybench.planning`); a TTS expert or backbone is refused, and the
   Omni-StoryBench defaults (``default_choice``) step aside;
2. reads the ViStory dataset (``dataset.root``, ``split``, ``language``, ``stories``; the bundled
   fixture for ``dataset=vistory_fixture``), failing in one line naming the bad file before
   anything is written;
3. builds each shot's inputs (:func:`shot_inputs`; the names are the task's ``inputs``) and runs
   the planner stage (when there is a planner: each shot's ``image_prompt`` becomes its plan's)
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

import json
import logging
import shutil
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, cast

from omnistory_core.api import Component, ConfigError, DatasetError, Failure, Media
from omnistory_core.kit.jobs import (
    CacheMiss,
    CallRecord,
    ComponentStats,
    LazyComponent,
    MediaHasher,
    StageItem,
    Store,
    atomic_write_bytes,
    run_stage,
)
from omnistory_vistorybench import dataset as vistory
from omnistory_vistorybench import layout, runs
from omnistory_vistorybench.task import INPUTS, VISTORYBENCH

log = logging.getLogger("omnistory")

#: the dataset configs of this task; the fixture's root may be left unset
DATASETS: tuple[str, ...] = ("vistory", "vistory_fixture")
FIXTURE_DATASET = "vistory_fixture"
DEFAULT_MODE = runs.DEFAULT_MODE
OUTPUTS_DIR = "outputs"
#: groups of the primary config a ViStoryBench job has no stage for
UNUSED_GROUPS: dict[str, str] = {
    "tts": "ViStoryBench makes no speech",
}


@dataclass(frozen=True)
class ShotSystem:
    """What a ViStoryBench job runs: an optional planner and one image expert, under a system id
    (the ``<method>``)."""

    system_id: str
    image: dict[str, Any]
    planner: dict[str, Any] | None = None
    #: ``image`` is a backbone's node: it draws the shots (:mod:`omnistory_vistorybench.backbones`)
    backbone: bool = False


@dataclass(frozen=True)
class LoadedDataset:
    """The job's dataset: its spec (root resolved), stories, shot records and fingerprint."""

    spec: dict[str, Any]
    stories: list[vistory.Story]
    records: list[vistory.ShotRecord]
    fingerprint: str


class RefMedia(Media):
    """A reference image inside ``character_refs``, written into a cache key by content.

    The core's call key hashes a top-level :class:`Media` by its content but serialises one nested
    in a list with ``str()``, which for the dataclass includes its path; this ``str()`` is the
    content hash alone, so a copy of the dataset elsewhere hits the same cached calls.
    """

    def __str__(self) -> str:
        return f"media:{self.sha256}"


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
            if t.name != VISTORYBENCH.name and set(unknown) <= set(t.inputs)
        ]
        hint = f"; task {others[0]} offers them: use it without task=vistorybench" if others else ""
        raise ConfigError(
            f"image={cls.name} reads {unknown}, which task vistorybench does not provide; its"
            f" inputs are {', '.join(INPUTS)}{hint}"
        )
    system_id = str(config.get("system_id") or cls.name)
    return ShotSystem(system_id=system_id, image=dict(image), planner=planner_spec)


def run_settings(
    config: Mapping[str, Any], run: runs.RunIdentity | None = None
) -> tuple[str, str | None]:
    """The ``<mode>`` folder (``task.mode``, or the mode derived from the settings the command
    line changed: :mod:`omnistory_vistorybench.runs`) and ``task.run_timestamp`` (or None),
    checked."""
    run = run or runs.identity(config, runs.job_overrides())
    try:  # shot_path refuses a folder name the layout cannot hold
        layout.shot_path(".", "method", run.mode, "en", "20000101_000000", "01", 1)
    except layout.LayoutError as exc:
        raise ConfigError(f"task.mode: {exc}") from None
    return run.mode, run.run_timestamp


# -- dataset ------------------------------------------------------------------------------------


def dataset_root(spec: Mapping[str, Any]) -> Path:
    """``dataset.root``, or the bundled fixture for ``dataset=vistory_fixture``."""
    root = spec.get("root")
    if root in (None, "", "???"):
        if spec.get("name") == FIXTURE_DATASET:
            return vistory.fixture_root()
        raise ConfigError(
            "dataset.root is not set: point it at the folder holding ViStory/<NN>/story.json"
            " (dataset.root=/path/to/ViStoryBench), or use dataset=vistory_fixture"
        )
    return Path(str(root)).expanduser().resolve()


def load_dataset(spec: Mapping[str, Any]) -> LoadedDataset:
    """The stories and shot records of the ``dataset`` config; a bad dataset is one line."""
    name = spec.get("name")
    if name not in DATASETS:
        raise ConfigError(
            f"dataset={name} is not a ViStory dataset: task vistorybench reads"
            " dataset=vistory dataset.root=DIR or dataset=vistory_fixture"
        )
    root = dataset_root(spec)
    split = str(spec.get("split") or "full")
    language = str(spec.get("language") or "en")
    wanted = spec.get("stories")
    try:
        stories = vistory.load_stories(
            root,
            split=split,
            language=language,
            stories=list(wanted) if wanted is not None else None,
        )
        fingerprint = vistory.dataset_fingerprint(stories)
    except DatasetError as exc:
        raise DatasetError(one_line(exc)) from None
    resolved = {**spec, "root": str(root), "split": split, "language": language}
    records = vistory.shot_records(stories)
    return LoadedDataset(resolved, stories, records, fingerprint)


def one_line(exc: DatasetError) -> str:
    """A dataset error as one line: the summary (it names the file) and the first problems."""
    shown = [
        p.message if p.field == vistory.WHOLE_FILE else f"{p.field}: {p.message}"
        for p in exc.problems[:3]
    ]
    more = len(exc.problems) - len(shown)
    text = exc.summary + (f": {'; '.join(shown)}" if shown else "")
    text += f" (and {more} more)" if more > 0 else ""
    return " ".join(text.split())


# -- inputs -------------------------------------------------------------------------------------


def shot_inputs(
    record: vistory.ShotRecord, story: vistory.Story, media: MediaHasher
) -> dict[str, Any]:
    """Everything a component may read about one shot (the task's ``inputs``)."""
    refs = [
        {
            "key": key,
            "name": name,
            "tag": story.characters[key].tag,
            "images": [_ref_media(media, path) for path in story.characters[key].images],
        }
        for key, name in zip(record.character_keys, record.character_names, strict=False)
        if key in story.characters
    ]
    first = record.reference_images[0] if record.reference_images else None
    cast = [
        {
            "key": character.key,
            "name": character.name,
            "tag": character.tag,
            "description": character.prompt,
            "images": [_ref_media(media, path) for path in character.images],
        }
        for character in story.characters.values()
    ]
    return {
        "image_prompt": record.prompt,
        "shot_prompt": record.prompt,
        "current_image": media(str(first)) if first is not None else None,
        "character_refs": refs,
        "shot": {
            "story_id": record.group,
            "index": record.shot_index,
            "plot": record.plot,
            "scene": record.scene,
            "camera": record.camera,
            "script": record.script,
            "character_keys": list(record.character_keys),
            "character_names": list(record.character_names),
            "story_type": record.story_type,
            "language": record.language,
        },
        "characters": cast,
    }


def _ref_media(media: MediaHasher, path: Path) -> RefMedia:
    hashed = media(str(path))
    return RefMedia(path=hashed.path, sha256=hashed.sha256)


def project(component: Component, pool: Mapping[str, Any]) -> dict[str, Any]:
    """Exactly the inputs the component declared: nothing else reaches it (or its key)."""
    return {name: pool[name] for name in component.reads}


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


def shot_pools(data: LoadedDataset, media: MediaHasher) -> dict[int, dict[str, Any]]:
    """Every shot's inputs (:func:`shot_inputs`), by record index."""
    by_id = {story.id: story for story in data.stories}
    return {r.index: shot_inputs(r, by_id[r.group], media) for r in data.records}


def apply_plans(
    pools: dict[int, dict[str, Any]], plans: Mapping[int, CallRecord | Failure]
) -> dict[int, Failure]:
    """Put each plan's image prompt into its shot's ``image_prompt``; the shots whose plan gives
    none, with the reason (they are not drawn)."""
    from omnistory_vistorybench.planning import plan_image_prompt

    blocked: dict[int, Failure] = {}
    for index, record in plans.items():
        prompt = plan_image_prompt(record)
        if isinstance(prompt, Failure):
            blocked[index] = prompt
        else:
            pools[index]["image_prompt"] = prompt
    return blocked


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


# -- the job directory --------------------------------------------------------------------------


def existing_timestamp(method_root: Path) -> str | None:
    """The newest run folder a previous run of this job wrote under ``<method>/<mode>/<lang>``."""
    if not method_root.is_dir():
        return None
    found = sorted(
        d.name
        for d in method_root.iterdir()
        if d.is_dir() and layout.WRITTEN_TIMESTAMP.match(d.name)
    )
    return found[-1] if found else None


def layout_info(method: str, mode: str, language: str, timestamp: str) -> dict[str, str]:
    """Where this job's run lies in the official layout (the manifest's ``layout``)."""
    run_dir = Path(OUTPUTS_DIR, method, mode, language, timestamp)
    return {
        "outputs": OUTPUTS_DIR,
        "method": method,
        "mode": mode,
        "language": language,
        "timestamp": timestamp,
        "run_dir": run_dir.as_posix(),
    }


def _format(moment: float) -> str:
    return layout.format_timestamp(datetime.fromtimestamp(moment))


def record_failure(value: CallRecord | Failure) -> Failure | None:
    """Why a shot has no image, or None when it has one."""
    if isinstance(value, Failure):
        return value
    if value.status != "ok" or not value.output.get("blob"):
        return Failure.from_dict(value.failure or {"category": "model_error"})
    return None


def write_job_outputs(
    output_dir: Path,
    method: str,
    mode: str,
    timestamp: str,
    data: LoadedDataset,
    results: Mapping[int, CallRecord | Failure],
    store: Store,
    plans: Mapping[int, CallRecord | Failure] | None = None,
) -> tuple[list[dict[str, Any]], list[str], set[Path]]:
    """Write every shot that has an image in the official layout; the records, the
    ``missing.txt`` lines and the paths written.  With a planner stage (``plans``), each record
    also names its plan's call (``plan_key``) and the image prompt drawn (``image_prompt``, null
    when the plan gave none)."""
    from omnistory_vistorybench.planning import plan_image_prompt

    outputs = output_dir / OUTPUTS_DIR
    language = data.spec["language"]
    rows: list[dict[str, Any]] = []
    missing: list[str] = []
    written: set[Path] = set()
    for record in data.records:
        value = results[record.index]
        row: dict[str, Any] = {
            "index": record.index,
            "id": record.id,
            "story_id": record.group,
            "shot_index": record.shot_index,
            "call_key": value.key if isinstance(value, CallRecord) else None,
        }
        if plans:
            plan = plans.get(record.index)
            prompt = plan_image_prompt(plan) if plan is not None else None
            row["plan_key"] = plan.key if isinstance(plan, CallRecord) else None
            row["image_prompt"] = prompt if isinstance(prompt, str) else None
        failure = record_failure(value)
        if failure is None:
            assert isinstance(value, CallRecord)  # a Failure always has a failure
            blob = store.blob_path(value.output["blob"], value.output.get("ext", "png"))
            path = layout.write_shot(
                outputs, method, mode, language, timestamp, record.group, record.shot_index, blob
            )
            written.add(path)
            row.update(status="ok", path=path.relative_to(output_dir).as_posix())
        else:
            row.update(status="failure", **failure.to_dict())
            missing.append(f"{record.id}\timage\t{failure.category}\t{failure.describe()}\n")
        rows.append(row)
    # this run's own folder only: other runs' folders (other modes, languages, timestamps) stay
    prune_stale(outputs / method / mode / language / timestamp, written)
    return rows, missing, written


def prune_stale(outputs: Path, keep: set[Path]) -> None:
    """Remove from the run's folder ``outputs`` (``outputs/<method>/<mode>/<lang>/<ts>``) every
    file this job did not write, then the emptied folders inside it: the run's folder shows this
    job's images only, as its records and manifest describe them.  Nothing outside it is
    touched."""
    if not outputs.is_dir():
        return
    stale = [p for p in outputs.rglob("*") if (p.is_file() or p.is_symlink()) and p not in keep]
    for path in stale:
        path.unlink()
    if stale:
        log.info("removed %d stale file(s) of an earlier run from %s", len(stale), outputs)
    for folder in sorted((d for d in outputs.rglob("*") if d.is_dir()), reverse=True):
        if not any(folder.iterdir()):
            shutil.rmtree(folder)


def job_stats(rows: Sequence[Mapping[str, Any]], stats: Mapping[str, ComponentStats]) -> dict:
    """``stats.json``: the core's shape (components, missing by modality and category)."""
    categories = Counter(r["category"] for r in rows if r["status"] != "ok")
    return {
        "components": {k: s.to_dict() for k, s in sorted(stats.items())},
        "missing": {"image": dict(sorted(categories.items()))},
        "shots": len(rows),
        "written": sum(1 for r in rows if r["status"] == "ok"),
    }


def job_manifest(
    *,
    system: ShotSystem,
    described: dict[str, Any],
    planner: dict[str, Any] | None = None,
    registry: Any,
    data: LoadedDataset,
    layout_info: dict[str, Any],
    stats: Mapping[str, ComponentStats],
    rows: Sequence[Mapping[str, Any]],
    store: Store,
    config: Mapping[str, Any],
    started: float,
    run: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The manifest of one finished job (redacted when written); ``run``: where the run lies and
    the settings it was made with (:mod:`omnistory_vistorybench.runs`)."""
    from omnistory_core.kit.jobs import environment_manifest

    missing = sum(1 for r in rows if r["status"] != "ok")
    stages = ["planner", "image"] if planner is not None else ["image"]
    if system.backbone:
        stages = ["backbone"]
    return {
        "status": "complete",
        "task": {"name": VISTORYBENCH.name, "version": VISTORYBENCH.version},
        "system_id": system.system_id,
        "oracle": bool(described.get("oracle")) or bool((planner or {}).get("oracle")),
        "paradigm": paradigm(registry, system),
        "stages": stages,
        "components": dict(zip(stages, [c for c in (planner, described) if c], strict=True)),
        "dataset": {
            **data.spec,
            "n_examples": len(data.records),
            "n_stories": len(data.stories),
            "story_ids": [s.id for s in data.stories],
            "fingerprint": data.fingerprint,
        },
        "layout": layout_info,
        "run": dict(run or {}),
        "seed": int(config.get("seed") or 0),
        "store": str(store.root),
        "n_examples": len(data.records),
        "missing": {"image": missing},
        "stats": {k: s.to_dict() for k, s in sorted(stats.items())},
        "config": dict(config),
        **environment_manifest(registry, started),
    }


def _is_baseline(registry: Any, system: ShotSystem) -> bool:
    return bool(getattr(registry.component("image", str(system.image["name"])), "baseline", False))


def paradigm(registry: Any, system: ShotSystem) -> str:
    """``orchestration`` (a planner writes the image prompts), a backbone's paradigm, else
    ``baseline`` or ``image expert`` by the image expert."""
    if system.backbone:
        from omnistory_vistorybench.backbones import paradigm_of

        return paradigm_of(registry.component("backbone", str(system.image["name"])))
    if system.planner is not None:
        return "orchestration"
    return "baseline" if _is_baseline(registry, system) else "image expert"


def finish_job(
    output_dir: Path,
    rows: Sequence[Mapping[str, Any]],
    missing_lines: Sequence[str],
    written: set[Path],
    stats: Mapping[str, ComponentStats],
    manifest: Mapping[str, Any],
) -> None:
    """``records.jsonl``, ``missing.txt``, ``stats.json``, then ``manifest.json`` (last: a job
    directory without it is incomplete)."""
    from omnistory_core.kit.jobs import write_manifest

    records = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows)
    atomic_write_bytes(output_dir / "records.jsonl", records.encode("utf-8"))
    atomic_write_bytes(output_dir / "missing.txt", "".join(missing_lines).encode("utf-8"))
    summary = json.dumps(job_stats(rows, stats), indent=2) + "\n"
    atomic_write_bytes(output_dir / "stats.json", summary.encode("utf-8"))
    write_manifest(output_dir, manifest)
    failed = len(rows) - len(written)
    (log.warning if failed else log.info)(
        "wrote %s: %d of %d shots (missing %d)", output_dir, len(written), len(rows), failed
    )


__all__ = [
    "DATASETS",
    "LoadedDataset",
    "RefMedia",
    "ShotSystem",
    "generate",
    "load_dataset",
    "resolve_shot_system",
    "shot_inputs",
]
