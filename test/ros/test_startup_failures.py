"""A start that cannot succeed ends with one clear line, no traceback, and the right exit status.

Nodes run as real OS processes through their console scripts, as a launcher starts them; they
inherit the hermetic ROS environment that test/conftest.py puts into ``os.environ``. The
``mimir sim`` cases stop before any node starts, so they need neither DDS nor MuJoCo.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mimir import sim_job

pytestmark = pytest.mark.ros

BIN_DIR = Path(sys.executable).parent
#: A refused start has to end well within this (the runtime's watchdog allows 15 s of teardown).
EXIT_WITHIN_S = 20.0


def _script(name: str) -> str:
    exe = BIN_DIR / name
    if not exe.exists():
        raise FileNotFoundError(f"the {name} console script is missing beside {sys.executable}")
    return str(exe)


def _env(debug: bool = False) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "MIMIR_DEBUG"}
    if debug:
        env["MIMIR_DEBUG"] = "1"
    return env


def _run(argv: list[str], debug: bool = False) -> tuple[subprocess.CompletedProcess[str], float]:
    start = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, env=_env(debug),
                          timeout=EXIT_WITHIN_S + 40.0, check=False)
    return proc, time.monotonic() - start


def _one_line(proc: subprocess.CompletedProcess[str]) -> str:
    """The single non-empty stderr line; fails when there are more, fewer, or a traceback."""
    output = proc.stdout + proc.stderr
    assert "Traceback" not in output, output
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, output
    return lines[0]


def _refused(argv: list[str]) -> str:
    """Run ``argv``; it must exit with 1 within EXIT_WITHIN_S saying one line, returned."""
    proc, elapsed = _run(argv)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert elapsed < EXIT_WITHIN_S
    return _one_line(proc)


def _node(script: str, memory_dir: Path) -> list[str]:
    return [_script(script), "--ros-args", "-p", f"memory_dir:={memory_dir}"]


def _wait_until_started(proc: subprocess.Popen[bytes], log: Path, lock: Path,
                        timeout: float = 60.0) -> None:
    """Wait until ``proc`` holds the writer lock and has opened its store.

    The holder writes its pid into the lock file as soon as it takes the lock, before it
    creates the schema; its first INFO line comes only after the store is open, so both are
    waited for (a test that edits the schema next must not find it half made).
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the first node exited with {proc.returncode}"
        locked = lock.is_file() and lock.read_text().strip() == str(proc.pid)
        if locked and "[INFO]" in log.read_text(errors="replace"):
            return
        time.sleep(0.2)
    raise AssertionError(f"the first node did not take {lock} within {timeout} s")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20.0)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def holder() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Node processes a test starts as the first writer; always stopped afterwards."""
    procs: list[subprocess.Popen[bytes]] = []
    try:
        yield procs
    finally:
        for proc in procs:
            _stop(proc)


def _start_holder(procs: list[subprocess.Popen[bytes]], script: str, memory_dir: Path,
                  lock: Path) -> subprocess.Popen[bytes]:
    log = memory_dir.parent / f"{script}.log"  # memory_dir is a folder of its own
    with log.open("wb") as out:
        proc = subprocess.Popen(_node(script, memory_dir), env=_env(),
                                stdout=out, stderr=subprocess.STDOUT)
    procs.append(proc)
    _wait_until_started(proc, log, lock)
    return proc


# ------------------------------------------------------------------------------ nodes
def test_second_scene_graph_node_on_a_held_folder(
        tmp_path: Path, holder: list[subprocess.Popen[bytes]]) -> None:
    memory = tmp_path / "memory"
    db = memory / "world.db"
    first = _start_holder(holder, "scene_graph_node", memory, memory / "world.db.lock")

    line = _refused(_node("scene_graph_node", memory))
    assert str(db) in line
    assert f"pid {first.pid}" in line
    assert "memory_dir" in line  # says what to do
    assert "attribute" not in line
    assert first.poll() is None  # the holder is left alone


def test_world_db_of_a_newer_schema_version(
        tmp_path: Path, holder: list[subprocess.Popen[bytes]]) -> None:
    memory = tmp_path / "memory"
    db = memory / "world.db"
    _stop(_start_holder(holder, "scene_graph_node", memory, memory / "world.db.lock"))
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE meta SET value = '7' WHERE key = 'schema_version'")
    conn.close()

    line = _refused(_node("scene_graph_node", memory))
    assert str(db) in line
    assert "schema version 7" in line
    assert "upgrade mimir" in line


def test_memory_dir_that_cannot_be_created(tmp_path: Path) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")

    line = _refused(_node("scene_graph_node", blocker / "memory"))
    assert line.startswith("scene_graph: ")
    assert str(blocker) in line


def test_mimir_debug_shows_the_traceback_of_a_failed_start(tmp_path: Path) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")

    proc, _ = _run(_node("scene_graph_node", blocker / "memory"), debug=True)

    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" in proc.stderr
    assert proc.stderr.rstrip().splitlines()[-1].startswith("scene_graph: ")


def test_second_keyframe_node_on_a_held_store(
        tmp_path: Path, holder: list[subprocess.Popen[bytes]]) -> None:
    memory = tmp_path / "memory"
    db = memory / "keyframes" / "keyframes.db"
    first = _start_holder(holder, "keyframe_node", memory, db.with_name("keyframes.db.lock"))

    line = _refused(_node("keyframe_node", memory))
    assert str(db) in line
    assert f"pid {first.pid}" in line


# ------------------------------------------------------------------------- mimir sim
def _mimir_sim(runs: Path, *args: str, debug: bool = False) -> subprocess.CompletedProcess[str]:
    argv = [_script("mimir")] + (["--debug"] if debug else []) + ["sim", "--runs", str(runs),
                                                                  *args]
    proc, _ = _run(argv)
    return proc


def test_unknown_scenario_is_one_line_and_leaves_no_run_folder(tmp_path: Path) -> None:
    proc = _mimir_sim(tmp_path, "--scenario", "does_not_exist")

    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = _one_line(proc)
    assert line.startswith("mimir: error: ")
    assert "does_not_exist" in line and " — " in line
    assert list(tmp_path.iterdir()) == []


def test_missing_params_file_is_one_line_and_leaves_no_run_folder(tmp_path: Path) -> None:
    missing = Path("/no/such.yaml")
    assert not missing.exists()
    proc = _mimir_sim(tmp_path, "--params-file", str(missing))

    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = _one_line(proc)
    assert line.startswith("mimir: error: ")
    assert str(missing) in line and "--params-file" in line
    assert list(tmp_path.iterdir()) == []


def test_bad_option_value_is_one_line(tmp_path: Path) -> None:
    proc = _mimir_sim(tmp_path, "--step-budget", "0")

    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert _one_line(proc).startswith("mimir: error: --step-budget")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("args", "words"), [
    (("--profile", "noisy"), ("unknown noise profile 'noisy'", "realistic")),
    (("--noise-scale", "-1"), ("noise scale", ">= 0")),
    (("--noise-scale", "nan"), ("noise scale", ">= 0")),
])
def test_bad_noise_options_are_one_line(tmp_path: Path, args: tuple[str, ...],
                                        words: tuple[str, ...]) -> None:
    proc = _mimir_sim(tmp_path, *args)

    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = _one_line(proc)
    assert line.startswith("mimir: error: ")
    assert all(word in line for word in words), line
    assert list(tmp_path.iterdir()) == []


def test_debug_option_shows_the_traceback(tmp_path: Path) -> None:
    proc = _mimir_sim(tmp_path, "--scenario", "does_not_exist", debug=True)

    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" in proc.stderr
    assert proc.stderr.rstrip().splitlines()[-1].startswith("mimir: error: ")
    assert list(tmp_path.iterdir()) == []


def test_run_that_fails_before_any_node_started_removes_its_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: sim_job.NodeProcesses) -> None:
        raise sim_job.SimJobError("no node could start", "a hint")

    monkeypatch.setattr(sim_job.NodeProcesses, "start", refuse)
    options = sim_job.SimJobOptions(run_root=tmp_path, quiet=True)
    with pytest.raises(sim_job.SimJobError, match="no node could start"):
        sim_job.run_sim_job(options)
    assert list(tmp_path.iterdir()) == []
