"""MuJoCo bridge node: runs one kitchen scenario and exposes it like the real robot.

The node owns one :class:`~mimir_sim.sim.KitchenSim`. A dedicated simulation thread does
everything that touches the simulator (stepping, rendering, primitives, judging), under a lock,
so the GL context of the renderers stays in one thread. When no job is queued the thread
advances the physics in small chunks, paced to ``real_time_factor``; jobs (a primitive from the
action, a service request) run in the same thread between chunks. Publishing happens through the
simulator's step listeners, so it continues while a primitive's controller steps the physics.

Published (all stamped with simulation time):

* ``cameras/<cam>/color/image_raw`` (rgb8), ``cameras/<cam>/depth/image_raw`` (32FC1 metres,
  registered to color), ``cameras/<cam>/color/camera_info`` and ground-truth
  ``cameras/<cam>/segmentation`` (mimir_msgs/Segmentation, backend ``sim_ground_truth``), every
  ``1 / camera_rate`` s of simulation time, in the frame ``<cam><optical_frame_suffix>``;
* ``/tf``: ``odom -> base_link`` (ground truth) and ``base_link -> <cam> optical frame`` for
  every camera (they move with the base and arm); ``/tf_static``: ``map -> odom`` (identity);
* ``/clock`` and ``joint_states`` (base, arm and ``gripper``: opening in m, grip force in N)
  every ``1 / state_rate`` s of simulation time;
* ``target_state`` (sensor_msgs/JointState) while an ``open``, ``close`` or ``inspect`` runs on a
  fixture with a door or drawer: one entry named by the goal's memory target id (``cabinet_2``),
  position = door angle in rad (hinge) or drawer travel in m (slide), 0 = closed; published at the
  start, every ``1 / state_rate`` s of simulation time while the controller runs, and at the end;
* ``interaction_events`` (STARTED / ENDED of each primitive) and ``/diagnostics`` (counters).

Served: action ``execute_primitive`` (move_to, open, close, inspect, pick, place through
:class:`~mimir_sim.embodiment.SimEmbodiment`), services ``sim/begin_instruction`` and
``sim/judge_instruction`` (judging from simulator state, :mod:`mimir_sim.judge`: an object
counts as discovered when its fixture was inspected while open, or when it covered at least
``discover_min_pixels`` pixels of one rendered frame's ground-truth segmentation during the
instruction; the bridge records that per instruction from every frame it renders). Action
feedback: phase ``resolve`` (progress 0), then while the controller runs a phase read from the
robot's state (``drive``: the base moves, ``grasp``/``pull``: the fingers touch something,
``arm`` otherwise; progress 0.5, the controllers do not report their own progress), then
``done`` (1). A goal can be canceled only while it waits for the simulation thread.

Localisation is ground truth: the MuJoCo world frame is ``map`` and ``odom`` coincides with it.
The node itself runs on wall time; it is the source of ``/clock`` for the other nodes.
"""

from __future__ import annotations

import os

# Offscreen rendering without a display; an explicit MUJOCO_GL in the environment wins.
os.environ.setdefault("MUJOCO_GL", "egl")

import json
import math
import queue
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import TransformStamped
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_msgs.msg import Header

from mimir.nodes.perception.messages import intrinsics_to_camera_info, segmentation_to_msg
from mimir.paths import ConfigFileNotFoundError, config_dir
from mimir.ros import qos
from mimir.ros.diagnostics import NodeCounters
from mimir.ros.floatfix import FloatSafePublisher
from mimir.ros.images import numpy_to_image
from mimir.ros.params import declare_config
from mimir.ros.runtime import run_node
from mimir.ros.tf import TransformPublisher, matrix_to_transform
from mimir.ros.time import from_seconds
from mimir_msgs.action import ExecutePrimitive
from mimir_msgs.msg import InteractionEvent, Segmentation
from mimir_msgs.srv import BeginInstruction, JudgeInstruction
from mimir_perception.camera import Intrinsics
from mimir_perception.errors import SegmentationError, VocabularyError
from mimir_perception.segmentation import SegmenterConfig, SimGroundTruthBackend
from mimir_perception.vocabulary import (
    Vocabulary,
    load_named_vocabulary,
    load_vocabulary,
)
from mimir_sim.config import SimConfig, default_sim_config_path, load_sim_config
from mimir_sim.embodiment import (
    EmbodimentError,
    JointStateReader,
    LabelMap,
    PreparedPrimitive,
    PrimitiveOutcome,
    PrimitiveRequest,
    SimEmbodiment,
    TargetSpec,
    UnknownTargetError,
    base_pose_matrix,
    build_request,
    camera_in_base,
    normalize_label,
    segmentation_tables,
    yaw_from_quaternion,
)
from mimir_sim.errors import (
    ModelDirError,
    RenderError,
    ScenarioError,
    SceneBuildError,
    SimConfigError,
)
from mimir_sim.judge import VisibilityLog, check_criterion, judge_instruction
from mimir_sim.render import CAMERAS, Frame
from mimir_sim.scenario import InstructionSpec, load_scenario
from mimir_sim.sim import BASE_JOINTS, KitchenSim

