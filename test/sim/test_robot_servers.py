"""The simulated TidyBot++ RPC servers: contract in-process, over RPC, and refused actions."""

from __future__ import annotations

import math
import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import mujoco
import numpy as np
import pytest
from scene_helpers import kitchen_sim
from scipy.spatial.transform import Rotation, Slerp

from mimir_robot import contract as c
from mimir_robot.rpc import (
    Backoff,
    BaseRpcManager,
    RobotAuthError,
    RobotLink,
    RobotUnreachableError,
    parse_arm_state,
)
from mimir_sim.robot import BASE_JOINTS, HOME_ARM, READY_ARM
from mimir_sim.robot_servers import (
    ActionRefusedError,
    ArmSettings,
    BaseSettings,
    ControllerNotResetError,
    ControllerSupersededError,
    SimArm,
    SimBase,
    SimRobotDrives,
    SimRobotServers,
)
from mimir_sim.sim import KitchenSim
from mimir_sim.sim_thread import SimThread

PERIOD = c.CONTROL_PERIOD_S
START = (-0.3, 0.2, 0.8)  # free floor, away from the world origin and turned


@pytest.fixture
def sim(tidybot_dir: Path) -> Iterator[KitchenSim]:
    with kitchen_sim(tidybot_dir, START) as s:
        yield s


def _stream(drives: SimRobotDrives, ctl: SimBase | SimArm, action: dict[str, np.ndarray],
            seconds: float) -> None:
    """Send ``action`` every control period while the simulation advances ``seconds``."""
    for _ in range(round(seconds / PERIOD)):
        ctl.execute_action(action)
        drives.advance(PERIOD)


def _arm_action(pos: np.ndarray, quat: np.ndarray, grip: float) -> dict[str, np.ndarray]:
    return {c.KEY_ARM_POS: pos, c.KEY_ARM_QUAT: quat, c.KEY_GRIPPER_POS: np.array([grip])}


# --------------------------------------------------------------------------------- base contract


def test_base_odometry_origin_tracking_and_short_turn(sim: KitchenSim) -> None:
    drives = SimRobotDrives(sim)
    base = drives.new_base()
    with pytest.raises(ControllerNotResetError):
        base.get_state()
    with pytest.raises(ControllerNotResetError):
        base.execute_action({c.KEY_BASE_POSE: np.zeros(3)})

    base.reset()
    assert np.allclose(base.get_state()[c.KEY_BASE_POSE], 0.0, atol=1e-9)
    x0, y0, th0 = sim.base_pose()
    assert math.hypot(x0, y0) > 0.3 and abs(th0 - START[2]) < 1e-3

    # the target's heading is a full turn past -0.4 rad: the base turns the short way
    target = np.array([-0.25, 0.15, 2.0 * math.pi - 0.4])
    speeds: list[float] = []
    last = np.zeros(3)
    for _ in range(round(4.0 / PERIOD)):
        base.execute_action({c.KEY_BASE_POSE: target, c.KEY_ARM_POS: np.zeros(3)})
        drives.advance(PERIOD)
        now = base.get_state()[c.KEY_BASE_POSE]
        speeds.append(float(np.max(np.abs(now[:2] - last[:2]))) / PERIOD)
        last = now
    odom = base.get_state()[c.KEY_BASE_POSE]
    assert set(base.get_state()) == c.BASE_STATE_KEYS
    assert np.allclose(odom[:2], target[:2], atol=0.03), odom
    assert odom[2] == pytest.approx(-0.4, abs=0.05)
    assert max(speeds) <= 0.5 * 1.1  # the velocity limit of each axis
    # odometry is expressed in the frame of the base at reset
    x, y, th = sim.base_pose()
    rot = np.array([[math.cos(th0), -math.sin(th0)], [math.sin(th0), math.cos(th0)]])
    assert np.allclose(np.array([x, y]), np.array([x0, y0]) + rot @ odom[:2], atol=1e-6)
    assert math.remainder(th - th0 - odom[2], 2 * math.pi) == pytest.approx(0.0, abs=1e-6)

    assert drives.base.trips == 0  # speeding up, cruising and braking are no overload

    # close: control stops and the base holds where it is
    base.close()
    with pytest.raises(ControllerNotResetError):
        base.execute_action({c.KEY_BASE_POSE: np.zeros(3)})
    drives.advance(1.0)
    assert np.allclose(base.get_state()[c.KEY_BASE_POSE], odom, atol=0.01)
    assert drives.closed[c.BASE_TYPEID] == 1


