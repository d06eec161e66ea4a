"""MuJoCo bridge node over real DDS: sensor streams, the simulated robot behind its RPC servers,
and judging."""

from __future__ import annotations

import os

os.environ.setdefault("MUJOCO_GL", "egl")

import json
import secrets
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import Point
from rclpy.context import Context
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CameraInfo, Image, JointState
from tf2_msgs.msg import TFMessage

from mimir.nodes.perception.messages import msg_to_segmentation
from mimir.nodes.sim import messages as conv
from mimir.nodes.sim.bridge_node import BridgeStartupError, SimBridgeNode
from mimir.ros import qos
from mimir.ros.images import depth_to_metres, image_to_rgb
from mimir.ros.tf import transform_to_matrix
from mimir.ros.time import to_seconds
from mimir_msgs.msg import AnswerEntity, Segmentation
from mimir_msgs.srv import BeginInstruction, JudgeInstruction
from mimir_robot import contract as c
from mimir_robot.requests import UnknownPrimitiveError, UnknownTargetError, build_request
from mimir_robot.rpc import Backoff, RobotLink
from mimir_sim.entity_labels import LabelMap, labels_compatible
from mimir_sim.instruction_desk import BeginResult, JudgeResult, NamedEntity
from mimir_sim.scenario import default_scenarios_dir
from mimir_sim.scene import Entity
from mimir_sim.scene_layout import start_pose_for
from mimir_sim.truth_segmentation import part_tables, segmentation_tables

REPO = Path(__file__).resolve().parents[2]
AUTHKEY = "mimir-test-" + secrets.token_hex(8)


# ------------------------------------------------------------------------------ pure helpers


def test_label_map_and_compatibility() -> None:
    labels = LabelMap(
        [
            ("cabinet", "cabinet"),
            ("ketchup", "ketchup bottle"),
            ("bottle", "bottle"),
            ("bread", "bread"),
        ]
    )
    assert labels.map("upper cabinet") == "cabinet"
    assert labels.map("ketchup bottle") == "ketchup"  # by prompt, not the generic "bottle"
    assert labels.map("water bottle") == "bottle"
    assert labels.map("bread loaf") == "bread"
    assert labels.map("coffee tin") == "coffee tin"  # nothing matches: kept
    assert labels_compatible("cabinet", "upper cabinet")
    assert labels_compatible("ketchup", "ketchup bottle")
    assert labels_compatible("Upper_Cabinet", "upper cabinet")
    assert not labels_compatible("lower cabinet", "upper cabinet")
    assert not labels_compatible("banana", "ketchup bottle")
    assert not labels_compatible("cab", "cabinet")  # whole words only


def test_requests_and_segmentation_tables() -> None:
    req = build_request("Move-To", "cabinet_2", (1.0, 0.0, 1.2), 0.0, {"label": "cabinet"})
    assert req.primitive == "move_to" and req.target.label == "cabinet"
    place = build_request(
        "place",
        "",
        None,
        None,
        {
            "destination_label": "counter",
            "destination_x": "1.0",
            "destination_y": "0",
            "destination_z": "0.8",
            "slot_u": "0.2",
        },
    )
    assert place.destination is not None and place.destination.position == (1.0, 0.0, 0.8)
    assert place.slot == (0.2, 0.4)
    with pytest.raises(UnknownPrimitiveError, match="teleport"):
        build_request("teleport", "x", None, None, {})
    with pytest.raises(UnknownTargetError, match="destination_x"):
        build_request("place", "", None, None, {"destination_x": "left"})
    with pytest.raises(UnknownTargetError, match="destination"):
        build_request("place", "", None, None, {"destination_label": "counter"})
    with pytest.raises(UnknownTargetError, match="slot"):
        build_request("place", "", None, None, {"slot_v": "1.5"})
    with pytest.raises(UnknownTargetError, match="finite"):
        build_request("move_to", "", (float("nan"), 0.0, 0.0), None, {})
    entities = {
        "cab_1": Entity("cab_1", "fixture", "upper cabinet"),
        "cab_1_door": Entity("cab_1_door", "door", "upper cabinet door", "cab_1"),
        "cab_1_handle": Entity("cab_1_handle", "handle", "handle", "cab_1"),
        "cab_2_handle": Entity("cab_2_handle", "handle", "handle", "cab_2"),
        "cab_2": Entity("cab_2", "fixture", "upper cabinet"),
        "ketchup_1": Entity("ketchup_1", "object", "ketchup bottle", "cab_1"),
        "robot": Entity("robot", "robot", "robot"),
        "wall": Entity("wall", "structure", "wall"),
    }
    ids = sorted(entities)
    labels, groups = segmentation_tables(
        ids, entities, LabelMap([("cabinet", "cabinet"), ("ketchup", "ketchup bottle")]))
    by_id = {ids[i]: (labels[i], groups[i]) for i in labels}
    assert by_id["cab_1_door"] == ("cabinet", "cab_1")
    assert by_id["cab_1_handle"] == ("cabinet", "cab_1")
    assert by_id["ketchup_1"] == ("ketchup", "ketchup_1")
    assert "robot" not in by_id and "wall" not in by_id
    # a label the vocabulary has no word for never leaves the simulator
    labels, _ = segmentation_tables(ids, entities, LabelMap([("cabinet", "cabinet")]))
    assert "ketchup_1" not in {ids[i] for i in labels}
    # the parts segmentation: each handle its own instance, labelled "handle"; nothing else
    labels, groups = part_tables(ids, entities)
    parts = {ids[i]: (labels[i], groups[i]) for i in labels}
    assert parts == {
        "cab_1_handle": ("handle", "cab_1_handle"),
        "cab_2_handle": ("handle", "cab_2_handle"),
    }


