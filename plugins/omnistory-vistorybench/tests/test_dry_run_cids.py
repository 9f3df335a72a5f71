"""CIDS before scoring: ``evaluate --dry-run`` prices its single-character action requests, and
the pre-flight of ``evaluate`` stops on a detector checkpoint that is not there.

Everything runs through the real command line on the bundled fixture's outputs tree; no model is
loaded (the dry run loads nothing, and the pre-flight stops before any load), and the judge
endpoint is never asked (a dry run makes no network call).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from omnistory_testkit import run_cli
from omnistory_testkit.checkpoints import OFFLINE_ENV
from omnistory_vistorybench.dataset import fixture_root, load_stories
from omnistory_vistorybench.layout import read_outputs
from omnistory_vistorybench.metrics.prompt_align import SINGLE_CHARACTER_RUBRIC

FIXTURE = fixture_root()
#: the fixture's usable shots (story.json indices; 01 shot 6 lacks a field)
USABLE = {"01": [1, 2, 3, 4, 5, 7], "02": [1, 2, 3]}
JUDGE = "http://judge.invalid/v1"  # never asked: the dry run makes no request
PRICES = "{gpt-4.1: {input_per_mtok: 2.0, output_per_mtok: 8.0}}"


def plan_row(output: str, key: str) -> list[str]:
    """The cells of one component's row of a printed dry-run table."""
    for line in output.splitlines():
        cells = [c.strip() for c in line.strip().strip("│┃").split("│")]
        if cells and cells[0] == key:
            return cells
    raise AssertionError(f"no row {key} in:\n{output}")


def onstage_with_output() -> int:
    """Onstage characters of the shots that have an output in the fixture's outputs tree."""
    stories = {
        language: {s.id: s for s in load_stories(FIXTURE, language=language)}
        for language in ("en", "ch")
    }
    return sum(
        len(stories[key.language][story_id].shot(index).character_keys)
        for key, run in read_outputs(FIXTURE / "outputs").items()
        for story_id, found in run.stories.items()
        for index in found.shots
        if index in USABLE[story_id]
    )


def evaluate_fixture(tmp_path: Path, *args: str, env: dict[str, str] | None = None):
    return run_cli(
        "evaluate",
        "--task",
        "vistorybench",
        "--outputs",
        str(FIXTURE / "outputs"),
        "dataset=vistory_fixture",
        str(tmp_path / "scores"),
        "--metrics",
        "cids",
        "--no-report",
        "--no-progress",
        *args,
        cwd=tmp_path,
        env=env,
    )


@pytest.mark.slow
def test_the_dry_run_prices_single_character_action(tmp_path: Path) -> None:
    rubrics = tmp_path / "user_prompts"
    rubrics.mkdir()
    rubric = "STAND-IN single character rubric: rate the action 0-4, end with 'Score: N'."
    (rubrics / SINGLE_CHARACTER_RUBRIC).write_text(rubric, encoding="utf-8")
    common = ("--set", f"metric.cids.judge_base_url={JUDGE}")
    common += ("--set", f"metric.cids.rubric_dir={rubrics}")

    priced = evaluate_fixture(
        tmp_path, *common, "--set", f"metric.cids.judge_prices={PRICES}", "--dry-run"
    )
    assert priced.returncode == 0, priced.stdout[-3000:] + priced.stderr[-3000:]
    text = " ".join(priced.stdout.split())
    questions = onstage_with_output()
    assert questions > 0
    row = plan_row(priced.stdout, "metric/cids")
    assert row[1:3] == ["4", "0"]  # one call per story with outputs: 2 stories x 2 runs
    assert f"at most {questions} single_character_action judge request(s), an upper bound" in text
    # the output share alone: 512 tokens per question at $8 per million; the input adds to it
    output_share = questions * 512 * 8.0 / 1e6
    assert float(row[4]) > round(output_share, 2)
    assert "key OPENAI_API_KEY" in text or "OPENAI_API_KEY" in priced.stderr  # remote: a key
    assert not (tmp_path / "scores" / "scores.jsonl").exists()  # nothing scored

    # the same endpoint on this machine bills nothing; without a judge no request at all
    local = evaluate_fixture(
        tmp_path,
        "--set",
        "metric.cids.judge_base_url=http://127.0.0.1:9/v1",
        *common[2:],
        "--dry-run",
    )
    assert local.returncode == 0, local.stderr[-3000:]
    assert plan_row(local.stdout, "metric/cids")[4] == "0.00"
    none = evaluate_fixture(tmp_path, "--dry-run")
    assert none.returncode == 0, none.stderr[-3000:]
    assert "no single_character_action judge request" in " ".join(none.stdout.split())


