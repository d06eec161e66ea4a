"""MuJoCo bridge node: runs one kitchen scenario as a robot, behind the robot's own interfaces.

The node owns one :class:`~mimir_sim.sim.KitchenSim`, driven by a
:class:`~mimir_sim.sim_thread.SimThread` (stepping paced to ``real_time_factor``; service
requests run there as jobs). The simulated TidyBot++ is reached exactly as the real one is: the
node hosts its base and arm RPC servers (:class:`~mimir_sim.robot_servers.SimRobotServers`,
``rpc_host``:``base_port`` / ``arm_port``, ``authkey``), and the executor node drives it through
them. The bridge executes no primitive and knows nothing of memory ids.

Published (stamped with simulation time), as the robot's sensors and drivers would:

* ``cameras/<cam>/color/image_raw`` (rgb8), ``cameras/<cam>/depth/image_raw`` (32FC1 metres,
  registered to color, NaN where the camera has no depth), ``cameras/<cam>/color/camera_info``,
  the object segmentation ``cameras/<cam>/segmentation`` and part segmentation
  ``cameras/<cam>/parts`` (handles; backend ``sim_ground_truth``, standing in for SAM3) every
  ``1 / camera_rate`` s, in the frame ``<cam><optical_frame_suffix>``. Images and segmentation
  carry the noise of ``noise_profile`` at ``noise_scale`` (:class:`~mimir_sim.noise.SensorNoise`;
  the judge sees the true views); the robot servers add its odometry drift and hand error;
* ``/tf``: ``base_link -> <cam> optical frame`` only (the camera mounts and the arm's
  kinematics); ``odom -> base_link`` comes from the executor (odometry) and ``map -> odom`` from
  the localization node, which finds the kitchen's wall tags in the pole camera's images;
* ``/clock`` and ``joint_states`` (base, arm and ``gripper``: opening in m, grip force in N)
  every ``1 / state_rate`` s; ``/diagnostics`` (counters).

Served: ``sim/begin_instruction`` and ``sim/judge_instruction`` (judged from simulator state,
the physics-side log of handle grasps and the objects seen in rendered frames; see
:mod:`mimir_sim.instruction_desk`). Putting the robot back at an instruction's start moves the
simulated base there directly (a scenario reset, not a motion).

The node itself runs on wall time; it is the source of ``/clock`` for the other nodes.
"""

from __future__ import annotations

import os

# Offscreen rendering without a display; an explicit MUJOCO_GL in the environment wins.
os.environ.setdefault("MUJOCO_GL", "egl")

import sys
from collections.abc import Callable
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CameraInfo, Image, JointState

from mimir.nodes.perception.messages import segmentation_to_msg
from mimir.nodes.sim import messages as conv
from mimir.nodes.sim.audit import LocalisationAuditSink, MemoryAuditSink
from mimir.ros import qos
from mimir.ros.diagnostics import NodeCounters
from mimir.ros.floatfix import FloatSafePublisher
from mimir.ros.params import declare_config
from mimir.ros.runtime import run_node
from mimir.ros.tf import TransformPublisher
from mimir_msgs.msg import Segmentation
from mimir_msgs.srv import BeginInstruction, JudgeInstruction
from mimir_perception.errors import SegmentationError
from mimir_sim.answer_binding import EntityResolver
from mimir_sim.audit import MemoryAuditor
from mimir_sim.bridge_config import (
    BridgeStartupError,
    SimBridgeConfig,
    build_sim,
    label_map_for,
    noise_for,
    resolve_vocabulary,
)
from mimir_sim.errors import PhysicsUnstableError, RenderError
from mimir_sim.instruction_desk import NONE, UNKNOWN_INSTRUCTION, BeginResult, InstructionDesk
from mimir_sim.noise import SensorNoise
from mimir_sim.physics import save_unstable
from mimir_sim.rendering import Frame
from mimir_sim.robot_servers import SimRobotServers
from mimir_sim.robot_signals import JointStateReader, camera_in_base
from mimir_sim.sim_thread import SimThread, SimThreadStoppedError
from mimir_sim.truth_segmentation import TruthSegmenter