def test_message_conversions_of_the_bridge() -> None:
    judged = conv.judge_response(
        JudgeInstruction.Response(), JudgeResult("NONE", "", True, 0.5, {"index": 0})
    )
    assert judged.success and judged.progress == 0.5 and json.loads(judged.details_json)
    refused = conv.judge_response(
        JudgeInstruction.Response(), BeginResult("UNKNOWN_INSTRUCTION", "no such instruction")
    )
    assert refused.error_code == JudgeInstruction.Response.UNKNOWN_INSTRUCTION
    assert not refused.success and refused.details_json == ""
    begun = conv.begin_response(BeginInstruction.Response(), BeginResult("MISMATCH", "differs"))
    assert begun.error_code == BeginInstruction.Response.MISMATCH and begun.error_msg == "differs"
    entities = conv.answer_entities(
        [
            AnswerEntity(node_id="banana_4", label="banana", position=Point(x=1.0, y=2.0, z=3.0),
                         has_position=True),
            AnswerEntity(label="cabinet", position=Point(x=9.0), has_position=False),
        ]
    )
    assert entities == [NamedEntity("banana_4", "banana", (1.0, 2.0, 3.0)),
                        NamedEntity("", "cabinet", None)]
    cam = np.eye(4)
    cam[:3, 3] = (0.1, 0.0, 1.2)
    wrist = np.eye(4)
    wrist[:2, :2] = [[0.0, -1.0], [1.0, 0.0]]  # a quarter turn
    tfs = conv.sim_transforms(3.5, {"pole_color_optical_frame": cam,
                                    "wrist_color_optical_frame": wrist}, "base_link")
    # the camera mounts only: no transform from the map (the localization node sends map -> odom)
    assert [(t.header.frame_id, t.child_frame_id) for t in tfs] == [
        ("base_link", "pole_color_optical_frame"), ("base_link", "wrist_color_optical_frame")]
    assert all(to_seconds(t.header.stamp) == pytest.approx(3.5) for t in tfs)
    assert np.allclose(transform_to_matrix(tfs[0]), cam, atol=1e-9)
    assert np.allclose(transform_to_matrix(tfs[1]), wrist, atol=1e-9)


# ------------------------------------------------------------------------------ node fixtures


def bridge(context: Context, **extra: object) -> SimBridgeNode:
    values: dict[str, object] = {
        "image_width": 160,
        "image_height": 120,
        "real_time_factor": 4.0,
        "diagnostics_period": 0.5,
        "authkey": AUTHKEY,
        "base_port": 0,  # free ports: tests may run side by side
        "arm_port": 0,
        "noise_profile": "ideal",  # exact streams unless a test asks for noise
        **extra,
    }
    return SimBridgeNode(
        context=context, parameter_overrides=[Parameter(k, value=v) for k, v in values.items()]
    )


