"""Per-key locks of the store: ``flock`` on one machine, leases where ``flock`` cannot be trusted.

Two modes, chosen by ``engine.store_locking`` (environment: ``OMNISTORY_STORE_LOCKING``):

``flock``
    An advisory ``flock`` on ``locks/<key[:2]>/<key>.lock``.  The kernel drops it when its process
    dies, so nothing is ever left behind.  Correct on a local disk and on network filesystems whose
    ``flock`` is cluster-wide (NFSv4 with ``local_lock=none``, CephFS, GPFS, Lustre mounted with
    ``flock``); on others it is silently node-local or fails.

``lease``
    A lock file ``locks/<key[:2]>/<key>.lease`` created atomically (``link(2)`` of a complete temp
    file, which fails if the name exists), naming its owner: one record per process,
    ``locks/owners/<owner>.json``, with an expiry that a heartbeat thread pushes forward every
    ``lease_s / 4`` seconds.  A lock whose owner's lease has expired (the process was killed, or
    its node died) is reclaimed after ``lease_s`` (+ a grace of ``lease_s / 10``, at least one
    second, for clock skew): exactly one waiter wins an exclusive reclaim marker
    (``<key>.lease.reclaim.<token>``, ``O_CREAT|O_EXCL``) for that lock's unique token and removes
    the dead lock; then every waiter competes for the key again through the atomic create.  An owner
    never extends a lease that has expired by its own clock, so a live process (one whose heartbeat
    runs) never loses a lock and no key is computed by two live processes.  Node clocks must agree
    to well within the grace (NTP).

``auto`` (the default) uses ``lease`` when the store is on a network filesystem (``nfs``,
``lustre``, ``cifs``, ``beegfs``, ``fuse.*``, ...) or when a store was already switched to leases
(``locks/LEASE`` exists), else ``flock``.  Every process sharing a store must use the same mode:
an explicit ``lease`` marks the store (``locks/LEASE``) so that ``auto`` follows it, and an
explicit ``flock`` on a store so marked is refused.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import fcntl
import json
import os
import socket
import threading
import time
import uuid
from pathlib import Path
from typing import IO, Any

MODES = ("auto", "flock", "lease")
DEFAULT_LEASE_S = 60.0
#: filesystem types on which ``auto`` takes leases (``/proc/self/mountinfo``'s fstype)
NETWORK_FILESYSTEMS = (
    "nfs",
    "nfs4",
    "lustre",
    "cifs",
    "smb3",
    "smbfs",
    "beegfs",
    "9p",
    "afs",
    "glusterfs",
    "ceph",
    "gpfs",
    "pvfs2",
    "orangefs",
    "panfs",
    "wekafs",
)
_MARKER = "LEASE"


class LockingError(RuntimeError):
    """A locking setting that is wrong or disagrees with the store."""


def resolve_settings(locking: str | None, lease_s: float | str | None) -> tuple[str, float]:
    """The mode and lease from arguments, else ``OMNISTORY_STORE_LOCKING`` /
    ``OMNISTORY_STORE_LEASE_S``, else ``auto`` / 60 s."""
    mode = str(locking or os.environ.get("OMNISTORY_STORE_LOCKING") or "auto").strip().lower()
    if mode not in MODES:
        raise LockingError(
            f"engine.store_locking (OMNISTORY_STORE_LOCKING) = {mode!r}: expected one of"
            f" {', '.join(MODES)}"
        )
    raw = lease_s if lease_s not in (None, "") else os.environ.get("OMNISTORY_STORE_LEASE_S")
    try:
        lease = float(raw) if raw not in (None, "") else DEFAULT_LEASE_S
    except ValueError:
        raise LockingError(
            f"engine.store_lease_s (OMNISTORY_STORE_LEASE_S) = {raw!r}: expected seconds"
        ) from None
    if lease < 1.0:
        raise LockingError(f"engine.store_lease_s = {lease}: a lease shorter than 1 s")
    return mode, lease


def filesystem_type(path: Path) -> str:
    """The fstype of the mount holding ``path`` ('' where /proc/self/mountinfo is unreadable)."""
    target = os.path.realpath(path)
    best, fstype = "", ""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return ""
    for line in lines:
        left, _, right = line.partition(" - ")
        fields = left.split()
        if len(fields) < 5 or not right:
            continue
        mount = fields[4].replace("\\040", " ")
        inside = target == mount or target.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) >= len(best):
            best, fstype = mount, right.split()[0]
    return fstype


def is_network_filesystem(fstype: str) -> bool:
    return fstype in NETWORK_FILESYSTEMS or fstype.startswith(("fuse.", "nfs"))


def choose_mode(locks_dir: Path, requested: str) -> str:
    """Apply ``auto`` and check the choice against the store's mark (see the module doc)."""
    marked = (locks_dir / _MARKER).exists()
    if requested == "lease":
        if not marked:
            locks_dir.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(FileExistsError):
                fd = os.open(locks_dir / _MARKER, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
                os.write(fd, b"this store is locked with leases (engine.store_locking=lease)\n")
                os.close(fd)
        return "lease"
    if requested == "flock":
        if marked:
            raise LockingError(
                f"{locks_dir / _MARKER}: this store is shared with lease locking, and"
                " engine.store_locking=flock would not exclude those processes. Use"
                " engine.store_locking=lease (or auto); delete that file only when no process"
                " uses the store."
            )
        return "flock"
    if marked:
        return "lease"
    probe = locks_dir if locks_dir.exists() else locks_dir.parent
    return "lease" if is_network_filesystem(filesystem_type(probe)) else "flock"


# -- flock --------------------------------------------------------------------------------------


class FlockLock:
    """An exclusive ``flock`` on one call key; the kernel releases it if the process dies."""

    def __init__(self, path: Path):
        self.path = path
        self._fh: IO[str] | None = None

    def acquire(self, blocking: bool) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(self.path, "a+")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            fh.close()
            return False
        except OSError as exc:
            fh.close()
            if exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                raise LockingError(
                    f"{self.path}: flock is not supported on this filesystem ({exc.strerror});"
                    " set engine.store_locking=lease"
                ) from exc
            raise
        self._fh = fh
        return True

    def held(self) -> bool:
        """Whether this process still holds the lock (a flock is held until released)."""
        return self._fh is not None

    def release(self) -> None:
        if self._fh is not None:
            fcntl.flock(self._fh, fcntl.LOCK_UN)
            self._fh.close()
            self._fh = None


# -- leases -------------------------------------------------------------------------------------


def _grace(lease_s: float) -> float:
    return max(1.0, lease_s / 10)


def _write_new(path: Path, data: dict[str, Any]) -> bool:
    """Create ``path`` with ``data`` atomically; False if it already exists."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh)
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    except OSError:
        # NFS may answer a retransmitted link with an error although it succeeded
        return os.stat(tmp).st_nlink == 2
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def _read_json(path: Path) -> dict[str, Any] | None:
    """The file's record; None if it does not exist; {} if it is unreadable."""
    try:
        with open(path, encoding="utf-8") as fh:  # open() revalidates NFS's cached attributes
            data = json.load(fh)
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


class _Owner:
    """This process's liveness record for one store: ``locks/owners/<id>.json`` with an expiry
    that a daemon thread keeps ``lease_s`` ahead while the process holds any lease."""

    _lock = threading.Lock()
    _by_dir: dict[tuple[int, str], _Owner] = {}

    def __init__(self, locks_dir: Path, lease_s: float):
        self.dir = locks_dir / "owners"
        self.lease_s = lease_s
        self.pid = os.getpid()
        self.id = f"{socket.gethostname()}-{self.pid}-{uuid.uuid4().hex[:12]}"
        self.path = self.dir / f"{self.id}.json"
        self.expires = 0.0
        self.lost = False
        self.held = 0
        self._stop = threading.Event()
        self.dir.mkdir(parents=True, exist_ok=True)
        for stale in self.dir.glob("*.json"):  # records of processes that died without cleaning up
            _drop_expired_owner(locks_dir, stale.stem, lease_s)
        self._refresh(first=True)
        thread = threading.Thread(target=self._beat, name="omnistory-store-lease", daemon=True)
        thread.start()
        atexit.register(self.close)

    def close(self) -> None:
        """Stop the heartbeat; drop the liveness record if no lease is held any more."""
        self._stop.set()
        if self.held <= 0 and not self.lost and os.getpid() == self.pid:
            with contextlib.suppress(OSError):
                os.unlink(self.path)

    @classmethod
    def get(cls, locks_dir: Path, lease_s: float) -> _Owner:
        """This process's owner for the store (a new one after fork or after a lapsed lease)."""
        with cls._lock:
            key = (os.getpid(), str(locks_dir))
            owner = cls._by_dir.get(key)
            # a lapsed owner (lost, or its heartbeat stalled past the lease) is never reused:
            # others may be reclaiming its locks, so new locks get a new, live owner
            if owner is None or not owner.valid():
                owner = cls._by_dir[key] = _Owner(locks_dir, lease_s)
            return owner

    def _refresh(self, first: bool = False) -> None:
        now = time.time()
        if not first and now >= self.expires:
            # Too late: others may already have reclaimed our locks.  Never revive them.
            self.lost = True
            self._stop.set()
            return
        record = {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "lease_s": self.lease_s,
            "expires": now + self.lease_s,
        }
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(record, fh)
        if not first and time.time() >= self.expires:
            self.lost = True
            self._stop.set()
            return
        os.replace(tmp, self.path)
        self.expires = record["expires"]

    def _beat(self) -> None:
        while not self._stop.wait(self.lease_s / 4):
            try:
                self._refresh()
            except OSError:
                continue  # a transient filesystem error: the next beat retries within the lease

    def valid(self) -> bool:
        return not self.lost and time.time() < self.expires


def _owner_alive(locks_dir: Path, owner: str, created: float, lease_s: float) -> bool:
    record = _read_json(locks_dir / "owners" / f"{owner}.json")
    now = time.time()
    if record is None or not record:
        # no (readable) liveness record: give a new owner a full lease before calling it dead
        return now < created + lease_s + _grace(lease_s)
    try:
        expires = float(record["expires"])
    except (KeyError, TypeError, ValueError):
        return now < created + lease_s + _grace(lease_s)
    return now < expires + _grace(float(record.get("lease_s") or lease_s))


def _drop_expired_owner(locks_dir: Path, owner: str, lease_s: float) -> None:
    """Remove a dead owner's liveness record.  Safe: an owner never renews an expired lease, and
    without its record its remaining locks are judged by their age, already past the lease."""
    path = locks_dir / "owners" / f"{owner}.json"
    record = _read_json(path)
    try:
        expires = float((record or {})["expires"])
        lease_s = float((record or {}).get("lease_s") or lease_s)
    except (KeyError, TypeError, ValueError):
        return
    if time.time() >= expires + _grace(lease_s):
        with contextlib.suppress(OSError):
            os.unlink(path)


class LeaseLock:
    """A lease on one call key (see the module doc)."""

    def __init__(self, path: Path, locks_dir: Path, lease_s: float, poll_s: float = 0.05):
        self.path = path
        self.locks_dir = locks_dir
        self.lease_s = lease_s
        self.poll_s = poll_s
        self._owner: _Owner | None = None
        self._token: str | None = None

    def acquire(self, blocking: bool) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        delay = self.poll_s
        while True:
            if self._try_once():
                return True
            if not blocking:
                return False
            time.sleep(delay)
            delay = min(delay * 1.5, 1.0)

    def _try_once(self) -> bool:
        owner = _Owner.get(self.locks_dir, self.lease_s)
        token = uuid.uuid4().hex
        record = {
            "owner": owner.id,
            "token": token,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "created": time.time(),
        }
        if _write_new(self.path, record):
            self._owner, self._token = owner, token
            owner.held += 1
            return True
        self._reclaim_if_dead()
        return False

    def _reclaim_if_dead(self) -> None:
        current = _read_json(self.path)
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return  # released meanwhile: the next try may take it
        if current is None:
            return
        token = current.get("token")
        # a lock file is never rewritten, so its token (or, unreadable, its inode) names it
        ident = str(token) if token else f"ino{st.st_ino}-{st.st_mtime_ns}"
        try:
            created = float(current.get("created") or st.st_mtime)
        except (TypeError, ValueError):
            created = st.st_mtime
        if token and _owner_alive(self.locks_dir, str(current.get("owner")), created, self.lease_s):
            return
        if not token and time.time() < created + self.lease_s + _grace(self.lease_s):
            return  # unreadable lock: wait a full lease since it was written
        # One reclaimer per dead lock: the exclusive marker named after the lock's identity.
        marker = self.path.with_name(f"{self.path.name}.reclaim.{ident}")
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return
        try:
            os.write(fd, f"{socket.gethostname()} {os.getpid()} {time.time()}\n".encode())
            os.close(fd)
            again = _read_json(self.path)
            try:
                st_again = os.stat(self.path)
            except FileNotFoundError:
                return
            same = (
                again is not None and again.get("token") == token
                if token
                else (st_again.st_ino, st_again.st_mtime_ns) == (st.st_ino, st.st_mtime_ns)
            )
            if same:
                # Nobody else can remove this lock (the marker is ours) nor revive it (expired);
                # once it is gone its identity never comes back, so the marker can go too.
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.path)
                if token:
                    _drop_expired_owner(self.locks_dir, str(current.get("owner")), self.lease_s)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(marker)

    def held(self) -> bool:
        """Whether the lease is still this process's: its heartbeat kept it alive and the lock
        file still carries its token.  False after a stall longer than the lease (another process
        may have reclaimed the key and be computing it): the caller must not write its result."""
        owner, token = self._owner, self._token
        if owner is None or not owner.valid():
            return False
        current = _read_json(self.path)
        return current is not None and current.get("token") == token

    def release(self) -> None:
        owner, token = self._owner, self._token
        self._owner = self._token = None
        if owner is None:
            return
        owner.held -= 1
        if not owner.valid():
            return  # our lease lapsed: the lock may be someone else's now; leave it to expire
        current = _read_json(self.path)
        if current is not None and current.get("token") == token:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
