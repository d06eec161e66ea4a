"""The base and pick-and-place primitives: move_to, inspect, pick and place.

Each primitive opens a record, runs the robot's controllers, measures its outcome from the
physics (where the base stopped, which fixture now holds the object, what the wrist camera saw)
and closes the record. ``open`` and ``close`` are in :mod:`mimir_sim.doors`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mimir_sim.doors import DoorSkills
from mimir_sim.errors import PrimitiveError, UnknownEntityError, UnreachablePoseError
from mimir_sim.geometry import FloatArray, grip_rotation, wrap
from mimir_sim.recording import PrimitiveRecord
from mimir_sim.rendering import Cameras
from mimir_sim.scenario import CategorySpec
from mimir_sim.scene_layout import start_pose_for
from mimir_sim.skills import RobotParts, RobotSkills
from mimir_sim.truth import SceneTruth


@dataclass(frozen=True)
class MoveResult:
    """Outcome of a base motion."""

    reached: bool
    target: tuple[float, float, float]
    final: tuple[float, float, float]
    position_error: float
    yaw_error: float


def half_height(cat: CategorySpec) -> float:
    """Half of an object's standing height as the scene builder places it (m)."""
    if cat.shape in ("sphere", "capsule"):
        return cat.size[0]
    return cat.size[-1] if cat.shape in ("box", "ellipsoid") else cat.size[1]


