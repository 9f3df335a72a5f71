"""``human import``: a Label Studio JSON export -> ``kind: human`` rows of the scores table.

The export is Label Studio's JSON format: a list of tasks, each with the ``data`` written by
``human export`` (``item_id``) and ``annotations``::

    [{"id": 17, "data": {"item_id": "item-…", "html": "…"},
      "annotations": [{"id": 5, "completed_by": 3, "was_cancelled": false,
                       "result": [{"from_name": "continuity", "to_name": "item",
                                   "type": "rating", "value": {"rating": 7}}, …]}]}, …]

One *evaluation* is one annotator's annotation of one item.  A scored evaluation (all four rubric
ratings present) gives four rows ``{"kind": "human", "evaluator": "annotator:<id>", "criterion":
<the track's criterion>, "score": 1–10, "status": "ok"}``; a skipped (``was_cancelled``) or
unscored (not all four ratings) evaluation gives four ``invalid`` rows without a score whose
``cause`` is ``skipped`` or ``unscored: …`` — Table 18 counts them as submitted but not scored.
``<Choices>`` controls whose choice is the number are accepted as well as ``<Rating>``.

Importing replaces every ``human`` row already in the scores table and copies the plan next to it
(``human_plan.json``: the planned items of Table 18).  Any problem — a file that is not a Label
Studio export, a task whose ``item_id`` is not in the plan, a rating outside 1–10, an unknown
control — raises :class:`HumanImportError` naming the file, the task and the field, before anything
is written.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omnistory_eval.judges.rubric import CRITERIA, SCORE_MAX, SCORE_MIN

from omnistory_core.scores import ScoreRow, read_scores, write_scores
from omnistory_report.analysis.human import PLAN_SIDECAR
from omnistory_report.human.export import HumanPlan, PlannedItem, read_plan
from omnistory_report.human.labelstudio import CONTROLS, DATA_ITEM_ID


class HumanImportError(ValueError):
    """The export (or plan, or scores table) cannot be imported; nothing was written."""


@dataclass(frozen=True)
class ImportSummary:
    tasks: int
    submitted: int
    scored: int
    skipped: int
    rows: int


def plan_sidecar(scores_path: str | Path) -> Path:
    """Where ``human import`` keeps the plan next to a scores table."""
    return Path(scores_path).with_name(PLAN_SIDECAR)


def _annotator(ann: dict[str, Any], where: str) -> str:
    who = ann.get("completed_by")
    if isinstance(who, dict):
        who = who.get("id", who.get("email"))
    if who is None or isinstance(who, bool) or not isinstance(who, int | str) or who == "":
        raise HumanImportError(f"{where}: field 'completed_by' must name the annotator")
    return f"annotator:{who}"


def _rating(result: dict[str, Any], where: str) -> float:
    value = result.get("value")
    if not isinstance(value, dict):
        raise HumanImportError(f"{where}: field 'value' must be an object")
    if "rating" in value:
        raw: Any = value["rating"]
        field = "value.rating"
    elif "choices" in value:
        choices = value["choices"]
        if not isinstance(choices, list) or len(choices) != 1:
            raise HumanImportError(f"{where}: field 'value.choices' must hold exactly one choice")
        raw, field = choices[0], "value.choices[0]"
        if isinstance(raw, str):
            try:
                raw = float(raw.strip())
            except ValueError:
                raise HumanImportError(
                    f"{where}: field {field} = {choices[0]!r} is not a number"
                ) from None
    else:
        raise HumanImportError(f"{where}: field 'value' has neither 'rating' nor 'choices'")
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw):
        raise HumanImportError(f"{where}: field {field} = {raw!r} is not a number")
    if raw != int(raw) or not SCORE_MIN <= raw <= SCORE_MAX:
        raise HumanImportError(
            f"{where}: field {field} = {raw!r} is outside the rubric scale "
            f"{SCORE_MIN}–{SCORE_MAX} (whole numbers)"
        )
    return float(raw)


def _evaluation_rows(
    item: PlannedItem, ann: dict[str, Any], where: str
) -> tuple[str, list[ScoreRow], bool]:
    """(annotator, the four rows, scored?) of one annotation."""
    annotator = _annotator(ann, where)
    criteria = CRITERIA[item.track]

    def rows(scores: dict[str, float] | None, cause: str | None) -> list[ScoreRow]:
        return [
            ScoreRow(
                item.system,
                item.example_id,
                "human",
                item.track,
                annotator,
                crit,
                None if scores is None else scores[crit],
                "ok" if scores is not None else "invalid",
                cause,
            )
            for crit in criteria
        ]

    if ann.get("was_cancelled"):
        return annotator, rows(None, "skipped"), False
    result = ann.get("result") or []
    if not isinstance(result, list):
        raise HumanImportError(f"{where}: field 'result' must be a list")
    scores: dict[str, float] = {}
    for r, res in enumerate(result):
        at = f"{where} result[{r}]"
        if not isinstance(res, dict):
            raise HumanImportError(f"{at}: expected an object")
        control = res.get("from_name")
        if control not in CONTROLS:
            raise HumanImportError(
                f"{at}: field 'from_name' = {control!r} is not one of the rubric controls "
                f"{list(CONTROLS)}"
            )
        crit = criteria[CONTROLS.index(control)]
        if crit in scores:
            raise HumanImportError(f"{at}: a second rating for {control!r}")
        scores[crit] = _rating(res, at)
    missing = [CONTROLS[i] for i, c in enumerate(criteria) if c not in scores]
    if missing:
        return annotator, rows(None, f"unscored: no rating for {', '.join(missing)}"), False
    return annotator, rows(scores, None), True


def parse_export(path: str | Path, plan: HumanPlan) -> tuple[list[ScoreRow], ImportSummary]:
    """The human rows of a Label Studio JSON export (errors name file, task and field)."""
    path = Path(path)
    try:
        tasks = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise HumanImportError(f"{path}: export not found") from None
    except ValueError as exc:
        raise HumanImportError(f"{path}: not valid JSON: {exc}") from exc
    if not isinstance(tasks, list):
        raise HumanImportError(
            f"{path}: not a Label Studio JSON export (expected a list of tasks, got "
            f"{type(tasks).__name__})"
        )
    items = {i.item_id: i for i in plan.items}
    rows: list[ScoreRow] = []
    seen: dict[tuple[str, str], str] = {}
    counts: Counter[str] = Counter()
    for t, task in enumerate(tasks):
        if not isinstance(task, dict):
            raise HumanImportError(f"{path}: task [{t}]: expected an object")
        where = f"{path}: task {task.get('id', f'[{t}]')}"
        data = task.get("data")
        if not isinstance(data, dict) or not isinstance(data.get(DATA_ITEM_ID), str):
            raise HumanImportError(
                f"{where}: field 'data.{DATA_ITEM_ID}' is missing (was the project created "
                "from `human export`'s tasks.json?)"
            )
        item = items.get(data[DATA_ITEM_ID])
        if item is None:
            raise HumanImportError(
                f"{where}: unknown task: data.{DATA_ITEM_ID} = {data[DATA_ITEM_ID]!r} is not in "
                "the plan (wrong --plan, or an export of another project?)"
            )
        annotations = task.get("annotations") or []
        if not isinstance(annotations, list):
            raise HumanImportError(f"{where}: field 'annotations' must be a list")
        counts["tasks"] += 1
        for a, ann in enumerate(annotations):
            if not isinstance(ann, dict):
                raise HumanImportError(f"{where} annotations[{a}]: expected an object")
            at = f"{where} annotation {ann.get('id', f'[{a}]')}"
            annotator, new, scored = _evaluation_rows(item, ann, at)
            key = (item.item_id, annotator)
            if key in seen:
                raise HumanImportError(
                    f"{at}: {annotator} already rated this task in {seen[key]}; keep one "
                    "annotation per annotator and task"
                )
            seen[key] = at
            rows.extend(new)
            counts["submitted"] += 1
            counts["scored" if scored else "skipped"] += 1
    summary = ImportSummary(
        counts["tasks"], counts["submitted"], counts["scored"], counts["skipped"], len(rows)
    )
    return rows, summary


def import_ratings(
    export_path: str | Path, scores_path: str | Path, plan_path: str | Path
) -> ImportSummary:
    """Parse the export, then replace the ``human`` rows of the scores table and store the plan
    next to it.  Nothing is written when anything is wrong."""
    try:
        plan = read_plan(plan_path)
    except ValueError as exc:
        raise HumanImportError(str(exc)) from exc
    rows, summary = parse_export(export_path, plan)
    scores_path = Path(scores_path)
    try:
        kept = (
            [r for r in read_scores(scores_path) if r.kind != "human"]
            if scores_path.is_file()
            else []
        )
    except ValueError as exc:
        raise HumanImportError(str(exc)) from exc
    write_scores(scores_path, kept + rows)
    plan_sidecar(scores_path).write_text(
        json.dumps(plan.to_dict(), indent=1) + "\n", encoding="utf-8"
    )
    return summary
