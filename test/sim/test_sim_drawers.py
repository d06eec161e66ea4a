"""Drawers: an unlocked drawer slides open under the pull, a locked one resists it."""

from __future__ import annotations

import os

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np
import pytest
from scene_helpers import sim_of

from mimir_sim.errors import PrimitiveError, UnknownEntityError
from mimir_sim.judge import judge_instruction
from mimir_sim.sim import KitchenSim

DRAWERS = {
    "name": "drawer_bench",
    "seed": 3,
    "kitchen": {"wall_x": 1.25, "room_x": [-1.5, 1.25], "room_y": [-1.3, 1.3]},
    "fixtures": [
        {"id": "drawer_1", "type": "drawer", "y": 0.45, "width": 0.55},
        {"id": "drawer_2", "type": "drawer", "y": -0.15, "width": 0.55, "locked": True},
        {"id": "counter_1", "type": "counter", "y": -0.8, "width": 0.6},
    ],
    "objects": [{"id": "cup_1", "category": "cup", "in": "drawer_1", "slot": [0.5, 0.5]}],
    "instructions": [
        {
            "text": "Open the top drawer.",
            "family": "manipulation",
            "success": [{"type": "fixture_opened", "fixture": "drawer_1"}],
        }
    ],
}


@pytest.fixture(scope="module")
def sim(tmp_path_factory, tidybot_dir):  # type: ignore[no-untyped-def]
    with sim_of(DRAWERS, tmp_path_factory.mktemp("drawers"), tidybot_dir, seed=6) as s:
        yield s


def test_unlocked_drawer_slides_open_and_closes(sim: KitchenSim) -> None:
    sim.reset("drawer_1")
    layout = sim.scene.fixtures["drawer_1"]
    assert layout.is_drawer and layout.joint == "drawer_1_slide"
    joint = sim.model.joint("drawer_1_slide")
    assert joint.type[0] == 2  # mjJNT_SLIDE
    assert np.allclose(sim.model.jnt_axis[joint.id], [-1.0, 0.0, 0.0])
    box_before = sim.entity_state("drawer_1_drawer")
    handle_before = sim.entity_state("drawer_1_handle")
    cup_before = sim.object_position("cup_1")

    record = sim.open("drawer_1")
    assert record.success, record.outcome
    assert record.measurements["fingers_on_handle"] == 2.0
    opening = sim.fixture_opening("drawer_1")
    assert opening >= sim.config.open_threshold_drawer
    # the pull moved the drawer, its handle and its contents straight out along the slide (-x)
    for before, after in (
        (box_before.position, sim.entity_state("drawer_1_drawer").position),
        (handle_before.position, sim.entity_state("drawer_1_handle").position),
        (cup_before, sim.object_position("cup_1")),
    ):
        shift = np.subtract(after, before)
        assert shift[0] == pytest.approx(-opening, abs=0.005)
        assert abs(shift[1]) < 0.003 and abs(shift[2]) < 0.003
    assert sim.object_fixture("cup_1") == "drawer_1"
    # the recorded window shows the slide moving while the hand held the handle
    openings = [s.fixture_opening["drawer_1"] for s in record.samples]
    assert openings[0] < 0.005 and max(openings) >= opening - 0.005
    assert sim.is_open("drawer_1")
    assert judge_open(sim)

    closed = sim.close_fixture("drawer_1")
    assert closed.success, closed.outcome
    assert sim.fixture_opening("drawer_1") <= sim.config.close_threshold_drawer


def judge_open(sim: KitchenSim) -> bool:
    return judge_instruction(sim, sim.scene.scenario.instructions[0]).success


def test_locked_drawer_resists_the_pull(sim: KitchenSim) -> None:
    sim.reset("drawer_2")
    record = sim.open("drawer_2")
    assert not record.success
    assert record.measurements["fingers_on_handle"] == 2.0
    assert abs(record.measurements["opening_after"]) < 0.01
    assert max(s.fixture_opening["drawer_2"] for s in record.samples) < 0.01
    assert max(record.measurements["peak_pull_force"], record.measurements["peak_handle_force"]) > 5
    assert "did not move" in record.outcome
    assert not sim.is_open("drawer_2")


def test_drawer_bad_input(sim: KitchenSim) -> None:
    with pytest.raises(PrimitiveError):
        sim.open("counter_1")  # nothing to pull
    with pytest.raises(UnknownEntityError):
        sim.open("drawer_9")
    sim.reset("drawer_1")
    assert sim.move_to((-1.0, -0.9, 0.0)).reached
    refused = sim.open("drawer_1")
    assert not refused.success and "out of reach" in refused.outcome
    assert sim.fixture_opening("drawer_1") < 0.005
