"""Scene graph node: owns world memory.

Subscribes to 3D observations (``observations``), fuses them into the event-sourced scene graph
(:class:`mimir_memory.world.WorldMemory`), serves ``get_scene_graph`` and ``update_node``, and
publishes the graph latched on ``scene_graph``, as RViz/Foxglove markers on
``scene_graph/markers``, and every appended event on ``memory_events``. The database lives in
``memory_dir``; restarting the node rebuilds the same graph from its log.

Keeping up with the cameras: the observation callback only queues the batch; one writer thread
fuses the queued batches, oldest first, so services and timers never wait behind a stream of
observations for longer than one batch. When the queue is full the oldest batch is dropped and
counted (``observations_dropped.backlog``): memory is built from fresh views rather than falling
ever further behind. Every access to world memory (the writer, ``update_node``,
``get_scene_graph``, publishing) holds one lock, so the database keeps a single writer at a time.

Fixtures being operated: an ``open`` or ``close`` starting on ``interaction_events``
(``operated_primitives``) anchors its target until memory holds that interaction's analysed
outcome (:meth:`WorldMemory.operation_started`): the door swinging out and the interior coming
into view widen the fixture's box but do not walk its centroid off the front the robot aims
at. A start naming a node memory does not hold is counted (``operations_refused.*``).

Negative evidence (``record_misses``): when an array carries a valid ``view``, the writer asks
:func:`mimir_memory.visibility.expected_unseen` which remembered nodes that frame should have
shown (in the image, in range, nothing nearer in the depth grid, a label the segmenter looked
for, not a fixture, not inside a container or in the hand) and that no observation of the frame
was associated with, and records a miss for each (:meth:`WorldMemory.record_miss`; enough
misses in a row make memory record ``at_last_place`` = false). The ``miss_*`` parameters are
the thresholds. One node counts at most one miss per ``miss_min_period_s`` of frame time, so a
single glance from three cameras is one miss, not three. Labels of observations the frame had
but memory refused are left out for that frame, since their node may well have been in view.
Misses never hold up ingestion: a view that cannot be read, or whose stamp lies further ahead
of the clock than the bounds allow, is counted (``misses.bad_view``; logged once) and the
observations of its array are stored as usual. Diagnostics count ``misses.recorded``,
``misses.stale`` (misses that marked a node gone), ``misses.throttled`` and ``misses.refused``.
"""

from __future__ import annotations

import colorsys
import hashlib
import sys
import threading
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from visualization_msgs.msg import Marker, MarkerArray

from mimir.bounds import BoundsError
from mimir.nodes import common_params as shared
from mimir.nodes.memory.messages import (
    MessageValueError,
    event_to_msg,
    graph_to_msg,
    node_to_msg,
    node_update_from_msg,
    observation_from_msg,
    view_from_msg,
)
from mimir.paths import config_file, data_dir
from mimir.ros import qos
from mimir.ros.diagnostics import NodeCounters
from mimir.ros.errors import set_error
from mimir.ros.floatfix import FloatSafePublisher, coerced
from mimir.ros.params import declare_config
from mimir.ros.runtime import run_node
from mimir.ros.time import to_seconds
from mimir.settings import param
from mimir_memory.config import load_memory_config
from mimir_memory.errors import MemoryStoreError, failure_class
from mimir_memory.events import EventKind, MemoryEvent, Source
from mimir_memory.graph import SceneNode as CoreNode
from mimir_memory.observations import InvalidObservationError
from mimir_memory.observations import ObjectObservation as CoreObservation
from mimir_memory.visibility import (
    DEFAULT_SKIP_LABELS,
    CameraView,
    VisibilityConfig,
    expected_unseen,
)
from mimir_memory.world import WorldMemory
from mimir_msgs.msg import InteractionEvent, ObjectObservationArray, SceneGraph
from mimir_msgs.msg import MemoryEvent as MemoryEventMsg
from mimir_msgs.srv import GetSceneGraph, UpdateNode

