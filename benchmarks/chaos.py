"""Kill each node of the simulation graph in turn during a ``mimir sim`` run (``make chaos``).

    python benchmarks/chaos.py --runs runs/chaos [--nodes scene_graph planner ...]

For every named node (default: every node ``mimir sim`` may restart, that is all but the
simulation bridge), one Locked-and-Unlocked run on the ideal profile; once the robot has
finished its first primitive the node's process gets SIGKILL. Per run the table says whether
``mimir sim`` started the node again (a ``restart`` record in trace.jsonl), the run's judged task
progress and exit status, whether every memory event the run saw admitted is still in the
memory databases (no acknowledged write lost), and whether the memory folder passes
``mimir memory check``. Prints a Markdown table; exit status 1 when a run lost a write or left
memory failing its check.
"""

from __future__ import annotations

import argparse
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from run_files import json_lines, node_pids  # noqa: E402

from mimir.sim_graph import SIM_GRAPH  # noqa: E402 - after the path set-up

RESTARTABLE = [n.name for n in SIM_GRAPH if n.restartable]


@dataclass
class ChaosResult:
    node: str
    killed_at: float | None
    restarted: bool
    exit_status: int
    judged: str
    admitted: int
    lost: int
    memory_ok: bool


def _kill_after_first_primitive(runs: Path, name: str, started: float,
                                out: dict[str, float]) -> None:
    deadline = started + 600.0
    while time.monotonic() < deadline:
        runs_now = [p for p in runs.iterdir() if p.is_dir()] if runs.is_dir() else []
        trace = json_lines(runs_now[0] / "trace.jsonl") if runs_now else []
        if any(t.get("kind") == "primitive" for t in trace):
            for pid in node_pids(name):
                os.kill(pid, signal.SIGKILL)
                out["killed_at"] = time.monotonic() - started
            return
        time.sleep(0.5)


def _stored_event_ids(memory: Path) -> set[str]:
    ids: set[str] = set()
    for db in (memory / "world.db", memory / "task.db"):
        if db.is_file():
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
                ids |= {row[0] for row in con.execute("SELECT event_id FROM events")}
    return ids


def run_one(runs: Path, name: str, mimir: str) -> ChaosResult:
    started = time.monotonic()
    killed: dict[str, float] = {}
    killer = threading.Thread(target=_kill_after_first_primitive,
                              args=(runs, name, started, killed), daemon=True)
    killer.start()
    env = dict(os.environ, MUJOCO_GL=os.environ.get("MUJOCO_GL", "egl"))
    proc = subprocess.run([mimir, "sim", "--scenario", "locked_unlocked", "--profile", "ideal",
                           "--runs", str(runs), "--instruction-timeout", "400", "--quiet"],
                          env=env, capture_output=True, text=True, check=False)
    killer.join(timeout=1.0)
    run = next(p for p in runs.iterdir() if p.is_dir())
    trace = json_lines(run / "trace.jsonl")
    restarted = any(t.get("kind") == "restart" and t.get("node") == name for t in trace)
    report = (run / "report.md").read_text() if (run / "report.md").is_file() else ""
    judged = next((line.split(":", 1)[1].strip() for line in report.splitlines()
                   if line.startswith("Task progress")), "no report")
    admitted = {str(t["event_id"]) for t in trace
                if t.get("kind") == "memory" and t.get("verdict") == "admit" and t.get("event_id")}
    stored = _stored_event_ids(run / "memory")
    check = subprocess.run([mimir, "memory", "check", str(run / "memory")], capture_output=True,
                           text=True, check=False)
    return ChaosResult(name, killed.get("killed_at"), restarted, proc.returncode, judged,
                       len(admitted), len(admitted - stored), check.returncode == 0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, required=True, help="folder for the run folders")
    parser.add_argument("--nodes", nargs="+", default=RESTARTABLE, choices=RESTARTABLE,
                        help="nodes to kill, one run each (default: every restartable node)")
    args = parser.parse_args(argv)
    mimir = str(Path(sys.executable).parent / "mimir")
    results = []
    for name in args.nodes:
        folder = args.runs / name
        if folder.exists() and any(folder.iterdir()):
            print(f"{folder} is not empty; give --runs a fresh folder", file=sys.stderr)
            return 2
        folder.mkdir(parents=True, exist_ok=True)
        print(f"killing {name} ...", file=sys.stderr, flush=True)
        results.append(run_one(folder, name, mimir))
    print("| node killed | killed at (s) | started again | judged | exit status | admitted "
          "writes | lost | memory check |")
    print("|---|---:|---|---|---:|---:|---:|---|")
    for r in results:
        at = f"{r.killed_at:.0f}" if r.killed_at is not None else "never"
        print(f"| {r.node} | {at} | {'yes' if r.restarted else 'no'} | {r.judged} | "
              f"{r.exit_status} | {r.admitted} | {r.lost} | {'ok' if r.memory_ok else 'FAILED'} |")
    return 1 if any(r.lost or not r.memory_ok for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
