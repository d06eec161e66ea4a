"""The saved RViz config and Foxglove layout parse and show what the graph publishes (the topic
names are checked against a running graph in test/e2e/test_sim_job.py)."""

from __future__ import annotations

import json
from pathlib import Path

from view_configs import FOXGLOVE, foxglove_topics, rviz_displays, rviz_topics, view_topics

from mimir.nodes.memory.markers import frustum_markers, markers_for
from mimir_memory.graph import SceneNode
from mimir_memory.keyframes import CameraView, KeyframeRecord, Trigger


def test_the_rviz_config_names_its_displays_and_the_memory_marker_namespaces() -> None:
    displays = {d["Name"]: d for d in rviz_displays()}
    memory = displays["Memory"]
    assert memory["Class"] == "rviz_default_plugins/MarkerArray"
    assert memory["Topic"]["Value"] == "/scene_graph/markers"
    # the scene graph publishes its markers latched: the display must ask for that
    assert memory["Topic"]["Durability Policy"] == "Transient Local"
    assert set(memory["Namespaces"]) == {"nodes", "labels", "contents", "held"}
    assert "/planner/set_of_marks" in rviz_topics()
    frames = displays["Keyframes"]
    assert frames["Topic"]["Value"] == "/keyframes/markers"
    assert frames["Topic"]["Durability Policy"] == "Transient Local"


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
    view = CameraView.parse({"position": [0.0, 0.0, 1.0], "orientation": [0.0, 0.0, 0.0, 1.0],
                             "fx": 100.0, "fy": 100.0, "cx": 50.0, "cy": 40.0})
    frames = [KeyframeRecord(f"f{i}", 1.0, "s", "wrist", trigger, None, None, (), None, (), (),
                             "", Path("i.jpg"), Path("t.jpg"), 100, 80, 1, camera_view=view)
              for i, trigger in enumerate((Trigger.INTERACTION_POST, Trigger.NEW_NODE))]
    drawn = {m.ns for m in frustum_markers(frames, "map").markers if m.ns}
    keyframes = next(d for d in rviz_displays() if d["Name"] == "Keyframes")
    assert drawn == set(keyframes["Namespaces"])


def test_the_foxglove_layout_is_json_with_panels_for_memory_and_the_planner_view() -> None:
    layout = json.loads(FOXGLOVE.read_text())
    panels = set(layout["configById"])

    def leaves(node: object) -> set[str]:
        if isinstance(node, str):
            return {node}
        assert isinstance(node, dict)
        return leaves(node["first"]) | leaves(node["second"])

    assert leaves(layout["layout"]) == panels  # every panel placed, none missing
    assert {"/scene_graph/markers", "/keyframes/markers",
            "/planner/set_of_marks"} <= foxglove_topics()
    assert all(t.startswith("/") for t in view_topics())
