"""The executor core against fake controllers in process, on a simulated clock.

The fakes track targets at first order like a position-controlled robot; the fake arm's small
world (:class:`mimir_robot.fakes.FakeArm` with a ``thing``) adds one thing in front of the hand (an
object or a handle) on which the fingers stop short of closed, and which may be locked in place
(the hand then cannot draw it away).
"""

from __future__ import annotations

import itertools
import math
import threading

import numpy as np
import pytest

from mimir_robot import contract as c
from mimir_robot.direct import DirectRobot
from mimir_robot.executor import (
    FORWARD,
    PARTIAL_LOOK,
    SIDEWAYS,
    Articulation,
    Executor,
    GraspTarget,
)
from mimir_robot.fakes import FakeArm, FakeBase
from mimir_robot.motion import Motion, Sample
from mimir_robot.profile import ProfileError, RobotProfile
from mimir_robot.rpc import RobotLinkLostError, RobotNotResetError, RobotTargetRefusedError

PROFILE = RobotProfile()
MOUNT = np.asarray(PROFILE.arm_mount)


class SimClock:
    """Time that passes only when someone sleeps."""

    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t

    def sleep(self, dt: float) -> None:
        self.t += max(dt, 1e-3)


def toy_arm(clock: SimClock, thing_base: np.ndarray | None = None, width: float = 0.45,
            locked: bool = False, *, ceiling: float | None = None,
            hold: float | None = None) -> FakeArm:
    """A fake arm with one thing in reach (given in base_link): fingers stop on it at ``width``.

    Its finger pads lie the profile's ``pad_offset`` ahead of the tool point, as the executor
    assumes."""
    thing = None if thing_base is None else tuple(np.asarray(thing_base) - MOUNT)
    return FakeArm(rate=12.0, gripper_rate=12.0, clock=clock.now, thing=thing,
                   thing_width=width, thing_locked=locked, thing_hold=hold,
                   pad_offset=PROFILE.pad_offset, ceiling=ceiling)


def make(arm_kwargs: dict | None = None, **motion_kwargs: object):
    clock = SimClock()
    base, arm = FakeBase(rate=8.0, clock=clock.now), toy_arm(clock, **(arm_kwargs or {}))
    robot = DirectRobot(base, arm)
    robot.reset_base()
    robot.reset_arm()
    samples: list[Sample] = []
    motion = Motion(robot, PROFILE, clock=clock.now, sleep=clock.sleep,
                    on_sample=samples.append, **motion_kwargs)  # type: ignore[arg-type]
    return Executor(motion), robot, arm, samples


HANDLE = GraspTarget(np.array([0.62, 0.1, 0.75]), np.array([1.0, 0.0, 0.0]),
                     np.array([0.0, 1.0, 0.0]))
DOOR = Articulation("revolute", np.array([0.0, 0.0, 1.0]), np.array([0.64, 0.5, 0.75]))
DRAWER = Articulation("prismatic", np.array([-1.0, 0.0, 0.0]))


def test_move_to_reaches_the_stance_within_speed_limits() -> None:
    ex, robot, _, samples = make()
    out = ex.move_to((1.0, -0.5, 0.8))
    assert out.success and out.code == "REACHED", out
    s = robot.base_state()
    assert abs(s.x - 1.0) < 0.05 and abs(s.y + 0.5) < 0.05 and abs(s.theta - 0.8) < 0.07
    base = [np.asarray(x.commanded[:2]) for x in samples if x.part == "base"]
    steps = [float(np.linalg.norm(b - a)) for a, b in itertools.pairwise(base)]
    assert max(steps) <= PROFILE.max_base_speed * PROFILE.control_period_s + 1e-9


