"""The robot pre-flight (``mimir doctor --robot``): each check on its own, then over DDS."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from geometry_msgs.msg import TransformStamped
from rclpy.context import Context
from rclpy.node import Node
from rclpy.parameter import Parameter
from robot_helpers import FakeServers, free_port
from ros_helpers import spinning_executor
from sensor_msgs.msg import CameraInfo, Image
from tf2_msgs.msg import TFMessage

from mimir.cli import UserError, deployment_sections, main
from mimir.nodes.robot.preflight import observe
from mimir.ros import qos
from mimir_robot import contract as c
from mimir_robot.preflight import (
    Observation,
    RobotProfile,
    disk_check,
    frame_chain,
    gate_check,
    rate_check,
    run_preflight,
    sam3_check,
    server_check,
    tf_check,
)

TREE = {"odom": "map", "base_link": "odom", "base_camera_link": "base_link",
        "base_color_optical_frame": "base_camera_link"}


def test_tf_chain_walks_up_to_the_root() -> None:
    assert frame_chain(TREE, "base_color_optical_frame", "map") == [
        "base_color_optical_frame", "base_camera_link", "base_link", "odom", "map"]
    check = tf_check(TREE, "map", "base_color_optical_frame")
    assert check.ok and "base_link" in check.detail


@pytest.mark.parametrize(("missing", "stop", "fix_word"), [
    ("odom", "odom", "localization"),
    ("base_link", "base_link", "executor"),
    ("base_camera_link", "base_camera_link", "mount"),
])
def test_a_broken_tf_chain_names_where_it_stops_and_what_publishes_it(
        missing: str, stop: str, fix_word: str) -> None:
    parents = {k: v for k, v in TREE.items() if k != missing}
    check = tf_check(parents, "map", "base_color_optical_frame")
    assert not check.ok
    assert repr(stop) in check.detail
    assert fix_word in check.fix


def test_a_tf_cycle_is_a_broken_chain() -> None:
    assert frame_chain({"a": "b", "b": "a"}, "a", "map") is None
    assert not tf_check({"a": "b", "b": "a"}, "map", "a").ok


def test_rates_pass_fast_topics_and_fail_slow_or_silent_ones() -> None:
    assert rate_check("t", [i / 30.0 for i in range(60)], 2.0, 15.0).ok
    slow = rate_check("t", [i / 5.0 for i in range(10)], 2.0, 15.0)
    assert not slow.ok and "5.0 Hz" in slow.detail
    silent = rate_check("t", [], 2.0, 15.0)
    assert not silent.ok and "nothing" in silent.detail
    assert not rate_check("t", [1.0], 2.0, 15.0).ok


def test_server_check_answers_refuses_a_wrong_key_and_finds_no_server() -> None:
    servers = FakeServers()
    try:
        (host, port), _ = servers.start("Base")
        assert server_check("base", host, port, servers.authkey.decode()).ok
        wrong = server_check("base", host, port, "not the key")
        assert not wrong.ok and "authkey" in wrong.detail
        assert not server_check("base", host, port, "").ok
        # the handshake creates no controller, so a connected executor is not disturbed
        assert servers.control((host, port)).counts()[c.BASE_TYPEID] == 0
    finally:
        servers.stop_all()
    gone = server_check("arm", "127.0.0.1", free_port(), "k", timeout_s=1.0)
    assert not gone.ok and "not reachable" in gone.detail and "arm_server.py" in gone.fix


def test_disk_check_reads_the_nearest_existing_folder(tmp_path: Path) -> None:
    assert disk_check(tmp_path / "not" / "yet", 0.0).ok
    check = disk_check(tmp_path, 1e9)
    assert not check.ok and "GB free" in check.detail


def test_sam3_check_wants_a_folder_with_config_and_weights(tmp_path: Path) -> None:
    assert not sam3_check("").ok
    hub = sam3_check("facebook/sam3")
    assert not hub.ok and "hf download" in hub.fix
    (tmp_path / "config.json").write_text("{}")
    lacking = sam3_check(str(tmp_path))
    assert not lacking.ok and "weights" in lacking.detail
    (tmp_path / "model.safetensors").write_bytes(b"\0")
    assert sam3_check(str(tmp_path)).ok


def test_gate_check() -> None:
    assert gate_check(True).ok
    assert not gate_check(False).ok
    assert not gate_check(None).ok


def test_profile_reads_the_deployment_sections() -> None:
    sections = deployment_sections("")  # the installed robot deployment file
    profile = RobotProfile.from_deployment(sections, host="10.0.0.2")
    assert profile.cameras == ("base", "pole", "wrist")
    assert profile.host == "10.0.0.2"
    assert profile.authkey == sections["executor"]["authkey"]
    assert profile.sam3_model == sections["segmentation"]["model"]


@pytest.mark.parametrize("text", ["[1, 2]", "/**/executor: 3\n", "a: [\n"])
def test_a_malformed_deployment_file_is_a_user_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "robot.yaml"
    path.write_text(text)
    with pytest.raises(UserError):
        deployment_sections(str(path))


def test_doctor_robot_refuses_a_bad_window(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--robot", "--window", "0"]) == 2
    assert "--window must be a positive number" in capsys.readouterr().err


def _transform(parent: str, child: str) -> TransformStamped:
    t = TransformStamped()
    t.header.frame_id = parent
    t.child_frame_id = child
    t.transform.rotation.w = 1.0
    return t


def test_observe_sees_tf_camera_rates_and_the_gate_over_dds(
        ros_context: Context, tmp_path: Path) -> None:
    """A robot-like graph (TF, one camera at 20 Hz, a planner with its gate on, fake servers)
    passes every check; the checks that fail name what is missing."""
    stop = threading.Event()
    with spinning_executor(ros_context) as executor:
        robot = Node("fake_robot", context=ros_context)
        planner = Node("planner", context=ros_context,
                       parameter_overrides=[Parameter("operator_gate", value=True)],
                       automatically_declare_parameters_from_overrides=True)
        executor.add_node(robot)
        executor.add_node(planner)
        static = robot.create_publisher(TFMessage, "/tf_static", qos.TF_STATIC)
        static.publish(TFMessage(transforms=[_transform(p, ch) for ch, p in TREE.items()]))
        topics = c.camera_topics("base")
        color = robot.create_publisher(Image, topics.color, qos.SENSOR)
        depth = robot.create_publisher(Image, topics.depth, qos.SENSOR)
        info = robot.create_publisher(CameraInfo, topics.camera_info, qos.SENSOR)

        def stream() -> None:
            while not stop.is_set():
                color.publish(Image())
                depth.publish(Image())
                info.publish(CameraInfo())
                time.sleep(0.05)

        thread = threading.Thread(target=stream, daemon=True)
        thread.start()
        try:
            seen = observe(["base", "pole"], 2.0, context=ros_context)
        finally:
            stop.set()
            thread.join()
    assert seen.gate is True
    assert frame_chain(seen.parents, "base_color_optical_frame", "map") is not None
    servers = FakeServers()
    try:
        base, _ = servers.start("Base")
        arm, _ = servers.start("Arm")
        profile = RobotProfile(cameras=("base",), base_port=base[1], arm_port=arm[1],
                               authkey=servers.authkey.decode(), memory_dir=str(tmp_path),
                               sam3_model=str(tmp_path), min_free_gb=0.0)
        (tmp_path / "config.json").write_text("{}")
        (tmp_path / "model.safetensors").write_bytes(b"\0")
        checks = run_preflight(profile, seen)
        assert [ch.line() for ch in checks if not ch.ok] == []
        both = run_preflight(RobotProfile(cameras=("base", "pole"), authkey="x",
                                          base_port=free_port(), arm_port=free_port(),
                                          memory_dir=str(tmp_path), min_free_gb=0.0), seen)
    finally:
        servers.stop_all()
    failed = {ch.name for ch in both if not ch.ok}
    assert "TF map -> pole_color_optical_frame" in failed
    assert "topic cameras/pole/color/image_raw" in failed
    assert "topic cameras/base/color/image_raw" not in failed
    assert isinstance(seen, Observation)
