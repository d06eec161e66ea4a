"""Fault tests of the robot link: servers that are absent, die, hang or refuse the authkey."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import pytest
from robot_helpers import FakeServers, free_port, wait_for

from mimir_robot.rpc import (
    Backoff,
    RobotAuthError,
    RobotCallTimeoutError,
    RobotLink,
    RobotLinkError,
    RobotLinkLostError,
    RobotNotResetError,
    RobotUnreachableError,
)

Robot = tuple[RobotLink, Any, Any]


def test_server_not_running_is_unreachable_within_the_timeout() -> None:
    link = RobotLink("127.0.0.1", b"key", base_port=free_port(), arm_port=free_port(),
                     connect_timeout_s=0.5, backoff=Backoff(initial_s=0.3, max_s=1.0))
    t0 = time.monotonic()
    with pytest.raises(RobotUnreachableError):
        link.base_state()
    assert time.monotonic() - t0 < 0.6
    status = link.status()[0]
    assert not status.connected
    assert "unreachable" in status.last_error
    assert status.retry_in_s > 0.0
    t1 = time.monotonic()
    with pytest.raises(RobotUnreachableError, match="next attempt"):  # backoff: no new attempt
        link.base_state()
    assert time.monotonic() - t1 < 0.05
    t2 = time.monotonic()
    with pytest.raises(RobotUnreachableError):
        link.connect(timeout_s=0.8)
    assert time.monotonic() - t2 < 1.2


def test_backoff_doubles_up_to_its_bound() -> None:
    link = RobotLink("127.0.0.1", b"key", base_port=free_port(), arm_port=free_port(),
                     connect_timeout_s=0.5, backoff=Backoff(initial_s=0.02, max_s=0.08))
    delays = []
    for _ in range(5):
        wait_for(lambda: link.status()[0].retry_in_s == 0.0, 1.0, period_s=0.005)
        with pytest.raises(RobotUnreachableError):
            link.base_state()
        status = link.status()[0]
        assert status.retry_in_s <= status.backoff_s
        delays.append(status.backoff_s)
    assert delays == pytest.approx([0.02, 0.04, 0.08, 0.08, 0.08])


def test_listener_that_never_answers_is_bounded_by_the_connect_timeout() -> None:
    with socket.socket() as mute:  # accepts TCP (kernel backlog) but never speaks the protocol
        mute.bind(("127.0.0.1", 0))
        mute.listen(4)
        port = mute.getsockname()[1]
        link = RobotLink("127.0.0.1", b"key", base_port=port, arm_port=port,
                         connect_timeout_s=0.4)
        t0 = time.monotonic()
        with pytest.raises(RobotUnreachableError, match="did not answer"):
            link.base_state()
        assert time.monotonic() - t0 < 0.8


def test_wrong_authkey_is_a_typed_error(servers: FakeServers) -> None:
    base, _ = servers.start("Base")
    link = RobotLink("127.0.0.1", b"not-the-key", base_port=base[1], arm_port=base[1],
                     connect_timeout_s=2.0)
    with pytest.raises(RobotAuthError):
        link.base_state()
    assert servers.control(base).counts()["Base"] == 0


@pytest.mark.slow
def test_hanging_server_is_bounded_and_opens_no_second_controller(robot: Robot) -> None:
    link, base_ctl, _ = robot
    link.reset_base()
    link.send_base_pose(0.1, 0.0, 0.0)
    base_ctl.set_hang(True)
    t0 = time.monotonic()
    with pytest.raises(RobotCallTimeoutError):
        link.base_state()  # call timeout 1 s
    assert 0.9 < time.monotonic() - t0 < 1.6
    assert not link.status()[0].connected
    t1 = time.monotonic()
    with pytest.raises(RobotLinkLostError, match="still unanswered"):
        link.send_base_pose(0.2, 0.0, 0.0)
    assert time.monotonic() - t1 < 0.1  # refused at once, nothing queued behind the stuck call
    assert base_ctl.counts()["Base"] == 1
    # settling waits for the late answer and no longer: still hung, it gives up at its bound
    t2 = time.monotonic()
    assert link.settle(0.3) is False
    assert 0.25 < time.monotonic() - t2 < 0.6
    released = threading.Timer(0.5, base_ctl.set_hang, (False,))
    released.start()
    t3 = time.monotonic()
    assert link.settle(5.0) is True  # answered once released, well before the bound
    assert time.monotonic() - t3 < 3.0
    released.join()
    assert link.settle(0.0) is True  # nothing outstanding: at once
    assert wait_for(lambda: link.status()[0].connected, 2.0)
    state = link.base_state()  # the same controller answers again: no reconnect, no new reset
    assert state.x > 0.0
    link.send_base_pose(0.2, 0.0, 0.0)
    assert base_ctl.counts()["Base"] == 1
    assert link.reconnects == 0


@pytest.mark.slow
def test_server_killed_mid_stream_then_restarted(servers: FakeServers) -> None:
    base, stop_base = servers.start("Base")
    arm, _ = servers.start("Arm")
    link = servers.link(base, arm)
    link.connect(timeout_s=5.0)
    link.reset_base()
    lost: RobotLinkError | None = None
    for i in range(30):
        if i == 5:
            stop_base(kill=True)
        try:
            link.send_base_pose(0.01 * i, 0.0, 0.0)
            link.base_state()
        except RobotLinkLostError as exc:
            lost = exc
            break
        time.sleep(0.1)
    assert isinstance(lost, RobotLinkLostError)
    assert not link.status()[0].connected
    assert link.status()[1].connected  # the arm channel is unaffected
    with pytest.raises(RobotLinkLostError):  # down: lost (not unreachable), typed, fast
        link.base_state()

    servers.start("Base", port=base[1])  # same address, fresh server process
    control = servers.control(base)

    def back() -> bool:
        try:
            link.base_state()
        except RobotNotResetError:
            return True
        except RobotLinkError as exc:  # fresh controller: state before reset raises remotely
            return "reset" in str(exc)
        return True

    assert wait_for(back, 5.0, period_s=0.05)
    status = link.status()[0]
    assert status.connected and status.needs_reset and status.reconnects == 1
    with pytest.raises(RobotNotResetError):  # never an implicit reset after a reconnect
        link.send_base_pose(0.0, 0.0, 0.0)
    link.reset_base()
    link.send_base_pose(0.1, 0.0, 0.0)
    for _ in range(10):
        link.base_state()
    assert control.counts()["Base"] == 1  # exactly one new controller
    assert link.reconnects == 1
    link.close()
