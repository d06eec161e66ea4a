"""The analyzer node's sensor side: message converters and the buffers of an action window.

:class:`WindowRecorder` keeps, per camera, colour frames with their registered depth and the
newest camera info, and keeps what the robot contract reports (gripper position, achieved and
commanded end-effector poses) and 3D detections; asked for a window it converts the buffered
messages into the reasoning core's records, looking up camera and base poses in TF at each
stamp (camera poses in ``map`` and in ``odom``: the latter does not jump when localisation
corrects the base). Nothing here reads a simulator: no fixture joint, no entity id.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np
from geometry_msgs.msg import PoseStamped
from scipy.spatial.transform import Rotation
from sensor_msgs.msg import CameraInfo, Image

from mimir.bounds import DEFAULT_BOUNDS, BoundsError
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
    RobotStateSample,
)
from mimir_planner.reasoning.errors import EvidenceError
from mimir_planner.reasoning.window import (
    contract_gripper_readings,
    robot_states,
    spread,
)

#: colour frames of one camera with their depth images and camera info (messages)
CameraStream = PairedFrames[Image, Image, CameraInfo]
Warn = Callable[[str, str], None]


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
        now: the receiving clock (s), against which every stamp is checked: one stamped far
            ahead would age every real item out of its buffer. None: no such check.
    """

    def __init__(self, config: AnalyzerNodeConfig, tf: TransformSource, warn: Warn,
                 count: Callable[[str], None], now: Callable[[], float] | None = None) -> None:
        self.config = cfg = config
        self.tf = tf
        self._warn = warn
        self._count = count
        self._now = now
        self.streams: dict[str, CameraStream] = {
            cam: PairedFrames(cfg.buffer_seconds, cfg.frame_min_period_s, cfg.depth_tolerance_s)
            for cam in cfg.cameras
        }
        self.gripper_position: FrameBuffer[float] = FrameBuffer(cfg.buffer_seconds)
        self.hand: FrameBuffer[np.ndarray] = FrameBuffer(cfg.buffer_seconds)
        self.hand_command: FrameBuffer[np.ndarray] = FrameBuffer(cfg.buffer_seconds)
        self.detections: FrameBuffer[Detection3D] = FrameBuffer(cfg.buffer_seconds)

    def timely(self, stamp: float, what: str) -> bool:
        """Whether ``stamp`` passes the bounds against the receiving clock (else warned)."""
        if self._now is None:
            return True
        try:
            DEFAULT_BOUNDS.stamp(stamp, self._now(), what)
        except BoundsError as err:
            self._warn("bad_stamp", f"ignoring {err}")
            return False
        return True

    def on_color(self, camera: str, msg: Image) -> None:
        """Buffers a colour image (empty or badly stamped ones are refused, counted)."""
        if msg.height < 2 or msg.width < 2 or len(msg.data) == 0:
            self._warn("bad_image", f"ignoring an empty {camera} colour image")
            return
        stamp = to_seconds(msg.header.stamp)
        if self.timely(stamp, f"{camera} colour image stamp") \
                and self.streams[camera].add_color(stamp, msg):
            self._count(f"frames.{camera}")

    def on_depth(self, camera: str, msg: Image) -> None:
        """Buffers a registered depth image (16UC1, mono16 or 32FC1)."""
        if msg.encoding not in ("16UC1", "mono16", "32FC1") or len(msg.data) == 0:
            self._warn("bad_depth", f"ignoring {camera} depth with encoding {msg.encoding!r}")
            return
        stamp = to_seconds(msg.header.stamp)
        if self.timely(stamp, f"{camera} depth image stamp"):
            self.streams[camera].add_depth(stamp, msg)

    def on_gripper(self, stamp: float, position: float) -> None:
        """Buffers a contract gripper reading (0 open .. 1 closed) received at ``stamp``."""
        if not math.isfinite(position) or not -0.05 <= position <= 1.05:
            self._warn("bad_gripper", f"ignoring a gripper reading of {position!r}")
            return
        self.gripper_position.add(stamp, min(max(position, 0.0), 1.0))

    def on_hand(self, msg: PoseStamped) -> None:
        """Buffers the achieved end-effector position (robot contract, in the base frame)."""
        self._add_hand(self.hand, msg, "achieved")

    def on_hand_command(self, msg: PoseStamped) -> None:
        """Buffers the commanded end-effector position (robot contract, in the base frame)."""
        self._add_hand(self.hand_command, msg, "commanded")

    def _add_hand(self, buffer: FrameBuffer[np.ndarray], msg: PoseStamped, kind: str) -> None:
        p = msg.pose.position
        point = np.array([p.x, p.y, p.z], dtype=np.float64)
        if not np.all(np.isfinite(point)) or (
                msg.header.frame_id and msg.header.frame_id != self.config.base_frame):
            self._warn("bad_hand_pose", f"ignoring a {kind} hand pose in "
                       f"{msg.header.frame_id!r}")
            return
        stamp = to_seconds(msg.header.stamp)
        if self.timely(stamp, f"{kind} hand pose stamp"):
            buffer.add(stamp, point)

    def hand_position(self, stamp: float, frame: str = "") -> tuple[float, float, float] | None:
        """The achieved hand position near ``stamp`` (within 0.15 s) in ``frame`` (the map when
        empty), or None."""
        return self._hand_in(self.hand, stamp, frame or self.config.map_frame)

    def hand_commanded(self, stamp: float, frame: str = "") -> tuple[float, float, float] | None:
        """The commanded hand position near ``stamp`` (within 0.15 s) in ``frame`` (the map
        when empty), or None."""
        return self._hand_in(self.hand_command, stamp, frame or self.config.map_frame)

    def _hand_in(self, buffer: FrameBuffer[np.ndarray], stamp: float,
                 frame: str) -> tuple[float, float, float] | None:
        near = buffer.window(stamp - 0.15, stamp + 0.15)
        if not near:
            return None
        when, point = min(near, key=lambda entry: abs(entry[0] - stamp))
        try:
            mat = np.asarray(self.tf.lookup(frame, self.config.base_frame, when))
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

    def camera_pose(self, camera: str, frame_id: str, stamp: float, deadline: float,
                    fixed: str | None = None) -> np.ndarray | None:
        """Pose of a frame's optical frame in ``fixed`` (the map by default) at its stamp.

        A stamp beyond the buffered transforms (TF of the newest frames can trail the images)
        is retried until ``deadline`` (monotonic s), which all frames of a window share.
        """
        frame = frame_id or f"{camera}{self.config.optical_frame_suffix}"
        target = fixed or self.config.map_frame
        try:
            return np.asarray(lookup_waiting(self.tf, target, frame, stamp, deadline=deadline))
        except TransformError as err:
            self._warn("camera_pose_unavailable", f"no pose of {frame} in {target} at "
                       f"{stamp:.3f}: {err}")
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
                        camera_to_odom=self.camera_pose(camera, entry.color.header.frame_id,
                                                        entry.stamp, tf_deadline,
                                                        self.config.odom_frame),
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
        readings = contract_gripper_readings(
            self.gripper_position.window(lo, hi), stroke_m=cfg.gripper_stroke_m,
            open_below=cfg.gripper_open_below, closed_empty=cfg.gripper_closed_empty)
        odom = cfg.odom_frame
        samples, missing = robot_states(
            readings, self.base_pose, self.hand_position, self.hand_commanded,
            hand_odom=lambda t: self.hand_position(t, odom),
            commanded_odom=lambda t: self.hand_commanded(t, odom))
        if missing:
            self._warn("base_pose_unavailable",
                       f"no {cfg.map_frame} -> {cfg.base_frame} transform for {missing} "
                       "gripper samples; base pose recorded as the origin")
        return samples

    def window(self, lo: float, hi: float) -> tuple[ActionWindow | None, list[Detection3D]]:
        """The action window over ``[lo, hi]`` (None without any frame) and its detections.

        A window that began before the oldest reading the buffers still hold (an action longer
        than ``buffer_seconds``) is analysed from what is left, with a warning: its first
        frames and readings are lost.
        """
        buffer = self.gripper_position
        oldest = buffer.oldest()
        if oldest is not None and buffer.evicted_by_age and oldest[0] > lo:
            self._warn("window_truncated",
                       f"the window starts at {lo:.3f} s but the buffers reach back only to "
                       f"{oldest[0]:.3f} s (buffer_seconds {self.config.buffer_seconds:.0f}); "
                       "its start is lost")
        frames = self.frames(lo, hi)
        detections = [d for _, d in self.detections.window(lo, hi)]
        if not frames:
            return None, detections
        return ActionWindow(
            frames=tuple(frames),
            robot_states=tuple(self.robot_states(lo, hi)),
        ), detections
