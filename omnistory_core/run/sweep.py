"""Sweep-level work around the jobs of ``python -m omnistory_core -m ...``.

:class:`SweepCallback` is the Hydra callback ``conf/config.yaml`` installs: before any job it
validates the dataset (a bad dataset fails the sweep once, not once per job); after the last job
it sums the jobs' stats into ``sweep_stats.json`` and calls :func:`finish_sweep`, which runs the
configured evaluation and builds the report; after a dry run (``engine.dry_run=true``) it writes
``sweep_plan.json`` instead, with the evaluation planned rather than run
(:mod:`omnistory_core.run.plan`).
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

from omegaconf import DictConfig, OmegaConf

from omnistory_core.redaction import install_log_filter
from omnistory_core.run.watch import running_watch

log = logging.getLogger("omnistory")

try:
    from hydra.experimental.callback import Callback
except ImportError:  # pragma: no cover
    Callback = object


def sum_stats(job_dirs: list[Path]) -> dict[str, Any]:
    """Calls, cache hits, failures and model loads per component, summed over the jobs."""
    totals: dict[str, dict[str, int]] = {}
    for job in job_dirs:
        path = job / "stats.json"
        if not path.exists():
            continue
        for key, counts in json.loads(path.read_text())["components"].items():
            acc = totals.setdefault(key, {"calls": 0, "cache_hits": 0, "failures": 0, "loads": 0})
            for k in acc:
                acc[k] += int(counts.get(k, 0))
    return {"components": dict(sorted(totals.items())), "jobs": len(job_dirs)}


def job_dirs(sweep_dir: Path) -> list[Path]:
    """The job directories of a sweep (those that wrote ``stats.json``)."""
    return sorted(p.parent for p in sweep_dir.glob("*/stats.json"))


class SweepCallback(Callback):  # type: ignore[misc]
    """Validates the dataset before any job starts and sums job stats at the end of a sweep."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        force_sweeper_params(config)
        with _user_errors_stop_the_sweep():
            self._start(config)

    def _start(self, config: DictConfig) -> None:
        from omnistory_core.data.cache import dataset_spec, load_examples
        from omnistory_core.plugins import load_plugins

        install_log_filter()
        load_examples(dataset_spec(config))  # raises DatasetError before any generation
        evaluation = config.get("evaluation") or {}
        metrics = [str(m) for m in evaluation.get("metrics") or []]
        judges = [str(j) for j in evaluation.get("judges") or []]
        if metrics or judges:  # a typo here must not cost a whole sweep first
            load_plugins().evaluation_service().check(metrics, judges)
        if bool(config.engine.get("dry_run", False)):
            from omnistory_core.engine.dryrun import clear_job_plans

            clear_job_plans(Path(config.hydra.sweep.dir))
            return
        start_warm_pool(config)
        self.view = start_progress_view(config)

    def __getstate__(self) -> dict[str, Any]:
        # launchers pickle the Hydra context, callbacks included, to run jobs elsewhere: the
        # view (threads, a live console) stays with the sweep's process
        return {k: v for k, v in self.__dict__.items() if k != "view"}

    def _stop_view(self) -> None:
        view, self.view = getattr(self, "view", None), None
        if view is not None:
            view.stop()

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        with _user_errors_stop_the_sweep():
            self._end(config)

    def _end(self, config: DictConfig) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        if bool(config.engine.get("dry_run", False)):  # sweep_plan.json instead of any stats
            from omnistory_core.run.plan import finish_dry_run

            status = finish_dry_run(config, sweep_dir)
            if status:  # 2: the evaluation cannot start as configured; 1: a job failed
                raise SystemExit(status)
            return
        self._stop_view()
        stats = sum_stats(job_dirs(sweep_dir))
        failed = [json.loads(p.read_text()) for p in sorted(sweep_dir.glob("*/job_error.json"))]
        stats["failed_jobs"] = failed
        watch = running_watch(sweep_dir)
        status = 0
        if watch is not None and watch.stream is not None:
            # scoring started during generation, on the sweep's devices and warm pool: it ends
            # there (the models it loaded stay for what is left), then the pool goes
            watch.finish()
            try:
                status = evaluate_sweep(config, sweep_dir)
            finally:
                self._write_stats(sweep_dir, stats, stop_warm_pool())
            status = max(status, report_sweep(config, sweep_dir))
        else:
            if watch is not None:
                watch.finish()
            # the devices' memory back before the evaluation
            self._write_stats(sweep_dir, stats, stop_warm_pool())
            status = finish_sweep(config, sweep_dir)
        if failed:
            for job in failed:
                log.error("job %s failed: %s", job["system_id"], job["error"])
            raise SystemExit(1)
        if status:
            raise SystemExit(status)

    @staticmethod
    def _write_stats(sweep_dir: Path, stats: dict[str, Any], loads: Any) -> None:
        from omnistory_core.engine.store import atomic_write_bytes

        if loads is not None:
            stats["loads_by_device"] = loads
        atomic_write_bytes(
            sweep_dir / "sweep_stats.json", (json.dumps(stats, indent=2) + "\n").encode()
        )
        log.info("sweep stats: %s", sweep_dir / "sweep_stats.json")


