"""The TidyBot++ base and arm RPC servers, answered by the simulated robot.

The real robot runs two ``multiprocessing.managers`` servers (typeids ``Base`` and ``Arm``, see
:mod:`mimir_robot.contract`); every request for a typeid builds a new controller object that
answers ``reset()``, ``execute_action(action)``, ``get_state()`` and ``close()``. This module
gives the simulator the same face, so an executor drives the simulated robot through
:class:`mimir_robot.rpc.RobotLink` exactly as it drives the real one.

Design
------
* :class:`SimRobotDrives` owns the motion state of one simulator: a base drive and an arm drive.
  It hooks :attr:`mimir_sim.physics.PhysicsWorld.after_steps`, so tracking runs after every
  ``step()`` call of whoever steps the simulator (the :class:`~mimir_sim.sim_thread.SimThread`
  idle loop, a test), already under that caller's simulation lock. A step *listener* would be
  called per physics step but is not allowed to change the controls (the physics world restores
  them and raises), hence the hook; with the bridge's 0.05 s idle chunks the set-points are
  refreshed at 20 Hz, twice the 10 Hz target stream. Each update integrates the motion profile
  over the simulated time elapsed since the previous one, in sub-steps of at most
  :data:`PROFILE_SUBSTEP_S`. The set-points therefore change only between ``step()`` calls:
  whoever steps must do so in short chunks (:meth:`SimRobotDrives.advance` does, 10 ms), or the
  robot waits for the end of a long step to move.
* Controllers (:class:`SimBase`, :class:`SimArm`) are thin handles on a drive. Only the newest
  controller of a kind drives the robot: creating one stops the drive (the robot holds where its
  set-points are) and makes every later ``reset``/``execute_action``/``get_state`` of older ones
  raise :class:`ControllerSupersededError`; ``close()`` of an older one does nothing.
* Every method that reads or writes the simulator holds the simulation lock handed in (e.g.
  :attr:`SimThread.lock`); controller calls arrive on the manager's connection threads.
* Base: targets ``base_pose`` (x, y, theta) live in an odometry frame equal to the base's world
  pose at the last ``reset()``. Each axis of that frame follows the target with a profile limited
  in velocity and acceleration (defaults as upstream: 0.5, 0.5, 1.57 and 0.25, 0.25, 0.79); theta
  turns the short way to the target angle. The profile, mapped to the world, becomes the
  position set-points of the base actuators. ``get_state()`` reports the measured pose in the
  odometry frame; its theta is continuous (not folded into -pi..pi), as the real odometry
  integrates heading.
* Arm: poses are those of ``pinch_site`` (the tool point the upstream IK uses, 0.12 m past the
  Gen3 flange) in the frame of body ``gen3/base_link``, the link the Kinova arm is mounted on
  (0.335 m above ``base_link``, axes parallel to it). A target is solved by damped least-squares
  IK (:meth:`mimir_sim.controllers.RobotControl.ik`, seeded with the joints the arm is heading
  to) and the joint set-points follow the solution with a per-joint velocity and acceleration
  limit (the upstream joint trajectory limits). Upstream returns the solver's last iterate even
  when it did not converge; here a target the IK cannot reach keeps the previous joint target
  (the arm stays where it was heading) and is counted (:meth:`SimArm.ik_misses`); its gripper
  value still applies. Upstream's solver starts only from the current joints, so the arm never
  changes branch; this one also tries the home and ready poses, and takes a solution only when
  moving the joints to it keeps the hand within :attr:`ArmSettings.max_sweep_m` of the straight
  line to the target (a solution on another branch would swing the hand through the workspace:
  it is refused like a miss). The gripper set-point is ``gripper_pos`` times the actuator's
  range (0..255); the reported ``gripper_pos`` is the measured driver joint angle over its range
  (0.8 rad), as the upstream MuJoCo environment reads it, so closing on something stops short
  of 1.
* Stream watchdog, as upstream: when no target came for :attr:`BaseSettings.hold_after_s` of
  simulated time (2.5 control periods), the profile is sent to the point where it can stop (it
  brakes instead of running on to an old target).
* Arm ``reset()`` opens the gripper and drives the joints to :data:`~mimir_sim.robot.HOME_ARM`
  (the retract pose) at the slower retract limits. Upstream blocks until the retract action has
  ended; here the wait is :attr:`ArmSettings.reset_wait_s` of wall time (the lock is released
  while waiting, so a stepping thread can move the arm). In-process use without a stepping thread
  must keep it 0 (the default of :class:`ArmSettings`); :class:`SimRobotServers` waits by default.
* A simulator reset (time going backwards) stops both drives; controllers then need ``reset()``.
* The controllers never take or give entity ids, fixture joints or object poses: only targets
  in, contract keys out.
* Physics-side aid: MuJoCo's soft contacts do not carry a pull on a handle or a lifted bottle,
  so once both fingers touch one object or one handle while the gripper is commanded closed,
  the grasp assist of :mod:`mimir_sim.grasping` engages (a weld for an object, a point constraint
  for a handle) and it lets go when the gripper opens. Taking hold of a fixture's handle is also
  written to ``sim.log`` as a record for the judge (an ``open`` attempt when the fixture was
  closed, a ``close`` attempt otherwise); nothing on the robot side reads it.
* A scenario reset may put the base somewhere else (:meth:`SimRobotDrives.teleport_base`): the
  base holds there and its odometry jumps by the move, as a kidnapped robot's would.
* Actuation noise (a :class:`~mimir_sim.noise.NoiseProfile`; none by default): odometry drifts
  as the base moves (:class:`~mimir_sim.noise.OdometryDrift`: ``get_state()`` reports the
  drifted pose and targets are tracked in that drifted frame, so the base ends a move off its
  target in the world), and the hand lands off its commanded position by a calibration offset
  drawn at each arm reset plus an approach error drawn when a motion starts from rest
  (:class:`~mimir_sim.noise.HandError`); the arm's reported pose does not show that offset.
* Do not run the simulator's own primitives (``move_to``, ``pick``...) while a controller runs:
  both would write the same actuator set-points.

:class:`SimRobotServers` hosts the two typeids with ``BaseManager`` servers on daemon threads of
the current process (the factories are closures over the drives; nothing is pickled across
processes) and stops them cleanly. The same controllers are usable without RPC through
:attr:`SimRobotServers.drives` (or a bare :class:`SimRobotDrives`), for a fast evaluation mode.
"""