#: Counters that turn the /diagnostics status to WARN when they grow.
_WARN_KEYS = ("observations_dropped", "update_node.refused", "skipped_events", "storage_errors",
              "misses.bad_view", "misses.refused", "operations_refused")
#: Events that tell which node an observation was associated with.
_SEEN_KINDS = (EventKind.NODE_CREATED, EventKind.OBSERVATION_FUSED)


@dataclass(frozen=True)
class SceneGraphConfig:
    """Parameters of the scene graph node."""

    memory_dir: str = shared.memory_dir("folder of the memory databases (world.db here)")
    memory_config: str = shared.memory_config()
    map_frame: str = shared.map_frame("fixed frame of the graph", read_only=False)
    publish_period_s: float = param(0.5, "shortest period between graph publications (s)")
    queue_batches: int = param(
        30, "observation batches waiting for the writer at most; beyond, the oldest is dropped "
        "(about 1 s of three cameras at 10 Hz)")
    markers: bool = param(True, "publish RViz markers")
    record_misses: bool = param(
        True, "record a miss for a remembered object that a frame's view should have shown and "
        "did not (negative evidence; needs observation arrays with a valid view)",
        read_only=True)
    miss_margin_px: float = param(
        10.0, "a node counts only when its projected extent keeps this far from the image "
        "border (px)", read_only=True)
    miss_min_range_m: float = param(
        0.3, "nearest depth at which a node counts as expected (m)", read_only=True)
    miss_max_range_m: float = param(
        4.0, "farthest depth at which a node counts as expected (m); the view's range limits "
        "it too", read_only=True)
    miss_occlusion_tolerance_m: float = param(
        0.1, "a depth-grid cell nearer than the node's depth minus this hides the node (m)",
        read_only=True)
    miss_min_size_px: float = param(
        12.0, "least projected size of a node's box (longest side, px) to count as expected",
        read_only=True)
    miss_skip_labels: tuple[str, ...] = param(
        DEFAULT_SKIP_LABELS, "labels never expected whole in a frame (fixtures); a label or one "
        "of its words matches", read_only=True)
    miss_min_period_s: float = param(
        1.0, "least frame time between two misses recorded for one node (s)", read_only=True)
    operated_primitives: tuple[str, ...] = param(
        ("open", "close"), "primitives that swing a fixture's door or drawer: from their start "
        "on ``interaction_events`` until memory holds their analysed outcome, views of the "
        "target keep its centroid (association.anchor_open in the memory config)",
        read_only=True)
    diagnostics_period: float = shared.diagnostics_period()

    def __post_init__(self) -> None:
        if self.publish_period_s <= 0.0 or self.diagnostics_period <= 0.0:
            raise ValueError("publish_period_s and diagnostics_period must be positive")
        if self.queue_batches < 1:
            raise ValueError("queue_batches must be at least 1")
        if not self.miss_min_period_s >= 0.0:
            raise ValueError("miss_min_period_s must be >= 0")
        self.visibility()  # raises ConfigError (a ValueError) for bad miss_* values

    def visibility(self) -> VisibilityConfig:
        """The thresholds of the negative-evidence test."""
        return VisibilityConfig(
            margin_px=self.miss_margin_px,
            min_range_m=self.miss_min_range_m,
            max_range_m=self.miss_max_range_m,
            occlusion_tolerance_m=self.miss_occlusion_tolerance_m,
            min_size_px=self.miss_min_size_px,
            skip_labels=self.miss_skip_labels,
        )


def _colour(label: str) -> tuple[float, float, float]:
    hue = int(hashlib.sha1(label.encode()).hexdigest()[:6], 16) / 0xFFFFFF
    return colorsys.hsv_to_rgb(hue, 0.65, 0.95)