class WalledBase(FakeBase):
    """A base whose way forward ends at ``wall_x`` (odometry x): an opened door in front."""

    def __init__(self, wall_x: float, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.wall_x = wall_x

    def _advance(self) -> None:
        super()._advance()
        if self._pose is not None and self._pose[0] > self.wall_x:
            self._pose[0] = self.wall_x


def _move_into_wall(wall_x: float, goal: tuple[float, float, float]):
    clock = SimClock()
    base = WalledBase(wall_x, rate=8.0, clock=clock.now)
    robot = DirectRobot(base, toy_arm(clock))
    robot.reset_base()
    robot.reset_arm()
    return Executor(Motion(robot, PROFILE, clock=clock.now, sleep=clock.sleep)).move_to(goal)


def test_a_base_at_rest_a_little_short_of_its_stance_is_near_enough_to_work() -> None:
    out = _move_into_wall(0.94, (1.0, 0.0, 0.0))  # 6 cm short, at rest against the door
    assert out.success and out.code == "REACHED", out
    assert "0.06 m short of the stance" in out.message
    assert out.measurements["short_of_goal"] == pytest.approx(0.06, abs=1e-3)
    # farther short is not near enough
    far = _move_into_wall(0.8, (1.0, 0.0, 0.0))
    assert not far.success and far.code == "NOT_REACHED" and "0.20 m" in far.message
    assert PROFILE.base_work_tol == pytest.approx(0.10)


def test_a_blocked_base_holds_and_is_not_reached_without_streaming_the_rest_of_its_path(
) -> None:
    clock = SimClock()
    base = WalledBase(0.3, rate=8.0, clock=clock.now)
    robot = DirectRobot(base, toy_arm(clock))
    robot.reset_base()
    robot.reset_arm()
    samples: list[Sample] = []
    motion = Motion(robot, PROFILE, clock=clock.now, sleep=clock.sleep, on_sample=samples.append)
    out = Executor(motion).move_to((2.0, 0.0, 0.0))
    assert not out.success and out.code == "NOT_REACHED", out
    assert "blocked 1.70 m" in out.message and out.measurements["stalled"] == 1.0
    streamed = [x for x in samples if x.part == "base"]
    full = math.ceil(2.0 / (PROFILE.max_base_speed * PROFILE.control_period_s))
    assert len(streamed) < full  # it stopped streaming once the base stood
    # it stood for base_stall_s with the command running ahead, and then no longer
    at_wall = [x for x in streamed if x.achieved[0] > 0.3 - PROFILE.base_stall_move]
    assert len(at_wall) * PROFILE.control_period_s <= PROFILE.base_stall_s + 0.35
    # holding: the last command sent to the base is where it stands
    assert robot.base_state().x == pytest.approx(0.3)
    held = base._target
    assert held is not None and np.allclose(held, [robot.base_state().x, 0.0, 0.0], atol=1e-6)


def test_a_base_that_keeps_moving_behind_its_command_is_not_blocked() -> None:
    """A slow base trails its command far, but moves: it is no block, only late."""
    clock = SimClock()
    base = FakeBase(rate=1.0, clock=clock.now)  # lags 0.4 m at full speed
    robot = DirectRobot(base, toy_arm(clock))
    robot.reset_base()
    robot.reset_arm()
    motion = Motion(robot, PROFILE, clock=clock.now, sleep=clock.sleep)
    res = motion.drive_base((2.0, 0.0, 1.0))
    assert not res.stalled


@pytest.mark.parametrize("field", ["base_stall_s", "base_stall_move", "base_stall_turn",
                                   "base_stall_lag", "base_stall_yaw_lag"])
def test_base_stall_settings_must_be_positive(field: str) -> None:
    with pytest.raises(ProfileError, match=field):
        RobotProfile(**{field: 0.0})  # type: ignore[arg-type]


def test_open_an_unlocked_door_follows_the_arc() -> None:
    ex, _, arm, samples = make({"thing_base": HANDLE.point})
    out = ex.open(HANDLE, DOOR)
    assert out.success and out.code == "OPENED", out
    assert out.measurements["gripper_closed"] < PROFILE.gripper_closed_empty
    assert out.measurements["path_fraction"] == pytest.approx(1.0)
    hand = [np.asarray(x.commanded[:3]) for x in samples if x.part == "arm"]
    steps = [float(np.linalg.norm(b - a)) for a, b in itertools.pairwise(hand)]
    assert max(steps) <= PROFILE.max_ee_speed * PROFILE.control_period_s + 1e-9
    # the pull swung the handle towards the robot (smaller x) on the hinge circle to its end
    lever = HANDLE.point - DOOR.point
    c, s = np.cos(-PROFILE.door_open_angle), np.sin(-PROFILE.door_open_angle)
    end = DOOR.point + np.array([c * lever[0] - s * lever[1], s * lever[0] + c * lever[1], 0.0])
    assert end[0] < HANDLE.point[0] - 0.2
    assert min(float(np.linalg.norm(h - end)) for h in hand) < 1e-6
    assert not arm.gripped and not ex.holding


def test_open_a_locked_door_is_no_motion() -> None:
    ex, _, _, samples = make({"thing_base": HANDLE.point, "locked": True})
    out = ex.open(HANDLE, DOOR)
    assert not out.success and out.code == "NO_MOTION", out
    # after the stall the pull goes on pressing for stall_press_s: the signals show the door
    # holding the hand back over that many periods, not only over the few that called the stall
    lags = [float(np.linalg.norm(np.subtract(s.commanded[:3], s.achieved[:3])))
            for s in samples if s.part == "arm"]
    pressing = math.ceil(PROFILE.stall_press_s / PROFILE.control_period_s)
    assert sum(lag > PROFILE.stall_lag for lag in lags) >= PROFILE.stall_periods + pressing
    assert out.measurements["stalled"] == 1.0
    assert "did not move" in out.message


def test_a_handle_lost_before_the_pull_stalls_is_a_slip_worth_retrying() -> None:
    # the fingers let go of the locked handle once the command has drawn 3 cm away from it,
    # before the lag reaches stall_lag: a weak grasp looks the same, so not NO_MOTION
    assert PROFILE.stall_lag > 0.03
    ex, _, arm, samples = make({"thing_base": HANDLE.point, "locked": True, "hold": 0.03})
    out = ex.open(HANDLE, DOOR)
    assert not out.success and out.code == "SLIPPED", out
    assert "before the hand was held back" in out.message
    assert out.measurements["stalled"] == 0.0
    assert out.measurements["path_fraction"] < PROFILE.moved_fraction
    # the jaws read empty during the pull, and the hand let the handle go
    closed = PROFILE.gripper_closed_empty
    assert any(s.part == "arm" and s.achieved[-1] >= closed for s in samples)
    assert not arm.gripped
    # a grip that holds to the stall is still NO_MOTION
    ex, _, _, _ = make({"thing_base": HANDLE.point, "locked": True, "hold": 0.5})
    assert ex.open(HANDLE, DOOR).code == "NO_MOTION"


def test_open_a_drawer_pulls_straight_back() -> None:
    ex, _, _, _ = make({"thing_base": HANDLE.point})
    out = ex.open(HANDLE, DRAWER)
    assert out.code == "OPENED", out
    pos, _, _ = ex.motion.hand()
    assert pos[0] < HANDLE.point[0]  # retracted afterwards, behind the handle


def test_grasp_on_nothing_is_a_missed_grasp() -> None:
    ex, _, _, _ = make({"thing_base": np.array([0.5, -0.3, 0.7])})
    out = ex.open(HANDLE, DOOR)
    assert out.code == "MISSED_GRASP" and not out.success
    assert out.measurements["gripper_closed"] >= PROFILE.gripper_closed_empty


def test_a_grasp_whose_hand_cannot_get_there_is_unreachable_not_missed() -> None:
    """A board under the handle holds the hand below its pre-grasp pose: the fingers are never
    closed, and the outcome says the handle is out of reach, not that the grasp missed (a
    missed grasp is worth a fresh look; a hand that cannot get there from here is not)."""
    ceiling = HANDLE.point[2] - 0.1 - MOUNT[2]  # the board, in the arm's base frame
    ex, _, arm, samples = make({"thing_base": HANDLE.point, "ceiling": ceiling})
    out = ex.open(HANDLE, DOOR)
    assert not out.success and out.code == "UNREACHABLE", out
    assert "out of the arm's reach" in out.message and "handle" in out.message
    assert out.measurements["pregrasp_reached"] == 0.0
    assert out.measurements["pregrasp_error"] > PROFILE.ee_pos_tol
    assert "gripper_closed" not in out.measurements
    assert all(s.commanded[-1] == 0.0 for s in samples if s.part == "arm")
    assert not arm.gripped
    grasp = GraspTarget(HANDLE.point, np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0]))
    out = ex.pick(grasp)
    assert out.code == "UNREACHABLE" and "object" in out.message and not ex.holding, out


