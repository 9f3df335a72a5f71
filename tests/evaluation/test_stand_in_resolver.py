"""``${omnistory_stand_in_metrics:}`` (``suite=demo``'s ``evaluation.metrics``): the real-weight
stand-ins whose packages are importable, found without importing torch, and one line naming
the missing ones."""

from __future__ import annotations

import subprocess
import sys

import omnistory_eval.conf as eval_conf
import pytest
from omegaconf import OmegaConf
from omnistory_eval.metrics import real
from omnistory_eval.metrics.real import DEMO_STAND_INS, STAND_IN_MODULES, installed_stand_ins


def test_only_stand_ins_with_every_module(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(STAND_IN_MODULES, "present", ("json", "email.mime"))
    monkeypatch.setitem(STAND_IN_MODULES, "absent", ("json", "omnistory_no_such_module_x"))
    monkeypatch.setitem(STAND_IN_MODULES, "broken", ("omnistory_no_such_pkg_y.sub",))
    assert installed_stand_ins(("present", "absent", "broken")) == ["present"]


def test_demo_stand_ins_are_registered_metrics() -> None:
    """Every name the resolver can give is a metric class of omnistory-eval, with its modules."""
    names = {cls.name for cls in real.REAL_METRICS}
    assert set(DEMO_STAND_INS) <= names
    assert set(DEMO_STAND_INS) <= set(STAND_IN_MODULES)


def test_resolver_gives_the_installed_ones_and_names_the_rest(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(STAND_IN_MODULES, "bertscore_minilm", ("omnistory_no_such_module_z",))
    monkeypatch.setattr(eval_conf, "_hinted", [])
    cfg = OmegaConf.create({"evaluation": {"metrics": "${omnistory_stand_in_metrics:}"}})
    OmegaConf.resolve(cfg)  # as Hydra does: a plain list would not be storable here
    got = list(cfg.evaluation.metrics)
    assert "bertscore_minilm" not in got
    assert got == installed_stand_ins()
    err = capsys.readouterr().err
    assert "bertscore_minilm" in err and "omnistory-eval[real]" in err
    assert len(err.strip().splitlines()) == 1


def test_resolving_imports_no_torch() -> None:
    code = (
        "import sys; import omnistory_eval.conf; from omegaconf import OmegaConf;"
        "c = OmegaConf.create({'m': '${omnistory_stand_in_metrics:}'}); OmegaConf.resolve(c);"
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_core_fallback_without_omnistory_eval() -> None:
    """The core alone (omnistory_eval not imported): no stand-in, and the one line to get them."""
    code = (
        "import omnistory_core.conf; from omegaconf import OmegaConf;"
        "c = OmegaConf.create({'m': '${omnistory_stand_in_metrics:}'}); OmegaConf.resolve(c);"
        "OmegaConf.resolve(OmegaConf.create({'m': '${omnistory_stand_in_metrics:}'}));"
        "import sys; print(list(c.m), 'omnistory_eval' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[] False"
    lines = out.stderr.strip().splitlines()
    # printed once, not per resolution
    assert len(lines) == 1 and "omnistory-eval[real]" in lines[0], lines
