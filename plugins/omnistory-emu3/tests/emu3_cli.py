"""Run the real command line in a subprocess, offline, and read what a run wrote."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def run_cli(*args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "omnistory_core", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def missing(run: Path) -> list[tuple[int, str, str]]:
    """(index, modality, category) of every line of missing.txt."""
    rows = []
    for line in (run / "missing.txt").read_text(encoding="utf-8").splitlines():
        index, modality, category = line.split("\t")[:3]
        rows.append((int(index), modality, category))
    return rows
