"""Planner node: task memory, recall, keyframe retrieval, grounding, planning, execution, gate.

Memory: world memory belongs to the scene graph node and keyframes to the keyframe node; this
node opens the same databases in ``memory_dir`` READ-ONLY (``world.db``, ``keyframes/``) and
refreshes them before every planning step. It owns task memory (``task.db``). The planning
core never writes world memory: every world update comes from the interaction analyzer, which
writes through the scene graph node's ``update_node``.

Interfaces:

* action ``run_task`` (mimir_msgs/RunTask): the instruction becomes goals in task memory
  (:meth:`~mimir_planner.planner.PlannerSession.submit`), then planner steps run until no goal
  of it is pending, the step budget (``goal.step_budget``, else the ``step_budget`` parameter)
  is spent, the client cancels, the operator denies a primitive, or the executor or model
  fails. One feedback message per planner step (plan, grounding candidates, retrieved
  keyframes, status) plus one while a primitive awaits approval. The result carries the
  progress (share of the instruction's goals completed), the steps used, the literal answer of
  questions, the status of every goal of the instruction, and an error code: PARSE_FAILED,
  BUDGET_EXHAUSTED, BLOCKED (a goal could not be achieved, the operator denied a primitive, the
  executor or memory is unavailable; the message says which), MODEL_ERROR or CANCELED.
  When a run ends, goals of it that are still pending are blocked with the reason, so nothing
  carries over into the next instruction. An instruction that arrives before perception has
  put anything into world memory waits (at most ``memory_wait_s``) until nodes have appeared
  and no new one has come for ``memory_settle_s``. ONE TASK AT A TIME: a goal that arrives
  while a task runs is rejected (the client sees ``accepted == False``) and may be sent again later.
  Cancellation is checked between steps; a primitive awaiting approval is denied at once.
* primitives go through :class:`~mimir.nodes.planner.ros_executor.ActionPrimitiveExecutor`
  (``execute_primitive`` action, then ``analyze_interaction`` with the ENDED interaction event).
* operator gate (``operator_gate``): every primitive waits for ``approve_primitive``;
  ``list_pending_primitives`` shows what waits; no decision within ``gate_timeout_s`` denies.
  A denial or timeout ends the run (error BLOCKED) without executing the primitive.
* service ``retrieve_memory`` (mimir_msgs/RetrieveMemory): goal-conditioned recall candidates
  and the retrieved keyframes with reasons for a task text.
* the latest colour image and camera info of ``planner_camera`` and its pose from TF give the
  planner its current view for Set-of-Mark overlays.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import Point
from rclpy.action import ActionClient, ActionServer, CancelResponse, GoalResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.node import Node
from sensor_msgs.msg import CameraInfo, Image

from mimir.nodes.memory.messages import keyframe_to_msg
from mimir.nodes.perception.messages import CameraInfoError, camera_info_to_intrinsics
from mimir.nodes.planner.ros_executor import (
    ActionPrimitiveExecutor,
    ExecutorSettings,
    ExecutorUnavailableError,
    InteractionEventBuffer,
)
from mimir.paths import ConfigFileNotFoundError, config_file, data_dir
from mimir.ros import qos
from mimir.ros.diagnostics import NodeCounters
from mimir.ros.floatfix import FloatSafePublisher, coerce_floats, coerced
from mimir.ros.images import ImageConversionError, image_to_rgb
from mimir.ros.params import ConfigError, declare_config
from mimir.ros.runtime import run_node
from mimir.ros.tf import make_transform_source
from mimir.ros.time import to_seconds
from mimir.transforms import TransformError
from mimir_memory.config import load_memory_config
from mimir_memory.errors import MemoryStoreError
from mimir_memory.graph import SceneNode
from mimir_memory.keyframes import KeyframeStore
from mimir_memory.task import GoalStatus, TaskMemory
from mimir_memory.world import WorldMemory
from mimir_msgs.action import ExecutePrimitive, RunTask
from mimir_msgs.msg import (
    AnswerEntity,
    InteractionEvent,
    KeyframeMetadata,
    PlanStep,
    RetrievedKeyframe,
)
from mimir_msgs.msg import Candidate as CandidateMsg
from mimir_msgs.msg import GoalStatus as GoalStatusMsg
from mimir_msgs.srv import (
    AnalyzeInteraction,
    ApprovePrimitive,
    ListPendingPrimitives,
    RetrieveMemory,
)
from mimir_planner.answers import NamedEntity
from mimir_planner.config import GateConfig, PlannerConfig, load_planner_config
from mimir_planner.errors import (
    GateError,
    InstructionError,
    PlanAnswerError,
    PlannerError,
    RecallError,
    RetrievalError,
)
from mimir_planner.gate import GateRequest, OperatorGate
from mimir_planner.grounding import Exploration, GroundedGoal, GroundingResult
from mimir_planner.instructions import parse_instruction
from mimir_planner.plan_schema import PlanAnswer, parse_plan_answer
from mimir_planner.planner import Observation, PlannerSession, StepRecord
from mimir_planner.policies import PlannerPolicy, PlanningContext, VlmPlanner
from mimir_planner.reasoning import load_reasoning_config, make_backend
from mimir_planner.reasoning.errors import ReasoningError
from mimir_planner.reasoning.prompts import PromptLibrary
from mimir_planner.reasoning.vlm import VlmBackend
from mimir_planner.recall import (
    CategoryTable,
    GoalRecall,
    PackagedMiniLM,
    RecallQuery,
    SynonymTable,
)
from mimir_planner.retrieval import (
    KeyframeRetriever,
    RetrievalQuery,
    RetrievedFrame,
    VlmRetrievalReasoner,
    task_terms,
)

_BACKENDS = ("offline", "openai", "transformers")
_WARN_KEYS = ("bad_image", "bad_camera_info", "camera_pose_unavailable", "memory_unavailable")
_POOL_SOURCES = {"node": "linked_node", "label": "label_match", "recent": "recent_interaction"}


class PlannerNodeError(RuntimeError):
    """The planner node cannot start: bad parameters, configuration or task memory."""


class MemoryUnavailableError(PlannerError):
    """World memory (or the keyframe store) cannot be opened read-only yet."""


@dataclass(frozen=True)
class PlannerNodeConfig:
    """Parameters of the planner node (defaults mirror config/params/planner.yaml)."""

    memory_dir: str = field(
        default="~/.local/share/mimir/default",
        metadata={"description": "folder of the memory databases: world.db and keyframes/ are "
                  "read, task.db is owned", "read_only": True})
    memory_config: str = field(
        default="", metadata={"description": "memory settings YAML; empty for the installed "
                              "memory.yaml", "read_only": True})
    planner_config: str = field(
        default="", metadata={"description": "planner settings YAML; empty for the installed "
                              "config/planner.yaml", "read_only": True})
    reasoning_config: str = field(
        default="", metadata={"description": "reasoning settings YAML (VLM endpoint, model); "
                              "empty for the installed reasoning.yaml", "read_only": True})
    vlm_backend: str = field(
        default="offline", metadata={"description": "offline (offline planner and retrieval "
                                     "reasoner, no model), openai or transformers",
                                     "read_only": True})
    step_budget: int = field(
        default=12, metadata={"description": "planner steps per instruction when the goal "
                              "gives none (twelve in simulation)"})
    operator_gate: bool = field(
        default=False, metadata={"description": "every primitive waits for operator approval "
                                 "(true on the robot)", "read_only": True})
    gate_timeout_s: float = field(
        default=120.0, metadata={"description": "a primitive not approved within this time is "
                                 "denied (s)", "read_only": True})
    embodiment: str = field(
        default="sim_tidybot", metadata={"description": "embodiment of the primitive adapter "
                                         "(sim_tidybot, real_tidybot); empty for the "
                                         "planner config's", "read_only": True})
    planner_camera: str = field(
        default="pole", metadata={"description": "camera whose latest image the planner sees "
                                  "(Set-of-Mark overlays)", "read_only": True})
    map_frame: str = field(default="map", metadata={"description": "fixed frame of memory",
                                                    "read_only": True})
    optical_frame_suffix: str = field(
        default="_color_optical_frame",
        metadata={"description": "optical frame = camera name + suffix when an image has no "
                  "frame id", "read_only": True})
    rectified: bool = field(
        default=True, metadata={"description": "camera infos describe rectified images",
                                "read_only": True})
    server_wait_s: float = field(
        default=5.0, metadata={"description": "wait this long for execute_primitive and "
                               "analyze_interaction to appear (s)", "read_only": True})
    accept_timeout_s: float = field(
        default=10.0, metadata={"description": "wait this long for a primitive goal to be "
                                "accepted (s)", "read_only": True})
    primitive_timeout_s: float = field(
        default=180.0, metadata={"description": "a primitive running longer is canceled and "
                                 "counts as failed (s)", "read_only": True})
    event_wait_s: float = field(
        default=2.0, metadata={"description": "wait this long for the ENDED interaction event "
                               "after a primitive's result (s)", "read_only": True})
    analyze: bool = field(
        default=True, metadata={"description": "have the interaction analyzer verify "
                                "analysed primitives", "read_only": True})
    analyzed_primitives: tuple[str, ...] = field(
        default=("open", "close", "inspect", "pick", "place"),
        metadata={"description": "primitives whose outcome the analyzer verifies (move_to is "
                  "judged by the executor)", "read_only": True})
    analysis_timeout_s: float = field(
        default=180.0, metadata={"description": "wait this long for analyze_interaction (s)",
                                 "read_only": True})
    require_verification: bool = field(
        default=True, metadata={"description": "an analysed primitive the analyzer could not "
                                "verify counts as failed", "read_only": True})
    diagnostics_period_s: float = field(
        default=1.0, metadata={"description": "period of the /diagnostics report (s)",
                               "read_only": True})
    memory_wait_s: float = field(
        default=10.0, metadata={"description": "an instruction that arrives while world "
                                "memory holds no scene graph node yet waits at most this long "
                                "for perception to fill it before planning (s); 0 plans at "
                                "once", "read_only": True})
    memory_settle_s: float = field(
        default=2.0, metadata={"description": "within that wait, memory counts as filled once "
                               "no new node has appeared for this long (s)",
                               "read_only": True})

    def __post_init__(self) -> None:
        if self.vlm_backend not in _BACKENDS:
            raise ValueError(f"vlm_backend must be one of {_BACKENDS}, got {self.vlm_backend!r}")
        if self.step_budget <= 0:
            raise ValueError(f"step_budget must be positive, got {self.step_budget}")
        for name in ("gate_timeout_s", "server_wait_s", "accept_timeout_s",
                     "primitive_timeout_s", "analysis_timeout_s", "diagnostics_period_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0.0):
                raise ValueError(f"{name} must be a positive number, got {value!r}")
        for name in ("event_wait_s", "memory_wait_s", "memory_settle_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0.0):
                raise ValueError(f"{name} must be >= 0, got {value!r}")
        if not self.planner_camera or "/" in self.planner_camera:
            raise ValueError(f"planner_camera must be a plain name, got {self.planner_camera!r}")
        if not self.map_frame:
            raise ValueError("map_frame must not be empty")


# ---------------------------------------------------------------------- core adapters
class RecordingPolicy:
    """Wraps a planner policy and keeps the last context and answer (for feedback)."""

    def __init__(self, inner: PlannerPolicy) -> None:
        self.inner = inner
        self.context: PlanningContext | None = None
        self.text: str | None = None

    @property
    def name(self) -> str:
        """The wrapped policy's name."""
        return self.inner.name

    def reset(self) -> None:
        """Forget the last call (before a new planner step)."""
        self.context = None
        self.text = None

    def propose(self, ctx: PlanningContext) -> str:
        """Delegate and record."""
        self.context = ctx
        self.text = None
        text = self.inner.propose(ctx)
        self.text = text
        return text

    def answer(self) -> PlanAnswer | None:
        """The last answer parsed, or None when there was none or it was invalid."""
        if self.text is None:
            return None
        try:
            return parse_plan_answer(self.text)
        except PlanAnswerError:
            return None


