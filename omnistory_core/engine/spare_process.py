"""A spare process of the sweep's warm pool (:mod:`.spares`): ``python -m
omnistory_core.engine.spare_process --pool DIR --owner PID`` imports the engine and the plugins,
registers in the pool directory and waits until a replica claims it; then it becomes that
replica's pool server (:func:`omnistory_core.engine.pool.serve_pool`)."""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

from omnistory_core.engine.spares import PREFIX, address

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
    listener.bind(address(pool, pid))
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
