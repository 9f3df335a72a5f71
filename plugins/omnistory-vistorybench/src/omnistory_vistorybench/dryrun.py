"""``engine.dry_run=true`` for a ViStoryBench job: plan it without loading or calling any model.

:func:`plan_job` walks the job's stages as :func:`omnistory_vistorybench.generate.generate`
runs them (the optional planner stage, then the image stage), answering each from the store,
read only, instead of calling the component:

* every call's key is the real run's: the same shot inputs (:func:`~.generate.shot_pools`), the
  same projection on the component's ``reads``, the same calls (``call_units``: a group-unit
  expert makes one call per story) and the same reuse rule (``needs_recompute`` under
  ``engine.retry_failures``, the planner's unusable plans, the component's declaration), so a
  dry run after a real run finds 0 calls to make;
* an image call reads the plan's ``image_prompt``.  A stored, usable plan gives the real prompt
  (and a failed plan no image call, as in the run); a plan still to make stands for itself as
  ``{"__upstream_call__": <planner call key>, "field": "image_prompt"}``, so two systems sharing
  that planner call and that expert share one image call, as the core's dry run names them.  The
  plan assumes every planner call still to make succeeds (a failed plan means fewer image calls);
* a hosted planner's calls are priced through its ``pricing()`` and ``estimate()`` (the prompt
  it would send), GPU-hours through ``engine.plan`` as the core's dry run does.

Nothing is loaded, called, stored or written to the job directory but the plan: a single run
writes ``sweep_plan.json`` in its job directory and prints the table; a job of a ``-m`` sweep
writes ``dry_run.json`` there, which the sweep callback merges (with the other jobs', and with
the evaluation's plan when ``evaluation.metrics`` are set) into ``<sweep dir>/sweep_plan.json``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from omnistory_core.api import Component, ConfigError, Failure
from omnistory_core.kit.jobs import (
    JOB_FILE,
    CallRecord,
    MediaHasher,
    PlanSettings,
    ReadOnlyStore,
    StageItem,
    Store,
    atomic_write_bytes,
    call_units,
    declaration_of,
    item_key,
    merge_plans,
    needs_recompute,
    render_plan,
    retry_mode,
    write_plan,
)
from omnistory_vistorybench.task import VISTORYBENCH

log = logging.getLogger("omnistory")

#: names the call that makes a value still to compute (the core's dry run's spelling)
UPSTREAM = "__upstream_call__"
#: a sweep job's plan in its job directory (read by the evaluation's plan of that job)
PLANNED_JOB = JOB_FILE

#: a stored record, or None: a call still to make, or the failure that blocks the call
Answer = CallRecord | Failure | None


def plan_settings(engine: Mapping[str, Any]) -> PlanSettings:
    """``engine.plan`` checked, a bad value as a :class:`ConfigError` (one line, exit 2)."""
    node = engine.get("plan")
    try:
        return PlanSettings.from_config(node if isinstance(node, Mapping) else {})
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def symbolic(call_key: str, field: str) -> dict[str, str]:
    """The stand-in for ``field`` of the output of a call still to make."""
    return {UPSTREAM: call_key, "field": field}


def _gpus(component: Component) -> int:
    """GPUs one call holds (a tensor-parallel model declares ``gpus()``), for GPU-hours."""
    base = getattr(component, "_component", component)  # an isolated component: the real one
    declared = getattr(base, "gpus", None)
    if callable(declared):
        n = declared()
        if n is not None:
            return max(0, int(n))
    return 1


def stage_entry(component: Component, settings: PlanSettings, label: str) -> dict[str, Any]:
    """The component's entry of the job's plan (the fields :func:`merge_plans` reads)."""
    pricing = component.pricing()
    seconds, source = settings.seconds_per_call(
        component.key(), getattr(component, "uses_gpu", None)
    )
    return {
        "pending": [],
        "cached": [],
        "estimates": {},
        "group": label,
        "seconds_per_call": seconds,
        "seconds_source": source,
        "price_source": pricing.source if pricing is not None else None,
        "gpus": _gpus(component) if seconds else 0,
    }


def plan_stage(
    component: Component,
    label: str,
    items: list[StageItem],
    store: Store,
    mode: str,
    settings: PlanSettings,
    derived_failure: Callable[[CallRecord], bool] | None = None,
) -> tuple[dict[str, Any], dict[int, Answer], dict[int, str]]:
    """One stage answered from the store: its plan entry, per item its usable record (None: a
    call still to make; a Failure: the upstream failure that blocks it), and per item the name
    of its call (the key; ``<key>#<position>`` for a member of a group call)."""
    entry = stage_entry(component, settings, label)
    pricing = component.pricing()
    declaration = declaration_of(component)
    units = call_units(component, items)
    answers: dict[int, Answer] = {}
    names: dict[int, str] = {}
    seen: dict[str, CallRecord | None] = {}
    for unit in units.items:
        if unit.blocked_by is not None:
            answers[unit.index] = unit.blocked_by
            continue
        key = unit.key or item_key(component, unit.inputs or {})
        if key not in seen:
            record = store.get(key)
            usable = record is not None and not needs_recompute(
                record, mode, derived_failure, declaration
            )
            seen[key] = record if usable else None
            if usable:
                entry["cached"].append(key)
            else:
                entry["pending"].append(key)
                if pricing is not None:
                    entry["estimates"][key] = component.estimate(
                        unit.inputs or {}, pricing, settings.output_tokens
                    )
        answers[unit.index] = seen[key]
        members = units.members.get(unit.index)
        if members is None:
            names[unit.index] = key
        else:
            names.update({m: f"{key}#{p}" for p, m in enumerate(members)})
    return entry, dict(units.split(answers)), names


def plan_job(
    *,
    image: Component,
    planner: Component | None,
    data: Any,
    store: Store,
    retry_failures: bool | str,
    settings: PlanSettings,
    media: MediaHasher | None = None,
) -> dict[str, Any]:
    """The job's keys per component in stage order (``pending`` and ``cached``), the planner's
    estimates, the components that cannot run here, and ``candidates``: per shot its image,
    ``{"blob", "ext"}`` when stored, ``{"pending": call}`` when still to make, None when it
    will be missing.  ``data``: the job's :class:`~.generate.LoadedDataset`."""
    from omnistory_core.kit.jobs import preflight
    from omnistory_vistorybench.generate import apply_plans, project, shot_pools
    from omnistory_vistorybench.planning import unusable_plan

    mode = retry_mode(retry_failures)
    pools = shot_pools(data, media or MediaHasher())
    if image.kind == "backbone":  # a backbone reads each shot as a page, as the run gives it
        from omnistory_vistorybench.backbones import page_pools

        pools = page_pools(pools)
    components: dict[str, Any] = {}
    blocked: dict[int, Failure] = {}
    if planner is not None:
        items = [
            StageItem(r.index, project(planner, pools[r.index]), group=r.group, example=r.id)
            for r in data.records
        ]
        entry, plans, plan_names = plan_stage(
            planner, "planner", items, store, mode, settings, unusable_plan
        )
        components[planner.key()] = entry
        known = {i: p for i, p in plans.items() if p is not None}
        blocked = apply_plans(pools, known)  # the real prompts, or no image call
        for index, plan in plans.items():
            if plan is None:  # a plan still to make: its prompt is named by its call
                pools[index]["image_prompt"] = symbolic(plan_names[index], "image_prompt")
    items = [
        StageItem(r.index, blocked_by=blocked[r.index], group=r.group, example=r.id)
        if r.index in blocked
        else StageItem(r.index, project(image, pools[r.index]), group=r.group, example=r.id)
        for r in data.records
    ]
    entry, images, image_names = plan_stage(image, "image", items, store, mode, settings)
    components[image.key()] = entry
    present = [c for c in (planner, image) if c is not None]
    return {
        "components": components,
        "cannot_run_here": [f"{c.kind}={c.name}: {exc}" for c, exc in preflight(present)],
        "candidates": [
            {
                "index": r.index,
                "id": r.id,
                "story_id": r.group,
                "shot_index": r.shot_index,
                "image": _candidate(images[r.index], image_names, r),
            }
            for r in data.records
        ],
    }


def _candidate(value: Answer, names: Mapping[int, str], record: Any) -> dict[str, Any] | None:
    if value is None:
        return {"pending": names[record.index]}
    output = value.output if isinstance(value, CallRecord) else {}
    if isinstance(output.get("image"), dict):  # a backbone's record: its image
        output = output["image"]
    if isinstance(value, CallRecord) and value.status == "ok" and output.get("blob"):
        return {"blob": str(output["blob"]), "ext": str(output.get("ext", "png"))}
    return None  # a stored failure, or a failed plan: the shot will have no image


def planned_layout(
    config: Mapping[str, Any], method: str, language: str, output_dir: Path
) -> dict[str, str]:
    """The manifest's ``layout`` the run would write: its timestamp is ``task.run_timestamp``,
    else the one an earlier run of this job directory used, else now (a fresh job)."""
    import time

    from omnistory_vistorybench.generate import (
        OUTPUTS_DIR,
        _format,
        existing_timestamp,
        layout_info,
        run_settings,
    )

    mode, fixed = run_settings(config)
    method_root = output_dir / OUTPUTS_DIR / method / mode / language
    timestamp = fixed or existing_timestamp(method_root) or _format(time.time())
    return layout_info(method, mode, language, timestamp)


# -- the evaluation's plan of a planned job ---------------------------------------------------
class PlannedMedia:
    """The media hasher of a planned job's units: a shot path the run will write gives that
    shot's planned image (``Media`` of its stored blob, or a stand-in naming the call that will
    make it), any other file (a reference image) is hashed as usual.  The evaluation builds the
    planned job's units with its own :func:`~.evaluation.run_units` through it, so they are
    keyed exactly as the units of the job directory the run will write."""

    def __init__(self, planned: Mapping[str, Any], media: MediaHasher):
        self.planned = planned
        self.media = media

    def __call__(self, path: Any) -> Any:
        key = str(path)
        return self.planned[key] if key in self.planned else self.media(key)


def planned_source(job: Path, options: Mapping[str, Any]) -> Any:
    """The evaluation's record (``evaluation._Source``) of a job a dry-run sweep planned, from
    its ``dry_run.json``: the run it will write (its layout), each shot it will have an image
    for, its dataset and store.  A plan that cannot be read is one line naming the file."""
    from omnistory_core.api import Media
    from omnistory_vistorybench import layout
    from omnistory_vistorybench.evaluation import EvaluationError, _Source, run_label

    path = job / PLANNED_JOB
    try:
        plan = json.loads(path.read_text(encoding="utf-8"))
        info = plan["layout"]
        key = layout.RunKey(
            str(info["method"]), str(info["mode"]), str(info["language"]), str(info["timestamp"])
        )
        candidates = [
            (str(c["story_id"]), int(c["shot_index"]), c.get("image"))
            for c in plan.get("candidates") or []
        ]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise EvaluationError(f"{path}: cannot read the job's plan: {exc}") from None
    outputs = job / str(info.get("outputs") or "outputs")
    stories: dict[str, layout.StoryOutputs] = {}
    planned: dict[str, Any] = {}
    for story, index, image in candidates:
        if image is None:
            continue  # a stored failure or a failed plan: the shot will have no image
        file = layout.shot_path(outputs, *key, story, index)
        found = stories.setdefault(story, layout.StoryOutputs(file.parent.parent, {}, {}))
        found.shots[index] = file
        if "pending" in image:
            planned[str(file)] = {UPSTREAM: str(image["pending"]), "modality": "image"}
        else:
            planned[str(file)] = Media(path=str(file), sha256=str(image["blob"]))
    dataset = dict(plan.get("dataset") or {})
    recorded = dict(dataset.get("spec") or {})
    spec = {k: recorded[k] for k in ("name", "root", "split", "stories") if k in recorded}
    if spec.get("name") == "vistory_fixture":
        spec["root"] = None  # the installed fixture (held to the recorded fingerprint)
    spec.update(options)
    return _Source(
        system=run_label(key),
        path=job,
        run=layout.OutputRun(key, "A", outputs / Path(*key), dict(sorted(stories.items()))),
        spec=spec,
        fingerprint=None if options.get("root") else dataset.get("fingerprint"),
        where=str(path),
        store=plan.get("store"),
        planned=planned,
    )


def job_number() -> tuple[bool, int]:
    """Whether this job is one of a ``-m`` sweep, and its number there."""
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        hydra = HydraConfig.get()
    except Exception:  # noqa: BLE001 - not inside a Hydra app (a test calling generate)
        return False, 0
    multirun = hydra.mode == RunMode.MULTIRUN
    return multirun, int(hydra.job.num) if multirun and hydra.job.num is not None else 0


def evaluation_note(config: Mapping[str, Any]) -> list[str]:
    """A single run's note when ``evaluation.metrics`` are set: only a ``-m`` sweep evaluates."""
    node = config.get("evaluation")
    evaluation = node if isinstance(node, Mapping) else {}
    if not (evaluation.get("metrics") or evaluation.get("judges")):
        return []
    return [
        "evaluation.metrics / evaluation.judges are set, but a single run does not evaluate (the"
        " evaluation runs at the end of a -m sweep): no evaluator is planned. `python -m"
        " omnistory_core evaluate RUN_DIR` scores the run afterwards (`--dry-run` plans it)."
    ]


def dry_run(
    config: Mapping[str, Any],
    system: Any,
    data: Any,
    image: Component,
    planner: Component | None,
    output_dir: Path,
) -> dict[str, Any]:
    """Plan one job (``system``: its :class:`~.generate.ShotSystem`, the components built, not
    loaded); writes its keys (in a sweep) or the whole plan and table (a single run)."""
    from omnistory_core.kit.jobs import maybe_isolate

    engine = config.get("engine") or {}
    settings = plan_settings(engine)
    store_root = Path(str(engine.get("store") or "outputs/store")).resolve()
    # as the run wraps it (an isolated expert checks its interpreter here); starts nothing
    runnable = maybe_isolate(image, system.image.get("runner"), store_root)
    job = plan_job(
        image=runnable,
        planner=planner,
        data=data,
        store=ReadOnlyStore(store_root),
        retry_failures=engine.get("retry_failures", "errors"),
        settings=settings,
    )
    multirun, number = job_number()
    job.update(
        system_id=system.system_id,
        job=number,
        task=VISTORYBENCH.name,
        dataset={"spec": data.spec, "fingerprint": data.fingerprint},
        store=str(store_root),
        # where the run will write its images, for the evaluation's plan of this job
        layout=planned_layout(config, system.system_id, data.spec["language"], output_dir),
    )
    output_dir.mkdir(parents=True, exist_ok=True)
    if multirun:
        atomic_write_bytes(output_dir / JOB_FILE, (json.dumps(job) + "\n").encode("utf-8"))
        log.info("dry run: %s planned (%s)", system.system_id, output_dir / JOB_FILE)
        return job
    plan = merge_plans([job], settings)
    plan["notes"] += evaluation_note(config)
    path = write_plan(output_dir, plan)
    print(render_plan(plan, title=f"dry run of {system.system_id}"), flush=True)
    log.info("dry run: %s", path)
    return plan


__all__ = [
    "PLANNED_JOB",
    "PlannedMedia",
    "planned_source",
    "UPSTREAM",
    "dry_run",
    "plan_job",
    "plan_settings",
    "plan_stage",
    "symbolic",
]
