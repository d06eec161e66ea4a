"""World memory, keyframe memory and task memory of mimir (no ROS imports in the core)."""
