"""World memory's lock together with the memory events that wait for it to be released."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence

from mimir_memory.events import MemoryEvent
from mimir_memory.locking import CallersFirstLock


class LockedOutbox:
    """Holds world memory for one user at a time; publishes what that user stored afterwards.

    Events emitted while the lock is held are published once it is released, so publishing
    (a message per event) does not hold up the next user of memory. The publishing lock is
    taken before the memory lock is let go, so events still leave in the order they were
    stored (a user that finishes while the one before still publishes keeps memory until its
    own turn to publish). The writer thread takes the lock with ``hold(writer=True)`` and gives
    way to every other user (:class:`CallersFirstLock`).
    """

    def __init__(self, publish: Callable[[MemoryEvent], None]) -> None:
        self._publish = publish
        self._lock = CallersFirstLock()
        self._publishing = threading.Lock()
        self._pending: list[MemoryEvent] = []

    def emit(self, events: Sequence[MemoryEvent]) -> None:
        """Publish these stored events after the lock is released (call while holding it)."""
        self._pending.extend(events)

    @contextlib.contextmanager
    def hold(self, *, writer: bool = False) -> Iterator[None]:
        """Hold world memory, then publish the events emitted meanwhile, also when the body
        raised (they are stored)."""
        outbox: list[MemoryEvent] = []
        handed_over = False
        try:
            with self._lock.writer() if writer else self._lock.caller():
                try:
                    yield
                finally:
                    outbox, self._pending = self._pending, []
                    self._publishing.acquire()
                    handed_over = True
        finally:
            if handed_over:
                try:
                    for event in outbox:
                        self._publish(event)
                finally:
                    self._publishing.release()
