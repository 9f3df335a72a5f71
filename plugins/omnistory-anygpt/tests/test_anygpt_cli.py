"""``backbone=anygpt`` through the real CLI on the demo, with the stand-in checkout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import soundfile as sf
from anygpt_standin import DECODED_SIZE, HOP, SAMPLE_RATE, SPEECH_ANSWER
from PIL import Image

QUIET = ("engine.progress=false", "evaluation.report=false")
NAMES = {"text": "generated.txt", "image": "generated.png", "speech": "generated.wav"}


def run_cli(*args: str, cwd: Path, env: dict[str, str] | None = None):
    return subprocess.run(
        [sys.executable, "-m", "omnistory_core", *args],
        cwd=cwd,
        # one thread: tiny models are several times faster than on two busy ones
        env={**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", **(env or {})},
        capture_output=True,
        text=True,
        timeout=600,
    )


def checkpoint_env(standin, chat: Path) -> dict[str, str]:
    """The checkpoints through the environment variables the shipped yaml reads."""
    return {
        "OMNISTORY_SOURCE_BACKBONE_ANYGPT": str(standin["source_dir"]),
        "OMNISTORY_MODEL_BACKBONE_ANYGPT": str(chat),
        "OMNISTORY_MODEL_BACKBONE_ANYGPT_SEED": str(standin["image_tokenizer"]),
        "OMNISTORY_MODEL_BACKBONE_ANYGPT_UNCLIP": str(standin["image_decoder"]),
        "OMNISTORY_MODEL_BACKBONE_ANYGPT_SPEECH": str(standin["speech_modules"]),
    }


def outputs(job: Path, n: int) -> dict[str, int]:
    return {m: sum((job / m / str(i) / f).is_file() for i in range(n)) for m, f in NAMES.items()}


def load(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


def test_any_to_any_run_writes_text_image_and_speech(tmp_path: Path, standin, chat_models) -> None:
    args = [
        "backbone=anygpt",
        "backbone.dtype=float32",
        "backbone.device=cpu",
        "output_root=out",
        *QUIET,
    ]
    env = checkpoint_env(standin, chat_models())
    proc = run_cli(*args, "dataset.limit=1", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    job = tmp_path / "out" / "runs" / "demo" / "anygpt"
    assert load(job / "stats.json")["components"]["backbone/anygpt"] == {
        "calls": 1,
        "cache_hits": 0,
        "failures": 0,
        "loads": 1,
    }

    # two examples, the backbone in a worker process (as in AnyGPT's own environment): the first
    # is the record of the run above (the cache key is stable across processes), the second is
    # made in the worker
    proc = run_cli(
        *args, "dataset.limit=2", f"backbone.runner.python={sys.executable}", cwd=tmp_path, env=env
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert load(job / "stats.json")["components"]["backbone/anygpt"] == {
        "calls": 1,
        "cache_hits": 1,
        "failures": 0,
        "loads": 1,
    }
    manifest = load(job / "manifest.json")
    assert manifest["components"]["backbone"]["runner_python"] == sys.executable
    assert manifest["paradigm"] == "any-to-any" and manifest["stages"] == ["backbone"]
    assert outputs(job, 2) == {"text": 2, "image": 2, "speech": 2}
    assert (job / "missing.txt").read_text() == ""
    for index in range(2):
        text = (job / "text" / str(index) / "generated.txt").read_text(encoding="utf-8")
        assert text == "Pip finds a red kite in the tall grass. Speech:"
        with Image.open(job / "image" / str(index) / "generated.png") as image:
            assert image.size == (DECODED_SIZE, DECODED_SIZE)
        info = sf.info(str(job / "speech" / str(index) / "generated.wav"))
        assert info.samplerate == SAMPLE_RATE and info.frames == len(SPEECH_ANSWER) * HOP


def test_an_omitted_speech_run_is_recorded_and_text_and_image_survive(
    tmp_path: Path, standin, chat_models
) -> None:
    chat = chat_models(speech="unclosed")
    proc = run_cli(
        "backbone=anygpt",
        f"backbone.source_dir={standin['source_dir']}",
        f"backbone.model={chat}",
        f"backbone.image_tokenizer={standin['image_tokenizer']}",
        f"backbone.image_decoder={standin['image_decoder']}",
        f"backbone.speech_modules={standin['speech_modules']}",
        "backbone.dtype=float32",
        "backbone.device=cpu",
        "dataset.limit=2",
        "output_root=out",
        *QUIET,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    job = tmp_path / "out" / "runs" / "demo" / "anygpt"
    assert outputs(job, 2) == {"text": 2, "image": 2, "speech": 0}
    lines = [line.split("\t") for line in (job / "missing.txt").read_text().splitlines()]
    assert [line[:3] for line in lines] == [
        ["0", "speech", "backbone_no_speech"],
        ["1", "speech", "backbone_no_speech"],
    ]


def test_without_a_checkout_the_run_is_refused_in_one_line(tmp_path: Path) -> None:
    env = {"OMNISTORY_SOURCE_BACKBONE_ANYGPT": ""}
    proc = run_cli("backbone=anygpt", "output_root=out", *QUIET, cwd=tmp_path, env=env)
    assert proc.returncode == 2
    assert "backbone.source_dir is not set" in proc.stderr
    assert "git clone https://github.com/OpenMOSS/AnyGPT" in proc.stderr
    assert "Traceback" not in proc.stderr
