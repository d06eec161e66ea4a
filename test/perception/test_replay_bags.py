"""``mimir replay --fast`` on rosbag2 files of the real 7-Scenes kitchen (mcap and sqlite3).

The bags are written in the test (``bag_helpers``); the replay's memory is compared with a direct
run of the cores on the same frames, and the bad inputs of a recording are each tried.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import yaml
from bag_helpers import CAMERA, BagPlan, KitchenFrames, serialized, write_bag
from geometry_msgs.msg import PoseStamped
from rclpy.context import Context
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rosbags.rosbag2 import StoragePlugin
from rosbags.typesys import Stores, get_types_from_msg, get_typestore
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import Image
from std_msgs.msg import Float64, String
from tf2_msgs.msg import TFMessage
from tiny_sam3 import save_tiny_sam3

from mimir.bags import BagError
from mimir.bounds import load_bounds
from mimir.cli import main as cli_main
from mimir.nodes.bags.player import BagPlayer
from mimir.nodes.perception.deprojection_params import DeprojectionNodeConfig
from mimir.paths import config_file
from mimir.replay import FastReplay, ReplaySummary, ReplayTopics
from mimir.ros import qos
from mimir.ros.images import image_to_numpy
from mimir.ros.time import from_seconds
from mimir_memory.config import load_memory_config
from mimir_memory.keyframes import KeyframeStore
from mimir_memory.world import WorldMemory
from mimir_msgs.msg import InteractionEvent
from mimir_perception.deprojection import Deprojector

FRAMES = 24
TOPICS = ReplayTopics(cameras=(CAMERA,))


@pytest.fixture(scope="module")
def frames(sevenscenes_dir: Path) -> KitchenFrames:
    return KitchenFrames(sevenscenes_dir, FRAMES)


@pytest.fixture(scope="module")
def direct(frames: KitchenFrames, tmp_path_factory: pytest.TempPathFactory) -> WorldMemory:
    """The cores run on the frames directly: deprojection with the node's defaults, fusion."""
    cfg = DeprojectionNodeConfig()
    deprojector = Deprojector(cfg.deprojection("mm", load_bounds(config_file("memory.yaml"))))
    world = WorldMemory.open(tmp_path_factory.mktemp("direct") / "world.db",
                             config=load_memory_config(config_file("memory.yaml")))
    for i in range(frames.count):
        result = deprojector.deproject(frames.segmentation(i), frames.depth(i),
                                       frames.intrinsics, frames.pose(i),
                                       stamp=frames.stamp(i), camera=CAMERA)
        world.ingest(list(result.observations), now=frames.stamp(i))
    return world


def replay(bag: Path, memory: Path, topics: ReplayTopics = TOPICS,
           **kwargs: object) -> tuple[ReplaySummary, WorldMemory]:
    run = FastReplay(bag, memory, topics, **kwargs)  # type: ignore[arg-type]
    try:
        summary = run.run()
    finally:
        run.close()
    return summary, WorldMemory.open(memory / "world.db", readonly=True,
                                     config=load_memory_config(config_file("memory.yaml")))


def labels(world: WorldMemory) -> dict[str, list[np.ndarray]]:
    out: dict[str, list[np.ndarray]] = {}
    for node in sorted(world.state.nodes.values(), key=lambda n: n.node_id):
        out.setdefault(node.label, []).append(np.asarray(node.centroid))
    return out


def same_memory(replayed: WorldMemory, direct: WorldMemory, tolerance: float = 0.05) -> None:
    got, want = labels(replayed), labels(direct)
    assert sorted(got) == sorted(want) and want, (sorted(got), sorted(want))
    for label, centres in want.items():
        for centre in centres:
            nearest = min(float(np.linalg.norm(c - centre)) for c in got[label])
            assert nearest <= tolerance, (label, centre, nearest)


