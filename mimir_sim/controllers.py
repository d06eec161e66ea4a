"""Controllers of the robot's base, arm and gripper, acting only through actuator set-points.

The base follows smooth ramps of its position set-points; the arm follows joint set-points from
damped least-squares IK on ``pinch_site``, either along a Cartesian line or in joint space; the
gripper closes through its tendon actuator. Every controller steps the physics through
:meth:`mimir_sim.physics.PhysicsWorld.step`.
"""

from __future__ import annotations

import logging
import math

import mujoco
import numpy as np

from mimir_sim.geometry import FloatArray, slerp_matrix, wrap
from mimir_sim.ik import SiteIk
from mimir_sim.physics import PhysicsWorld
from mimir_sim.robot import GRIPPER_CLOSED, GRIPPER_OPEN, HOME_ARM, READY_ARM, RobotBody

LOG = logging.getLogger(__name__)


class RobotControl:
    """Base, arm and gripper controllers of one simulated robot."""

    def __init__(self, world: PhysicsWorld, body: RobotBody) -> None:
        self.world = world
        self.body = body
        self._scratch = mujoco.MjData(world.model)
        self._ik = SiteIk(world.model, body.site, qpos_adr=body.arm_qadr, dof_adr=body.arm_dadr)

    def ik(
        self, pos: FloatArray, rot: FloatArray | None, q_seed: FloatArray | None = None
    ) -> FloatArray | None:
        """Arm joints that put the pinch site at (pos, rot), or ``None`` if IK does not converge.

        ``rot=None`` leaves the orientation free; ``q_seed`` starts the search elsewhere than at
        the current joints.
        """
        body, cfg = self.body, self.world.config
        self._scratch.qpos[:] = self.world.data.qpos
        if q_seed is not None:
            self._scratch.qpos[body.arm_qadr] = q_seed
        result = self._ik.solve(self._scratch, pos, rot)
        if not result.converged(cfg.ik_pos_tol, cfg.ik_rot_tol):
            LOG.debug(
                "IK miss: pos %.3f m rot %.3f rad", result.position_error, result.rotation_error
            )
            return None
        return result.q

    def site_positions(self, arm_qs: FloatArray) -> FloatArray:
        """World positions of the pinch site with the arm at each row of ``arm_qs`` (N, 7), the
        rest of the robot and the world as they are now (forward kinematics on a scratch copy)."""
        arm_qs = np.asarray(arm_qs, dtype=np.float64)
        if arm_qs.ndim != 2 or arm_qs.shape[1] != len(self.body.arm_qadr):
            raise ValueError(f"arm_qs must be (N, {len(self.body.arm_qadr)}), got {arm_qs.shape}")
        model, scratch, site = self.world.model, self._scratch, self.body.site
        scratch.qpos[:] = self.world.data.qpos
        out = np.empty((arm_qs.shape[0], 3))
        for i, q in enumerate(arm_qs):
            scratch.qpos[self.body.arm_qadr] = q
            mujoco.mj_kinematics(model, scratch)
            out[i] = scratch.site_xpos[site]
        return out

    def drive_arm(self, q_target: FloatArray, duration: float) -> None:
        """Ramp the arm set-points smoothly to ``q_target`` over ``duration`` s."""
        data, act = self.world.data, self.body.arm_act
        q0 = np.array(data.ctrl[act], dtype=np.float64)
        steps = max(1, round(duration / self.world.model.opt.timestep))
        for i in range(1, steps + 1):
            s = i / steps
            blend = s * s * (3 - 2 * s)
            data.ctrl[act] = q0 + blend * (q_target - q0)
            self.world.step()

    def move_gripper_to(
        self,
        pos: FloatArray,
        rot: FloatArray | None,
        speed: float | None = None,
        *,
        straight: bool = True,
    ) -> bool:
        """Move the pinch site to (pos, rot); False if no IK solution.

        ``straight`` follows a Cartesian line (orientation interpolated); otherwise the arm moves
        in joint space to one IK solution, trying a few seeds. ``rot=None`` leaves the hand's
        orientation free.
        """
        start, start_rot = self.body.site_pose()
        dist = float(np.linalg.norm(pos - start))
        v = speed or self.world.config.arm_speed
        if not straight:
            q = None
            for seed in (None, np.array(HOME_ARM), np.array(READY_ARM)):
                q = self.ik(pos, rot, seed)
                if q is not None:
                    break
            if q is None:
                return False
            joint_dist = float(np.max(np.abs(q - self.world.data.qpos[self.body.arm_qadr])))
            self.drive_arm(q, max(dist / v, joint_dist / 1.2, 0.4))
            self.world.step_seconds(0.3)
            return True
        n = max(2, math.ceil(dist / 0.02))
        q_start = np.zeros(4)
        q_goal = np.zeros(4)
        mujoco.mju_mat2Quat(q_start, start_rot.reshape(9))
        if rot is not None:
            mujoco.mju_mat2Quat(q_goal, np.ascontiguousarray(rot).reshape(9))
        q_seed: FloatArray | None = None
        for i in range(1, n + 1):
            s = i / n
            waypoint = start + (pos - start) * s
            w_rot = slerp_matrix(q_start, q_goal, s) if rot is not None else None
            q = self.ik(waypoint, w_rot, q_seed)
            if q is None:
                return False
            q_seed = q
            self.drive_arm(q, dist / n / v)
        self.world.step_seconds(0.3)
        return True

    def home_arm(self) -> None:
        """Fold the arm to its home pose."""
        self.drive_arm(np.array(HOME_ARM), 1.2)
        self.world.step_seconds(0.2)

    def set_gripper(self, closed: bool) -> None:
        """Set the gripper's set-point without waiting."""
        self.world.data.ctrl[self.body.grip_act] = GRIPPER_CLOSED if closed else GRIPPER_OPEN

    def gripper(self, closed: bool) -> None:
        """Close or open the gripper and wait ``grip_close_s``."""
        self.set_gripper(closed)
        self.world.step_seconds(self.world.config.grip_close_s)

    def drive_base(self, goal: tuple[float, float, float]) -> tuple[float, float]:
        """Ramp the base set-points to ``goal`` and let it settle; (position, yaw) errors."""
        world, cfg, act = self.world, self.world.config, self.body.base_act
        start = np.array(world.data.ctrl[act], dtype=np.float64)
        delta = np.array([goal[0] - start[0], goal[1] - start[1], wrap(goal[2] - start[2])])
        duration = max(
            float(np.linalg.norm(delta[:2])) / cfg.base_speed,
            abs(float(delta[2])) / cfg.base_turn_speed,
            0.2,
        )
        steps = max(1, round(duration / world.model.opt.timestep))
        for i in range(1, steps + 1):
            s = i / steps
            blend = s * s * (3 - 2 * s)
            world.data.ctrl[act] = start + blend * delta
            world.step()
        settle_steps = round(cfg.base_settle_s / world.model.opt.timestep)
        pos_err = yaw_err = float("inf")
        for _ in range(0, settle_steps, 25):
            world.step(25)
            x, y, yaw = self.body.base_pose()
            pos_err = math.hypot(goal[0] - x, goal[1] - y)
            yaw_err = abs(wrap(goal[2] - yaw))
            if pos_err <= cfg.base_pos_tol and yaw_err <= cfg.base_yaw_tol:
                break
        return pos_err, yaw_err