from __future__ import annotations

import logging
import math
import socket
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.managers import BaseManager
from typing import Any, ClassVar, Generic, TypeVar, cast

import mujoco
import numpy as np

from mimir_robot import contract as c
from mimir_sim.geometry import FloatArray, wrap
from mimir_sim.noise import (
    STREAM_ARM,
    STREAM_ODOMETRY,
    HandError,
    NoiseProfile,
    OdometryDrift,
    stream_rng,
)
from mimir_sim.recording import PrimitiveRecord
from mimir_sim.robot import BASE_JOINTS, GRIPPER_CLOSED, GRIPPER_OPEN, HOME_ARM, READY_ARM
from mimir_sim.sim import KitchenSim

LOG = logging.getLogger(__name__)

ARM_BASE_BODY = "gen3/base_link"  # the link the Kinova arm is mounted on
GRIPPER_DRIVER_JOINT = "right_driver_joint"  # its angle over its range is the gripper reading
PROFILE_SUBSTEP_S = 0.002  # longest interval the motion profiles are integrated over at once
SWEEP_SAMPLES = 8  # moments of an arm motion where the hand's distance from its line is checked
TRIP_LOG_EVERY_S = 5.0  # simulated seconds between two warnings of an overloaded base
CONTROLLER_METHODS = ("reset", "execute_action", "get_state", "close")

SimLock = AbstractContextManager[Any]


# --- Errors -------------------------------------------------------------------------------------
class ControllerNotResetError(RuntimeError):
    """A call that needs a running controller came before ``reset()`` (or after ``close()``)."""


class ControllerSupersededError(RuntimeError):
    """A newer controller of the same kind was created; this one no longer drives the robot."""


class ActionRefusedError(ValueError):
    """A malformed ``execute_action`` argument; nothing was changed."""


# --- Settings -----------------------------------------------------------------------------------
def _hold_default() -> float:
    return 2.5 * c.CONTROL_PERIOD_S


@dataclass(frozen=True)
class BaseSettings:
    """Limits of the base profile (odometry axes x, y, theta) and its stream watchdog."""

    max_vel: tuple[float, float, float] = (0.5, 0.5, 1.57)  # m/s, m/s, rad/s
    max_accel: tuple[float, float, float] = (0.25, 0.25, 0.79)  # m/s^2, m/s^2, rad/s^2
    hold_after_s: float | None = field(default_factory=_hold_default)  # None: never hold
    #: N, N, N m: the drive force past which the base stops where it is (x, y, yaw)
    trip_force: tuple[float, float, float] = (3000.0, 3000.0, 600.0)

    def __post_init__(self) -> None:
        _positive_vector("max_vel", self.max_vel, 3)
        _positive_vector("max_accel", self.max_accel, 3)
        _positive_vector("trip_force", self.trip_force, 3)
        _check_hold(self.hold_after_s)


_DEG = math.pi / 180.0


@dataclass(frozen=True)
class ArmSettings:
    """Joint limits of the arm's tracking and retract motions, watchdog and reset wait."""

    max_joint_vel: tuple[float, ...] = (80 * _DEG,) * 4 + (140 * _DEG,) * 3  # rad/s
    max_joint_accel: tuple[float, ...] = (240 * _DEG,) * 4 + (450 * _DEG,) * 3  # rad/s^2
    retract_joint_vel: tuple[float, ...] = (30 * _DEG,) * 7  # rad/s during reset
    retract_joint_accel: tuple[float, ...] = (80 * _DEG,) * 7  # rad/s^2 during reset
    home: tuple[float, ...] = HOME_ARM  # joint pose reset() drives to (the retract pose)
    hold_after_s: float | None = field(default_factory=_hold_default)  # None: never hold
    reset_wait_s: float = 0.0  # wall time reset() waits for the retract (0: return at once)
    home_tolerance: float = 0.02  # rad per joint counted as retracted
    # farthest the hand may stray from the straight line to its target while the joints move to
    # an IK solution (m); a solution on another branch of the arm swings it wider and is refused
    max_sweep_m: float = 0.10

    def __post_init__(self) -> None:
        for name in ("max_joint_vel", "max_joint_accel", "retract_joint_vel",
                     "retract_joint_accel"):
            _positive_vector(name, getattr(self, name), 7)
        home = np.asarray(self.home, dtype=np.float64)
        if home.shape != (7,) or not np.all(np.isfinite(home)):
            raise ValueError(f"home must be 7 finite joint angles, got {self.home!r}")
        _check_hold(self.hold_after_s)
        if not (math.isfinite(self.reset_wait_s) and self.reset_wait_s >= 0.0):
            raise ValueError(f"reset_wait_s must be finite and >= 0, got {self.reset_wait_s!r}")
        if not (math.isfinite(self.home_tolerance) and self.home_tolerance > 0.0):
            raise ValueError(f"home_tolerance must be > 0, got {self.home_tolerance!r}")
        if not (math.isfinite(self.max_sweep_m) and self.max_sweep_m > 0.0):
            raise ValueError(f"max_sweep_m must be > 0, got {self.max_sweep_m!r}")


def _positive_vector(name: str, value: object, size: int) -> FloatArray:
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be {size} numbers, got {value!r}") from exc
    if arr.shape != (size,) or not np.all(np.isfinite(arr)) or not np.all(arr > 0.0):
        raise ValueError(f"{name} must be {size} finite numbers > 0, got {value!r}")
    return arr


def _check_hold(hold: float | None) -> None:
    if hold is not None and not (math.isfinite(hold) and hold > 0.0):
        raise ValueError(f"hold_after_s must be None or a finite number > 0, got {hold!r}")


