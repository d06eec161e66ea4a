"""The interaction analyzer node: conversions and write planning, then the node over real DDS.

The DDS tests start the real scene graph and keyframe nodes (memory in tmp_path) beside the
analyzer (offline reasoner) in one executor, publish camera frames with registered depth,
camera info, static transforms, the robot contract's gripper and hand poses (under a /clock
the driver publishes) and observations, and analyse interactions: a deferred outcome (no depth)
that the next analysis corrects, a locked cabinet, a missed grasp, an open proven by the held
hand's travel, an unknown target, a window without frames, and bad input on every stream.
"""

from __future__ import annotations

import functools
import json
import math
import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from geometry_msgs.msg import Point, PoseStamped
from image_helpers import textured
from rclpy.context import Context
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from recorded_server import Step, serve
from ros_helpers import call_service, observation_msg, spinning_executor
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CameraInfo, Image
from std_msgs.msg import Float64
from write_plans import every_kind_of_verdict, is_opened_verdicts
from write_plans import write_context as _ctx

from mimir.nodes.memory.keyframe_node import KeyframeNode
from mimir.nodes.memory.messages import node_update_to_msg
from mimir.nodes.memory.scene_graph_node import SceneGraphNode
from mimir.nodes.perception.messages import intrinsics_to_camera_info
from mimir.nodes.planner.analyzer_inputs import (
    CameraStream,
    WindowRecorder,
    detections_from_msg,
)
from mimir.nodes.planner.analyzer_node import AnalyzerNode, AnalyzerNodeConfig
from mimir.nodes.planner.ros_world import SceneGraphWorld, snapshots_from_graph
from mimir.ros import qos
from mimir.ros.images import numpy_to_image
from mimir.ros.tf import TransformPublisher, matrix_to_transform
from mimir.ros.time import from_seconds
from mimir.transforms import ExtrapolationError, UnknownFrameError
from mimir_msgs.msg import (
    ContentItem,
    InteractionEvent,
    ObjectObservation,
    ObjectObservationArray,
    Property,
    SceneGraph,
    SceneNode,
)
from mimir_msgs.msg import MemoryEvent as MemoryEventMsg
from mimir_msgs.srv import AnalyzeInteraction, GetSceneGraph, QueryKeyframes, UpdateNode
from mimir_perception.camera import Intrinsics
from mimir_planner.reasoning import (
    Decision,
    PropertyClaim,
)
from mimir_planner.reasoning.window import spread
from mimir_planner.reasoning.writes import evidence_links, plan_writes
from mimir_robot.contract import TOPIC_EE_ACHIEVED, TOPIC_EE_COMMANDED, TOPIC_GRIPPER

REPO = Path(__file__).resolve().parents[2]
Wait = Callable[..., bool]
_Response = AnalyzeInteraction.Response


# ------------------------------------------------------------------------ pure conversions


