"""Evaluate sooner (``engine.evaluate_sooner``): the end-of-sweep evaluation's calls, made while
generation goes on.

The sweep's watch (:mod:`omnistory_core.run.watch`) hands this stream every example whose outputs
are all final (:meth:`SoonerEvaluation.update`: as the job's directory will hold them), or, for a
task with its own evaluation, each job directory once its job is done
(:meth:`SoonerEvaluation.job_done`: the task's units of that job).  Each metric and judge takes
the items that reached it since its last batch and scores them as one stage
(:func:`~omnistory_core.engine.stage.run_stage`, then its stage-end pass), on the sweep's devices
through its scheduler and warm pool: evaluator-major per batch, one thread per evaluator, so
they run side by side.  On devices an evaluator's next batch does not wait for the one before
it (the scheduler then sees all of its work at once and spreads it); in this process, where the
model is loaded once for the stream, its batches run one after another.  Every item is keyed
exactly as the evaluation at the sweep's end keys it (the same pools,
:func:`omnistory_eval.plan.planned_pool`, and units), so that evaluation finds their records in
the store: the same keys, records, rows and ``scores.jsonl``, byte for byte, as when everything
is scored at the end.  What this stream computed is counted there as computed
(:data:`PRIOR`: calls and model loads in ``evaluation_stats.json`` as without it).

Nothing here writes the scores table: the stream only fills the store, so a sweep killed while
it runs loses nothing but the calls in flight (their key locks die with the process).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from omnistory_core.engine.stage import ComponentStats, LazyComponent, StageItem, item_key

if TYPE_CHECKING:
    from omnistory_core.engine.store import Store

log = logging.getLogger("omnistory")

__all__ = ["PRIOR", "SoonerEvaluation", "take_prior"]

#: sweep directory -> per evaluator key, what the stream computed (see :func:`take_prior`)
PRIOR: dict[str, dict[str, ComponentStats]] = {}


def take_prior(sweep_dir: Path) -> dict[str, ComponentStats]:
    """What the stream of ``sweep_dir`` computed, once (the evaluation at its end counts it)."""
    return PRIOR.pop(str(Path(sweep_dir).resolve()), {})


class _Lane:
    """One evaluator's queue of items and the thread that scores them a batch at a time."""

    def __init__(self, stream: SoonerEvaluation, evaluator: Any):
        self.stream = stream
        self.evaluator = evaluator
        self.stats = ComponentStats()
        self.lazy = LazyComponent(evaluator, self.stats)
        self.queue: list[dict[str, Any]] = []
        self.keys: set[str] = set()  # every key handed to it
        self.done = 0
        self.broken = False
        self.thread = threading.Thread(
            target=self._run, name=f"sooner-{evaluator.key()}", daemon=True
        )

    @property
    def scope(self) -> str:
        return str(getattr(self.evaluator, "scope", "item"))

    def add(self, inputs: dict[str, Any]) -> None:
        key = item_key(self.evaluator, inputs)
        with self.stream.cond:
            if key not in self.keys:
                self.keys.add(key)
                self.queue.append(inputs)
                self.stream.cond.notify_all()

    def _run(self) -> None:
        from omnistory_eval.runner import ResultStore

        # a ResultStore stands in for the Store (get and put filtered, the rest delegated)
        store = cast("Store", ResultStore(self.stream.store))
        devices = self.stream.devices
        # on devices, a batch does not wait for the one before it: items that became final
        # while a small batch's replica loads are scored beside it, so the scheduler sees all
        # of the evaluator's work and spreads it (in this process, one model: one at a time)
        beside = devices is not None and devices.wants(self.evaluator)
        running: list[threading.Thread] = []
        while True:
            with self.stream.cond:
                while not self.queue and not self.stream.closing:
                    self.stream.cond.wait()
                batch, self.queue = self.queue, []
            if not batch:
                break
            if self.broken:
                continue
            if beside:
                thread = threading.Thread(
                    target=self._score,
                    args=(store, batch, LazyComponent(self.evaluator, ComponentStats())),
                    name=f"sooner-{self.evaluator.key()}-batch",
                    daemon=True,
                )
                thread.start()
                running.append(thread)
            else:
                self._score(store, batch, self.lazy)
        for thread in running:
            thread.join()
        self.lazy.release()

    def _score(self, store: Store, batch: list[dict[str, Any]], lazy: LazyComponent) -> None:
        """One batch, evaluator-major: its stage and its stage-end pass; its counts added to
        the lane's."""
        from omnistory_core.engine.stage import run_stage
        from omnistory_eval.runner import _finalize

        items = [StageItem(n, inputs) for n, inputs in enumerate(batch)]
        try:
            outcomes = run_stage(lazy, items, store, advance=None, devices=self.stream.devices)
            _finalize(self.evaluator, outcomes, store, self.stream.devices)
        except Exception as exc:  # noqa: BLE001 - the end-of-sweep evaluation scores them
            log.warning(
                "%s: scoring during generation stopped (%s: %s); the evaluation at the"
                " sweep's end scores its items",
                self.evaluator.key(),
                type(exc).__name__,
                exc,
            )
            self.broken = True
        with self.stream.cond:
            if lazy is not self.lazy:
                for name in ("calls", "cache_hits", "failures", "loads"):
                    setattr(self.stats, name, getattr(self.stats, name) + getattr(lazy.stats, name))
                self.stats.computed |= lazy.stats.computed
                lazy.release()
            self.done += len(batch)


