"""Where a camera stood and how it saw, for each keyframe the keyframe node saves.

The intrinsics come from the camera's latest ``camera_info`` (its projection matrix: the images
are rectified), scaled to the stored image; the optical frame's pose and the robot's base pose in
the map come from TF at the frame's stamp. Whatever is missing or malformed is counted and the
frame is saved without it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from rclpy.node import Node
from scipy.spatial.transform import Rotation
from sensor_msgs.msg import CameraInfo

from mimir.ros.tf import TransformSource
from mimir.transforms import TransformError, matrix_to_quaternion
from mimir_memory.errors import InvalidValueError
from mimir_memory.keyframes import CameraView
from mimir_perception.camera import Intrinsics
from mimir_perception.errors import IntrinsicsError


class CameraViews:
    """Camera views and base poses of buffered frames (see the module docstring).

    Args:
        node: the node whose logger warns.
        tf: the node's transform source.
        map_frame: the frame views and poses are given in.
        base_frame: the robot's base frame.
        count: adds one to a named counter of the node.
    """

    def __init__(self, node: Node, tf: TransformSource, map_frame: str, base_frame: str,
                 count: Callable[[str], None]) -> None:
        self._node = node
        self._tf = tf
        self._map_frame = map_frame
        self._base_frame = base_frame
        self._count = count
        self._intrinsics: dict[str, Intrinsics] = {}

    @property
    def cameras(self) -> frozenset[str]:
        """Cameras whose intrinsics are known."""
        return frozenset(self._intrinsics)

    def on_camera_info(self, camera: str, msg: CameraInfo) -> None:
        """Keep the camera's intrinsics; a malformed message is counted and ignored."""
        try:  # rectified images: the projection matrix is the published image's camera
            projection = np.asarray(msg.p, dtype=np.float64).reshape(3, 4)[:, :3]
            self._intrinsics[camera] = Intrinsics.from_matrix(projection, msg.width, msg.height)
        except (IntrinsicsError, ValueError) as err:
            self._count(f"{camera}.bad_camera_info")
            self._node.get_logger().warning(f"ignoring {camera} camera info: {err}",
                                            throttle_duration_sec=5.0)

    def view(self, camera: str, optical_frame: str, stamp: float, width: int,
             height: int) -> CameraView | None:
        """Where ``camera`` stood at ``stamp`` and its intrinsics at the image's size; None
        (counted) when the camera info or the transform is missing."""
        intrinsics = self._intrinsics.get(camera)
        if intrinsics is None:
            self._count(f"{camera}.no_camera_info")
            return None
        try:
            pose = self._tf.lookup(self._map_frame, optical_frame, stamp)
        except TransformError:
            self._count(f"{camera}.no_camera_pose")
            return None
        sx, sy = width / intrinsics.width, height / intrinsics.height
        try:  # checked here: a view the store would refuse must not cost the frame
            return CameraView.parse({
                "position": pose[:3, 3].tolist(),
                "orientation": matrix_to_quaternion(pose[:3, :3]).tolist(),
                "fx": intrinsics.fx * sx, "fy": intrinsics.fy * sy,
                "cx": (intrinsics.cx + 0.5) * sx - 0.5, "cy": (intrinsics.cy + 0.5) * sy - 0.5})
        except (InvalidValueError, ValueError) as err:
            self._count(f"{camera}.bad_camera_view")
            self._node.get_logger().warning(f"{camera} frame saved without its view: {err}",
                                            throttle_duration_sec=5.0)
            return None

    def robot_pose(self, stamp: float) -> list[float] | None:
        """The base's planar pose ``[x, y, yaw]`` in the map at ``stamp``, or None."""
        try:
            mat = self._tf.lookup(self._map_frame, self._base_frame, stamp)
        except TransformError:
            return None
        yaw = float(Rotation.from_matrix(mat[:3, :3]).as_euler("xyz")[2])
        return [float(mat[0, 3]), float(mat[1, 3]), yaw]