SEGMENTATION_BACKEND = "sim_ground_truth"
_RESULT_CODES = (
    "NONE",
    "UNKNOWN_PRIMITIVE",
    "UNKNOWN_TARGET",
    "PRECONDITION_FAILED",
    "UNREACHABLE",
    "EXECUTION_FAILED",
    "DENIED_BY_OPERATOR",
    "CANCELED",
)
_WARN_KEYS = ("render_failed", "segmentation_failed", "rejected", "job_failed", "sim_thread_failed")


class BridgeStartupError(RuntimeError):
    """The bridge cannot start: bad parameters, scenario, robot model or simulation settings."""


@dataclass(frozen=True)
class SimBridgeConfig:
    """Parameters of the sim bridge (defaults mirror config/params/sim_bridge.yaml)."""

    scenario: str = field(
        default="locked_unlocked",
        metadata={
            "description": "scenario name under config/scenarios or a scenario YAML path",
            "read_only": True,
        },
    )
    seed: int = field(
        default=-1,
        metadata={"description": "layout seed; -1 uses the scenario's own", "read_only": True},
    )
    tidybot_dir: str = field(
        default="",
        metadata={
            "description": "TidyBot++ model folder; empty = $MIMIR_TIDYBOT_DIR or "
            "../shared/models/tidybot",
            "read_only": True,
        },
    )
    sim_config: str = field(
        default="",
        metadata={
            "description": "controller settings YAML; empty = config/sim.yaml when present, "
            "else built-in defaults",
            "read_only": True,
        },
    )
    cameras: tuple[str, ...] = field(
        default=("base", "pole", "wrist"),
        metadata={"description": "cameras to publish (base, pole, wrist)", "read_only": True},
    )
    image_width: int = field(
        default=320, metadata={"description": "rendered image width (px)", "read_only": True}
    )
    image_height: int = field(
        default=240, metadata={"description": "rendered image height (px)", "read_only": True}
    )
    camera_rate: float = field(
        default=2.0,
        metadata={
            "description": "camera frames per second of simulation time (Hz)",
            "read_only": True,
        },
    )
    state_rate: float = field(
        default=20.0,
        metadata={
            "description": "/tf, /clock and joint_states per second of simulation time (Hz)",
            "read_only": True,
        },
    )
    real_time_factor: float = field(
        default=1.0,
        metadata={
            "description": "largest simulation speed relative to wall time; 0 = as fast "
            "as possible",
            "read_only": True,
        },
    )
    step_chunk: float = field(
        default=0.05,
        metadata={"description": "simulation time advanced per idle step (s)", "read_only": True},
    )
    grasp_noise: float = field(
        default=0.0,
        metadata={
            "description": "std-dev of the grasp target offset per axis (m); overrides "
            "the settings file",
            "read_only": True,
        },
    )
    target_tolerance: float = field(
        default=0.6,
        metadata={
            "description": "largest distance between a remembered target position and a "
            "simulated entity's box (m)",
            "read_only": True,
        },
    )
    vocabulary: str = field(
        default="kitchen",
        metadata={
            "description": "vocabulary whose labels ground-truth labels map to (name or "
            "YAML path); empty keeps the simulator's labels",
            "read_only": True,
        },
    )
    segmentation: bool = field(
        default=True,
        metadata={"description": "publish ground-truth segmentation", "read_only": True},
    )
    min_segment_pixels: int = field(
        default=20,
        metadata={
            "description": "instances with fewer pixels are left out (px)",
            "read_only": True,
        },
    )
    discover_min_pixels: int = field(
        default=150,
        metadata={
            "description": "an object covering at least this many pixels of one rendered "
            "frame's ground-truth segmentation during an instruction counts as discovered when "
            "judging it (px at image_width x image_height); 0 counts only inspections",
            "read_only": True,
        },
    )
    map_frame: str = field(default="map", metadata={"description": "map frame", "read_only": True})
    odom_frame: str = field(
        default="odom", metadata={"description": "odometry frame", "read_only": True}
    )
    base_frame: str = field(
        default="base_link", metadata={"description": "robot base frame", "read_only": True}
    )
    optical_frame_suffix: str = field(
        default="_color_optical_frame",
        metadata={
            "description": "camera optical frame = camera name + this suffix",
            "read_only": True,
        },
    )
    diagnostics_period: float = field(
        default=1.0,
        metadata={"description": "period of the /diagnostics report (wall s)", "read_only": True},
    )

    def __post_init__(self) -> None:
        unknown = [c for c in self.cameras if c not in CAMERAS]
        if unknown or len(set(self.cameras)) != len(self.cameras):
            raise ValueError(
                f"cameras must be distinct names from {CAMERAS}, got {list(self.cameras)}"
            )
        if not (0 < self.image_width <= 1280 and 0 < self.image_height <= 960):
            raise ValueError(
                f"image size must lie within 1x1..1280x960, got "
                f"{self.image_width}x{self.image_height}"
            )
        for name in (
            "camera_rate",
            "state_rate",
            "step_chunk",
            "target_tolerance",
            "diagnostics_period",
        ):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0.0):
                raise ValueError(f"{name} must be a positive number, got {value}")
        for name in ("real_time_factor", "grasp_noise"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0.0):
                raise ValueError(f"{name} must be a number >= 0, got {value}")
        if self.min_segment_pixels < 1:
            raise ValueError(f"min_segment_pixels must be >= 1, got {self.min_segment_pixels}")
        if self.discover_min_pixels < 0:
            raise ValueError(f"discover_min_pixels must be >= 0, got {self.discover_min_pixels}")
        if not all((self.map_frame, self.odom_frame, self.base_frame, self.optical_frame_suffix)):
            raise ValueError("frame names must not be empty")


