"""Every built-in generation component passes the plugin kit's conformance run."""

from __future__ import annotations

import pytest
from omnistory_testkit import check_component

from omnistory_core.builtin import espeak_tts, images, noop_backbone, noop_tts, planners

BUILTINS = [
    *planners.PLANNERS,
    *images.IMAGE_EXPERTS,
    espeak_tts.EspeakTTS,
    noop_tts.NoopTTS,
    noop_backbone.NoopBackbone,
]


@pytest.mark.parametrize("cls", BUILTINS, ids=lambda c: f"{c.kind}-{c.name}")
def test_builtin_component_keeps_the_contract(cls) -> None:
    report = check_component(cls)
    checks = {name.split(" ")[0] for name in report.passed}
    assert checks == {
        "identity",
        "reads",
        "light_import",
        "outputs",
        "cache",
        "output_params",
        "deterministic",
        "failures",
        *(["runtime_params"] if "runtime_params" not in report.skipped else []),
    }, str(report)


def test_the_builtin_components_are_the_ones_registered() -> None:
    from omnistory_core.plugins import load_plugins

    registry = load_plugins()
    registered = {
        cls
        for (kind, _name), cls in registry.components.items()
        if registry.origins[(kind, _name)] == "builtin"
        and kind in ("planner", "image", "tts", "backbone")
    }
    assert registered == set(BUILTINS)
