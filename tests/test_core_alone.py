"""The core distribution on its own, in a fresh virtual environment, as a new user installs it:
no pandas, scipy, matplotlib or torch; a generation runs and writes its outputs; ``tasks`` lists
the built-in task; what needs omnistory-eval or omnistory-report says so in one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from omnistory_testing import core_source_copy

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("pandas", "scipy", "matplotlib", "torch")


def _run(python: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(
        [str(python), "-m", "omnistory_core", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def core_python(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("core_alone")
    source = base / "source"  # setuptools writes build folders into the tree it builds
    core_source_copy(source)
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    install = subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "--no-compile",
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    return python


@pytest.mark.slow
def test_the_core_alone_installs_no_analysis_or_model_stack(core_python: Path) -> None:
    listed = subprocess.run(
        [str(core_python), "-m", "pip", "list", "--format=freeze", "--disable-pip-version-check"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.lower()
    installed = {line.split("==")[0] for line in listed.splitlines()}
    assert "omnistory-core" in installed
    assert not installed & set(HEAVY), sorted(installed & set(HEAVY))
    assert not installed & {"omnistory-eval", "omnistory-report", "omnistory-testkit"}


@pytest.mark.slow
def test_the_core_alone_generates_lists_its_task_and_names_what_to_install(
    core_python: Path, tmp_path: Path
) -> None:
    run = _run(core_python, "dataset.limit=2", "engine.progress=false", cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    job = tmp_path / "outputs/runs/demo/template-copy-espeak"
    outputs = sorted(p.relative_to(job).as_posix() for p in job.glob("*/*/generated.*"))
    assert outputs == [
        "image/0/generated.png",
        "image/1/generated.png",
        "speech/0/generated.wav",
        "speech/1/generated.wav",
        "text/0/generated.txt",
        "text/1/generated.txt",
    ]
    tasks = _run(core_python, "tasks", cwd=tmp_path)
    assert tasks.returncode == 0, tasks.stderr
    assert "omnistorybench" in tasks.stdout

    # a sweep ends without a report, saying in one line how to get one
    sweep = _run(core_python, "-m", "system=copy_copy_espeak", "dataset.limit=1", cwd=tmp_path)
    assert sweep.returncode == 0, sweep.stderr[-3000:]
    said = (sweep.stdout + sweep.stderr).splitlines()
    hint = [line for line in said if "no report: install omnistory-report" in line]
    assert len(hint) == 1, sweep.stderr[-3000:]

    # asking for scores without the evaluation distribution: one line naming it, exit 2
    for args in (
        ("evaluate", str(tmp_path / "outputs")),
        ("-m", "system=copy_copy_espeak", "dataset.limit=1", "evaluation.metrics=[bertscore]"),
        ("report", "--scores", "x.jsonl", "--out", "r"),
    ):
        proc = _run(core_python, *args, cwd=tmp_path)
        assert proc.returncode == 2, (args, proc.stdout[-1000:], proc.stderr[-2000:])
        errors = [line for line in proc.stderr.splitlines() if line.startswith("omnistory: error")]
        assert len(errors) == 1, proc.stderr[-2000:]
        wanted = "omnistory-report" if args[0] == "report" else "omnistory-eval"
        assert f"needs the {wanted} distribution" in errors[0], errors