class Primitives(RobotSkills):
    """move_to, inspect, pick and place on one simulated robot."""

    def __init__(
        self,
        parts: RobotParts,
        *,
        truth: SceneTruth,
        doors: DoorSkills,
        cameras: Cameras,
    ) -> None:
        super().__init__(parts)
        self.truth = truth
        self.doors = doors
        self.cameras = cameras

    def move_to(self, target: str | Sequence[float]) -> MoveResult:
        """Drive the base to a fixture's approach pose or to an explicit (x, y, yaw) pose.

        Raises:
            UnknownEntityError: unknown fixture id.
            UnreachablePoseError: the pose is outside the room or inside a fixture.
        """
        if isinstance(target, str):
            goal = start_pose_for(self.fixtures.fixture(target))
            name = target
        else:
            values = tuple(float(v) for v in target)
            if len(values) != 3:
                raise UnreachablePoseError(f"a base pose needs x, y, yaw; got {values}")
            goal = (values[0], values[1], values[2])
            name = f"pose({goal[0]:.2f},{goal[1]:.2f},{goal[2]:.2f})"
        self.body.check_base_pose(goal)
        record = self.recorder.begin("move_to", name)
        if self.grasp.holding is None:
            self.control.home_arm()
        pos_err, yaw_err = self.control.drive_base(goal)
        cfg = self.world.config
        reached = pos_err <= cfg.base_pos_tol and yaw_err <= cfg.base_yaw_tol
        record.success = reached
        record.outcome = "reached" if reached else "not reached within tolerance"
        record.measurements = {"position_error": pos_err, "yaw_error": yaw_err}
        self.recorder.end(record)
        return MoveResult(reached, goal, self.body.base_pose(), pos_err, yaw_err)

    def inspect(self, fixture_id: str) -> PrimitiveRecord:
        """Sweep the wrist camera across the fixture's opening, recording wrist frames."""
        fx = self.fixtures.fixture(fixture_id)
        if self.grasp.holding is not None:
            raise PrimitiveError(f"the gripper holds {self.grasp.holding}; place it first")
        cfg = self.world.config
        record = self.recorder.begin("inspect", fixture_id)
        opening = self.fixtures.opening(fixture_id)
        record.measurements["opening"] = opening
        record.measurements["was_open"] = 1.0 if self.fixtures.is_open(fixture_id) else 0.0
        z = fx.interior_low[2] + (0.12 if fx.type != "counter" else 0.25)
        x = fx.front_x - (opening if fx.is_drawer else 0.0) - 0.15
        if fx.is_drawer:
            z = fx.interior_high[2] + 0.25
        centre = np.array([x, fx.center_y, z])
        if self.body.reach_to(centre) > cfg.reach_radius:
            record.outcome = "fixture out of reach; move closer first"
            return self.recorder.end(record)
        pitch = 0.9 if fx.is_drawer else 0.2
        approach = np.array([math.cos(pitch), 0.0, -math.sin(pitch)])
        rot = grip_rotation(approach, np.array([0.0, 1.0, 0.0]))
        count = max(1, cfg.inspect_frames)
        half = fx.width * 0.3
        offsets = np.linspace(-half, half, count) if count > 1 else np.zeros(1)
        visible: set[str] = set()
        width, height = cfg.frame_size
        reached = 0
        for off in offsets:
            if not self.control.move_gripper_to(
                centre + np.array([0.0, off, 0.0]), rot, speed=0.4, straight=reached > 0
            ):
                continue
            reached += 1
            frame = self.cameras.render("wrist", width, height)
            record.frames.append(frame)
            visible |= frame.visible_entities()
        self.control.home_arm()
        objects = self.world.scene.objects
        seen = sorted(
            e for e in visible if e in objects and self.truth.object_fixture(e) == fixture_id
        )
        record.measurements["views"] = float(reached)
        record.success = reached > 0
        record.outcome = f"saw {len(seen)} objects: {', '.join(seen)}" if reached else "no view"
        record.measurements["objects_seen"] = float(len(seen))
        return self.recorder.end(record)

    def _pick_stance(self, pos: FloatArray, source: str | None) -> float:
        """Drive the base square in front of an object at ``pick_base_distance``.

        Backs off in 5 cm steps where that pose would collide with a fixture; stays put when
        no pose is free or the current one is already within 3 cm. Returns the distance moved.
        """
        cfg = self.world.config
        x0, y0, heading = self.body.base_pose()
        if cfg.pick_base_distance <= 0.0:
            return 0.0
        y = float(pos[1])
        if source is not None:
            fx = self.fixtures.fixture(source)
            if fx.hinge_point is not None:
                # keep the arm clear of the swung-open door on the hinge side
                side = -1.0 if fx.hinge_sign < 0 else 1.0  # hinge -> free edge along y
                limit = fx.hinge_point[1] + side * cfg.pick_hinge_clearance
                y = min(y, limit) if side < 0 else max(y, limit)
        for k in range(6):
            goal = (float(pos[0]) - cfg.pick_base_distance - 0.05 * k, y, heading)
            try:
                self.body.check_base_pose(goal)
            except UnreachablePoseError:
                continue
            shift = math.hypot(goal[0] - x0, goal[1] - y0)
            if shift > 0.03:
                self.control.drive_base(goal)
            return shift
        return 0.0

    def _pick_approach(
        self, pos: FloatArray, cat: CategorySpec
    ) -> tuple[FloatArray, FloatArray, float]:
        """Approach direction, grip rotation and pitch (rad, down from level) for an object.

        The hand points from the base towards the object (yaw limited to ``pick_max_yaw``).
        Objects whose half height is below ``pick_tilt_below`` are taken with the hand pitched
        down by ``pick_pitch`` so the finger links clear the shelf; the fingers always close
        horizontally.
        """
        cfg = self.world.config
        x, y, heading = self.body.base_pose()
        rel = wrap(math.atan2(float(pos[1]) - y, float(pos[0]) - x) - heading)
        yaw = heading + float(np.clip(rel, -cfg.pick_max_yaw, cfg.pick_max_yaw))
        pitch = cfg.pick_pitch if half_height(cat) < cfg.pick_tilt_below else 0.0
        approach = np.array(
            [
                math.cos(pitch) * math.cos(yaw),
                math.cos(pitch) * math.sin(yaw),
                -math.sin(pitch),
            ]
        )
        finger_axis = np.array([-math.sin(yaw), math.cos(yaw), 0.0])
        return approach, grip_rotation(approach, finger_axis), pitch

    def pick(self, object_id: str) -> PrimitiveRecord:
        """Grasp an object from the side, lift it and pull it out of its fixture."""
        scene, cfg, ctl, grasp = self.world.scene, self.world.config, self.control, self.grasp
        if object_id not in scene.objects:
            raise UnknownEntityError(f"unknown object {object_id!r}")
        if grasp.holding is not None:
            raise PrimitiveError(f"the gripper already holds {grasp.holding}")
        record = self.recorder.begin("pick", object_id)
        source = self.truth.object_fixture(object_id)
        pos = self.truth.object_position(object_id)
        if self.body.reach_to(pos) > cfg.reach_radius:
            record.outcome = "object out of reach; move closer first"
            return self.recorder.end(record)
        if source is not None and not self.fixtures.is_open(source):
            record.outcome = f"{source} is closed"
            return self.recorder.end(record)
        cat = scene.scenario.catalog[scene.objects[object_id].category]
        record.measurements["base_shift"] = self._pick_stance(pos, source)
        approach, rot, pitch = self._pick_approach(pos, cat)
        record.measurements["approach_pitch"] = pitch
        noise = self._rng.normal(0.0, cfg.grasp_noise, 3) if cfg.grasp_noise else 0.0
        flat = np.array([approach[0], approach[1], 0.0])
        flat /= np.linalg.norm(flat)
        # capsules lie along the shelf depth: close on their near half, not round their middle
        reach_in = cat.size[0] + cat.size[1] - 0.03 if cat.shape == "capsule" else 0.0
        grip_point = pos + noise - max(0.0, reach_in) * flat
        grip_point[2] += cfg.pick_grip_height if pitch > 0.0 else 0.0
        target = grip_point - 0.018 * approach
        ctl.gripper(False)
        pre = target - cfg.pick_pre_distance * approach
        ok = ctl.move_gripper_to(pre, rot, speed=0.5, straight=False) and ctl.move_gripper_to(
            target, rot, speed=0.15
        )
        grasped = ok and grasp.close_on(object_id, lambda: grasp.engage_weld(object_id))
        record.measurements["fingers_on_object"] = float(len(self.body.touching(object_id)))
        if not grasped:
            record.outcome = "missed grasp" if ok else "grasp pose not reachable"
            self.doors.release_and_retreat(rot)
            return self.recorder.end(record)
        grasp.holding = object_id
        cur, _ = self.body.site_pose()
        ctl.move_gripper_to(cur + np.array([0.0, 0.0, 0.03]), rot, speed=0.1)
        cur, _ = self.body.site_pose()
        ctl.move_gripper_to(cur - 0.3 * flat, rot, speed=0.2)
        self.world.step_seconds(0.3)
        now_in = self.truth.object_fixture(object_id)
        still = self.body.touching(object_id)
        record.measurements["fingers_after_lift"] = float(len(still))
        record.success = still == {"left", "right"} and now_in != source
        if not record.success:
            grasp.drop()
        record.outcome = (
            f"picked from {source}" if record.success else "object slipped or stayed in place"
        )
        return self.recorder.end(record)

    def place(
        self, object_id: str, fixture_id: str, slot: tuple[float, float] = (0.5, 0.4)
    ) -> PrimitiveRecord:
        """Put the held object on a fixture's surface at ``slot`` (u across, v in depth)."""
        fx = self.fixtures.fixture(fixture_id)
        if self.grasp.holding != object_id:
            raise PrimitiveError(f"the gripper does not hold {object_id!r}")
        record = self.recorder.begin("place", f"{object_id}->{fixture_id}")
        if fx.is_openable and not self.fixtures.is_open(fixture_id):
            record.outcome = f"{fixture_id} is closed"
            return self.recorder.end(record)
        w, ctl = self.world, self.control
        lo, hi = np.array(fx.interior_low), np.array(fx.interior_high)
        cat = w.scene.scenario.catalog[w.scene.objects[object_id].category]
        site_pos, rot = self.body.site_pose()
        offset = site_pos - w.data.xpos[w.model.body(object_id).id]
        half_h = float(
            cat.size[-1] if cat.shape in ("cylinder", "box", "ellipsoid") else cat.size[0]
        )
        goal = np.array(
            [
                lo[0] + 0.06 + slot[1] * max(0.0, hi[0] - lo[0] - 0.12),
                hi[1] - 0.06 - slot[0] * max(0.0, hi[1] - lo[1] - 0.12),
                lo[2] + half_h + 0.015,
            ]
        )
        if self.body.reach_to(goal) > w.config.reach_radius:
            record.outcome = "target out of reach; move closer first"
            return self.recorder.end(record)
        above = goal + offset + np.array([0.0, 0.0, 0.12])
        ok = ctl.move_gripper_to(above, rot, speed=0.3, straight=False) and ctl.move_gripper_to(
            goal + offset, rot, speed=0.1
        )
        self.grasp.drop()
        ctl.gripper(False)
        cur, _ = self.body.site_pose()
        ctl.move_gripper_to(cur - 0.12 * rot[:, 2], rot, speed=0.3)
        ctl.home_arm()
        w.step_seconds(0.5)
        where = self.truth.object_fixture(object_id)
        record.success = ok and where == fixture_id
        record.outcome = f"object now on {where}" if where else "object not on a fixture"
        return self.recorder.end(record)
