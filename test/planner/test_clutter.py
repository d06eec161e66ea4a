"""Clutter per object: free space beside a pick candidate from memory's 3D boxes."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from planner_kitchen import Fixture, admit_property, see, session_for

from mimir_memory.graph import AT_LAST_PLACE, HAND_PARENT
from mimir_memory.task import GoalStatus
from mimir_memory.world import WorldMemory
from mimir_planner.clutter import Room, approach_to, clearance_chooser, room_around
from mimir_planner.config import ClutterConfig, PlannerConfigError, load_planner_config
from mimir_planner.instructions import GoalKind, GoalSpec
from mimir_planner.recall import Candidate

CONFIG = ClutterConfig()
IS_FIXTURE = load_planner_config().is_fixture_label


@pytest.fixture
def world(tmp_path: Path):
    memory = WorldMemory.open(tmp_path / "world.db")
    yield memory
    memory.close()


def gap(world: WorldMemory, node_id: str) -> float | None:
    room = room_around(world.state.nodes[node_id], world.state, CONFIG, IS_FIXTURE)
    return None if room is None else room.gap


def test_the_narrowest_gap_to_a_neighbour_on_the_same_level(world: WorldMemory) -> None:
    bottle = see(world, "ketchup", (1.0, 0.0, 1.5), stamp=1.0, half=0.04)
    assert gap(world, bottle) == math.inf
    see(world, "mustard", (1.0, 0.20, 1.5), stamp=1.0, half=0.04)  # 12 cm to spare
    assert gap(world, bottle) == pytest.approx(0.12)
    see(world, "mayonnaise", (1.0, -0.09, 1.5), stamp=1.0, half=0.04)  # 1 cm to spare
    assert gap(world, bottle) == pytest.approx(0.01)


def test_diagonal_and_overlapping_neighbours(world: WorldMemory) -> None:
    bottle = see(world, "ketchup", (1.0, 0.0, 1.5), stamp=1.0, half=0.04)
    see(world, "mustard", (1.11, 0.11, 1.5), stamp=1.0, half=0.04)  # 3 cm apart on both axes
    assert gap(world, bottle) == pytest.approx(math.hypot(0.03, 0.03))
    see(world, "mayonnaise", (0.95, -0.06, 1.5), stamp=1.0, half=0.04)  # boxes overlap 2 cm
    assert gap(world, bottle) == pytest.approx(-0.02)


def test_what_does_not_count_as_a_neighbour(world: WorldMemory) -> None:
    bottle = see(world, "ketchup", (1.0, 0.0, 1.5), stamp=1.0, half=0.04)
    see(world, "cabinet", (1.0, 0.0, 1.6), stamp=1.0, half=0.25)  # a fixture around it
    see(world, "mug", (1.0, 0.1, 1.9), stamp=1.0, half=0.04)  # on the shelf above
    see(world, "lemon", (1.0, 0.6, 1.5), stamp=1.0, half=0.04)  # beyond the radius
    stale = see(world, "mustard", (1.0, 0.09, 1.5), stamp=1.0, half=0.04)
    admit_property(world, stale, AT_LAST_PLACE, False, stamp=2.0)
    held = see(world, "sponge", (1.0, -0.09, 1.5), stamp=1.0, half=0.04)
    world.set_parent(held, HAND_PARENT, "hand", stamp=3.0)
    assert gap(world, bottle) == math.inf


def test_the_candidate_remembered_twice_is_not_its_own_neighbour(world: WorldMemory) -> None:
    """A segmenter that now and then calls the clear ketchup "hot sauce" leaves a hot sauce
    node on the bottle's own spot; it must not make the bottle look wedged, while a real
    neighbour 5.5 cm away (centre to centre) still counts."""
    clear = see(world, "ketchup", (1.0, 0.2, 1.12), stamp=1.0, half=0.025)
    see(world, "hot sauce", (1.001, 0.207, 1.117), stamp=2.0, half=0.025)  # 0.8 cm off
    assert gap(world, clear) == math.inf
    wedged = see(world, "ketchup", (1.05, -0.35, 1.12), stamp=1.0, half=0.025)
    see(world, "mustard", (1.05, -0.295, 1.12), stamp=1.0, half=0.025)  # 5.5 cm apart
    assert gap(world, wedged) == pytest.approx(0.005)
    chooser = clearance_chooser(lambda: world.state, CONFIG, IS_FIXTURE)
    assert chooser(spec(), candidates(wedged, clear)) == clear
    # with the rule off, the twin overlaps the bottle and the wedged one looks roomier
    off = clearance_chooser(lambda: world.state, ClutterConfig(same_spot_m=0.0), IS_FIXTURE)
    assert off(spec(), candidates(wedged, clear)) == wedged
    with pytest.raises(PlannerConfigError, match="same_spot_m"):
        ClutterConfig(same_spot_m=-0.01)


FROM_THE_ROOM = (1.0, 0.0)  # the hand comes in along +x: the robot stands at smaller x


def room(world: WorldMemory, node_id: str,
         approach: tuple[float, float] | None = FROM_THE_ROOM) -> Room | None:
    return room_around(world.state.nodes[node_id], world.state, CONFIG, IS_FIXTURE, approach)


def test_a_neighbour_in_front_blocks_the_way_in(world: WorldMemory) -> None:
    """A tea box 9 cm in front of a bottle leaves room beside it but none for the hand to
    come through; one behind it, or in front but beside the hand's way, does not block."""
    bottle = see(world, "water bottle", (1.2, 0.0, 1.5), stamp=1.0, half=0.03)
    behind = see(world, "mug", (1.36, 0.0, 1.5), stamp=1.0, half=0.03)
    aside = see(world, "cup", (1.0, 0.13, 1.5), stamp=1.0, half=0.03)  # 7 cm to the side
    clear = room(world, bottle)
    assert clear is not None and clear.blocker is None
    assert clear.usable == pytest.approx(0.10)  # to the mug behind
    in_front = see(world, "tea box", (1.03, 0.02, 1.5), stamp=1.0, half=0.04)
    blocked = room(world, bottle)
    assert blocked is not None and blocked.blocker == in_front
    assert blocked.gap == pytest.approx(0.10) and blocked.usable == 0.0
    assert "in the hand's way" in blocked.why_short(CONFIG.finger_gap_m)
    # seen from the other side (the hand comes in along -x), the mug behind is in front
    other_way = room(world, bottle, (-1.0, 0.0))
    assert other_way is not None and other_way.blocker == behind
    # without a direction to come from, only the gaps beside it count
    unknown = room(world, bottle, None)
    assert unknown is not None and unknown.blocker is None and unknown.usable == blocked.gap
    assert {behind, aside}.isdisjoint({blocked.blocker})


