"""A stage's first replica waits, up to a load's time, for a device where its component is loaded
(``DevicePool.acquire(patience_s=...)``) rather than loading it once more on another device."""

from __future__ import annotations

import threading
from pathlib import Path

from omnistory_core.engine.devices import DeviceLease, DevicePool


def _acquire_in_thread(pool: DevicePool, patience_s: float) -> tuple[threading.Thread, list]:
    got: list[DeviceLease | None] = []
    thread = threading.Thread(
        target=lambda: got.append(pool.acquire(1, prefer=lambda: ["0"], patience_s=patience_s))
    )
    thread.start()
    return thread, got


def test_a_busy_warm_device_is_waited_for_within_the_patience(tmp_path: Path) -> None:
    pool = DevicePool(["0", "1"], tmp_path / "locks", poll_s=0.01)
    busy = pool.try_acquire(1, ["0"])
    assert busy is not None and busy.devices == ["0"]
    thread, got = _acquire_in_thread(pool, patience_s=60.0)
    thread.join(timeout=0.3)
    assert thread.is_alive(), "took the cold device although the warm one frees up soon"
    # the cold device stayed free all along: another lease gets it now
    cold = pool.try_acquire(1)
    assert cold is not None and cold.devices == ["1"]
    cold.release()
    busy.release()
    thread.join(timeout=10)
    assert got and got[0] is not None and got[0].devices == ["0"]
    got[0].release()


def test_without_patience_or_past_it_any_free_device_serves(tmp_path: Path) -> None:
    pool = DevicePool(["0", "1"], tmp_path / "locks", poll_s=0.01)
    busy = pool.try_acquire(1, ["0"])
    assert busy is not None
    for patience in (0.0, 0.05):  # none, and one that runs out while "0" stays busy
        thread, got = _acquire_in_thread(pool, patience_s=patience)
        thread.join(timeout=10)
        assert got and got[0] is not None and got[0].devices == ["1"], patience
        got[0].release()
    busy.release()
    # a free preferred device is taken at once, patience or not
    lease = pool.acquire(1, prefer=lambda: ["0"], patience_s=60.0)
    assert lease is not None and lease.devices == ["0"]
    lease.release()
