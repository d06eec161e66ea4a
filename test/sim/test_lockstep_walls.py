"""The executor along a wall of a generated layout (seed 1001 of Locked-and-Unlocked), in
lockstep with the simulator: after opening and inspecting the middle cabinet and trying the
locked one at one end, it goes to the cabinet at the other end, whose remembered centre lies in
front of its front and off its middle (as memory held it in a node-mode run), and opens it.

From the locked cabinet the line to that centre runs along the wall; a stance on that line
faced the open middle cabinet, and no handle of the target was in view. The stance now takes
the wall's normal from the fronts the robot measured."""

from __future__ import annotations

import os

os.environ.setdefault("MUJOCO_GL", "egl")

from collections.abc import Iterator
from pathlib import Path

import pytest
from lockstep_helpers import lockstep_on

from mimir_robot.requests import PrimitiveRequest, TargetSpec
from mimir_sim.config import SimConfig
from mimir_sim.lockstep import LockstepRobot
from mimir_sim.scenario import load_scenario
from mimir_sim.scene import build_scene
from mimir_sim.sim import KitchenSim

SEED = 1001


@pytest.fixture(scope="module")
def robot(tidybot_dir: Path) -> Iterator[LockstepRobot]:
    sim = KitchenSim(build_scene(load_scenario("locked_unlocked"), tidybot_dir, seed=SEED),
                     SimConfig())
    with lockstep_on(sim) as lockstep:
        yield lockstep


def target(robot: LockstepRobot, fixture: str,
           at: tuple[float, float, float] | None = None) -> TargetSpec:
    x, y, z = at or tuple(float(v) for v in robot.sim.entity_position(fixture))
    return TargetSpec(fixture.replace("cab_", "cabinet_"), "cabinet", (x, y, z))


def test_a_cabinet_reached_along_the_wall_is_faced_and_opened(robot: LockstepRobot) -> None:
    sim = robot.sim
    layout = {fid: fx for fid, fx in sim.scene.fixtures.items() if fx.type == "upper_cabinet"}
    by_y = sorted(layout, key=lambda fid: layout[fid].center_y)
    locked = [fid for fid in by_y if layout[fid].locked]
    assert locked in ([by_y[0]], [by_y[-1]]), "the layout this test was written for changed"
    middle, far = by_y[1], (by_y[-1] if locked == [by_y[0]] else by_y[0])
    steps = [("move_to", middle), ("open", middle), ("inspect", middle),
             ("move_to", locked[0]), ("open", locked[0])]
    codes = [robot.run(PrimitiveRequest(p, target(robot, f))).code for p, f in steps]
    assert codes == ["REACHED", "OPENED", "INSPECTED", "REACHED", "NO_MOTION"], codes
    # memory's centre of the far cabinet: 5 cm in front of its front, 12 cm toward the middle
    fx = layout[far]
    toward = 0.12 if layout[middle].center_y < fx.center_y else -0.12
    remembered = (fx.front_x - 0.05, fx.center_y - toward, 1.23)
    moved = robot.run(PrimitiveRequest("move_to", target(robot, far, remembered)))
    assert moved.code == "REACHED", moved
    x, y, _yaw = sim.base_pose()  # truth, read as the judge
    assert abs(y - fx.center_y) < 0.08, (x, y)
    opened = robot.run(PrimitiveRequest("open", target(robot, far, remembered)))
    assert opened.code == "OPENED", opened
    assert sim.is_open(far)