@pytest.mark.parametrize("bad", [
    {"vlm_backend": "gpt"}, {"cameras": ("base", "base")}, {"cameras": ()},
    {"max_frames_per_camera": 1}, {"service_timeout_s": 0.0}, {"window_margin_s": -1.0},
    {"frame_wait_s": math.nan}, {"odom_frame": ""}, {"gripper_stroke_m": 0.0},
    {"gripper_open_below": 0.95}, {"tf_wait_s": -0.5},
])
def test_config_rejects_bad_values(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        AnalyzerNodeConfig(**bad)


def _node_msg(node_id: str, label: str, xyz: tuple[float, float, float],
              half: float = 0.2) -> SceneNode:
    msg = SceneNode(id=node_id, label=label, position=Point(x=xyz[0], y=xyz[1], z=xyz[2]))
    msg.bbox_min = Point(x=xyz[0] - half, y=xyz[1] - half, z=xyz[2] - half)
    msg.bbox_max = Point(x=xyz[0] + half, y=xyz[1] + half, z=xyz[2] + half)
    return msg


def test_scene_graph_world_reads_nodes_and_skips_bad_ones() -> None:
    cabinet = _node_msg("cabinet_1", "cabinet", (2.0, 0.0, 0.5))
    cabinet.properties = [
        Property(name="openable", value_json="true", confidence=0.9, source="interaction"),
        Property(name="is_opened", value_json="true", confidence=0.9),
        Property(name="fullness", value_json="{half", confidence=0.5),
    ]
    cabinet.contents = [ContentItem(name="banana"), ContentItem(name="")]
    flat = _node_msg("mug_1", "mug", (1.0, 1.0, 0.9), half=0.0)
    nameless = _node_msg("", "bowl", (0.0, 0.0, 0.0))
    lost = _node_msg("cup_1", "cup", (math.nan, 0.0, 0.0))
    snapshots, report = snapshots_from_graph([cabinet, flat, nameless, lost])
    assert [s.node_id for s in snapshots] == ["cabinet_1", "mug_1"]
    assert report.skipped_nodes == ("#2", "cup_1")
    assert report.skipped_properties == ("cabinet_1.fullness",)
    assert report.boxes_dropped == ("mug_1",)
    node = snapshots[0]
    assert node.properties["openable"]["is_opened"] is True
    assert "fullness" not in node.properties and tuple(node.contents) == ("banana",)
    assert node.bbox is not None and node.bbox.contains(np.array([2.1, 0.1, 0.6]))

    world = SceneGraphWorld()
    assert world.revision == -1 and not world.has_node("cabinet_1")
    assert world.update(SceneGraph(revision=4, nodes=[cabinet, flat])) is not None
    assert world.node_ids() == ["cabinet_1", "mug_1"]
    assert [n.node_id for n in world.nodes_near(np.array([2.0, 0.0, 0.5]), 0.5)] == ["cabinet_1"]
    assert world.update(SceneGraph(revision=3, nodes=[])) is None  # older: ignored
    assert world.has_node("mug_1") and world.revision == 4
    assert world.update(SceneGraph(revision=3, nodes=[]), force=True) is not None
    assert not world.has_node("mug_1")


def test_detections_from_observations() -> None:
    array = ObjectObservationArray(camera="pole", observations=[
        ObjectObservation(label="mug", detection_id="d1", score=1.5,
                          centroid=Point(x=1.0, y=0.0, z=0.5)),
        ObjectObservation(label="bowl", detection_id="d2", score=0.5,
                          centroid=Point(x=math.nan, y=0.0, z=0.5)),
        ObjectObservation(label="", detection_id="d3", score=0.5),
    ])
    array.header.stamp = from_seconds(7.0)
    found, skipped = detections_from_msg(array)
    assert [(d.label, d.ref, d.score, d.stamp, d.camera) for d in found] == [
        ("mug", "d1", 1.0, 7.0, "pole")]
    assert skipped == 2


class _LateTf:
    """A transform source that knows a stamp only after ``late`` lookups (TF trailing)."""

    backend = "test"

    def __init__(self, late: int, error: type[Exception] = ExtrapolationError) -> None:
        self.late = late
        self.calls = 0
        self.error = error

    def lookup(self, target: str, source: str, stamp: float) -> np.ndarray:
        self.calls += 1
        if self.calls <= self.late:
            raise self.error(f"{source} at {stamp} is newer than the newest transform")
        return np.eye(4)


def test_camera_pose_waits_for_trailing_tf(ros_context: Context) -> None:
    node = AnalyzerNode(context=ros_context, parameter_overrides=[
        Parameter("vlm_backend", value="offline")])
    try:
        late = _LateTf(3)
        node.inputs.tf = late
        pose = node.inputs.camera_pose("base", "", 12.0, deadline=time.monotonic() + 30.0)
        assert pose is not None and late.calls == 4  # retried instead of dropping the frame
        assert node.counters.get("camera_pose_unavailable") == 0
        # past the window's deadline the frame goes without a pose, counted
        never = _LateTf(10**6)
        node.inputs.tf = never
        assert node.inputs.camera_pose("base", "", 12.0, deadline=time.monotonic() - 1.0) is None
        assert never.calls == 1 and node.counters.get("camera_pose_unavailable") == 1
        # an unknown frame is not waited for at all
        unknown = _LateTf(10**6, UnknownFrameError)
        node.inputs.tf = unknown
        assert node.inputs.camera_pose("base", "", 12.0,
                                       deadline=time.monotonic() + 30.0) is None
        assert unknown.calls == 1 and node.counters.get("camera_pose_unavailable") == 2
    finally:
        node.destroy_node()


def test_camera_stream_rate_limits_and_pairs_depth() -> None:
    stream = CameraStream(seconds=2.0, min_period=0.2, tolerance=0.01)
    color, depth = Image(), Image()
    stream.add_depth(1.0, depth)  # depth first, colour later
    assert stream.add_color(1.0, color)
    assert not stream.add_color(1.1, color)  # within the rate limit
    assert stream.add_color(1.3, color)
    stream.add_depth(1.305, depth)  # colour first, depth later
    stream.add_depth(5.0, depth)  # matches nothing yet
    assert stream.add_color(0.7, color)  # late frame goes in order
    entries = stream.window(0.0, 2.0)
    assert [e.stamp for e in entries] == [0.7, 1.0, 1.3]
    assert [e.depth is not None for e in entries] == [False, True, True]
    assert stream.add_color(3.5, color)  # history beyond 2 s is forgotten
    assert [e.stamp for e in stream.window(0.0, 9.0)] == [3.5]
    assert stream.latest_stamp() == 3.5
    assert spread(list(range(10)), 4) == [0, 3, 6, 9]
    assert spread([1, 2], 5) == [1, 2]


class _NoTransforms:
    def lookup(self, target: str, source: str, stamp: float) -> Any:
        raise UnknownFrameError(f"no {target} -> {source}")


def test_a_window_reaching_past_the_buffers_is_reported() -> None:
    warned: list[tuple[str, str]] = []
    recorder = WindowRecorder(AnalyzerNodeConfig(buffer_seconds=5.0), _NoTransforms(),
                              lambda key, text: warned.append((key, text)), lambda _key: None)
    for i in range(200):  # 20 s of gripper readings; the buffer keeps the last 5
        recorder.on_gripper(i * 0.1, 0.0)
    recorder.window(16.0, 19.0)  # inside what is kept
    assert warned == []
    recorder.window(10.0, 19.0)  # an action longer than the buffer: its start is gone
    assert [key for key, _ in warned] == ["window_truncated"]
    assert "starts at 10.000 s" in warned[0][1] and "15.000 s" in warned[0][1]


def test_evidence_refs_name_what_memory_can_point_at() -> None:
    refs = evidence_links(["frame:base@9.500", "frame:wrist@10.000", "det-7", "gripper@11.200",
                          "hand:1.000-2.000", "kf-a"], _ctx(set()), origin="ia-0")
    assert [(r.kind, r.id) for r in refs] == [
        ("interaction", "ia-1"), ("interaction", "ia-0"), ("keyframe", "kf-a"),
        ("keyframe", "kf-b"), ("detection", "det-7"), ("robot_state", "gripper@11.200"),
        ("robot_state", "hand:1.000-2.000")]


def test_plan_writes_maps_is_opened_onto_openable() -> None:
    first, second = plan_writes(is_opened_verdicts(), _ctx({"cabinet_1"}))
    assert first.update is not None
    request = node_update_to_msg(first.update)
    assert [(p.name, p.value_json) for p in request.properties] == [
        ("openable", "true"), ("is_opened", "true")]
    assert second.update is None and "no memory form" in second.note


def test_plan_writes_records_every_verdict() -> None:
    locked = PropertyClaim("cabinet_1", "locked", True, 0.85, "no motion")
    result = every_kind_of_verdict(locked, deferred_open=True, outcome_origin="ia-1")
    plans = plan_writes(result, _ctx({"cabinet_1"}))
    assert [len(p.verdicts) for p in plans] == [1, 1, 1, 1, 2, 1, 1]
    written = [node_update_to_msg(p.update) for p in plans if p.update is not None]
    assert [r.event_id for r in written] == [f"analyzer:ia-1:{i}" for i in (0, 1, 4, 5, 6)]
    lock_req, open_req, contents_req, apple_req, outcome_req = written
    assert lock_req.verdict == "admit" and lock_req.properties[0].value_json == "true"
    assert "admit by locked: contact, no motion" in lock_req.properties[0].reasoning
    assert ("robot_state", "gripper@11.200") in {(r.kind, r.id) for r in lock_req.evidence}
    assert open_req.verdict == "defer"
    assert [p.name for p in open_req.properties] == ["openable", "is_opened"]
    assert contents_req.verdict == "admit" and contents_req.set_contents
    assert [c.name for c in contents_req.contents] == ["mug", "bowl"]
    assert apple_req.verdict == "reject" and [c.name for c in apple_req.contents] == ["apple"]
    assert outcome_req.verdict == "correct" and outcome_req.add_task_record
    assert not outcome_req.task_record.success
    assert outcome_req.task_record.failure_reason == "locked"
    assert outcome_req.task_record.task == "tidy up"
    unwritten = [p for p in plans if p.update is None]
    assert [p.subject for p in unwritten] == ["ghost_9", "ghost_9"]
    assert "not in memory" in unwritten[1].note
    only_final = plan_writes(result, _ctx({"cabinet_1"}), skip_deferred=True)
    assert all(v.decision is not Decision.DEFER for p in only_final for v in p.verdicts)


# ------------------------------------------------------------------------------ over DDS

SIZE = (160, 120)
INTRINSICS = Intrinsics(200.0, 200.0, 80.0, 60.0, *SIZE)
CAMERAS = ("base", "wrist")
#: optical frame looking along +x of map from 0.5 m height (z forward, x right, y down).
CAMERA_POSE = np.array([[0.0, 0.0, 1.0, 0.0], [-1.0, 0.0, 0.0, 0.0],
                        [0.0, -1.0, 0.0, 0.5], [0.0, 0.0, 0.0, 1.0]])


#: the analysis and memory services get 30 s to answer (20 s to appear).
_call = functools.partial(call_service, timeout=30.0, available_within=20.0)


def _observation(label: str, detection: str, xyz: tuple[float, float, float],
                 half: float = 0.25, stamp: float = 5.0) -> ObjectObservation:
    return observation_msg(label, xyz, detection_id=detection, camera="base", half=half,
                           stamp=stamp, point_count=800)


class Rig:
    """The memory nodes, the analyzer and a driver node publishing its inputs."""

    def __init__(self, context: Context, executor: MultiThreadedExecutor, *, memory: Path,
                 driver: Node, wait_for: Wait, analyzer_params: list[Parameter],
                 with_graph: bool = True) -> None:
        self.driver = driver
        self.wait_for = wait_for
        self.context, self.executor, self.memory = context, executor, memory
        self.graph = self.start_graph() if with_graph else None
        self.keyframes = KeyframeNode(context=context, parameter_overrides=[
            Parameter("memory_dir", value=str(memory)), Parameter("cameras", value=list(CAMERAS)),
            Parameter("after_wait_s", value=0.3)])
        self.analyzer = AnalyzerNode(context=context, parameter_overrides=[
            Parameter("cameras", value=list(CAMERAS)),
            Parameter("frame_wait_s", value=0.3),
            Parameter("frame_min_period_s", value=0.1),
            Parameter("recheck_period_s", value=0.2),
            # the contract gripper carries no stamp: the analyzer stamps it with its clock,
            # which this rig drives through /clock
            Parameter("use_sim_time", value=True), *analyzer_params])
        for node in (self.keyframes, self.analyzer):
            executor.add_node(node)
        self.color = {c: driver.create_publisher(Image, f"cameras/{c}/color/image_raw",
                                                 qos.SENSOR) for c in CAMERAS}
        self.depth = {c: driver.create_publisher(Image, f"cameras/{c}/depth/image_raw",
                                                 qos.SENSOR) for c in CAMERAS}
        self.info = {c: driver.create_publisher(CameraInfo, f"cameras/{c}/color/camera_info",
                                                qos.SENSOR) for c in CAMERAS}
        self.clock = driver.create_publisher(Clock, "/clock", qos.EVENTS)
        self.gripper = driver.create_publisher(Float64, TOPIC_GRIPPER, qos.EVENTS)
        self.hand = driver.create_publisher(PoseStamped, TOPIC_EE_ACHIEVED, qos.EVENTS)
        self.command = driver.create_publisher(PoseStamped, TOPIC_EE_COMMANDED, qos.EVENTS)
        # between plays the clock runs on in wall time (the analyzer's timers need it to move)
        self._sim_now: float | None = None
        self._ticking = threading.Lock()
        self._free_timer = driver.create_timer(0.05, self._free_run)
        self.observations = driver.create_publisher(ObjectObservationArray, "observations",
                                                    qos.EVENTS)
        self.events = driver.create_publisher(InteractionEvent, "interaction_events",
                                              qos.EVENTS)
        self.memory_events: list[MemoryEventMsg] = []
        driver.create_subscription(MemoryEventMsg, "memory_events", self.memory_events.append,
                                   qos.EVENTS)
        tf = TransformPublisher(driver, static=True)
        tf.send([matrix_to_transform(CAMERA_POSE, "map", f"{c}_color_optical_frame", 0.0)
                 for c in CAMERAS] + [matrix_to_transform(np.eye(4), "map", "base_link", 0.0)])
        pubs = [*self.color.values(), *self.depth.values(), self.clock, self.gripper, self.hand,
                self.command, self.observations, self.events]
        assert wait_for(lambda: all(p.get_subscription_count() > 0 for p in pubs))

    def start_graph(self) -> SceneGraphNode:
        graph = SceneGraphNode(context=self.context, parameter_overrides=[
            Parameter("memory_dir", value=str(self.memory)),
            Parameter("publish_period_s", value=0.1)])
        self.executor.add_node(graph)
        return graph

    def add_fixtures(self) -> None:
        batch = ObjectObservationArray(camera="base", observations=[
            _observation("cabinet", "det-cabinet", (2.0, 0.0, 0.5)),
            _observation("drawer", "det-drawer", (2.0, 0.7, 0.5))])
        batch.header.frame_id = "map"
        batch.header.stamp = from_seconds(5.0)
        self.observations.publish(batch)
        world = self.analyzer.world
        assert self.wait_for(lambda: world.has_node("cabinet_1") and world.has_node("drawer_1"))

    def _free_run(self) -> None:
        if self._ticking.acquire(blocking=False):
            try:
                if self._sim_now is not None:
                    self._sim_now += 0.05
                    self.clock.publish(Clock(clock=from_seconds(self._sim_now)))
            finally:
                self._ticking.release()

    def tick(self, t: float) -> None:
        """Sets the analyzer's clock to ``t`` (and waits until it got there)."""
        self.clock.publish(Clock(clock=from_seconds(t)))
        assert self.wait_for(
            lambda: self.analyzer.get_clock().now().nanoseconds * 1e-9 >= t - 1e-6)

    def play(self, start: float, end: float, grip: Callable[[float], float],
             with_depth: bool = True,
             hand: Callable[[float], tuple[float, float]] | None = None) -> None:
        """Camera frames every 0.25 s and robot state every 0.1 s over [start, end].

        ``grip(t)`` is the contract gripper reading (0 open .. 1 closed); ``hand(t)``, where
        given, the achieved and commanded hand x in base_link (the hand pulls along -x).
        """
        with self._ticking:
            self._sim_now = None
            self._play(start, end, grip, with_depth, hand)
            self._sim_now = end

    def _play(self, start: float, end: float, grip: Callable[[float], float], with_depth: bool,
              hand: Callable[[float], tuple[float, float]] | None) -> None:
        depth = np.full((SIZE[1], SIZE[0]), 1.8, dtype=np.float32)
        streams = self.analyzer.streams
        buffers = self.keyframes.buffers
        stamp = start
        step = 0
        while stamp <= end + 1e-9:
            # the clock reaches a stamp before data carrying it, as /clock does in a
            # simulation (the analyzer refuses data stamped far past its clock)
            self.tick(stamp)
            for k, cam in enumerate(CAMERAS):
                header_stamp = from_seconds(stamp)
                color = numpy_to_image(textured(int(stamp * 100) + k, SIZE[1], SIZE[0]),
                                       "rgb8")
                color.header.stamp = header_stamp
                color.header.frame_id = f"{cam}_color_optical_frame"
                info = intrinsics_to_camera_info(INTRINSICS, color.header)
                self.info[cam].publish(info)
                if with_depth:
                    image = numpy_to_image(depth, "32FC1", color.header)
                    self.depth[cam].publish(image)
                self.color[cam].publish(color)
            for sub in range(3 if stamp < end else 1):
                t = stamp + 0.1 * sub
                self.tick(t)
                self.gripper.publish(Float64(data=grip(t)))
                if hand is not None:
                    for pub, x in zip((self.hand, self.command), hand(t), strict=True):
                        pose = PoseStamped()
                        pose.header.stamp = from_seconds(t)
                        pose.header.frame_id = "base_link"
                        pose.pose.position.x, pose.pose.position.z = x, 0.6
                        pub.publish(pose)
            assert self.wait_for(lambda s=stamp: all(
                (streams[c].latest_stamp() or 0.0) >= s - 1e-6
                and (buffers[c].latest_stamp() or 0.0) >= s - 1e-6 for c in CAMERAS))
            step += 1
            stamp = start + 0.25 * step
        if with_depth:
            assert self.wait_for(lambda: all(
                e.depth is not None
                for c in CAMERAS for e in self.analyzer.streams[c].window(start, end)))

    def analyze(self, iid: str, target: str, start: float, end: float, *,
                publish: bool = False, timeout: float = 30.0,
                outcome: str = "FAILED") -> Any:
        """Analyse an open of ``target`` the executor ended with ``outcome`` (a failure unless
        it is ``OPENED``)."""
        event = InteractionEvent(interaction_id=iid, phase=InteractionEvent.PHASE_ENDED,
                                 primitive="open", target_id=target, task="put the mug away",
                                 window_start=from_seconds(start), window_end=from_seconds(end),
                                 success=outcome == "OPENED", outcome=outcome)
        if publish:
            self.events.publish(event)
        return _call(self.driver, AnalyzeInteraction, "analyze_interaction",
                     AnalyzeInteraction.Request(interaction=event), timeout=timeout)

    def node(self, node_id: str) -> SceneNode:
        reply = _call(self.driver, GetSceneGraph, "get_scene_graph",
                      GetSceneGraph.Request(node_ids=[node_id]))
        assert reply.error_code == GetSceneGraph.Response.NONE, reply.error_msg
        return reply.graph.nodes[0]


@pytest.fixture
def make_rig(tmp_path: Path, ros_context: Context, spin_node: Node, wait_for: Wait,
             ros_executor: MultiThreadedExecutor) -> Iterator[Callable[..., Rig]]:
    """``make_rig(*analyzer_parameters)`` starts the nodes in their own executor."""
    # The analysis blocks one thread while memory services answer on others.
    with spinning_executor(ros_context, num_threads=4) as extra:

        def make(*params: Parameter, with_graph: bool = True) -> Rig:
            return Rig(ros_context, extra, memory=tmp_path / "memory", driver=spin_node,
                       wait_for=wait_for, analyzer_params=list(params), with_graph=with_graph)

        yield make


@pytest.fixture
def rig(make_rig: Callable[..., Rig]) -> Rig:
    """The rig with the offline reasoner."""
    return make_rig(Parameter("vlm_backend", value="offline"))


def _props(node: SceneNode) -> dict[str, Any]:
    return {p.name: json.loads(p.value_json) for p in node.properties}


def _engaged(t: float) -> bool:
    """The jaws act from 1.0 s to 2.4 s past every multiple of ten seconds."""
    return 1.0 <= t % 10.0 <= 2.4


def _hold_handle(t: float) -> float:
    """The fingers stop on the handle (0.8 of their travel) while the jaws act."""
    return 0.8 if _engaged(t) else 0.0


def _close_on_nothing(t: float) -> float:
    return 0.98 if _engaged(t) else 0.0


@pytest.mark.ros
def test_locked_cabinet_missed_grasp_and_recheck(rig: Rig) -> None:
    rig.add_fixtures()

    # 1. The jaws hold the handle but no depth arrives: the reasoner guesses "locked", but
    # neither that nor the outcome can be judged yet.
    rig.play(9.0, 13.5, _hold_handle, with_depth=False)
    first = rig.analyze("ia-nodepth", "cabinet_1", 10.5, 12.5)
    assert first.error_code == _Response.NONE, first.error_msg
    assert first.backend == "offline-reasoner"
    assert not first.task_success and first.failure_reason.startswith("outcome not verified")
    deferred = [e for e in first.verdicts if e.verdict == "defer"]
    assert {e.kind for e in deferred} == {"task_outcome_recorded", "property_set"}
    assert all(e.sequence > 0 for e in deferred)
    assert len(rig.analyzer.analyzer.harness.pending) == 2
    assert not rig.node("cabinet_1").task_history  # a deferred outcome changes nothing

    # 2. Locked: contact with the handle, depth unchanged. The pending outcome is corrected.
    rig.play(19.0, 23.5, _hold_handle)
    locked = rig.analyze("ia-locked", "cabinet_1", 20.5, 22.5, publish=True)
    assert locked.error_code == _Response.NONE, locked.error_msg
    assert not locked.task_success and "locked" in locked.failure_reason
    by_kind = {(e.kind, e.verdict) for e in locked.verdicts}
    assert ("property_set", "admit") in by_kind
    # the earlier guesses, re-checked with this window's depth, now hold
    assert ("task_outcome_recorded", "admit") in by_kind
    assert len(locked.keyframe_ids) == 3
    lock_event = next(e for e in locked.verdicts if e.kind == "property_set")
    assert json.loads(lock_event.payload_json)["name"] == "locked"
    assert {(r.kind, r.id) for r in lock_event.evidence} >= {
        ("interaction", "ia-locked"), *(("keyframe", k) for k in locked.keyframe_ids)}
    cabinet = rig.node("cabinet_1")
    assert _props(cabinet)["locked"] is True
    assert [r.success for r in cabinet.task_history] == [False, False]
    assert len(rig.analyzer.analyzer.harness.pending) == 0
    # The same interaction again (the event was published too): the one result comes back.
    again = rig.analyze("ia-locked", "cabinet_1", 20.5, 22.5)
    assert [e.event_id for e in again.verdicts] == [e.event_id for e in locked.verdicts]
    assert len(rig.node("cabinet_1").task_history) == 2
    frames = _call(rig.driver, QueryKeyframes, "query_keyframes",
                   QueryKeyframes.Request(labels=["locked=True"]))
    peak = [f for f in frames.keyframes if f.keyframe_id in locked.keyframe_ids]
    assert peak and peak[0].phase == "peak" and "cabinet_1" in peak[0].linked_nodes
    assert "fixture_locked" in peak[0].caption

    # 3. Missed grasp: the jaws close on nothing. A failed outcome, no locked property.
    rig.play(29.0, 33.5, _close_on_nothing)
    missed = rig.analyze("ia-missed", "drawer_1", 30.5, 32.5)
    assert missed.error_code == _Response.NONE, missed.error_msg
    assert not missed.task_success and "missed" in missed.failure_reason
    assert all(e.kind != "property_set" for e in missed.verdicts)
    drawer = rig.node("drawer_1")
    assert _props(drawer).get("locked") in (None, "unknown")
    assert [r.success for r in drawer.task_history] == [False]
    assert any(e.verdict == "defer" for e in rig.memory_events)  # deferred claims are logged


def _pull_opens(t: float) -> tuple[float, float]:
    """The hand follows a 0.25 m pull while the jaws hold (the door gives way)."""
    share = min(max((t % 10.0 - 1.0) / 1.4, 0.0), 1.0)
    return 0.6 - 0.25 * share, 0.6 - 0.25 * share


def _pull_held(t: float) -> tuple[float, float]:
    """The command pulls 0.25 m; the hand stays at the handle (the door does not give)."""
    share = min(max((t % 10.0 - 1.0) / 1.4, 0.0), 1.0)
    return 0.6 - 0.01 * share, 0.6 - 0.25 * share


@pytest.mark.ros
def test_the_held_hand_proves_an_open_and_a_lock_from_contract_signals(
        make_rig: Callable[..., Rig], tmp_path: Path) -> None:
    log = tmp_path / "evidence.jsonl"
    rig = make_rig(Parameter("vlm_backend", value="offline"),
                   Parameter("evidence_log", value=str(log)))
    rig.add_fixtures()
    # no depth arrives: the hand's travel while the jaws held the handle decides
    rig.play(9.0, 13.5, _hold_handle, with_depth=False, hand=_pull_opens)
    opened = rig.analyze("ia-pulled", "cabinet_1", 10.5, 12.5, outcome="OPENED")
    assert opened.error_code == _Response.NONE, opened.error_msg
    assert opened.task_success and not opened.failure_reason
    assert {e.verdict for e in opened.verdicts} == {"admit"}
    prop = next(e for e in opened.verdicts if e.kind == "property_set")
    # the window the analyzer holds reaches 0.19-0.2x m of the pull, depending on when the
    # readings land on a loaded machine (seen: 0.196 m in CI)
    assert re.search(r"end effector: moved 0\.(19|2\d)\d m of 0\.(19|2\d)\d m commanded",
                     prop.verdict_reason), prop.verdict_reason
    assert any(r.kind == "robot_state" and r.id.startswith("hand:") for r in prop.evidence)
    cabinet = rig.node("cabinet_1")
    assert _props(cabinet)["openable"] is True and _props(cabinet)["is_opened"] is True
    assert not cabinet.contents  # opening is not inspecting
    # the drawer holds the hand back while depth shows no change: locked, and the reason
    # names all three signals
    rig.play(19.0, 23.5, _hold_handle, hand=_pull_held)
    locked = rig.analyze("ia-held", "drawer_1", 20.5, 22.5)
    assert locked.error_code == _Response.NONE, locked.error_msg
    lock = next(e for e in locked.verdicts if e.kind == "property_set")
    assert lock.verdict == "admit", lock.verdict_reason
    # the rig commands 0.2 m of pull; the samples the analyzer holds reach 0.19-0.2x of it,
    # depending on when the readings land on a loaded machine
    for signal in (r"gripper: closed on something",
                   r"end effector: moved 0\.0\d\d m of 0\.(19|2\d)\d m",
                   r"depth: the region of 'drawer_1' changed 0\.000 m"):
        assert re.search(signal, lock.verdict_reason), lock.verdict_reason
    # the evidence file keeps the readings behind both verdicts
    pulled, held = (json.loads(line) for line in log.read_text().splitlines())
    assert (pulled["interaction_id"], held["interaction_id"]) == ("ia-pulled", "ia-held")
    assert pulled["displacements"]["cabinet_1"][1] == "hand"
    assert "cabinet_1" in pulled["depth_unmeasured"]
    holding = [row for row in pulled["gripper"] if row[2]]
    assert len(holding) >= 2 and all(row[4] is not None for row in holding)
    assert held["depth_changes"]["drawer_1"] == pytest.approx(0.0, abs=1e-3)
    assert held["pull"]["commanded_m"] > held["pull"]["achieved_m"]
    assert any(f["depth"] for frames in held["frames"].values() for f in frames)


@pytest.mark.ros
def test_error_codes_and_bad_input(rig: Rig) -> None:
    rig.add_fixtures()
    node = rig.analyzer
    bad_frame = Image(height=1, width=1, encoding="rgb8", step=3, data=b"\x00\x00\x00")
    rig.color["base"].publish(bad_frame)
    bad_depth = numpy_to_image(np.zeros((4, 4, 3), np.uint8), "rgb8")
    rig.depth["base"].publish(bad_depth)
    rig.gripper.publish(Float64(data=math.nan))
    wrong = PoseStamped()
    wrong.header.frame_id = "map"
    rig.hand.publish(wrong)
    wrong_frame = ObjectObservationArray(observations=[_observation("mug", "d9", (0, 0, 0))])
    wrong_frame.header.frame_id = "odom"
    rig.observations.publish(wrong_frame)
    assert rig.wait_for(lambda: all(node.counters.get(k) >= 1 for k in (
        "bad_image", "bad_depth", "bad_gripper", "bad_hand_pose", "bad_observation")))

    rig.play(9.0, 12.0, _hold_handle)
    unknown = rig.analyze("ia-ghost", "ghost_9", 10.0, 11.5)
    assert unknown.error_code == _Response.UNKNOWN_TARGET and "ghost_9" in unknown.error_msg
    empty = rig.analyze("ia-later", "cabinet_1", 100.0, 101.0)
    assert empty.error_code == _Response.NO_FRAMES
    backwards = rig.analyze("ia-backwards", "cabinet_1", 11.5, 10.0)
    assert backwards.error_code == _Response.NO_FRAMES and "window" in backwards.error_msg
    started = InteractionEvent(interaction_id="ia-running", phase=InteractionEvent.PHASE_STARTED,
                               primitive="open", target_id="cabinet_1")
    reply = _call(rig.driver, AnalyzeInteraction, "analyze_interaction",
                  AnalyzeInteraction.Request(interaction=started))
    assert reply.error_code == _Response.NO_FRAMES
    # Nothing was written for the refused requests, and a good request still works.
    assert not rig.node("cabinet_1").task_history
    good = rig.analyze("ia-ok", "cabinet_1", 10.0, 11.5)
    assert good.error_code == _Response.NONE, good.error_msg
    assert len(good.keyframe_ids) == 3


# ------------------------------------------------------ recorded OpenAI-compatible answers


def _completion(content: str) -> str:
    """A chat-completion body as an OpenAI-compatible server returns it."""
    return json.dumps({
        "id": "chatcmpl-analyzer-node", "object": "chat.completion", "created": 1760000500,
        "model": "Qwen2.5-VL-7B-Instruct",
        "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                     "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 2900, "completion_tokens": 120, "total_tokens": 3020},
    })