def test_a_base_driven_into_the_counters_stops_instead_of_pushing(sim: KitchenSim) -> None:
    """The back counters stand across the path: the drive trips, the physics holds, and the
    base drives away again on the next command."""
    drives = SimRobotDrives(sim)
    base = drives.new_base()
    base.reset()
    x0, y0, th0 = sim.base_pose()
    through = sim.scene.scenario.kitchen.wall_x + 0.5  # world x beyond the back wall
    d = np.array([through - x0, 0.0])
    rot = np.array([[math.cos(th0), math.sin(th0)], [-math.sin(th0), math.cos(th0)]])
    target = np.array([*(rot @ d), 0.0])  # the same point in the odometry frame
    _stream(drives, base, {c.KEY_BASE_POSE: target}, 8.0)
    assert drives.base.trips > 0
    x, y, _ = sim.base_pose()
    assert x < sim.scene.scenario.kitchen.wall_x - sim.scene.scenario.kitchen.counter_depth
    assert abs(y - y0) < 0.1  # pushed straight, not spun or thrown aside
    speed = np.abs(sim.data.qvel[[sim.model.joint(n).dofadr[0] for n in BASE_JOINTS]])
    assert np.all(speed < 0.05)  # at rest against the counter, not shaking
    _stream(drives, base, {c.KEY_BASE_POSE: np.zeros(3)}, 8.0)
    assert np.allclose(base.get_state()[c.KEY_BASE_POSE], 0.0, atol=0.01)


@pytest.mark.parametrize("field, value", [
    ("trip_force", (3000.0, 0.0, 600.0)), ("trip_force", (3000.0, 3000.0)),
    ("trip_force", (math.inf, 3000.0, 600.0)), ("max_vel", (0.5, -0.5, 1.0)),
])
def test_bad_base_settings_are_refused(field: str, value: tuple[float, ...]) -> None:
    with pytest.raises(ValueError, match=field):
        BaseSettings(**{field: value})  # type: ignore[arg-type]


def test_base_holds_when_the_stream_stops(sim: KitchenSim) -> None:
    drives = SimRobotDrives(sim)
    base = drives.new_base()
    base.reset()
    base.execute_action({c.KEY_BASE_POSE: np.array([-0.6, 0.0, 0.0])})  # once, then silence
    drives.advance(3.0)
    odom = base.get_state()[c.KEY_BASE_POSE]
    assert -0.05 < odom[0] < -0.001  # started, then braked after 2.5 control periods


def test_simulator_reset_stops_the_base(sim: KitchenSim) -> None:
    drives = SimRobotDrives(sim)
    base = drives.new_base()
    base.reset()
    _stream(drives, base, {c.KEY_BASE_POSE: np.array([-0.2, 0.0, 0.0])}, 0.5)
    sim.reset(START)
    with pytest.raises(ControllerNotResetError):
        base.get_state()
    base.reset()
    assert np.allclose(base.get_state()[c.KEY_BASE_POSE], 0.0, atol=1e-9)


# ---------------------------------------------------------------------------------- arm contract


def test_arm_tracking_gripper_unreachable_and_reset(sim: KitchenSim) -> None:
    drives = SimRobotDrives(sim)
    arm = drives.new_arm()
    state = arm.get_state()  # readable before reset, like upstream
    assert set(state) == c.ARM_STATE_KEYS
    with pytest.raises(ControllerNotResetError):
        arm.execute_action(_arm_action(state[c.KEY_ARM_POS], state[c.KEY_ARM_QUAT], 0.0))

    arm.reset()
    drives.advance(0.2)
    start = parse_arm_state(arm.get_state())
    # the retract pose: in front of the arm base, tool pointing down, gripper open
    assert np.allclose(start.pos, (0.13, 0.0, 0.21), atol=0.02)
    assert start.gripper < 0.05

    pos0 = np.array(start.pos)
    quat0 = np.array(start.quat)
    goal = pos0 + np.array([0.10, 0.0, 0.0])
    _stream(drives, arm, _arm_action(goal, quat0, 1.0), 2.5)
    reached = arm.get_state()
    assert set(reached) == c.ARM_STATE_KEYS
    assert float(np.linalg.norm(reached[c.KEY_ARM_POS] - goal)) < 0.01
    assert abs(float(np.dot(reached[c.KEY_ARM_QUAT], quat0))) > 0.999
    assert reached[c.KEY_GRIPPER_POS].shape == (1,)
    assert reached[c.KEY_GRIPPER_POS][0] > 0.95  # closed on nothing
    parse_arm_state(reached)

    _stream(drives, arm, _arm_action(goal, quat0, 0.0), 1.5)
    assert arm.get_state()[c.KEY_GRIPPER_POS][0] < 0.05

    # a target 2 m away: IK misses, the arm keeps its pose and the miss is counted
    before = arm.get_state()[c.KEY_ARM_POS]
    _stream(drives, arm, _arm_action(np.array([2.0, 0.0, 0.2]), quat0, 0.0), 1.0)
    assert arm.ik_misses() >= 10
    assert float(np.linalg.norm(arm.get_state()[c.KEY_ARM_POS] - before)) < 0.005

    # reset with the gripper closed and the arm out: it opens and retracts
    _stream(drives, arm, _arm_action(goal, quat0, 1.0), 1.0)
    arm.reset()
    drives.advance(3.0)
    assert np.allclose(sim.body.arm_q(), HOME_ARM, atol=0.02)
    assert np.allclose(arm.get_state()[c.KEY_ARM_POS], pos0, atol=0.005)
    assert arm.get_state()[c.KEY_GRIPPER_POS][0] < 0.05


