"""The ground layer's bag writer: one mcap rosbag2 bag split into numbered files, read back."""

from __future__ import annotations

from pathlib import Path

import pytest
from rosbags import interfaces as bag_types
from rosbags.highlevel import AnyReader

from mimir.bag_writer import RECORD_OVERHEAD_BYTES, SplitBagWriter, check_output
from mimir.bags import BagError, typestore

FLOAT = "std_msgs/msg/Float64"
STRING = "std_msgs/msg/String"


def _float(value: float) -> bytes:
    store = typestore()
    return bytes(store.serialize_cdr(store.types[FLOAT](data=value), FLOAT))


def _string(text: str) -> bytes:
    store = typestore()
    return bytes(store.serialize_cdr(store.types[STRING](data=text), STRING))


def _read(bag: Path) -> list[tuple[str, int, object]]:
    with AnyReader([bag], default_typestore=typestore()) as reader:
        return [(conn.topic, stamp, reader.deserialize(raw, conn.msgtype).data)
                for conn, stamp, raw in reader.messages()]


def _bag(tmp_path: Path) -> Path:
    folder = tmp_path / "run"
    folder.mkdir()
    return folder


def test_split_files_make_one_bag_with_every_message(tmp_path: Path) -> None:
    bag = _bag(tmp_path)
    per_file = 4
    writer = SplitBagWriter(bag, split_size_bytes=per_file * (12 + RECORD_OVERHEAD_BYTES),
                            recorded_by="a test")
    never = bag_types.QosTime(0, 0)
    latched = bag_types.Qos(
        history=bag_types.QosHistory.KEEP_LAST, depth=1,
        reliability=bag_types.QosReliability.RELIABLE,
        durability=bag_types.QosDurability.TRANSIENT_LOCAL, deadline=never, lifespan=never,
        liveliness=bag_types.QosLiveliness.AUTOMATIC, liveliness_lease_duration=never,
        avoid_ros_namespace_conventions=False)
    writer.add_topic("/gripper", FLOAT, [latched])   # before the first file
    writer.open()
    for k in range(10):
        writer.write("/gripper", 1_000 + k, _float(k))
        if k == 5:
            writer.add_topic("/note", STRING)          # while the second file is open
            writer.write("/note", 1_000 + k, _string("half way"))
    writer.close()
    writer.close()                                     # closing twice changes nothing

    # a file closes once it holds four floats' worth of bytes: 4 floats; 3 floats and the string
    # (17 CDR bytes); the last 3 floats, closed by close()
    assert writer.files == ("run_0.mcap", "run_1.mcap", "run_2.mcap")
    assert sorted(p.name for p in bag.iterdir()) == ["metadata.yaml", *writer.files]
    assert writer.size_bytes() == sum((bag / f).stat().st_size for f in writer.files)
    messages = _read(bag)
    floats = [(stamp, value) for topic, stamp, value in messages if topic == "/gripper"]
    assert floats == [(1_000 + k, float(k)) for k in range(10)]
    assert [(t, v) for t, _s, v in messages if t == "/note"] == [("/note", "half way")]
    with AnyReader([bag], default_typestore=typestore()) as reader:
        assert reader.message_count == 11
        gripper = next(c for c in reader.connections if c.topic == "/gripper")
        (offered,) = gripper.ext.offered_qos_profiles
        assert offered.durability == bag_types.QosDurability.TRANSIENT_LOCAL


def test_a_bag_with_no_message_still_reads(tmp_path: Path) -> None:
    bag = _bag(tmp_path)
    writer = SplitBagWriter(bag)
    writer.add_topic("/gripper", FLOAT)
    writer.open()
    writer.close()
    assert writer.files == ("run_0.mcap",)
    assert _read(bag) == []


def test_bad_use_is_refused_and_loses_nothing(tmp_path: Path) -> None:
    with pytest.raises(BagError, match="split size must be positive"):
        SplitBagWriter(tmp_path, split_size_bytes=0)
    bag = _bag(tmp_path)
    writer = SplitBagWriter(bag)
    writer.add_topic("/gripper", FLOAT)
    writer.open()
    writer.write("/gripper", 5, _float(0.5))
    with pytest.raises(BagError, match="already open"):
        writer.open()
    with pytest.raises(BagError, match="/gripper is in the bag already"):
        writer.add_topic("/gripper", FLOAT)
    with pytest.raises(BagError, match="nope_msgs/msg/Nope is not known"):
        writer.add_topic("/nope", "nope_msgs/msg/Nope")
    with pytest.raises(BagError, match="/odom was not added"):
        writer.write("/odom", 6, _float(1.0))
    writer.write("/gripper", 7, _float(0.7))
    writer.close()
    assert _read(bag) == [("/gripper", 5, 0.5), ("/gripper", 7, 0.7)]


def test_outputs_that_would_overwrite_are_refused(tmp_path: Path) -> None:
    check_output(tmp_path / "new" / "bag")           # absent: accepted
    check_output(_bag(tmp_path))                     # empty folder: accepted
    (tmp_path / "run" / "x").write_text("x", encoding="utf-8")
    with pytest.raises(BagError, match="not empty"):
        check_output(tmp_path / "run")
    with pytest.raises(BagError, match="not a folder"):
        check_output(tmp_path / "run" / "x")
    with pytest.raises(BagError, match="is not a folder"):
        check_output(tmp_path / "run" / "x" / "below")
