"""The test kit's harness of ViStoryBench (``Task.harness``; :mod:`omnistory_core.kit.harness`):
a component run on the bundled fixture exactly as a job runs it.

The pieces are the job's own (:mod:`omnistory_vistorybench.generate`): the system resolved from
the config (a planner in its ViStoryBench form, a backbone drawing the shots), each shot's inputs
(a backbone's as a page), the planner and image stages through the store, and the job's records
file.  Only the dataset differs: the fixture, cut to the first ``per_group`` shots of each story
so that a check stays cheap and still covers two stories (a story-level component's neighbour is
the other story).

The systems around a component under test are the smallest the task runs: an image expert alone,
a planner with ``image=noop`` (it draws nothing but reads the plan's image prompt), a backbone
alone.  Evaluators are checked on complete ``copy_paste`` jobs of the whole fixture.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from omnistory_core.kit.harness import HarnessExample, HarnessRun
from omnistory_core.kit.jobs import MediaHasher, StageItem, call_units, item_key

#: the fixture as a ``dataset`` config
FIXTURE: dict[str, Any] = {
    "name": "vistory_fixture",
    "root": None,
    "split": "full",
    "language": "en",
    "stories": None,
}
#: the built-in image expert behind a planner under test: it reads the plan's image prompt
PLANNER_IMAGE = "noop"
#: the system an evaluator is checked on: every shot has an image, deterministically
STANDIN_SYSTEM = "copy_paste"
_ENGINE = {"progress": False}


class VistoryHarness:
    task = "vistorybench"

    def __init__(self) -> None:
        self._loaded: Any = None

    # -- the fixture ---------------------------------------------------------------------------
    def dataset(self, per_group: int | None) -> Any:
        """The fixture (:class:`~omnistory_vistorybench.generate.LoadedDataset`), each story cut
        to its first ``per_group`` shots; read once per harness (its warnings once too)."""
        from omnistory_vistorybench.generate import load_dataset

        if self._loaded is None:
            self._loaded = load_dataset(FIXTURE)
        data = self._loaded
        if per_group is None:
            return data
        taken: dict[str, int] = {}
        kept = []
        for record in data.records:
            if taken.get(record.group, 0) < per_group:
                kept.append(record)
                taken[record.group] = taken.get(record.group, 0) + 1
        return replace(data, records=kept)

    def examples(self, per_group: int | None) -> list[HarnessExample]:
        data = self.dataset(per_group)
        return [HarnessExample(r.id, r.index, r.group) for r in data.records]

    def _pools(self, data: Any, kind: str) -> dict[int, dict[str, Any]]:
        from omnistory_vistorybench.generate import shot_pools

        pools = shot_pools(data, MediaHasher())
        if kind == "backbone":
            from omnistory_vistorybench.backbones import page_pools

            pools = page_pools(pools)
        return pools

    def items(self, per_group: int | None, kind: str) -> dict[str, dict[str, Any]]:
        data = self.dataset(per_group)
        pools = self._pools(data, kind)
        return {r.id: pools[r.index] for r in data.records}

    # -- systems -------------------------------------------------------------------------------
    def system(self, kind: str, node: Mapping[str, Any], seed: int) -> dict[str, Any]:
        config: dict[str, Any] = {kind: dict(node), "seed": seed, "engine": dict(_ENGINE)}
        if kind == "planner":
            config["image"] = {"name": PLANNER_IMAGE}
        return config

    def _build(self, registry: Any, config: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:
        from omnistory_vistorybench.generate import (
            build_image_expert,
            build_planner,
            resolve_shot_system,
        )

        system = resolve_shot_system(config, registry)
        image = build_image_expert(registry, system, config)
        planner = build_planner(registry, system, config)
        built = {"backbone" if system.backbone else "image": image}
        if planner is not None:
            built["planner"] = planner
        return system, built

    # -- runs ----------------------------------------------------------------------------------
    def run(
        self,
        registry: Any,
        config: Mapping[str, Any],
        kind: str,
        store: Any,
        *,
        per_group: int | None,
        retry_failures: bool | str = False,
    ) -> HarnessRun:
        from omnistory_vistorybench.generate import (
            apply_plans,
            run_image_stage,
            run_planner_stage,
        )

        data = self.dataset(per_group)
        system, built = self._build(registry, config)
        engine = {**_ENGINE, **dict(config.get("engine") or {}), "retry_failures": retry_failures}
        pools = self._pools(data, "backbone" if system.backbone else kind)
        stats: dict[str, Any] = {}
        plans: dict[int, Any] = {}
        if "planner" in built:
            plans, planner_stats = run_planner_stage(built["planner"], data, pools, store, engine)
            stats.update(planner_stats)
        blocked = apply_plans(pools, plans)
        drawer = built.get("image") or built["backbone"]
        drawn, image_stats = run_image_stage(drawer, system, data, store, engine, pools, blocked)
        stats.update(image_stats)
        images = drawn
        if system.backbone:
            from omnistory_vistorybench.backbones import shot_images

            images = shot_images(drawn)
        component = built[kind]
        results = plans if kind == "planner" else drawn
        records = {r.id: results.get(r.index) for r in data.records}
        state = {
            "data": data,
            "images": images,
            "outputs": {"image": {r.id: images[r.index] for r in data.records}},
            "plans": plans,
            "system": system,
            "store": store,
            "stats": stats,
        }
        keys = {i: getattr(rec, "key", "") for i, rec in records.items()}
        return HarnessRun(records, stats[component.key()], component, state, keys)

    def call_keys(
        self, registry: Any, config: Mapping[str, Any], kind: str, *, per_group: int | None
    ) -> dict[str, str]:
        from omnistory_vistorybench.generate import project

        data = self.dataset(per_group)
        system, built = self._build(registry, config)
        component = built[kind]
        pools = self._pools(data, "backbone" if system.backbone else kind)
        items = [
            StageItem(r.index, project(component, pools[r.index]), group=r.group, example=r.id)
            for r in data.records
        ]
        units = call_units(component, items)
        keys: dict[int, str] = {}
        for unit in units.items:
            key = unit.key or item_key(component, unit.inputs or {})
            for member in units.members.get(unit.index, [unit.index]):
                keys[member] = key
        return {r.id: keys[r.index] for r in data.records}

    def write_job(self, run: HarnessRun, job_dir: Path) -> dict[str, dict[str, Any]]:
        """The job's own writers: the official layout, ``records.jsonl``, ``missing.txt``,
        ``stats.json`` and a manifest naming the system (the check needs no more)."""
        import json

        from omnistory_vistorybench.generate import finish_job, write_job_outputs

        state = run.state
        job_dir = Path(job_dir)
        rows, missing, written = write_job_outputs(
            job_dir,
            state["system"].system_id,
            "base",
            "20000101_000000",
            state["data"],
            state["images"],
            state["store"],
            state["plans"] or None,
        )
        manifest = {"status": "complete", "task": {"name": self.task}}
        finish_job(job_dir, rows, missing, written, state["stats"], manifest)
        lines = (job_dir / "records.jsonl").read_text(encoding="utf-8").splitlines()
        return {row["id"]: row for row in map(json.loads, lines)}

    def standin_run(self, root: Path) -> list[Path]:
        from omnistory_vistorybench.generate import generate

        job = Path(root) / "runs" / STANDIN_SYSTEM
        config = {
            "task": {"name": self.task, "mode": "base", "run_timestamp": "20000101_000000"},
            "dataset": dict(FIXTURE),
            "image": {"name": STANDIN_SYSTEM},
            "system_id": STANDIN_SYSTEM,
            "seed": 0,
            "engine": {"store": str(Path(root) / "generation-store"), "progress": False},
        }
        generate(config, job)
        return [job]


__all__ = ["FIXTURE", "PLANNER_IMAGE", "STANDIN_SYSTEM", "VistoryHarness"]
