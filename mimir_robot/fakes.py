"""Kinematic stand-ins for the TidyBot++ base and arm controllers, and servers that host them.

:class:`FakeBase` and :class:`FakeArm` answer the same methods with the same dictionary keys as
the controllers of the real servers. Their motion is first order: each quantity closes the gap to
its target at ``rate`` per second (``1 - exp(-rate * dt)`` of the gap every ``dt``), advanced on
every call from the monotonic clock (or an injected one, for tests that run on simulated time),
so no thread runs in the server. Like the real controllers
they must be reset before they take targets; a base reset zeroes odometry, an arm reset opens the
gripper and puts the arm at :data:`RETRACT_POS` / :data:`RETRACT_QUAT`.

:class:`FakeArm` may be given a small world: one ``thing`` in reach (a handle or an object, a point
in the arm base frame). Fingers closing with their pads within :data:`THING_GRASP_RADIUS` of it
stop at ``thing_width`` instead of closing fully, and a ``thing_locked`` thing (a locked door) keeps
the gripping pads within :data:`THING_LOCK_SLACK` of it, so pulling on it stalls. The pads lie
``pad_offset`` ahead of the reported tool point along the tool's z axis (the approach).

Every controller built and every ``close()`` in a server process is counted (class-level
counters), and calls can be made to hang, both through the ``FakeControl`` typeid that
:func:`start_fake_server` registers beside the controller: tests use them to check that reconnects
create no extra controller and that a server that never answers is bounded by the client's
deadline.
"""

from __future__ import annotations

import abc
import functools
import math
import threading
import time
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from mimir_robot import contract as c
from mimir_robot.rpc import start_controller_server

# End-effector pose after an arm reset (m, arm base frame; quaternion x, y, z, w): tucked in front
# of the arm base, tool pointing down, roughly where the Gen3 "retract" pose puts the tool.
RETRACT_POS = np.array([0.13, 0.0, 0.21])
RETRACT_QUAT = np.array([0.7071068, 0.7071068, 0.0, 0.0])

#: The fingers close on the thing when the hand is within this of it (m).
THING_GRASP_RADIUS = 0.02
#: How far a locked thing lets the gripping hand move away from it (m).
THING_LOCK_SLACK = 0.005


class _Faults:
    """Server-process-wide switches and counters shared by every fake controller."""

    lock = threading.Lock()
    created: ClassVar[dict[str, int]] = {c.BASE_TYPEID: 0, c.ARM_TYPEID: 0}
    closed: ClassVar[dict[str, int]] = {c.BASE_TYPEID: 0, c.ARM_TYPEID: 0}
    hang = threading.Event()  # set: every controller call blocks until cleared

    @classmethod
    def count(cls, typeid: str, table: dict[str, int] | None = None) -> None:
        with cls.lock:
            table = cls.created if table is None else table
            table[typeid] = table.get(typeid, 0) + 1

    @classmethod
    def maybe_hang(cls) -> None:
        while cls.hang.is_set():
            time.sleep(0.01)


class FakeControl:
    """Test hooks of a fake server (typeid ``FakeControl``)."""

    def counts(self) -> dict[str, int]:
        """How many controllers of each typeid this server process has built."""
        with _Faults.lock:
            return dict(_Faults.created)

    def closes(self) -> dict[str, int]:
        """How many ``close()`` calls the controllers of each typeid have received."""
        with _Faults.lock:
            return dict(_Faults.closed)

    def set_hang(self, hang: bool) -> None:
        """Make every controller call block (True) until released (False)."""
        if hang:
            _Faults.hang.set()
        else:
            _Faults.hang.clear()


def _gain(rate: float, dt: float) -> float:
    return 1.0 - math.exp(-rate * max(dt, 0.0))


def _wrap(angle: float) -> float:
    return (angle + math.pi) % (2.0 * math.pi) - math.pi