# --- Motion profile -----------------------------------------------------------------------------
@dataclass
class AxisProfile:
    """Independent axes that follow a target with bounded velocity and acceleration.

    Each axis accelerates toward its target at up to ``max_accel`` and cruises at up to
    ``max_vel``, slowing so that it can still stop at the target.
    """

    pos: FloatArray
    vel: FloatArray
    target: FloatArray

    @classmethod
    def at_rest(cls, pos: FloatArray) -> AxisProfile:
        p = np.array(pos, dtype=np.float64)
        return cls(pos=p, vel=np.zeros_like(p), target=p.copy())

    def advance(self, dt: float, max_vel: FloatArray, max_accel: FloatArray) -> None:
        """Integrate ``dt`` seconds in sub-steps of at most :data:`PROFILE_SUBSTEP_S`."""
        if dt <= 0.0:
            return
        if not self.vel.any() and np.array_equal(self.pos, self.target):
            return  # at rest on its target: every sub-step would leave it there
        n = max(1, math.ceil(dt / PROFILE_SUBSTEP_S - 1e-9))
        h = dt / n
        dv_max = max_accel * h
        for _ in range(n):
            err = self.target - self.pos
            settled = (np.abs(err) <= dv_max * h) & (np.abs(self.vel) <= dv_max)
            v_want = np.sign(err) * np.minimum(max_vel, np.sqrt(2.0 * max_accel * np.abs(err)))
            self.vel = self.vel + np.clip(v_want - self.vel, -dv_max, dv_max)
            self.pos = self.pos + self.vel * h
            self.pos[settled] = self.target[settled]
            self.vel[settled] = 0.0

    def stopping_point(self, max_accel: FloatArray) -> FloatArray:
        """Where each axis comes to rest when it brakes as hard as allowed from now."""
        return np.asarray(self.pos + self.vel * np.abs(self.vel) / (2.0 * max_accel))

    def stop(self) -> None:
        self.target = self.pos.copy()
        self.vel = np.zeros_like(self.pos)


def _advance_watched(profile: AxisProfile, now: float, dt: float, *, max_vel: FloatArray,
                     max_accel: FloatArray, hold_at: float | None) -> bool:
    """Advance ``profile`` to ``now``; past ``hold_at`` it brakes. Whether still streaming."""
    if hold_at is None:
        profile.advance(dt, max_vel, max_accel)
        return False
    if now < hold_at:
        profile.advance(dt, max_vel, max_accel)
        return True
    before = min(max(hold_at - (now - dt), 0.0), dt)
    profile.advance(before, max_vel, max_accel)
    profile.target = profile.stopping_point(max_accel)
    profile.advance(dt - before, max_vel, max_accel)
    return False


