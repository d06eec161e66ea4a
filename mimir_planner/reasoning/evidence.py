"""Plain data records of an interaction: frames, robot state, detections and the evidence bundle.

Stamps are message stamps in seconds (never wall time); positions are in the ``map`` frame.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

import numpy as np

from mimir_memory.observations import finite_vec3
from mimir_planner.reasoning.errors import EvidenceError


def _finite(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise EvidenceError(f"{name} must be a finite number, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class CameraFrame:
    """One camera image of the action window.

    Attributes:
        camera: camera name, e.g. ``base``, ``side``, ``wrist``.
        stamp: message stamp, s.
        rgb: image, shape (H, W, 3), uint8, RGB order.
        depth: optional registered depth, shape (H, W), metres; 0 or NaN mean no reading.
        intrinsics: optional 3x3 pinhole matrix of the optical frame.
        camera_to_map: optional 4x4 pose of the optical frame in ``map``.
        camera_to_odom: optional 4x4 pose of the optical frame in ``odom``; unlike the map pose
            it does not jump when localisation corrects the base, so two frames of a camera are
            compared through it.
        frame_id: evidence reference of the frame (content id); derived when empty.
    """

    camera: str
    stamp: float
    rgb: np.ndarray
    depth: np.ndarray | None = None
    intrinsics: np.ndarray | None = None
    camera_to_map: np.ndarray | None = None
    camera_to_odom: np.ndarray | None = None
    frame_id: str = ""

    def __post_init__(self) -> None:
        if not self.camera:
            raise EvidenceError("a frame needs a camera name")
        _finite(f"{self.camera} frame stamp", self.stamp)
        rgb = self.rgb
        if not isinstance(rgb, np.ndarray) or rgb.ndim != 3 or rgb.shape[2] != 3:
            raise EvidenceError(f"{self.camera} frame must be an (H, W, 3) array")
        if rgb.dtype != np.uint8 or rgb.shape[0] < 2 or rgb.shape[1] < 2:
            raise EvidenceError(f"{self.camera} frame must be uint8 and at least 2x2 pixels")
        if self.depth is not None and (
            not isinstance(self.depth, np.ndarray) or self.depth.shape != rgb.shape[:2]
        ):
            raise EvidenceError(f"{self.camera} depth must match the image size")
        if self.intrinsics is not None:
            k = np.asarray(self.intrinsics, dtype=np.float64)
            if k.shape != (3, 3) or not np.all(np.isfinite(k)) or k[0, 0] <= 0 or k[1, 1] <= 0:
                raise EvidenceError(f"{self.camera} intrinsics must be a finite 3x3 matrix")
            object.__setattr__(self, "intrinsics", k)
        for name in ("camera_to_map", "camera_to_odom"):
            pose = getattr(self, name)
            if pose is not None:
                t = np.asarray(pose, dtype=np.float64)
                if t.shape != (4, 4) or not np.all(np.isfinite(t)):
                    raise EvidenceError(f"{self.camera} {name} must be a finite 4x4 matrix")
                object.__setattr__(self, name, t)

    @property
    def ref(self) -> str:
        """Evidence reference of this frame."""
        return self.frame_id or f"frame:{self.camera}@{self.stamp:.3f}"


@dataclass(frozen=True)
class RobotStateSample:
    """Robot state at one stamp of the window.

    Attributes:
        stamp: message stamp, s.
        gripper_opening_m: distance between the jaws, m.
        gripper_effort_n: grip force (or motor effort) the gripper reports, N.
        contact: the embodiment's own contact flag.
        base_pose: base pose in ``map`` as (x m, y m, yaw rad).
        pull_force_n: magnitude of the wrist force while pulling, N, when a sensor reports it.
        hand_position: achieved end-effector position in ``map`` (m), when the arm reports it.
        hand_commanded: commanded end-effector position in ``map`` (m), when the executor
            reports it.
        hand_odom, commanded_odom: the same two positions in ``odom``. Odometry is continuous
            while localisation corrects ``map`` in steps, so the hand's motion during an action
            is measured there when the robot reports it.
    """

    stamp: float
    gripper_opening_m: float
    gripper_effort_n: float
    contact: bool
    base_pose: tuple[float, float, float] = (0.0, 0.0, 0.0)
    pull_force_n: float | None = None
    hand_position: tuple[float, float, float] | None = None
    hand_commanded: tuple[float, float, float] | None = None
    hand_odom: tuple[float, float, float] | None = None
    commanded_odom: tuple[float, float, float] | None = None

    def __post_init__(self) -> None:
        _finite("robot state stamp", self.stamp)
        if _finite("gripper opening", self.gripper_opening_m) < 0:
            raise EvidenceError("gripper opening must not be negative")
        _finite("gripper effort", self.gripper_effort_n)
        if len(self.base_pose) != 3:
            raise EvidenceError("base pose must be (x, y, yaw)")
        for value in self.base_pose:
            _finite("base pose", value)
        if self.pull_force_n is not None:
            _finite("pull force", self.pull_force_n)
        for name, point in (("hand position", self.hand_position),
                            ("commanded hand position", self.hand_commanded),
                            ("hand position in odom", self.hand_odom),
                            ("commanded hand position in odom", self.commanded_odom)):
            if point is not None:
                if len(point) != 3:
                    raise EvidenceError(f"{name} must be (x, y, z)")
                for value in point:
                    _finite(name, value)


@dataclass(frozen=True)
class Detection3D:
    """A labelled detection deprojected into ``map`` (from segmentation plus depth)."""

    label: str
    position: np.ndarray
    score: float
    stamp: float
    camera: str = ""
    ref: str = ""

    def __post_init__(self) -> None:
        if not self.label:
            raise EvidenceError("a detection needs a label")
        pos = finite_vec3(self.position, "detection position", EvidenceError)
        object.__setattr__(self, "position", pos)
        if not 0.0 <= _finite("detection score", self.score) <= 1.0:
            raise EvidenceError("detection score must lie in [0, 1]")
        _finite("detection stamp", self.stamp)
        if not self.ref:
            object.__setattr__(
                self, "ref", f"det:{self.label}@{self.stamp:.3f}:{self.camera or 'map'}"
            )


@dataclass(frozen=True)
class PrimitiveRecord:
    """The primitive that just ran, as the executor reported it (``reported_outcome``: its
    outcome code, e.g. ``INSPECTED``)."""

    name: str
    target_id: str
    start_stamp: float
    end_stamp: float
    reported_success: bool | None = None
    reported_message: str = ""
    task: str = ""
    reported_outcome: str = ""

    def __post_init__(self) -> None:
        if not self.name or not self.target_id:
            raise EvidenceError("a primitive needs a name and a target id")
        if _finite("primitive end", self.end_stamp) < _finite("primitive start", self.start_stamp):
            raise EvidenceError("primitive ends before it starts")


@dataclass(frozen=True)
class ActionWindow:
    """Buffered frames of every camera and robot state samples over one primitive."""

    frames: tuple[CameraFrame, ...]
    robot_states: tuple[RobotStateSample, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "frames", tuple(self.frames))
        object.__setattr__(
            self, "robot_states", tuple(sorted(self.robot_states, key=lambda s: s.stamp))
        )
        if not self.frames:
            raise EvidenceError("the action window holds no frames")

    def cameras(self) -> list[str]:
        """Camera names in order of first appearance."""
        names: list[str] = []
        for frame in self.frames:
            if frame.camera not in names:
                names.append(frame.camera)
        return names

    def frames_of(self, camera: str) -> list[CameraFrame]:
        """Frames of one camera, oldest first."""
        return sorted((f for f in self.frames if f.camera == camera), key=lambda f: f.stamp)


@dataclass(frozen=True)
class DisplacementMeasurement:
    """Measured motion of a fixture over the window.

    Attributes:
        fixture_id: the fixture measured.
        magnitude: size of the motion, in ``unit``.
        unit: ``m`` (depth change, hand travel).
        source: ``depth`` (depth change in the fixture region) or ``hand`` (how far the hand
            travelled while the jaws held the part).
        refs: evidence references (frames, state topics).
    """

    fixture_id: str
    magnitude: float
    unit: Literal["m", "rad"]
    source: Literal["depth", "hand"]
    refs: tuple[str, ...] = ()


@dataclass(frozen=True)
class PullTracking:
    """How the hand followed its commanded path while the jaws held something.

    Attributes:
        commanded_m: largest distance of the commanded hand position from where it was at the
            first held sample.
        achieved_m: the same for the hand position the arm reported.
        samples: held samples that carried both positions.
        refs: evidence references (the robot-state span).
    """

    commanded_m: float
    achieved_m: float
    samples: int
    refs: tuple[str, ...] = ()

    @property
    def held_back_m(self) -> float:
        """Commanded travel the hand did not make (0 when it went as far or further)."""
        return max(0.0, self.commanded_m - self.achieved_m)


@dataclass(frozen=True)
class Evidence:
    """Mechanical evidence a verifier may use; grows as new evidence arrives.

    Attributes:
        gripper: robot-state samples of the window (gripper, base, hand).
        displacements: per fixture, the measurement that decides whether it moved (the larger
            of the depth change and the held hand's travel).
        depth_changes: per fixture, the depth change in its image region, where measured.
        depth_unmeasured: per fixture whose depth change was sought but not measured, why not
            (per camera, in words).
        pull: how the hand followed the commanded pull on the action's target, where measured.
        detections: 3D detections made during and just after the action.
        observed_interiors: fixtures whose inside the cameras could see (open or open-top).
        found_shut: fixtures memory holds open that the action's look found shut: no depth
            reached their back (a door pushed to since it was opened).
        visible_frames: frames in which the action's target lay in view with depth.
        refs: evidence references of the frames.
        target_id: the node the action was about; the gripper, the pull and the view count
            are evidence about it alone.
    """

    gripper: tuple[RobotStateSample, ...] = ()
    displacements: Mapping[str, DisplacementMeasurement] = field(default_factory=dict)
    depth_changes: Mapping[str, DisplacementMeasurement] = field(default_factory=dict)
    depth_unmeasured: Mapping[str, str] = field(default_factory=dict)
    pull: PullTracking | None = None
    detections: tuple[Detection3D, ...] = ()
    observed_interiors: frozenset[str] = frozenset()
    found_shut: frozenset[str] = frozenset()
    visible_frames: int = 0
    refs: tuple[str, ...] = ()
    target_id: str = ""

    def about(self, node_ids: Iterable[str]) -> Evidence:
        """Only what this evidence says about ``node_ids``: the action's own signals (gripper,
        pull, views, measured motion) where its target is one of them, and everything seen
        (detections, open interiors), which is about whatever it shows. Only an action's
        target can have moved in it, so no other node's motion is taken from it."""
        ids = set(node_ids)
        own = not self.target_id or self.target_id in ids
        return Evidence(
            gripper=self.gripper if own else (),
            displacements={k: v for k, v in self.displacements.items() if own and k in ids},
            depth_changes={k: v for k, v in self.depth_changes.items() if own and k in ids},
            depth_unmeasured={k: v for k, v in self.depth_unmeasured.items()
                              if own and k in ids},
            pull=self.pull if own else None,
            detections=self.detections,
            observed_interiors=self.observed_interiors,
            found_shut=self.found_shut,
            visible_frames=self.visible_frames if own else 0,
            refs=self.refs,
            target_id=self.target_id if own else "",
        )

    @cached_property
    def detection_positions(self) -> np.ndarray:
        """The detections' positions as one (N, 3) array, built once per evidence: a deferred
        claim's evidence holds thousands of detections, tested against a box at every
        re-check."""
        if not self.detections:
            return np.zeros((0, 3))
        return np.stack([d.position for d in self.detections])

    @cached_property
    def _unique_refs(self) -> frozenset[str] | None:
        """The detections' references when no two share one (else None)."""
        refs = frozenset(d.ref for d in self.detections)
        return refs if len(refs) == len(self.detections) else None

    def merged(self, other: Evidence) -> Evidence:
        """Evidence of both; the newer (``other``) measurement of a fixture wins, and so does
        its view of whether a fixture stood open or shut."""
        gripper = {s.stamp: s for s in (*self.gripper, *other.gripper)}
        detections, cache = self._merged_detections(other)
        refs = dict.fromkeys((*self.refs, *other.refs))
        merged = Evidence(
            gripper=tuple(gripper[k] for k in sorted(gripper)),
            displacements={**self.displacements, **other.displacements},
            depth_changes={**self.depth_changes, **other.depth_changes},
            depth_unmeasured={k: v for k, v in {**self.depth_unmeasured,
                                                **other.depth_unmeasured}.items()
                              if k not in other.depth_changes},
            pull=other.pull or self.pull,
            detections=detections,
            observed_interiors=(self.observed_interiors - other.found_shut)
            | other.observed_interiors,
            found_shut=(self.found_shut - other.observed_interiors) | other.found_shut,
            visible_frames=max(self.visible_frames, other.visible_frames),
            refs=tuple(refs),
            target_id=self.target_id or other.target_id,
        )
        # hand the cached arrays on (cached_property keeps them in the instance dict)
        vars(merged).update(cache)
        return merged

    def _merged_detections(self, other: Evidence
                           ) -> tuple[tuple[Detection3D, ...], dict[str, object]]:
        """The detections of both, one per reference (the first one's place, the last one's
        value), with what the merged evidence can take over of the caches.

        Re-checks merge a few new detections into thousands, usually under new references: then
        the old tuple and position array are extended rather than rebuilt.
        """
        mine = self._unique_refs
        if mine is not None and not other.detections:
            return self.detections, {"detection_positions": self.detection_positions,
                                     "_unique_refs": mine}
        theirs = other._unique_refs
        if mine is not None and theirs is not None and mine.isdisjoint(theirs):
            return (self.detections + other.detections,
                    {"detection_positions": np.concatenate(
                        [self.detection_positions, other.detection_positions]),
                     "_unique_refs": mine | theirs})
        by_ref = {d.ref: d for d in (*self.detections, *other.detections)}
        return tuple(by_ref.values()), {}

    @staticmethod
    def collect(parts: Iterable[Evidence]) -> Evidence:
        """Merges several evidence bundles in order."""
        result = Evidence()
        for part in parts:
            result = result.merged(part)
        return result


@dataclass(frozen=True)
class ClaimContext:
    """What a verifier needs to know about the interaction a claim came from."""

    interaction_id: str
    primitive: str
    intent: str
    target_id: str
    target_label: str
    target_position: np.ndarray
    stamp: float
    reported_success: bool | None = None
    reported_message: str = ""
    reported_outcome: str = ""

    @property
    def inspection(self) -> bool:
        """Whether the primitive only looked (no manipulation)."""
        return self.intent == "inspection"
