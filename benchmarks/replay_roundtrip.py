"""Round trip: a ``mimir sim`` run recorded with ``mimir record``, replayed with ``--fast``.

Starts ``mimir record`` (the default topics of the simulation's three cameras), runs one
``mimir sim`` scenario beside it on the same ROS domain, stops the recorder, replays the bag with
``mimir replay --fast`` and the simulation's deployment file, and compares the replayed world
memory with the live run's: the label sets, node counts per label (within one) and, for every
live node, the nearest replayed node of its label (within 5 cm). Prints the figures and exits 1
when a criterion fails. About as long as the scenario (Moved Object: a few minutes).

    .venv/bin/python benchmarks/replay_roundtrip.py --scenario moved_object --runs runs/roundtrip
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from mimir.paths import config_file
from mimir_memory.config import load_memory_config
from mimir_memory.world import WorldMemory

REPO = Path(__file__).resolve().parents[1]
MIMIR = [sys.executable, "-m", "mimir.cli"]


def _memory(folder: Path) -> WorldMemory:
    return WorldMemory.open(folder / "world.db", readonly=True,
                            config=load_memory_config(config_file("memory.yaml")))


def _by_label(world: WorldMemory) -> dict[str, list[np.ndarray]]:
    out: dict[str, list[np.ndarray]] = {}
    for node in world.state.nodes.values():
        out.setdefault(node.label, []).append(np.asarray(node.centroid))
    return out


def compare(live: WorldMemory, replayed: WorldMemory, tolerance: float) -> list[str]:
    """The failures of the round-trip criteria (empty: all hold); prints the figures."""
    a, b = _by_label(live), _by_label(replayed)
    failures = []
    if sorted(a) != sorted(b):
        failures.append(f"label sets differ: only live {sorted(set(a) - set(b))}, only "
                        f"replayed {sorted(set(b) - set(a))}")
    worst = 0.0
    for label in sorted(set(a) & set(b)):
        distances = [min(float(np.linalg.norm(c - r)) for r in b[label]) for c in a[label]]
        worst = max(worst, *distances)
        line = (f"  {label}: live {len(a[label])} nodes, replayed {len(b[label])}; nearest "
                f"replayed centroid max {max(distances) * 100:.1f} cm")
        print(line)
        if abs(len(a[label]) - len(b[label])) > 1:
            failures.append(f"{label}: {len(a[label])} live nodes, {len(b[label])} replayed")
        if max(distances) > tolerance:
            failures.append(f"{label}: a live node is {max(distances) * 100:.1f} cm from the "
                            "nearest replayed one")
    print(f"labels {len(a)} live, {len(b)} replayed; worst centroid distance "
          f"{worst * 100:.1f} cm (limit {tolerance * 100:.0f} cm)")
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", default="moved_object")
    parser.add_argument("--profile", default="ideal")
    parser.add_argument("--runs", type=Path, default=REPO / "runs" / "roundtrip")
    parser.add_argument("--tolerance", type=float, default=0.05)
    args = parser.parse_args()
    args.runs.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    bag = args.runs / f"bag-{stamp}"
    sim_runs = args.runs / f"sim-{stamp}"
    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    recorder = subprocess.Popen([*MIMIR, "record", "--output", str(bag)], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(3.0)  # let the recorder join the graph before the simulation starts
    try:
        sim = subprocess.run([*MIMIR, "sim", "--scenario", args.scenario, "--profile",
                              args.profile, "--runs", str(sim_runs), "--quiet"], env=env,
                             check=False)
    finally:
        recorder.send_signal(signal.SIGINT)
        out, _ = recorder.communicate(timeout=120)
    print(out.strip().splitlines()[-1] if out.strip() else "recorder printed nothing")
    if recorder.returncode != 0:
        print(out)
        return 1
    (run,) = [p for p in sim_runs.iterdir() if p.is_dir()]
    replayed = args.runs / f"replayed-{stamp}"
    began = time.monotonic()
    replay = subprocess.run([*MIMIR, "replay", str(bag), "--fast", "--memory", str(replayed),
                             "--params", str(REPO / "config" / "mimir_sim.yaml"),
                             "--quiet"], env=env, check=False, capture_output=True, text=True)
    print(replay.stdout.strip())
    print(f"replay took {time.monotonic() - began:.1f} s; the simulation exited {sim.returncode}")
    if replay.returncode != 0:
        print(replay.stderr)
        return 1
    failures = compare(_memory(run / "memory"), _memory(replayed), args.tolerance)
    for failure in failures:
        print(f"FAIL {failure}")
    print("round trip: " + ("PASS" if not failures else "FAIL"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