@pytest.fixture
def start_bridge(
    ros_context: Context, ros_executor: MultiThreadedExecutor
) -> Callable[..., SimBridgeNode]:
    """``start_bridge(**parameters)``: a bridge node (see :func:`bridge`) spun by the test's
    executor."""

    def start(**extra: object) -> SimBridgeNode:
        node = bridge(ros_context, **extra)
        ros_executor.add_node(node)
        return node

    return start


class Recorder:
    """Keeps every message of the topics the driver node listens to."""

    def __init__(self, node: Node) -> None:
        self.msgs: dict[str, list[Any]] = defaultdict(list)
        self._lock = threading.Lock()
        self._node = node

    def listen(self, kind: type, topic: str, profile: Any) -> None:
        def _keep(msg: Any) -> None:
            with self._lock:
                self.msgs[topic].append(msg)

        self._node.create_subscription(kind, topic, _keep, profile)

    def get(self, topic: str) -> list[Any]:
        with self._lock:
            return list(self.msgs[topic])


@pytest.fixture
def rec(spin_node: Node) -> Recorder:
    """A recorder whose subscriptions live on the test's driver node."""
    return Recorder(spin_node)


def tf_edges(rec: Recorder) -> set[tuple[str, str]]:
    return {(t.header.frame_id, t.child_frame_id) for m in rec.get("/tf") for t in m.transforms}


def counters(rec: Recorder) -> dict[str, int]:
    """The newest counters the bridge published on /diagnostics."""
    for array in reversed(rec.get("/diagnostics")):
        for status in array.status:
            if status.name.endswith("sim_bridge"):
                return {kv.key: int(kv.value) for kv in status.values}
    return {}


def test_streams_have_consistent_stamps_and_sizes(
    start_bridge: Callable[..., SimBridgeNode], rec: Recorder, wait_for: Callable[..., bool]
) -> None:
    cams = ("base", "pole", "wrist")
    for cam in cams:
        rec.listen(Image, f"cameras/{cam}/color/image_raw", qos.SENSOR)
        rec.listen(Image, f"cameras/{cam}/depth/image_raw", qos.SENSOR)
        rec.listen(CameraInfo, f"cameras/{cam}/color/camera_info", qos.SENSOR)
        rec.listen(Segmentation, f"cameras/{cam}/segmentation", qos.SENSOR)
        rec.listen(Segmentation, f"cameras/{cam}/parts", qos.SENSOR)
    rec.listen(Clock, "/clock", qos.EVENTS)
    rec.listen(TFMessage, "/tf", qos.TF)
    rec.listen(JointState, "joint_states", qos.EVENTS)
    rec.listen(DiagnosticArray, "/diagnostics", qos.EVENTS)
    start_bridge(camera_rate=4.0)

    def complete(cam: str) -> set[float]:
        stamps = [
            {to_seconds(m.header.stamp) for m in rec.get(f"cameras/{cam}/{suffix}")}
            for suffix in (
                "color/image_raw",
                "depth/image_raw",
                "color/camera_info",
                "segmentation",
                "parts",
            )
        ]
        return set.intersection(*stamps)

    assert wait_for(lambda: all(complete(c) for c in cams), timeout=60.0), "no full camera set"
    labels: set[str] = set()
    part_labels: dict[str, set[str]] = {}
    for cam in cams:
        stamp = max(complete(cam))

        def at(suffix: str, cam: str = cam, stamp: float = stamp) -> Any:
            msgs = rec.get(f"cameras/{cam}/{suffix}")
            return next(m for m in msgs if to_seconds(m.header.stamp) == stamp)

        color, depth = at("color/image_raw"), at("depth/image_raw")
        info, seg, parts_msg = at("color/camera_info"), at("segmentation"), at("parts")
        frame = f"{cam}_color_optical_frame"
        assert {
            color.header.frame_id,
            depth.header.frame_id,
            info.header.frame_id,
            seg.header.frame_id,
            parts_msg.header.frame_id,
        } == {frame}
        assert (color.encoding, depth.encoding) == ("rgb8", "32FC1")
        assert image_to_rgb(color).shape == (120, 160, 3)
        metres = depth_to_metres(depth)
        assert metres.shape == (120, 160) and np.all(np.isfinite(metres))
        assert 0.0 < float(np.median(metres)) < 10.0
        assert (info.width, info.height) == (160, 120)
        assert info.k[0] > 0 and abs(info.k[2] - 79.5) < 1e-6
        result = msg_to_segmentation(seg)
        result.validate()
        assert result.shape == (120, 160) and seg.backend == "sim_ground_truth"
        labels |= {i.label for i in result.instances}
        parts = msg_to_segmentation(parts_msg)
        parts.validate()
        assert parts.shape == (120, 160) and parts_msg.backend == "sim_ground_truth"
        part_labels[cam] = {i.label for i in parts.instances}
    assert "cabinet" in labels and "counter" in labels  # mapped to the kitchen vocabulary
    assert not labels & {"robot", "wall", "floor", "handle"}
    # the pole camera sees the handle of the cabinet the robot starts at, as a part of its own
    assert part_labels["pole"] == {"handle"}
    assert all(found <= {"handle"} for found in part_labels.values())

    assert wait_for(lambda: len(rec.get("/clock")) > 5 and len(rec.get("joint_states")) > 5)
    clocks = [to_seconds(m.clock) for m in rec.get("/clock")]
    assert clocks == sorted(clocks) and clocks[-1] > clocks[0]
    edges = tf_edges(rec)
    # the camera mounts only: map -> odom is the localization node's (wall tags), odom ->
    # base_link the executor's (odometry), never the bridge's
    assert edges == {("base_link", f"{c}_color_optical_frame") for c in cams}
    joints = rec.get("joint_states")[-1]
    assert "gripper" in joints.name and "joint_x" in joints.name
    assert len(joints.position) == len(joints.name) == len(joints.effort)
    opening = joints.position[joints.name.index("gripper")]
    assert 0.0 < opening < 0.1  # open gripper, metres

    assert wait_for(lambda: counters(rec).get("pole.frames", 0) > 0)
    report = counters(rec)
    assert report.get("state.published", 0) > 0
    # nobody connected to the robot's servers: no controller was built
    assert report.get("controllers.Base") == 0 and report.get("controllers.Arm") == 0


