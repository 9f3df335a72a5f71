"""Shared test helpers: the plugin kit's CLI runner (``omnistory_testkit.run_cli``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from omnistory_testkit import run_cli

__all__ = ["copy_run", "core_source_copy", "load_json", "run_cli"]

ROOT = Path(__file__).resolve().parents[1]


def load_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def copy_run(cwd: Path) -> Path:
    """``planner=copy image=copy`` on 2 demo examples (a real run through the CLI); its job
    directory, the run the evaluation tests score."""
    gen = run_cli(
        "planner=copy",
        "image=copy",
        "dataset.limit=2",
        "output_root=out",
        "engine.progress=false",
        cwd=cwd,
    )
    assert gen.returncode == 0, gen.stderr
    return cwd / "out/runs/demo/copy-copy-espeak"


def core_source_copy(destination: Path) -> Path:
    """The core distribution's sources alone (no plugins, tests or benchmarks) copied to
    ``destination``: setuptools leaves egg-info and build folders in a tree it builds."""
    shutil.copytree(
        ROOT,
        destination,
        ignore=shutil.ignore_patterns(
            ".git",
            ".venv",
            ".venvs",
            "outputs",
            "*.egg-info",
            "build",
            "__pycache__",
            "plugins",
            "tests",
            "benchmarks",
        ),
    )
    return destination
