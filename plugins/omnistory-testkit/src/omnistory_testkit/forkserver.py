"""CLI runs forked from an interpreter that has already imported the CLI.

A test suite starts the CLI hundreds of times, and most of each short run is the interpreter's
start and its imports (Hydra, the core, every plugin): 0.78-0.93 s of CPU for a one-example demo
run against 0.29-0.30 s forked from a warm interpreter (``benchmarks/cli_fork.py``: forked/new
0.31-0.35).  :func:`run_module` runs ``python -m MODULE ARGS`` in a process forked from such an
interpreter (a *zygote*), with the caller's arguments, working directory, environment and
stdin/stdout/stderr, and returns what :func:`subprocess.run` returns: the same exit status
(negative for a signal), the same text output, read until every process holding the pipes has
closed them, and :class:`subprocess.TimeoutExpired` after killing the run when it takes longer
than ``timeout``.

What a forked run shares with the zygote, and how that is kept from showing:

* **Imported modules and their environment.**  The zygote imports what one demo run imports,
  except the packages of :data:`NOT_PRELOADED` (numerical, model and hub libraries, which read
  thread, instruction-set and hub settings from the environment when they load): those load in
  the forked run, under its own environment.  What the interpreter reads at its start and NumPy
  when it loads (:data:`START_ENV_PREFIXES`: ``PYTHON*``, locale, time zone, the loader's,
  libc's and OpenSSL's variables, BLAS threads and core type) cannot change after it: a run
  whose environment differs from the zygote's there starts a new interpreter.  Should the
  zygote ever hold a package of :data:`NOT_PRELOADED` (a preloaded module that imports one), it
  says so, and only the variables of :data:`CALL_TIME_ENV` may then differ.
* **The hash seed.**  Strings hash with the seed their interpreter drew at its start.  Two
  zygotes with their own seeds take turns, so two consecutive runs never share one: a result
  that depends on a set's order still differs between a run and its rerun.
* **Signal handlers, the temporary folder, ``sys.argv`` and ``sys.path[0]``** are set in the
  child as ``python -m`` sets them; ``random`` reseeds itself in a forked child.

Enabled by ``OMNISTORY_TESTKIT_FORK=1`` (this repository's ``conftest.py`` sets it); Linux only;
anything the zygote cannot do falls back to :func:`subprocess.run`.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ENABLE_ENV = "OMNISTORY_TESTKIT_FORK"
#: variables read when the process starts (the interpreter, libc, the loader, OpenSSL) or when
#: NumPy loads its BLAS (NumPy is preloaded: the speech outputs of a demo run import it)
START_ENV_PREFIXES = (
    "PYTHON",
    "LD_",
    "LC_",
    "LANG",
    "TZ",
    "MALLOC_",
    "GLIBC_",
    "OPENSSL_",
    "OMP_",
    "OPENBLAS_",
    "GOTO",
    "NPY_",
)
#: what may differ when the zygote holds a package of NOT_PRELOADED: variables read when used
CALL_TIME_ENV = frozenset(
    {"HOME", "NO_COLOR", "FORCE_COLOR", "COLUMNS", "LINES", "TERM", "PYTEST_CURRENT_TEST"}
)
CALL_TIME_PREFIXES = ("OMNISTORY_", "XDG_")
#: the demo run whose imports the zygote makes before it forks anything
WARM_UP = ("planner=template", "image=copy", "tts=noop", "dataset.limit=1")
#: top-level packages the zygote never imports: they read threads, instruction sets or hub
#: settings from the environment when they load, or import a package that does
NOT_PRELOADED = frozenset(
    {
        "scipy",
        "torch",
        "pyarrow",
        "librosa",
        "numba",
        "sklearn",
        "ctranslate2",
        "onnxruntime",
        "huggingface_hub",
        "transformers",
        "tokenizers",
    }
)


def enabled() -> bool:
    return os.environ.get(ENABLE_ENV) == "1" and hasattr(socket, "send_fds") and os.name == "posix"


def forkable(env: dict[str, str], zygote_env: dict[str, str], *, holds_heavy: bool) -> bool:
    """Whether a run with ``env`` may be forked from a zygote started with ``zygote_env``
    (``holds_heavy``: the zygote holds a package of :data:`NOT_PRELOADED`)."""
    changed = {k for k in env.keys() | zygote_env.keys() if env.get(k) != zygote_env.get(k)}
    if holds_heavy:
        return all(k in CALL_TIME_ENV or k.startswith(CALL_TIME_PREFIXES) for k in changed)
    return not any(k.startswith(START_ENV_PREFIXES) for k in changed)


def held_heavy() -> list[str]:
    """The packages of :data:`NOT_PRELOADED` this interpreter has imported."""
    return sorted({name.split(".")[0] for name in sys.modules} & NOT_PRELOADED)


# -- the zygote -------------------------------------------------------------------------------


def _send(conn: socket.socket, message: dict[str, Any]) -> None:
    with contextlib.suppress(OSError):
        conn.send(json.dumps(message).encode("utf-8"))


def _child(request: dict[str, Any], fds: list[int], closing: list[int]) -> None:
    """In the forked child: become ``python -m MODULE ARGS`` and exit with its status."""
    code = 1
    try:
        for fd in closing:
            with contextlib.suppress(OSError):
                os.close(fd)
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        for target, fd in zip((0, 1, 2), fds, strict=True):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        tempfile.tempdir = None
        sys.path[0] = os.getcwd()
        sys.argv = [request["module"], *request["args"]]
        code = _run_as_main(request["module"])
    except BaseException:  # noqa: BLE001 - whatever escapes is reported as an interpreter would
        import traceback

        traceback.print_exc()
    finally:
        os._exit(code)


def _run_as_main(module: str) -> int:
    """Run ``module`` as ``__main__`` and return the exit status an interpreter would give."""
    import runpy
    import traceback

    code = 0
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:
        traceback.print_exc()
        code = 128 + signal.SIGINT
    except BaseException:  # noqa: BLE001 - an uncaught exception: traceback, status 1
        traceback.print_exc()
        code = 1
    # what the interpreter does at exit: wait for non-daemon threads, then the exit handlers
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    return code


def _warm_up(module: str = "omnistory_core") -> None:
    """Import what one demo run of the CLI imports (learnt from a forked child), except the
    packages of :data:`NOT_PRELOADED`."""
    import importlib
    import runpy

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        with tempfile.TemporaryDirectory(prefix="omnistory-fork-warm-up-") as tmp:
            null = os.open(os.devnull, os.O_RDWR)
            for target in (0, 1, 2):
                os.dup2(null, target)
            os.chdir(tmp)
            sys.argv = [module, *WARM_UP, f"output_root={tmp}"]
            with contextlib.suppress(BaseException):
                runpy.run_module(module, run_name="__main__", alter_sys=True)
            names = [n for n in list(sys.modules) if not n.startswith("__")]
            os.write(write, json.dumps(names).encode("utf-8"))
        os._exit(0)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 1 << 16):
        chunks.append(chunk)
    os.close(read)
    os.waitpid(pid, 0)
    names = json.loads(b"".join(chunks) or b"[]")
    for name in names:
        if name.split(".")[0] in NOT_PRELOADED or name in sys.modules:
            continue
        with contextlib.suppress(BaseException):
            importlib.import_module(name)


def serve(path: str) -> None:
    """The zygote: warm up, then fork one child per request on the Unix socket ``path``,
    answering ``{"pid"}`` at once and ``{"status"}`` when the child ends; exits when its parent
    does."""
    parent = os.getppid()
    _warm_up()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    Path(f"{path}.json").write_text(json.dumps({"heavy": held_heavy()}), encoding="utf-8")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(64)
    wake_read, wake_write = socket.socketpair()
    wake_read.setblocking(False)
    wake_write.setblocking(False)
    signal.set_wakeup_fd(wake_write.fileno())
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children: dict[int, socket.socket] = {}
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    selector.register(wake_read, selectors.EVENT_READ)
    while True:
        for key, _ in selector.select(timeout=1.0):
            if key.fileobj is listener:
                conn, _ = listener.accept()
                try:
                    payload, fds, _flags, _addr = socket.recv_fds(conn, 1 << 20, 3)
                    request = json.loads(payload.decode("utf-8"))
                except (OSError, ValueError):
                    conn.close()
                    continue
                closing = [listener.fileno(), wake_read.fileno(), wake_write.fileno()]
                closing += [c.fileno() for c in children.values()] + [conn.fileno()]
                pid = os.fork()
                if pid == 0:
                    _child(request, fds, closing)
                for fd in fds:
                    os.close(fd)
                children[pid] = conn
                _send(conn, {"pid": pid})
            else:
                with contextlib.suppress(OSError):
                    while wake_read.recv(4096):
                        pass
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            conn = children.pop(pid, None)
            if conn is not None:
                _send(conn, {"status": os.waitstatus_to_exitcode(status)})
                conn.close()
        if os.getppid() != parent:
            return


# -- the caller's side ------------------------------------------------------------------------


class _Zygote:
    def __init__(self, env: dict[str, str]):
        self.env = env
        #: the packages of NOT_PRELOADED the zygote holds (None until it is up)
        self.heavy: list[str] | None = None
        self.dir = tempfile.mkdtemp(prefix="omnistory-fork-")
        self.path = os.path.join(self.dir, "zygote.sock")
        code = f"from omnistory_testkit.forkserver import serve; serve({self.path!r})"
        self.process = subprocess.Popen(
            [sys.executable, "-c", code],
            cwd=self.dir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def connect(self, deadline: float) -> socket.socket:
        while True:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            try:
                sock.connect(self.path)
                if self.heavy is None:  # written before the socket was bound
                    text = Path(f"{self.path}.json").read_text(encoding="utf-8")
                    self.heavy = list(json.loads(text)["heavy"])
                return sock
            except OSError:
                sock.close()
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        with contextlib.suppress(OSError):
            os.unlink(f"{self.path}.json")
        with contextlib.suppress(OSError):
            os.rmdir(self.dir)


class _Zygotes:
    """Two zygotes per calling process, taking turns (see the module docstring)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pool: list[_Zygote] = []
        self.turn = 0
        self.owner = 0
        self.broken = False

    def next(self) -> _Zygote | None:
        with self.lock:
            if self.owner != os.getpid():  # a forked caller starts its own
                self.pool, self.owner, self.broken = [], os.getpid(), False
            if self.broken:
                return None
            if not self.pool:
                env = {**os.environ, "PYTHONUNBUFFERED": "1"}
                self.pool = [_Zygote(env) for _ in range(2)]
                atexit.register(self.close)
            self.turn += 1
            return self.pool[self.turn % len(self.pool)]

    def close(self) -> None:
        if self.owner == os.getpid():
            for zygote in self.pool:
                zygote.close()
            self.pool = []


