"""Component parameters on the command line, through the real CLI, as README and CONTRIBUTING
document them: ``tts.temperature=0.5`` without ``++``.

A mistyped or unknown key of any component group is one line naming ``kind=name``, the key, the
known keys and a did-you-mean, exit 2 (never Hydra's "not in struct", exit 1); in a sweep only the
jobs whose component refuses it fail (their ``job_error.json``), the others finish, exit 1.  A
parameter for a group the system does not build is refused, not dropped.  ``--verbose`` is taken
off the command line before Hydra sees it and reaches every process as ``OMNISTORY_VERBOSE=1``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from omnistory_testing import load_json, run_cli

QUIET = ("engine.progress=false", "dataset.limit=1", "output_root=out")
#: the core alone: its built-in components are all these tests need, and no report is built
CORE = {"OMNISTORY_DISABLE_PLUGIN_AUTOLOAD": "1"}


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("omnistory: error:")]


def assert_no_hydra_error(stderr: str) -> None:
    assert "not in struct" not in stderr and "Could not override" not in stderr, stderr
    assert "Traceback" not in stderr, stderr


# -- a single run -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides,component,key,hint",
    [
        (("tts.voulme=120",), "tts=espeak", "voulme", "voulme -> volume"),
        (("planner=noop", "planner.delay=1"), "planner=noop", "delay", "delay -> delay_s"),
        (("image=noop", "image.sise=8"), "image=noop", "sise", "sise -> size"),
        (("backbone=noop", "backbone.delay_sx=1"), "backbone=noop", "delay_sx", "-> delay_s"),
    ],
)
def test_a_mistyped_parameter_is_one_line_and_exit_2(
    tmp_path: Path, overrides: tuple[str, ...], component: str, key: str, hint: str
) -> None:
    proc = run_cli(*overrides, *QUIET, cwd=tmp_path, env=CORE)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert_no_hydra_error(proc.stderr)
    (line,) = error_lines(proc.stderr)
    assert f"{component}: unknown parameter(s) {key}; known:" in line
    assert "seed" in line.split("known:", 1)[1]  # the known keys are listed
    assert f"(did you mean {key} " in line and hint in line
    assert not (tmp_path / "out" / "store").exists()  # refused before any call


def test_a_declared_parameter_is_set_without_a_plus(tmp_path: Path) -> None:
    proc = run_cli("tts.volume=80", "tts.wpm_fast=200", *QUIET, cwd=tmp_path, env=CORE)
    assert proc.returncode == 0, proc.stderr[-2000:]
    manifest = load_json(tmp_path / "out/runs/demo/template-copy-espeak/manifest.json")
    text = json.dumps(manifest)
    assert '"volume": 80' in text and '"wpm_fast": 200' in text


# -- a sweep ------------------------------------------------------------------------------------


def test_in_a_sweep_only_the_jobs_that_refuse_the_key_fail(tmp_path: Path) -> None:
    # espeak declares volume, noop does not: the noop job fails on its own, espeak finishes
    proc = run_cli("-m", "tts=espeak,noop", "tts.volume=50", *QUIET, cwd=tmp_path, env=CORE)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert_no_hydra_error(proc.stderr)
    sweep = tmp_path / "out/sweeps/demo"
    assert (sweep / "template-copy-espeak/manifest.json").is_file()
    assert not (sweep / "template-copy-espeak/job_error.json").exists()
    error = load_json(sweep / "template-copy-noop/job_error.json")
    assert error["system_id"] == "template-copy-noop"
    assert (
        "tts=noop: unknown parameter(s) volume; known: batch_size, delay_s, seed"
        in (error["error"])
    )
    assert not (sweep / "template-copy-noop/manifest.json").exists()
    stats = load_json(sweep / "sweep_stats.json")
    assert [job["system_id"] for job in stats["failed_jobs"]] == ["template-copy-noop"]


def test_a_suites_sweeper_params_are_checked_per_job_too(tmp_path: Path) -> None:
    conf = tmp_path / "conf" / "suite"
    conf.mkdir(parents=True)
    (conf / "volumes.yaml").write_text(
        "# @package _global_\n"
        "hydra:\n  sweeper:\n    params:\n      tts: espeak,noop\n      tts.volume: 50\n"
    )
    proc = run_cli(
        "-m", "--config-dir", str(tmp_path / "conf"), "suite=volumes", *QUIET,
        cwd=tmp_path, env=CORE,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert_no_hydra_error(proc.stderr)
    sweep = tmp_path / "out/sweeps/demo"
    assert (sweep / "template-copy-espeak/manifest.json").is_file()
    assert (
        "tts=noop: unknown parameter(s) volume"
        in (load_json(sweep / "template-copy-noop/job_error.json")["error"])
    )


# -- a group the system does not build ----------------------------------------------------------


@pytest.mark.parametrize(
    "overrides,message",
    [
        (
            ("backbone.top_k=4",),
            "backbone.top_k=4: the system planner=template + image=copy + tts=espeak has no"
            " backbone, so nothing would read it; remove it or choose backbone=NAME",
        ),
        (
            ("++backbone.top_k=4",),
            "backbone.top_k=4: the system planner=template + image=copy + tts=espeak has no"
            " backbone",
        ),
        (
            ("backbone=noop", "planner.delay_s=1"),
            "planner.delay_s=1: the system backbone=noop has no planner, so nothing would read"
            " it; remove it (backbone=noop makes what a planner would)",
        ),
        (
            ("metric.clip.model=x",),
            "metric.clip.model=x: a generation run builds no metric; an evaluator's parameter is"
            " set with 'evaluation.overrides=[\"metric.clip.model=x\"]'",
        ),
    ],
)
def test_a_parameter_of_a_group_the_system_does_not_build_is_refused(
    tmp_path: Path, overrides: tuple[str, ...], message: str
) -> None:
    proc = run_cli(*overrides, *QUIET, cwd=tmp_path, env=CORE)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert_no_hydra_error(proc.stderr)
    (line,) = error_lines(proc.stderr)
    assert message in line
    assert not (tmp_path / "out" / "store").exists()


def test_the_runner_of_a_group_is_not_a_parameter(tmp_path: Path) -> None:
    # runner keys are in every node: Hydra checks them, and an unused group's runner is fine
    proc = run_cli("backbone.runner.timeout_s=5", *QUIET, cwd=tmp_path, env=CORE)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "out/runs/demo/template-copy-espeak/manifest.json").is_file()


# -- --verbose ----------------------------------------------------------------------------------


def test_verbose_is_taken_off_and_reaches_the_run_as_an_environment_variable(
    tmp_path: Path,
) -> None:
    probe = "output_root=${oc.env:OMNISTORY_VERBOSE,off}"
    plain = run_cli(probe, "--cfg", "job", "--resolve", cwd=tmp_path, env=CORE)
    assert plain.returncode == 0, plain.stderr
    assert "output_root: 'off'" in plain.stdout or "output_root: off" in plain.stdout
    proc = run_cli("--verbose", probe, "--cfg", "job", "--resolve", cwd=tmp_path, env=CORE)
    assert proc.returncode == 0, proc.stderr
    assert "output_root: '1'" in proc.stdout, proc.stdout
    # its place among the flags does not matter, and an error is still one line
    typo = run_cli("-m", "--verbose", "tts.voulme=1", *QUIET, cwd=tmp_path, env=CORE)
    assert typo.returncode == 1, typo.stderr[-2000:]
    assert "unrecognized arguments" not in typo.stderr
    assert "tts=espeak: unknown parameter(s) voulme" in typo.stderr


def test_verbose_before_a_subcommand(tmp_path: Path) -> None:
    proc = run_cli("--verbose", "tasks", "--json", cwd=tmp_path, env=CORE)
    assert proc.returncode == 0, proc.stderr
    assert [t["name"] for t in json.loads(proc.stdout)] == ["omnistorybench"]


def test_help_documents_verbose_and_parameters(tmp_path: Path) -> None:
    proc = run_cli("--help", cwd=tmp_path, env=CORE)
    assert proc.returncode == 0, proc.stderr
    (line,) = [x for x in proc.stdout.splitlines() if x.strip().startswith("--verbose")]
    assert "traceback" in line
    assert "OMNISTORY_VERBOSE=1" in proc.stdout
    assert "GROUP.KEY=VALUE" in proc.stdout and "did-you-mean" in proc.stdout


def test_a_mistyped_runner_key_is_one_line_before_hydra(tmp_path: Path) -> None:
    done = run_cli("tts.runner.pyhton=/usr/bin/python3", *QUIET, cwd=tmp_path, env=CORE)
    assert done.returncode == 2, done.stderr
    assert_no_hydra_error(done.stderr)
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("omnistory:")]
    assert "tts.runner.pyhton" in line and "known: python, env, timeout_s" in line
    assert "did you mean tts.runner.python?" in line
    assert not (tmp_path / "out").exists()
