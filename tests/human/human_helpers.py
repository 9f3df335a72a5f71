"""A small run directory over the demo dataset, judge scores with known means, and a synthetic
Label Studio export whose ratings give known human means (all built in tmp_path, in seconds)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omnistory_eval.judges.rubric import CRITERIA
from omnistory_report.human.labelstudio import CONTROLS

from omnistory_core.data.demo import load_demo
from omnistory_core.scores import ScoreRow, write_scores

TRACKS = ("text", "image", "speech", "omni")
# system -> paradigm (O is an oracle: left out of the study)
SYSTEMS = {"A": "orchestration", "B": "orchestration", "C": "any-to-any", "D": "any-to-any"}
ORACLE = "O"
# the human system means by construction, per track (the ratings of an item average to these)
HUMAN = {
    "text": {"A": 6, "B": 7, "C": 8, "D": 9},
    "image": {"A": 4, "B": 5, "C": 6, "D": 7},
    "speech": {"A": 8, "B": 7, "C": 8, "D": 7},
    "omni": {"A": 5, "B": 6, "C": 7, "D": 8},
}
# the valid-only judge means per track; text has two judges whose means average to these
JUDGES: dict[str, dict[str, dict[str, float]]] = {
    "text": {
        "jt1": {"A": 4, "B": 6, "C": 8, "D": 8, "O": 9},
        "jt2": {"A": 6, "B": 6, "C": 8, "D": 6, "O": 9},
    },
    "image": {"ji": {"A": 4, "B": 5, "C": 6, "D": 7, "O": 9}},
    "speech": {"js": {"A": 7, "B": 7, "C": 8, "D": 6, "O": 9}},
    "omni": {"jo": {"A": 5, "B": 6, "C": 7, "D": 8, "O": 9}},
}


@dataclass(frozen=True)
class Study:
    root: Path
    run_dir: Path
    scores: Path
    examples: list[str]


def _png(path: Path, color: tuple[int, int, int]) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (8, 8), color).save(path)


def build_study(root: Path) -> Study:
    examples = load_demo(limit=3)
    run_dir = root / "run"
    rows: list[ScoreRow] = []
    for n, sid in enumerate([*SYSTEMS, ORACLE]):
        sdir = run_dir / f"dir-{sid}"
        manifest = {
            "system_id": sid,
            "oracle": sid == ORACLE,
            "paradigm": SYSTEMS.get(sid, "baseline"),
            "dataset": {"name": "demo", "limit": 3},
        }
        sdir.mkdir(parents=True)
        (sdir / "manifest.json").write_text(json.dumps(manifest))
        records = []
        for ex in examples:
            i = ex.index
            (sdir / "text" / str(i)).mkdir(parents=True)
            (sdir / "text" / str(i) / "generated.txt").write_text(f"{sid} says <{i}> & more")
            _png(sdir / "image" / str(i) / "generated.png", (30 * n, 10 * i, 90))
            if not (sid == "D" and i == 1):  # D has no speech for the second transition
                (sdir / "speech" / str(i)).mkdir(parents=True)
                (sdir / "speech" / str(i) / "generated.wav").write_bytes(b"RIFF-not-decoded")
            ok = {"status": "ok", "path": "x"}
            records.append({"index": i, "example_id": ex.id, "text": ok, "image": ok})
            for track, judges in JUDGES.items():
                for judge, means in judges.items():
                    for crit in CRITERIA[track]:
                        rows.append(
                            ScoreRow(sid, ex.id, "judge", track, judge, crit, means[sid], "ok")
                        )
        (sdir / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    scores = root / "scores.jsonl"
    write_scores(scores, rows)
    return Study(root, run_dir, scores, [e.id for e in examples])


def rating_result(values: dict[str, Any], kind: str = "rating") -> list[dict[str, Any]]:
    """Label Studio ``result`` entries for control -> value."""
    out = []
    for control, value in values.items():
        if kind == "rating":
            out.append(
                {
                    "id": f"r-{control}",
                    "from_name": control,
                    "to_name": "item",
                    "type": "rating",
                    "value": {"rating": value},
                    "origin": "manual",
                }
            )
        else:
            out.append(
                {
                    "from_name": control,
                    "to_name": "item",
                    "type": "choices",
                    "value": {"choices": [str(value)]},
                }
            )
    return out


def synthetic_export(export_dir: Path) -> list[dict[str, Any]]:
    """A Label Studio JSON export of ``export_dir``'s project.

    Every item gets two scored annotations (annotators 1 and 2) whose scores average to the
    system's ``HUMAN`` mean: on the first window transition annotator 1 rates one below and
    annotator 2 one above (text, speech, omni), on the second both rate the mean; image ratings
    are identical between annotators (perfect agreement).  Annotator 3 adds one skipped
    (cancelled) and one unscored (two ratings only) speech evaluation.  Annotator 2 answers with
    ``<Choices>`` on the omni track and is written as an object, as Label Studio exports it.
    """
    plan = json.loads((export_dir / "plan.json").read_text())
    items = {i["item_id"]: i for i in plan["items"]}
    first = plan["window"][0]
    tasks = json.loads((export_dir / "tasks.json").read_text())
    out = []
    extra_done: set[str] = set()
    for n, task in enumerate(tasks):
        item = items[task["data"]["item_id"]]
        base = HUMAN[item["track"]][item["system"]]
        spread = 1 if item["example_id"] == first and item["track"] != "image" else 0
        anns = []
        for user, delta in ((1, -spread), (2, spread)):
            kind = "choices" if user == 2 and item["track"] == "omni" else "rating"
            anns.append(
                {
                    "id": 100 * n + user,
                    "completed_by": {"id": user, "email": f"u{user}@x"} if user == 2 else user,
                    "was_cancelled": False,
                    "ground_truth": False,
                    "result": rating_result({c: base + delta for c in CONTROLS}, kind),
                }
            )
        if item["track"] == "speech" and item["system"] == "A":
            which = "skip" if "skip" not in extra_done else "partial"
            if which not in extra_done:
                extra_done.add(which)
                anns.append(
                    {
                        "id": 100 * n + 3,
                        "completed_by": 3,
                        "was_cancelled": which == "skip",
                        "result": []
                        if which == "skip"
                        else rating_result({c: 5 for c in CONTROLS[:2]}),
                    }
                )
        out.append({"id": 1000 + n, "data": task["data"], "annotations": anns, "predictions": []})
    return out