_ZYGOTES = _Zygotes()
#: how long a zygote may take to warm up before its first run falls back
START_TIMEOUT_S = 120.0


def run_module(
    module: str,
    args: list[str],
    *,
    cwd: str | os.PathLike[str],
    env: dict[str, str],
    timeout: float | None,
) -> subprocess.CompletedProcess[str]:
    """``python -m MODULE ARGS`` as :func:`subprocess.run` with ``capture_output=True,
    text=True`` runs it: forked from a zygote where it can be, a new interpreter otherwise."""
    command = [sys.executable, "-m", module, *args]
    zygote = _ZYGOTES.next() if enabled() else None
    # what no zygote can honour is known without asking one (which may still be warming up)
    if zygote is None or not forkable(env, zygote.env, holds_heavy=False):
        return _subprocess(command, cwd, env, timeout)
    try:
        sock = zygote.connect(time.monotonic() + START_TIMEOUT_S)
    except (OSError, ValueError, KeyError):
        _ZYGOTES.broken = True
        return _subprocess(command, cwd, env, timeout)
    with sock:
        if not forkable(env, zygote.env, holds_heavy=bool(zygote.heavy)):
            return _subprocess(command, cwd, env, timeout)
        return _forked(sock, command, module, args, cwd, env, timeout)


