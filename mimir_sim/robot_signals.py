"""What the simulated robot reports besides its RPC servers: camera mounts and joint states.

The MuJoCo world frame is the ``map`` frame. The simulator reports no pose in it: the robot
localises itself from the kitchen's wall tags (:mod:`mimir_sim.fiducial_tags`) with the
fiducial localiser, as on the real robot. Camera poses use the REP-103 optical axes.
"""

from __future__ import annotations

import numpy as np

from mimir_sim.geometry import FloatArray
from mimir_sim.rendering import camera_pose
from mimir_sim.robot import ARM_JOINTS, BASE_JOINTS
from mimir_sim.sim import KitchenSim

GRIPPER_JOINT = "gripper"


def body_pose(sim: KitchenSim, body: str) -> FloatArray:
    """World-from-body 4x4 transform of a MuJoCo body."""
    bid = sim.model.body(body).id
    pose = np.eye(4)
    pose[:3, :3] = np.asarray(sim.data.xmat[bid], dtype=np.float64).reshape(3, 3)
    pose[:3, 3] = sim.data.xpos[bid]
    return pose


def base_pose_matrix(sim: KitchenSim) -> FloatArray:
    """World-from-base_link 4x4 transform (the robot's ``base_link`` body)."""
    return body_pose(sim, "base_link")


def camera_in_base(sim: KitchenSim, camera: str) -> FloatArray:
    """base_link-from-optical-frame 4x4 transform of a camera (REP-103 optical axes)."""
    world_base = base_pose_matrix(sim)
    world_cam = camera_pose(sim.model, sim.data, camera)
    return np.asarray(np.linalg.inv(world_base) @ world_cam, dtype=np.float64)


class JointStateReader:
    """Joint names, positions, velocities and efforts of the simulated robot.

    Base joints (``joint_x``, ``joint_y``, ``joint_th``), arm joints (``joint_1`` ..
    ``joint_7``) and ``gripper``: position = opening between the pads (m), velocity = its rate
    (m/s), effort = grip force (N, the smaller of the two fingers' total contact forces).
    """

    def __init__(self, sim: KitchenSim) -> None:
        m = sim.model
        joints = (*BASE_JOINTS, *ARM_JOINTS)
        self.names: tuple[str, ...] = (*joints, GRIPPER_JOINT)
        self._sim = sim
        self._qadr = np.array([m.joint(n).qposadr[0] for n in joints])
        self._dadr = np.array([m.joint(n).dofadr[0] for n in joints])
        self._act = np.array([m.actuator(n).id for n in joints])
        self._last: tuple[float, float] | None = None

    def read(self) -> tuple[list[float], list[float], list[float]]:
        """Current (positions, velocities, efforts), aligned with :attr:`names`."""
        sim = self._sim
        d = sim.data
        opening = sim.gripper_opening()
        now = sim.time
        rate = 0.0
        if self._last is not None and now > self._last[0]:
            rate = (opening - self._last[1]) / (now - self._last[0])
        self._last = (now, opening)
        per_finger = {"left": 0.0, "right": 0.0}
        for contact in sim.finger_contacts():
            per_finger[contact.finger] += contact.force
        grip = min(per_finger.values())
        positions = [float(v) for v in d.qpos[self._qadr]] + [opening]
        velocities = [float(v) for v in d.qvel[self._dadr]] + [rate]
        efforts = [float(v) for v in d.actuator_force[self._act]] + [grip]
        return positions, velocities, efforts