@pytest.mark.parametrize("storage", [StoragePlugin.MCAP, StoragePlugin.SQLITE3])
def test_a_bag_gives_the_memory_of_the_cores(storage: StoragePlugin, frames: KitchenFrames,
                                             direct: WorldMemory, tmp_path: Path) -> None:
    bag = write_bag(tmp_path / "bag", frames, BagPlan(storage=storage))
    summary, world = replay(bag, tmp_path / "memory")
    assert summary.frames_used[CAMERA] == FRAMES and not summary.error
    assert summary.messages == 4 * FRAMES  # colour, depth, info, segmentation
    assert summary.transforms == FRAMES + 1
    same_memory(world, direct)
    assert summary.keyframes >= 1 and summary.nodes == len(world.state.nodes)
    assert any("memory:" in line for line in summary.lines())
    # each keyframe keeps the recorded segmentation of its colour image
    with KeyframeStore.open(tmp_path / "memory" / "keyframes", readonly=True) as store:
        kept = [store.load_instances(r.frame_id) for r in store.query(limit=100)]
    assert kept and all(ids is not None and ids.any() for ids in kept)


def test_compressed_and_float_depth_layouts_replay_alike(frames: KitchenFrames,
                                                         direct: WorldMemory,
                                                         tmp_path: Path) -> None:
    """A JPEG colour and compressedDepth PNG layout, and metres in 32FC1, give the same memory."""
    for name, plan in (("compressed", BagPlan(compressed=True)),
                       ("float", BagPlan(depth_float=True))):
        bag = write_bag(tmp_path / name, frames, plan)
        summary, world = replay(bag, tmp_path / f"memory_{name}")
        assert summary.frames_used[CAMERA] == FRAMES, (name, summary.skipped)
        same_memory(world, direct)


def test_the_zed_wrappers_layout_replays_with_a_remapping_only(
        frames: KitchenFrames, direct: WorldMemory, tmp_path: Path) -> None:
    """The ZED wrapper's topic names, bgra8 colour and 32FC1 depth in metres."""
    zed = {"color": "/zed/zed_node/rgb/image_rect_color",
           "depth": "/zed/zed_node/depth/depth_registered",
           "camera_info": "/zed/zed_node/rgb/camera_info"}
    bag = write_bag(tmp_path / "bag", frames, BagPlan(topics=zed, bgra=True, depth_float=True))
    layout = ReplayTopics(cameras=(CAMERA,), color=zed["color"], depth=zed["depth"],
                          camera_info=zed["camera_info"])
    summary, world = replay(bag, tmp_path / "memory", topics=layout)
    assert summary.frames_used[CAMERA] == FRAMES, summary.skipped
    assert summary.keyframes >= 1  # the bgra8 colour frames decode
    same_memory(world, direct)


def _operation(stamp: float, phase: int, target: str, where: np.ndarray, *,
               iid: str = "op-1", success: bool = True) -> InteractionEvent:
    event = InteractionEvent(interaction_id=iid, phase=phase, primitive="open",
                             target_id=target, success=success)
    event.header.stamp = from_seconds(stamp)
    event.window_start = from_seconds(stamp)
    event.target_pose.position.x, event.target_pose.position.y, event.target_pose.position.z = (
        float(v) for v in where)
    return event


def test_an_operated_fixture_keeps_its_place_in_a_replay(frames: KitchenFrames,
                                                         tmp_path: Path) -> None:
    """Recorded interaction events anchor the opened fixture as the scene graph node does:
    from the open's start its views no longer move it; without the analyzer, a failed open
    releases it at its end."""
    plain = write_bag(tmp_path / "plain", frames)
    _, early = replay(plain, tmp_path / "early", end=frames.stamp(8) - frames.stamp(0) - 0.05)
    cabinet = next(n for n in early.state.nodes.values() if n.label == "cabinet")
    at_start = np.asarray(cabinet.centroid)
    _, free = replay(plain, tmp_path / "free")
    moved = np.asarray(next(n for n in free.state.nodes.values() if n.label == "cabinet").centroid)
    assert np.linalg.norm(moved - at_start) > 0.01  # later views do move it

    start = frames.stamp(8) - 0.01
    kinds = "mimir_msgs/msg/InteractionEvent"
    held = write_bag(tmp_path / "held", frames, BagPlan(timed=[
        (start, "/interaction_events", kinds, _operation(start, 0, cabinet.node_id, at_start)),
        (start + 1.0, "/interaction_events", kinds,
         _operation(start + 1.0, 1, cabinet.node_id, at_start))]))
    summary, anchored = replay(held, tmp_path / "anchored", analyze=False)
    assert summary.operations == 1
    kept = next(n for n in anchored.state.nodes.values() if n.label == "cabinet")
    np.testing.assert_allclose(kept.centroid, at_start, atol=1e-9)
    # a failed open releases the fixture at its end; a pose far from any node anchors nothing
    failed = write_bag(tmp_path / "failed", frames, BagPlan(timed=[
        (start, "/interaction_events", kinds, _operation(start, 0, "", at_start)),
        (start + 1.0, "/interaction_events", kinds,
         _operation(start + 1.0, 1, "", at_start, success=False)),
        (start, "/interaction_events", kinds,
         _operation(start, 0, "nowhere_1", at_start + 5.0, iid="op-2"))]))
    summary, released = replay(failed, tmp_path / "released", analyze=False)
    assert summary.operations == 1
    assert summary.skipped["interaction_events.unknown_target"] == 1
    after = next(n for n in released.state.nodes.values() if n.label == "cabinet")
    assert np.linalg.norm(np.asarray(after.centroid) - at_start) > 0.005


