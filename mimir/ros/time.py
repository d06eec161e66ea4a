"""Conversions between builtin_interfaces/Time and float seconds."""

from __future__ import annotations

import math

from builtin_interfaces.msg import Time
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
