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

The spare process itself is :mod:`.spare_process` (it imports the pool server it becomes).
A spare exits with the sweep's process or its pool directory; a spare killed while it becomes a
server is one whose server never registers: its claimer starts a server process instead.
"""

from __future__ import annotations

import fcntl
import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["ANSWER_S", "PREFIX", "address", "claim_spare", "live_spares", "start_spare"]

PREFIX = "spare-"
#: how long a claimer waits for a spare's answer
ANSWER_S = 10.0


def address(pool: Path, pid: int) -> str:
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
    process = "omnistory_core.engine.spare_process"
    args = [sys.executable, "-m", process, "--pool", str(pool), "--owner", str(owner)]
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
                conn.connect(address(pool, int(entry["pid"])))
                request = {"op": "become", "server": server, "env": env}
                conn.sendall((json.dumps(request) + "\n").encode("utf-8"))
                if json.loads(conn.makefile("r").readline() or "{}").get("ok"):
                    return True
        except (OSError, ValueError):
            continue
        finally:
            claim.close()
    return False
