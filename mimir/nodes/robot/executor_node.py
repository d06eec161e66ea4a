"""Executor node: runs primitives on the robot (real or simulated) through its RPC servers.

The node is the robot side of the graph. It connects to the TidyBot++ base and arm servers with
:class:`~mimir_robot.rpc.RobotLink`, publishes the robot signal contract
(:mod:`mimir_robot.contract`) at ``state_rate_hz``, and serves ``execute_primitive``: each goal is
checked, announced on ``interaction_events`` (STARTED), turned into geometry from the current
camera views (:mod:`mimir_robot.targeting`), run by :class:`~mimir_robot.executor.Executor` as
streamed targets, and announced again (ENDED) with the outcome the robot's signals give.

Published: ``/tf`` (``odom -> base_link``), ``odom``, ``robot/ee_pose/commanded``,
``robot/ee_pose/achieved``, ``robot/gripper``, ``interaction_events``, ``/diagnostics``.
Subscribed, per pointing camera: depth, camera info, ``segmentation`` and ``parts``.
Served: action ``execute_primitive`` (one goal at a time; cancel holds the pose), service
``robot/reset`` (std_srvs/Trigger: resets base and arm; the arm moves).

The node never resets the robot by itself unless ``reset_on_start`` is set (simulation).
"""

from __future__ import annotations

import json
import math
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, TextIO

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PoseStamped
from nav_msgs.msg import Odometry
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.node import Node
from std_msgs.msg import Float64
from std_srvs.srv import Trigger

from mimir.nodes.robot import messages as conv
from mimir.nodes.robot.executor_params import ExecutorNodeConfig
from mimir.nodes.robot.views import CameraViews
from mimir.ros import qos
from mimir.ros.diagnostics import NodeCounters
from mimir.ros.floatfix import FloatSafePublisher
from mimir.ros.params import ConfigError, declare_config
from mimir.ros.runtime import run_node
from mimir.ros.tf import ClosesTransforms, TransformPublisher, make_transform_source
from mimir.ros.time import ClockPacer
from mimir.transforms import TransformError
from mimir_msgs.action import ExecutePrimitive
from mimir_msgs.msg import InteractionEvent
from mimir_robot import contract as c
from mimir_robot.executor import Executor, Outcome
from mimir_robot.motion import Motion, Sample
from mimir_robot.primitive_plans import REFUSALS, PlanContext, plan_and_run, refused
from mimir_robot.profile import ProfileError
from mimir_robot.requests import RequestError
from mimir_robot.rpc import (
    Backoff,
    RobotLink,
    RobotLinkError,
    RobotLinkLostError,
    RobotUnreachableError,
)
from mimir_robot.tag_search import search_for_tags

_WARN_KEYS = ("link_error", "rejected", "bad_view", "no_pose", "no_camera_info")
#: What fails a primitive with its reason instead of failing the goal: the planning refusals
#: and a server call that went wrong.
_REFUSALS: tuple[type[Exception], ...] = (*REFUSALS, RobotLinkError)
#: Seconds between looks at TF while the tag search waits for a map pose.
FIX_POLL_S = 0.05


class ExecutorStartupError(RuntimeError):
    """Bad parameters; the node does not start."""


