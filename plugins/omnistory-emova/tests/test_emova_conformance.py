"""EMOVA passes the plugin kit's conformance run on the tiny EMOVA-shaped checkpoint and speech
tokenizer (stand-in remote code), loaded through the backbone's own load()."""

from __future__ import annotations

from omnistory_emova.backbone import Emova
from omnistory_testkit import check_component


def test_emova_keeps_the_component_contract(tiny_emova, tiny_speech_tokenizer) -> None:
    report = check_component(
        Emova,
        model=str(tiny_emova),
        speech_tokenizer=str(tiny_speech_tokenizer),
        dtype="float32",
        device="cpu",
    )
    assert {"light_import", "outputs", "cache", "deterministic"} <= set(report.passed), str(report)
    assert any(p.startswith("output_params (") and "model" in p for p in report.passed)
    assert any(p.startswith("failures") for p in report.passed), str(report)
