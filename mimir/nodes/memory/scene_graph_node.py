"""Scene graph node: owns world memory.

Subscribes to 3D observations (``observations``), fuses them into the event-sourced scene graph
(:class:`mimir_memory.world.WorldMemory`), serves ``get_scene_graph`` and ``update_node``, and
publishes the graph latched on ``scene_graph``, as RViz/Foxglove markers on
``scene_graph/markers``, and every appended event on ``memory_events``. The database lives in
``memory_dir``; restarting the node rebuilds the same graph from its log.

Keeping up with the cameras: the observation callback only queues the batch and one writer
thread fuses the batches, oldest first; when the queue is full the oldest is dropped and counted
(``observations_dropped.backlog``), so memory is built from fresh views. World memory has one
user at a time (:class:`~mimir.nodes.memory.outbox.LockedOutbox`): the writer gives way to
callbacks, so a service waits for at most the batch in progress, and memory events go out once
the lock is released, in the order they were stored.

Fixtures being operated: an ``open`` or ``close`` starting on ``interaction_events``
(``operated_primitives``) anchors its target until memory holds that interaction's analysed
outcome (:meth:`WorldMemory.operation_started`): the swinging door and the interior widen the
fixture's box but do not walk its centroid off the front. Starts naming an unknown node are
counted (``operations_refused.*``).

Views that may not start a node: a camera listed for a label in the memory file's
``association.no_start_cameras`` (the wrist, for large fixtures) fuses into a node of that label
but does not create one; such an observation is held back and counted
(``observations_held_back.<camera>``), and its label is left out of that frame's misses.

Negative evidence (``record_misses``): when an array carries a valid ``view``, the writer
records a miss for each remembered node that frame should have shown and did not
(:class:`mimir_memory.misses.MissRecorder`; the ``miss_*`` parameters are its thresholds).
Labels of observations the frame had but memory refused are left out for that frame. Misses
never hold up ingestion: a view that cannot be read, or stamped further ahead of the clock than
the bounds allow, is counted (``misses.bad_view``; logged once) and the observations are stored
as usual. Diagnostics count ``misses.recorded``, ``misses.stale`` (misses that marked a node
gone), ``misses.throttled`` and ``misses.refused``.
"""

from __future__ import annotations

import sys
import threading
from collections import deque
from pathlib import Path
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from visualization_msgs.msg import MarkerArray

from mimir.bounds import BoundsError
from mimir.nodes.memory.markers import markers_for
from mimir.nodes.memory.messages import (
    MessageValueError,
    PropertyMessages,
    event_to_msg,
    graph_to_msg,
    node_to_msg,
    node_update_from_msg,
)
from mimir.nodes.memory.observation_messages import observations_from_msg, view_from_msg
from mimir.nodes.memory.outbox import LockedOutbox
from mimir.nodes.memory.scene_graph_params import SceneGraphConfig
from mimir.paths import config_file, data_dir
from mimir.ros import qos
from mimir.ros.diagnostics import NodeCounters
from mimir.ros.errors import set_error
from mimir.ros.floatfix import FloatSafePublisher, coerced
from mimir.ros.params import declare_config
from mimir.ros.runtime import run_node
from mimir.ros.time import to_seconds
from mimir_memory.config import load_memory_config
from mimir_memory.errors import MemoryStoreError, failure_class
from mimir_memory.events import EventKind, MemoryEvent, Source
from mimir_memory.misses import MissRecorder
from mimir_memory.observations import ObjectObservation as CoreObservation
from mimir_memory.visibility import CameraView
from mimir_memory.world import WorldMemory
from mimir_msgs.msg import InteractionEvent, ObjectObservationArray, SceneGraph
from mimir_msgs.msg import MemoryEvent as MemoryEventMsg
from mimir_msgs.srv import GetSceneGraph, UpdateNode

#: Counters that turn the /diagnostics status to WARN when they grow.
_WARN_KEYS = ("observations_dropped", "update_node.refused", "skipped_events", "storage_errors",
              "misses.bad_view", "misses.refused", "operations_refused")
#: Events that tell which node an observation was associated with.
_SEEN_KINDS = (EventKind.NODE_CREATED, EventKind.OBSERVATION_FUSED)


