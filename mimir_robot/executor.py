"""The executor core: the six primitives as streamed base, hand and gripper targets.

The executor knows only what a robot knows: where its base is by odometry, where its hand is and
how far its gripper is closed as the arm server reports them, and the geometry the caller derived
from the cameras (a grasp point with its approach and finger directions from 3D pointing, a
guess of how a door or drawer moves, a place point, inspection viewpoints). It never sees an
entity id, a fixture joint or a true pose.

Each primitive is a short sequence of :class:`~mimir_robot.motion.Motion` calls, and its outcome
code comes from the robot's own signals:

* a grasp closed on nothing when the gripper reading reaches ``gripper_closed_empty``
  (``MISSED_GRASP``), and an object was lost when it does so later (``SLIPPED``); a hand that
  never got to the pre-grasp pose did not grasp at all: the handle or object lies beyond what
  the arm can reach from this stance, or something holds the hand off (``UNREACHABLE``; the
  fingers stay open, and a fresh look from the same stance will not bring it nearer);
* a door or drawer that would not move stalls the hand within the first ``moved_fraction`` of
  the pull (``NO_MOTION``: locked or stuck); one that gave way part of the way stalls later
  (``PARTIAL_OPEN``); the full path is ``OPENED``; fingers that lose the handle before the
  pull stalls or the path is mostly done report ``SLIPPED`` (a weak grasp looks the same as a
  held fixture until then, so the caller may try again);
* a base that does not settle within tolerance is ``NOT_REACHED``, unless it came to rest
  short of its goal by no more than ``base_work_tol`` with its heading within tolerance (an
  opened door in the way): that is ``REACHED``, and the message says how far short; a base
  that stands while its command runs ahead (a counter in its way) holds and is ``NOT_REACHED``
  without streaming the rest of its path;

Only ``move_to`` moves the base; the others act on what is in front of the robot. The hand is
retracted before the base drives unless it holds something. Link failures and canceled motions
end the primitive with ``LINK_LOST`` / ``CANCELED`` and leave the robot holding its pose.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.spatial.transform import Rotation

from mimir.transforms import planar_pose
from mimir_robot.motion import (
    Motion,
    MotionCanceledError,
    MotionError,
    MotionResult,
)
from mimir_robot.pointing import FrontFace
from mimir_robot.profile import FloatArray, RobotProfile
from mimir_robot.routes import base_route
from mimir_robot.rpc import RobotLinkError, RobotLinkLostError, RobotUnreachableError

LOG = logging.getLogger(__name__)

#: Least share of a handle's approach that must lie level for stepping back to help a pull
#: (a handle taken from above is reached the same from a little further back).
LEVEL_APPROACH = 0.5

#: Outcome code of each primitive's success.
SUCCESS_CODES = {"move_to": "REACHED", "open": "OPENED", "close": "CLOSED",
                 "inspect": "INSPECTED", "pick": "PICKED", "place": "PLACED"}
#: A look that reached some of its views, not all: something held the arm back (a door in the
#: way); it shows what it saw, but not that anything is absent.
PARTIAL_LOOK = "INSPECTED_PARTLY"
#: An open that moved the fixture but did not get through enough of its path.
PARTIAL_OPEN = "PARTIAL_OPEN"

#: Retracted tool orientation: pointing forward and level (z ahead, fingers closing sideways).
FORWARD = np.array([1.0, 0.0, 0.0])
SIDEWAYS = np.array([0.0, 1.0, 0.0])


@dataclass(frozen=True)
class GraspTarget:
    """Where and how to take hold of something, in base_link (m; unit directions)."""

    point: FloatArray         # where the finger pads close (the part's centre line)
    approach: FloatArray      # direction the hand moves in to grasp (into the part)
    finger: FloatArray        # direction the fingers close along

    def __post_init__(self) -> None:
        for name in ("point", "approach", "finger"):
            v = np.asarray(getattr(self, name), dtype=np.float64)
            if v.shape != (3,) or not np.all(np.isfinite(v)):
                raise ValueError(f"grasp {name} must be three finite numbers, got {v.tolist()}")
        if np.linalg.norm(self.approach) < 1e-9 or np.linalg.norm(self.finger) < 1e-9:
            raise ValueError("grasp directions must be non-zero")

    def moved(self, new_from_old: FloatArray) -> GraspTarget:
        """The same grasp in another base_link (``new_from_old``: 4x4, the base moved)."""
        rot, trans = new_from_old[:3, :3], new_from_old[:3, 3]
        return GraspTarget(rot @ np.asarray(self.point) + trans, rot @ np.asarray(self.approach),
                           rot @ np.asarray(self.finger))


@dataclass(frozen=True)
class Articulation:
    """How a door or drawer moves, as guessed from the camera (base_link).

    ``revolute``: the handle turns about the line through ``point`` along ``axis``.
    ``prismatic``: the handle slides along ``axis`` (pointing out of the fixture).
    """

    kind: str
    axis: FloatArray
    point: FloatArray = field(default_factory=lambda: np.zeros(3))
    bottom: float | None = None  # base_link z of the moving part's lower edge, when seen

    def __post_init__(self) -> None:
        if self.kind not in ("revolute", "prismatic"):
            raise ValueError(f"articulation kind must be revolute or prismatic, not {self.kind!r}")
        for name in ("axis", "point"):
            v = np.asarray(getattr(self, name), dtype=np.float64)
            if v.shape != (3,) or not np.all(np.isfinite(v)):
                raise ValueError(f"articulation {name} must be three finite numbers")
        if np.linalg.norm(self.axis) < 1e-9:
            raise ValueError("articulation axis must be non-zero")

    def moved(self, new_from_old: FloatArray) -> Articulation:
        """The same motion in another base_link (``new_from_old``: 4x4, the base moved)."""
        rot, trans = new_from_old[:3, :3], new_from_old[:3, 3]
        bottom = None if self.bottom is None else self.bottom + float(trans[2])
        return Articulation(self.kind, rot @ np.asarray(self.axis),
                            rot @ np.asarray(self.point) + trans, bottom)


@dataclass
class Outcome:
    """What a primitive did: the code and message the action result reports, and evidence."""

    primitive: str
    success: bool
    code: str
    message: str
    measurements: dict[str, float] = field(default_factory=dict)


class Executor:
    """Runs primitives on one robot through :class:`Motion`.

    Args:
        motion: the streamer bound to the robot (its ``cancel`` event cancels primitives).
        on_phase: called with the phase name as a primitive proceeds (action feedback).
    """

    def __init__(self, motion: Motion, on_phase: Callable[[str], None] | None = None) -> None:
        self.motion = motion
        self.profile: RobotProfile = motion.profile
        self.holding = False
        self.held_hang = 0.0  # m the held object's bottom lies below the hand (from its pick)
        # front faces of the fixtures this robot opened, as measured while closed (odom frame,
        # keyed by memory id): inspection looks in from there once a door stands in the way
        self.faces: dict[str, FrontFace] = {}
        # the fixtures among them whose door or drawer may stand open (moved by an open, not
        # closed since): base moves keep clear of them
        self.opened: set[str] = set()
        self._on_phase = on_phase or (lambda _phase: None)
        self._folds = 0  # retracts of the running primitive that folded the arm by its reset

    # -- entry point -------------------------------------------------------------------------
    def run(self, primitive: str, body: Callable[[Outcome], None]) -> Outcome:
        """Run ``body`` (which fills in the outcome) and turn failures into outcome codes."""
        out = Outcome(primitive, False, "FAILED", "")
        self._folds = 0
        try:
            body(out)
        except MotionCanceledError as err:
            out.success, out.code, out.message = False, err.code, str(err)
        except MotionError as err:
            out.success, out.code, out.message = False, err.code, str(err)
            self._safe_hold()
        except (RobotLinkLostError, RobotUnreachableError) as err:
            out.success, out.code, out.message = False, "LINK_LOST", f"robot link lost: {err}"
        except RobotLinkError as err:
            out.success, out.code, out.message = False, "ROBOT_ERROR", str(err)
            self._safe_hold()
        if self._folds:
            out.measurements["arm_folds"] = float(self._folds)
        return out

    def _safe_hold(self) -> None:
        try:
            self.motion.hold()
        except RobotLinkError as err:
            LOG.warning("could not hold the pose after a failure: %s", err)

    def _phase(self, name: str) -> None:
        self._on_phase(name)

    def _finish(self, out: Outcome, success: bool, code: str, message: str) -> None:
        out.success, out.code, out.message = success, code, message

    # -- shared moves --------------------------------------------------------------------------
    def retract(self) -> MotionResult:
        """Bring the hand to the profile's carry pose, gripper as it is.

        The hand first comes straight back over the base at its height (a straight line stays
        clear of what it just worked on, an open door included), then goes to the carry pose
        through free space. Where the arm cannot follow that path from the branch it is on (the
        arm server refuses a solution that would swing the hand wide), an empty hand is folded
        home by the arm's own joint-space retract (:meth:`Motion.fold_arm`).
        """
        p, m = self.profile, self.motion
        goal = p.from_arm(np.asarray(p.retract_pos))
        pos, rot, _ = m.hand()
        over = np.array([goal[0], goal[1], pos[2]])
        if float(np.linalg.norm((pos - over)[:2])) > 0.1 and p.in_workspace(over):
            m.move_hand(over, rot)
        result = m.reach(goal, Rotation.from_quat(np.asarray(p.retract_quat)).as_matrix())
        if result.reached or self.holding:
            return result
        LOG.info("the hand stopped %.2f m short of the carry pose: folding the arm home",
                 result.error)
        self._folds += 1  # reported in the outcome's measurements as ``arm_folds``
        return m.fold_arm()

    def carry(self) -> MotionResult:
        """Bring a held object to the profile's carry position, low in front of the base,
        keeping its orientation: first straight back at its height (out of the shelf it came
        from), then down (low, it passes under open doors and shelves)."""
        p, m = self.profile, self.motion
        pos, rot, _ = m.hand()
        goal = p.from_arm(np.asarray(p.carry_pos))
        back = np.array([goal[0], goal[1], pos[2]])
        path = [(back, rot), (goal, rot)] if p.in_workspace(back) else [(goal, rot)]
        return m.follow(path)

    def _approach_poses(self, target: GraspTarget) -> tuple[FloatArray, FloatArray, FloatArray]:
        """(pregrasp point, grasp point, tool rotation) of a grasp, in base_link."""
        p = self.profile
        approach = np.asarray(target.approach) / np.linalg.norm(target.approach)
        rot = p.tool_rotation(approach, np.asarray(target.finger))
        # the tool point stops short of the gripped point by the pads' offset
        grasp = np.asarray(target.point, dtype=np.float64) - p.pad_offset * approach
        return grasp - p.pregrasp_distance * approach, grasp, rot

    def _grasp(self, target: GraspTarget, out: Outcome, what: str) -> bool:
        """Open, approach, close on the target; whether the fingers closed on something.

        When they did not, ``out`` is finished with why: ``UNREACHABLE`` if the hand never got
        to the pre-grasp pose (the fingers were not closed), else ``MISSED_GRASP``.
        """
        p, m = self.profile, self.motion
        pre, grasp, rot = self._approach_poses(target)
        self._phase("approach")
        m.grip(0.0)
        approach = m.reach(pre, rot)
        if not approach.reached:
            out.measurements["pregrasp_reached"] = 0.0
            out.measurements["pregrasp_error"] = approach.error
            self._finish(out, False, "UNREACHABLE",
                         f"the hand stopped {approach.error:.2f} m short of the pre-grasp pose: "
                         f"the {what} is out of the arm's reach from here, or something holds "
                         "the hand off")
            return False
        out.measurements["pregrasp_reached"] = 1.0
        reach = m.move_hand(grasp, rot, speed=p.max_ee_speed / 2)
        out.measurements["grasp_error"] = reach.error
        self._phase("grasp")
        reading = m.grip(1.0)
        out.measurements["gripper_closed"] = reading
        if reading >= p.gripper_closed_empty:
            self._finish(out, False, "MISSED_GRASP", "missed grasp: the gripper closed on nothing")
            return False
        return True

    def _let_go(self, clear_below: float | None = None) -> None:
        """Open the hand, back off along the tool's current approach axis, retract.

        After a door's arc the tool has turned with the door, so backing off along its own axis
        leaves the door's face instead of dragging across it. With ``clear_below`` (a height in
        base_link, under an open door's lower edge) the hand drops there before it comes back,
        so it passes under the door rather than through it.
        """
        p, m = self.profile, self.motion
        self._phase("release")
        m.grip(0.0)
        pos, rot, _ = m.hand()
        back = pos - p.retreat_distance * rot[:, 2]
        if p.in_workspace(back):
            m.move_hand(back, rot)
        self._phase("retreat")
        if clear_below is not None:
            pos, rot, _ = m.hand()
            under = np.array([pos[0], pos[1], clear_below])
            if pos[2] > clear_below and p.in_workspace(under):
                m.move_hand(under, rot)
        self.retract()

    # -- primitives ----------------------------------------------------------------------------
    def move_to(self, stance: tuple[float, float, float]) -> Outcome:
        """Drive the base to ``stance`` (odom x, y, theta); the hand is retracted first."""
        def body(out: Outcome) -> None:
            self._phase("arm")
            if self.holding:
                self.carry()
            else:
                self.retract()
            self._phase("drive")
            # around the doors this robot opened (their fronts, measured while closed)
            doors = [f for fid, f in self.faces.items() if fid in self.opened]
            via = base_route(self.motion.base(), stance, doors,
                             radius=self.profile.base_radius, margin=self.profile.route_margin)
            if via:
                out.measurements["route_waypoints"] = float(len(via))
            res = self.motion.drive_base(stance, via)
            out.measurements["position_error"] = res.error
            out.measurements["heading_error"] = res.heading_error
            if res.reached:
                self._finish(out, True, "REACHED", "reached")
            elif not res.moving and res.error <= self.profile.base_work_tol \
                    and res.heading_error <= self.profile.base_yaw_tol:
                out.measurements["short_of_goal"] = res.error
                self._finish(out, True, "REACHED",
                             f"stopped {res.error:.2f} m short of the stance, at rest: near "
                             "enough to work from")
            elif res.stalled:
                out.measurements["stalled"] = 1.0
                self._finish(out, False, "NOT_REACHED",
                             f"base blocked {res.error:.2f} m and {res.heading_error:.2f} rad "
                             "from its goal: it stood while its command ran ahead")
            else:
                self._finish(out, False, "NOT_REACHED",
                             f"base stopped {res.error:.2f} m and {res.heading_error:.2f} rad "
                             "from its goal" + (", still moving" if res.moving else ""))
        return self.run("move_to", body)

    def _arc(self, grasp: FloatArray, rot: FloatArray, art: Articulation, amount: float,
             toward: FloatArray) -> list[tuple[FloatArray, FloatArray | None]]:
        """Hand waypoints moving the handle by ``amount`` (rad or m), first towards ``toward``."""
        p = self.profile
        axis = np.asarray(art.axis, dtype=np.float64) / np.linalg.norm(art.axis)
        if art.kind == "prismatic":
            direction = axis if float(axis @ toward) >= 0.0 else -axis
            n = max(2, math.ceil(amount / p.path_step))
            return [(grasp + direction * amount * i / n, rot) for i in range(1, n + 1)]
        lever = grasp - np.asarray(art.point, dtype=np.float64)
        lever -= axis * float(lever @ axis)
        radius = float(np.linalg.norm(lever))
        if radius < 0.05:
            raise MotionError(f"hinge guess lies {radius:.3f} m from the handle: no lever")
        tangent = np.cross(axis, lever)
        sign = 1.0 if float(tangent @ toward) >= 0.0 else -1.0
        n = max(2, math.ceil(amount * radius / p.path_step))
        out: list[tuple[FloatArray, FloatArray | None]] = []
        for i in range(1, n + 1):
            turn = Rotation.from_rotvec(axis * sign * amount * i / n).as_matrix()
            out.append((grasp + turn @ lever - lever, turn @ rot))
        return out

    def _handle_path(self, opening: bool, handle: GraspTarget, art: Articulation
                     ) -> list[tuple[FloatArray, FloatArray | None]]:
        """The hand's waypoints that open (or close) the part by the profile's amount."""
        p = self.profile
        approach = np.asarray(handle.approach) / np.linalg.norm(handle.approach)
        amount = (p.door_open_angle if art.kind == "revolute" else p.drawer_open_distance)
        # opening pulls the handle back towards the robot, closing pushes it away
        toward = -approach if opening else approach
        rot = p.tool_rotation(approach, np.asarray(handle.finger))
        return self._arc(np.asarray(handle.point, dtype=np.float64), rot, art, amount, toward)

    def in_reach(self, path: Sequence[tuple[FloatArray, FloatArray | None]]) -> bool:
        """Whether the arm can follow ``path`` (base_link) from where the base stands: every
        waypoint in the workspace box and the wrist behind it (``wrist_setback`` against the
        tool's approach) at least ``min_wrist_reach`` from the shoulder."""
        p = self.profile
        shoulder = p.from_arm(np.array([0.0, 0.0, p.shoulder_height]))
        for point, rot in path:
            if not p.in_workspace(point):
                return False
            if rot is not None:
                wrist = np.asarray(point) - np.asarray(rot)[:, 2] * p.wrist_setback
                if float(np.linalg.norm(wrist - shoulder)) < p.min_wrist_reach:
                    return False
        return True

    def _open_path(self, handle: GraspTarget, art: Articulation
                   ) -> list[tuple[FloatArray, FloatArray | None]]:
        """The hand's whole way through an open: in from its pregrasp point, onto the handle,
        then the pull."""
        pre, grasp, rot = self._approach_poses(handle)
        return [(pre, rot), (grasp, rot), *self._handle_path(True, handle, art)]

    def in_reach_to_open(self, handle: GraspTarget, art: Articulation) -> bool:
        """Whether the arm can open ``handle`` from where the base stands (:meth:`in_reach`)."""
        return self.in_reach(self._open_path(handle, art))

    def pull_stance(self, handle: GraspTarget, art: Articulation
                    ) -> tuple[float, float, float] | None:
        """Where to stand (base_link x, y, yaw) for an open that does not fit from here
        (:meth:`in_reach_to_open`; a low door swings its handle so close to the robot that the
        elbow meets its limit): the stance square to the handle, facing along its level
        approach, nearest to where the base stands, from which the whole open stays in reach.
        None when no such stance lies within ``max_pull_shift``, or when the handle is taken
        from above (stepping back changes little then).
        """
        p = self.profile
        approach = np.asarray(handle.approach, dtype=np.float64)
        level = approach[:2].copy()
        if float(np.linalg.norm(level)) < LEVEL_APPROACH * float(np.linalg.norm(approach)):
            return None
        level /= np.linalg.norm(level)
        yaw = math.atan2(level[1], level[0])
        handle_xy = np.asarray(handle.point, dtype=np.float64)[:2]
        ahead = float(np.linalg.norm(handle_xy))
        path = self._open_path(handle, art)
        found: list[tuple[float, tuple[float, float, float]]] = []
        # a stance further than max_pull_shift from here lies further than that from the
        # handle's current distance too, so the standoffs to try follow from the shift
        for standoff in np.arange(max(0.0, ahead - p.max_pull_shift),
                                  ahead + p.max_pull_shift + p.path_step, p.path_step):
            spot = handle_xy - level * standoff
            shift = float(np.linalg.norm(spot))
            if shift > p.max_pull_shift:
                continue
            here_from_there = np.linalg.inv(planar_pose(float(spot[0]), float(spot[1]), yaw))
            turn, offset = here_from_there[:3, :3], here_from_there[:3, 3]
            moved = [(turn @ point + offset, None if rot is None else turn @ rot)
                     for point, rot in path]
            if self.in_reach(moved):
                found.append((shift, (float(spot[0]), float(spot[1]), yaw)))
        return min(found)[1] if found else None

    def _actuate(self, opening: bool, handle: GraspTarget, art: Articulation) -> Outcome:
        name = "open" if opening else "close"

        def body(out: Outcome) -> None:
            p, m = self.profile, self.motion
            if self.holding:
                self._finish(out, False, "PRECONDITION_FAILED",
                             f"{name} needs a free hand; the gripper holds an object")
                return
            path = self._handle_path(opening, handle, art)
            for wp, _ in path:
                if not p.in_workspace(wp):
                    out.measurements["path_outside_workspace"] = 1.0
                    break
            if not self._grasp(handle, out, "handle"):
                self._let_go()
                return
            self._phase("pull" if opening else "push")
            inside = [wp for wp in path if p.in_workspace(wp[0])]
            res = (m.follow(inside, press_s=p.stall_press_s, keep_grip=True) if inside
                   else MotionResult(False, True, 0.0, 0.0))
            done = res.fraction * len(inside) / len(path)
            out.measurements["path_fraction"] = done
            out.measurements["stalled"] = 1.0 if res.stalled else 0.0
            grip = m.hand()[2]
            out.measurements["gripper_after"] = grip
            swung = art.kind == "revolute" and art.bottom is not None and done >= p.moved_fraction
            self._let_go(art.bottom - p.door_clearance if swung and art.bottom is not None
                         else None)
            if res.slipped and done < p.opened_fraction:
                # the fingers lost the handle before the pull met enough resistance to stall:
                # a weak grasp as much as a held fixture, so worth another try (not NO_MOTION)
                self._finish(out, False, "SLIPPED", "the handle slipped out of the fingers "
                             f"after {done:.0%} of the path, before the hand was held back")
            elif done < p.moved_fraction:
                self._finish(out, False, "NO_MOTION",
                             f"{'pulled' if opening else 'pushed'} with contact but the fixture "
                             "did not move")
            elif grip >= p.gripper_closed_empty and done < p.opened_fraction:
                self._finish(out, False, "SLIPPED", "the handle slipped out of the fingers")
            elif done < p.opened_fraction and opening:
                self._finish(out, False, PARTIAL_OPEN,
                             f"fixture did not open far enough ({done:.0%} of the path)")
            else:
                # closing stops at the frame before the path ends: moving it at all counts
                self._finish(out, True, "OPENED" if opening else "CLOSED",
                             "opened" if opening else "closed")
        return self.run(name, body)

    def open(self, handle: GraspTarget, articulation: Articulation) -> Outcome:
        """Grasp the handle and pull it along the guessed hinge arc or drawer slide."""
        return self._actuate(True, handle, articulation)

    def close(self, handle: GraspTarget, articulation: Articulation) -> Outcome:
        """Grasp the handle and push it back along the guessed arc or slide."""
        return self._actuate(False, handle, articulation)

    def pick(self, target: GraspTarget) -> Outcome:
        """Grasp an object, lift it and draw it back towards the robot."""
        def body(out: Outcome) -> None:
            p, m = self.profile, self.motion
            if self.holding:
                self._finish(out, False, "PRECONDITION_FAILED",
                             "pick needs a free hand; the gripper holds an object")
                return
            approach = np.asarray(target.approach) / np.linalg.norm(target.approach)
            if not self._grasp(target, out, "object"):
                self._let_go()
                return
            self._phase("lift")
            pos, rot, _ = m.hand()
            lifted = pos + np.array([0.0, 0.0, p.lift_height])
            flat = np.array([approach[0], approach[1], 0.0])
            norm = float(np.linalg.norm(flat))
            # draw it back as far as the hand came in, so it clears the shelf's front edge
            back = lifted - (flat / norm if norm > 1e-6 else np.zeros(3)) * p.pregrasp_distance
            m.follow([(lifted, rot), (back, rot)])
            reading = m.hand()[2]
            out.measurements["gripper_after_lift"] = reading
            if reading >= p.gripper_closed_empty:
                m.grip(0.0)
                self.retract()
                self._finish(out, False, "SLIPPED", "object slipped or stayed in place")
                return
            self.carry()
            reading = m.hand()[2]
            out.measurements["gripper_carried"] = reading
            if reading >= p.gripper_closed_empty:  # lost on the way out of the shelf
                m.grip(0.0)
                self.retract()
                self._finish(out, False, "SLIPPED", "object slipped out while carried")
                return
            self.holding = True
            self._finish(out, True, "PICKED", "picked")
        return self.run("pick", body)

    def place(self, point: FloatArray) -> Outcome:
        """Lower the held object onto ``point`` (base_link), let go and retract."""
        def body(out: Outcome) -> None:
            p, m = self.profile, self.motion
            if not self.holding:
                self._finish(out, False, "PRECONDITION_FAILED",
                             "place needs a held object; the hand is empty")
                return
            goal = np.asarray(point, dtype=np.float64)
            _, rot, _ = m.hand()
            above = goal + np.array([0.0, 0.0, p.place_clearance])
            out.measurements.update({"place_x": float(goal[0]), "place_y": float(goal[1]),
                                     "place_z": float(goal[2])})
            self._phase("approach")
            if not m.move_hand(above, rot).reached and not m.reach(above, rot).reached:
                miss = float(np.linalg.norm(m.hand()[0] - above))
                out.measurements["above_error"] = miss
                if miss > 2.0 * p.ee_pos_tol + 0.01:  # close enough to set it down from here
                    self._finish(out, False, "NOT_REACHED",
                                 f"could not bring the object above the spot ({miss:.3f} m off)")
                    return
            self._phase("lower")
            res = m.move_hand(goal + np.array([0.0, 0.0, 0.02]), rot, speed=p.max_ee_speed / 3)
            out.measurements["lower_fraction"] = res.fraction if res.stalled else 1.0
            self._let_go()
            self.holding = False
            self._finish(out, True, "PLACED", "placed")
        return self.run("place", body)

    def look(self, views: Sequence[Sequence[tuple[FloatArray, FloatArray]]],
             seen: Callable[[], bool], most: int) -> Outcome:
        """Bring the wrist camera to one view of each group in turn, until ``seen``, called at
        each view reached, says the look found what it was for, or ``most`` views were reached;
        then retract. A group holds ways (hand position, rotation) to look at one thing: the
        first inside the workspace that the arm gets to is its view.

        ``SEEN`` (a success) when ``seen`` said so; ``NOT_SEEN`` when views were reached but
        none showed it; ``NO_VIEW`` when the arm reached none. Part of another primitive (an
        open looking for its handle): it moves nothing but the arm, and leaves it folded home
        (:meth:`Motion.fold_arm`)."""
        def body(out: Outcome) -> None:
            if self.holding:
                self._finish(out, False, "PRECONDITION_FAILED",
                             "a look needs a free hand; the gripper holds an object")
                return
            self._phase("look")
            reached, found, tried = 0, False, False
            for group in views:
                if reached >= most or found:
                    break
                for pos, rot in group:
                    if not self.profile.in_workspace(pos):
                        continue
                    tried = True
                    if self.motion.reach(pos, rot).reached:
                        reached += 1
                        found = seen()
                        break
            if tried:
                # straight back out, then the joints home by the arm's own route: views from
                # above or below leave the arm on another branch than the one later reaches
                # (an open's approach) start from
                self.retract()
                self.motion.fold_arm()
            out.measurements["look_views"] = float(reached)
            if found:
                self._finish(out, True, "SEEN", f"seen from the wrist in view {reached}")
            elif reached:
                self._finish(out, False, "NOT_SEEN", f"not seen from {reached} wrist views")
            else:
                self._finish(out, False, "NO_VIEW", "the arm reached no view")
        return self.run("look", body)

    def inspect(self, views: Sequence[tuple[FloatArray, FloatArray]],
                on_view: Callable[[int], None]) -> Outcome:
        """Bring the wrist camera to each view (hand position, rotation); ``on_view`` at each.

        Views outside the workspace are left out. A look that reached every other view is
        ``INSPECTED``; one that reached some is :data:`PARTIAL_LOOK` (still a success: it
        saw what it saw); one that reached none is ``NO_VIEW``."""
        def body(out: Outcome) -> None:
            if self.holding:
                self._finish(out, False, "PRECONDITION_FAILED",
                             "inspect needs a free hand; the gripper holds an object")
                return
            reached = 0
            self._phase("look")
            planned = [(pos, rot) for pos, rot in views if self.profile.in_workspace(pos)]
            for pos, rot in planned:
                if self.motion.reach(pos, rot).reached:
                    on_view(reached)
                    reached += 1
            self.retract()
            out.measurements["views"] = float(reached)
            out.measurements["views_planned"] = float(len(planned))
            if reached == len(planned) and reached:
                self._finish(out, True, "INSPECTED", f"{reached} views")
            elif reached:
                self._finish(out, True, PARTIAL_LOOK, f"{reached} of {len(planned)} views "
                             "reached: the arm did not get to the rest")
            else:
                self._finish(out, False, "NO_VIEW", "no view reached")
        return self.run("inspect", body)
