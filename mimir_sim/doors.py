"""Opening and closing doors and drawers by their handles.

The hand grasps the handle (coming round the free edge when a door stands wide open), then
follows the hinge arc or the drawer slide in small IK waypoints while the fingers, or the grasp
assist, hold the bar. The outcome is measured from the joint after the physics ran: a locked
fixture yields handle force and arm effort but no displacement.
"""

from __future__ import annotations

import math

import numpy as np

from mimir_sim.errors import PrimitiveError
from mimir_sim.geometry import FloatArray, rot_z, wrap
from mimir_sim.recording import PrimitiveRecord
from mimir_sim.robot import GRIP_DEPTH
from mimir_sim.scene_layout import DOOR_T, FixtureLayout, start_pose_for
from mimir_sim.skills import RobotSkills


class DoorSkills(RobotSkills):
    """The ``open`` and ``close`` primitives and the hand's retreat from a fixture."""

    def _grasp_handle(
        self, fx: FixtureLayout, record: PrimitiveRecord
    ) -> tuple[bool, FloatArray, FloatArray]:
        cfg, ctl, fixtures = self.world.config, self.control, self.fixtures
        point, approach, rot = fixtures.handle_grip(fx)
        noise = self._rng.normal(0.0, cfg.grasp_noise, 3) if cfg.grasp_noise else 0.0
        target = point + noise - GRIP_DEPTH * approach
        record.measurements["grasp_offset"] = float(np.linalg.norm(noise))
        ctl.gripper(False)
        pre = target - 0.12 * approach
        if not fx.is_drawer and fixtures.opening(fx.id) > cfg.door_via_angle:
            # the handle faces away from the base: come round the door's free edge to it
            z = float(point[2])
            inside = fixtures.door_point(fx, fx.width + 0.12, 0.15, z)
            past = fixtures.door_point(fx, fx.width + 0.12, -0.12, z)
            if not ctl.move_gripper_to(inside, rot, speed=0.5, straight=False):
                return False, target, rot
            for goal in (past, pre):
                if not ctl.move_gripper_to(goal, rot, speed=0.3) and not ctl.move_gripper_to(
                    goal, None, speed=0.3
                ):
                    return False, target, rot
            if not ctl.move_gripper_to(pre, rot, speed=0.3, straight=False):
                return False, target, rot
        elif not ctl.move_gripper_to(pre, rot, speed=0.5, straight=False):
            return False, target, rot
        if not ctl.move_gripper_to(target, rot, speed=0.15):
            return False, target, rot
        handle = f"{fx.id}_handle"
        grasped = self.grasp.close_on(handle, lambda: self.grasp.engage_handle(fx))
        record.measurements["fingers_on_handle"] = float(len(self.body.touching(handle)))
        return grasped, target, rot

    def _push_door_back(self, fx: FixtureLayout, angle: float) -> bool:
        """Swing a wide-open door back to ``angle`` by pushing its outer face.

        The hand comes round the free edge to the outer side, between the hinge and the
        handle, and follows the hinge arc with its orientation left free.
        """
        assert fx.hinge_point is not None and fx.handle_site is not None
        ctl, fixtures = self.control, self.fixtures
        z = float(fixtures.handle_site_pose(fx)[0][2])
        ctl.gripper(True)
        inside = fixtures.door_point(fx, fx.width + 0.12, 0.15, z)
        past = fixtures.door_point(fx, fx.width + 0.12, -0.14, z)
        start = fixtures.door_point(fx, fx.width * 0.45, -DOOR_T - 0.05, z)
        if not ctl.move_gripper_to(inside, None, speed=0.5, straight=False):
            return False
        for goal in (past, start):
            if not ctl.move_gripper_to(goal, None, speed=0.3):
                ctl.home_arm()
                return False
        theta0 = fixtures.opening(fx.id)
        hinge = np.array([fx.hinge_point[0], fx.hinge_point[1], z])
        arm = self.body.site_pose()[0] - hinge
        sweep = angle - theta0
        n = max(2, math.ceil(abs(sweep) / 0.03))
        q_seed: FloatArray | None = None
        for i in range(1, n + 1):
            turn = rot_z(fx.hinge_sign * sweep * (i / n))
            q = ctl.ik(hinge + turn @ arm, None, q_seed)
            if q is None:
                break
            q_seed = q
            ctl.drive_arm(q, max(abs(sweep) / n * float(np.linalg.norm(arm)) / 0.15, 0.03))
        self.world.step_seconds(0.2)
        outer = rot_z(fx.hinge_sign * fixtures.opening(fx.id)) @ np.array([-1.0, 0.0, 0.0])
        pos = self.body.site_pose()[0]
        ctl.move_gripper_to(pos + 0.08 * outer, None, speed=0.3)
        ctl.gripper(False)
        ctl.home_arm()
        return fixtures.opening(fx.id) < theta0 - 0.1

    def release_and_retreat(self, rot: FloatArray, fx: FixtureLayout | None = None) -> None:
        """Open the fingers, back away and fold the arm home.

        Beside an open door the hand first backs off the door's outer face and then comes round
        its free edge to the inner side, so folding the arm does not sweep the door shut again.
        """
        ctl, fixtures = self.control, self.fixtures
        self.grasp.release_handles()
        ctl.gripper(False)
        pos, cur_rot = self.body.site_pose()
        if fx is not None and fx.handle_site is not None and not fx.is_drawer:
            door_rot = fixtures.handle_site_pose(fx)[1]
            away = door_rot @ np.array([-1.0, 0.0, 0.0])
            back = pos + 0.06 * away
            if not ctl.move_gripper_to(back, cur_rot, speed=0.4):
                ctl.move_gripper_to(back, None, speed=0.4)
            if fixtures.opening(fx.id) > self.world.config.door_via_angle:
                assert fx.hinge_point is not None
                z = float(self.body.site_pose()[0][2])
                past = fixtures.door_point(fx, fx.width + 0.12, -0.12, z)
                inside = fixtures.door_point(fx, fx.width + 0.12, 0.15, z)
                for goal in (past, inside):
                    if not ctl.move_gripper_to(goal, cur_rot, speed=0.4):
                        ctl.move_gripper_to(goal, None, speed=0.4)
        else:
            ctl.move_gripper_to(pos - 0.12 * rot[:, 2], rot, speed=0.4)
        ctl.home_arm()

    def _square_up(self, fx: FixtureLayout, before: float) -> None:
        """Stand at the fixture's approach pose (a pick may have shifted the base)."""
        stance = start_pose_for(fx)
        if fx.is_drawer and before > 0.0:
            # an open drawer's handle sticks out towards the base: stand back by as much
            stance = (stance[0] - before, stance[1], stance[2])
        x, y, yaw = self.body.base_pose()
        if math.hypot(stance[0] - x, stance[1] - y) > 0.03 or abs(wrap(stance[2] - yaw)) > 0.05:
            self.body.check_base_pose(stance)
            self.control.home_arm()
            self.control.drive_base(stance)

    def _waypoints(
        self,
        fx: FixtureLayout,
        opening: bool,
        before: float,
        grip_point: FloatArray,
        rot: FloatArray,
    ) -> list[tuple[FloatArray, FloatArray]]:
        """Hand poses along the drawer slide or the hinge arc from ``before`` to the goal."""
        cfg = self.world.config
        if fx.is_drawer:
            goal = cfg.drawer_open_dist if opening else -cfg.close_overdrive_drawer
            travel = goal - before
            n = max(2, math.ceil(abs(travel) / 0.01))
            pull_dir = np.array([-1.0, 0.0, 0.0])
            waypoints = [(grip_point + pull_dir * travel * (i / n), rot) for i in range(1, n + 1)]
            if not opening:
                # ease off the overdrive before letting go, or the squeezed stop springs it open
                waypoints.append((grip_point - pull_dir * before, rot))
            return waypoints
        assert fx.hinge_point is not None
        goal = cfg.door_open_angle if opening else (-cfg.close_overdrive_door)
        hinge = np.array([fx.hinge_point[0], fx.hinge_point[1], grip_point[2]])
        arm = grip_point - hinge
        n = max(2, math.ceil(abs(goal - before) / 0.03))
        waypoints = []
        for i in range(1, n + 1):
            turn = rot_z(fx.hinge_sign * (goal - before) * (i / n))
            waypoints.append((hinge + turn @ arm, turn @ rot))
        return waypoints

    def _follow(
        self,
        fx: FixtureLayout,
        waypoints: list[tuple[FloatArray, FloatArray]],
        grip_point: FloatArray,
        record: PrimitiveRecord,
    ) -> tuple[float, float, float]:
        """Drag the handle along ``waypoints``; peak handle force, arm effort and assist pull."""
        ctl = self.control
        peak_force = peak_effort = peak_pull = 0.0
        q_seed: FloatArray | None = None
        seg_len = float(np.linalg.norm(waypoints[0][0] - grip_point)) if waypoints else 0.0
        for wp, wrot in waypoints:
            q = ctl.ik(wp, wrot, q_seed)
            if q is None and not fx.is_drawer:
                # the fingers may turn about the vertical bar: lag the hand's yaw behind the door's
                q = ctl.ik(wp, self.body.site_pose()[1], q_seed)
                if q is None:
                    q = ctl.ik(wp, None, q_seed)
            if q is None:
                break
            q_seed = q
            ctl.drive_arm(q, max(seg_len / self.world.config.arm_speed, 0.03))
            lag = float(np.linalg.norm(wp - self.body.site_pose()[0]))
            record.measurements["max_tracking_error"] = max(
                record.measurements.get("max_tracking_error", 0.0), lag
            )
            if lag > 0.06:
                record.measurements["stalled"] = 1.0
                break
            contacts = self.body.finger_contacts()
            on_handle = [c.force for c in contacts if c.entity == f"{fx.id}_handle"]
            peak_force = max(peak_force, sum(on_handle))
            peak_pull = max(peak_pull, self.grasp.assist_force(fx.id))
            peak_effort = max(peak_effort, self.body.arm_effort())
            if not on_handle and not self.grasp.handle_held(fx.id):
                record.measurements["slipped"] = 1.0
                break
        return peak_force, peak_effort, peak_pull

    def actuate(self, fixture_id: str, opening: bool) -> PrimitiveRecord:
        """Open (``opening``) or close a fixture by its handle; the record says what happened.

        Raises:
            UnknownEntityError: unknown fixture.
            PrimitiveError: the fixture has no door or drawer, or the hand holds an object.
        """
        fixtures, cfg = self.fixtures, self.world.config
        fx = fixtures.fixture(fixture_id)
        if not fx.is_openable:
            raise PrimitiveError(f"fixture {fixture_id!r} has no door or drawer")
        if self.grasp.holding is not None:
            raise PrimitiveError(f"the gripper holds {self.grasp.holding}; place it first")
        record = self.recorder.begin("open" if opening else "close", fixture_id)
        before = fixtures.opening(fixture_id)
        record.measurements["opening_before"] = before
        if opening and fixtures.is_open(fixture_id):
            # nothing to pull: the door or drawer already stands open
            record.success = True
            record.outcome = "already open"
            record.measurements["opening_after"] = before
            return self.recorder.end(record)
        point, _, _ = fixtures.handle_grip(fx)
        if self.body.reach_to(point) > cfg.reach_radius:
            record.outcome = "handle out of reach; move closer first"
            record.measurements["opening_after"] = before
            return self.recorder.end(record)
        if (
            not opening
            and not fx.is_drawer
            and fixtures.opening(fixture_id) > cfg.door_push_back_angle + 0.3
        ):
            record.measurements["pushed_partly_shut"] = (
                1.0 if self._push_door_back(fx, cfg.door_push_back_angle) else 0.0
            )
            before = fixtures.opening(fixture_id)
        self._square_up(fx, before)
        grasped, grip_point, rot = self._grasp_handle(fx, record)
        if not grasped:
            record.outcome = "missed grasp: fingers did not close on the handle"
            self.release_and_retreat(rot, fx)
            record.measurements["opening_after"] = fixtures.opening(fixture_id)
            return self.recorder.end(record)
        waypoints = self._waypoints(fx, opening, before, grip_point, rot)
        peak_force, peak_effort, peak_pull = self._follow(fx, waypoints, grip_point, record)
        self.world.step_seconds(0.3)
        after = fixtures.opening(fixture_id)
        record.measurements.update(
            {
                "opening_after": after,
                "opening_held": after,
                "peak_handle_force": peak_force,
                "peak_arm_effort": peak_effort,
                "peak_pull_force": peak_pull,
                "pull_duration": self.world.time - record.start,
            }
        )
        self.release_and_retreat(rot, fx)
        after = fixtures.opening(fixture_id)
        record.measurements["opening_after"] = after
        resisted = abs(after - before) < 0.02 and max(peak_force, peak_pull) > 1.0
        if opening:
            record.success = fixtures.is_open(fixture_id)
            done, moved, short = "opened", "pulled", "fixture did not open far enough"
        else:
            thr = cfg.close_threshold_drawer if fx.is_drawer else cfg.close_threshold_door
            record.success = after <= thr
            done, moved, short = "closed", "pushed", "fixture still open"
        if record.success:
            record.outcome = done
        elif resisted:
            record.outcome = f"{moved} with contact but the fixture did not move"
        else:
            record.outcome = short
        return self.recorder.end(record)
