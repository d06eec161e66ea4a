"""The analyzer node's sensor side: message converters and the buffers of an action window.

:class:`WindowRecorder` keeps, per camera, colour frames with their registered depth and the
newest camera info, and keeps gripper readings, fixture joint states and 3D detections; asked
for a window it converts the buffered messages into the reasoning core's records, looking up
camera and base poses in TF at each stamp.

The analyzer reads fixture joint states on ``target_state`` (sensor_msgs/JointState) where the
embodiment reports them: each entry's name is a memory node id (``cabinet_2``), its position the
opening (door angle in rad, drawer travel in m; 0 = closed), the header stamp the time of the
reading. The joint type follows the node's label (from memory; for ids memory does not hold yet,
the id without its ``_<number>`` suffix): labels in ``prismatic_labels`` slide (metres), every
other fixture turns on a hinge (radians). The samples inside a window become the analyzer's
``FixtureStateSample``s, from which the reasoning core measures how far the fixture moved.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np
from geometry_msgs.msg import PoseStamped
from scipy.spatial.transform import Rotation
from sensor_msgs.msg import CameraInfo, Image, JointState

from mimir.nodes.perception.messages import CameraInfoError, camera_info_to_intrinsics
from mimir.nodes.planner.analyzer_params import AnalyzerNodeConfig
from mimir.ros.images import ImageConversionError, depth_to_metres, image_to_rgb
from mimir.ros.tf import TransformSource, lookup_waiting
from mimir.ros.time import to_seconds
from mimir.transforms import TransformError
from mimir_msgs.msg import ObjectObservationArray
from mimir_perception.frames import FrameBuffer, PairedFrames
from mimir_planner.reasoning import (
    ActionWindow,
    CameraFrame,
    Detection3D,
    FixtureStateSample,
    RobotStateSample,
)
from mimir_planner.reasoning.errors import EvidenceError
from mimir_planner.reasoning.window import (
    GripperReading,
    contract_gripper_readings,
    robot_states,
    spread,
)

#: colour frames of one camera with their depth images and camera info (messages)
CameraStream = PairedFrames[Image, Image, CameraInfo]
Warn = Callable[[str, str], None]


def gripper_reading(msg: JointState, joint: str) -> GripperReading | None:
    """The gripper joint of a joint state message; None when the message does not carry it.

    Raises:
        ValueError: the gripper entry is present but not finite or the opening is negative.
    """
    try:
        index = list(msg.name).index(joint)
    except ValueError:
        return None
    if index >= len(msg.position):
        raise ValueError(f"joint state names '{joint}' but carries no position for it")
    opening = float(msg.position[index])
    effort = float(msg.effort[index]) if index < len(msg.effort) else 0.0
    if not (math.isfinite(opening) and math.isfinite(effort)):
        raise ValueError(f"gripper joint '{joint}' is not finite")
    if opening < 0.0:
        raise ValueError(f"gripper opening {opening} m is negative")
    return GripperReading(opening, effort)


def fixture_samples(
    msg: JointState, joint_type: Callable[[str], str]
) -> tuple[list[FixtureStateSample], list[str]]:
    """Fixture joint readings of a ``target_state`` message.

    Args:
        msg: one entry per fixture: name = memory node id, position = opening (rad or m).
        joint_type: ``prismatic`` or ``revolute`` for a node id.

    Returns:
        (samples, problems): the valid readings, and one text per entry left out (no name,
        no position, a non-finite value).
    """
    stamp = to_seconds(msg.header.stamp)
    samples: list[FixtureStateSample] = []
    problems: list[str] = []
    for index, name in enumerate(msg.name):
        if not name.strip():
            problems.append(f"entry {index} has no name")
            continue
        if index >= len(msg.position):
            problems.append(f"'{name}' carries no position")
            continue
        kind = joint_type(name)
        try:
            samples.append(FixtureStateSample(
                fixture_id=name.strip(), stamp=stamp, position=float(msg.position[index]),
                joint_type="prismatic" if kind == "prismatic" else "revolute"))
        except EvidenceError as err:
            problems.append(f"'{name}': {err}")
    return samples, problems


def detections_from_msg(msg: ObjectObservationArray) -> tuple[list[Detection3D], int]:
    """3D observations as detections; returns (detections, number skipped as invalid)."""
    found: list[Detection3D] = []
    skipped = 0
    for obs in msg.observations:
        stamp = to_seconds(obs.header.stamp) or to_seconds(msg.header.stamp)
        score = float(obs.score)
        try:
            found.append(
                Detection3D(
                    label=obs.label,
                    position=np.array([obs.centroid.x, obs.centroid.y, obs.centroid.z]),
                    score=min(max(score, 0.0), 1.0) if math.isfinite(score) else math.nan,
                    stamp=stamp,
                    camera=obs.camera or msg.camera,
                    ref=obs.detection_id,
                )
            )
        except EvidenceError:
            skipped += 1
    return found, skipped


class WindowRecorder:
    """Buffers of every stream an action window is made of, and their conversion.

    Args:
        config: the analyzer's parameters.
        tf: transform source with ``lookup(target, source, stamp) -> 4x4``.
        warn: ``warn(counter, text)`` reports a problem (counted, logged).
        count: ``count(counter)`` counts a kept colour frame (``frames.<camera>``).
    """

    def __init__(self, config: AnalyzerNodeConfig, tf: TransformSource, warn: Warn,
                 count: Callable[[str], None]) -> None:
        self.config = cfg = config
        self.tf = tf
        self._warn = warn
        self._count = count
        self.streams: dict[str, CameraStream] = {
            cam: PairedFrames(cfg.buffer_seconds, cfg.frame_min_period_s, cfg.depth_tolerance_s)
            for cam in cfg.cameras
        }
        self.gripper: FrameBuffer[GripperReading] = FrameBuffer(cfg.buffer_seconds)
        self.gripper_position: FrameBuffer[float] = FrameBuffer(cfg.buffer_seconds)
        self.hand: FrameBuffer[np.ndarray] = FrameBuffer(cfg.buffer_seconds)
        self.fixture_states: FrameBuffer[FixtureStateSample] = FrameBuffer(cfg.buffer_seconds)
        self.detections: FrameBuffer[Detection3D] = FrameBuffer(cfg.buffer_seconds)

    def on_color(self, camera: str, msg: Image) -> None:
        """Buffers a colour image (empty ones are refused, counted)."""
        if msg.height < 2 or msg.width < 2 or not msg.data:
            self._warn("bad_image", f"ignoring an empty {camera} colour image")
            return
        if self.streams[camera].add_color(to_seconds(msg.header.stamp), msg):
            self._count(f"frames.{camera}")

    def on_depth(self, camera: str, msg: Image) -> None:
        """Buffers a registered depth image (16UC1, mono16 or 32FC1)."""
        if msg.encoding not in ("16UC1", "mono16", "32FC1") or not msg.data:
            self._warn("bad_depth", f"ignoring {camera} depth with encoding {msg.encoding!r}")
            return
        self.streams[camera].add_depth(to_seconds(msg.header.stamp), msg)

    def on_joint_state(self, msg: JointState) -> None:
        """Buffers the gripper reading of a joint state, if it carries one."""
        try:
            reading = gripper_reading(msg, self.config.gripper_joint)
        except ValueError as err:
            self._warn("bad_joint_state", f"ignoring a joint state: {err}")
            return
        if reading is not None:
            self.gripper.add(to_seconds(msg.header.stamp), reading)

    def on_gripper(self, stamp: float, position: float) -> None:
        """Buffers a contract gripper reading (0 open .. 1 closed) received at ``stamp``."""
        if not math.isfinite(position) or not -0.05 <= position <= 1.05:
            self._warn("bad_gripper", f"ignoring a gripper reading of {position!r}")
            return
        self.gripper_position.add(stamp, min(max(position, 0.0), 1.0))

    def on_hand(self, msg: PoseStamped) -> None:
        """Buffers the achieved end-effector position (robot contract, in the base frame)."""
        p = msg.pose.position
        point = np.array([p.x, p.y, p.z], dtype=np.float64)
        if not np.all(np.isfinite(point)) or (
                msg.header.frame_id and msg.header.frame_id != self.config.base_frame):
            self._warn("bad_hand_pose", f"ignoring a hand pose in {msg.header.frame_id!r}")
            return
        self.hand.add(to_seconds(msg.header.stamp), point)

    def hand_position(self, stamp: float) -> tuple[float, float, float] | None:
        """The achieved hand position in the map near ``stamp`` (within 0.15 s), or None."""
        near = self.hand.window(stamp - 0.15, stamp + 0.15)
        if not near:
            return None
        when, point = min(near, key=lambda entry: abs(entry[0] - stamp))
        try:
            mat = np.asarray(self.tf.lookup(self.config.map_frame, self.config.base_frame, when))
        except TransformError:
            return None
        x, y, z = mat[:3, :3] @ point + mat[:3, 3]
        return float(x), float(y), float(z)

    def wait_for_frames(self, until: float) -> None:
        """Waits (bounded, ``frame_wait_s``) until every camera delivered a frame past ``until``."""
        deadline = time.monotonic() + self.config.frame_wait_s
        while True:
            latest = [s.latest_stamp() for s in self.streams.values()]
            seen = [t for t in latest if t is not None]
            if seen and all(t >= until for t in seen):
                return
            if time.monotonic() >= deadline:
                return
            time.sleep(0.02)

    def camera_pose(self, camera: str, frame_id: str, stamp: float,
                    deadline: float) -> np.ndarray | None:
        """Pose of a frame's optical frame in the map at its stamp.

        A stamp beyond the buffered transforms (TF of the newest frames can trail the images)
        is retried until ``deadline`` (monotonic s), which all frames of a window share.
        """
        frame = frame_id or f"{camera}{self.config.optical_frame_suffix}"
        try:
            return np.asarray(lookup_waiting(self.tf, self.config.map_frame, frame, stamp,
                                             deadline=deadline))
        except TransformError as err:
            self._warn("camera_pose_unavailable", f"no pose of {frame} at {stamp:.3f}: {err}")
            return None

    def _intrinsics(self, camera: str, info: CameraInfo | None
                    ) -> tuple[np.ndarray | None, tuple[int, int] | None]:
        if info is None:
            return None, None
        try:
            intrinsics = camera_info_to_intrinsics(info, rectified=self.config.rectified)
        except CameraInfoError as err:
            self._warn("bad_camera_info", f"ignoring {camera} camera info: {err}")
            return None, None
        return intrinsics.matrix, (intrinsics.width, intrinsics.height)

    def _depth(self, camera: str, depth_msg: Image | None, shape: tuple[int, ...]
               ) -> np.ndarray | None:
        if depth_msg is None:
            return None
        try:
            depth = depth_to_metres(depth_msg)
        except ImageConversionError as err:
            self._warn("bad_depth", f"ignoring {camera} depth: {err}")
            return None
        if depth.shape != shape:
            self._warn("bad_depth", f"{camera} depth size differs from colour")
            return None
        return depth

    def frames(self, lo: float, hi: float) -> list[CameraFrame]:
        """Frames of every camera in ``[lo, hi]``, at most ``max_frames_per_camera`` each."""
        frames: list[CameraFrame] = []
        tf_deadline = time.monotonic() + self.config.tf_wait_s
        for camera, stream in self.streams.items():
            entries = spread(stream.window(lo, hi), self.config.max_frames_per_camera)
            if not entries:
                continue
            k_matrix, size = self._intrinsics(camera, stream.info)
            for entry in entries:
                try:
                    rgb = image_to_rgb(entry.color)
                except ImageConversionError as err:
                    self._warn("bad_image", f"ignoring a {camera} frame: {err}")
                    continue
                depth = self._depth(camera, entry.depth, rgb.shape[:2])
                image_size = (rgb.shape[1], rgb.shape[0])
                try:
                    frames.append(CameraFrame(
                        camera=camera,
                        stamp=entry.stamp,
                        rgb=rgb,
                        depth=depth,
                        intrinsics=k_matrix if size == image_size else None,
                        camera_to_map=self.camera_pose(camera, entry.color.header.frame_id,
                                                       entry.stamp, tf_deadline),
                    ))
                except EvidenceError as err:
                    self._warn("bad_image", f"ignoring a {camera} frame: {err}")
        return frames

    def base_pose(self, stamp: float) -> tuple[float, float, float] | None:
        """Base pose (x, y, yaw) in the map at a stamp, None when TF does not know it."""
        try:
            mat = self.tf.lookup(self.config.map_frame, self.config.base_frame, stamp)
        except TransformError:
            return None
        yaw = float(Rotation.from_matrix(np.asarray(mat)[:3, :3]).as_euler("xyz")[2])
        return float(mat[0, 3]), float(mat[1, 3]), yaw

    def robot_states(self, lo: float, hi: float) -> list[RobotStateSample]:
        """Robot states of the gripper readings in ``[lo, hi]``."""
        cfg = self.config
        if cfg.gripper_source == "contract":
            readings = contract_gripper_readings(
                self.gripper_position.window(lo, hi), stroke_m=cfg.gripper_stroke_m,
                open_below=cfg.gripper_open_below, closed_empty=cfg.gripper_closed_empty)
        else:
            readings = list(self.gripper.window(lo, hi))
        samples, missing = robot_states(readings, self.base_pose,
                                        cfg.contact_effort_n, cfg.closed_opening_m,
                                        self.hand_position)
        if missing:
            self._warn("base_pose_unavailable",
                       f"no {cfg.map_frame} -> {cfg.base_frame} transform for {missing} "
                       "gripper samples; base pose recorded as the origin")
        return samples

    def window(self, lo: float, hi: float) -> tuple[ActionWindow | None, list[Detection3D]]:
        """The action window over ``[lo, hi]`` (None without any frame) and its detections."""
        frames = self.frames(lo, hi)
        detections = [d for _, d in self.detections.window(lo, hi)]
        if not frames:
            return None, detections
        return ActionWindow(
            frames=tuple(frames),
            robot_states=tuple(self.robot_states(lo, hi)),
            fixture_states=tuple(s for _, s in self.fixture_states.window(lo, hi)),
        ), detections
