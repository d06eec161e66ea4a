"""Replay a recorded bag through perception and memory (no robot, no planner).

    ros2 launch mimir replay.launch.py bag:=/data/kitchen_run memory_dir:=/tmp/replay

``ros2 bag play --clock`` drives /clock, so every node runs on the bag's time. The bag must hold
the camera topics (color, registered depth, camera info per camera) and /tf, /tf_static.
Parameters come from config/mimir.yaml (the robot deployment), keyed ``/**/<node>``.
"""

from launch.actions import ExecuteProcess

from launch import LaunchDescription
from mimir.launch_nodes import argument, common_arguments, config, node


def generate_launch_description() -> LaunchDescription:
    return LaunchDescription([
        *common_arguments(params_file="mimir.yaml", use_sim_time="true",
                          memory_dir="~/.local/share/mimir/replay",
                          clock_description="use the bag's /clock"),
        argument("bag", None, "path of the rosbag2 recording to replay"),
        argument("rate", "1.0", "playback rate relative to recorded time"),
        argument("cameras", "", "cameras to segment, deproject and keep, comma-separated; empty: "
                 "the parameter file's lists"),
        argument("sam3_model", "", "SAM3 model folder (config.json, weights, tokenizer); empty: "
                 "the parameter file's"),
        ExecuteProcess(
            cmd=["ros2", "bag", "play", config("bag"), "--clock", "--rate", config("rate")],
            output="screen",
        ),
        node("segmentation_node", "segmentation",
             from_arguments={"model": "sam3_model", "cameras": "cameras"}),
        node("deprojection_node", "deprojection", from_arguments={"cameras": "cameras"}),
        node("scene_graph_node", "scene_graph", keeps_memory=True),
        node("keyframe_node", "keyframes", keeps_memory=True,
             from_arguments={"cameras": "cameras"}),
    ])
