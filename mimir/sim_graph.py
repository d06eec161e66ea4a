"""The simulation node graph, defined once for ``mimir sim`` and ``launch/sim.launch.py``.

Both start exactly the nodes listed in :data:`SIM_GRAPH`, under the same names, and both apply the
same per-node choices on top of ``config/mimir_sim.yaml``:

* the MuJoCo bridge owns the simulation clock (it publishes /clock), so it runs on wall time
  (``use_sim_time`` false); every other node follows /clock;
* the nodes that keep memory (world memory, keyframes, task memory) get the run's ``memory_dir``;
* the bridge gets the scenario, the analyzer and the planner get the reasoning backend;
* the bridge (which serves the simulated robot's RPC interface) and the executor (its client) get
  the same robot link: ``base_port``, ``arm_port`` and ``authkey``;
* the executor resets the simulated robot once connected (on the robot an operator does that);
* the planner's operator gate is off, since no operator approves primitives in simulation;
* localisation is the robot's: the localization node finds the kitchen's wall tags in the pole
  camera and publishes ``map -> odom``; the bridge publishes no transform from the map.

This module imports nothing from ``launch`` or ``rclpy`` so the job and the tests can read it
anywhere; the launch file turns each entry into a ``launch_ros`` node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any


@dataclass(frozen=True)
class GraphNode:
    """One node of a graph: what to run, what to call it, and what the graph sets on it.

    Attributes:
        executable: console script of the node (setup.py ``NODES``).
        name: node name; its parameter section is ``/**/<name>`` in the deployment file.
        follows_clock: the node runs on /clock (``use_sim_time`` true); false for the clock owner.
        keeps_memory: the node declares ``memory_dir`` and gets the run's memory folder.
        inputs: run choices the node takes as parameters of the same name (``scenario``,
            ``vlm_backend``).
        fixed: parameters the graph always sets on this node, over the deployment file.
        optional: run choices the node takes only when given (``tidybot_dir``); an empty choice
            keeps the deployment file's value.
        restartable: whether a run may start the node again when it dies (not the bridge: the
            simulated world lives in it, and a new one would start from the initial state).
    """

    executable: str
    name: str
    follows_clock: bool = True
    keeps_memory: bool = False
    inputs: tuple[str, ...] = ()
    fixed: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    optional: tuple[str, ...] = ()
    restartable: bool = True


#: The simulation graph, in start order.
SIM_GRAPH: tuple[GraphNode, ...] = (
    GraphNode("sim_bridge_node", "sim_bridge", follows_clock=False,
              inputs=("scenario", "base_port", "arm_port", "authkey"), optional=("tidybot_dir",),
              restartable=False),
    GraphNode("executor_node", "executor", inputs=("base_port", "arm_port", "authkey"),
              fixed=MappingProxyType({"reset_on_start": True})),
    GraphNode("localization_node", "localization"),
    GraphNode("deprojection_node", "deprojection"),
    GraphNode("scene_graph_node", "scene_graph", keeps_memory=True),
    GraphNode("keyframe_node", "keyframes", keeps_memory=True),
    GraphNode("analyzer_node", "analyzer", inputs=("vlm_backend",)),
    GraphNode("planner_node", "planner", keeps_memory=True, inputs=("vlm_backend",),
              fixed=MappingProxyType({"operator_gate": False})),
)

#: Robot link of the simulation when nothing else is chosen (the TidyBot++ ports; a local secret).
DEFAULT_ROBOT_LINK: Mapping[str, Any] = MappingProxyType(
    {"base_port": 50000, "arm_port": 50001, "authkey": "mimir-sim"})

#: Parameter file of the simulation deployment, under the package's config folder.
SIM_PARAMS_FILE = "mimir_sim.yaml"


def section_key(name: str) -> str:
    """Key of a node's section in a deployment file: matches the node under any namespace."""
    return f"/**/{name}"


def graph_parameters(node: GraphNode, *, memory_dir: Any, use_sim_time: Any = True,
                     **inputs: Any) -> dict[str, Any]:
    """The parameters the graph sets on ``node``, given the run's choices.

    ``memory_dir``, ``use_sim_time`` and ``inputs`` may be plain values (``mimir sim``) or launch
    substitutions (``sim.launch.py``); they are passed through untouched. ``use_sim_time``
    applies only to nodes that follow the clock; the clock owner always gets false.
    """
    values: dict[str, Any] = {"use_sim_time": use_sim_time if node.follows_clock else False}
    if node.keeps_memory:
        values["memory_dir"] = memory_dir
    for name in node.inputs:
        values[name] = inputs[name]
    values.update(node.fixed)
    return values


# --------------------------------------------------------------------------- the running graph

#: nodes of a simulation run that stand for the simulator or drive it; every other node is on
#: the robot side and must work unchanged on the TidyBot++
SIM_SIDE_NODES: tuple[str, ...] = ("/sim_bridge", "/mimir_sim_job")

#: topics the simulator publishes that a robot has too: ROS's own, and perception's outputs,
#: which the segmentation node publishes on the robot (the bridge stands in for it)
_SHARED_TOPICS = ("/clock", "/rosout", "/parameter_events", "/tf_static", "/diagnostics")
_PERCEPTION_OUTPUTS = ("segmentation", "parts")

GraphSnapshot = Mapping[str, Mapping[str, Sequence[str]]]


def robot_interfaces() -> frozenset[str]:
    """Topic names (absolute, root namespace) a robot offers: the contract and the shared ones."""
    from mimir_robot import contract  # noqa: PLC0415 - keeps this module light for launch files

    names = {contract.TOPIC_TF, contract.TOPIC_ODOM, contract.TOPIC_EE_COMMANDED,
             contract.TOPIC_EE_ACHIEVED, contract.TOPIC_GRIPPER,
             contract.TOPIC_INTERACTION_EVENTS, contract.TOPIC_DIAGNOSTICS, *_SHARED_TOPICS}
    for camera in contract.CAMERAS:
        topics = contract.camera_topics(camera)
        names |= {topics.color, topics.depth, topics.camera_info}
        names |= {f"cameras/{camera}/{kind}" for kind in _PERCEPTION_OUTPUTS}
    return frozenset(n if n.startswith("/") else f"/{n}" for n in names)


def sim_only_interfaces(graph: GraphSnapshot) -> frozenset[str]:
    """What the simulation side offers that no robot does: topics it publishes beyond the robot
    interfaces and services it serves (node parameter services aside)."""
    allowed = robot_interfaces()
    robot_offers = {name for node, entry in graph.items() if node not in SIM_SIDE_NODES
                    for name in (*entry.get("publishers", ()), *entry.get("services", ()))}
    offered: set[str] = set()
    for node in SIM_SIDE_NODES:
        entry = graph.get(node, {})
        offered |= {t for t in entry.get("publishers", ()) if t not in allowed}
        offered |= {s for s in entry.get("services", ()) if not s.startswith(f"{node}/")}
    return frozenset(offered - robot_offers)


def robot_side_violations(graph: GraphSnapshot) -> list[str]:
    """Every subscription or client of a robot-side node to a simulation-only interface."""
    only = sim_only_interfaces(graph)
    found: list[str] = []
    for node, entry in sorted(graph.items()):
        if node in SIM_SIDE_NODES:
            continue
        for what in ("subscriptions", "clients"):
            for name in entry.get(what, ()):
                if name in only or any(name.startswith(f"{sim}/") for sim in SIM_SIDE_NODES):
                    found.append(f"{node} {what[:-1]} {name}")
    return found
