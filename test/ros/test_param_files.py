"""The deployment parameter files hold only what the nodes declare.

``config/mimir.yaml`` (robot) and ``config/mimir_sim.yaml`` (simulation) are the only parameter
files; each section is keyed ``/**/<node name>`` so it applies under any namespace. A key that no
config dataclass field declares would be ignored by the node without a word, so it fails here, as
does a section for a node no launch file or ``mimir sim`` starts under that name.
"""

from __future__ import annotations

import dataclasses
import importlib
import typing
from pathlib import Path
from typing import Any

import pytest
import yaml
from ros_helpers import console_scripts, stop_process

REPO = Path(__file__).resolve().parents[2]
DEPLOYMENTS = ("mimir.yaml", "mimir_sim.yaml")

#: node name -> (console script, config dataclass) of every node the deployments start. The
#: node's module comes from setup.py's NODES table, so moving a node module needs no change here;
#: the dataclass is looked up by name in that module (defined or imported there).
NODE_CONFIGS: dict[str, tuple[str, str]] = {
    "zed": ("zed_node", "ZedNodeConfig"),
    "localization": ("localization_node", "LocalizationNodeConfig"),
    "segmentation": ("segmentation_node", "SegmentationNodeConfig"),
    "deprojection": ("deprojection_node", "DeprojectionNodeConfig"),
    "scene_graph": ("scene_graph_node", "SceneGraphConfig"),
    "keyframes": ("keyframe_node", "KeyframeConfig"),
    "analyzer": ("analyzer_node", "AnalyzerNodeConfig"),
    "planner": ("planner_node", "PlannerNodeConfig"),
    "sim_bridge": ("sim_bridge_node", "SimBridgeConfig"),
    "executor": ("executor_node", "ExecutorNodeConfig"),
}


#: Parameters every rclpy node declares itself; a deployment file may set them.
BUILT_IN = {"use_sim_time"}


def _fields(name: str) -> dict[str, Any]:
    script, cls = NODE_CONFIGS[name]
    module = console_scripts()[script].split(":", 1)[0]
    config_type = getattr(importlib.import_module(module), cls)
    hints = typing.get_type_hints(config_type)
    return {f.name: hints[f.name] for f in dataclasses.fields(config_type) if f.init}


def _sections(file: str) -> dict[str, dict[str, Any]]:
    data = yaml.safe_load((REPO / "config" / file).read_text())
    assert isinstance(data, dict), f"config/{file} is not a mapping"
    return data


def _fits(value: Any, annotation: Any) -> bool:
    """Whether a YAML value can be the parameter of a field typed ``annotation``."""
    origin = typing.get_origin(annotation)
    if origin in (list, tuple):
        item = typing.get_args(annotation)[0]
        return isinstance(value, list) and all(_fits(v, item) for v in value)
    if annotation is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, annotation)


@pytest.mark.parametrize("file", DEPLOYMENTS)
def test_sections_are_known_nodes_keyed_for_any_namespace(file: str) -> None:
    for key, section in _sections(file).items():
        assert key.startswith("/**/"), f"config/{file}: section {key!r} is not keyed /**/<node>"
        name = key.removeprefix("/**/")
        assert name in NODE_CONFIGS, f"config/{file}: section for unknown node {name!r}"
        assert isinstance(section, dict) and set(section) == {"ros__parameters"}, (
            f"config/{file}: {key} must hold exactly ros__parameters")


@pytest.mark.parametrize("file", DEPLOYMENTS)
def test_every_key_is_declared_by_the_node(file: str) -> None:
    problems = []
    for key, section in _sections(file).items():
        name = key.removeprefix("/**/")
        if name not in NODE_CONFIGS:
            continue  # reported by the test above
        fields = _fields(name)
        for param, value in (section.get("ros__parameters") or {}).items():
            if param in BUILT_IN:
                continue
            if param not in fields:
                problems.append(f"{key}.{param} is not a field of {NODE_CONFIGS[name][1]}")
            elif not _fits(value, fields[param]):
                problems.append(f"{key}.{param} = {value!r} does not fit {fields[param]}")
    assert not problems, f"config/{file}:\n" + "\n".join(problems)


def test_the_robot_file_gives_the_analyzer_what_the_sim_file_does() -> None:
    robot = _sections("mimir.yaml")["/**/analyzer"]["ros__parameters"]
    assert robot["odom_frame"] == "odom"
    assert robot["tf_wait_s"] == 2.0


def test_every_started_node_has_a_section() -> None:
    from mimir.sim_graph import SIM_GRAPH, SIM_PARAMS_FILE, section_key

    sim = _sections(SIM_PARAMS_FILE)
    assert {section_key(n.name) for n in SIM_GRAPH} == set(sim)
    robot_nodes = {"zed", "localization", "executor", "segmentation", "deprojection", "scene_graph",
                   "keyframes", "analyzer", "planner"}
    assert {section_key(n) for n in robot_nodes} == set(_sections("mimir.yaml"))


def test_the_old_per_node_files_are_gone() -> None:
    assert not (REPO / "config" / "params").exists()


def test_a_node_under_a_namespace_reads_the_deployment_file(spin_node: Any, tmp_path: Path) -> None:
    """deprojection_node started in /robot1 with the robot file runs on the file's values.

    The robot file sets ``pixel_stride: 2`` where the dataclass default is 1, so reading 2 back
    over DDS shows the ``/**/deprojection`` section applied under the namespace.
    """
    import subprocess
    import sys
    import time

    from rcl_interfaces.srv import GetParameters

    exe = Path(sys.executable).parent / "deprojection_node"
    assert exe.exists(), f"{exe} is missing (console scripts not installed)"
    log = (tmp_path / "deprojection.log").open("w")
    proc = subprocess.Popen(
        [str(exe), "--ros-args", "-r", "__ns:=/robot1", "--params-file",
         str(REPO / "config" / "mimir.yaml")],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        client = spin_node.create_client(GetParameters, "/robot1/deprojection/get_parameters")
        log_text = (tmp_path / "deprojection.log").read_text
        assert client.wait_for_service(timeout_sec=30.0), (
            "no /robot1/deprojection/get_parameters:\n" + log_text())
        names = ["pixel_stride", "cameras", "map_frame", "use_sim_time"]
        future = client.call_async(GetParameters.Request(names=names))
        deadline = time.monotonic() + 10.0
        while not future.done() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert future.done(), "get_parameters did not answer"
        values = dict(zip(names, future.result().values, strict=True))
        assert values["pixel_stride"].integer_value == 2  # the file's value; the default is 1
        assert list(values["cameras"].string_array_value) == ["base", "pole", "wrist"]
        assert values["map_frame"].string_value == "map"
        assert values["use_sim_time"].bool_value is False
    finally:
        stop_process(proc)
        log.close()