def _events(world: WorldMemory) -> list[tuple[str, float, str]]:
    return [(e.kind.value, e.stamp, repr(sorted(e.payload.items())))
            for e in world.log.iter_events()]


def test_the_same_bag_gives_the_same_memory(frames: KitchenFrames, tmp_path: Path) -> None:
    bag = write_bag(tmp_path / "bag", frames)
    first, world_a = replay(bag, tmp_path / "a")
    second, world_b = replay(bag, tmp_path / "b")
    assert sorted(world_a.state.nodes) == sorted(world_b.state.nodes)
    assert _events(world_a) == _events(world_b) and _events(world_a)
    ids = [sorted(p.name for p in (tmp_path / m / "keyframes").rglob("*.jpg")) for m in "ab"]
    assert ids[0] == ids[1] and ids[0]
    assert first.lines()[1:] == second.lines()[1:]


def test_transforms_of_a_long_bag_all_stay(sevenscenes_dir: Path, tmp_path: Path) -> None:
    """A bag longer than a live node's 10 s transform cache: its first frames still find the
    transforms loaded with the rest of the bag."""
    slow = KitchenFrames(sevenscenes_dir, 8, period=3.0)  # 21 s of bag
    summary, _world = replay(write_bag(tmp_path / "bag", slow), tmp_path / "memory")
    assert summary.frames_used[CAMERA] == 8, summary.skipped


def test_missing_transforms_and_stamps_out_of_order_are_counted(
        frames: KitchenFrames, direct: WorldMemory, tmp_path: Path) -> None:
    bag = write_bag(tmp_path / "bag", frames, BagPlan(tf_until=FRAMES - 4, swap_depth=(5, 6)))
    summary, world = replay(bag, tmp_path / "memory")
    assert summary.skipped[f"{CAMERA}.transform_extrapolation"] == 4
    assert summary.skipped[f"{CAMERA}.depth.out_of_order"] == 1
    assert summary.frames_used[CAMERA] < FRAMES
    assert set(labels(world)) == set(labels(direct))


def test_frames_before_the_first_camera_info_are_counted_unmatched(
        frames: KitchenFrames, tmp_path: Path) -> None:
    """Camera info recorded only from frame 16 on: the frames more than the synchroniser's
    max_age (2 s) before it are dropped as stale, the rest match the first info."""
    bag = write_bag(tmp_path / "bag", frames, BagPlan(info_from=16))
    summary, _world = replay(bag, tmp_path / "memory")
    stale = summary.skipped[f"{CAMERA}.segmentation.stale"]
    assert stale > 0 and summary.frames_used[CAMERA] == FRAMES - stale, summary.skipped
    assert summary.frames_used[CAMERA] >= FRAMES - 16


def test_a_bag_without_a_usable_camera_is_refused(frames: KitchenFrames, tmp_path: Path) -> None:
    no_info = write_bag(tmp_path / "no_info", frames, BagPlan(camera_info=False))
    with pytest.raises(BagError, match="no usable camera"):
        replay(no_info, tmp_path / "m1")
    no_seg = write_bag(tmp_path / "no_seg", frames, BagPlan(segmentation=False))
    with pytest.raises(BagError, match="needs a segmentation model"):
        replay(no_seg, tmp_path / "m2")
    with pytest.raises(BagError, match="no usable camera"):
        FastReplay(no_seg, tmp_path / "m3", ReplayTopics(cameras=("wrist",))).run()