# ------------------------------------------------------------------------------ robot over RPC


def test_realistic_noise_reaches_the_published_streams(
    start_bridge: Callable[..., SimBridgeNode], rec: Recorder, wait_for: Callable[..., bool]
) -> None:
    rec.listen(Image, "cameras/pole/depth/image_raw", qos.SENSOR)
    rec.listen(Segmentation, "cameras/pole/segmentation", qos.SENSOR)
    node = start_bridge(camera_rate=4.0, noise_profile="realistic", noise_scale=2.0)
    assert node.noise.name == "realistic" and node.noise.scale == 2.0
    assert wait_for(lambda: len(rec.get("cameras/pole/depth/image_raw")) >= 2
                    and len(rec.get("cameras/pole/segmentation")) >= 2, timeout=60.0)
    depth = depth_to_metres(rec.get("cameras/pole/depth/image_raw")[-1])
    # a stereo camera has no depth along occlusion edges: NaN there, metres elsewhere
    assert 0.0 < float(np.mean(np.isnan(depth))) < 0.5
    scores = [i.score for m in rec.get("cameras/pole/segmentation")
              for i in msg_to_segmentation(m).instances]
    assert scores and all(0.0 < s < 1.0 for s in scores)


def test_the_simulated_robot_is_driven_only_through_rpc(
    start_bridge: Callable[..., SimBridgeNode], rec: Recorder, wait_for: Callable[..., bool]
) -> None:
    rec.listen(TFMessage, "/tf", qos.TF)
    rec.listen(DiagnosticArray, "/diagnostics", qos.EVENTS)
    node = start_bridge(cameras=["pole"], camera_rate=1.0, real_time_factor=1.0)
    base_host, base_port = node.robot.base_address
    arm_port = node.robot.arm_address[1]
    assert base_port > 0 and arm_port > 0 and base_port != arm_port
    start = node._thread.submit(node.sim.base_pose)
    assert start == pytest.approx(start_pose_for(node.sim.scene.fixtures["cab_1"]), abs=0.01)

    link = RobotLink(base_host, AUTHKEY.encode(), base_port=base_port, arm_port=arm_port,
                     connect_timeout_s=2.0, call_timeout_s=2.0,
                     backoff=Backoff(initial_s=0.05, max_s=0.2))
    link.connect(timeout_s=10.0)
    try:
        link.reset_base()
        link.reset_arm()
        odom = link.base_state()
        assert (odom.x, odom.y, odom.theta) == pytest.approx((0.0, 0.0, 0.0), abs=0.01)
        reset_at = time.monotonic()
        # back away from the counter for ~2 s at the control rate (10 Hz)
        while time.monotonic() - reset_at < 2.0:
            link.send_base_pose(-0.4, 0.0, 0.0)
            time.sleep(c.CONTROL_PERIOD_S)
        odom = link.base_state()
        assert odom.x < -0.1 and abs(odom.y) < 0.05 and abs(odom.theta) < 0.05, odom
        moved = node._thread.submit(node.sim.base_pose)
        assert moved[0] == pytest.approx(start[0] + odom.x, abs=0.02)  # start faces +x
        # the simulator tells nobody where the robot is: no map -> odom, no odom -> base_link
        assert not {("map", "odom"), ("odom", "base_link")} & tf_edges(rec)
        assert wait_for(lambda: counters(rec).get("controllers.Base") == 1
                        and counters(rec).get("controllers.Arm") == 1)
    finally:
        link.close()


