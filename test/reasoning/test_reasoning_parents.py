"""The world tree from admitted interactions: contents become children, picks go to the hand,
places put the held thing where the jaws let go (write planning, without ROS)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from write_plans import every_kind_of_verdict
from write_plans import write_context as _ctx

from mimir_memory.errors import InvalidValueError
from mimir_memory.updates import NodeUpdate
from mimir_planner.reasoning import (
    Decision,
    HarnessResult,
    OutcomeClaim,
    OutcomeUpdate,
    PropertyClaim,
    Verdict,
)
from mimir_planner.reasoning.world_view import Box3D, InMemoryWorld, NodeSnapshot
from mimir_planner.reasoning.writes import Whereabouts, plan_writes

CABINET_BOX = Box3D(np.array([0.0, 0.0, 0.0]), np.array([0.6, 0.4, 0.8]))


def _node(node_id: str, label: str, xyz: tuple[float, float, float], *, parent: str = "",
          box: Box3D | None = None) -> NodeSnapshot:
    return NodeSnapshot(node_id, label, np.array(xyz), box, parent=parent)


def _kitchen(*extra: NodeSnapshot) -> InMemoryWorld:
    return InMemoryWorld([
        _node("cabinet_1", "cabinet", (0.3, 0.2, 0.4), box=CABINET_BOX),
        _node("table_1", "table", (2.0, 0.0, 0.7),
              box=Box3D(np.array([1.5, -0.5, 0.0]), np.array([2.5, 0.5, 0.75]))),
        *extra,
    ])


def _where(world: InMemoryWorld, intent: str, **kw: object) -> Whereabouts:
    return Whereabouts(world=world, intent=intent, fixture_labels=frozenset({"cabinet"}),
                       **kw)


def _parents(plans: list) -> dict[str, tuple[tuple[str, str], object]]:
    return {p.update.node_id: (p.update.parent, p.update.parent_position)
            for p in plans if p.update is not None and p.update.parent is not None}


def test_admitted_contents_name_their_nodes_and_become_children_of_the_fixture() -> None:
    world = _kitchen(
        _node("mug_1", "mug", (0.2, 0.2, 0.3)),            # inside, near the detection
        _node("mug_2", "mug", (0.5, 0.3, 0.6)),            # inside too, farther from it
        _node("mug_3", "mug", (3.0, 3.0, 0.3)),            # elsewhere in the kitchen
        _node("bowl_1", "bowl", (0.4, 0.1, 0.2), parent="cabinet_1"),  # already a child
    )
    where = _where(world, "open", detections={"det-7": np.array([0.21, 0.19, 0.31])})
    plans = plan_writes(every_kind_of_verdict(
        PropertyClaim("cabinet_1", "locked", True, 0.9, "no motion"), deferred_open=False,
        outcome_origin="ia-1"), _ctx({"cabinet_1", "mug_1", "mug_2", "bowl_1"}), where=where)

    contents = next(p.update for p in plans if p.update is not None and p.update.contents)
    assert [(c.name, c.node_id) for c in contents.contents] == [("mug", "mug_1"),
                                                                ("bowl", "bowl_1")]
    # the mug becomes the cabinet's child; the bowl already is one, so nothing is written
    assert _parents(plans) == {"mug_1": (("cabinet_1", "container"), None)}
    parent = next(p for p in plans if p.subject == "mug_1")
    assert parent.verdicts[0].claim.name == "mug"
    assert any(link.kind == "detection" and link.id == "det-7"
               for link in parent.update.evidence)
    # every written update has its own replay-safe id
    ids = [p.update.update_id for p in plans if p.update is not None]
    assert len(ids) == len(set(ids)) and all(i.startswith("analyzer:ia-1:") for i in ids)


def test_contents_without_a_node_inside_stay_names_and_write_no_parent() -> None:
    # the only mug is outside the cabinet's box: it is not what the inspection saw
    world = _kitchen(_node("mug_3", "mug", (0.3, 0.2, 1.2)))
    plans = plan_writes(every_kind_of_verdict(
        PropertyClaim("cabinet_1", "locked", True, 0.9, "no motion"), deferred_open=False,
        outcome_origin="ia-1"), _ctx({"cabinet_1", "mug_3"}), where=_where(world, "open"))
    contents = next(p.update for p in plans if p.update is not None and p.update.contents)
    assert [c.node_id for c in contents.contents] == ["", ""]
    assert _parents(plans) == {}
    # without whereabouts nothing about parents is planned at all
    assert _parents(plan_writes(every_kind_of_verdict(
        PropertyClaim("cabinet_1", "locked", True, 0.9, "no motion"), deferred_open=False,
        outcome_origin="ia-1"), _ctx({"cabinet_1"}))) == {}


def test_an_inspection_detaches_what_it_no_longer_finds_inside() -> None:
    # someone took the banana out; memory still keeps it (and an apple and a bowl) inside
    world = _kitchen(
        _node("banana_1", "banana", (0.3, 0.2, 0.3), parent="cabinet_1"),
        _node("bowl_1", "bowl", (0.4, 0.1, 0.2), parent="cabinet_1"),
        _node("bowl_2", "bowl", (0.1, 0.1, 0.2), parent="cabinet_1"),  # one bowl was seen
        _node("mug_1", "mug", (0.2, 0.2, 0.3)),
        _node("cup_1", "cup", (2.0, 0.0, 0.8), parent="table_1"),      # another holder's
    )
    result = every_kind_of_verdict(PropertyClaim("cabinet_1", "locked", True, 0.9, "no motion"),
                                   deferred_open=False, outcome_origin="ia-1")
    known = {"cabinet_1", "table_1", "banana_1", "bowl_1", "bowl_2", "mug_1", "cup_1"}
    plans = plan_writes(result, _ctx(known), where=_where(
        world, "inspection", detections={"det-7": np.array([0.21, 0.19, 0.31])}))
    parents = _parents(plans)
    # the banana is detached (its node stays); the mug seen inside becomes a child; a bowl
    # was seen, so neither remembered bowl is taken out on a guess; the table's cup is not
    # the inspection's business
    assert parents == {"mug_1": (("cabinet_1", "container"), None),
                       "banana_1": (("", ""), None)}
    gone = next(p for p in plans if p.subject == "banana_1")
    assert "not among what the inspection" in gone.update.verdict_reason
    assert gone.update.update_id.startswith("analyzer:ia-1:")
    # a look while opening is no inventory: nothing is taken out on its word
    opened = _parents(plan_writes(result, _ctx(known), where=_where(world, "open")))
    assert "banana_1" not in opened


def _outcome(primitive: str, target: str, success: bool,
             decision: Decision = Decision.ADMIT) -> HarnessResult:
    claim = OutcomeClaim(target, primitive, success, None if success else "slipped",
                         "success" if success else "missed_grasp", 0.9)
    verdict = Verdict(claim, decision, "gripper held it", ("gripper@3.000",), "outcome",
                      interaction_id="ia-1")
    updates = (OutcomeUpdate.admitted(claim, verdict),) if verdict.effective else ()
    return HarnessResult((verdict,), (), (), updates)


def test_a_pick_puts_its_target_in_the_hand() -> None:
    world = _kitchen(_node("mug_1", "mug", (0.2, 0.2, 0.3), parent="cabinet_1"))
    ctx = dataclasses.replace(_ctx({"cabinet_1", "mug_1"}), primitive="pick")
    plans = plan_writes(_outcome("pick", "mug_1", True), ctx, where=_where(world, "pick"))
    assert _parents(plans) == {"mug_1": (("hand", "hand"), None)}
    held = next(p for p in plans if p.subject == "mug_1" and p.update.parent)
    assert ("robot_state", "gripper@3.000") in [(e.kind, e.id) for e in held.update.evidence]

    # a failed pick, a deferred one, and a pick of what is already held change no parent
    assert _parents(plan_writes(_outcome("pick", "mug_1", False), ctx,
                                where=_where(world, "pick"))) == {}
    assert _parents(plan_writes(_outcome("pick", "mug_1", True, Decision.DEFER), ctx,
                                where=_where(world, "pick"))) == {}
    in_hand = _kitchen(_node("mug_1", "mug", (0.2, 0.2, 0.3), parent="hand"))
    assert _parents(plan_writes(_outcome("pick", "mug_1", True), ctx,
                                where=_where(in_hand, "pick"))) == {}


def test_a_place_puts_what_the_hand_held_where_the_jaws_let_go() -> None:
    world = _kitchen(_node("mug_1", "mug", (0.9, 0.0, 1.0), parent="hand"))
    ctx = dataclasses.replace(_ctx({"cabinet_1", "table_1", "mug_1"}), primitive="place")
    release = np.array([2.1, 0.1, 0.82])
    plans = plan_writes(_outcome("place", "table_1", True), ctx,
                        where=_where(world, "place", release_point=release))
    assert _parents(plans) == {"mug_1": (("table_1", "surface"), (2.1, 0.1, 0.82))}
    # into a fixture it is a container; without the arm's report the position is kept
    plans = plan_writes(_outcome("place", "cabinet_1", True), ctx,
                        where=_where(world, "place"))
    assert _parents(plans) == {"mug_1": (("cabinet_1", "container"), None)}
    # a failed place leaves the hand as it was
    assert _parents(plan_writes(_outcome("place", "table_1", False), ctx,
                                where=_where(world, "place", release_point=release))) == {}


def test_a_position_goes_only_with_a_parent_and_must_be_finite() -> None:
    update = NodeUpdate("mug_1", parent=("table_1", "surface"), parent_position=(1, 2, 3))
    assert update.parent_position == (1.0, 2.0, 3.0)
    with pytest.raises(InvalidValueError, match="only with a parent"):
        NodeUpdate("mug_1", parent_position=(1.0, 2.0, 3.0))
    for bad in ((1.0, 2.0), (1.0, math.nan, 3.0), (1.0, math.inf, 0.0), ("a", 1.0, 2.0)):
        with pytest.raises(InvalidValueError, match="three finite numbers"):
            NodeUpdate("mug_1", parent=("table_1", "surface"),
                       parent_position=bad)