def test_pick_then_place_and_preconditions() -> None:
    obj = np.array([0.55, 0.0, 0.72])
    ex, _, _, _ = make({"thing_base": obj, "width": 0.6})
    grasp = GraspTarget(obj, np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0]))
    assert ex.place(obj).code == "PRECONDITION_FAILED"
    out = ex.pick(grasp)
    assert out.code == "PICKED" and ex.holding, out
    assert ex.pick(grasp).code == "PRECONDITION_FAILED"
    assert ex.open(HANDLE, DOOR).code == "PRECONDITION_FAILED"
    placed = ex.place(np.array([0.5, 0.2, 0.7]))
    assert placed.code == "PLACED" and not ex.holding, placed


def test_pick_of_nothing_misses() -> None:
    ex, _, _, _ = make()
    grasp = GraspTarget(np.array([0.55, 0.0, 0.72]), np.array([1.0, 0.0, 0.0]),
                        np.array([0.0, 1.0, 0.0]))
    out = ex.pick(grasp)
    assert out.code == "MISSED_GRASP" and not ex.holding


def test_a_look_whose_arm_is_held_back_is_partial() -> None:
    """Three views, the highest above a board the hand cannot pass: the look reports the two
    it reached, as partial; with nothing in the way it is whole; none reached is NO_VIEW."""
    rot = PROFILE.tool_rotation(FORWARD, SIDEWAYS)
    views = [(np.array([0.5, y, z]), rot) for y, z in ((0.0, 0.7), (0.1, 0.75), (0.0, 0.95))]
    ceiling = 0.85 - MOUNT[2]  # the board, in the arm's base frame
    ex, _, _, _ = make()
    seen: list[int] = []
    out = ex.inspect(views, seen.append)
    assert out.success and out.code == "INSPECTED" and seen == [0, 1, 2], out
    ex, _, _, _ = make({"ceiling": ceiling})
    seen = []
    out = ex.inspect(views, seen.append)
    assert out.success and out.code == PARTIAL_LOOK and seen == [0, 1], out
    assert "2 of 3 views" in out.message
    assert out.measurements["views"] == 2 and out.measurements["views_planned"] == 3
    out = ex.inspect(views[2:], seen.append)
    assert not out.success and out.code == "NO_VIEW", out


