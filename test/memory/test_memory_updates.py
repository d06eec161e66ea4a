"""The planned node update: its checks, how world memory applies it, its UpdateNode form."""

from __future__ import annotations

import math

import pytest
from memory_helpers import obs

from mimir.nodes.memory.messages import MessageValueError, node_update_from_msg, node_update_to_msg
from mimir_memory.errors import DuplicateEventError, InvalidValueError, UnknownNodeError
from mimir_memory.events import EventKind, Evidence, Source, Verdict
from mimir_memory.updates import (
    ContentEntry,
    EvidenceLink,
    NodeUpdate,
    PropertyWrite,
    TaskRecordEntry,
)
from mimir_memory.world import WorldMemory
from mimir_msgs.msg import EvidenceRef, Property
from mimir_msgs.srv import UpdateNode


def _full_update() -> NodeUpdate:
    return NodeUpdate(
        node_id="cabinet_1",
        update_id="analyzer:ia-1:0",
        source=Source.INTERACTION,
        properties=(
            PropertyWrite("openable", True, 0.9, "interaction", "door moved", is_opened=True),
            PropertyWrite("fullness", {"level": "half", "share": 0.5}, 0.6, "interaction"),
        ),
        contents=(ContentEntry("banana", "yellow", reasoning="seen inside"),
                  ContentEntry("mug", node_id="mug_1")),
        contents_source_action="open",
        parent=("kitchen_1", "room"),
        task_record=TaskRecordEntry("find the banana", "open", False, "locked", "ia-1", 12.5),
        evidence=(EvidenceLink("interaction", "ia-1"),
                  EvidenceLink("interaction", "ia-0", "claim made here"),
                  EvidenceLink("keyframe", "kf-a"), EvidenceLink("detection", "det-7"),
                  EvidenceLink("robot_state", "gripper@11.200"), EvidenceLink("event", "e-9")),
        verdict=Verdict.CORRECT,
        verdict_reason="correct by outcome: evidence says fixture_locked",
    )


def test_update_round_trips_through_the_update_node_request() -> None:
    update = _full_update()
    request = node_update_to_msg(update)
    assert request.event_id == "analyzer:ia-1:0" and request.verdict == "correct"
    assert [(p.name, p.value_json) for p in request.properties] == [
        ("openable", "true"), ("is_opened", "true"),
        ("fullness", '{"level": "half", "share": 0.5}')]
    assert request.set_contents and request.set_parent and request.add_task_record
    assert request.evidence[1].detail == "claim made here"
    assert node_update_from_msg(request) == update
    # what memory records of it
    assert update.property_specs()["openable"] == {
        "value": True, "confidence": 0.9, "reasoning": "door moved", "is_opened": True}
    assert update.core_evidence() == Evidence(
        keyframe_ids=("kf-a",), detection_ids=("det-7",),
        event_ids=("interaction:ia-1", "interaction:ia-0", "robot_state:gripper@11.200", "e-9"))

    # the parts not set stay unset both ways
    bare = NodeUpdate("mug_1", verdict=Verdict.DEFER)
    request = node_update_to_msg(bare)
    assert not (request.set_contents or request.set_parent or request.add_task_record)
    assert node_update_from_msg(request) == bare
    empty = NodeUpdate("cabinet_1", contents=())
    assert node_update_from_msg(node_update_to_msg(empty)).contents == ()


def test_request_defaults_and_bad_requests() -> None:
    plain = node_update_from_msg(UpdateNode.Request(node_id="cabinet_1", properties=[
        Property(name="openable", value_json="true", confidence=1.0),
        Property(name="is_opened", value_json="false", confidence=0.2)]))
    assert plain.source is Source.OPERATOR and plain.verdict is Verdict.ADMIT
    assert plain.properties == (PropertyWrite("openable", True, 1.0, is_opened=False),)
    bad_requests = [
        UpdateNode.Request(node_id=""),
        UpdateNode.Request(node_id="a_1", verdict="maybe"),
        UpdateNode.Request(node_id="a_1", source="oracle"),
        UpdateNode.Request(node_id="a_1", properties=[Property(name="x", value_json="{no")]),
        UpdateNode.Request(node_id="a_1", properties=[
            Property(name="is_opened", value_json="true", confidence=1.0)]),
        UpdateNode.Request(node_id="a_1", properties=[
            Property(name="locked", value_json="true", confidence=math.nan)]),
        UpdateNode.Request(node_id="a_1", properties=[
            Property(name="locked", value_json="true", confidence=0.5),
            Property(name="locked", value_json="false", confidence=0.5)]),
        UpdateNode.Request(node_id="a_1", evidence=[EvidenceRef(kind="rumour", id="x")]),
        UpdateNode.Request(node_id="a_1", evidence=[EvidenceRef(kind="keyframe", id="")]),
    ]
    for request in bad_requests:
        with pytest.raises(MessageValueError):
            node_update_from_msg(request)


