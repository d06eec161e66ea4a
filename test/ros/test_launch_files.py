"""The launch files, run against stand-ins of launch and launch_ros (which have no wheels here).

Each file is imported and its ``generate_launch_description()`` called with small recording
stand-ins in place of the ``launch`` and ``launch_ros`` modules, so what the file would hand to
``ros2 launch`` can be checked: every node is a registered console script whose module exists,
every node has a ``/**/<name>`` section in the deployment file the file loads by default, every
argument has a description, and the simulation launch starts exactly ``mimir.sim_graph.SIM_GRAPH``.
``scripts/check_launch.sh`` runs the same files through the real ``launch.LaunchService``.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path
from typing import Any

import pytest
import yaml
from ros_helpers import console_scripts

from mimir.sim_graph import SIM_GRAPH, section_key

REPO = Path(__file__).resolve().parents[2]
LAUNCH_FILES = sorted((REPO / "launch").glob("*.launch.py"))


class Recorded:
    """An object a stand-in class made: which class, with which arguments."""

    kind = ""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args = args
        self.kwargs = kwargs


def _stand_ins() -> dict[str, types.ModuleType]:
    """Modules launch/launch_ros whose classes only record how they were called."""
    layout = {
        "launch": ["LaunchDescription"],
        "launch.actions": ["DeclareLaunchArgument", "ExecuteProcess", "OpaqueFunction"],
        "launch.conditions": ["IfCondition"],
        "launch.substitutions": ["LaunchConfiguration", "PathJoinSubstitution"],
        "launch_ros": [],
        "launch_ros.actions": ["Node"],
        "launch_ros.parameter_descriptions": ["ParameterValue"],
        "launch_ros.substitutions": ["FindPackageShare"],
    }
    modules = {}
    for name, classes in layout.items():
        module = types.ModuleType(name)
        module.__path__ = []  # a package, so submodules import
        for cls in classes:
            setattr(module, cls, type(cls, (Recorded,), {"kind": cls}))
        modules[name] = module
    return modules


class _Context:
    """What an ``OpaqueFunction`` reads of the launch context: the arguments' values."""

    def __init__(self, configurations: dict[str, str]) -> None:
        self.launch_configurations = configurations