def test_a_look_takes_one_view_per_group_and_stops_at_the_one_that_saw() -> None:
    """In each group the first view inside the workspace that the arm reaches is taken (one
    beyond the workspace is passed over without moving, one above a board the hand cannot pass
    is not reached); the look stops at the view ``seen`` accepts and retracts; views reached
    without a sight are NOT_SEEN, none reached NO_VIEW, a held object refuses it."""
    rot = PROFILE.tool_rotation(FORWARD, SIDEWAYS)
    far = (np.array([2.5, 0.0, 0.7]), rot)                      # outside the workspace box
    high = (np.array([0.5, 0.0, 0.95]), rot)                   # above the board
    groups = [[far, high, (np.array([0.5, y, 0.75]), rot), (np.array([0.5, y, 0.7]), rot)]
              for y in (-0.1, 0.0, 0.1)]
    ex, _, _, _ = make({"ceiling": 0.85 - MOUNT[2]})  # the board, in the arm's base frame
    assert not PROFILE.in_workspace(far[0]) and PROFILE.in_workspace(high[0])
    hands: list[np.ndarray] = []

    def second() -> bool:
        hands.append(ex.motion.hand()[0])
        return len(hands) == 2

    out = ex.look(groups, second, most=3)
    assert out.success and out.code == "SEEN" and out.measurements["look_views"] == 2, out
    assert [(round(float(h[1]), 2), round(float(h[2]), 2)) for h in hands] == [(-0.1, 0.75),
                                                                              (0.0, 0.75)]
    home = PROFILE.from_arm(np.asarray(PROFILE.retract_pos))
    assert float(np.linalg.norm(ex.motion.hand()[0] - home)) <= PROFILE.ee_pos_tol
    hands.clear()
    out = ex.look(groups, lambda: bool(hands.append(ex.motion.hand()[0])), most=2)
    assert not out.success and out.code == "NOT_SEEN" and len(hands) == 2, out
    out = ex.look([[far, high]], lambda: True, most=3)
    assert not out.success and out.code == "NO_VIEW", out
    ex.holding = True
    out = ex.look(groups, lambda: True, most=3)
    assert not out.success and out.code == "PRECONDITION_FAILED", out