class SceneGraphNode(Node):
    """Owns world memory; see the module docstring for its interfaces."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("scene_graph", **kwargs)
        self.config = declare_config(self, SceneGraphConfig)
        memory_config = load_memory_config(config_file("memory.yaml", self.config.memory_config))
        folder = data_dir(self.config.memory_dir)
        self.world = WorldMemory.open(folder / "world.db", config=memory_config,
                                      map_frame=self.config.map_frame)
        self._memory = LockedOutbox(lambda event: self._event_pub.publish(event_to_msg(event)))
        self._queue: deque[ObjectObservationArray] = deque()
        self._queued = threading.Condition()
        self._stopping = False
        # memory revision each latched topic last went out at (-1: never)
        self._sent = {"graph": -1, "markers": -1}
        self._last_stamp = 0.0
        self._misses = MissRecorder(self.world, self.config.visibility(),
                                    self.config.miss_min_period_s)
        self._bad_view_logged = False
        self._property_msgs = PropertyMessages()  # reused between graph messages
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

    def _report(self) -> None:
        with self._memory.hold():
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
        """Stop the writer and close the database (a node whose start failed may have neither)."""
        writer = getattr(self, "_writer", None)
        if writer is not None:
            with self._queued:
                self._stopping = True
                self._queued.notify_all()
            writer.join(timeout=10.0)
        world = getattr(self, "world", None)
        if world is not None:
            with self._memory.hold():
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
            with self._memory.hold(writer=True):
                self._on_observations(msg)

    def _on_interaction(self, msg: InteractionEvent) -> None:
        """An open or close starts: its target keeps its centroid until it is analysed."""
        if (msg.phase != InteractionEvent.PHASE_STARTED or not msg.target_id
                or msg.primitive not in self.config.operated_primitives):
            return
        stamp = to_seconds(msg.window_start) or to_seconds(msg.header.stamp)
        try:
            with self._memory.hold():
                self.world.operation_started(msg.target_id, stamp, msg.interaction_id)
        except (MemoryStoreError, ValueError) as err:
            self.counters.add(f"operations_refused.{failure_class(err)}")
            self.get_logger().warning(
                f"{msg.primitive} of {msg.target_id!r} ({msg.interaction_id!r}) is not "
                f"tracked: {err}")

    # ----------------------------------------------------------------- publishing
    def _emit(self, events: list[MemoryEvent]) -> None:
        """Publish stored events once memory is released (holding it)."""
        self._memory.emit(events)
        for event in events:
            self._last_stamp = max(self._last_stamp, event.stamp)

    def _publish_graph(self) -> None:
        """Publish the graph and its markers when memory changed since their last publication.
        A topic nobody subscribes to is not built (RViz markers are costly under a stream); it
        stays pending and goes out on the first period after a subscriber appears."""
        revision = self.world.revision
        send_graph = (self._sent["graph"] != revision
                      and self._graph_pub.get_subscription_count() > 0)
        send_markers = (self.config.markers and self._sent["markers"] != revision
                        and self._marker_pub.get_subscription_count() > 0)
        if not (send_graph or send_markers):
            return
        with self._memory.hold():
            revision = self.world.revision
            nodes = list(self.world.state.nodes.values())
            graph = markers = None
            if send_graph:
                self._sent["graph"] = revision
                graph = graph_to_msg(nodes, revision, self.config.map_frame, self._last_stamp,
                                     self._property_msgs)
            if send_markers:
                self._sent["markers"] = revision
                markers = markers_for(nodes, self.config.map_frame, self.config.hand_frame)
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
        observations, bad = observations_from_msg(msg, self.config.map_frame)
        for reason, _, text in bad:
            self._drop(reason, text)
        unsure = {label for _, label, _ in bad}  # labels of observations memory did not take
        events: list[MemoryEvent] = []
        if observations:
            refused: list[tuple[CoreObservation, str]] = []
            held_back: list[tuple[CoreObservation, str]] = []
            try:
                events = self.world.ingest(observations, source=Source.PERCEPTION, now=now,
                                           refused=refused, held_back=held_back)
            except MemoryStoreError as err:
                self.counters.add("storage_errors")
                self._drop(failure_class(err).lower(), f"could not store them: {err}",
                           len(observations) - len(refused))
                return  # what the frame matched is unknown: no misses either
            for obs, reason in refused:
                self._drop("invalid", reason)
                unsure.add(obs.label)
            for obs, _ in held_back:
                # a piece of a fixture memory could not place: no start, and no miss either
                self.counters.add(f"observations_held_back.{obs.camera or 'unknown'}")
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
        report = self._misses.record(view, seen, stamp=to_seconds(msg.header.stamp),
                                     camera=str(msg.camera), unsure=unsure)
        for key, count in (("recorded", report.recorded), ("stale", report.stale),
                           ("throttled", report.throttled), ("refused", len(report.refused))):
            if count:
                self.counters.add(f"misses.{key}", count)
        for node_id, err in report.refused:
            if failure_class(err) == "STORAGE_ERROR":
                self.counters.add("storage_errors")
            self.get_logger().warning(f"could not record a miss of {node_id}: {err}",
                                      throttle_duration_sec=5.0)
        self._emit(report.events)

    def _on_get_graph(self, request: GetSceneGraph.Request,
                      response: GetSceneGraph.Response) -> GetSceneGraph.Response:
        with self._memory.hold():
            return self._get_graph(request, response)

    def _get_graph(self, request: GetSceneGraph.Request,
                   response: GetSceneGraph.Response) -> GetSceneGraph.Response:
        if len(request.node_ids) > self.world.bounds.max_items:
            return set_error(response, "INVALID_REQUEST",
                             f"{len(request.node_ids)} node ids (at most "
                             f"{self.world.bounds.max_items})")
        try:  # a merged id names the node it was merged into
            state = (self.world.as_of(to_seconds(request.as_of)) if request.use_as_of
                     else self.world.state)
            nodes = state.select(request.node_ids, request.label)
        except MemoryStoreError as err:
            return set_error(response, failure_class(err), str(err))
        response.graph = graph_to_msg(nodes, state.revision, self.config.map_frame,
                                      self._last_stamp, self._property_msgs)
        return response

    def _on_update_node(self, request: UpdateNode.Request,
                        response: UpdateNode.Response) -> UpdateNode.Response:
        with self._memory.hold():
            response = self._update_node(request, response)
        refused = response.error_code != UpdateNode.Response.NONE
        self.counters.add("update_node.refused" if refused else "update_node.ok")
        if refused:
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
