"""Nitro-T passes the plugin kit's conformance run on the tiny checkpoint (stand-in remote
pipeline) and the tiny Llama text encoder, loaded through the expert's own load()."""

from __future__ import annotations

from omnistory_nitro.expert import NitroT
from omnistory_testkit import check_component


def test_nitro_keeps_the_component_contract(tiny_nitro, tiny_llama) -> None:
    report = check_component(
        NitroT,
        model=str(tiny_nitro),
        text_encoder=str(tiny_llama),
        height=64,
        width=64,
        steps=2,
    )
    assert {"light_import", "outputs", "cache", "deterministic"} <= set(report.passed), str(report)
    assert any(p.startswith("output_params (") and "steps" in p for p in report.passed)
    assert any(p.startswith("failures") for p in report.passed), str(report)
