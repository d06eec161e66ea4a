"""The bridge's audits: memory's verdicts and the robot's localisation, against simulator truth.

With ``audit_file`` set, the bridge listens to ``memory_events`` and keeps the latest
``scene_graph`` (for the remembered label and position of each node); each event with a verdict
is graded in the simulation thread by :class:`~mimir_sim.audit.MemoryAuditor` and appended to the
file as one JSON line. With ``localisation_file`` set, :class:`LocalisationAuditSink` compares
the robot's localised base pose with the true one. These are the judge's instruments: nothing
on the robot side reads them.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node

from mimir.ros import qos
from mimir.ros.tf import make_transform_source
from mimir.transforms import TransformError
from mimir_msgs.msg import MemoryEvent, SceneGraph
from mimir_sim.audit import GRADED_KINDS, Grade, LocalisationAudit, MemoryAuditor
from mimir_sim.sim_thread import SimThreadStoppedError


class MemoryAuditSink:
    """Subscribes to memory events and writes their grades.

    Args:
        node: the bridge node (subscriptions live on it).
        auditor: grades events against the simulator.
        run_in_sim: runs a callable in the simulation thread and returns its result.
        path: the JSON-lines file.
        warn: ``warn(counter, text)`` reports a problem.
    """

    def __init__(self, node: Node, auditor: MemoryAuditor, run_in_sim: Callable[[Any], Any],
                 path: str, warn: Callable[[str, str], None]) -> None:
        self._auditor = auditor
        self._run = run_in_sim
        self._path = Path(path)
        self._warn = warn
        self._lock = threading.Lock()
        self._nodes: dict[str, tuple[str, tuple[float, float, float]]] = {}
        group = ReentrantCallbackGroup()
        node.create_subscription(SceneGraph, "scene_graph", self._on_graph, qos.LATCHED,
                                 callback_group=group)
        node.create_subscription(MemoryEvent, "memory_events", self._on_event, qos.EVENTS,
                                 callback_group=group)

    def _on_graph(self, msg: SceneGraph) -> None:
        nodes = {n.id: (n.label, (n.position.x, n.position.y, n.position.z))
                 for n in msg.nodes}
        with self._lock:
            self._nodes = nodes

    def _on_event(self, msg: MemoryEvent) -> None:
        if msg.kind not in GRADED_KINDS or not msg.verdict:
            return
        try:
            payload = json.loads(msg.payload_json or "{}")
        except json.JSONDecodeError:
            self._warn("audit.bad_event", f"memory event {msg.event_id} has no JSON payload")
            return
        with self._lock:
            label, position = self._nodes.get(msg.subject_id, ("", None))
        try:
            grade: Grade | None = self._run(lambda: self._auditor.grade(
                msg.kind, msg.subject_id, msg.verdict, payload, label=label, position=position))
        except SimThreadStoppedError as err:
            self._warn("audit.sim_stopped", f"memory event {msg.event_id} not graded: {err}")
            return
        if grade is None:
            return
        record = {"event_id": msg.event_id, "kind": msg.kind, "subject": msg.subject_id,
                  **grade.as_dict()}
        with self._lock, self._path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(record) + "\n")


class LocalisationAuditSink:
    """Compares the robot's ``map -> base`` transform with the simulated base pose.

    Every ``period`` s (wall) it reads the latest ``map_frame -> base_frame`` from /tf (the
    localization node's ``map -> odom`` chained with the executor's ``odom -> base_link``) and
    the true base pose and speed in the simulation thread; :class:`LocalisationAudit` keeps the
    comparisons taken while the base stood still. :meth:`write` saves the summary as JSON.

    Args:
        node: the bridge node (the TF subscription and the timer live on it).
        read_truth: runs in the simulation thread: ``((x, y, yaw), speed, sim time)`` of the
            base.
        run_in_sim: runs a callable in the simulation thread and returns its result.
        path: the JSON file :meth:`write` writes.
        frames: ``(map_frame, base_frame)``.
        period: seconds between comparisons (default: the audit's ``period_s``).
    """

    def __init__(self, node: Node, read_truth: Callable[[], Any],
                 run_in_sim: Callable[[Any], Any], path: str, frames: tuple[str, str],
                 *, period: float | None = None) -> None:
        self.audit = LocalisationAudit()
        if period is None:
            period = self.audit.period_s
        self._read_truth = read_truth
        self._run = run_in_sim
        self._path = Path(path)
        self._frames = frames
        self._tf = make_transform_source(node)
        self._lock = threading.Lock()
        self.unavailable = 0
        node.create_timer(period, self._tick, callback_group=ReentrantCallbackGroup())

    def close(self) -> None:
        """Stop listening to transforms (the owner's ``destroy_node`` calls this)."""
        self._tf.close()

    def _tick(self) -> None:
        try:
            pose = self._tf.lookup(self._frames[0], self._frames[1], 0.0)
        except TransformError:
            self.unavailable += 1  # no localisation yet (or the chain is broken): not an error
            return
        try:
            truth, speed, sim_time = self._run(self._read_truth)
        except SimThreadStoppedError:
            return
        x, y = float(pose[0, 3]), float(pose[1, 3])
        yaw = math.atan2(float(pose[1, 0]), float(pose[0, 0]))
        with self._lock:
            self.audit.add((x, y, yaw), truth, speed, sim_time)

    def write(self) -> None:
        """Write the summary (samples, mean, p95, max in m and deg) and every sample (sim time,
        errors) to the file."""
        with self._lock:
            summary = self.audit.record(self.unavailable)
        self._path.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