def test_the_way_in_runs_from_where_the_cameras_saw_it(world: WorldMemory) -> None:
    bottle = see(world, "water bottle", (1.2, 0.5, 1.5), stamp=1.0, half=0.03)
    node = world.state.nodes[bottle]
    assert approach_to(node, (0.2, 0.5)) == pytest.approx((1.0, 0.0))
    assert approach_to(node, (1.2, -0.5)) == pytest.approx((0.0, 1.0))
    assert approach_to(node, None) is None
    assert approach_to(node, (1.2, 0.5)) is None  # seen from right above: no way in known


def test_the_chooser_passes_over_a_bottle_with_something_in_front(world: WorldMemory) -> None:
    hidden = see(world, "ketchup", (1.2, 0.4, 1.5), stamp=1.0, half=0.04)
    see(world, "mustard", (1.0, 0.4, 1.5), stamp=1.0, half=0.04)  # 12 cm in front of it
    open_ = see(world, "ketchup", (1.2, -0.4, 1.5), stamp=1.0, half=0.04)
    seen_from = {hidden: (0.3, 0.4), open_: (0.3, -0.4)}
    blind = clearance_chooser(lambda: world.state, CONFIG, IS_FIXTURE)
    assert blind(spec(), candidates(hidden, open_)) is None  # both have room beside them
    sighted = clearance_chooser(lambda: world.state, CONFIG, IS_FIXTURE,
                                lambda: lambda node: seen_from.get(node.node_id))
    assert sighted(spec(), candidates(hidden, open_)) == open_


def spec() -> GoalSpec:
    return GoalSpec(kind=GoalKind.PICK, obj="ketchup")


def candidates(*ids: str, scores: tuple[float, ...] = ()) -> list[Candidate]:
    return [Candidate(node_id, "ketchup", None, None, scores[i] if scores else 1.0, ())
            for i, node_id in enumerate(ids)]


