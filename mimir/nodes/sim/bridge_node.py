"""MuJoCo bridge node: runs one kitchen scenario and exposes it like the real robot.

The node owns one :class:`~mimir_sim.sim.KitchenSim`, driven by a
:class:`~mimir_sim.sim_thread.SimThread` (idle stepping paced to ``real_time_factor``; actions and
service requests run there as jobs). Publishing happens in the simulator's step listeners, so it
goes on while a primitive's controller steps the physics. The logic lives in ``mimir_sim``
(:mod:`~mimir_sim.execution`, :mod:`~mimir_sim.instruction_desk`,
:mod:`~mimir_sim.truth_segmentation`); this node converts (:mod:`mimir.nodes.sim.messages`),
publishes and wires.

Published (stamped with simulation time):

* ``cameras/<cam>/color/image_raw`` (rgb8), ``cameras/<cam>/depth/image_raw`` (32FC1 metres,
  registered to color), ``cameras/<cam>/color/camera_info`` and ground-truth
  ``cameras/<cam>/segmentation`` (backend ``sim_ground_truth``) every ``1 / camera_rate`` s, in
  the frame ``<cam><optical_frame_suffix>``;
* ``/tf``: ``odom -> base_link`` (ground truth) and ``base_link -> <cam> optical frame``;
  ``/tf_static``: ``map -> odom`` (identity);
* ``/clock`` and ``joint_states`` (base, arm and ``gripper``: opening in m, grip force in N) every
  ``1 / state_rate`` s;
* ``target_state`` while ``open``, ``close`` or ``inspect`` runs on a fixture with a door or
  drawer: one entry named by the goal's target id, position = door angle (rad) or drawer travel
  (m), 0 = closed; at the start, every ``1 / state_rate`` s and at the end;
* ``interaction_events`` (STARTED / ENDED of each primitive) and ``/diagnostics`` (counters).

Served: action ``execute_primitive`` (through :class:`~mimir_sim.embodiment.SimEmbodiment`;
feedback phase ``resolve``, then ``drive``/``grasp``/``pull``/``arm`` read from the robot's
state, then ``done``; only goals still waiting can be canceled), services
``sim/begin_instruction`` and ``sim/judge_instruction`` (judged from simulator state, the
execution log and the objects seen in rendered frames; see :mod:`mimir_sim.instruction_desk`).

Localisation is ground truth: the MuJoCo world frame is ``map`` and ``odom`` coincides with it.
The node itself runs on wall time; it is the source of ``/clock`` for the other nodes.
"""

from __future__ import annotations

import os

# Offscreen rendering without a display; an explicit MUJOCO_GL in the environment wins.
os.environ.setdefault("MUJOCO_GL", "egl")

import sys
from collections.abc import Callable
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CameraInfo, Image, JointState

from mimir.nodes.perception.messages import segmentation_to_msg
from mimir.nodes.sim import messages as conv
from mimir.ros import qos
from mimir.ros.diagnostics import NodeCounters
from mimir.ros.floatfix import FloatSafePublisher
from mimir.ros.params import declare_config
from mimir.ros.runtime import run_node
from mimir.ros.tf import TransformPublisher, matrix_to_transform
from mimir_msgs.action import ExecutePrimitive
from mimir_msgs.msg import InteractionEvent, Segmentation
from mimir_msgs.srv import BeginInstruction, JudgeInstruction
from mimir_perception.errors import SegmentationError
from mimir_sim.bridge_config import (
    BridgeStartupError,
    SimBridgeConfig,
    build_sim,
    label_map_for,
    resolve_vocabulary,
)
from mimir_sim.embodiment import EmbodimentError, PrimitiveRequest, SimEmbodiment
from mimir_sim.errors import RenderError
from mimir_sim.execution import ActivePrimitive, ExecutionDesk, describe_run
from mimir_sim.instruction_desk import NONE, UNKNOWN_INSTRUCTION, BeginResult, InstructionDesk
from mimir_sim.rendering import Frame
from mimir_sim.robot_signals import JointStateReader, base_pose_matrix, camera_in_base
from mimir_sim.sim_thread import SimThread, SimThreadStoppedError
from mimir_sim.truth_segmentation import TruthSegmenter

SEGMENTATION_BACKEND = "sim_ground_truth"
_WARN_KEYS = ("render_failed", "segmentation_failed", "rejected", "job_failed", "sim_thread_failed")
_STOPPED = (BridgeStartupError, SimThreadStoppedError)