class _FakeController(abc.ABC):
    """The life cycle both fake controllers share.

    Building one counts it; every call may be made to hang (:class:`_Faults`); ``reset()`` puts
    the controller at its home state and starts it; ``close()`` is counted and stops it. A
    subclass names its ``typeid`` and ``part`` (for messages) and supplies ``_home()``,
    ``_advance()`` and ``_take()``.
    """

    typeid: ClassVar[str]
    part: ClassVar[str]

    def __init__(self, clock: Callable[[], float]) -> None:
        _Faults.count(self.typeid)
        self._clock = clock
        self._lock = threading.Lock()
        self._running = False
        self._t = self._clock()

    @abc.abstractmethod
    def _home(self) -> None:
        """Put the controller where a reset leaves it, with no target (lock held)."""

    @abc.abstractmethod
    def _advance(self) -> None:
        """Move toward the target by the time passed since the last call (lock held)."""

    @abc.abstractmethod
    def _take(self, action: dict[str, Any]) -> None:
        """Make the target of an ``execute_action`` call the new target (lock held)."""

    def reset(self) -> None:
        _Faults.maybe_hang()
        with self._lock:
            self._home()
            self._running = True
            self._t = self._clock()

    def execute_action(self, action: dict[str, Any]) -> None:
        _Faults.maybe_hang()
        with self._lock:
            if not self._running:
                raise RuntimeError(f"{self.part} control is not running: call reset() first")
            self._advance()
            self._take(action)

    def close(self) -> None:
        _Faults.count(self.typeid, _Faults.closed)
        with self._lock:
            self._advance()
            self._running = False


