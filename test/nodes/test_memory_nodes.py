"""The scene graph and keyframe nodes over real DDS, including restarts and bad requests."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from image_helpers import textured
from rclpy.context import Context
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from ros_helpers import call_service, observation_batch, observation_msg

from mimir.nodes.memory.keyframe_node import KeyframeNode
from mimir.nodes.memory.keyframe_params import KeyframeConfig as KeyframeParams
from mimir.nodes.memory.scene_graph_node import SceneGraphNode
from mimir.ros import qos
from mimir.ros.images import numpy_to_image
from mimir.ros.time import from_seconds
from mimir_memory.world import WorldMemory
from mimir_msgs.msg import (
    ContentItem,
    EvidenceRef,
    InteractionEvent,
    KeyframeLabel,
    ObjectObservation,
    ObjectObservationArray,
    Property,
    SceneGraph,
)
from mimir_msgs.msg import MemoryEvent as MemoryEventMsg
from mimir_msgs.srv import (
    AddKeyframeLabels,
    GetKeyframeImage,
    GetSceneGraph,
    QueryKeyframes,
    SaveKeyframe,
    UpdateNode,
)

pytestmark = pytest.mark.ros

Wait = Callable[..., bool]


def _observation(label: str, xyz: tuple[float, float, float], half: float = 0.1,
                 stamp: float = 5.0) -> ObjectObservation:
    return observation_msg(label, xyz, detection_id=f"det-{label}-{xyz[0]}", half=half,
                           stamp=stamp)


def _batch(*observations: ObjectObservation, frame: str = "map") -> ObjectObservationArray:
    return observation_batch(*observations, frame=frame, stamp=5.0)


def _start_scene_graph(context: Context, executor: MultiThreadedExecutor,
                       memory_dir: Path) -> SceneGraphNode:
    node = SceneGraphNode(context=context, parameter_overrides=[
        Parameter("memory_dir", value=str(memory_dir)),
        Parameter("publish_period_s", value=0.1),
    ])
    executor.add_node(node)
    return node


def _last_scene_graph(executor: MultiThreadedExecutor) -> SceneGraphNode:
    return [n for n in executor.get_nodes() if isinstance(n, SceneGraphNode)][-1]


def test_scene_graph_fuses_updates_and_restarts(
    tmp_path: Path, ros_context: Context, ros_executor: MultiThreadedExecutor,
    spin_node: Node, wait_for: Wait,
) -> None:
    graph_node = _start_scene_graph(ros_context, ros_executor, tmp_path)
    graphs: list[SceneGraph] = []
    events: list[MemoryEventMsg] = []
    spin_node.create_subscription(SceneGraph, "scene_graph", graphs.append, qos.LATCHED)
    spin_node.create_subscription(MemoryEventMsg, "memory_events", events.append, qos.EVENTS)
    pub = spin_node.create_publisher(ObjectObservationArray, "observations", qos.EVENTS)
    assert wait_for(lambda: pub.get_subscription_count() > 0)

    pub.publish(_batch(_observation("cabinet", (1.0, 0.0, 1.2)),
                       _observation("mug", (2.0, 0.5, 0.9), half=0.04)))
    pub.publish(_batch(_observation("cabinet", (1.1, 0.0, 1.2), stamp=6.0)))
    assert wait_for(lambda: graphs and graphs[-1].revision >= 3)
    latest = graphs[-1]
    assert [n.id for n in latest.nodes] == ["cabinet_1", "mug_1"]
    cabinet = latest.nodes[0]
    assert cabinet.observation_count == 2
    assert cabinet.position.x == pytest.approx(1.05)
    assert latest.header.frame_id == "map"
    assert {e.kind for e in events} >= {"node_created", "observation_fused"}

    # Bad input: a batch in the wrong frame and a NaN centroid are dropped, nothing is written.
    pub.publish(_batch(_observation("cabinet", (9.0, 9.0, 1.0)), frame="odom"))
    pub.publish(_batch(_observation("bowl", (math.nan, 0.0, 0.0))))
    revision = latest.revision

    request = UpdateNode.Request(
        node_id="cabinet_1", event_id="analysis-1", source="interaction",
        properties=[Property(name="openable", value_json="false", confidence=0.9,
                             reasoning="grasped and pulled, no motion"),
                    Property(name="is_opened", value_json="false", confidence=0.9),
                    Property(name="locked", value_json="true", confidence=0.85,
                             reasoning="contact without displacement")],
        set_contents=True, contents=[ContentItem(name="banana", description="yellow")],
        contents_source_action="inspect",
        evidence=[EvidenceRef(kind="keyframe", id="kf1"), EvidenceRef(kind="detection", id="d1")],
        verdict="admit", verdict_reason="contact evidence",
    )
    response = call_service(spin_node, UpdateNode, "update_node", request)
    assert response.error_code == UpdateNode.Response.NONE, response.error_msg
    props = {p.name: json.loads(p.value_json) for p in response.node.properties}
    assert props["locked"] is True and props["openable"] is False and props["is_opened"] is False
    assert [c.name for c in response.node.contents] == ["banana"]
    assert response.revision > revision
    assert response.events[0].evidence[0].id == "kf1"

    # Replaying the same request changes nothing.
    again = call_service(spin_node, UpdateNode, "update_node", request)
    assert again.error_code == UpdateNode.Response.NONE
    assert again.revision == response.revision
    assert [e.event_id for e in again.events] == [e.event_id for e in response.events]

    # Bad requests: unknown node, malformed JSON, unknown verdict, id reused for another node.
    unknown = call_service(spin_node, UpdateNode, "update_node",
                    UpdateNode.Request(node_id="ghost_3", properties=request.properties))
    assert unknown.error_code == UpdateNode.Response.UNKNOWN_NODE
    bad_json = call_service(spin_node, UpdateNode, "update_node", UpdateNode.Request(
        node_id="cabinet_1", properties=[Property(name="fullness", value_json="{half",
                                                  confidence=0.5)]))
    assert bad_json.error_code == UpdateNode.Response.INVALID_REQUEST
    bad_verdict = call_service(spin_node, UpdateNode, "update_node", UpdateNode.Request(
        node_id="cabinet_1", verdict="maybe"))
    assert bad_verdict.error_code == UpdateNode.Response.INVALID_REQUEST
    reused = call_service(spin_node, UpdateNode, "update_node", UpdateNode.Request(
        node_id="mug_1", event_id="analysis-1", properties=request.properties[2:]))
    assert reused.error_code == UpdateNode.Response.DUPLICATE_EVENT

    before = call_service(spin_node, GetSceneGraph, "get_scene_graph", GetSceneGraph.Request())
    assert before.error_code == GetSceneGraph.Response.NONE
    past = call_service(spin_node, GetSceneGraph, "get_scene_graph",
                 GetSceneGraph.Request(use_as_of=True, as_of=from_seconds(5.5)))
    assert [n.observation_count for n in past.graph.nodes] == [1, 1]
    missing = call_service(spin_node, GetSceneGraph, "get_scene_graph",
                    GetSceneGraph.Request(node_ids=["nope_1"]))
    assert missing.error_code == GetSceneGraph.Response.UNKNOWN_NODE

    # Restart on the same database: the same graph comes back.
    ros_executor.remove_node(graph_node)
    graph_node.destroy_node()
    _start_scene_graph(ros_context, ros_executor, tmp_path)
    after = call_service(spin_node, GetSceneGraph, "get_scene_graph", GetSceneGraph.Request())
    assert after.graph.revision == before.graph.revision
    assert after.graph.nodes == before.graph.nodes

    # A duplicate merged while the node was down: asking for its id answers the kept node.
    ros_executor.remove_node(after_node := _last_scene_graph(ros_executor))
    after_node.destroy_node()
    world = WorldMemory.open(tmp_path / "world.db")
    try:
        duplicate = world.add_node("mug", (2.05, 0.5, 0.9), stamp=20.0).payload["node_id"]
        world.merge("mug_1", duplicate, stamp=21.0, reason="one mug seen twice")
    finally:
        world.close()
    _start_scene_graph(ros_context, ros_executor, tmp_path)
    merged = call_service(spin_node, GetSceneGraph, "get_scene_graph",
                          GetSceneGraph.Request(node_ids=[duplicate, "mug_1"]))
    assert merged.error_code == GetSceneGraph.Response.NONE, merged.error_msg
    assert [n.id for n in merged.graph.nodes] == ["mug_1"]


@pytest.mark.parametrize("bad", [{"buffer_min_period_s": -0.1},
                                 {"buffer_min_period_s": 60.0, "buffer_seconds": 60.0},
                                 {"buffer_max_frames": 0}])
def test_keyframe_buffer_settings_are_checked(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="buffer"):
        KeyframeParams(**bad)


def test_keyframe_node_saves_interactions_and_serves_queries(
    tmp_path: Path, ros_context: Context, ros_executor: MultiThreadedExecutor,
    spin_node: Node, wait_for: Wait,
) -> None:
    node = KeyframeNode(context=ros_context, parameter_overrides=[
        Parameter("memory_dir", value=str(tmp_path)),
        Parameter("cameras", value=["base", "wrist"]),
        Parameter("after_wait_s", value=0.5),
        Parameter("buffer_min_period_s", value=0.1),
    ])
    ros_executor.add_node(node)
    image_pubs = {cam: spin_node.create_publisher(
        type(numpy_to_image(np.zeros((2, 2, 3), np.uint8), "rgb8")),
        f"cameras/{cam}/color/image_raw", qos.SENSOR) for cam in ("base", "wrist")}
    events = spin_node.create_publisher(InteractionEvent, "interaction_events", qos.EVENTS)
    assert wait_for(lambda: all(p.get_subscription_count() > 0 for p in image_pubs.values()))
    assert wait_for(lambda: events.get_subscription_count() > 0)

    for i in range(12):  # 10.0 .. 12.2 s, every 0.2 s
        stamp = 10.0 + 0.2 * i
        for k, (cam, pub) in enumerate(image_pubs.items()):
            msg = numpy_to_image(textured(100 * k + i, 192, 256), "rgb8")
            msg.header.stamp = from_seconds(stamp)
            msg.header.frame_id = f"{cam}_color_optical_frame"
            pub.publish(msg)
        # Camera streams are best effort with a shallow queue: pace the frames like a camera.
        assert wait_for(lambda s=stamp: all((b.latest_stamp() or 0) >= s - 1e-6
                                            for b in node.buffers.values()))
    assert wait_for(lambda: all((b.latest_stamp() or 0) >= 12.1 for b in node.buffers.values()))
    # a frame within buffer_min_period_s of the last kept one is skipped, a later one kept
    for stamp in (12.25, 12.35):
        late = numpy_to_image(textured(999, 192, 256), "rgb8")
        late.header.stamp = from_seconds(stamp)
        node._on_image("base", late)
    assert node.buffers["base"].stamps()[-2:] == [pytest.approx(12.2), pytest.approx(12.35)]
    # a frame stamped an hour past the node's clock is refused: kept, it would make every
    # real frame after it too old for the buffer
    future = numpy_to_image(textured(998, 192, 256), "rgb8")
    future.header.stamp = from_seconds(time.time() + 3600.0)
    node._on_image("base", future)
    assert node.counters.get("base.bad_stamp") == 1
    assert node.buffers["base"].stamps()[-1] == pytest.approx(12.35)

    ended = InteractionEvent(interaction_id="int-7", phase=InteractionEvent.PHASE_ENDED,
                             primitive="open", target_id="cabinet_1", success=False,
                             outcome="NO_MOTION", window_start=from_seconds(10.4),
                             window_end=from_seconds(11.6))
    events.publish(ended)

    def interaction_frames() -> list[Any]:
        res = call_service(spin_node, QueryKeyframes, "query_keyframes",
                    QueryKeyframes.Request(node_ids=["cabinet_1"], trigger="interaction"))
        return list(res.keyframes)

    assert wait_for(lambda: len(interaction_frames()) == 6, 20.0), node.counters
    frames = interaction_frames()
    assert {(f.camera, f.phase) for f in frames} == {
        (cam, phase) for cam in ("base", "wrist") for phase in ("before", "during", "after")}
    assert all(f.action == "open" and f.interaction_id == "int-7" for f in frames)
    before = next(f for f in frames if f.camera == "base" and f.phase == "before")
    assert before.header.stamp.sec == 10 and before.header.stamp.nanosec == pytest.approx(4e8,
                                                                                          abs=1e3)

    # The analyzer's peak frame with labels, then more labels, then a label query.
    saved = call_service(spin_node, SaveKeyframe, "save_keyframe", SaveKeyframe.Request(
        camera="wrist", stamp=from_seconds(11.0), trigger="interaction", phase="peak",
        interaction_id="int-7", action="open", linked_nodes=["cabinet_1"],
        labels=[KeyframeLabel(text="gripper closed on handle", source="analyzer")],
        caption="the door stays shut"))
    assert saved.error_code == SaveKeyframe.Response.NONE, saved.error_msg
    labelled = call_service(spin_node, AddKeyframeLabels, "add_keyframe_labels",
                     AddKeyframeLabels.Request(keyframe_id=saved.keyframe_id, labels=[
                         KeyframeLabel(text="locked cabinet", source="analyzer")]))
    assert labelled.error_code == AddKeyframeLabels.Response.NONE
    assert {lab.text for lab in labelled.metadata.labels} >= {"locked cabinet"}
    by_label = call_service(spin_node, QueryKeyframes, "query_keyframes",
                     QueryKeyframes.Request(labels=["LOCKED"]))
    assert [f.keyframe_id for f in by_label.keyframes] == [saved.keyframe_id]

    image = call_service(spin_node, GetKeyframeImage, "get_keyframe_image",
                  GetKeyframeImage.Request(keyframe_id=before.keyframe_id))
    assert image.error_code == GetKeyframeImage.Response.NONE
    assert (image.image.height, image.image.width, image.image.encoding) == (192, 256, "rgb8")
    thumb = call_service(spin_node, GetKeyframeImage, "get_keyframe_image",
                  GetKeyframeImage.Request(keyframe_id=before.keyframe_id, thumbnail=True))
    assert 0 < thumb.image.width < 256

    # Bad requests.
    unknown = call_service(spin_node, GetKeyframeImage, "get_keyframe_image",
                    GetKeyframeImage.Request(keyframe_id="0" * 16))
    assert unknown.error_code == GetKeyframeImage.Response.UNKNOWN_KEYFRAME
    bad_trigger = call_service(spin_node, QueryKeyframes, "query_keyframes",
                        QueryKeyframes.Request(trigger="dream"))
    assert bad_trigger.error_code == QueryKeyframes.Response.INVALID_REQUEST
    reversed_window = call_service(
        spin_node, QueryKeyframes, "query_keyframes",
        QueryKeyframes.Request(start=from_seconds(20.0), end=from_seconds(10.0)))
    assert reversed_window.error_code == QueryKeyframes.Response.INVALID_REQUEST
    no_frame = call_service(spin_node, SaveKeyframe, "save_keyframe", SaveKeyframe.Request(
        camera="wrist", stamp=from_seconds(500.0), trigger="interaction", phase="peak"))
    assert no_frame.error_code == SaveKeyframe.Response.NO_FRAME
    bad_camera = call_service(spin_node, SaveKeyframe, "save_keyframe", SaveKeyframe.Request(
        camera="ceiling", stamp=from_seconds(11.0)))
    assert bad_camera.error_code == SaveKeyframe.Response.INVALID_REQUEST
    empty_label = call_service(spin_node, AddKeyframeLabels, "add_keyframe_labels",
                        AddKeyframeLabels.Request(keyframe_id=saved.keyframe_id,
                                                  labels=[KeyframeLabel(text=" ")]))
    assert empty_label.error_code == AddKeyframeLabels.Response.INVALID_REQUEST


def test_scene_graph_answers_while_its_writer_is_busy_and_drops_the_oldest_backlog(
    tmp_path: Path, ros_context: Context, ros_executor: MultiThreadedExecutor,
    spin_node: Node, wait_for: Wait,
) -> None:
    """Observations queue for one writer thread; a full queue loses its oldest batch (counted),
    and the services keep answering once the writer lets go of memory."""
    node = SceneGraphNode(context=ros_context, parameter_overrides=[
        Parameter("memory_dir", value=str(tmp_path)),
        Parameter("queue_batches", value=2),
    ])
    ros_executor.add_node(node)
    pub = spin_node.create_publisher(ObjectObservationArray, "observations", qos.EVENTS)
    assert wait_for(lambda: pub.get_subscription_count() > 0)
    with node._memory.hold():  # the writer stalls as if fusing a huge batch
        for i in range(6):
            pub.publish(_batch(_observation("cup", (1.0 + 2.0 * i, 0.0, 0.5))))
        assert wait_for(lambda: node.counters.get("observations_dropped.backlog") >= 3)
        assert len(node.world.state.nodes) == 0
    # the newest batches survive the backlog; the oldest were dropped. Wait until every batch
    # is accounted for (the writer may hold one it took before the stall besides the queue)
    assert wait_for(lambda: node.counters.get("observations_dropped.backlog")
                    + len(node.world.state.nodes) == 6)
    xs = sorted(float(n.centroid[0]) for n in node.world.state.nodes.values())
    assert len(xs) >= 2 and xs[-1] == pytest.approx(11.0)
    response = call_service(spin_node, GetSceneGraph, "get_scene_graph", GetSceneGraph.Request())
    assert response.error_code == GetSceneGraph.Response.NONE
    assert len(response.graph.nodes) == len(xs)


def test_scene_graph_keeps_a_fixture_in_place_while_the_robot_opens_it(
    tmp_path: Path, ros_context: Context, ros_executor: MultiThreadedExecutor,
    spin_node: Node, wait_for: Wait,
) -> None:
    """An open starting on ``interaction_events`` anchors its target: a view of the door out in
    the room widens the cabinet's box and leaves its centroid. A start naming a node memory
    does not hold is counted and changes nothing; a pick does not anchor its target."""
    node = _start_scene_graph(ros_context, ros_executor, tmp_path)
    obs_pub = spin_node.create_publisher(ObjectObservationArray, "observations", qos.EVENTS)
    act_pub = spin_node.create_publisher(InteractionEvent, "interaction_events", qos.EVENTS)
    assert wait_for(lambda: obs_pub.get_subscription_count() > 0
                    and act_pub.get_subscription_count() > 0)
    obs_pub.publish(_batch(_observation("cabinet", (1.0, 0.0, 1.2)),
                           _observation("mug", (2.0, 0.5, 0.9), half=0.04)))
    assert wait_for(lambda: len(node.world.state.nodes) == 2)

    def started(primitive: str, target: str, interaction_id: str) -> InteractionEvent:
        msg = InteractionEvent(interaction_id=interaction_id, phase=InteractionEvent.PHASE_STARTED,
                               primitive=primitive, target_id=target, task="find the mug")
        msg.header.stamp = msg.window_start = from_seconds(6.0)
        return msg

    act_pub.publish(started("open", "cabinet_9", "i-0"))
    assert wait_for(lambda: node.counters.get("operations_refused.UNKNOWN_NODE") == 1)
    act_pub.publish(started("pick", "mug_1", "i-1"))
    act_pub.publish(started("open", "cabinet_1", "i-2"))
    assert wait_for(lambda: "i-2" in node.world._operations)
    door = _observation("cabinet", (0.75, 0.0, 1.2), stamp=7.0)
    door.bbox_min.x = 0.45
    obs_pub.publish(_batch(door, _observation("mug", (2.1, 0.5, 0.9), half=0.04, stamp=7.0)))
    assert wait_for(lambda: node.world.node("mug_1").observation_count == 2
                    and node.world.node("cabinet_1").observation_count == 2)
    cabinet = node.world.node("cabinet_1")
    assert cabinet.centroid[0] == pytest.approx(1.0)
    assert cabinet.bbox_min[0] < 0.85  # the box reached toward the door
    assert node.world.node("mug_1").centroid[0] == pytest.approx(2.05)


def test_scene_graph_refuses_an_empty_queue() -> None:
    from mimir.nodes.memory.scene_graph_node import SceneGraphConfig

    with pytest.raises(ValueError, match="queue_batches"):
        SceneGraphConfig(queue_batches=0)


def test_graph_and_markers_reach_a_subscriber_that_joins_after_the_change(
    tmp_path: Path, ros_context: Context, ros_executor: MultiThreadedExecutor,
    spin_node: Node, wait_for: Wait,
) -> None:
    """Nothing is built for a topic nobody subscribes to, and a late joiner still gets it."""
    from visualization_msgs.msg import MarkerArray

    node = _start_scene_graph(ros_context, ros_executor, tmp_path)
    pub = spin_node.create_publisher(ObjectObservationArray, "observations", qos.EVENTS)
    assert wait_for(lambda: pub.get_subscription_count() > 0)
    pub.publish(_batch(_observation("cup", (1.0, 0.0, 0.5))))
    assert wait_for(lambda: len(node.world.state.nodes) == 1)
    assert node._sent == {"graph": -1, "markers": -1}  # nothing built: no subscriber yet
    graphs: list[SceneGraph] = []
    markers: list[MarkerArray] = []
    spin_node.create_subscription(SceneGraph, "scene_graph", graphs.append, qos.LATCHED)
    spin_node.create_subscription(MarkerArray, "scene_graph/markers", markers.append,
                                  qos.LATCHED)
    assert wait_for(lambda: graphs and markers, timeout=10.0)
    assert [n.label for n in graphs[-1].nodes] == ["cup"]
    assert any(m.text.startswith("cup") for m in markers[-1].markers)


def test_keyframes_record_where_the_camera_stood_and_are_drawn_as_frustums(
    tmp_path: Path, ros_context: Context, ros_executor: MultiThreadedExecutor,
    spin_node: Node, wait_for: Wait,
) -> None:
    """A keyframe keeps its optical frame's pose (TF) and the camera info's intrinsics scaled to
    the stored image; a camera without camera info or without a transform saves no view; a bad
    camera info is counted and ignored; the views reach ``keyframes/markers`` as frustums."""
    from sensor_msgs.msg import CameraInfo, Image
    from tf2_msgs.msg import TFMessage
    from visualization_msgs.msg import MarkerArray

    from mimir.nodes.perception.messages import intrinsics_to_camera_info
    from mimir.ros.tf import matrix_to_transform
    from mimir.transforms import compose
    from mimir_perception.camera import Intrinsics

    node = KeyframeNode(context=ros_context, parameter_overrides=[
        Parameter("memory_dir", value=str(tmp_path)),
        Parameter("cameras", value=["base", "wrist", "pole"]),
        Parameter("buffer_min_period_s", value=0.0),
    ])
    ros_executor.add_node(node)
    optical = {cam: f"{cam}_color_optical_frame" for cam in ("base", "wrist", "pole")}
    camera_pose = compose([0.5, 0.2, 1.0], [-0.5, 0.5, -0.5, 0.5])  # looking along +x
    tf_pub = spin_node.create_publisher(TFMessage, "/tf_static", qos.TF_STATIC)
    tf_pub.publish(TFMessage(transforms=[
        matrix_to_transform(camera_pose, "map", optical["wrist"], 0.0),
        matrix_to_transform(camera_pose, "map", optical["base"], 0.0)]))  # pole: no transform
    info_pubs = {cam: spin_node.create_publisher(CameraInfo, f"cameras/{cam}/color/camera_info",
                                                 qos.SENSOR) for cam in ("wrist", "pole")}
    image_pubs = {cam: spin_node.create_publisher(Image, f"cameras/{cam}/color/image_raw",
                                                  qos.SENSOR) for cam in optical}
    markers: list[MarkerArray] = []
    spin_node.create_subscription(MarkerArray, "keyframes/markers", markers.append, qos.LATCHED)
    assert wait_for(lambda: all(p.get_subscription_count() > 0
                                for p in (*info_pubs.values(), *image_pubs.values())))
    broken = CameraInfo(width=512, height=384)  # an all-zero projection: no focal length
    info_pubs["wrist"].publish(broken)
    assert wait_for(lambda: node.counters.get("wrist.bad_camera_info") >= 1)
    # the camera calibrated at twice the published size
    full = Intrinsics(400.0, 400.0, 255.5, 191.5, 512, 384)
    for cam in ("wrist", "pole"):
        info_pubs[cam].publish(intrinsics_to_camera_info(full))
    assert wait_for(lambda: node.views.cameras == {"wrist", "pole"})
    assert wait_for(lambda: node._tf.lookup("map", optical["base"], 0.0) is not None)

    for i, stamp in enumerate((20.0, 20.2, 20.4)):
        for k, (cam, pub) in enumerate(image_pubs.items()):
            msg = numpy_to_image(textured(10 * k + i, 192, 256), "rgb8")
            msg.header.stamp = from_seconds(stamp)
            msg.header.frame_id = optical[cam]
            pub.publish(msg)
        assert wait_for(lambda s=stamp: all((b.latest_stamp() or 0) >= s - 1e-6
                                            for b in node.buffers.values()))
    saved = {}
    for cam in optical:
        res = call_service(spin_node, SaveKeyframe, "save_keyframe", SaveKeyframe.Request(
            camera=cam, stamp=from_seconds(20.2), trigger="interaction", phase="peak",
            linked_nodes=["cabinet_1"]))
        assert res.error_code == SaveKeyframe.Response.NONE, res.error_msg
        saved[cam] = node.store.get(res.keyframe_id)

    view = saved["wrist"].camera_view
    assert view is not None
    assert np.allclose(view.camera_to_map(), camera_pose)
    assert (view.fx, view.fy, view.cx, view.cy) == pytest.approx((200.0, 200.0, 127.5, 95.5))
    uv, depth = view.project([[2.5, 0.2, 1.0]])  # 2 m straight ahead: the image centre
    assert np.allclose(uv[0], [127.5, 95.5]) and depth[0] == pytest.approx(2.0)
    assert saved["base"].camera_view is None and node.counters.get("base.no_camera_info") == 1
    assert saved["pole"].camera_view is None and node.counters.get("pole.no_camera_pose") == 1

    def frustums() -> list[Any]:
        return [m for m in (markers[-1].markers if markers else [])
                if m.ns == "keyframe_frustums"]

    assert wait_for(frustums, timeout=10.0)
    (lines,) = frustums()
    assert lines.header.frame_id == "map" and len(lines.points) == 16  # one camera, 8 edges
    apex = lines.points[0]
    assert (apex.x, apex.y, apex.z) == pytest.approx((0.5, 0.2, 1.0))
    assert all(p.x == pytest.approx(0.5 + 0.12) for p in lines.points[1::2][:4])


def test_keyframes_keep_the_segmentation_of_their_frame(
    tmp_path: Path, ros_context: Context, ros_executor: MultiThreadedExecutor,
    spin_node: Node, wait_for: Wait,
) -> None:
    """A segmentation reaches the buffered frame of its stamp whether it comes after its image
    (over DDS) or before it, and is saved with the frame; one that is not a 16-bit image of the
    frame's size is counted and the frame saved without it, as is a frame with none."""
    from sensor_msgs.msg import Image

    from mimir_msgs.msg import Segmentation

    node = KeyframeNode(context=ros_context, parameter_overrides=[
        Parameter("memory_dir", value=str(tmp_path)),
        Parameter("cameras", value=["wrist"]),
        Parameter("buffer_min_period_s", value=0.1),
    ])
    ros_executor.add_node(node)
    image_pub = spin_node.create_publisher(Image, "cameras/wrist/color/image_raw", qos.SENSOR)
    seg_pub = spin_node.create_publisher(Segmentation, "cameras/wrist/segmentation", qos.SENSOR)
    assert wait_for(lambda: image_pub.get_subscription_count() > 0
                    and seg_pub.get_subscription_count() > 0)
    ids = np.zeros((192, 256), np.uint16)
    ids[40:120, 60:140] = 9

    def segmentation(stamp: float, instances: np.ndarray, encoding: str) -> Segmentation:
        msg = Segmentation(camera="wrist", instance_ids=numpy_to_image(instances, encoding),
                           ids=[9], labels=["mug"], scores=[0.9], backend="sim_ground_truth")
        msg.header.stamp = from_seconds(stamp)
        return msg

    def show(stamp: float) -> None:
        msg = numpy_to_image(textured(int(stamp * 10), 192, 256), "rgb8")
        msg.header.stamp = from_seconds(stamp)
        msg.header.frame_id = "wrist_color_optical_frame"
        image_pub.publish(msg)
        assert wait_for(lambda: (node.buffers["wrist"].latest_stamp() or 0) >= stamp - 1e-6)

    buffer = node.buffers["wrist"]
    show(10.0)
    seg_pub.publish(segmentation(10.0, ids, "mono16"))  # after its image
    assert wait_for(lambda: getattr(buffer.nearest(10.0), "depth", None) is not None)
    buffer.add_depth(10.2, segmentation(10.2, ids, "mono16"))  # before its image
    show(10.2)
    show(10.4)
    seg_pub.publish(segmentation(10.4, ids[::2, ::2].copy(), "mono16"))  # another size
    assert wait_for(lambda: getattr(buffer.nearest(10.4), "depth", None) is not None)
    show(10.6)
    buffer.add_depth(10.6, segmentation(10.6, (ids > 0).astype(np.uint8), "mono8"))
    show(10.8)  # no segmentation at all

    kept = {}
    for stamp in (10.0, 10.2, 10.4, 10.6, 10.8):
        res = call_service(spin_node, SaveKeyframe, "save_keyframe", SaveKeyframe.Request(
            camera="wrist", stamp=from_seconds(stamp), trigger="interaction", phase="peak",
            linked_nodes=["mug_1"]))
        assert res.error_code == SaveKeyframe.Response.NONE, res.error_msg
        kept[stamp] = node.store.load_instances(res.keyframe_id)
    assert np.array_equal(kept[10.0], ids) and np.array_equal(kept[10.2], ids)
    assert kept[10.4] is None and kept[10.6] is None and kept[10.8] is None
    assert node.counters.get("wrist.bad_segmentation") == 2
