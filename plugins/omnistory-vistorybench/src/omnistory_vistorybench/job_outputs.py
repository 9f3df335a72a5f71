"""A ViStoryBench job's directory: the run's settings (``<mode>``, the fixed timestamp), the
official layout's run folder it writes (an earlier run's timestamp reused), the records, missing
shots, statistics and manifest, and the pruning of a re-run's stale images.

Below the job (:mod:`omnistory_vistorybench.generate`) and its dry run, which plans the same
layout.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from omnistory_core.api import ConfigError, Failure
from omnistory_core.kit.jobs import (
    CallRecord,
    ComponentStats,
    Store,
    atomic_write_bytes,
)
from omnistory_vistorybench import declared, layout, runs
from omnistory_vistorybench.shots import LoadedDataset, ShotSystem

log = logging.getLogger("omnistory")

DEFAULT_MODE = runs.DEFAULT_MODE
OUTPUTS_DIR = "outputs"


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
        "task": {"name": declared.NAME, "version": declared.VERSION},
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
    log_failure_summary(rows)


def log_failure_summary(rows: Sequence[Mapping[str, Any]]) -> None:
    """The failure summary every task's run ends with: per category the count and the most
    common cause, with where the component's code broke."""
    from omnistory_core.kit.jobs import failure_summary

    failures = [("image", Failure.from_dict(dict(r))) for r in rows if r["status"] != "ok"]
    for line in failure_summary(failures, len(rows), ("image",)):
        (log.warning if failures else log.info)("%s", line)


__all__ = [
    "DEFAULT_MODE",
    "OUTPUTS_DIR",
    "existing_timestamp",
    "finish_job",
    "job_manifest",
    "job_stats",
    "layout_info",
    "log_failure_summary",
    "paradigm",
    "prune_stale",
    "record_failure",
    "run_settings",
    "write_job_outputs",
]
