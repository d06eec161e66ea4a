"""The arm's damped least-squares IK (:class:`mimir_sim.ik.SiteIk`) on the TidyBot++ model."""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np
import pytest

from mimir_sim.ik import SiteIk
from mimir_sim.robot import ARM_JOINTS, READY_ARM
from mimir_sim.robot_model import robot_xml_in


@pytest.fixture(scope="module")
def arm(tidybot_dir: Path) -> tuple[mujoco.MjModel, SiteIk]:
    model = mujoco.MjModel.from_xml_path(str(robot_xml_in(tidybot_dir)))
    qadr = np.array([model.joint(n).qposadr[0] for n in ARM_JOINTS])
    dadr = np.array([model.joint(n).dofadr[0] for n in ARM_JOINTS])
    return model, SiteIk(model, model.site("pinch_site").id, qpos_adr=qadr, dof_adr=dadr)


def _ready(model: mujoco.MjModel, solver: SiteIk) -> mujoco.MjData:
    data = mujoco.MjData(model)
    data.qpos[solver.qpos_adr] = READY_ARM
    mujoco.mj_kinematics(model, data)
    return data


def _site(solver: SiteIk, data: mujoco.MjData) -> tuple[np.ndarray, np.ndarray]:
    return (data.site_xpos[solver.site_id].copy(),
            data.site_xmat[solver.site_id].reshape(3, 3).copy())


def _turn(axis: tuple[float, float, float], angle: float) -> np.ndarray:
    quat, mat = np.zeros(4), np.zeros(9)
    mujoco.mju_axisAngle2Quat(quat, np.asarray(axis, dtype=float), angle)
    mujoco.mju_quat2Mat(mat, quat)
    return mat.reshape(3, 3)


def test_a_reachable_pose_is_reached_and_the_joints_put_the_site_there(arm) -> None:
    model, solver = arm
    data = _ready(model, solver)
    pos, rot = _site(solver, data)
    target_pos = pos + np.array([0.08, -0.05, 0.06])
    target_rot = _turn((0.0, 0.0, 1.0), 0.3) @ rot
    result = solver.solve(data, target_pos, target_rot)
    assert result.converged(1e-3, 1e-2)
    assert 1 < result.iterations < solver.max_iters
    check = mujoco.MjData(model)
    check.qpos[solver.qpos_adr] = result.q
    mujoco.mj_kinematics(model, check)
    reached_pos, reached_rot = _site(solver, check)
    assert np.linalg.norm(reached_pos - target_pos) <= 1e-3
    assert np.allclose(reached_rot, target_rot, atol=2e-2)


def test_a_free_orientation_solves_on_position_alone(arm) -> None:
    model, solver = arm
    data = _ready(model, solver)
    pos, _ = _site(solver, data)
    result = solver.solve(data, pos + np.array([0.0, 0.1, -0.05]), None)
    assert result.converged(1e-3, 1e-2)
    assert result.rotation_error == 0.0


def test_solving_twice_from_one_start_gives_the_same_joints_to_the_last_bit(arm) -> None:
    """The work arrays are reused between solves; nothing of one solve leaks into the next."""
    model, solver = arm
    start = _ready(model, solver)
    pos, rot = _site(solver, start)
    targets = [(pos + np.array([0.05, 0.0, 0.0]), rot), (pos + np.array([0.0, 0.1, 0.0]), None)]
    first = [solver.solve(_ready(model, solver), p, r).q for p, r in targets]
    again = [solver.solve(_ready(model, solver), p, r).q for p, r in reversed(targets)][::-1]
    for a, b in zip(first, again, strict=True):
        assert np.array_equal(a, b)


def test_an_unreachable_target_is_a_miss_within_the_joint_limits(arm) -> None:
    model, solver = arm
    data = _ready(model, solver)
    pos, rot = _site(solver, data)
    result = solver.solve(data, pos + np.array([3.0, 0.0, 0.0]), rot)
    assert not result.converged(1e-3, 1e-2)
    assert result.iterations == solver.max_iters
    assert result.position_error > 1.0
    joints = [model.joint(n).id for n in ARM_JOINTS]
    limited = model.jnt_limited[joints].astype(bool)
    low, high = model.jnt_range[joints, 0], model.jnt_range[joints, 1]
    assert np.all(result.q[limited] >= low[limited] - 1e-12)
    assert np.all(result.q[limited] <= high[limited] + 1e-12)


def test_only_the_chain_moves_in_the_scratch_data(arm) -> None:
    model, solver = arm
    data = _ready(model, solver)
    before = data.qpos.copy()
    pos, rot = _site(solver, data)
    solver.solve(data, pos + np.array([0.05, 0.05, 0.0]), rot)
    others = np.setdiff1d(np.arange(model.nq), solver.qpos_adr)
    assert np.array_equal(data.qpos[others], before[others])
    assert not np.array_equal(data.qpos[solver.qpos_adr], before[solver.qpos_adr])


@pytest.mark.parametrize("pos, rot", [
    ([0.1, 0.2], None),
    ([0.1, float("nan"), 0.3], None),
    ([0.1, 0.2, 0.3], np.eye(2)),
    ([0.1, 0.2, 0.3], np.full((3, 3), np.inf)),
])
def test_a_malformed_target_is_refused(arm, pos, rot) -> None:
    model, solver = arm
    data = _ready(model, solver)
    before = data.qpos.copy()
    with pytest.raises(ValueError, match="IK target"):
        solver.solve(data, np.asarray(pos, dtype=float), rot)
    assert np.array_equal(data.qpos, before)


def test_a_malformed_chain_or_setting_is_refused(arm) -> None:
    model, solver = arm
    site = solver.site_id
    with pytest.raises(ValueError, match="addresses"):
        SiteIk(model, site, qpos_adr=solver.qpos_adr, dof_adr=solver.dof_adr[:3])
    with pytest.raises(ValueError, match="addresses"):
        SiteIk(model, site, qpos_adr=np.array([], dtype=int), dof_adr=np.array([], dtype=int))
    with pytest.raises(ValueError, match="site"):
        SiteIk(model, model.nsite, qpos_adr=solver.qpos_adr, dof_adr=solver.dof_adr)
    with pytest.raises(ValueError, match="max_iters"):
        SiteIk(model, site, qpos_adr=solver.qpos_adr, dof_adr=solver.dof_adr, max_iters=0)
    with pytest.raises(ValueError, match="max_step"):
        SiteIk(model, site, qpos_adr=solver.qpos_adr, dof_adr=solver.dof_adr, max_step=0.0)
