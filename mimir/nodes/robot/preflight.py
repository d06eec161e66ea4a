"""The pre-flight's eyes on DDS: listen to TF and the cameras for a while, ask the planner's gate.

``mimir doctor --robot`` calls :func:`observe`; the checks themselves are
:mod:`mimir_robot.preflight` (no ROS there). The observer only listens: raw subscriptions (no
image is deserialised), a parameter query, nothing published.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

import rclpy
from rcl_interfaces.srv import GetParameters
from rclpy.client import Client
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from sensor_msgs.msg import CameraInfo, Image
from tf2_msgs.msg import TFMessage

from mimir.ros.qos import SENSOR, TF, TF_STATIC
from mimir_robot import contract as c
from mimir_robot.preflight import Observation

#: Name of the planner node whose ``operator_gate`` parameter is read.
PLANNER_NODE = "planner"


def observe(cameras: Iterable[str], window_s: float, namespace: str = "",
            context: rclpy.Context | None = None) -> Observation:
    """Listen for ``window_s`` seconds and return what was seen.

    ``context`` is an initialised rclpy context (the default context when None).
    """
    node = Node("mimir_preflight", namespace=namespace or "", context=context)
    seen = Observation(window_s=window_s)
    try:
        def on_tf(msg: TFMessage) -> None:
            for t in msg.transforms:
                seen.parents[t.child_frame_id.lstrip("/")] = t.header.frame_id.lstrip("/")

        node.create_subscription(TFMessage, c.TOPIC_TF, on_tf, TF)
        node.create_subscription(TFMessage, "/tf_static", on_tf, TF_STATIC)
        for camera in cameras:
            topics = c.camera_topics(camera)
            for topic, kind in ((topics.color, Image), (topics.depth, Image),
                                (topics.camera_info, CameraInfo)):
                arrivals = seen.arrivals.setdefault(topic, [])
                node.create_subscription(kind, topic,
                                         lambda _m, a=arrivals: a.append(time.monotonic()),
                                         SENSOR, raw=True)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        deadline = time.monotonic() + window_s
        while time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.05)
        seen.gate = _planner_gate(node, executor, timeout_s=min(window_s, 3.0))
    finally:
        node.destroy_node()
    return seen


def _planner_gate(node: Node, executor: SingleThreadedExecutor, timeout_s: float) -> bool | None:
    """The planner's ``operator_gate``, or None when it does not answer in time."""
    client: Client = node.create_client(GetParameters, f"{PLANNER_NODE}/get_parameters")
    try:
        if not client.wait_for_service(timeout_sec=timeout_s):
            return None
        future = client.call_async(GetParameters.Request(names=["operator_gate"]))
        executor.spin_until_future_complete(future, timeout_sec=timeout_s)
        response = future.result() if future.done() else None
        if response is None or not response.values:
            return None
        return bool(response.values[0].bool_value)
    finally:
        node.destroy_client(client)


def observe_once(cameras: Iterable[str], window_s: float, namespace: str = "") -> Observation:
    """:func:`observe` in a context of its own, shut down afterwards (for the command line)."""
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        return observe(cameras, window_s, namespace, context)
    finally:
        rclpy.shutdown(context=context)
