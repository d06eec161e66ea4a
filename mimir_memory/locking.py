"""Serialise the public methods of a store for nodes that run callbacks on several threads."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
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
