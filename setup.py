"""ament_python package definition of mimir (the repository root is the ROS 2 package)."""

from __future__ import annotations

from pathlib import Path

from setuptools import find_packages, setup

PACKAGE = "mimir"
HERE = Path(__file__).resolve().parent

# One console script per node, plus the `mimir` command line. The launch files refer to these
# names; test/ros/test_launch_files.py checks that every executable they name is listed here.
NODES = {
    "scene_graph_node": "mimir.nodes.memory.scene_graph_node:main",
    "keyframe_node": "mimir.nodes.memory.keyframe_node:main",
    "segmentation_node": "mimir.nodes.perception.segmentation_node:main",
    "deprojection_node": "mimir.nodes.perception.deprojection_node:main",
    "localization_node": "mimir.nodes.perception.localization_node:main",
    "zed_node": "mimir.nodes.perception.zed_node:main",
    "sim_bridge_node": "mimir.nodes.sim.bridge_node:main",
    "executor_node": "mimir.nodes.robot.executor_node:main",
    "analyzer_node": "mimir.nodes.planner.analyzer_node:main",
    "planner_node": "mimir.nodes.planner.planner_node:main",
}


def _tree(folder: str) -> list[tuple[str, list[str]]]:
    """data_files entries that install ``folder`` under share/mimir, keeping its layout."""
    entries: dict[str, list[str]] = {}
    for path in sorted((HERE / folder).rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            rel = path.relative_to(HERE)
            entries.setdefault(str(Path("share") / PACKAGE / rel.parent), []).append(str(rel))
    return list(entries.items())


setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(
        include=["mimir", "mimir.*", "mimir_memory", "mimir_memory.*", "mimir_perception",
                 "mimir_perception.*", "mimir_planner", "mimir_planner.*", "mimir_robot",
                 "mimir_robot.*", "mimir_sim", "mimir_sim.*"]
    ),
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + PACKAGE]),
        ("share/" + PACKAGE, ["package.xml"]),
        *_tree("launch"),
        *_tree("config"),
    ],
    install_requires=["setuptools"],
    zip_safe=False,
    maintainer="mimir maintainers",
    maintainer_email="maintainers@mimir-robotics.dev",
    description="Persistent, interaction-grounded memory for mobile manipulators.",
    license="Apache-2.0",
    python_requires=">=3.10",
    entry_points={
        "console_scripts": [
            "mimir = mimir.cli:main",
            *(f"{name} = {target}" for name, target in NODES.items()),
        ],
    },
)
