"""The evaluation's record of a job that a dry-run sweep planned but did not run: the run it will
write, read from the job's plan (``dry_run.json``), each shot's image as the run will write it
(stored, or a stand-in naming the call that will make it), so the evaluation's plan of that job
is keyed exactly as the evaluation of the job directory the run will write.

Between :mod:`omnistory_vistorybench.sources` (the runs found on disk) and
:mod:`omnistory_vistorybench.evaluation`; :mod:`omnistory_vistorybench.dryrun` writes the plans.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omnistory_core.kit.jobs import JOB_FILE, MediaHasher
from omnistory_vistorybench.sources import EvaluationError, _Source, run_label

#: names the call that makes a value still to compute (the core's dry run's spelling)
UPSTREAM = "__upstream_call__"
#: a sweep job's plan in its job directory (read by the evaluation's plan of that job)
PLANNED_JOB = JOB_FILE


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
    """The evaluation's record (``sources._Source``) of a job a dry-run sweep planned, from
    its ``dry_run.json``: the run it will write (its layout), each shot it will have an image
    for, its dataset and store.  A plan that cannot be read is one line naming the file."""
    from omnistory_core.api import Media
    from omnistory_vistorybench import layout

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


__all__ = ["PLANNED_JOB", "UPSTREAM", "PlannedMedia", "planned_source"]
