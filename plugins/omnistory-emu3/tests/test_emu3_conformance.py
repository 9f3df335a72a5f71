"""Emu3 (native transformers classes) passes the plugin kit's conformance run on the tiny Chat
checkpoint fitted to answer JSON and the tiny Gen checkpoint; the TTS expert that speaks its plan
is the built-in noop one."""

from __future__ import annotations

from omnistory_emu3.backbone import Emu3
from omnistory_testkit import check_component


def test_emu3_keeps_the_component_contract(trained_chat, tiny_gen) -> None:
    report = check_component(
        Emu3, chat_model=str(trained_chat), gen_model=str(tiny_gen), device="cpu"
    )
    assert {"light_import", "outputs", "cache", "deterministic"} <= set(report.passed), str(report)
    assert any(p.startswith("output_params (") and "gen_model" in p for p in report.passed)
    assert any(p.startswith("failures") for p in report.passed), str(report)
