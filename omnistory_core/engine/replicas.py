"""Data-parallel stages: replicas of a component on the devices of a :class:`DevicePool`.

When ``engine.devices`` makes a device pool, a stage of a component that needs a GPU
(:func:`~omnistory_core.engine.devices.gpus_needed`) does not run in the job's process.  Its calls
run on *replicas*: worker processes of the component (the isolation worker,
:mod:`omnistory_core.engine.worker`, in the component's own environment when it has one), each
pinned through ``CUDA_VISIBLE_DEVICES`` to the device(s) it leased.  Each replica loads the model
once and takes claimed chunks of the stage's calls (a ``batch_size`` at a time, the key locks of
the store) until none are left; meanwhile the stage starts another replica whenever a device is
free and unclaimed calls remain beyond what the running replicas will take, so no device idles
while the stage has calls to hand out.  A tensor-parallel model gets its ``gpus()`` devices per
replica.

What a replica computes is exactly what the job's process would: the same key, the same inputs,
the same encoding into the store (the worker encodes in the same environment), in the same
chunks; a result depends on neither the device nor the replica that made it.  A replica that dies
(``kill -9``, out of memory) is restarted on its device and its chunk is tried once more; a
second death records the chunk as ``model_error`` failures (recomputed by the next run).  Workers
die with the job's process (``PR_SET_PDEATHSIG``), so a killed job leaves no replica computing
calls whose locks it has lost.

In a ``-m`` sweep with ``engine.warm_pool`` (the default) a replica is instead a server of the
sweep's warm pool (:mod:`omnistory_core.engine.pool`): it outlives the stage and the job, so a
component is loaded once per device for the whole sweep, and the devices where it is loaded are
leased first.  Claiming, the retry of a dead replica's chunk and the lease per device are the
same; a server computing for a job that is killed exits at once instead of dying with it.

With the sweep's scheduler (:mod:`omnistory_core.engine.schedule`, started with the warm pool), a
stage does not lease devices on its own: it asks the scheduler (a :class:`Ticket`, telling it the
calls it has not handed out) and starts a replica on each device it is granted, still under the
device's lock.  If the scheduler is gone, the stage goes on leasing devices itself.
"""

from __future__ import annotations

import logging
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omnistory_core.components import Component
from omnistory_core.engine.devices import (
    DeviceError,
    DeviceLease,
    DevicePool,
    default_lock_dir,
    gpus_needed,
    resolve_devices,
)
from omnistory_core.engine.isolation import IsolatedComponent, WorkerDied
from omnistory_core.engine.schedule import SchedulerGone, Ticket, open_ticket
from omnistory_core.engine.stage import StageRun

log = logging.getLogger("omnistory")

__all__ = ["SHARED_DEVICES_ENV", "ReplicaRunner", "replica_of", "stage_devices"]

#: how often a stage waiting for devices looks in the store for calls other processes made
LOOK_S = 0.5

#: set (to 1) by a launcher that runs several jobs at once on this machine: even one device is
#: then a pool, so that two jobs never load models onto the same GPU at the same time
SHARED_DEVICES_ENV = "OMNISTORY_DEVICES_SHARED"


def stage_devices(
    setting: Any,
    lock_dir: str | Path | None,
    store_root: str | Path,
    components: Iterable[Component] = (),
) -> ReplicaRunner | None:
    """What a job does with ``engine.devices``: a :class:`ReplicaRunner` over a device pool when
    there are two devices or more (or one that jobs running at once share), after hiding every GPU
    from this process (its GPU work runs on replicas); with one device, that device for this
    process; with none, None (everything in this process, as on a CPU machine).  A component
    that needs more GPUs at once than there are is refused before anything runs."""
    devices = resolve_devices(setting)
    for component in components:
        need = gpus_needed(component)
        if devices and need > len(devices):
            raise DeviceError(
                f"{component.kind}={component.name} needs {need} GPUs at once but engine.devices"
                f" has {len(devices)} ({','.join(devices)})"
            )
    shared = os.environ.get(SHARED_DEVICES_ENV) == "1"
    warm = warm_pool()
    if len(devices) >= 2 or (devices and (shared or warm is not None)):
        pool = DevicePool(devices, lock_dir or default_lock_dir())
        # a GPU component misdeclared as CPU-only must not grab a replica's device unseen; a
        # single job on one device (its sweep's warm pool serving it) keeps it, as it would
        # without the pool
        os.environ["CUDA_VISIBLE_DEVICES"] = devices[0] if len(devices) == 1 and not shared else ""
        return ReplicaRunner(pool, store_root, warm=warm)
    if devices:
        os.environ["CUDA_VISIBLE_DEVICES"] = devices[0]
    return None


