"""Run mimir against the MuJoCo kitchen: simulation bridge, perception, memory, reasoning, planning.

    ros2 launch mimir sim.launch.py scenario:=locked_unlocked vlm_backend:=offline

The same node graph that ``mimir sim`` starts; send instructions through the ``run_task`` action.
"""

from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare

from launch import LaunchDescription


def generate_launch_description() -> LaunchDescription:
    namespace = LaunchConfiguration("namespace")
    params_file = LaunchConfiguration("params_file")
    log_level = LaunchConfiguration("log_level")
    common = {
        "use_sim_time": ParameterValue(LaunchConfiguration("use_sim_time"), value_type=bool),
        "memory_dir": LaunchConfiguration("memory_dir"),
    }

    def node(executable: str, name: str, extra: dict | None = None) -> Node:
        return Node(
            package="mimir",
            executable=executable,
            name=name,
            namespace=namespace,
            parameters=[params_file, common, extra or {}],
            arguments=["--ros-args", "--log-level", log_level],
            output="screen",
        )

    return LaunchDescription([
        DeclareLaunchArgument("namespace", default_value="",
                              description="namespace for every mimir node"),
        DeclareLaunchArgument("use_sim_time", default_value="true",
                              description="use the simulator's /clock"),
        DeclareLaunchArgument(
            "params_file",
            default_value=PathJoinSubstitution(
                [FindPackageShare("mimir"), "config", "mimir_sim.yaml"]
            ),
            description="parameter file with one section per node",
        ),
        DeclareLaunchArgument("log_level", default_value="info",
                              description="log level of every node (debug, info, warn, error)"),
        DeclareLaunchArgument("scenario", default_value="locked_unlocked",
                              description="scenario name (config/scenarios) or path to a file"),
        DeclareLaunchArgument("vlm_backend", default_value="offline",
                              description="reasoning backend: offline, openai or transformers"),
        DeclareLaunchArgument("memory_dir", default_value="~/.local/share/mimir/sim",
                              description="folder of the memory databases and keyframes"),
        node("sim_bridge_node", "sim_bridge", {"scenario": LaunchConfiguration("scenario")}),
        node("deprojection_node", "deprojection"),
        node("scene_graph_node", "scene_graph"),
        node("keyframe_node", "keyframes"),
        node("analyzer_node", "analyzer", {"vlm_backend": LaunchConfiguration("vlm_backend")}),
        node("planner_node", "planner", {"vlm_backend": LaunchConfiguration("vlm_backend")}),
    ])
