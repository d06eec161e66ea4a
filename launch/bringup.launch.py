"""Bring up mimir on the robot: cameras, localization, the executor, perception, memory, reasoning,
planning.

    ros2 launch mimir bringup.launch.py
    ros2 launch mimir bringup.launch.py use_zed:=false vlm_backend:=openai operator_gate:=true
    ros2 launch mimir bringup.launch.py namespace:=robot1

Parameters come from config/mimir.yaml (the robot deployment), keyed ``/**/<node>`` so they apply
under any namespace; the arguments below go over it.
"""

from launch.conditions import IfCondition

from launch import LaunchDescription
from mimir.launch_nodes import argument, common_arguments, config, flag, node


def generate_launch_description() -> LaunchDescription:
    backend = {"vlm_backend": config("vlm_backend")}
    return LaunchDescription([
        *common_arguments(params_file="mimir.yaml", use_sim_time="false",
                          memory_dir="~/.local/share/mimir/robot"),
        argument("use_zed", "true", "start the ZED capture node (needs the ZED SDK)"),
        argument("vlm_backend", "openai", "reasoning backend: openai, transformers or offline"),
        argument("operator_gate", "true", "every primitive waits for operator approval"),
        node("zed_node", "zed", condition=IfCondition(config("use_zed"))),
        node("localization_node", "localization"),
        node("executor_node", "executor"),
        node("segmentation_node", "segmentation"),
        node("deprojection_node", "deprojection"),
        node("scene_graph_node", "scene_graph", keeps_memory=True),
        node("keyframe_node", "keyframes", keeps_memory=True),
        node("analyzer_node", "analyzer", backend),
        node("planner_node", "planner", {**backend, "operator_gate": flag("operator_gate")},
             keeps_memory=True),
    ])
