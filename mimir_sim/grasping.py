"""Grasping: closing the fingers on something and the grasp-assist constraints.

MuJoCo's soft contacts do not hold a bottle or a handle bar firmly enough for the controllers'
pulls, so the scene carries a disabled weld per object (``grasp_<object>``) and a disabled
connect constraint per handle (``grip_<fixture>``). One is switched on only once both fingers
touch the entity and ``SimConfig.pick_assist`` allows it; it carries the load from then on and
is switched off when the hand lets go.
"""

from __future__ import annotations

from collections.abc import Callable

import mujoco
import numpy as np

from mimir_sim.controllers import RobotControl
from mimir_sim.physics import PhysicsWorld
from mimir_sim.robot import RobotBody
from mimir_sim.scene_layout import FixtureLayout


class GraspAssist:
    """The hand's grip on objects and handles, and which object it holds."""

    def __init__(self, world: PhysicsWorld, body: RobotBody, control: RobotControl) -> None:
        self.world = world
        self.body = body
        self.control = control
        self.holding: str | None = None
        m = world.model
        self._weld: dict[str, int] = {}
        for oid in world.scene.objects:
            eq = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_EQUALITY, f"grasp_{oid}")
            if eq >= 0:
                self._weld[oid] = eq
        self._handle_eq: dict[str, int] = {}
        for fid in world.scene.fixtures:
            eq = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_EQUALITY, f"grip_{fid}")
            if eq >= 0:
                self._handle_eq[fid] = eq

    def reset(self) -> None:
        """Switch every assist off and forget the held object."""
        for eq in [*self._weld.values(), *self._handle_eq.values()]:
            self.world.data.eq_active[eq] = 0
        self.holding = None

    def close_on(self, entity: str, engage: Callable[[], None]) -> bool:
        """Close the gripper; call ``engage`` as soon as both fingers touch ``entity``.

        Returns whether both fingers touched it and at least one still does at the end.
        """
        self.control.set_gripper(True)
        engaged = False
        for _ in range(max(1, round(self.world.config.grip_close_s / 0.01))):
            self.world.step_seconds(0.01)
            if not engaged and self.body.touching(entity) == {"left", "right"}:
                if self.world.config.pick_assist:
                    engage()
                engaged = True
        return engaged and bool(self.body.touching(entity))

    def engage_handle(self, fx: FixtureLayout) -> None:
        """Pin the handle point of ``fx`` to the hand where it is now."""
        eq = self._handle_eq.get(fx.id)
        if eq is None or fx.moving_body is None or fx.handle_site is None:
            return
        m, d = self.world.model, self.world.data
        point = d.site_xpos[m.site(fx.handle_site).id]
        b1, b2 = self.body.gripper_body, m.body(fx.moving_body).id
        m.eq_data[eq, 0:3] = d.xmat[b1].reshape(3, 3).T @ (point - d.xpos[b1])
        m.eq_data[eq, 3:6] = d.xmat[b2].reshape(3, 3).T @ (point - d.xpos[b2])
        d.eq_active[eq] = 1

    def handle_held(self, fixture_id: str) -> bool:
        """Whether the assist of a fixture's handle is on."""
        eq = self._handle_eq.get(fixture_id)
        return eq is not None and bool(self.world.data.eq_active[eq])

    def assist_force(self, fixture_id: str) -> float:
        """Force (N) carried by the grasp-assist constraint of a fixture's handle."""
        eq = self._handle_eq.get(fixture_id)
        d = self.world.data
        if eq is None or not d.eq_active[eq]:
            return 0.0
        rows = np.where(
            (d.efc_type[: d.nefc] == int(mujoco.mjtConstraint.mjCNSTR_EQUALITY))
            & (d.efc_id[: d.nefc] == eq)
        )[0]
        return float(np.linalg.norm(d.efc_force[rows])) if rows.size else 0.0

    def release_handles(self) -> None:
        """Switch every handle assist off."""
        for eq in self._handle_eq.values():
            self.world.data.eq_active[eq] = 0

    def engage_weld(self, object_id: str) -> None:
        """Weld ``object_id`` to the hand in its current relative pose."""
        eq = self._weld.get(object_id)
        if eq is None:
            return
        m, d = self.world.model, self.world.data
        b1 = self.body.gripper_body
        b2 = m.body(object_id).id
        r1 = d.xmat[b1].reshape(3, 3)
        rel_pos = r1.T @ (d.xpos[b2] - d.xpos[b1])
        q1_inv = np.zeros(4)
        mujoco.mju_negQuat(q1_inv, d.xquat[b1])
        rel_quat = np.zeros(4)
        mujoco.mju_mulQuat(rel_quat, q1_inv, d.xquat[b2])
        m.eq_data[eq, 0:3] = 0.0
        m.eq_data[eq, 3:6] = rel_pos
        m.eq_data[eq, 6:10] = rel_quat
        m.eq_data[eq, 10] = 1.0
        d.eq_active[eq] = 1

    def drop(self) -> None:
        """Release the held object's weld (the fingers stay as they are)."""
        if self.holding is not None and self.holding in self._weld:
            self.world.data.eq_active[self._weld[self.holding]] = 0
        self.holding = None