class SimBridgeNode(Node):
    """Runs a kitchen scenario in MuJoCo and exposes sensors, state and primitives over ROS."""

    def __init__(self, **kwargs: Any) -> None:
        """Create the node; raises :class:`BridgeStartupError` on bad parameters or scenario.

        Args:
            **kwargs: passed to :class:`rclpy.node.Node` (``context``, ``parameter_overrides``).
        """
        super().__init__("sim_bridge", **kwargs)
        try:
            self.config = declare_config(self, SimBridgeConfig)
        except ValueError as err:
            raise BridgeStartupError(f"invalid sim_bridge parameters: {err}") from err
        cfg = self.config
        label_map = label_map_for(resolve_vocabulary(cfg.vocabulary))
        self.sim = build_sim(cfg)
        self.embodiment = SimEmbodiment(self.sim, cfg.target_tolerance, label_map)
        self.execution = ExecutionDesk(self.sim, self.embodiment)
        self.instructions = InstructionDesk(self.sim, self.embodiment, cfg.discover_min_pixels)
        self._joints = JointStateReader(self.sim)
        self._segmenter = TruthSegmenter(self.sim.scene.entities, label_map, cfg.min_segment_pixels)
        self.counters = NodeCounters(_WARN_KEYS)
        self._last_tf = -1.0
        self._optical = {cam: cam + cfg.optical_frame_suffix for cam in cfg.cameras}

        def pub(kind: Any, topic: str, profile: Any) -> Any:
            return self.create_publisher(kind, topic, profile, publisher_class=FloatSafePublisher)

        cams = cfg.cameras

        def per_camera(kind: Any, topic: str) -> dict[str, Any]:
            return {c: pub(kind, f"cameras/{c}/{topic}", qos.SENSOR) for c in cams}

        self._color_pubs = per_camera(Image, "color/image_raw")
        self._depth_pubs = per_camera(Image, "depth/image_raw")
        self._info_pubs = per_camera(CameraInfo, "color/camera_info")
        self._seg_pubs = per_camera(Segmentation, "segmentation")
        self._clock_pub = pub(Clock, "/clock", qos.EVENTS)
        self._joint_pub = pub(JointState, "joint_states", qos.EVENTS)
        self._target_state_pub = pub(JointState, "target_state", qos.EVENTS)
        self._events_pub = pub(InteractionEvent, "interaction_events", qos.EVENTS)
        self._diag_pub = pub(DiagnosticArray, "/diagnostics", qos.EVENTS)
        self._tf = TransformPublisher(self)
        self._tf_static = TransformPublisher(self, static=True)

        group = ReentrantCallbackGroup()
        self._action = ActionServer(
            self,
            ExecutePrimitive,
            "execute_primitive",
            execute_callback=self._execute,
            goal_callback=lambda _goal: GoalResponse.ACCEPT,
            cancel_callback=self._on_cancel,
            callback_group=group,
        )
        self.create_service(
            BeginInstruction, "sim/begin_instruction", self._on_begin, callback_group=group
        )
        self.create_service(
            JudgeInstruction, "sim/judge_instruction", self._on_judge, callback_group=group
        )
        self.create_timer(cfg.diagnostics_period, self._report)

        self._thread = SimThread(
            self.sim,
            cfg.step_chunk,
            cfg.real_time_factor,
            setup=self._start_publishing,
            on_failure=self._on_thread_failure,
            on_job_failed=lambda _err: self.counters.add("job_failed"),
        )
        self._thread.start()
        scene = self.sim.scene
        self.get_logger().info(
            f"simulating {scene.scenario.name!r} (seed {scene.seed}, "
            f"{len(scene.fixtures)} fixtures, {len(scene.objects)} objects); "
            f"cameras {', '.join(cams)} at {cfg.camera_rate} Hz, "
            f"{cfg.image_width}x{cfg.image_height}; real-time factor "
            f"{cfg.real_time_factor or 'unlimited'}"
        )

    # ------------------------------------------------------------------ simulation thread

    def _start_publishing(self) -> None:
        """In the simulation thread: static TF, step listeners, first state and frames."""
        cfg = self.config
        self._tf_static.send(
            [matrix_to_transform(np.eye(4), cfg.map_frame, cfg.odom_frame, self.sim.time)]
        )
        self.sim.add_step_listener(self._on_state, 1.0 / cfg.state_rate)
        self.sim.add_step_listener(self._on_cameras, 1.0 / cfg.camera_rate)
        self._on_state(self.sim.time)
        self._on_cameras(self.sim.time)

    def _on_thread_failure(self, err: Exception) -> bool:
        if self._thread.stopping or not self.context.ok():
            # shutting down (Ctrl-C shuts the context down before destroy_node stops the
            # thread): a publish into the closed context is the end, not a failure
            return False
        # nothing can catch it above this thread: log it loudly; jobs then fail with a reason
        self.counters.add("sim_thread_failed")
        self.get_logger().error(f"simulation thread stopped: {type(err).__name__}: {err}")
        return True

    # ------------------------------------------------------------------ step listeners

    def _publish_tf(self, stamp: float) -> None:
        if stamp <= self._last_tf:
            return
        self._last_tf = stamp
        cfg, sim = self.config, self.sim
        cams = {self._optical[c]: camera_in_base(sim, c) for c in cfg.cameras}
        frames = (cfg.odom_frame, cfg.base_frame)
        transforms = conv.robot_transforms(stamp, base_pose_matrix(sim), cams, frames)
        self._tf.send(transforms)

    def _on_state(self, stamp: float) -> None:
        """State listener: /clock, /tf, joint_states and action feedback."""
        self._clock_pub.publish(Clock(clock=conv.time_msg(stamp)))
        self._publish_tf(stamp)
        joints = self._joints
        msg = conv.joint_state_msg(stamp, self.config.base_frame, joints.names, joints.read())
        self._joint_pub.publish(msg)
        self.counters.add("state.published")
        self._publish_target_state(self.execution.active, stamp)
        due = self.execution.feedback_due(stamp)
        if due is not None:
            phase = self.execution.phase(due.primitive)
            feedback = ExecutePrimitive.Feedback(phase=phase, progress=0.5)
            due.token.publish_feedback(feedback)  # type: ignore[attr-defined]
        self._thread.pace(stamp)

    def _publish_target_state(self, active: ActivePrimitive | None, stamp: float) -> None:
        """Joint state of the fixture the running primitive acts on (nothing for others)."""
        state = self.execution.target_state(active)
        if state is None:
            return
        self._target_state_pub.publish(conv.target_state_msg(state, stamp, self.config.map_frame))
        self.counters.add("target_state.published")

    def _on_cameras(self, stamp: float) -> None:
        """Camera listener: render and publish every configured camera."""
        self._publish_tf(stamp)
        cfg = self.config
        for cam in cfg.cameras:
            try:
                frame = self.sim.render(
                    cam,
                    cfg.image_width,
                    cfg.image_height,
                    segmentation=cfg.segmentation or cfg.discover_min_pixels > 0,
                )
            except RenderError as err:
                self._warn(f"{cam}.render_failed", f"{cam}: render failed: {err}")
                continue
            self._publish_frame(cam, frame)

    def _warn(self, counter: str, message: str) -> None:
        self.counters.add(counter)
        self.get_logger().warning(message, throttle_duration_sec=5.0)

    def _publish_frame(self, cam: str, frame: Frame) -> None:
        header = conv.header(frame.stamp, self._optical[cam])
        color, depth, info = conv.frame_messages(frame, header)
        if color is not None:
            self._color_pubs[cam].publish(color)
        if depth is not None:
            self._depth_pubs[cam].publish(depth)
        self._info_pubs[cam].publish(info)
        try:
            self.instructions.record_frame(frame)
        except ValueError as err:
            self._warn(f"{cam}.segmentation_failed", f"{cam}: visibility not recorded: {err}")
        if self.config.segmentation:
            try:
                result = self._segmenter.segment(frame, cam)
            except SegmentationError as err:
                self._warn(f"{cam}.segmentation_failed", f"{cam}: segmentation failed: {err}")
            else:
                if result is not None:
                    msg = segmentation_to_msg(result, header, SEGMENTATION_BACKEND, cam)
                    self._seg_pubs[cam].publish(msg)
        self.counters.add(f"{cam}.frames")

    # ------------------------------------------------------------------ execute_primitive

    def _execute(self, goal_handle: ServerGoalHandle) -> ExecutePrimitive.Result:
        cfg = self.config
        try:
            request = conv.goal_to_request(goal_handle.request, (cfg.map_frame, cfg.odom_frame))
            result = self._thread.submit(lambda: self._run_primitive(goal_handle, request))
        except conv.RequestError as err:
            result = self._refusal(err.code, err.message)
        except _STOPPED as err:
            result = self._refusal(ExecutePrimitive.Result.EXECUTION_FAILED, str(err))
        if result.error_code == ExecutePrimitive.Result.CANCELED:
            goal_handle.canceled()
        elif result.success:
            goal_handle.succeed()
        else:
            goal_handle.abort()
        return result

    def _on_cancel(self, goal_handle: ServerGoalHandle) -> CancelResponse:
        # a controller cannot stop half-way (the door would be left in the hand): only goals
        # still waiting for the simulation thread can be canceled
        if self.execution.is_running(goal_handle):
            return CancelResponse.REJECT
        return CancelResponse.ACCEPT

    def _refusal(self, code: int, message: str) -> ExecutePrimitive.Result:
        self.counters.add(f"rejected.{conv.result_code_name(code)}")
        self.get_logger().warning(f"primitive refused: {message}", throttle_duration_sec=1.0)
        return conv.refusal_result(code, message)

    def _run_primitive(
        self, goal_handle: ServerGoalHandle, request: PrimitiveRequest
    ) -> ExecutePrimitive.Result:
        """Runs in the simulation thread: check, announce, execute, announce, report."""
        if goal_handle.is_cancel_requested:
            return conv.canceled_result()
        goal_handle.publish_feedback(ExecutePrimitive.Feedback(phase="resolve", progress=0.0))
        try:
            prepared = self.embodiment.prepare(request)
        except EmbodimentError as err:
            return self._refusal(conv.result_code(err.code), str(err))
        goal = goal_handle.request
        active = self.execution.begin(goal_handle, request, prepared)
        window, frame = (active.interaction_id, active.start), self.config.map_frame
        started = conv.interaction_event(goal, window, InteractionEvent.PHASE_STARTED, None, frame)
        self._events_pub.publish(started)
        self.counters.add("primitives.started")
        self._publish_target_state(active, active.start)
        try:
            outcome = self.execution.run(active)
            self._publish_target_state(active, self.sim.time)
        finally:
            self.execution.finish()
        ended = conv.interaction_event(goal, window, InteractionEvent.PHASE_ENDED, outcome, frame)
        self._events_pub.publish(ended)
        self.counters.add("primitives.succeeded" if outcome.success else "primitives.failed")
        goal_handle.publish_feedback(ExecutePrimitive.Feedback(phase="done", progress=1.0))
        self.get_logger().info(describe_run(request, prepared, outcome))
        return conv.outcome_result(outcome, *window)

    # ------------------------------------------------------------------ instructions

    def _serve(self, run: Callable[[], BeginResult]) -> BeginResult:
        """Run an instruction request in the simulation thread (a stopped thread refuses it)."""
        try:
            result: BeginResult = self._thread.submit(run)
        except _STOPPED as err:
            return BeginResult(UNKNOWN_INSTRUCTION, str(err))
        return result

    def _on_begin(
        self, request: BeginInstruction.Request, response: BeginInstruction.Response
    ) -> BeginInstruction.Response:
        desk = self.instructions
        result = self._serve(
            lambda: desk.begin(request.index, request.instruction, request.reset_robot)
        )
        if result.code == NONE:
            self.counters.add("instructions.begun")
        return conv.begin_response(response, result)

    def _on_judge(
        self, request: JudgeInstruction.Request, response: JudgeInstruction.Response
    ) -> JudgeInstruction.Response:
        entities = conv.answer_entities(request.answer_entities)
        answer = list(request.answer)
        result = self._serve(lambda: self.instructions.judge(request.index, answer, entities))
        if result.code == NONE:
            self.counters.add("instructions.judged")
        return conv.judge_response(response, result)

    # ------------------------------------------------------------------ diagnostics, shutdown

    def _report(self) -> None:
        self.counters.set("sim_time_ms", round(self.sim.time * 1000))
        self.counters.publish(self, self._diag_pub, self.sim.scene.scenario.name)

    def destroy_node(self) -> None:
        """Stop the simulation thread (it releases the renderers), then destroy the node.

        A node whose constructor failed may have no thread.
        """
        thread = getattr(self, "_thread", None)
        if thread is not None:
            thread.stop(timeout=60.0)
        super().destroy_node()


def main(args: list[str] | None = None) -> int:
    """Run the sim bridge node."""
    return run_node(SimBridgeNode, args, threads=4)


if __name__ == "__main__":
    sys.exit(main())
