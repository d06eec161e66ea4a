"""Replay a recorded bag through perception and memory (no robot, no planner).

    ros2 launch mimir replay.launch.py bag:=/data/kitchen_run memory_dir:=/tmp/replay

``ros2 bag play --clock`` drives /clock, so every node runs on the bag's time. The bag must hold
the camera topics (color, registered depth, camera info per camera) and /tf, /tf_static.
"""

from launch.actions import DeclareLaunchArgument, ExecuteProcess
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

    def node(executable: str, name: str) -> Node:
        return Node(
            package="mimir",
            executable=executable,
            name=name,
            namespace=namespace,
            parameters=[params_file, common],
            arguments=["--ros-args", "--log-level", log_level],
            output="screen",
        )

    return LaunchDescription([
        DeclareLaunchArgument("namespace", default_value="",
                              description="namespace for every mimir node"),
        DeclareLaunchArgument("use_sim_time", default_value="true",
                              description="use the bag's /clock"),
        DeclareLaunchArgument(
            "params_file",
            default_value=PathJoinSubstitution([FindPackageShare("mimir"), "config", "mimir.yaml"]),
            description="parameter file with one section per node",
        ),
        DeclareLaunchArgument("log_level", default_value="info",
                              description="log level of every node (debug, info, warn, error)"),
        DeclareLaunchArgument("bag", description="path of the rosbag2 recording to replay"),
        DeclareLaunchArgument("rate", default_value="1.0",
                              description="playback rate relative to recorded time"),
        DeclareLaunchArgument("memory_dir", default_value="~/.local/share/mimir/replay",
                              description="folder of the memory databases and keyframes"),
        ExecuteProcess(
            cmd=["ros2", "bag", "play", LaunchConfiguration("bag"), "--clock",
                 "--rate", LaunchConfiguration("rate")],
            output="screen",
        ),
        node("segmentation_node", "segmentation"),
        node("deprojection_node", "deprojection"),
        node("scene_graph_node", "scene_graph"),
        node("keyframe_node", "keyframes"),
    ])