def warm_pool() -> Path | None:
    """The warm pool of the sweep this job belongs to (:mod:`.pool`), or None."""
    from omnistory_core.engine.pool import POOL_ENV, serves_here

    value = os.environ.get(POOL_ENV)
    if not value or not serves_here(Path(value)):
        return None
    return Path(value)


def replica_of(
    component: Component, store_root: str | Path, lease: DeviceLease, warm: Path | None = None
) -> Any:
    """A worker of ``component`` pinned to the lease's devices: in the component's own
    environment when it is isolated (``runner.python``), else in this interpreter's.  With a
    warm pool, that worker is the pool's server of the component on those devices (started
    when none is there yet)."""
    if warm is not None:
        from omnistory_core.engine.pool import PooledComponent

        isolated = isinstance(component, IsolatedComponent)
        return PooledComponent(
            component._component if isolated else component,
            component.python if isolated else sys.executable,
            store_root,
            warm,
            lease.devices,
            env={**(component.env if isolated else {}), **lease.env()},
            timeout_s=component.timeout_s if isolated else None,
        )
    if isinstance(component, IsolatedComponent):
        return IsolatedComponent(
            component._component,
            component.python,
            store_root,
            env={**component.env, **lease.env()},
            timeout_s=component.timeout_s,
        )
    return IsolatedComponent(component, sys.executable, store_root, env=lease.env())


@dataclass
class _Replica:
    lease: DeviceLease
    worker: Any  # IsolatedComponent
    thread: threading.Thread | None = None