def test_the_update_type_refuses_bad_values() -> None:
    for build in (lambda: PropertyWrite("", 1, 0.5),
                  lambda: PropertyWrite("locked", True, 1.5),
                  lambda: PropertyWrite("locked", True, 0.5, is_opened=True),
                  lambda: EvidenceLink("rumour", "x"),
                  lambda: EvidenceLink("keyframe", ""),
                  lambda: NodeUpdate(""),
                  lambda: NodeUpdate("a_1", properties=(PropertyWrite("x", 1, 0.5),
                                                        PropertyWrite("x", 2, 0.5)))):
        with pytest.raises(InvalidValueError):
            build()


def test_world_memory_applies_an_update_as_update_node_does(world: WorldMemory) -> None:
    world.ingest([obs("cabinet", [0, 0, 0]), obs("kitchen", [5, 5, 0], half=3.0)])
    update = NodeUpdate(
        "cabinet_1", update_id="analyzer:ia-1:0",
        properties=(PropertyWrite("openable", True, 0.9, "interaction", "moved", True),),
        contents=(ContentEntry("banana", "yellow", reasoning="seen"),),
        contents_source_action="open",
        task_record=TaskRecordEntry("", "open", True, "", "ia-1", 3.0),
        evidence=(EvidenceLink("interaction", "ia-1"), EvidenceLink("keyframe", "kf-a")),
        verdict_reason="admit by opened: door moved",
    )
    events = world.apply_update(update, stamp=4.0)
    assert [e.kind for e in events] == [EventKind.PROPERTY_SET, EventKind.CONTENTS_SET,
                                        EventKind.TASK_OUTCOME_RECORDED]
    assert [e.event_id for e in events] == [f"analyzer:ia-1:0:{i}" for i in range(3)]
    assert events[0].evidence == Evidence(keyframe_ids=("kf-a",),
                                          event_ids=("interaction:ia-1",))
    assert all(e.payload["verdict_reason"] == "admit by opened: door moved" for e in events)
    node = world.node("cabinet_1")
    assert node.properties["openable"].is_opened is True
    assert node.contents == [{"name": "banana", "description": "yellow"}]
    assert node.contents_source_action == "open" and node.contents_reasoning == "seen"
    assert node.task_history[0]["task"] == "open"  # an empty task falls back to the primitive
    assert node.task_history[0]["interaction_id"] == "ia-1"

    # replaying the same update changes nothing; the same id for another update is refused
    count = world.log.count()
    assert world.apply_update(update, stamp=9.0) == []
    with pytest.raises(DuplicateEventError):
        world.apply_update(NodeUpdate("cabinet_1", update_id="analyzer:ia-1:0",
                                      properties=(PropertyWrite("locked", True, 0.5),)),
                           stamp=9.0)
    assert world.log.count() == count

    # deferred updates are logged without effect; unknown nodes are refused
    world.apply_update(NodeUpdate("cabinet_1", properties=(PropertyWrite("locked", True, 0.4),),
                                  verdict=Verdict.DEFER), stamp=10.0)
    assert "locked" not in world.node("cabinet_1").properties
    world.apply_update(NodeUpdate("cabinet_1", parent=("kitchen_1", "room")), stamp=11.0)
    assert world.node("cabinet_1").parent == "kitchen_1"
    with pytest.raises(UnknownNodeError):
        world.apply_update(NodeUpdate("ghost_9", contents=()), stamp=12.0)
