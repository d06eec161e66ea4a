"""Contract tests: our fakes and our client behave like the TidyBot++ servers and their controllers.

Upstream facts checked here: typeids ``Base`` / ``Arm`` on manager servers; each typeid call builds
a new controller; ``Base.reset()`` zeroes odometry; ``Arm.reset()`` opens the gripper and retracts;
targets streamed at the control period are tracked; states carry exactly the upstream keys.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import pytest
from robot_helpers import FakeServers, wait_for

from mimir_robot import contract as c
from mimir_robot.fakes import RETRACT_POS, RETRACT_QUAT
from mimir_robot.rpc import (
    ArmRpcManager,
    ArmState,
    BaseRpcManager,
    RobotLink,
    RobotNotResetError,
    RobotStateError,
    RobotTargetRefusedError,
    arm_action,
    base_action,
    parse_arm_state,
    parse_base_state,
)

Robot = tuple[RobotLink, Any, Any]


# --- the raw server interface, as an upstream client sees it --------------------------------------
def test_raw_proxies_report_exactly_the_upstream_keys(servers: FakeServers) -> None:
    base_addr, _ = servers.start("Base")
    arm_addr, _ = servers.start("Arm")
    bm = BaseRpcManager(address=base_addr, authkey=servers.authkey)
    bm.connect()
    am = ArmRpcManager(address=arm_addr, authkey=servers.authkey)
    am.connect()
    base = bm.Base(max_vel=(0.5, 0.5, 1.57), max_accel=(0.5, 0.5, 1.57))  # type: ignore[attr-defined]
    arm = am.Arm()  # type: ignore[attr-defined]
    base.reset()
    arm.reset()
    base.execute_action({"base_pose": np.array([0.1, 0.0, 0.0])})
    arm.execute_action({"arm_pos": np.array([0.4, 0.0, 0.3]),
                        "arm_quat": np.array([0.0, 0.0, 0.0, -1.0]),  # w < 0 on purpose
                        "gripper_pos": np.zeros(1)})
    time.sleep(0.2)
    bs = base.get_state()
    arm_s = arm.get_state()
    assert set(bs) == {"base_pose"} == set(c.BASE_STATE_KEYS)
    assert np.shape(bs["base_pose"]) == (3,)
    assert set(arm_s) == {"arm_pos", "arm_quat", "gripper_pos"} == set(c.ARM_STATE_KEYS)
    assert np.shape(arm_s["arm_pos"]) == (3,)
    assert np.shape(arm_s["arm_quat"]) == (4,)
    assert np.shape(arm_s["gripper_pos"]) == (1,)
    assert arm_s["arm_quat"][3] >= 0.0
    base.close()
    arm.close()


def test_each_typeid_call_builds_a_new_controller(servers: FakeServers) -> None:
    base_addr, _ = servers.start("Base")
    control = servers.control(base_addr)
    bm = BaseRpcManager(address=base_addr, authkey=servers.authkey)
    bm.connect()
    assert control.counts()["Base"] == 0
    first = bm.Base()  # type: ignore[attr-defined]
    second = bm.Base()  # type: ignore[attr-defined]
    assert control.counts()["Base"] == 2
    first.reset()
    first.execute_action({"base_pose": np.array([1.0, 0.0, 0.0])})
    second.reset()
    time.sleep(0.2)
    assert second.get_state()["base_pose"][0] == 0.0  # separate controllers, separate odometry
    assert first.get_state()["base_pose"][0] > 0.0


# --- the client -----------------------------------------------------------------------------------
def test_link_builds_one_controller_per_server_over_many_calls(robot: Robot) -> None:
    link, base_ctl, arm_ctl = robot
    link.reset_base()
    link.reset_arm()
    for i in range(20):
        link.send_base_pose(0.01 * i, 0.0, 0.0)
        link.send_arm([0.4, 0.0, 0.3], [0.0, 0.0, 0.0, 1.0], 0.0)
        link.base_state()
        link.arm_state()
    assert base_ctl.counts() == {"Base": 1, "Arm": 0}
    assert arm_ctl.counts() == {"Base": 0, "Arm": 1}
    assert link.connected
    assert link.reconnects == 0


def test_close_stops_both_controllers_once(robot: Robot) -> None:
    link, base_ctl, arm_ctl = robot
    link.reset_base()
    link.reset_arm()
    link.close()
    assert base_ctl.closes()["Base"] == 1
    assert arm_ctl.closes()["Arm"] == 1
    assert not link.connected
    link.close()  # closing twice sends nothing more
    assert base_ctl.closes()["Base"] == 1


def test_targets_before_reset_are_refused(robot: Robot) -> None:
    link, _, _ = robot
    base_status, arm_status = link.status()
    assert base_status.needs_reset and arm_status.needs_reset
    with pytest.raises(RobotNotResetError):
        link.send_base_pose(0.1, 0.0, 0.0)
    with pytest.raises(RobotNotResetError):
        link.send_arm([0.4, 0.0, 0.3], [0.0, 0.0, 0.0, 1.0], 0.0)
    link.reset_base()
    link.send_base_pose(0.1, 0.0, 0.0)
    assert not link.status()[0].needs_reset


def test_base_reset_zeroes_odometry(robot: Robot) -> None:
    link, _, _ = robot
    link.reset_base()
    assert link.base_state() == parse_base_state({"base_pose": [0.0, 0.0, 0.0]})
    link.send_base_pose(0.3, -0.2, 0.5)
    assert wait_for(lambda: link.base_state().x > 0.1, 3.0)
    moved = link.base_state()
    assert moved.y < -0.05 and moved.theta > 0.1
    link.reset_base()
    zero = link.base_state()
    assert (zero.x, zero.y, zero.theta) == (0.0, 0.0, 0.0)
    time.sleep(0.3)  # no stale target survives the reset
    assert link.base_state() == zero


def test_arm_reset_opens_gripper_and_retracts(robot: Robot) -> None:
    link, _, _ = robot
    link.reset_arm()
    first = link.arm_state()
    assert first.gripper == 0.0
    np.testing.assert_allclose(first.pos, RETRACT_POS, atol=1e-9)
    np.testing.assert_allclose(first.quat, RETRACT_QUAT / np.linalg.norm(RETRACT_QUAT), atol=1e-6)
    link.send_arm([0.5, 0.1, 0.4], [0.0, 0.0, 0.0, 1.0], 1.0)
    assert wait_for(lambda: link.arm_state().gripper > 0.9, 3.0)
    link.reset_arm()
    after = link.arm_state()
    assert after.gripper == 0.0
    np.testing.assert_allclose(after.pos, RETRACT_POS, atol=1e-9)


@pytest.mark.slow
def test_targets_streamed_at_the_control_period_are_tracked(robot: Robot) -> None:
    link, _, _ = robot
    link.reset_base()
    link.reset_arm()
    steps = 15
    lags = []
    for i in range(1, steps + 1):
        s = i / steps
        link.send_base_pose(0.3 * s, 0.1 * s, 0.4 * s)
        link.send_arm([0.13 + 0.3 * s, 0.0, 0.21 + 0.1 * s], [0.0, 0.0, 0.0, 1.0], 0.8 * s)
        time.sleep(c.CONTROL_PERIOD_S)
        lags.append(0.3 * s - link.base_state().x)
    assert max(lags) < 0.15  # follows the stream rather than waiting for its end
    time.sleep(1.5)
    b = link.base_state()
    a = link.arm_state()
    assert b.x == pytest.approx(0.3, abs=0.01)
    assert b.y == pytest.approx(0.1, abs=0.01)
    assert b.theta == pytest.approx(0.4, abs=0.01)
    np.testing.assert_allclose(a.pos, [0.43, 0.0, 0.31], atol=0.01)
    np.testing.assert_allclose(a.quat, [0.0, 0.0, 0.0, 1.0], atol=0.02)
    assert a.gripper == pytest.approx(0.8, abs=0.02)


def test_invalid_targets_are_refused_before_anything_is_sent(robot: Robot) -> None:
    link, _, _ = robot
    link.reset_base()
    link.reset_arm()
    before = link.arm_state()
    bad_arm: list[tuple[Any, Any, Any]] = [
        ([0.4, 0.0, math.nan], [0, 0, 0, 1], 0.5),
        ([0.4, 0.0], [0, 0, 0, 1], 0.5),
        ([0.4, 0.0, 0.3], [0, 0, 1], 0.5),
        ([0.4, 0.0, 0.3], [0, 0, 0, 0], 0.5),
        ([0.4, 0.0, 0.3], [0, 0, 0, 1], 1.5),
        ([0.4, 0.0, 0.3], [0, 0, 0, 1], -0.1),
        ([0.4, 0.0, 0.3], [0, 0, 0, 1], math.inf),
        ([0.4, 0.0, 0.3], [0, 0, 0, 1], "half"),
    ]
    for pos, quat, grip in bad_arm:
        with pytest.raises(RobotTargetRefusedError):
            link.send_arm(pos, quat, grip)
    for pose in [(math.nan, 0.0, 0.0), (0.0, math.inf, 0.0), (0.0, 0.0, -math.inf)]:
        with pytest.raises(RobotTargetRefusedError):
            link.send_base_pose(*pose)
    time.sleep(0.3)
    assert link.base_state() == parse_base_state({"base_pose": [0.0, 0.0, 0.0]})
    assert link.arm_state() == before


def test_actions_have_the_upstream_keys_and_shapes() -> None:
    action = arm_action([0.4, 0.0, 0.3], [0.0, 0.0, 0.0, 2.0], 1.0)
    assert set(action) == {"arm_pos", "arm_quat", "gripper_pos"}
    assert action["gripper_pos"].shape == (1,)
    np.testing.assert_allclose(action["arm_quat"], [0.0, 0.0, 0.0, 1.0])
    assert set(base_action(1.0, 2.0, 3.0)) == {"base_pose"}
    assert base_action(1.0, 2.0, 3.0)["base_pose"].shape == (3,)
    with pytest.raises(ValueError):  # RobotTargetRefusedError is a ValueError too
        base_action(1.0, 2.0, math.nan)


def test_state_parsing_normalises_and_refuses() -> None:
    s = parse_arm_state({"arm_pos": [0.1, 0.2, 0.3], "arm_quat": [0.0, 0.0, 0.0, -2.0],
                         "gripper_pos": [1.01]})
    assert s == ArmState((0.1, 0.2, 0.3), (0.0, 0.0, 0.0, 1.0), 1.0)
    for bad in [
        {"arm_pos": [0.1, 0.2, 0.3], "arm_quat": [0, 0, 0, 1]},
        {"arm_pos": [0.1, 0.2], "arm_quat": [0, 0, 0, 1], "gripper_pos": [0.0]},
        {"arm_pos": [0.1, 0.2, math.nan], "arm_quat": [0, 0, 0, 1], "gripper_pos": [0.0]},
        {"arm_pos": [0.1, 0.2, 0.3], "arm_quat": [0, 0, 0, 0], "gripper_pos": [0.0]},
        {"arm_pos": [0.1, 0.2, 0.3], "arm_quat": [0, 0, 0, 1], "gripper_pos": [1.5]},
        None,
    ]:
        with pytest.raises(RobotStateError):
            parse_arm_state(bad)
    with pytest.raises(RobotStateError):
        parse_base_state({"base_pose": [0.0, math.nan, 0.0]})
    with pytest.raises(RobotStateError):
        parse_base_state({"pose": [0.0, 0.0, 0.0]})


def test_contract_names() -> None:
    topics = c.camera_topics("wrist")
    assert topics.color == "cameras/wrist/color/image_raw"
    assert topics.depth == "cameras/wrist/depth/image_raw"
    assert topics.camera_info == "cameras/wrist/color/camera_info"
    assert abs(c.CONTROL_PERIOD_S - 0.1) < 1e-12
    assert (c.BASE_RPC_PORT, c.ARM_RPC_PORT) == (50000, 50001)
    assert not hasattr(c, "RPC_AUTHKEY")  # no default secret in code
    with pytest.raises(ValueError):
        RobotLink("127.0.0.1", b"")
