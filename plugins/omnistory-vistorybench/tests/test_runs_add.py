"""Runs add, never erase; each task brings its dataset; mismatches are refused before any call.

Through the real CLI: the runs of one method in two languages, on lite and full, with a
parameter change and with a run killed (``kill -9``) mid-way each keep their own folder, and no
run touches another's files.  The method is ``kontext_first_ref`` with the test kit's stand-in
FLUX.1-Kontext (an instant, deterministic twin), so that a run can be made slow enough to kill.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from omnistory_testkit import run_cli
from omnistory_testkit.standins import make_standin_site
from omnistory_vistorybench.dataset import fixture_root
from omnistory_vistorybench.layout import read_outputs

QUIET = ("engine.progress=false",)
BASE = ("system=kontext_first_ref", "dataset=vistory_fixture", *QUIET)
RUNS = Path("outputs", "runs", "vistory_fixture")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return {"PYTHONPATH": str(make_standin_site(tmp_path_factory.mktemp("standins")))}


def run(cwd: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    done = run_cli(*args, cwd=cwd, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def files_of(root: Path) -> dict[str, str]:
    """Every file under the job directories (not Hydra's bookkeeping nor the log), by content."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in root.rglob("*")
        if p.is_file() and ".hydra" not in p.parts and p.suffix != ".log"
    }


def image_calls(job: Path) -> dict[str, int]:
    return read_json(job / "stats.json")["components"]["image/first_ref"]


def test_runs_of_one_method_add_and_never_erase(tmp_path: Path, site: dict[str, str]) -> None:
    runs = tmp_path / RUNS
    variants = {
        "kontext_first_ref": (),
        "kontext_first_ref-ch": ("dataset.language=ch",),
        "kontext_first_ref-lite": ("dataset.split=lite",),
        "kontext_first_ref-base-image.guidance=2.5": ("image.guidance=2.5",),
    }
    kept: dict[str, str] = {}
    for name, extra in variants.items():
        run(tmp_path, *BASE, *extra, env=site)
        now = files_of(runs)
        # every earlier run's files are still there, byte for byte
        assert {k: now.get(k) for k in kept} == kept, name
        kept = now
    levels = {}
    for name in variants:
        manifest = read_json(runs / name / "manifest.json")
        layout = manifest["layout"]
        levels[name] = (layout["method"], layout["mode"], layout["language"])
        assert manifest["system_id"] == "kontext_first_ref"  # one method
        (key,) = read_outputs(runs / name / "outputs")  # one run per job directory
        assert tuple(key)[:3] == levels[name]
    assert levels == {
        "kontext_first_ref": ("kontext_first_ref", "base", "en"),
        "kontext_first_ref-ch": ("kontext_first_ref", "base", "ch"),
        "kontext_first_ref-lite": ("kontext_first_ref", "base", "en"),
        "kontext_first_ref-base-image.guidance=2.5": (
            "kontext_first_ref",
            "base-image.guidance=2.5",
            "en",
        ),
    }
    assert read_json(runs / "kontext_first_ref-base-image.guidance=2.5" / "manifest.json")["run"][
        "changed"
    ] == {"image.guidance": "2.5"}
    # the en full run and the lite run share (method, mode, language): two timestamps
    stamps = {read_json(runs / n / "manifest.json")["layout"]["timestamp"] for n in variants}
    assert (
        len(stamps) >= 2
        and read_json(runs / "kontext_first_ref-lite" / "manifest.json")["layout"]["timestamp"]
        != read_json(runs / "kontext_first_ref" / "manifest.json")["layout"]["timestamp"]
    )

    # kill -9 mid-run: another seed's run of the method, killed after its second stored call
    log = tmp_path / "calls.jsonl"
    env = {
        **os.environ,
        **site,
        "PYTHONUNBUFFERED": "1",
        "OMNISTORY_STANDIN_DELAY_S": "0.4",
        "OMNISTORY_STANDIN_LOG": str(log),
    }
    cmd = [sys.executable, "-m", "omnistory_core", *BASE, "seed=1"]
    proc = subprocess.Popen(
        cmd, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if log.is_file() and len(log.read_text().splitlines()) >= 2:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    killed = runs / "kontext_first_ref-seed1"
    assert not (killed / "manifest.json").exists()
    now = files_of(runs)
    assert {k: now.get(k) for k in kept} == kept  # nothing of the other runs touched
    # its re-run finishes it in its own folder, the stored calls reused
    run(tmp_path, *BASE, "seed=1", env=site)
    assert image_calls(killed)["cache_hits"] >= 1
    assert {k: files_of(runs).get(k) for k in kept} == kept

    # a re-run of the same settings resumes its own folder: no call, the same timestamp
    first = runs / "kontext_first_ref"
    before = read_json(first / "manifest.json")["layout"]
    run(tmp_path, *BASE, env=site)
    assert image_calls(first)["calls"] == 0
    assert read_json(first / "manifest.json")["layout"] == before


def test_a_sweep_over_languages_and_settings_is_one_method(
    tmp_path: Path, site: dict[str, str]
) -> None:
    run(tmp_path, "-m", *BASE, "dataset.language=en,ch", "image.guidance=2.5,3.5", env=site)
    sweep = tmp_path / "outputs" / "sweeps" / "vistory_fixture"
    jobs = sorted(p.parent for p in sweep.glob("*/manifest.json"))
    assert [j.name for j in jobs] == [
        "kontext_first_ref-base-image.guidance=2.5",
        "kontext_first_ref-base-image.guidance=2.5-ch",
        "kontext_first_ref-base-image.guidance=3.5",
        "kontext_first_ref-base-image.guidance=3.5-ch",
    ]
    assert {read_json(j / "manifest.json")["system_id"] for j in jobs} == {"kontext_first_ref"}


def test_each_task_brings_its_dataset(tmp_path: Path) -> None:
    # task=vistorybench selects ViStoryBench's dataset: its keys take dataset.root and split
    run(
        tmp_path,
        "task=vistorybench",
        f"dataset.root={fixture_root()}",
        "dataset.split=lite",
        "image=copy_paste",
        *QUIET,
    )
    job = tmp_path / "outputs" / "runs" / "vistory" / "copy_paste-lite"
    manifest = read_json(job / "manifest.json")
    assert manifest["dataset"]["name"] == "vistory" and manifest["dataset"]["split"] == "lite"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("dataset=vistory_fixture", "image=copy"),
            "dataset=vistory_fixture is a dataset of task vistorybench, but this run's task is"
            " omnistorybench; add task=vistorybench",
        ),
        (
            ("image=copy_paste",),
            "image=copy_paste reads character_refs, which task omnistorybench does not offer",
        ),
    ],
)
def test_a_mismatch_is_one_line_and_exit_2_before_any_call(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    done = run_cli(*args, *QUIET, "output_root=out", cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], done.stderr
    # nothing written: no job directory, no store
    assert not (tmp_path / "out" / "runs").exists() and not (tmp_path / "out" / "store").exists()