def markers_for(nodes: list[CoreNode], frame_id: str) -> MarkerArray:
    """One box and one text label per node, replacing every earlier marker."""
    array = MarkerArray(markers=[Marker(action=Marker.DELETEALL)])
    for index, node in enumerate(sorted(nodes, key=lambda n: n.node_id)):
        r, g, b = _colour(node.label)
        box = Marker(ns="nodes", id=index, type=Marker.CUBE, action=Marker.ADD)
        box.header.frame_id = frame_id
        lo, hi = node.bbox_min, node.bbox_max
        box.pose.position.x, box.pose.position.y, box.pose.position.z = (
            (lo[i] + hi[i]) / 2.0 for i in range(3))
        box.pose.orientation.w = 1.0
        box.scale.x, box.scale.y, box.scale.z = (max(hi[i] - lo[i], 0.01) for i in range(3))
        box.color.r, box.color.g, box.color.b, box.color.a = r, g, b, 0.35
        text = Marker(ns="labels", id=index, type=Marker.TEXT_VIEW_FACING, action=Marker.ADD)
        text.header.frame_id = frame_id
        text.pose.position.x, text.pose.position.y = node.centroid[0], node.centroid[1]
        text.pose.position.z = hi[2] + 0.08
        text.pose.orientation.w = 1.0
        text.scale.z = 0.08
        text.color.r = text.color.g = text.color.b = text.color.a = 1.0
        locked = node.properties.get("locked")
        text.text = node.node_id + (" (locked)" if locked is not None and locked.value else "")
        array.markers.extend([box, text])
    return array