def _ready_arm(sim: KitchenSim) -> tuple[SimRobotDrives, SimArm]:
    """Drives with the arm reset and held at the ready pose (hand out in front)."""
    sim.body.place(sim.base_pose(), READY_ARM)
    mujoco.mj_forward(sim.model, sim.data)
    drives = SimRobotDrives(sim)
    arm = drives.new_arm()
    arm.reset()
    here = parse_arm_state(arm.get_state())
    _stream(drives, arm, _arm_action(np.array(here.pos), np.array(here.quat), 0.0), 0.5)
    return drives, arm


def _hand_at(sim: KitchenSim, drives: SimRobotDrives,
             q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pinch-site position and xyzw quaternion in the arm base frame with the arm at ``q``."""
    scratch = mujoco.MjData(sim.model)
    scratch.qpos[:] = sim.data.qpos
    scratch.qpos[sim.body.arm_qadr] = q
    mujoco.mj_kinematics(sim.model, scratch)
    base_pos, base_rot = drives.arm.arm_base_pose()
    pos = base_rot.T @ (scratch.site_xpos[sim.body.site] - base_pos)
    rot = base_rot.T @ scratch.site_xmat[sim.body.site].reshape(3, 3)
    return pos, Rotation.from_matrix(rot).as_quat()


def test_a_target_on_the_far_side_is_refused_in_one_jump_and_reached_along_a_line(
        sim: KitchenSim) -> None:
    """The hand 0.85 m round to the side: every IK seed finds joints for it, but driving the
    joints there would sweep the hand 0.2 m wide of the line, so a single target is refused
    (the arm holds); the same goal streamed along the line, as the executor sends it, is met."""
    drives, arm = _ready_arm(sim)
    far = np.array(READY_ARM)
    far[0] += 2.0  # the shoulder turned: the hand swings round the arm base
    goal, goal_quat = _hand_at(sim, drives, far)
    assert drives.arm.sweep(far) > 2 * ArmSettings().max_sweep_m
    start = parse_arm_state(arm.get_state())
    before = np.array(start.pos)
    assert float(np.linalg.norm(goal - before)) > 0.8

    _stream(drives, arm, _arm_action(goal, goal_quat, 0.0), 1.0)
    assert drives.arm.swings_refused == round(1.0 / PERIOD)
    assert arm.ik_misses() == drives.arm.swings_refused  # a refused swing is a miss as well
    assert float(np.linalg.norm(arm.get_state()[c.KEY_ARM_POS] - before)) < 0.005

    turn = Slerp([0.0, 1.0], Rotation.from_quat([start.quat, goal_quat]))
    steps = 60
    for i in range(1, steps + 1):
        f = i / steps
        arm.execute_action(_arm_action(before + f * (goal - before), turn([f]).as_quat()[0], 0.0))
        drives.advance(PERIOD)
    _stream(drives, arm, _arm_action(goal, goal_quat, 0.0), 2.0)
    assert float(np.linalg.norm(arm.get_state()[c.KEY_ARM_POS] - goal)) < 0.01
    assert drives.arm.swings_refused == round(1.0 / PERIOD)  # no step of the line was refused


def test_a_large_turn_of_the_wrist_in_place_is_no_swing(sim: KitchenSim) -> None:
    """Rolling the hand 1.2 rad about its own axis moves the last joint that far but leaves the
    pinch point where it is: it is taken at once, not judged by the size of the joint move."""
    drives, arm = _ready_arm(sim)
    rolled = np.array(sim.body.arm_q())
    rolled[6] += 1.2
    assert drives.arm.sweep(rolled) < 1e-6
    goal, goal_quat = _hand_at(sim, drives, rolled)
    _stream(drives, arm, _arm_action(goal, goal_quat, 0.0), 2.0)
    reached = parse_arm_state(arm.get_state())
    assert drives.arm.swings_refused == 0 and arm.ik_misses() == 0
    assert float(np.linalg.norm(np.array(reached.pos) - goal)) < 0.01
    assert abs(float(np.dot(reached.quat, goal_quat))) > 0.999


def test_hand_positions_of_joint_rows_leave_the_simulation_alone(sim: KitchenSim) -> None:
    """Forward kinematics of the sweep check: the current joints give the hand where it is, and
    neither a good nor a malformed call moves anything in the simulation."""
    here = np.array(sim.body.arm_q())
    qpos = sim.data.qpos.copy()
    hands = sim.control.site_positions(np.stack([here, np.array(READY_ARM)]))
    assert np.allclose(hands[0], sim.body.site_pose()[0], atol=1e-9)
    assert float(np.linalg.norm(hands[1] - hands[0])) > 0.3
    for bad in (np.zeros((2, 6)), np.zeros(7), np.zeros((1, 2, 7))):
        with pytest.raises(ValueError, match="arm_qs"):
            sim.control.site_positions(bad)
    assert np.array_equal(sim.data.qpos, qpos)


def test_the_sweep_limit_must_be_a_positive_distance() -> None:
    for bad in (0.0, -0.1, math.inf, math.nan):
        with pytest.raises(ValueError, match="max_sweep_m"):
            ArmSettings(max_sweep_m=bad)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda a: {**a, c.KEY_ARM_POS: np.array([np.nan, 0.0, 0.2])}, "non-finite"),
        (lambda a: {**a, c.KEY_ARM_POS: np.zeros(4)}, "shape"),
        (lambda a: {**a, c.KEY_ARM_QUAT: np.zeros(4)}, "zero"),
        (lambda a: {**a, c.KEY_ARM_QUAT: np.ones(3)}, "shape"),
        (lambda a: {**a, c.KEY_GRIPPER_POS: np.array([1.5])}, "outside"),
        (lambda a: {**a, c.KEY_GRIPPER_POS: "closed"}, "numeric"),
        (lambda a: {k: v for k, v in a.items() if k != c.KEY_ARM_QUAT}, "arm_quat"),
        (lambda a: [1, 2, 3], "dict"),
    ],
)
def test_bad_arm_actions_change_nothing(sim: KitchenSim, make, match) -> None:  # type: ignore[no-untyped-def]
    drives = SimRobotDrives(sim)
    arm = drives.new_arm()
    arm.reset()
    state = arm.get_state()
    good = _arm_action(state[c.KEY_ARM_POS], state[c.KEY_ARM_QUAT], 0.0)
    ctrl = np.array(sim.data.ctrl)
    target = drives.arm.profile.target.copy()
    with pytest.raises(ActionRefusedError, match=match):
        arm.execute_action(make(good))
    assert np.array_equal(sim.data.ctrl, ctrl)
    assert np.array_equal(drives.arm.profile.target, target)


@pytest.mark.parametrize(
    ("pose", "match"),
    [
        (np.array([0.1, math.nan, 0.0]), "non-finite"),
        (np.array([0.1, math.inf, 0.0]), "non-finite"),
        (np.zeros(2), "shape"),
        (np.zeros((1, 3)), "shape"),
        (None, "numeric|shape"),
    ],
)
def test_bad_base_actions_change_nothing(sim: KitchenSim, pose: object, match: str) -> None:
    drives = SimRobotDrives(sim)
    base = drives.new_base()
    base.reset()
    _stream(drives, base, {c.KEY_BASE_POSE: np.array([-0.1, 0.0, 0.0])}, 0.3)
    ctrl = np.array(sim.data.ctrl)
    target = drives.base.profile.target.copy()
    with pytest.raises(ActionRefusedError, match=match):
        base.execute_action({c.KEY_BASE_POSE: pose})
    with pytest.raises(ActionRefusedError, match="base_pose"):
        base.execute_action({"pose": np.zeros(3)})
    assert np.array_equal(sim.data.ctrl, ctrl)
    assert np.array_equal(drives.base.profile.target, target)


def test_newer_controller_supersedes_older(sim: KitchenSim) -> None:
    drives = SimRobotDrives(sim)
    old = drives.new_base()
    old.reset()
    new = drives.new_base()
    assert old.superseded() and not new.superseded()
    for call in (old.reset, old.get_state, lambda: old.execute_action(
            {c.KEY_BASE_POSE: np.zeros(3)})):
        with pytest.raises(ControllerSupersededError, match="superseded"):
            call()
    new.reset()
    old.close()  # does not stop the newer controller
    new.execute_action({c.KEY_BASE_POSE: np.array([-0.1, 0.0, 0.0])})
    old_arm, new_arm = drives.new_arm(), drives.new_arm()
    with pytest.raises(ControllerSupersededError):
        old_arm.get_state()
    new_arm.get_state()
    assert drives.created == {c.BASE_TYPEID: 2, c.ARM_TYPEID: 2}
    assert drives.closed[c.BASE_TYPEID] == 1


# ------------------------------------------------------------------------------------------ RPC


@pytest.fixture
def hosted(sim: KitchenSim) -> Iterator[tuple[SimRobotServers, bytes]]:
    thread = SimThread(sim, 0.02, 1.0, setup=lambda: None, on_failure=lambda _err: False)
    sim.add_step_listener(thread.pace, 0.02)
    authkey = b"mimir-sim-" + secrets.token_hex(8).encode()
    servers = SimRobotServers(sim, thread.lock, authkey, base_port=0, arm_port=0)
    thread.start()
    try:
        yield servers, authkey
    finally:
        servers.stop()
        thread.stop()


def _link(servers: SimRobotServers, authkey: bytes) -> RobotLink:
    return RobotLink("127.0.0.1", authkey, base_port=servers.base_address[1],
                     arm_port=servers.arm_address[1], connect_timeout_s=2.0,
                     call_timeout_s=1.0, backoff=Backoff(initial_s=0.05, max_s=0.2))


def test_a_wrong_key_is_refused_at_the_handshake(
    hosted: tuple[SimRobotServers, bytes],
) -> None:
    servers, _ = hosted
    # the generous limits only keep a loaded machine from turning the refusal into a timeout
    bad = RobotLink("127.0.0.1", b"wrong-key", base_port=servers.base_address[1],
                    arm_port=servers.arm_address[1], connect_timeout_s=15.0,
                    backoff=Backoff(initial_s=0.05, max_s=0.1))
    with pytest.raises(RobotAuthError):
        bad.connect(timeout_s=15.0)
    assert not any(servers.created.values())  # no controller was built for it


def test_drive_the_simulated_robot_over_rpc(
    hosted: tuple[SimRobotServers, bytes],
) -> None:
    servers, authkey = hosted
    link = _link(servers, authkey)
    link.connect(timeout_s=5.0)
    assert servers.created == {c.BASE_TYPEID: 1, c.ARM_TYPEID: 1}
    link.reset_base()
    link.reset_arm()
    odom = link.base_state()
    assert (odom.x, odom.y, odom.theta) == pytest.approx((0.0, 0.0, 0.0), abs=0.005)
    arm = link.arm_state()
    assert arm.gripper < 0.05 and np.allclose(arm.pos, (0.13, 0.0, 0.21), atol=0.02)

    deadline = time.monotonic() + 2.8
    while time.monotonic() < deadline:
        link.send_base_pose(-0.2, 0.1, 0.3)
        link.send_arm(arm.pos, arm.quat, 0.0)
        time.sleep(PERIOD)
    odom = link.base_state()
    assert (odom.x, odom.y, odom.theta) == pytest.approx((-0.2, 0.1, 0.3), abs=0.03)

    # a reconnect builds exactly one new controller of each kind, which supersedes the old ones
    raw = BaseRpcManager(address=servers.base_address, authkey=authkey)
    raw.connect()
    old = raw.Base()  # type: ignore[attr-defined]
    old.reset()
    link.close(stop_control=False)
    before = servers.created
    again = _link(servers, authkey)
    again.connect(timeout_s=5.0)
    after = servers.created
    assert after == {k: v + 1 for k, v in before.items()}
    with pytest.raises(Exception, match="superseded"):
        old.get_state()
    again.reset_base()
    assert again.base_state().x == pytest.approx(0.0, abs=1e-6)
    again.close()
    del old

    servers.stop()
    assert not servers.running
    gone = _link(servers, authkey)
    with pytest.raises(RobotUnreachableError):
        gone.connect(timeout_s=0.5)
