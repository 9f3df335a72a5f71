"""One schedule for a sweep's devices: ``engine.scheduler`` (on with the sweep's warm pool).

Every GPU stage of every job of a ``-m`` sweep, and of its evaluation, runs on replicas
(:mod:`.replicas`).  Without a scheduler each stage leases devices on its own: the first free one
goes to whichever stage polls first, so jobs sharing a component each start their own replica of
it, and a stage cannot see that another one's work is waiting.  With it, one process of the sweep
(started with its warm pool, :func:`start_scheduler`) decides which stage's replica runs on which
device, seeing every stage that asks, the calls each has not handed out, where each component is
loaded (the pool's servers) and the call and load times measured so far
(:func:`omnistory_core.engine.placement.place` says how).

A job whose experts wait for their first plans asks for a *pre-load* of each expert's component
(``preload`` in its ask, no keys): granted a device no stage with calls takes, it loads the
component's pool server there and gives the device back, so that its stage finds it warm
(:func:`~omnistory_core.engine.placement.place`, rule 4).

A stage asks over a socket (:class:`Ticket`): it sends its component and the short keys of the
calls it has not handed out, again whenever they change, and gets ``grant`` messages naming
device(s); it takes each device's lock (:class:`~omnistory_core.engine.devices.DevicePool`, as
before: the lock, not the scheduler, keeps a device to one replica), runs a replica there until
its stage has no call left for it (telling the calls it makes and their seconds, chunk by chunk:
the call time the scheduler places by), gives the lock back and says ``free``.  A device whose
lock another process holds (another sweep, a stage without the scheduler) is reported ``busy``
and left alone for a moment.

What the scheduler does not change: the calls are claimed through the store's key locks and
written by the stage's process, so the store stays the only shared state.  ``kill -9``:

* of a stage's process: its connection closes and its devices are free again (their locks go
  with the process); its calls are claimed again by whoever runs them next;
* of the scheduler: each stage's connection closes; a stage goes on leasing devices on its own
  (the locks still keep each device to one replica) and so does every later stage, so the sweep
  finishes with nothing lost and nothing computed twice.

It also keeps spare processes ready to become new pool servers (:mod:`.spares`), so that a
device given a model it has not loaded waits for the load, not for a Python process to start.

``<pool>/scheduler.json`` (pid, socket address) and ``scheduler.alive`` (a lock it holds while it
lives) register it; ``scheduler.log`` has one line per grant.  It exits with its sweep's process.
``<pool>/outlook.json`` (``{component: calls still expected}``, written by the sweep) tells it
the work that has not asked yet; between two writes it takes off the calls stages report made
since, so that a model whose last calls were just made keeps no device idle for them.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import logging
import os
import queue
import selectors
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

from omnistory_core.engine.placement import Ask, Measures, place

log = logging.getLogger("omnistory")

__all__ = [
    "OUTLOOK",
    "SchedulerGone",
    "Ticket",
    "open_ticket",
    "scheduler_running",
    "start_scheduler",
    "write_outlook",
]

NAME = "scheduler"
OUTLOOK = "outlook.json"
#: how long a device another process holds is left alone before it is offered again
BUSY_S = 0.5
#: how long a stage waits for a grant before it looks at the store again
POLL_S = 0.25


class SchedulerGone(RuntimeError):
    """The scheduler's connection closed: the stage leases devices on its own from now on."""


def _address(pool: Path) -> str:
    import hashlib

    where = hashlib.sha256(str(pool.resolve()).encode()).hexdigest()[:16]
    return f"\0omnistory-scheduler-{where}"


def _alive(pool: Path) -> bool:
    try:
        handle = open(pool / f"{NAME}.alive", "rb")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        handle.close()
    return False


def scheduler_running(pool: Path) -> bool:
    """Whether the sweep of ``pool`` has a live scheduler."""
    return (pool / f"{NAME}.json").exists() and _alive(pool)


def start_scheduler(pool: Path, devices: list[str]) -> int:
    """Start the sweep's scheduler for ``devices``; its pid.  Not waited for: a stage that asks
    before it listens (or when it failed to start) leases devices on its own."""
    (pool / f"{NAME}.json").unlink(missing_ok=True)
    args = [
        sys.executable,
        "-m",
        "omnistory_core.engine.schedule",
        "--pool",
        str(pool),
        "--devices",
        ",".join(devices),
        "--owner",
        str(os.getpid()),
    ]
    with open(pool / f"{NAME}.log", "ab") as logfile:
        proc = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            args, stdin=subprocess.DEVNULL, stdout=logfile, stderr=logfile
        )
    return proc.pid


