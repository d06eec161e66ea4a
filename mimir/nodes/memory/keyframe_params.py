"""Parameters of the keyframe node, declared as ROS parameters with descriptions."""

from __future__ import annotations

from dataclasses import dataclass

from mimir.settings import param


@dataclass(frozen=True)
class KeyframeConfig:
    """Parameters of the keyframe node."""

    memory_dir: str = param(
        "~/.local/share/mimir/default",
        "folder of the memory (keyframes/ is created inside)",
        read_only=True)
    memory_config: str = param(
        "", "memory settings YAML; empty for the installed one", read_only=True)
    session: str = param("", "session id; empty for a new one")
    cameras: tuple[str, ...] = param(("base", "pole", "wrist"), "cameras to buffer")
    buffer_seconds: float = param(20.0, "length of the frame buffer (s)")
    buffer_max_frames: int = param(200, "frames kept per camera at most")
    perception_camera: str = param("pole", "camera saved when the scene graph changes")
    perception_min_period_s: float = param(1.0, "shortest period between perception keyframes (s)")
    after_wait_s: float = param(1.5, "wait this long for a frame after an action (s)")
    max_offset_s: float = param(0.5, "furthest a saved frame may be from its stamp (s)")
    map_frame: str = param("map", "frame of robot poses")
    base_frame: str = param("base_link", "robot base frame")
    disk_budget_mb: float = param(0.0, "keyframe disk budget (MB); 0 for no limit")
    query_limit: int = param(50, "default query result size")
    diagnostics_period: float = param(1.0, "period of the /diagnostics report (s)", read_only=True)

    def __post_init__(self) -> None:
        if self.buffer_seconds <= 0 or self.buffer_max_frames <= 0:
            raise ValueError("the frame buffer must hold something")
        if self.query_limit <= 0:
            raise ValueError("query_limit must be positive")
        if not self.diagnostics_period > 0 or not self.max_offset_s > 0:
            raise ValueError("diagnostics_period and max_offset_s must be positive")
