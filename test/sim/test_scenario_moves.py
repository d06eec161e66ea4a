"""Objects the scenario moves between instructions: the ``moves`` key, relocating an object in
the simulator, what the judge sees afterwards, and the instruction desk applying the moves."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np
import pytest
import yaml

from mimir_sim.answer_binding import EntityResolver
from mimir_sim.errors import MalformedScenarioError, PrimitiveError, UnknownEntityError
from mimir_sim.instruction_desk import (
    MOVE_REFUSED,
    NONE,
    AppliedMove,
    InstructionDesk,
    NamedEntity,
)
from mimir_sim.judge import check_criterion
from mimir_sim.scenario import (
    CriterionSpec,
    MoveSpec,
    Scenario,
    available_scenarios,
    default_scenarios_dir,
    load_scenario,
)
from mimir_sim.scene import kitchen_mjcf, start_pose_for
from mimir_sim.scene_objects import place_objects, slot_position
from mimir_sim.sim import KitchenSim

SCENARIO = "moved_object"
MOVE_KEY = "instructions[1].moves[0]"


def _data() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(
        (default_scenarios_dir() / f"{SCENARIO}.yaml").read_text(encoding="utf-8")
    )
    return data


def _load(tmp_path: Path, data: object) -> Scenario:
    """Load ``data`` as a scenario file beside a copy of the catalog."""
    path = tmp_path / "case.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    (tmp_path / "catalog.yaml").write_text(
        (default_scenarios_dir() / "catalog.yaml").read_text(encoding="utf-8"), encoding="utf-8"
    )
    return load_scenario(path, scenarios_dir=tmp_path)


def _yaw(sim: KitchenSim, object_id: str) -> float:
    joint = sim.model.joint(f"{object_id}/free")
    w, x, y, z = (float(v) for v in sim.data.qpos[joint.qposadr[0] + 3 : joint.qposadr[0] + 7])
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def _inside(point: np.ndarray, low: tuple[float, ...], high: tuple[float, ...]) -> bool:
    return bool(np.all(point >= np.asarray(low)) and np.all(point <= np.asarray(high)))


@pytest.fixture
def sim(tidybot_dir: Path) -> Iterator[KitchenSim]:
    """A fresh simulator of the scenario (relocating changes its scene, so none is shared)."""
    s = KitchenSim.from_scenario(load_scenario(SCENARIO), tidybot_dir)
    try:
        yield s
    finally:
        s.shutdown()


# ------------------------------------------------------------------------------------ parsing


def test_moved_object_scenario_content() -> None:
    scenario = load_scenario(SCENARIO)
    assert SCENARIO in available_scenarios()
    first, second = scenario.instructions
    assert first.moves == ()
    assert second.moves == (MoveSpec(object="mug_1", fixture="counter_2", slot=(0.6, 0.4)),)
    mug = next(o for o in scenario.objects if o.id == "mug_1")
    assert mug.category in scenario.catalog
    # the robot starts facing the mug, and starts there again when the mug has gone
    assert scenario.start_at == mug.fixture == second.start_at == "counter_1"
    for instruction in scenario.instructions:
        assert instruction.text == "Find the mug."
        assert instruction.success == (CriterionSpec("object_discovered", object="mug_1"),)
    # the scenarios written before moves existed carry none
    for name in available_scenarios():
        if name != SCENARIO:
            assert all(not i.moves for i in load_scenario(name).instructions)


def test_a_move_on_the_first_instruction_is_allowed(tmp_path: Path) -> None:
    data = _data()
    data["instructions"][0]["moves"] = [{"object": "sponge_1", "in": "counter_1", "slot": [0, 1]}]
    scenario = _load(tmp_path, data)
    assert scenario.instructions[0].moves == (MoveSpec("sponge_1", "counter_1", (0.0, 1.0)),)


def _set_move(field: str, value: object) -> Callable[[dict[str, Any]], None]:
    return lambda d: d["instructions"][1]["moves"][0].__setitem__(field, value)


def _drop_move_key(field: str) -> Callable[[dict[str, Any]], None]:
    return lambda d: d["instructions"][1]["moves"][0].pop(field)


@pytest.mark.parametrize(
    ("mutate", "key"),
    [
        (_set_move("object", "teapot_9"), f"{MOVE_KEY}.object"),
        (_set_move("in", "cab_99"), f"{MOVE_KEY}.in"),
        (_set_move("object", "counter_2"), f"{MOVE_KEY}.object"),  # a fixture is no object
        (_set_move("in", "sponge_1"), f"{MOVE_KEY}.in"),  # an object is no fixture
        (_set_move("slot", [0.5, 1.2]), f"{MOVE_KEY}.slot"),
        (_set_move("slot", [-0.1, 0.5]), f"{MOVE_KEY}.slot"),
        (_set_move("slot", [0.5]), f"{MOVE_KEY}.slot"),
        (_set_move("slot", [0.5, 0.5, 0.5]), f"{MOVE_KEY}.slot"),
        (_set_move("slot", "middle"), f"{MOVE_KEY}.slot"),
        (_set_move("slot", [0.5, "back"]), f"{MOVE_KEY}.slot[1]"),
        (_set_move("slot", [True, 0.5]), f"{MOVE_KEY}.slot[0]"),
        (_drop_move_key("slot"), f"{MOVE_KEY}.slot"),
        (_drop_move_key("object"), f"{MOVE_KEY}.object"),
        (_drop_move_key("in"), f"{MOVE_KEY}.in"),
        (_set_move("where", "counter_2"), f"{MOVE_KEY}.where"),
        (lambda d: d["instructions"][1].__setitem__("moves", {"object": "mug_1"}),
         "instructions[1].moves"),
        (lambda d: d["instructions"][1].__setitem__("moves", ["mug_1"]), MOVE_KEY),
    ],
)
def test_malformed_move_names_the_key(
    tmp_path: Path, mutate: Callable[[dict[str, Any]], None], key: str
) -> None:
    data = _data()
    mutate(data)
    with pytest.raises(MalformedScenarioError) as info:
        _load(tmp_path, data)
    assert info.value.key == key
    assert str(info.value).startswith(key)


# ------------------------------------------------------------------------------------ layout


@pytest.mark.parametrize("name", sorted(available_scenarios()))
def test_initial_layout_is_the_slot_position_plus_seeded_jitter(
    name: str, tidybot_dir: Path
) -> None:
    """The layout a scene is built with is ``slot_position`` of each slot, jittered from the
    seed; the jitter's amplitude changes nothing else that the seed decides."""
    scenario = load_scenario(name)
    _, _, fixtures, built, seed = kitchen_mjcf(scenario, tidybot_dir)
    assert built == place_objects(scenario, fixtures, np.random.default_rng(seed))
    still = replace(scenario, randomization=replace(scenario.randomization, object_jitter=0.0))
    calm = place_objects(still, fixtures, np.random.default_rng(seed))
    jitter = scenario.randomization.object_jitter
    for obj in scenario.objects:
        if obj.slot is None:
            # unslotted objects are spread evenly across the middle of their fixture
            unslotted = [o.id for o in scenario.objects if o.fixture == obj.fixture and not o.slot]
            k = unslotted.index(obj.id)
            slot = ((k + 1) / (len(unslotted) + 1), 0.5)
        else:
            slot = obj.slot
        exact = slot_position(fixtures[obj.fixture], scenario.catalog[obj.category], slot)
        assert calm[obj.id].pos == exact
        assert replace(calm[obj.id], pos=built[obj.id].pos) == built[obj.id]
        offset = np.abs(np.subtract(built[obj.id].pos, exact))
        assert offset[2] == 0.0 and np.all(offset[:2] <= jitter + 1e-12)