def test_the_chooser_takes_the_roomy_bottle_over_the_wedged_one(world: WorldMemory) -> None:
    wedged = see(world, "ketchup", (1.0, 0.4, 1.5), stamp=1.0, half=0.04)
    see(world, "mustard", (1.0, 0.49, 1.5), stamp=1.0, half=0.04)
    roomy = see(world, "ketchup", (1.0, -0.4, 1.5), stamp=1.0, half=0.04)
    choose = clearance_chooser(lambda: world.state, CONFIG, IS_FIXTURE)
    assert choose(spec(), candidates(wedged, roomy)) == roomy
    # a lower-ranked candidate is not considered, nor a goal that is no pick
    assert choose(spec(), candidates(wedged, roomy, scores=(2.0, 1.0))) is None
    assert choose(GoalSpec(kind=GoalKind.FIND, obj="ketchup"),
                  candidates(wedged, roomy)) is None
    assert choose(spec(), candidates(wedged)) is None


def test_the_chooser_abstains_when_room_does_not_tell_them_apart(world: WorldMemory) -> None:
    first = see(world, "ketchup", (1.0, 0.4, 1.5), stamp=1.0, half=0.04)
    second = see(world, "ketchup", (1.0, -0.4, 1.5), stamp=1.0, half=0.04)
    choose = clearance_chooser(lambda: world.state, CONFIG, IS_FIXTURE)
    assert choose(spec(), candidates(first, second)) is None  # both have room
    see(world, "mustard", (1.0, 0.49, 1.5), stamp=1.0, half=0.04)  # 1 cm beside the first
    see(world, "mustard", (1.0, -0.485, 1.5), stamp=1.0, half=0.04)  # 0.5 cm beside the second
    assert choose(spec(), candidates(first, second)) is None  # both wedged, within the noise


@pytest.mark.parametrize("bad", [{"finger_gap_m": 0.0}, {"neighbour_radius_m": -1.0},
                                 {"min_difference_m": math.nan}])
def test_bad_clutter_settings_are_refused(bad: dict[str, float]) -> None:
    with pytest.raises(PlannerConfigError, match="clutter"):
        ClutterConfig(**bad)


# ------------------------------------------------ finds that ask for room to grasp
@pytest.fixture
def counter(kitchen_of):
    return kitchen_of([
        ("counter_1", Fixture("counter", (1.0, 0.0, 0.9), opens=False)),
        ("cabinet_1", Fixture("cabinet", (1.1, 0.8, 1.6), contents=("water bottle",))),
    ])


ROOMY = "Find the water bottle that has clear space around it for grasping."


def _bottle(world: WorldMemory, y: float, *, neighbour_gap: float | None) -> str:
    """A water bottle on the counter at ``y``; with a sponge ``neighbour_gap`` m beside it."""
    bottle = see(world, "water bottle", (1.0, y, 0.95), stamp=2.0, half=0.04)
    if neighbour_gap is not None:
        see(world, "sponge", (1.0, y + 0.08 + neighbour_gap, 0.95), stamp=2.0, half=0.04)
    return bottle


def test_a_find_for_room_to_grasp_names_the_bottle_with_space_beside_it(counter) -> None:
    world, task, kit = counter
    wedged = _bottle(world, -0.4, neighbour_gap=0.005)
    roomy = _bottle(world, 0.3, neighbour_gap=0.1)
    session = session_for(world, task)
    session.submit(ROOMY)
    report = session.run(kit)
    assert report.completed == ["g001_find"], task.state.status_reason
    assert [e.node_id for e in report.answer_entities["g001_find"]] == [roomy]
    assert wedged not in {s.target for s in kit.executed}


def test_wedged_bottles_send_the_robot_to_look_for_another(counter) -> None:
    world, task, kit = counter
    first = _bottle(world, -0.4, neighbour_gap=0.005)
    second = _bottle(world, 0.3, neighbour_gap=0.01)
    session = session_for(world, task)
    session.submit(ROOMY)
    report = session.run(kit)
    assert report.completed == ["g001_find"], task.state.status_reason
    stored = kit.object_nodes[("cabinet_1", "water bottle")]
    assert [e.node_id for e in report.answer_entities["g001_find"]] == [stored]
    assert "cabinet_1" in {s.target for s in kit.executed}
    assert {first, second}.isdisjoint(s.target for s in kit.executed)


