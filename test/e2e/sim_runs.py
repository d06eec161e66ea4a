"""What the end-to-end tests share: the ``mimir`` console script and one finished simulation run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def mimir_exe() -> str:
    """The ``mimir`` console script of the environment running the tests."""
    exe = Path(sys.executable).parent / "mimir"
    if not exe.exists():
        raise FileNotFoundError(f"the mimir console script is missing beside {sys.executable}")
    return str(exe)


def sim_env() -> dict[str, str]:
    """The environment of a simulation run: headless rendering, unbuffered output."""
    return dict(os.environ, MUJOCO_GL="egl", PYTHONUNBUFFERED="1")


def finished_run(scenario: str, runs: Path, timeout: float = 900.0) -> Path:
    """Runs ``mimir sim`` on ``scenario`` (ideal profile) into ``runs`` and returns its run
    folder, after checking that it exited 0 (the output and every node's log tail otherwise)."""
    proc = subprocess.run(
        [mimir_exe(), "sim", "--scenario", scenario, "--profile", "ideal", "--runs", str(runs),
         "--instruction-timeout", "400"],
        capture_output=True, text=True, timeout=timeout, env=sim_env(), check=False,
    )
    found = list(runs.iterdir())
    assert len(found) == 1, proc.stdout + proc.stderr
    run = found[0]
    logs = "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in (run / "logs").glob("*.log"))
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:] + logs
    return run
