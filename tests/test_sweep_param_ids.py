"""A sweep over a component parameter's values gives each job its own directory and id."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def sweep(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "omnistory_core",
            "-m",
            *args,
            "dataset.limit=1",
            f"output_root={tmp_path / 'out'}",
            "sweep_name=s",
        ],
        cwd=tmp_path,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )


def job_ids(tmp_path: Path) -> dict[str, str]:
    root = tmp_path / "out" / "sweeps" / "s"
    return {
        p.parent.name: json.loads(p.read_text())["system_id"]
        for p in sorted(root.glob("*/manifest.json"))
    }


def test_jobs_differing_only_in_a_parameter_do_not_share_a_directory(tmp_path: Path) -> None:
    done = sweep(tmp_path, "system=template_copy_espeak", "image=noop", "image.size=16,32")
    assert done.returncode == 0, done.stderr[-3000:]
    assert job_ids(tmp_path) == {
        "template_copy_espeak-image.size=16": "template_copy_espeak-image.size=16",
        "template_copy_espeak-image.size=32": "template_copy_espeak-image.size=32",
    }


def test_sweeps_with_distinct_ids_keep_their_names(tmp_path: Path) -> None:
    done = sweep(tmp_path, "image=copy,noop", "image.size=16")
    # image.size is not a parameter of copy: that job fails alone, the noop job keeps its name
    assert done.returncode == 1, done.stderr[-3000:]
    assert set(job_ids(tmp_path).values()) == {"template-noop-espeak"}
