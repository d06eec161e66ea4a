"""The executor's pacing clock: wall time on a robot, ``/clock`` under ``use_sim_time``.

A simulator that falls behind wall time must slow the streamed motion with it: a period waited
under simulated time ends only once ``/clock`` has moved that far, however slowly it moves.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
import rclpy
from rclpy.context import Context
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rosgraph_msgs.msg import Clock

from mimir.nodes.robot.executor_params import ExecutorNodeConfig
from mimir.ros import qos
from mimir.ros.time import ClockPacer, clock_seconds, from_seconds
from mimir_robot.profile import ProfileError

pytestmark = pytest.mark.ros


class SlowClock:
    """Publishes ``/clock`` in steps of ``step_s`` every ``every_s`` of wall time (a simulator
    running at ``step_s / every_s`` of real time) until stopped or frozen."""

    def __init__(self, node: Node, step_s: float, every_s: float) -> None:
        self._pub = node.create_publisher(Clock, "/clock", qos.EVENTS)
        self._step, self._every = step_s, every_s
        self.sim_time = 1.0
        self.frozen = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            if not self.frozen.is_set():
                self.sim_time += self._step
            self._pub.publish(Clock(clock=from_seconds(self.sim_time)))

    def __enter__(self) -> SlowClock:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=2.0)


@pytest.fixture
def sim_node(ros_context: Context, ros_executor: MultiThreadedExecutor) -> Iterator[Node]:
    node = rclpy.create_node("pacer_under_test", context=ros_context,
                             parameter_overrides=[Parameter("use_sim_time", value=True)])
    ros_executor.add_node(node)
    yield node
    ros_executor.remove_node(node)
    node.destroy_node()


def wait_for_clock(node: Node, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while clock_seconds(node) <= 0.0:
        assert time.monotonic() < deadline, "no /clock reached the node"
        time.sleep(0.01)


def test_a_period_under_sim_time_lasts_as_long_as_the_simulator_needs(
        sim_node: Node, spin_node: Node) -> None:
    # a simulator at a quarter of real time: 0.01 s of simulation every 0.04 s of wall time
    with SlowClock(spin_node, step_s=0.01, every_s=0.04):
        wait_for_clock(sim_node)
        pacer = ClockPacer(sim_node)
        assert pacer.simulated
        start_sim, start_wall = pacer.now(), time.monotonic()
        pacer.sleep(0.1)
        waited_sim, waited_wall = pacer.now() - start_sim, time.monotonic() - start_wall
    assert waited_sim >= 0.1 - 1e-9
    # a quarter of real time: 0.1 s of simulation takes about 0.4 s of wall time, not 0.1 s
    assert waited_wall >= 0.3, waited_wall


def test_a_wait_ends_when_canceled_or_when_the_clock_stops(
        sim_node: Node, spin_node: Node) -> None:
    cancel = threading.Event()
    with SlowClock(spin_node, step_s=0.01, every_s=0.04) as clock:
        wait_for_clock(sim_node)
        pacer = ClockPacer(sim_node, cancel=cancel, stall_s=0.5)
        timer = threading.Timer(0.3, cancel.set)
        timer.start()
        t0 = time.monotonic()
        pacer.sleep(100.0)
        assert 0.25 <= time.monotonic() - t0 < 3.0
        timer.join()
        cancel.clear()
        clock.frozen.set()  # the simulator stops: /clock keeps its value
        time.sleep(0.1)
        t0 = time.monotonic()
        pacer.sleep(1.0)
        assert 0.4 <= time.monotonic() - t0 < 3.0


def test_without_sim_time_the_pacer_is_wall_time(spin_node: Node) -> None:
    pacer = ClockPacer(spin_node)
    assert not pacer.simulated
    before = time.monotonic()
    assert pacer.now() == pytest.approx(before, abs=0.5)
    pacer.sleep(0.05)
    assert time.monotonic() - before >= 0.05
    pacer.sleep(-1.0)  # nothing to wait for


@pytest.mark.parametrize("poll_s, stall_s", [(0.0, 1.0), (0.01, 0.0), (-1.0, 1.0)])
def test_bad_pacing_settings_are_refused(spin_node: Node, poll_s: float, stall_s: float) -> None:
    with pytest.raises(ValueError, match="must be positive"):
        ClockPacer(spin_node, poll_s=poll_s, stall_s=stall_s)


@pytest.mark.parametrize("stall_s", [0.0, -1.0, float("nan")])
def test_the_executor_refuses_a_clock_stall_limit_that_is_not_positive(stall_s: float) -> None:
    with pytest.raises(ProfileError, match="clock_stall_s"):
        ExecutorNodeConfig(authkey="k", clock_stall_s=stall_s)
    assert ExecutorNodeConfig(authkey="k", clock_stall_s=0.5).clock_stall_s == 0.5
