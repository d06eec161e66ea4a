"""The robot profile: the numbers the executor checks every target against.

One frozen dataclass per robot (the real TidyBot++ and its simulation share the defaults). It
says where the arm sits on the base, which end-effector positions the executor may command (a box
in the arm base frame), how fast the base and the hand may be driven, when a motion counts as
reached or stalled, how to read the gripper, and the distances the primitives keep. Every field
has a unit; :meth:`RobotProfile.__post_init__` refuses values that make no sense, so a bad
profile fails at start-up instead of on the first primitive.

Frames: ``base_link`` is the robot base (x forward, z up); the arm base frame is ``base_link``
shifted by :attr:`RobotProfile.arm_mount` (no rotation, as on the TidyBot++, where the Gen3 sits
upright on the base's centre line). End-effector targets go to the arm server in the arm base
frame; the executor plans in ``base_link`` and converts with :meth:`RobotProfile.to_arm`.

Tool frame: z is the approach direction (out of the palm, between the fingers) and the axis named
by :attr:`RobotProfile.finger_axis` is the one the fingers close along.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from mimir.settings import non_negative, param, positive

FloatArray = npt.NDArray[np.float64]


def _fixed(default: Any, description: str) -> Any:
    """A profile field: a read-only parameter of the executor node."""
    return param(default, description, read_only=True)


class ProfileError(ValueError):
    """A robot profile value out of its range."""


@dataclass(frozen=True)
class RobotProfile:
    """Limits, tolerances and distances of one robot (SI units)."""

    control_period_s: float = _fixed(0.1, "s between streamed targets (TidyBot++: 10 Hz)")
    arm_mount: tuple[float, ...] = _fixed((0.0, 0.0, 0.335), "arm base origin in base_link (m)")
    workspace_min: tuple[float, ...] = _fixed((-0.15, -0.75, -0.45), "EE box, arm frame (m)")
    workspace_max: tuple[float, ...] = _fixed((1.05, 0.75, 1.1), "EE box, arm frame (m)")
    max_base_speed: float = _fixed(0.4, "m/s of the streamed base targets")
    max_base_turn: float = _fixed(1.0, "rad/s of the streamed base targets")
    max_ee_speed: float = _fixed(0.15, "m/s of the streamed end-effector targets")
    max_ee_turn: float = _fixed(0.8, "rad/s of the streamed end-effector targets")
    base_pos_tol: float = _fixed(0.04, "m: base reached")
    base_yaw_tol: float = _fixed(0.06, "rad: base reached")
    base_work_tol: float = _fixed(
        0.10, "m: a base at rest that stopped short of its goal by at most this (an opened door "
        "or a neighbour in its way) is near enough to work from; the next primitive finds its "
        "target from where the base stands")
    route_pass_tol: float = _fixed(0.08, "m: a base waypoint on the way to a goal passed")
    base_stall_s: float = _fixed(
        1.0, "s a base that trails its command must stand before it counts as blocked (from "
        "rest it covers 0.12 m or 0.4 rad in that time at the servers' accelerations)")
    base_stall_move: float = _fixed(0.02, "m moved within base_stall_s or less: standing")
    base_stall_turn: float = _fixed(0.05, "rad turned within base_stall_s or less: standing")
    base_stall_lag: float = _fixed(
        0.15, "m between commanded and achieved base which, with the base standing, is a block")
    base_stall_yaw_lag: float = _fixed(
        0.3, "rad between commanded and achieved heading which, with the base standing, is a block")
    base_radius: float = _fixed(
        0.34, "m: radius of the base's footprint with the arm stowed (TidyBot++: 0.48 m square)")
    route_margin: float = _fixed(0.06, "m kept between the base and an opened fixture's door")
    ee_pos_tol: float = _fixed(0.015, "m: end effector reached")
    settle_timeout_s: float = _fixed(4.0, "s allowed after the last target to reach it")
    stuck_s: float = _fixed(
        1.5, "s a free-space move waits for a hand that stands short of its goal, coming no "
        "closer and turning no further, before it gives up")
    fold_timeout_s: float = _fixed(
        10.0, "s the arm's own retract (reset: joints home at the retract speed, 30 deg/s on the "
        "TidyBot++) may take before the hand stands at the carry pose")
    stall_lag: float = _fixed(0.06, "m between commanded and achieved hand: stalled")
    stall_periods: int = _fixed(3, "consecutive periods over stall_lag to call a stall")
    stall_press_s: float = _fixed(
        0.6, "s a stalled pull or push keeps commanding its stalled target before it holds, so "
        "the robot's signals record the part holding the hand back")
    gripper_closed_empty: float = _fixed(0.93, "reading at or above: the fingers closed on nothing")
    gripper_settle_s: float = _fixed(1.5, "s allowed for the gripper to stop moving")
    stance_distance: float = _fixed(0.8, "m from the base centre to a target's centre")
    face_standoff: float = _fixed(0.66, "m from the base centre to a fixture's front face")
    pick_distance: float = _fixed(0.68, "m from the base centre to an object to be picked")
    easy_reach: float = _fixed(0.92, "m from the arm base within which the arm works well")
    shoulder_height: float = _fixed(0.285, "m above the arm base of the shoulder (Gen3 joint 2)")
    wrist_setback: float = _fixed(
        0.18, "m behind the tool point, against the approach, of the wrist (Gen3 bracelet)")
    min_wrist_reach: float = _fixed(
        0.42, "m the wrist keeps from the shoulder; nearer, the elbow comes to its joint limit "
        "(Gen3 with the hand level: 0.33 m, measured in the simulation; the rest is margin)")
    max_pull_shift: float = _fixed(
        0.5, "m the base may move before a pull so that the whole pull stays in reach")
    min_face_width: float = _fixed(0.25, "m: a target's front at least this wide is a fixture")
    handle_proud_max: float = _fixed(
        0.15, "m in front of (or behind) a closed fixture's front within which its handle stands; "
        "a handle further out hangs on something in front of it, such as a neighbour's open door")
    pregrasp_distance: float = _fixed(0.2, "m backed off along the approach before a grasp")
    grasp_depth: float = _fixed(0.01, "m from a part's visible surface to the point gripped")
    pad_offset: float = _fixed(0.022, "m the finger pads' centre lies ahead of the tool point")
    retreat_distance: float = _fixed(0.12, "m backed off after letting go")
    lift_height: float = _fixed(0.04, "m lifted after a pick")
    door_open_angle: float = _fixed(1.2, "rad a door is swung open")
    drawer_open_distance: float = _fixed(0.25, "m a drawer is pulled out")
    path_step: float = _fixed(0.02, "m between waypoints of a pull or push path")
    moved_fraction: float = _fixed(0.15, "of the path done before a stall: the part moved")
    opened_fraction: float = _fixed(0.8, "of the path done: opened (or closed)")
    finger_axis: str = _fixed("x", "tool axis the fingers close along: x or y")
    retract_pos: tuple[float, ...] = _fixed((0.13, 0.0, 0.21), "carry pose, arm frame (m)")
    carry_pos: tuple[float, ...] = _fixed((0.35, 0.0, 0.3), "held-object pose, arm frame (m)")
    retract_quat: tuple[float, ...] = _fixed(
        (0.7071068, 0.7071068, 0.0, 0.0), "carry orientation, arm frame (x, y, z, w)")
    target_looks: int = _fixed(
        3, "fresh views taken before a target, or the part to grasp on it, counts as unseen")
    match_slack: float = _fixed(
        0.12, "m beyond half its own size that a seen instance may lie from the remembered spot "
        "(its largest extent, or its extent along each base axis)")
    fixture_depth: float = _fixed(
        0.6, "m behind a remembered front within which a target counts as inside that fixture")
    inspect_standoff: float = _fixed(0.15, "m in front of a fixture's front the wrist looks in")
    inspect_drop: float = _fixed(0.08, "m below the front's centre the wrist looks in from")
    inspect_pitch: float = _fixed(0.26, "rad the wrist looks down while inspecting")
    inspect_sweep: float = _fixed(0.12, "m left and right of the centre the inspection sweeps")
    handle_look_standoff: float = _fixed(
        0.3, "m from a point of a closed fixture's front that the hand holds the wrist camera "
        "at to look for a handle the other cameras missed (the camera sees about 0.23 m by "
        "0.31 m of the front round the point; further back, the arm seldom reaches from where "
        "the base stands to open)")
    handle_look_tilt: float = _fixed(
        0.7, "rad above level the wrist camera looks down at the front from, first (then level, "
        "then as much from below)")
    handle_look_past: float = _fixed(
        0.15, "m past the border of a camera's frame that a look for a missed handle aims, "
        "where that border cut the fixture")
    handle_looks: int = _fixed(5, "wrist views reached at most in a look for a missed handle")
    door_clearance: float = _fixed(0.08, "m below an open door's lower edge the hand leaves by")
    place_clearance: float = _fixed(0.08, "m above the place spot the object is brought first")
    place_headroom: float = _fixed(0.35, "m of free space needed above a place spot")
    place_radius: float = _fixed(0.08, "m around a place spot that must be free above it")
    place_standoff: float = _fixed(
        0.45, "m from the base centre to a top's near edge when the base steps up to it for a "
        "place (the base's front lies 0.24 m ahead of its centre)")
    max_place_step: float = _fixed(
        0.35, "m the base may step toward a top whose reachable part leaves no place spot")
    place_edge_margin: float = _fixed(
        0.05, "m of seen surface a place spot needs all round it: a held bottle's centre stays "
        "well inside the edge of a top (or of the clutter on it)")

    def __post_init__(self) -> None:
        for name in ("control_period_s", "max_base_speed", "max_base_turn", "max_ee_speed",
                     "max_ee_turn", "base_pos_tol", "base_yaw_tol", "base_work_tol",
                     "route_pass_tol", "ee_pos_tol", "base_stall_s", "base_stall_move",
                     "base_stall_turn", "base_stall_lag", "base_stall_yaw_lag",
                     "base_radius", "fold_timeout_s", "stuck_s",
                     "settle_timeout_s", "stall_lag", "gripper_settle_s", "stance_distance",
                     "face_standoff", "pick_distance", "easy_reach", "min_face_width",
                     "pregrasp_distance", "retreat_distance", "door_open_angle",
                     "drawer_open_distance", "path_step", "fixture_depth", "place_headroom",
                     "place_radius", "place_edge_margin", "place_standoff", "max_place_step",
                     "inspect_standoff", "shoulder_height", "wrist_setback",
                     "min_wrist_reach", "max_pull_shift", "handle_proud_max",
                     "handle_look_standoff", "handle_look_past"):
            positive(name, getattr(self, name), ProfileError)
        for name in ("lift_height", "grasp_depth", "pad_offset", "match_slack", "inspect_drop",
                     "stall_press_s", "route_margin",
                     "inspect_pitch", "inspect_sweep", "door_clearance", "place_clearance",
                     "handle_look_tilt"):
            non_negative(name, getattr(self, name), ProfileError)
        for name in ("stall_periods", "target_looks", "handle_looks"):
            if getattr(self, name) < 1:
                raise ProfileError(f"{name} must be at least 1")
        if len(self.retract_quat) != 4 or not (
                0.9 < math.sqrt(sum(q * q for q in self.retract_quat)) < 1.1):
            raise ProfileError(f"retract_quat must be a unit quaternion, got {self.retract_quat}")
        for name in ("arm_mount", "workspace_min", "workspace_max", "retract_pos", "carry_pos"):
            vec = getattr(self, name)
            if len(vec) != 3 or not all(math.isfinite(v) for v in vec):
                raise ProfileError(f"{name} must be three finite numbers, got {vec!r}")
        if not all(lo < hi for lo, hi in zip(self.workspace_min, self.workspace_max, strict=True)):
            raise ProfileError("workspace_min must lie below workspace_max on every axis")
        for name in ("retract_pos", "carry_pos"):
            if not self.in_workspace(self.from_arm(np.asarray(getattr(self, name)))):
                raise ProfileError(f"{name} lies outside the workspace")
        if self.base_work_tol < self.base_pos_tol:
            raise ProfileError(f"base_work_tol ({self.base_work_tol}) must not be below "
                               f"base_pos_tol ({self.base_pos_tol})")
        if not 0.0 < self.gripper_closed_empty <= 1.0:
            raise ProfileError("gripper_closed_empty must lie in (0, 1]")
        if not 0.0 < self.moved_fraction < self.opened_fraction <= 1.0:
            raise ProfileError("need 0 < moved_fraction < opened_fraction <= 1")
        if self.finger_axis not in ("x", "y"):
            raise ProfileError(f"finger_axis must be 'x' or 'y', got {self.finger_axis!r}")

    # -- frames --------------------------------------------------------------------------------
    def to_arm(self, point_base: FloatArray) -> FloatArray:
        """A base_link point in the arm base frame."""
        return np.asarray(point_base, dtype=np.float64) - np.asarray(self.arm_mount)

    def from_arm(self, point_arm: FloatArray) -> FloatArray:
        """An arm-base-frame point in base_link."""
        return np.asarray(point_arm, dtype=np.float64) + np.asarray(self.arm_mount)

    def in_workspace(self, point_base: FloatArray) -> bool:
        """Whether a base_link point lies in the end-effector workspace box."""
        p = self.to_arm(point_base)
        lo, hi = np.asarray(self.workspace_min), np.asarray(self.workspace_max)
        return bool(np.all(np.isfinite(p)) and np.all(p >= lo) and np.all(p <= hi))

    def tool_rotation(self, approach: FloatArray, finger: FloatArray) -> FloatArray:
        """Tool rotation (3x3, base_link) with z along ``approach``, fingers along ``finger``.

        ``finger`` is made orthogonal to the approach first.

        Raises:
            ProfileError: the two directions are (nearly) parallel or not finite.
        """
        z = np.asarray(approach, dtype=np.float64)
        f = np.asarray(finger, dtype=np.float64)
        if not (np.all(np.isfinite(z)) and np.all(np.isfinite(f))) or np.linalg.norm(z) < 1e-9:
            raise ProfileError("approach and finger directions must be finite and non-zero")
        z = z / np.linalg.norm(z)
        f = f - z * float(f @ z)
        if np.linalg.norm(f) < 1e-6:
            raise ProfileError("the finger axis is parallel to the approach")
        f = f / np.linalg.norm(f)
        if self.finger_axis == "x":
            x, y = f, np.cross(z, f)
        else:
            y = f
            x = np.cross(y, z)
        return np.column_stack([x, y, z])
