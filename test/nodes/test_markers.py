"""The scene graph's RViz markers: colour by state, lines to holders, held things at the hand."""

from __future__ import annotations

from pathlib import Path

from visualization_msgs.msg import Marker

from mimir.nodes.memory.markers import HELD_OFFSET_M, markers_for
from mimir_memory.display import STATE_COLOURS, display_state, state_rgb
from mimir_memory.events import Evidence
from mimir_memory.world import WorldMemory


def _kitchen(tmp_path: Path) -> WorldMemory:
    world = WorldMemory.open(tmp_path / "world.db")
    world.add_node("cabinet", [1.0, 0.6, 1.2], stamp=1.0, bbox_min=[0.8, 0.3, 0.9],
                   bbox_max=[1.2, 0.9, 1.5])
    world.add_node("cabinet", [1.0, -0.6, 1.2], stamp=1.0, bbox_min=[0.8, -0.9, 0.9],
                   bbox_max=[1.2, -0.3, 1.5])
    world.add_node("banana", [1.0, -0.6, 1.0], stamp=1.0)
    world.add_node("mug", [0.5, 0.0, 0.9], stamp=1.0)
    world.set_property("cabinet_1", "locked", True, confidence=0.9, stamp=2.0,
                       evidence=Evidence(event_ids=("interaction:a",)))
    world.set_property("cabinet_2", "openable", True, confidence=0.9, stamp=3.0, is_opened=True)
    world.set_parent("banana_1", "cabinet_2", "container", stamp=4.0)
    world.set_parent("mug_1", "hand", "hand", stamp=5.0)
    return world


def test_boxes_take_their_state_colour_and_contents_a_line_to_their_holder(
        tmp_path: Path) -> None:
    with _kitchen(tmp_path) as world:
        nodes = list(world.state.nodes.values())
        states = {n.node_id: display_state(n) for n in nodes}
        array = markers_for(nodes, "map", hand_frame="wrist_color_optical_frame")
    assert states["cabinet_1"] == "locked" and states["cabinet_2"] == "open"
    assert array.markers[0].action == Marker.DELETEALL
    boxes = {m.id: m for m in array.markers if m.ns == "nodes"}
    labels = [m.text for m in array.markers if m.ns == "labels"]
    order = sorted(states)
    for index, node_id in enumerate(order):
        colour = boxes[index].color
        assert (colour.r, colour.g, colour.b) == state_rgb(states[node_id])
    assert "cabinet_1 (locked)" in labels and "cabinet_2 (open)" in labels
    lines = next(m for m in array.markers if m.ns == "contents")
    ends = [(round(p.x, 2), round(p.y, 2), round(p.z, 2)) for p in lines.points]
    assert ends == [(1.0, -0.6, 1.0), (1.0, -0.6, 1.2)]  # banana -> cabinet_2 only


def test_a_held_thing_is_drawn_at_the_hand_joined_to_it(tmp_path: Path) -> None:
    with _kitchen(tmp_path) as world:
        nodes = list(world.state.nodes.values())
    array = markers_for(nodes, "map", hand_frame="wrist_color_optical_frame")
    mug = sorted(n.node_id for n in nodes).index("mug_1")
    box = next(m for m in array.markers if m.ns == "nodes" and m.id == mug)
    assert box.header.frame_id == "wrist_color_optical_frame"
    assert box.pose.position.z == HELD_OFFSET_M
    grip = next(m for m in array.markers if m.ns == "held")
    assert grip.header.frame_id == "wrist_color_optical_frame" and len(grip.points) == 2
    assert "mug_1 (in the hand)" in [m.text for m in array.markers if m.ns == "labels"]
    # without a hand frame it stays where memory last placed it, in the map
    plain = markers_for(nodes, "map")
    assert not [m for m in plain.markers if m.ns == "held"]
    assert all(m.header.frame_id == "map" for m in plain.markers[1:])


def test_every_state_has_a_colour() -> None:
    assert set(STATE_COLOURS) == {"locked", "open", "stale", "inspected", "unknown"}
    assert all(0.0 <= c <= 1.0 for s in STATE_COLOURS for c in state_rgb(s))
