"""Streamed motions of the base, the hand and the gripper, with limits, stall checks and cancel.

The TidyBot++ servers take one target per call and track it themselves; a smooth, bounded motion
is the client's job. :class:`Motion` turns a goal into a target per control period, each at most
``max_*_speed * period`` beyond the last, sends it, reads the reported state back, and compares
the two:

* the hand is *stalled* when the achieved position trails the commanded one by more than
  ``stall_lag`` for ``stall_periods`` periods in a row (a locked door, an object in the way);
  the motion then holds where the hand is and reports how much of the path it got through;
* the base is *stalled* when it has stood (moved less than ``base_stall_move`` and turned less
  than ``base_stall_turn``) for ``base_stall_s`` while its command ran ``base_stall_lag`` or
  ``base_stall_yaw_lag`` ahead (a counter or a neighbour in its way); it then holds too;
* a goal is *reached* when the achieved state lies within tolerance of it before
  ``settle_timeout_s`` has passed after the last target; a free-space move
  (:meth:`Motion.reach`) gives up sooner when the hand has stood ``stuck_s`` more than the
  stall lag short of its goal, neither closer nor turned further (the arm cannot get there
  from where it is, and waiting does not change that).

Every end-effector target is checked against the profile's workspace box before it is sent; a
point outside it raises :class:`TargetOutsideWorkspaceError` and nothing moves. Cancel (a
``threading.Event``) is checked every period: the motion holds the current pose (base where it
is, hand where it is, gripper as commanded: never a reset, never an opened hand) and raises
:class:`MotionCanceledError`.

The robot is anything with the methods of :class:`RobotIO`: the RPC link to the real or simulated
servers, or :class:`mimir_robot.direct.DirectRobot` over in-process controllers. Clock and sleep
are injectable so the same code runs paced by wall time or by a lockstep simulation.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from scipy.spatial.transform import Rotation, Slerp

from mimir_robot.profile import FloatArray, RobotProfile
from mimir_robot.rpc import ArmState, BaseState

#: rad: how close the hand's orientation must come for a free-space move to count as reached
REACH_TURN_TOL = 0.1
#: rad: a hand that turns less than this toward its goal's orientation is making no progress
STUCK_TURN = 0.02


class RobotIO(Protocol):
    """What the executor needs of a robot: the RobotLink surface."""

    def reset_base(self) -> None: ...
    def reset_arm(self) -> None: ...
    def send_base_pose(self, x: float, y: float, theta: float) -> None: ...
    def send_arm(self, pos: Sequence[float] | FloatArray, quat: Sequence[float] | FloatArray,
                 gripper: float) -> None: ...
    def base_state(self) -> BaseState: ...
    def arm_state(self) -> ArmState: ...


class MotionError(Exception):
    """Base class of motion failures; ``code`` is the executor's outcome code."""

    code = "EXECUTION_FAILED"


class TargetOutsideWorkspaceError(MotionError):
    """An end-effector target outside the profile's workspace box; nothing was sent."""

    code = "OUTSIDE_WORKSPACE"


class MotionCanceledError(MotionError):
    """The motion was canceled; the robot holds its pose."""

    code = "CANCELED"


@dataclass(frozen=True)
class MotionResult:
    """How a streamed motion ended.

    Attributes:
        reached: the achieved state came within tolerance of the goal.
        stalled: the hand or the base stopped following the commanded path (it then holds).
        fraction: share of the path's targets sent before the motion ended (1.0 when all were).
        error: final distance (m) between the achieved position and the goal.
        heading_error: for the base, the final heading error (rad); 0 for the hand.
        moving: for the base, whether it was still moving when the motion ended.
        slipped: for a hand that had to keep its grip, the fingers closed on nothing before the
            motion ended or stalled (it then holds).
    """

    reached: bool
    stalled: bool
    fraction: float
    error: float
    heading_error: float = 0.0
    moving: bool = False
    slipped: bool = False


