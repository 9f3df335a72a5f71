"""HyperCLOVA X SEED Omni passes the plugin kit's conformance run against the local OmniServe
stand-in, through the real openai SDK."""

from __future__ import annotations

import pytest
from hcx_fake_omniserve import FakeOmniServe
from omnistory_hyperclova.backbone import HyperClovaOmni
from omnistory_testkit import check_component

FAST = {
    "image_retry_delay_s": 0.01,
    "speech_retry_delay_s": 0.01,
    "retry_base_delay_s": 0.01,
    "timeout_s": 10,
    "download_timeout_s": 10,
}


def test_hyperclova_keeps_the_component_contract(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMNISTORY_HYPERCLOVA_API_KEY", "hcx-conformance-key")
    with FakeOmniServe() as server:
        report = check_component(HyperClovaOmni, base_url=server.base_url, **FAST)
    assert {"light_import", "outputs", "cache", "deterministic"} <= set(report.passed), str(report)
    assert any(p.startswith("runtime_params (") and "base_url" in p for p in report.passed)
    assert any(p.startswith("output_params (") for p in report.passed), str(report)
    assert any(p.startswith("failures") for p in report.passed), str(report)