class FakeBase(_FakeController):
    """Base controller: tracks ``base_pose`` targets; reports odometry zeroed at reset."""

    typeid = c.BASE_TYPEID
    part = "base"

    def __init__(self, max_vel: tuple[float, float, float] = (0.5, 0.5, 1.57),
                 max_accel: tuple[float, float, float] = (0.25, 0.25, 0.79),
                 rate: float = 4.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(clock)
        self.max_vel = np.asarray(max_vel, dtype=np.float64)
        self.max_accel = max_accel  # accepted for signature compatibility; first order ignores it
        self.rate = rate
        self._pose: np.ndarray | None = None  # None until the first reset
        self._target: np.ndarray | None = None

    def _advance(self) -> None:
        now = self._clock()
        dt, self._t = now - self._t, now
        if self._pose is None or self._target is None or not self._running:
            return
        err = self._target - self._pose
        err[2] = _wrap(float(err[2]))
        step = err * _gain(self.rate, dt)
        step = np.clip(step, -self.max_vel * dt, self.max_vel * dt)
        self._pose = self._pose + step

    def _home(self) -> None:
        self._pose = np.zeros(3)
        self._target = None

    def _take(self, action: dict[str, Any]) -> None:
        self._target = np.asarray(action[c.KEY_BASE_POSE], dtype=np.float64).reshape(3).copy()

    def get_state(self) -> dict[str, np.ndarray]:
        _Faults.maybe_hang()
        with self._lock:
            if self._pose is None:
                raise RuntimeError("base control was never started: call reset() first")
            self._advance()
            return {c.KEY_BASE_POSE: self._pose.copy()}


def _nlerp(q: np.ndarray, target: np.ndarray, t: float) -> np.ndarray:
    if float(np.dot(q, target)) < 0.0:
        target = -target
    out = q + (target - q) * t
    return np.asarray(out / np.linalg.norm(out))


def _tool_z(q: np.ndarray) -> np.ndarray:
    """The z axis of the rotation of unit quaternion ``q`` (x, y, z, w)."""
    x, y, z, w = (float(v) for v in q)
    return np.array([2.0 * (x * z + w * y), 2.0 * (y * z - w * x), 1.0 - 2.0 * (x * x + y * y)])


class FakeArm(_FakeController):
    """Arm controller: tracks end-effector and gripper targets; reports pose and gripper only.

    Args:
        rate, gripper_rate: first-order rates of the hand and the gripper (1/s).
        clock: time source (monotonic wall time by default).
        thing: position (m, arm base frame) of one thing in reach, or None for an empty world.
        thing_width: gripper reading at which the fingers stop on the thing (0 open .. 1 closed).
        thing_locked: the thing does not move: pads gripping it stay within
            :data:`THING_LOCK_SLACK` of it.
        thing_hold: for a locked thing, how far (m) the commanded pads may draw away from it
            before the fingers lose it (they then close on nothing until the gripper opens);
            None: the grip never gives.
        pad_offset: how far the finger pads' centre lies ahead of the tool point, along the
            tool's z axis (m); the pads, not the tool point, must reach the thing.
        ceiling: height (m, arm base frame) the hand cannot rise above (a board or a door in
            the way), or None.
    """

    typeid = c.ARM_TYPEID
    part = "arm"

    def __init__(self, rate: float = 6.0, gripper_rate: float = 8.0,
                 clock: Callable[[], float] = time.monotonic, *,
                 thing: tuple[float, float, float] | np.ndarray | None = None,
                 thing_width: float = 0.45, thing_locked: bool = False,
                 thing_hold: float | None = None,
                 pad_offset: float = 0.0, ceiling: float | None = None) -> None:
        super().__init__(clock)
        self.rate = rate
        self.gripper_rate = gripper_rate
        self.thing = (None if thing is None
                      else np.asarray(thing, dtype=np.float64).reshape(3).copy())
        self.thing_width = float(thing_width)
        self.thing_locked = bool(thing_locked)
        self.thing_hold = None if thing_hold is None else float(thing_hold)
        self._lost = False  # the fingers lost the thing and stay off it until they open
        self.pad_offset = float(pad_offset)
        self.ceiling = None if ceiling is None else float(ceiling)
        self.gripped = False  # the fingers are closed on the thing
        self._pos = RETRACT_POS.copy()
        self._quat = RETRACT_QUAT / np.linalg.norm(RETRACT_QUAT)
        self._grip = 0.0
        self._target: tuple[np.ndarray, np.ndarray, float] | None = None

    def _advance(self) -> None:
        now = self._clock()
        dt, self._t = now - self._t, now
        if self._target is None or not self._running:
            return
        pos, quat, grip = self._target
        k = _gain(self.rate, dt)
        self._pos = self._pos + (pos - self._pos) * k
        if self.ceiling is not None:
            self._pos[2] = min(self._pos[2], self.ceiling)
        self._quat = _nlerp(self._quat, quat, k)
        self._grip += (grip - self._grip) * _gain(self.gripper_rate, dt)
        self._touch(closing=grip > 0.5)

    def _touch(self, closing: bool) -> None:
        """The thing's effect on the fingers and, when locked, on the gripping hand."""
        if self.thing is None:
            return
        ahead = _tool_z(self._quat) * self.pad_offset
        pads = self._pos + ahead
        near = float(np.linalg.norm(pads - self.thing)) < THING_GRASP_RADIUS
        self._lost = self._lost and closing
        self.gripped = closing and not self._lost and (near or self.gripped)
        if self.gripped and self.thing_locked and self.thing_hold is not None \
                and self._target is not None:
            drawn = float(np.linalg.norm(self._target[0] + ahead - self.thing))
            if drawn > self.thing_hold:
                self.gripped, self._lost = False, True
        if not self.gripped:
            return
        self._grip = min(self._grip, self.thing_width)
        if self.thing_locked:
            d = pads - self.thing
            n = float(np.linalg.norm(d))
            if n > THING_LOCK_SLACK:
                self._pos = self.thing + d / n * THING_LOCK_SLACK - ahead

    def _home(self) -> None:
        self._grip = c.GRIPPER_OPEN
        self.gripped = self._lost = False
        self._pos = RETRACT_POS.copy()
        self._quat = RETRACT_QUAT / np.linalg.norm(RETRACT_QUAT)
        self._target = None

    def _take(self, action: dict[str, Any]) -> None:
        quat = np.asarray(action[c.KEY_ARM_QUAT], dtype=np.float64).reshape(4)
        self._target = (
            np.asarray(action[c.KEY_ARM_POS], dtype=np.float64).reshape(3).copy(),
            quat / np.linalg.norm(quat),
            float(np.asarray(action[c.KEY_GRIPPER_POS]).item()),
        )

    def get_state(self) -> dict[str, np.ndarray]:
        _Faults.maybe_hang()
        with self._lock:
            self._advance()
            quat = self._quat.copy()
            if quat[3] < 0.0:
                quat = -quat
            return {
                c.KEY_ARM_POS: self._pos.copy(),
                c.KEY_ARM_QUAT: quat,
                c.KEY_GRIPPER_POS: np.array([self._grip]),
            }


def start_fake_server(
    typeid: str,
    authkey: bytes,
    *,
    port: int = 0,
    context: str = "spawn",
    **controller_kwargs: Any,
) -> tuple[tuple[str, int], Callable[..., None]]:
    """Serve :class:`FakeBase` (typeid ``Base``) or :class:`FakeArm` (``Arm``) on localhost.

    ``FakeControl`` is served beside it. ``controller_kwargs`` (e.g. ``rate``, or the arm's
    ``thing``, ``thing_width`` and ``thing_locked``) become defaults of every controller the server
    builds; they must pickle (the server runs in a spawned process). Returns ``(address, stop)`` as
    :func:`mimir_robot.rpc.start_controller_server` does.
    """
    classes: dict[str, type] = {c.BASE_TYPEID: FakeBase, c.ARM_TYPEID: FakeArm}
    if typeid not in classes:
        raise ValueError(f"unknown typeid {typeid!r}; expected one of {sorted(classes)}")
    factory: Callable[..., Any] = (functools.partial(classes[typeid], **controller_kwargs)
                                   if controller_kwargs else classes[typeid])
    return start_controller_server({typeid: factory, "FakeControl": FakeControl}, authkey,
                                   port=port, context=context)