def _subprocess(
    command: list[str], cwd: Any, env: dict[str, str], timeout: float | None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def _text(data: bytes) -> str:
    """Bytes as ``subprocess.run(text=True)`` decodes them (locale encoding, universal
    newlines)."""
    import locale

    text = data.decode(locale.getpreferredencoding(False))
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _forked(
    sock: socket.socket,
    command: list[str],
    module: str,
    args: list[str],
    cwd: Any,
    env: dict[str, str],
    timeout: float | None,
) -> subprocess.CompletedProcess[str]:
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    try:  # the caller's stdin, which subprocess.run would let the run inherit
        stdin = os.dup(0)
    except OSError:
        stdin = os.open(os.devnull, os.O_RDONLY)
    request = {"module": module, "args": list(args), "cwd": str(Path(cwd)), "env": env}
    try:
        socket.send_fds(sock, [json.dumps(request).encode("utf-8")], [stdin, out_write, err_write])
    finally:
        for fd in (stdin, out_write, err_write):
            os.close(fd)
    deadline = None if timeout is None else time.monotonic() + timeout
    buffers: dict[int, list[bytes]] = {out_read: [], err_read: []}
    pid: int | None = None
    status: int | None = None
    selector = selectors.DefaultSelector()
    selector.register(out_read, selectors.EVENT_READ)
    selector.register(err_read, selectors.EVENT_READ)
    selector.register(sock, selectors.EVENT_READ)
    pipes = {out_read, err_read}
    try:
        while pipes or status is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                if pid is not None:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                raise subprocess.TimeoutExpired(
                    command,
                    timeout or 0,
                    output=b"".join(buffers[out_read]),
                    stderr=b"".join(buffers[err_read]),
                )
            for key, _ in selector.select(timeout=left):
                if key.fileobj is sock:
                    data = sock.recv(1 << 16)
                    if not data:  # the zygote died: whatever the run was, it is lost
                        selector.unregister(sock)
                        status = -signal.SIGKILL if status is None else status
                        continue
                    message = json.loads(data.decode("utf-8"))
                    pid = message.get("pid", pid)
                    if "status" in message:
                        status = int(message["status"])
                        selector.unregister(sock)
                else:
                    fd = int(key.fd)
                    chunk = os.read(fd, 1 << 16)
                    if chunk:
                        buffers[fd].append(chunk)
                    else:
                        selector.unregister(fd)
                        pipes.discard(fd)
    finally:
        selector.close()
        os.close(out_read)
        os.close(err_read)
    return subprocess.CompletedProcess(
        command,
        status,
        _text(b"".join(buffers[out_read])),
        _text(b"".join(buffers[err_read])),
    )


__all__ = [
    "CALL_TIME_ENV",
    "ENABLE_ENV",
    "NOT_PRELOADED",
    "START_ENV_PREFIXES",
    "enabled",
    "forkable",
    "held_heavy",
    "run_module",
    "serve",
]
