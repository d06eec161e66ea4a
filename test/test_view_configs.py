"""The saved RViz config and Foxglove layout parse and show what the graph publishes (the topic
names are checked against a running graph in test/e2e/test_sim_job.py)."""

from __future__ import annotations

import json

from view_configs import FOXGLOVE, foxglove_topics, rviz_displays, rviz_topics, view_topics

from mimir.nodes.memory.markers import markers_for
from mimir_memory.graph import SceneNode


def test_the_rviz_config_names_its_displays_and_the_memory_marker_namespaces() -> None:
    displays = {d["Name"]: d for d in rviz_displays()}
    memory = displays["Memory"]
    assert memory["Class"] == "rviz_default_plugins/MarkerArray"
    assert memory["Topic"]["Value"] == "/scene_graph/markers"
    # the scene graph publishes its markers latched: the display must ask for that
    assert memory["Topic"]["Durability Policy"] == "Transient Local"
    assert set(memory["Namespaces"]) == {"nodes", "labels", "contents", "held"}
    assert "/planner/set_of_marks" in rviz_topics()


def test_the_marker_namespaces_are_the_ones_the_node_draws() -> None:
    held = SceneNode("mug_1", "mug", (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), (0.1, 0.1, 0.1), 0.0,
                     0.0, 1, parent="hand")
    box = SceneNode("cabinet_1", "cabinet", (1.0, 0.0, 1.0), (0.8, -0.3, 0.9),
                    (1.2, 0.3, 1.5), 0.0, 0.0, 1)
    inside = SceneNode("cup_1", "cup", (1.0, 0.0, 1.0), (1.0, 0.0, 1.0), (1.0, 0.0, 1.0), 0.0,
                       0.0, 1, parent="cabinet_1")
    drawn = {m.ns for m in markers_for([held, box, inside], "map", "wrist").markers if m.ns}
    memory = next(d for d in rviz_displays() if d["Name"] == "Memory")
    assert drawn == set(memory["Namespaces"])


def test_the_foxglove_layout_is_json_with_panels_for_memory_and_the_planner_view() -> None:
    layout = json.loads(FOXGLOVE.read_text())
    panels = set(layout["configById"])

    def leaves(node: object) -> set[str]:
        if isinstance(node, str):
            return {node}
        assert isinstance(node, dict)
        return leaves(node["first"]) | leaves(node["second"])

    assert leaves(layout["layout"]) == panels  # every panel placed, none missing
    assert {"/scene_graph/markers", "/planner/set_of_marks"} <= foxglove_topics()
    assert all(t.startswith("/") for t in view_topics())