def outlook_now(
    expected: dict[str, int], made: dict[str, list[tuple[float, int]]], stamp: float
) -> dict[str, int]:
    """``expected`` (the outlook written at ``stamp``) less, per component, the calls made after
    ``stamp`` (``made``: (time, calls) per chunk)."""
    out = dict(expected)
    for component, chunks in made.items():
        if component in out:
            out[component] = max(0, out[component] - sum(n for t, n in chunks if t > stamp))
    return out


def write_outlook(pool: Path, expected: dict[str, int]) -> None:
    """Tell the scheduler the calls each component is still expected to make (see the module
    docstring)."""
    from omnistory_core.files import atomic_write_bytes

    atomic_write_bytes(pool / OUTLOOK, (json.dumps(expected, sort_keys=True) + "\n").encode())


# -- a stage's side ----------------------------------------------------------------------------
class Ticket:
    """One stage's connection to the scheduler: it says what it still has to hand out and takes
    the devices it is granted (:meth:`grant`)."""

    def __init__(self, conn: socket.socket):
        self._conn = conn
        self._send_lock = threading.Lock()
        self._grants: queue.Queue[list[str] | None] = queue.Queue()
        self._gone = False
        self.declining = False
        threading.Thread(target=self._read, daemon=True, name="scheduler-ticket").start()

    def _read(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            for line in self._conn.makefile("r", encoding="utf-8"):
                message = json.loads(line)
                if message.get("op") == "grant":
                    devices = [str(d) for d in message["devices"]]
                    if self.declining:  # granted as the stage ran out of calls: back at once
                        self.free(devices)
                    else:
                        self._grants.put(devices)
        self._grants.put(None)

    def decline(self) -> None:
        """The stage has handed out its last call: no more replicas.  A grant still on its way
        is given back as it comes (the stage may wait a while yet for its replicas or for calls
        other processes hold, and must not hold a device meanwhile)."""
        with contextlib.suppress(SchedulerGone):
            self.send({"op": "keys", "keys": []})
        self.declining = True
        while True:
            try:
                devices = self._grants.get_nowait()
            except queue.Empty:
                return
            if devices is None:
                self._grants.put(None)
                return
            self.free(devices)

    def send(self, message: dict[str, Any]) -> None:
        if self._gone:
            raise SchedulerGone("the scheduler is gone")
        try:
            with self._send_lock:
                self._conn.sendall((json.dumps(message) + "\n").encode("utf-8"))
        except OSError as exc:
            self._gone = True
            raise SchedulerGone(f"the scheduler is gone ({exc})") from None

    def grant(self, timeout_s: float = POLL_S) -> list[str] | None:
        """The next devices granted (None: none within ``timeout_s``)."""
        if self._gone:
            raise SchedulerGone("the scheduler is gone")
        try:
            devices = self._grants.get(timeout=timeout_s)
        except queue.Empty:
            return None
        if devices is None:
            self._gone = True
            raise SchedulerGone("the scheduler's connection closed")
        return devices

    def free(self, devices: list[str]) -> None:
        """Devices given back (after their lock)."""
        with contextlib.suppress(SchedulerGone):
            self.send({"op": "free", "devices": devices})

    def made(self, calls: int, seconds: float) -> None:
        """A chunk of ``calls`` computed in ``seconds`` (the scheduler's call time)."""
        with contextlib.suppress(SchedulerGone):
            self.send({"op": "made", "calls": calls, "seconds": seconds})

    def close(self) -> None:
        self._gone = True
        with contextlib.suppress(OSError):
            self._conn.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self._conn.close()


def open_ticket(pool: Path, hello: dict[str, Any]) -> Ticket | None:
    """A stage's connection to the sweep's scheduler, ``hello`` sent (None: no scheduler is
    running for ``pool``)."""
    if not scheduler_running(pool):
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(_address(pool))
    except OSError:
        conn.close()
        return None
    ticket = Ticket(conn)
    try:
        ticket.send({"op": "ask", **hello})
    except SchedulerGone:
        return None
    return ticket


# -- the scheduler -----------------------------------------------------------------------------
class _Client:
    def __init__(self, conn: socket.socket, ident: int):
        self.ident = ident
        self.conn = conn
        self.buffer = b""
        self.ask: Ask | None = None
        self.held: list[list[str]] = []


class Scheduler:
    """The scheduler's state and its one thread's loop (:meth:`serve`)."""

    def __init__(self, pool: Path, devices: list[str], out: IO[str] | None = None):
        self.pool = pool
        self.devices = devices
        self.holder: dict[str, int] = {}  # device -> client id
        self.busy_until: dict[str, float] = {}
        self.clients: dict[int, _Client] = {}
        self.call_s: dict[str, list[float]] = {}  # spec -> [seconds, calls]
        self.components: dict[str, str] = {}  # spec -> component (kind/name)
        self.out = out or sys.stderr
        #: spare processes kept ready for new pool servers (one per device, at most 4)
        self.spares = min(len(devices), 4)
        self._starting: list[subprocess.Popen[bytes]] = []
        self._restocked = 0.0
        self._next = 0
        self._outlook: tuple[float, dict[str, int]] = (0.0, {})
        #: component -> (time.time(), calls) of each chunk made: what left the outlook since
        self._made: dict[str, list[tuple[float, int]]] = {}

    # -- what it knows ------------------------------------------------------------------------
    def _warm(self) -> dict[str, frozenset[str]]:
        from omnistory_core.engine.pool import _servers

        warm: dict[str, set[str]] = {}
        for entry in _servers(self.pool):
            warm.setdefault(entry["spec"], set()).update(entry["devices"])
            self.components[entry["spec"]] = entry["component"]
        return {spec: frozenset(on) for spec, on in warm.items()}

    def _expected(self) -> dict[str, int]:
        """The outlook, less the calls made since it was written: the sweep writes it every
        half second or so, after planning every job, and a component whose last calls were
        just made must not keep a device for them meanwhile."""
        path = self.pool / OUTLOOK
        with contextlib.suppress(OSError, ValueError):
            stamp = path.stat().st_mtime
            if stamp != self._outlook[0]:
                expected = json.loads(path.read_text())
                self._outlook = (stamp, {str(k): int(v) for k, v in expected.items()})
                for made in self._made.values():
                    made[:] = [m for m in made if m[0] > stamp]
        stamp, expected = self._outlook
        return outlook_now(expected, self._made, stamp)

    def _measures(self, asks: list[Ask]) -> Measures:
        from omnistory_core.engine.pool import load_seconds

        loads = {}
        for component in {a.component for a in asks} | set(self.components.values()):
            seconds = load_seconds(self.pool, component)
            if seconds is not None:
                loads[component] = seconds
        calls = {spec: s / n for spec, (s, n) in self.call_s.items() if n}
        return Measures(calls, loads, self._expected(), dict(self.components))

    # -- deciding -----------------------------------------------------------------------------
    def assign(self) -> None:
        now = time.monotonic()
        free = [
            d for d in self.devices if d not in self.holder and self.busy_until.get(d, 0.0) <= now
        ]
        asks = [c.ask for c in self.clients.values() if c.ask is not None]
        if not free or not any(a.wants_more() for a in asks):
            return
        holders = {
            d: ask for d, c in self.holder.items() if (ask := self.clients[c].ask) is not None
        }
        for grant in place(free, asks, self._warm(), holders, self._measures(asks), now):
            client = self.clients[grant.ask]
            devices = list(grant.devices)
            for device in devices:
                self.holder[device] = grant.ask
            client.held.append(devices)
            assert client.ask is not None
            what = "pre-load" if client.ask.preload else "stage"
            self._note(f"grant {','.join(devices)} to {client.ask.component} ({what} {grant.ask})")
            self._send(client, {"op": "grant", "devices": devices})

    def _note(self, text: str) -> None:
        self.out.write(f"{time.time():.3f} {text}\n")
        self.out.flush()

    def _send(self, client: _Client, message: dict[str, Any]) -> None:
        with contextlib.suppress(OSError):
            client.conn.sendall((json.dumps(message) + "\n").encode("utf-8"))

    def _release(self, client: _Client, devices: list[str]) -> None:
        for device in devices:
            if self.holder.get(device) == client.ident:
                del self.holder[device]
        if devices in client.held:
            client.held.remove(devices)
        if client.ask is not None and client.ask.preload:
            client.ask = None  # one load, done (or given back): it asks for nothing more
        elif client.ask is not None:
            client.ask.replicas = len(client.held)

    def handle(self, ident: int, message: dict[str, Any]) -> None:
        client = self.clients[ident]
        op = message.get("op")
        if op == "ask":
            client.ask = Ask(
                id=ident,
                component=str(message["component"]),
                spec=str(message["spec"]),
                kind=str(message.get("kind", "")),
                need=int(message.get("need", 1)),
                batch=int(message.get("batch", 1)),
                keys=frozenset(message.get("keys") or ()),
                since=time.monotonic(),
                preload=bool(message.get("preload", False)),
            )
        elif op == "keys" and client.ask is not None:
            client.ask.keys = frozenset(message.get("keys") or ())
        elif op == "made" and client.ask is not None and int(message.get("calls", 0)) > 0:
            made = self.call_s.setdefault(client.ask.spec, [0.0, 0])
            made[0] += float(message.get("seconds", 0.0))
            made[1] += int(message["calls"])
            chunks = self._made.setdefault(client.ask.component, [])
            chunks.append((time.time(), int(message["calls"])))
        elif op in ("free", "busy"):
            devices = [str(d) for d in message.get("devices") or ()]
            self._release(client, devices)
            if op == "busy":
                for device in devices:
                    self.busy_until[device] = time.monotonic() + BUSY_S
            if client.ask is not None:
                client.ask.since = time.monotonic()

    def drop(self, ident: int) -> None:
        client = self.clients.pop(ident)
        for devices in list(client.held):
            self._release(client, devices)
        with contextlib.suppress(OSError):
            client.conn.close()

    def restock(self, owner: int) -> None:
        """Keep :attr:`spares` spare processes ready (:mod:`.spares`), one more at a time."""
        from omnistory_core.engine.spares import live_spares, start_spare

        now = time.monotonic()
        if self.spares <= 0 or now < self._restocked:
            return
        self._restocked = now + 1.0
        starting = [p for p in self._starting if p.poll() is None]
        ready = len(live_spares(self.pool))
        # a started spare counts until it registers (then it is ready) or ends
        self._starting = [p for p in starting if not (self.pool / f"spare-{p.pid}.json").exists()]
        if ready + len(self._starting) < self.spares:
            self._starting.append(start_spare(self.pool, owner))

    # -- the loop -----------------------------------------------------------------------------
    def serve(self, listener: socket.socket, owner: int) -> None:
        selector = selectors.DefaultSelector()
        listener.setblocking(False)
        selector.register(listener, selectors.EVENT_READ, None)
        while _owner_alive(owner) and (self.pool / "pool.json").exists():
            for key, _ in selector.select(timeout=0.1):
                if key.data is None:
                    conn, _ = listener.accept()
                    conn.setblocking(False)
                    self._next += 1
                    self.clients[self._next] = _Client(conn, self._next)
                    selector.register(conn, selectors.EVENT_READ, self._next)
                    continue
                ident = key.data
                client = self.clients[ident]
                try:
                    data = client.conn.recv(65536)
                except OSError:
                    data = b""
                if not data:
                    selector.unregister(client.conn)
                    self.drop(ident)
                    continue
                client.buffer += data
                while b"\n" in client.buffer:
                    line, client.buffer = client.buffer.split(b"\n", 1)
                    with contextlib.suppress(ValueError, KeyError, TypeError):
                        self.handle(ident, json.loads(line))
            self.assign()
            self.restock(owner)


def _owner_alive(owner: int) -> bool:
    try:
        os.kill(owner, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


#: the ``.alive`` lock of this scheduler: open until the process is gone
_HELD: list[IO[bytes]] = []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="the scheduler of a sweep's devices")
    for flag in ("pool", "devices", "owner"):
        parser.add_argument(f"--{flag}", required=True)
    args = parser.parse_args(argv)
    pool = Path(args.pool)
    alive = open(pool / f"{NAME}.alive", "a+b")  # noqa: SIM115 - held for life
    fcntl.flock(alive, fcntl.LOCK_EX | fcntl.LOCK_NB)
    _HELD.append(alive)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(_address(pool))
    listener.listen(64)
    registration = pool / f"{NAME}.json"
    tmp = registration.with_suffix(".tmp")
    tmp.write_text(json.dumps({"pid": os.getpid()}) + "\n", encoding="utf-8")
    os.replace(tmp, registration)
    scheduler = Scheduler(pool, [d for d in args.devices.split(",") if d], sys.stdout)
    try:
        scheduler.serve(listener, int(args.owner))
    finally:
        registration.unlink(missing_ok=True)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