def test_a_retract_the_arm_cannot_follow_folds_an_empty_hand_home() -> None:
    """A board at 0.15 m in the arm's frame lies under the carry pose (0.21 m): the straight way
    back stops at the board. With the hand empty the executor then calls the arm's own retract
    (``reset_arm``, the robot's joint-space route home) and waits for the hand at the carry pose;
    with something held it never does (the reset opens the fingers)."""
    ex, robot, arm, _ = make({"ceiling": 0.15})
    resets: list[float] = []
    reset_arm = robot.reset_arm

    def counted_reset() -> None:
        resets.append(float(arm.get_state()[c.KEY_GRIPPER_POS][0]))
        reset_arm()

    robot.reset_arm = counted_reset  # type: ignore[method-assign]
    low = np.array([0.5, 0.0, MOUNT[2] + 0.05])
    rot = PROFILE.tool_rotation(FORWARD, SIDEWAYS)
    look = ex.inspect([(low, rot)], lambda _view: None)
    assert look.code == "INSPECTED" and look.measurements["arm_folds"] == 1.0, look
    assert resets == [pytest.approx(0.0, abs=0.05)]  # the fingers were open when it folded
    home = PROFILE.from_arm(np.asarray(PROFILE.retract_pos))
    assert float(np.linalg.norm(ex.motion.hand()[0] - home)) <= PROFILE.ee_pos_tol
    free, _, _, _ = make()  # no board: the straight way back gets there, nothing folds
    assert "arm_folds" not in free.inspect([(low, rot)], lambda _view: None).measurements
    resets.clear()

    assert ex.motion.move_hand(low, rot).reached
    ex.holding = True
    out = ex.retract()
    assert not out.reached and out.error > PROFILE.ee_pos_tol and not resets, out


def test_a_free_move_gives_up_on_a_hand_that_stands_short_but_waits_for_one_that_comes() -> None:
    """A board holds the hand 0.15 m under its goal: once the path is sent, the move ends
    ``stuck_s`` after the hand stopped getting closer, not after the whole settle time. A hand
    that trails its path but keeps coming (a slow arm) is waited for and arrives."""
    goal = np.array([0.5, 0.0, MOUNT[2] + 0.5])
    rot = PROFILE.tool_rotation(FORWARD, SIDEWAYS)
    path_s = float(np.linalg.norm(PROFILE.to_arm(goal) - np.asarray(PROFILE.retract_pos))
                   ) / PROFILE.max_ee_speed
    def motion_with(arm: FakeArm, clock: SimClock) -> Motion:
        robot = DirectRobot(FakeBase(rate=8.0, clock=clock.now), arm)
        robot.reset_base()
        robot.reset_arm()
        return Motion(robot, PROFILE, clock=clock.now, sleep=clock.sleep)

    clock = SimClock()
    result = motion_with(toy_arm(clock, ceiling=0.35), clock).reach(goal, rot)
    assert not result.reached and result.error == pytest.approx(0.15, abs=0.01), result
    assert path_s < clock.t < path_s + PROFILE.stuck_s + 0.5
    assert clock.t < path_s + PROFILE.settle_timeout_s  # the full wait would be twice that

    clock = SimClock()
    slow = FakeArm(rate=0.8, gripper_rate=12.0, clock=clock.now, pad_offset=PROFILE.pad_offset)
    assert motion_with(slow, clock).reach(goal, rot).reached
    assert clock.t > path_s + PROFILE.stuck_s  # it trailed its path well beyond stuck_s


def test_target_outside_the_workspace_sends_nothing() -> None:
    ex, _, arm, samples = make()
    before = arm.get_state()
    ex.holding = True
    out = ex.place(np.array([3.0, 0.0, 0.7]))
    assert out.code == "OUTSIDE_WORKSPACE" and not out.success
    assert not [s for s in samples if s.part == "arm"]
    after = arm.get_state()
    assert np.allclose(before["arm_pos"], after["arm_pos"], atol=1e-3)