def test_an_empty_bag_and_a_file_that_is_no_bag_are_refused(frames: KitchenFrames,
                                                            tmp_path: Path) -> None:
    empty = write_bag(tmp_path / "empty", KitchenFrames(frames.root, 0))
    with pytest.raises(BagError, match="no usable camera"):
        replay(empty, tmp_path / "m1")
    junk = tmp_path / "junk.mcap"
    junk.write_bytes(np.random.default_rng(0).integers(0, 255, 4096, dtype=np.uint8).tobytes())
    with pytest.raises(BagError, match="cannot open"):
        replay(junk, tmp_path / "m2")
    with pytest.raises(BagError, match="cannot open"):
        replay(tmp_path / "missing", tmp_path / "m3")


def test_a_damaged_bag_keeps_what_came_before_the_fault(frames: KitchenFrames,
                                                       tmp_path: Path) -> None:
    """A sqlite3 bag whose later messages are garbage: the frames before them are in memory."""
    bag = write_bag(tmp_path / "bag", frames, BagPlan(storage=StoragePlugin.SQLITE3))
    (db,) = bag.glob("*.db3")
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT id FROM messages ORDER BY timestamp").fetchall()
        cut = rows[len(rows) // 2][0]
        conn.execute("UPDATE messages SET data = x'00' WHERE id >= ?", (cut,))
    summary, world = replay(bag, tmp_path / "memory")
    assert 0 < summary.frames_used[CAMERA] < FRAMES
    assert sum(v for k, v in summary.skipped.items() if k.endswith("undecodable")) > 0
    assert world.state.nodes
    # a truncated file: the storage fails mid-read, memory keeps the frames read before
    truncated = tmp_path / "truncated"
    shutil.copytree(bag, truncated)
    (db,) = truncated.glob("*.db3")
    db.write_bytes(db.read_bytes()[: db.stat().st_size // 3])
    with pytest.raises(BagError):
        replay(truncated, tmp_path / "memory_truncated")


def test_wrong_types_on_camera_topics_are_skipped(frames: KitchenFrames, tmp_path: Path) -> None:

    odd = [(f"/cameras/{CAMERA}/odd", "std_msgs/msg/String", serialized(String(data="x"))),
           ("/cameras/wrist/color/camera_info", "std_msgs/msg/String",
            serialized(String(data="not a camera info")))]
    bag = write_bag(tmp_path / "bag", frames, BagPlan(extra=odd))
    two = ReplayTopics(cameras=(CAMERA, "wrist"))
    run = FastReplay(bag, tmp_path / "memory", two)
    summary = run.run()
    run.close()
    assert summary.skipped["wrist.camera_info.wrong_type"] == 1
    assert summary.frames_used[CAMERA] == FRAMES


def test_bad_arguments_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cameras"):
        ReplayTopics(cameras=())
    with pytest.raises(ValueError, match="camera"):
        ReplayTopics(cameras=("a", "b"), color="color")
    with pytest.raises(ValueError, match="start"):
        FastReplay(tmp_path, tmp_path / "m", TOPICS, start=-1.0)
    with pytest.raises(ValueError, match="end"):
        FastReplay(tmp_path, tmp_path / "m", TOPICS, start=2.0, end=1.0)
    with pytest.raises(ValueError, match="does not declare"):
        FastReplay(tmp_path, tmp_path / "m", TOPICS,
                   sections={"deprojection": {"no_such_key": 1}})


def test_the_command_line_replays_and_refuses_clearly(frames: KitchenFrames, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    bag = write_bag(tmp_path / "bag", frames)
    memory = tmp_path / "memory"
    assert cli_main(["replay", str(bag), "--fast", "--memory", str(memory), "--cameras", CAMERA,
                     "--quiet"]) == 0
    out = capsys.readouterr().out
    assert f"frames used: {CAMERA} {FRAMES}" in out and (memory / "world.db").is_file()
    assert cli_main(["replay", str(tmp_path / "nothing"), "--fast", "--memory", str(memory),
                     "--quiet"]) == 2
    assert "cannot open the bag" in capsys.readouterr().err
    assert cli_main(["replay", str(bag), "--fast", "--memory", str(memory), "--cameras",
                     "pole,wrist", "--color", "color", "--quiet"]) == 2
    assert "needs {camera}" in capsys.readouterr().err
    # the default mode plays over DDS: here only the depth topic, at 20 times the recording
    assert cli_main(["replay", str(bag), "--rate", "20", "--quiet", "--topics",
                     f"/cameras/{CAMERA}/depth/image_raw"]) == 0
    assert f"/cameras/{CAMERA}/depth/image_raw: {FRAMES}" in capsys.readouterr().out
    assert cli_main(["replay", str(bag), "--rate", "0", "--quiet"]) == 2
    assert "rate must be a positive number" in capsys.readouterr().err


def _thing_type() -> tuple[object, bytes]:
    """A type store that knows a message type this installation does not, and one message."""
    store = get_typestore(Stores.ROS2_KILTED)
    store.register(get_types_from_msg("int32 x\n", "fake_pkg/msg/Thing"))
    thing = store.types["fake_pkg/msg/Thing"](x=7)
    return store, bytes(store.serialize_cdr(thing, "fake_pkg/msg/Thing"))


def test_dds_playback_republishes_the_bag_on_its_clock(
        frames: KitchenFrames, tmp_path: Path, ros_context: Context,
        spin_node: Node, wait_for: Callable[..., bool]) -> None:
    store, thing = _thing_type()
    bag = write_bag(tmp_path / "bag", frames, BagPlan(
        extra=[("/thing", "fake_pkg/msg/Thing", thing)], extra_types=store))
    depth: list[Image] = []
    clock: list[float] = []
    reliable = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
    spin_node.create_subscription(Image, "/robot1/cameras/pole/depth/image_raw",
                                  depth.append, reliable)
    spin_node.create_subscription(Clock, "/clock", lambda m: clock.append(
        m.clock.sec + m.clock.nanosec * 1e-9), reliable)
    player = BagPlayer(bag, rate=4.0, namespace="robot1", context=ros_context,
                       topics=["/cameras/pole/depth/image_raw", "/tf_static", "/thing",
                               "/cameras/pole/nothing"])
    try:
        player.open()
        depth_pub = next(p for p in player.node.publishers if "depth" in p.topic_name)
        assert wait_for(lambda: depth_pub.get_subscription_count() > 0)
        summary = player.run()
        assert summary.published["/robot1/cameras/pole/depth/image_raw"] == FRAMES
        assert summary.published["/tf_static"] == 1  # global under the namespace
        assert "not installed" in summary.left_out["/robot1/thing"]
        assert summary.left_out["/robot1/cameras/pole/nothing"] == "not in the bag"
        # paced at four times the recording's speed (4.6 s of bag): never faster than that
        assert summary.wall_seconds > 0.8, summary.wall_seconds
        assert wait_for(lambda: len(depth) == FRAMES)
        np.testing.assert_array_equal(image_to_numpy(depth[3]), frames.depth(3))
        assert wait_for(lambda: bool(clock) and clock[-1] == pytest.approx(
            frames.stamp(FRAMES - 1)))
        # ticks through the 0.2 s gaps between frames (a busy subscriber may miss a few)
        assert clock == sorted(clock) and len(clock) > 2 * FRAMES
        # a late subscriber still gets the latched transforms
        latched: list[TFMessage] = []
        spin_node.create_subscription(TFMessage, "/tf_static", latched.append, qos.TF_STATIC)
        assert wait_for(lambda: len(latched) == 1)
    finally:
        player.close()
    with pytest.raises(ValueError, match="rate"):
        BagPlayer(bag, rate=0.0, context=ros_context)
    with pytest.raises(BagError, match="cannot open"):
        bad = BagPlayer(tmp_path / "missing", context=ros_context)
        try:
            bad.run()
        finally:
            bad.close()


def test_fast_replay_ignores_topics_of_unknown_types(frames: KitchenFrames,
                                                     tmp_path: Path) -> None:
    store, thing = _thing_type()
    bag = write_bag(tmp_path / "bag", frames, BagPlan(
        extra=[("/thing", "fake_pkg/msg/Thing", thing)], extra_types=store))
    summary, _world = replay(bag, tmp_path / "memory")
    assert summary.frames_used[CAMERA] == FRAMES


def test_a_bag_without_segmentation_is_segmented_by_the_deployments_model(
        frames: KitchenFrames, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--segment``: the deployment's SAM3 (a tiny random one here) segments every colour
    frame of a bag that holds none, and those frames go through deprojection and fusion."""
    model = save_tiny_sam3(tmp_path / "sam3")
    params = tmp_path / "deployment.yaml"
    params.write_text(yaml.safe_dump({
        "/**/segmentation": {"ros__parameters": {"model": str(model), "cameras": [CAMERA],
                                                 "max_rate_hz": 30.0}},
        "/**/deprojection": {"ros__parameters": {"cameras": [CAMERA]}},
    }))
    bag = write_bag(tmp_path / "bag", frames, BagPlan(segmentation=False))
    memory = tmp_path / "memory"
    assert cli_main(["replay", str(bag), "--fast", "--segment", "--params", str(params),
                     "--memory", str(memory), "--quiet"]) == 0
    assert f"frames used: {CAMERA} {FRAMES}" in capsys.readouterr().out
    missing = tmp_path / "missing.yaml"
    missing.write_text(yaml.safe_dump({"/**/segmentation": {"ros__parameters": {
        "model": str(tmp_path / "no_model")}}}))
    assert cli_main(["replay", str(bag), "--fast", "--segment", "--params", str(missing),
                     "--memory", str(memory), "--quiet"]) == 2
    assert "not found" in capsys.readouterr().err


def test_the_analyzer_runs_inside_a_fast_replay(frames: KitchenFrames, tmp_path: Path) -> None:
    """A bag with an interaction and the robot contract's signals: the replay analyses it with
    the deployment's reasoner (the offline one) and memory holds the analysed outcome, as the
    analyzer node would have written it; a replay told not to analyse writes none."""
    _, early = replay(write_bag(tmp_path / "plain", frames), tmp_path / "early",
                      end=frames.stamp(6) - frames.stamp(0) - 0.05)
    cabinet = next(n for n in early.state.nodes.values() if n.label == "cabinet")
    where = np.asarray(cabinet.centroid)
    start, end = frames.stamp(6) - 0.01, frames.stamp(14) + 0.01
    kinds = "mimir_msgs/msg/InteractionEvent"
    began = _operation(start, 0, cabinet.node_id, where, iid="look-1")
    began.primitive = "inspect"
    ended = _operation(end, 1, cabinet.node_id, where, iid="look-1")
    ended.primitive, ended.outcome, ended.window_end = "inspect", "INSPECTED", from_seconds(end)
    timed: list[tuple[float, str, str, object]] = [
        (start, "/interaction_events", kinds, began), (end, "/interaction_events", kinds, ended)]
    for i in range(frames.count):
        stamp = frames.stamp(i) + 0.005
        timed.append((stamp, "/robot/gripper", "std_msgs/msg/Float64", Float64(data=0.0)))
        hand = PoseStamped()
        hand.header.stamp, hand.header.frame_id = from_seconds(stamp), "base_link"
        hand.pose.position.x, hand.pose.position.z, hand.pose.orientation.w = 0.4, 0.9, 1.0
        for topic in ("/robot/ee_pose/achieved", "/robot/ee_pose/commanded"):
            timed.append((stamp, topic, "geometry_msgs/msg/PoseStamped", hand))
    bag = write_bag(tmp_path / "bag", frames, BagPlan(timed=timed))
    summary, world = replay(bag, tmp_path / "memory")
    assert summary.analyses == 1 and summary.analysis_events >= 1, summary.skipped
    node = world.node(cabinet.node_id)
    (record,) = [h for h in node.task_history if h.get("interaction_id") == "look-1"]
    assert record["primitive"] == "inspect"
    assert any(e.event_id.startswith("analyzer:look-1:") for e in world.log.iter_events())
    quiet, unanalysed = replay(bag, tmp_path / "unanalysed", analyze=False)
    assert quiet.analyses == 0
    assert not any(h.get("interaction_id") == "look-1"
                   for h in unanalysed.node(cabinet.node_id).task_history)
