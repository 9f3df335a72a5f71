"""The sweep's warm pool: a model loaded at most once per device for the whole sweep.

Without it every GPU stage of every job starts its own replicas (:mod:`.replicas`) and loads its
own models, so a sweep in which eight jobs share an expert loads it eight times or more.  With it
(``engine.warm_pool``, on in a ``-m`` sweep whenever ``engine.devices`` names a device), a
replica is a *pool server*: a worker process (the isolation worker's code,
:class:`~omnistory_core.engine.worker.Serving`) that outlives the job and the stage that started
it, keyed by the component (kind, name, version, load parameters, interpreter, environment) and
the device(s) it runs on.  A job whose stage holds a device's lease and needs a component already
warm there connects to that server and hands it its chunks; only when none is there does it start
one (a load).

What stays as before, on purpose:

* **Claiming.**  The job claims its calls through the store's key locks and writes their records
  itself; a server only computes and encodes (blobs into the content-addressed store).  The store
  stays the only shared state.
* **Compute exclusivity.**  A client holds its device's lease (:class:`DevicePool`) while it is
  connected, so one server computes on a device at a time and every other server on that device is
  idle then: it may be shut down to make room (``engine.device_memory_gb`` against the servers'
  declared footprints, :func:`footprint_gb`) without interrupting anyone.
* **kill -9.**  A killed server drops its connection: the client's chunk runs once more on a
  server it starts in its place (:class:`~omnistory_core.engine.replicas.ReplicaRunner`).  A
  killed *job* drops its connection too: a server computing for it exits at once, so no live
  process finishes calls whose locks died with the job (the restarted job computes them).

The pool lives in a directory of the sweep (``<sweep>/.pool``, the environment variable
:data:`POOL_ENV` points the jobs to it): ``pool.json`` (owner pid, budget, idle grace), per server
``<name>.json`` (pid, socket address, component, devices, footprint) and ``<name>.alive`` (a
``flock`` the server holds while it lives: a registration whose lock is free is stale), and
``loads.jsonl``, one line per model load (component, devices, pid, seconds), which the sweep sums
into ``sweep_stats.json``, and ``released.jsonl``, one line per server shut down because no job
still to finish needs its component (:func:`release_unneeded`).  A server exits when its sweep's
process is gone, after ``engine.pool_idle_s`` without a client, or when asked to: the end of the
sweep, room for another component, or when the sweep's launcher sees that none of the jobs not
yet finished needs it (each job's pooled components by :func:`component_spec`; their servers are
idle then, since a job that needs one is among those jobs).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, cast

from omnistory_core.components import Component
from omnistory_core.engine.isolation import IsolatedComponent, WorkerDied

log = logging.getLogger("omnistory")

__all__ = [
    "POOL_ENV",
    "PooledComponent",
    "component_spec",
    "footprint_gb",
    "load_seconds",
    "loads_by_device",
    "open_pool",
    "pool_settings",
    "release_unneeded",
    "released",
    "serves_here",
    "shutdown_pool",
    "warm_devices",
]

#: the pool directory of the sweep this process belongs to (set by the sweep for its jobs)
POOL_ENV = "OMNISTORY_POOL"
SETTINGS = "pool.json"
LOADS = "loads.jsonl"
RELEASED = "released.jsonl"
#: how long a client waits for a server it started to listen (its model load comes after)
START_TIMEOUT_S = 120.0
#: how long it waits for a spare that became its server (:mod:`.spares`) to listen
SPARE_TIMEOUT_S = 30.0


def footprint_gb(component: Any) -> float:
    """The GPU memory one loaded replica of ``component`` takes, as it declares it: a
    ``footprint_gb()`` method or a ``footprint_gb`` attribute; 0 (always fits) when it says
    nothing."""
    base = getattr(component, "_component", component)
    declared = getattr(base, "footprint_gb", 0.0)
    value: Any = declared() if callable(declared) else declared
    try:
        return max(0.0, float(value or 0.0))
    except (TypeError, ValueError):
        return 0.0


# -- the pool directory ---------------------------------------------------------------------------
def open_pool(directory: str | Path, budget_gb: float | None = None, idle_s: float = 600.0) -> Path:
    """Create the sweep's pool directory (an earlier sweep's servers shut down first) and write
    its settings; the caller exports it to the jobs through :data:`POOL_ENV`."""
    pool = Path(directory)
    if pool.exists():
        shutdown_pool(pool)
    pool.mkdir(parents=True, exist_ok=True)
    (pool / LOADS).unlink(missing_ok=True)
    settings = {
        "owner": os.getpid(),
        "host": socket.gethostname(),
        "budget_gb": budget_gb,
        "idle_s": float(idle_s),
    }
    (pool / SETTINGS).write_text(json.dumps(settings) + "\n", encoding="utf-8")
    return pool


def pool_settings(pool: Path) -> dict[str, Any]:
    return dict(json.loads((pool / SETTINGS).read_text("utf-8")))


def serves_here(pool: Path) -> bool:
    """Whether this process may use the pool: it runs on the sweep's machine (servers are local
    processes behind local sockets; a job a cluster launcher runs elsewhere starts its own
    replicas as without the pool)."""
    try:
        return pool_settings(pool).get("host") == socket.gethostname()
    except (OSError, ValueError):
        return False


def _servers(pool: Path) -> list[dict[str, Any]]:
    """The live servers registered in ``pool`` (stale registrations are removed)."""
    out = []
    for path in sorted(pool.glob("*.json")):
        if path.name == SETTINGS:
            continue
        try:
            entry = json.loads(path.read_text("utf-8"))
        except (OSError, ValueError):
            continue  # being written: its server is not listening yet
        if not isinstance(entry, dict) or "spec" not in entry:
            continue  # the sweep's scheduler or outlook (engine.schedule), not a server
        if _alive(pool, entry["name"]):
            out.append(entry)
        else:
            path.unlink(missing_ok=True)
    return out


def _alive(pool: Path, name: str) -> bool:
    """Whether the server ``name`` still holds its ``.alive`` lock."""
    try:
        handle = open(pool / f"{name}.alive", "rb")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        handle.close()
    return False


def warm_devices(pool: Path, component: Component) -> list[str]:
    """Devices on which ``component`` is loaded now (preferred by the next lease)."""
    spec = _spec_hash(component)
    found = []
    for entry in _servers(pool):
        if entry["spec"] == spec:
            found.extend(entry["devices"])
    return found


def loads_by_device(pool: Path) -> dict[str, dict[str, int]]:
    """Model loads of the sweep, per component and device set (``loads.jsonl``)."""
    out: dict[str, dict[str, int]] = {}
    path = pool / LOADS
    if not path.exists():
        return out
    for line in path.read_text("utf-8").splitlines():
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            per = out.setdefault(str(entry["component"]), {})
            device = ",".join(entry["devices"])
            per[device] = per.get(device, 0) + 1
    return {k: dict(sorted(v.items())) for k, v in sorted(out.items())}


def load_seconds(pool: Path, component: str) -> float | None:
    """How long loading ``component`` took in this sweep (the mean; None: not loaded yet)."""
    path = pool / LOADS
    if not path.exists():
        return None
    times = []
    for line in path.read_text("utf-8").splitlines():
        with contextlib.suppress(ValueError, KeyError, TypeError):
            entry = json.loads(line)
            if entry["component"] == component:
                times.append(float(entry["seconds"]))
    return sum(times) / len(times) if times else None


def shutdown_pool(pool: str | Path, timeout_s: float = 30.0) -> None:
    """Ask every server of the pool to exit (the end of the sweep), then make sure they did."""
    pool = Path(pool)
    if not pool.exists():
        return
    entries = _servers(pool)
    for entry in entries:
        _stop(entry)
    deadline = time.monotonic() + timeout_s
    for entry in entries:
        while _alive(pool, entry["name"]) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _alive(pool, entry["name"]):
            with contextlib.suppress(OSError):
                os.kill(int(entry["pid"]), signal.SIGKILL)


def component_spec(component: Component) -> str:
    """What the pool calls the server a job's replica of ``component`` connects to (without its
    devices): the spec :class:`PooledComponent` computes for it, so that a sweep can tell which
    servers the jobs it has not finished will need."""
    if isinstance(component, IsolatedComponent):
        env = dict(component.env)
        return _spec_hash(cast(Component, _Spec(component._component, component.python, env)))
    return _spec_hash(cast(Component, _Spec(component, sys.executable, {})))


class _Spec:
    """A component as :func:`_spec_hash` reads a replica of it."""

    def __init__(self, component: Component, python: str, env: dict[str, str]):
        self._component = component
        self.python = python
        self.env = env


def release_unneeded(pool: str | Path, needed: set[str]) -> list[dict[str, Any]]:
    """Shut down every server of ``pool`` whose spec (:func:`component_spec`) is not in
    ``needed`` -- what the sweep's jobs still to finish use -- freeing its devices' memory now
    rather than at the idle timeout; each is noted in ``released.jsonl``.  The servers
    released."""
    pool = Path(pool)
    if not (pool / SETTINGS).exists():
        return []
    idle = [e for e in _servers(pool) if e["spec"] not in needed]
    for entry in idle:
        log.info(
            "warm pool: shutting down %s on device(s) %s: no remaining job needs it",
            entry["component"],
            ",".join(entry["devices"]),
        )
        _stop(entry)
    deadline = time.monotonic() + 30.0
    for entry in idle:
        while _alive(pool, entry["name"]) and time.monotonic() < deadline:
            time.sleep(0.05)
        note = {
            "component": entry["component"],
            "devices": entry["devices"],
            "pid": entry["pid"],
            "stopped": not _alive(pool, entry["name"]),
            "time": time.time(),
        }
        _append(pool / RELEASED, note)
    return idle


def released(pool: str | Path) -> list[dict[str, Any]]:
    """The servers the sweep shut down because no remaining job needed them, in order."""
    path = Path(pool) / RELEASED
    if not path.exists():
        return []
    out = []
    for line in path.read_text("utf-8").splitlines():
        with contextlib.suppress(ValueError):
            out.append(dict(json.loads(line)))
    return out


def _append(path: Path, entry: dict[str, Any]) -> None:
    """One JSON line appended in one short write (lines of concurrent processes never mix)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(entry) + "\n").encode("utf-8"))
    finally:
        os.close(fd)


