"""While a sweep's jobs run: the work each component has left, and the outputs already final.

:class:`SweepWatch` is a thread of the sweep's process (``hydra/launcher=omnistory`` starts it
with the sweep's scheduler, :mod:`omnistory_core.engine.schedule`).  About twice a second it plans
every job not finished yet from the store, as the dry run does
(:func:`~omnistory_core.engine.dryrun.plan_job`, read only; an expert's call still to make named
by its upstream call, so jobs sharing it count it once), and from that:

* tells the scheduler, per component, the distinct calls still to make
  (:func:`~omnistory_core.engine.schedule.write_outlook`), so that it places replicas by the
  sweep's remaining work, not only by the calls the stages have asked for so far;
* with ``engine.evaluate_sooner`` and an evaluation configured, hands the evaluation's stream
  (the evaluation service's ``sooner``) every example whose outputs are all final: each output a
  usable record of the store or missing for good (a failed plan, a failed call no retry will
  make again), exactly what the job's directory will hold.  The stream scores those items while
  generation goes on; the evaluation at the sweep's end then finds them in the store.  A task
  with its own generation hands over a job directory once the job is done instead
  (:meth:`job_finished`).

The store stays the only shared state: the watch reads it and the job directories the launcher
says are done, and writes nothing but the outlook.  If the watch fails, the sweep goes on as
without it (the evaluation at the end scores everything).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, cast

log = logging.getLogger("omnistory")

__all__ = ["SweepWatch", "running_watch"]

POLL_S = 0.5
_RUNNING: dict[str, SweepWatch] = {}


def running_watch(sweep_dir: str | Path) -> SweepWatch | None:
    """The watch of the sweep in ``sweep_dir`` running in this process, if any."""
    return _RUNNING.get(str(Path(sweep_dir).resolve()))


class _Job:
    def __init__(self, idx: int, system: str, walk: Any, retry: Any, store: Path):
        self.idx = idx
        self.system = system
        self.walk = walk
        self.retry = retry
        self.store = store
        #: examples handed to the stream (all outputs final)
        self.fed: set[int] = set()
        #: every example's outputs are final: nothing left to count
        self.final = False


class SweepWatch:
    """See the module docstring.  ``jobs``: the sweep's job numbers; each is planned once it has
    written its config (:func:`~omnistory_core.engine.sweep_progress.read_job_config`, at its
    start; a task with its own generation writes none).  ``stream``: the evaluation's stream,
    or None (:meth:`attach` may give it later)."""

    def __init__(
        self,
        sweep_dir: Path,
        pool: Path,
        jobs: list[int],
        stream: Any = None,
        poll_s: float = POLL_S,
    ):
        self.sweep_dir = Path(sweep_dir)
        self.pool = pool
        self.pending_jobs = list(jobs)
        self.stream = stream
        self.poll_s = poll_s
        self.jobs: dict[int, _Job | None] = {}
        self._finished: list[Path] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="sweep-watch", daemon=True)
        self._media: Any = None

    def start(self) -> SweepWatch:
        _RUNNING[str(self.sweep_dir.resolve())] = self
        self._thread.start()
        return self

    def attach(self, stream: Any) -> None:
        """The evaluation's stream, once it is built: it gets every final output from then on
        (those final already included)."""
        with self._lock:
            self.stream = stream

    def keep(self) -> set[str]:
        """The warm-pool specs the evaluation's stream scores with (kept loaded for it)."""
        specs = getattr(self.stream, "specs", None)
        return set(cast(Iterable[str], specs())) if callable(specs) else set()

    def job_finished(self, idx: int, job_dir: Path | None) -> None:
        """The launcher's word that job ``idx`` ended (its directory written, or not)."""
        if job_dir is not None:
            with self._lock:
                self._finished.append(Path(job_dir))

    def finish(self) -> None:
        """Every job has ended: hand the stream what is final now and wait until it has scored
        it all (its stats go to the evaluation at the sweep's end)."""
        self._stop.set()
        self._thread.join()
        try:
            self._poll(final=True)
        except Exception as exc:  # noqa: BLE001 - the end-of-sweep evaluation scores it all
            log.warning("sweep watch: %s: %s", type(exc).__name__, exc)
        if self.stream is not None:
            self._finish_stream(self.stream)
        _RUNNING.pop(str(self.sweep_dir.resolve()), None)

    def _finish_stream(self, stream: Any) -> None:
        """The stream's last batches, with the outlook kept current meanwhile: the scheduler
        keeps a device for an evaluator with work to come (its placement rules), so the work
        an evaluator has done must leave the outlook, not stay as it was at the last job's end."""
        from omnistory_core.engine.schedule import write_outlook

        done = threading.Event()

        def refresh() -> None:
            while not done.wait(self.poll_s):
                try:  # generation is over: only the evaluators have work left
                    write_outlook(self.pool, dict(stream.expected()))
                except Exception as exc:  # noqa: BLE001 - the outlook stays as it was
                    log.debug("sweep watch: outlook not refreshed: %s", exc)

        thread = threading.Thread(target=refresh, name="sweep-watch-outlook", daemon=True)
        thread.start()
        try:
            stream.finish()
        finally:
            done.set()
            thread.join()

    # -- the thread ---------------------------------------------------------------------------
    def _loop(self) -> None:
        while not self._stop.wait(self.poll_s):
            try:
                self._poll()
            except Exception as exc:  # noqa: BLE001 - the sweep goes on without the watch
                log.warning("sweep watch stopped: %s: %s", type(exc).__name__, exc)
                return

    def _job(self, idx: int) -> _Job | None:
        """Job ``idx``'s walk, once the job has written its config (None until then)."""
        if self.jobs.get(idx) is None:
            from omnistory_core.engine.hashing import MediaHasher
            from omnistory_core.engine.job import job_walk
            from omnistory_core.engine.sweep_progress import read_job_config
            from omnistory_core.run.generate import prepare_config

            config = read_job_config(self.sweep_dir, idx)
            if config is None:
                return None
            prepared = prepare_config(config)
            self._media = self._media or MediaHasher()
            walk = job_walk(prepared.examples, prepared.components, self._media)
            engine = config["engine"]
            store = Path(str(engine["store"])).resolve()
            retry = engine.get("retry_failures", "errors")
            self.jobs[idx] = _Job(idx, prepared.system.system_id, walk, retry, store)
        return self.jobs.get(idx)

    def _poll(self, final: bool = False) -> None:
        from omnistory_core.engine.dryrun import ReadOnlyStore, plan_job
        from omnistory_core.engine.schedule import write_outlook

        remaining: dict[str, set[str]] = {}
        for idx in self.pending_jobs:
            if self._stop.is_set() and not final:
                return
            job = self._job(idx)
            if job is None or (job.final and len(job.fed) == len(job.walk.examples)):
                continue
            if job.final and self.stream is None:
                continue
            plan = plan_job(
                walk=job.walk,
                store=ReadOnlyStore(job.store),
                retry_failures=job.retry,
                symbolic_experts=True,
                estimate=False,
            )
            for key, entry in plan["components"].items():
                remaining.setdefault(key, set()).update(entry["pending"])
            self._feed(job, plan["candidates"])
        with self._lock:
            finished, self._finished = self._finished, []
        stream = self.stream
        if stream is None:  # not built yet: these jobs are handed over once it is
            with self._lock:
                self._finished[:0] = finished
        else:
            for job_dir in finished:
                stream.job_done(job_dir)
        outlook = {key: len(names) for key, names in remaining.items()}
        expected = getattr(self.stream, "expected", None)
        if callable(expected):
            outlook.update(cast(Mapping[str, int], expected()))
        write_outlook(self.pool, outlook)

    def _feed(self, job: _Job, candidates: list[dict[str, Any]]) -> None:
        """Hand the stream the job's examples: those whose outputs are all final now to score,
        the others to count."""
        by_index = {int(entry["index"]): entry for entry in candidates}
        final = {
            index
            for index, entry in by_index.items()
            if not any(isinstance(v, dict) and "pending" in v for v in entry.values())
        }
        job.final = len(final) == len(by_index)
        stream = self.stream
        if stream is not None and (final - job.fed or len(final) < len(by_index)):
            stream.update(job.system, job.walk.examples, by_index, final)
            job.fed |= final
