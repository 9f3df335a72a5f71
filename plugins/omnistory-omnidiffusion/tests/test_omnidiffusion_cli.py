"""backbone=omnidiffusion through the real CLI on the bundled demo, with the stand-ins (see
omnidiffusion_standin.py): an any-to-any system writing text, image and speech per example, and a
model whose answers lack the spoken line under ``fallbacks=none``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import soundfile as sf
from PIL import Image

QUIET = ("engine.progress=false", "evaluation.report=false")


def run_cli(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "omnistory_core", *args],
        cwd=cwd,
        env={
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "HF_HUB_OFFLINE": "1",
            # tiny tensors: one thread avoids thread-pool wake-ups on a busy machine
            "OMP_NUM_THREADS": "1",
            "HF_MODULES_CACHE": tempfile.mkdtemp(prefix="hf-modules-", dir=cwd),
            **env,
        },
        capture_output=True,
        text=True,
        timeout=600,
    )


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_cli_any_to_any_run_writes_all_three_modalities(standin, tmp_path):
    # checkpoints and checkout through the documented environment variables
    env = {
        "OMNISTORY_SOURCE_BACKBONE_OMNIDIFFUSION": str(standin["source_dir"]),
        "OMNISTORY_MODEL_BACKBONE_OMNIDIFFUSION": str(standin["model"]),
        "OMNISTORY_MODEL_BACKBONE_OMNIDIFFUSION_MAGVIT": str(standin["image_tokenizer"]),
        "OMNISTORY_MODEL_BACKBONE_OMNIDIFFUSION_DECODER": str(standin["audio_decoder"]),
    }
    proc = run_cli(
        "backbone=omnidiffusion",
        "dataset.limit=2",
        "output_root=out",
        *QUIET,
        cwd=tmp_path,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = tmp_path / "out" / "runs" / "demo" / "omnidiffusion"
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["paradigm"] == "any-to-any" and manifest["stages"] == ["backbone"]
    stats = json.loads((run / "stats.json").read_text())["components"]
    assert stats == {
        "backbone/omnidiffusion": {"calls": 2, "cache_hits": 0, "failures": 0, "loads": 1}
    }
    assert (run / "missing.txt").read_text() == ""
    for i in range(2):
        assert (
            run / "text" / str(i) / "generated.txt"
        ).read_text().strip() == "Pip taps the glass."
        with Image.open(run / "image" / str(i) / "generated.png") as image:
            assert image.size == (64, 64) and image.mode == "RGB"
        info = sf.info(str(run / "speech" / str(i) / "generated.wav"))
        assert (info.samplerate, info.subtype, info.channels) == (22050, "PCM_16", 1)
        assert info.frames == 24 * 2 * 256
    plans = rows(run / "plans.jsonl")
    assert json.loads(plans[0]["raw"])["raw"].startswith("NARRATION: Pip taps the glass.")
    # the checkout's path is runtime-only: the cache is found again from another checkout
    moved = tmp_path / "moved-checkout"
    shutil.copytree(standin["source_dir"], moved)
    again = run_cli(
        "backbone=omnidiffusion",
        "dataset.limit=2",
        "output_root=out",
        *QUIET,
        f"backbone.source_dir={moved}",
        cwd=tmp_path,
        env=env,
    )
    assert again.returncode == 0, again.stderr[-3000:]
    stats = json.loads((run / "stats.json").read_text())["components"]
    assert stats["backbone/omnidiffusion"]["cache_hits"] == 2
    assert stats["backbone/omnidiffusion"]["loads"] == 0


def test_cli_fallbacks_none_records_a_missing_spoken_line(standin, make_variant, tmp_path):
    no_speech = make_variant(
        "cli-no-speech",
        responses=[
            ["IMAGE_PROMPT", "NARRATION: Pip taps the glass.\nIMAGE_PROMPT: A fox at a window."],
            ["SPEECH", "SPEAKER: Pip"],
        ],
    )
    proc = run_cli(
        "backbone=omnidiffusion",
        "backbone.fallbacks=none",
        "dataset.limit=1",
        f"backbone.source_dir={standin['source_dir']}",
        f"backbone.model={no_speech}",
        f"backbone.image_tokenizer={standin['image_tokenizer']}",
        f"backbone.audio_decoder={standin['audio_decoder']}",
        "backbone.plan_steps=16",
        "backbone.image_steps=16",
        "output_root=out",
        *QUIET,
        cwd=tmp_path,
        env={},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = tmp_path / "out" / "runs" / "demo" / "omnidiffusion"
    (record,) = rows(run / "records.jsonl")
    assert record["text"]["status"] == "ok" and record["image"]["status"] == "ok"
    assert record["speech"]["status"] == "failure"
    assert record["speech"]["category"] == "plan_missing_field"
    assert (run / "text/0/generated.txt").is_file() and (run / "image/0/generated.png").is_file()
    assert not (run / "speech/0/generated.wav").exists()
    (line,) = (run / "missing.txt").read_text().splitlines()
    assert line.split("\t")[:3] == ["0", "speech", "plan_missing_field"]
