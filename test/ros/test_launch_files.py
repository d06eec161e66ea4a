"""Static checks of the launch files (launch and launch_ros have no wheels here).

Every executable a launch file names must be a registered console script whose module exists, and
every parameter file it loads must exist, parse, and hold a ``ros__parameters`` section for each
node name it starts.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
LAUNCH_FILES = sorted((REPO / "launch").glob("*.launch.py"))


def _console_scripts() -> dict[str, str]:
    tree = ast.parse((REPO / "setup.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "NODES" for t in node.targets
        ):
            value = ast.literal_eval(node.value)
            assert isinstance(value, dict)
            return value
    raise AssertionError("setup.py defines no NODES table")


def _calls(tree: ast.AST, name: str) -> list[ast.Call]:
    return [
        n for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name
    ]


def _string_args(call: ast.Call) -> list[str]:
    return [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]


def test_the_three_launch_files_exist() -> None:
    names = {p.name for p in LAUNCH_FILES}
    assert {"bringup.launch.py", "sim.launch.py", "replay.launch.py"} <= names


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_executables_are_console_scripts(path: Path) -> None:
    scripts = _console_scripts()
    tree = ast.parse(path.read_text())
    executables = []
    for node_fn in _calls(tree, "node"):
        executables.extend(_string_args(node_fn)[:1])
    for call in _calls(tree, "Node"):
        for kw in call.keywords:
            if kw.arg == "executable" and isinstance(kw.value, ast.Constant):
                executables.append(str(kw.value.value))
    assert executables, f"{path.name} starts no node"
    for exe in executables:
        assert exe in scripts, f"{path.name}: {exe!r} is not a console script in setup.py"
        module = scripts[exe].split(":", 1)[0]
        assert importlib.util.find_spec(module) is not None, f"{module} does not exist"


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_parameter_files_exist_and_cover_the_nodes(path: Path) -> None:
    tree = ast.parse(path.read_text())
    yaml_files = [
        s for call in _calls(tree, "PathJoinSubstitution") for lst in call.args
        if isinstance(lst, ast.List)
        for s in [e.value for e in lst.elts if isinstance(e, ast.Constant)]
        if isinstance(s, str) and s.endswith(".yaml")
    ]
    assert yaml_files, f"{path.name} loads no parameter file"
    node_names = [args[1] for args in (_string_args(c) for c in _calls(tree, "node"))
                  if len(args) > 1]
    for name in yaml_files:
        config = REPO / "config" / name
        assert config.is_file(), f"{path.name} loads missing config/{name}"
        data = yaml.safe_load(config.read_text())
        assert isinstance(data, dict)
        for node_name in node_names:
            assert node_name in data, f"config/{name} has no section for node {node_name!r}"
            assert "ros__parameters" in data[node_name]


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_arguments_have_descriptions(path: Path) -> None:
    tree = ast.parse(path.read_text())
    declared = _calls(tree, "DeclareLaunchArgument")
    names = {_string_args(c)[0] for c in declared}
    assert {"namespace", "use_sim_time", "params_file", "log_level"} <= names
    for call in declared:
        keywords = {kw.arg for kw in call.keywords}
        name = _string_args(call)[0]
        assert "description" in keywords, f"{path.name}: {name} lacks a description"