OPENED_WITH_MUG = json.dumps({
    "task_success": True, "failure_reason": None,
    "property_updates": [{"object_id": "cabinet_1", "property": "openable",
                          "old_value": "unknown", "new_value": True, "confidence": 0.9,
                          "reasoning": "the door swings open", "is_opened": True}],
    "new_properties": [],
    "contents_updates": [{"fixture_id": "cabinet_1", "is_empty": False,
                          "reasoning": "the open cabinet shows a mug",
                          "contents": [{"name": "mug", "description": "a red mug"}]}],
    "confidence": 0.8,
})


@pytest.mark.ros
def test_recorded_model_answers_and_recheck_on_detections(
    tmp_path: Path, make_rig: Callable[..., Rig]
) -> None:
    steps = [
        *[Step(200, _completion('{"task_success": false, "failure_reason": '))] * 3,
        Step(500, '{"error": {"message": "overloaded"}}'),
        Step(200, _completion("Here is my analysis:\n```json\n" + OPENED_WITH_MUG + "\n```")),
    ]
    with serve(steps) as server:
        settings = yaml.safe_load((REPO / "config/reasoning.yaml").read_text())
        settings["vlm"].update(backend="openai", base_url=server.url, api_key_env="",
                               timeout_s=5.0, max_attempts=1, backoff_initial_s=0.01)
        settings["analyzer"]["prompt_dir"] = str(REPO / "config/prompts")
        path = tmp_path / "reasoning.yaml"
        path.write_text(yaml.safe_dump(settings))
        rig = make_rig(Parameter("reasoning_config", value=str(path)))
        assert rig.analyzer.backend.name == "openai"
        rig.add_fixtures()
        rig.play(9.0, 13.5, _hold_handle, with_depth=False)

        # Three malformed answers: INVALID_ANSWER and nothing is written.
        invalid = rig.analyze("ia-bad", "cabinet_1", 10.5, 12.5)
        assert invalid.error_code == _Response.INVALID_ANSWER, invalid.error_msg
        assert not invalid.verdicts and not invalid.keyframe_ids
        assert len(server.requests) == 3
        # The server fails: MODEL_ERROR, nothing written; the same id may be asked again.
        down = rig.analyze("ia-bad", "cabinet_1", 10.5, 12.5)
        assert down.error_code == _Response.MODEL_ERROR and down.backend == "openai"
        assert not rig.node("cabinet_1").task_history

        # A fenced answer claiming the door opened and a mug inside: without measured motion
        # or an observed interior every claim is deferred (and logged, not applied).
        opened = rig.analyze("ia-open", "cabinet_1", 10.5, 12.5)
        assert opened.error_code == _Response.NONE, opened.error_msg
        assert {e.verdict for e in opened.verdicts} == {"defer"}
        assert all(e.sequence > 0 for e in opened.verdicts)
        cabinet = rig.node("cabinet_1")
        assert _props(cabinet)["openable"] == "unknown" and not cabinet.contents

        # The operator records the cabinet as open; then a mug is seen inside it: the deferred
        # content claim is re-checked and admitted, the unsupported ones stay deferred.
        operator = _call(rig.driver, UpdateNode, "update_node", UpdateNode.Request(
            node_id="cabinet_1", source="operator", verdict="admit", properties=[
                Property(name="openable", value_json="true", confidence=1.0),
                Property(name="is_opened", value_json="true", confidence=1.0)]))
        assert operator.error_code == UpdateNode.Response.NONE, operator.error_msg
        world = rig.analyzer.world
        assert rig.wait_for(lambda: (n := world.node("cabinet_1")) is not None
                            and n.properties.get("openable", {}).get("is_opened") is True)
        seen = ObjectObservationArray(camera="base", observations=[
            _observation("mug", "det-mug-1", (2.05, 0.0, 0.45), half=0.05, stamp=14.0)])
        seen.header.frame_id = "map"
        rig.observations.publish(seen)
        assert rig.wait_for(lambda: [c.name for c in rig.node("cabinet_1").contents] == ["mug"])
        admitted = [e for e in rig.memory_events
                    if e.kind == "contents_set" and e.verdict == "admit"]
        assert admitted and {(r.kind, r.id) for r in admitted[-1].evidence} >= {
            ("detection", "det-mug-1")}
        assert len(rig.analyzer.analyzer.harness.pending) == 2  # opened + outcome still wait


