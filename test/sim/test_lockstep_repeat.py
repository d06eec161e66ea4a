"""The lockstep mode repeats exactly: same layout seed, noise profile and code, same run.

Each episode builds a fresh simulator for a generated layout, runs the robot-side executor in
process under the realistic profile (sensor noise, odometry drift, hand error, localisation
from the wall tags) and opens an unlocked cabinet. Two episodes with one seed must agree on
every outcome, every streamed sample and the final physical state, bit for bit; another seed
must not.
"""

from __future__ import annotations

import os

os.environ.setdefault("MUJOCO_GL", "egl")

from pathlib import Path
from typing import Any

import numpy as np

from mimir_robot.requests import PrimitiveRequest, TargetSpec
from mimir_sim.bridge_config import label_map_for, resolve_vocabulary
from mimir_sim.lockstep import LockstepRobot
from mimir_sim.noise import load_noise_profile
from mimir_sim.scenario import load_scenario
from mimir_sim.sim import KitchenSim


def _episode(tidybot_dir: Path, seed: int) -> dict[str, Any]:
    sim = KitchenSim.from_scenario(load_scenario("locked_unlocked"), tidybot_dir, seed)
    robot = LockstepRobot(sim, label_map=label_map_for(resolve_vocabulary("kitchen")),
                          noise=load_noise_profile("realistic"), noise_seed=seed)
    try:
        robot.reset()
        fixture = next(f.id for f in sim.scene.scenario.fixtures
                       if f.type == "upper_cabinet" and not f.locked)
        x, y, z = (float(v) for v in sim.entity_position(fixture))
        target = TargetSpec("cabinet_a", "cabinet", (x, y, z))
        outcomes = [robot.run(PrimitiveRequest(name, target)) for name in ("move_to", "open")]
        return {
            "outcomes": [(o.code, o.message, sorted(o.measurements.items())) for o in outcomes],
            "samples": len(robot.samples),
            "last_sample": repr(robot.samples[-1]) if robot.samples else "",
            "qpos": np.array(sim.data.qpos),
            "time": sim.time,
        }
    finally:
        robot.close()
        sim.shutdown()


def test_lockstep_runs_repeat_exactly_and_seeds_differ(tidybot_dir: Path) -> None:
    first = _episode(tidybot_dir, 3)
    again = _episode(tidybot_dir, 3)
    assert first["outcomes"] == again["outcomes"]
    assert first["samples"] == again["samples"] and first["last_sample"] == again["last_sample"]
    assert first["time"] == again["time"]
    assert np.array_equal(first["qpos"], again["qpos"])
    other = _episode(tidybot_dir, 4)
    assert not np.array_equal(first["qpos"], other["qpos"])