# --- Action parsing -----------------------------------------------------------------------------
def _action_vector(action: Mapping[str, Any], key: str, size: int) -> FloatArray:
    if key not in action:
        raise ActionRefusedError(f"action has no {key!r} (keys: {sorted(map(str, action))})")
    value = action[key]
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ActionRefusedError(f"{key} is not numeric: {value!r}") from exc
    if size == 1 and arr.shape == ():
        arr = arr.reshape(1)
    if arr.shape != (size,):
        raise ActionRefusedError(f"{key} must have shape ({size},), got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ActionRefusedError(f"{key} has non-finite values: {arr.tolist()}")
    return arr


def _require_mapping(action: object) -> Mapping[str, Any]:
    if not isinstance(action, Mapping):
        raise ActionRefusedError(f"action must be a dict, got {type(action).__name__}")
    return action


def _quat_xyzw_to_mat(quat: FloatArray) -> FloatArray:
    mat = np.zeros(9)
    mujoco.mju_quat2Mat(mat, np.array([quat[3], quat[0], quat[1], quat[2]]))
    return mat.reshape(3, 3)


def _mat_to_quat_xyzw(mat: FloatArray) -> FloatArray:
    q = np.zeros(4)
    mujoco.mju_mat2Quat(q, np.ascontiguousarray(mat).reshape(9))
    out = np.array([q[1], q[2], q[3], q[0]])
    out /= np.linalg.norm(out)
    return out if out[3] >= 0.0 else -out


# --- Drives ---------------------------------------------------------------------------------------
class _BaseDrive:
    """Motion state of the base: odometry origin, profile and watchdog."""

    def __init__(self, sim: KitchenSim, settings: BaseSettings,
                 drift: OdometryDrift | None = None) -> None:
        self.sim = sim
        self.settings = settings
        self.drift = drift
        self._last_q: FloatArray | None = None  # pose the drift was last integrated at
        self.owner: object | None = None
        self.running = False
        self.max_vel = np.asarray(settings.max_vel, dtype=np.float64)
        self.max_accel = np.asarray(settings.max_accel, dtype=np.float64)
        self.origin: FloatArray | None = None  # world x, y and raw joint angle at reset
        self.profile = AxisProfile.at_rest(np.zeros(3))
        self.streaming = False
        self.last_target_t = 0.0
        self.trip_force = np.asarray(settings.trip_force, dtype=np.float64)
        self.trips = 0  # times the drive force tripped and the base stopped where it was
        self._next_trip_log = 0.0

    def _measured(self) -> FloatArray:
        body = self.sim.body
        return np.array(self.sim.data.qpos[body.base_qadr], dtype=np.float64)

    def reset(self, max_vel: FloatArray, max_accel: FloatArray) -> None:
        self.max_vel, self.max_accel = max_vel, max_accel
        self.origin = self._measured()
        self._last_q = self.origin.copy()
        if self.drift is not None:
            self.drift.restart()
        self.profile = AxisProfile.at_rest(np.zeros(3))
        self.streaming = False
        self.running = True
        self._write_setpoints()

    def stop(self) -> None:
        self.running = False
        self.streaming = False
        self.profile.stop()

    def set_target(self, pose: FloatArray, now: float) -> None:
        target = pose.copy()
        target[2] = self.profile.pos[2] + wrap(float(pose[2] - self.profile.pos[2]))
        self.profile.target = target
        self.streaming = True
        self.last_target_t = now

    def odometry(self) -> FloatArray:
        return self._odometry_at(self._measured())

    def _odometry_at(self, q: FloatArray) -> FloatArray:
        assert self.origin is not None
        d = q - self.origin
        cth, sth = math.cos(self.origin[2]), math.sin(self.origin[2])
        return np.array([cth * d[0] + sth * d[1], -sth * d[0] + cth * d[1], d[2]])

    def track_drift(self) -> None:
        """Fold the odometry error of the motion since the last call into the origin.

        The wheels measure each increment of the true motion with the drift's error; the origin
        (the odometry frame in the world) moves so that odometry reads the drifted pose.
        """
        if self.drift is None or self.origin is None or self._last_q is None:
            return
        q = self._measured()
        prev, self._last_q = self._last_q, q
        step = q - prev
        if not np.any(step):
            return
        cth, sth = math.cos(prev[2]), math.sin(prev[2])
        mx, my, myaw = self.drift.increment(cth * step[0] + sth * step[1],
                                            -sth * step[0] + cth * step[1], float(step[2]))
        odo = self._odometry_at(prev)
        co, so = math.cos(odo[2]), math.sin(odo[2])
        new = np.array([odo[0] + co * mx - so * my, odo[1] + so * mx + co * my, odo[2] + myaw])
        yaw = q[2] - new[2]
        cy, sy = math.cos(yaw), math.sin(yaw)
        self.origin = np.array([q[0] - (cy * new[0] - sy * new[1]),
                                q[1] - (sy * new[0] + cy * new[1]), yaw])

    def _write_setpoints(self) -> None:
        assert self.origin is not None
        p = self.profile.pos
        cth, sth = math.cos(self.origin[2]), math.sin(self.origin[2])
        world = np.array([
            self.origin[0] + cth * p[0] - sth * p[1],
            self.origin[1] + sth * p[0] + cth * p[1],
            self.origin[2] + p[2],
        ])
        self.sim.data.ctrl[self.sim.body.base_act] = world

    def update(self, now: float, dt: float) -> None:
        if not self.running:
            return
        if self._overloaded():
            self._trip(now)
            return
        self.streaming = _advance_watched(self.profile, now, dt, max_vel=self.max_vel,
                                          max_accel=self.max_accel, hold_at=self._hold_at())
        self._write_setpoints()

    def _overloaded(self) -> bool:
        """Whether the base's drives push harder than they can: the base is held by something.

        The model's base servos are stiff and unbounded, so a base driven into a counter would
        push with a force that grows with the lag until the physics fails; real caster motors
        stall long before. Speeding up, cruising and braking took at most 1.4 kN and 130 N m
        when the set-points change every 10 ms.
        """
        force = np.abs(self.sim.data.actuator_force[self.sim.body.base_act])
        return bool(np.any(force > self.trip_force))

    def _trip(self, now: float) -> None:
        """Stop where the base is (its set-points on the measured pose); the next target that
        arrives starts a new motion from there."""
        self.trips += 1
        here = self.odometry()
        if now >= self._next_trip_log:  # a base pressed on an obstacle trips every few periods
            self._next_trip_log = now + TRIP_LOG_EVERY_S
            LOG.warning("base drive overloaded at odometry %s (%d trips so far): stopping "
                        "where it is", np.round(here, 3).tolist(), self.trips)
        self.profile = AxisProfile.at_rest(here)
        self.streaming = False
        self._write_setpoints()

    def _hold_at(self) -> float | None:
        hold = self.settings.hold_after_s
        return None if hold is None or not self.streaming else self.last_target_t + hold

    def invalidate(self) -> None:
        self.stop()
        self.origin = None

    def relocate(self) -> None:
        """After the base was put somewhere else: hold there (odometry jumps with it)."""
        if self.origin is None:
            return
        self._last_q = self._measured()  # a jump the wheels did not make: no drift for it
        self.profile = AxisProfile.at_rest(self.odometry())
        self.streaming = False
        if self.running:
            self._write_setpoints()


class _ArmDrive:
    """Motion state of the arm and gripper: joint profile, gripper set-point, IK misses."""

    def __init__(self, sim: KitchenSim, settings: ArmSettings,
                 hand: HandError | None = None) -> None:
        self.sim = sim
        self.settings = settings
        self.hand = hand
        m = sim.model
        self.owner: object | None = None
        self.running = False
        self.retracting = False
        self.streaming = False
        self.last_target_t = 0.0
        self.ik_misses = 0
        self.swings_refused = 0  # targets whose every solution swung the hand wide (a miss too)
        self.arm_base = m.body(ARM_BASE_BODY).id
        driver = m.joint(GRIPPER_DRIVER_JOINT)
        self.driver_qadr = int(driver.qposadr[0])
        self.driver_range = float(driver.range[1])
        self.grip_range = (float(m.actuator_ctrlrange[sim.body.grip_act][0]),
                           float(m.actuator_ctrlrange[sim.body.grip_act][1]))
        if self.grip_range[1] <= self.grip_range[0]:
            self.grip_range = (GRIPPER_OPEN, GRIPPER_CLOSED)
        joint_ids = [int(np.where(m.jnt_qposadr == a)[0][0]) for a in sim.body.arm_qadr]
        self.unlimited = np.array([not bool(m.jnt_limited[j]) for j in joint_ids])
        self.profile = AxisProfile.at_rest(self._measured())
        self.home = np.asarray(settings.home, dtype=np.float64)
        self.track_vel = np.asarray(settings.max_joint_vel, dtype=np.float64)

    def _measured(self) -> FloatArray:
        return np.array(self.sim.data.qpos[self.sim.body.arm_qadr], dtype=np.float64)

    def limits(self) -> tuple[FloatArray, FloatArray]:
        s = self.settings
        if self.retracting:
            return (np.asarray(s.retract_joint_vel, dtype=np.float64),
                    np.asarray(s.retract_joint_accel, dtype=np.float64))
        return (np.asarray(s.max_joint_vel, dtype=np.float64),
                np.asarray(s.max_joint_accel, dtype=np.float64))

    def reset(self) -> None:
        data, body = self.sim.data, self.sim.body
        if self.hand is not None:
            self.hand.restart()
        data.ctrl[body.grip_act] = self.grip_range[0]
        self.profile = AxisProfile.at_rest(self._measured())
        self.profile.target = self._unwrapped(self.home)
        self.retracting = True
        self.streaming = False
        self.running = True
        data.ctrl[body.arm_act] = self.profile.pos

    def stop(self) -> None:
        self.running = False
        self.streaming = False
        self.retracting = False
        self.profile.stop()

    def at_home(self) -> bool:
        err = np.abs(self._measured() - self._unwrapped(self.home))
        return bool(np.max(err) <= self.settings.home_tolerance)

    def _unwrapped(self, q: FloatArray) -> FloatArray:
        """``q`` with unlimited joints moved by whole turns next to the current profile."""
        out = np.array(q, dtype=np.float64)
        ref = self.profile.pos
        for i in np.flatnonzero(self.unlimited):
            out[i] = ref[i] + wrap(float(out[i] - ref[i]))
        return out

    def arm_base_pose(self) -> tuple[FloatArray, FloatArray]:
        d = self.sim.data
        return (np.array(d.xpos[self.arm_base], dtype=np.float64),
                np.array(d.xmat[self.arm_base], dtype=np.float64).reshape(3, 3))

    def solve(self, pos: FloatArray, quat: FloatArray) -> FloatArray | None:
        """Joint target for a pinch-site pose in the arm base frame, or None (IK miss).

        The solver starts from the joints the arm is heading to, then from the measured ones,
        then from the home and ready poses (a far target may not converge from where the arm
        is); of the solutions found, the one nearest the current joints wins. A solution the
        joints would reach only by swinging the hand wide of the straight line to the target
        (:meth:`sweep`, more than :attr:`ArmSettings.max_sweep_m`) is refused and counted in
        :attr:`swings_refused`: an arm server does not fling the arm through the workspace to
        change branch, so the target is a miss and the arm keeps to where it was heading.
        """
        base_pos, base_rot = self.arm_base_pose()
        world_pos = base_pos + base_rot @ (pos + self.hand_offset())
        world_rot = base_rot @ _quat_xyzw_to_mat(quat)
        current = self._measured()
        best: FloatArray | None = None
        refused = False
        for seed in (self.profile.target, None, np.asarray(HOME_ARM), np.asarray(READY_ARM)):
            q = self.sim.control.ik(world_pos, world_rot, seed)
            if q is None:
                continue
            q = self._unwrapped(q)
            if self.sweep(q) > self.settings.max_sweep_m:
                refused = True
                continue
            if best is None or np.max(np.abs(q - current)) < np.max(np.abs(best - current)):
                best = q
            if np.max(np.abs(q - current)) < 0.5:
                break  # near the current joints: take it
        if best is None and refused:
            self.swings_refused += 1
        return best

    def sweep(self, q: FloatArray) -> float:
        """How far (m) the hand strays from the straight line between where the joint set-points
        hold it now and where ``q`` puts it, while the set-points move to ``q``.

        Each joint is taken to move at its own speed limit, so joints with less to turn arrive
        first (the tracking profile's axes are independent); the hand is placed by forward
        kinematics at :data:`SWEEP_SAMPLES` moments of that motion.
        """
        start = self.profile.pos
        delta = np.asarray(q, dtype=np.float64) - start
        max_vel = self.track_vel  # the move to a solved target runs at the tracking limits
        duration = float(np.max(np.abs(delta) / max_vel))
        if duration <= 0.0:
            return 0.0
        times = duration * np.arange(SWEEP_SAMPLES + 1) / SWEEP_SAMPLES
        reach = np.outer(times, max_vel)  # (samples, joints): how far each joint can turn by then
        path = start + np.clip(delta, -reach, reach)
        hand = self.sim.control.site_positions(path)
        line = hand[-1] - hand[0]
        length2 = float(line @ line)
        along = np.zeros(len(hand)) if length2 == 0.0 else np.clip(
            (hand - hand[0]) @ line / length2, 0.0, 1.0)
        off = hand - (hand[0] + along[:, None] * line)
        return float(np.max(np.linalg.norm(off, axis=1)))

    def hand_offset(self) -> FloatArray:
        """Where the hand lands relative to its command (arm base frame; zero without noise)."""
        return np.zeros(3) if self.hand is None else self.hand.offset

    def start_motion(self) -> None:
        """A target arrives: when the arm was at rest, a new motion (and approach error) starts."""
        if self.hand is not None and not self.streaming:
            self.hand.new_motion()

    def set_target(self, q: FloatArray | None, gripper: float, now: float) -> None:
        if q is None:
            self.ik_misses += 1
        else:
            self.profile.target = q
            self.retracting = False
        lo, hi = self.grip_range
        self.sim.data.ctrl[self.sim.body.grip_act] = lo + gripper * (hi - lo)
        self.streaming = True
        self.last_target_t = now

    def state(self) -> dict[str, FloatArray]:
        base_pos, base_rot = self.arm_base_pose()
        site_pos, site_rot = self.sim.body.site_pose()
        pos = base_rot.T @ (site_pos - base_pos) - self.hand_offset()
        quat = _mat_to_quat_xyzw(base_rot.T @ site_rot)
        grip = float(self.sim.data.qpos[self.driver_qadr]) / self.driver_range
        return {
            c.KEY_ARM_POS: pos,
            c.KEY_ARM_QUAT: quat,
            c.KEY_GRIPPER_POS: np.array([min(max(grip, 0.0), 1.0)]),
        }

    def update(self, now: float, dt: float) -> None:
        if not self.running:
            return
        max_vel, max_accel = self.limits()
        hold = self.settings.hold_after_s
        hold_at = None if hold is None or not self.streaming else self.last_target_t + hold
        self.streaming = _advance_watched(self.profile, now, dt, max_vel=max_vel,
                                          max_accel=max_accel, hold_at=hold_at)
        self.sim.data.ctrl[self.sim.body.arm_act] = self.profile.pos

    def invalidate(self) -> None:
        self.stop()


class SimRobotDrives:
    """The base and arm drives of one simulator, and the factories of their controllers.

    Args:
        sim: the simulator; its ``world.after_steps`` gets the tracking hook.
        lock: the lock every user of ``sim`` holds (e.g. ``SimThread.lock``); a fresh
            ``threading.RLock`` when omitted. Controller methods take it, so in-process callers
            must not already hold a non-reentrant one.
        base: base settings; ``Base(max_vel=..., max_accel=...)`` overrides its limits.
        arm: arm settings.
        noise: odometry drift and hand error come from its ``odometry`` and ``arm`` terms; None
            (or a quiet term) leaves that part exact.
        noise_seed: seed of the noise streams (the same seed gives the same errors).
    """

    def __init__(self, sim: KitchenSim, lock: SimLock | None = None, *,
                 base: BaseSettings | None = None, arm: ArmSettings | None = None,
                 noise: NoiseProfile | None = None, noise_seed: int = 0) -> None:
        self.sim = sim
        drift: OdometryDrift | None = None
        hand: HandError | None = None
        if noise is not None and not noise.quiet("odometry"):
            drift = OdometryDrift(noise.odometry, stream_rng(noise_seed, STREAM_ODOMETRY))
        if noise is not None and not noise.quiet("arm"):
            hand = HandError(noise.arm, stream_rng(noise_seed, STREAM_ARM))
        self.lock: SimLock = lock if lock is not None else threading.RLock()
        self._counts_lock = threading.Lock()
        self._created = {c.BASE_TYPEID: 0, c.ARM_TYPEID: 0}
        self._closed = {c.BASE_TYPEID: 0, c.ARM_TYPEID: 0}
        with self.lock:
            self.base = _BaseDrive(sim, base or BaseSettings(), drift)
            self.arm = _ArmDrive(sim, arm or ArmSettings(), hand)
            self._last_t = sim.time
            self._handle: str | None = None  # handle held by the grasp assist
            self._handle_record: PrimitiveRecord | None = None
            sim.world.after_steps.append(self._after_steps)
        self._attached = True

    # -- factories -----------------------------------------------------------------------------
    def new_base(self, max_vel: tuple[float, float, float] | None = None,
                 max_accel: tuple[float, float, float] | None = None) -> SimBase:
        """A base controller that supersedes every earlier one (what typeid ``Base`` builds)."""
        s = self.base.settings
        vel = _positive_vector("max_vel", s.max_vel if max_vel is None else max_vel, 3)
        accel = _positive_vector("max_accel", s.max_accel if max_accel is None else max_accel, 3)
        ctl = SimBase(self, vel, accel)
        with self.lock:
            self.base.stop()
            self.base.owner = ctl
        self._count(self._created, c.BASE_TYPEID)
        return ctl

    def new_arm(self) -> SimArm:
        """An arm controller that supersedes every earlier one (what typeid ``Arm`` builds)."""
        ctl = SimArm(self)
        with self.lock:
            self.arm.stop()
            self.arm.owner = ctl
        self._count(self._created, c.ARM_TYPEID)
        return ctl

    # -- bookkeeping ---------------------------------------------------------------------------
    def _count(self, table: dict[str, int], typeid: str) -> None:
        with self._counts_lock:
            table[typeid] += 1

    @property
    def created(self) -> dict[str, int]:
        """How many controllers of each typeid were built."""
        with self._counts_lock:
            return dict(self._created)

    @property
    def closed(self) -> dict[str, int]:
        """How many ``close()`` calls controllers of each typeid received (superseded too)."""
        with self._counts_lock:
            return dict(self._closed)

    def advance(self, seconds: float, chunk_s: float = 0.01) -> None:
        """Step the simulator ``seconds`` under the lock, in chunks of ``chunk_s``.

        The drives refresh their set-points once per ``step()`` call, so a long single step
        would leave them unchanged until its end; in-process callers step through this (or in
        similarly short chunks themselves).
        """
        if not (math.isfinite(seconds) and seconds >= 0.0 and chunk_s > 0.0):
            raise ValueError(f"bad advance({seconds!r}, chunk_s={chunk_s!r})")
        dt = float(self.sim.model.opt.timestep)
        total = round(seconds / dt)
        per_chunk = max(1, round(chunk_s / dt))
        with self.lock:
            while total > 0:
                n = min(per_chunk, total)
                self.sim.step(n)
                total -= n

    def detach(self) -> None:
        """Stop both drives and remove the tracking hook from the simulator."""
        with self.lock:
            self.base.stop()
            self.arm.stop()
            self.base.owner = self.arm.owner = None
            if self._attached:
                self.sim.world.after_steps.remove(self._after_steps)
                self._attached = False

    def teleport_base(self, pose: tuple[float, float, float]) -> None:
        """Put the base at a world pose (a scenario reset, not a motion) and hold it there.

        Odometry jumps by the move, as a kidnapped robot's would; the odometry origin stays.
        """
        with self.lock:
            body, data = self.sim.body, self.sim.data
            data.qpos[body.base_qadr] = pose
            data.qvel[[self.sim.model.joint(n).dofadr[0] for n in BASE_JOINTS]] = 0.0
            data.ctrl[body.base_act] = pose
            self.sim.world.forward()
            self.base.relocate()

    def odom_origin(self) -> tuple[float, float, float] | None:
        """World pose (x, y, yaw) of the odometry frame, or None before the first base reset."""
        with self.lock:
            o = self.base.origin
            return None if o is None else (float(o[0]), float(o[1]), float(o[2]))

    def _grasp_aid(self) -> None:
        """Engage the grasp assist once both fingers touch one thing while closing; release
        it when the gripper opens (the physics-side aid documented in mimir_sim.grasping)."""
        sim = self.sim
        grasp = sim.grasp
        lo, hi = self.arm.grip_range
        closing = (float(sim.data.ctrl[sim.body.grip_act]) - lo) / (hi - lo) >= 0.5
        engaged = grasp.holding is not None or self._handle is not None
        if not closing:
            if engaged:
                grasp.release_handles()
                grasp.drop()
                self._handle = None
                self._close_handle_record()
            return
        if engaged or not sim.world.config.pick_assist:
            return
        contacts = sim.body.finger_contacts()
        left = {x.entity for x in contacts if x.finger == "left" and x.entity}
        right = {x.entity for x in contacts if x.finger == "right" and x.entity}
        for entity in sorted(e for e in left & right if e is not None):
            if entity in sim.scene.objects:
                grasp.engage_weld(entity)
                grasp.holding = entity
                return
            fixture = entity.removesuffix("_handle")
            if fixture != entity and fixture in sim.scene.fixtures:
                grasp.engage_handle(sim.fixtures.fixture(fixture))
                self._handle = entity
                self._log_handle_grasp(fixture)
                return

    def _log_handle_grasp(self, fixture: str) -> None:
        """Note, for the judge only, that the hand took hold of a fixture's handle: an open
        attempt when the fixture was closed then, a close attempt otherwise."""
        sim = self.sim
        name = "close" if sim.is_open(fixture) else "open"
        record = PrimitiveRecord(name=name, target=fixture, start=sim.time,
                                 instruction=sim.instruction, outcome="handle grasped")
        record.measurements["opening_before"] = sim.fixture_opening(fixture)
        sim.log.append(record)
        self._handle_record = record

    def _close_handle_record(self) -> None:
        record, self._handle_record = self._handle_record, None
        if record is None:
            return
        sim = self.sim
        after = sim.fixture_opening(record.target)
        record.end = sim.time
        record.measurements["opening_after"] = after
        record.success = sim.is_open(record.target) == (record.name == "open")
        record.outcome = "handle released"


    def _after_steps(self) -> None:
        now = self.sim.time
        dt = now - self._last_t
        self._last_t = now
        if dt < 0.0:  # the simulator was reset: the odometry origin and targets are void
            self.base.invalidate()
            self.arm.invalidate()
            return
        self.base.track_drift()
        self.base.update(now, dt)
        self.arm.update(now, dt)
        if self.arm.running:
            self._grasp_aid()


# --- Controllers --------------------------------------------------------------------------------
_DriveT = TypeVar("_DriveT", _BaseDrive, _ArmDrive)


class _SimController(Generic[_DriveT]):
    """What the base and arm controllers share: the drive they own until a newer controller of
    the same part takes it over, and closing it."""

    _part: ClassVar[str]  # "base" or "arm": the drive's attribute on SimRobotDrives
    _upstream: ClassVar[str]  # the upstream class a client constructs: "Base" or "Arm"
    _typeid: ClassVar[str]  # the served type id, for the closed-controller counters

    def __init__(self, drives: SimRobotDrives) -> None:
        self._drives = drives

    def _current(self) -> _DriveT:
        return cast(_DriveT, getattr(self._drives, self._part))

    def _drive(self) -> _DriveT:
        drive = self._current()
        if drive.owner is not self:
            raise ControllerSupersededError(
                f"this {self._part} controller was superseded by a newer one "
                f"(a new {self._upstream}() was created)")
        return drive

    def close(self) -> None:
        """Stop control; the part holds at its last set-points."""
        self._drives._count(self._drives._closed, self._typeid)
        with self._drives.lock:
            drive = self._current()
            if drive.owner is self:
                drive.stop()

    def superseded(self) -> bool:
        """Whether a newer controller of this part took over (in-process helper, not served)."""
        return self._current().owner is not self


class SimBase(_SimController[_BaseDrive]):
    """Base controller on the simulated robot: same methods and keys as upstream ``Base``."""

    _part = "base"
    _upstream = "Base"
    _typeid = c.BASE_TYPEID

    def __init__(self, drives: SimRobotDrives, max_vel: FloatArray,
                 max_accel: FloatArray) -> None:
        super().__init__(drives)
        self._max_vel = max_vel
        self._max_accel = max_accel
        self._reset_once = False

    def reset(self) -> None:
        """Start control; the base's current pose becomes the odometry origin."""
        with self._drives.lock:
            self._drive().reset(self._max_vel.copy(), self._max_accel.copy())
            self._reset_once = True

    def execute_action(self, action: Mapping[str, Any]) -> None:
        """Track ``action["base_pose"]`` (x, y, theta in odometry); other keys are ignored."""
        pose = _action_vector(_require_mapping(action), c.KEY_BASE_POSE, 3)
        with self._drives.lock:
            drive = self._drive()
            if not drive.running:
                raise ControllerNotResetError("base control is not running: call reset() first")
            drive.set_target(pose, self._drives.sim.time)

    def get_state(self) -> dict[str, FloatArray]:
        """``{"base_pose": [x, y, theta]}``: measured odometry since the last reset."""
        with self._drives.lock:
            drive = self._drive()
            if not self._reset_once or drive.origin is None:
                raise ControllerNotResetError(
                    "base control was never started (or the simulator was reset): "
                    "call reset() first")
            return {c.KEY_BASE_POSE: drive.odometry()}


class SimArm(_SimController[_ArmDrive]):
    """Arm controller on the simulated robot: same methods and keys as upstream ``Arm``."""

    _part = "arm"
    _upstream = "Arm"
    _typeid = c.ARM_TYPEID

    def reset(self) -> None:
        """Open the gripper and retract the arm; waits ``reset_wait_s`` (wall) at most for it."""
        drives = self._drives
        with drives.lock:
            drive = self._drive()
            drive.reset()
            wait_s = drive.settings.reset_wait_s
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            with drives.lock:
                if drive.owner is not self or not drive.running or drive.at_home():
                    return
            time.sleep(0.01)
        if wait_s > 0.0:
            LOG.warning("arm reset: not retracted after %.1f s of wall time", wait_s)

    def execute_action(self, action: Mapping[str, Any]) -> None:
        """Track ``arm_pos``, ``arm_quat`` (x, y, z, w) and ``gripper_pos`` (0 open .. 1 closed).

        Other keys are ignored. A pose the IK cannot reach keeps the previous joint target.
        """
        act = _require_mapping(action)
        pos = _action_vector(act, c.KEY_ARM_POS, 3)
        quat = _action_vector(act, c.KEY_ARM_QUAT, 4)
        grip = float(_action_vector(act, c.KEY_GRIPPER_POS, 1)[0])
        norm = float(np.linalg.norm(quat))
        if norm < 1e-6:
            raise ActionRefusedError("arm_quat is (close to) zero")
        if not c.GRIPPER_OPEN <= grip <= c.GRIPPER_CLOSED:
            raise ActionRefusedError(f"gripper_pos {grip} outside 0..1")
        with self._drives.lock:
            drive = self._drive()
            if not drive.running:
                raise ControllerNotResetError("arm control is not running: call reset() first")
            drive.start_motion()
            q = drive.solve(pos, quat / norm)
            drive.set_target(q, grip, self._drives.sim.time)

    def get_state(self) -> dict[str, FloatArray]:
        """``arm_pos``, ``arm_quat`` (w >= 0) in the arm base frame, measured ``gripper_pos``."""
        with self._drives.lock:
            return self._drive().state()

    def ik_misses(self) -> int:
        """Targets refused because IK did not converge (in-process helper, not served)."""
        with self._drives.lock:
            return self._drives.arm.ik_misses


# --- Hosting --------------------------------------------------------------------------------------
class _ThreadServer:
    """A manager ``Server`` whose accept loop runs in a daemon thread and can be stopped.

    ``Server.serve_forever`` is not used: it exits its thread through ``sys.exit`` and resets
    ``sys.stdout``, and its accept loop never ends. This loop ends when stopped; open client
    connections are shut down so their serving threads end too.
    """

    def __init__(self, typeid: str, factory: Callable[..., Any], host: str, port: int,
                 authkey: bytes) -> None:
        class _Manager(BaseManager):
            pass

        _Manager.register(typeid, callable=factory, exposed=CONTROLLER_METHODS)
        # typeshed leaves Server's listener, stop_event and handle_request out: held as Any
        self.server: Any = cast(Any, _Manager(address=(host, port), authkey=authkey).get_server())
        self._stopping = threading.Event()
        self.server.stop_event = self._stopping  # ends the connection loops of serve_client
        address = self.server.address
        self.address: tuple[str, int] = (str(address[0]), int(address[1]))
        self._conns: set[Connection] = set()
        self._conns_lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept_loop, daemon=True,
                                        name=f"sim-rpc-{typeid.lower()}")
        self._thread.start()

    def _accept_loop(self) -> None:
        listener = self.server.listener
        while not self._stopping.is_set():
            try:
                conn = listener.accept()
            except OSError:
                if self._stopping.is_set():
                    break
                continue
            if self._stopping.is_set():
                conn.close()
                break
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()
        listener.close()

    def _serve(self, conn: Connection) -> None:
        with self._conns_lock:
            self._conns.add(conn)
        try:
            self.server.handle_request(conn)
        finally:
            with self._conns_lock:
                self._conns.discard(conn)

    def stop(self, timeout_s: float = 5.0) -> None:
        if self._stopping.is_set():
            return
        self._stopping.set()
        try:  # wake the blocking accept()
            with socket.create_connection(self.address, timeout=1.0):
                pass
        except OSError:
            pass
        self._thread.join(timeout_s)
        with self._conns_lock:
            conns = list(self._conns)
        for conn in conns:
            try:
                sock = socket.socket(fileno=conn.fileno())
            except OSError:
                continue
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            finally:
                sock.detach()  # the connection keeps owning the descriptor

    @property
    def running(self) -> bool:
        return self._thread.is_alive()


