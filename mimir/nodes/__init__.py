"""The ROS layer: thin nodes and message converters, one subpackage per domain.

A node reads messages, converts them with its domain's converter, calls the ROS-free core
(``mimir_memory``, ``mimir_perception``, ``mimir_planner``, ``mimir_sim``) and publishes the
result. Nothing below this layer imports it (see ``.importlinter``).
"""
