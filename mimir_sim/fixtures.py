"""Articulated fixtures: door and drawer joints, their openings and the geometry of their handles.

A locked fixture has a joint range of a few milli-units, so a pull meets contact force and
actuator effort but no motion; whether a door or drawer opened is always read from its joint
after the physics ran. The controllers that pull and push them are in :mod:`mimir_sim.doors`.
"""

from __future__ import annotations

import math

import numpy as np

from mimir_sim.errors import UnknownEntityError
from mimir_sim.geometry import FloatArray, grip_rotation, rot_z, wrap
from mimir_sim.physics import PhysicsWorld
from mimir_sim.robot import RobotBody
from mimir_sim.scene_layout import DOOR_T, FixtureLayout


class ArticulatedFixtures:
    """Openings of the scene's doors and drawers, the largest seen, and handle and door geometry."""

    def __init__(self, world: PhysicsWorld, body: RobotBody) -> None:
        self.world = world
        self.body = body
        self.max_opening: dict[str, float] = {}
        world.after_steps.append(self._track)

    def reset(self) -> None:
        """Start tracking the largest opening of every openable fixture from 0."""
        self.max_opening = {
            fid: 0.0 for fid, f in self.world.scene.fixtures.items() if f.is_openable
        }

    def _track(self) -> None:
        for fid in self.max_opening:
            self.max_opening[fid] = max(self.max_opening[fid], self.opening(fid))

    def fixture(self, fixture_id: str) -> FixtureLayout:
        """Layout of a fixture.

        Raises:
            UnknownEntityError: no such fixture.
        """
        try:
            return self.world.scene.fixtures[fixture_id]
        except KeyError as err:
            raise UnknownEntityError(f"unknown fixture {fixture_id!r}") from err

    def opening(self, fixture_id: str) -> float:
        """Door angle (rad) or drawer displacement (m); 0 for fixtures that do not open."""
        fx = self.fixture(fixture_id)
        if fx.joint is None:
            return 0.0
        w = self.world
        return float(w.data.qpos[w.model.joint(fx.joint).qposadr[0]])

    def is_open(self, fixture_id: str) -> bool:
        """Whether the door or drawer is open past the configured threshold."""
        fx = self.fixture(fixture_id)
        if fx.joint is None:
            return True
        cfg = self.world.config
        thr = cfg.open_threshold_drawer if fx.is_drawer else cfg.open_threshold_door
        return self.opening(fixture_id) >= thr

    def handle_site_pose(self, fx: FixtureLayout) -> tuple[FloatArray, FloatArray]:
        """World position and rotation of a fixture's handle site."""
        assert fx.handle_site is not None
        w = self.world
        site = w.model.site(fx.handle_site).id
        return (
            np.array(w.data.site_xpos[site], dtype=np.float64),
            w.data.site_xmat[site].reshape(3, 3),
        )

    def handle_grip(self, fx: FixtureLayout) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Handle point, approach direction and grip rotation for the handle's current pose."""
        point, door_rot = self.handle_site_pose(fx)
        approach = door_rot @ np.array([1.0, 0.0, 0.0])  # into the door face
        if fx.is_drawer:
            return point, approach, grip_rotation(approach, door_rot @ np.array([0.0, 0.0, 1.0]))
        cfg = self.world.config
        if self.opening(fx.id) > cfg.door_via_angle:
            # the bar stands vertical: the hand may take it from any side within a skew of the
            # door's normal; turning towards the base keeps a swung-away handle reachable
            x, y, _ = self.body.base_pose()
            normal_yaw = math.atan2(float(approach[1]), float(approach[0]))
            to_handle = math.atan2(float(point[1]) - y, float(point[0]) - x)
            skew = float(
                np.clip(wrap(to_handle - normal_yaw), -cfg.handle_max_skew, cfg.handle_max_skew)
            )
            yaw = normal_yaw + skew
            approach = np.array([math.cos(yaw), math.sin(yaw), 0.0])
        finger_axis = np.array([-approach[1], approach[0], 0.0])
        return point, approach, grip_rotation(approach, finger_axis)

    def door_point(self, fx: FixtureLayout, along: float, off: float, z: float) -> FloatArray:
        """World point ``along`` m from the hinge on the door and ``off`` m off its inner face."""
        assert fx.hinge_point is not None
        theta = self.opening(fx.id)
        towards_free = -1.0 if fx.hinge_sign < 0 else 1.0  # closed door: hinge -> free edge on y
        local = np.array([DOOR_T + off, towards_free * along, 0.0])
        world = rot_z(fx.hinge_sign * theta) @ local
        return np.array([fx.hinge_point[0] + world[0], fx.hinge_point[1] + world[1], z])
