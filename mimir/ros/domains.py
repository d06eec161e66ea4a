"""ROS domain ids claimed by live processes, so that graphs started side by side never meet.

A claim is a lock file ``<domain>.pid`` in a shared folder that holds the claiming process's
pid; a claim whose owner is gone is stale and taken over. Test processes and parallel
evaluation trials claim from the same pool (domains 1 to 100).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

#: The folder of the lock files (shared by every user of the pool on this machine).
DOMAIN_LOCKS = Path(tempfile.gettempdir()) / "mimir-ros-domains"

#: Domain ids handed out: 1 to 100 (0, the default, is left to interactive use).
POOL = range(1, 101)


class NoFreeDomainError(RuntimeError):
    """Every domain id of the pool is held by a live process."""


def _owner_alive(lock: Path) -> bool:
    try:
        owner = int(lock.read_text() or "0")
        os.kill(owner, 0)
    except (ValueError, ProcessLookupError, FileNotFoundError):
        return False
    except PermissionError:
        return True  # a live process of another user
    return True


def claim_domain_id(owner: int | None = None, *, exclude: frozenset[int] = frozenset()) -> int:
    """Claim a domain id that no live process holds, for ``owner`` (default: this process).

    Args:
        owner: pid written into the claim; the claim lapses when that process ends.
        exclude: ids not to take (already claimed by the caller).

    Raises:
        NoFreeDomainError: every id of the pool is held.
    """
    pid = os.getpid() if owner is None else owner
    DOMAIN_LOCKS.mkdir(exist_ok=True)
    start = pid % len(POOL)
    for offset in range(len(POOL)):
        domain = POOL[(start + offset) % len(POOL)]
        if domain in exclude:
            continue
        lock = DOMAIN_LOCKS / f"{domain}.pid"
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            if _owner_alive(lock):
                continue
            lock.unlink(missing_ok=True)  # stale: its owner is gone
            try:
                fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                continue
        with os.fdopen(fd, "w") as handle:
            handle.write(str(pid))
        return domain
    raise NoFreeDomainError(f"all ROS domain ids {POOL.start}..{POOL.stop - 1} are claimed "
                            f"by live processes (see {DOMAIN_LOCKS})")


def release_domain_id(domain: int) -> None:
    """Give a claim of this process back (a claim of another process is left alone)."""
    lock = DOMAIN_LOCKS / f"{domain}.pid"
    try:
        if int(lock.read_text() or "0") == os.getpid():
            lock.unlink()
    except (ValueError, FileNotFoundError):
        return
