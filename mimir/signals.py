"""Signal handlers for the length of a block, restored afterwards.

Only the main thread may install handlers; elsewhere :func:`handling` leaves them alone and
the block runs unchanged. The command-line jobs use it to turn SIGTERM into a clean exit, to
stop a recording on Ctrl-C, and to make Ctrl-C end a hold even in a process that was started
with SIGINT ignored.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

Handler = Callable[[int, FrameType | None], Any]


@contextmanager
def handling(signals: Iterable[signal.Signals], handler: Handler | Any,
             *, only_if_ignored: bool = False) -> Iterator[None]:
    """Install ``handler`` (a function or ``signal.default_int_handler``) for ``signals``
    while the block runs. With ``only_if_ignored`` a signal keeps its handler unless it is
    ignored (SIG_IGN)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for sig in signals:
        if only_if_ignored and signal.getsignal(sig) is not signal.SIG_IGN:
            continue
        previous[sig] = signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
