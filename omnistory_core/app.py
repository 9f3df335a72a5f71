"""The Hydra entry point: ``python -m omnistory_core [overrides]`` runs :func:`task` once per job.

Only what ties omnistory to Hydra lives here: the task (one system per job, a configuration error
as one clear line, recorded per job in a sweep) and the hint that names failed plugins when Hydra
cannot find a config.  The work itself is elsewhere:

* :mod:`omnistory_core.run.generate`: one system over the dataset -> its job directory;
* :mod:`omnistory_core.run.manifest`: the job's ``manifest.json``;
* :mod:`omnistory_core.run.sweep`: the sweep callback (``conf/config.yaml``) and the end-of-sweep
  evaluation and report;
* :mod:`omnistory_core.data.cache`: the dataset, loaded once per process;
* :mod:`omnistory_core.engine.progress`: progress bars.
"""

from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager
from pathlib import Path

from omegaconf import DictConfig

from omnistory_core.errors import UserError
from omnistory_core.redaction import redact
from omnistory_core.run.generate import run_system
from omnistory_core.tasks import selected_task


def output_dir_of_current_job() -> Path:
    from hydra.core.hydra_config import HydraConfig

    return Path(HydraConfig.get().runtime.output_dir)


@contextmanager
def explain_missing_configs():
    """While Hydra runs: a config it cannot find (``Could not find 'system/x'``) also names the
    plugins that failed to load, which may ship it, and how to see why.

    Hydra reports its own errors (``run_and_report`` prints the message and exits 1) before any
    omnistory code sees them, so the message is extended on its way there.  Hydra is pinned to
    1.3, where ``_run_hydra`` calls ``run_and_report`` through its module.
    """
    import hydra._internal.utils as hydra_utils

    original = hydra_utils.run_and_report

    def run_and_report(func):
        return original(lambda: _with_plugin_hint(func))

    hydra_utils.run_and_report = run_and_report
    try:
        yield
    finally:
        hydra_utils.run_and_report = original


def _with_plugin_hint(func):
    from hydra.errors import ConfigCompositionException, MissingConfigException

    from omnistory_core.plugins import missing_config_hint

    try:
        return func()
    except ConfigCompositionException as exc:
        hint = missing_config_hint(str(exc))
        if hint is None:
            raise
        # right under Hydra's first line, before its long list of options and search path
        first, _, rest = str(exc).partition("\n")
        message = f"{first}\n{hint}\n{rest}" if rest else f"{first}\n{hint}"
        if isinstance(exc, MissingConfigException):
            raise MissingConfigException(message, exc.missing_cfg_file, exc.options) from (
                exc.__cause__
            )
        raise ConfigCompositionException(message) from exc.__cause__


def task(cfg: DictConfig) -> None:
    """Hydra task: one system.  A configuration error is one clear line, not a traceback; in a
    sweep it is recorded in the job directory (``job_error.json``) and the other jobs go on."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from omnistory_core.engine.store import atomic_write_bytes

    output_dir = output_dir_of_current_job()
    error_file = output_dir / "job_error.json"
    if error_file.exists():
        error_file.unlink()
    try:
        task_of_job = selected_task(cfg)
        (task_of_job.generate or run_system)(cfg, output_dir)
    except UserError as exc:
        print(f"omnistory: error: {cfg.system_id}: {exc}", file=sys.stderr)
        if HydraConfig.get().mode != RunMode.MULTIRUN:
            raise SystemExit(2) from None
        record = {"system_id": str(cfg.system_id), "error": f"{type(exc).__name__}: {exc}"}
        atomic_write_bytes(error_file, (json.dumps(redact(record), indent=2) + "\n").encode())


os.environ.setdefault("HYDRA_FULL_ERROR", "0")