class ReplicaRunner:
    """The :class:`~omnistory_core.engine.stage.StageDevices` of a job with a device pool."""

    def __init__(
        self,
        pool: DevicePool,
        store_root: str | Path,
        poll_s: float = 0.1,
        warm: Path | None = None,
    ):
        self.pool = pool
        self.store_root = str(store_root)
        self.poll_s = poll_s
        #: the sweep's warm pool: replicas are its servers, and devices where the component is
        #: loaded already are leased first
        self.warm = warm
        #: per stage (by id): seconds its replicas spent in calls and how many they made
        self._timing: dict[int, list[float]] = {}
        self._timing_lock = threading.Lock()

    def _prefer(self, component: Component) -> list[str]:
        if self.warm is None:
            return []
        from omnistory_core.engine.pool import warm_devices

        return warm_devices(self.warm, component)

    def _replica(self, component: Component, lease: DeviceLease) -> _Replica:
        return _Replica(lease, replica_of(component, self.store_root, lease, self.warm))

    def wants(self, component: Component) -> bool:
        return gpus_needed(component) > 0

    # -- before a stage ------------------------------------------------------------------------
    def preload(
        self, component: Component, on_load: Callable[[], None] | None = None
    ) -> Callable[[], None]:
        """Ask the sweep's scheduler to load ``component`` on a device that no stage needs now
        (a *pre-load*, :func:`~omnistory_core.engine.placement.place` rule 4), in a thread:
        its stage, waiting for plans, then finds the model loaded instead of loading it after
        them.  Computes no call: the store, claims and keys are untouched, and a pre-load that
        fails or dies leaves the load to the stage.  Returns ``stop``: no pre-load starts after
        it (one under way finishes); ``stop(wait=True)`` also waits for it.  ``on_load``: told
        when the pre-load loaded the model (a job's stats count it)."""
        if self.warm is None or gpus_needed(component) != 1:
            return _no_preload
        from omnistory_core.engine.pool import component_spec

        hello = {
            "component": component.key(),
            "spec": component_spec(component),
            "kind": component.kind,
            "need": 1,
            "keys": [],
            "pid": os.getpid(),
            "preload": True,
        }
        ticket = open_ticket(self.warm, hello)
        if ticket is None:
            return _no_preload
        stopped = threading.Event()

        def work() -> None:
            try:
                while not stopped.is_set():
                    granted = ticket.grant()
                    if granted is None:
                        continue
                    if stopped.is_set():
                        ticket.free(granted)  # the stage asks for itself now
                        return
                    lease = self.pool.try_acquire(len(granted), granted, only=True)
                    if lease is None:
                        ticket.send({"op": "busy", "devices": granted})
                        return
                    replica = self._replica(component, lease)
                    try:
                        if replica.worker.load() is not False and on_load is not None:
                            on_load()
                    finally:
                        _close(replica)
                        ticket.free(granted)
                    return
            except SchedulerGone:
                return
            except Exception as exc:  # noqa: BLE001 - the stage loads it, and reports why not
                log.info("%s: pre-load failed: %s: %s", component.key(), type(exc).__name__, exc)
            finally:
                ticket.close()

        thread = threading.Thread(target=work, name=f"preload-{component.key()}", daemon=True)
        thread.start()

        def stop(wait: bool = False) -> None:
            stopped.set()
            if wait:
                thread.join()

        return stop

    # -- one stage ----------------------------------------------------------------------------
    def run(self, stage: StageRun) -> None:
        need = gpus_needed(stage.component)
        self.pool.check(need)  # a model wider than the pool: one clear error, nothing claimed
        replicas: list[_Replica] = []
        errors: list[BaseException] = []
        ticket = self._ticket(stage, need)
        try:
            if ticket is None:
                self._fan_out(stage, need, replicas, errors)
            else:
                try:
                    self._scheduled(stage, need, ticket, replicas, errors)
                except SchedulerGone:
                    log.warning(
                        "%s: the sweep's scheduler is gone; leasing devices without it",
                        stage.component.key(),
                    )
                    self._fan_out(stage, need, replicas, errors)
            for replica in replicas:
                assert replica.thread is not None
                replica.thread.join()
            if errors:
                raise errors[0]
            self._leftovers(stage, need)
        finally:
            for replica in replicas:
                if replica.thread is not None and replica.thread.is_alive():
                    replica.thread.join()
                _close(replica)
            if ticket is not None:
                ticket.close()  # after the replicas: their devices were told free first
            self._timing.pop(id(stage), None)

    def _fan_out(
        self, stage: StageRun, need: int, replicas: list[_Replica], errors: list[BaseException]
    ) -> None:
        """Start replicas while devices are free and unclaimed calls would keep them busy."""
        size = stage.batch_size
        while not errors:
            left = stage.unclaimed()
            if left == 0:
                return
            busy = sum(1 for r in replicas if r.thread is not None and r.thread.is_alive())
            if busy < math.ceil(left / size):
                lease: DeviceLease | None = None
                if not busy:  # the stage's first replica: wait for a device, a warm one first
                    lease = self.pool.acquire(
                        need,
                        give_up=lambda: stage.unclaimed() == 0,
                        prefer=lambda: self._prefer(stage.component),
                        patience_s=self._load_s(stage),
                    )
                else:  # one more: a free warm device, or a cold one when its load pays off
                    warm = self._prefer(stage.component)
                    cold_ok = self._worth_a_load(stage, busy, left)
                    if cold_ok or warm:
                        lease = self.pool.try_acquire(need, warm)
                    if lease is not None and not cold_ok and not set(lease.devices) <= set(warm):
                        lease.release()  # a cold device: its load would cost more than it saves
                        lease = None
                if lease is not None:
                    # calls other processes made while this one waited need no replica: read
                    # the store once per replica about to start, not on every poll
                    stage.skip_done()
                    if stage.unclaimed() <= busy * size:
                        lease.release()
                        continue
                    self._start(stage, lease, replicas, errors)
                    continue
            time.sleep(self.poll_s)

    # -- with the sweep's scheduler ------------------------------------------------------------
    def _ticket(self, stage: StageRun, need: int) -> Ticket | None:
        """The stage's connection to the sweep's scheduler (None: there is none; the stage
        leases devices on its own)."""
        if self.warm is None or stage.unclaimed() == 0:
            return None
        from omnistory_core.engine.pool import component_spec

        hello = {
            "component": stage.component.key(),
            "spec": component_spec(stage.component),
            "kind": stage.component.kind,
            "need": need,
            "batch": stage.batch_size,
            "keys": _short(stage.unclaimed_keys()),
            "pid": os.getpid(),
        }
        return open_ticket(self.warm, hello)

    def _scheduled(
        self,
        stage: StageRun,
        need: int,
        ticket: Ticket,
        replicas: list[_Replica],
        errors: list[BaseException],
    ) -> None:
        """Start a replica on each device the scheduler grants, while unclaimed calls remain;
        tell it the calls still to hand out as they change.  Calls other processes make
        meanwhile (jobs sharing them) are found in the store while the stage waits."""
        size = stage.batch_size
        told = _short(stage.unclaimed_keys())
        looked = time.monotonic()
        while not errors:
            keys = _short(stage.unclaimed_keys())
            if not keys:
                ticket.decline()
                return
            if keys != told:
                ticket.send({"op": "keys", "keys": keys})
                told = keys
            granted = ticket.grant()
            if granted is None:
                busy = any(r.thread is not None and r.thread.is_alive() for r in replicas)
                if not busy and time.monotonic() - looked > LOOK_S:
                    stage.skip_done()
                    looked = time.monotonic()
                continue
            lease = self.pool.try_acquire(len(granted), granted, only=True)
            if lease is None:
                ticket.send({"op": "busy", "devices": granted})
                continue
            stage.skip_done()
            busy = sum(1 for r in replicas if r.thread is not None and r.thread.is_alive())
            if stage.unclaimed() <= busy * size:
                lease.release()
                ticket.free(granted)
                continue
            self._start(stage, lease, replicas, errors, ticket)

    def _start(
        self,
        stage: StageRun,
        lease: DeviceLease,
        replicas: list[_Replica],
        errors: list[BaseException],
        ticket: Ticket | None = None,
    ) -> None:
        replica = self._replica(stage.component, lease)
        replica.thread = threading.Thread(
            target=self._work,
            args=(stage, replica, errors, ticket),
            name=f"replica-{stage.component.key()}-{','.join(lease.devices)}",
            daemon=True,
        )
        replicas.append(replica)
        log.info(
            "%s: replica %d on device(s) %s",
            stage.component.key(),
            len(replicas),
            ",".join(lease.devices),
        )
        replica.thread.start()

    def _load_s(self, stage: StageRun) -> float:
        """With the warm pool, how long a load of the stage's component took in this sweep (0:
        none measured yet, or no pool): how long its first replica waits for a device where
        the component is loaded before it loads it on another."""
        if self.warm is None:
            return 0.0
        from omnistory_core.engine.pool import load_seconds

        return load_seconds(self.warm, stage.component.key()) or 0.0

    def _worth_a_load(self, stage: StageRun, busy: int, left: int) -> bool:
        """With the warm pool, whether one more replica on a device where the component is not
        loaded pays for its load: the calls left take the running replicas longer than the load
        and a call.  Unknown call or load times (nothing measured yet) wait for the measure;
        without the pool every free device is worth it, as before."""
        if self.warm is None:
            return True
        from omnistory_core.engine.pool import load_seconds

        made = self._timing.get(id(stage))
        load_s = load_seconds(self.warm, stage.component.key())
        if not made or made[1] == 0 or load_s is None:
            return False
        call_s = made[0] / made[1]
        return left * call_s > busy * (load_s + call_s)

    def _note(self, stage: StageRun, seconds: float, calls: int) -> None:
        with self._timing_lock:
            made = self._timing.setdefault(id(stage), [0.0, 0])
            made[0] += seconds
            made[1] += calls

    def _work(
        self,
        stage: StageRun,
        replica: _Replica,
        errors: list[BaseException],
        ticket: Ticket | None = None,
    ) -> None:
        """One replica: load once, then claimed chunks until none are left; devices back (and,
        with the scheduler, each chunk's calls and seconds told, and the devices told free)."""

        def note(stage: StageRun, seconds: float, calls: int) -> None:
            self._note(stage, seconds, calls)
            if ticket is not None:  # the scheduler learns the call time from the first chunk
                ticket.made(calls, seconds)

        try:
            loaded = _Loader(stage, replica.worker, note)
            while not errors and (chunk := stage.claim()):
                stage.compute(loaded, chunk)
        except BaseException as exc:  # noqa: BLE001 - re-raised by the stage's thread
            errors.append(exc)
        finally:
            _close(replica)
            if ticket is not None:
                ticket.free(replica.lease.devices)

    def _leftovers(self, stage: StageRun, need: int) -> None:
        """Keys other processes held: wait for them; compute those they left without a record
        on a replica started for them (rare: their owner died or failed to write)."""
        replica: _Replica | None = None
        loaded: _Loader | None = None
        try:
            for entry in stage.wait_theirs():
                if replica is None:
                    lease = self.pool.acquire(need, prefer=lambda: self._prefer(stage.component))
                    assert lease is not None  # give_up never says so
                    replica = self._replica(stage.component, lease)
                    loaded = _Loader(stage, replica.worker)
                assert loaded is not None
                stage.compute(loaded, [entry])
        finally:
            if replica is not None:
                _close(replica)


