"""The end-to-end tests each run a whole simulated robot in real time: one at a time.

Two at once on a two-core machine starve the robot's servers (calls miss their deadlines) and
the runs stop measuring what they test. Test workers are separate processes, so the tests take an
exclusive file lock for the length of their run.
"""

from __future__ import annotations

import fcntl
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def one_simulation_at_a_time() -> Iterator[None]:
    """Holds the machine-wide simulation lock while the test runs."""
    path = Path(tempfile.gettempdir()) / "mimir-e2e-simulation.lock"
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
