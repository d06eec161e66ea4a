"""Graph messages built with reused property entries equal those built from scratch."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from mimir.nodes.memory.messages import PropertyMessages, graph_to_msg, node_to_msg
from mimir_memory.graph import PropertyValue, SceneNode


def _node(node_id: str, x: float, **properties: PropertyValue) -> SceneNode:
    node = SceneNode(node_id=node_id, label="cabinet", centroid=np.array([x, 0.0, 0.5]),
                     bbox_min=np.array([x - 0.2, -0.2, 0.0]),
                     bbox_max=np.array([x + 0.2, 0.2, 1.0]), first_seen=1.0, last_seen=2.0,
                     observation_count=3)
    node.properties.update(properties)
    return node


def _prior(value: object, **changes: object) -> PropertyValue:
    prop = PropertyValue(value=value, confidence=0.5, source="perception", stamp=1.5,
                         event_id="e1")
    return dataclasses.replace(prop, **changes)


def test_reused_entries_give_the_same_messages_and_follow_a_change() -> None:
    cache = PropertyMessages()
    openable = _prior(True, is_opened=False)
    nodes = [_node("cabinet_1", 1.0, openable=openable, fullness=_prior("unknown")),
             _node("cabinet_2", 2.0, fullness=_prior([1, 2]))]
    first = graph_to_msg(nodes, 4, "map", 2.0, cache)
    assert first == graph_to_msg(nodes, 4, "map", 2.0)
    names = [p.name for p in first.nodes[0].properties]
    assert names == ["fullness", "openable", "is_opened"]
    # the node moved, its properties did not: the same entry objects go out again
    nodes[0].centroid = np.array([1.1, 0.0, 0.5])
    second = graph_to_msg(nodes, 5, "map", 2.5, cache)
    assert second == graph_to_msg(nodes, 5, "map", 2.5)
    assert second.nodes[0].properties[1] is first.nodes[0].properties[1]
    # a change of the property is a new value object, so a new entry
    nodes[0].properties["openable"] = dataclasses.replace(openable, is_opened=True,
                                                          event_id="e2")
    third = graph_to_msg(nodes, 6, "map", 3.0, cache)
    assert third == graph_to_msg(nodes, 6, "map", 3.0)
    assert [p.value_json for p in third.nodes[0].properties] == ['"unknown"', "true", "true"]
    assert third.nodes[0].properties[2].event_id == "e2"
    # a node given alone uses the same entries
    assert node_to_msg(nodes[1], cache) == node_to_msg(nodes[1])


def test_entries_the_last_build_did_not_use_are_dropped() -> None:
    cache = PropertyMessages()
    node = _node("cabinet_1", 1.0, fullness=_prior("unknown"))
    before = graph_to_msg([node], 1, "map", 1.0, cache).nodes[0].properties[0]
    assert graph_to_msg([node], 2, "map", 1.0, cache).nodes[0].properties[0] is before
    graph_to_msg([], 3, "map", 1.0, cache)
    rebuilt = graph_to_msg([node], 4, "map", 1.0, cache).nodes[0].properties[0]
    assert rebuilt is not before and rebuilt == before


def test_a_property_value_cannot_change_in_place() -> None:
    prop = _prior("unknown")
    with pytest.raises(dataclasses.FrozenInstanceError):
        prop.value = "full"  # type: ignore[misc]