# ------------------------------------------------------------------------------ judging


def call(wait_for: Callable[..., bool], client: Any, request: Any) -> Any:
    future = client.call_async(request)
    assert wait_for(future.done, timeout=60.0)
    return future.result()


def test_instructions_are_begun_and_judged_from_the_simulator(
    start_bridge: Callable[..., SimBridgeNode], spin_node: Node, wait_for: Callable[..., bool]
) -> None:
    node = start_bridge(
        cameras=["pole"], camera_rate=1.0, real_time_factor=0.0, discover_min_pixels=20
    )
    begin: Any = spin_node.create_client(BeginInstruction, "sim/begin_instruction")
    judge: Any = spin_node.create_client(JudgeInstruction, "sim/judge_instruction")
    assert begin.wait_for_service(timeout_sec=20.0) and judge.wait_for_service(timeout_sec=20.0)
    sim = node.sim

    res = call(wait_for, begin, BeginInstruction.Request(
        index=0, instruction="Look into upper cabinets and find the banana."))
    assert res.error_code == BeginInstruction.Response.NONE, res.error_msg
    judged = call(wait_for, judge, JudgeInstruction.Request(index=0))
    assert judged.error_code == JudgeInstruction.Response.NONE
    details = json.loads(judged.details_json)
    assert not judged.success and judged.progress == 0.0, details  # cab_2 is still closed
    assert details["criteria"][0]["type"] == "object_discovered"

    # open cab_2 with the simulator's scripted physics (no robot controller is running), then
    # let the pole camera look in: the banana counts as discovered from the rendered frames
    def open_cab_2() -> bool:
        return sim.move_to("cab_2").reached and sim.open("cab_2").success

    assert node._thread.submit(open_cab_2)
    shown = node._thread.submit(lambda: sim.time) + 2.5
    assert wait_for(lambda: sim.time > shown, timeout=30.0)
    judged = call(wait_for, judge, JudgeInstruction.Request(index=0))
    details = json.loads(judged.details_json)
    # seen, but an answer that names nothing has not found it
    assert not judged.success and judged.progress == 0.0, details
    assert details["visible_objects"].get("banana_1", 0) >= 20
    assert "in view with" in details["criteria"][0]["reason"]
    # what an answer names is bound to simulated entities by remembered label and position
    bx, by, bz = (float(v) for v in sim.scene.objects["banana_1"].pos)
    named = [
        AnswerEntity(node_id="banana_4", label="banana", position=Point(x=bx, y=by, z=bz),
                     has_position=True),
        AnswerEntity(node_id="mug_9", label="mug", position=Point(x=-1.0, y=-1.2, z=0.4),
                     has_position=True),
        AnswerEntity(label="cabinet"),  # no position, several cabinets: cannot be bound
        AnswerEntity(node_id="banana_1"),  # a simulator id alone binds to nothing
    ]
    judged = call(wait_for, judge, JudgeInstruction.Request(index=0, answer_entities=named))
    details = json.loads(judged.details_json)
    assert judged.success and judged.progress == 1.0, details
    bound = details["answer_bound"]
    assert bound["banana_4"] == "banana_1"
    assert bound["mug_9"].startswith("unbound:") and bound["cabinet"].startswith("unbound:")
    assert bound["banana_1"].startswith("unbound:")

    # instruction 1 starts back at cab_1: the bridge puts the base there (no motion)
    assert node._thread.submit(sim.base_pose)[1] == pytest.approx(
        start_pose_for(sim.scene.fixtures["cab_2"])[1], abs=0.1)
    res = call(wait_for, begin, BeginInstruction.Request(index=1, reset_robot=True))
    assert res.error_code == BeginInstruction.Response.NONE, res.error_msg
    assert node._thread.submit(sim.base_pose) == pytest.approx(
        start_pose_for(sim.scene.fixtures["cab_1"]), abs=0.02)
    judged = call(wait_for, judge, JudgeInstruction.Request(index=1))
    assert judged.error_code == JudgeInstruction.Response.NONE
    assert not json.loads(judged.details_json)["criteria"][1]["holds"]  # cab_1 never tried

    # bad service requests
    bad = call(wait_for, begin, BeginInstruction.Request(index=7))
    assert bad.error_code == BeginInstruction.Response.UNKNOWN_INSTRUCTION
    bad = call(wait_for, begin, BeginInstruction.Request(index=0, instruction="Make tea."))
    assert bad.error_code == BeginInstruction.Response.MISMATCH
    bad = call(wait_for, judge, JudgeInstruction.Request(index=9))
    assert bad.error_code == JudgeInstruction.Response.UNKNOWN_INSTRUCTION