def test_cancel_holds_the_pose_and_keeps_the_grip() -> None:
    cancel = threading.Event()
    obj = np.array([0.55, 0.0, 0.72])
    ex, robot, _, samples = make({"thing_base": obj, "width": 0.6}, cancel=cancel)
    grasp = GraspTarget(obj, np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0]))
    assert ex.pick(grasp).code == "PICKED"
    count = len(samples)

    def stop_soon(s: Sample) -> None:
        samples.append(s)
        if len(samples) > count + 5:
            cancel.set()

    ex.motion._on_sample = stop_soon
    out = ex.move_to((2.0, 0.0, 0.0))
    assert out.code == "CANCELED" and not out.success
    assert ex.motion.gripper_command == 1.0  # never opened while holding
    x = robot.base_state().x
    assert 0.0 < x < 1.5  # stopped part way


class LostArm(FakeArm):
    def get_state(self):  # type: ignore[override]
        raise RobotLinkLostError("arm: connection lost during get_state()")


def test_lost_link_fails_the_primitive_with_a_typed_code() -> None:
    clock = SimClock()
    robot = DirectRobot(FakeBase(clock=clock.now), LostArm(clock=clock.now))
    robot.reset_base()
    robot.reset_arm()
    ex = Executor(Motion(robot, PROFILE, clock=clock.now, sleep=clock.sleep))
    out = ex.pick(HANDLE)
    assert out.code == "LINK_LOST" and "lost" in out.message


def test_direct_robot_checks_like_the_link() -> None:
    clock = SimClock()
    robot = DirectRobot(FakeBase(clock=clock.now), FakeArm(clock=clock.now))
    with pytest.raises(RobotNotResetError):
        robot.send_base_pose(0.0, 0.0, 0.0)
    robot.reset_arm()
    with pytest.raises(RobotTargetRefusedError):
        robot.send_arm([0.1, 0.0, float("nan")], [0, 0, 0, 1], 0.0)
    with pytest.raises(RobotTargetRefusedError):
        robot.send_arm([0.1, 0.0, 0.2], [0, 0, 0, 1], 1.5)


@pytest.mark.parametrize("bad", [
    {"control_period_s": 0.0}, {"max_ee_speed": float("nan")}, {"workspace_min": (1, 1, 1)},
    {"finger_axis": "z"}, {"moved_fraction": 0.9}, {"retract_pos": (5.0, 0.0, 0.0)},
    {"min_wrist_reach": 0.0}, {"max_pull_shift": -0.1}, {"wrist_setback": float("nan")},
    {"base_work_tol": 0.0}, {"base_work_tol": 0.02},  # below base_pos_tol
])
def test_bad_profiles_are_refused(bad: dict) -> None:
    with pytest.raises(ProfileError):
        RobotProfile(**bad)


def test_bad_geometry_is_refused() -> None:
    with pytest.raises(ValueError):
        GraspTarget(np.array([0.5, 0.0, np.inf]), np.ones(3), np.ones(3))
    with pytest.raises(ValueError):
        Articulation("screw", np.ones(3))
    ex, _, _, _ = make({"thing_base": HANDLE.point})
    hinge_on_handle = Articulation("revolute", np.array([0.0, 0.0, 1.0]), HANDLE.point)
    out = ex.open(HANDLE, hinge_on_handle)
    assert out.code == "EXECUTION_FAILED" and "hinge" in out.message


def _low_door(x: float) -> tuple[GraspTarget, Articulation]:
    """A lower cabinet's handle at shoulder height ``x`` ahead of the base, hinged 0.5 m to
    the left (as the kitchen's lower cabinets are)."""
    z = MOUNT[2] + PROFILE.shoulder_height
    handle = GraspTarget(np.array([x, -0.2, z]), np.array([1.0, 0.0, 0.0]),
                         np.array([0.0, 1.0, 0.0]))
    return handle, Articulation("revolute", np.array([0.0, 0.0, 1.0]), np.array([x, 0.3, z]))


