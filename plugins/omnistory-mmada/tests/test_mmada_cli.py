"""``backbone=mmada`` through the real CLI: a T+I system with eSpeak NG speaking its plan."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import soundfile as sf
from PIL import Image

QUIET = ("engine.progress=false",)


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


def test_mmada_with_espeak_on_the_demo(source_tree, checkpoints, tmp_path):
    model, vq = checkpoints
    proc = run_cli(
        "backbone=mmada",
        "tts=espeak",
        f"backbone.source_dir={source_tree}",
        f"backbone.model={model}",
        "dataset.limit=2",
        "output_root=out",
        *QUIET,
        cwd=tmp_path,
        env={"OMNISTORY_MODEL_BACKBONE_MMADA_VQ": str(vq)},  # the override the yaml reads
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    job = tmp_path / "out" / "runs" / "demo" / "mmada-espeak"
    manifest = json.loads((job / "manifest.json").read_text())
    assert manifest["paradigm"] == "semi-orchestration (T+I)"
    assert manifest["stages"] == ["backbone", "tts"]
    assert (job / "missing.txt").read_text() == ""
    texts = [(job / "text" / str(i) / "generated.txt").read_text(encoding="utf-8") for i in (0, 1)]
    assert texts == [
        'Pip tapped on the glass. "The moon fell behind the hill!" he cried.',
        'Lena took her lantern and ran after Pip. "Wait for me, Pip!"',
    ]
    for i in (0, 1):
        with Image.open(job / "image" / str(i) / "generated.png") as image:
            assert image.size == (64, 64)
        audio, rate = sf.read(job / "speech" / str(i) / "generated.wav")
        assert rate > 0 and len(audio) > rate // 4
    plans = rows(job / "plans.jsonl")
    assert plans[0]["plan"]["speech"] == {
        "utterance": "The moon fell behind the hill!",
        "speaker": "Pip",
        "emotion": "sad",
        "speed": "fast",
        "pitch": "high",
        "gender": "male",
    }
    assert plans[1]["plan"]["speech"]["emotion"] == "neutral"  # official default for "excited"
    stats = json.loads((job / "stats.json").read_text())["components"]
    assert stats["backbone/mmada"] == {"calls": 2, "cache_hits": 0, "failures": 0, "loads": 1}
    assert stats["tts/espeak"]["calls"] == 2
    # the same command from another checkout path of the same code: everything is cached
    again = run_cli(
        "backbone=mmada",
        "tts=espeak",
        f"backbone.source_dir={source_tree}/.",
        f"backbone.model={model}",
        f"backbone.vq_model={vq}",
        "backbone.device=cpu",
        "dataset.limit=2",
        "output_root=out",
        *QUIET,
        cwd=tmp_path,
    )
    assert again.returncode == 0, again.stderr[-3000:]
    stats = json.loads((job / "stats.json").read_text())["components"]
    assert stats["backbone/mmada"] == {"calls": 0, "cache_hits": 2, "failures": 0, "loads": 0}


def test_missing_source_dir_is_one_line_and_exit_2(tmp_path):
    proc = run_cli("backbone=mmada", "tts=espeak", "dataset.limit=2", *QUIET, cwd=tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "backbone=mmada: backbone.source_dir is not set" in lines[0]
    assert "git clone https://github.com/Gen-Verse/MMaDA MMaDA" in lines[0]
    assert "git -C MMaDA checkout 3cdb870" in lines[0]
    assert not list(tmp_path.rglob("generated.*")) and not list(tmp_path.rglob("manifest.json"))


def test_mmada_alone_or_with_an_image_expert_is_refused(source_tree, tmp_path):
    proc = run_cli("backbone=mmada", f"backbone.source_dir={source_tree}", *QUIET, cwd=tmp_path)
    assert proc.returncode == 2 and "does not make speech" in proc.stderr
    proc = run_cli(
        "backbone=mmada",
        "tts=espeak",
        "image=copy",
        f"backbone.source_dir={source_tree}",
        *QUIET,
        cwd=tmp_path,
    )
    assert proc.returncode == 2 and "which makes image natively" in proc.stderr


def test_env_create_installs_the_pinned_stack(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "omnistory_core",
            "env",
            "create",
            "backbone=mmada",
            "--dry-run",
            "--dir",
            str(tmp_path / "venv"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    first_install = next(line for line in proc.stdout.splitlines() if " install " in line)
    for pin in ("transformers==4.46.0", "diffusers==0.32.2", "torch==2.10.0"):
        assert pin in first_install
    assert (
        "omnistory-mmada" in proc.stdout
        or "omnistory_mmada" in proc.stdout
        or ("plugins/omnistory-mmada" in proc.stdout)
    )