@dataclass(frozen=True)
class Sample:
    """One streamed period: what was commanded and what the robot reported (base_link / odom)."""

    stamp: float
    part: str                            # "base", "arm" or "gripper"
    commanded: tuple[float, ...]          # base x, y, theta | hand x, y, z, qx, qy, qz, qw, grip
    achieved: tuple[float, ...]           # same layout as ``commanded``


def _progress(targets: Sequence[tuple[FloatArray, FloatArray]], achieved: FloatArray) -> float:
    """Share of a path the hand really got through: the waypoint nearest the achieved position,
    counted from the start (the commanded targets ran ahead of it)."""
    if not targets:
        return 0.0
    dists = [float(np.linalg.norm(achieved - pos)) for pos, _ in targets]
    start = float(np.linalg.norm(achieved - targets[0][0]))
    nearest = int(np.argmin(dists))
    return 0.0 if start <= dists[nearest] else nearest / len(targets)


def _wrap(angle: float) -> float:
    return (angle + math.pi) % (2.0 * math.pi) - math.pi


class Motion:
    """Streams bounded targets to one robot and watches it follow them.

    Args:
        robot: the robot (RobotLink or an in-process equivalent).
        profile: limits and tolerances.
        cancel: set to stop the running motion (it holds and raises).
        clock, sleep: time source and wait (defaults: monotonic wall time).
        on_sample: called with every streamed period (the node logs and publishes them).
    """

    def __init__(
        self,
        robot: RobotIO,
        profile: RobotProfile,
        *,
        cancel: threading.Event | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        on_sample: Callable[[Sample], None] | None = None,
    ) -> None:
        self.robot = robot
        self.profile = profile
        self.cancel = cancel or threading.Event()
        self._clock = clock
        self._sleep = sleep
        self._on_sample = on_sample
        self.gripper_command = 0.0
        self._last_hand: tuple[FloatArray, FloatArray] | None = None  # last commanded, base_link
        self._tick = clock()

    # -- reading -------------------------------------------------------------------------------
    def hand(self) -> tuple[FloatArray, FloatArray, float]:
        """Achieved hand position and rotation in base_link, and the gripper reading (0..1)."""
        s = self.robot.arm_state()
        pos = self.profile.from_arm(np.asarray(s.pos))
        return pos, Rotation.from_quat(s.quat).as_matrix(), s.gripper

    def base(self) -> tuple[float, float, float]:
        """Achieved base odometry (x, y, theta)."""
        s = self.robot.base_state()
        return s.x, s.y, s.theta

    # -- pacing and cancel -----------------------------------------------------------------------
    def _wait_period(self) -> None:
        self._tick += self.profile.control_period_s
        now = self._clock()
        if self._tick < now - self.profile.control_period_s:
            self._tick = now  # fell behind (slow calls): do not burst to catch up
        self._sleep(max(0.0, self._tick - now))

    def _check_cancel(self) -> None:
        if self.cancel.is_set():
            self.hold()
            raise MotionCanceledError("canceled: holding the current pose")

    def _restart_clock(self) -> None:
        self._tick = self._clock()

    def hold(self) -> None:
        """Command the pose the robot reports now (base and hand), gripper as last commanded."""
        x, y, th = self.base()
        self.robot.send_base_pose(x, y, th)
        s = self.robot.arm_state()
        self.robot.send_arm(s.pos, s.quat, self.gripper_command)
        self._last_hand = (self.profile.from_arm(np.asarray(s.pos)),
                           Rotation.from_quat(s.quat).as_matrix())

    # -- base ----------------------------------------------------------------------------------
    def drive_base(self, goal: tuple[float, float, float],
                   via: Sequence[tuple[float, float, float]] = ()) -> MotionResult:
        """Drive the base to ``goal`` (odom x, y, theta), turning on the way.

        With ``via`` the base drives straight to each waypoint in turn and passes it once
        within ``route_pass_tol`` (no need to stop there), then drives straight to the goal.
        The result's errors are always those to the goal.
        """
        legs = [*via, goal]
        for leg in legs:
            if len(leg) != 3 or not all(math.isfinite(float(v)) for v in leg):
                raise MotionError(f"base goal {leg} is not finite")
        for waypoint in via:
            passed = self._drive_leg(waypoint, final=False)
            if not passed.reached:
                x, y, th = self.base()
                return MotionResult(False, passed.stalled, 0.0,
                                    math.hypot(goal[0] - x, goal[1] - y),
                                    abs(_wrap(goal[2] - th)), passed.moving)
        return self._drive_leg(goal, final=True)

    def _drive_leg(self, goal: tuple[float, float, float], *, final: bool) -> MotionResult:
        """One straight drive; a final leg must settle at rest within the base tolerances, a
        waypoint only come within ``route_pass_tol``."""
        p = self.profile
        gx, gy, gth = (float(v) for v in goal)
        x0, y0, th0 = self.base()
        dist = math.hypot(gx - x0, gy - y0)
        turn = _wrap(gth - th0)
        n = max(1, math.ceil(max(dist / (p.max_base_speed * p.control_period_s),
                                 abs(turn) / (p.max_base_turn * p.control_period_s))))
        window = max(1, math.ceil(p.base_stall_s / p.control_period_s - 1e-9))
        trail: deque[tuple[float, float, float]] = deque(maxlen=window + 1)
        self._restart_clock()
        for i in range(1, n + 1):
            self._check_cancel()
            s = i / n
            cmd = (x0 + (gx - x0) * s, y0 + (gy - y0) * s, _wrap(th0 + turn * s))
            self.robot.send_base_pose(*cmd)
            self._wait_period()
            achieved = self.base()
            self._sample("base", cmd, achieved)
            trail.append(achieved)
            if len(trail) > window and self._base_blocked(trail[0], achieved, cmd):
                self.hold()
                x, y, th = achieved
                return MotionResult(False, True, i / n, math.hypot(gx - x, gy - y),
                                    abs(_wrap(gth - th)))
        deadline = self._clock() + p.settle_timeout_s
        last = self.base()
        while True:
            self._check_cancel()
            self.robot.send_base_pose(gx, gy, gth)
            self._wait_period()
            x, y, th = self.base()
            err = math.hypot(gx - x, gy - y)
            # reached, and at rest: what the cameras see next must hold while the arm works
            still = math.hypot(x - last[0], y - last[1]) < 0.002 and abs(th - last[2]) < 0.004
            last = (x, y, th)
            turn_err = abs(_wrap(gth - th))
            if final and err <= p.base_pos_tol and turn_err <= p.base_yaw_tol and still:
                return MotionResult(True, False, 1.0, err, turn_err)
            if not final and err <= p.route_pass_tol:
                return MotionResult(True, False, 1.0, err, turn_err)
            if self._clock() >= deadline:
                return MotionResult(False, False, 1.0, err, turn_err, not still)

    def _base_blocked(self, before: tuple[float, float, float],
                      now: tuple[float, float, float], cmd: tuple[float, float, float]) -> bool:
        """Whether a base that stood since ``before`` while its command ran ahead is held."""
        p = self.profile
        standing = (math.hypot(now[0] - before[0], now[1] - before[1]) < p.base_stall_move
                    and abs(_wrap(now[2] - before[2])) < p.base_stall_turn)
        behind = (math.hypot(cmd[0] - now[0], cmd[1] - now[1]) > p.base_stall_lag
                  or abs(_wrap(cmd[2] - now[2])) > p.base_stall_yaw_lag)
        return standing and behind

    # -- hand ----------------------------------------------------------------------------------
    def move_hand(self, pos: FloatArray, rot: FloatArray | None = None,
                  speed: float | None = None) -> MotionResult:
        """Move the hand along a straight line to ``pos`` (base_link), turning to ``rot``."""
        return self.follow([(np.asarray(pos, dtype=np.float64), rot)], speed)

    def reach(self, pos: FloatArray, rot: FloatArray) -> MotionResult:
        """Bring the hand to ``pos``/``rot`` through free space, where the route may not matter.

        The targets are streamed within the speed limits like every other motion, but a hand
        that trails them is not a stall (a large change of orientation can leave the arm behind
        its targets, and a target its IK cannot reach is skipped by the arm server); use this
        for retracting and going to a pre-grasp, never near contact.

        Raises:
            TargetOutsideWorkspaceError: the target lies outside the workspace box.
        """
        p = self.profile
        goal = np.asarray(pos, dtype=np.float64)
        self._check_workspace(goal)
        rot = np.asarray(rot, dtype=np.float64)
        start, start_rot = self._start_pose()
        targets = self._segment(start, start_rot, goal, rot, p.max_ee_speed)
        self._restart_clock()
        for target, trot in targets:
            self._check_cancel()
            self._send_hand(target, trot)
            self._wait_period()
            achieved, arot, grip = self.hand()
            self._sample_hand(target, trot, achieved, arot, grip)
        result = self._settle(goal, rot, 2.0 * p.settle_timeout_s, turn_tol=REACH_TURN_TOL,
                              stuck_s=p.stuck_s)
        return MotionResult(result.reached, False, 1.0, result.error)

    def fold_arm(self) -> MotionResult:
        """The arm's own retract: ``reset_arm`` opens the gripper and turns the joints home by
        the robot's joint-space route (no Cartesian path, so it gets home from any branch of the
        arm); this waits until the hand stands at the profile's carry pose, or
        ``fold_timeout_s`` passes. Never with something in the hand: the fingers open."""
        p = self.profile
        goal = p.from_arm(np.asarray(p.retract_pos))
        rot = Rotation.from_quat(np.asarray(p.retract_quat)).as_matrix()
        self.robot.reset_arm()
        self.gripper_command = 0.0
        self._last_hand = None
        self._restart_clock()
        deadline = self._clock() + p.fold_timeout_s
        near = 0
        while True:
            self._check_cancel()
            self._wait_period()
            achieved, arot, grip = self.hand()
            self._sample_hand(goal, rot, achieved, arot, grip)
            err = float(np.linalg.norm(achieved - goal))
            near = near + 1 if err <= p.ee_pos_tol else 0
            if near >= 2:
                return MotionResult(True, False, 1.0, err)
            if self._clock() >= deadline:
                return MotionResult(False, err > p.stall_lag, 1.0, err)

    def _check_workspace(self, point: FloatArray) -> None:
        if not self.profile.in_workspace(point):
            raise TargetOutsideWorkspaceError(
                f"hand target {np.round(point, 3).tolist()} (base_link) lies outside the "
                "workspace box")

    def _settle(self, goal: FloatArray, rot: FloatArray, timeout_s: float,
                turn_tol: float | None = None, stuck_s: float | None = None) -> MotionResult:
        """Keep commanding ``goal``/``rot`` until the hand is within tolerance on two readings in
        a row (settled, not passing by), or ``timeout_s`` passes (then ``stalled`` says whether
        it trails by more than the stall lag). With ``stuck_s``, also give up (stalled) once the
        hand has come no closer than ``ee_pos_tol`` and turned no further than
        :data:`STUCK_TURN` toward the goal for that long while more than the stall lag away."""
        p = self.profile
        start = self._clock()
        deadline = start + timeout_s
        near = 0
        best = (math.inf, math.inf, start)  # closest distance and turn so far, and since when
        watch_turn = turn_tol is not None or stuck_s is not None  # a pull needs no turn
        while True:
            achieved, arot, _ = self.hand()
            err = float(np.linalg.norm(achieved - goal))
            turn = float((Rotation.from_matrix(arot).inv() * Rotation.from_matrix(rot)
                          ).magnitude()) if watch_turn else 0.0
            turned = turn_tol is None or turn <= turn_tol
            near = near + 1 if err <= p.ee_pos_tol and turned else 0
            if near >= 2:
                return MotionResult(True, False, 1.0, err)
            now = self._clock()
            if err < best[0] - p.ee_pos_tol or turn < best[1] - STUCK_TURN:
                best = (min(err, best[0]), min(turn, best[1]), now)
            if stuck_s is not None and err > p.stall_lag and now - best[2] >= stuck_s:
                return MotionResult(False, True, 1.0, err)
            if now >= deadline:
                return MotionResult(False, err > p.stall_lag, 1.0, err)
            self._check_cancel()
            self._send_hand(goal, rot)
            self._wait_period()

    def _start_pose(self) -> tuple[FloatArray, FloatArray]:
        """Where a new path starts: the last commanded pose while the hand is near it (so the
        commanded path has no jump), else where the hand is."""
        pos, rot, _ = self.hand()
        if self._last_hand is not None and (
                float(np.linalg.norm(self._last_hand[0] - pos)) <= self.profile.stall_lag):
            return self._last_hand
        return pos, rot

    def follow(self, waypoints: Sequence[tuple[FloatArray, FloatArray | None]],
               speed: float | None = None, press_s: float = 0.0,
               keep_grip: bool = False) -> MotionResult:
        """Follow waypoints (base_link position, rotation or None to keep it) as one path.

        The whole path is checked against the workspace before anything moves. Stops on a stall;
        with ``press_s`` the hand first keeps being commanded to the stalled target that long
        (a pull held back by a locked door goes on pulling, and the commanded and achieved
        hand poses show it), then holds. With ``keep_grip`` (the fingers hold a handle or an
        object) it also stops and holds when the gripper reads closed on nothing for
        ``stall_periods`` periods before a stall: what the hand pulled slipped out.

        Raises:
            TargetOutsideWorkspaceError: a waypoint outside the workspace box.
            MotionCanceledError: canceled (the robot holds).
        """
        p = self.profile
        v = min(speed or p.max_ee_speed, p.max_ee_speed)
        for wp, _ in waypoints:
            self._check_workspace(np.asarray(wp, dtype=np.float64))
        pos, rot = self._start_pose()
        targets: list[tuple[FloatArray, FloatArray]] = []
        for wp, wrot in waypoints:
            goal_rot = rot if wrot is None else np.asarray(wrot, dtype=np.float64)
            targets += self._segment(pos, rot, np.asarray(wp, dtype=np.float64), goal_rot, v)
            pos, rot = np.asarray(wp, dtype=np.float64), goal_rot
        return self._stream(targets, pos, press_s, keep_grip)

    def _segment(self, p0: FloatArray, r0: FloatArray, p1: FloatArray, r1: FloatArray,
                 speed: float) -> list[tuple[FloatArray, FloatArray]]:
        prof = self.profile
        rots = Rotation.from_matrix(np.stack([r0, r1]))
        angle = float((rots[0].inv() * rots[1]).magnitude())
        dist = float(np.linalg.norm(p1 - p0))
        n = max(1, math.ceil(max(dist / (speed * prof.control_period_s),
                                 angle / (prof.max_ee_turn * prof.control_period_s))))
        slerp = Slerp([0.0, 1.0], rots)
        out = []
        for i in range(1, n + 1):
            s = i / n
            out.append((p0 + (p1 - p0) * s, slerp([s]).as_matrix()[0]))
        return out

    def _send_hand(self, pos: FloatArray, rot: FloatArray) -> None:
        quat = Rotation.from_matrix(rot).as_quat()
        self.robot.send_arm(self.profile.to_arm(pos), quat, self.gripper_command)
        self._last_hand = (np.asarray(pos, dtype=np.float64), np.asarray(rot, dtype=np.float64))

    def _command_hand(self, pos: FloatArray, rot: FloatArray) -> tuple[FloatArray, float]:
        """One control period toward ``pos``/``rot``: send, wait, read, sample; the achieved
        hand position and the gripper reading."""
        self._check_cancel()
        self._send_hand(pos, rot)
        self._wait_period()
        achieved, arot, grip = self.hand()
        self._sample_hand(pos, rot, achieved, arot, grip)
        return achieved, grip

    def _stream(self, targets: list[tuple[FloatArray, FloatArray]],
                goal: FloatArray, press_s: float = 0.0, keep_grip: bool = False) -> MotionResult:
        p = self.profile
        over = empty = 0
        self._restart_clock()
        for i, (pos, rot) in enumerate(targets, start=1):
            achieved, grip = self._command_hand(pos, rot)
            over = over + 1 if float(np.linalg.norm(achieved - pos)) > p.stall_lag else 0
            empty = empty + 1 if keep_grip and grip >= p.gripper_closed_empty else 0
            if empty >= p.stall_periods and over < p.stall_periods:
                self.hold()
                done = _progress(targets[:i], achieved) * i / len(targets)
                return MotionResult(False, False, done, float(np.linalg.norm(achieved - goal)),
                                    slipped=True)
            if over >= p.stall_periods:
                for _ in range(math.ceil(press_s / p.control_period_s)):
                    achieved, _ = self._command_hand(pos, rot)
                self.hold()
                err = float(np.linalg.norm(achieved - goal))
                done = _progress(targets[:i], achieved) * i / len(targets)
                return MotionResult(False, True, done, err)
        last_pos, last_rot = targets[-1] if targets else (goal, self.hand()[1])
        return self._settle(last_pos, last_rot, p.settle_timeout_s)

    # -- gripper ---------------------------------------------------------------------------------
    def grip(self, target: float) -> float:
        """Drive the gripper to ``target`` (0 open .. 1 closed), holding the hand; the reading.

        Waits until the reading stops changing (the fingers met something or their stop) or
        ``gripper_settle_s`` passes.
        """
        if not 0.0 <= target <= 1.0:
            raise MotionError(f"gripper target {target} outside 0..1")
        self.gripper_command = float(target)
        s = self.robot.arm_state()
        pos, quat = s.pos, s.quat
        if self._last_hand is not None:
            pos = tuple(self.profile.to_arm(self._last_hand[0]))
            quat = tuple(Rotation.from_matrix(self._last_hand[1]).as_quat())
        deadline = self._clock() + self.profile.gripper_settle_s
        last = s.gripper
        still = 0
        self._restart_clock()
        while True:
            self._check_cancel()
            self.robot.send_arm(pos, quat, self.gripper_command)
            self._wait_period()
            reading = self.robot.arm_state().gripper
            self._sample("gripper", (self.gripper_command,), (reading,))
            still = still + 1 if abs(reading - last) < 0.004 else 0
            last = reading
            if still >= 2 or self._clock() >= deadline:
                return reading

    # -- samples ---------------------------------------------------------------------------------
    def _sample(self, part: str, commanded: Sequence[float], achieved: Sequence[float]) -> None:
        if self._on_sample is not None:
            self._on_sample(Sample(self._clock(), part, tuple(float(v) for v in commanded),
                                   tuple(float(v) for v in achieved)))

    def _sample_hand(self, pos: FloatArray, rot: FloatArray, achieved: FloatArray,
                     arot: FloatArray, grip: float) -> None:
        if self._on_sample is None:
            return
        cq = Rotation.from_matrix(rot).as_quat()
        aq = Rotation.from_matrix(arot).as_quat()
        self._sample("arm", (*pos, *cq, self.gripper_command), (*achieved, *aq, grip))
