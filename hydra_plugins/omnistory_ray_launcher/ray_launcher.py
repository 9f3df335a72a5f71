"""``hydra/launcher=ray``: every job of a sweep is one Ray task with its own CPUs and GPUs.

Hydra's own ``hydra-ray-launcher`` (1.2.2, the last release) is not used: it requires
``ray[default]`` with ``boto3``, ``aiohttp`` and ``cloudpickle<3`` (downgrading the cloudpickle
the rest of the stack uses), and it is built around launching AWS clusters.  This launcher needs
only ``ray`` (``pip install 'omnistory-core[cluster]'``) and a running cluster, or starts a local
one.

Settings (``hydra.launcher.*``)::

    address: null     # null: RAY_ADDRESS, else a new local cluster; "auto": the running cluster
    num_cpus: 1       # per job (a Ray task resource)
    num_gpus: 0       # per job; Ray sets CUDA_VISIBLE_DEVICES for the task
    resources: {}     # custom Ray resources per job, e.g. {a100: 1}
    max_retries: 0    # Ray's retries of a job whose worker died (the store keeps finished calls)
    init: {}          # more ray.init arguments, e.g. {num_cpus: 4, num_gpus: 8} for a local cluster
    runtime_env: {}   # passed to ray.init, e.g. {env_vars: {HF_HOME: /shared/hf}}

Jobs run in the driver's working directory (relative ``output_root`` works when every node sees the
same path, which a cluster sharing one store needs anyway) and with the driver's Python; every node
must have the same virtual environment at the same path.
"""

# no `from __future__ import annotations`: Hydra execs this module outside sys.modules when it
# scans for plugins, and dataclasses then cannot resolve string annotations
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from hydra.core.config_store import ConfigStore
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, configure_log, filter_overrides, setup_globals
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf

log = logging.getLogger(__name__)


@dataclass
class RayLauncherConf:
    _target_: str = "hydra_plugins.omnistory_ray_launcher.ray_launcher.RayLauncher"
    address: Optional[str] = None  # noqa: UP045 - OmegaConf structured configs
    num_cpus: float = 1
    num_gpus: float = 0
    resources: dict[str, float] = field(default_factory=dict)
    max_retries: int = 0
    init: dict[str, Any] = field(default_factory=dict)
    runtime_env: dict[str, Any] = field(default_factory=dict)


ConfigStore.instance().store(
    group="hydra/launcher", name="ray", node=RayLauncherConf, provider="omnistory_core"
)


def _run_one(
    idx: int,
    overrides: Sequence[str],
    hydra_context: HydraContext,
    config: DictConfig,
    task_function: TaskFunction,
    singleton_state: dict[Any, Any],
    cwd: str,
) -> JobReturn:
    """One job inside a Ray worker, as Hydra's joblib launcher runs one in a loky worker."""
    import ray

    from hydra_plugins.omnistory_launcher.launcher import run_sweep_job

    def task(cfg: DictConfig) -> Any:
        context = ray.get_runtime_context()
        log.info(
            "ray: job #%d on node %s, pid %d, GPUs %s",
            idx,
            context.get_node_id(),
            os.getpid(),
            [str(g) for g in ray.get_gpu_ids()],
        )
        return task_function(cfg)

    return run_sweep_job(
        idx,
        overrides,
        hydra_context,
        config,
        task,
        singleton_state,
        cwd,
        job_id=f"{config.hydra.job.name}_{idx}",
    )


def _check_feasible(options: dict[str, Any], cluster: dict[str, float], local: bool) -> None:
    """A job that asks for more than the cluster has would wait forever: say so instead."""
    wanted = {
        "CPU": options["num_cpus"],
        "GPU": options["num_gpus"],
        **options.get("resources", {}),
    }
    short = {k: v for k, v in wanted.items() if v and cluster.get(k, 0) < v}
    if not short:
        return
    have = ", ".join(f"{k}={cluster.get(k, 0):g}" for k in short)
    need = ", ".join(f"{k}={v:g}" for k, v in short.items())
    message = (
        f"hydra/launcher=ray: each job asks for {need} but the Ray cluster has {have}"
        " (hydra.launcher.num_cpus / num_gpus / resources are per job; a local cluster's size is"
        " hydra.launcher.init.num_cpus / num_gpus)"
    )
    if local:
        raise ValueError(message)
    log.warning("%s; waiting for the cluster to grow", message)


class RayLauncher(Launcher):
    def __init__(self, **params: Any) -> None:
        self.params = OmegaConf.to_container(OmegaConf.create(params), resolve=True)
        self.config: Optional[DictConfig] = None  # noqa: UP045
        self.task_function: Optional[TaskFunction] = None  # noqa: UP045
        self.hydra_context: Optional[HydraContext] = None  # noqa: UP045

    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        self.config = config
        self.hydra_context = hydra_context
        self.task_function = task_function

    def launch(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> Sequence[JobReturn]:
        try:
            import ray
        except ImportError:
            raise ImportError(
                "hydra/launcher=ray needs Ray: pip install 'omnistory-core[cluster]'"
                " (or pip install ray)"
            ) from None
        assert self.config is not None and self.task_function is not None
        assert self.hydra_context is not None
        params: dict[str, Any] = self.params  # type: ignore[assignment]
        setup_globals()
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)

        started = False
        if not ray.is_initialized():
            init = dict(params.get("init") or {})
            if params.get("runtime_env"):
                init["runtime_env"] = params["runtime_env"]
            init.setdefault("log_to_driver", True)
            ray.init(address=params.get("address"), **init)
            started = True
        try:
            runs = self._launch(ray, params, job_overrides, initial_job_idx, sweep_dir, started)
        finally:
            if started:
                ray.shutdown()
        for run in runs:
            assert isinstance(run, JobReturn)
        return runs

    def _launch(
        self,
        ray: Any,
        params: dict[str, Any],
        job_overrides: Sequence[Sequence[str]],
        initial_job_idx: int,
        sweep_dir: Path,
        started: bool,
    ) -> list[JobReturn]:
        options: dict[str, Any] = {
            "num_cpus": params.get("num_cpus", 1),
            "num_gpus": params.get("num_gpus", 0),
            "max_retries": int(params.get("max_retries") or 0),
        }
        if params.get("resources"):
            options["resources"] = dict(params["resources"])
        log.info(
            "Ray (%s) is launching %d jobs, each with %s; sweep output dir: %s",
            ray.get_runtime_context().gcs_address,
            len(job_overrides),
            ", ".join(f"{k}={v}" for k, v in options.items() if k != "max_retries"),
            sweep_dir,
        )
        # a cluster this launcher started cannot grow; a running one may (an autoscaler)
        local = started and not params.get("address") and not os.environ.get("RAY_ADDRESS")
        _check_feasible(options, ray.cluster_resources(), local)
        remote = ray.remote(_run_one).options(**options)
        singleton_state = Singleton.get_state()
        refs = []
        for n, overrides in enumerate(job_overrides):
            idx = initial_job_idx + n
            log.info("\t#%d : %s", idx, " ".join(filter_overrides(overrides)))
            refs.append(
                remote.remote(
                    idx,
                    list(overrides),
                    self.hydra_context,
                    self.config,
                    self.task_function,
                    singleton_state,
                    os.getcwd(),
                )
            )
        return ray.get(refs)
