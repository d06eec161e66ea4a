"""Parameters of the keyframe node, declared as ROS parameters with descriptions."""

from __future__ import annotations

from dataclasses import dataclass

from mimir.nodes import common_params as shared
from mimir.settings import param


@dataclass(frozen=True)
class KeyframeConfig:
    """Parameters of the keyframe node."""

    memory_dir: str = shared.memory_dir("folder of the memory (keyframes/ is created inside)")
    memory_config: str = shared.memory_config("memory settings YAML; empty for the installed one")
    session: str = param("", "session id; empty for a new one")
    cameras: tuple[str, ...] = shared.cameras("cameras to buffer", read_only=False)
    buffer_seconds: float = param(
        60.0, "length of the frame buffer (s); covers the longest action and its margins")
    buffer_max_frames: int = param(240, "frames kept per camera at most")
    buffer_min_period_s: float = param(
        0.25,
        "a camera's frame closer than this to its previous kept frame is not buffered (or "
        "decoded), so buffer_max_frames reaches back buffer_seconds at any camera rate (s)")
    perception_camera: str = param("pole", "camera saved when the scene graph changes")
    perception_min_period_s: float = param(1.0, "shortest period between perception keyframes (s)")
    after_wait_s: float = param(1.5, "wait this long for a frame after an action (s)")
    max_offset_s: float = param(0.5, "furthest a saved frame may be from its stamp (s)")
    map_frame: str = shared.map_frame("frame of robot poses", read_only=False)
    base_frame: str = shared.base_frame(read_only=False)
    disk_budget_mb: float = param(0.0, "keyframe disk budget (MB); 0 for no limit")
    frustums: int = param(
        40, "newest keyframes drawn as camera frustums on keyframes/markers; 0 for none")
    frustum_depth_m: float = param(0.12, "depth of a drawn camera frustum (m)")
    query_limit: int = param(50, "default query result size")
    diagnostics_period: float = shared.diagnostics_period()

    def __post_init__(self) -> None:
        if self.buffer_seconds <= 0 or self.buffer_max_frames <= 0:
            raise ValueError("the frame buffer must hold something")
        if not 0.0 <= self.buffer_min_period_s < self.buffer_seconds:
            raise ValueError("buffer_min_period_s must lie in [0, buffer_seconds)")
        if self.frustums < 0 or not self.frustum_depth_m > 0:
            raise ValueError("frustums must be >= 0 and frustum_depth_m positive")
        if self.query_limit <= 0:
            raise ValueError("query_limit must be positive")
        if not self.diagnostics_period > 0 or not self.max_offset_s > 0:
            raise ValueError("diagnostics_period and max_offset_s must be positive")
