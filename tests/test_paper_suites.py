"""The paper's presets as sweeps, every model replaced by its stand-in (same names, reads, params).

The model plugins' own tests run their loading paths on tiny checkpoints; here the presets, suites,
system graph, store sharing and job layout are checked across the whole paper grid in seconds.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from omnistory_testing import run_cli
from omnistory_testkit.standins import make_standin_site

SEMI = {
    "mmada_parler": ("mmada", "tts", "semi-orchestration (T+I)"),
    "mmada_voxcpm": ("mmada", "tts", "semi-orchestration (T+I)"),
    "emu3_parler": ("emu3", "tts", "semi-orchestration (T+I)"),
    "emu3_voxcpm": ("emu3", "tts", "semi-orchestration (T+I)"),
    "qwen25omni_dev": ("qwen25omni", "image", "semi-orchestration (T+S)"),
    "qwen25omni_kontext": ("qwen25omni", "image", "semi-orchestration (T+S)"),
    "qwen25omni_nitro": ("qwen25omni", "image", "semi-orchestration (T+S)"),
    "emova_dev": ("emova", "image", "semi-orchestration (T+S)"),
    "emova_kontext": ("emova", "image", "semi-orchestration (T+S)"),
    "emova_nitro": ("emova", "image", "semi-orchestration (T+S)"),
}
QUIET = ("engine.progress=false", "evaluation.report=false", "output_root=out")


@pytest.fixture(scope="module")
def standins(tmp_path_factory) -> dict[str, str]:
    return {"PYTHONPATH": str(make_standin_site(tmp_path_factory.mktemp("standins")))}


def stats(sweep: Path) -> dict[str, dict[str, int]]:
    return json.loads((sweep / "sweep_stats.json").read_text())["components"]


def test_suite_semi_runs_the_ten_systems_with_shared_backbone_calls(tmp_path, standins) -> None:
    proc = run_cli(
        "-m", "suite=semi", "dataset.limit=2", "sweep_name=semi", *QUIET, cwd=tmp_path, env=standins
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    sweep = tmp_path / "out" / "sweeps" / "semi"
    assert sorted(p.parent.name for p in sweep.glob("*/manifest.json")) == sorted(SEMI)
    for system, (backbone, expert, paradigm) in SEMI.items():
        manifest = json.loads((sweep / system / "manifest.json").read_text())
        assert manifest["paradigm"] == paradigm
        assert manifest["stages"] == ["backbone", expert]
        assert manifest["components"]["backbone"]["name"] == backbone
        for modality, name in (
            ("text", "generated.txt"),
            ("image", "generated.png"),
            ("speech", "generated.wav"),
        ):
            assert (sweep / system / modality / "1" / name).is_file(), (system, modality)
    counts = stats(sweep)
    # per example: 4 backbone calls (not 10), 6 image calls, 4 TTS calls
    backbone = sum(c["calls"] for k, c in counts.items() if k.startswith("backbone/"))
    image = sum(c["calls"] for k, c in counts.items() if k.startswith("image/"))
    tts = sum(c["calls"] for k, c in counts.items() if k.startswith("tts/"))
    assert (backbone, image, tts) == (4 * 2, 6 * 2, 4 * 2)

    again = run_cli(
        "-m", "suite=semi", "dataset.limit=2", "sweep_name=semi", *QUIET, cwd=tmp_path, env=standins
    )
    assert again.returncode == 0, again.stderr[-3000:]
    assert all(c["calls"] == 0 and c["loads"] == 0 for c in stats(sweep).values())


def test_two_systems_differing_in_their_expert_call_the_backbone_once(tmp_path, standins) -> None:
    proc = run_cli(
        "-m",
        "system=mmada_parler,mmada_voxcpm",
        "dataset.limit=3",
        "sweep_name=pair",
        *QUIET,
        cwd=tmp_path,
        env=standins,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    counts = stats(tmp_path / "out" / "sweeps" / "pair")
    assert counts["backbone/mmada"]["calls"] == 3
    assert counts["backbone/mmada"]["cache_hits"] == 3
    assert counts["tts/parler"]["calls"] == 3 and counts["tts/voxcpm"]["calls"] == 3


@pytest.mark.parametrize(
    "system", sorted(SEMI) + ["hyperclova", "anygpt", "omnidiffusion", "dynin"]
)
def test_each_preset_composes(tmp_path, system: str) -> None:
    proc = run_cli(f"system={system}", "--cfg", "job", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    backbone = SEMI[system][0] if system in SEMI else system
    assert f"system_id: {system}" in proc.stdout
    assert f"name: {backbone}" in proc.stdout


ANY_TO_ANY = ("hyperclova", "anygpt", "omnidiffusion", "dynin")


def test_suite_any_to_any_runs_the_four_backbones_alone(tmp_path, standins) -> None:
    proc = run_cli(
        "-m",
        "suite=any_to_any",
        "dataset.limit=1",
        "sweep_name=a2a",
        *QUIET,
        cwd=tmp_path,
        env=standins,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    sweep = tmp_path / "out" / "sweeps" / "a2a"
    for system in ANY_TO_ANY:
        manifest = json.loads((sweep / system / "manifest.json").read_text())
        assert manifest["paradigm"] == "any-to-any" and manifest["stages"] == ["backbone"]
        assert manifest["components"]["backbone"]["name"] == system
    assert set(stats(sweep)) == {f"backbone/{b}" for b in ANY_TO_ANY}


def test_paper32_is_the_paper_in_one_command(tmp_path, standins) -> None:
    """All 32 systems on 2 examples: 43 distinct generation calls per example, not 78."""
    from omnistory_paper.plugin import PAPER32

    assert len(PAPER32) == len(set(PAPER32)) == 32
    proc = run_cli(
        "-m",
        "suite=paper32",
        "dataset.limit=2",
        "sweep_name=p32",
        "engine.progress=false",
        "output_root=out",
        cwd=tmp_path,
        env=standins,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    sweep = tmp_path / "out" / "sweeps" / "p32"
    assert sorted(p.parent.name for p in sweep.glob("*/manifest.json")) == sorted(PAPER32)
    assert (sweep / "report" / "index.html").is_file()
    counts = stats(sweep)

    def calls(*kinds: str) -> int:
        return sum(c["calls"] for k, c in counts.items() if k.split("/")[0] in kinds)

    assert (calls("planner", "backbone"), calls("image"), calls("tts")) == (13 * 2, 18 * 2, 12 * 2)
    paradigms = [json.loads((sweep / s / "manifest.json").read_text())["paradigm"] for s in PAPER32]
    assert paradigms.count("orchestration") == 18 and paradigms.count("any-to-any") == 4
