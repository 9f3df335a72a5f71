"""A command composes its config once (``omnistory_core.compose_once``), and everything Hydra
decides from the config is what Hydra's own double composition decides: the mode, the job
config, the errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

#: runs the CLI in this process with Hydra's config loader counted; ``ORIGINAL=1`` leaves
#: Hydra's own entry point as it is (the reference)
COUNTING = """
import json, os, sys
from hydra._internal.config_loader_impl import ConfigLoaderImpl
import omnistory_core.compose_once as once

calls = []
load = ConfigLoaderImpl.load_configuration
def counting(self, config_name, overrides, run_mode, *args, **kwargs):
    calls.append([config_name, str(run_mode)])
    return load(self, config_name, overrides, run_mode, *args, **kwargs)
ConfigLoaderImpl.load_configuration = counting
if os.environ.get("ORIGINAL") == "1":
    import contextlib
    once.composing_once = lambda multirun: contextlib.nullcontext()
from omnistory_core.__main__ import main
sys.argv = ["omnistory"] + sys.argv[1:]
try:
    code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
print("COMPOSED " + json.dumps(calls))
sys.exit(code)
"""


def _run(tmp: Path, *args: str, original: bool = False) -> tuple[int, list[list[str]], str]:
    proc = subprocess.run(
        [sys.executable, "-c", COUNTING, *args],
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=300,
        env={**__import__("os").environ, "ORIGINAL": "1" if original else "0"},
    )
    line = next(x for x in proc.stdout.splitlines() if x.startswith("COMPOSED "))
    return proc.returncode, json.loads(line.removeprefix("COMPOSED ")), proc.stderr


def _job_config(run_dir: Path) -> tuple[dict, str, list[str]]:
    """The job config, and the Hydra node's mode and overrides."""
    config = yaml.safe_load((run_dir / ".hydra" / "config.yaml").read_text(encoding="utf-8"))
    hydra = yaml.safe_load((run_dir / ".hydra" / "hydra.yaml").read_text(encoding="utf-8"))
    return config, hydra["hydra"]["mode"], hydra["hydra"]["overrides"]


@pytest.mark.parametrize(
    ("args", "run"),
    [
        pytest.param(
            ("planner=template", "image=copy", "tts=noop", "dataset.limit=1"),
            "outputs/runs/demo/template-copy-noop",
            id="omnistorybench",
        ),
        pytest.param(
            (
                "dataset=vistory_fixture",
                "system=copy_paste",
                "task.mode=ref",
                "task.run_timestamp=20250101_120000",
            ),
            "outputs/runs/vistory_fixture/copy_paste-ref-20250101_120000",
            id="vistorybench",
        ),
    ],
)
def test_a_run_composes_once_and_its_config_is_hydras(
    tmp_path: Path, args: tuple[str, ...], run: str
) -> None:
    (tmp_path / "once").mkdir()
    (tmp_path / "hydra").mkdir()
    code, calls, err = _run(tmp_path / "once", *args, "engine.progress=false")
    assert code == 0, err[-2000:]
    assert calls == [["config", "RunMode.RUN"]]
    code, reference, err = _run(tmp_path / "hydra", *args, "engine.progress=false", original=True)
    assert code == 0, err[-2000:]
    assert reference == [["config", "RunMode.MULTIRUN"], ["config", "RunMode.RUN"]]
    assert _job_config(tmp_path / "once" / run) == _job_config(tmp_path / "hydra" / run)


def test_a_sweep_composes_its_master_config_once(tmp_path: Path) -> None:
    code, calls, err = _run(
        tmp_path,
        "-m",
        "planner=template,copy",
        "image=copy",
        "tts=noop",
        "dataset.limit=1",
        "engine.progress=false",
        "output_root=out",
    )
    assert code == 0, err[-2000:]
    master = [c for c in calls if c[1] == "RunMode.MULTIRUN"]
    assert master == [["config", "RunMode.MULTIRUN"]]
    # each job once, as keep_sweep_configs leaves it
    assert [c for c in calls if c[1] == "RunMode.RUN"] == [["config", "RunMode.RUN"]] * 2
    assert (tmp_path / "out/sweeps/demo/template-copy-noop").is_dir()
    assert (tmp_path / "out/sweeps/demo/copy-copy-noop").is_dir()


def test_errors_are_hydras_own(tmp_path: Path) -> None:
    # a sweep's values without -m: Hydra's advice to add --multirun, exit 1
    once = _run(tmp_path, "planner=template,copy", "dataset.limit=1", "output_root=out")
    hydra = _run(
        tmp_path, "planner=template,copy", "dataset.limit=1", "output_root=out", original=True
    )
    assert once[0] == hydra[0] == 1
    assert "--multirun" in once[2] and once[2] == hydra[2]
    # a group option that does not exist: the same message and exit code either way
    once = _run(tmp_path, "planner=no_such_planner", "output_root=out")
    hydra = _run(tmp_path, "planner=no_such_planner", "output_root=out", original=True)
    assert once[0] == hydra[0] != 0
    assert "no_such_planner" in once[2] and once[2] == hydra[2]
