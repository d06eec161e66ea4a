"""Conversions between builtin_interfaces/Time and float seconds, and the clock a control loop
paces itself by."""

from __future__ import annotations

import math
import threading
import time

from builtin_interfaces.msg import Time
from rclpy.clock import ROSClock
from rclpy.node import Node


def to_seconds(stamp: Time) -> float:
    """A Time message as float seconds."""
    return float(stamp.sec) + float(stamp.nanosec) * 1e-9


def from_seconds(seconds: float) -> Time:
    """Float seconds (finite, >= 0) as a Time message."""
    if not math.isfinite(seconds) or seconds < 0.0:
        raise ValueError(f"stamp must be finite and non-negative, got {seconds!r}")
    total_ns = round(seconds * 1e9)
    return Time(sec=int(total_ns // 1_000_000_000), nanosec=int(total_ns % 1_000_000_000))


def clock_seconds(node: Node) -> float:
    """``node``'s clock now, in seconds: wall time, or under ``use_sim_time`` the latest
    ``/clock`` (zero before the first one, which :meth:`mimir.bounds.Bounds.stamp` reads as
    "not known yet")."""
    return float(node.get_clock().now().nanoseconds) * 1e-9


class ClockPacer:
    """Time and waiting for a loop that streams commands to a robot at a fixed period.

    On a robot (``use_sim_time`` false) it is monotonic wall time and ``time.sleep``. Under
    ``use_sim_time`` it is the node's clock, driven by ``/clock``: a period is a period of
    simulation time, so a simulator that falls behind wall time (rendering on a loaded machine)
    slows the streamed motion with it instead of seeing targets arrive faster than the robot's
    speed limits allow.

    A wait under simulated time ends early when ``cancel`` is set, when the node's context
    shuts down, or when ``/clock`` has not moved for ``stall_s`` of wall time (a stopped
    simulator; the next call to the robot then reports what is wrong).

    Args:
        node: the node whose clock is read.
        cancel: ends a wait at once when set.
        poll_s: wall time between looks at the clock while waiting (s).
        stall_s: wall time without a clock tick after which a wait gives up (s).
    """

    def __init__(self, node: Node, *, cancel: threading.Event | None = None,
                 poll_s: float = 0.002, stall_s: float = 2.0) -> None:
        if not poll_s > 0.0 or not stall_s > 0.0:
            raise ValueError(f"poll_s and stall_s must be positive, got {poll_s}, {stall_s}")
        self._node = node
        self._cancel = cancel or threading.Event()
        self._poll_s = poll_s
        self._stall_s = stall_s

    @property
    def simulated(self) -> bool:
        """Whether the node runs on ``/clock`` (``use_sim_time``)."""
        clock = self._node.get_clock()
        return isinstance(clock, ROSClock) and clock.ros_time_is_active

    def now(self) -> float:
        """Seconds on the pacing clock."""
        return clock_seconds(self._node) if self.simulated else time.monotonic()

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` on the pacing clock (see the class for when a wait ends early)."""
        if seconds <= 0.0:
            return
        if not self.simulated:
            time.sleep(seconds)
            return
        due = clock_seconds(self._node) + seconds
        seen, seen_at = clock_seconds(self._node), time.monotonic()
        while not self._cancel.is_set() and self._node.context.ok():
            now = clock_seconds(self._node)
            if now >= due:
                return
            wall = time.monotonic()
            if now != seen:
                seen, seen_at = now, wall
            elif wall - seen_at >= self._stall_s:
                return
            time.sleep(self._poll_s)
