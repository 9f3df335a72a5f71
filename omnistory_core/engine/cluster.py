"""Hydra's side of running jobs on many processes or nodes that share one store."""

from __future__ import annotations

import os
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from omnistory_core.engine.locking import resolve_settings


class StoreLocking(Callback):
    """Hands ``engine.store_locking`` / ``engine.store_lease_s`` to every job's store, whatever
    launcher runs the job (locally, joblib, SLURM through submitit, Ray): the job's process reads
    them from ``OMNISTORY_STORE_LOCKING`` / ``OMNISTORY_STORE_LEASE_S``."""

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        engine = config.get("engine") or {}
        mode, lease_s = resolve_settings(engine.get("store_locking"), engine.get("store_lease_s"))
        os.environ["OMNISTORY_STORE_LOCKING"] = mode
        os.environ["OMNISTORY_STORE_LEASE_S"] = f"{lease_s:g}"
