"""``mimir sim`` stops its node processes when it is terminated, not only on Ctrl-C."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

_CHILD = textwrap.dedent(
    """
    import pathlib, sys, time
    from mimir.sim_job import exit_on_termination

    marker = pathlib.Path(sys.argv[1])
    with exit_on_termination():
        try:
            print("ready", flush=True)
            time.sleep(60)
        finally:
            marker.write_text("stopped")  # where the job stops its node processes
    """
)


def test_sigterm_runs_the_cleanup_and_exits_143(tmp_path: Path) -> None:
    marker = tmp_path / "stopped"
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(marker)], cwd=REPO_ROOT,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert marker.read_text() == "stopped"


def test_handlers_are_restored_after_the_block() -> None:
    from mimir.sim_job import exit_on_termination

    before = signal.getsignal(signal.SIGTERM)
    with exit_on_termination():
        assert signal.getsignal(signal.SIGTERM) is not before
    assert signal.getsignal(signal.SIGTERM) is before


_HOLDER = textwrap.dedent(
    """
    import signal, time
    from mimir.sim_client import ctrl_c_interrupts

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a background job of a script starts
    try:
        with ctrl_c_interrupts():
            print("ready", flush=True)
            time.sleep(60)
    except KeyboardInterrupt:
        ignored = signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        print("interrupted; ignored again after:", ignored, flush=True)
    """
)


def test_ctrl_c_ends_a_hold_even_when_the_job_started_with_sigint_ignored() -> None:
    """The hold ("Ctrl-C ends it") of a job started in the background by a non-interactive
    shell, which starts it with SIGINT ignored: the hold still ends on SIGINT."""
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER], cwd=REPO_ROOT,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0
        assert out.strip() == "interrupted; ignored again after: True"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