class ExecutorNode(ClosesTransforms, Node):
    """Serves primitives on the robot and publishes the robot signal contract."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("executor", **kwargs)
        try:
            self.config = declare_config(self, ExecutorNodeConfig)
        except (ConfigError, ProfileError) as err:
            raise ExecutorStartupError(f"invalid executor parameters: {err}") from err
        cfg = self.config
        self.profile = cfg.profile()
        self.counters = NodeCounters(_WARN_KEYS)
        self.link = RobotLink(cfg.host, cfg.authkey.encode(), base_port=cfg.base_port,
                              arm_port=cfg.arm_port, connect_timeout_s=cfg.connect_timeout_s,
                              call_timeout_s=cfg.call_timeout_s,
                              reset_timeout_s=cfg.reset_timeout_s,
                              backoff=Backoff(initial_s=0.2, max_s=5.0))
        self.cancel = threading.Event()
        # streamed periods are periods of the node's clock: simulation time under use_sim_time
        pacer = ClockPacer(self, cancel=self.cancel, stall_s=cfg.clock_stall_s)
        self.motion = Motion(self.link, self.profile, cancel=self.cancel, clock=pacer.now,
                             sleep=pacer.sleep, on_sample=self._on_sample)
        self.runner = Executor(self.motion, on_phase=self._on_phase)
        self._busy = threading.Lock()
        self._goal: ServerGoalHandle | None = None
        self._ready = threading.Event()
        self._trace: TextIO | None = None
        self._trace_lock = threading.Lock()
        if cfg.trace_file:
            Path(cfg.trace_file).parent.mkdir(parents=True, exist_ok=True)
            self._trace = open(cfg.trace_file, "a", encoding="utf-8")  # noqa: SIM115
        self._last_base: tuple[float, tuple[float, float, float]] | None = None

        def pub(kind: Any, topic: str, profile: Any = qos.EVENTS) -> Any:
            return self.create_publisher(kind, topic, profile, publisher_class=FloatSafePublisher)

        self._odom_pub = pub(Odometry, c.TOPIC_ODOM)
        self._cmd_pub = pub(PoseStamped, c.TOPIC_EE_COMMANDED)
        self._ee_pub = pub(PoseStamped, c.TOPIC_EE_ACHIEVED)
        self._grip_pub = pub(Float64, c.TOPIC_GRIPPER)
        self._events_pub = pub(InteractionEvent, c.TOPIC_INTERACTION_EVENTS)
        self._diag_pub = pub(DiagnosticArray, c.TOPIC_DIAGNOSTICS)
        self._tf_pub = TransformPublisher(self)
        self._tf = make_transform_source(self)
        sensors = ReentrantCallbackGroup()
        self.views = CameraViews(
            self, tuple(cfg.pointing_cameras), tf=self._tf,
            frames=(cfg.map_frame, cfg.base_frame), optical_suffix=cfg.optical_frame_suffix,
            warn=self._warn, group=sensors)
        work = ReentrantCallbackGroup()
        self._action = ActionServer(
            self, ExecutePrimitive, "execute_primitive", execute_callback=self._execute,
            goal_callback=self._on_goal, cancel_callback=self._on_cancel, callback_group=work)
        self.create_service(Trigger, "robot/reset", self._on_reset, callback_group=work)
        self.create_timer(1.0 / cfg.state_rate_hz, self._publish_state,
                          callback_group=MutuallyExclusiveCallbackGroup())
        self.create_timer(cfg.diagnostics_period, self._report)
        self._connector = threading.Thread(target=self._connect, name="executor-connect",
                                           daemon=True)
        self._connector.start()
        self.get_logger().info(
            f"executor for the robot at {cfg.host}:{cfg.base_port}/{cfg.arm_port}; pointing "
            f"cameras {', '.join(cfg.pointing_cameras)}")

    # ------------------------------------------------------------------ connection
    def _connect(self) -> None:
        """Connect (retrying with backoff), then reset when configured to."""
        while self.context.ok():
            try:
                self.link.connect(timeout_s=5.0)
                if self.config.reset_on_start:
                    self.link.reset_base()
                    self.link.reset_arm()
                    self._ready.set()
                self.get_logger().info("robot link up" + (
                    " and reset" if self.config.reset_on_start else
                    "; call robot/reset when the arm may move (primitives wait for it)"))
                if self._ready.is_set():
                    self._start_tag_search()
                return
            except RobotLinkError as err:
                self._warn("link_error", f"robot link: {err}")

    def _on_reset(self, _req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        if not self._busy.acquire(blocking=False):
            res.success, res.message = False, "a primitive is running; cancel it first"
            return res
        try:
            self.link.reset_base()
            self.link.reset_arm()
            self.runner.holding = False
            # the reset moved the arm and opened the gripper behind the motion's back: command
            # what the robot reports now, so no later target starts from the pre-reset pose
            self.motion.gripper_command = 0.0
            self.motion.hold()
            self._ready.set()
            res.success, res.message = True, "base odometry zeroed, arm retracted, gripper open"
        except RobotLinkError as err:
            res.success, res.message = False, f"reset failed: {err}"
        finally:
            self._busy.release()
        if res.success:
            self._start_tag_search()
        return res

    # ------------------------------------------------------------------ localising at start
    def _start_tag_search(self) -> None:
        """With ``search_tags_on_start``, look for a tag in a thread of its own (primitives
        are refused as busy meanwhile)."""
        if self.config.search_tags_on_start:
            threading.Thread(target=self._search_tags, name="executor-tag-search",
                             daemon=True).start()

    def _search_tags(self) -> None:
        cfg = self.config
        if not self._busy.acquire(blocking=False):
            self.get_logger().warning("tag search skipped: a primitive is running")
            return
        try:
            result = search_for_tags(self.runner, cfg.tag_search_turns, self._wait_for_fix,
                                     cfg.tag_search_dwell_s)
        except RobotLinkError as err:
            self._warn("link_error", f"tag search stopped: {err}")
            return
        finally:
            self._busy.release()
        self.counters.set("tag_search.found", int(result.found))
        log = self.get_logger().info if result.found else self.get_logger().warning
        log(f"tag search: {result.describe()}")

    def _wait_for_fix(self, seconds: float) -> bool:
        """Whether map -> odom is on TF within ``seconds`` of the node's clock."""
        cfg = self.config
        deadline = self._now() + seconds
        while self.context.ok():
            try:
                self._tf.lookup(cfg.odom_frame, cfg.map_frame, 0.0)
                return True
            except TransformError:
                pass
            if self._now() >= deadline:
                return False
            time.sleep(FIX_POLL_S)
        return False

    # ------------------------------------------------------------------ contract signals
    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def _publish_state(self) -> None:
        if not self._ready.is_set():
            return
        cfg, now = self.config, self._now()
        try:
            base = self.link.base_state()
            arm = self.link.arm_state()
        except RobotLinkError as err:
            self._warn("link_error", f"robot state: {err}")
            return
        pose = (base.x, base.y, base.theta)
        vel = (0.0, 0.0, 0.0)
        if self._last_base is not None and now > self._last_base[0]:
            dt = now - self._last_base[0]
            prev = self._last_base[1]
            dth = math.atan2(math.sin(pose[2] - prev[2]), math.cos(pose[2] - prev[2]))
            vel = ((pose[0] - prev[0]) / dt, (pose[1] - prev[1]) / dt, dth / dt)
        self._last_base = (now, pose)
        frames = (cfg.odom_frame, cfg.base_frame)
        self._tf_pub.send([conv.odom_transform(now, frames, pose)])
        self._odom_pub.publish(conv.odometry(now, frames, pose, vel))
        ee = self.profile.from_arm(np.asarray(arm.pos))
        self._ee_pub.publish(conv.pose_stamped(now, cfg.base_frame, tuple(ee), arm.quat))
        self._grip_pub.publish(Float64(data=float(arm.gripper)))
        self.counters.add("state.published")

    def _on_sample(self, sample: Sample) -> None:
        now = self._now()
        if sample.part == "arm":
            self._cmd_pub.publish(conv.pose_stamped(now, self.config.base_frame,
                                                    sample.commanded[:3], sample.commanded[3:7]))
        if self._trace is not None:
            line = json.dumps({"t": round(now, 4), "part": sample.part,
                               "commanded": [round(v, 5) for v in sample.commanded],
                               "achieved": [round(v, 5) for v in sample.achieved]})
            with self._trace_lock:
                self._trace.write(line + "\n")

    def _on_phase(self, phase: str) -> None:
        goal = self._goal
        if goal is not None:
            goal.publish_feedback(ExecutePrimitive.Feedback(phase=phase, progress=0.5))

    # ------------------------------------------------------------------ execute_primitive
    def _on_goal(self, _goal: Any) -> GoalResponse:
        # the slot is taken here, not when the goal starts executing, so a second goal that
        # arrives in between is refused as well; _execute gives it back
        if not self._busy.acquire(blocking=False):
            self.counters.add("rejected.busy")
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    def _on_cancel(self, _goal: ServerGoalHandle) -> CancelResponse:
        self.cancel.set()
        return CancelResponse.ACCEPT

    def _execute(self, handle: ServerGoalHandle) -> ExecutePrimitive.Result:
        try:
            self.cancel.clear()
            self._goal = handle
            result = self._serve(handle)
        finally:
            self._goal = None
            self._busy.release()  # taken when the goal was accepted
        if result.error_code == ExecutePrimitive.Result.CANCELED:
            handle.canceled()
        elif result.success:
            handle.succeed()
        else:
            handle.abort()
        return result

    def _serve(self, handle: ServerGoalHandle) -> ExecutePrimitive.Result:
        goal, cfg = handle.request, self.config
        try:
            request = conv.goal_to_request(goal, cfg.map_frame)
        except RequestError as err:
            return self._refused(err)
        if not self._ready.is_set():
            return self._refused(RuntimeError(
                "the robot is not connected and reset yet (see /diagnostics; robot/reset)"))
        if not self._settle_link():
            self._warn("link_error", "a server call is still unanswered after "
                       f"{cfg.link_settle_s:.1f} s; the primitive starts on a stalled link")
        interaction_id = uuid.uuid4().hex[:12]
        start = self._now()
        self._events_pub.publish(conv.interaction_event(goal, interaction_id, start,
                                                        frame=cfg.map_frame))
        self.counters.add("primitives.started")
        context = PlanContext(
            executor=self.runner, profile=self.profile, cameras=tuple(cfg.pointing_cameras),
            view=lambda cam, after: self.views.wait(cam, after, cfg.view_timeout_s),
            odom_from_map=lambda: self._tf.lookup(cfg.odom_frame, cfg.map_frame, 0.0),
            now=self._now, tolerance=cfg.target_tolerance)
        try:
            out = plan_and_run(request, context)
        except (RobotLinkLostError, RobotUnreachableError) as err:
            out = Outcome(request.primitive, False, "LINK_LOST", f"robot link lost: {err}")
        except _REFUSALS as err:
            # a refusal of the target or its geometry, or a bad value derived from a view: the
            # primitive fails with the reason; the events and the result still go out
            out = refused(request.primitive, err)
        end = self._now()
        self._events_pub.publish(conv.interaction_event(goal, interaction_id, start, end=end,
                                                        out=out, frame=cfg.map_frame))
        self.counters.add("primitives.succeeded" if out.success else "primitives.failed")
        figures = ", ".join(f"{k} {v:.3f}" for k, v in sorted(out.measurements.items()))
        self.get_logger().info(
            f"{request.primitive} {request.target.describe()}: {out.code} {out.message}"
            + (f" [{figures}]" if figures else ""))
        return conv.outcome_result(out, interaction_id, start, end)

    def _settle_link(self) -> bool:
        """Let a stalled server answer its late call before the primitive starts (counted as
        link_settled when one was waited for); False when it is still unanswered."""
        t0 = time.monotonic()
        settled = self.link.settle(0.0)
        if not settled:
            settled = self.link.settle(self.config.link_settle_s)
            if settled:
                self.counters.add("link_settled")
                self.get_logger().info(
                    f"a stalled robot server answered after {time.monotonic() - t0:.2f} s; "
                    "the primitive starts")
        return settled

    def _refused(self, err: Exception) -> ExecutePrimitive.Result:
        result = conv.refusal(err)
        self.counters.add(f"rejected.{result.error_code}")
        self.get_logger().warning(f"primitive refused: {err}", throttle_duration_sec=1.0)
        return result

    # ------------------------------------------------------------------ diagnostics
    def _warn(self, key: str, message: str) -> None:
        self.counters.add(key)
        self.get_logger().warning(message, throttle_duration_sec=5.0)

    def _report(self) -> None:
        base, arm = self.link.status()
        for s in (base, arm):
            self.counters.set(f"{s.name}.connected", int(s.connected))
            self.counters.set(f"{s.name}.needs_reset", int(s.needs_reset))
            self.counters.set(f"{s.name}.reconnects", s.reconnects)
        self.counters.set("holding", int(self.runner.holding))
        self.counters.publish(self, self._diag_pub, "robot")

    def destroy_node(self) -> None:
        self.cancel.set()
        if getattr(self, "link", None) is not None:
            self.link.close(stop_control=False)
        trace = getattr(self, "_trace", None)
        if trace is not None:
            with self._trace_lock:
                trace.close()
                self._trace = None
        super().destroy_node()


def main(args: list[str] | None = None) -> int:
    """Run the executor node."""
    return run_node(ExecutorNode, args, threads=6)


if __name__ == "__main__":
    sys.exit(main())