class SceneGraphNode(Node):
    """Owns world memory; see the module docstring for its interfaces."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("scene_graph", **kwargs)
        self.config = declare_config(self, SceneGraphConfig)
        memory_config = load_memory_config(config_file("memory.yaml", self.config.memory_config))
        folder = data_dir(self.config.memory_dir)
        self.world = WorldMemory.open(folder / "world.db", config=memory_config,
                                      map_frame=self.config.map_frame)
        self._lock = threading.Lock()  # world memory: one user at a time
        self._queue: deque[ObjectObservationArray] = deque()
        self._queued = threading.Condition()
        self._stopping = False
        # memory revision each latched topic last went out at (-1: never)
        self._sent = {"graph": -1, "markers": -1}
        self._last_stamp = 0.0
        self._visibility = self.config.visibility()
        # frame stamp of the last miss recorded per node, and whether a bad view was logged
        self._last_miss: dict[str, float] = {}
        self._bad_view_logged = False
        self.counters = NodeCounters(_WARN_KEYS)
        db_group = MutuallyExclusiveCallbackGroup()
        inbox_group = MutuallyExclusiveCallbackGroup()
        self._graph_pub = self.create_publisher(SceneGraph, "scene_graph", qos.LATCHED,
            publisher_class=FloatSafePublisher)
        self._marker_pub = self.create_publisher(MarkerArray, "scene_graph/markers", qos.LATCHED,
            publisher_class=FloatSafePublisher)
        self._event_pub = self.create_publisher(MemoryEventMsg, "memory_events", qos.EVENTS,
            publisher_class=FloatSafePublisher)
        self.create_subscription(ObjectObservationArray, "observations", self._enqueue,
                                 qos.EVENTS, callback_group=inbox_group)
        self.create_subscription(InteractionEvent, "interaction_events", self._on_interaction,
                                 qos.EVENTS, callback_group=db_group)
        self.create_service(GetSceneGraph, "get_scene_graph", coerced(self._on_get_graph),
                            callback_group=db_group)
        self.create_service(UpdateNode, "update_node", coerced(self._on_update_node),
                            callback_group=db_group)
        self.create_timer(self.config.publish_period_s, self._publish_graph,
                          callback_group=db_group)
        self._diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", qos.EVENTS,
            publisher_class=FloatSafePublisher)
        self.create_timer(self.config.diagnostics_period, self._report, callback_group=db_group)
        self._writer = threading.Thread(target=self._write_loop, name="world_writer",
                                        daemon=True)
        self._writer.start()
        self.get_logger().info(
            f"world memory at {Path(folder) / 'world.db'}: {len(self.world.state.nodes)} nodes, "
            f"revision {self.world.revision}"
        )
        skipped = self.world.skipped_events
        if skipped:
            self.get_logger().error(
                f"{len(skipped)} stored event(s) do not apply and are kept out of the graph "
                f"(first: seq {skipped[0].seq}, {skipped[0].kind}: {skipped[0].reason}); run "
                f"`mimir memory check {folder}` to list them and `mimir memory repair {folder}` "
                "to retract them")

    @property
    def dropped_observations(self) -> int:
        """Observations refused so far, whatever the reason."""
        return sum(v for k, v in self.counters.snapshot().items()
                   if k.startswith("observations_dropped"))

    def _report(self) -> None:
        with self._lock:
            self.counters.set("nodes", len(self.world.state.nodes))
            self.counters.set("revision", self.world.revision)
            self.counters.set("skipped_events", len(self.world.state.skipped))
            self.counters.set("retracted_events", len(self.world.state.retracted))
        with self._queued:
            self.counters.set("queued_batches", len(self._queue))
        self.counters.publish(self, self._diag_pub, "world_memory")

    def _drop(self, reason: str, text: str, count: int = 1) -> None:
        self.counters.add(f"observations_dropped.{reason}", count)
        self.get_logger().warning(f"dropping {count} observation(s): {text}",
                                  throttle_duration_sec=5.0)

    def destroy_node(self) -> None:
        """Stop the writer and close the database before the node goes (a node whose start
        failed may have neither)."""
        writer = getattr(self, "_writer", None)
        if writer is not None:
            with self._queued:
                self._stopping = True
                self._queued.notify_all()
            writer.join(timeout=10.0)
        world = getattr(self, "world", None)
        if world is not None:
            with self._lock:
                world.close()
        super().destroy_node()

    # ----------------------------------------------------------------- the writer
    def _enqueue(self, msg: ObjectObservationArray) -> None:
        """Queue a batch for the writer (the DDS callback does nothing else)."""
        with self._queued:
            if len(self._queue) >= self.config.queue_batches:
                stale = self._queue.popleft()
                self._drop("backlog", "the writer is behind; dropped the oldest batch",
                           len(stale.observations))
            self._queue.append(msg)
            self._queued.notify()

    def _write_loop(self) -> None:
        while True:
            with self._queued:
                while not self._queue and not self._stopping:
                    self._queued.wait()
                if self._stopping:
                    return
                msg = self._queue.popleft()
            with self._lock:
                self._on_observations(msg)

    def _on_interaction(self, msg: InteractionEvent) -> None:
        """An open or close starts: its target keeps its centroid until it is analysed."""
        if (msg.phase != InteractionEvent.PHASE_STARTED or not msg.target_id
                or msg.primitive not in self.config.operated_primitives):
            return
        stamp = to_seconds(msg.window_start) or to_seconds(msg.header.stamp)
        try:
            with self._lock:
                self.world.operation_started(msg.target_id, stamp, msg.interaction_id)
        except (MemoryStoreError, ValueError) as err:
            self.counters.add(f"operations_refused.{failure_class(err)}")
            self.get_logger().warning(
                f"{msg.primitive} of {msg.target_id!r} ({msg.interaction_id!r}) is not "
                f"tracked: {err}")

    # ----------------------------------------------------------------- publishing
    def _emit(self, events: list[MemoryEvent]) -> None:
        for event in events:
            self._event_pub.publish(event_to_msg(event))
            self._last_stamp = max(self._last_stamp, event.stamp)

    def _publish_graph(self) -> None:
        """Publish the graph and its markers when memory changed since their last publication.

        A topic nobody subscribes to is not built (RViz markers are costly under a stream);
        it stays pending and goes out on the first period after a subscriber appears, which
        also reaches that late joiner.
        """
        revision = self.world.revision
        send_graph = (self._sent["graph"] != revision
                      and self._graph_pub.get_subscription_count() > 0)
        send_markers = (self.config.markers and self._sent["markers"] != revision
                        and self._marker_pub.get_subscription_count() > 0)
        if not (send_graph or send_markers):
            return
        with self._lock:
            revision = self.world.revision
            nodes = list(self.world.state.nodes.values())
            graph = markers = None
            if send_graph:
                self._sent["graph"] = revision
                graph = graph_to_msg(nodes, revision, self.config.map_frame, self._last_stamp)
            if send_markers:
                self._sent["markers"] = revision
                markers = markers_for(nodes, self.config.map_frame)
        if graph is not None:
            self._graph_pub.publish(graph)
        if markers is not None:
            self._marker_pub.publish(markers)

    # ------------------------------------------------------------------ callbacks
    def _on_observations(self, msg: ObjectObservationArray) -> None:
        """Fuse one batch (the writer thread, holding the lock)."""
        self.counters.add("observations_received", len(msg.observations))
        frame = msg.header.frame_id or self.config.map_frame
        if frame != self.config.map_frame:
            self._drop("wrong_frame", f"frame {frame!r}; world memory is in "
                       f"{self.config.map_frame!r}", len(msg.observations))
            return
        if len(msg.observations) > self.world.bounds.max_items:
            self._drop("too_many", f"{len(msg.observations)} in one batch (at most "
                       f"{self.world.bounds.max_items})", len(msg.observations))
            return
        now = to_seconds(self.get_clock().now().to_msg())
        view = self._read_view(msg, now)
        observations: list[CoreObservation] = []
        unsure: set[str] = set()  # labels of observations memory did not take
        for item in msg.observations:
            # each observation stands or falls alone: a bad one costs only itself
            try:
                obs = observation_from_msg(item, msg)
            except InvalidObservationError as err:
                self._drop("invalid", str(err))
                unsure.add(str(item.label))
                continue
            if obs.frame_id != self.config.map_frame:
                self._drop("wrong_frame", f"observation in frame {obs.frame_id!r}")
                unsure.add(obs.label)
                continue
            observations.append(obs)
        events: list[MemoryEvent] = []
        if observations:
            refused: list[tuple[CoreObservation, str]] = []
            try:
                events = self.world.ingest(observations, source=Source.PERCEPTION, now=now,
                                           refused=refused)
            except MemoryStoreError as err:
                self.counters.add("storage_errors")
                self._drop(failure_class(err).lower(), f"could not store them: {err}",
                           len(observations) - len(refused))
                return  # what the frame matched is unknown: no misses either
            for obs, reason in refused:
                self._drop("invalid", reason)
                unsure.add(obs.label)
        if events:
            self.counters.add("observations_stored",
                              sum(e.kind in _SEEN_KINDS for e in events))
            self._emit(events)
        if view is not None:
            seen = {str(e.payload["node_id"]) for e in events if e.kind in _SEEN_KINDS}
            self._record_misses(msg, view, seen, unsure)

    def _read_view(self, msg: ObjectObservationArray, now: float) -> CameraView | None:
        """The array's view when misses are recorded and it is valid; a bad one (or one
        stamped beyond what the bounds allow against the clock ``now``) is counted."""
        if not self.config.record_misses:
            return None
        try:
            view = view_from_msg(msg.view)
            if view is not None:
                self.world.bounds.stamp(to_seconds(msg.header.stamp), now, "view stamp")
            return view
        except (MessageValueError, BoundsError) as err:
            self.counters.add("misses.bad_view")
            if not self._bad_view_logged:
                self._bad_view_logged = True
                self.get_logger().warning(
                    f"ignoring the view of a {msg.camera or 'camera'} frame, its observations "
                    f"are stored as usual: {err} (later bad views are only counted, "
                    "misses.bad_view)")
            return None

    def _record_misses(self, msg: ObjectObservationArray, view: CameraView, seen: set[str],
                       unsure: set[str]) -> None:
        """Record a miss for every node the frame should have shown (writer, holding the lock)."""
        stamp = to_seconds(msg.header.stamp)
        camera = str(msg.camera)
        for node_id in seen:
            self._last_miss.pop(node_id, None)
        expected = expected_unseen(self.world.state.nodes.values(), view, seen,
                                   self._visibility, skip_labels=unsure)
        for node_id, reason in expected:
            last = self._last_miss.get(node_id)
            if last is not None and abs(stamp - last) < self.config.miss_min_period_s:
                self.counters.add("misses.throttled")
                continue
            try:
                events = self.world.record_miss(
                    node_id, stamp=stamp, camera=camera,
                    reason=f"camera {camera or '(unnamed)'}: {reason}")
            except MemoryStoreError as err:
                self.counters.add("misses.refused")
                if failure_class(err) == "STORAGE_ERROR":
                    self.counters.add("storage_errors")
                self.get_logger().warning(f"could not record a miss of {node_id}: {err}",
                                          throttle_duration_sec=5.0)
                continue
            self._last_miss[node_id] = stamp
            self.counters.add("misses.recorded")
            self.counters.add("misses.stale", sum(e.kind == EventKind.PROPERTY_SET
                                                  for e in events))
            self._emit(events)

    def _on_get_graph(self, request: GetSceneGraph.Request,
                      response: GetSceneGraph.Response) -> GetSceneGraph.Response:
        with self._lock:
            return self._get_graph(request, response)

    def _get_graph(self, request: GetSceneGraph.Request,
                   response: GetSceneGraph.Response) -> GetSceneGraph.Response:
        try:
            state = (self.world.as_of(to_seconds(request.as_of)) if request.use_as_of
                     else self.world.state)
        except MemoryStoreError as err:
            return set_error(response, failure_class(err), str(err))
        nodes = list(state.nodes.values())
        if len(request.node_ids) > self.world.bounds.max_items:
            return set_error(response, "INVALID_REQUEST",
                             f"{len(request.node_ids)} node ids (at most "
                             f"{self.world.bounds.max_items})")
        # a merged id names the node it was merged into
        wanted = list(dict.fromkeys(state.resolve(i) for i in request.node_ids))
        unknown = [i for i in wanted if i not in state.nodes]
        if unknown:
            return set_error(response, "UNKNOWN_NODE",
                             f"unknown node ids: {', '.join(i[:64] for i in unknown[:20])}")
        if wanted:
            nodes = [state.nodes[i] for i in wanted]
        if request.label:
            nodes = [n for n in nodes if n.label == request.label]
        response.graph = graph_to_msg(nodes, state.revision, self.config.map_frame,
                                      self._last_stamp)
        return response

    def _on_update_node(self, request: UpdateNode.Request,
                        response: UpdateNode.Response) -> UpdateNode.Response:
        with self._lock:
            response = self._update_node(request, response)
        refused = response.error_code != UpdateNode.Response.NONE
        self.counters.add("update_node.refused" if refused else "update_node.ok")
        if response.error_code != UpdateNode.Response.NONE:
            self.get_logger().warning(
                f"update_node {request.node_id[:64]!r} refused ({response.error_code}): "
                f"{response.error_msg}", throttle_duration_sec=1.0)
        return response

    def _update_node(self, request: UpdateNode.Request,
                     response: UpdateNode.Response) -> UpdateNode.Response:
        try:
            update = node_update_from_msg(request, self.world.bounds)
        except MessageValueError as err:
            return set_error(response, "INVALID_REQUEST", str(err))
        earlier: list[MemoryEvent] = []
        if request.event_id:
            earlier = self.world.update_applied(request.event_id)
            if earlier and any(e.payload.get("node_id") != request.node_id for e in earlier):
                return set_error(response, "DUPLICATE_EVENT",
                                 f"event id {request.event_id!r} was used for another node")
        stamp = max(self._last_stamp, to_seconds(self.get_clock().now().to_msg()))
        try:
            events = self.world.apply_update(update, stamp=stamp)
        except MemoryStoreError as err:
            if failure_class(err) == "STORAGE_ERROR":
                self.counters.add("storage_errors")
            return set_error(response, failure_class(err), str(err))
        if earlier and not events:  # a replayed request: report what it did the first time
            events = earlier
        else:
            self._emit(events)
        response.events = [event_to_msg(e, request.verdict_reason) for e in events]
        response.node = node_to_msg(self.world.node(request.node_id))
        response.revision = self.world.revision
        return response


def main(args: list[str] | None = None) -> int:
    """Console script ``scene_graph_node``."""
    return run_node(SceneGraphNode, args, threads=1)  # callbacks never wait on each other


if __name__ == "__main__":
    sys.exit(main())
