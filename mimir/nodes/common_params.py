"""Parameters that several nodes declare with the same meaning, written once.

Each function returns a dataclass field made by :func:`mimir.settings.param`, for a node's frozen
config dataclass (``mimir.ros.params.declare_config`` turns every field into a ROS parameter).
The shared part is the default and the read-only flag, so frame names, the memory folder and the
camera set cannot drift apart between nodes; a node whose wording differs passes its own
description.

    @dataclass(frozen=True)
    class Config:
        map_frame: str = shared.map_frame("fixed frame of memory")
        diagnostics_period: float = shared.diagnostics_period()
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mimir.settings import param
from mimir_robot import contract

DEFAULT_MEMORY_DIR = "~/.local/share/mimir/default"
"""Folder of the memory databases when a node is not told otherwise."""

OPTICAL_FRAME_SUFFIX = contract.camera_optical_frame("")
"""What the robot contract appends to a camera name to form its optical frame."""


def memory_dir(description: str) -> Any:
    """Folder of the memory databases (read-only)."""
    return param(DEFAULT_MEMORY_DIR, description, read_only=True)


def memory_config(
        description: str = "memory settings YAML; empty for the installed memory.yaml") -> Any:
    """Memory settings file; empty for the installed one (read-only)."""
    return param("", description, read_only=True)


def cameras(description: str, *, read_only: bool = True) -> Any:
    """Camera names, by default every camera of the robot contract."""
    return param(contract.CAMERAS, description, read_only=read_only)


def map_frame(description: str, *, read_only: bool = True) -> Any:
    """The fixed map frame."""
    return param(contract.FRAME_MAP, description, read_only=read_only)


def odom_frame(description: str = "odometry frame") -> Any:
    """The odometry frame (read-only)."""
    return param(contract.FRAME_ODOM, description, read_only=True)


def base_frame(*, read_only: bool = True) -> Any:
    """The robot base frame."""
    return param(contract.FRAME_BASE, "robot base frame", read_only=read_only)


def optical_frame_suffix(description: str) -> Any:
    """Suffix that turns a camera name into its optical frame (read-only)."""
    return param(OPTICAL_FRAME_SUFFIX, description, read_only=True)


def rectified(description: str = "camera infos describe rectified images") -> Any:
    """Whether camera infos describe rectified images (read-only)."""
    return param(True, description, read_only=True)


def tf_cache() -> Any:
    """Length of the transform history a node keeps (read-only)."""
    return param(10.0, "transform history kept (s)", read_only=True)


def diagnostics_period(description: str = "period of the /diagnostics report (s)") -> Any:
    """Period of the node's /diagnostics report (read-only)."""
    return param(1.0, description, read_only=True)


def vlm_endpoint() -> Any:
    """The model server's OpenAI-compatible base URL; empty for the reasoning config's."""
    return param("", "OpenAI-compatible endpoint (base URL); empty for the reasoning config's",
                 read_only=True)


def vlm_model() -> Any:
    """The model's name at the endpoint (or a local folder); empty for the reasoning config's."""
    return param("", "model name at the endpoint, or a local folder for transformers; empty for "
                 "the reasoning config's", read_only=True)


def check_cameras(cameras: Sequence[str]) -> None:
    """Refuse an empty camera list, names that are empty or hold a slash, and repeats.

    Raises:
        ValueError: The list is not a set of plain camera names.
    """
    if not cameras or any(not c or "/" in c for c in cameras):
        raise ValueError(f"cameras must be plain non-empty names, got {cameras!r}")
    if len(set(cameras)) != len(cameras):
        raise ValueError(f"cameras repeat: {cameras!r}")
