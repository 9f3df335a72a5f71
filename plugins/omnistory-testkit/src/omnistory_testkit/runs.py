"""Running the real CLI from a test, and the engine's inputs for the bundled demo examples."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any


def run_cli(
    *args: str,
    cwd: str | os.PathLike[str],
    env: dict[str, str] | None = None,
    timeout: float = 600,
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m omnistory_core ARGS`` in ``cwd`` as a user would (this interpreter, the
    current environment plus ``env``); returns the finished process with its text output."""
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "omnistory_core", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def demo_planner_items(limit: int = 2) -> list[dict[str, Any]]:
    """Planner inputs for the first ``limit`` demo examples, built as the engine builds them."""
    from omnistory_core.components import EXAMPLE_INPUTS
    from omnistory_core.data.demo import load_demo
    from omnistory_core.engine.job import MediaHasher, example_inputs

    media = MediaHasher()
    return [
        {k: example_inputs(ex, media, oracle=False)[k] for k in EXAMPLE_INPUTS}
        for ex in load_demo(limit=limit)
    ]


def files_containing(root: str | os.PathLike[str], needle: str) -> list[str]:
    """Every file under ``root`` whose bytes contain ``needle`` (a secret-leak check)."""
    hits = []
    data = needle.encode("utf-8")
    for folder, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            try:
                if data in Path(path).read_bytes():
                    hits.append(path)
            except OSError:
                continue
    return hits


__all__ = ["demo_planner_items", "files_containing", "run_cli"]