class TrackedGate(OperatorGate):
    """Operator gate that reports each new request to a callback (to list and announce it)."""

    def __init__(self, config: GateConfig, on_submit: Callable[[GateRequest], None]) -> None:
        super().__init__(config)
        self._on_submit = on_submit
        self._known: set[int] = set()
        self._known_lock = threading.Lock()

    def submit(self, description: str) -> GateRequest:
        """Queue a request and report it."""
        request = super().submit(description)
        with self._known_lock:
            self._known.add(request.request_id)
        self._on_submit(request)
        return request

    def known(self, request_id: int) -> bool:
        """Whether the request was ever submitted."""
        with self._known_lock:
            return request_id in self._known

    def deny_all(self, reason: str) -> int:
        """Deny every pending request; returns how many were denied."""
        count = 0
        for request in self.pending():
            try:
                self.deny(request.request_id, reason)
                count += 1
            except GateError:
                continue  # decided (or timed out) meanwhile
        return count


class NodePlannerSession(PlannerSession):
    """A planner session that can close an instruction's remaining goals."""

    def block_active(self, reason: str, stamp: float) -> bool:
        """Block the active goal (after compiling goals waiting on finished explorations)."""
        self._flush_deferred(stamp)
        goal = self.task.active_goal()
        if goal is None:
            return False
        self._block(goal, reason, stamp)
        return True

    def settle(self, reason: str, stamp: float) -> list[str]:
        """Block every pending goal, including those still waiting on an exploration.

        Returns:
            Ids of the goals blocked.
        """
        blocked: list[str] = []
        for _ in range(len(self._deferred) + 2):
            for goal in self.task.pending():
                self.task.set_status(goal.goal_id, GoalStatus.BLOCKED, stamp=stamp,
                                     reason=reason)
                blocked.append(goal.goal_id)
            self._flush_deferred(stamp)
            if not self._deferred and not self.task.pending():
                break
        return blocked


