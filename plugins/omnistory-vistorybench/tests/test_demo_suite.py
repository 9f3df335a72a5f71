"""A first ViStoryBench score offline: ``python -m omnistory_core -m suite=vistory_demo`` generates
the fixture's systems and scores them with every metric on tiny checkpoints it builds itself (no
download) and a local stand-in judge; the leaderboard fills in, every row not comparable."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from omnistory_testkit import run_cli

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")


@pytest.mark.slow
def test_the_demo_suite_scores_the_fixture_end_to_end_offline(tmp_path: Path) -> None:
    done = run_cli(
        "-m", "suite=vistory_demo", "output_root=out", "engine.progress=false", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-3000:]
    sweep = tmp_path / "out" / "sweeps" / "vistory_demo"
    lines = [json.loads(x) for x in (sweep / "scores.jsonl").read_text().splitlines()]
    scored = {(r["kind"], r["evaluator"]) for r in lines if r["status"] == "ok"}
    assert {e for _, e in scored} == {
        "cids",
        "csd",
        "aesthetic",
        "diversity",
        "prompt_align_standin",
    }
    assert not [r for r in lines if r["status"] == "error"]
    board = pd.read_csv(sweep / "report" / "leaderboard.csv", encoding="utf-8-sig")
    mine = board[board["source"] == "ours"]
    assert sorted(zip(mine["model"], mine["split"], strict=True)) == [
        ("copy", "full"),
        ("copy", "lite"),
        ("copy_paste", "full"),
        ("copy_paste", "lite"),
    ]
    for settings in mine["metric_settings"]:
        assert settings.startswith("not comparable: ")
        assert "prompt_align: scored by the stand-in metric/prompt_align_standin" in settings
        assert "csd.checkpoint=csd_vit-tiny.pth (official: csd_vit-large.pth)" in settings
    assert mine[["Character Consistency(CRef)_rank", "Prompt Alignment_rank"]].notna().all().all()
    # ranked among the published methods of both splits (each with its best mode)
    assert (board["source"] == "published").sum() == 13 + 24
    assert (sweep / "report" / "index.html").is_file()
    built = json.loads((tmp_path / "out" / "vistory_demo_weights" / "built.json").read_text())
    assert built == {"version": 2, "seed": 0}


def test_the_demo_checkpoints_are_built_deterministically(tmp_path: Path) -> None:
    from omnistory_vistorybench.demo import build_arcface, build_csd

    for build, name in ((build_csd, "csd.pth"), (build_arcface, "arcface.onnx")):
        built = []
        for folder in ("a", "b"):
            (tmp_path / folder).mkdir(exist_ok=True)
            built.append(build(tmp_path / folder / name, 3).read_bytes())
        assert built[0] == built[1]
        other = build(tmp_path / "a" / f"other-{name}", 4).read_bytes()
        assert other != built[0]  # the seed decides the weights
