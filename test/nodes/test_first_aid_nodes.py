"""First aid over real DDS: the inputs a hostile or broken peer sent the running nodes.

Each case is one that once killed a node, poisoned memory, or got a wrong error code. The
nodes stay up, refuse with the code the interface documents, change nothing they refused, and
report what they refused on ``/diagnostics``.
"""

from __future__ import annotations

import json
import math
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from diagnostic_msgs.msg import DiagnosticArray
from image_helpers import textured
from rclpy.context import Context
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from ros_helpers import call_service, observation_batch, observation_msg
from test_deprojection_node import MAP_FROM_CAMERA, Driver, plane, two_instances

from mimir.nodes.memory.keyframe_node import KeyframeNode
from mimir.nodes.memory.scene_graph_node import SceneGraphNode
from mimir.nodes.perception.deprojection_node import DeprojectionNode
from mimir.ros import qos
from mimir.ros.images import numpy_to_image
from mimir.ros.tf import TransformPublisher, matrix_to_transform
from mimir.ros.time import from_seconds, to_seconds
from mimir_memory.events import canonical_json
from mimir_msgs.msg import (
    ContentItem,
    KeyframeMetadata,
    ObjectObservation,
    ObjectObservationArray,
    Property,
    SceneGraph,
)
from mimir_msgs.srv import GetSceneGraph, QueryKeyframes, SaveKeyframe, UpdateNode
from mimir_perception.camera import make_transform

pytestmark = pytest.mark.ros

Wait = Callable[..., bool]


class Diagnostics:
    """The latest counters each node reported on /diagnostics."""

    def __init__(self, node: Node) -> None:
        self._lock = threading.Lock()
        self.by_node: dict[str, dict[str, str]] = {}
        node.create_subscription(DiagnosticArray, "/diagnostics", self._on, qos.EVENTS)

    def _on(self, msg: DiagnosticArray) -> None:
        with self._lock:
            for status in msg.status:
                self.by_node[status.name] = {kv.key: kv.value for kv in status.values}

    def count(self, node_suffix: str, key: str) -> int:
        with self._lock:
            for name, values in self.by_node.items():
                if name.endswith(node_suffix):
                    return int(values.get(key, "0"))
        return -1


def _obs(label: str, centre: tuple[float, float, float], *, half: float = 0.05,
         lo: tuple[float, float, float] | None = None,
         hi: tuple[float, float, float] | None = None, stamp: float = 5.0) -> ObjectObservation:
    return observation_msg(label, centre, detection_id=f"det-{label}-{centre[0]:g}", half=half,
                           lo=lo, hi=hi, stamp=stamp)


_batch = observation_batch


def _scene_graph(context: Context, executor: MultiThreadedExecutor,
                 memory_dir: Path) -> SceneGraphNode:
    node = SceneGraphNode(context=context, parameter_overrides=[
        Parameter("memory_dir", value=str(memory_dir)),
        Parameter("publish_period_s", value=0.1),
        Parameter("diagnostics_period", value=0.2),
    ])
    executor.add_node(node)
    return node


def _graph(node: Node, wait_for: Wait) -> SceneGraph:
    reply = call_service(node, GetSceneGraph, "get_scene_graph", GetSceneGraph.Request())
    assert reply.error_code == GetSceneGraph.Response.NONE
    return reply.graph


