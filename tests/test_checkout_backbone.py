"""omnistory_core.kit.checkout.CheckoutBackbone: a backbone whose code is a git checkout.

The checkout is a folder written here (a real git repository where the commit matters, made with
the real ``git``), imported through the real import system.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from omnistory_core.components import ComponentError
from omnistory_core.kit.checkout import Checkout, CheckoutBackbone, git_revision
from omnistory_core.kit.diffusion import SettingsError
from omnistory_core.params import Param, ParamError

PIN = "0123456789abcdef0123456789abcdef01234567"

CHECKOUT = Checkout(
    component="backbone=demo-checkout",
    name="Demo",
    repository="https://github.com/example/Demo.git",
    commit=PIN,
    required_files=("demo_ckpt_pkg/__init__.py",),
    packages=("demo_ckpt_pkg",),
    digest_dirs=("demo_ckpt_pkg",),
)


class Demo(CheckoutBackbone):
    name = "demo-checkout"
    version = "1"
    produces = frozenset({"text"})
    checkout = CHECKOUT
    pin_note = " (the demo's pin)"
    parameters = (
        CHECKOUT.declaration(),
        Param("width", int, 8, "a setting that is in the key"),
        Param("device", str, "auto", "where it runs", runtime=True),
    )

    @classmethod
    def check(cls, params: Mapping[str, Any]) -> dict[str, Any]:
        width = params.get("width") or 8
        if width > 64:
            raise SettingsError(f"backbone=demo-checkout: width must be <= 64, got {width}")
        return {"width": width, "device": params.get("device") or "auto"}

    def run_one(self, item: dict[str, Any]) -> Any:
        usage: dict[str, Any] = {"passes": 1}
        self.record_revision(usage)
        return usage


def tree(root: Path, text: str = "NAME = 'demo'\n") -> Path:
    (root / "demo_ckpt_pkg").mkdir(parents=True)
    (root / "demo_ckpt_pkg/__init__.py").write_text(text)
    return root


def git_repo(root: Path) -> Path:
    tree(root)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    subprocess.run(
        ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"],
        check=True,
    )
    return root


def test_the_parameter_is_declared_runtime_only_with_the_repository_named() -> None:
    declared = Demo.parameters[0]
    assert declared == Param(
        "source_dir",
        str,
        None,
        "checkout of example/Demo (required; the key hashes its code)",
        runtime=True,
    )
    assert "source_dir" in Demo.runtime_params
    assert CHECKOUT.declaration("mine").doc == "mine"


def test_bad_settings_and_bad_checkouts_are_one_line_param_errors(tmp_path: Path) -> None:
    with pytest.raises(ParamError, match="backbone.source_dir is not set; Demo's model code"):
        Demo()
    with pytest.raises(ParamError, match="is not a checkout of example/Demo"):
        Demo(source_dir=str(tmp_path))
    with pytest.raises(ParamError, match="width must be <= 64, got 65"):
        Demo(source_dir=str(tree(tmp_path / "Demo")), width=65)


def test_the_key_holds_the_code_by_content_not_its_directory(tmp_path: Path) -> None:
    one = Demo(source_dir=str(tree(tmp_path / "one")), device="cpu")
    assert one.source_dir == (tmp_path / "one").resolve()
    assert one.output_params() == {"width": 8, "source_tree": CHECKOUT.digest(one.source_dir)}
    same = Demo(source_dir=str(shutil.copytree(tmp_path / "one", tmp_path / "two")))
    assert same.output_params() == one.output_params()
    changed = Demo(source_dir=str(tree(tmp_path / "three", "NAME = 'other'\n")))
    assert changed.output_params()["source_tree"] != one.output_params()["source_tree"]
    assert one.source_revision is None and one.run_one({}) == {"passes": 1}  # not a git repo


def test_a_checkout_at_another_commit_is_recorded_and_warned_about(tmp_path: Path, caplog) -> None:
    demo = Demo(source_dir=str(git_repo(tmp_path / "Demo")))
    revision = git_revision(demo.source_dir)
    assert revision and demo.source_revision == revision
    assert demo.run_one({}) == {"passes": 1, "source_revision": revision}
    with caplog.at_level(logging.WARNING, logger="omnistory"):
        demo.warn_if_unpinned()
    assert caplog.messages == [
        f"backbone=demo-checkout: {demo.source_dir} is at commit {revision[:12]}, not "
        f"{PIN[:12]} (the demo's pin)"
    ]
    caplog.clear()
    demo.source_revision = PIN
    demo.warn_if_unpinned()
    assert caplog.messages == []


def test_import_checkout_imports_from_it_or_says_what_to_do(tmp_path: Path) -> None:
    demo = Demo(source_dir=str(tree(tmp_path / "Demo")))
    try:
        (module,) = demo.import_checkout(
            lambda root: CHECKOUT.import_modules(root, "demo_ckpt_pkg")
        )
        assert module.NAME == "demo"
    finally:
        sys.modules.pop("demo_ckpt_pkg", None)

    def broken(root: Path) -> Any:
        raise ModuleNotFoundError("No module named 'torch'")

    with pytest.raises(ComponentError) as info:
        demo.import_checkout(broken)
    assert str(info.value) == (
        f"backbone=demo-checkout: cannot import Demo's code from source_dir={demo.source_dir}: "
        "ModuleNotFoundError: No module named 'torch' -- build its environment with `python -m "
        "omnistory_core env create backbone=demo-checkout` and run with "
        f"backbone.runner.python=<that venv>/bin/python; if the checkout is incomplete, "
        f"{CHECKOUT.get_it()}"
    )
    assert isinstance(info.value.__cause__, ModuleNotFoundError)
