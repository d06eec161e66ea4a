"""Interaction analyzer node: after each primitive, verified memory updates from its evidence.

Buffers, per camera ``<cam>``: ``cameras/<cam>/color/image_raw``, the registered
``cameras/<cam>/depth/image_raw`` (matched to colour frames by stamp) and
``cameras/<cam>/color/camera_info``; the camera pose in ``map_frame`` comes from TF at each
frame's stamp, looked up when a window is analysed (after it ended; a frame slightly newer
than the newest transform waits up to ``tf_wait_s`` for TF to catch up instead of being
dropped). It also buffers the robot contract's gripper (``robot/gripper``, 0 open .. 1 closed)
and achieved and commanded hand poses, the base pose from TF, 3D detections from
``observations`` and the latest latched ``scene_graph``, which backs the
:class:`~mimir.nodes.planner.ros_world.SceneGraphWorld` the reasoning core reads. It reads no
simulator interface: a robot has no fixture joints to report.

``analyze_interaction`` (mimir_msgs/AnalyzeInteraction) and, with ``auto_analyze``, every
ENDED ``interaction_events`` message run one analysis per interaction id: gather the window
(frames of every camera, robot states, detections) with ``window_margin_s``, run
:class:`~mimir_planner.reasoning.InteractionAnalyzer`, save the before/after/peak keyframes
through the keyframe node's ``save_keyframe`` (with the analyzer's labels and caption), then
write every verdict through the scene graph node's ``update_node`` as
:func:`~mimir_planner.reasoning.writes.plan_writes` decides: admitted and corrected updates
change memory, deferred and rejected claims are logged with their verdict. A second
request for an interaction already analysed (or in flight) gets that result. Deferred claims are
re-checked at the next analysis and when new detections fall inside a fixture they concern;
verdicts that change are written then.

Threading: sensor callbacks only store messages (a reentrant group); analyses and re-checks run
in their own mutually exclusive group and hold one work lock; service clients live in a
reentrant group and are awaited by polling their futures with a timeout, never by spinning
inside a callback.
"""

from __future__ import annotations

import json
import sys
import threading
import uuid
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PoseStamped
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.node import Node
from sensor_msgs.msg import CameraInfo, Image
from std_msgs.msg import Float64

from mimir.nodes.planner.analyzer_inputs import WindowRecorder, detections_from_msg
from mimir.nodes.planner.analyzer_memory import (
    MemoryClient,
    SentWrite,
    analysis_response,
    error_response,
    events_of,
    set_write_errors,
)
from mimir.nodes.planner.analyzer_params import AnalyzerNodeConfig
from mimir.nodes.planner.ros_world import SceneGraphWorld
from mimir.paths import ConfigFileNotFoundError, config_file
from mimir.ros import qos
from mimir.ros.diagnostics import NodeCounters
from mimir.ros.floatfix import FloatSafePublisher
from mimir.ros.params import declare_config
from mimir.ros.runtime import run_node
from mimir.ros.tf import ClosesTransforms, make_transform_source
from mimir.ros.time import clock_seconds, to_seconds
from mimir_msgs.msg import InteractionEvent, ObjectObservationArray, SceneGraph
from mimir_msgs.srv import AnalyzeInteraction
from mimir_planner.reasoning import (
    Detection3D,
    Evidence,
    HarnessResult,
    InteractionAnalyzer,
    PrimitiveRecord,
    ReasoningConfig,
    VlmBackend,
    load_reasoning_config,
    make_backend,
    with_model,
)
from mimir_planner.reasoning.config import with_verifiers_off
from mimir_planner.reasoning.errors import (
    AnswerRetriesExhaustedError,
    BackendError,
    EvidenceError,
    ReasoningError,
)
from mimir_planner.reasoning.faults import Corruption, FaultyBackend
from mimir_planner.reasoning.jobs import AnalysisJob, AnalysisJobs
from mimir_planner.reasoning.provenance import evidence_record
from mimir_planner.reasoning.window import recheck_evidence
from mimir_planner.reasoning.writes import WriteContext, plan_writes
from mimir_robot.contract import TOPIC_EE_ACHIEVED, TOPIC_EE_COMMANDED, TOPIC_GRIPPER

