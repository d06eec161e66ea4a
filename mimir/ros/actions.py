"""An action client that may be created on a node an executor is already spinning.

rclpy's ``ActionClient.__init__`` registers the client as a waitable of its node before it
creates the lock that ``get_num_entities`` takes. An executor spinning that node in another
thread can reach the half-built client in that window; the ``AttributeError`` ends the
executor's spin thread and every callback of every node on it stops. Creating the lock first
closes the window. Use :class:`ActionClient` from here wherever a client may be created while
its node spins (tests do this all the time; a node's constructor does not need it).
"""

from __future__ import annotations

import threading
from typing import Any

from rclpy.action import ActionClient as _RclpyActionClient


class ActionClient(_RclpyActionClient):
    """:class:`rclpy.action.ActionClient` with its lock created before it becomes visible."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._lock = threading.Lock()
        super().__init__(*args, **kwargs)
