"""The topics the saved RViz config and Foxglove layout show (shared by their syntax test and
the end-to-end test, which checks them against the running graph)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

CONFIG = Path(__file__).resolve().parents[1] / "config"
RVIZ = CONFIG / "mimir.rviz"
FOXGLOVE = CONFIG / "foxglove_layout.json"


def rviz_displays() -> list[dict[str, Any]]:
    """The displays of the RViz config (raises when it is not a mapping RViz can read)."""
    data = yaml.safe_load(RVIZ.read_text())
    displays = data["Visualization Manager"]["Displays"]
    assert isinstance(displays, list)
    return displays


def rviz_topics() -> set[str]:
    return {d["Topic"]["Value"] for d in rviz_displays() if "Topic" in d}


def foxglove_topics() -> set[str]:
    layout = json.loads(FOXGLOVE.read_text())
    topics: set[str] = set()
    for panel in layout["configById"].values():
        topics |= set(panel.get("topics", {}))
        if "imageMode" in panel:
            topics.add(panel["imageMode"]["imageTopic"])
        if "topicPath" in panel:
            topics.add(panel["topicPath"].split(".", 1)[0])
    return topics


def view_topics() -> set[str]:
    """Every topic either view subscribes to."""
    return rviz_topics() | foxglove_topics()