__all__ = ["AnalyzerNode", "AnalyzerNodeConfig", "AnalyzerNodeError", "main"]

_Response = AnalyzeInteraction.Response
#: answers of finished analyses kept for repeated requests (oldest forgotten first)
_KEEP_RESULTS = 500
_WARN_KEYS = ("bad_stamp", "bad_image", "bad_depth", "bad_camera_info", "bad_gripper",
              "bad_hand_pose", "bad_observation", "bad_scene_graph",
              "camera_pose_unavailable", "base_pose_unavailable", "keyframe_save_failed",
              "memory_write_failed", "window_truncated")


class AnalyzerNodeError(RuntimeError):
    """The analyzer node cannot start (reasoning config missing or invalid)."""


class AnalyzerNode(ClosesTransforms, Node):
    """Interaction analyzer; see the module docstring for its interfaces.

    Args:
        backend: a ready backend to use instead of the configured one (simulation, tests).
        **kwargs: passed to :class:`rclpy.node.Node` (context, parameter overrides...).
    """

    def __init__(self, backend: VlmBackend | None = None, **kwargs: Any) -> None:
        super().__init__("analyzer", **kwargs)
        self.config = cfg = declare_config(self, AnalyzerNodeConfig)
        self.reasoning = self._load_reasoning()
        self.world = SceneGraphWorld()
        try:
            self.backend = backend or make_backend(self.reasoning)
            if cfg.reasoner_faults > 0.0:
                self.backend = FaultyBackend(self.backend, cfg.reasoner_faults,
                                             cfg.reasoner_fault_seed, self._log_fault)
            self.analyzer = InteractionAnalyzer(self.backend, self.world, self.reasoning)
        except ReasoningError as err:
            raise AnalyzerNodeError(f"cannot build the reasoning backend: {err}") from err
        self.counters = NodeCounters(_WARN_KEYS)
        self._tf = make_transform_source(self, cache_seconds=cfg.buffer_seconds + 10.0)
        self.inputs = WindowRecorder(cfg, self._tf, self._warn, self.counters.add,
                                     lambda: clock_seconds(self))
        self.streams = self.inputs.streams
        self._fresh_detections: list[Detection3D] = []
        self._fresh_lock = threading.Lock()
        self._jobs = AnalysisJobs(_KEEP_RESULTS)
        self._work_lock = threading.Lock()

        sensor_group = ReentrantCallbackGroup()
        analysis_group = MutuallyExclusiveCallbackGroup()
        for cam in cfg.cameras:
            self.create_subscription(
                Image, f"cameras/{cam}/color/image_raw",
                lambda msg, cam=cam: self.inputs.on_color(cam, msg), qos.SENSOR,
                callback_group=sensor_group)
            self.create_subscription(
                Image, f"cameras/{cam}/depth/image_raw",
                lambda msg, cam=cam: self.inputs.on_depth(cam, msg), qos.SENSOR,
                callback_group=sensor_group)
            self.create_subscription(
                CameraInfo, f"cameras/{cam}/color/camera_info",
                lambda msg, cam=cam: self.streams[cam].set_info(msg), qos.SENSOR,
                callback_group=sensor_group)
        self.create_subscription(
            Float64, TOPIC_GRIPPER, lambda msg: self.inputs.on_gripper(
                self.get_clock().now().nanoseconds * 1e-9, msg.data),
            qos.EVENTS, callback_group=sensor_group)
        self.create_subscription(PoseStamped, TOPIC_EE_ACHIEVED, self.inputs.on_hand,
                                 qos.EVENTS, callback_group=sensor_group)
        self.create_subscription(PoseStamped, TOPIC_EE_COMMANDED, self.inputs.on_hand_command,
                                 qos.EVENTS, callback_group=sensor_group)
        self.create_subscription(ObjectObservationArray, "observations", self._on_observations,
                                 qos.EVENTS, callback_group=sensor_group)
        self.create_subscription(SceneGraph, "scene_graph", self._on_scene_graph, qos.LATCHED,
                                 callback_group=sensor_group)
        self.create_subscription(InteractionEvent, "interaction_events", self._on_interaction,
                                 qos.EVENTS, callback_group=analysis_group)
        self.memory = MemoryClient(self, ReentrantCallbackGroup(), cfg.service_timeout_s,
                                   self._warn)
        self.create_service(AnalyzeInteraction, "analyze_interaction", self._on_analyze,
                            callback_group=MutuallyExclusiveCallbackGroup())
        self._diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", qos.EVENTS,
                                               publisher_class=FloatSafePublisher)
        self.create_timer(cfg.recheck_period_s, self._recheck_detections,
                          callback_group=analysis_group)
        self.create_timer(cfg.diagnostics_period_s, self._report, callback_group=sensor_group)
        self.get_logger().info(
            f"interaction analyzer with backend {self.backend.name}, cameras "
            f"{', '.join(cfg.cameras)}, auto_analyze={cfg.auto_analyze}"
        )

    def _load_reasoning(self) -> ReasoningConfig:
        cfg = self.config
        try:
            reasoning = load_reasoning_config(config_file("reasoning.yaml", cfg.reasoning_config))
            return with_verifiers_off(with_model(reasoning, backend=cfg.vlm_backend,
                                                 base_url=cfg.vlm_endpoint, model=cfg.vlm_model),
                                      cfg.verifiers_off)
        except (ConfigFileNotFoundError, ReasoningError) as err:
            raise AnalyzerNodeError(f"cannot load the reasoning config: {err}") from err

    def _log_fault(self, fault: Corruption) -> None:
        """Every reasoner fault goes to the log and, where one is named, to the fault file."""
        self.get_logger().warning(f"reasoner fault on {fault.interaction_id}: {fault.kind} - "
                                  f"{fault.detail}")
        if self.config.fault_log:
            with open(self.config.fault_log, "a", encoding="utf-8") as out:
                out.write(json.dumps(fault.as_dict()) + "\n")

    def _log_evidence(self, record: dict[str, object]) -> None:
        """Appends what one analysis measured to the evidence file, where one is named."""
        if self.config.evidence_log:
            with open(self.config.evidence_log, "a", encoding="utf-8") as out:
                out.write(json.dumps(record) + "\n")

    # ------------------------------------------------------------------ sensor input
    def _warn(self, key: str, text: str) -> None:
        self.counters.add(key)
        self.get_logger().warning(text, throttle_duration_sec=5.0)

    def _on_observations(self, msg: ObjectObservationArray) -> None:
        frame = msg.header.frame_id or self.config.map_frame
        if frame != self.config.map_frame:
            self._warn("bad_observation", f"ignoring observations in frame {frame!r}")
            return
        found, skipped = detections_from_msg(msg)
        if skipped:
            self._warn("bad_observation", f"ignoring {skipped} invalid observation(s)")
        found = [d for d in found if self.inputs.timely(d.stamp, f"observation {d.ref!r} stamp")]
        for det in found:
            self.inputs.detections.add(det.stamp, det)
        with self._fresh_lock:
            self._fresh_detections.extend(found)

    def _on_scene_graph(self, msg: SceneGraph) -> None:
        frame = msg.header.frame_id or self.config.map_frame
        if frame != self.config.map_frame:
            self._warn("bad_scene_graph", f"ignoring a scene graph in frame {frame!r}")
            return
        report = self.world.update(msg)
        if report is not None and (report.skipped_nodes or report.skipped_properties):
            self._warn("bad_scene_graph", f"scene graph revision {msg.revision}: skipped nodes "
                       f"{list(report.skipped_nodes)}, properties "
                       f"{list(report.skipped_properties)}")

    def _report(self) -> None:
        self.counters.set("pending_claims", len(self.analyzer.harness.pending))
        self.counters.publish(self, self._diag_pub, "analyzer")

    def refresh_world(self) -> bool:
        """Reads the whole graph through ``get_scene_graph``; False when that failed."""
        return self.memory.refresh(self.world)

    # --------------------------------------------------------------------- analysis
    def _on_interaction(self, msg: InteractionEvent) -> None:
        if msg.phase != InteractionEvent.PHASE_ENDED or not self.config.auto_analyze:
            return
        response = self.analyze(msg)
        text = (f"interaction {msg.interaction_id} ({msg.primitive} on {msg.target_id or '-'}): "
                f"{'success' if response.task_success else 'failure'}; error "
                f"{response.error_code} {response.error_msg}")
        # one logging call per severity: rclpy refuses a call site whose severity changes
        if response.error_code in (_Response.NONE, _Response.UNKNOWN_TARGET):
            self.get_logger().info(text)
        else:
            self.get_logger().warning(text)

    def _on_analyze(self, request: Any, response: Any) -> Any:
        result = self.analyze(request.interaction)
        for name in ("task_success", "failure_reason", "verdicts", "keyframe_ids", "backend",
                     "error_code", "error_msg"):
            setattr(response, name, getattr(result, name))
        return response

    def analyze(self, event: InteractionEvent) -> Any:
        """Analyses one interaction once; later requests for the same id get that answer.

        A result with an error other than MEMORY_WRITE_FAILED is forgotten, so a later
        request tries again; MEMORY_WRITE_FAILED retries only the failed writes (their update
        ids make the replay safe).
        """
        iid = event.interaction_id or (
            f"{event.primitive}:{event.target_id}:{to_seconds(event.window_end):.3f}")
        job, owner = self._jobs.claim(iid)
        if not owner:
            if not job.done.wait(self.config.analysis_timeout_s):
                return error_response(_Response.MODEL_ERROR,
                                      f"the analysis of {iid} already in flight did not finish "
                                      f"in {self.config.analysis_timeout_s:.0f} s")
            if job.response.error_code == _Response.MEMORY_WRITE_FAILED:
                with self._work_lock:
                    self.memory.send(job.writes)
                    job.response.verdicts = events_of(job.writes, job.stamp)
                    set_write_errors(job.response, job.writes)
            return job.response
        response = error_response(_Response.MODEL_ERROR, "analysis did not complete")
        try:
            response = self._analyze(event, iid, job)
        finally:
            self._jobs.finish(iid, job, response, remember=response.error_code in (
                _Response.NONE, _Response.MEMORY_WRITE_FAILED))
        return response

    def _analyze(self, event: InteractionEvent, iid: str, job: AnalysisJob) -> Any:
        cfg = self.config
        if event.phase != InteractionEvent.PHASE_ENDED:
            return error_response(_Response.NO_FRAMES, f"interaction {iid} has not ended")
        if not event.target_id:
            return error_response(_Response.UNKNOWN_TARGET, "the interaction names no target id")
        start, end = to_seconds(event.window_start), to_seconds(event.window_end)
        try:
            primitive = PrimitiveRecord(
                name=event.primitive, target_id=event.target_id, start_stamp=start,
                end_stamp=end, reported_success=bool(event.success),
                reported_message=event.message, task=event.task,
                reported_outcome=event.outcome)
        except EvidenceError as err:
            return error_response(_Response.NO_FRAMES, f"invalid interaction window: {err}")
        if not self.world.has_node(primitive.target_id):
            self.refresh_world()
            if not self.world.has_node(primitive.target_id):
                return error_response(_Response.UNKNOWN_TARGET,
                                      f"target '{primitive.target_id}' is not in memory")
        self.inputs.wait_for_frames(end)
        lo, hi = start - cfg.window_margin_s, end + cfg.window_margin_s
        window, detections = self.inputs.window(lo, hi)
        if window is None:
            return error_response(_Response.NO_FRAMES,
                                  f"no camera frame between {lo:.3f} and {hi:.3f} s")
        backend = self.backend.name
        with self._work_lock:
            try:
                prepared = self.analyzer.prepare(window, primitive, detections, iid)
            except EvidenceError as err:
                code = (_Response.UNKNOWN_TARGET if not self.world.has_node(primitive.target_id)
                        else _Response.NO_FRAMES)
                return error_response(code, str(err), backend)
            self._log_evidence(evidence_record(prepared.ctx, prepared.window,
                                               prepared.evidence, start, end))
            try:
                vlm_response, answer, attempts = self.analyzer.ask(prepared)
            except AnswerRetriesExhaustedError as err:
                return error_response(_Response.INVALID_ANSWER, f"nothing written: {err}",
                                      backend)
            except (BackendError, ReasoningError) as err:
                return error_response(_Response.MODEL_ERROR, f"{type(err).__name__}: {err}",
                                      backend)
            recheck = self._recheck(prepared.evidence)
            result = self.analyzer.verify(prepared, vlm_response, answer, attempts)
            keyframe_ids, frame_keyframes = self.memory.save_keyframes(
                result, event.interaction_id or result.interaction_id, cfg.keyframe_max_offset_s)
            ctx = WriteContext(
                interaction_id=iid, primitive=primitive.name, task=primitive.task, stamp=end,
                keyframe_ids=tuple(keyframe_ids), frame_keyframes=frame_keyframes,
                detection_refs=frozenset(d.ref for d in detections), known=self.world.has_node,
                event_prefix=f"analyzer:{iid}",
            )
            plans = plan_writes(result.harness, ctx,
                                where=self.analyzer.whereabouts(prepared, detections))
            if recheck is not None:
                plans += plan_writes(recheck, ctx.rechecked(f"analyzer:{iid}:recheck"),
                                     skip_deferred=True)
            job.writes, job.stamp = [SentWrite(p) for p in plans], end
            self.memory.send(job.writes)
        response = analysis_response(result, job.writes, keyframe_ids, end)
        response.backend = vlm_response.backend or backend
        return response

    # ------------------------------------------------------------------- re-checks
    def _recheck(self, evidence: Evidence) -> HarnessResult | None:
        """Re-judges the deferred claims with new evidence (caller holds the work lock)."""
        if not len(self.analyzer.harness.pending):
            return None
        return self.analyzer.harness.recheck(evidence)

    def _recheck_detections(self) -> None:
        """Re-checks deferred claims when new detections fall inside a fixture they concern."""
        with self._fresh_lock:
            fresh, self._fresh_detections = self._fresh_detections, []
        evidence = recheck_evidence(self.analyzer.harness.pending, self.world, fresh,
                                    self.reasoning.percepts.box_margin_m)
        if evidence is None:
            return
        with self._work_lock:
            result = self._recheck(evidence)
            if result is None:
                return
            ctx = WriteContext.recheck(uuid.uuid4().hex[:12],
                                       max(d.stamp for d in evidence.detections),
                                       evidence.refs, self.world.has_node)
            writes = [SentWrite(p) for p in plan_writes(result, ctx, skip_deferred=True)]
            self.memory.send(writes)
        if writes:
            self.get_logger().info(
                f"re-checked deferred claims with {len(evidence.detections)} new detection(s): "
                f"{sum(len(w.events) for w in writes)} event(s) written")


def main(args: list[str] | None = None) -> int:
    """Console script ``analyzer_node``."""
    return run_node(AnalyzerNode, args, threads=6)


if __name__ == "__main__":
    sys.exit(main())
