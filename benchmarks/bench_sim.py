"""Simulation speed and primitive timings of the kitchen simulation (run on demand).

Figures: scene build time; sim seconds per wall second for physics alone, with a state-reading
step listener, and with the three cameras (colour, depth, segmentation) rendered by a step
listener at a configured rate (the way the bridge node drives them); the arm IK's time per
solve for near targets (as streamed set-points are) and per miss; sim and wall time of
move_to / open / inspect on every openable fixture, and optionally of one pick and place.

Usage:
    MUJOCO_GL=egl python benchmarks/bench_sim.py [--scenario long_horizon] [--seconds 5]
        [--width 640 --height 480 --rate 5] [--pick ketchup_1 --place counter_1]
        [--config config/sim.yaml] [--no-primitives]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np

from mimir_sim.config import SimConfig, load_sim_config
from mimir_sim.rendering import CAMERAS
from mimir_sim.scenario import load_scenario
from mimir_sim.scene import build_scene
from mimir_sim.sim import KitchenSim


def _speed(sim: KitchenSim, seconds: float) -> float:
    """Sim seconds per wall second over ``seconds`` of simulated time."""
    t0 = time.perf_counter()
    sim.step_seconds(seconds)
    return seconds / (time.perf_counter() - t0)


def _speed_with(
    sim: KitchenSim, seconds: float, listener: Callable[[float], None], rate: float
) -> float:
    """:func:`_speed` with ``listener`` called at ``rate`` (Hz of simulated time)."""
    handle = sim.add_step_listener(listener, 1.0 / rate)
    try:
        return _speed(sim, seconds)
    finally:
        sim.remove_step_listener(handle)


def _ik_figures(sim: KitchenSim, solves: int = 300) -> None:
    """Time the arm IK: targets a few centimetres from the hand converge in a few iterations;
    a target out of reach runs every iteration the solver allows before it is called a miss."""
    site = sim.body.site
    pos = sim.world.data.site_xpos[site].copy()
    rot = sim.world.data.site_xmat[site].reshape(3, 3).copy()
    rng = np.random.default_rng(0)
    near = [pos + rng.normal(0.0, 0.03, 3) for _ in range(solves)]
    far = [pos + np.array([3.0, 0.0, 0.0]) for _ in range(max(1, solves // 10))]
    for label, targets in (("near target", near), ("out of reach", far)):
        start = time.perf_counter()
        hits = sum(sim.control.ik(p, rot) is not None for p in targets)
        per = (time.perf_counter() - start) / len(targets) * 1e6
        print(f"arm IK, {label}: {per:.0f} us per solve ({hits}/{len(targets)} converged)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scenario", default="locked_unlocked")
    parser.add_argument("--seconds", type=float, default=5.0, help="simulated seconds per run")
    parser.add_argument("--width", type=int, default=640)
    parser.add_argument("--height", type=int, default=480)
    parser.add_argument("--rate", type=float, default=5.0, help="camera rate (Hz of sim time)")
    parser.add_argument("--state-rate", type=float, default=20.0, help="state listener rate (Hz)")
    parser.add_argument("--config", default=None, help="simulation settings YAML")
    parser.add_argument("--pick", default=None, help="object to pick after the fixture sweep")
    parser.add_argument("--place", default=None, help="fixture to place the picked object on")
    parser.add_argument("--no-primitives", action="store_true", help="speed figures only")
    args = parser.parse_args()

    config = load_sim_config(args.config) if args.config else SimConfig()
    t0 = time.perf_counter()
    scenario = load_scenario(args.scenario)
    t1 = time.perf_counter()
    scene = build_scene(scenario, view_mesh_faces=config.view_mesh_faces)
    t2 = time.perf_counter()
    sim = KitchenSim(scene, config)
    t3 = time.perf_counter()
    print(
        f"scenario {scenario.name}: {len(scene.fixtures)} fixtures, {len(scene.objects)} objects, "
        f"{scene.model.ngeom} geoms, {scene.model.nbody} bodies"
    )
    print(
        f"load {t1 - t0:.2f} s, build (MJCF + compile) {t2 - t1:.2f} s, "
        f"simulator + reset {t3 - t2:.2f} s"
    )

    print(f"physics only: {_speed(sim, args.seconds):.1f} sim s per wall s")

    reads = [0]

    def read_state(_now: float) -> None:
        sim.state()
        reads[0] += 1

    speed = _speed_with(sim, args.seconds, read_state, args.state_rate)
    print(
        f"physics + state listener at {args.state_rate:g} Hz ({reads[0]} calls): "
        f"{speed:.1f} sim s per wall s"
    )

    frames = [0]

    def render_all(_now: float) -> None:
        for cam in CAMERAS:
            sim.render(cam, args.width, args.height)
            frames[0] += 1

    sim.render("pole", args.width, args.height)  # create the GL context outside the timing
    speed = _speed_with(sim, args.seconds, render_all, args.rate)
    print(
        f"physics + {len(CAMERAS)} cameras {args.width}x{args.height} (colour, depth, "
        f"segmentation) at {args.rate:g} Hz ({frames[0]} frames): {speed:.2f} sim s per wall s"
    )
    _ik_figures(sim)
    if args.no_primitives:
        sim.shutdown()
        return

    sim.reset(scenario.start_at)
    timings: list[tuple[str, float, float, bool, str]] = []

    def timed(label: str, func: Callable[[], object]) -> None:
        s0, w0 = sim.time, time.perf_counter()
        result = func()
        ok = bool(getattr(result, "success", getattr(result, "reached", False)))
        outcome = str(getattr(result, "outcome", ""))
        timings.append((label, sim.time - s0, time.perf_counter() - w0, ok, outcome))

    for fid, fx in sim.scene.fixtures.items():
        if not fx.is_openable:
            continue
        timed(f"move_to({fid})", lambda f=fid: sim.move_to(f))
        timed(f"open({fid})", lambda f=fid: sim.open(f))
        if sim.is_open(fid):
            timed(f"inspect({fid})", lambda f=fid: sim.inspect(f))
    if args.pick:
        home = sim.object_fixture(args.pick)
        if home is not None:
            timed(f"move_to({home})", lambda: sim.move_to(home))
        timed(f"pick({args.pick})", lambda: sim.pick(args.pick))
        if args.place and sim.holding == args.pick:
            timed(f"place({args.pick}->{args.place})", lambda: sim.place(args.pick, args.place))
    for label, sim_s, wall_s, ok, outcome in timings:
        print(f"{label:32s} sim {sim_s:6.2f} s  wall {wall_s:6.2f} s  success={ok}  {outcome}")
    total_sim = sum(t[1] for t in timings)
    total_wall = sum(t[2] for t in timings)
    print(f"primitives: {total_sim:.1f} sim s in {total_wall:.1f} wall s")
    sim.shutdown()


if __name__ == "__main__":
    main()
