"""tts/voxcpm passes the plugin kit's conformance run on the tiny random VoxCPM2 checkpoint,
loaded through the expert's own load().  Needs the VoxCPM environment; skipped elsewhere."""

from __future__ import annotations

import pytest

pytest.importorskip(
    "voxcpm",
    reason="voxcpm is not installed here; run with the VoxCPM environment"
    " (scripts/test.sh runs these in .venvs/tts; see the plugin README)",
)

from omnistory_testkit import check_component  # noqa: E402
from omnistory_voxcpm.expert import VoxCPMTTS  # noqa: E402


def test_voxcpm_keeps_the_component_contract(tiny_voxcpm_dir) -> None:
    report = check_component(
        VoxCPMTTS, model=tiny_voxcpm_dir, device="cpu", optimize=False, max_len=40
    )
    assert {"light_import", "outputs", "cache", "deterministic"} <= set(report.passed), str(report)
    assert any(p.startswith("output_params (") and "model" in p for p in report.passed)
    assert any(p.startswith("failures") for p in report.passed), str(report)