def test_scene_graph_survives_poison_and_answers_true_codes(
    tmp_path: Path, ros_context: Context, ros_executor: MultiThreadedExecutor,
    spin_node: Node, wait_for: Wait,
) -> None:
    graph_node = _scene_graph(ros_context, ros_executor, tmp_path)
    diag = Diagnostics(spin_node)
    pub = spin_node.create_publisher(ObjectObservationArray, "observations", qos.EVENTS)
    assert wait_for(lambda: pub.get_subscription_count() > 0)
    now = time.time()

    pub.publish(_batch(_obs("bowl", (1.0, 0.0, 0.8), stamp=now),
                       _obs("cabinet", (0.0, 1.0, 1.0), half=0.3, stamp=now)))
    assert wait_for(lambda: {n.id for n in _graph(spin_node, wait_for).nodes}
                    == {"bowl_1", "cabinet_1"})

    # The poison of the report, one at a time and mixed with a good cup: only the cup lands.
    poison = [
        _obs("bowl", (1e155, 0.0, 0.0), stamp=now),
        _obs("bowl", (1e300, 0.0, 0.0), stamp=now),
        _obs("bowl", (1.0, 0.0, 0.8), lo=(-1e308,) * 3, hi=(1e308,) * 3, stamp=now),
        _obs("bowl", (9.0, 0.0, 0.8), lo=(0.9, -0.1, 0.7), hi=(1.1, 0.1, 0.9), stamp=now),
        _obs("bowl", (1.0, 0.0, 0.8), stamp=float(2**31 - 1)),
    ]
    for item in poison:
        pub.publish(_batch(item))
    pub.publish(_batch(*poison, _obs("cup", (2.0, 0.0, 0.8), stamp=now)))
    assert wait_for(lambda: "cup_1" in {n.id for n in _graph(spin_node, wait_for).nodes})
    # the next ordinary bowl still fuses: the node is alive and the graph usable
    pub.publish(_batch(_obs("bowl", (1.01, 0.0, 0.8), stamp=now + 0.1)))
    assert wait_for(lambda: next(n for n in _graph(spin_node, wait_for).nodes
                                 if n.id == "bowl_1").observation_count == 2)
    graph = _graph(spin_node, wait_for)
    assert {n.id for n in graph.nodes} == {"bowl_1", "cabinet_1", "cup_1"}
    bowl = next(n for n in graph.nodes if n.id == "bowl_1")
    assert bowl.bbox_max.x < 2.0 and bowl.position.x == pytest.approx(1.005)
    assert wait_for(lambda: diag.count("scene_graph", "observations_dropped.invalid")
                    == 2 * len(poison))

    def update(**fields: Any) -> Any:
        return call_service(spin_node, UpdateNode, "update_node", UpdateNode.Request(**fields))

    # The stamp of a far-future observation never leaks into later events.
    ok = update(node_id="cabinet_1", event_id="u-1", source="interaction",
                properties=[Property(name="locked", value_json="true", confidence=0.9)])
    assert ok.error_code == UpdateNode.Response.NONE, ok.error_msg
    assert to_seconds(ok.events[0].header.stamp) < time.time() + 10.0

    for depth, why in ((100_000, "characters long"), (1_000, "nested")):
        nested = "[" * depth + "]" * depth
        deep = update(node_id="cabinet_1",
                      properties=[Property(name="notes", value_json=nested, confidence=0.5)])
        assert deep.error_code == UpdateNode.Response.INVALID_REQUEST
        assert why in deep.error_msg
    nan = update(node_id="cabinet_1",
                 properties=[Property(name="fullness", value_json="NaN", confidence=0.5)])
    assert nan.error_code == UpdateNode.Response.INVALID_REQUEST
    parent = update(node_id="bowl_1", set_parent=True, parent_id="cabinet_1",
                    parent_relation="container")
    assert parent.error_code == UpdateNode.Response.NONE, parent.error_msg
    cycle = update(node_id="cabinet_1", set_parent=True, parent_id="bowl_1",
                   parent_relation="container")
    assert cycle.error_code == UpdateNode.Response.INVALID_REQUEST, cycle.error_msg
    empty_name = update(node_id="cabinet_1", set_contents=True,
                        contents=[ContentItem(name="", description="a thing")])
    assert empty_name.error_code == UpdateNode.Response.INVALID_REQUEST
    ghost = update(node_id="ghost_7", verdict="reject", verdict_reason="made up",
                   properties=[Property(name="locked", value_json="true", confidence=0.9)])
    assert ghost.error_code == UpdateNode.Response.UNKNOWN_NODE
    replay = update(node_id="cabinet_1", event_id="u-1", source="interaction",
                    properties=[Property(name="locked", value_json="true", confidence=0.9)])
    assert replay.error_code == UpdateNode.Response.NONE
    assert [e.event_id for e in replay.events] == [e.event_id for e in ok.events]
    changed = update(node_id="cabinet_1", event_id="u-1", source="interaction",
                     properties=[Property(name="locked", value_json="false", confidence=0.9)])
    assert changed.error_code == UpdateNode.Response.DUPLICATE_EVENT
    revision = _graph(spin_node, wait_for).revision
    assert revision == parent.revision  # nothing refused changed memory
    cabinet = next(n for n in _graph(spin_node, wait_for).nodes if n.id == "cabinet_1")
    assert {p.name: json.loads(p.value_json) for p in cabinet.properties}["locked"] is True
    assert not cabinet.contents
    assert wait_for(lambda: diag.count("scene_graph", "update_node.refused") == 7)
    assert diag.count("scene_graph", "nodes") == 3

    # A log poisoned by an older writer: every restart skips the event and stays usable.
    ros_executor.remove_node(graph_node)
    graph_node.destroy_node()
    far = [1e155, 0.0, 0.0]
    payload = {"node_id": "bowl_9", "label": "bowl", "centroid": far, "bbox_min": far,
               "bbox_max": far, "alternatives": []}
    event = {"event_id": "poison", "kind": "node_created", "stamp": now, "source": "perception",
             "verdict": "admit", "payload": payload,
             "evidence": {"keyframe_ids": [], "detection_ids": [], "event_ids": []}}
    with sqlite3.connect(tmp_path / "world.db") as db:
        db.execute("INSERT INTO events (event_id, kind, stamp, source, verdict, evidence, payload,"
                   " digest) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                   ["poison", "node_created", now, "perception", "admit",
                    canonical_json(event["evidence"]), canonical_json(payload), "x"])
    for attempt in range(2):
        graph_node = _scene_graph(ros_context, ros_executor, tmp_path)
        pub.publish(_batch(_obs("bowl", (1.0, 0.0, 0.8), stamp=now + 1 + attempt)))
        assert wait_for(lambda a=attempt: next(
            n for n in _graph(spin_node, wait_for).nodes if n.id == "bowl_1"
        ).observation_count == 3 + a)
        assert {n.id for n in _graph(spin_node, wait_for).nodes} == {
            "bowl_1", "cabinet_1", "cup_1"}
        assert wait_for(lambda: diag.count("scene_graph", "skipped_events") == 1)
        ros_executor.remove_node(graph_node)
        graph_node.destroy_node()


