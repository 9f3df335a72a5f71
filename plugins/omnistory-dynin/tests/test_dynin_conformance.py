"""Dynin-Omni (transformers backend) passes the plugin kit's conformance run on the stand-in
checkout and its tiny checkpoints, with the shortened sequence of test_dynin_model."""

from __future__ import annotations

from omnistory_dynin.backbone import DyninOmni
from omnistory_testkit import check_component


def test_dynin_keeps_the_component_contract(source_tree, checkpoints) -> None:
    report = check_component(
        DyninOmni,
        source_dir=str(source_tree),
        model=str(checkpoints["model"]),
        image_codec=str(checkpoints["image_codec"]),
        speech_codec=str(checkpoints["speech_codec"]),
        token_layout=checkpoints["layout"],
        steps=4,
        image_resolution=112,
        prompt_length=640,
        device="cpu",
        local_files_only=True,
    )
    assert {"light_import", "outputs", "cache", "deterministic"} <= set(report.passed), str(report)
    assert any(p.startswith("runtime_params (") for p in report.passed), str(report)
    assert any(p.startswith("output_params (") and "steps" in p for p in report.passed)
    assert any(p.startswith("failures") for p in report.passed), str(report)
