"""Shared scene, window and recorded-server helpers for the reasoning tests."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
from recorded_server import Step

from mimir_planner.reasoning import (
    ActionWindow,
    Box3D,
    CameraFrame,
    Detection3D,
    InMemoryWorld,
    NodeSnapshot,
    PrimitiveRecord,
    RobotStateSample,
    load_reasoning_config,
)
from mimir_planner.reasoning.config import ReasoningConfig

RECORDED = Path(__file__).resolve().parent / "recorded"

H, W = 48, 64
K = np.array([[50.0, 0.0, W / 2], [0.0, 50.0, H / 2], [0.0, 0.0, 1.0]])
# optical frame of a camera at (0, 0, 0.5) looking along map +x (z forward, x right, y down)
CAM_POSE = np.array(
    [[0.0, 0.0, 1.0, 0.0], [-1.0, 0.0, 0.0, 0.0], [0.0, -1.0, 0.0, 0.5], [0.0, 0.0, 0.0, 1.0]]
)

# a tall unit filling most of the test camera's view: front at x 0.8, back at 1.2
CUPBOARD = Box3D(np.array([0.8, -0.4, 0.1]), np.array([1.2, 0.4, 0.9]))


def make_world() -> InMemoryWorld:
    """drawer_3 (target), drawer_4 beside it, cabinet_1 further off, a mug on the counter."""
    return InMemoryWorld(
        [
            NodeSnapshot(
                "drawer_3",
                "drawer",
                np.array([1.0, 0.0, 0.5]),
                Box3D(np.array([0.8, -0.2, 0.4]), np.array([1.2, 0.2, 0.6])),
                {"openable": {"value": "unknown", "confidence": 0.5, "source": "perception"}},
            ),
            NodeSnapshot(
                "drawer_4",
                "drawer",
                np.array([1.0, 0.6, 0.5]),
                Box3D(np.array([0.8, 0.4, 0.4]), np.array([1.2, 0.8, 0.6])),
            ),
            NodeSnapshot(
                "cabinet_1",
                "cabinet",
                np.array([1.0, -0.9, 0.9]),
                Box3D(np.array([0.8, -1.2, 0.7]), np.array([1.2, -0.6, 1.1])),
            ),
            NodeSnapshot("mug_1", "mug", np.array([0.5, 0.5, 0.9])),
        ]
    )


def config(**vlm: object) -> ReasoningConfig:
    """Project config with fast retry settings and optional VLM overrides."""
    cfg = load_reasoning_config()
    base = {"backoff_initial_s": 0.01, "backoff_max_s": 0.05, "timeout_s": 2.0}
    base.update(vlm)
    return replace(cfg, vlm=replace(cfg.vlm, **base))  # type: ignore[arg-type]


def _image(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 255, size=(H, W, 3), dtype=np.uint8)


def make_window(
    *,
    contact: bool,
    opened_m: float | None,
    depth: bool = True,
    hand: bool = False,
    cameras: tuple[str, ...] = ("base", "side", "wrist"),
    steps: int = 6,
    start: float = 100.0,
    end: float = 103.0,
    looks_in: bool = False,
) -> ActionWindow:
    """An action window on drawer_3.

    Args:
        contact: whether the gripper closes on the handle (else it closes on nothing).
        opened_m: how far the drawer comes out; None means it does not move.
        depth: give the base camera registered depth, intrinsics and pose.
        hand: report the commanded and achieved hand positions: the command pulls 0.25 m back
            while the jaws are engaged; the hand follows by ``opened_m`` (held back when the
            drawer does not move).
        looks_in: the base camera's depth reaches 1.15 m, past drawer_3's front (0.8 m) to its
            back: the look sees into an open drawer. Otherwise every ray stops at 0.8 m, as at
            a shut front.
    """
    stamps = np.linspace(start, end, steps)
    frames: list[CameraFrame] = []
    for ci, cam in enumerate(cameras):
        for si, t in enumerate(stamps):
            extra: dict[str, object] = {}
            if cam == "base" and depth:
                d = np.full((H, W), 1.15 if looks_in else 0.8, dtype=np.float32)
                if opened_m is not None and si == steps - 1:
                    d[17:32, 19:46] = 0.8 - opened_m  # drawer_3's front, pulled out
                extra = {"depth": d, "intrinsics": K, "camera_to_map": CAM_POSE}
            frames.append(CameraFrame(cam, float(t), _image(ci * 100 + si), **extra))  # type: ignore[arg-type]
    states = []
    for i, t in enumerate(stamps):
        engaged = contact and 0 < i < steps - 1
        share = max(0, i - 1) / max(1, steps - 3)
        handle = np.array([2.0, 0.5, 0.6])
        states.append(
            RobotStateSample(
                stamp=float(t),
                gripper_opening_m=0.02 if engaged else (0.08 if i == 0 else 0.0),
                gripper_effort_n=30.0 if engaged else (12.0 if i > 0 else 0.0),
                contact=engaged,
                base_pose=(0.0, 0.0, 0.0),
                pull_force_n=25.0 if engaged else 0.0,
                hand_position=tuple(handle - [min(share, 1.0) * (opened_m or 0.0), 0, 0])
                if hand else None,
                hand_commanded=tuple(handle - [min(share, 1.0) * 0.25, 0, 0]) if hand else None,
            )
        )
    return ActionWindow(tuple(frames), tuple(states))


def primitive(name: str = "OpenDrawer", target: str = "drawer_3") -> PrimitiveRecord:
    return PrimitiveRecord(name, target, 100.0, 103.0, reported_success=False, task="find scissors")


def scissors(stamp: float = 103.0) -> Detection3D:
    return Detection3D(
        "scissors", np.array([1.0, 0.05, 0.5]), 0.9, stamp, "wrist", "det:scissors:1"
    )


def recorded(name: str) -> dict[str, object]:
    return json.loads((RECORDED / name).read_text(encoding="utf-8"))


def ok(name: str) -> Step:
    return Step(200, (RECORDED / name).read_text(encoding="utf-8"))


def err(status: int, name: str, **headers: str) -> Step:
    return Step(status, (RECORDED / name).read_text(encoding="utf-8"), dict(headers))
