"""Bring up mimir on the robot: cameras, localization, perception, memory, reasoning, planning.

    ros2 launch mimir bringup.launch.py
    ros2 launch mimir bringup.launch.py use_zed:=false vlm_backend:=openai operator_gate:=true
"""

from launch.actions import DeclareLaunchArgument
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare

from launch import LaunchDescription


def generate_launch_description() -> LaunchDescription:
    namespace = LaunchConfiguration("namespace")
    use_sim_time = LaunchConfiguration("use_sim_time")
    params_file = LaunchConfiguration("params_file")
    log_level = LaunchConfiguration("log_level")
    common = {
        "use_sim_time": ParameterValue(use_sim_time, value_type=bool),
        "memory_dir": LaunchConfiguration("memory_dir"),
    }

    def node(executable: str, name: str, extra: dict | None = None, **kwargs) -> Node:
        return Node(
            package="mimir",
            executable=executable,
            name=name,
            namespace=namespace,
            parameters=[params_file, common, extra or {}],
            arguments=["--ros-args", "--log-level", log_level],
            output="screen",
            **kwargs,
        )

    return LaunchDescription([
        DeclareLaunchArgument("namespace", default_value="",
                              description="namespace for every mimir node"),
        DeclareLaunchArgument("use_sim_time", default_value="false",
                              description="use /clock instead of the wall clock"),
        DeclareLaunchArgument(
            "params_file",
            default_value=PathJoinSubstitution([FindPackageShare("mimir"), "config", "mimir.yaml"]),
            description="parameter file with one section per node",
        ),
        DeclareLaunchArgument("log_level", default_value="info",
                              description="log level of every node (debug, info, warn, error)"),
        DeclareLaunchArgument("use_zed", default_value="true",
                              description="start the ZED capture node (needs the ZED SDK)"),
        DeclareLaunchArgument("vlm_backend", default_value="openai",
                              description="reasoning backend: openai, transformers or offline"),
        DeclareLaunchArgument("operator_gate", default_value="true",
                              description="every primitive waits for operator approval"),
        DeclareLaunchArgument("memory_dir", default_value="~/.local/share/mimir/robot",
                              description="folder of the memory databases and keyframes"),
        node("zed_node", "zed", condition=IfCondition(LaunchConfiguration("use_zed"))),
        node("localization_node", "localization"),
        node("segmentation_node", "segmentation"),
        node("deprojection_node", "deprojection"),
        node("scene_graph_node", "scene_graph"),
        node("keyframe_node", "keyframes"),
        node("analyzer_node", "analyzer",
             {"vlm_backend": LaunchConfiguration("vlm_backend")}),
        node("planner_node", "planner",
             {"vlm_backend": LaunchConfiguration("vlm_backend"),
              "operator_gate": ParameterValue(LaunchConfiguration("operator_gate"),
                                              value_type=bool)}),
    ])