def test_a_find_for_room_passes_over_the_bottle_behind_a_box(counter) -> None:
    """Seen from the room (smaller x), the bottle with a tea box in front of it is not the one
    with clear space around it, though it has room beside it; the trace says what is in the
    way."""
    world, task, kit = counter
    behind_box = _bottle(world, -0.4, neighbour_gap=None)
    see(world, "tea box", (0.88, -0.4, 0.95), stamp=2.0, half=0.04)  # 4 cm in front of it
    clear = _bottle(world, 0.3, neighbour_gap=0.035)
    # beside them, the bottle behind the box has the more room: only the way in tells
    beside = {n: room(world, n, None) for n in (behind_box, clear)}
    assert beside[behind_box] is not None and beside[clear] is not None
    assert beside[behind_box].usable > beside[clear].usable >= CONFIG.finger_gap_m
    session = session_for(world, task)
    session.grounder.viewpoint = lambda node: (0.3, float(node.centroid[1]))
    session.submit(ROOMY)
    report = session.run(kit)
    assert report.completed == ["g001_find"], task.state.status_reason
    assert [e.node_id for e in report.answer_entities["g001_find"]] == [clear]
    assert behind_box not in {s.target for s in kit.executed}


def test_with_every_bottle_wedged_and_nowhere_to_look_the_find_blocks(kitchen_of) -> None:
    world, task, kit = kitchen_of([
        ("counter_1", Fixture("counter", (1.0, 0.0, 0.9), opens=False))])
    first = _bottle(world, -0.4, neighbour_gap=0.005)
    second = _bottle(world, 0.3, neighbour_gap=-0.02)  # boxes overlap
    session = session_for(world, task)
    result = session.run_instruction(ROOMY, kit)
    assert task.status("g001_find") is GoalStatus.BLOCKED
    assert "no remembered 'water bottle' is known to have room beside it" in result.reason
    assert "nothing left to explore" in result.reason, result.reason
    assert "g001_find" not in session.answer_entities
    assert {first, second}.isdisjoint(s.target for s in kit.executed)


# ------------------------------------------------ plain picks of a wedged thing
PICK = "Pick up the water bottle and place it on the counter."


def test_a_pick_of_the_only_wedged_bottle_looks_for_a_roomier_one_first(counter) -> None:
    """Memory holds one water bottle, with a sponge 5 mm beside it; the cabinet, not looked
    into yet, holds another. The plain pick looks there first and takes the stored one."""
    world, task, kit = counter
    wedged = _bottle(world, -0.4, neighbour_gap=0.005)
    session = session_for(world, task)
    session.submit(PICK)
    assert task.state.goals["g001_find"].description.startswith(
        "find water bottle with room to grasp")
    report = session.run(kit)
    stored = kit.object_nodes[("cabinet_1", "water bottle")]
    assert "cabinet_1" in {s.target for s in kit.executed}
    picks = [s.target for s in kit.executed if s.primitive == "pick"]
    assert picks == [stored], (picks, task.state.status_reason)
    assert wedged not in picks
    assert set(report.completed) >= {"g001_find"}, task.state.status_reason


def test_a_look_that_finds_nothing_roomier_leaves_the_pick_to_the_wedged_bottle(
        kitchen_of) -> None:
    """The cabinet holds no water bottle: the look opens it, blocks with nothing left to
    explore, and the pick goes on with the wedged bottle instead of giving up."""
    world, task, kit = kitchen_of([
        ("counter_1", Fixture("counter", (1.0, 0.0, 0.9), opens=False)),
        ("cabinet_1", Fixture("cabinet", (1.1, 0.8, 1.6), contents=("sponge",)))])
    wedged = _bottle(world, -0.4, neighbour_gap=0.005)
    session = session_for(world, task)
    session.submit(PICK)
    session.run(kit)
    assert task.status("g001_find") is GoalStatus.BLOCKED
    assert "cabinet_1" in {s.target for s in kit.executed}
    assert [s.target for s in kit.executed if s.primitive == "pick"] == [wedged]
    later = [g for g in task.state.goals if g != "g001_find"]
    assert later and all(task.status(g) is GoalStatus.COMPLETED for g in later), \
        task.state.status_reason


def test_a_roomy_bottle_is_picked_without_a_look(counter) -> None:
    world, task, kit = counter
    roomy = _bottle(world, 0.3, neighbour_gap=0.1)
    session = session_for(world, task)
    session.submit(PICK)
    assert not any(g.startswith("g001_find") for g in task.state.goals)
    session.run(kit)
    assert [s.target for s in kit.executed if s.primitive == "pick"][:1] == [roomy]
    assert "cabinet_1" not in {s.target for s in kit.executed if s.primitive == "open"}
