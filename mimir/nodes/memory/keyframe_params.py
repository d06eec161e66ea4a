"""Parameters of the keyframe node, declared as ROS parameters with descriptions."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class KeyframeConfig:
    """Parameters of the keyframe node."""

    memory_dir: str = field(
        default="~/.local/share/mimir/default",
        metadata={"description": "folder of the memory (keyframes/ is created inside)",
                  "read_only": True},
    )
    memory_config: str = field(
        default="", metadata={"description": "memory settings YAML; empty for the installed one",
                              "read_only": True})
    session: str = field(default="", metadata={"description": "session id; empty for a new one"})
    cameras: tuple[str, ...] = field(default=("base", "pole", "wrist"),
                                     metadata={"description": "cameras to buffer"})
    buffer_seconds: float = field(default=20.0,
                                  metadata={"description": "length of the frame buffer (s)"})
    buffer_max_frames: int = field(default=200,
                                   metadata={"description": "frames kept per camera at most"})
    perception_camera: str = field(
        default="pole", metadata={"description": "camera saved when the scene graph changes"})
    perception_min_period_s: float = field(
        default=1.0, metadata={"description": "shortest period between perception keyframes (s)"})
    after_wait_s: float = field(
        default=1.5, metadata={"description": "wait this long for a frame after an action (s)"})
    max_offset_s: float = field(
        default=0.5, metadata={"description": "furthest a saved frame may be from its stamp (s)"})
    map_frame: str = field(default="map", metadata={"description": "frame of robot poses"})
    base_frame: str = field(default="base_link", metadata={"description": "robot base frame"})
    disk_budget_mb: float = field(
        default=0.0, metadata={"description": "keyframe disk budget (MB); 0 for no limit"})
    query_limit: int = field(default=50, metadata={"description": "default query result size"})
    diagnostics_period: float = field(
        default=1.0, metadata={"description": "period of the /diagnostics report (s)",
                               "read_only": True})

    def __post_init__(self) -> None:
        if self.buffer_seconds <= 0 or self.buffer_max_frames <= 0:
            raise ValueError("the frame buffer must hold something")
        if self.query_limit <= 0:
            raise ValueError("query_limit must be positive")
        if not self.diagnostics_period > 0 or not self.max_offset_s > 0:
            raise ValueError("diagnostics_period and max_offset_s must be positive")
