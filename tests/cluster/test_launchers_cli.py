"""Sweeps through cluster launchers, run locally through the real CLI: SLURM's launcher
(hydra-submitit-launcher) with submitit's local executor and with stand-in sbatch/srun commands,
and Ray tasks on a local Ray cluster."""

from __future__ import annotations

import json
import os
import re
import sys
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


def _assert_progress_view(proc, root: Path) -> None:
    """The sweep's progress view, drawn by the submitting process from the jobs' files, ends
    with every distinct call done and none to do (stderr is no terminal: the final table)."""
    records = len(list((root / "out/store/calls").rglob("*.json")))
    assert "sweep demo: jobs 2 done, 0 running" in proc.stderr, proc.stderr[-3000:]
    total = [line.split() for line in proc.stderr.splitlines() if line.startswith("total ")][-1]
    assert total[1:3] == [str(records), "0"], total


def test_submitit_local_executor_runs_each_job_as_a_submitit_job(tmp_path: Path) -> None:
    pytest.importorskip(
        "hydra_plugins.hydra_submitit_launcher",
        reason="hydra-submitit-launcher is not installed: pip install 'omnistory-core[cluster]'",
    )
    proc = run_cli(
        *SWEEP, "hydra/launcher=submitit_local", "engine.progress=true", cwd=tmp_path, timeout=180
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Submitit 'local' sweep output dir" in proc.stdout + proc.stderr
    _assert_sweep_complete(tmp_path)
    _assert_progress_view(proc, tmp_path)
    # each job ran in a submitit job of its own, which logged the run
    logs = list((tmp_path / "out/sweeps/demo/.submitit").glob("*/*_log.err"))
    logs += list((tmp_path / "out/sweeps/demo/.submitit").glob("*/*_log.out"))
    text = "\n".join(p.read_text() for p in logs)
    assert all(f"out/sweeps/demo/{job}" in text for job in JOBS), text[-2000:]


def test_ray_launcher_runs_each_job_as_a_ray_task_with_its_gpu(tmp_path: Path) -> None:
    pytest.importorskip("ray", reason="Ray is not installed: pip install 'omnistory-core[cluster]'")
    # a local Ray cluster with two (logical) GPUs; each job asks for one
    cluster = ("+hydra.launcher.init.num_cpus=2", "+hydra.launcher.init.num_gpus=2")
    proc = run_cli(
        *SWEEP,
        "hydra/launcher=ray",
        *cluster,
        "hydra.launcher.num_gpus=1",
        "engine.progress=true",
        cwd=tmp_path,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    _assert_sweep_complete(tmp_path)
    _assert_progress_view(proc, tmp_path)
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


FAKE_SBATCH = """\
#!{python}
# sbatch for tests: keeps the script, runs every array task in the background as SLURM would
import os, re, subprocess, sys
script = open(sys.argv[-1]).read()
spool = os.environ["FAKE_SLURM_SPOOL"]
job = str(4000 + len([n for n in os.listdir(spool) if n.endswith(".sbatch")]))
copy = os.path.join(spool, job + ".sbatch")
open(copy, "w").write(script)
found = re.search(r"#SBATCH --array=0-(\\d+)", script)
for task in range(int(found.group(1)) + 1 if found else 1):
    env = dict(os.environ, SLURM_JOB_ID=job + str(task), SLURM_ARRAY_JOB_ID=job,
               SLURM_ARRAY_TASK_ID=str(task), SLURM_NTASKS="1", SLURM_JOB_NUM_NODES="1",
               SLURM_NODEID="0", SLURM_JOB_NODELIST="localhost", SLURM_PROCID="0",
               SLURM_LOCALID="0")
    if not found:
        del env["SLURM_ARRAY_JOB_ID"], env["SLURM_ARRAY_TASK_ID"]
    # start once submitit has named its files after the job id, as a queue would
    subprocess.Popen(["bash", "-c", "sleep 1; exec bash " + copy], env=env,
                     start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print("Submitted batch job " + job)
"""

FAKE_SRUN = """\
#!{python}
# srun for tests: honours --output/--error (with %A %a %j %t) and runs the command
import os, sys
args, files = sys.argv[1:], {{}}
while args and args[0].startswith("--"):
    flag = args.pop(0)
    if flag in ("--output", "--error"):
        files[flag] = args.pop(0)
env = os.environ
for flag, fd in (("--output", 1), ("--error", 2)):
    if flag in files:
        path = files[flag].replace("%A", env.get("SLURM_ARRAY_JOB_ID", "")).replace(
            "%a", env.get("SLURM_ARRAY_TASK_ID", "")).replace("%j", env["SLURM_JOB_ID"]).replace(
            "%t", "0")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644), fd)
os.execvp(args[0], args)
"""


def test_slurm_launcher_submits_a_gpu_job_array_that_runs_the_sweep(tmp_path: Path) -> None:
    """hydra/launcher=slurm end to end against stand-in sbatch/srun/sacct commands: the real
    submitit SLURM executor writes the sbatch script, the jobs run it and the sweep completes."""
    pytest.importorskip(
        "hydra_plugins.hydra_submitit_launcher",
        reason="hydra-submitit-launcher is not installed: pip install 'omnistory-core[cluster]'",
    )
    bin_dir, spool = tmp_path / "bin", tmp_path / "spool"
    bin_dir.mkdir()
    spool.mkdir()
    commands = {
        "sbatch": FAKE_SBATCH.format(python=sys.executable),
        "srun": FAKE_SRUN.format(python=sys.executable),
        "sacct": "#!/bin/sh\necho 'JobID|State|NodeList'\n",
        "scancel": "#!/bin/sh\nexit 0\n",
    }
    for name, text in commands.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_SLURM_SPOOL": str(spool)}
    proc = run_cli(
        *SWEEP,
        "hydra/launcher=slurm",
        "hydra.launcher.partition=gpu",
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    _assert_sweep_complete(tmp_path)
    (script,) = [p.read_text() for p in spool.glob("*.sbatch")]  # one array for the sweep
    for line in (
        "#SBATCH --array=0-1%2",
        "#SBATCH --gpus-per-node=1",
        "#SBATCH --cpus-per-task=8",
        "#SBATCH --mem=64GB",
        "#SBATCH --partition=gpu",
        "#SBATCH --time=720",
    ):
        assert line in script, script
