"""Parameters of the planner node, declared as ROS parameters with descriptions."""

from __future__ import annotations

import math
from dataclasses import dataclass

from mimir.nodes import common_params as shared
from mimir.settings import param

BACKENDS = ("offline", "openai", "transformers")
"""Values of ``vlm_backend``."""


@dataclass(frozen=True)
class PlannerNodeConfig:
    """Parameters of the planner node, declared as ROS parameters with descriptions."""

    memory_dir: str = shared.memory_dir(
        "folder of the memory databases: world.db and keyframes/ are read, task.db is owned")
    memory_config: str = shared.memory_config()
    planner_config: str = param(
        "", "planner settings YAML; empty for the installed config/planner.yaml", read_only=True)
    reasoning_config: str = param(
        "",
        "reasoning settings YAML (VLM endpoint, model); empty for the installed reasoning.yaml",
        read_only=True)
    vlm_backend: str = param(
        "offline",
        "offline (offline planner and retrieval reasoner, no model), openai or transformers",
        read_only=True)
    vlm_endpoint: str = shared.vlm_endpoint()
    vlm_model: str = shared.vlm_model()
    step_budget: int = param(
        12, "planner steps per instruction when the goal gives none (twelve in simulation)")
    operator_gate: bool = param(
        False, "every primitive waits for operator approval (true on the robot)", read_only=True)
    gate_timeout_s: float = param(
        120.0, "a primitive not approved within this time is denied (s)", read_only=True)
    embodiment: str = param(
        "sim_tidybot",
        "embodiment of the primitive adapter (sim_tidybot, real_tidybot); empty for the planner "
        "config's",
        read_only=True)
    planner_camera: str = param(
        "pole", "camera whose latest image the planner sees (Set-of-Mark overlays)", read_only=True)
    map_frame: str = shared.map_frame("fixed frame of memory")
    optical_frame_suffix: str = shared.optical_frame_suffix(
        "optical frame = camera name + suffix when an image has no frame id")
    rectified: bool = shared.rectified()
    server_wait_s: float = param(
        5.0,
        "wait this long for execute_primitive and analyze_interaction to appear (s)",
        read_only=True)
    accept_timeout_s: float = param(
        10.0, "wait this long for a primitive goal to be accepted (s)", read_only=True)
    busy_retry_s: float = param(
        0.5,
        "a primitive goal the executor refused because it was busy (one restarted mid-step) is "
        "sent again this often, for at most primitive_timeout_s (s)",
        read_only=True)
    primitive_timeout_s: float = param(
        180.0, "a primitive running longer is canceled and counts as failed (s)", read_only=True)
    event_wait_s: float = param(
        2.0,
        "wait this long for the ENDED interaction event after a primitive's result (s)",
        read_only=True)
    analyze: bool = param(
        True, "have the interaction analyzer verify analysed primitives", read_only=True)
    use_keyframes: bool = param(
        True,
        "plan with the keyframe store (retrieval, clutter, appearance); false plans from the "
        "scene graph and task memory alone (an evaluation ablation)",
        read_only=True)
    representation: str = param(
        "scene_graph",
        "what the planner may read of memory, by name in config/representations.yaml: "
        "scene_graph (all of it) or a narrower one (an evaluation baseline)",
        read_only=True)
    analyzed_primitives: tuple[str, ...] = param(
        ("open", "close", "inspect", "pick", "place"),
        "primitives whose outcome the analyzer verifies (move_to is judged by the executor)",
        read_only=True)
    analysis_timeout_s: float = param(
        180.0, "wait this long for analyze_interaction (s)", read_only=True)
    require_verification: bool = param(
        True,
        "an analysed primitive the analyzer could not verify counts as failed",
        read_only=True)
    trace_max_bytes: int = param(
        20_000_000,
        "the planner trace (memory_dir/planner_trace.jsonl, one line per planner call) is "
        "rotated to .1 past this size (bytes)",
        read_only=True)
    diagnostics_period_s: float = shared.diagnostics_period()
    memory_wait_s: float = param(
        10.0,
        "an instruction that arrives while world memory holds no scene graph node yet waits at "
        "most this long for perception to fill it before planning (s); 0 plans at once",
        read_only=True)
    memory_settle_s: float = param(
        2.0,
        "within that wait, memory counts as filled once no new node has appeared for this long "
        "(s)",
        read_only=True)

    def __post_init__(self) -> None:
        if self.vlm_backend not in BACKENDS:
            raise ValueError(f"vlm_backend must be one of {BACKENDS}, got {self.vlm_backend!r}")
        if self.step_budget <= 0:
            raise ValueError(f"step_budget must be positive, got {self.step_budget}")
        if self.trace_max_bytes <= 0:
            raise ValueError(f"trace_max_bytes must be positive, got {self.trace_max_bytes}")
        for name in ("gate_timeout_s", "server_wait_s", "accept_timeout_s", "busy_retry_s",
                     "primitive_timeout_s", "analysis_timeout_s", "diagnostics_period_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0.0):
                raise ValueError(f"{name} must be a positive number, got {value!r}")
        for name in ("event_wait_s", "memory_wait_s", "memory_settle_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0.0):
                raise ValueError(f"{name} must be >= 0, got {value!r}")
        if not self.planner_camera or "/" in self.planner_camera:
            raise ValueError(f"planner_camera must be a plain name, got {self.planner_camera!r}")
        if not self.map_frame:
            raise ValueError("map_frame must not be empty")