def test_the_simulator_starts_from_the_seeded_layout(sim: KitchenSim) -> None:
    scene = sim.scene
    rebuilt = place_objects(scene.scenario, scene.fixtures, np.random.default_rng(scene.seed))
    assert rebuilt == scene.objects
    for oid, layout in scene.objects.items():
        assert sim.object_fixture(oid) == layout.fixture
        assert np.linalg.norm(sim.object_position(oid)[:2] - layout.pos[:2]) < 0.01


def test_the_mug_is_in_view_at_the_start_and_its_new_place_is_far(sim: KitchenSim) -> None:
    frame = sim.render("pole", 320, 240, segmentation=True)
    assert frame.segmentation is not None
    index = frame.entity_ids.index("mug_1")
    assert int(np.count_nonzero(frame.segmentation == index)) >= 150  # the bridge's threshold
    move = sim.scene.scenario.instructions[1].moves[0]
    target = slot_position(sim.scene.fixtures[move.fixture],
                           sim.scene.scenario.catalog["mug"], move.slot)
    assert np.linalg.norm(np.subtract(target, sim.object_position("mug_1"))) > 0.8


# ------------------------------------------------------------------------------------ relocate


def test_relocate_puts_the_object_in_the_new_fixture_and_truth_follows(sim: KitchenSim) -> None:
    fixture = sim.scene.fixtures["counter_2"]
    cat = sim.scene.scenario.catalog["mug"]
    sim.begin_instruction(0)
    assert sim.inspect("counter_1").success
    discovered = CriterionSpec("object_discovered", object="mug_1")
    assert check_criterion(sim, discovered, 0, ["mug_1"])[0]

    yaw, time = _yaw(sim, "mug_1"), sim.time
    placed = sim.relocate("mug_1", "counter_2", (0.6, 0.4))
    assert placed == slot_position(fixture, cat, (0.6, 0.4))  # no jitter
    assert np.allclose(sim.object_position("mug_1"), placed)
    assert _inside(sim.object_position("mug_1"), fixture.interior_low, fixture.interior_high)
    joint = sim.model.joint("mug_1/free")
    assert not np.any(sim.data.qvel[joint.dofadr[0] : joint.dofadr[0] + 6])
    assert _yaw(sim, "mug_1") == pytest.approx(yaw, abs=1e-6)
    assert sim.time == time  # relocating takes no simulated time

    sim.step_seconds(0.5)
    rest = sim.object_position("mug_1")
    assert _inside(rest, fixture.interior_low, fixture.interior_high)
    assert np.linalg.norm(rest - np.asarray(placed)) < 0.01
    body = sim.model.body("mug_1").id
    assert np.linalg.norm(sim.data.cvel[body]) < 0.05  # at rest
    assert sim.object_fixture("mug_1") == "counter_2"
    assert sim.entity_state("mug_1").fixture == "counter_2"
    assert sim.scene.objects["mug_1"].fixture == "counter_2"
    assert sim.scene.entities["mug_1"].fixture == "counter_2"

    on_new = CriterionSpec("object_on_fixture", fixture="counter_2", object="mug_1")
    on_old = CriterionSpec("object_on_fixture", fixture="counter_1", object="mug_1")
    gone = CriterionSpec("object_removed_from", fixture="counter_1", object="mug_1")
    assert check_criterion(sim, on_new)[0] and not check_criterion(sim, on_old)[0]
    assert check_criterion(sim, gone)[0]
    # looking where the mug was finds nothing; looking where it is now finds it
    sim.begin_instruction(1)
    assert sim.inspect("counter_1").success
    assert not check_criterion(sim, discovered, 1, ["mug_1"])[0]
    assert sim.move_to("counter_2").reached
    assert sim.inspect("counter_2").success
    hit, reason = check_criterion(sim, discovered, 1, ["mug_1"])
    assert hit and "inspected while open" in reason

    # the move is part of the scene: a reset keeps the mug at its new place
    sim.reset()
    assert sim.object_fixture("mug_1") == "counter_2"
    assert np.linalg.norm(sim.object_position("mug_1")[:2] - np.asarray(placed[:2])) < 0.01


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        (("teapot_9", "counter_2", (0.5, 0.5)), UnknownEntityError, "unknown object 'teapot_9'"),
        (("mug_1", "cab_99", (0.5, 0.5)), UnknownEntityError, "unknown fixture 'cab_99'"),
        (("mug_1", "sponge_1", (0.5, 0.5)), UnknownEntityError, "unknown fixture 'sponge_1'"),
        (("counter_1", "counter_2", (0.5, 0.5)), UnknownEntityError, "unknown object"),
        (("mug_1", "counter_2", (0.5, 1.5)), PrimitiveError, r"slot must be two numbers"),
    ],
)
def test_relocate_refuses_unknown_ids_and_bad_slots(
    sim: KitchenSim, args: tuple[str, str, tuple[float, float]], error: type[Exception],
    match: str
) -> None:
    before = sim.object_position("mug_1").copy()
    with pytest.raises(error, match=match):
        sim.relocate(*args)
    assert np.array_equal(sim.object_position("mug_1"), before)
    assert sim.scene.objects["mug_1"].fixture == "counter_1"