def _resolve_vocabulary(value: str) -> Vocabulary | None:
    if not value:
        return None
    try:
        if value.endswith((".yaml", ".yml")) or "/" in value:
            return load_vocabulary(Path(value).expanduser())
        return load_named_vocabulary(value, config_dir())
    except (VocabularyError, ConfigFileNotFoundError) as err:
        raise BridgeStartupError(f"cannot load vocabulary {value!r}: {err}") from err


def _sim_settings(cfg: SimBridgeConfig) -> SimConfig:
    path = Path(cfg.sim_config).expanduser() if cfg.sim_config else default_sim_config_path()
    try:
        base = load_sim_config(path) if cfg.sim_config or path.is_file() else SimConfig()
    except SimConfigError as err:
        raise BridgeStartupError(f"bad simulation settings {path}: {err}") from err
    seed = cfg.seed if cfg.seed >= 0 else base.seed
    return replace(base, grasp_noise=cfg.grasp_noise, seed=seed)


def build_sim(cfg: SimBridgeConfig) -> KitchenSim:
    """Load the scenario and build the simulator, with startup errors as one clear type.

    Raises:
        BridgeStartupError: unknown or malformed scenario, missing robot model, a scene MuJoCo
            rejects, or bad simulation settings.
    """
    try:
        scenario = load_scenario(cfg.scenario)
    except ScenarioError as err:
        raise BridgeStartupError(f"cannot load scenario {cfg.scenario!r}: {err}") from err
    tidybot = Path(cfg.tidybot_dir).expanduser() if cfg.tidybot_dir else None
    try:
        return KitchenSim.from_scenario(
            scenario, tidybot, cfg.seed if cfg.seed >= 0 else None, _sim_settings(cfg)
        )
    except (ModelDirError, SceneBuildError) as err:
        raise BridgeStartupError(f"cannot build scenario {scenario.name!r}: {err}") from err


@dataclass
class _Job:
    """Work for the simulation thread; the caller waits on ``done``."""

    run: Callable[[], Any]
    done: threading.Event = field(default_factory=threading.Event)
    result: Any = None
    error: Exception | None = None


@dataclass
class _Active:
    """The primitive being executed (read by the state listener for feedback)."""

    goal: ServerGoalHandle
    primitive: str
    prepared: PreparedPrimitive | None = None
    last_feedback: float = -math.inf


