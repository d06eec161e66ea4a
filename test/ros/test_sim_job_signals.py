"""``mimir sim`` stops its node processes when it is terminated, not only on Ctrl-C."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

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


def _script(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


def _kill_and_supervise(nodes: Any, name: str) -> list[str]:
    """Kill ``name``, then supervise until it runs again (a new process) or is given up on;
    the names supervise() last gave up on."""
    before = nodes.procs[name]
    before.kill()
    before.wait()
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline:
        gone = nodes.supervise()
        if gone or nodes.procs[name] is not before:
            return list(gone)
        time.sleep(0.05)
    raise AssertionError(f"{name} was neither restarted nor given up on")


def test_a_node_that_dies_is_started_again_within_its_allowance(tmp_path: Path) -> None:
    from mimir.sim_graph import GraphNode
    from mimir.sim_job import NodeProcesses

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _script(bin_dir, "steady_node", "sleep 60")
    _script(bin_dir, "world_node", "sleep 60")
    graph = (GraphNode("world_node", "world", restartable=False),
             GraphNode("steady_node", "steady"))
    told: list[tuple[str, int, int]] = []
    nodes = NodeProcesses(tmp_path, tmp_path / "params.yaml", graph=graph, bin_dir=bin_dir,
                          restarts=2, restart_delay_s=0.3,
                          on_restart=lambda *args: told.append(args))
    nodes.start()
    try:
        first = nodes.procs["steady"]
        started = time.monotonic()
        assert _kill_and_supervise(nodes, "steady") == []
        assert time.monotonic() - started >= 0.3  # not before the pause
        assert nodes.procs["steady"] is not first and nodes.procs["steady"].poll() is None
        assert told == [("steady", 1, -signal.SIGKILL)]
        assert _kill_and_supervise(nodes, "steady") == []
        # the allowance spent, the node stays dead and is reported
        assert _kill_and_supervise(nodes, "steady") == ["steady"]
        assert nodes.restarts == {"steady": 2} and len(told) == 2
        # the world is never started again: its death is reported at once
        nodes.procs["world"].kill()
        nodes.procs["world"].wait()
        assert set(nodes.supervise()) == {"world", "steady"}
        assert "world" not in nodes.restarts
        log = (tmp_path / "logs" / "steady.log")
        assert log.is_file()  # one log per node, appended to by every start
    finally:
        nodes.stop()


def test_the_bridge_stops_after_the_nodes_that_follow_its_clock(tmp_path: Path,
                                                                monkeypatch: Any) -> None:
    from mimir import sim_job
    from mimir.sim_graph import GraphNode

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    order = tmp_path / "order"

    def node(name: str, on_int: str) -> None:
        # a node that writes its name into ``order`` when it stops (after ``on_int``)
        _script(bin_dir, f"{name}_node",
                f"trap '{on_int}; echo {name} >> {order}; exit 0' INT\n"
                "echo up >> " + str(tmp_path / f"{name}.up") + "\n"
                "while :; do sleep 0.05; done")

    node("world", ":")
    node("slow", "sleep 0.5")  # takes a while to stop: the world must wait for it
    node("quick", ":")
    _script(bin_dir, "stuck_node", "trap '' INT\necho up >> " + str(tmp_path / "stuck.up")
            + "\nwhile :; do sleep 0.05; done")  # ignores SIGINT
    monkeypatch.setattr(sim_job, "STOP_WAIT_S", 1.5)
    graph = (GraphNode("world_node", "world", follows_clock=False, restartable=False),
             GraphNode("slow_node", "slow"), GraphNode("quick_node", "quick"),
             GraphNode("stuck_node", "stuck"))
    nodes = sim_job.NodeProcesses(tmp_path, tmp_path / "params.yaml", graph=graph,
                                  bin_dir=bin_dir)
    nodes.start()
    deadline = time.monotonic() + 10.0
    while not all((tmp_path / f"{n}.up").exists() for n in ("world", "slow", "quick", "stuck")):
        assert time.monotonic() < deadline, "the test nodes did not start"
        time.sleep(0.05)
    nodes.stop()
    lines = order.read_text().split()
    assert sorted(lines[:2]) == ["quick", "slow"] and lines[2:] == ["world"]
    assert nodes.procs["stuck"].returncode == -signal.SIGKILL
    assert all(proc.poll() is not None for proc in nodes.procs.values())