# ---------------------------------------------------------------------- message conversion
def answer_entity_msg(entity: NamedEntity) -> AnswerEntity:
    """The message of something an answer names."""
    msg = AnswerEntity(node_id=entity.node_id, label=entity.label)
    if entity.position is not None:
        msg.position = Point(x=float(entity.position[0]), y=float(entity.position[1]),
                             z=float(entity.position[2]))
        msg.has_position = True
    return msg


def plan_step_msgs(answer: PlanAnswer | None,
                   canonical: Callable[[str], str | None] | None = None) -> list[PlanStep]:
    """The plan of an answer as PlanStep messages (abstract primitive names when known)."""
    if answer is None:
        return []
    out = []
    for step in answer.plan:
        name = canonical(step.action) if canonical is not None else None
        out.append(PlanStep(
            primitive=name or str(step.action),
            target_id=step.target_object or "",
            pointing_description=step.pointing_description or "",
            grounded_by_keyframe=int(step.grounded_by_keyframe_idx or 0),
            reasoning=step.reasoning,
        ))
    return out


def candidate_msgs(grounding: GroundingResult | None) -> list[CandidateMsg]:
    """Grounding candidates (or the exploration order) as Candidate messages."""
    if isinstance(grounding, GroundedGoal):
        return [CandidateMsg(node_id=c.node_id, score=float(c.score),
                             evidence=[e.detail for e in c.evidence])
                for c in grounding.candidates]
    if isinstance(grounding, Exploration):
        return [CandidateMsg(node_id=f, score=0.0,
                             evidence=[f"explore: {grounding.reason}" if f == grounding.fixture
                                       else "exploration order"])
                for f in grounding.order]
    return []


