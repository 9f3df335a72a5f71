"""The Hydra configs and the demo dataset work from a non-editable wheel."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from omnistory_testing import core_source_copy

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow(seconds=25)
def test_non_editable_wheel_runs_the_demo(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    # build from a copy: setuptools leaves egg-info/build folders in the source tree
    source = tmp_path / "source"
    core_source_copy(source)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(wheels),
            str(source),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    wheel = next(wheels.glob("omnistory_core-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "omnistory_core/conf/config.yaml" in names
    assert "omnistory_core/conf/system/template_copy_espeak.yaml" in names
    assert "hydra_plugins/omnistory_core_searchpath/__init__.py" in names
    assert any(n.startswith("omnistory_core/data/demo/data/") for n in names)
    assert "omnistory_core/scaffold_templates/backbone/component.py.tmpl" in names
    # PEP 561 marker and the public API for plugins
    assert "omnistory_core/py.typed" in names
    assert "omnistory_core/api.py" in names
    # the core distribution needs none of the analysis or model stacks
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    requires = [
        line.split(":", 1)[1].strip().lower()
        for line in zipfile.ZipFile(wheel).read(metadata).decode().splitlines()
        if line.startswith("Requires-Dist:") and "extra ==" not in line
    ]
    heavy = [
        r
        for r in requires
        if r.split(">")[0].split("=")[0].split("<")[0].strip()
        in {"pandas", "scipy", "matplotlib", "torch"}
    ]
    assert requires and not heavy, requires

    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "-q",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(target)}
    where = subprocess.run(
        [
            sys.executable,
            "-c",
            "import omnistory_core, omnistory_core.conf as c;"
            "print(omnistory_core.__file__); print(list(c.__path__)[0])",
        ],
        cwd=work,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    assert all(w.startswith(str(target)) for w in where), where
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "omnistory_core",
            "-m",
            "suite=demo",
            "dataset.limit=2",
            "output_root=out",
            "engine.progress=false",
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    for system in ("template_copy_espeak", "copy_copy_espeak"):
        assert (work / f"out/sweeps/demo/{system}/manifest.json").exists()
        assert (work / f"out/sweeps/demo/{system}/speech/1/generated.wav").exists()
    # the same install, run from the root of a source checkout: the checkout's package shadows the
    # installed one, and its configs are in the package (omnistory_core/conf)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "omnistory_core",
            "dataset.limit=1",
            "output_root=out2",
            "engine.progress=false",
        ],
        cwd=source,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert (source / "out2/runs/demo/template-copy-espeak/manifest.json").exists()
    # `plugin new` reads its templates from the installed package
    proc = subprocess.run(
        [sys.executable, "-m", "omnistory_core", "plugin", "new", "wheeled", "--kind", "judge"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert (work / "omnistory-wheeled/src/omnistory_wheeled/judge.py").exists()