def _stop(entry: dict[str, Any]) -> None:
    """Ask one (idle) server to exit: a ``shutdown`` over its socket, else SIGTERM."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(5.0)
            conn.connect(_address(entry["address"]))
            conn.sendall(b'{"op": "shutdown"}\n')
            conn.recv(4096)
    except OSError:
        with contextlib.suppress(OSError):
            os.kill(int(entry["pid"]), signal.SIGTERM)


def _address(name: str) -> str:
    # Linux's abstract namespace: no path-length limit from deep sweep directories, nothing to
    # clean up after a kill -9
    return "\0" + name


def _spec_hash(component: Component) -> str:
    """What makes two replicas interchangeable: the component's identity, version and load
    parameters, and where it runs (interpreter, extra environment)."""
    base = getattr(component, "_component", component)
    python = getattr(component, "python", sys.executable)
    env = dict(getattr(component, "env", {}) or {})
    env.pop("CUDA_VISIBLE_DEVICES", None)
    text = json.dumps(
        [base.kind, base.name, base.version, base.params, python, env],
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)


# -- the client -----------------------------------------------------------------------------------
class PooledComponent(IsolatedComponent):
    """A replica that is a pool server: connects to the warm one of its component on its devices,
    or starts it.  The caller holds the devices' lease for as long as it is connected.  The
    worker protocol (requests, replies, the version check, a batch) is
    :class:`IsolatedComponent`'s; this is its transport over the server's socket."""

    PEER = "pool server"

    def __init__(
        self,
        component: Component,
        python: str,
        store_root: str | Path,
        pool: Path,
        devices: list[str],
        env: dict[str, str] | None = None,
        timeout_s: float | None = None,
    ):
        super().__init__(component, python, store_root, env=env, timeout_s=timeout_s)
        self.pool_dir = Path(pool)
        self.lease_devices = list(devices)
        self.spec_hash = _spec_hash(cast(Component, self))
        # unique on the machine (socket names are): the pool directory, the spec, the devices
        where = hashlib.sha256(str(self.pool_dir.resolve()).encode()).hexdigest()[:10]
        self.server_name = f"omnistory-{where}-{self.spec_hash}-{_safe('_'.join(devices))}"[:100]
        self._conn: socket.socket | None = None
        self._reader: IO[str] | None = None
        self._server_pid: int | None = None
        #: whether the last :meth:`load` loaded the model (False: a warm server took us)
        self.fresh = False

    @property
    def worker_pid(self) -> int | None:
        return self._server_pid if self._conn is not None else None

    def load(self) -> bool:  # type: ignore[override]
        """Connect (starting the server when none is warm); True when that loaded the model."""
        if self._conn is None:
            self._start()
            return self.fresh
        return False

    def unload(self) -> None:
        """Disconnect; the server stays loaded for the next job (it is the pool's to stop)."""
        conn, self._conn = self._conn, None
        reader, self._reader = self._reader, None
        if reader is not None:
            with contextlib.suppress(OSError):
                reader.close()
        if conn is not None:
            with contextlib.suppress(OSError):
                conn.close()

    # -- connecting -----------------------------------------------------------------------------
    def _registration(self) -> dict[str, Any] | None:
        path = self.pool_dir / f"{self.server_name}.json"
        if not path.exists():
            return None
        if not _alive(self.pool_dir, self.server_name):
            path.unlink(missing_ok=True)
            return None
        try:
            return dict(json.loads(path.read_text("utf-8")))
        except (OSError, ValueError):
            return None

    def _start(self) -> None:
        self.preflight()
        load = self._load_request()
        reply = None
        entry = self._registration()
        if entry is not None and self._connect(entry):
            try:
                reply = self._request(load)
            except WorkerDied:
                # it was dying (a dead server's socket closes before its .alive lock is free):
                # wait for it to be gone, then start one in its place
                deadline = time.monotonic() + 10.0
                while _alive(self.pool_dir, self.server_name) and time.monotonic() < deadline:
                    time.sleep(0.02)
        if reply is None:
            self._make_room()
            entry = self._spawn()
            if not self._connect(entry):
                raise WorkerDied(f"{self._component.key()}: could not connect to its pool server")
            reply = self._request(load)
        self._check_version(reply)
        self.fresh = bool(reply.get("fresh", True))

    def _connect(self, entry: dict[str, Any]) -> bool:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(_address(entry["address"]))
        except OSError:
            conn.close()
            return False
        self._conn = conn
        self._reader = conn.makefile("r", encoding="utf-8")
        self._server_pid = int(entry["pid"])
        return True

    def _make_room(self) -> None:
        """Within the device memory budget: shut down servers of other components on these
        devices (idle: their devices' lease is ours) until this one fits."""
        budget = pool_settings(self.pool_dir).get("budget_gb")
        if budget is None:
            return
        mine = footprint_gb(self)
        others = [e for e in _servers(self.pool_dir) if set(e["devices"]) & set(self.lease_devices)]
        for device in self.lease_devices:
            resident = sum(float(e["footprint_gb"]) for e in others if device in e["devices"])
            for entry in sorted(others, key=lambda e: -float(e["footprint_gb"])):
                if resident + mine <= float(budget):
                    break
                if device in entry["devices"]:
                    log.info(
                        "%s: shutting down %s on device(s) %s to make room",
                        self._component.key(),
                        entry["component"],
                        ",".join(entry["devices"]),
                    )
                    _stop(entry)
                    deadline = time.monotonic() + 30.0
                    while _alive(self.pool_dir, entry["name"]) and time.monotonic() < deadline:
                        time.sleep(0.05)
                    resident -= float(entry["footprint_gb"])
                    others.remove(entry)

    def _spawn(self) -> dict[str, Any]:
        settings = pool_settings(self.pool_dir)
        server = {
            "pool": str(self.pool_dir),
            "name": self.server_name,
            "spec": self.spec_hash,
            "component": self._component.key(),
            "devices": ",".join(self.lease_devices),
            "footprint": str(footprint_gb(self)),
            "owner": str(settings["owner"]),
            "idle": str(settings["idle_s"]),
        }
        path = self.pool_dir / f"{self.server_name}.json"
        path.unlink(missing_ok=True)  # a killed server's (ours to replace: we hold its devices)
        self.starts += 1
        from omnistory_core.engine.spares import claim_spare

        extra = {**self.env, "PYTHONUNBUFFERED": "1"}
        if claim_spare(self.pool_dir, self.python, server, extra):
            entry = self._registered(path, None, SPARE_TIMEOUT_S)
            if entry is not None:
                return entry
            path.unlink(missing_ok=True)  # the spare died becoming it: a process of its own
        env = {**os.environ, **extra}
        env.pop("OMNISTORY_WORKER_PARENT", None)  # it outlives this process on purpose
        args = [self.python, "-m", "omnistory_core.engine.pool"]
        for flag, value in server.items():
            args += [f"--{flag}", value]
        with open(self.pool_dir / f"{self.server_name}.log", "ab") as logfile:
            proc = subprocess.Popen(  # noqa: S603 - our own interpreter and module
                args, stdin=subprocess.DEVNULL, stdout=logfile, stderr=logfile, env=env
            )
        entry = self._registered(path, proc, START_TIMEOUT_S)
        if entry is not None:
            return entry
        tail = (self.pool_dir / f"{self.server_name}.log").read_text("utf-8", "replace")[-600:]
        raise WorkerDied(
            f"{self._component.key()}: its pool server did not start (exit code"
            f" {proc.poll()}); log: {tail}"
        )

    @staticmethod
    def _registered(
        path: Path, proc: subprocess.Popen[bytes] | None, timeout_s: float
    ) -> dict[str, Any] | None:
        """The new server's registration once it listens (None: not within ``timeout_s``, or
        its process ended)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if path.exists():
                with contextlib.suppress(OSError, ValueError):
                    # the stale one was removed before: this is the new server's
                    return dict(json.loads(path.read_text("utf-8")))
            if proc is not None and proc.poll() is not None:
                return None
            time.sleep(0.02)
        return None

    # -- the transport: the server's socket -------------------------------------------------------
    def _running(self) -> bool:
        return self._conn is not None and self._reader is not None

    def _send(self, line: str) -> None:
        assert self._conn is not None
        self._conn.sendall(line.encode("utf-8"))

    def _receive(self) -> str:
        assert self._reader is not None
        try:
            return self._reader.readline()
        except OSError:
            return ""

    def _kill(self) -> Callable[[], None]:
        pid = self._server_pid
        return (lambda: _kill(pid)) if pid else (lambda: None)

    def _died(self, what: str) -> WorkerDied:
        pid = self._server_pid
        self.unload()
        log_path = self.pool_dir / f"{self.server_name}.log"
        tail = ""
        with contextlib.suppress(OSError):
            tail = " | ".join(log_path.read_text("utf-8", "replace").splitlines()[-5:])
        return WorkerDied(f"{self._component.key()} {what} (pid {pid}); log: {tail}")


def _kill(pid: int) -> None:
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)


# -- the server -----------------------------------------------------------------------------------
def _watch_owner(owner: int, pool: Path) -> None:
    """Exit when the sweep's process is gone (or its pool directory): a server never outlives
    its sweep."""
    while True:
        time.sleep(0.5)
        try:
            os.kill(owner, 0)
        except ProcessLookupError:
            os._exit(0)
        except PermissionError:
            pass
        if not (pool / SETTINGS).exists():
            os._exit(0)


def _watch_client(conn: socket.socket, running: threading.Event) -> None:
    """While a chunk computes: a client that hangs up (its job was killed, and with it the key
    locks of the chunk) makes this server exit at once, so no live process finishes calls that
    the restarted job will claim again."""
    poller = select.poll()
    poller.register(conn.fileno(), select.POLLRDHUP | select.POLLHUP | select.POLLERR)
    while running.is_set():
        # a hang-up after the chunk's reply (the client done with this server) is no loss: only
        # one while this chunk still runs is
        if poller.poll(100) and running.is_set():
            os._exit(3)


#: the ``.alive`` lock of this server: open until the process is gone
_HELD: list[IO[bytes]] = []


def serve_pool(args: argparse.Namespace) -> int:
    from omnistory_core.engine.worker import Serving

    pool = Path(args.pool)
    alive = open(pool / f"{args.name}.alive", "a+b")  # noqa: SIM115 - held for life
    fcntl.flock(alive, fcntl.LOCK_EX | fcntl.LOCK_NB)
    _HELD.append(alive)  # released by the kernel at exit, not when this function returns
    threading.Thread(target=_watch_owner, args=(int(args.owner), pool), daemon=True).start()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(_address(args.name))
    listener.listen(8)
    devices = [d for d in args.devices.split(",") if d]
    entry = {
        "name": args.name,
        "address": args.name,
        "pid": os.getpid(),
        "spec": args.spec,
        "component": args.component,
        "devices": devices,
        "footprint_gb": float(args.footprint),
    }
    registration = pool / f"{args.name}.json"
    tmp = registration.with_suffix(".tmp")
    tmp.write_text(json.dumps(entry) + "\n", encoding="utf-8")
    os.replace(tmp, registration)  # complete, or not there: clients read it whole
    state = Serving()
    listener.settimeout(float(args.idle))
    try:
        while True:
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                return 0  # idle past its grace: the devices' memory back
            conn.settimeout(None)
            if _session(conn, state, pool, entry):
                return 0
    finally:
        registration.unlink(missing_ok=True)
        with contextlib.suppress(Exception):
            if state.component is not None:
                state.component.unload()


def _session(conn: socket.socket, state: Any, pool: Path, entry: dict[str, Any]) -> bool:
    """One client's requests, until it disconnects; True when it asked the server to exit."""
    reader = conn.makefile("r", encoding="utf-8")
    try:
        for line in reader:
            if not line.strip():
                continue
            try:
                request = json.loads(line)
                op = request.get("op")
                if op == "shutdown":
                    conn.sendall(b'{"ok": true}\n')
                    return True
                if op == "unload":  # the pool keeps it loaded; the client only disconnects
                    reply: dict[str, Any] = {"ok": True}
                elif op == "run":
                    # one event per chunk, not joined: its watcher ends within a poll by itself
                    running = threading.Event()
                    running.set()
                    threading.Thread(
                        target=_watch_client, args=(conn, running), daemon=True
                    ).start()
                    try:
                        reply = state.handle(request)
                    finally:
                        running.clear()
                else:
                    t0 = time.perf_counter()
                    reply = state.handle(request)
                    if op == "load" and reply.get("fresh"):
                        _note_load(pool, entry, time.perf_counter() - t0)
            except Exception as exc:  # noqa: BLE001 - the client gets it as an error reply
                traceback.print_exc(file=sys.stderr)
                reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
            try:
                conn.sendall((json.dumps(reply, ensure_ascii=False) + "\n").encode("utf-8"))
            except OSError:
                return False
        return False
    finally:
        with contextlib.suppress(OSError):
            reader.close()
            conn.close()


def _note_load(pool: Path, entry: dict[str, Any], seconds: float) -> None:
    note = {
        "component": entry["component"],
        "devices": entry["devices"],
        "pid": os.getpid(),
        "seconds": round(seconds, 3),
        "time": time.time(),
    }
    _append(pool / LOADS, note)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="a warm-pool server of one component")
    for flag in ("pool", "name", "spec", "component", "devices", "footprint", "owner", "idle"):
        parser.add_argument(f"--{flag}", required=True)
    args = parser.parse_args(argv)
    # stdout carries nothing here, but a library printing to it must not break anything
    sys.stdout = sys.stderr
    code = serve_pool(args)
    sys.stderr.flush()
    # no interpreter teardown (seconds with a model's libraries loaded): the process, and with
    # it the .alive lock that tells the pool it is gone, ends now
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