def _describe(path: Path, monkeypatch: pytest.MonkeyPatch,
              given: dict[str, str] | None = None) -> list[Recorded]:
    """What the file hands to ``ros2 launch``; nodes built at launch time are built with the
    arguments' defaults overridden by ``given``."""
    for name, module in _stand_ins().items():
        monkeypatch.setitem(sys.modules, name, module)
    spec = importlib.util.spec_from_file_location(path.name.replace(".", "_"), path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    description = module.generate_launch_description()
    assert description.kind == "LaunchDescription"
    entities = list(description.args[0])
    values = {name: call.kwargs.get("default_value")
              for name, call in _arguments(entities).items()}
    values.update(given or {})
    expanded: list[Recorded] = []
    for entity in entities:
        if entity.kind == "OpaqueFunction":
            expanded.extend(entity.kwargs["function"](_Context(values)))
        else:
            expanded.append(entity)
    return expanded


def _of(entities: list[Recorded], kind: str) -> list[Recorded]:
    return [e for e in entities if e.kind == kind]


def _arguments(entities: list[Recorded]) -> dict[str, Recorded]:
    return {e.args[0]: e for e in _of(entities, "DeclareLaunchArgument")}


def _default_params_file(entities: list[Recorded]) -> Path:
    default = _arguments(entities)["params_file"].kwargs["default_value"]
    assert default.kind == "PathJoinSubstitution"
    share, *parts = default.args[0]
    assert share.kind == "FindPackageShare" and share.args == ("mimir",)
    return REPO.joinpath(*parts)


def test_the_three_launch_files_exist() -> None:
    names = {p.name for p in LAUNCH_FILES}
    assert {"bringup.launch.py", "sim.launch.py", "replay.launch.py"} <= names


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_executables_are_console_scripts(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scripts = console_scripts()
    nodes = _of(_describe(path, monkeypatch), "Node")
    assert nodes, f"{path.name} starts no node"
    for node in nodes:
        assert node.kwargs["package"] == "mimir"
        exe = node.kwargs["executable"]
        assert exe in scripts, f"{path.name}: {exe!r} is not a console script in setup.py"
        module = scripts[exe].split(":", 1)[0]
        assert importlib.util.find_spec(module) is not None, f"{module} does not exist"


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_every_node_has_a_section_for_any_namespace(path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    entities = _describe(path, monkeypatch)
    config = _default_params_file(entities)
    assert config.is_file(), f"{path.name} loads missing {config}"
    data = yaml.safe_load(config.read_text())
    for node in _of(entities, "Node"):
        key = section_key(node.kwargs["name"])
        assert key in data, f"{config.name} has no section {key!r}"
        assert "ros__parameters" in data[key]
        params_file, common, _extra = node.kwargs["parameters"]
        assert params_file.kind == "LaunchConfiguration" and params_file.args == ("params_file",)
        assert node.kwargs["namespace"].args == ("namespace",)
        assert "use_sim_time" in common
        if node.kwargs["name"] != "sim_bridge":  # the simulated world is never restarted
            assert node.kwargs["respawn"] is True, node.kwargs["name"]


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_arguments_have_descriptions(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    arguments = _arguments(_describe(path, monkeypatch))
    assert {"namespace", "use_sim_time", "params_file", "log_level", "memory_dir"} <= set(arguments)
    for name, call in arguments.items():
        assert call.kwargs.get("description"), f"{path.name}: {name} lacks a description"


def test_optional_arguments_override_the_file_only_when_given(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def extras(given: dict[str, str]) -> dict[str, dict[str, Any]]:
        nodes = _of(_describe(REPO / "launch" / "bringup.launch.py", monkeypatch, given), "Node")
        return {n.kwargs["name"]: n.kwargs["parameters"][2] for n in nodes}

    plain = extras({})
    assert "model" not in plain["segmentation"] and "cameras" not in plain["deprojection"]
    assert "host" not in plain["executor"]
    assert "vlm_endpoint" not in plain["planner"]
    chosen = extras({"sam3_model": "/models/sam3", "cameras": "base, wrist,",
                     "robot_host": "10.0.0.2", "vlm_endpoint": "http://gpu:8000/v1"})
    assert chosen["segmentation"]["model"] == "/models/sam3"
    for name in ("segmentation", "deprojection", "keyframes", "analyzer"):
        assert chosen[name]["cameras"] == ["base", "wrist"]
    assert chosen["executor"]["host"] == "10.0.0.2"
    assert "cameras" not in chosen["planner"]
    for name in ("analyzer", "planner"):
        assert chosen[name]["vlm_endpoint"] == "http://gpu:8000/v1"
        assert "vlm_model" not in chosen[name]


def test_sim_launch_starts_the_sim_graph(monkeypatch: pytest.MonkeyPatch) -> None:
    nodes = _of(_describe(REPO / "launch" / "sim.launch.py", monkeypatch), "Node")
    assert [(n.kwargs["executable"], n.kwargs["name"]) for n in nodes] == [
        (n.executable, n.name) for n in SIM_GRAPH]
    for node, entry in zip(nodes, SIM_GRAPH, strict=True):
        _params_file, common, extra = node.kwargs["parameters"]
        if entry.follows_clock:
            assert common["use_sim_time"].kind == "ParameterValue"
        else:
            assert common["use_sim_time"] is False  # the bridge owns /clock
        assert ("memory_dir" in common) == entry.keeps_memory
        assert set(extra) == set(entry.inputs) | set(entry.fixed)
        # a node that dies is started again, a bounded number of times; never the simulator
        assert node.kwargs["respawn"] is entry.restartable
        assert node.kwargs["respawn_max_retries"] == 5 and node.kwargs["respawn_delay"] > 0
    assert not nodes[0].kwargs["respawn"] and nodes[0].kwargs["name"] == "sim_bridge"
    planner = nodes[[n.name for n in SIM_GRAPH].index("planner")]
    assert planner.kwargs["parameters"][2]["operator_gate"] is False


def test_the_job_and_the_launch_file_share_one_graph() -> None:
    from mimir.sim_job import SIM_NODES

    assert [(n.executable, n.name) for n in SIM_GRAPH] == list(SIM_NODES)


def test_robot_side_violations_find_subscriptions_and_calls_to_simulator_interfaces() -> None:
    from mimir.sim_graph import robot_side_violations, sim_only_interfaces

    graph = {
        "/sim_bridge": {
            "publishers": ["/cameras/base/color/image_raw", "/clock", "/joint_states",
                           "/cameras/base/segmentation", "/tf"],
            "services": ["/sim/judge_instruction", "/sim_bridge/get_parameters"],
        },
        "/mimir_sim_job": {"clients": ["/sim/judge_instruction"]},
        "/executor": {"publishers": ["/robot/gripper", "/tf"], "services": ["/robot/reset"]},
        "/analyzer": {"subscriptions": ["/cameras/base/color/image_raw", "/robot/gripper",
                                        "/clock", "/cameras/base/segmentation"]},
    }
    assert sim_only_interfaces(graph) == {"/joint_states", "/sim/judge_instruction"}
    assert robot_side_violations(graph) == []
    graph["/analyzer"]["subscriptions"].append("/joint_states")
    graph["/planner"] = {"clients": ["/sim/judge_instruction", "/sim_bridge/get_parameters"]}
    assert robot_side_violations(graph) == [
        "/analyzer subscription /joint_states", "/planner client /sim/judge_instruction",
        "/planner client /sim_bridge/get_parameters"]
