"""Parameters of the scene graph node, declared as ROS parameters with descriptions."""

from __future__ import annotations

from dataclasses import dataclass

from mimir.nodes import common_params as shared
from mimir.settings import param
from mimir_memory.visibility import DEFAULT_SKIP_LABELS, VisibilityConfig


@dataclass(frozen=True)
class SceneGraphConfig:
    """Parameters of the scene graph node."""

    memory_dir: str = shared.memory_dir("folder of the memory databases (world.db here)")
    memory_config: str = shared.memory_config()
    map_frame: str = shared.map_frame("fixed frame of the graph", read_only=False)
    publish_period_s: float = param(0.5, "shortest period between graph publications (s)")
    queue_batches: int = param(
        30, "observation batches waiting for the writer at most; beyond, the oldest is dropped "
        "(about 1 s of three cameras at 10 Hz)")
    markers: bool = param(True, "publish RViz markers")
    hand_frame: str = param(
        "wrist_color_optical_frame",
        "frame a thing memory holds in the hand is drawn in (it moves with the hand); empty "
        "draws it where memory last placed it")
    record_misses: bool = param(
        True, "record a miss for a remembered object that a frame's view should have shown and "
        "did not (negative evidence; needs observation arrays with a valid view)",
        read_only=True)
    miss_margin_px: float = param(
        10.0, "a node counts only when its projected extent keeps this far from the image "
        "border (px)", read_only=True)
    miss_min_range_m: float = param(
        0.3, "nearest depth at which a node counts as expected (m)", read_only=True)
    miss_max_range_m: float = param(
        4.0, "farthest depth at which a node counts as expected (m); the view's range limits "
        "it too", read_only=True)
    miss_occlusion_tolerance_m: float = param(
        0.1, "a depth-grid cell nearer than the node's depth minus this hides the node (m)",
        read_only=True)
    miss_min_size_px: float = param(
        12.0, "least projected size of a node's box (longest side, px) to count as expected",
        read_only=True)
    miss_skip_labels: tuple[str, ...] = param(
        DEFAULT_SKIP_LABELS, "labels never expected whole in a frame (fixtures); a label or one "
        "of its words matches", read_only=True)
    miss_min_period_s: float = param(
        1.0, "least frame time between two misses recorded for one node (s)", read_only=True)
    operated_primitives: tuple[str, ...] = param(
        ("open", "close"), "primitives that swing a fixture's door or drawer: from their start "
        "on ``interaction_events`` until memory holds their analysed outcome, views of the "
        "target keep its centroid (association.anchor_open in the memory config)",
        read_only=True)
    diagnostics_period: float = shared.diagnostics_period()

    def __post_init__(self) -> None:
        if self.publish_period_s <= 0.0 or self.diagnostics_period <= 0.0:
            raise ValueError("publish_period_s and diagnostics_period must be positive")
        if self.queue_batches < 1:
            raise ValueError("queue_batches must be at least 1")
        if not self.miss_min_period_s >= 0.0:
            raise ValueError("miss_min_period_s must be >= 0")
        self.visibility()  # raises ConfigError (a ValueError) for bad miss_* values

    def visibility(self) -> VisibilityConfig:
        """The thresholds of the negative-evidence test."""
        return VisibilityConfig(
            margin_px=self.miss_margin_px,
            min_range_m=self.miss_min_range_m,
            max_range_m=self.miss_max_range_m,
            occlusion_tolerance_m=self.miss_occlusion_tolerance_m,
            min_size_px=self.miss_min_size_px,
            skip_labels=self.miss_skip_labels,
        )
