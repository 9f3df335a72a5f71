"""A content-addressed store shared by every job under one output root.

Layout::

    <store>/blobs/<sha[:2]>/<sha>.<ext>      artifacts by content hash (PNG, WAV, ...)
    <store>/calls/<key[:2]>/<key>.json       one record per model call (result or failure)
    <store>/locks/<key[:2]>/<key>.lock       flock locks while a call is being computed
    <store>/locks/<key[:2]>/<key>.lease      or leases, with locks/owners/ (see engine.locking)

Every file appears by atomic rename, so a reader sees either nothing or a complete file; a process
killed mid-call leaves at most a temp file and a released lock (``flock`` dies with its process; a
lease is reclaimed once it expires), and the next run recomputes exactly the calls that have no
record.  Several processes, on one machine or many sharing a network filesystem, may share a store:
a call is computed by whoever takes its lock first; the others wait and read its record.  How keys
are locked (``flock`` or leases) is :mod:`omnistory_core.engine.locking`'s business.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omnistory_core.engine.hashing import sha256_bytes
from omnistory_core.engine.locking import (
    FlockLock,
    LeaseLock,
    LockingError,
    choose_mode,
    resolve_settings,
)
from omnistory_core.files import atomic_write_bytes

__all__ = ["CallRecord", "KeyLock", "LockingError", "Store", "atomic_write_bytes"]


@dataclass
class CallRecord:
    key: str
    component: str
    status: str  # "ok" | "failure"
    output: dict[str, Any] = field(
        default_factory=dict
    )  # {"text": ...} or {"blob": sha, "ext": ...}
    failure: dict[str, str] | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    #: what the component declared when it made the record beyond its key's parts
    #: (:meth:`~omnistory_core.components.Component.call_declaration`, e.g. a backbone's
    #: ``produces``); a record made under another declaration is recomputed.  Empty for the
    #: components that declare nothing more, whose records are written as before.
    declared: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = {
            "key": self.key,
            "component": self.component,
            "status": self.status,
            "output": self.output,
            "failure": self.failure,
            "usage": self.usage,
            "seconds": self.seconds,
        }
        if self.declared:
            data["declared"] = self.declared
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CallRecord:
        return cls(
            key=data["key"],
            component=data["component"],
            status=data["status"],
            output=data.get("output") or {},
            failure=data.get("failure"),
            usage=data.get("usage") or {},
            seconds=float(data.get("seconds") or 0.0),
            declared=dict(data.get("declared") or {}),
        )


#: the flock lock (the name predates lease locking)
KeyLock = FlockLock


class Store:
    """``locking``: ``flock`` / ``lease`` / ``auto``, ``lease_s``: the lease in seconds; None reads
    ``OMNISTORY_STORE_LOCKING`` / ``OMNISTORY_STORE_LEASE_S`` (set from ``engine.store_locking`` /
    ``engine.store_lease_s`` in every Hydra job), else ``auto`` / 60 s."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        locking: str | None = None,
        lease_s: float | None = None,
    ):
        self.root = Path(root)
        (self.root / "calls").mkdir(parents=True, exist_ok=True)
        (self.root / "blobs").mkdir(parents=True, exist_ok=True)
        requested, self.lease_s = resolve_settings(locking, lease_s)
        self.locking = choose_mode(self.root / "locks", requested)

    # -- calls ---------------------------------------------------------------------------
    def _call_path(self, key: str) -> Path:
        return self.root / "calls" / key[:2] / f"{key}.json"

    def get(self, key: str) -> CallRecord | None:
        path = self._call_path(key)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return None  # unreadable record: treat as missing, it will be recomputed
        record = CallRecord.from_dict(data)
        if (
            record.output.get("blob")
            and not self.blob_path(record.output["blob"], record.output.get("ext", "")).exists()
        ):
            return None
        return record

    def put(self, record: CallRecord) -> None:
        data = json.dumps(record.to_dict(), ensure_ascii=False, sort_keys=True, indent=1)
        atomic_write_bytes(self._call_path(record.key), data.encode("utf-8"))

    def lock(self, key: str) -> FlockLock | LeaseLock:
        locks = self.root / "locks"
        if self.locking == "lease":
            return LeaseLock(locks / key[:2] / f"{key}.lease", locks, self.lease_s)
        return FlockLock(locks / key[:2] / f"{key}.lock")

    # -- blobs ---------------------------------------------------------------------------
    def blob_path(self, sha: str, ext: str) -> Path:
        return self.root / "blobs" / sha[:2] / f"{sha}{('.' + ext) if ext else ''}"

    def put_blob(self, data: bytes, ext: str) -> str:
        sha = sha256_bytes(data)
        path = self.blob_path(sha, ext)
        if not path.exists():
            atomic_write_bytes(path, data)
        return sha
