"""tts/parler passes the plugin kit's conformance run on the tiny random checkpoint, loaded
through the expert's own load().  Needs the Parler environment; skipped elsewhere."""

from __future__ import annotations

import pytest

pytest.importorskip(
    "parler_tts",
    reason="parler-tts is not installed here; run with the Parler environment"
    " (scripts/test.sh runs these in .venvs/tts; see the plugin README)",
)

from omnistory_parler.expert import ParlerTTS  # noqa: E402
from omnistory_testkit import check_component  # noqa: E402


def test_parler_keeps_the_component_contract(tiny_parler_dir) -> None:
    report = check_component(ParlerTTS, model=tiny_parler_dir, device="cpu", max_new_tokens=10)
    assert {"light_import", "outputs", "cache", "deterministic"} <= set(report.passed), str(report)
    assert any(p.startswith("output_params (") and "model" in p for p in report.passed)
    assert any(p.startswith("failures") for p in report.passed), str(report)
