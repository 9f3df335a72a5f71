"""Write a job's results: the official candidate layout plus our plan/failure records.

``<job>/text/<i>/generated.txt``, ``image/<i>/generated.png``, ``speech/<i>/generated.wav`` (the
official evaluator's input layout, i = dataset row index); ``missing.txt`` (one line per missing
output: ``index<TAB>modality<TAB>category<TAB>message (at pkg/module.py:LINE)``); ``plans.jsonl``
(raw planner output, parsed plan, repairs, failure); ``records.jsonl`` (per example and modality:
ok + path, or the failure with ``exception`` and ``where`` for a component exception);
``stats.json`` (calls per component, missing outputs per modality and category).  The failure
summary (per modality and category, with the most common cause) goes to the log.
``manifest.json`` is written last by the caller: a job directory without it is incomplete,
whatever else it holds.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

from omnistory_core.contract import MODALITIES, Failure
from omnistory_core.engine.job import PLAN_PATHS, JobResult
from omnistory_core.engine.store import CallRecord, Store, atomic_write_bytes

log = logging.getLogger("omnistory")

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
    failures: list[tuple[str, Failure]] = []
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
                    assert isinstance(value, CallRecord)  # a Failure is never "no failure"
                    blob = store.blob_path(value.output["blob"], value.output.get("ext", ""))
                    _link_or_copy(blob, target)
                row[modality] = {"status": "ok", "path": rel}
            else:
                missing[modality] += 1
                row[modality] = {"status": "failure", **failure.to_dict()}
                failures.append((modality, failure))
                missing_lines.append(f"{i}\t{modality}\t{failure.category}\t{failure.describe()}\n")
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
    by_category: dict[str, dict[str, int]] = {m: {} for m in MODALITIES}
    for modality, failure in failures:
        counts = by_category[modality]
        counts[failure.category] = counts.get(failure.category, 0) + 1
    stats = {
        "components": {k: s.to_dict() for k, s in sorted(result.stats.items())},
        "missing": by_category,
    }
    atomic_write_bytes(job_dir / "stats.json", (json.dumps(stats, indent=2) + "\n").encode())
    for line in failure_summary(failures, len(result.examples)):
        (log.warning if failures else log.info)("%s", line)
    return missing


def _cause(failure: Failure) -> tuple[str | None, str]:
    """What groups failures in the summary: messages differ in detail (the bytes a parser choked
    on), so a located exception is grouped by type and location."""
    if failure.where:
        return failure.exception, failure.where
    return None, " ".join(failure.message.split())


def failure_summary(failures: list[tuple[str, Failure]], n_examples: int) -> list[str]:
    """Log lines: how many outputs are missing, then per modality and category the count and the
    most common cause (with where the component's code broke)."""
    total = n_examples * len(MODALITIES)
    if not failures:
        return [f"failures: none ({total} of {total} outputs present)"]
    counts = Counter(m for m, _ in failures)
    lines = [
        f"failures: {len(failures)} of {total} outputs missing ("
        + ", ".join(f"{m} {counts.get(m, 0)}" for m in MODALITIES)
        + ")"
    ]
    groups: dict[tuple[str, str], list[Failure]] = {}
    for modality, failure in failures:
        groups.setdefault((modality, failure.category), []).append(failure)
    width = max(len(c) for _, c in groups)
    for (modality, category), items in sorted(
        groups.items(), key=lambda kv: (MODALITIES.index(kv[0][0]), -len(kv[1]), kv[0][1])
    ):
        causes = Counter(_cause(f) for f in items)
        top = causes.most_common(1)[0][0]
        example = next(f for f in items if _cause(f) == top)
        message = " ".join(example.message.split())
        if len(message) > 200:
            message = message[:197] + "..."
        cause = f"{message} (at {example.where})" if example.where else message
        others = len(causes) - 1
        more = f" (+{others} other cause{'s' if others != 1 else ''})" if others else ""
        lines.append(f"  {modality:<6} {category:<{width}} {len(items):>5}  {cause}{more}")
    return lines


def _as_failure(value: str | Failure | CallRecord) -> Failure | None:
    if isinstance(value, Failure):
        return value
    if isinstance(value, CallRecord) and value.status != "ok":
        return Failure.from_dict(value.failure or {"category": "model_error"})
    return None
