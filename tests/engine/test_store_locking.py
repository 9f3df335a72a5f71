"""The store's per-key locks under contention: several processes on the same keys, flock and
leases, a lease holder killed with SIGKILL, and many waiters racing to reclaim one dead lease."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import random
import signal
import time
from pathlib import Path

import pytest

from omnistory_core.engine.locking import (
    LeaseLock,
    LockingError,
    _Owner,
    filesystem_type,
    is_network_filesystem,
)
from omnistory_core.engine.store import CallRecord, Store

LEASE_S = 2.0
CTX = mp.get_context("fork")


def _compute_keys(root: str, mode: str, keys: list[str], log: str, seed: int) -> None:
    """What run_stage does per key: cached? else lock, re-check, compute, store, release."""
    store = Store(root, locking=mode, lease_s=LEASE_S)
    order = list(keys)
    random.Random(seed).shuffle(order)
    for key in order:
        if store.get(key) is not None:
            continue
        lock = store.lock(key)
        lock.acquire(blocking=True)
        try:
            if store.get(key) is None:
                with open(log, "a") as fh:  # O_APPEND: one line per computation
                    fh.write(f"{key} {os.getpid()}\n")
                time.sleep(0.005)
                store.put(CallRecord(key=key, component="test", status="ok", output={"text": key}))
        finally:
            lock.release()


@pytest.mark.parametrize("mode", ["flock", "lease"])
def test_processes_hammering_the_same_keys_compute_each_key_once(tmp_path: Path, mode: str) -> None:
    keys = [f"{i:02x}" + "k" * 30 for i in range(40)]
    log = tmp_path / "computed.log"
    procs = [
        CTX.Process(target=_compute_keys, args=(str(tmp_path / "store"), mode, keys, str(log), n))
        for n in range(6)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    lines = log.read_text().split()
    computed = lines[0::2]
    assert sorted(computed) == sorted(keys), "every key computed exactly once"
    assert len(set(lines[1::2])) > 1, "the work was shared between processes"
    store = Store(tmp_path / "store", locking=mode)
    assert all(store.get(k) is not None for k in keys)
    if mode == "lease":
        assert not list((tmp_path / "store" / "locks").glob("*/*.lease")), "all leases released"


def _hold(root: str, key: str, ready: str) -> None:
    store = Store(root, locking="lease", lease_s=LEASE_S)
    lock = store.lock(key)
    assert lock.acquire(blocking=False)
    Path(ready).write_text("held")
    time.sleep(600)


def _start_holder(tmp_path: Path, key: str) -> mp.process.BaseProcess:
    ready = tmp_path / "ready"
    proc = CTX.Process(target=_hold, args=(str(tmp_path / "store"), key, str(ready)))
    proc.start()
    deadline = time.time() + 10
    while not ready.exists():
        assert time.time() < deadline, "the holder never took its lock"
        time.sleep(0.02)
    return proc


def test_a_live_holder_keeps_its_lease_and_a_killed_one_is_reclaimed(tmp_path: Path) -> None:
    key = "ab" + "c" * 62
    holder = _start_holder(tmp_path, key)
    store = Store(tmp_path / "store", locking="lease", lease_s=LEASE_S)
    try:
        # alive for twice its lease: the heartbeat keeps it, nobody takes the key
        until = time.time() + 2 * LEASE_S
        while time.time() < until:
            assert not store.lock(key).acquire(blocking=False)
            time.sleep(0.1)
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.join(10)
    killed = time.monotonic()
    lock = store.lock(key)
    assert not lock.acquire(blocking=False), "a freshly killed holder's lease is still running"
    assert lock.acquire(blocking=True)
    waited = time.monotonic() - killed
    # the owner's last beat was at most LEASE_S/4 before the kill; then the lease and a 1 s grace
    assert 0.75 * LEASE_S < waited < LEASE_S + 4, waited
    lease = json.loads((tmp_path / "store" / "locks" / key[:2] / f"{key}.lease").read_text())
    assert lease["pid"] == os.getpid()
    lock.release()
    assert not (tmp_path / "store" / "locks" / key[:2] / f"{key}.lease").exists()
    assert not list((tmp_path / "store" / "locks" / key[:2]).glob("*.reclaim.*"))
    owners = [p.name for p in (tmp_path / "store" / "locks" / "owners").glob("*.json")]
    assert not [o for o in owners if f"-{holder.pid}-" in o], "the dead owner's record is dropped"


def _take_release_and_wait(root: str, ready: str) -> None:
    lock = Store(root, locking="lease", lease_s=LEASE_S).lock("12" + "3" * 62)
    assert lock.acquire(blocking=False)
    lock.release()
    Path(ready).write_text("done")
    time.sleep(600)


def _take_one(root: str) -> None:
    lock = Store(root, locking="lease", lease_s=LEASE_S).lock("45" + "6" * 62)
    assert lock.acquire(blocking=False)
    lock.release()


def test_a_killed_process_leaves_no_liveness_record_behind(tmp_path: Path) -> None:
    """A process killed while holding nothing: the next process to take a lease drops its record
    once it has expired."""
    owners, ready = tmp_path / "store" / "locks" / "owners", tmp_path / "ready"
    proc = CTX.Process(target=_take_release_and_wait, args=(str(tmp_path / "store"), str(ready)))
    proc.start()
    while not ready.exists():
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(10)
    (dead,) = owners.glob(f"*-{proc.pid}-*.json")
    time.sleep(LEASE_S + 1.2)  # its lease and the grace run out
    taker = CTX.Process(target=_take_one, args=(str(tmp_path / "store"),))
    taker.start()
    taker.join(20)
    assert taker.exitcode == 0
    assert not dead.exists()
    # a multiprocessing child skips atexit: the taker's record stays until it expires in turn
    assert [p.name for p in owners.glob("*.json")] == [
        p.name for p in owners.glob(f"*-{taker.pid}-*.json")
    ]


def _race(root: str, key: str, log: str) -> None:
    lock = Store(root, locking="lease", lease_s=LEASE_S).lock(key)
    lock.acquire(blocking=True)
    start = time.time()
    time.sleep(0.3)
    end = time.time()
    with open(log, "a") as fh:
        fh.write(f"{start} {end}\n")
    lock.release()


def test_waiters_racing_to_reclaim_one_dead_lease_take_it_one_at_a_time(tmp_path: Path) -> None:
    key = "cd" + "e" * 62
    holder = _start_holder(tmp_path, key)
    os.kill(holder.pid, signal.SIGKILL)
    holder.join(10)
    log = tmp_path / "held.log"
    waiters = [
        CTX.Process(target=_race, args=(str(tmp_path / "store"), key, str(log))) for _ in range(5)
    ]
    for p in waiters:
        p.start()
    for p in waiters:
        p.join(30)
        assert p.exitcode == 0
    spans = sorted(tuple(map(float, line.split())) for line in log.read_text().splitlines())
    assert len(spans) == 5
    for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
        assert start >= end, f"two processes held the reclaimed lock at once: {spans}"


def test_an_owner_late_for_its_heartbeat_gives_its_leases_up(tmp_path: Path) -> None:
    store = Store(tmp_path / "store", locking="lease", lease_s=LEASE_S)
    lock = store.lock("ef" + "0" * 62)
    assert lock.acquire(blocking=False)
    owner = _Owner.get(store.root / "locks", LEASE_S)
    before = json.loads(owner.path.read_text())
    owner.expires = time.time() - 0.1  # as if the process had stalled past its lease
    owner._refresh()
    assert owner.lost and not owner.valid()
    assert json.loads(owner.path.read_text()) == before, "a lapsed lease is never extended"
    lock.release()  # lapsed: the file is left for a reclaimer, never removed under someone else
    assert lock.path.exists()
    assert _Owner.get(store.root / "locks", LEASE_S) is not owner, "new leases get a new owner"


def test_locking_settings_and_the_store_mark(tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "store"
    monkeypatch.delenv("OMNISTORY_STORE_LOCKING", raising=False)
    assert Store(root).locking == (
        "lease" if is_network_filesystem(filesystem_type(root)) else "flock"
    )
    assert isinstance(Store(root, locking="lease", lease_s=5).lock("aa" * 32), LeaseLock)
    assert (root / "locks" / "LEASE").exists()
    assert Store(root).locking == "lease", "auto follows a store already used with leases"
    with pytest.raises(LockingError, match=r"locks/LEASE.*engine.store_locking=lease"):
        Store(root, locking="flock")
    monkeypatch.setenv("OMNISTORY_STORE_LOCKING", "sometimes")
    with pytest.raises(
        LockingError, match="OMNISTORY_STORE_LOCKING.*'sometimes'.*auto, flock, lease"
    ):
        Store(root)
    monkeypatch.setenv("OMNISTORY_STORE_LOCKING", "lease")
    monkeypatch.setenv("OMNISTORY_STORE_LEASE_S", "abc")
    with pytest.raises(LockingError, match="OMNISTORY_STORE_LEASE_S.*'abc'"):
        Store(root)
    monkeypatch.setenv("OMNISTORY_STORE_LEASE_S", "7")
    assert Store(root).lease_s == 7.0
    assert is_network_filesystem("nfs4") and is_network_filesystem("fuse.sshfs")
    assert not is_network_filesystem("ext4") and not is_network_filesystem("tmpfs")


def test_a_result_computed_past_its_lease_is_not_written(tmp_path: Path) -> None:
    """A process stalled longer than its lease (here: its heartbeat stopped mid-call) may have
    lost the key to another process: its result is dropped, and the key is waited for like one
    held elsewhere; with nobody else, this process reclaims it and computes it again."""
    from PIL import Image

    from omnistory_core.components import ImageExpert
    from omnistory_core.engine.stage import ComponentStats, LazyComponent, StageItem, run_stage

    lease_s = 1.0  # the shortest lease allowed
    store = Store(tmp_path / "store", locking="lease", lease_s=lease_s)
    made: list[float] = []

    class Stalling(ImageExpert):
        name = "stalling"

        def run_one(self, item):
            made.append(time.time())
            if len(made) == 1:  # the first call stalls: no heartbeat for twice the lease
                _Owner.get(store.root / "locks", lease_s)._stop.set()
                time.sleep(2 * lease_s)
            return Image.new("RGB", (4, 4), (len(made), 0, 0))

    stats = ComponentStats()
    results = run_stage(
        LazyComponent(Stalling(), stats), [StageItem(0, {"image_prompt": "a fox"})], store
    )
    record = results[0]
    assert isinstance(record, CallRecord) and record.status == "ok"
    assert len(made) == 2, "the lapsed result was written, or the key never recomputed"
    assert stats.calls == 1
    # the record is the second, live computation's (red channel 2)
    blob = store.blob_path(record.output["blob"], "png")
    assert Image.open(blob).getpixel((0, 0))[0] == 2
