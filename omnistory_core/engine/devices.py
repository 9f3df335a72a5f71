"""The GPUs of this machine and which process uses which: ``engine.devices``.

``engine.devices`` names the devices a run or sweep may use:

* ``auto`` (the default): the GPUs this process can see -- ``CUDA_VISIBLE_DEVICES`` when it is
  set (as SLURM and Ray set it for a job), else what ``nvidia-smi`` lists, else none;
* ``none`` / ``[]``: no GPU (everything runs in the job's own process, as on a CPU machine);
* ``[0,1,2,3]`` or ``"0,1,2,3"``: these device ids (or UUIDs), as ``CUDA_VISIBLE_DEVICES`` takes
  them.  An id is only a name handed to a worker process: nothing here checks that the GPU exists,
  so processes standing in for GPUs (the tests, ``benchmarks/devices_scaling.py``) work too.

With two devices or more (or one device shared by jobs running at once), every stage of a
component that needs a GPU runs on *replicas*: worker processes pinned to their devices through
``CUDA_VISIBLE_DEVICES`` (:mod:`omnistory_core.engine.replicas`).  Which process holds which device
is decided here, by a :class:`DevicePool`: one ``flock`` per device in a directory of this machine
(``engine.device_locks``, default ``<tmp>/omnistory-devices-<uid>[-<SLURM job id>]``), so that
every process of every sweep on the machine shares the devices without a coordinator, and a
process that dies gives its devices back at once (the kernel drops its locks).

How many GPUs a component needs is :func:`gpus_needed`: its ``gpus()`` method if it has one (a
vLLM planner that starts its own tensor-parallel server says ``--tensor-parallel-size``), 0 for a
component declaring ``uses_gpu = False`` or a CPU stand-in or hosted API (:data:`NO_GPU`), else 1.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

__all__ = [
    "NO_GPU",
    "DeviceError",
    "DeviceLease",
    "DevicePool",
    "default_lock_dir",
    "gpus_needed",
    "resolve_devices",
    "visible_devices",
]

#: components that use no GPU (CPU stand-ins and hosted APIs).  A plugin's component says so
#: itself with a class attribute ``uses_gpu = False``.
NO_GPU: frozenset[str] = frozenset(
    {
        "planner/template",
        "planner/copy",
        "planner/oracle",
        "planner/noop",
        "planner/instruction",
        "planner/gpt",
        "planner/claude",
        "image/copy",
        "image/oracle",
        "image/noop",
        "tts/espeak",
        "tts/noop",
        "backbone/noop",
    }
)

#: values of ``engine.devices`` that mean "no GPU"
_NONE = ("", "none", "null", "cpu")


class DeviceError(ValueError):
    """A bad ``engine.devices`` value, or a component that needs more devices than there are."""


def visible_devices() -> list[str]:
    """The GPUs this process may use: ``CUDA_VISIBLE_DEVICES`` (up to its first invalid entry, as
    CUDA reads it) when set, else the indices ``nvidia-smi`` lists, else none.  Never imports
    torch (which would initialise CUDA in a process that hands its devices to workers)."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        out: list[str] = []
        for token in (t.strip() for t in env.split(",")):
            if not token or token.startswith("-"):
                break
            out.append(token)
        return out
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    try:
        listing = subprocess.run(
            [exe, "--query-gpu=index", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in listing.splitlines() if line.strip().isdigit()]


def resolve_devices(setting: Any) -> list[str]:
    """The device ids of an ``engine.devices`` value (see the module docstring)."""
    if setting is None:
        return []
    if isinstance(setting, bool):
        raise DeviceError(f"engine.devices={setting!r}: expected auto, none or a list like [0,1]")
    if isinstance(setting, int):
        # engine.devices=1 reads as "one GPU" to some and "GPU 1" to others: make them say which
        raise DeviceError(
            f"engine.devices={setting}: give a list of device ids, e.g. engine.devices=[{setting}]"
            " (or auto, or none)"
        )
    if isinstance(setting, str):
        text = setting.strip()
        if text.lower() == "auto":
            return visible_devices()
        if text.lower() in _NONE:
            return []
        tokens = [t.strip() for t in text.strip("[]").split(",")]
    else:
        try:
            tokens = [str(t).strip() for t in setting]
        except TypeError:
            raise DeviceError(
                f"engine.devices={setting!r}: expected auto, none or a list like [0,1]"
            ) from None
    if any(not t or "," in t or t.startswith("-") for t in tokens):
        raise DeviceError(f"engine.devices={setting!r}: every device id must be a non-empty name")
    if len(set(tokens)) != len(tokens):
        raise DeviceError(f"engine.devices={setting!r}: a device is named twice")
    return tokens


def default_lock_dir() -> Path:
    """Where the device locks of this machine live: ``OMNISTORY_DEVICE_LOCKS``, else a directory
    of this user in the machine's temp dir (per SLURM job: two jobs on one node may each see
    their own GPUs under the same numbers)."""
    env = os.environ.get("OMNISTORY_DEVICE_LOCKS")
    if env:
        return Path(env)
    name = f"omnistory-devices-{os.getuid()}"
    if os.environ.get("SLURM_JOB_ID"):
        name += f"-{os.environ['SLURM_JOB_ID']}"
    return Path(tempfile.gettempdir()) / name


def gpus_needed(component: Any) -> int:
    """How many GPUs one replica of ``component`` needs (0: it runs in the job's process)."""
    base = getattr(component, "_component", component)  # an isolated component: the real one
    declared = getattr(base, "gpus", None)
    if callable(declared):
        n: Any = declared()
        if n is not None:
            return max(0, int(n))
    if getattr(base, "uses_gpu", None) is False:
        return 0
    if base.key() in NO_GPU:
        return 0
    return 1


@dataclass
class DeviceLease:
    """Devices held by this process until :meth:`release` (or until it dies)."""

    devices: list[str]
    _handles: list[IO[bytes]] = field(default_factory=list, repr=False)

    def env(self) -> dict[str, str]:
        """What a worker pinned to these devices gets in its environment."""
        return {"CUDA_VISIBLE_DEVICES": ",".join(self.devices)}

    def release(self) -> None:
        handles, self._handles = self._handles, []
        for handle in handles:
            with contextlib.suppress(OSError):
                fcntl.flock(handle, fcntl.LOCK_UN)
            handle.close()


class DevicePool:
    """The devices of ``engine.devices``, shared through one ``flock`` per device in ``lock_dir``.

    A lease of one device takes any free one.  A lease of ``n > 1`` devices (a tensor-parallel
    model) is gathered under a pool-wide lock, keeping the devices it gets until it has ``n``, so
    two gatherers never hold half each (no deadlock) and single-device leases, which never wait
    while holding a device, cannot starve it for good."""

    def __init__(self, devices: Sequence[str], lock_dir: str | Path, poll_s: float = 0.1):
        if not devices:
            raise DeviceError("a device pool needs at least one device")
        self.devices = [str(d) for d in devices]
        self.lock_dir = Path(lock_dir)
        self.lock_dir.mkdir(parents=True, exist_ok=True)
        self.poll_s = poll_s

    def __len__(self) -> int:
        return len(self.devices)

    def _path(self, name: str) -> Path:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
        return self.lock_dir / f"device-{safe}.lock"

    def _try_lock(self, path: Path) -> IO[bytes] | None:
        handle = open(path, "a+b")  # noqa: SIM115 - kept open while the lock is held
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            return None
        return handle

    def check(self, n: int) -> None:
        """Refuse a lease of more devices than the pool has (it would wait for ever)."""
        if n > len(self.devices):
            raise DeviceError(
                f"needs {n} GPUs at once but engine.devices has {len(self.devices)}"
                f" ({','.join(self.devices)})"
            )

    def _order(self, prefer: Sequence[str]) -> list[str]:
        """The devices to try, ``prefer``'s first (where a component is warm already)."""
        first = [d for d in self.devices if d in set(prefer)]
        return first + [d for d in self.devices if d not in set(prefer)]

    def try_acquire(
        self, n: int = 1, prefer: Sequence[str] = (), only: bool = False
    ) -> DeviceLease | None:
        """``n`` free devices now, or None (never waits); ``prefer``'s first when free (with
        ``only``, none but those)."""
        self.check(n)
        lease = DeviceLease([])
        order = self._order(prefer)
        for device in order[: len(set(prefer) & set(self.devices))] if only else order:
            handle = self._try_lock(self._path(device))
            if handle is not None:
                lease.devices.append(device)
                lease._handles.append(handle)
                if len(lease.devices) == n:
                    return lease
        lease.release()
        return None

    def acquire(
        self,
        n: int = 1,
        give_up: Callable[[], bool] = lambda: False,
        prefer: Callable[[], Sequence[str]] = lambda: (),
        patience_s: float = 0.0,
    ) -> DeviceLease | None:
        """``n`` devices, waiting for them; None once ``give_up()`` says the work is gone.
        ``prefer()``: devices to take first when free (asked again on every try).
        ``patience_s`` (one device): for that long take only a ``prefer()`` device while there
        is one -- where the component is loaded already, waiting up to a load's time for it
        costs no more than loading it again on another device."""
        self.check(n)
        if n == 1:
            deadline = time.monotonic() + patience_s
            while True:
                preferred = list(prefer())
                if preferred and time.monotonic() < deadline:
                    lease = self.try_acquire(1, preferred, only=True)
                else:
                    lease = self.try_acquire(1, preferred)
                if lease is not None:
                    return lease
                if give_up():
                    return None
                time.sleep(self.poll_s)
        gather: IO[bytes] | None = None
        lease = DeviceLease([])
        try:
            while gather is None:
                gather = self._try_lock(self.lock_dir / "gather.lock")
                if gather is None:
                    if give_up():
                        return None
                    time.sleep(self.poll_s)
            while len(lease.devices) < n:
                for device in self.devices:
                    if device in lease.devices:
                        continue
                    handle = self._try_lock(self._path(device))
                    if handle is not None:
                        lease.devices.append(device)
                        lease._handles.append(handle)
                        if len(lease.devices) == n:
                            break
                if len(lease.devices) < n:
                    if give_up():
                        lease.release()
                        return None
                    time.sleep(self.poll_s)
            # the order CUDA numbers them in the worker: as engine.devices lists them
            order = {d: i for i, d in enumerate(self.devices)}
            pairs = sorted(
                zip(lease.devices, lease._handles, strict=True), key=lambda p: order[p[0]]
            )
            lease.devices = [d for d, _ in pairs]
            lease._handles = [h for _, h in pairs]
            return lease
        finally:
            if gather is not None:
                with contextlib.suppress(OSError):
                    fcntl.flock(gather, fcntl.LOCK_UN)
                gather.close()
