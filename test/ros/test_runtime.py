"""The shared node ``main()``: exit status and a bounded exit after a failed start."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
import time
import weakref
from pathlib import Path

import pytest

from mimir.ros import runtime

pytestmark = pytest.mark.ros

REPO_ROOT = Path(__file__).resolve().parents[2]

_CHILD = textwrap.dedent(
    """
    import atexit, sys, time
    import mimir.ros.runtime as runtime
    from rclpy.node import Node

    runtime.FAILURE_EXIT_GRACE_S = {grace}
    if {hang}:
        atexit.register(time.sleep, 120)  # stands in for a teardown that never returns

    class Broken(Node):
        def __init__(self):
            super().__init__("broken_start")
            raise ValueError("parameter 'rate_hz' must be positive")

    sys.exit(runtime.run_node(Broken, []))
    """
)


def _run_child(*, hang: bool) -> tuple[subprocess.CompletedProcess[str], float]:
    code = _CHILD.format(grace=2.0, hang=hang)
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=90, cwd=REPO_ROOT, check=False)
    return proc, time.monotonic() - start


def test_failed_constructor_exits_1_with_the_error_and_no_traceback() -> None:
    proc, _ = _run_child(hang=False)
    assert proc.returncode == 1, proc.stderr
    assert "ValueError: parameter 'rate_hz' must be positive" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_hanging_teardown_after_a_failed_start_is_cut_short() -> None:
    proc, elapsed = _run_child(hang=True)
    assert proc.returncode == 1, proc.stderr
    assert "ValueError: parameter 'rate_hz' must be positive" in proc.stderr
    # the watchdog writes where the process was stuck before it exits
    assert "most recent call first" in proc.stderr
    assert elapsed < 60


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_settle_heap_frees_start_up_garbage_then_freezes_what_lives() -> None:
    left_over = _Cycle()  # garbage from start-up: must be freed, not frozen
    left_over_ref = weakref.ref(left_over)
    del left_over
    gc.unfreeze()
    try:
        runtime.settle_heap()
        assert left_over_ref() is None
        assert gc.get_freeze_count() > 0
        later = _Cycle()  # garbage made after start-up is collected as before
        later_ref = weakref.ref(later)
        del later
        gc.collect()
        assert later_ref() is None
    finally:
        gc.unfreeze()
