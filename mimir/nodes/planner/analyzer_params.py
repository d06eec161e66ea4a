"""Parameters of the analyzer node, declared as ROS parameters with descriptions."""

from __future__ import annotations

import math
from dataclasses import dataclass

from mimir.nodes import common_params as shared
from mimir.settings import param

_BACKENDS = ("", "offline", "openai", "transformers")


@dataclass(frozen=True)
class AnalyzerNodeConfig:
    """Parameters of the analyzer node."""

    reasoning_config: str = param(
        "",
        "reasoning settings YAML; empty for the installed config/reasoning.yaml",
        read_only=True)
    vlm_backend: str = param(
        "",
        "offline, openai or transformers; empty to use the backend named in the reasoning config",
        read_only=True)
    vlm_endpoint: str = shared.vlm_endpoint()
    vlm_model: str = shared.vlm_model()
    reasoner_faults: float = param(
        0.0,
        "share of reasoner answers corrupted on purpose (0..1), to test the harness; 0 in "
        "operation",
        read_only=True)
    reasoner_fault_seed: int = param(0, "seed of the reasoner faults", read_only=True)
    fault_log: str = param(
        "", "JSON-lines file that receives every reasoner fault; empty: the log only",
        read_only=True)
    evidence_log: str = param(
        "",
        "JSON-lines file that receives what each analysis measured (gripper readings with the "
        "hand positions, frames, depth and hand measurements); empty: none",
        read_only=True)
    verifiers_off: str = param(
        "",
        "comma-separated verdict kinds switched off for ablations (see config/reasoning.yaml "
        "verifier.switched_off; 'all' for no harness); empty in operation",
        read_only=True)
    cameras: tuple[str, ...] = shared.cameras("cameras whose frames form the action window")
    buffer_seconds: float = param(
        60.0,
        "history kept of every buffered stream (s); must cover the longest action and its margins",
        read_only=True)
    frame_min_period_s: float = param(
        0.5,
        "colour frames closer than this to the previous kept frame of the camera are not buffered "
        "(s)",
        read_only=True)
    max_frames_per_camera: int = param(
        12,
        "frames per camera handed to the analyzer, evenly spread over the window (first and last "
        "always kept)",
        read_only=True)
    depth_tolerance_s: float = param(
        0.02,
        "largest stamp difference of a colour frame and its registered depth (s)",
        read_only=True)
    rectified: bool = shared.rectified()
    map_frame: str = shared.map_frame("fixed frame of memory")
    odom_frame: str = shared.odom_frame(
        "odometry frame: two frames of a camera are compared through their poses in it")
    base_frame: str = shared.base_frame()
    optical_frame_suffix: str = shared.optical_frame_suffix(
        "camera optical frame is <cam><suffix> when an image header has no frame id")
    gripper_stroke_m: float = param(
        0.085, "jaw opening of a fully open gripper (m)", read_only=True)
    gripper_open_below: float = param(
        0.05, "robot/gripper readings below this are an open gripper", read_only=True)
    gripper_closed_empty: float = param(
        0.93, "robot/gripper readings at or above this closed on nothing", read_only=True)
    tf_wait_s: float = param(
        2.0,
        "how long one analysis waits, in all, for TF to reach the stamps of frames newer than the "
        "newest transform (s)",
        read_only=True)
    window_margin_s: float = param(
        1.0,
        "frames and states this long before the start and after the end still belong to the "
        "window (s)",
        read_only=True)
    frame_wait_s: float = param(
        2.0,
        "how long an analysis waits for every camera to deliver a frame past the end of the "
        "window (s)",
        read_only=True)
    auto_analyze: bool = param(True, "analyse every ENDED interaction event", read_only=True)
    service_timeout_s: float = param(
        10.0, "timeout of each memory service call (s)", read_only=True)
    analysis_timeout_s: float = param(
        180.0,
        "how long a request waits for an analysis of the same interaction already in flight (s)",
        read_only=True)
    keyframe_max_offset_s: float = param(
        0.25,
        "furthest the keyframe node's frame may lie from the analyzer's frame stamp (s)",
        read_only=True)
    recheck_period_s: float = param(
        1.0, "period of re-checking deferred claims against new detections (s)", read_only=True)
    diagnostics_period_s: float = shared.diagnostics_period()

    def __post_init__(self) -> None:
        if self.vlm_backend not in _BACKENDS:
            raise ValueError(f"vlm_backend must be one of {_BACKENDS[1:]} or empty")
        shared.check_cameras(self.cameras)
        if not (math.isfinite(self.reasoner_faults) and 0.0 <= self.reasoner_faults <= 1.0):
            raise ValueError(f"reasoner_faults must lie in [0, 1], got {self.reasoner_faults}")
        if not (0.0 <= self.gripper_open_below < self.gripper_closed_empty <= 1.0
                and self.gripper_stroke_m > 0.0):
            raise ValueError("need 0 <= gripper_open_below < gripper_closed_empty <= 1 and a "
                             "positive gripper_stroke_m")
        if not self.map_frame or not self.odom_frame or not self.base_frame:
            raise ValueError("map_frame, odom_frame and base_frame must be non-empty")
        for name in ("buffer_seconds", "service_timeout_s", "analysis_timeout_s",
                     "recheck_period_s", "diagnostics_period_s"):
            if not getattr(self, name) > 0.0:
                raise ValueError(f"{name} must be positive")
        for name in ("frame_min_period_s", "depth_tolerance_s", "window_margin_s", "frame_wait_s",
                     "keyframe_max_offset_s", "tf_wait_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0.0):
                raise ValueError(f"{name} must be finite and non-negative")
        if self.max_frames_per_camera < 2:
            raise ValueError("max_frames_per_camera must be at least 2 (before and after)")
