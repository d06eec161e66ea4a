"""Parameters of the analyzer node, declared as ROS parameters with descriptions."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

_BACKENDS = ("", "offline", "openai", "transformers")


@dataclass(frozen=True)
class AnalyzerNodeConfig:
    """Parameters of the analyzer node."""

    reasoning_config: str = field(
        default="",
        metadata={"description": "reasoning settings YAML; empty for the installed "
                  "config/reasoning.yaml", "read_only": True},
    )
    vlm_backend: str = field(
        default="",
        metadata={"description": "offline, openai or transformers; empty to use the backend "
                  "named in the reasoning config", "read_only": True},
    )
    cameras: tuple[str, ...] = field(
        default=("base", "pole", "wrist"),
        metadata={"description": "cameras whose frames form the action window",
                  "read_only": True},
    )
    buffer_seconds: float = field(
        default=20.0, metadata={"description": "history kept of every buffered stream (s)",
                                "read_only": True})
    frame_min_period_s: float = field(
        default=0.5, metadata={"description": "colour frames closer than this to the previous "
                               "kept frame of the camera are not buffered (s)",
                               "read_only": True})
    max_frames_per_camera: int = field(
        default=12, metadata={"description": "frames per camera handed to the analyzer, evenly "
                              "spread over the window (first and last always kept)",
                              "read_only": True})
    depth_tolerance_s: float = field(
        default=0.02, metadata={"description": "largest stamp difference of a colour frame "
                                "and its registered depth (s)", "read_only": True})
    rectified: bool = field(
        default=True, metadata={"description": "camera infos describe rectified images",
                                "read_only": True})
    map_frame: str = field(default="map", metadata={"description": "fixed frame of memory",
                                                    "read_only": True})
    base_frame: str = field(default="base_link", metadata={"description": "robot base frame",
                                                           "read_only": True})
    optical_frame_suffix: str = field(
        default="_color_optical_frame",
        metadata={"description": "camera optical frame is <cam><suffix> when an image header "
                  "has no frame id", "read_only": True})
    gripper_joint: str = field(
        default="gripper", metadata={"description": "joint of joint_states that reports the "
                                     "gripper (position = opening m, effort = grip force N)",
                                     "read_only": True})
    contact_effort_n: float = field(
        default=5.0, metadata={"description": "grip force above which the jaws touch something "
                               "(N)", "read_only": True})
    closed_opening_m: float = field(
        default=0.004, metadata={"description": "jaw opening below which the gripper closed on "
                                 "nothing (m)", "read_only": True})
    prismatic_labels: tuple[str, ...] = field(
        default=("drawer",),
        metadata={"description": "fixture labels whose target_state position is a slide in "
                  "metres; every other fixture's is a hinge angle in radians (label of the "
                  "memory node, else the id without its _<number> suffix)", "read_only": True})
    tf_wait_s: float = field(
        default=2.0, metadata={"description": "how long one analysis waits, in all, for TF to "
                               "reach the stamps of frames newer than the newest transform (s)",
                               "read_only": True})
    window_margin_s: float = field(
        default=1.0, metadata={"description": "frames and states this long before the start "
                               "and after the end still belong to the window (s)",
                               "read_only": True})
    frame_wait_s: float = field(
        default=2.0, metadata={"description": "how long an analysis waits for every camera to "
                               "deliver a frame past the end of the window (s)",
                               "read_only": True})
    auto_analyze: bool = field(
        default=True, metadata={"description": "analyse every ENDED interaction event",
                                "read_only": True})
    service_timeout_s: float = field(
        default=10.0, metadata={"description": "timeout of each memory service call (s)",
                                "read_only": True})
    analysis_timeout_s: float = field(
        default=180.0, metadata={"description": "how long a request waits for an analysis of "
                                 "the same interaction already in flight (s)",
                                 "read_only": True})
    keyframe_max_offset_s: float = field(
        default=0.25, metadata={"description": "furthest the keyframe node's frame may lie from "
                                "the analyzer's frame stamp (s)", "read_only": True})
    recheck_period_s: float = field(
        default=1.0, metadata={"description": "period of re-checking deferred claims against "
                               "new detections (s)", "read_only": True})
    diagnostics_period_s: float = field(
        default=1.0, metadata={"description": "period of the /diagnostics report (s)",
                               "read_only": True})

    def __post_init__(self) -> None:
        if self.vlm_backend not in _BACKENDS:
            raise ValueError(f"vlm_backend must be one of {_BACKENDS[1:]} or empty")
        if not self.cameras or any(not c or "/" in c for c in self.cameras):
            raise ValueError(f"cameras must be plain non-empty names, got {self.cameras!r}")
        if len(set(self.cameras)) != len(self.cameras):
            raise ValueError(f"cameras repeat: {self.cameras!r}")
        if not self.map_frame or not self.base_frame or not self.gripper_joint:
            raise ValueError("map_frame, base_frame and gripper_joint must be non-empty")
        for name in ("buffer_seconds", "service_timeout_s", "analysis_timeout_s",
                     "recheck_period_s", "diagnostics_period_s"):
            if not getattr(self, name) > 0.0:
                raise ValueError(f"{name} must be positive")
        for name in ("frame_min_period_s", "depth_tolerance_s", "contact_effort_n",
                     "closed_opening_m", "window_margin_s", "frame_wait_s",
                     "keyframe_max_offset_s", "tf_wait_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0.0):
                raise ValueError(f"{name} must be finite and non-negative")
        if any(not label.strip() for label in self.prismatic_labels):
            raise ValueError(f"prismatic_labels must be non-empty labels, got "
                             f"{self.prismatic_labels!r}")
        if self.max_frames_per_camera < 2:
            raise ValueError("max_frames_per_camera must be at least 2 (before and after)")
