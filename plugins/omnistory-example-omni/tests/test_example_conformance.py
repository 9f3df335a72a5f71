"""Each example backbone passes the plugin kit's conformance run (the T+I and T+S ones with the
built-in expert for the modality they leave to the plan)."""

from __future__ import annotations

import pytest
from omnistory_example_omni.backbone import ExampleOmni, ExampleTextImage, ExampleTextSpeech
from omnistory_testkit import check_component


@pytest.mark.parametrize(
    "cls", [ExampleOmni, ExampleTextImage, ExampleTextSpeech], ids=lambda c: c.name
)
def test_example_backbone_keeps_the_component_contract(cls) -> None:
    # list and null parameters have no obvious "other value": vary= names one for the key check
    report = check_component(
        cls, tint=0.35, vary={"omit": ["speech"], "omit_category": "model_error"}
    )
    assert {"outputs", "cache", "deterministic"} <= set(report.passed), str(report)
    assert "output_params (omit, omit_category, seed, tint)" in report.passed, str(report)
    assert "failures (through run_one)" in report.passed, str(report)
    assert set(report.skipped) == {"runtime_params"}, str(report)