def _pull_from(ex: Executor, handle: GraspTarget, art: Articulation,
               stance: tuple[float, float, float]) -> list[tuple[np.ndarray, np.ndarray]]:
    """The pregrasp, grasp and pull of ``handle`` as seen from ``stance`` (base_link)."""
    c, s = math.cos(stance[2]), math.sin(stance[2])
    turn = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    origin = np.array([stance[0], stance[1], 0.0])
    return [(turn.T @ (p - origin), turn.T @ r) for p, r in ex._open_path(handle, art)]


def test_a_door_above_the_shoulder_opens_from_where_the_robot_stands() -> None:
    ex, _, _, _ = make()
    high = GraspTarget(np.array([0.62, 0.1, 1.13]), np.array([1.0, 0.0, 0.0]),
                       np.array([0.0, 1.0, 0.0]))
    hinge = Articulation("revolute", np.array([0.0, 0.0, 1.0]), np.array([0.62, 0.6, 1.13]))
    assert ex.in_reach_to_open(high, hinge)


def test_a_low_door_is_pulled_from_further_back_square_to_its_handle() -> None:
    """At shoulder height the pull brings the wrist to the shoulder: from here the elbow would
    meet its limit part way (as the lower cabinets did in the simulation), so the robot steps
    back in front of the handle to where the whole pull stays in reach."""
    ex, _, _, _ = make()
    handle, door = _low_door(0.63)
    assert not ex.in_reach(_pull_from(ex, handle, door, (0.0, 0.0, 0.0)))
    assert not ex.in_reach_to_open(handle, door)
    stance = ex.pull_stance(handle, door)
    assert stance is not None
    x, y, yaw = stance
    assert x < 0.0 and y == pytest.approx(-0.2) and yaw == pytest.approx(0.0)
    assert math.hypot(x, y) <= PROFILE.max_pull_shift
    assert ex.in_reach(_pull_from(ex, handle, door, stance))
    # the nearest such stance: one path step nearer the handle is out of reach again
    assert not ex.in_reach(_pull_from(ex, handle, door, (x + PROFILE.path_step, y, yaw)))


def test_no_stance_is_offered_beyond_the_shift_allowed_or_for_a_handle_taken_from_above(
) -> None:
    ex, _, _, _ = make()
    handle, door = _low_door(0.15)  # the handle over the base: too far to step back for
    assert not ex.in_reach(_pull_from(ex, handle, door, (0.0, 0.0, 0.0)))
    assert ex.pull_stance(handle, door) is None
    down = GraspTarget(np.array([0.4, 0.0, 0.5]), np.array([0.0, 0.0, -1.0]),
                       np.array([0.0, 1.0, 0.0]))
    drawer = Articulation("prismatic", np.array([-1.0, 0.0, 0.0]))
    assert not ex.in_reach(_pull_from(ex, down, drawer, (0.0, 0.0, 0.0)))
    assert ex.pull_stance(down, drawer) is None


def test_a_grasp_and_its_hinge_move_with_the_base() -> None:
    """Carried into the frame of a base that stepped 0.3 m back and turned 0.1 rad, the
    handle and hinge stay where they are in the world."""
    from mimir.transforms import planar_pose

    odom_from_before, odom_from_after = planar_pose(0.0, 0.0, 0.0), planar_pose(-0.3, 0.05, 0.1)
    after_from_before = np.linalg.inv(odom_from_after) @ odom_from_before
    grasp, door = HANDLE.moved(after_from_before), DOOR.moved(after_from_before)
    for here, there in ((grasp.point, HANDLE.point), (door.point, DOOR.point)):
        np.testing.assert_allclose(odom_from_after[:3, :3] @ here + odom_from_after[:3, 3],
                                   there, atol=1e-12)
    np.testing.assert_allclose(odom_from_after[:3, :3] @ grasp.approach, HANDLE.approach,
                               atol=1e-12)
    np.testing.assert_allclose(door.axis, DOOR.axis, atol=1e-12)  # vertical stays vertical
    assert door.kind == "revolute" and door.bottom == DOOR.bottom
    low = Articulation("revolute", np.array([0.0, 0.0, 1.0]), np.zeros(3), 0.4)
    assert low.moved(after_from_before).bottom == pytest.approx(0.4)
