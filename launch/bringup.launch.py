"""Bring up mimir on the robot: cameras, localization, the executor, perception, memory, reasoning,
planning.

    ros2 launch mimir bringup.launch.py
    ros2 launch mimir bringup.launch.py use_zed:=false vlm_backend:=openai operator_gate:=true
    ros2 launch mimir bringup.launch.py namespace:=robot1
    ros2 launch mimir bringup.launch.py sam3_model:=~/models/sam3 robot_host:=192.168.1.10 \
        cameras:=base,wrist vlm_endpoint:=http://gpu-box:8000/v1 \
        vlm_model:=Qwen/Qwen2.5-VL-7B-Instruct

Parameters come from config/mimir.yaml (the robot deployment), keyed ``/**/<node>`` so they apply
under any namespace; the arguments below go over it (an optional one left empty keeps the
file's value). Without SAM3 weights the segmentation node exits with one line saying how to get
them; the rest of the graph stays up (memory, keyframes, the planner answering from memory).
"""

from launch.conditions import IfCondition

from launch import LaunchDescription
from mimir.launch_nodes import argument, common_arguments, config, flag, node

#: Optional arguments (empty: the parameter file's value) and the parameter each one sets.
CAMERAS = {"cameras": "cameras"}
SAM3 = {"model": "sam3_model"}
ROBOT = {"host": "robot_host"}
VLM = {"vlm_endpoint": "vlm_endpoint", "vlm_model": "vlm_model"}


def generate_launch_description() -> LaunchDescription:
    backend = {"vlm_backend": config("vlm_backend")}
    return LaunchDescription([
        *common_arguments(params_file="mimir.yaml", use_sim_time="false",
                          memory_dir="~/.local/share/mimir/robot"),
        argument("use_zed", "true", "start the ZED capture node (needs the ZED SDK)"),
        argument("vlm_backend", "openai", "reasoning backend: openai, transformers or offline"),
        argument("vlm_endpoint", "", "OpenAI-compatible endpoint of the VLM (http://host:8000/v1); "
                 "empty: config/reasoning.yaml's"),
        argument("vlm_model", "", "VLM name at the endpoint, or a local folder for the "
                 "transformers backend; empty: config/reasoning.yaml's"),
        argument("operator_gate", "true", "every primitive waits for operator approval"),
        argument("cameras", "", "cameras to segment, deproject, keep and analyse, comma-separated "
                 "(base,pole,wrist); empty: the parameter file's lists"),
        argument("sam3_model", "", "SAM3 model folder (config.json, weights, tokenizer); empty: "
                 "the parameter file's"),
        argument("robot_host", "", "computer running the TidyBot++ base and arm servers; empty: "
                 "the parameter file's"),
        node("zed_node", "zed", condition=IfCondition(config("use_zed"))),
        node("localization_node", "localization"),
        node("executor_node", "executor", from_arguments=ROBOT),
        node("segmentation_node", "segmentation", from_arguments={**SAM3, **CAMERAS}),
        node("deprojection_node", "deprojection", from_arguments=CAMERAS),
        node("scene_graph_node", "scene_graph", keeps_memory=True),
        node("keyframe_node", "keyframes", keeps_memory=True, from_arguments=CAMERAS),
        node("analyzer_node", "analyzer", backend, from_arguments={**CAMERAS, **VLM}),
        node("planner_node", "planner", {**backend, "operator_gate": flag("operator_gate")},
             keeps_memory=True, from_arguments=VLM),
    ])
