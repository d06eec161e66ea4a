"""Parameters of the executor node: the robot profile plus connection, frames and cameras."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from mimir.nodes import common_params as shared
from mimir.settings import param, positive
from mimir_robot import contract as c
from mimir_robot.profile import ProfileError, RobotProfile


@dataclass(frozen=True)
class ExecutorNodeConfig(RobotProfile):
    """Parameters of the executor node (the profile's fields are parameters too)."""

    host: str = param("127.0.0.1", "host of the base and arm RPC servers", read_only=True)
    base_port: int = param(c.BASE_RPC_PORT, "TCP port of the base server", read_only=True)
    arm_port: int = param(c.ARM_RPC_PORT, "TCP port of the arm server", read_only=True)
    authkey: str = param("", "shared secret of the RPC servers (required)", read_only=True)
    connect_timeout_s: float = param(2.0, "deadline of one connect attempt (s)", read_only=True)
    call_timeout_s: float = param(1.0, "deadline of one server call (s)", read_only=True)
    reset_timeout_s: float = param(60.0, "deadline of a reset call (s)", read_only=True)
    link_settle_s: float = param(
        10.0, "how long a primitive waits at its start for a server call that outlived its "
        "deadline to be answered, before it fails with LINK_LOST (s; 0: not at all)",
        read_only=True)
    reset_on_start: bool = param(
        False, "reset base and arm once connected (the arm moves; off on the robot: reset through "
        "the robot/reset service instead)", read_only=True)
    state_rate_hz: float = param(20.0, "rate of the contract signals (Hz)", read_only=True)
    clock_stall_s: float = param(
        2.0, "under use_sim_time: wall time without a /clock tick after which a streamed "
        "motion stops waiting for simulated time (s; a stopped simulator)", read_only=True)
    map_frame: str = shared.map_frame("fixed frame of memory")
    odom_frame: str = shared.odom_frame()
    base_frame: str = shared.base_frame()
    pointing_cameras: tuple[str, ...] = param(
        ("pole", "base", "wrist"), "cameras searched, in order, for the target of a primitive",
        read_only=True)
    optical_frame_suffix: str = shared.optical_frame_suffix(
        "optical frame = camera + suffix when a header has none")
    view_timeout_s: float = param(
        3.0, "how long a primitive waits for a camera frame newer than its start (s)",
        read_only=True)
    target_tolerance: float = param(
        0.6, "largest distance between a seen instance and the remembered target (m)",
        read_only=True)
    trace_file: str = param(
        "", "JSON-lines file of every streamed target and reported state; empty: none",
        read_only=True)
    search_tags_on_start: bool = param(
        False, "once the robot is reset, turn the base in place until the localiser has a "
        "map pose when it has none (the base moves by itself: off unless the operator wants it)",
        read_only=True)
    tag_search_turns: tuple[float, ...] = param(
        (0.4, -0.4, 0.8, -0.8, 1.2, -1.2),
        "headings the search turns to, in order (rad from the heading the robot started at)",
        read_only=True)
    tag_search_dwell_s: float = param(
        3.0, "how long the search stands at each heading waiting for a fix (s; the localiser "
        "takes a fix only while the base stands still)", read_only=True)
    diagnostics_period: float = shared.diagnostics_period("period of /diagnostics (s)")

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.authkey:
            raise ProfileError("authkey is empty: set the RPC servers' shared secret")
        for name in ("base_port", "arm_port"):
            port = getattr(self, name)
            if not 0 < port < 65536:
                raise ProfileError(f"{name} {port} is not a TCP port")
        for name in ("connect_timeout_s", "call_timeout_s", "reset_timeout_s", "state_rate_hz",
                     "view_timeout_s", "target_tolerance", "diagnostics_period",
                     "tag_search_dwell_s", "clock_stall_s"):
            positive(name, getattr(self, name), ProfileError)
        if not self.link_settle_s >= 0.0:
            raise ProfileError(f"link_settle_s {self.link_settle_s} must be zero or positive")
        if not self.pointing_cameras:
            raise ProfileError("pointing_cameras is empty")
        if not self.tag_search_turns or any(
                not abs(t) <= math.pi for t in self.tag_search_turns):
            raise ProfileError(f"tag_search_turns {list(self.tag_search_turns)} must be "
                               "non-empty turns within half a revolution (rad)")

    def profile(self) -> RobotProfile:
        """The robot profile part of the parameters."""
        names = [f.name for f in dataclasses.fields(RobotProfile)]
        return RobotProfile(**{n: getattr(self, n) for n in names})
