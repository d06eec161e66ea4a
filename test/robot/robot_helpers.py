"""Helpers of the robot-link tests: fake TidyBot++ servers on free localhost ports."""

from __future__ import annotations

import secrets
import socket
import time
from collections.abc import Callable
from multiprocessing.managers import BaseManager
from typing import Any

from mimir_robot.fakes import start_fake_server
from mimir_robot.rpc import Backoff, RobotLink

Address = tuple[str, int]



class _ControlManager(BaseManager):
    pass


_ControlManager.register("FakeControl")


class FakeServers:
    """Starts fake servers for one test and stops every one of them afterwards."""

    def __init__(self) -> None:
        self.authkey = b"mimir-test-" + secrets.token_hex(8).encode()
        self._stops: list[Callable[..., None]] = []

    def start(self, typeid: str, port: int = 0,
              **kwargs: Any) -> tuple[Address, Callable[..., None]]:
        address, stop = start_fake_server(typeid, self.authkey, port=port, **kwargs)
        self._stops.append(stop)
        return address, stop

    def control(self, address: Address) -> Any:
        """The server's FakeControl proxy (controller counts, hang switch)."""
        manager = _ControlManager(address=address, authkey=self.authkey)
        manager.connect()
        return manager.FakeControl()  # type: ignore[attr-defined]

    def link(self, base: Address, arm: Address, **kwargs: Any) -> RobotLink:
        kwargs.setdefault("backoff", Backoff(initial_s=0.05, max_s=0.2))
        kwargs.setdefault("connect_timeout_s", 2.0)
        kwargs.setdefault("call_timeout_s", 1.0)
        return RobotLink("127.0.0.1", self.authkey, base_port=base[1], arm_port=arm[1], **kwargs)

    def stop_all(self) -> None:
        for stop in self._stops:
            stop(kill=True)



def free_port() -> int:
    """A localhost port nothing listens on (bound once, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(predicate: Callable[[], bool], timeout_s: float, period_s: float = 0.02) -> bool:
    """Poll ``predicate`` until it holds or ``timeout_s`` passes; its last value."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(period_s)
    return predicate()