def start_warm_pool(config: DictConfig) -> Path | None:
    """``engine.warm_pool``: the sweep's pool of loaded models (:mod:`omnistory_core.engine.pool`)
    in ``<sweep>/.pool``, told to the jobs through the environment they inherit, and with
    ``engine.scheduler`` the one scheduler of its devices (:mod:`omnistory_core.engine.schedule`);
    None when ``engine.devices`` names no device (everything runs in the jobs' processes then)."""
    import os

    from omnistory_core.engine.devices import DeviceError, resolve_devices
    from omnistory_core.engine.pool import POOL_ENV, open_pool

    os.environ.pop(POOL_ENV, None)
    if not bool(config.engine.get("warm_pool", True)):
        return None
    try:
        devices = resolve_devices(config.engine.get("devices"))
    except DeviceError:
        return None  # every job says why
    if not devices:
        return None
    budget = config.engine.get("device_memory_gb")
    idle = config.engine.get("pool_idle_s")
    pool = open_pool(
        Path(config.hydra.sweep.dir) / ".pool",
        budget_gb=float(budget) if budget is not None else None,
        idle_s=float(idle) if idle is not None else 600.0,
    )
    os.environ[POOL_ENV] = str(pool)
    if bool(config.engine.get("scheduler", True)):
        from omnistory_core.engine.schedule import start_scheduler

        start_scheduler(pool, devices)
    return pool


def stop_warm_pool() -> dict[str, dict[str, int]] | None:
    """Shut the sweep's warm pool down; its model loads per component and device (None: no
    pool)."""
    import os

    from omnistory_core.engine.pool import POOL_ENV, SETTINGS, loads_by_device, shutdown_pool

    value = os.environ.pop(POOL_ENV, None)
    if not value:
        return None
    pool = Path(value)
    shutdown_pool(pool)
    loads = loads_by_device(pool)
    (pool / SETTINGS).unlink(missing_ok=True)  # a server still there sees it and exits
    return loads


def force_sweeper_params(config: DictConfig) -> None:
    """A suite's ``hydra.sweeper.params`` as the command line is given to Hydra: a component's
    parameter (``tts.temperature: 0.5,0.7``) forced, so that a key one component does not take
    fails that job in one line instead of stopping the sweep while Hydra composes it
    (:func:`omnistory_core.params.force_param_overrides`).  Hydra creates the sweeper, which reads
    these params, after this callback's ``on_multirun_start``."""
    from omegaconf import open_dict, read_write

    from omnistory_core.params import force_param_overrides
    from omnistory_core.plugins import COMPONENT_HOOKS

    sweeper = config.hydra.get("sweeper")
    params = sweeper.get("params") if sweeper is not None else None
    if not params:
        return
    groups = tuple(COMPONENT_HOOKS.values())
    keys = [str(k) for k in params]
    forced = [force_param_overrides([f"{k}=_"], groups)[0][: -len("=_")] for k in keys]
    if forced == keys:
        return
    values = [params[k] for k in keys]
    with read_write(config.hydra), open_dict(config.hydra):
        config.hydra.sweeper.params = dict(zip(forced, values, strict=True))


