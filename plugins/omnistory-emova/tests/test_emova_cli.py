"""``backbone=emova image=copy`` through the real CLI on the demo, with tiny stand-in checkpoints
(see emova_tiny.py): what lands in text/, speech/ and image/, and how failures are recorded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import soundfile as sf
from emova_tiny import SAMPLING_RATE
from omnistory_testkit import demo_examples
from PIL import Image


def run_cli(
    tmp_path: Path,
    model: Path,
    speech_tokenizer: Path,
    image: str = "copy",
    returncode: int = 0,
    **env_extra: str,
):
    """The CLI in a subprocess, the checkpoints given by the environment variables the yaml
    reads (OMNISTORY_MODEL_BACKBONE_EMOVA[_SPEECH_TOKENIZER])."""
    out = tmp_path / "out"
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "PYTHONUNBUFFERED": "1",
        "OMNISTORY_MODEL_BACKBONE_EMOVA": str(model),
        "OMNISTORY_MODEL_BACKBONE_EMOVA_SPEECH_TOKENIZER": str(speech_tokenizer),
        **env_extra,
    }
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "omnistory_core",
            "backbone=emova",
            f"image={image}",
            "backbone.dtype=float32",
            "dataset.limit=2",
            "engine.progress=false",
            f"output_root={out}",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert result.returncode == returncode, result.stderr[-3000:]
    run = out / "runs" / "demo" / f"emova-{image}"
    rows = [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]
    return run, rows


def missing_lines(run: Path) -> list[list[str]]:
    return [line.split("\t") for line in (run / "missing.txt").read_text().splitlines()]


def test_text_and_speech_from_emova_image_from_the_expert(
    tiny_emova, tiny_speech_tokenizer, tmp_path
):
    run, rows = run_cli(tmp_path, tiny_emova, tiny_speech_tokenizer)
    assert [(r["text"]["status"], r["speech"]["status"], r["image"]["status"]) for r in rows] == [
        ("ok", "ok", "ok")
    ] * 2
    assert (run / "text/0/generated.txt").read_text().startswith("Pip tapped on the glass")
    samples, rate = sf.read(run / "speech/1/generated.wav", dtype="float32")
    assert rate == SAMPLING_RATE and samples.size == 8 * 64
    # image=copy repeats the current page: the image came from the expert, not the backbone
    for example, row in zip(demo_examples(2), rows, strict=True):
        with (
            Image.open(run / row["image"]["path"]) as made,
            Image.open(example.current.image) as current,
        ):
            assert np.array_equal(
                np.asarray(made.convert("RGB")), np.asarray(current.convert("RGB"))
            )
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["paradigm"] == "semi-orchestration (T+S)"
    plans = [json.loads(line) for line in (run / "plans.jsonl").read_text().splitlines()]
    assert json.loads(plans[0]["raw"])["image_prompt"].startswith("A small orange fox")
    assert plans[0]["usage"]["quote"] == "Hurry, Lena, the moon fell into the pond!"
    assert missing_lines(run) == []


def test_a_speech_pass_failure_keeps_text_and_image(mute_emova, tiny_speech_tokenizer, tmp_path):
    # EMOVA runs in its own environment in practice: here as an isolation worker process
    worker = {"OMNISTORY_RUNNER_BACKBONE_EMOVA": sys.executable}
    run, rows = run_cli(tmp_path, mute_emova, tiny_speech_tokenizer, **worker)
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["components"]["backbone"]["runner_python"] == sys.executable
    assert [(r["text"]["status"], r["image"]["status"]) for r in rows] == [("ok", "ok")] * 2
    assert [r["speech"]["category"] for r in rows] == ["empty_output"] * 2
    assert not (run / "speech" / "0" / "generated.wav").exists()
    assert [(m[1], m[2]) for m in missing_lines(run)] == [("speech", "empty_output")] * 2


def test_json_missing_a_key_loses_the_whole_example(no_t2i_emova, tiny_speech_tokenizer, tmp_path):
    # image=noop reads the image prompt, like the real image experts (image=copy reads none)
    # nothing at all was made: the job exits 2 once its records are written
    run, rows = run_cli(tmp_path, no_t2i_emova, tiny_speech_tokenizer, image="noop", returncode=2)
    for row in rows:
        categories = {row[m]["category"] for m in ("text", "image", "speech")}
        assert categories == {"plan_missing_field"}
        assert "t2i" in row["text"]["message"]
    assert not (run / "text" / "0" / "generated.txt").exists()
    assert {m[1] for m in missing_lines(run)} == {"text", "image", "speech"}