def _time_msg(seconds: float) -> Time:
    return from_seconds(max(0.0, seconds))


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
        vocabulary = _resolve_vocabulary(cfg.vocabulary)
        label_map = (
            LabelMap((e.label, e.prompt) for e in vocabulary.entries) if vocabulary else LabelMap()
        )
        self.sim = build_sim(cfg)
        self.embodiment = SimEmbodiment(self.sim, cfg.target_tolerance, label_map)
        self._joints = JointStateReader(self.sim)
        self._base_dofs = [self.sim.model.joint(n).dofadr[0] for n in BASE_JOINTS[:2]]
        self._label_map = label_map
        self._seg_ids: tuple[str, ...] = ()
        self._segmenter = self._ground_truth(tuple(sorted(self.sim.scene.entities)))
        self.counters = NodeCounters(_WARN_KEYS)
        self._lock = threading.Lock()
        self._jobs: queue.Queue[_Job] = queue.Queue()
        self._stop = threading.Event()
        self._active: _Active | None = None
        self._interactions = 0
        self._last_tf = -1.0
        self._pace_anchor: tuple[float, float] | None = None
        self.visibility = VisibilityLog()
        self._objects = frozenset(self.sim.scene.objects)

        self._optical = {cam: cam + cfg.optical_frame_suffix for cam in cfg.cameras}
        self._color_pubs = {
            c: self.create_publisher(Image, f"cameras/{c}/color/image_raw", qos.SENSOR,
                                     publisher_class=FloatSafePublisher)
            for c in cfg.cameras
        }
        self._depth_pubs = {
            c: self.create_publisher(Image, f"cameras/{c}/depth/image_raw", qos.SENSOR,
                                     publisher_class=FloatSafePublisher)
            for c in cfg.cameras
        }
        self._info_pubs = {
            c: self.create_publisher(CameraInfo, f"cameras/{c}/color/camera_info", qos.SENSOR,
                                     publisher_class=FloatSafePublisher)
            for c in cfg.cameras
        }
        self._seg_pubs = {
            c: self.create_publisher(Segmentation, f"cameras/{c}/segmentation", qos.SENSOR,
                                     publisher_class=FloatSafePublisher)
            for c in cfg.cameras
        }
        self._clock_pub = self.create_publisher(Clock, "/clock", qos.EVENTS,
                                                publisher_class=FloatSafePublisher)
        self._joint_pub = self.create_publisher(JointState, "joint_states", qos.EVENTS,
                                                publisher_class=FloatSafePublisher)
        self._target_state_pub = self.create_publisher(JointState, "target_state", qos.EVENTS,
                                                       publisher_class=FloatSafePublisher)
        self._events_pub = self.create_publisher(InteractionEvent, "interaction_events",
                                                 qos.EVENTS, publisher_class=FloatSafePublisher)
        self._diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", qos.EVENTS,
                                               publisher_class=FloatSafePublisher)
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

        self._thread = threading.Thread(target=self._sim_loop, name="sim_bridge", daemon=True)
        self._thread.start()
        scenario = self.sim.scene.scenario
        self.get_logger().info(
            f"simulating {scenario.name!r} (seed {self.sim.scene.seed}, "
            f"{len(self.sim.scene.fixtures)} fixtures, {len(self.sim.scene.objects)} objects); "
            f"cameras {', '.join(cfg.cameras)} at {cfg.camera_rate} Hz, "
            f"{cfg.image_width}x{cfg.image_height}; real-time factor "
            f"{cfg.real_time_factor or 'unlimited'}"
        )

    # ------------------------------------------------------------------ simulation thread

    def _sim_loop(self) -> None:
        cfg = self.config
        try:
            with self._lock:
                self._tf_static.send(
                    [matrix_to_transform(np.eye(4), cfg.map_frame, cfg.odom_frame, self.sim.time)]
                )
                self.sim.add_step_listener(self._on_state, 1.0 / cfg.state_rate)
                self.sim.add_step_listener(self._on_cameras, 1.0 / cfg.camera_rate)
                self._on_state(self.sim.time)
                self._on_cameras(self.sim.time)
            while not self._stop.is_set():
                try:
                    job = self._jobs.get_nowait()
                except queue.Empty:
                    with self._lock:
                        self.sim.step_seconds(cfg.step_chunk)
                    continue
                self._run_job(job)
        except Exception as err:
            if self._stop.is_set() or not self.context.ok():
                # shutting down (Ctrl-C shuts the context down before destroy_node stops this
                # thread): a publish into the closed context is the end, not a failure
                return
            # nothing can catch it above this thread: log it loudly; jobs then fail with a reason
            self.counters.add("sim_thread_failed")
            self.get_logger().error(f"simulation thread stopped: {type(err).__name__}: {err}")
            raise
        finally:
            with self._lock:
                self.sim.shutdown()
            while not self._jobs.empty():
                job = self._jobs.get_nowait()
                job.error = BridgeStartupError("the sim bridge is shutting down")
                job.done.set()

    def _run_job(self, job: _Job) -> None:
        try:
            with self._lock:
                job.result = job.run()
        except Exception as err:  # noqa: BLE001 - handed to the waiting callback, which re-raises
            self.counters.add("job_failed")
            job.error = err
        finally:
            self._pace_anchor = None  # a job's wall time must not be caught up afterwards
            job.done.set()

    def _submit(self, run: Callable[[], Any]) -> Any:
        """Run ``run`` in the simulation thread and return its result (re-raising its error)."""
        job = _Job(run)
        self._jobs.put(job)
        while not job.done.wait(0.2):
            if not self._thread.is_alive():
                raise BridgeStartupError("the simulation thread stopped before the request ran")
        if job.error is not None:
            raise job.error
        return job.result

    def _pace(self, sim_time: float) -> None:
        """Sleep so simulation time runs at most ``real_time_factor`` times wall time."""
        rtf = self.config.real_time_factor
        if rtf <= 0.0 or self._stop.is_set():
            return
        now = time.monotonic()
        anchor = self._pace_anchor
        if anchor is None or sim_time < anchor[1]:
            self._pace_anchor = (now, sim_time)
            return
        due = anchor[0] + (sim_time - anchor[1]) / rtf
        if due > now:
            time.sleep(min(due - now, 1.0))
        elif now - due > 1.0:
            self._pace_anchor = (now, sim_time)  # fell behind (rendering): do not race to catch up

    # ------------------------------------------------------------------ step listeners

    def _header(self, stamp: float, frame: str) -> Header:
        return Header(stamp=_time_msg(stamp), frame_id=frame)

    def _publish_tf(self, stamp: float) -> None:
        if stamp <= self._last_tf:
            return
        self._last_tf = stamp
        cfg = self.config
        transforms: list[TransformStamped] = [
            matrix_to_transform(base_pose_matrix(self.sim), cfg.odom_frame, cfg.base_frame, stamp)
        ]
        for cam in cfg.cameras:
            transforms.append(
                matrix_to_transform(
                    camera_in_base(self.sim, cam), cfg.base_frame, self._optical[cam], stamp
                )
            )
        self._tf.send(transforms)

    def _on_state(self, stamp: float) -> None:
        """State listener: /clock, /tf, joint_states and action feedback."""
        self._clock_pub.publish(Clock(clock=_time_msg(stamp)))
        self._publish_tf(stamp)
        positions, velocities, efforts = self._joints.read()
        self._joint_pub.publish(
            JointState(
                header=self._header(stamp, self.config.base_frame),
                name=list(self._joints.names),
                position=positions,
                velocity=velocities,
                effort=efforts,
            )
        )
        self.counters.add("state.published")
        active = self._active
        if active is not None:
            self._publish_target_state(active, stamp)
        if active is not None and stamp - active.last_feedback >= 0.5:
            active.last_feedback = stamp
            active.goal.publish_feedback(
                ExecutePrimitive.Feedback(phase=self._phase(active.primitive), progress=0.5)
            )
        self._pace(stamp)

    def _publish_target_state(self, active: _Active, stamp: float) -> None:
        """Joint state of the fixture the running primitive acts on (nothing for others)."""
        if active.prepared is None:
            return
        state = self.embodiment.target_joint_state(active.prepared)
        if state is None:
            return
        self._target_state_pub.publish(
            JointState(
                header=self._header(stamp, self.config.map_frame),
                name=[state.target_id],
                position=[state.position],
            )
        )
        self.counters.add("target_state.published")

    def _phase(self, primitive: str) -> str:
        """Phase of a running primitive read from the robot's state (not from the controller)."""
        base_speed = float(np.linalg.norm(self.sim.data.qvel[self._base_dofs]))
        if base_speed > 0.05:
            return "drive"
        if self.sim.finger_contacts():
            return "pull" if primitive in ("open", "close") else "grasp"
        return "arm"

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
                self.counters.add(f"{cam}.render_failed")
                self.get_logger().warning(f"{cam}: render failed: {err}", throttle_duration_sec=5.0)
                continue
            self._publish_frame(cam, frame)

    def _ground_truth(self, entity_ids: tuple[str, ...]) -> SimGroundTruthBackend:
        """Ground-truth backend for the renderer's entity order (render index -> entity)."""
        labels, groups = segmentation_tables(entity_ids, self.sim.scene.entities, self._label_map)
        self._seg_ids = entity_ids
        return SimGroundTruthBackend(
            labels, groups, SegmenterConfig(min_pixels=self.config.min_segment_pixels)
        )

    def _publish_frame(self, cam: str, frame: Frame) -> None:
        header = self._header(frame.stamp, self._optical[cam])
        info = frame.info
        if frame.color is not None:
            self._color_pubs[cam].publish(numpy_to_image(frame.color, "rgb8", header))
        if frame.depth is not None:
            self._depth_pubs[cam].publish(numpy_to_image(frame.depth, "32FC1", header))
        intrinsics = Intrinsics(info.fx, info.fy, info.cx, info.cy, info.width, info.height)
        self._info_pubs[cam].publish(intrinsics_to_camera_info(intrinsics, header))
        if frame.segmentation is not None and self.config.discover_min_pixels > 0:
            try:
                self.visibility.add_frame(
                    self.sim.instruction, frame.segmentation, frame.entity_ids, self._objects
                )
            except ValueError as err:
                self.counters.add(f"{cam}.segmentation_failed")
                self.get_logger().warning(
                    f"{cam}: visibility not recorded: {err}", throttle_duration_sec=5.0
                )
        if frame.segmentation is not None and self.config.segmentation:
            if frame.entity_ids != self._seg_ids:
                self._segmenter = self._ground_truth(frame.entity_ids)
            try:
                result = self._segmenter.segment_ids(
                    frame.segmentation, stamp=frame.stamp, camera=cam
                )
            except SegmentationError as err:
                self.counters.add(f"{cam}.segmentation_failed")
                self.get_logger().warning(
                    f"{cam}: segmentation failed: {err}", throttle_duration_sec=5.0
                )
            else:
                self._seg_pubs[cam].publish(
                    segmentation_to_msg(result, header, SEGMENTATION_BACKEND, cam)
                )
        self.counters.add(f"{cam}.frames")

    # ------------------------------------------------------------------ execute_primitive

    def _request(self, goal: Any) -> PrimitiveRequest:
        params = {kv.key.strip(): kv.value for kv in goal.parameters}
        position: tuple[float, float, float] | None = None
        yaw: float | None = None
        if goal.use_target_pose:
            frame = goal.target_pose.header.frame_id
            if frame not in ("", self.config.map_frame, self.config.odom_frame):
                raise _RequestError(
                    ExecutePrimitive.Result.UNKNOWN_TARGET,
                    f"target_pose must be in {self.config.map_frame!r}, got {frame!r}",
                )
            p, q = goal.target_pose.pose.position, goal.target_pose.pose.orientation
            position = (float(p.x), float(p.y), float(p.z))
            yaw = yaw_from_quaternion(q.x, q.y, q.z, q.w)
        try:
            return build_request(goal.primitive, goal.target_id, position, yaw, params)
        except EmbodimentError as err:
            raise _RequestError(getattr(ExecutePrimitive.Result, err.code), str(err)) from err

    def _execute(self, goal_handle: ServerGoalHandle) -> ExecutePrimitive.Result:
        goal = goal_handle.request
        try:
            request = self._request(goal)
            result = self._submit(lambda: self._run_primitive(goal_handle, request))
        except _RequestError as err:
            result = self._refusal(err.code, err.message)
        except BridgeStartupError as err:
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
        active = self._active
        if active is not None and active.goal is goal_handle:
            return CancelResponse.REJECT
        return CancelResponse.ACCEPT

    def _refusal(self, code: int, message: str) -> ExecutePrimitive.Result:
        names = {int(getattr(ExecutePrimitive.Result, n)): n for n in _RESULT_CODES}
        self.counters.add(f"rejected.{names.get(int(code), code)}")
        self.get_logger().warning(f"primitive refused: {message}", throttle_duration_sec=1.0)
        return ExecutePrimitive.Result(
            success=False, outcome="REFUSED", error_code=code, error_msg=message
        )

    def _run_primitive(
        self, goal_handle: ServerGoalHandle, request: PrimitiveRequest
    ) -> ExecutePrimitive.Result:
        """Runs in the simulation thread: check, announce, execute, announce, report."""
        if goal_handle.is_cancel_requested:
            return ExecutePrimitive.Result(
                success=False,
                outcome="CANCELED",
                error_code=ExecutePrimitive.Result.CANCELED,
                error_msg="canceled before it started",
            )
        goal_handle.publish_feedback(ExecutePrimitive.Feedback(phase="resolve", progress=0.0))
        try:
            prepared = self.embodiment.prepare(request)
        except EmbodimentError as err:
            return self._refusal(getattr(ExecutePrimitive.Result, err.code), str(err))
        goal = goal_handle.request
        self._interactions += 1
        start = self.sim.time
        interaction_id = f"sim_{request.primitive}_{self._interactions:04d}_{round(start * 1000)}"
        self._publish_event(goal, interaction_id, InteractionEvent.PHASE_STARTED, start, None)
        self.counters.add("primitives.started")
        active = _Active(goal_handle, request.primitive, prepared)
        self._active = active
        self._publish_target_state(active, start)
        try:
            outcome = self.embodiment.run(prepared)
            self._publish_target_state(active, self.sim.time)
        finally:
            self._active = None
        self._publish_event(goal, interaction_id, InteractionEvent.PHASE_ENDED, start, outcome)
        self.counters.add("primitives.succeeded" if outcome.success else "primitives.failed")
        goal_handle.publish_feedback(ExecutePrimitive.Feedback(phase="done", progress=1.0))
        self.get_logger().info(
            f"{request.primitive}({request.target.describe()} -> {prepared.sim_target or 'pose'}"
            f"{' -> ' + prepared.destination if prepared.destination else ''}): "
            f"{outcome.outcome} ({outcome.message})"
        )
        return ExecutePrimitive.Result(
            success=outcome.success,
            outcome=outcome.outcome,
            interaction_id=interaction_id,
            window_start=_time_msg(start),
            window_end=_time_msg(outcome.end),
            error_code=(
                ExecutePrimitive.Result.NONE
                if outcome.success
                else ExecutePrimitive.Result.EXECUTION_FAILED
            ),
            error_msg="" if outcome.success else outcome.message,
        )

    def _publish_event(
        self,
        goal: Any,
        interaction_id: str,
        phase: int,
        start: float,
        outcome: PrimitiveOutcome | None,
    ) -> None:
        end = outcome.end if outcome is not None else start
        event = InteractionEvent(
            header=self._header(end, self.config.map_frame),
            interaction_id=interaction_id,
            phase=phase,
            primitive=normalize_label(goal.primitive).replace(" ", "_"),
            target_id=goal.target_id,
            task=goal.task,
            window_start=_time_msg(start),
        )
        if goal.use_target_pose:
            event.target_pose = goal.target_pose.pose
        if outcome is not None:
            event.window_end = _time_msg(outcome.end)
            event.success = outcome.success
            event.outcome = outcome.outcome
            event.message = outcome.message
        self._events_pub.publish(event)

    # ------------------------------------------------------------------ instructions

    def _instruction(self, index: int) -> InstructionSpec | None:
        instructions = self.sim.scene.scenario.instructions
        return instructions[index] if 0 <= index < len(instructions) else None

    def _on_begin(
        self, request: BeginInstruction.Request, response: BeginInstruction.Response
    ) -> BeginInstruction.Response:
        try:
            return self._submit(lambda: self._begin(request, response))
        except BridgeStartupError as err:
            response.error_code = BeginInstruction.Response.UNKNOWN_INSTRUCTION
            response.error_msg = str(err)
            return response

    def _begin(
        self, request: BeginInstruction.Request, response: BeginInstruction.Response
    ) -> BeginInstruction.Response:
        instruction = self._instruction(request.index)
        count = len(self.sim.scene.scenario.instructions)
        if instruction is None:
            response.error_code = BeginInstruction.Response.UNKNOWN_INSTRUCTION
            response.error_msg = f"instruction {request.index} does not exist ({count} in all)"
            return response
        text = request.instruction.strip()
        if text and normalize_label(text) != normalize_label(instruction.text):
            response.error_code = BeginInstruction.Response.MISMATCH
            response.error_msg = (
                f"instruction {request.index} is {instruction.text!r}, not {text!r}"
            )
            return response
        if request.reset_robot:
            start = instruction.start_at or self.sim.scene.scenario.start_at
            if start is not None:
                # the return trip belongs to no instruction, so judging never counts it
                self.sim.instruction = None
                reached = self.sim.move_to(start).reached
                self.embodiment.last_moved_to = start if reached else None
        self.sim.begin_instruction(request.index)
        self.counters.add("instructions.begun")
        response.error_code = BeginInstruction.Response.NONE
        return response

    def _on_judge(
        self, request: JudgeInstruction.Request, response: JudgeInstruction.Response
    ) -> JudgeInstruction.Response:
        try:
            return self._submit(lambda: self._judge(request, response))
        except BridgeStartupError as err:
            response.error_code = JudgeInstruction.Response.UNKNOWN_INSTRUCTION
            response.error_msg = str(err)
            return response

    def _judge(
        self, request: JudgeInstruction.Request, response: JudgeInstruction.Response
    ) -> JudgeInstruction.Response:
        instruction = self._instruction(request.index)
        if instruction is None:
            count = len(self.sim.scene.scenario.instructions)
            response.error_code = JudgeInstruction.Response.UNKNOWN_INSTRUCTION
            response.error_msg = f"instruction {request.index} does not exist ({count} in all)"
            return response
        answer = [str(a) for a in request.answer]
        bound: dict[str, str] = {}
        for entity in request.answer_entities:
            name = entity.node_id or entity.label
            target = TargetSpec(
                entity.node_id,
                entity.label,
                (entity.position.x, entity.position.y, entity.position.z)
                if entity.has_position
                else None,
            )
            try:
                sim_id = self.embodiment.resolve(target)
            except UnknownTargetError as err:
                bound[name] = f"unbound: {err}"
                continue
            bound[name] = sim_id
            answer.append(sim_id)
        visible = (
            self.visibility.visible(request.index, self.config.discover_min_pixels)
            if self.config.discover_min_pixels > 0
            else {}
        )
        verdict = judge_instruction(self.sim, instruction, request.index, answer, visible)
        criteria: list[dict[str, Any]] = []
        holding = 0
        for group, crits in (("success", instruction.success), ("failure", instruction.failure)):
            for crit in crits:
                hit, reason = check_criterion(self.sim, crit, request.index, answer, visible)
                satisfied = hit if group == "success" else not hit
                holding += int(satisfied)
                criteria.append(
                    {
                        "group": group,
                        "type": crit.type,
                        "fixture": crit.fixture,
                        "object": crit.object,
                        "answer": list(crit.answer),
                        "holds": hit,
                        "satisfied": satisfied,
                        "reason": reason,
                    }
                )
        total = len(criteria)
        response.success = verdict.success
        response.progress = float(holding / total) if total else (1.0 if verdict.success else 0.0)
        response.details_json = json.dumps(
            {
                "index": request.index,
                "instruction": instruction.text,
                "family": instruction.family,
                "success": verdict.success,
                "sim_time": self.sim.time,
                "criteria": criteria,
                "answer_bound": bound,
                "visible_objects": visible,
            }
        )
        response.error_code = JudgeInstruction.Response.NONE
        self.counters.add("instructions.judged")
        return response

    # ------------------------------------------------------------------ diagnostics, shutdown

    def _report(self) -> None:
        self.counters.set("sim_time_ms", round(self.sim.time * 1000))
        array = self.counters.report(self.get_fully_qualified_name(), self.sim.scene.scenario.name)
        array.header.stamp = self.get_clock().now().to_msg()
        self._diag_pub.publish(array)

    def destroy_node(self) -> None:
        """Stop the simulation thread (it releases the renderers), then destroy the node.

        A node whose constructor failed may have neither the stop flag nor the thread.
        """
        stop = getattr(self, "_stop", None)
        if stop is not None:
            stop.set()
        thread = getattr(self, "_thread", None)
        if thread is not None and thread.is_alive():
            thread.join(timeout=60.0)
        super().destroy_node()


class _RequestError(Exception):
    """A goal refused while converting it (carries the result code)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def main(args: list[str] | None = None) -> int:
    """Run the sim bridge node."""
    return run_node(SimBridgeNode, args, threads=4)


if __name__ == "__main__":
    sys.exit(main())