# ------------------------------------------------------------------------------ startup errors


def test_bad_parameters_stop_the_constructor(ros_context: Context) -> None:
    with pytest.raises(BridgeStartupError, match="cameras"):
        bridge(ros_context, cameras=["base", "ceiling"])
    with pytest.raises(BridgeStartupError, match="no_such_vocabulary"):
        bridge(ros_context, vocabulary="no_such_vocabulary")
    with pytest.raises(BridgeStartupError, match="discover_min_pixels"):
        bridge(ros_context, discover_min_pixels=-1)
    with pytest.raises(BridgeStartupError, match="authkey"):
        bridge(ros_context, authkey="")
    with pytest.raises(BridgeStartupError, match="base_port"):
        bridge(ros_context, base_port=-1)
    with pytest.raises(BridgeStartupError, match="unknown noise profile 'foggy'"):
        bridge(ros_context, noise_profile="foggy")
    with pytest.raises(BridgeStartupError, match="noise_scale"):
        bridge(ros_context, noise_scale=-0.5)


def test_a_taken_port_stops_the_constructor(ros_context: Context) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        with pytest.raises(BridgeStartupError, match=f"cannot serve the robot.*{port}"):
            bridge(ros_context, base_port=port)


def run_bridge(*params: str) -> subprocess.CompletedProcess[str]:
    args = [sys.executable, "-m", "mimir.nodes.sim.bridge_node", "--ros-args",
            "-p", f"authkey:={AUTHKEY}", "-p", "base_port:=0", "-p", "arm_port:=0"]
    for param in params:
        args += ["-p", param]
    return subprocess.run(args, capture_output=True, text=True, timeout=120, cwd=REPO, check=False)


def test_unknown_scenario_exits_with_status_1() -> None:
    proc = run_bridge("scenario:=no_such_kitchen")
    assert proc.returncode == 1, proc.stderr
    assert "unknown scenario 'no_such_kitchen'" in proc.stderr
    assert "locked_unlocked" in proc.stderr  # the available ones are listed
    assert "Traceback" not in proc.stderr


def test_malformed_scenario_exits_with_status_1(tmp_path: Path) -> None:
    data = yaml.safe_load((default_scenarios_dir() / "locked_unlocked.yaml").read_text())
    data["fixtures"][1]["locked"] = "maybe"
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    proc = run_bridge(f"scenario:={path}")
    assert proc.returncode == 1, proc.stderr
    assert "fixtures[1].locked" in proc.stderr and "Traceback" not in proc.stderr


def test_missing_authkey_exits_with_status_1() -> None:
    args = [sys.executable, "-m", "mimir.nodes.sim.bridge_node"]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120, cwd=REPO,
                          check=False)
    assert proc.returncode == 1, proc.stderr
    assert "authkey" in proc.stderr and "Traceback" not in proc.stderr
