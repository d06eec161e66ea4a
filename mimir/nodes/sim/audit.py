"""The bridge's memory audit: every verdict memory logs, graded against simulator truth.

With ``audit_file`` set, the bridge listens to ``memory_events`` and keeps the latest
``scene_graph`` (for the remembered label and position of each node); each event with a verdict
is graded in the simulation thread by :class:`~mimir_sim.audit.MemoryAuditor` and appended to the
file as one JSON line. This is the judge's instrument: nothing on the robot side reads it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node

from mimir.ros import qos
from mimir_msgs.msg import MemoryEvent, SceneGraph
from mimir_sim.audit import GRADED_KINDS, Grade, MemoryAuditor
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
