"""Locks for stores used from several threads: serialised public methods, and a mutex in
which a background writer gives way to callers that answer someone."""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator
from typing import Concatenate, ParamSpec, Protocol, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


class HasLock(Protocol):
    """An object carrying a re-entrant lock named ``lock``."""

    lock: threading.RLock


S = TypeVar("S", bound=HasLock)


def synchronized(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
    """Run ``method`` while holding ``self.lock``."""

    @functools.wraps(method)
    def wrapper(self: S, *args: P.args, **kwargs: P.kwargs) -> R:
        with self.lock:
            return method(self, *args, **kwargs)

    return wrapper


class CallersFirstLock:
    """One mutex for a background writer and for callers that answer someone (services).

    The writer takes it with :meth:`writer`, once per unit of work; callers take it with
    :meth:`caller`. While a caller waits for the mutex or holds it, the writer does not start
    another unit, so a caller waits for at most the unit in progress and then runs without the
    writer competing for the interpreter. Callers are short and sparse, so the writer is only
    delayed, never starved.
    """

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._callers = threading.Condition()
        self._waiting = 0

    @contextlib.contextmanager
    def caller(self) -> Iterator[None]:
        """Hold the mutex, ahead of the writer's next unit."""
        with self._callers:
            self._waiting += 1
        try:
            with self._mutex:
                yield
        finally:
            with self._callers:
                self._waiting -= 1
                if not self._waiting:
                    self._callers.notify_all()

    @contextlib.contextmanager
    def writer(self) -> Iterator[None]:
        """Hold the mutex for one unit of work, once no caller waits for it."""
        with self._callers:
            while self._waiting:
                self._callers.wait()
        with self._mutex:
            yield