class SoonerEvaluation:
    """The stream of one sweep (see the module docstring).  ``evaluation``: the sweep's
    ``evaluation`` settings; ``engine``: its ``devices`` and ``device_locks``."""

    def __init__(
        self,
        sweep_dir: Path,
        *,
        evaluation: Mapping[str, Any],
        store: Path,
        task: str | None,
        engine: Mapping[str, Any],
    ):
        from hydra.core.global_hydra import GlobalHydra

        from omnistory_core.engine.hashing import MediaHasher
        from omnistory_core.engine.store import Store
        from omnistory_core.plugins import load_plugins
        from omnistory_eval.command import evaluation_devices
        from omnistory_eval.evaluators import build_evaluators
        from omnistory_eval.preflight import preflight

        self.sweep_dir = Path(sweep_dir)
        self.store = Store(store)
        self.task = load_plugins().task(task) if task else None
        # building an evaluator composes its config with Hydra's compose API: the sweep's own
        # Hydra stays as it was for the jobs still to launch
        hydra = GlobalHydra.instance().hydra
        try:
            evaluators = build_evaluators(
                [str(m) for m in evaluation.get("metrics") or []],
                [str(j) for j in evaluation.get("judges") or []],
                [str(o) for o in evaluation.get("overrides") or []],
                self.store.root,
            )
        finally:
            GlobalHydra.instance().hydra = hydra
        blocked = {p.evaluator for p in preflight(evaluators, warn=None)}
        self.lanes = [_Lane(self, e) for e in evaluators if e.key() not in blocked]
        # the sweep's process keeps the GPUs it sees: the jobs it starts later resolve
        # engine.devices=auto from them (a device runner hides them from its own process)
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        try:
            self.devices = evaluation_devices(
                self.sweep_dir, evaluators, self.store.root, dict(engine)
            )
        finally:
            if visible is None:
                os.environ.pop("CUDA_VISIBLE_DEVICES", None)
            else:
                os.environ["CUDA_VISIBLE_DEVICES"] = visible
        self.media = MediaHasher()
        self.cond = threading.Condition()
        self.closing = False
        #: per evaluator: what the examples not final yet will ask of it (see :meth:`update`)
        self._later: dict[str, set[Any]] = {}
        self._fed: set[tuple[str, int]] = set()
        for lane in self.lanes:
            lane.thread.start()

    # -- what the sweep's watch tells it ------------------------------------------------------
    def update(
        self,
        system: str,
        examples: Iterable[Any],
        candidates: Mapping[int, Mapping[str, Any]],
        final: Iterable[int],
    ) -> None:
        """One job's examples and their outputs as planned from the store (``candidates``, see
        :func:`omnistory_core.engine.dryrun.plan_job`); those of ``final`` are scored now, the
        others counted for the scheduler's outlook (by the outputs they will read)."""
        if self.task is not None and self.task.evaluation is not None:
            return  # such a task's units come from its job directories (job_done)
        from omnistory_eval.plan import planned_pool

        final = set(final)
        for example in examples:
            entry = candidates.get(example.index)
            if entry is None or (system, example.index) in self._fed:
                continue
            for lane in self.lanes:
                if lane.scope != "item":
                    continue
                reads = lane.evaluator.reads
                if example.index not in final:
                    sig = (example.index, tuple(_identity(entry.get(_modality(r))) for r in reads))
                    self._later.setdefault(lane.evaluator.key(), set()).add(sig)
                    continue
                pool, missing = planned_pool(example, entry, self.media, self.store)
                if set(missing) & set(reads) or any(r not in pool for r in reads):
                    continue  # a missing output: rows without a call
                lane.add({name: pool[name] for name in reads})
            if example.index in final:
                self._fed.add((system, example.index))

    def job_done(self, job_dir: Path) -> None:
        """A job's directory is complete: for a task with its own evaluation, its units."""
        if self.task is None or self.task.evaluation is None:
            return
        from omnistory_core.jobdir import MANIFEST

        if not (Path(job_dir) / MANIFEST).is_file():
            return
        try:
            evaluation = self.task.evaluation([Path(job_dir)], {"outputs": None, "dataset": {}})
        except Exception as exc:  # noqa: BLE001 - the end-of-sweep evaluation says why
            log.warning("%s: not scored during generation: %s", job_dir, exc)
            return
        from omnistory_eval.runner import task_units

        units = task_units(evaluation)
        for lane in self.lanes:
            for unit in units.get(lane.scope, ()):
                reads = lane.evaluator.reads
                if set(unit.missing) & set(reads) or any(r not in unit.pool for r in reads):
                    continue
                lane.add({name: unit.pool[name] for name in reads})

    def expected(self) -> dict[str, int]:
        """Per evaluator, the calls it still has to make: queued, and what the examples not
        final yet will ask (an estimate: items reading the same outputs count once)."""
        with self.cond:
            return {
                lane.evaluator.key(): len(lane.keys)
                - lane.done
                + len(self._later.pop(lane.evaluator.key(), set()))
                for lane in self.lanes
            }

    def specs(self) -> set[str]:
        """The warm-pool specs of its evaluators (kept loaded while the sweep still scores)."""
        from omnistory_core.engine.pool import component_spec

        return {component_spec(lane.evaluator) for lane in self.lanes}

    def finish(self) -> None:
        """Score what is queued, stop, and leave what was computed to the evaluation at the
        sweep's end (:func:`take_prior`)."""
        with self.cond:
            self.closing = True
            self.cond.notify_all()
        for lane in self.lanes:
            lane.thread.join()
            log.info(
                "%s: %d call(s) made while the sweep ran (evaluate sooner)",
                lane.evaluator.key(),
                lane.stats.calls,
            )
        PRIOR[str(self.sweep_dir.resolve())] = {
            lane.evaluator.key(): lane.stats for lane in self.lanes
        }


def _modality(name: str) -> str:
    from omnistory_eval.plan import CANDIDATES

    return CANDIDATES.get(name, "")


def _identity(value: Any) -> str:
    """What an output of a candidate is known as (its call still to make, its blob or value)."""
    if not isinstance(value, Mapping):
        return "missing"
    for field in ("pending", "blob"):
        if field in value:
            return f"{field}:{value[field]}"
    import json

    return "value:" + json.dumps(value.get("value"), sort_keys=True, default=str)