def test_keyframe_node_refuses_bad_offsets_and_takes_operator_frames(
    tmp_path: Path, ros_context: Context, ros_executor: MultiThreadedExecutor,
    spin_node: Node, wait_for: Wait,
) -> None:
    node = KeyframeNode(context=ros_context, parameter_overrides=[
        Parameter("memory_dir", value=str(tmp_path)),
        Parameter("cameras", value=["wrist"]),
        Parameter("diagnostics_period", value=0.2),
    ])
    ros_executor.add_node(node)
    diag = Diagnostics(spin_node)
    image_type = type(numpy_to_image(np.zeros((2, 2, 3), np.uint8), "rgb8"))
    pub = spin_node.create_publisher(image_type, "cameras/wrist/color/image_raw", qos.SENSOR)
    assert wait_for(lambda: pub.get_subscription_count() > 0)
    for i, stamp in enumerate((10.0, 1010.0)):  # two frames 1000 s apart
        msg = numpy_to_image(textured(i, 192, 256), "rgb8")
        msg.header.stamp = from_seconds(stamp)
        pub.publish(msg)
        assert wait_for(lambda s=stamp: (node.buffers["wrist"].latest_stamp() or 0) >= s)

    def save(**fields: Any) -> Any:
        return call_service(spin_node, SaveKeyframe, "save_keyframe",
                     SaveKeyframe.Request(camera="wrist", **fields))

    count = node.store.count()
    for offset in (math.nan, -1.0, math.inf):
        reply = save(stamp=from_seconds(1000.0), max_offset_s=offset, trigger="operator")
        assert reply.error_code == SaveKeyframe.Response.INVALID_REQUEST, offset
        assert "max_offset_s" in reply.error_msg
    assert node.store.count() == count  # the frame 1000 s away was never saved
    far = save(stamp=from_seconds(500.0), trigger="operator")
    assert far.error_code == SaveKeyframe.Response.NO_FRAME

    saved = save(stamp=from_seconds(1010.0), trigger="operator", caption="the operator asked",
                 linked_nodes=["cabinet_1"])
    assert saved.error_code == SaveKeyframe.Response.NONE, saved.error_msg
    found = call_service(spin_node, QueryKeyframes, "query_keyframes",
                  QueryKeyframes.Request(trigger="operator"))
    assert found.error_code == QueryKeyframes.Response.NONE
    assert [k.keyframe_id for k in found.keyframes] == [saved.keyframe_id]
    assert found.keyframes[0].trigger == KeyframeMetadata.TRIGGER_OPERATOR
    perception = call_service(spin_node, QueryKeyframes, "query_keyframes",
                       QueryKeyframes.Request(trigger="perception"))
    assert perception.keyframes == []
    bad = call_service(spin_node, QueryKeyframes, "query_keyframes",
                QueryKeyframes.Request(trigger="dream"))
    assert bad.error_code == QueryKeyframes.Response.INVALID_REQUEST
    assert wait_for(lambda: diag.count("keyframes", "refused") == 4)
    assert diag.count("keyframes", "keyframes") == 1


