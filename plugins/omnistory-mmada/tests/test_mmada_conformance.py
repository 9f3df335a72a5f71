"""MMaDA passes the plugin kit's conformance run on the stand-in checkout and its tiny checkpoints
(answers scripted per demo page), loaded through the backbone's own load()."""

from __future__ import annotations

from omnistory_mmada.backbone import MMaDA
from omnistory_testkit import check_component


def test_mmada_keeps_the_component_contract(source_tree, checkpoints) -> None:
    model, vq = checkpoints
    report = check_component(MMaDA, source_dir=str(source_tree), model=str(model), vq_model=str(vq))
    assert {"light_import", "outputs", "cache", "deterministic"} <= set(report.passed), str(report)
    assert any(p.startswith("output_params (") and "model" in p for p in report.passed)
    assert any(p.startswith("failures") for p in report.passed), str(report)
