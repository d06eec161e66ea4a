"""Fixtures of the robot-link tests (helpers in robot_helpers.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from robot_helpers import FakeServers

from mimir_robot.rpc import RobotLink


@pytest.fixture
def servers() -> Iterator[FakeServers]:
    fs = FakeServers()
    try:
        yield fs
    finally:
        fs.stop_all()


@pytest.fixture
def robot(servers: FakeServers) -> Iterator[tuple[RobotLink, Any, Any]]:
    """A connected link to a fake base and arm, plus their FakeControl proxies (not reset)."""
    base, _ = servers.start("Base")
    arm, _ = servers.start("Arm")
    link = servers.link(base, arm)
    link.connect(timeout_s=5.0)
    try:
        yield link, servers.control(base), servers.control(arm)
    finally:
        link.close()
