"""Job processes started before their jobs: a parallel sweep's first jobs without a cold start.

A job of a parallel sweep runs in a fresh process (:mod:`.launcher`), which first imports Hydra,
the engine and every plugin: seconds of CPU before its first call, while its devices wait.  With
the sweep's scheduler, the launcher starts as many *hosts* as jobs will start at once
(:func:`start_hosts`, when Hydra sets it up, so they boot while Hydra still checks the sweep's
job configs); a host is that process with the imports done, waiting on its stdin for the job to
run (:func:`hand_over`: its payload, where to put its result and, optionally, its console log).
It then runs the job exactly as a process started for it does.  A host that gets no job (its
stdin closes) exits.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["hand_over", "host_main", "start_hosts"]

MODULE = "hydra_plugins.omnistory_launcher.launcher"


def start_hosts(count: int, env: dict[str, str]) -> list[subprocess.Popen[bytes]]:
    """``count`` hosts, booting (not waited for)."""
    return [
        subprocess.Popen(  # noqa: S603 - our own interpreter and module
            [sys.executable, "-m", MODULE, "--host"], stdin=subprocess.PIPE, env=env
        )
        for _ in range(count)
    ]


def hand_over(host: subprocess.Popen[bytes], payload: Path, result: Path, log: Path | None) -> bool:
    """Give ``host`` its job; False when it is gone (the caller starts a process instead)."""
    if host.poll() is not None or host.stdin is None:
        return False
    line = "\t".join([str(payload), str(result), str(log or "")]) + "\n"
    try:
        host.stdin.write(line.encode("utf-8"))
        host.stdin.close()
    except OSError:
        return False
    return True


def host_main(run: Any) -> int:
    """A host's life: the imports a job needs, then the job its launcher hands over (``run``:
    ``(payload, result) -> exit status``)."""
    # what the imports print goes nowhere: the job's console (the terminal or its log) is not
    # known yet, and a live progress view must not be torn by it
    console = os.dup(1), os.dup(2)
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 1)
    os.dup2(quiet, 2)
    try:
        import cloudpickle  # noqa: F401 - what a job's payload needs, loaded before it comes

        import omnistory_core.app  # noqa: F401
        import omnistory_core.run.generate  # noqa: F401
        from omnistory_core.plugins import load_plugins

        load_plugins()
    finally:
        os.dup2(console[0], 1)
        os.dup2(console[1], 2)
        os.close(quiet)
    line = sys.stdin.readline().rstrip("\n")
    if not line:
        return 0  # no job for this host
    payload, result, log = line.split("\t")
    if log:  # the job's console output goes to its log, as a process started for it
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
    return int(run(Path(payload), Path(result)))