@contextmanager
def _user_errors_stop_the_sweep() -> Iterator[None]:
    """Hydra turns an exception of a callback into a warning and goes on (exit 0): a bad
    dataset or evaluator is one clear line and exit 2 instead."""
    from omnistory_core.data import DatasetError
    from omnistory_core.errors import ConfigError, PluginError

    try:
        yield
    except (ConfigError, DatasetError, PluginError) as exc:
        print(f"omnistory: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def expected_jobs(config: DictConfig) -> int | None:
    """How many jobs the sweep has, from its overrides as Hydra's basic sweeper expands them;
    None when that needs Hydra's config loader (``glob(...)`` over a group's options), in which
    case the launcher may still say (``.progress/sweep.json``)."""
    try:
        from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
        from hydra.core.override_parser.overrides_parser import OverridesParser

        params = [f"{k}={v}" for k, v in (config.hydra.sweeper.get("params") or {}).items()]
        overrides = OverridesParser.create().parse_overrides(
            [*params, *list(config.hydra.overrides.task)]
        )
        return sum(len(batch) for batch in BasicSweeper.split_arguments(overrides, None))
    except Exception:  # noqa: BLE001 - another sweeper, or a sweep Hydra must expand itself
        return None


def start_progress_view(config: DictConfig) -> Any:
    """The sweep's progress view (:mod:`omnistory_core.engine.sweep_progress`), drawn while the
    jobs run whichever launcher runs them; None with ``engine.progress=false``."""
    import shutil

    from omnistory_core.engine.sweep_progress import PROGRESS_DIR, SweepProgressView

    sweep_dir = Path(config.hydra.sweep.dir)
    shutil.rmtree(sweep_dir / PROGRESS_DIR, ignore_errors=True)  # an earlier sweep's
    if not bool(config.engine.progress):
        return None
    return SweepProgressView(
        sweep_dir, f"sweep {sweep_dir.name}", expected_jobs=expected_jobs(config)
    ).start()


def finish_sweep(config: DictConfig, run_dir: Path) -> int:
    """End of a sweep: evaluation (if configured), then every ``sweep_finished`` hook (the
    report distribution builds the report from whatever is scored).  Returns the worst exit
    status (2: the evaluation's pre-flight stopped it, 1: 'error' rows remain)."""
    status = evaluate_sweep(config, run_dir)
    return max(status, report_sweep(config, run_dir))


def evaluate_sweep(config: DictConfig, run_dir: Path) -> int:
    """The sweep's evaluation, if configured: its exit status (2: the pre-flight stopped it,
    1: 'error' rows remain)."""
    from omnistory_core.plugins import load_plugins

    # a DictConfig becomes a dict
    evaluation = cast(dict[str, Any], OmegaConf.to_container(config.evaluation, resolve=True))
    metrics, judges = list(evaluation.get("metrics") or []), list(evaluation.get("judges") or [])
    if not (metrics or judges):
        return 0
    # pre-flight problems or remaining 'error' rows fail the sweep, after its report
    return (
        load_plugins()
        .evaluation_service()
        .run(run_dir, evaluation=evaluation, progress=bool(config.engine.progress))
    )


def report_sweep(config: DictConfig, run_dir: Path) -> int:
    """Every ``sweep_finished`` hook (the report); their worst exit status."""
    from omnistory_core.plugins import load_plugins
    from omnistory_core.seams import REPORT_DISTRIBUTION

    evaluation = cast(dict[str, Any], OmegaConf.to_container(config.evaluation, resolve=True))
    registry = load_plugins()
    status = 0
    if registry.has_sweep_finished():
        status = max(status, registry.sweep_finished(run_dir, config))
    elif evaluation.get("report", True):
        log.info(
            "no report: install %s (pip install ./plugins/%s from a checkout) and run "
            "`python -m omnistory_core report --run-dir %s`",
            REPORT_DISTRIBUTION,
            REPORT_DISTRIBUTION,
            run_dir,
        )
    return status
