"""Helpers shared by the tests that talk to nodes over DDS."""

from __future__ import annotations

import time
from typing import Any

from rclpy.node import Node


def call_service(node: Node, srv_type: Any, name: str, request: Any,
                 timeout: float = 20.0) -> Any:
    """Call a service from ``node`` (spun by the test's executor) and return its response.

    Fails the test when the service does not appear or does not answer within ``timeout``.
    """
    client = node.create_client(srv_type, name)
    try:
        assert client.wait_for_service(timeout_sec=timeout), f"service {name} not available"
        future = client.call_async(request)
        deadline = time.monotonic() + timeout
        while not future.done() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert future.done(), f"service {name} did not answer within {timeout} s"
        return future.result()
    finally:
        node.destroy_client(client)
