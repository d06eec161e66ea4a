"""Damped least-squares inverse kinematics on a MuJoCo site (position and orientation)."""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class IkResult:
    """Joint solution and the remaining pose error (metres, radians)."""

    q: FloatArray
    position_error: float
    rotation_error: float
    iterations: int

    def converged(self, pos_tol: float, rot_tol: float) -> bool:
        """Whether both errors are within tolerance."""
        return self.position_error <= pos_tol and self.rotation_error <= rot_tol


def _quaternion(rotation: FloatArray) -> FloatArray:
    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, np.ascontiguousarray(rotation).reshape(9))
    return quat


def _rotation_error(current: FloatArray, target_quat: FloatArray) -> FloatArray:
    """Axis-angle vector (world frame) that turns the rotation ``current`` (3x3) onto the
    quaternion ``target_quat``."""
    q_cur_inv = np.zeros(4)
    mujoco.mju_negQuat(q_cur_inv, _quaternion(current))
    q_err = np.zeros(4)
    mujoco.mju_mulQuat(q_err, target_quat, q_cur_inv)
    vel = np.zeros(3)
    mujoco.mju_quat2Vel(vel, q_err, 1.0)
    return vel


def solve_site_ik(
    model: mujoco.MjModel,
    scratch: mujoco.MjData,
    site_id: int,
    *,
    qpos_adr: npt.NDArray[np.int_],
    dof_adr: npt.NDArray[np.int_],
    target_pos: FloatArray,
    target_rot: FloatArray | None,
    damping: float = 0.05,
    max_iters: int = 200,
    max_step: float = 0.2,
    rot_weight: float = 0.5,
    pos_tol: float = 1e-3,
    rot_tol: float = 1e-2,
) -> IkResult:
    """Solve for the joints at ``qpos_adr`` so the site reaches ``target_pos`` / ``target_rot``.

    ``scratch`` holds the starting configuration (all joints); only the listed joints change and
    only kinematics are evaluated, so the physics state of the caller is untouched. Joint limits
    are respected by clamping.
    """
    # Everything that does not change between iterations is worked out once: the solver runs
    # dozens of iterations for each of the arm's set-points.
    joint_ids = np.array([int(np.where(model.jnt_qposadr == a)[0][0]) for a in qpos_adr],
                         dtype=np.int64)
    limited = model.jnt_limited[joint_ids].astype(bool)
    lo = np.where(limited, model.jnt_range[joint_ids, 0], -np.inf)
    hi = np.where(limited, model.jnt_range[joint_ids, 1], np.inf)
    target_quat = None if target_rot is None else _quaternion(target_rot)
    rows = 3 if target_rot is None else 6
    regulariser = (damping**2) * np.eye(rows)
    jac_p = np.zeros((3, model.nv))
    jac_r = np.zeros((3, model.nv))
    pos_err = float("inf")
    rot_err_norm = 0.0
    iterations = 0
    for step in range(1, max_iters + 1):
        iterations = step
        mujoco.mj_kinematics(model, scratch)
        mujoco.mj_comPos(model, scratch)
        err_p = target_pos - scratch.site_xpos[site_id]
        pos_err = float(np.linalg.norm(err_p))
        if target_quat is not None:
            err_r = _rotation_error(scratch.site_xmat[site_id], target_quat)
            rot_err_norm = float(np.linalg.norm(err_r))
        if pos_err <= pos_tol and rot_err_norm <= rot_tol:
            break
        mujoco.mj_jacSite(model, scratch, jac_p, jac_r, site_id)
        if target_quat is not None:
            jac = np.vstack([jac_p[:, dof_adr], rot_weight * jac_r[:, dof_adr]])
            err = np.concatenate([err_p, rot_weight * err_r])
        else:
            jac = jac_p[:, dof_adr]
            err = err_p
        # dq = J^T (J J^T + lambda^2 I)^-1 e
        dq = jac.T @ np.linalg.solve(jac @ jac.T + regulariser, err)
        norm = float(np.linalg.norm(dq))
        if norm > max_step:
            dq *= max_step / norm
        # unlimited joints have infinite bounds, so one clip clamps the limited ones alone
        scratch.qpos[qpos_adr] = np.clip(scratch.qpos[qpos_adr] + dq, lo, hi)
    return IkResult(
        q=np.array(scratch.qpos[qpos_adr], dtype=np.float64),
        position_error=pos_err,
        rotation_error=rot_err_norm,
        iterations=iterations,
    )
