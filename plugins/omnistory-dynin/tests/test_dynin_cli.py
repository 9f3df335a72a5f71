"""``backbone=dynin`` through the real CLI: an any-to-any system on the demo (official sizes:
336 px page, 441 image codes, 1024-token prompt, 128 text and 125 speech slots; 4 steps)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import soundfile as sf
from dynin_standin import SCRIPT_TEXT, hydra_dict
from PIL import Image

QUIET = ("engine.progress=false", "evaluation.report=false")


def run_cli(*args: str, cwd: Path, env: dict[str, str] | None = None):
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OMNISTORY_")}
    return subprocess.run(
        [sys.executable, "-m", "omnistory_core", *args],
        cwd=cwd,
        env={**clean, "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1", **(env or {})},
        capture_output=True,
        text=True,
        timeout=600,
    )


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_dynin_writes_text_image_and_speech_on_the_demo(source_tree, checkpoints, tmp_path):
    proc = run_cli(
        "backbone=dynin",
        f"backbone.source_dir={source_tree}",
        "backbone.steps=4",
        f"backbone.token_layout={hydra_dict(checkpoints['layout'])}",
        "backbone.device=cpu",
        "dataset.limit=2",
        "output_root=out",
        *QUIET,
        cwd=tmp_path,
        env={  # the overrides the shipped yaml reads
            "OMNISTORY_MODEL_BACKBONE_DYNIN": str(checkpoints["model"]),
            "OMNISTORY_MODEL_BACKBONE_DYNIN_IMAGE_CODEC": str(checkpoints["image_codec"]),
            "OMNISTORY_MODEL_BACKBONE_DYNIN_SPEECH_CODEC": str(checkpoints["speech_codec"]),
            "HF_MODULES_CACHE": str(tmp_path / "hf-modules"),
        },
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    job = tmp_path / "out" / "runs" / "demo" / "dynin"
    manifest = json.loads((job / "manifest.json").read_text())
    assert manifest["paradigm"] == "any-to-any" and manifest["stages"] == ["backbone"]
    params = manifest["components"]["backbone"]["params"]
    assert params["steps"] == 4 and params["seed"] == 20261006
    assert (job / "missing.txt").read_text() == ""
    stats = json.loads((job / "stats.json").read_text())["components"]
    assert stats["backbone/dynin"] == {"calls": 2, "cache_hits": 0, "failures": 0, "loads": 1}
    for i in (0, 1):
        text = (job / "text" / str(i) / "generated.txt").read_text(encoding="utf-8")
        assert text.strip() == SCRIPT_TEXT
        with Image.open(job / "image" / str(i) / "generated.png") as image:
            assert image.size == (336, 336)
        audio, rate = sf.read(job / "speech" / str(i) / "generated.wav")
        assert rate == 16000 and len(audio) == 40 * 640
    usage = rows(job / "plans.jsonl")[0]["usage"]
    assert usage["source_image_codes"] == 441 and usage["forwards"] == 4
    assert usage["sequence_length"] > 1024 + 2 * 441 + 128 + 125
    assert set(usage["generated_speech_metadata"]) == {"emotion", "speed", "pitch", "gender"}


def test_short_speech_is_recorded_as_a_speech_failure_from_an_isolation_worker(
    source_tree, checkpoints, short_speech_model, tmp_path
):
    # backbone.runner.python: how the model runs in its own environment (here: this interpreter)
    proc = run_cli(
        f"backbone.runner.python={sys.executable}",
        "backbone=dynin",
        f"backbone.source_dir={source_tree}",
        f"backbone.model={short_speech_model}",
        f"backbone.image_codec={checkpoints['image_codec']}",
        f"backbone.speech_codec={checkpoints['speech_codec']}",
        f"backbone.token_layout={hydra_dict(checkpoints['layout'])}",
        "backbone.steps=2",
        "backbone.all_or_nothing=false",
        "dataset.limit=1",
        "output_root=out",
        *QUIET,
        cwd=tmp_path,
        env={"HF_MODULES_CACHE": str(tmp_path / "hf-modules")},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    job = tmp_path / "out" / "runs" / "demo" / "dynin"
    manifest = json.loads((job / "manifest.json").read_text())
    assert manifest["components"]["backbone"]["runner_python"] == sys.executable
    assert (job / "text" / "0" / "generated.txt").read_text(encoding="utf-8").strip()
    assert (job / "image" / "0" / "generated.png").is_file()
    assert not (job / "speech" / "0" / "generated.wav").exists()
    (line,) = (job / "missing.txt").read_text().splitlines()
    assert line.split("\t")[:3] == ["0", "speech", "empty_output"]
    assert "speech ended after 3 codes" in line


def test_a_bad_parameter_is_one_line_and_exit_2(tmp_path):
    proc = run_cli("backbone=dynin", "backbone.steps=0", "output_root=out", *QUIET, cwd=tmp_path)
    assert proc.returncode == 2
    assert "backbone=dynin: steps must be >= 1, got 0" in proc.stderr
    assert "Traceback" not in proc.stderr
