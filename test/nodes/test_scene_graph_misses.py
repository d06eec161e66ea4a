"""Negative evidence in the live scene graph node: arrays whose view shows a remembered mug's
place without a mug make memory record misses, and enough of them mark the mug as gone."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rclpy.context import Context
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from ros_helpers import observation_batch, observation_msg

from mimir.nodes.memory.messages import MessageValueError
from mimir.nodes.memory.observation_messages import view_from_msg, view_to_msg
from mimir.nodes.memory.scene_graph_node import SceneGraphConfig, SceneGraphNode
from mimir.ros import qos
from mimir_memory.config import MemoryConfig
from mimir_memory.visibility import CameraView
from mimir_msgs.msg import MemoryEvent as MemoryEventMsg
from mimir_msgs.msg import ObjectObservation, ObjectObservationArray

pytestmark = pytest.mark.ros

Wait = Callable[..., bool]

# The pole camera's optical frame at (0.5, 0.5, 0.9) looking along map +x over a wall 3 m away.
CAMERA_TO_MAP = np.array([[0.0, 0.0, 1.0, 0.5],
                          [-1.0, 0.0, 0.0, 0.5],
                          [0.0, -1.0, 0.0, 0.9],
                          [0.0, 0.0, 0.0, 1.0]])
MUG_AT = (2.0, 0.5, 0.9)  # 1.5 m in front of the camera, on its axis: 24 px across
BANANA_AT = (-1.0, 0.5, 0.9)  # behind the camera


def view(**changes: Any) -> CameraView:
    values: dict[str, Any] = {
        "camera_to_map": CAMERA_TO_MAP, "fx": 300.0, "fy": 300.0, "cx": 159.5, "cy": 119.5,
        "width": 320, "height": 240, "max_range_m": 10.0,
        "depth_min_m": np.full((24, 32), 3.0, np.float32), "labels_sought": ("mug", "banana"),
    }
    values.update(changes)
    return CameraView(**values)


def frame(stamp: float, *observations: ObjectObservation,
          with_view: CameraView | None = None) -> ObjectObservationArray:
    msg = observation_batch(*observations, camera="pole", stamp=stamp)
    msg.view = view_to_msg(with_view)
    return msg


def mug(stamp: float) -> ObjectObservation:
    return observation_msg("mug", MUG_AT, detection_id=f"mug@{stamp}", half=0.06, stamp=stamp)


def start(context: Context, executor: MultiThreadedExecutor, memory_dir: Path,
          **params: Any) -> SceneGraphNode:
    overrides = [Parameter("memory_dir", value=str(memory_dir)),
                 *(Parameter(k, value=v) for k, v in params.items())]
    node = SceneGraphNode(context=context, parameter_overrides=overrides)
    executor.add_node(node)
    return node


def test_misses_make_a_mug_stale_and_a_bad_view_changes_nothing(
    tmp_path: Path, ros_context: Context, ros_executor: MultiThreadedExecutor,
    spin_node: Node, wait_for: Wait,
) -> None:
    node = start(ros_context, ros_executor, tmp_path)
    limit = MemoryConfig().association.misses_to_stale
    assert limit == 3 == node.world.config.association.misses_to_stale
    events: list[MemoryEventMsg] = []
    spin_node.create_subscription(MemoryEventMsg, "memory_events", events.append, qos.EVENTS)
    pub = spin_node.create_publisher(ObjectObservationArray, "observations", qos.EVENTS)
    assert wait_for(lambda: pub.get_subscription_count() > 0)

    def mug_state() -> tuple[int, Any]:
        with node._memory.hold():
            mug_node = node.world.state.nodes.get("mug_1")
            if mug_node is None:
                return -1, None
            place = mug_node.properties.get("at_last_place")
            return mug_node.misses, None if place is None else place.value

    def missed() -> list[MemoryEventMsg]:
        return [e for e in events if e.kind == "observation_missed"]

    # The mug is seen: a node, and no miss for it in its own frame.
    pub.publish(frame(5.0, mug(5.0), with_view=view()))
    assert wait_for(lambda: mug_state() == (0, None))

    # Two frames show its place empty; one more between them comes too soon after the first
    # (one miss per node per second of frame time) and only counts as throttled.
    for stamp in (7.0, 7.5, 9.0):
        pub.publish(frame(stamp, with_view=view()))
    assert wait_for(lambda: mug_state() == (2, None) and len(missed()) == 2)
    assert node.counters.get("misses.throttled") == 1

    # A frame whose view is broken (zero focal length): the banana is stored, no miss is
    # recorded, and the bad view is counted.
    broken = frame(10.0, observation_msg("banana", BANANA_AT, detection_id="banana@10",
                                         stamp=10.0), with_view=view())
    broken.view.fx = 0.0
    pub.publish(broken)
    assert wait_for(lambda: node.counters.get("misses.bad_view") == 1)
    with node._memory.hold():
        assert [n.label for n in node.world.nodes_by_label("banana")] == ["banana"]
    assert mug_state() == (2, None) and len(missed()) == 2

    # An array without a view (valid false) changes nothing either.
    pub.publish(frame(10.5))
    # The third miss in a row: memory holds that the mug is no longer where it was.
    pub.publish(frame(11.0, with_view=view()))
    assert wait_for(lambda: mug_state() == (limit, False))
    assert wait_for(lambda: any(e.kind == "property_set" for e in events))
    stale = [e for e in events if e.kind == "property_set"]
    payload = json.loads(stale[-1].payload_json)
    assert payload["name"] == "at_last_place" and payload["value"] is False
    assert stale[-1].subject_id == "mug_1"
    assert len(missed()) == limit
    reasons = [json.loads(e.payload_json) for e in missed()]
    assert all(r["node_id"] == "mug_1" and r["camera"] == "pole" for r in reasons)
    assert all(r["reason"].startswith("camera pole: expected in view") for r in reasons)
    assert node.counters.get("misses.recorded") == limit
    assert node.counters.get("misses.stale") == 1

    # Already gone: further empty views add no misses. Seen again: back at its place.
    pub.publish(frame(13.0, with_view=view()))
    pub.publish(frame(15.0, mug(15.0), with_view=view()))
    assert wait_for(lambda: mug_state() == (0, True))
    assert node.counters.get("misses.recorded") == limit and len(missed()) == limit


def test_misses_can_be_switched_off(
    tmp_path: Path, ros_context: Context, ros_executor: MultiThreadedExecutor,
    spin_node: Node, wait_for: Wait,
) -> None:
    node = start(ros_context, ros_executor, tmp_path, record_misses=False)
    pub = spin_node.create_publisher(ObjectObservationArray, "observations", qos.EVENTS)
    assert wait_for(lambda: pub.get_subscription_count() > 0)
    pub.publish(frame(5.0, mug(5.0), with_view=view()))
    for stamp in (7.0, 9.0, 11.0, 13.0):
        pub.publish(frame(stamp, with_view=view()))
    pub.publish(frame(14.0, observation_msg("banana", BANANA_AT, detection_id="b", stamp=14.0),
                      with_view=view()))
    assert wait_for(lambda: len(node.world.state.nodes) == 2)
    with node._memory.hold():
        assert node.world.node("mug_1").misses == 0
    assert node.counters.get("misses.recorded") == 0


def test_bad_miss_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="min_range_m"):
        SceneGraphConfig(miss_min_range_m=5.0, miss_max_range_m=4.0)
    with pytest.raises(ValueError, match="miss_min_period_s"):
        SceneGraphConfig(miss_min_period_s=-1.0)


def test_a_view_survives_the_message_round_trip() -> None:
    grid = np.full((24, 32), 3.0, np.float32)
    grid[0, :] = np.nan
    original = view(depth_min_m=grid)
    back = view_from_msg(view_to_msg(original))
    assert back is not None
    np.testing.assert_allclose(back.camera_to_map, CAMERA_TO_MAP, atol=1e-9)
    assert (back.fx, back.fy, back.cx, back.cy, back.width, back.height) == (
        300.0, 300.0, 159.5, 119.5, 320, 240)
    np.testing.assert_array_equal(back.depth_min_m, grid)  # NaN cells stay NaN
    assert back.labels_sought == ("mug", "banana") and back.max_range_m == 10.0
    assert view_from_msg(view_to_msg(None)) is None


def test_a_broken_view_message_is_refused() -> None:
    zero_turn = view_to_msg(view())
    q = zero_turn.pose.orientation
    q.x = q.y = q.z = q.w = 0.0
    with pytest.raises(MessageValueError, match="quaternion"):
        view_from_msg(zero_turn)
    short = view_to_msg(view())
    short.depth_cols = 31
    with pytest.raises(MessageValueError, match="768 values"):
        view_from_msg(short)


def test_a_wrist_view_that_may_not_start_a_cabinet_is_counted_and_missed_for_nothing(
    tmp_path: Path, ros_context: Context, ros_executor: MultiThreadedExecutor,
    spin_node: Node, wait_for: Wait,
) -> None:
    """The installed memory file lists the wrist among the cameras that may not start a
    cabinet: a wrist array whose cabinet matches no node stores nothing for it, counts it as
    held back, and still stores the mug beside it; the pole camera then starts the cabinet."""
    node = start(ros_context, ros_executor, tmp_path)
    assert "wrist" in node.world.config.association.no_start_cameras["cabinet"]
    pub = spin_node.create_publisher(ObjectObservationArray, "observations", qos.EVENTS)
    assert wait_for(lambda: pub.get_subscription_count() > 0)
    cabinet = observation_msg("cabinet", (2.5, 0.5, 1.2), detection_id="cab@5", half=0.25,
                              stamp=5.0, camera="wrist")
    wrist_mug = observation_msg("mug", MUG_AT, detection_id="mug@5", half=0.06, stamp=5.0,
                                camera="wrist")
    pub.publish(observation_batch(cabinet, wrist_mug, camera="wrist", stamp=5.0))
    assert wait_for(lambda: node.counters.get("observations_held_back.wrist") == 1)
    with node._memory.hold():
        assert sorted(node.world.state.nodes) == ["mug_1"]
    pole_cabinet = observation_msg("cabinet", (2.5, 0.5, 1.2), detection_id="cab@6",
                                   half=0.25, stamp=6.0)
    pub.publish(frame(6.0, pole_cabinet))
    assert wait_for(lambda: "cabinet_1" in node.world.state.nodes)
    assert node.counters.get("observations_held_back.wrist") == 1
