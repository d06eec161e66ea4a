"""Damped least-squares inverse kinematics on a MuJoCo site (position and orientation)."""

from __future__ import annotations

import math
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


class SiteIk:
    """Damped least-squares IK of one site over one chain of joints, set up once.

    The joint limits, the regulariser and every work array are made here, so a solve allocates
    almost nothing: the arm driver solves for each streamed set-point, a few iterations each,
    and per-iteration Python overhead used to cost four times MuJoCo's own kinematics.
    """

    def __init__(
        self,
        model: mujoco.MjModel,
        site_id: int,
        *,
        qpos_adr: npt.NDArray[np.int_],
        dof_adr: npt.NDArray[np.int_],
        damping: float = 0.05,
        max_iters: int = 200,
        max_step: float = 0.2,
        rot_weight: float = 0.5,
    ) -> None:
        qpos_adr = np.asarray(qpos_adr, dtype=np.int64)
        dof_adr = np.asarray(dof_adr, dtype=np.int64)
        if qpos_adr.ndim != 1 or qpos_adr.shape != dof_adr.shape or not qpos_adr.size:
            raise ValueError(f"IK chain needs matching joint and dof addresses, got "
                             f"{qpos_adr.shape} and {dof_adr.shape}")
        if not 0 <= site_id < model.nsite:
            raise ValueError(f"site {site_id} is not in the model ({model.nsite} sites)")
        if damping < 0.0 or max_iters < 1 or max_step <= 0.0 or rot_weight <= 0.0:
            raise ValueError("IK settings: damping >= 0, max_iters >= 1, max_step > 0 and "
                             "rot_weight > 0 are needed")
        joint_ids = np.array([int(np.flatnonzero(model.jnt_qposadr == a)[0]) for a in qpos_adr],
                             dtype=np.int64)
        limited = model.jnt_limited[joint_ids].astype(bool)
        self.model = model
        self.site_id = int(site_id)
        self.qpos_adr = qpos_adr
        self.dof_adr = dof_adr
        self.max_iters = int(max_iters)
        self.max_step = float(max_step)
        self.rot_weight = float(rot_weight)
        self._lo = np.where(limited, model.jnt_range[joint_ids, 0], -np.inf)
        self._hi = np.where(limited, model.jnt_range[joint_ids, 1], np.inf)
        self._reg = {rows: (damping**2) * np.eye(rows) for rows in (3, 6)}
        n = qpos_adr.size
        self._jac_p = np.zeros((3, model.nv))
        self._jac_r = np.zeros((3, model.nv))
        # column-major, as MuJoCo's Jacobian columns come out when picked (BLAS sums in the
        # layout's own order, so the layout is part of the result's last bits)
        self._jac = {rows: np.zeros((rows, n), order="F") for rows in (3, 6)}
        self._err = np.zeros(6)
        self._quat = np.zeros(4)
        self._quat_inv = np.zeros(4)
        self._quat_err = np.zeros(4)
        self._vel = np.zeros(3)
        self._target_quat = np.zeros(4)

    def _rotation_error(self, current: FloatArray, target_quat: FloatArray) -> FloatArray:
        """Axis-angle vector (world frame) that turns ``current`` (a flat 3x3) onto the
        quaternion ``target_quat``."""
        mujoco.mju_mat2Quat(self._quat, current)
        mujoco.mju_negQuat(self._quat_inv, self._quat)
        mujoco.mju_mulQuat(self._quat_err, target_quat, self._quat_inv)
        mujoco.mju_quat2Vel(self._vel, self._quat_err, 1.0)
        return self._vel

    def solve(self, scratch: mujoco.MjData, target_pos: FloatArray,
              target_rot: FloatArray | None, pos_tol: float = 1e-3,
              rot_tol: float = 1e-2) -> IkResult:
        """Move the chain's joints in ``scratch`` so the site reaches the target.

        ``scratch`` holds the starting configuration (all joints) and is changed in place; only
        kinematics are evaluated. ``target_rot`` None leaves the orientation free.
        """
        model, site = self.model, self.site_id
        target_pos = np.asarray(target_pos, dtype=np.float64)
        if target_pos.shape != (3,) or not np.all(np.isfinite(target_pos)):
            raise ValueError(f"IK target position must be 3 finite numbers, got {target_pos!r}")
        target_quat = None
        if target_rot is not None:
            rot = np.ascontiguousarray(target_rot, dtype=np.float64)
            if rot.shape != (3, 3) or not np.all(np.isfinite(rot)):
                raise ValueError(f"IK target rotation must be a finite 3x3 matrix, got {rot!r}")
            mujoco.mju_mat2Quat(self._target_quat, rot.reshape(9))
            target_quat = self._target_quat
        rows = 3 if target_quat is None else 6
        regulariser = self._reg[rows]
        jac, err = self._jac[rows], self._err[:rows]
        jac_p, jac_r = self._jac_p, self._jac_r
        qpos_adr, dof_adr, w = self.qpos_adr, self.dof_adr, self.rot_weight
        site_xpos, site_xmat = scratch.site_xpos[site], scratch.site_xmat[site]
        pos_err = float("inf")
        rot_err_norm = 0.0
        iterations = 0
        for step in range(1, self.max_iters + 1):
            iterations = step
            mujoco.mj_kinematics(model, scratch)
            mujoco.mj_comPos(model, scratch)
            np.subtract(target_pos, site_xpos, out=err[:3])
            pos_err = math.sqrt(float(err[:3].dot(err[:3])))
            if target_quat is not None:
                err_r = self._rotation_error(site_xmat, target_quat)
                rot_err_norm = math.sqrt(float(err_r.dot(err_r)))
            if pos_err <= pos_tol and rot_err_norm <= rot_tol:
                break
            mujoco.mj_jacSite(model, scratch, jac_p, jac_r, site)
            jac[:3] = jac_p[:, dof_adr]
            if target_quat is not None:
                np.multiply(jac_r[:, dof_adr], w, out=jac[3:])
                np.multiply(err_r, w, out=err[3:])
            # dq = J^T (J J^T + lambda^2 I)^-1 e
            dq = jac.T @ np.linalg.solve(jac @ jac.T + regulariser, err)
            norm = math.sqrt(float(dq.dot(dq)))
            if norm > self.max_step:
                dq *= self.max_step / norm
            # unlimited joints have infinite bounds, so one clip clamps the limited ones alone
            scratch.qpos[qpos_adr] = np.clip(scratch.qpos[qpos_adr] + dq, self._lo, self._hi)
        return IkResult(
            q=np.array(scratch.qpos[qpos_adr], dtype=np.float64),
            position_error=pos_err,
            rotation_error=rot_err_norm,
            iterations=iterations,
        )
