"""Fuzz the executor node over DDS: its primitive action, its reset service and its camera inputs.

The node drives fake TidyBot++ base and arm servers (spawned processes speaking the robot's RPC
interface; the arm has an empty world). Generated goals name unknown primitives and targets,
carry NaN and far-away target poses, huge strings and odd parameters; each must be rejected or
end with a code the action documents, and the node must still reset the robot and drive it to
a near pose afterwards.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import rclpy
from fuzz_messages import cases
from fuzz_runner import (
    TIMEOUT_S,
    Caller,
    Row,
    Watched,
    fuzz_interface,
    watched,
)
from geometry_msgs.msg import PoseStamped
from hypothesis import strategies as st
from rclpy.context import Context
from rclpy.node import Node
from rclpy.parameter import Parameter
from ros_helpers import wait_until
from sensor_msgs.msg import CameraInfo, Image
from std_srvs.srv import Trigger

from mimir.nodes.robot.executor_node import ExecutorNode
from mimir.ros.actions import ActionClient
from mimir.ros.tf import TransformPublisher, matrix_to_transform
from mimir.ros.time import from_seconds
from mimir_msgs.action import ExecutePrimitive
from mimir_msgs.msg import Segmentation
from mimir_robot.fakes import start_fake_server

pytestmark = [pytest.mark.ros, pytest.mark.timeout(TIMEOUT_S)]

CAMERA = "pole"


@dataclass
class ExecutorRig:
    driver: Node
    ex: Watched
    reset: Caller

    def probe(self) -> None:
        """The node still resets the robot and drives the base 5 cm."""
        reply = self.reset.call(Trigger.Request(), 30.0, self.ex.alive)
        assert reply is not None and reply.success, reply
        client = ActionClient(self.driver, ExecutePrimitive, "execute_primitive")
        try:
            assert client.wait_for_server(timeout_sec=10.0)
            sent = client.send_goal_async(_near_move())
            assert wait_until(sent.done, 20.0) and sent.result().accepted
            result = sent.result().get_result_async()
            assert wait_until(result.done, 60.0), "a 5 cm move did not finish"
            done = result.result().result
            assert done.success and done.error_code == ExecutePrimitive.Result.NONE, done
        finally:
            client.destroy()


def _near_move() -> ExecutePrimitive.Goal:
    pose = PoseStamped()
    pose.header.frame_id, pose.header.stamp = "map", from_seconds(time.time())
    pose.pose.position.x, pose.pose.orientation.w = 0.05, 1.0
    return ExecutePrimitive.Goal(primitive="move_to", use_target_pose=True, target_pose=pose,
                                 task="fuzz")


@pytest.fixture(scope="module")
def rig() -> Iterator[ExecutorRig]:
    authkey = b"mimir-fuzz-" + secrets.token_hex(8).encode()
    base, stop_base = start_fake_server("Base", authkey, rate=8.0)
    arm, stop_arm = start_fake_server("Arm", authkey, rate=12.0, gripper_rate=12.0)
    context = Context()
    rclpy.init(context=context)
    try:
        with watched(context) as ex:
            node = ExecutorNode(context=context, parameter_overrides=[
                Parameter(k, value=v) for k, v in {
                    "host": "127.0.0.1", "base_port": base[1], "arm_port": arm[1],
                    "authkey": authkey.decode(), "reset_on_start": True,
                    "pointing_cameras": [CAMERA], "call_timeout_s": 1.5,
                    "connect_timeout_s": 2.0, "view_timeout_s": 1.0,
                    "max_ee_speed": 0.3}.items()])
            driver = rclpy.create_node("fuzz_driver", context=context)
            ex.add(node)
            ex.add(driver)
            # localisation's part: the map where odometry started
            TransformPublisher(driver, static=True).send(
                [matrix_to_transform(np.eye(4), "map", "odom", 0.0)])
            assert wait_until(node._ready.is_set, 20.0), "robot link never came up"
            reset = Caller(driver, Trigger, "robot/reset")
            reset.ready()
            yield ExecutorRig(driver, ex, reset)
    finally:
        rclpy.try_shutdown(context=context)
        stop_base(kill=True)
        stop_arm(kill=True)


def _goals() -> st.SearchStrategy[Any]:
    primitives = st.sampled_from(["move_to", "open", "close", "inspect", "pick", "place",
                                  "", "fly", "MOVE_TO"])
    return st.one_of(
        cases(ExecutePrimitive.Goal, _near_move, {"primitive": primitives}),
        cases(ExecutePrimitive.Goal, hints={"primitive": primitives}),
    )


INTERFACES: dict[str, tuple[str, type, Any]] = {
    "execute_primitive": ("action", ExecutePrimitive, _goals),
    "robot/reset": ("service", Trigger, lambda: cases(Trigger.Request)),
    f"cameras/{CAMERA}/depth/image_raw": ("topic", Image, lambda: cases(Image)),
    f"cameras/{CAMERA}/color/camera_info": ("topic", CameraInfo, lambda: cases(CameraInfo)),
    f"cameras/{CAMERA}/segmentation": ("topic", Segmentation, lambda: cases(Segmentation)),
    f"cameras/{CAMERA}/parts": ("topic", Segmentation, lambda: cases(Segmentation)),
}


def test_the_rig_robot_moves(rig: ExecutorRig) -> None:
    """The probe works on the fresh node, so a probe failure after fuzzing means something."""
    rig.probe()


@pytest.mark.parametrize("interface", list(INTERFACES))
def test_executor_interface_survives_fuzzing(rig: ExecutorRig, interface: str) -> None:
    kind, msg_type, strategy = INTERFACES[interface]
    fuzz_interface(Row("executor", interface, kind), rig.driver, rig.ex, msg_type, strategy(),
                   probe=rig.probe, timeout=90.0)