def test_deprojection_refuses_poses_outside_the_workspace(
    ros_context: Context, ros_executor: MultiThreadedExecutor, spin_node: Node,
    wait_for: Wait,
) -> None:
    node = DeprojectionNode(context=ros_context, parameter_overrides=[
        Parameter("cameras", value=["base"]), Parameter("erode_px", value=1),
        Parameter("min_points", value=20), Parameter("diagnostics_period", value=0.2),
        Parameter("transform_timeout", value=0.3)])
    ros_executor.add_node(node)
    static = TransformPublisher(spin_node, static=True)
    rotation = MAP_FROM_CAMERA[:3, :3]
    static.send([
        matrix_to_transform(MAP_FROM_CAMERA, "map", "base_color_optical_frame", 0.0),
        matrix_to_transform(make_transform(rotation, [1e200, 0.0, 1.5]), "map", "far_200", 0.0),
        matrix_to_transform(make_transform(rotation, [1e30, 0.0, 1.5]), "map", "far_30", 0.0),
    ])
    drv = Driver(spin_node, ("base",))
    assert wait_for(lambda: all(p.get_subscription_count() > 0 for p in drv.pubs["base"]))
    stamps = iter(np.arange(10.0, 11.0, 0.05))

    def happy() -> bool:
        stamp = float(next(stamps))
        drv.send("base", stamp, two_instances(), plane(2.0))
        return wait_for(lambda: drv.array("base", stamp) is not None, timeout=1.0)

    assert wait_for(happy, timeout=15.0), "no observations came back"
    drv.send("base", 20.0, two_instances(), plane(2.0), frame_id="far_200")
    drv.send("base", 21.0, two_instances(), plane(2.0), frame_id="far_30")
    assert wait_for(lambda: drv.count("base.pose_outside_workspace") == 2)
    drv.send("base", 22.0, two_instances(), plane(2.0))  # the node is still up and working
    assert wait_for(lambda: drv.array("base", 22.0) is not None)
    assert drv.array("base", 20.0) is None and drv.array("base", 21.0) is None
    for msg in drv.arrays:
        for item in msg.observations:
            assert abs(item.centroid.x) < 500.0
