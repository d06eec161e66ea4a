"""The action client that is safe to create on a node that is already spinning."""

from __future__ import annotations

from typing import Any

import pytest
import rclpy.action
from rclpy.context import Context
from rclpy.node import Node

from mimir.ros.actions import ActionClient
from mimir_msgs.action import ExecutePrimitive

pytestmark = pytest.mark.ros


class _EagerNode(Node):
    """Asks every new waitable for its entities at once, as a spinning executor may."""

    def add_waitable(self, waitable: Any) -> None:
        super().add_waitable(waitable)
        waitable.get_num_entities()


def test_client_is_usable_the_moment_it_is_registered(ros_context: Context) -> None:
    node = _EagerNode("eager", context=ros_context)
    try:
        # the plain rclpy client is not: this is the window the subclass closes
        with pytest.raises(AttributeError, match="_lock"):
            rclpy.action.ActionClient(node, ExecutePrimitive, "plain")
        client = ActionClient(node, ExecutePrimitive, "safe")
        assert not client.server_is_ready()
        client.destroy()
    finally:
        node.destroy_node()
