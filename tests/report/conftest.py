"""A small synthetic run directory + scores table + dataset examples, built in tmp_path."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from omnistory_core.contract import Page, Reference, SpeechTarget, StoryExample
from omnistory_core.scores import ScoreRow, write_scores

RUBRIC = ("c1", "c2", "c3", "c4")
JUDGES = {"text": ("tj1", "tj2"), "image": ("ij1", "ij2"), "speech": ("sj1",), "omni": ("oj1",)}
SYSTEMS = {
    # system id: (paradigm, oracle, examples whose plan failed -> all outputs missing)
    "orch-a": ("orchestration", False, ()),
    "semi-b": ("semi-orchestration", False, (2,)),
    "oracle-c": ("baseline", True, ()),
}

#: seven systems over every paradigm, an oracle and plan failures (the ``rich_run`` fixture)
RICH_SYSTEMS = {
    "orch-a": ("orchestration", False, ()),
    "orch-b": ("orchestration", False, (1,)),
    "semi-c": ("semi-orchestration", False, (2,)),
    "semi-d": ("semi-orchestration (T+S)", False, ()),
    "any-e": ("any-to-any", False, ()),
    "any-f": ("any-to-any", False, (0, 3)),
    "oracle-g": ("baseline", True, ()),
}


@dataclass(frozen=True)
class SyntheticRun:
    scores: Path
    run_dir: Path
    examples: list[StoryExample]


def _png(path: Path, color: tuple[int, int, int], size=(24, 16)) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, color).save(path)


def _wav(path: Path, freq: float) -> None:
    import soundfile as sf

    path.parent.mkdir(parents=True, exist_ok=True)
    t = np.arange(int(0.25 * 16000)) / 16000
    sf.write(path, 0.2 * np.sin(2 * np.pi * freq * t), 16000)


def build_synthetic_run(
    root: Path, n_examples: int = 4, systems: dict[str, tuple] | None = None
) -> SyntheticRun:
    """Three systems (one oracle, one with a plan failure) over ``n_examples`` examples, or
    ``systems`` (id -> paradigm, oracle, examples whose plan failed) as in :data:`SYSTEMS`."""
    data_dir = root / "dataset"
    examples = []
    for i in range(n_examples):
        _png(data_dir / f"cur{i}.png", (40 * i % 255, 80, 120))
        _png(data_dir / f"ref{i}.png", (200, 40 * i % 255, 60))
        examples.append(
            StoryExample(
                id=f"book{i}/p{i}-p{i + 1}",
                index=i,
                source="synthetic",
                book=f"Book <{i}> & friends",
                from_key=f"p{i}",
                to_key=f"p{i + 1}",
                current=Page(image=str(data_dir / f"cur{i}.png"), text=f"Current narration {i}."),
                metadata={"title": f"Book {i}", "age": "3-5"},
                conditions={"characters": ["fox"], "event": f"event {i}"},
                reference=Reference(
                    next_page=Page(image=str(data_dir / f"ref{i}.png"), text=f"  Reference {i}.  "),
                    speech=SpeechTarget("Hello!", "fox", "happy", "normal", "high", "female"),
                ),
            )
        )
    run_dir = root / "run"
    rows: list[ScoreRow] = []
    for s_num, (sid, (paradigm, oracle, failed)) in enumerate((systems or SYSTEMS).items()):
        sdir = run_dir / f"dir-{sid}"
        sdir.mkdir(parents=True)
        manifest = {
            "system_id": sid,
            "oracle": oracle,
            "paradigm": paradigm,
            "components": {"planner": "template"},
            "dataset": {"name": "synthetic"},
        }
        (sdir / "manifest.json").write_text(json.dumps(manifest))
        records, plans = [], []
        for ex in examples:
            i = ex.index
            ok = i not in failed
            if ok:
                text = f"{sid} narration {i} — ünïcode"
                (sdir / "text" / str(i)).mkdir(parents=True)
                (sdir / "text" / str(i) / "generated.txt").write_text(text, encoding="utf-8")
                _png(sdir / "image" / str(i) / "generated.png", (30 * s_num, 60, 20 * i))
                _wav(sdir / "speech" / str(i) / "generated.wav", 220.0 + 40 * s_num + 10 * i)
                entry = {"status": "ok", "path": "x"}
                rec = {m: dict(entry) for m in ("text", "image", "speech")}
                plans.append(
                    {
                        "index": i,
                        "example_id": ex.id,
                        "raw": "{...}",
                        "plan": {"narration": text, "image_prompt": "a fox"},
                        "repairs": [],
                        "failure": None,
                    }
                )
            else:
                fail = {"status": "failure", "category": "plan_json_error", "message": "bad JSON"}
                rec = {m: dict(fail) for m in ("text", "image", "speech")}
                plans.append(
                    {
                        "index": i,
                        "example_id": ex.id,
                        "raw": "not json",
                        "plan": None,
                        "repairs": [],
                        "failure": {"category": "plan_json_error", "message": "bad JSON"},
                    }
                )
            records.append({"index": i, "example_id": ex.id, **rec})
            rows.extend(_score_rows(sid, ex.id, ok, s_num, i))
        (sdir / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        (sdir / "plans.jsonl").write_text("".join(json.dumps(p) + "\n" for p in plans))
    scores = root / "scores.jsonl"
    write_scores(scores, rows)
    return SyntheticRun(scores, run_dir, examples)


def _score_rows(sid: str, eid: str, ok: bool, s: int, i: int) -> list[ScoreRow]:
    status = "ok" if ok else "missing_output"
    out = [
        ScoreRow(
            sid, eid, "metric", "text", "bertscore", "f1", 0.8 + 0.01 * s if ok else None, status
        ),
        ScoreRow(
            sid, eid, "metric", "image", "clip", "cosine", 0.7 + 0.02 * i if ok else None, status
        ),
    ]
    for f, field in enumerate(("emotion", "speed", "pitch", "gender")):
        out.append(
            ScoreRow(
                sid,
                eid,
                "metric",
                "speech",
                "speech_meta",
                field,
                float((i + f + s) % 2) if ok else None,
                status,
            )
        )
    for track, judges in JUDGES.items():
        for j, judge in enumerate(judges):
            for c, crit in enumerate(RUBRIC):
                score = float(1 + (s * 3 + i + j + c) % 10) if ok else None
                out.append(ScoreRow(sid, eid, "judge", track, judge, crit, score, status))
    return out


@pytest.fixture
def synthetic_run(tmp_path: Path) -> SyntheticRun:
    return build_synthetic_run(tmp_path)


@pytest.fixture
def rich_run(tmp_path: Path) -> SyntheticRun:
    return build_synthetic_run(tmp_path, n_examples=6, systems=RICH_SYSTEMS)
