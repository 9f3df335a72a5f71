"""``hydra/launcher=omnistory`` (the default): the jobs of a ``-m`` sweep on this machine.

* One job at a time, in this process, exactly as Hydra's basic launcher runs them, when
  ``engine.devices`` gives fewer than two devices (a CPU machine, one GPU) and
  ``hydra.launcher.jobs`` is not set.
* With two devices or more, ``hydra.launcher.jobs`` (default: two per device) jobs at once, each
  in a fresh process (a process that has not initialised CUDA yet can still be pinned to its
  devices).  The jobs share the devices through the device pool
  (:mod:`omnistory_core.engine.devices`): every GPU stage of every job runs on replicas on the
  devices free at the time, so jobs that share a component split its calls through the store's
  locks and no device idles while calls remain (:mod:`omnistory_core.engine.replicas`).
* With the sweep's warm pool (``engine.warm_pool``), a loaded model that none of the jobs not yet
  finished needs is shut down as soon as the last job that needed it ends
  (:func:`omnistory_core.engine.pool.release_unneeded`), its device's memory back for the
  others, rather than at the idle timeout or the sweep's end.
* A job whose process is killed (``kill -9``, the out-of-memory killer) is started again, up to
  ``hydra.launcher.restarts`` times; it recomputes only the calls it had not stored.  A job still
  killed after that is recorded like a job with a configuration error (``<job>/job_error.json``):
  the others finish and the sweep exits 1.

A job runs in its child as Hydra's joblib and Ray launchers run one in their workers: the sweep's
Hydra context, config and task function travel pickled (cloudpickle), and the child composes its
own job config and calls Hydra's ``run_job``, so callbacks, job directories and logs are the same
as with the basic launcher.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, configure_log, filter_overrides, setup_globals
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, open_dict

from omnistory_core.compose_once import composing_loader, keep_sweep_configs

log = logging.getLogger(__name__)

__all__ = ["OmnistoryLauncher", "parallel_jobs", "spread_order"]

#: per-job payloads and results of a parallel sweep (inside the sweep directory)
WORK_DIR = ".launcher"
#: with the sweep's scheduler, the longest a job's start delays the next one's (seconds)
PACE_S = 10.0


def parallel_jobs(jobs: int | None, devices: Sequence[str]) -> int:
    """How many jobs run at once: ``hydra.launcher.jobs``, else two per device when there are
    two or more, else 1 (in the sweep's own process).

    A job's process holds no device (its GPU stages lease them for their replicas), so more jobs
    than devices only overlap one job's start-up and hosted-API stages with another's GPU stages:
    measured by ``benchmarks/devices_scaling.py``, two per device beat one per device."""
    if jobs is not None:
        if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
            raise ValueError(f"hydra.launcher.jobs={jobs!r}: expected null or an integer >= 1")
        return jobs
    return 2 * len(devices) if len(devices) >= 2 else 1


def spread_order(job_overrides: Sequence[Sequence[str]]) -> list[int]:
    """The order a parallel sweep's jobs start in with its scheduler: next, the job with the
    most choices (overrides) that no job started before it has, the first in the sweep's order
    among equals.  In ``planner=claude,gpt image=kontext,dev`` the second job to start is
    ``planner=gpt image=dev``: both planners make plans from the start, and every expert has
    work as soon as the first plans exist (jobs started later find those plans in the store).
    Jobs keep their numbers, directories and outputs; only when each starts changes."""
    seen: set[str] = set()
    left = list(range(len(job_overrides)))
    order: list[int] = []
    while left:
        best = max(left, key=lambda i: (len(set(job_overrides[i]) - seen), -i))
        order.append(best)
        left.remove(best)
        seen |= set(job_overrides[best])
    return order


class OmnistoryLauncher(Launcher):
    def __init__(self, jobs: int | None = None, restarts: int = 1) -> None:
        self.jobs = jobs
        if isinstance(restarts, bool) or not isinstance(restarts, int) or restarts < 0:
            raise ValueError(f"hydra.launcher.restarts={restarts!r}: expected an integer >= 0")
        self.restarts = restarts
        self.config: DictConfig | None = None
        self.task_function: TaskFunction | None = None
        self.hydra_context: HydraContext | None = None
        #: per job index of the sweep: its overrides, and (as learnt, :meth:`_need`) the warm-pool
        #: specs it needs (None: not known)
        self.overrides: dict[int, list[str]] = {}
        self.needs: dict[int, set[str] | None] = {}
        #: per job index: its config and prepared system, as far as prepared (None: it failed)
        self.prepared: dict[int, tuple[DictConfig, Any] | None] = {}
        #: the sweep's watch (outlook and evaluate sooner, :mod:`omnistory_core.run.watch`)
        self.watch: Any = None
        self._stream_tried = False
        #: job processes started before their jobs (:mod:`.hosts`)
        self.hosts: list[subprocess.Popen[bytes]] = []

    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        self.config = config
        self.hydra_context = hydra_context
        self.task_function = task_function
        keep_sweep_configs(hydra_context.config_loader)
        self.hosts = self._start_hosts()

    def _start_hosts(self) -> list[subprocess.Popen[bytes]]:
        """With the sweep's scheduler and jobs in parallel processes: the processes of the jobs
        that start first, booting now, while Hydra checks the sweep's job configs
        (:mod:`.hosts`)."""
        from omnistory_core.engine.devices import DeviceError, resolve_devices
        from omnistory_core.engine.replicas import SHARED_DEVICES_ENV

        assert self.config is not None
        engine = self.config.engine
        if _warm_pool() is None or not bool(engine.get("scheduler", True)):
            return []
        try:
            n = parallel_jobs(self.jobs, resolve_devices(engine.get("devices")))
        except (DeviceError, ValueError):
            return []
        if n < 2:
            return []
        from hydra_plugins.omnistory_launcher.hosts import start_hosts

        return start_hosts(min(n, os.cpu_count() or 1), {**os.environ, SHARED_DEVICES_ENV: "1"})

    def launch(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> Sequence[JobReturn]:
        from omnistory_core.engine.devices import DeviceError, resolve_devices

        assert self.config is not None
        try:
            devices = resolve_devices(self.config.engine.get("devices"))
        except DeviceError:
            devices = []  # every job says why in its job_error.json
        n = parallel_jobs(self.jobs, devices)
        if n == 1:
            self._close_hosts()
        job_overrides = self._distinct_system_ids(job_overrides)
        self.needs = self._plan_jobs(job_overrides, initial_job_idx)
        self.watch = self._start_watch()
        if n == 1:
            return self._in_process(job_overrides, initial_job_idx)
        return self._parallel(job_overrides, initial_job_idx, n, devices)

    def _distinct_system_ids(self, job_overrides: Sequence[Sequence[str]]) -> list[list[str]]:
        """Jobs of one system that differ only in a parameter (``-m tts.volume=50,300``) would
        share its directory and overwrite each other: each such job is named after its system
        and the overrides that tell it apart (``noop-copy-noop-tts.volume=50``).  Sweeps whose
        jobs have distinct directories keep their overrides as they are: a task whose job
        directory names what tells its runs apart (ViStoryBench's language, split, mode) keeps
        one system id for the runs of one method."""
        jobs = [list(o) for o in job_overrides]
        if len(jobs) < 2 or any(
            o.split("=", 1)[0].lstrip("+~") == "system_id" for j in jobs for o in j
        ):
            return jobs
        varying = {
            o.split("=", 1)[0] for j in jobs for o in j if not all(o in other for other in jobs)
        }
        if not any("." in key for key in varying):  # only group choices vary: ids differ
            return jobs
        assert self.config is not None and self.hydra_context is not None
        ids: list[str | None] = []
        dirs: list[str | None] = []
        for overrides in jobs:
            try:
                config = self.hydra_context.config_loader.load_sweep_config(self.config, overrides)
                ids.append(str(config.get("system_id")))
                dirs.append(str(config.hydra.sweep.subdir))
            except Exception:  # noqa: BLE001 - the job reports its own config error when it runs
                ids.append(None)
                dirs.append(None)
        return [
            # quoted: the id holds the override's "=", which Hydra's grammar refuses bare
            overrides + [f"system_id='{_variant_id(ids[n], overrides, jobs, ids)}'"]
            if ids[n] is not None and dirs.count(dirs[n]) > 1
            else overrides
            for n, overrides in enumerate(jobs)
        ]

    def _plan_jobs(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> dict[int, set[str] | None]:
        """Before any job starts, give the sweep's progress view every job's calls, so its "to
        do" and ETA cover the whole sweep from the first second (each job plans itself again
        when it starts; a job that cannot be planned here says why when it runs).  Returns, for
        the jobs it prepared, the warm-pool specs each needs (:meth:`_need`), which cost
        nothing more then."""
        from omnistory_core.engine.job import MediaHasher
        from omnistory_core.engine.sweep_progress import announce_jobs, write_job_plan
        from omnistory_core.run.generate import plan_for_progress

        assert self.config is not None and self.hydra_context is not None
        sweep_dir = str(self.config.hydra.sweep.dir)
        announce_jobs(sweep_dir, initial_job_idx + len(job_overrides))
        self.overrides = {initial_job_idx + n: list(o) for n, o in enumerate(job_overrides)}
        needs: dict[int, set[str] | None] = {}
        if not bool(self.config.engine.get("progress")) or bool(self.config.engine.get("dry_run")):
            return needs
        media = MediaHasher()  # each dataset file hashed once for all jobs
        for idx in self.overrides:
            try:
                config, prepared = self._prepared(idx)
                planned = plan_for_progress(config, media, prepared)
            except Exception as exc:  # noqa: BLE001 - the job itself reports it when it runs
                log.debug("job #%d not planned for the progress view: %s", idx, exc)
                continue
            write_job_plan(sweep_dir, idx, planned)
            needs[idx] = self._specs(config, prepared)
        return needs

    def _prepare(self, idx: int) -> tuple[DictConfig, Any]:
        """Job ``idx``'s own config (as ``run_job`` gives it the task) and its prepared system."""
        from omnistory_core.run.generate import prepare_system

        assert self.config is not None and self.hydra_context is not None
        config = self.hydra_context.config_loader.load_sweep_config(
            self.config, self.overrides[idx]
        )
        with open_dict(config):
            del config["hydra"]
        return config, prepare_system(config)

    def _prepared(self, idx: int) -> tuple[DictConfig, Any]:
        """:meth:`_prepare`, once per job (the progress view, the pool's needs and the watch
        share it)."""
        if idx not in self.prepared:
            try:
                self.prepared[idx] = self._prepare(idx)
            except Exception:
                self.prepared[idx] = None
                raise
        found = self.prepared[idx]
        if found is None:
            raise RuntimeError(f"job #{idx} could not be prepared")
        return found

    def _start_watch(self) -> Any:
        """With the sweep's scheduler: the watch that tells it each component's remaining work
        and, with ``engine.evaluate_sooner``, hands the evaluation's stream the outputs already
        final (:mod:`omnistory_core.run.watch`; the stream is attached once the first job runs,
        :meth:`_attach_stream`)."""
        pool = _warm_pool()
        assert self.config is not None
        if pool is None or not bool(self.config.engine.get("scheduler", True)):
            return None
        from omnistory_core.run.watch import SweepWatch

        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        return SweepWatch(sweep_dir, pool, list(self.overrides)).start()

    def _attach_stream(self) -> None:
        """Build the evaluation's stream and give it to the watch, once: in this thread (it
        composes the evaluators' configs, no job for a second thread while jobs launch)."""
        if self.watch is None or self._stream_tried:
            return
        self._stream_tried = True
        stream = self._stream()
        if stream is not None:
            self.watch.attach(stream)

    def _stream(self) -> Any:
        """The evaluation's stream (evaluate sooner), or None: no evaluation configured, or
        ``engine.evaluate_sooner=false``, or an evaluation service without one."""
        from omegaconf import OmegaConf

        from omnistory_core.plugins import load_plugins
        from omnistory_core.tasks import selected_task

        assert self.config is not None
        evaluation = OmegaConf.to_container(self.config.evaluation, resolve=True)
        assert isinstance(evaluation, dict)
        if not (evaluation.get("metrics") or evaluation.get("judges")):
            return None
        if not bool(self.config.engine.get("evaluate_sooner", True)):
            return None
        service = load_plugins().evaluation_service()
        sooner = getattr(service, "sooner", None)
        if not callable(sooner):
            return None
        from omnistory_core.engine.devices import resolve_devices

        # the devices as this process resolved them for the sweep (auto: the ones it sees)
        engine = {
            "devices": resolve_devices(self.config.engine.get("devices")),
            "device_locks": self.config.engine.get("device_locks"),
        }
        try:
            return sooner(
                Path(str(self.config.hydra.sweep.dir)),
                evaluation=evaluation,
                store=Path(str(self.config.engine.store)).resolve(),
                task=selected_task(self.config).name,
                engine=engine,
            )
        except Exception as exc:  # noqa: BLE001 - the evaluation at the sweep's end says why
            log.warning("no scoring during generation: %s: %s", type(exc).__name__, exc)
            return None

    def _finished(self, idx: int, ret: JobReturn | None) -> None:
        """Tell the watch that job ``idx`` ended (with its directory when it wrote one)."""
        if self.watch is None:
            return
        job_dir = None
        if ret is not None and ret.status == JobStatus.COMPLETED:
            # the job's output directory (Hydra's working_dir is it only when jobs chdir)
            runtime = ret.hydra_cfg.hydra.runtime if ret.hydra_cfg is not None else None
            found = runtime.output_dir if runtime is not None else ret.working_dir
            job_dir = Path(str(found)) if found else None
        self.watch.job_finished(idx, job_dir)

    @staticmethod
    def _specs(config: DictConfig, prepared: Any) -> set[str] | None:
        if _warm_pool() is None:
            return None
        from omnistory_core.run.generate import pooled_specs

        return pooled_specs(config, prepared)

    def _written(self, idx: int) -> dict[str, Any] | None:
        """The config job ``idx`` wrote when it started (None: not started, or none)."""
        from omnistory_core.engine.sweep_progress import read_job_config

        assert self.config is not None
        return read_job_config(str(self.config.hydra.sweep.dir), idx)

    def _need(self, idx: int, compose: bool = True) -> set[str] | None:
        """The warm-pool specs job ``idx`` needs, learnt once: from the config it wrote when it
        started, else composed here (None: not known, a job whose config does not resolve
        here; it fails on its own when it runs; or, with ``compose=False``, a job that has
        not written its config yet)."""
        if idx not in self.needs:
            written = self._written(idx)
            if written is None and not compose:
                return None
            try:
                if written is not None:
                    from omegaconf import OmegaConf

                    from omnistory_core.run.generate import prepare_config

                    prepared = prepare_config(written)
                    self.needs[idx] = self._specs(OmegaConf.create(written), prepared)
                else:
                    self.needs[idx] = self._specs(*self._prepared(idx))
            except Exception as exc:  # noqa: BLE001 - the job itself reports it when it runs
                log.debug("job #%d: its pooled components are not known: %s", idx, exc)
                self.needs[idx] = None
        return self.needs[idx]

    def _learn_a_need(self) -> None:
        """Learn one more job's needs (a parallel sweep's idle moments: no job waits for it),
        from the config a running job wrote: composing one here would hold up the launch."""
        if _warm_pool() is not None:
            for idx in self.overrides:
                if idx not in self.needs and self._written(idx) is not None:
                    self._need(idx)
                    return

    def _release_unneeded(self, remaining: Sequence[int], compose: bool = True) -> None:
        """Shut down the warm pool's models that none of the jobs ``remaining`` (not yet
        finished) needs; nothing while one of them has needs not known (``compose=False``: a
        job that has not said what it runs is not composed here to learn it)."""
        pool = _warm_pool()
        if pool is None:
            return
        # the models the evaluation's stream scores with stay for the evaluation at the end
        needed: set[str] = self.watch.keep() if self.watch is not None else set()
        for idx in remaining:
            need = self._need(idx, compose)
            if need is None:
                return
            needed |= need
        from omnistory_core.engine.pool import release_unneeded

        release_unneeded(pool, needed)

    # -- one job after another, in this process ------------------------------------------------
    def _in_process(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> Sequence[JobReturn]:
        from hydra._internal.core_plugins.basic_launcher import BasicLauncher

        basic = BasicLauncher()
        assert self.hydra_context is not None and self.task_function is not None
        assert self.config is not None
        basic.setup(
            hydra_context=self.hydra_context, task_function=self.task_function, config=self.config
        )
        if _warm_pool() is None or (len(job_overrides) < 2 and self.watch is None):
            return basic.launch(job_overrides, initial_job_idx)
        # one job at a time through the basic launcher, so that between two jobs the pool lets
        # go of the models no later job needs
        runs: list[JobReturn] = []
        end = initial_job_idx + len(job_overrides)
        for n, overrides in enumerate(job_overrides):
            idx = initial_job_idx + n
            done = basic.launch([overrides], idx)
            runs.extend(done)
            self._attach_stream()  # between jobs: this thread ran the first one
            self._finished(idx, done[0] if done else None)
            self._release_unneeded(range(idx + 1, end))
        return runs

    # -- n jobs at once, each in a fresh process ------------------------------------------------
    def _parallel(
        self,
        job_overrides: Sequence[Sequence[str]],
        initial_job_idx: int,
        n: int,
        devices: Sequence[str],
    ) -> Sequence[JobReturn]:
        import cloudpickle

        from omnistory_core.engine.replicas import SHARED_DEVICES_ENV

        assert self.config is not None and self.hydra_context is not None
        setup_globals()
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        work = sweep_dir / WORK_DIR
        work.mkdir(parents=True, exist_ok=True)
        log.info(
            "Launching %d jobs, %d at a time, on device(s) %s",
            len(job_overrides),
            min(n, len(job_overrides)),
            ",".join(devices) or "none",
        )
        singleton_state = Singleton.get_state()
        # every job process shares the devices through the pool, even a single one
        env = {**os.environ, SHARED_DEVICES_ENV: "1"}
        # with the scheduler, the first jobs to start cover as many choices as they can
        order = spread_order(job_overrides) if self.watch is not None else range(len(job_overrides))
        queue = deque((initial_job_idx + i, list(job_overrides[i])) for i in order)
        starts: dict[int, int] = {}
        running: dict[int, tuple[subprocess.Popen[Any], list[str]]] = {}
        results: dict[int, JobReturn] = {}
        spawned: dict[int, float] = {}
        try:
            while queue or running:
                while queue and len(running) < n and not self._starting(running, spawned):
                    idx, overrides = queue.popleft()
                    payload = work / f"job-{idx}.pkl"
                    with composing_loader(self.hydra_context.config_loader):
                        pickled = cloudpickle.dumps(
                            (
                                idx,
                                overrides,
                                self.hydra_context,
                                self.config,
                                self.task_function,
                                singleton_state,
                                os.getcwd(),
                            )
                        )
                    payload.write_bytes(pickled)
                    result = work / f"job-{idx}.result.pkl"
                    result.unlink(missing_ok=True)
                    starts[idx] = starts.get(idx, 0) + 1
                    if starts[idx] == 1:
                        log.info("\t#%d : %s", idx, " ".join(filter_overrides(overrides)))
                    proc = self._job_process(work, idx, payload, result, env)
                    running[idx] = (proc, overrides)
                    spawned[idx] = time.time()
                time.sleep(0.05)
                if running and (results or self._experts_started()):
                    self._attach_stream()
                self._learn_a_need()
                for idx, (proc, overrides) in list(running.items()):
                    code = proc.poll()
                    if code is None:
                        continue
                    del running[idx]
                    result = work / f"job-{idx}.result.pkl"
                    if result.exists():
                        results[idx] = cloudpickle.loads(result.read_bytes())
                        result.unlink()
                    elif starts[idx] <= self.restarts:
                        log.warning(
                            "job #%d's process died (%s); starting it again (%d of %d): the"
                            " store keeps every call it finished",
                            idx,
                            _exit_reason(code),
                            starts[idx],
                            self.restarts,
                        )
                        queue.appendleft((idx, overrides))
                    else:
                        results[idx] = self._lost(idx, overrides, code, starts[idx])
                    (work / f"job-{idx}.pkl").unlink(missing_ok=True)
                    if idx in results:  # finished: its models may go, if no other job needs them
                        self._finished(idx, results[idx])
                        # (composing a job's config here would hold up the others' launch)
                        remaining = [i for i, _ in queue] + list(running)
                        self._release_unneeded(remaining, compose=self.watch is None)
        finally:
            self._close_hosts()
            for proc, _ in running.values():  # the sweep itself was interrupted
                proc.terminate()
            for proc, _ in running.values():
                proc.wait()
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        return [results[idx] for idx in sorted(results)]

    def _experts_started(self) -> bool:
        """Whether a job's expert stage has started (``.progress/job-N.keys.json``): no item is
        final before that, so the evaluation's stream, whose evaluators' configs take a while to
        compose, is built then rather than while the first jobs start on the same CPU cores."""
        from omnistory_core.engine.sweep_progress import PROGRESS_DIR

        assert self.config is not None
        progress = Path(str(self.config.hydra.sweep.dir)) / PROGRESS_DIR
        return next(progress.glob("job-*.keys.json"), None) is not None

    def _starting(self, running: Mapping[int, Any], spawned: Mapping[int, float]) -> bool:
        """With the sweep's scheduler, whether as many jobs are starting as the machine has CPU
        cores (a job starts until its process says it runs: ``.progress/job-N.json``, at most
        :data:`PACE_S`): the next one waits, so that the first jobs reach their first calls
        without every other job's start-up competing for the CPU."""
        if self.watch is None:
            return False
        from omnistory_core.engine.sweep_progress import PROGRESS_DIR

        assert self.config is not None
        progress = Path(str(self.config.hydra.sweep.dir)) / PROGRESS_DIR
        now = time.time()
        starting = 0
        for idx in running:
            since = spawned.get(idx, 0.0)
            if now - since >= PACE_S:
                continue
            try:
                said = (progress / f"job-{idx}.json").stat().st_mtime >= since
            except OSError:
                said = False
            starting += not said
        return starting >= (os.cpu_count() or 1)

    def _job_process(
        self, work: Path, idx: int, payload: Path, result: Path, env: dict[str, str]
    ) -> subprocess.Popen[Any]:
        """Job ``idx``'s process: a host started for it (:mod:`.hosts`), else a fresh one."""
        from hydra_plugins.omnistory_launcher.hosts import hand_over

        console = self._console(work, idx)
        log = work / f"job-{idx}.log" if "stdout" in console else None
        try:
            while self.hosts:
                host = self.hosts.pop(0)
                if hand_over(host, payload, result, log):
                    return host
            return subprocess.Popen(
                [sys.executable, "-m", __name__, str(payload), str(result)], env=env, **console
            )
        finally:
            if "stdout" in console:
                console["stdout"].close()  # the child has its own copy

    def _close_hosts(self) -> None:
        """Hosts no job was handed to exit (their stdin closes)."""
        hosts, self.hosts = self.hosts, []
        for host in hosts:
            if host.stdin is not None:
                with contextlib.suppress(OSError):
                    host.stdin.close()
        for host in hosts:
            host.wait()

    def _console(self, work: Path, idx: int) -> dict[str, Any]:
        """Where a job's console output goes: the terminal, unless the sweep's live progress
        view is drawn there (it would be torn by the jobs' lines): then ``.launcher/job-N.log``
        (each job's own Hydra log is in its job directory either way)."""
        assert self.config is not None
        if not (bool(self.config.engine.get("progress", False)) and sys.stderr.isatty()):
            return {}
        handle = open(work / f"job-{idx}.log", "ab")  # noqa: SIM115 - the child writes it
        return {"stdout": handle, "stderr": subprocess.STDOUT}

    def _lost(self, idx: int, overrides: list[str], code: int, starts: int) -> JobReturn:
        """A job whose process kept dying: recorded like a failed job, the sweep goes on."""
        from omnistory_core.engine.store import atomic_write_bytes

        assert self.config is not None and self.hydra_context is not None
        config = self.hydra_context.config_loader.load_sweep_config(self.config, overrides)
        with open_dict(config):
            config.hydra.job.id = idx
            config.hydra.job.num = idx
        try:
            system_id = str(config.system_id)
            job_dir = Path(str(config.hydra.sweep.dir)) / str(config.hydra.sweep.subdir)
        except Exception:  # noqa: BLE001 - a config that does not resolve: name the job by number
            system_id = f"job {idx}"
            job_dir = Path(str(self.config.hydra.sweep.dir)) / f"job-{idx}"
        error = (
            f"JobLost: the job's process died {starts} time(s), the last {_exit_reason(code)};"
            " the store keeps what it finished: run the sweep again"
        )
        log.error("job #%d (%s): %s", idx, system_id, error)
        record = {"system_id": system_id, "error": error}
        atomic_write_bytes(
            job_dir / "job_error.json", (json.dumps(record, indent=2) + "\n").encode()
        )
        return JobReturn(
            overrides=overrides,
            cfg=config,
            hydra_cfg=None,
            working_dir=str(job_dir),
            task_name=str(self.config.hydra.job.name),
            status=JobStatus.COMPLETED,
            _return_value=None,
        )


def _warm_pool() -> Path | None:
    """The sweep's warm pool (:mod:`omnistory_core.engine.pool`) when this process owns one."""
    from omnistory_core.engine.pool import POOL_ENV

    value = os.environ.get(POOL_ENV)
    return Path(value) if value else None


def _exit_reason(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


# -- the job's process ----------------------------------------------------------------------------
def run_sweep_job(
    idx: int,
    overrides: Sequence[str],
    hydra_context: HydraContext,
    config: DictConfig,
    task_function: TaskFunction,
    singleton_state: dict[Any, Any],
    cwd: str,
    job_id: str | None = None,
) -> JobReturn:
    """One job of a sweep in a process of its own, as Hydra's joblib launcher runs one in a
    worker: the sweep's Hydra state restored, the job's config composed, Hydra's ``run_job``
    (callbacks, job directory, logs).  The Ray launcher runs its tasks through it too."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.core.utils import run_job

    if os.path.isdir(cwd):
        os.chdir(cwd)
    setup_globals()
    Singleton.set_state(singleton_state)
    sweep_config = hydra_context.config_loader.load_sweep_config(config, list(overrides))
    with open_dict(sweep_config):
        sweep_config.hydra.job.id = job_id if job_id is not None else idx
        sweep_config.hydra.job.num = idx
    HydraConfig.instance().set_config(sweep_config)
    return run_job(
        hydra_context=hydra_context,
        task_function=task_function,
        config=sweep_config,
        job_dir_key="hydra.sweep.dir",
        job_subdir_key="hydra.sweep.subdir",
    )


def _run_child(payload: Path, result: Path) -> int:
    """Run one job as Hydra's joblib launcher runs one in a worker, and pickle its JobReturn."""
    import cloudpickle

    from omnistory_core.engine.store import atomic_write_bytes

    ret = run_sweep_job(*cloudpickle.loads(payload.read_bytes()))
    try:
        data = cloudpickle.dumps(ret)
    except Exception:  # noqa: BLE001 - an unpicklable return value or exception: keep its text
        value = ret._return_value
        failed = ret.status != JobStatus.COMPLETED
        ret._return_value = RuntimeError(f"{type(value).__name__}: {value}") if failed else None
        data = cloudpickle.dumps(ret)
    atomic_write_bytes(result, data)
    return 0


def _main(argv: list[str]) -> int:
    if argv == ["--host"]:
        from hydra_plugins.omnistory_launcher.hosts import host_main

        return host_main(_run_child)
    return _run_child(Path(argv[0]), Path(argv[1]))


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))


def _variant_id(
    system_id: str, overrides: list[str], jobs: list[list[str]], ids: list[str | None]
) -> str:
    """``system_id`` plus the overrides of this job that the other jobs of the same id do not
    all share, in command-line order (``/`` and spaces made safe for a directory name)."""
    siblings = [j for j, i in zip(jobs, ids, strict=True) if i == system_id]
    telling = [o for o in overrides if not all(o in j for j in siblings)]
    safe = str.maketrans({"/": "_", " ": "_", "'": "", '"': ""})
    suffix = "-".join(o.lstrip("+~").translate(safe) for o in telling)
    return f"{system_id}-{suffix}" if suffix else system_id
