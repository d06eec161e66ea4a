"""``mimir record`` writes mcap rosbag2 bags from live topics over DDS; read back three ways.

Every bag is read with rosbags' ``AnyReader`` (messages deserialized and compared with what was
published), with the ``mcap`` library (messages counted per channel in each file) and through
its ``metadata.yaml`` (the rosbag2 keys a ``ros2 bag`` reader needs).
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from geometry_msgs.msg import TransformStamped
from mcap.reader import make_reader
from rclpy.context import Context
from rclpy.node import Node
from rclpy.publisher import Publisher
from ros_helpers import stop_process, wait_until
from rosbags.highlevel import AnyReader
from sensor_msgs.msg import CameraInfo, Image
from std_msgs.msg import Float64
from tf2_msgs.msg import TFMessage

from mimir.bag_writer import RECORD_OVERHEAD_BYTES
from mimir.bags import BagError, typestore
from mimir.cli import build_parser, main
from mimir.nodes.bags.recorder import BagRecorder
from mimir.nodes.bags.topics import default_topics
from mimir.record import record
from mimir.ros import qos
from mimir_msgs.msg import InteractionEvent

pytestmark = pytest.mark.ros

REPO_ROOT = Path(__file__).resolve().parents[2]

#: How long a DDS match may take on a loaded machine (s).
DISCOVERY_S = 45.0


# ------------------------------------------------------------------------------ helpers


def _image(seq: int, encoding: str, width: int = 4, height: int = 3) -> Image:
    """A small image stamped ``seq`` s whose bytes depend on ``seq``."""
    pixel = 3 if encoding == "rgb8" else 4
    msg = Image(height=height, width=width, encoding=encoding, step=width * pixel)
    msg.header.frame_id = "pole_color_optical_frame"
    msg.header.stamp.sec = seq
    msg.data = bytes((seq * 31 + i) % 256 for i in range(height * width * pixel))
    return msg


def _transform(parent: str, child: str, x: float, sec: int = 1) -> TFMessage:
    t = TransformStamped()
    t.header.frame_id = parent
    t.header.stamp.sec = sec
    t.child_frame_id = child
    t.transform.translation.x = x
    t.transform.rotation.w = 1.0
    return TFMessage(transforms=[t])


def _wait_subscribed(publishers: list[Publisher[Any]], timeout: float = DISCOVERY_S) -> None:
    missing = [p.topic_name for p in publishers
               if not wait_until(lambda p=p: p.get_subscription_count() > 0, timeout)]
    assert not missing, f"the recorder never subscribed to {missing}"


def _read_bag(path: Path) -> list[tuple[str, int, Any]]:
    """``(topic, timestamp ns, message)`` of every message, in the reader's order."""
    with AnyReader([path], default_typestore=typestore()) as reader:
        return [(conn.topic, stamp, reader.deserialize(raw, conn.msgtype))
                for conn, stamp, raw in reader.messages()]


def _mcap_counts(path: Path) -> list[Counter[str]]:
    """Messages per topic in each mcap file of the bag, files in name order."""
    counts: list[Counter[str]] = []
    for file in sorted(path.glob("*.mcap")):
        per_topic: Counter[str] = Counter()
        with file.open("rb") as stream:
            for schema, channel, _message in make_reader(stream).iter_messages():
                assert channel.message_encoding == "cdr"
                assert schema is not None and schema.encoding == "ros2msg"
                per_topic[channel.topic] += 1
        counts.append(per_topic)
    return counts


