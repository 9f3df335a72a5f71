"""Running the real CLI from a test, and the engine's inputs for the bundled demo examples."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any


def run_cli(
    *args: str,
    cwd: str | os.PathLike[str],
    env: dict[str, str] | None = None,
    timeout: float = 600,
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m omnistory_core ARGS`` in ``cwd`` as a user would (this interpreter, the
    current environment plus ``env``); returns the finished process with its text output.

    With ``OMNISTORY_TESTKIT_FORK=1`` the run is forked from an interpreter that has already
    imported the CLI, where the environment allows it (:mod:`omnistory_testkit.forkserver`):
    the same process contract, without the interpreter's start and imports on every run."""
    from omnistory_testkit.forkserver import run_module

    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    return run_module("omnistory_core", list(args), cwd=cwd, env=full_env, timeout=timeout)


def compose_job(*overrides: str) -> Any:
    """The job config ``python -m omnistory_core OVERRIDES`` composes (without its ``hydra``
    node), composed in this process: presets, plugin configs and interpolations as a run sees
    them."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    import omnistory_core.app  # noqa: F401 - registers the config's resolvers

    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="omnistory_core.conf", version_base="1.3"):
        cfg = compose(config_name="config", overrides=list(overrides), return_hydra_config=True)
    GlobalHydra.instance().clear()
    return OmegaConf.masked_copy(cfg, [str(k) for k in cfg if k != "hydra"])


def run_task_job(output_dir: str | os.PathLike[str], *overrides: str) -> Any:
    """One job of a task with its own generation (``Task.generate``) composed from
    ``overrides`` and run in this process into ``output_dir``; returns what it returns (the
    manifest, or a dry run's plan).  Cheaper than :func:`run_cli` where the command line itself
    is covered elsewhere."""
    from omnistory_core.plugins import load_plugins

    cfg = compose_job(*overrides)
    task = load_plugins().task(str(cfg.task.name))
    if task.generate is None:
        raise ValueError(f"task {task.name} has no generate of its own: use run_cli")
    return task.generate(cfg, Path(output_dir))


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


__all__ = ["compose_job", "demo_planner_items", "files_containing", "run_cli", "run_task_job"]
