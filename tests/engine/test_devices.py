"""engine.devices: which devices a value names, how many GPUs a component needs, and the device
pool's leases (one flock per device, shared by every process of the machine)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from omnistory_core.builtin.images import NoopImage
from omnistory_core.components import ImageExpert
from omnistory_core.engine.devices import (
    DeviceError,
    DevicePool,
    gpus_needed,
    resolve_devices,
    visible_devices,
)
from omnistory_core.engine.replicas import stage_devices


def test_auto_reads_cuda_visible_devices_as_cuda_does(monkeypatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert resolve_devices("auto") == ["2", "3"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-1a2b,GPU-3c4d")
    assert visible_devices() == ["GPU-1a2b", "GPU-3c4d"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,-1,2")  # CUDA stops at the first invalid one
    assert visible_devices() == ["0"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert resolve_devices("auto") == []


def test_auto_without_cuda_visible_devices_or_nvidia_smi_is_no_device(
    monkeypatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi
    assert resolve_devices("auto") == []


def test_auto_asks_nvidia_smi(monkeypatch, tmp_path: Path) -> None:
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\nprintf '0\\n1\\n'\n")
    fake.chmod(0o755)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert resolve_devices("auto") == ["0", "1"]


@pytest.mark.parametrize(
    ("setting", "expected"),
    [(None, []), ("none", []), ([], []), ([0, 1, 2], ["0", "1", "2"]), ("0, 1", ["0", "1"])],
)
def test_explicit_values(setting, expected) -> None:
    assert resolve_devices(setting) == expected


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        (1, r"engine.devices=\[1\]"),
        ([0, 0], "named twice"),
        (True, "expected auto"),
        ([""], "non-empty name"),
    ],
)
def test_bad_values_say_what_to_write(setting, message) -> None:
    with pytest.raises(DeviceError, match=message):
        resolve_devices(setting)


def test_gpus_needed() -> None:
    class Diffusion(ImageExpert):
        name = "diffusion"

    class Hosted(ImageExpert):
        name = "hosted"
        uses_gpu = False

    class Wide(ImageExpert):
        name = "wide"

        def gpus(self) -> int:
            return 4

    assert gpus_needed(NoopImage()) == 0  # a CPU stand-in (NO_GPU)
    assert gpus_needed(Diffusion()) == 1
    assert gpus_needed(Hosted()) == 0
    assert gpus_needed(Wide()) == 4
    with pytest.raises(DeviceError, match="image=wide needs 4 GPUs at once but engine.devices"):
        stage_devices([0, 1], None, "/nonexistent", [Wide()])


def test_leases_take_free_devices_and_give_them_back(tmp_path: Path) -> None:
    pool = DevicePool(["0", "1", "2"], tmp_path)
    first, second = pool.try_acquire(), pool.try_acquire()
    assert first is not None and second is not None
    assert {first.devices[0], second.devices[0]} <= {"0", "1", "2"}
    assert first.devices != second.devices
    assert pool.try_acquire(2) is None  # one device left
    assert first.env() == {"CUDA_VISIBLE_DEVICES": first.devices[0]}
    first.release()
    wide = pool.acquire(2, give_up=lambda: True)
    assert wide is not None and len(wide.devices) == 2
    assert wide.devices == sorted(wide.devices)  # numbered in engine.devices' order
    assert pool.try_acquire() is None
    assert pool.acquire(1, give_up=lambda: True) is None  # gone work: no wait
    with pytest.raises(DeviceError, match="needs 4 GPUs at once but engine.devices has 3"):
        pool.try_acquire(4)
    wide.release()
    second.release()
    assert pool.try_acquire(3) is not None


def test_a_dead_process_gives_its_devices_back_at_once(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import sys, time
                from omnistory_core.engine.devices import DevicePool
                lease = DevicePool(["0", "1"], {str(tmp_path)!r}).try_acquire(2)
                print(",".join(lease.devices), flush=True)
                time.sleep(600)
                """
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "0,1"
        pool = DevicePool(["0", "1"], tmp_path)
        assert pool.try_acquire() is None
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    lease = pool.try_acquire(2)
    assert lease is not None and lease.devices == ["0", "1"]
