"""Run mimir against the MuJoCo kitchen: simulation bridge, perception, memory, reasoning, planning.

    ros2 launch mimir sim.launch.py scenario:=locked_unlocked vlm_backend:=offline
    ros2 launch mimir sim.launch.py tidybot_dir:=~/mujoco_menagerie/stanford_tidybot

The node graph is ``mimir.sim_graph.SIM_GRAPH``, the one ``mimir sim`` starts, with the same
per-node choices (the bridge owns /clock and runs on wall time; the others follow /clock; the
executor drives the simulated robot through the RPC servers the bridge hosts).
Parameters come from config/mimir_sim.yaml, keyed ``/**/<node>``; send instructions through the
``run_task`` action. The robot model comes from the ``mujoco-menagerie`` package (downloaded on
first use, or from ``$MENAGERIE_ROOT``) unless ``tidybot_dir`` names one.
"""

from launch import LaunchDescription
from mimir.launch_nodes import argument, common_arguments, config, node
from mimir.sim_graph import DEFAULT_ROBOT_LINK, SIM_GRAPH, SIM_PARAMS_FILE, graph_parameters


def generate_launch_description() -> LaunchDescription:
    nodes = []
    for entry in SIM_GRAPH:
        # use_sim_time and memory_dir are applied by node() from the launch arguments
        extra = graph_parameters(entry, memory_dir=None, scenario=config("scenario"),
                                 vlm_backend=config("vlm_backend"),
                                 **{k: config(k) for k in DEFAULT_ROBOT_LINK})
        extra.pop("use_sim_time")
        extra.pop("memory_dir", None)
        nodes.append(node(entry.executable, entry.name, extra, keeps_memory=entry.keeps_memory,
                          follows_clock=entry.follows_clock,
                          from_arguments={name: name for name in entry.optional},
                          **({} if entry.restartable else {"respawn": False})))
    return LaunchDescription([
        *common_arguments(params_file=SIM_PARAMS_FILE, use_sim_time="true",
                          memory_dir="~/.local/share/mimir/sim",
                          clock_description="nodes other than the bridge use the simulator's "
                                            "/clock"),
        argument("scenario", "locked_unlocked",
                 "scenario name (config/scenarios) or path to a file"),
        argument("vlm_backend", "offline", "reasoning backend: offline, openai or transformers"),
        argument("tidybot_dir", "", "TidyBot++ model: tidybot.xml or a folder holding it; empty: "
                 "mujoco-menagerie's stanford_tidybot"),
        argument("base_port", str(DEFAULT_ROBOT_LINK["base_port"]),
                 "TCP port of the simulated robot's base server"),
        argument("arm_port", str(DEFAULT_ROBOT_LINK["arm_port"]),
                 "TCP port of the simulated robot's arm server"),
        argument("authkey", str(DEFAULT_ROBOT_LINK["authkey"]),
                 "shared secret of the simulated robot's servers"),
        *nodes,
    ])