def test_relocate_refuses_the_object_the_robot_holds(sim: KitchenSim) -> None:
    assert sim.pick("mug_1").success and sim.holding == "mug_1"
    held = sim.object_position("mug_1").copy()
    with pytest.raises(PrimitiveError, match="holds it"):
        sim.relocate("mug_1", "counter_2", (0.6, 0.4))
    assert np.array_equal(sim.object_position("mug_1"), held)
    assert sim.scene.objects["mug_1"].fixture == "counter_1"
    # another object can still be moved while the hand is full
    sim.relocate("sponge_1", "counter_1", (0.9, 0.5))
    assert sim.object_fixture("sponge_1") == "counter_1"


DRAWER_KITCHEN = {
    "name": "drawer_move",
    "seed": 4,
    "kitchen": {"wall_x": 1.25, "room_x": [-1.5, 1.25], "room_y": [-1.3, 1.3]},
    "fixtures": [
        {"id": "drawer_1", "type": "drawer", "y": 0.3, "width": 0.55},
        {"id": "counter_1", "type": "counter", "y": -0.5, "width": 0.7},
    ],
    "objects": [{"id": "cup_1", "category": "cup", "in": "counter_1", "slot": [0.5, 0.5]}],
    "instructions": [
        {
            "text": "Find the cup.",
            "family": "finding",
            "moves": [{"object": "cup_1", "in": "drawer_1", "slot": [0.5, 0.5]}],
            "success": [{"type": "object_discovered", "object": "cup_1"}],
        }
    ],
}