SEGMENTATION_BACKEND = "sim_ground_truth"
_WARN_KEYS = ("render_failed", "segmentation_failed", "job_failed", "sim_thread_failed")
_STOPPED = (BridgeStartupError, SimThreadStoppedError)


class SimBridgeNode(Node):
    """Runs a kitchen scenario in MuJoCo and exposes it like the real robot."""

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
        self.noise = noise_for(cfg)
        self.sim = build_sim(cfg)
        self._sensor_noise = SensorNoise(self.noise, self.sim.scene.seed)
        self.resolver = EntityResolver(self.sim, cfg.target_tolerance, label_map)
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
        self._part_pubs = per_camera(Segmentation, "parts")
        self._clock_pub = pub(Clock, "/clock", qos.EVENTS)
        self._joint_pub = pub(JointState, "joint_states", qos.EVENTS)
        self._diag_pub = pub(DiagnosticArray, "/diagnostics", qos.EVENTS)
        self._tf = TransformPublisher(self)

        self._thread = SimThread(
            self.sim,
            cfg.step_chunk,
            cfg.real_time_factor,
            setup=self._start_publishing,
            on_failure=self._on_thread_failure,
            on_job_failed=lambda _err: self.counters.add("job_failed"),
        )
        try:
            self.robot = SimRobotServers(self.sim, self._thread.lock, cfg.authkey.encode(),
                                         host=cfg.rpc_host, base_port=cfg.base_port,
                                         arm_port=cfg.arm_port, noise=self.noise,
                                         noise_seed=self.sim.scene.seed)
        except OSError as err:
            raise BridgeStartupError(
                f"cannot serve the robot on {cfg.rpc_host}:{cfg.base_port}/{cfg.arm_port}: "
                f"{err}") from err
        self.instructions = InstructionDesk(self.sim, self.resolver, cfg.discover_min_pixels,
                                            self.robot.drives.teleport_base)
        group = ReentrantCallbackGroup()
        self.create_service(
            BeginInstruction, "sim/begin_instruction", self._on_begin, callback_group=group
        )
        self.create_service(
            JudgeInstruction, "sim/judge_instruction", self._on_judge, callback_group=group
        )
        if cfg.audit_file:
            MemoryAuditSink(self, MemoryAuditor(self.resolver), self._thread.submit,
                            cfg.audit_file, self._warn)
        self.localisation: LocalisationAuditSink | None = None
        if cfg.localisation_file:
            body = self.sim.body
            self.localisation = LocalisationAuditSink(
                self, lambda: (body.base_pose(), body.base_speed(), self.sim.time),
                self._thread.submit,
                cfg.localisation_file, (cfg.map_frame, cfg.base_frame))
        self.create_timer(cfg.diagnostics_period, self._report)
        self._thread.start()
        scene = self.sim.scene
        base, arm = self.robot.base_address, self.robot.arm_address
        self.get_logger().info(
            f"simulating {scene.scenario.name!r} (seed {scene.seed}, "
            f"{len(scene.fixtures)} fixtures, {len(scene.objects)} objects); noise profile "
            f"{self.noise.name!r} at scale {self.noise.scale:g}; "
            f"cameras {', '.join(cams)} at {cfg.camera_rate} Hz, "
            f"{cfg.image_width}x{cfg.image_height}; real-time factor "
            f"{cfg.real_time_factor or 'unlimited'}; robot servers at {base[0]}:{base[1]} (base) "
            f"and :{arm[1]} (arm)"
        )

    # ------------------------------------------------------------------ simulation thread

    def _start_publishing(self) -> None:
        """In the simulation thread: step listeners, first state and frames."""
        cfg = self.config
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
        if isinstance(err, PhysicsUnstableError) and self.config.unstable_state_file:
            try:
                saved = save_unstable(err, self.sim.model, self.config.unstable_state_file)
            except (OSError, ValueError) as save_err:
                self.get_logger().error(f"the blow-up could not be saved: {save_err}")
            else:
                self.get_logger().error(f"blow-up saved for a replay: {saved}")
        return True

    # ------------------------------------------------------------------ step listeners

    def _publish_tf(self, stamp: float) -> None:
        if stamp <= self._last_tf:
            return
        self._last_tf = stamp
        cfg, sim = self.config, self.sim
        cams = {self._optical[c]: camera_in_base(sim, c) for c in cfg.cameras}
        self._tf.send(conv.sim_transforms(stamp, cams, cfg.base_frame))

    def _on_state(self, stamp: float) -> None:
        """State listener: /clock, /tf and joint_states."""
        self._clock_pub.publish(Clock(clock=conv.time_msg(stamp)))
        self._publish_tf(stamp)
        joints = self._joints
        msg = conv.joint_state_msg(stamp, self.config.base_frame, joints.names, joints.read())
        self._joint_pub.publish(msg)
        self.counters.add("state.published")
        self._thread.pace(stamp)

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
        """Publish what the camera delivers (the noisy view) and record the true one for the
        judge."""
        header = conv.header(frame.stamp, self._optical[cam])
        color, depth, info = conv.frame_messages(self._sensor_noise.view(frame), header)
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
            self._publish_segmentation(cam, frame, header)
        self.counters.add(f"{cam}.frames")

    def _publish_segmentation(self, cam: str, frame: Frame, header: Any) -> None:
        noise, least = self._sensor_noise, self.config.min_segment_pixels
        try:
            objects = self._segmenter.segment(frame, cam)
            parts = self._segmenter.segment_parts(frame, cam)
            if objects is not None:
                objects = noise.segmentation(objects, frame, min_pixels=least)
            if parts is not None:
                parts = noise.segmentation(parts, frame, min_pixels=max(1, least // 4))
        except SegmentationError as err:
            self._warn(f"{cam}.segmentation_failed", f"{cam}: segmentation failed: {err}")
            return
        if objects is not None:
            self._seg_pubs[cam].publish(
                segmentation_to_msg(objects, header, SEGMENTATION_BACKEND, cam))
        if parts is not None:
            self._part_pubs[cam].publish(
                segmentation_to_msg(parts, header, SEGMENTATION_BACKEND, cam))

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
        result = self._serve(lambda: self.instructions.judge(request.index, entities))
        if result.code == NONE:
            self.counters.add("instructions.judged")
        return conv.judge_response(response, result)

    # ------------------------------------------------------------------ diagnostics, shutdown

    def _report(self) -> None:
        self.counters.set("sim_time_ms", round(self.sim.time * 1000))
        for typeid, count in self.robot.created.items():
            self.counters.set(f"controllers.{typeid}", count)
        self.counters.publish(self, self._diag_pub, self.sim.scene.scenario.name)

    def destroy_node(self) -> None:
        """Stop the robot servers and the simulation thread (it releases the renderers).

        A node whose constructor failed may have neither.
        """
        robot = getattr(self, "robot", None)
        if robot is not None:
            robot.stop()
        localisation = getattr(self, "localisation", None)
        if localisation is not None:
            try:
                localisation.write()
            except OSError as err:
                self.get_logger().error(f"cannot write the localisation audit: {err}")
            localisation.close()
        thread = getattr(self, "_thread", None)
        if thread is not None:
            thread.stop(timeout=60.0)
        super().destroy_node()


def main(args: list[str] | None = None) -> int:
    """Run the sim bridge node."""
    return run_node(SimBridgeNode, args, threads=4)


if __name__ == "__main__":
    sys.exit(main())