@pytest.mark.slow
def test_a_missing_detector_checkpoint_stops_the_evaluation(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-dino"
    done = evaluate_fixture(
        tmp_path, "--set", f"metric.cids.detector_checkpoint={missing}", env=OFFLINE_ENV
    )
    assert done.returncode == 2, done.stdout[-3000:] + done.stderr[-3000:]
    output = " ".join((done.stdout + done.stderr).split())
    assert "metric/cids" in output and "detector_checkpoint" in output
    assert "no-such-dino" in output and "does not exist" in output  # the table folds the path
    assert not (tmp_path / "scores" / "scores.jsonl").exists()  # nothing scored

    # the dry run stops on it too, in one line naming the setting
    planned = evaluate_fixture(
        tmp_path, "--set", f"metric.cids.detector_checkpoint={missing}", "--dry-run"
    )
    assert planned.returncode == 2, planned.stdout[-3000:]
    (line,) = [
        ln for ln in planned.stderr.splitlines() if ln.startswith("omnistory evaluate: error")
    ]
    assert "metric.cids.detector_checkpoint" in line and str(missing) in line


def test_the_needs_follow_the_parameters(tmp_path: Path) -> None:
    from omnistory_vistorybench.metrics.cids import CIDSMetric

    dino, weights = tmp_path / "dino", tmp_path / "glintr100.onnx"
    dino.mkdir()
    weights.write_bytes(b"onnx")
    (tmp_path / "scrfd_10g_bnkps.onnx").write_bytes(b"onnx")  # the pack's detector beside it

    def needs(**params: Any) -> dict[tuple[str, str], dict[str, str]]:
        return {(n["check"], n["target"]): n for n in CIDSMetric(**params).preflight_needs()}

    # a local detector folder that exists is checked as weights there; no judge: no server
    found = needs(
        detector_checkpoint=str(dino), face_encoder="arcface", arcface_weights=str(weights)
    )
    assert ("weights", str(dino)) in found and ("package", "onnxruntime") in found
    assert not any(check in ("server", "key") for check, _ in found)
    assert not any(n.get("check") == "config" for n in found.values())
    # a named face weights file that is absent blocks; an unset one only warns
    found = needs(face_models=["facenet", "adaface"], facenet_weights=str(tmp_path / "no.pt"))
    facenet = found[("config", "metric.cids.facenet_weights")]
    assert "does not exist" in facenet["detail"] and not facenet.get("warning")
    assert found[("config", "metric.cids.adaface_weights")]["warning"]
    assert ("config", "metric.cids.arcface_weights") not in found  # not a listed face model
    # the official alignment's detectors: RetinaFace for AdaFace and FaceNet (unset: a
    # warning), SCRFD beside glintr100.onnx unless named (a named one that is absent blocks)
    assert found[("config", "metric.cids.retinaface_weights")]["warning"]
    assert ("package", "cv2") in found  # the alignments warp with OpenCV
    found = needs(face_encoder="arcface", arcface_weights=str(weights), scrfd_weights="/no.onnx")
    assert "does not exist" in found[("config", "metric.cids.scrfd_weights")]["detail"]
    whole = needs(face_models=["facenet"], face_alignment="whole_crop")
    assert ("config", "metric.cids.retinaface_weights") not in whole
    # a judge on this machine: its server, no key; a remote one: the key too
    local = needs(judge_base_url="http://127.0.0.1:8000", rubric_dir=str(tmp_path))
    assert ("server", "http://127.0.0.1:8000/v1") in local
    assert not any(check == "key" for check, _ in local)
    assert ("config", "metric.cids.rubric_dir") in local  # the folder lacks the rubric file
    remote = needs(judge_base_url="https://api.example.com/v1", judge_api_key_env="JUDGE_KEY")
    assert ("key", "JUDGE_KEY") in remote
