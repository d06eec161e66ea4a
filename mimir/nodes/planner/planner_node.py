"""Planner node: task memory, recall, keyframe retrieval, grounding, planning, execution, gate.

Memory: world memory belongs to the scene graph node and keyframes to the keyframe node; this
node opens the same databases in ``memory_dir`` READ-ONLY (``world.db``, ``keyframes/``) and
refreshes them before every planning step. It owns task memory (``task.db``). The planning
core never writes world memory: every world update comes from the interaction analyzer, which
writes through the scene graph node's ``update_node``.

Interfaces:

* action ``run_task`` (mimir_msgs/RunTask, :mod:`~mimir.nodes.planner.run_task_server`): the
  core serves the instruction (:meth:`~mimir_planner.planner.PlannerSession.run_instruction`):
  it becomes goals in task memory, then planner steps run until no goal of it is pending, the
  step budget (``goal.step_budget``, else the ``step_budget`` parameter) is spent, the client
  cancels, the operator denies a primitive, or the executor or model fails; the node only
  plugs in the cancel check, the camera view and the feedback. One feedback message per
  planner step (plan, grounding candidates, retrieved keyframes, status) plus one while a
  primitive awaits approval. The result carries the progress (share of the instruction's goals
  completed), the steps used, the literal answer of questions, the status of every goal of the
  instruction, and an error code: PARSE_FAILED, BUDGET_EXHAUSTED, BLOCKED (a goal could not be
  achieved, the operator denied a primitive, the executor or memory is unavailable; the
  message says which), MODEL_ERROR or CANCELED. When a run ends, goals of it that are still
  pending are blocked with the reason, so nothing carries over into the next instruction. An
  instruction that arrives before perception has put anything into world memory waits (at
  most ``memory_wait_s``) until nodes have appeared and no new one has come for
  ``memory_settle_s``. ONE TASK AT A TIME: a goal that arrives while a task runs is rejected
  (the client sees ``accepted == False``) and may be sent again later. Cancellation is checked
  between steps; a primitive awaiting approval is denied at once.
* primitives go through :class:`~mimir.nodes.planner.ros_executor.ActionPrimitiveExecutor`
  (``execute_primitive`` action, then ``analyze_interaction`` with the ENDED interaction event).
* operator gate (``operator_gate``, :mod:`~mimir.nodes.planner.gate_services`): every primitive
  waits for ``approve_primitive``;
  ``list_pending_primitives`` shows what waits; no decision within ``gate_timeout_s`` denies.
  A denial or timeout ends the run (error BLOCKED) without executing the primitive.
* service ``retrieve_memory`` (mimir_msgs/RetrieveMemory,
  :mod:`~mimir.nodes.planner.memory_service`): goal-conditioned recall candidates and the
  retrieved keyframes with reasons for a task text.
* the latest colour image and camera info of ``planner_camera`` and its pose from TF give the
  planner its current view for Set-of-Mark overlays
  (:mod:`~mimir.nodes.planner.planner_camera`).

Parameters are declared from :class:`~mimir.nodes.planner.planner_params.PlannerNodeConfig`;
messages are built in :mod:`~mimir.nodes.planner.planner_messages`.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.action import ActionClient
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.client import Client
from rclpy.node import Node
from sensor_msgs.msg import Image
from std_msgs.msg import Header

from mimir.nodes.planner.gate_services import GateServices
from mimir.nodes.planner.memory_service import MemoryService
from mimir.nodes.planner.planner_camera import PlannerCamera
from mimir.nodes.planner.planner_messages import plan_step_msgs
from mimir.nodes.planner.planner_params import PlannerNodeConfig
from mimir.nodes.planner.ros_executor import (
    ActionPrimitiveExecutor,
    ExecutorSettings,
    InteractionEventBuffer,
)
from mimir.nodes.planner.run_task_server import RunTaskServer, TaskSettings
from mimir.paths import ConfigFileNotFoundError, config_file, data_dir
from mimir.ros import qos
from mimir.ros.diagnostics import NodeCounters
from mimir.ros.floatfix import FloatSafePublisher
from mimir.ros.images import numpy_to_image
from mimir.ros.params import ConfigError, declare_config
from mimir.ros.runtime import run_node
from mimir.ros.time import from_seconds
from mimir_memory.config import load_memory_config
from mimir_memory.errors import MemoryStoreError
from mimir_memory.keyframes import KeyframeStore
from mimir_memory.representation import load_representations
from mimir_memory.task import TaskMemory
from mimir_msgs.action import ExecutePrimitive
from mimir_msgs.msg import InteractionEvent, PlanStep
from mimir_msgs.srv import AnalyzeInteraction
from mimir_planner.config import GateConfig, PlannerConfig, load_planner_config
from mimir_planner.errors import PlannerError
from mimir_planner.hosting import RecordingPolicy
from mimir_planner.memory_readers import (
    MemoryReaders,
    make_retriever,
    memory_view,
    open_keyframe_reader,
    open_world_reader,
)
from mimir_planner.outcomes import fixture_opens
from mimir_planner.planner import PlannerSession
from mimir_planner.policies import PlannerPolicy, VlmPlanner
from mimir_planner.reasoning import load_reasoning_config, make_backend, with_model
from mimir_planner.reasoning.errors import ReasoningError
from mimir_planner.reasoning.prompts import PromptLibrary
from mimir_planner.reasoning.vlm import VlmBackend
from mimir_planner.recall import PackagedMiniLM
from mimir_planner.retrieval import KeyframeRetriever
from mimir_planner.runs import Observation
from mimir_planner.trace import PlannerTrace

__all__ = ["PlannerNode", "PlannerNodeConfig", "PlannerNodeError", "main"]

_WARN_KEYS = ("bad_image", "bad_camera_info", "camera_pose_unavailable", "memory_unavailable")


class PlannerNodeError(RuntimeError):
    """The planner node cannot start: bad parameters, configuration or task memory."""


class PlannerNode(Node):
    """Planner node; see the module docstring for its interfaces.

    Args:
        backend: A ready VLM backend to use instead of the configured one (tests).
        **kwargs: Passed to :class:`rclpy.node.Node` (context, parameter overrides...).
    """

    def __init__(self, backend: VlmBackend | None = None, **kwargs: Any) -> None:
        super().__init__("planner", **kwargs)
        try:
            self.config = cfg = declare_config(self, PlannerNodeConfig)
        except ConfigError as err:
            raise PlannerNodeError(f"invalid planner parameters: {err}") from err
        self._load_configs(cfg, backend)
        self.memory_dir: Path = data_dir(cfg.memory_dir)
        try:
            self.task = TaskMemory.open(self.memory_dir / "task.db", config=self.memory_config)
        except MemoryStoreError as err:
            raise PlannerNodeError(f"cannot open task memory: {err}") from err
        self.counters = NodeCounters(_WARN_KEYS)
        self.events = InteractionEventBuffer()
        self.session: PlannerSession | None = None
        self.recorder: RecordingPolicy | None = None
        self.primitive_executor: ActionPrimitiveExecutor | None = None
        self._session_lock = threading.Lock()
        self._last_stamp = 0.0
        self._create_entities(cfg)
        self.get_logger().info(
            f"planner with backend {cfg.vlm_backend}, embodiment {self.embodiment}, memory "
            f"{self.memory_dir}, operator gate {'on' if cfg.operator_gate else 'off'}, "
            f"step budget {cfg.step_budget}")

    def _load_configs(self, cfg: PlannerNodeConfig, backend: VlmBackend | None) -> None:
        """Planner and memory settings, the embodiment and the model backend."""
        try:
            base = load_planner_config(cfg.planner_config or None)
            self.memory_config = load_memory_config(
                config_file("memory.yaml", cfg.memory_config))
        except (PlannerError, MemoryStoreError, ConfigFileNotFoundError) as err:
            raise PlannerNodeError(f"cannot load the configuration: {err}") from err
        self.planner_config: PlannerConfig = dataclasses.replace(
            base, gate=GateConfig(enabled=cfg.operator_gate, timeout_s=cfg.gate_timeout_s))
        try:
            self.representation = load_representations(
                config_file("representations.yaml"))[cfg.representation]
        except KeyError as err:
            raise PlannerNodeError(
                f"unknown representation {cfg.representation!r}; config/representations.yaml "
                "defines the known ones") from err
        except (MemoryStoreError, ConfigFileNotFoundError) as err:
            raise PlannerNodeError(f"cannot load the representations: {err}") from err
        self.embodiment = cfg.embodiment or self.planner_config.loop.embodiment
        if self.embodiment not in self.planner_config.embodiments:
            raise PlannerNodeError(
                f"unknown embodiment {self.embodiment!r}; the planner config defines "
                f"{sorted(self.planner_config.embodiments)}")
        self.backend: VlmBackend | None = backend
        if cfg.vlm_backend != "offline" and backend is None:
            try:
                reasoning = load_reasoning_config(
                    config_file("reasoning.yaml", cfg.reasoning_config))
                reasoning = with_model(reasoning, backend=cfg.vlm_backend,
                                       base_url=cfg.vlm_endpoint, model=cfg.vlm_model)
                self.backend = make_backend(reasoning)
            except (ConfigFileNotFoundError, ReasoningError) as err:
                raise PlannerNodeError(f"cannot build the {cfg.vlm_backend} backend: {err}") \
                    from err

    def _create_entities(self, cfg: PlannerNodeConfig) -> None:
        """Subscriptions, clients, the run_task server, services, diagnostics."""
        sensor_group = ReentrantCallbackGroup()
        client_group = ReentrantCallbackGroup()
        self.gate_services = GateServices(
            self, self.planner_config.gate, counters=self.counters, plan=self._current_plan,
            task_text=lambda: self.tasks.instruction,
            # late bound: the task server is created below, with this gate
            announce=lambda status, steps: self.tasks.feedback(status, steps),  # noqa: PLW0108
            group=ReentrantCallbackGroup())
        self.gate = self.gate_services.gate
        self.camera = PlannerCamera(
            self, cfg.planner_camera, map_frame=cfg.map_frame,
            optical_frame_suffix=cfg.optical_frame_suffix, rectified=cfg.rectified,
            warn=self._warn, group=sensor_group)
        self.create_subscription(InteractionEvent, "interaction_events", self._on_interaction,
                                 qos.EVENTS, callback_group=sensor_group)
        self._primitive_client: ActionClient[Any, Any, Any] = ActionClient(
            self, ExecutePrimitive, "execute_primitive", callback_group=client_group)
        self._analyze_client: Client[Any, Any] = self.create_client(
            AnalyzeInteraction, "analyze_interaction", callback_group=client_group)
        self._marks_pub = self.create_publisher(Image, "planner/set_of_marks", qos.LATCHED,
                                                publisher_class=FloatSafePublisher)
        self.tasks = RunTaskServer(
            self, TaskSettings(cfg.step_budget, cfg.memory_wait_s, cfg.memory_settle_s),
            session=self._ensure_session, gate=self.gate, counters=self.counters,
            observe=self.current_observation, group=ReentrantCallbackGroup(),
            trace=PlannerTrace(self.memory_dir, cfg.trace_max_bytes), show=self._show_marks)
        self.memory_service = MemoryService(
            self, self.planner_config, self.task, open_readers=self._open_readers,
            open_keyframes=self._open_keyframes, make_retriever=self._retriever,
            group=MutuallyExclusiveCallbackGroup())
        self._diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", qos.EVENTS,
                                               publisher_class=FloatSafePublisher)
        self.create_timer(cfg.diagnostics_period_s, self._report, callback_group=sensor_group)

    def _show_marks(self, rgb: np.ndarray, stamp: float) -> None:
        """Publish the image the planner saw with its Set-of-Mark overlay (latched)."""
        frame = f"{self.config.planner_camera}{self.config.optical_frame_suffix}"
        header = Header(stamp=from_seconds(stamp), frame_id=frame)
        self._marks_pub.publish(numpy_to_image(rgb, "rgb8", header))

    def _on_interaction(self, msg: InteractionEvent) -> None:
        self.events.add(msg)

    def destroy_node(self) -> None:
        """Deny waiting primitives and close the databases before the node goes.

        A node whose constructor failed lacks some of these attributes; only what exists is
        closed.
        """
        gate = getattr(self, "gate", None)
        if gate is not None:
            gate.deny_all("the planner is shutting down")
        session_lock = getattr(self, "_session_lock", None)
        if session_lock is not None:
            with session_lock:
                session = getattr(self, "session", None)
                if session is not None:
                    MemoryReaders(session.world, session.keyframes).close()
        service = getattr(self, "memory_service", None)
        if service is not None:
            service.close()
        task = getattr(self, "task", None)
        if task is not None:
            task.close()
        camera = getattr(self, "camera", None)
        if camera is not None:
            camera.close()
        super().destroy_node()

    # ------------------------------------------------------------------ time, sensors
    def _now(self) -> float:
        """ROS time (simulation time under use_sim_time), never going backwards."""
        now = float(self.get_clock().now().nanoseconds) * 1e-9
        self._last_stamp = max(self._last_stamp, now)
        return self._last_stamp

    def _warn(self, key: str, text: str) -> None:
        self.counters.add(key)
        self.get_logger().warning(text, throttle_duration_sec=5.0)

    def current_observation(self) -> Observation | None:
        """The latest planner-camera image with intrinsics and pose (when known), or None."""
        return self.camera.observation()

    def _report(self) -> None:
        self.counters.set("gate_pending", len(self.gate.pending()))
        self.counters.publish(self, self._diag_pub, "planner")

    # ------------------------------------------------------------------ memory, session
    def _open_readers(self) -> MemoryReaders:
        view = memory_view(self.representation, self.memory_dir, self.memory_config,
                           self.planner_config, pinned=lambda: [self.task.hand or ""])
        world = open_world_reader(self.memory_dir, self.memory_config,
                                  map_frame=self.config.map_frame, view=view)
        return MemoryReaders(world, self._open_keyframes())

    def _open_keyframes(self) -> KeyframeStore | None:
        if not self.config.use_keyframes:
            return None
        try:
            return open_keyframe_reader(self.memory_dir, self.memory_config)
        except MemoryStoreError as err:
            self._warn("memory_unavailable",
                       f"keyframes unavailable, planning without retrieval: {err}")
            return None

    def _retriever(self, store: KeyframeStore) -> KeyframeRetriever:
        return make_retriever(store, self.planner_config, self.backend)

    def _executor_settings(self) -> ExecutorSettings:
        cfg = self.config
        return ExecutorSettings(
            server_wait_s=cfg.server_wait_s, accept_timeout_s=cfg.accept_timeout_s,
            busy_retry_s=cfg.busy_retry_s, result_timeout_s=cfg.primitive_timeout_s,
            event_wait_s=cfg.event_wait_s,
            analysis_timeout_s=cfg.analysis_timeout_s,
            analyzed_primitives=cfg.analyzed_primitives if cfg.analyze else (),
            require_verification=cfg.require_verification, map_frame=cfg.map_frame,
            embodiment=self.embodiment)

    def _new_session(self) -> None:
        readers = self._open_readers()
        cfg = self.planner_config
        policy: PlannerPolicy | None = None
        if self.backend is not None:
            policy = VlmPlanner(self.backend, PromptLibrary(cfg.prompt_dir), cfg.loop.prompt,
                                cfg.loop.robot_description)
        session = PlannerSession(
            readers.world, self.task, cfg, keyframes=readers.keyframes, policy=policy,
            retriever=self._retriever(readers.keyframes) if readers.keyframes else None,
            gate=self.gate, embedder=PackagedMiniLM() if cfg.recall.use_embedder else None,
            embodiment=self.embodiment, clock=self._now)
        self.recorder = RecordingPolicy(session.policy)
        session.policy = self.recorder
        self.primitive_executor = ActionPrimitiveExecutor(
            self, self._primitive_client, self._analyze_client, self.events,
            world=readers.world, settings=self._executor_settings(),
            holding=lambda: self.task.hand, opens=lambda n: fixture_opens(n, cfg),
            observe=self.current_observation, task_text=lambda: self.tasks.instruction,
            cancelled=self.tasks.cancel_requested)
        self.session = session

    def _ensure_session(self) -> tuple[PlannerSession, RecordingPolicy,
                                       ActionPrimitiveExecutor]:
        """The planning session, created on first use (world memory must exist by then)."""
        with self._session_lock:
            if self.session is None:
                self._new_session()
            elif self.session.keyframes is None:
                store = self._open_keyframes()
                if store is not None:
                    self.session.use_keyframes(store, self._retriever(store))
            assert self.session is not None
            assert self.recorder is not None and self.primitive_executor is not None
            return self.session, self.recorder, self.primitive_executor

    def _current_plan(self) -> list[PlanStep]:
        """The plan of the planner call in progress (what a gate request is about)."""
        answer = self.recorder.answer() if self.recorder is not None else None
        canonical = self.session.registry.adapter.canonical if self.session else None
        return plan_step_msgs(answer, canonical)


def main(args: list[str] | None = None) -> int:
    """Console script ``planner_node``."""
    return run_node(PlannerNode, args, threads=6)


if __name__ == "__main__":
    sys.exit(main())