class _Loader:
    """``loaded()`` for :meth:`StageRun.compute`: starts the worker (the model load) once and
    returns it wrapped so that a chunk whose worker died runs once more."""

    def __init__(
        self,
        stage: StageRun,
        worker: Any,
        note: Callable[[StageRun, float, int], None] | None = None,
    ):
        self.stage = stage
        self.worker = worker
        self.loaded = False
        self.note = note

    def __call__(self) -> Any:
        if not self.loaded:
            # a warm pool server says False: the model was loaded already, by an earlier stage
            fresh = self.worker.load()
            self.loaded = True
            if fresh is not False:
                self.stage.count_load()
        return self

    def run_batch(self, items: list[dict[str, Any]]) -> list[Any]:
        t0 = time.perf_counter()
        outputs = self.worker.run_batch(items)
        if self.note is not None and not any(isinstance(o, WorkerDied) for o in outputs):
            self.note(self.stage, time.perf_counter() - t0, len(items))
        if outputs and all(isinstance(o, WorkerDied) for o in outputs):
            # a killed worker is not a property of the items: its restart gets them once more
            log.warning(
                "%s: the replica on device(s) %s died (%s); running its %d call(s) again",
                self.stage.component.key(),
                self.worker.env.get("CUDA_VISIBLE_DEVICES"),
                outputs[0],
                len(items),
            )
            self.stage.count_load()
            outputs = self.worker.run_batch(items)
        return outputs


def _no_preload(wait: bool = False) -> None:
    """:meth:`ReplicaRunner.preload` where there is nothing to pre-load."""


def _short(keys: list[str]) -> list[str]:
    """Call keys as the scheduler counts them (stages sharing a call name it alike)."""
    return [k[:16] for k in keys]


def _close(replica: _Replica) -> None:
    try:
        replica.worker.unload()
    finally:
        replica.lease.release()
