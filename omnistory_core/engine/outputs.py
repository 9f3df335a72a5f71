"""Materialize a job's result as its job directory (the format: :mod:`omnistory_core.jobdir`).

Turns each example's outcomes (narration, the store's blobs, failures) and plan into the values
:func:`~omnistory_core.jobdir.write_job_dir` writes, and logs the failure summary (per modality and
category, with the most common cause).  ``manifest.json`` is written last by the caller: a job
directory without it is incomplete, whatever else it holds.
"""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path
from typing import Any

from omnistory_core.contract import MODALITIES, Failure, StoryExample
from omnistory_core.engine.job import JobResult
from omnistory_core.engine.store import CallRecord, Store
from omnistory_core.engine.walk import PlanOutcome, plan_record
from omnistory_core.jobdir import ExampleOutputs, missing_counts, write_job_dir

log = logging.getLogger("omnistory")


def text_outcome(result: JobResult, index: int) -> str | Failure:
    """The narration of one example, or why there is none."""
    return result.text[index]


def _plan_entry(outcome: PlanOutcome) -> dict[str, Any]:
    """The example's ``plans.jsonl`` fields (besides its index and id)."""
    return {
        "raw": outcome.raw,
        "plan": plan_record(outcome),
        "repairs": outcome.repairs,
        "failure": outcome.failure.to_dict() if outcome.failure else None,
        "problems": {k: v.to_dict() for k, v in outcome.problems.items()},
        "usage": outcome.usage,
        "call_key": outcome.key,
    }


def _candidate(value: str | Failure | CallRecord, store: Store) -> str | Path | Failure:
    """A narration stays text, a stored blob becomes the file to link, a failed call its failure."""
    failure = _as_failure(value)
    if failure is not None:
        return failure
    if isinstance(value, str):
        return value
    assert isinstance(value, CallRecord)  # a Failure is never "no failure"
    return store.blob_path(value.output["blob"], value.output.get("ext", ""))


def example_outputs(result: JobResult, example: StoryExample, store: Store) -> ExampleOutputs:
    """What one example of the job leaves in its directory."""
    i = example.index
    outcomes: dict[str, str | Failure | CallRecord] = {
        "text": text_outcome(result, i),
        "image": result.media["image"][i],
        "speech": result.media["speech"][i],
    }
    return ExampleOutputs(
        index=i,
        example_id=example.id,
        candidates={m: _candidate(v, store) for m, v in outcomes.items()},
        plan=_plan_entry(result.plans[i]),
    )


def materialize(job_dir: Path, result: JobResult, store: Store) -> dict[str, int]:
    """Write the candidate layout and records; returns missing-output counts per modality."""
    missing = write_job_dir(
        job_dir,
        [example_outputs(result, ex, store) for ex in result.examples],
        {k: s.to_dict() for k, s in result.stats.items()},
    )
    failures = [(m.modality, m.failure) for m in missing]
    for line in failure_summary(failures, len(result.examples)):
        (log.warning if failures else log.info)("%s", line)
    return missing_counts(missing)


def _cause(failure: Failure) -> tuple[str | None, str]:
    """What groups failures in the summary: messages differ in detail (the bytes a parser choked
    on), so a located exception is grouped by type and location."""
    if failure.where:
        return failure.exception, failure.where
    return None, " ".join(failure.message.split())


def failure_summary(
    failures: list[tuple[str, Failure]],
    n_examples: int,
    modalities: tuple[str, ...] = MODALITIES,
) -> list[str]:
    """Log lines: how many outputs are missing, then per modality and category the count and the
    most common cause (with where the component's code broke).  ``modalities``: the output
    slots each example has (a task's, e.g. ``("image",)`` for a ViStoryBench shot)."""
    total = n_examples * len(modalities)
    if not failures:
        return [f"failures: none ({total} of {total} outputs present)"]
    counts = Counter(m for m, _ in failures)
    lines = [
        f"failures: {len(failures)} of {total} outputs missing ("
        + ", ".join(f"{m} {counts.get(m, 0)}" for m in modalities)
        + ")"
    ]
    groups: dict[tuple[str, str], list[Failure]] = {}
    for modality, failure in failures:
        groups.setdefault((modality, failure.category), []).append(failure)
    width = max(len(c) for _, c in groups)
    for (modality, category), items in sorted(
        groups.items(), key=lambda kv: (modalities.index(kv[0][0]), -len(kv[1]), kv[0][1])
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
