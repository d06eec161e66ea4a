"""The analyzer node's memory side: service calls, planned writes as requests, its answers.

:class:`MemoryClient` calls the memory services from inside a callback (waiting on the future
with a timeout, never spinning): it sends the planned node updates as ``update_node`` requests,
saves the analyzer's keyframes through ``save_keyframe`` and reads the graph through
``get_scene_graph``. The functions below turn verdicts and write results into the
``AnalyzeInteraction`` answer.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from rclpy.client import Client
from rclpy.node import Node

from mimir.nodes.memory.messages import node_update_to_msg
from mimir.nodes.planner.ros_world import SceneGraphWorld
from mimir.ros.floatfix import coerce_floats
from mimir.ros.time import from_seconds
from mimir_msgs.msg import EvidenceRef, KeyframeLabel
from mimir_msgs.msg import MemoryEvent as MemoryEventMsg
from mimir_msgs.srv import AnalyzeInteraction, GetSceneGraph, SaveKeyframe, UpdateNode
from mimir_planner.reasoning import AnalysisResult, KeyframeRequest, Verdict
from mimir_planner.reasoning.writes import (
    PlannedWrite,
    event_kind,
    outcome_answer,
    unwritten_record,
)

_Response = AnalyzeInteraction.Response
_PHASES = {
    "interaction_before": "before",
    "interaction_after": "after",
    "interaction_peak": "peak",
}


class ServiceCallError(RuntimeError):
    """A memory service did not answer in time or answered with an error."""


class ServiceUnavailableError(ServiceCallError):
    """A memory service is not offered at all (further calls would wait in vain)."""


@dataclass
class SentWrite:
    """A planned write and what sending it did: the events memory logged, or the error."""

    plan: PlannedWrite
    events: list[MemoryEventMsg] = field(default_factory=list)
    error: str = ""


def unwritten_event(verdict: Verdict, subject: str, note: str, stamp: float) -> MemoryEventMsg:
    """A verdict that was not appended to the log (sequence 0), for the caller's answer."""
    msg = MemoryEventMsg(
        event_id="",
        sequence=0,
        kind=event_kind(verdict.claim),
        source="interaction",
        subject_id=subject,
        payload_json=json.dumps(unwritten_record(verdict, note), default=str, sort_keys=True),
        evidence=[EvidenceRef(kind="interaction", id=verdict.interaction_id)]
        if verdict.interaction_id else [],
        verdict=str(verdict.decision),
        verdict_reason=verdict.reason,
    )
    msg.header.stamp = from_seconds(max(stamp, 0.0))
    return msg


def events_of(writes: Iterable[SentWrite], stamp: float) -> list[MemoryEventMsg]:
    """The logged events of every write, or its verdicts as unwritten events."""
    out: list[MemoryEventMsg] = []
    for write in writes:
        if write.events:
            out.extend(write.events)
        else:
            out.extend(unwritten_event(v, write.plan.subject, write.error or write.plan.note,
                                       stamp) for v in write.plan.verdicts)
    return out


def error_response(code: int, message: str, backend: str = "") -> Any:
    """An ``AnalyzeInteraction`` answer carrying only an error."""
    response = _Response()
    response.error_code = code
    response.error_msg = message
    response.backend = backend
    response.task_success = False
    return response


def analysis_response(result: AnalysisResult, writes: list[SentWrite],
                      keyframe_ids: list[str], stamp: float) -> Any:
    """The ``AnalyzeInteraction`` answer of a finished analysis."""
    response = _Response()
    response.task_success, response.failure_reason = outcome_answer(result.harness)
    response.verdicts = events_of(writes, stamp)
    response.keyframe_ids = list(keyframe_ids)
    set_write_errors(response, writes)
    return response


def set_write_errors(response: Any, writes: list[SentWrite]) -> None:
    """Marks an answer MEMORY_WRITE_FAILED while a write failed (and clears it otherwise)."""
    failed = [w for w in writes if w.error]
    if failed:
        response.error_code = _Response.MEMORY_WRITE_FAILED
        response.error_msg = "; ".join(f"{w.plan.subject}: {w.error}" for w in failed)
    elif response.error_code == _Response.MEMORY_WRITE_FAILED:
        response.error_code, response.error_msg = _Response.NONE, ""


