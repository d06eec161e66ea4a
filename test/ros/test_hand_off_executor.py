"""The multi-threaded executor the nodes spin: every callback runs, a callback waiting for a free
worker is not handed out again and again, and the spin stops on shutdown and on its condition."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
import rclpy
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.context import Context
from rclpy.node import Node
from rclpy.task import Future
from ros_helpers import wait_until
from std_msgs.msg import Int32

from mimir.ros.runtime import HandOffExecutor

pytestmark = pytest.mark.ros


class Busy:
    """A node with a subscription whose first ``hold`` messages keep their worker until
    ``release`` is set, so the pool is full while more messages wait."""

    def __init__(self, context: Context, hold: int) -> None:
        self.node = rclpy.create_node("hand_off_under_test", context=context)
        self.release = threading.Event()
        self.seen: list[int] = []
        self._hold = hold
        self.node.create_subscription(Int32, "hand_off/work", self._on_work, 50,
                                      callback_group=ReentrantCallbackGroup())
        self._pub = self.node.create_publisher(Int32, "hand_off/work", 50)

    def send(self, count: int) -> None:
        for i in range(count):
            self._pub.publish(Int32(data=i))
            time.sleep(0.02)

    def _on_work(self, msg: Int32) -> None:
        self.seen.append(msg.data)
        if msg.data < self._hold:
            self.release.wait(10.0)


@pytest.fixture
def spinning(ros_context: Context) -> Iterator[Busy]:
    executor = HandOffExecutor(num_threads=2, context=ros_context)
    busy = Busy(ros_context, hold=2)
    executor.add_node(busy.node)
    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()
    try:
        yield busy
    finally:
        busy.release.set()
        executor.shutdown(timeout_sec=5.0)
        thread.join(timeout=5.0)
        busy.node.destroy_node()
    assert not thread.is_alive()


def test_the_spin_thread_sleeps_while_every_worker_is_busy(spinning: Busy) -> None:
    busy = spinning
    busy.send(5)
    assert wait_until(lambda: len(busy.seen) >= 2)
    time.sleep(0.2)
    assert busy.seen == [0, 1]  # both workers held; three messages wait
    cpu0, wall0 = time.process_time(), time.monotonic()
    time.sleep(1.0)
    cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
    # the stock executor hands the waiting message's callback out again and again meanwhile
    # (several seconds of CPU in this second, measured on two cores)
    assert cpu < 0.35 * wall, f"{cpu:.2f} s of CPU in {wall:.2f} s with the pool full"
    assert busy.seen == [0, 1]  # nothing ran without a worker
    busy.release.set()
    assert wait_until(lambda: len(busy.seen) == 5)  # once workers are free, the rest run, once each
    assert sorted(busy.seen) == [0, 1, 2, 3, 4]


def test_a_spin_until_a_future_ends_while_every_worker_is_busy(ros_context: Context) -> None:
    executor = HandOffExecutor(num_threads=2, context=ros_context)
    busy = Busy(ros_context, hold=2)
    executor.add_node(busy.node)
    future: Future[bool] = Future()
    threading.Thread(target=busy.send, args=(3,), daemon=True).start()
    threading.Timer(0.5, future.set_result, args=(True,)).start()
    try:
        start = time.monotonic()
        executor.spin_until_future_complete(future, timeout_sec=5.0)
        assert future.done() and future.result() is True
        assert time.monotonic() - start < 4.0
    finally:
        busy.release.set()
        executor.shutdown(timeout_sec=5.0)
        busy.node.destroy_node()


def test_a_callback_that_raises_stops_the_spin(ros_context: Context) -> None:
    executor = HandOffExecutor(num_threads=2, context=ros_context)
    node: Node = rclpy.create_node("hand_off_raises", context=ros_context)

    def fail() -> None:
        raise ValueError("bad reading")

    node.create_timer(0.01, fail)
    executor.add_node(node)
    try:
        with pytest.raises(ValueError, match="bad reading"):
            deadline = time.monotonic() + 10.0
            while time.monotonic() < deadline:
                executor.spin_once(timeout_sec=0.1)
    finally:
        executor.shutdown(timeout_sec=5.0)
        node.destroy_node()