def retrieved_msgs(frames: tuple[RetrievedFrame, ...] | list[RetrievedFrame],
                   store: KeyframeStore | None) -> list[RetrievedKeyframe]:
    """Retrieved frames as messages; score falls with the rank (first = 1)."""
    out = []
    count = len(frames)
    for rank, frame in enumerate(frames):
        metadata: KeyframeMetadata | None = None
        if store is not None:
            try:
                metadata = keyframe_to_msg(store.get(frame.frame_id), store.root)
            except MemoryStoreError:
                metadata = None
        if metadata is None:
            entry = frame.entry
            metadata = KeyframeMetadata(keyframe_id=frame.frame_id, camera=entry.camera,
                                        action=entry.action or "",
                                        linked_nodes=list(entry.node_ids),
                                        caption=entry.caption)
        source = next((s for s in frame.entry.sources if s in _POOL_SOURCES), "")
        out.append(RetrievedKeyframe(keyframe=metadata, pool_source=_POOL_SOURCES.get(source, ""),
                                     reason=frame.reason, score=float(count - rank) / count))
    return out


def _result(code: int, message: str, steps: int = 0) -> RunTask.Result:
    return RunTask.Result(error_code=code, error_msg=message, steps=steps, progress=0.0)


@dataclass
class _Pending:
    step: PlanStep
    task: str


