"""Write a job's results: the official candidate layout plus our plan/failure records.

``<job>/text/<i>/generated.txt``, ``image/<i>/generated.png``, ``speech/<i>/generated.wav`` (the
official evaluator's input layout, i = dataset row index); ``missing.txt`` (one line per missing
output: ``index<TAB>modality<TAB>category<TAB>message``); ``plans.jsonl`` (raw planner output,
parsed plan, repairs, failure); ``records.jsonl`` (per example and modality: ok + path, or the
failure); ``stats.json``.  ``manifest.json`` is written last by the caller: a job directory without
it is incomplete, whatever else it holds.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from omnistory_core.contract import MODALITIES, Failure
from omnistory_core.engine.job import PLAN_PATHS, JobResult
from omnistory_core.engine.store import CallRecord, Store, atomic_write_bytes

OUTPUT_FILES = {"text": "generated.txt", "image": "generated.png", "speech": "generated.wav"}


def _link_or_copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(f".{dst.name}.tmp")
    if tmp.exists():
        tmp.unlink()
    try:
        os.link(src, tmp)  # blobs are immutable: a hard link costs no space
    except OSError:
        shutil.copyfile(src, tmp)
    os.replace(tmp, dst)


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    text = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows)
    atomic_write_bytes(path, text.encode("utf-8"))


def text_outcome(result: JobResult, index: int) -> str | Failure:
    """The narration of one example, or why there is none."""
    return result.text[index]


def _plan_record(outcome) -> dict[str, Any] | None:
    """The plan as the experts saw it: complete (a planner) or the fields a backbone gave."""
    if outcome.plan is not None:
        return outcome.plan.to_dict()
    if not outcome.fields:
        return None
    plan: dict[str, Any] = {}
    for name, value in outcome.fields.items():
        path = PLAN_PATHS[name]
        if path.startswith("speech."):
            plan.setdefault("speech", {})[path.split(".", 1)[1]] = value
        else:
            plan[path] = value
    return plan


def materialize(job_dir: Path, result: JobResult, store: Store) -> dict[str, int]:
    """Write the candidate layout and records; returns missing-output counts per modality."""
    manifest = job_dir / "manifest.json"
    if manifest.exists():
        manifest.unlink()  # from here on the directory is not complete
    for modality in MODALITIES:
        shutil.rmtree(job_dir / modality, ignore_errors=True)

    missing_lines: list[str] = []
    records: list[dict[str, Any]] = []
    plans: list[dict[str, Any]] = []
    missing = dict.fromkeys(MODALITIES, 0)
    for ex in result.examples:
        i = ex.index
        row: dict[str, Any] = {"index": i, "example_id": ex.id}
        outcomes: dict[str, str | Failure | CallRecord] = {
            "text": text_outcome(result, i),
            "image": result.media["image"][i],
            "speech": result.media["speech"][i],
        }
        for modality, value in outcomes.items():
            rel = f"{modality}/{i}/{OUTPUT_FILES[modality]}"
            failure = _as_failure(value)
            if failure is None:
                target = job_dir / rel
                if isinstance(value, str):
                    atomic_write_bytes(target, value.encode("utf-8"))
                else:
                    blob = store.blob_path(value.output["blob"], value.output.get("ext", ""))
                    _link_or_copy(blob, target)
                row[modality] = {"status": "ok", "path": rel}
            else:
                missing[modality] += 1
                row[modality] = {"status": "failure", **failure.to_dict()}
                message = " ".join(failure.message.split())
                missing_lines.append(f"{i}\t{modality}\t{failure.category}\t{message}\n")
        records.append(row)
        outcome = result.plans[i]
        plans.append(
            {
                "index": i,
                "example_id": ex.id,
                "raw": outcome.raw,
                "plan": _plan_record(outcome),
                "repairs": outcome.repairs,
                "failure": outcome.failure.to_dict() if outcome.failure else None,
                "problems": {k: v.to_dict() for k, v in outcome.problems.items()},
                "usage": outcome.usage,
                "call_key": outcome.key,
            }
        )
    _jsonl(job_dir / "records.jsonl", records)
    _jsonl(job_dir / "plans.jsonl", plans)
    atomic_write_bytes(job_dir / "missing.txt", "".join(missing_lines).encode("utf-8"))
    stats = {"components": {k: s.to_dict() for k, s in sorted(result.stats.items())}}
    atomic_write_bytes(job_dir / "stats.json", (json.dumps(stats, indent=2) + "\n").encode())
    return missing


def _as_failure(value: str | Failure | CallRecord) -> Failure | None:
    if isinstance(value, Failure):
        return value
    if isinstance(value, CallRecord) and value.status != "ok":
        return Failure.from_dict(value.failure or {"category": "model_error"})
    return None
