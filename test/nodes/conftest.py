"""Fixtures for node tests: a fresh rclpy context, a spinning executor and a driver node.

Every test gets its own :class:`rclpy.context.Context` (the DDS domain is set per test process
by test/conftest.py). Nodes under test are created with ``context=ros_context`` and handed to
``ros_executor.add_node``; the executor spins in a background thread and every node added to it
is destroyed after the test.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest
import rclpy
from rclpy.context import Context
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node


@pytest.fixture
def ros_context() -> Iterator[Context]:
    """A fresh rclpy context for one test."""
    context = Context()
    rclpy.init(context=context)
    try:
        yield context
    finally:
        rclpy.try_shutdown(context=context)


@pytest.fixture
def ros_executor(ros_context: Context) -> Iterator[MultiThreadedExecutor]:
    """A multi-threaded executor spinning in a background thread for one test."""
    executor = MultiThreadedExecutor(num_threads=4, context=ros_context)
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


@pytest.fixture
def spin_node(ros_context: Context, ros_executor: MultiThreadedExecutor) -> Node:
    """A driver node (publishers, subscribers, clients of the test) that is being spun."""
    node = rclpy.create_node("mimir_test_driver", context=ros_context)
    ros_executor.add_node(node)
    return node


@pytest.fixture
def wait_for() -> Callable[..., bool]:
    """``wait_for(predicate, timeout=20.0)``: poll until the predicate holds or time runs out."""

    def _wait(predicate: Callable[[], bool], timeout: float = 20.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return True
            time.sleep(0.02)
        return bool(predicate())

    return _wait