class SimRobotServers:
    """Serves typeids ``Base`` and ``Arm`` for a simulator from threads of this process.

    Args:
        sim: the simulator; something else (a :class:`~mimir_sim.sim_thread.SimThread`, a test)
            steps it.
        lock: the simulation lock (e.g. ``SimThread.lock``).
        authkey: the servers' authkey (non-empty bytes).
        host: address to bind.
        base_port, arm_port: TCP ports; 0 picks free ones (see :attr:`base_address`).
        base, arm: drive settings; the arm's ``reset_wait_s`` defaults to 10 s here, so a reset
            returns once the arm is retracted, as upstream.
        noise, noise_seed: actuation noise and its seed (see :class:`SimRobotDrives`).
    """

    def __init__(self, sim: KitchenSim, lock: SimLock, authkey: bytes, *,
                 host: str = "127.0.0.1", base_port: int = c.BASE_RPC_PORT,
                 arm_port: int = c.ARM_RPC_PORT, base: BaseSettings | None = None,
                 arm: ArmSettings | None = None, noise: NoiseProfile | None = None,
                 noise_seed: int = 0) -> None:
        if not isinstance(authkey, bytes) or not authkey:
            raise ValueError("authkey must be non-empty bytes")
        self.drives = SimRobotDrives(sim, lock, base=base,
                                     arm=arm if arm is not None else ArmSettings(reset_wait_s=10.0),
                                     noise=noise, noise_seed=noise_seed)
        self._servers: list[_ThreadServer] = []
        try:
            self._base = _ThreadServer(c.BASE_TYPEID, self.drives.new_base, host, base_port,
                                       authkey)
            self._servers.append(self._base)
            self._arm = _ThreadServer(c.ARM_TYPEID, self.drives.new_arm, host, arm_port, authkey)
            self._servers.append(self._arm)
        except BaseException:
            self.stop()
            raise

    @property
    def base_address(self) -> tuple[str, int]:
        """Bound (host, port) of the base server."""
        return self._base.address

    @property
    def arm_address(self) -> tuple[str, int]:
        """Bound (host, port) of the arm server."""
        return self._arm.address

    @property
    def created(self) -> dict[str, int]:
        """Controllers built per typeid (over RPC or in-process)."""
        return self.drives.created

    @property
    def running(self) -> bool:
        return bool(self._servers) and all(s.running for s in self._servers)

    def stop(self) -> None:
        """Stop serving, drop client connections, stop the drives and unhook them."""
        for server in self._servers:
            server.stop()
        self.drives.detach()

    def __enter__(self) -> SimRobotServers:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()
