"""The TidyBot++ body in the simulation: joints, actuators, pinch site, fingers and their readings.

Holds what the robot itself can measure or command (base pose, arm joints and efforts, gripper
opening, finger contacts, actuator set-points); the controllers that move it are in
:mod:`mimir_sim.controllers`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mujoco
import numpy as np

from mimir_sim.errors import UnreachablePoseError
from mimir_sim.geometry import FloatArray, wrap
from mimir_sim.physics import PhysicsWorld
from mimir_sim.scene_layout import DOOR_T

ARM_JOINTS = tuple(f"joint_{i}" for i in range(1, 8))
BASE_JOINTS = ("joint_x", "joint_y", "joint_th")
HOME_ARM = (0.0, -0.34906585, 3.14159265, -2.54818071, 0.0, -0.87266463, 1.57079633)
READY_ARM = (0.0, 0.6, 3.14159265, -1.6, 0.0, -0.9, 1.57079633)
ROBOT_RADIUS = 0.33  # circle that contains the base footprint (m)
GRIPPER_OPEN, GRIPPER_CLOSED = 0.0, 255.0
PAD_THICKNESS = 0.008  # both pad half-thicknesses together (m)
GRIP_DEPTH = 0.022  # pad centres lie this far ahead of pinch_site when closing on a bar (m)


@dataclass(frozen=True)
class FingerContact:
    """A contact of one finger with something in the scene."""

    finger: str  # left | right
    entity: str | None
    geom: str
    force: float  # magnitude of the contact force (N)


@dataclass(frozen=True)
class RobotState:
    """Robot state at one simulation time."""

    stamp: float
    base_pose: tuple[float, float, float]
    arm_q: tuple[float, ...]
    arm_effort: tuple[float, ...]  # actuator forces (N m)
    gripper_opening: float  # distance between pad surfaces (m)
    finger_contacts: tuple[FingerContact, ...]
    holding: str | None

    def touching(self, entity: str) -> set[str]:
        """Fingers that touch ``entity``."""
        return {c.finger for c in self.finger_contacts if c.entity == entity}


class RobotBody:
    """Ids and addresses of the robot's joints, actuators and links, and readings from them.

    Constructing it turns on gravity compensation for the arm and gripper bodies (the Gen3
    compensates gravity itself).
    """

    def __init__(self, world: PhysicsWorld) -> None:
        self.world = world
        m = world.model
        self.base_act = [m.actuator(n).id for n in BASE_JOINTS]
        self.arm_act = [m.actuator(n).id for n in ARM_JOINTS]
        self.grip_act = m.actuator("fingers_actuator").id
        self.base_qadr = np.array([m.joint(n).qposadr[0] for n in BASE_JOINTS])
        self.base_dofs = np.array([m.joint(n).dofadr[0] for n in BASE_JOINTS])
        self.arm_qadr = np.array([m.joint(n).qposadr[0] for n in ARM_JOINTS])
        self.arm_dadr = np.array([m.joint(n).dofadr[0] for n in ARM_JOINTS])
        self.site = m.site("pinch_site").id
        self.gripper_body = m.body("base").id
        pads = {
            "left": (m.body("left_pad").id, m.body("left_follower").id),
            "right": (m.body("right_pad").id, m.body("right_follower").id),
        }
        self._pad_geoms = (m.geom("left_pad1").id, m.geom("right_pad1").id)
        self._finger_of_body = {b: finger for finger, bodies in pads.items() for b in bodies}
        base_link = m.body("base_link").id
        for b in range(m.nbody):
            if m.body_rootid[b] == base_link and b != base_link:
                m.body_gravcomp[b] = 1.0

    def place(self, pose: tuple[float, float, float], arm: tuple[float, ...]) -> None:
        """Put the base at ``pose`` and the arm at ``arm`` with set-points there, gripper open."""
        d = self.world.data
        d.qpos[self.base_qadr] = pose
        d.qpos[self.arm_qadr] = arm
        d.ctrl[self.base_act] = pose
        d.ctrl[self.arm_act] = arm
        d.ctrl[self.grip_act] = GRIPPER_OPEN

    def base_pose(self) -> tuple[float, float, float]:
        """(x, y, yaw) of the base in the world frame."""
        q = self.world.data.qpos[self.base_qadr]
        return (float(q[0]), float(q[1]), wrap(float(q[2])))

    def base_speed(self, lever: float = 0.3) -> float:
        """How fast the base moves (m/s): its planar speed plus its turn rate times ``lever`` (m),
        the speed of a point that far from its centre."""
        v = self.world.data.qvel[self.base_dofs]
        return float(math.hypot(v[0], v[1]) + lever * abs(v[2]))

    def arm_q(self) -> FloatArray:
        """Arm joint angles (rad)."""
        return np.array(self.world.data.qpos[self.arm_qadr], dtype=np.float64)

    def site_pose(self) -> tuple[FloatArray, FloatArray]:
        """World position and rotation matrix of the pinch site."""
        d = self.world.data
        return (
            np.array(d.site_xpos[self.site], dtype=np.float64),
            np.array(d.site_xmat[self.site], dtype=np.float64).reshape(3, 3),
        )

    def gripper_opening(self) -> float:
        """Distance between the pad surfaces (m)."""
        d = self.world.data
        left = d.geom_xpos[self._pad_geoms[0]]
        right = d.geom_xpos[self._pad_geoms[1]]
        return max(0.0, float(np.linalg.norm(left - right)) - PAD_THICKNESS)

    def finger_contacts(self) -> tuple[FingerContact, ...]:
        """Contacts of the finger links with other geoms, with force magnitudes."""
        m, d = self.world.model, self.world.data
        out: list[FingerContact] = []
        force = np.zeros(6)
        for i in range(d.ncon):
            con = d.contact[i]
            b1, b2 = m.geom_bodyid[con.geom1], m.geom_bodyid[con.geom2]
            for mine, other_geom, other_body in ((b1, con.geom2, b2), (b2, con.geom1, b1)):
                finger = self._finger_of_body.get(int(mine))
                if finger is None or int(other_body) in self._finger_of_body:
                    continue
                mujoco.mj_contactForce(m, d, i, force)
                out.append(
                    FingerContact(
                        finger=finger,
                        entity=self.world.scene.entity_of_geom(int(other_geom)),
                        geom=m.geom(int(other_geom)).name,
                        force=float(np.linalg.norm(force[:3])),
                    )
                )
        return tuple(out)

    def touching(self, entity: str) -> set[str]:
        """Fingers that touch ``entity`` now."""
        return {c.finger for c in self.finger_contacts() if c.entity == entity}

    def arm_effort(self) -> float:
        """Norm of the arm's actuator forces (N m)."""
        return float(np.linalg.norm(self.world.data.actuator_force[self.arm_act]))

    def state(self, holding: str | None) -> RobotState:
        """Current robot state; ``holding`` is the object the grasp assist carries."""
        d = self.world.data
        return RobotState(
            stamp=self.world.time,
            base_pose=self.base_pose(),
            arm_q=tuple(float(v) for v in d.qpos[self.arm_qadr]),
            arm_effort=tuple(float(d.actuator_force[a]) for a in self.arm_act),
            gripper_opening=self.gripper_opening(),
            finger_contacts=self.finger_contacts(),
            holding=holding,
        )

    def reach_to(self, point: FloatArray) -> float:
        """Horizontal distance from the base centre to ``point`` (m)."""
        x, y, _ = self.base_pose()
        return math.hypot(float(point[0]) - x, float(point[1]) - y)

    def check_base_pose(self, pose: tuple[float, float, float]) -> None:
        """Raise :class:`UnreachablePoseError` if the base cannot stand at ``pose``."""
        x, y, yaw = pose
        if not all(math.isfinite(v) for v in (x, y, yaw)):
            raise UnreachablePoseError(f"pose {pose} is not finite")
        scene = self.world.scene
        k = scene.scenario.kitchen
        if not (
            k.room_x[0] + ROBOT_RADIUS <= x <= k.room_x[1] - ROBOT_RADIUS
            and k.room_y[0] + ROBOT_RADIUS <= y <= k.room_y[1] - ROBOT_RADIUS
        ):
            raise UnreachablePoseError(
                f"pose ({x:.2f}, {y:.2f}) lies outside the room x {k.room_x}, y {k.room_y}"
            )
        for fid, fx in scene.fixtures.items():
            if fx.type == "upper_cabinet":
                continue  # above the base
            y0, y1 = fx.center_y - fx.width / 2, fx.center_y + fx.width / 2
            dx = max(fx.front_x - DOOR_T - x, 0.0, x - (fx.front_x + fx.depth))
            dy = max(y0 - y, 0.0, y - y1)
            if math.hypot(dx, dy) < ROBOT_RADIUS:
                raise UnreachablePoseError(f"pose ({x:.2f}, {y:.2f}) collides with fixture {fid}")
