"""``-m suite=vistorybench_open`` through the real CLI on the fixture, every open-weight preset
on tiny random weights and stand-in checkouts (see ``open_methods.py``): each writes the official
layout under its published method and mode names; the second run makes no call and loads
nothing.  Story 02 only (3 shots: one, two and no character), to keep the sweep short."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from open_methods import build_all

#: preset -> (method folder, mode folder); modes exactly as published
PRESETS: dict[str, tuple[str, str]] = {
    "qwenimageedit2509_base": ("QwenImageEdit2509", "base"),
    "nextscene_qwen_lora": ("NextSceneQwenImageLora", "base"),
    "storydiffusion_original": ("StoryDiffusion", "Original"),
    "omnigen2_base": ("OmniGen2", "Base"),
    "uno_base": ("UNO", "Base"),
    "characonsist_base": ("CharaConsist", "Base"),
    "storyadapter_imgref_scale0": ("StoryAdapter", "ImgRef_Scale0"),
    "storyadapter_imgref_scale5": ("StoryAdapter", "ImgRef_Scale5"),
    "storyadapter_textonly_scale0": ("StoryAdapter", "TextOnly_Scale0"),
    "storyadapter_textonly_scale5": ("StoryAdapter", "TextOnly_Scale5"),
}
ARGS = (
    "-m",
    "suite=vistorybench_open",
    "dataset=vistory_fixture",
    "dataset.stories=[02]",
    "image.steps=2",
    "output_root=out",
    "engine.progress=false",
    "evaluation.report=false",
)


def run_cli(cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "omnistory_core", *ARGS],
        cwd=cwd,
        env={
            **os.environ,
            "HF_HUB_OFFLINE": "1",
            "OMP_NUM_THREADS": "1",
            "HF_MODULES_CACHE": tempfile.mkdtemp(prefix="hf-modules-", dir=cwd),
            **env,
        },
        capture_output=True,
        text=True,
        timeout=900,
    )


def job_dirs(jobs: Path) -> dict[tuple[str, str], Path]:
    """(method, mode) -> the job directory whose manifest records that run."""
    out = {}
    for manifest_path in sorted(jobs.glob("*/manifest.json")):
        manifest = json.loads(manifest_path.read_text())
        out[(manifest["system_id"], manifest["layout"]["mode"])] = manifest_path.parent
    return out


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("open-methods")
    return root, build_all(root / "assets")


@pytest.mark.slow(seconds=40)
def test_suite_runs_every_open_preset_then_serves_them_from_the_store(sweep) -> None:
    root, env = sweep
    first = run_cli(root, env)
    assert first.returncode == 0, first.stderr[-4000:]
    jobs = root / "out" / "sweeps" / "vistory_fixture"
    # each (method, mode) is its own job directory (the task names it; four StoryAdapter modes
    # are one method in four folders)
    found = job_dirs(jobs)
    # image.steps=2 (the tiny run) changes the outputs, so each published mode is derived from it
    runs = {preset: (method, f"{mode}-image.steps=2") for preset, (method, mode) in PRESETS.items()}
    assert sorted(found) == sorted(runs.values())
    for preset, (method, mode) in runs.items():
        job = found[(method, mode)]
        manifest = json.loads((job / "manifest.json").read_text())
        run = job / manifest["layout"]["run_dir"]
        shots = sorted(p.name for p in (run / "02" / "shots").iterdir())
        assert shots == ["shot_01.png", "shot_02.png", "shot_03.png"], (preset, shots)
        stats = json.loads((job / "stats.json").read_text())["components"]
        (component,) = stats.values()
        assert component["calls"] >= 1 and component["loads"] == 1, (preset, component)
    again = run_cli(root, env)
    assert again.returncode == 0, again.stderr[-4000:]
    for preset, run in runs.items():
        stats = json.loads((found[run] / "stats.json").read_text())["components"]
        (component,) = stats.values()
        assert (component["calls"], component["loads"]) == (0, 0), (preset, component)
        assert component["cache_hits"] >= 1, (preset, component)
