"""Memory that follows the world, as the planner meets it: contents become the fixture's child
nodes and travel through the hand; a belief the cameras contradict no longer completes a find.

The kitchen writes memory only through the production paths (observations ingested as the scene
graph stores them, the analyzer's admitted verdicts planned by ``plan_writes`` and applied as
node updates), so what is checked here is what the robot's pipeline would leave in memory.
"""

from __future__ import annotations

import pytest
from planner_kitchen import locked_unlocked_layout, observation, session_for

from mimir_memory.events import EventKind
from mimir_memory.graph import AT_LAST_PLACE
from mimir_memory.task import GoalStatus


@pytest.fixture
def kitchen(kitchen_of):
    return kitchen_of(locked_unlocked_layout())


def _kinds(world, node_id: str, field: str) -> list[str]:
    return [e.kind.value for e in world.why(node_id, field)]


def test_inspected_contents_are_child_nodes_that_follow_a_pick_and_place(kitchen) -> None:
    world, task, kit = kitchen
    session = session_for(world, task)
    session.submit("Pick up the ketchup from a cabinet and place it on the counter.")
    report = session.run(kit)
    steps = [(s.primitive, s.target) for s in report.executed()]
    assert ("inspect", "cabinet_3") in steps and steps[-1] == ("place", "counter_1")

    ketchup = world.node("ketchup_1")
    # the inspection named the node in the cabinet's contents and made it the cabinet's child
    contents = world.node("cabinet_3").contents
    assert [(c["name"], c.get("node_id")) for c in contents] == [("ketchup", "ketchup_1")]
    parents = world.why("ketchup_1", "parent")
    assert [e.payload["parent_id"] for e in parents] == ["cabinet_3", "hand", "counter_1"]
    assert [e.payload["relation"] for e in parents] == ["container", "hand", "surface"]
    assert all(e.kind is EventKind.PARENT_CHANGED and e.source.value == "interaction"
               and e.evidence.event_ids for e in parents)
    # the place moved it in memory to where the jaws let go (over the counter)
    counter = world.node("counter_1")
    assert ketchup.parent == "counter_1" and ketchup.parent_relation == "surface"
    assert ketchup.centroid == pytest.approx(counter.centroid)
    assert "parent_changed" in _kinds(world, "ketchup_1", "position")
    children = world.state.children
    assert not children.get("cabinet_3") and children["counter_1"] == {"ketchup_1"}
    assert task.hand is None and task.status("g003_place") is GoalStatus.COMPLETED


def test_a_find_does_not_complete_on_a_place_the_cameras_found_empty(kitchen) -> None:
    world, task, kit = kitchen
    # the sponge was seen long ago on the floor, away from every fixture (so no holder would
    # have to be inspected first) ...
    world.ingest([observation("sponge", (-1.2, 1.3, 0.05), 0.04, 50.0)])
    # ... and the cameras have since looked at its place three times without seeing it
    for stamp in (60.0, 61.0, 62.0):
        world.record_miss("sponge_1", stamp=stamp, camera="pole", reason="in view, not detected")
    assert world.node("sponge_1").properties[AT_LAST_PLACE].value is False

    session = session_for(world, task)
    session.submit("Find the sponge.")
    report = session.run(kit, budget=8)
    # the planner went looking instead of completing on the stale belief ...
    assert report.records[0].outcome == "executed", report.records[0]
    looked = [s for s in report.executed() if s.primitive in ("inspect", "move_to")]
    assert looked, report.records
    # ... and whatever it completed on, the sponge had been seen again first
    if report.completed:
        assert world.node("sponge_1").properties[AT_LAST_PLACE].value is True
        assert "during this instruction" in report.records[-1].detail or \
            "inspected" in report.records[-1].detail, report.records[-1].detail


def test_a_belief_the_cameras_restore_counts_again(kitchen) -> None:
    world, _task, _kit = kitchen
    world.ingest([observation("sponge", (1.0, 0.1, 0.95), 0.04, 50.0)])
    for stamp in (60.0, 61.0, 62.0):
        world.record_miss("sponge_1", stamp=stamp, camera="pole", reason="in view, not detected")
    events = world.ingest([observation("sponge", (1.0, 0.1, 0.95), 0.04, 70.0)])
    assert [e.kind for e in events] == [EventKind.OBSERVATION_FUSED, EventKind.PROPERTY_SET]
    assert world.node("sponge_1").properties[AT_LAST_PLACE].value is True
    assert [e.kind.value for e in world.why("sponge_1", "misses")] == ["observation_missed"] * 3
