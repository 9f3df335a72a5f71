"""The user's own command, end to end on the demo:

    python -m omnistory_core -m planner=claude,gpt image=kontext,dev tts=parler,voxcpm

with the API planners pointed at a local server speaking both wire protocols (through the real
SDKs), the FLUX experts at tiny random checkpoints (via OMNISTORY_MODEL_IMAGE_*), and Parler-TTS /
VoxCPM at tiny random checkpoints running in their own virtual environment through the isolation
worker (via OMNISTORY_RUNNER_TTS_* and OMNISTORY_MODEL_TTS_*).  Eight jobs; a re-run computes and
loads nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import wave
from pathlib import Path

import pytest
from omnistory_testing import run_cli

ROOT = Path(__file__).resolve().parents[1]
TTS_PYTHON = Path(os.environ.get("OMNISTORY_SPEECH_PYTHON") or ROOT / ".venvs/tts/bin/python")
KEY_VAR, KEY = "OMNI_USER_SWEEP_KEY", "sk-canary-user-sweep-8d7c6b5a"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.tts_env,
    # where the test command built the environment (OMNISTORY_REQUIRE_REAL=1) a missing one fails
    pytest.mark.skipif(
        not TTS_PYTHON.exists() and os.environ.get("OMNISTORY_REQUIRE_REAL") != "1",
        reason=f"needs the isolated TTS environment at {TTS_PYTHON} (scripts/test.sh creates it "
        "with `omnistory env create tts=parler tts=voxcpm --dir .venvs/tts`)",
    ),
]


def _build_tts(kind: str, path: Path) -> None:
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT / f'plugins/omnistory-{kind}/tests')!r});"
        f"from conftest import build_tiny_{kind}; build_tiny_{kind}({str(path)!r})"
    )
    subprocess.run(
        [str(TTS_PYTHON), "-c", code],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        timeout=600,
    )


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("tiny")
    sys.path.insert(0, str(ROOT / "plugins/omnistory-flux/tests"))
    try:
        from flux_tiny import build_tiny_flux
    finally:
        sys.path.pop(0)
    paths = {
        "OMNISTORY_MODEL_IMAGE_DEV": build_tiny_flux(root / "dev", "dev"),
        "OMNISTORY_MODEL_IMAGE_KONTEXT": build_tiny_flux(root / "kontext", "kontext"),
        "OMNISTORY_MODEL_TTS_PARLER": root / "parler",
        "OMNISTORY_MODEL_TTS_VOXCPM": root / "voxcpm",
    }
    _build_tts("parler", paths["OMNISTORY_MODEL_TTS_PARLER"])
    _build_tts("voxcpm", paths["OMNISTORY_MODEL_TTS_VOXCPM"])
    return {k: str(v) for k, v in paths.items()}


def test_the_users_sweep_runs_end_to_end(checkpoints, tmp_path: Path) -> None:
    from omnistory_testkit import FakeServer, files_containing

    env = {
        **checkpoints,
        "OMNISTORY_RUNNER_TTS_PARLER": str(TTS_PYTHON),
        "OMNISTORY_RUNNER_TTS_VOXCPM": str(TTS_PYTHON),
        "HF_HUB_OFFLINE": "1",
        KEY_VAR: KEY,
    }
    with FakeServer() as server:
        args = [
            "-m",
            "planner=claude,gpt",
            "image=kontext,dev",
            "tts=parler,voxcpm",
            "dataset.limit=2",
            f"++planner.base_url={server.openai_base_url}",
            f"++planner.api_key_env={KEY_VAR}",
            "++image.height=64",
            "++image.width=64",
            "++image.steps=2",
            "output_root=out",
            "engine.progress=false",
        ]
        first = run_cli(*args, cwd=tmp_path, env=env, timeout=1800)
        assert first.returncode == 0, first.stderr[-4000:]
        api_requests = len(server.requests)
        sweep_stats = tmp_path / "out/sweeps/demo/sweep_stats.json"
        first_stats = json.loads(sweep_stats.read_text())["components"]
        again = run_cli(*args, cwd=tmp_path, env=env, timeout=1800)
        assert again.returncode == 0, again.stderr[-4000:]
        assert len(server.requests) == api_requests  # nothing re-planned

    # each planner planned each example once: 2 planners x 2 examples
    assert api_requests == 4
    sweep = tmp_path / "out/sweeps/demo"
    jobs = sorted(p.name for p in sweep.iterdir() if (p / "manifest.json").exists())
    assert jobs == sorted(
        f"{p}-{i}-{t}"
        for p in ("claude", "gpt")
        for i in ("kontext", "dev")
        for t in ("parler", "voxcpm")
    )
    rates = {"parler": set(), "voxcpm": set()}
    for job in jobs:
        manifest = json.loads((sweep / job / "manifest.json").read_text())
        assert manifest["missing"] == {"text": 0, "image": 0, "speech": 0}, job
        tts = manifest["components"]["tts"]
        assert tts["runner_python"] == str(TTS_PYTHON)
        for i in (0, 1):
            with wave.open(str(sweep / job / f"speech/{i}/generated.wav")) as wav:
                rates[tts["name"]].add(wav.getframerate())
            assert (sweep / job / f"image/{i}/generated.png").stat().st_size > 0
    assert rates == {"parler": {44100}, "voxcpm": {48000}}

    # images: one call per (planner, prompt) for dev and kontext, never per TTS choice
    assert first_stats["image/dev"]["calls"] <= 4 and first_stats["image/dev"]["cache_hits"] >= 4
    assert sum(s["calls"] for s in first_stats.values()) == len(
        list((tmp_path / "out/store/calls").rglob("*.json"))
    )
    # the re-run above was fully cached: it computed nothing and loaded no model
    for name, counts in json.loads(sweep_stats.read_text())["components"].items():
        assert counts["calls"] == 0 and counts["loads"] == 0, name
    assert files_containing(str(tmp_path / "out"), KEY) == []
