"""A simulator built from a small scenario written in a test (a dict in the scenario format)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from mimir_sim.config import SimConfig
from mimir_sim.scenario import default_scenarios_dir, load_scenario
from mimir_sim.scene import build_scene
from mimir_sim.sim import KitchenSim


@contextmanager
def sim_of(data: Mapping[str, Any], folder: Path, tidybot_dir: Path,
           seed: int) -> Iterator[KitchenSim]:
    """The scenario ``data`` written to ``folder`` and loaded (with the repository's catalog),
    its scene simulated with ``seed``; shut down afterwards."""
    path = folder / f"{data['name']}.yaml"
    path.write_text(yaml.safe_dump(dict(data)), encoding="utf-8")
    scenario = load_scenario(path, scenarios_dir=default_scenarios_dir())
    sim = KitchenSim(build_scene(scenario, tidybot_dir), SimConfig(seed=seed))
    try:
        yield sim
    finally:
        sim.shutdown()


@contextmanager
def kitchen_sim(tidybot_dir: Path, start: tuple[float, float, float] | None = None,
                seed: int = 2) -> Iterator[KitchenSim]:
    """The Locked-and-Unlocked kitchen simulated with ``seed``, the base reset to ``start``
    (x, y, yaw) when given; shut down afterwards."""
    sim = KitchenSim(build_scene(load_scenario("locked_unlocked"), tidybot_dir),
                     SimConfig(seed=seed))
    try:
        if start is not None:
            sim.reset(start)
        yield sim
    finally:
        sim.shutdown()