def _metadata(path: Path) -> dict[str, Any]:
    info = yaml.safe_load((path / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert isinstance(info, dict)
    for key in ("version", "storage_identifier", "duration", "starting_time", "message_count",
                "topics_with_message_count", "relative_file_paths", "files"):
        assert key in info, f"metadata.yaml lacks {key}"
    assert info["storage_identifier"] == "mcap"
    assert "nanoseconds" in info["duration"]
    assert "nanoseconds_since_epoch" in info["starting_time"]
    for entry in info["topics_with_message_count"]:
        assert {"name", "type", "serialization_format"} <= set(entry["topic_metadata"])
        assert entry["topic_metadata"]["serialization_format"] == "cdr"
    for entry in info["files"]:
        assert {"path", "starting_time", "duration", "message_count"} <= set(entry)
    assert [f["path"] for f in info["files"]] == info["relative_file_paths"]
    return info


def _topic_counts(info: dict[str, Any]) -> dict[str, int]:
    return {e["topic_metadata"]["name"]: e["message_count"]
            for e in info["topics_with_message_count"]}


def _record_cli(*args: str) -> subprocess.Popen[str]:
    """``mimir record`` in its own process, in this test's ROS domain (inherited environment)."""
    return subprocess.Popen([sys.executable, "-m", "mimir.cli", "record", *args], cwd=REPO_ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


# ------------------------------------------------------------------------------ tests


def test_default_topics_read_back(ros_context: Context, spin_node: Node, tmp_path: Path) -> None:
    """Camera images and info, latched /tf_static, /tf and an interaction event, recorded on
    the default topic names, come back byte for byte."""
    cam = "cameras/pole"
    color = spin_node.create_publisher(Image, f"{cam}/color/image_raw", qos.SENSOR)
    depth = spin_node.create_publisher(Image, f"{cam}/depth/image_raw", qos.SENSOR)
    info_pub = spin_node.create_publisher(CameraInfo, f"{cam}/color/camera_info", qos.SENSOR)
    tf = spin_node.create_publisher(TFMessage, "/tf", qos.TF)
    tf_static = spin_node.create_publisher(TFMessage, "/tf_static", qos.TF_STATIC)
    events = spin_node.create_publisher(InteractionEvent, "interaction_events", qos.EVENTS)
    # Latched before the recorder exists: only a transient-local subscription catches it.
    tf_static.publish(_transform("base_link", "pole_color_optical_frame", 0.25))

    bag = tmp_path / "bag"
    began_ns = time.time_ns()
    recorder = BagRecorder(bag, default_topics(), context=ros_context)
    recorder.start()
    sent_color = [_image(seq, "rgb8") for seq in (1, 2, 3)]
    sent_depth = [_image(seq, "32FC1") for seq in (1, 2, 3)]
    info = CameraInfo(width=4, height=3, distortion_model="plumb_bob",
                      k=[500.0, 0.0, 2.0, 0.0, 500.0, 1.5, 0.0, 0.0, 1.0])
    info.header.frame_id = "pole_color_optical_frame"
    event = InteractionEvent(interaction_id="grasp-7", phase=1, primitive="grasp",
                             target_id="mug_0", task="bring the mug", success=True,
                             outcome="held")
    expected = {f"/{cam}/color/image_raw": 3, f"/{cam}/depth/image_raw": 3,
                f"/{cam}/color/camera_info": 2, "/tf": 2, "/tf_static": 1,
                "/interaction_events": 1}
    try:
        _wait_subscribed([color, depth, info_pub, tf, tf_static, events])
        for c, d in zip(sent_color, sent_depth, strict=True):
            color.publish(c)
            depth.publish(d)
            time.sleep(0.02)
        for _ in range(2):
            info_pub.publish(info)
        tf.publish(_transform("odom", "base_link", 1.0, sec=2))
        tf.publish(_transform("odom", "base_link", 1.5, sec=3))
        events.publish(event)
        assert wait_until(lambda: recorder.message_counts().items() >= expected.items(), 30.0), \
            recorder.message_counts()
    finally:
        summary = recorder.stop()
    ended_ns = time.time_ns()

    assert summary.path == bag
    assert {t: summary.messages[t] for t in expected} == expected
    assert f"recorded {summary.total_messages} messages" in summary.line()
    assert str(bag) in summary.line()
    assert summary.bytes == sum(f.stat().st_size for f in bag.glob("*.mcap"))

    messages = _read_bag(bag)
    by_topic: dict[str, list[Any]] = {}
    for topic, stamp, msg in messages:
        assert began_ns <= stamp <= ended_ns, "timestamps are receive times"
        by_topic.setdefault(topic, []).append(msg)
    for got, sent in zip(by_topic[f"/{cam}/color/image_raw"], sent_color, strict=True):
        assert (got.height, got.width, got.encoding, got.step) == (3, 4, "rgb8", 12)
        assert got.header.stamp.sec == sent.header.stamp.sec
        assert got.data.tobytes() == bytes(sent.data)
    for got, sent in zip(by_topic[f"/{cam}/depth/image_raw"], sent_depth, strict=True):
        assert got.encoding == "32FC1"
        assert got.data.tobytes() == bytes(sent.data)
    got_info = by_topic[f"/{cam}/color/camera_info"][0]
    assert (got_info.width, got_info.height, got_info.distortion_model) == (4, 3, "plumb_bob")
    assert list(got_info.k) == list(info.k)
    (static,) = by_topic["/tf_static"]
    assert static.transforms[0].child_frame_id == "pole_color_optical_frame"
    assert static.transforms[0].transform.translation.x == 0.25
    assert [m.transforms[0].transform.translation.x for m in by_topic["/tf"]] == [1.0, 1.5]
    (got_event,) = by_topic["/interaction_events"]
    assert (got_event.interaction_id, got_event.phase, got_event.primitive, got_event.target_id,
            got_event.success, got_event.outcome) == ("grasp-7", 1, "grasp", "mug_0", True,
                                                      "held")

    (per_file,) = _mcap_counts(bag)
    assert {t: per_file[t] for t in expected} == expected

    meta = _metadata(bag)
    assert meta["relative_file_paths"] == ["bag_0.mcap"]
    assert meta["message_count"] == summary.total_messages == len(messages)
    counts = _topic_counts(meta)
    assert {t: counts[t] for t in expected} == expected
    types = {e["topic_metadata"]["name"]: e["topic_metadata"]["type"]
             for e in meta["topics_with_message_count"]}
    assert types["/tf_static"] == "tf2_msgs/msg/TFMessage"
    assert types["/interaction_events"] == "mimir_msgs/msg/InteractionEvent"


def test_topic_that_appears_later_is_recorded(ros_context: Context, spin_node: Node,
                                              tmp_path: Path) -> None:
    """A publisher created after the recording began is found on a later look at the graph;
    --namespace puts relative names under it and leaves absolute ones alone."""
    bag = tmp_path / "late"
    recorder = BagRecorder(bag, ["robot/gripper", "/tf"], namespace="/arm_a",
                           context=ros_context)
    assert recorder.topics == ["/arm_a/robot/gripper", "/tf"]
    recorder.start()
    try:
        time.sleep(1.2)  # a few looks at the graph while the topic does not exist
        assert recorder.subscribed_topics() == []
        gripper = spin_node.create_publisher(Float64, "/arm_a/robot/gripper", qos.EVENTS)
        _wait_subscribed([gripper])
        for value in (0.0, 0.5, 1.0):
            gripper.publish(Float64(data=value))
        assert wait_until(lambda: recorder.message_counts().get("/arm_a/robot/gripper") == 3,
                          30.0)
    finally:
        summary = recorder.stop()
    assert summary.not_seen == ("/tf",)
    assert [m.data for _t, _s, m in _read_bag(bag)] == [0.0, 0.5, 1.0]
    assert _topic_counts(_metadata(bag)) == {"/arm_a/robot/gripper": 3}


def test_split_size_writes_several_files_of_one_bag(ros_context: Context, spin_node: Node,
                                                    tmp_path: Path) -> None:
    """A tiny split size gives several mcap files in the one bag folder, read back in order."""
    bag = tmp_path / "split"
    split = 200
    recorder = BagRecorder(bag, ["robot/gripper"], split_size_bytes=split, context=ros_context)
    recorder.start()
    try:
        gripper = spin_node.create_publisher(Float64, "robot/gripper", qos.EVENTS)
        _wait_subscribed([gripper])
        for i in range(10):
            gripper.publish(Float64(data=float(i)))
        assert wait_until(lambda: recorder.message_counts().get("/robot/gripper") == 10, 30.0)
    finally:
        summary = recorder.stop()

    per_file = math.ceil(split / (12 + RECORD_OVERHEAD_BYTES))  # a Float64 is 12 CDR bytes
    sizes = [min(per_file, 10 - start) for start in range(0, 10, per_file)]
    names = [f"split_{i}.mcap" for i in range(len(sizes))]
    assert len(names) > 1
    assert list(summary.files) == names
    assert sorted(os.listdir(bag)) == sorted([*names, "metadata.yaml"])  # no staging left

    messages = _read_bag(bag)
    assert [m.data for _t, _s, m in messages] == [float(i) for i in range(10)]
    stamps = [s for _t, s, _m in messages]
    assert stamps == sorted(stamps)

    assert [c["/robot/gripper"] for c in _mcap_counts(bag)] == sizes

    meta = _metadata(bag)
    assert meta["relative_file_paths"] == names
    assert [f["message_count"] for f in meta["files"]] == sizes
    assert meta["message_count"] == 10
    assert _topic_counts(meta) == {"/robot/gripper": 10}
    first = meta["files"][0]["starting_time"]["nanoseconds_since_epoch"]
    assert meta["starting_time"]["nanoseconds_since_epoch"] == first == stamps[0]
    assert meta["duration"]["nanoseconds"] == stamps[-1] - stamps[0]


def test_sigint_leaves_a_readable_bag(spin_node: Node, tmp_path: Path) -> None:
    """Ctrl-C to a running ``mimir record`` process closes the bag (metadata written)."""
    bag = tmp_path / "interrupted"
    gripper = spin_node.create_publisher(Float64, "robot/gripper", qos.EVENTS)
    proc = _record_cli("--output", str(bag), "--topics", "robot/gripper")
    try:
        if not wait_until(lambda: gripper.get_subscription_count() > 0, DISCOVERY_S):
            stop_process(proc)
            pytest.fail(f"mimir record never subscribed: {proc.communicate()}")
        for i in range(5):
            gripper.publish(Float64(data=float(i)))
        time.sleep(2.0)  # delivery to the other process
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            stop_process(proc)
    assert proc.returncode == 0, err
    assert "recorded 5 messages" in out, out
    assert [m.data for _t, _s, m in _read_bag(bag)] == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert _mcap_counts(bag) == [Counter({"/robot/gripper": 5})]
    assert _metadata(bag)["message_count"] == 5


def test_duration_ends_the_recording(spin_node: Node, tmp_path: Path) -> None:
    """--duration stops ``mimir record`` on its own and leaves a closed bag; a latched
    /tf_static sent before the recorder started is in it."""
    tf_static = spin_node.create_publisher(TFMessage, "/tf_static", qos.TF_STATIC)
    tf_static.publish(_transform("base_link", "wrist_color_optical_frame", 0.5))
    bag = tmp_path / "timed"
    began = time.monotonic()
    proc = _record_cli("--output", str(bag), "--topics", "/tf_static", "--duration", "3")
    try:
        matched = wait_until(lambda: tf_static.get_subscription_count() > 0, DISCOVERY_S)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            stop_process(proc)
    assert proc.returncode == 0, err
    assert time.monotonic() - began >= 3.0
    assert out.strip().splitlines()[-1].startswith("recorded "), out
    meta = _metadata(bag)
    messages = _read_bag(bag)
    assert meta["message_count"] == len(messages)
    if matched:  # the recorder subscribed before its time ran out: the latched value came
        assert [m.transforms[0].child_frame_id for _t, _s, m in messages] == [
            "wrist_color_optical_frame"]


def test_refused_recordings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Mistakes are one ``mimir: error:`` line (status 2) before anything is written."""
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "keep.txt").write_text("precious")
    assert main(["record", "--output", str(taken), "--duration", "1"]) == 2
    assert "not empty" in capsys.readouterr().err
    assert os.listdir(taken) == ["keep.txt"]
    assert (taken / "keep.txt").read_text() == "precious"

    fresh = tmp_path / "fresh"
    assert main(["record", "--output", str(fresh), "--topics", "cameras/pole/color",
                 "bad name!", "9lives"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mimir: error: invalid topic name(s)")
    assert "'bad name!'" in err and "'9lives'" in err and "cameras/pole/color" not in err
    assert not fresh.exists()

    assert main(["record", "--output", str(tmp_path / "ns"), "--namespace", "1x"]) == 2
    assert "invalid namespace" in capsys.readouterr().err

    a_file = tmp_path / "a_file"
    a_file.write_text("")
    assert main(["record", "--output", str(a_file / "bag")]) == 2
    assert "not a folder" in capsys.readouterr().err
    assert main(["record", "--output", str(a_file)]) == 2
    assert "not a folder" in capsys.readouterr().err

    for bad in (["--duration", "0"], ["--duration", "-2"], ["--duration", "nan"],
                ["--split-size", "0"], ["--split-size", "-1"], ["--split-size", "big"],
                ["--topics", "/tf", "--cameras", "pole"]):
        with pytest.raises(SystemExit) as exit_info:
            main(["record", "--output", str(tmp_path / "never"), *bad])
        assert exit_info.value.code == 2
        assert capsys.readouterr().err.startswith("mimir: error:"), bad
    assert not (tmp_path / "never").exists()

    with pytest.raises(BagError, match="split size"):
        BagRecorder(tmp_path / "never", ["/tf"], split_size_bytes=0)
    with pytest.raises(BagError, match="duration"):
        record(tmp_path / "never", ["/tf"], duration_s=0.0)


def test_command_line_options() -> None:
    """The parser keeps --split-size in megabytes and --cameras shapes the default set."""
    args = build_parser().parse_args(["record", "--split-size", "0.5", "--duration", "2.5",
                                      "--cameras", "pole", "--namespace", "/arm_a"])
    assert (args.split_size, args.duration, args.cameras, args.namespace) == (
        0.5, 2.5, ["pole"], "/arm_a")
    topics = default_topics(["pole"])
    assert "cameras/pole/segmentation" in topics and "/tf_static" in topics
    assert not any("wrist" in t for t in topics)
    assert {"robot/gripper", "robot/ee_pose/achieved", "robot/ee_pose/commanded",
            "interaction_events", "memory_events", "observations", "/tf"} <= set(topics)


def test_publisher_with_weaker_qos_is_recorded_too(ros_context: Context, spin_node: Node,
                                                   tmp_path: Path) -> None:
    """A best-effort publisher that joins a topic first seen reliable makes the recorder
    subscribe again best effort, so its messages are recorded as well."""
    bag = tmp_path / "mixed"
    reliable = spin_node.create_publisher(Float64, "robot/gripper", qos.EVENTS)
    recorder = BagRecorder(bag, ["robot/gripper"], context=ros_context)
    recorder.start()
    try:
        _wait_subscribed([reliable])
        reliable.publish(Float64(data=1.0))
        assert wait_until(lambda: recorder.message_counts().get("/robot/gripper") == 1, 30.0)
        best_effort = spin_node.create_publisher(Float64, "robot/gripper", qos.SENSOR)
        _wait_subscribed([best_effort])
        assert wait_until(lambda: reliable.get_subscription_count() > 0, DISCOVERY_S)
        best_effort.publish(Float64(data=2.0))
        assert wait_until(lambda: recorder.message_counts().get("/robot/gripper") == 2, 30.0)
    finally:
        recorder.stop()
    assert [m.data for _t, _s, m in _read_bag(bag)] == [1.0, 2.0]
