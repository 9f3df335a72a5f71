"""Qwen2.5-Omni (transformers backend) passes the plugin kit's conformance run on the tiny
checkpoint, loaded through the backbone's own load(); the image expert that draws its plan is the
built-in noop one."""

from __future__ import annotations

import pytest
from omnistory_qwen25omni.backbone import Qwen25OmniBackbone
from omnistory_testkit import check_component


@pytest.mark.slow  # the talker's passes on two CPU cores: about a minute
def test_qwen25omni_keeps_the_component_contract(tiny_qwen25omni) -> None:
    report = check_component(
        Qwen25OmniBackbone, model=str(tiny_qwen25omni), talker_max_new_tokens=12, device="cpu"
    )
    assert {"light_import", "outputs", "cache", "deterministic"} <= set(report.passed), str(report)
    assert any(p.startswith("output_params (") and "model" in p for p in report.passed)
    assert any(p.startswith("failures") for p in report.passed), str(report)
