"""A second OS process for the cross-process tests: serves mimir interfaces over DDS.

Run as ``python peer_node.py``; prints READY once its endpoints exist and runs until killed.
- subscribes to ``peer/graph`` (SceneGraph) and answers each with a MemoryEvent on ``peer/events``;
- serves ``peer/update_node`` (UpdateNode): known id ``cabinet_3``, anything else UNKNOWN_NODE;
- serves ``peer/execute`` (ExecutePrimitive): three feedback phases, then a result.
"""

from __future__ import annotations

import sys
import time

import rclpy
from rclpy.action import ActionServer
from rclpy.action.server import ServerGoalHandle
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node

from mimir.ros import qos
from mimir.ros.runtime import HandOffExecutor
from mimir_msgs.action import ExecutePrimitive
from mimir_msgs.msg import MemoryEvent, SceneGraph, SceneNode
from mimir_msgs.srv import UpdateNode


class Peer(Node):
    def __init__(self) -> None:
        super().__init__("mimir_test_peer")
        self._events = self.create_publisher(MemoryEvent, "peer/events", qos.EVENTS)
        self.create_subscription(SceneGraph, "peer/graph", self._on_graph, qos.LATCHED)
        self.create_service(UpdateNode, "peer/update_node", self._on_update)
        self._action = ActionServer(self, ExecutePrimitive, "peer/execute", self._on_execute)

    def _on_graph(self, msg: SceneGraph) -> None:
        event = MemoryEvent(event_id=f"seen-{msg.revision}", kind="graph_received",
                            subject_id=",".join(n.id for n in msg.nodes), sequence=msg.revision)
        event.header.stamp = msg.header.stamp
        self._events.publish(event)

    def _on_update(self, request: UpdateNode.Request, response: UpdateNode.Response
                   ) -> UpdateNode.Response:
        if request.node_id != "cabinet_3":
            response.error_code = UpdateNode.Response.UNKNOWN_NODE
            response.error_msg = f"no node {request.node_id!r}"
            return response
        response.node = SceneNode(id=request.node_id, label="cabinet",
                                  properties=list(request.properties))
        response.revision = 7
        return response

    def _on_execute(self, handle: ServerGoalHandle) -> ExecutePrimitive.Result:
        for i, phase in enumerate(("approach", "grasp", "pull")):
            feedback = ExecutePrimitive.Feedback(phase=phase, progress=(i + 1) / 3.0)
            handle.publish_feedback(feedback)
            time.sleep(0.05)
        handle.succeed()
        return ExecutePrimitive.Result(success=True, outcome="OPENED",
                                         interaction_id=f"{handle.request.primitive}-1")


def main() -> int:
    rclpy.init()
    node = Peer()
    executor = HandOffExecutor()
    executor.add_node(node)
    print("READY", flush=True)
    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        return 0
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
