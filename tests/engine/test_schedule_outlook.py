"""The sweep scheduler's view of the work to come (``<pool>/outlook.json``): the sweep writes it
after planning every job, so between two writes the scheduler takes off the calls stages have
reported made since; a component whose last calls were just made stops keeping a free device
at once (``placement``'s rule 3: a device is kept for a loaded model with work to come)."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

from omnistory_core.engine.placement import Ask, Grant, Measures, place
from omnistory_core.engine.schedule import Scheduler, _Client, outlook_now, write_outlook


def test_calls_made_after_the_outlook_leave_it() -> None:
    made = {"image/dev": [(9.0, 1), (11.0, 2)], "judge/text": [(12.0, 1)]}
    expected = {"image/dev": 3, "tts/voxcpm": 2}
    assert outlook_now(expected, made, stamp=10.0) == {"image/dev": 1, "tts/voxcpm": 2}
    assert outlook_now({"image/dev": 1}, made, stamp=10.0) == {"image/dev": 0}
    assert expected == {"image/dev": 3, "tts/voxcpm": 2}  # not changed in place


def _stage(scheduler: Scheduler, ident: int, component: str) -> socket.socket:
    mine, theirs = socket.socketpair()
    scheduler.clients[ident] = _Client(mine, ident)
    hello = {"op": "ask", "component": component, "spec": f"spec-{component}", "kind": "image"}
    scheduler.handle(ident, {**hello, "keys": ["k1"]})
    return theirs


def test_a_stage_s_last_calls_free_the_device_kept_for_them(tmp_path: Path) -> None:
    """image/dev, loaded on device 2, had one call to come when the sweep last wrote the
    outlook; its stage then reports that call made: the scheduler no longer keeps device 2 for
    it, and clip, asking for 39 calls, spreads there (before: only to device 3)."""
    pool = tmp_path / "pool"
    pool.mkdir()
    scheduler = Scheduler(pool, ["0", "1", "2", "3"], out=open(os.devnull, "w"))  # noqa: SIM115
    write_outlook(pool, {"image/dev": 1, "metric/clip": 39})
    stamp = (pool / "outlook.json").stat().st_mtime
    os.utime(pool / "outlook.json", (stamp - 5, stamp - 5))  # written a while ago
    peer = _stage(scheduler, 1, "image/dev")
    try:
        warm = {"spec-image/dev": frozenset({"2"}), "spec-metric/clip": frozenset({"0"})}

        def clip_asks() -> list:
            clip = Ask(2, "metric/clip", "spec-metric/clip", "metric",
                       keys=frozenset(f"c{n}" for n in range(39)), replicas=1)  # fmt: skip
            measures = Measures(
                call_s={"spec-metric/clip": 1.0},
                load_s={"metric/clip": 5.0, "image/dev": 5.0},
                expected=scheduler._expected(),
                components={"spec-image/dev": "image/dev"},
            )
            return place(["2", "3"], [clip], warm, {}, measures, time.monotonic())

        assert scheduler._expected()["image/dev"] == 1
        assert clip_asks() == [Grant(2, ("3",))]  # device 2 kept for image/dev's last call
        scheduler.handle(1, {"op": "made", "calls": 1, "seconds": 1.0})
        assert scheduler._expected() == {"image/dev": 0, "metric/clip": 39}
        assert clip_asks() == [Grant(2, ("2",))]
        # the sweep writes a new outlook: it counts what is left from the store itself
        write_outlook(pool, {"image/dev": 0, "metric/clip": 38})
        assert scheduler._expected() == {"image/dev": 0, "metric/clip": 38}
        assert scheduler._made["image/dev"] == []
    finally:
        peer.close()
