"""Fixtures for tests that start ROS 2 nodes in this process."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import rclpy
from rclpy.context import Context
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node


@pytest.fixture
def ros_context() -> Iterator[Context]:
    """A fresh rclpy context for one test (the domain id is set by test/conftest.py)."""
    context = Context()
    rclpy.init(context=context)
    try:
        yield context
    finally:
        rclpy.try_shutdown(context=context)


@pytest.fixture
def spin_node(ros_context: Context) -> Iterator[Node]:
    """A node spinning on a background executor for the length of one test."""
    node = rclpy.create_node("mimir_test_driver", context=ros_context)
    executor = MultiThreadedExecutor(context=ros_context)
    executor.add_node(node)
    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()
    try:
        yield node
    finally:
        executor.shutdown()
        node.destroy_node()
        thread.join(timeout=5.0)
