"""What the analyzer measured for one interaction, as plain data for an audit log.

A verdict's reason names the values that decided it; this record keeps the readings those
values came from (every gripper reading with the hand positions attached to it, every frame
with what it carried, each measurement or why it could not be made), so that a surprising
verdict can be traced to its inputs after the run. Nothing here decides anything.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mimir_planner.reasoning.evidence import (
    ActionWindow,
    CameraFrame,
    ClaimContext,
    Evidence,
    RobotStateSample,
)

JsonDict = dict[str, object]


def _point(p: Sequence[float] | None) -> list[float] | None:
    return None if p is None else [round(float(v), 4) for v in p]


def _position(pose: np.ndarray | None) -> list[float] | None:
    return None if pose is None else _point(np.asarray(pose)[:3, 3].tolist())


def _frame(frame: CameraFrame) -> JsonDict:
    return {
        "stamp": round(frame.stamp, 3),
        "depth": frame.depth is not None,
        "intrinsics": frame.intrinsics is not None,
        "odom": _position(frame.camera_to_odom),
        "map": _position(frame.camera_to_map),
    }


def _sample(sample: RobotStateSample) -> list[object]:
    return [round(sample.stamp, 3), round(sample.gripper_opening_m, 4), sample.contact,
            _point(sample.hand_odom), _point(sample.hand_position),
            _point(sample.commanded_odom)]


def evidence_record(ctx: ClaimContext, window: ActionWindow, evidence: Evidence,
                    start: float, end: float) -> JsonDict:
    """The readings and measurements behind one interaction's verdicts, JSON-ready.

    ``gripper`` rows are ``[stamp, opening m, holding, hand in odom, hand in map, commanded
    hand in odom]``; positions are None where the robot reported none near the reading.
    """
    pull = evidence.pull
    return {
        "interaction_id": ctx.interaction_id,
        "primitive": ctx.primitive,
        "target_id": ctx.target_id,
        "start": round(start, 3),
        "end": round(end, 3),
        "frames": {camera: [_frame(f) for f in window.frames_of(camera)]
                   for camera in window.cameras()},
        "depth_changes": {k: round(v.magnitude, 4) for k, v in evidence.depth_changes.items()},
        "depth_unmeasured": dict(evidence.depth_unmeasured),
        "displacements": {k: [round(v.magnitude, 4), v.source]
                          for k, v in evidence.displacements.items()},
        "pull": None if pull is None else {
            "commanded_m": round(pull.commanded_m, 4), "achieved_m": round(pull.achieved_m, 4),
            "samples": pull.samples},
        "gripper": [_sample(s) for s in evidence.gripper],
    }
