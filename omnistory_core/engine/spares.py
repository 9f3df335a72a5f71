"""Spare processes of the sweep's warm pool: a new pool server without a process start.

Starting a pool server is a new Python process that imports the engine and every plugin before it
can load its model: a second or two of CPU, many seconds on a busy machine, and its device waits
meanwhile.  The sweep's scheduler (:mod:`.schedule`) therefore keeps a few *spares* ready:
processes that have done all that and wait, each registered in the pool directory as
``spare-<pid>.json`` (its socket) with ``spare-<pid>.alive`` (a lock it holds while it lives).
A replica that needs a new server (:class:`~omnistory_core.engine.pool.PooledComponent`) claims a
spare (``spare-<pid>.claim``, a lock only one claimer gets) and hands it the server's settings and
environment (the component's runner environment and its devices): the spare becomes that server
(:func:`omnistory_core.engine.pool.serve_pool`), exactly as a process started for it would be,
and the scheduler starts another spare.  A component run by another interpreter
(``runner.python``) gets a process of its own, as without spares.

A spare exits with the sweep's process or its pool directory; a spare killed while it becomes a
server is one whose server never registers: its claimer starts a server process instead.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

__all__ = ["claim_spare", "live_spares", "start_spare"]

PREFIX = "spare-"
#: how long a claimer waits for a spare's answer
ANSWER_S = 10.0


def _address(pool: Path, pid: int) -> str:
    import hashlib

    where = hashlib.sha256(str(pool.resolve()).encode()).hexdigest()[:16]
    return f"\0omnistory-spare-{where}-{pid}"


def _locked(path: Path) -> bool:
    """Whether another process holds ``path``'s lock."""
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        handle.close()
    return False


def live_spares(pool: Path) -> list[dict[str, Any]]:
    """The spares waiting in ``pool`` (registrations of dead ones are removed)."""
    out = []
    for path in sorted(pool.glob(f"{PREFIX}*.json")):
        try:
            entry = json.loads(path.read_text("utf-8"))
        except (OSError, ValueError):
            continue
        if _locked(pool / f"{PREFIX}{entry['pid']}.alive"):
            out.append(entry)
        else:
            path.unlink(missing_ok=True)
    return out


def start_spare(pool: Path, owner: int) -> subprocess.Popen[bytes]:
    """Start one spare for ``pool`` (not waited for: it registers once ready)."""
    args = [sys.executable, "-m", __name__, "--pool", str(pool), "--owner", str(owner)]
    with open(pool / f"{PREFIX}processes.log", "ab") as logfile:
        return subprocess.Popen(  # noqa: S603 - our own interpreter and module
            args, stdin=subprocess.DEVNULL, stdout=logfile, stderr=logfile
        )


def claim_spare(pool: Path, python: str, server: dict[str, str], env: dict[str, str]) -> bool:
    """Have a spare of ``pool`` become the server ``server`` (the arguments
    :func:`omnistory_core.engine.pool.serve_pool` takes) with ``env`` added to its environment;
    False when none could (none waits, or it runs another interpreter than ``python``)."""
    for entry in live_spares(pool):
        if entry.get("python") != python:
            continue
        claim = open(pool / f"{PREFIX}{entry['pid']}.claim", "a+b")  # noqa: SIM115 - closed below
        try:
            fcntl.flock(claim, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            claim.close()
            continue  # another replica claims it
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                conn.settimeout(ANSWER_S)
                conn.connect(_address(pool, int(entry["pid"])))
                request = {"op": "become", "server": server, "env": env}
                conn.sendall((json.dumps(request) + "\n").encode("utf-8"))
                if json.loads(conn.makefile("r").readline() or "{}").get("ok"):
                    return True
        except (OSError, ValueError):
            continue
        finally:
            claim.close()
    return False


# -- the spare ---------------------------------------------------------------------------------
#: the ``.alive`` lock of this spare: open until the process is gone (or it is a server)
_HELD: list[IO[bytes]] = []


def _watch(owner: int, pool: Path) -> None:
    """Exit with the sweep's process or its pool (a spare's files go with it)."""
    while True:
        time.sleep(0.5)
        try:
            os.kill(owner, 0)
            gone = not (pool / "pool.json").exists()
        except ProcessLookupError:
            gone = True
        except PermissionError:
            gone = False
        if gone:
            if _HELD:  # still a spare: its registration goes too
                for suffix in ("json", "claim", "alive"):
                    (pool / f"{PREFIX}{os.getpid()}.{suffix}").unlink(missing_ok=True)
            os._exit(0)


def _wait(pool: Path) -> dict[str, Any]:
    """Register, then wait for a claimer's ``become`` request; answered once this process is
    no longer a spare."""
    pid = os.getpid()
    alive = open(pool / f"{PREFIX}{pid}.alive", "a+b")  # noqa: SIM115 - held while a spare
    fcntl.flock(alive, fcntl.LOCK_EX | fcntl.LOCK_NB)
    _HELD.append(alive)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(_address(pool, pid))
    listener.listen(1)
    registration = pool / f"{PREFIX}{pid}.json"
    tmp = registration.with_suffix(".tmp")
    tmp.write_text(json.dumps({"pid": pid, "python": sys.executable}) + "\n", encoding="utf-8")
    os.replace(tmp, registration)
    while True:
        conn, _ = listener.accept()
        with contextlib.suppress(OSError, ValueError):
            request = json.loads(conn.makefile("r").readline() or "{}")
            if request.get("op") == "become":
                registration.unlink(missing_ok=True)
                conn.sendall(b'{"ok": true}\n')
                conn.close()
                listener.close()
                for handle in _HELD:
                    handle.close()  # no longer a spare: its .alive lock goes
                _HELD.clear()
                (pool / f"{PREFIX}{pid}.alive").unlink(missing_ok=True)
                (pool / f"{PREFIX}{pid}.claim").unlink(missing_ok=True)
                return dict(request)
        conn.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="a spare process of a sweep's warm pool")
    parser.add_argument("--pool", required=True)
    parser.add_argument("--owner", required=True)
    args = parser.parse_args(argv)
    pool = Path(args.pool)
    threading.Thread(target=_watch, args=(int(args.owner), pool), daemon=True).start()
    # what a server does before its first request, done before it is needed
    from omnistory_core.engine import pool as pool_module
    from omnistory_core.engine import worker  # noqa: F401 - imported for the server it becomes
    from omnistory_core.plugins import load_plugins

    load_plugins()
    request = _wait(pool)
    os.environ.update({str(k): str(v) for k, v in request["env"].items()})
    os.environ.pop("OMNISTORY_WORKER_PARENT", None)
    server = argparse.Namespace(**request["server"])
    # the server's own log, as a server started for it writes (its clients quote its tail)
    log = os.open(pool / f"{server.name}.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    sys.stdout = sys.stderr
    code = pool_module.serve_pool(server)
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