@pytest.mark.ros
def test_memory_down_then_back_retries_the_writes(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(Parameter("vlm_backend", value="offline"),
                   Parameter("service_timeout_s", value=0.5), with_graph=False)
    # Without the scene graph node the analyzer still knows the graph from the latched topic.
    graph = SceneGraph(revision=1, nodes=[_node_msg("cabinet_1", "cabinet", (2.0, 0.0, 0.5),
                                                    half=0.25)])
    graph.header.frame_id = "map"
    latched = rig.driver.create_publisher(SceneGraph, "scene_graph", qos.LATCHED)
    latched.publish(graph)
    assert rig.wait_for(lambda: rig.analyzer.world.has_node("cabinet_1"))
    rig.play(9.0, 13.5, _hold_handle)
    down = rig.analyze("ia-offline", "cabinet_1", 10.5, 12.5)
    assert down.error_code == _Response.MEMORY_WRITE_FAILED
    assert "update_node is not available" in down.error_msg
    assert not down.task_success and "locked" in down.failure_reason
    assert down.verdicts and all(e.sequence == 0 for e in down.verdicts)
    assert rig.analyzer.counters.get("memory_write_failed") >= 1

    # World memory comes up with the same cabinet; asking again replays only the writes.
    rig.graph = rig.start_graph()
    rig.add_fixtures()
    again = rig.analyze("ia-offline", "cabinet_1", 10.5, 12.5)
    assert again.error_code == _Response.NONE, again.error_msg
    assert again.keyframe_ids == down.keyframe_ids
    assert all(e.sequence > 0 for e in again.verdicts)
    cabinet = rig.node("cabinet_1")
    assert _props(cabinet)["locked"] is True and len(cabinet.task_history) == 1