def test_relocate_into_an_open_drawer_rides_the_drawer(tmp_path: Path, tidybot_dir: Path) -> None:
    scenario = _load(tmp_path, DRAWER_KITCHEN)
    sim = KitchenSim.from_scenario(scenario, tidybot_dir)
    try:
        sim.reset("drawer_1")
        assert sim.open("drawer_1").success
        travel = sim.fixture_opening("drawer_1")
        assert travel > 0.05
        move = scenario.instructions[0].moves[0]
        closed = slot_position(sim.scene.fixtures["drawer_1"], scenario.catalog["cup"], move.slot)
        placed = sim.relocate(move.object, move.fixture, move.slot)
        assert placed == pytest.approx((closed[0] - travel, closed[1], closed[2]))
        sim.step_seconds(0.5)
        assert sim.object_fixture("cup_1") == "drawer_1"
        # a reset closes the drawer with the cup inside it
        sim.reset()
        assert sim.fixture_opening("drawer_1") == pytest.approx(0.0, abs=1e-3)
        assert sim.object_fixture("cup_1") == "drawer_1"
        assert np.linalg.norm(sim.object_position("cup_1")[:2] - np.asarray(closed[:2])) < 0.01
    finally:
        sim.shutdown()


# ------------------------------------------------------------------------------------ the desk


class _Returns:
    """Records the return trips the desk asks for, and where the mug was at each."""

    def __init__(self, sim: KitchenSim) -> None:
        self.sim = sim
        self.poses: list[tuple[float, float, float]] = []
        self.mug_was_on: list[str | None] = []

    def __call__(self, pose: tuple[float, float, float]) -> None:
        self.poses.append(pose)
        self.mug_was_on.append(self.sim.object_fixture("mug_1"))


def test_the_desk_applies_moves_after_the_return_trip(sim: KitchenSim) -> None:
    returns = _Returns(sim)
    desk = InstructionDesk(sim, EntityResolver(sim), 150, returns)
    assert desk.begin(0, "Find the mug.", True).code == NONE
    assert desk.moves == [] and sim.object_fixture("mug_1") == "counter_1"

    result = desk.begin(1, " find the MUG. ", True)
    assert result.code == NONE and result.message == ""
    start = start_pose_for(sim.scene.fixtures["counter_1"])
    assert returns.poses == [start, start]
    assert returns.mug_was_on == ["counter_1", "counter_1"]  # the move came after the trip
    assert sim.instruction == 1
    assert sim.object_fixture("mug_1") == "counter_2"
    placed = slot_position(sim.scene.fixtures["counter_2"], sim.scene.scenario.catalog["mug"],
                           (0.6, 0.4))
    assert desk.moves == [AppliedMove(1, "mug_1", "counter_2", (0.6, 0.4), placed)]
    assert desk.moves[0].describe() == "moved mug_1 to counter_2 slot (0.60, 0.40)"

    # the judge's report says what the scenario moved for that instruction, and only for it
    x, y, z = (float(v) for v in sim.object_position("mug_1"))
    details = json.loads(desk.judge(1, [NamedEntity("mug_7", "mug", (x, y, z))]).details_json)
    assert details["answer_bound"] == {"mug_7": "mug_1"}
    assert details["scenario_moves"] == [
        {"object": "mug_1", "fixture": "counter_2", "slot": [0.6, 0.4], "position": list(placed)}
    ]
    assert json.loads(desk.judge(0).details_json)["scenario_moves"] == []


def test_the_desk_refuses_to_move_what_the_robot_holds(sim: KitchenSim) -> None:
    returns = _Returns(sim)
    desk = InstructionDesk(sim, EntityResolver(sim), 150, returns)
    assert desk.begin(0, "", False).code == NONE
    assert sim.pick("mug_1").success
    refused = desk.begin(1, "", True)
    assert refused.code == MOVE_REFUSED and "holds" in refused.message
    # nothing changed: no return trip, no move, still instruction 0
    assert returns.poses == [] and desk.moves == [] and sim.instruction == 0
    assert sim.holding == "mug_1"
