"""Sweeps through cluster launchers, run locally through the real CLI: SLURM's launcher
(hydra-submitit-launcher) with submitit's local executor, and Ray tasks on a local Ray cluster."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from omnistory_testing import run_cli

from omnistory_core.data import load_demo

N = len(load_demo())
SWEEP = (
    "-m",
    "planner=noop",
    "image=noop,copy",
    "tts=noop",
    "output_root=out",
    "engine.progress=false",
    "evaluation.report=false",
    "engine.store_locking=lease",
)
JOBS = ("noop-noop-noop", "noop-copy-noop")


def _assert_sweep_complete(root: Path) -> dict:
    sweep = root / "out/sweeps/demo"
    for job in JOBS:
        out = sweep / job
        for i in range(N):
            assert (out / f"text/{i}/generated.txt").read_text().strip(), (job, i)
            assert (out / f"image/{i}/generated.png").read_bytes()[:4] == b"\x89PNG", (job, i)
            assert (out / f"speech/{i}/generated.wav").read_bytes()[:4] == b"RIFF", (job, i)
    stats = json.loads((sweep / "sweep_stats.json").read_text())
    assert stats["jobs"] == 2 and stats["failed_jobs"] == []
    components = stats["components"]
    assert components["planner/noop"]["calls"] == N, "the two jobs shared their plans"
    records = len(list((root / "out/store/calls").rglob("*.json")))
    assert sum(c["calls"] for c in components.values()) == records
    return stats


def test_submitit_local_executor_runs_each_job_as_a_submitit_job(tmp_path: Path) -> None:
    pytest.importorskip(
        "hydra_plugins.hydra_submitit_launcher",
        reason="hydra-submitit-launcher is not installed: pip install 'omnistory-core[cluster]'",
    )
    proc = run_cli(*SWEEP, "hydra/launcher=submitit_local", cwd=tmp_path, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Submitit 'local' sweep output dir" in proc.stdout + proc.stderr
    _assert_sweep_complete(tmp_path)
    # each job ran in a submitit job of its own, which logged the run
    logs = list((tmp_path / "out/sweeps/demo/.submitit").glob("*/*_log.err"))
    logs += list((tmp_path / "out/sweeps/demo/.submitit").glob("*/*_log.out"))
    text = "\n".join(p.read_text() for p in logs)
    assert all(f"out/sweeps/demo/{job}" in text for job in JOBS), text[-2000:]


def test_slurm_preset_asks_for_a_gpu_per_job(tmp_path: Path) -> None:
    pytest.importorskip(
        "hydra_plugins.hydra_submitit_launcher",
        reason="hydra-submitit-launcher is not installed: pip install 'omnistory-core[cluster]'",
    )
    proc = run_cli(
        "hydra/launcher=slurm",
        "hydra.launcher.partition=gpu",
        "--cfg",
        "hydra",
        "-p",
        "hydra.launcher",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert "submitit_launcher.SlurmLauncher" in proc.stdout
    for line in ("gpus_per_node: 1", "partition: gpu", "timeout_min: 720", "max_num_timeout: 3"):
        assert line in proc.stdout, proc.stdout


def test_ray_launcher_runs_each_job_as_a_ray_task_with_its_gpu(tmp_path: Path) -> None:
    pytest.importorskip("ray", reason="Ray is not installed: pip install 'omnistory-core[cluster]'")
    # a local Ray cluster with two (logical) GPUs; each job asks for one
    cluster = ("+hydra.launcher.init.num_cpus=2", "+hydra.launcher.init.num_gpus=2")
    proc = run_cli(
        *SWEEP,
        "hydra/launcher=ray",
        *cluster,
        "hydra.launcher.num_gpus=1",
        cwd=tmp_path,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    _assert_sweep_complete(tmp_path)
    gpus = []
    for n, job in enumerate(JOBS):
        log = (tmp_path / f"out/sweeps/demo/{job}/omnistory.log").read_text()
        found = re.search(rf"ray: job #{n} on node \w+, pid \d+, GPUs \['(\d)'\]", log)
        assert found, log
        gpus.append(found.group(1))
    assert len(gpus) == 2  # each job saw the GPU Ray gave it (CUDA_VISIBLE_DEVICES)


def test_ray_launcher_refuses_jobs_bigger_than_its_local_cluster() -> None:
    from hydra_plugins.omnistory_ray_launcher.ray_launcher import _check_feasible

    job = {"num_cpus": 1, "num_gpus": 4, "resources": {"a100": 1}}
    with pytest.raises(
        ValueError,
        match=r"each job asks for GPU=4, a100=1 but the Ray cluster"
        r" has GPU=2, a100=0",
    ):
        _check_feasible(job, {"CPU": 8.0, "GPU": 2.0}, local=True)
    _check_feasible(job, {"CPU": 8.0, "GPU": 2.0}, local=False)  # a cluster may grow: a warning
    _check_feasible({"num_cpus": 1, "num_gpus": 1}, {"CPU": 2.0, "GPU": 2.0}, local=True)
