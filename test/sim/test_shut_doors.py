"""A door pushed to after it was opened: rendered depth tells a shut door from an open one.

The analyzer trusts memory's "open" only while a look reaches the back of the fixture
(``reach_inside``). Here the simulator renders a lower unit (with the counter slab on top) and
an upper one, open and then shut, from the robot's pole and wrist cameras; the box handed to
the percept is the one memory keeps for an opened fixture, carcass and swung door together.
"""

from __future__ import annotations

import os

os.environ.setdefault("MUJOCO_GL", "egl")

import mujoco
import numpy as np
import pytest
from scene_helpers import sim_of

from mimir_planner.reasoning import Box3D, CameraFrame, load_reasoning_config
from mimir_planner.reasoning.percepts import reach_inside, shut_in_view
from mimir_sim.noise import SensorNoise, load_noise_profile
from mimir_sim.sim import KitchenSim

UNITS = {
    "name": "shut_doors",
    "seed": 5,
    "kitchen": {"wall_x": 1.25, "room_x": [-1.5, 1.25], "room_y": [-1.3, 1.3]},
    "fixtures": [
        {"id": "cab_low", "type": "lower_cabinet", "y": -0.4, "width": 0.55, "hinge": "left"},
        {"id": "cab_up", "type": "upper_cabinet", "y": 0.5, "width": 0.55, "hinge": "left"},
    ],
    "objects": [
        {"id": "sponge_1", "category": "sponge", "in": "cab_low", "slot": [0.5, 0.5]},
        {"id": "cup_1", "category": "cup", "in": "cab_up", "slot": [0.5, 0.5]},
    ],
    "instructions": [{"text": "Open the lower cabinet.", "family": "manipulation",
                      "success": [{"type": "fixture_opened", "fixture": "cab_low"}]}],
}
PERCEPTS = load_reasoning_config().percepts


@pytest.fixture(scope="module")
def sim(tmp_path_factory, tidybot_dir):  # type: ignore[no-untyped-def]
    with sim_of(UNITS, tmp_path_factory.mktemp("shut"), tidybot_dir, seed=5) as s:
        yield s


def _views(sim: KitchenSim, noise: SensorNoise | None = None) -> list[CameraFrame]:
    """The robot's three cameras at the size the simulated robot streams, twice, 0.5 s apart,
    as the cameras deliver them under ``noise`` (true views without it)."""
    out = []
    for _ in range(2):
        for camera in ("base", "pole", "wrist"):
            f = sim.render(camera, 320, 240, color=True, depth=True)
            if noise is not None:
                f = noise.view(f)
            assert f.color is not None and f.depth is not None
            out.append(CameraFrame(camera, f.stamp, f.color, f.depth, f.info.k, f.pose))
        sim.step_seconds(0.5)
    return out


def _push_to(sim: KitchenSim, fixture_id: str) -> None:
    """Swing the door shut as a passing base would, without the robot's close."""
    joint = sim.scene.fixtures[fixture_id].joint
    assert joint is not None
    sim.data.qpos[sim.model.joint(joint).qposadr[0]] = 0.0
    sim.data.qvel[sim.model.joint(joint).dofadr[0]] = 0.0
    mujoco.mj_forward(sim.model, sim.data)
    sim.step(20)


@pytest.mark.parametrize("profile", ["ideal", "realistic"])
@pytest.mark.parametrize("fixture_id", ["cab_low", "cab_up"])
def test_an_open_unit_shows_its_back_and_a_pushed_to_one_does_not(
        sim: KitchenSim, fixture_id: str, profile: str) -> None:
    # the realistic profile's depth noise drops pixels (dark, saturated, occlusion edges) and
    # jitters the rest by centimetres: it never puts points past a shut door, which is why a
    # few points at the back are enough to call a unit open (interior_back_min_pixels)
    noise = SensorNoise(load_noise_profile(profile), seed=5)
    sim.reset(fixture_id)
    assert sim.open(fixture_id).success
    lo, hi = sim.entity_box(fixture_id)
    door_lo, door_hi = sim.entity_box(f"{fixture_id}_door")
    box = Box3D(np.minimum(lo, door_lo), np.maximum(hi, door_hi))
    opened = _views(sim, noise)
    counts = [reach_inside(f, box, PERCEPTS) for f in opened]
    assert max(c or 0 for c in counts) >= 10 * PERCEPTS.depth_min_valid_pixels, counts
    assert PERCEPTS.interior_stride_px == 1
    assert shut_in_view(opened, box, PERCEPTS) is False
    _push_to(sim, fixture_id)
    assert not sim.is_open(fixture_id)
    shut = _views(sim, noise)
    counts = [reach_inside(f, box, PERCEPTS) for f in shut]
    assert all(c == 0 for c in counts if c is not None), counts
    assert shut_in_view(shut, box, PERCEPTS) is True
