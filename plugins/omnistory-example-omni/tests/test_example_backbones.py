"""The example backbones through the real CLI: shapes, one call each, omissions, isolation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

QUIET = ("engine.progress=false", "evaluation.report=false")


def run_cli(*args: str, cwd: Path, env: dict[str, str] | None = None):
    return subprocess.run(
        [sys.executable, "-m", "omnistory_core", *args],
        cwd=cwd,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        capture_output=True,
        text=True,
        timeout=600,
    )


def job(tmp_path: Path, system_id: str) -> Path:
    return tmp_path / "out" / "runs" / "demo" / system_id


def load(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def outputs(job_dir: Path, n: int) -> dict[str, int]:
    names = {"text": "generated.txt", "image": "generated.png", "speech": "generated.wav"}
    return {
        m: sum((job_dir / m / str(i) / f).is_file() for i in range(n)) for m, f in names.items()
    }


def test_any_to_any_makes_three_outputs_in_one_call_per_example(tmp_path: Path) -> None:
    proc = run_cli(
        "backbone=example_omni", "dataset.limit=3", "output_root=out", *QUIET, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    out = job(tmp_path, "example_omni")
    assert outputs(out, 3) == {"text": 3, "image": 3, "speech": 3}
    manifest = load(out / "manifest.json")
    assert manifest["paradigm"] == "any-to-any"
    assert manifest["stages"] == ["backbone"]
    assert load(out / "stats.json")["components"] == {
        "backbone/example_omni": {"calls": 3, "cache_hits": 0, "failures": 0, "loads": 1}
    }
    assert (out / "missing.txt").read_text() == ""
    # the narration keeps the spoken line inside it
    text = (out / "text" / "0" / "generated.txt").read_text(encoding="utf-8")
    assert '" said ' in text

    again = run_cli(
        "backbone=example_omni", "dataset.limit=3", "output_root=out", *QUIET, cwd=tmp_path
    )
    assert again.returncode == 0, again.stderr
    assert load(out / "stats.json")["components"]["backbone/example_omni"] == {
        "calls": 0,
        "cache_hits": 3,
        "failures": 0,
        "loads": 0,
    }


def test_t_plus_i_hands_its_speech_plan_to_the_tts_expert(tmp_path: Path) -> None:
    proc = run_cli(
        "backbone=example_ti",
        "tts=espeak",
        "dataset.limit=2",
        "output_root=out",
        *QUIET,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    out = job(tmp_path, "example_ti-espeak")
    assert outputs(out, 2) == {"text": 2, "image": 2, "speech": 2}
    manifest = load(out / "manifest.json")
    assert manifest["paradigm"] == "semi-orchestration (T+I)"
    assert manifest["stages"] == ["backbone", "tts"]
    plan = rows(out / "plans.jsonl")[0]["plan"]
    assert set(plan["speech"]) == {"utterance", "speaker", "emotion", "speed", "pitch", "gender"}
    assert "image_prompt" not in plan


def test_t_plus_s_hands_its_image_prompt_to_the_image_expert(tmp_path: Path) -> None:
    proc = run_cli(
        "backbone=example_ts",
        "image=noop",
        "dataset.limit=2",
        "output_root=out",
        *QUIET,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    out = job(tmp_path, "example_ts-noop")
    assert outputs(out, 2) == {"text": 2, "image": 2, "speech": 2}
    assert load(out / "manifest.json")["paradigm"] == "semi-orchestration (T+S)"
    assert rows(out / "plans.jsonl")[0]["plan"]["image_prompt"]


@pytest.mark.parametrize("category", [None, "model_error"])
def test_an_omitted_modality_is_recorded_and_the_others_survive(tmp_path: Path, category) -> None:
    args = [
        "backbone=example_omni",
        "backbone.omit=[image]",
        "dataset.limit=2",
        "output_root=out",
        *QUIET,
    ]
    if category:
        args.append(f"backbone.omit_category={category}")
    proc = run_cli(*args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = job(tmp_path, "example_omni")
    assert outputs(out, 2) == {"text": 2, "image": 0, "speech": 2}
    lines = [ln.split("\t") for ln in (out / "missing.txt").read_text().splitlines()]
    assert [(ln[0], ln[1], ln[2]) for ln in lines] == [
        ("0", "image", category or "backbone_no_image"),
        ("1", "image", category or "backbone_no_image"),
    ]


def test_an_omitted_narration_leaves_image_and_expert_speech(tmp_path: Path) -> None:
    # the TTS expert reads plan['speech'] only, so it still speaks
    proc = run_cli(
        "backbone=example_ti",
        "tts=espeak",
        "backbone.omit=[text]",
        "dataset.limit=1",
        "output_root=out",
        *QUIET,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    out = job(tmp_path, "example_ti-espeak")
    assert outputs(out, 1) == {"text": 0, "image": 1, "speech": 1}
    assert (out / "missing.txt").read_text().split("\t")[:3] == ["0", "text", "backbone_no_text"]


def test_a_sweep_over_experts_calls_the_backbone_once_per_example(tmp_path: Path) -> None:
    proc = run_cli(
        "-m",
        "backbone=example_ti",
        "tts=espeak,noop",
        "dataset.limit=3",
        "output_root=out",
        "sweep_name=s",
        *QUIET,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    stats = load(tmp_path / "out" / "sweeps" / "s" / "sweep_stats.json")["components"]
    assert stats["backbone/example_ti"]["calls"] == 3
    assert stats["backbone/example_ti"]["cache_hits"] == 3
    assert stats["tts/espeak"]["calls"] == 3 and stats["tts/noop"]["calls"] == 3


def test_the_backbone_runs_alike_in_an_isolation_worker(tmp_path: Path) -> None:
    args = ["backbone=example_omni", "dataset.limit=2", *QUIET]
    local = run_cli(*args, "output_root=a", cwd=tmp_path)
    worker = run_cli(
        *args, "output_root=b", f"backbone.runner.python={sys.executable}", cwd=tmp_path
    )
    assert local.returncode == 0 and worker.returncode == 0, worker.stderr
    a = tmp_path / "a" / "runs" / "demo" / "example_omni"
    b = tmp_path / "b" / "runs" / "demo" / "example_omni"
    assert load(b / "manifest.json")["components"]["backbone"]["runner_python"] == sys.executable
    for rel in ("text/0/generated.txt", "image/1/generated.png", "speech/1/generated.wav"):
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel


def test_bad_parameter_is_one_line_and_exit_2(tmp_path: Path) -> None:
    proc = run_cli(
        "backbone=example_omni", "++backbone.tnit=0.5", "output_root=out", *QUIET, cwd=tmp_path
    )
    assert proc.returncode == 2
    assert "backbone=example_omni: unknown parameter(s) tnit" in proc.stderr
    assert "Traceback" not in proc.stderr
