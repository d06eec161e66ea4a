"""Helpers shared by the tests that talk to nodes over DDS."""

from __future__ import annotations

import ast
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import Point
from rclpy.context import Context
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node

from mimir.ros import qos
from mimir.ros.runtime import HandOffExecutor
from mimir.ros.time import from_seconds
from mimir_msgs.msg import ObjectObservation, ObjectObservationArray

Vec3 = tuple[float, float, float]
REPO_ROOT = Path(__file__).resolve().parents[1]


def wait_until(predicate: Callable[[], bool], timeout: float = 20.0) -> bool:
    """Poll ``predicate`` until it holds or ``timeout`` seconds pass; its last value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return bool(predicate())


@contextmanager
def spinning_executor(context: Context, num_threads: int = 4) -> Iterator[MultiThreadedExecutor]:
    """A multi-threaded executor (the nodes' :class:`HandOffExecutor`) spinning in a background
    thread; its nodes die with it."""
    executor = HandOffExecutor(num_threads=num_threads, context=context)
    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()
    try:
        yield executor
    finally:
        nodes = list(executor.get_nodes())
        executor.shutdown(timeout_sec=5.0)
        for node in nodes:
            node.destroy_node()
        thread.join(timeout=5.0)


def call_service(node: Node, srv_type: Any, name: str, request: Any,
                 timeout: float = 20.0, *, available_within: float | None = None) -> Any:
    """Call a service from ``node`` (spun by the test's executor) and return its response.

    Fails the test when the service does not appear within ``available_within`` (default:
    ``timeout``) or does not answer within ``timeout``.
    """
    client: Any = node.create_client(srv_type, name)
    wait_s = timeout if available_within is None else available_within
    try:
        assert client.wait_for_service(timeout_sec=wait_s), f"service {name} not available"
        future = client.call_async(request)
        deadline = time.monotonic() + timeout
        while not future.done() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert future.done(), f"service {name} did not answer within {timeout} s"
        return future.result()
    finally:
        node.destroy_client(client)


def point(xyz: Vec3) -> Point:
    """A ``geometry_msgs/Point`` from three numbers."""
    return Point(x=float(xyz[0]), y=float(xyz[1]), z=float(xyz[2]))


def observation_msg(label: str, centre: Vec3, *, detection_id: str, camera: str = "pole",
                    half: float = 0.1, lo: Vec3 | None = None, hi: Vec3 | None = None,
                    stamp: float = 5.0, point_count: int = 500) -> ObjectObservation:
    """One observation in ``map`` with score 0.9: a box of ``half`` around ``centre``, or lo..hi."""
    msg = ObjectObservation(label=label, camera=camera, score=0.9, point_count=point_count,
                            detection_id=detection_id)
    msg.header.frame_id = "map"
    msg.header.stamp = from_seconds(stamp)
    msg.centroid = point(centre)
    msg.bbox_min = point(lo or (centre[0] - half, centre[1] - half, centre[2] - half))
    msg.bbox_max = point(hi or (centre[0] + half, centre[1] + half, centre[2] + half))
    return msg


def observation_batch(*observations: ObjectObservation, camera: str = "pole",
                      frame: str = "map", stamp: float | None = None) -> ObjectObservationArray:
    """The observations as one array in ``frame``, stamped ``stamp`` (default: the first's)."""
    msg = ObjectObservationArray(camera=camera, observations=list(observations))
    msg.header.frame_id = frame
    msg.header.stamp = observations[0].header.stamp if stamp is None else from_seconds(stamp)
    return msg


class DiagnosticsCounters:
    """The latest integer counters of the node whose /diagnostics status name ends in
    ``node_suffix``; subclasses share ``_lock`` for what else they collect."""

    def __init__(self, node: Node, node_suffix: str) -> None:
        self._lock = threading.Lock()
        self._suffix = node_suffix
        self.counters: dict[str, int] = {}
        node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diag, qos.EVENTS)

    def _on_diag(self, msg: DiagnosticArray) -> None:
        for status in msg.status:
            if status.name.endswith(self._suffix):
                with self._lock:
                    self.counters = {kv.key: int(kv.value) for kv in status.values}

    def count(self, key: str) -> int:
        """The counter's latest value (0 before the node reported it)."""
        with self._lock:
            return self.counters.get(key, 0)


def console_scripts() -> dict[str, str]:
    """setup.py's ``NODES`` table: console script name to ``module:function``."""
    tree = ast.parse((REPO_ROOT / "setup.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "NODES" for t in node.targets
        ):
            value = ast.literal_eval(node.value)
            assert isinstance(value, dict)
            return value
    raise AssertionError("setup.py defines no NODES table")


def stop_process(proc: subprocess.Popen[Any], timeout: float = 10.0) -> None:
    """Terminate ``proc``; kill it when it has not exited within ``timeout`` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5.0)
