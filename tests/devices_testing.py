"""Helpers shared by the tests of sweeps on stand-in devices (engine.devices, the warm pool):
the stand-ins' environment, their call and load logs, the job outputs of a sweep, and the
processes a sweep starts (jobs, replicas, pool servers) as ``/proc`` shows them."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

from omnistory_testkit.standins import make_standin_site

__all__ = [
    "alive",
    "children",
    "cmdline",
    "job_outputs",
    "lines",
    "pool_servers",
    "standin_env",
]


def standin_env(
    root: Path, delay: float, load_s: float | None = None, evaluators: bool = False
) -> dict[str, str]:
    """The environment of a CLI run whose models are the testkit's stand-ins: ``delay`` seconds
    per call, ``load_s`` per model load (None: the stand-ins' default), the call log in
    ``root/calls.jsonl``, the load log in ``root/loads.jsonl``, device locks under ``root``;
    ``evaluators``: metrics and judges are stand-ins too."""
    site = make_standin_site(root / "standins", evaluators=evaluators)
    env = {
        "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
        "OMNISTORY_STANDIN_DELAY_S": str(delay),
        "OMNISTORY_STANDIN_LOG": str(root / "calls.jsonl"),
        "OMNISTORY_STANDIN_LOAD_LOG": str(root / "loads.jsonl"),
        "OMNISTORY_DEVICE_LOCKS": str(root / "device-locks"),
        "ANTHROPIC_API_KEY": "test-key",
        "OPENAI_API_KEY": "test-key",
    }
    if load_s is not None:
        env["OMNISTORY_STANDIN_LOAD_S"] = str(load_s)
    return env


def lines(path: Path) -> list[dict]:
    """The JSON lines of a log (none when it does not exist)."""
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def job_outputs(sweep: Path, jobs: Iterable[str]) -> dict[str, str]:
    """sha256 of every generated file of each job of ``sweep``, by path below it."""
    out = {}
    for job in jobs:
        for path in sorted((sweep / job).glob("*/*/generated.*")):
            out[str(path.relative_to(sweep))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def children(pid: int) -> list[int]:
    """The live (not zombie) child processes of ``pid``."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            out.append(int(stat.parent.name))
    return out


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def pool_servers(under: Path | None = None) -> list[int]:
    """The warm-pool servers running on this machine (those whose pool directory lies in
    ``under`` only, when given: a sweep's is relative to the sweep's working directory)."""
    out = []
    for entry in Path("/proc").glob("[0-9]*"):
        args = cmdline(int(entry.name)).split()
        if "omnistory_core.engine.pool" not in args or "--pool" not in args:
            continue
        if under is not None:
            try:
                pool = entry / "cwd" / args[args.index("--pool") + 1]
                if not pool.resolve().is_relative_to(under.resolve()):
                    continue
            except (OSError, IndexError):
                continue
        out.append(int(entry.name))
    return out
