"""``metric=dreamsim`` against the evaluator contract: ``check_component`` scores a tiny run of
built-in systems on the bundled demo through the evaluation runner (cache, runtime vs output
parameters in the result key, same scores twice, a raising item and an unreadable image as data).

The real ``dreamsim`` package needs torchvision and downloads its ensemble from GitHub, and its
weights cannot be built at toy size, so its API is played by a stand-in with the same call shape
(``dreamsim_standin/dreamsim``: a seeded random projection as the embedding), as in the core's
DreamSim tests; the real model is checked only where the package and its weights are installed.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from omnistory_dreamsim.metric import DreamSimMetric
from omnistory_testkit import check_component

STANDIN = Path(__file__).resolve().parent / "dreamsim_standin"
CHECKS = (
    "identity",
    "reads",
    "light_import",
    "outputs",
    "cache",
    "runtime_params",
    "output_params",
    "deterministic",
    "failures",
    "unreadable_input",
)


@pytest.fixture
def standin(monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.syspath_prepend(str(STANDIN))
    sys.modules.pop("dreamsim", None)
    import dreamsim

    yield dreamsim
    sys.modules.pop("dreamsim", None)


def test_dreamsim_keeps_the_evaluator_contract(standin, tmp_path: Path) -> None:
    report = check_component(DreamSimMetric, device="cpu", cache_dir=str(tmp_path / "weights"))
    print(report)
    assert {check.split()[0] for check in report.passed} >= set(CHECKS), str(report)
    assert "runtime_params (cache_dir, cache_size, device)" in report.passed
    assert "output_params (dreamsim_type, normalize_embeds, seed)" in report.passed
    assert "unreadable_input (candidate_image)" in report.passed
    # every declared parameter has a default to vary from, so nothing is skipped
    assert set(report.skipped) == set(), report.skipped
    # loaded only by the evaluations with something to compute: the first, the one in a second
    # store, the one with a raising item and the one with an unreadable image (never when cached)
    assert len(standin.CALLS) == 4, standin.CALLS
    assert {call["cache_dir"] for call in standin.CALLS} == {str(tmp_path / "weights")}


@pytest.mark.weights
@pytest.mark.skipif(
    importlib.util.find_spec("dreamsim") is None,
    reason="needs the dreamsim package and its downloaded weights",
)
def test_real_dreamsim_keeps_the_evaluator_contract() -> None:
    report = check_component(DreamSimMetric)
    assert {check.split()[0] for check in report.passed} >= set(CHECKS), str(report)