@dataclass
class _Readers:
    world: WorldMemory
    keyframes: KeyframeStore | None


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
        try:
            base = load_planner_config(cfg.planner_config or None)
            self.memory_config = load_memory_config(
                config_file("memory.yaml", cfg.memory_config))
        except (PlannerError, MemoryStoreError, ConfigFileNotFoundError) as err:
            raise PlannerNodeError(f"cannot load the configuration: {err}") from err
        self.planner_config: PlannerConfig = dataclasses.replace(
            base, gate=GateConfig(enabled=cfg.operator_gate, timeout_s=cfg.gate_timeout_s))
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
                reasoning = dataclasses.replace(
                    reasoning, vlm=dataclasses.replace(reasoning.vlm, backend=cfg.vlm_backend))
                self.backend = make_backend(reasoning)
            except (ConfigFileNotFoundError, ReasoningError) as err:
                raise PlannerNodeError(f"cannot build the {cfg.vlm_backend} backend: {err}") \
                    from err
        self.memory_dir: Path = data_dir(cfg.memory_dir)
        try:
            self.task = TaskMemory.open(self.memory_dir / "task.db", config=self.memory_config)
        except MemoryStoreError as err:
            raise PlannerNodeError(f"cannot open task memory: {err}") from err
        self.counters = NodeCounters(_WARN_KEYS)
        self.gate = TrackedGate(self.planner_config.gate, self._on_gate_submit)
        self.events = InteractionEventBuffer()
        self.session: NodePlannerSession | None = None
        self.recorder: RecordingPolicy | None = None
        self.primitive_executor: ActionPrimitiveExecutor | None = None
        self._session_lock = threading.Lock()
        self._service_readers: _Readers | None = None
        self._service_retriever: KeyframeRetriever | None = None
        self._service_lock = threading.Lock()
        self._busy = False
        self._busy_lock = threading.Lock()
        self._handle: ServerGoalHandle | None = None
        self._cancel_flag = threading.Event()
        self._instruction = ""
        self._step = 0
        self._pending: dict[int, _Pending] = {}
        self._pending_lock = threading.Lock()
        self._image: Image | None = None
        self._info: CameraInfo | None = None
        self._image_lock = threading.Lock()
        self._last_stamp = 0.0
        self._tf = make_transform_source(self)

        sensor_group = ReentrantCallbackGroup()
        client_group = ReentrantCallbackGroup()
        task_group = ReentrantCallbackGroup()
        gate_group = ReentrantCallbackGroup()
        memory_group = MutuallyExclusiveCallbackGroup()
        cam = cfg.planner_camera
        self.create_subscription(Image, f"cameras/{cam}/color/image_raw", self._on_image,
                                 qos.SENSOR, callback_group=sensor_group)
        self.create_subscription(CameraInfo, f"cameras/{cam}/color/camera_info", self._on_info,
                                 qos.SENSOR, callback_group=sensor_group)
        self.create_subscription(InteractionEvent, "interaction_events", self.events.add,
                                 qos.EVENTS, callback_group=sensor_group)
        self._primitive_client = ActionClient(self, ExecutePrimitive, "execute_primitive",
                                              callback_group=client_group)
        self._analyze_client = self.create_client(AnalyzeInteraction, "analyze_interaction",
                                                  callback_group=client_group)
        self._action = ActionServer(
            self, RunTask, "run_task", execute_callback=coerced(self._execute_task),
            goal_callback=self._on_goal, cancel_callback=self._on_cancel,
            callback_group=task_group)
        self.create_service(ApprovePrimitive, "approve_primitive", self._on_approve,
                            callback_group=gate_group)
        self.create_service(ListPendingPrimitives, "list_pending_primitives",
                            self._on_list_pending, callback_group=gate_group)
        self.create_service(RetrieveMemory, "retrieve_memory", coerced(self._on_retrieve),
                            callback_group=memory_group)
        self._diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", qos.EVENTS,
                                               publisher_class=FloatSafePublisher)
        self.create_timer(cfg.diagnostics_period_s, self._report, callback_group=sensor_group)
        self.get_logger().info(
            f"planner with backend {cfg.vlm_backend}, embodiment {self.embodiment}, memory "
            f"{self.memory_dir}, operator gate {'on' if cfg.operator_gate else 'off'}, "
            f"step budget {cfg.step_budget}")

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
                    session.world.close()
                    if session.keyframes is not None:
                        session.keyframes.close()
        service_lock = getattr(self, "_service_lock", None)
        if service_lock is not None:
            with service_lock:
                readers = getattr(self, "_service_readers", None)
                if readers is not None:
                    readers.world.close()
                    if readers.keyframes is not None:
                        readers.keyframes.close()
        task = getattr(self, "task", None)
        if task is not None:
            task.close()
        super().destroy_node()

    # ------------------------------------------------------------------ time, sensors
    def _now(self) -> float:
        """ROS time (simulation time under use_sim_time), never going backwards."""
        now = float(self.get_clock().now().nanoseconds) * 1e-9
        self._last_stamp = max(self._last_stamp, now)
        return self._last_stamp

    def _on_image(self, msg: Image) -> None:
        with self._image_lock:
            self._image = msg

    def _on_info(self, msg: CameraInfo) -> None:
        with self._image_lock:
            self._info = msg

    def _warn(self, key: str, text: str) -> None:
        self.counters.add(key)
        self.get_logger().warning(text, throttle_duration_sec=5.0)

    def current_observation(self) -> Observation | None:
        """The latest planner-camera image with intrinsics and pose (when known), or None."""
        with self._image_lock:
            image, info = self._image, self._info
        if image is None:
            return None
        try:
            rgb = image_to_rgb(image)
        except ImageConversionError as err:
            self._warn("bad_image", f"planner camera image unusable: {err}")
            return None
        stamp = to_seconds(image.header.stamp)
        intrinsics = None
        if info is not None:
            try:
                intrinsics = camera_info_to_intrinsics(info, rectified=self.config.rectified)
            except CameraInfoError as err:
                self._warn("bad_camera_info", f"planner camera info unusable: {err}")
            if intrinsics is not None and (intrinsics.width, intrinsics.height) != (
                    rgb.shape[1], rgb.shape[0]):
                self._warn("bad_camera_info", "planner camera info does not match the image")
                intrinsics = None
        pose = None
        frame = image.header.frame_id or self.config.planner_camera + \
            self.config.optical_frame_suffix
        try:
            pose = self._tf.lookup(self.config.map_frame, frame, stamp)
        except TransformError as err:
            self._warn("camera_pose_unavailable", f"no pose of {frame} at {stamp:.3f}: {err}")
        return Observation(rgb=rgb, intrinsics=intrinsics, camera_to_map=pose, stamp=stamp)

    def _report(self) -> None:
        self.counters.set("gate_pending", len(self.gate.pending()))
        self._diag_pub.publish(self.counters.report("planner", self.get_name()))

    # ------------------------------------------------------------------ memory
    def _open_readers(self, with_keyframes: bool = True) -> _Readers:
        world_path = self.memory_dir / "world.db"
        try:
            world = WorldMemory.open(world_path, config=self.memory_config, readonly=True,
                                     map_frame=self.config.map_frame)
        except MemoryStoreError as err:
            raise MemoryUnavailableError(
                f"world memory {world_path} cannot be read (is the scene graph node "
                f"running on this memory_dir?): {err}") from err
        keyframes = self._open_keyframes() if with_keyframes else None
        return _Readers(world, keyframes)

    def _open_keyframes(self) -> KeyframeStore | None:
        try:
            return KeyframeStore.open(self.memory_dir / "keyframes", config=self.memory_config,
                                      readonly=True)
        except MemoryStoreError as err:
            self._warn("memory_unavailable",
                       f"keyframes unavailable, planning without retrieval: {err}")
            return None

    def _retriever(self, store: KeyframeStore) -> KeyframeRetriever:
        cfg = self.planner_config
        if self.backend is None:
            return KeyframeRetriever(store, cfg.retrieval)
        reasoner = VlmRetrievalReasoner(self.backend, PromptLibrary(cfg.prompt_dir),
                                        cfg.retrieval)
        return KeyframeRetriever(store, cfg.retrieval, reasoner)

    def opens(self, node: SceneNode) -> bool:
        """Whether a node is a fixture that opens (memory first, then its label)."""
        openable = node.properties.get("openable")
        if openable is not None and isinstance(openable.value, bool):
            return openable.value
        return self.planner_config.is_openable_label(node.label)

    def _ensure_session(self) -> tuple[NodePlannerSession, RecordingPolicy,
                                       ActionPrimitiveExecutor]:
        """The planning session, created on first use (world memory must exist by then)."""
        with self._session_lock:
            if self.session is None:
                readers = self._open_readers()
                cfg = self.planner_config
                policy: PlannerPolicy | None = None
                if self.backend is not None:
                    policy = VlmPlanner(self.backend, PromptLibrary(cfg.prompt_dir),
                                        cfg.loop.prompt, cfg.loop.robot_description)
                session = NodePlannerSession(
                    readers.world, self.task, cfg, keyframes=readers.keyframes, policy=policy,
                    retriever=(self._retriever(readers.keyframes)
                               if readers.keyframes is not None else None),
                    gate=self.gate, embedder=PackagedMiniLM() if cfg.recall.use_embedder else None,
                    embodiment=self.embodiment, clock=self._now)
                recorder = RecordingPolicy(session.policy)
                session.policy = recorder
                settings = ExecutorSettings(
                    server_wait_s=self.config.server_wait_s,
                    accept_timeout_s=self.config.accept_timeout_s,
                    result_timeout_s=self.config.primitive_timeout_s,
                    event_wait_s=self.config.event_wait_s,
                    analysis_timeout_s=self.config.analysis_timeout_s,
                    analyzed_primitives=(self.config.analyzed_primitives
                                         if self.config.analyze else ()),
                    require_verification=self.config.require_verification,
                    map_frame=self.config.map_frame,
                    embodiment=self.embodiment,
                )
                self.primitive_executor = ActionPrimitiveExecutor(
                    self, self._primitive_client, self._analyze_client, self.events,
                    world=readers.world, settings=settings, holding=lambda: self.task.hand,
                    opens=self.opens,
                    observe=self.current_observation, task_text=lambda: self._instruction,
                    cancelled=self._cancel_requested)
                self.session, self.recorder = session, recorder
            elif self.session.keyframes is None:
                store = self._open_keyframes()
                if store is not None:
                    self.session.keyframes = store
                    self.session.retriever = self._retriever(store)
            assert self.recorder is not None and self.primitive_executor is not None
            return self.session, self.recorder, self.primitive_executor

    # ------------------------------------------------------------------ run_task
    def _on_goal(self, goal: RunTask.Goal) -> GoalResponse:
        with self._busy_lock:
            if self._busy:
                self.get_logger().warning(
                    f"rejecting instruction {goal.instruction!r}: a task is running")
                self.counters.add("rejected_busy")
                return GoalResponse.REJECT
            self._busy = True
        return GoalResponse.ACCEPT

    def _on_cancel(self, goal_handle: ServerGoalHandle) -> CancelResponse:
        # flag first: the denial below wakes the task loop before the goal state changes
        self._cancel_flag.set()
        denied = self.gate.deny_all("the task was canceled")
        self.get_logger().info(f"cancel requested; {denied} waiting primitive(s) denied")
        return CancelResponse.ACCEPT

    def _cancel_requested(self) -> bool:
        handle = self._handle
        return self._cancel_flag.is_set() or bool(
            handle is not None and handle.is_cancel_requested)

    @staticmethod
    def _wait_canceling(goal_handle: ServerGoalHandle, timeout_s: float = 2.0) -> bool:
        """Wait until the accepted cancel has moved the goal to CANCELING (bounded)."""
        deadline = time.monotonic() + timeout_s
        while not goal_handle.is_cancel_requested:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)
        return True

    def _feedback(self, status: str, plan: list[PlanStep] | None = None,
                  grounding: list[CandidateMsg] | None = None,
                  retrieved: list[RetrievedKeyframe] | None = None) -> None:
        handle = self._handle
        if handle is None:
            return
        handle.publish_feedback(coerce_floats(RunTask.Feedback(
            step=self._step, plan=plan or [], grounding=grounding or [],
            retrieved=retrieved or [], status=status)))

    def _step_feedback(self, record: StepRecord, session: NodePlannerSession,
                       recorder: RecordingPolicy) -> None:
        ctx = recorder.context
        plan = plan_step_msgs(recorder.answer(), session.registry.adapter.canonical)
        grounding = candidate_msgs(ctx.grounding if ctx is not None else None)
        retrieved = retrieved_msgs(ctx.retrieved, session.keyframes) if ctx is not None else []
        what = f" {record.step.describe()}" if record.step is not None else ""
        status = f"{record.outcome}{what}: {record.detail}".strip().rstrip(":")
        self._feedback(status, plan, grounding, retrieved)

    def _on_gate_submit(self, request: GateRequest) -> None:
        if not self.gate.enabled:
            return
        recorder = self.recorder
        answer = recorder.answer() if recorder is not None else None
        canonical = self.session.registry.adapter.canonical if self.session else None
        steps = plan_step_msgs(answer, canonical)
        step = steps[0] if steps else PlanStep(reasoning=request.description)
        with self._pending_lock:
            self._pending[request.request_id] = _Pending(step, self._instruction)
        self.get_logger().info(
            f"awaiting approval of request {request.request_id}: {request.description}")
        self._feedback(f"awaiting_approval request {request.request_id}: "
                       f"{request.description}", steps[:1])

    def _execute_task(self, goal_handle: ServerGoalHandle) -> RunTask.Result:
        self._handle = goal_handle
        self._cancel_flag.clear()
        try:
            result = self._run(goal_handle)
        finally:
            self._handle = None
            self._instruction = ""
            with self._busy_lock:
                self._busy = False
        if result.error_code == RunTask.Result.CANCELED and self._wait_canceling(goal_handle):
            goal_handle.canceled()
        elif result.error_code == RunTask.Result.NONE:
            goal_handle.succeed()
        else:
            goal_handle.abort()
        self.get_logger().info(
            f"task done: progress {result.progress:.0%} in {result.steps} steps, error "
            f"{result.error_code} {result.error_msg}".rstrip())
        return result

    def _run(self, goal_handle: ServerGoalHandle) -> RunTask.Result:
        request = goal_handle.request
        budget = int(request.step_budget) or self.config.step_budget
        self._step = 0
        try:
            session, recorder, executor = self._ensure_session()
        except MemoryUnavailableError as err:
            self.counters.add("memory_unavailable")
            return _result(RunTask.Result.BLOCKED, str(err))
        session.world.refresh()
        if not self._await_memory(session):
            self.get_logger().warning(
                f"world memory still holds no scene graph node after "
                f"{self.config.memory_wait_s:g} s; planning on an empty memory")
        stamp = self._now()
        stale = session.settle("superseded: left pending by an earlier run", stamp)
        if stale:
            self.get_logger().warning(f"blocked goals left pending earlier: {stale}")
        before = set(self.task.state.goals)
        self._instruction = str(request.instruction)
        try:
            session.submit(self._instruction, stamp=stamp)
        except InstructionError as err:
            self.counters.add("parse_failed")
            return _result(RunTask.Result.PARSE_FAILED, f"instruction not usable: {err}")
        code, message, calls = RunTask.Result.NONE, "", 0
        while True:
            if self._cancel_requested():
                code, message = RunTask.Result.CANCELED, "canceled by the client"
                break
            if calls >= budget:
                reason = f"step budget of {budget} planner calls exhausted"
                if session.block_active(reason, self._now()):
                    code, message = RunTask.Result.BUDGET_EXHAUSTED, reason
                break
            observation = self.current_observation()
            if observation is not None:
                session.observe(observation)
            recorder.reset()
            self._step = calls + 1
            try:
                record = session.step(executor, call=calls + 1)
            except ReasoningError as err:
                code, message = RunTask.Result.MODEL_ERROR, f"planner model failed: {err}"
                break
            except ExecutorUnavailableError as err:
                code, message = RunTask.Result.BLOCKED, f"executor unavailable: {err}"
                break
            except (PlannerError, MemoryStoreError) as err:
                code, message = RunTask.Result.BLOCKED, f"{type(err).__name__}: {err}"
                break
            if record is None:
                break
            calls += 1
            self._step_feedback(record, session, recorder)
            if self._cancel_requested():
                code, message = RunTask.Result.CANCELED, "canceled by the client"
                break
            if record.outcome == "denied":
                code, message = RunTask.Result.BLOCKED, f"primitive not approved: {record.detail}"
                break
        return self._finish(session, before, code, message, calls)

    def _await_memory(self, session: NodePlannerSession) -> bool:
        """Wait for a first perception of the scene when world memory is empty.

        A robot that has just started has not perceived anything yet; exploring an empty
        memory would block the first instruction at once ("nothing left to explore"), and
        exploring the first fixture seen would ignore the others a moment later. So an empty
        memory is waited on until it holds nodes and no new node has appeared for
        ``memory_settle_s``, at most ``memory_wait_s`` in all; a cancel ends the wait early.
        A memory that already holds nodes is used as it is.

        Returns:
            Whether memory holds a node.
        """
        if session.world.state.nodes:
            return True
        start = time.monotonic()
        deadline = start + self.config.memory_wait_s
        count, changed = 0, start
        while time.monotonic() < deadline and not self._cancel_requested():
            time.sleep(0.1)
            session.world.refresh()
            now = time.monotonic()
            if len(session.world.state.nodes) != count:
                count, changed = len(session.world.state.nodes), now
            elif count and now - changed >= self.config.memory_settle_s:
                break
        return bool(session.world.state.nodes)

    def _finish(self, session: NodePlannerSession, before: set[str], code: int, message: str,
                calls: int) -> RunTask.Result:
        if message:
            session.settle(message, self._now())
        state = self.task.state
        goals = [g for g in self.task.agenda() if g.goal_id not in before]
        statuses = []
        completed = 0
        answers = []
        entities: list[AnswerEntity] = []
        blocked = []
        for goal in goals:
            status = state.status[goal.goal_id]
            reason = state.status_reason.get(goal.goal_id, "")
            if status is GoalStatus.COMPLETED:
                completed += 1
                if goal.goal_id in state.answers:
                    answers.append(state.answers[goal.goal_id])
                entities.extend(answer_entity_msg(e)
                                for e in session.answer_entities.get(goal.goal_id, ()))
            elif status is GoalStatus.BLOCKED:
                blocked.append(f"{goal.goal_id}: {reason}")
            statuses.append(GoalStatusMsg(goal_id=goal.goal_id, description=goal.description,
                                          status=status.value, reason=reason))
        if code == RunTask.Result.NONE and blocked:
            code, message = RunTask.Result.BLOCKED, "; ".join(blocked)
        return RunTask.Result(
            progress=float(completed) / len(goals) if goals else 0.0,
            steps=calls,
            answer="; ".join(answers),
            answer_entities=entities,
            goals=statuses,
            error_code=code,
            error_msg=message,
        )

    # ------------------------------------------------------------------ operator gate
    def _on_list_pending(self, request: ListPendingPrimitives.Request,
                         response: ListPendingPrimitives.Response
                         ) -> ListPendingPrimitives.Response:
        pending = self.gate.pending()
        with self._pending_lock:
            info = {i: self._pending.get(i) for i in (r.request_id for r in pending)}
        for req in pending:
            item = info.get(req.request_id)
            response.request_ids.append(str(req.request_id))
            response.steps.append(item.step if item else PlanStep(reasoning=req.description))
            response.tasks.append(item.task if item else "")
        return response

    def _on_approve(self, request: ApprovePrimitive.Request,
                    response: ApprovePrimitive.Response) -> ApprovePrimitive.Response:
        text = request.request_id.strip()
        if not text.isdigit() or not self.gate.known(int(text)):
            response.error_code = ApprovePrimitive.Response.UNKNOWN_REQUEST
            response.error_msg = f"unknown request id {request.request_id!r}"
            return response
        request_id = int(text)
        try:
            if request.approve:
                self.gate.approve(request_id, request.reason)
            else:
                self.gate.deny(request_id, request.reason)
        except GateError as err:
            response.error_code = ApprovePrimitive.Response.ALREADY_DECIDED
            response.error_msg = str(err)
            return response
        with self._pending_lock:
            self._pending.pop(request_id, None)
        self.counters.add("gate_approved" if request.approve else "gate_denied")
        response.error_code = ApprovePrimitive.Response.NONE
        return response

    # ------------------------------------------------------------------ retrieve_memory
    def _readers_for_service(self) -> tuple[_Readers, KeyframeRetriever | None]:
        with self._service_lock:
            if self._service_readers is None:
                self._service_readers = self._open_readers()
                self._service_retriever = (self._retriever(self._service_readers.keyframes)
                                           if self._service_readers.keyframes else None)
            elif self._service_readers.keyframes is None:
                store = self._open_keyframes()
                if store is not None:
                    self._service_readers.keyframes = store
                    self._service_retriever = self._retriever(store)
            return self._service_readers, self._service_retriever

    def _on_retrieve(self, request: RetrieveMemory.Request,
                     response: RetrieveMemory.Response) -> RetrieveMemory.Response:
        text = request.task.strip()
        try:
            parsed = parse_instruction(text)
        except InstructionError as err:
            response.error_code = RetrieveMemory.Response.INVALID_REQUEST
            response.error_msg = f"task not usable: {err}"
            return response
        try:
            readers, retriever = self._readers_for_service()
        except MemoryUnavailableError as err:
            response.error_code = RetrieveMemory.Response.BACKEND_ERROR
            response.error_msg = str(err)
            return response
        world = readers.world
        world.refresh()
        unknown = [i for i in request.focus_node_ids if i not in world.state.nodes]
        if unknown:
            response.error_code = RetrieveMemory.Response.INVALID_REQUEST
            response.error_msg = f"unknown focus node ids: {', '.join(unknown)}"
            return response
        cfg = self.planner_config
        recall = GoalRecall(cfg.recall, SynonymTable(cfg.synonyms),
                            is_fixture=cfg.is_fixture_label,
                            categories=CategoryTable(cfg.categories))
        queries = [RecallQuery(obj=g.obj or g.source or "", source=g.source if g.obj else None)
                   for g in parsed.goals if (g.obj or g.source)] if parsed.symbolic else []
        if not queries:
            queries = [RecallQuery(obj=text)]
        candidates = []
        seen: set[str] = set()
        try:
            for query in queries:
                for cand in recall.recall(world.state, query, self.task.failed_bindings):
                    if cand.node_id not in seen:
                        seen.add(cand.node_id)
                        candidates.append(cand)
        except RecallError as err:
            response.error_code = RetrieveMemory.Response.INVALID_REQUEST
            response.error_msg = str(err)
            return response
        focus = list(dict.fromkeys([*request.focus_node_ids, *(c.node_id for c in candidates)]))
        summary = world.render(cfg.loop.scene_graph_chars, focus=focus)
        response.candidates = [CandidateMsg(node_id=c.node_id, score=float(c.score),
                                            evidence=[e.detail for e in c.evidence])
                               for c in candidates]
        response.scene_graph_summary = summary
        if retriever is not None:
            mentions = [m for g in parsed.goals for m in (g.obj, g.source, g.target)] \
                if parsed.symbolic else [text]
            frames_query = RetrievalQuery(text, tuple(focus), task_terms(mentions))
            try:
                result = retriever.retrieve(frames_query, summary)
            except (RetrievalError, MemoryStoreError) as err:
                response.error_code = RetrieveMemory.Response.BACKEND_ERROR
                response.error_msg = f"keyframe retrieval failed: {err}"
                return response
            frames = list(result.frames)
            if request.max_keyframes > 0:
                frames = frames[: int(request.max_keyframes)]
            response.keyframes = retrieved_msgs(frames, readers.keyframes)
        response.error_code = RetrieveMemory.Response.NONE
        return response


def main(args: list[str] | None = None) -> int:
    """Console script ``planner_node``."""
    return run_node(PlannerNode, args, threads=6)


if __name__ == "__main__":
    sys.exit(main())
