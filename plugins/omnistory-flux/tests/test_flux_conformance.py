"""FLUX dev and Kontext pass the plugin kit's conformance run on the tiny random checkpoints,
loaded through the experts' own load()."""

from __future__ import annotations

import pytest
from flux_tiny import TINY
from omnistory_flux.experts import FluxDev, FluxKontext
from omnistory_testkit import check_component


@pytest.mark.parametrize(
    ("cls", "checkpoint", "extra"),
    [(FluxDev, "tiny_dev", {}), (FluxKontext, "tiny_kontext", {"auto_resize": False})],
    ids=["dev", "kontext"],
)
def test_flux_expert_keeps_the_component_contract(cls, checkpoint, extra, request) -> None:
    model = request.getfixturevalue(checkpoint)
    report = check_component(cls, model=str(model), **TINY, **extra)
    assert {"light_import", "outputs", "cache", "deterministic"} <= set(report.passed), str(report)
    assert any(p.startswith("output_params (") and "steps" in p for p in report.passed)
    assert any(p.startswith("failures") for p in report.passed), str(report)
