"""Simulation speed and primitive timings of the kitchen simulation (run on demand).

Usage: MUJOCO_GL=egl python benchmarks/bench_sim.py [--scenario locked_unlocked] [--seconds 5]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("MUJOCO_GL", "egl")

from mimir_sim.scenario import load_scenario
from mimir_sim.sim import KitchenSim


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scenario", default="locked_unlocked")
    parser.add_argument("--seconds", type=float, default=5.0, help="simulated seconds per run")
    parser.add_argument("--width", type=int, default=640)
    parser.add_argument("--height", type=int, default=480)
    parser.add_argument("--rate", type=float, default=5.0, help="camera rate (Hz)")
    args = parser.parse_args()
    sim = KitchenSim.from_scenario(load_scenario(args.scenario))
    steps = round(args.seconds / sim.model.opt.timestep)

    t0 = time.perf_counter()
    sim.step(steps)
    wall = time.perf_counter() - t0
    print(f"physics only: {args.seconds / wall:.1f} sim s per wall s")

    period = round(1.0 / args.rate / sim.model.opt.timestep)
    t0 = time.perf_counter()
    for i in range(steps):
        sim.step()
        if i % period == 0:
            for cam in ("base", "wrist", "pole"):
                sim.render(cam, args.width, args.height)
    wall = time.perf_counter() - t0
    print(
        f"physics + 3 cameras {args.width}x{args.height} (color, depth, segmentation) at "
        f"{args.rate:g} Hz: {args.seconds / wall:.2f} sim s per wall s"
    )

    start = sim.scene.scenario.start_at
    sim.reset(start)
    timings: list[tuple[str, float, float, bool]] = []

    def timed(label: str, func, *a) -> None:  # type: ignore[no-untyped-def]
        s0, w0 = sim.time, time.perf_counter()
        result = func(*a)
        ok = bool(getattr(result, "success", getattr(result, "reached", False)))
        timings.append((label, sim.time - s0, time.perf_counter() - w0, ok))

    fixtures = [f for f, fx in sim.scene.fixtures.items() if fx.is_openable]
    for fid in fixtures:
        timed(f"move_to({fid})", sim.move_to, fid)
        timed(f"open({fid})", sim.open, fid)
        if sim.is_open(fid):
            timed(f"inspect({fid})", sim.inspect, fid)
    for label, sim_s, wall_s, ok in timings:
        print(f"{label:28s} sim {sim_s:6.2f} s  wall {wall_s:6.2f} s  success={ok}")
    sim.shutdown()


if __name__ == "__main__":
    main()