def keyframe_request(request: KeyframeRequest, iid: str,
                     max_offset_s: float) -> SaveKeyframe.Request:
    """The ``save_keyframe`` request of one keyframe the analyzer asks for."""
    return SaveKeyframe.Request(
        camera=request.camera,
        stamp=from_seconds(max(request.stamp, 0.0)),
        max_offset_s=float(max_offset_s),
        trigger="interaction",
        action=request.action,
        phase=_PHASES.get(request.role, "peak"),
        interaction_id=iid,
        linked_nodes=list(request.linked_node_ids),
        labels=[KeyframeLabel(text=label, source="analyzer") for label in request.labels
                if label.strip()],
        caption=request.caption,
    )


class MemoryClient:
    """The memory services as the analyzer uses them.

    Args:
        node: the analyzer node (creates the clients in ``group``).
        group: callback group of the clients (reentrant, so answers arrive while a callback
            waits).
        timeout_s: timeout of each call.
        warn: ``warn(counter, text)`` reports a failed write or keyframe.
    """

    def __init__(self, node: Node, group: Any, timeout_s: float,
                 warn: Callable[[str, str], None]) -> None:
        self._node = node
        self._timeout = timeout_s
        self._warn = warn
        self.update_client: Client = node.create_client(UpdateNode, "update_node",
                                                        callback_group=group)
        self.keyframe_client: Client = node.create_client(SaveKeyframe, "save_keyframe",
                                                          callback_group=group)
        self.graph_client: Client = node.create_client(GetSceneGraph, "get_scene_graph",
                                                       callback_group=group)

    def call(self, client: Client, request: Any, what: str) -> Any:
        """Calls a service from inside a callback, waiting on the future with a timeout."""
        timeout = self._timeout
        if not client.service_is_ready() and not client.wait_for_service(timeout_sec=timeout):
            raise ServiceUnavailableError(f"{what} is not available")
        future = client.call_async(coerce_floats(request))
        deadline = time.monotonic() + timeout
        while not future.done():
            if time.monotonic() > deadline:
                client.remove_pending_request(future)
                raise ServiceCallError(f"{what} did not answer within {timeout:.1f} s")
            time.sleep(0.005)
        result = future.result()
        if result is None:
            raise ServiceCallError(f"{what} returned no response")
        return result

    def refresh(self, world: SceneGraphWorld) -> bool:
        """Reads the whole graph through ``get_scene_graph``; False when that failed."""
        log = self._node.get_logger()
        try:
            response = self.call(self.graph_client, GetSceneGraph.Request(), "get_scene_graph")
        except ServiceCallError as err:
            log.warning(f"cannot refresh the scene graph: {err}")
            return False
        if response.error_code != GetSceneGraph.Response.NONE:
            log.warning(f"get_scene_graph failed: {response.error_msg}")
            return False
        world.update(response.graph)
        return True

    def send(self, writes: list[SentWrite]) -> None:
        """Sends every planned update not yet logged; records the events or the error."""
        unavailable = ""
        for write in writes:
            if write.plan.update is None or write.events:
                continue
            if unavailable:
                write.error = unavailable
                continue
            try:
                reply = self.call(self.update_client, node_update_to_msg(write.plan.update),
                                  "update_node")
            except ServiceCallError as err:
                write.error = str(err)
                if isinstance(err, ServiceUnavailableError):
                    unavailable = write.error
            else:
                if reply.error_code == UpdateNode.Response.NONE:
                    write.events, write.error = list(reply.events), ""
                else:
                    write.error = f"update_node error {reply.error_code}: {reply.error_msg}"
            if write.error:
                self._warn("memory_write_failed", f"writing to {write.plan.subject} failed: "
                           f"{write.error}")

    def save_keyframes(self, result: AnalysisResult, iid: str,
                       max_offset_s: float) -> tuple[list[str], dict[str, str]]:
        """Saves the analyzer's keyframes; returns (ids, frame reference -> keyframe id)."""
        ids: list[str] = []
        by_frame: dict[str, str] = {}
        for request in result.keyframes:
            try:
                reply = self.call(self.keyframe_client,
                                  keyframe_request(request, iid, max_offset_s), "save_keyframe")
            except ServiceCallError as err:
                self._warn("keyframe_save_failed", f"keyframe {request.role}: {err}")
                if isinstance(err, ServiceUnavailableError):
                    break
                continue
            if reply.error_code != SaveKeyframe.Response.NONE or not reply.keyframe_id:
                self._warn("keyframe_save_failed",
                           f"keyframe {request.role}: {reply.result} {reply.error_msg}")
                continue
            if reply.keyframe_id not in ids:
                ids.append(reply.keyframe_id)
            by_frame.setdefault(request.frame_ref, reply.keyframe_id)
        return ids, by_frame
