"""Omni-Diffusion passes the plugin kit's conformance run on the stand-in checkpoint, checkout,
MAGVIT-v2 and speech decoder, loaded through the backbone's own load()."""

from __future__ import annotations

import pytest
from omnistory_omnidiffusion.backbone import OmniDiffusion
from omnistory_testkit import check_component

pytestmark = pytest.mark.usefixtures("single_thread")


def test_omnidiffusion_keeps_the_component_contract(standin) -> None:
    report = check_component(
        OmniDiffusion,
        source_dir=str(standin["source_dir"]),
        model=str(standin["model"]),
        image_tokenizer=str(standin["image_tokenizer"]),
        audio_decoder=str(standin["audio_decoder"]),
    )
    assert {"light_import", "outputs", "cache", "deterministic"} <= set(report.passed), str(report)
    assert any(p.startswith("output_params (") and "model" in p for p in report.passed)
    assert any(p.startswith("failures") for p in report.passed), str(report)
