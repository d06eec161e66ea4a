"""Small pose helpers shared by the robot's controllers and the fixture mechanics."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


def wrap(angle: float) -> float:
    """Angle folded into [-pi, pi)."""
    return (angle + math.pi) % (2 * math.pi) - math.pi


def rot_z(angle: float) -> FloatArray:
    """Rotation matrix about the world z axis."""
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def slerp_matrix(q0: FloatArray, q1: FloatArray, s: float) -> FloatArray:
    """Rotation matrix a fraction ``s`` of the way between two unit quaternions (w, x, y, z)."""
    a, b = np.array(q0, dtype=np.float64), np.array(q1, dtype=np.float64)
    dot = float(a @ b)
    if dot < 0.0:
        b, dot = -b, -dot
    if dot > 0.9995:
        q = a + s * (b - a)
    else:
        theta = math.acos(min(1.0, dot))
        q = (math.sin((1 - s) * theta) * a + math.sin(s * theta) * b) / math.sin(theta)
    q /= np.linalg.norm(q)
    mat = np.zeros(9)
    mujoco.mju_quat2Mat(mat, q)
    return mat.reshape(3, 3)


def grip_rotation(approach: FloatArray, finger_axis: FloatArray) -> FloatArray:
    """Hand rotation whose z axis is the approach direction and x the fingers' closing axis."""
    z = approach / np.linalg.norm(approach)
    x = finger_axis - z * float(finger_axis @ z)
    x /= np.linalg.norm(x)
    y = np.cross(z, x)
    return np.column_stack([x, y, z])
