"""Interaction analyzer node: after each primitive, verified memory updates from its evidence.

Buffers, per camera ``<cam>``: ``cameras/<cam>/color/image_raw``, the registered
``cameras/<cam>/depth/image_raw`` (matched to colour frames by stamp) and
``cameras/<cam>/color/camera_info``; the camera pose in ``map_frame`` comes from TF at each
frame's stamp, looked up when a window is analysed (after it ended; a frame slightly newer
than the newest transform waits up to ``tf_wait_s`` for TF to catch up instead of being
dropped). It also buffers ``joint_states`` (the ``gripper_joint``: position = jaw opening in
metres, effort = grip force in newtons), the base pose from TF, 3D detections from
``observations`` and the latest latched ``scene_graph``, which backs the
:class:`~mimir.nodes.planner.ros_world.SceneGraphWorld` the reasoning core reads.

Fixture joint states come on ``target_state`` (sensor_msgs/JointState) where the embodiment
reports them: each entry's name is a memory node id (``cabinet_2``), its position the opening
(door angle in rad, drawer travel in m; 0 = closed), the header stamp the time of the reading.
The joint type follows the node's label (from memory; for ids memory does not hold yet, the id
without its ``_<number>`` suffix): labels in ``prismatic_labels`` slide (metres), every other
fixture turns on a hinge (radians). The samples inside a window become the analyzer's
``FixtureStateSample``s, from which the reasoning core measures how far the fixture moved.

``analyze_interaction`` (mimir_msgs/AnalyzeInteraction) and, with ``auto_analyze``, every
ENDED ``interaction_events`` message run one analysis per interaction id: gather the window
(frames of every camera, robot states, detections) with ``window_margin_s``, run
:class:`~mimir_planner.reasoning.InteractionAnalyzer`, save the before/after/peak keyframes
through the keyframe node's ``save_keyframe`` (with the analyzer's labels and caption), then
write every verdict through the scene graph node's ``update_node``: admitted and corrected
updates change memory, deferred and rejected claims are logged with their verdict. A second
request for an interaction already analysed (or in flight) gets that result. Deferred claims are
re-checked at the next analysis and when new detections fall inside a fixture they concern;
verdicts that change are written then.

Threading: sensor callbacks only store messages (a reentrant group); analyses and re-checks run
in their own mutually exclusive group and hold one work lock; service clients live in a
reentrant group and are awaited by polling their futures with a timeout, never by spinning
inside a callback.
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import math
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.client import Client
from rclpy.node import Node
from scipy.spatial.transform import Rotation
from sensor_msgs.msg import CameraInfo, Image, JointState

from mimir.nodes.perception.messages import CameraInfoError, camera_info_to_intrinsics
from mimir.nodes.planner.ros_world import SceneGraphWorld
from mimir.paths import ConfigFileNotFoundError, config_file
from mimir.ros import qos
from mimir.ros.diagnostics import NodeCounters
from mimir.ros.floatfix import FloatSafePublisher, coerce_floats
from mimir.ros.images import ImageConversionError, depth_to_metres, image_to_rgb
from mimir.ros.params import declare_config
from mimir.ros.runtime import run_node
from mimir.ros.tf import make_transform_source
from mimir.ros.time import from_seconds, to_seconds
from mimir.transforms import ExtrapolationError, TransformError
from mimir_msgs.msg import (
    ContentItem as ContentItemMsg,
)
from mimir_msgs.msg import (
    EvidenceRef,
    InteractionEvent,
    KeyframeLabel,
    ObjectObservationArray,
    Property,
    SceneGraph,
    TaskRecord,
)
from mimir_msgs.msg import MemoryEvent as MemoryEventMsg
from mimir_msgs.srv import AnalyzeInteraction, GetSceneGraph, SaveKeyframe, UpdateNode
from mimir_planner.reasoning import (
    ActionWindow,
    AnalysisResult,
    CameraFrame,
    Claim,
    ContentClaim,
    ContentsUpdate,
    Decision,
    Detection3D,
    EmptyClaim,
    Evidence,
    FixtureStateSample,
    GroundingClaim,
    HarnessResult,
    InteractionAnalyzer,
    KeyframeRequest,
    OutcomeClaim,
    PrimitiveRecord,
    PropertyClaim,
    ReasoningConfig,
    RobotStateSample,
    Verdict,
    VlmBackend,
    load_reasoning_config,
    make_backend,
)
from mimir_planner.reasoning.errors import (
    AnswerRetriesExhaustedError,
    BackendError,
    EvidenceError,
    ReasoningError,
)
from mimir_planner.reasoning.harness import label_of_id
from mimir_planner.reasoning.world import is_opened

T = TypeVar("T")

_Response = AnalyzeInteraction.Response
_BACKENDS = ("", "offline", "openai", "transformers")
#: answers of finished analyses kept for repeated requests (oldest forgotten first)
_KEEP_RESULTS = 500
_PHASES = {
    "interaction_before": "before",
    "interaction_after": "after",
    "interaction_peak": "peak",
}
_WARN_KEYS = (
    "bad_image",
    "bad_depth",
    "bad_camera_info",
    "bad_joint_state",
    "bad_fixture_state",
    "bad_observation",
    "bad_scene_graph",
    "camera_pose_unavailable",
    "base_pose_unavailable",
    "keyframe_save_failed",
    "memory_write_failed",
)


class AnalyzerNodeError(RuntimeError):
    """The analyzer node cannot start (reasoning config missing or invalid)."""


class ServiceCallError(RuntimeError):
    """A memory service did not answer in time or answered with an error."""


class ServiceUnavailableError(ServiceCallError):
    """A memory service is not offered at all (further calls would wait in vain)."""


@dataclass(frozen=True)
class AnalyzerNodeConfig:
    """Parameters of the analyzer node (defaults mirror config/params/analyzer.yaml)."""

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


# ---------------------------------------------------------------------------------- buffers


class StampedBuffer(Generic[T]):
    """Items ordered by stamp, holding ``seconds`` of history behind the newest item."""

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds
        self._stamps: list[float] = []
        self._items: list[T] = []
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def add(self, stamp: float, item: T) -> None:
        """Inserts an item in stamp order and forgets what fell out of the history."""
        with self._lock:
            index = bisect.bisect_right(self._stamps, stamp)
            self._stamps.insert(index, stamp)
            self._items.insert(index, item)
            cut = bisect.bisect_left(self._stamps, self._stamps[-1] - self._seconds)
            if cut:
                del self._stamps[:cut]
                del self._items[:cut]

    def between(self, lo: float, hi: float) -> list[tuple[float, T]]:
        """Items with ``lo <= stamp <= hi``, oldest first."""
        with self._lock:
            i = bisect.bisect_left(self._stamps, lo)
            j = bisect.bisect_right(self._stamps, hi)
            return list(zip(self._stamps[i:j], self._items[i:j], strict=True))

    def latest_stamp(self) -> float | None:
        """Stamp of the newest item."""
        with self._lock:
            return self._stamps[-1] if self._stamps else None


@dataclass
class _FrameEntry:
    stamp: float
    color: Image
    depth: Image | None = None


class CameraStream:
    """Colour frames of one camera with their registered depth and the latest camera info.

    Colour frames closer than ``min_period`` to the previous kept frame are not kept (memory
    stays bounded at camera rate); a depth image is attached to the kept colour frame whose
    stamp lies within ``tolerance``, whichever of the two arrives first.
    """

    def __init__(self, seconds: float, min_period: float, tolerance: float) -> None:
        self._seconds = seconds
        self._min_period = min_period
        self._tolerance = tolerance
        self._frames: deque[_FrameEntry] = deque()
        self._loose_depth: deque[tuple[float, Image]] = deque(maxlen=30)
        self._info: CameraInfo | None = None
        self._lock = threading.Lock()

    def add_color(self, stamp: float, msg: Image) -> bool:
        """Buffers a colour frame; False when it was skipped by the rate limit."""
        with self._lock:
            last = self._frames[-1].stamp if self._frames else None
            if last is not None and last <= stamp < last + self._min_period:
                return False
            entry = _FrameEntry(stamp, msg)
            match = self._take_depth(stamp)
            if match is not None:
                entry.depth = match
            if last is not None and stamp < last:
                items = sorted([*self._frames, entry], key=lambda e: e.stamp)
                self._frames = deque(items)
            else:
                self._frames.append(entry)
            newest = self._frames[-1].stamp
            while self._frames and self._frames[0].stamp < newest - self._seconds:
                self._frames.popleft()
            return True

    def _take_depth(self, stamp: float) -> Image | None:
        best: tuple[float, int] | None = None
        for index, (depth_stamp, _) in enumerate(self._loose_depth):
            gap = abs(depth_stamp - stamp)
            if gap <= self._tolerance and (best is None or gap < best[0]):
                best = (gap, index)
        if best is None:
            return None
        depth = self._loose_depth[best[1]][1]
        del self._loose_depth[best[1]]
        return depth

    def add_depth(self, stamp: float, msg: Image) -> None:
        """Attaches a depth image to its colour frame, or keeps it until that frame arrives."""
        with self._lock:
            for entry in reversed(self._frames):
                if entry.depth is None and abs(entry.stamp - stamp) <= self._tolerance:
                    entry.depth = msg
                    return
                if entry.stamp < stamp - self._tolerance:
                    break
            self._loose_depth.append((stamp, msg))

    def set_info(self, msg: CameraInfo) -> None:
        """Keeps the newest camera info."""
        with self._lock:
            self._info = msg

    @property
    def info(self) -> CameraInfo | None:
        """Newest camera info, if any."""
        with self._lock:
            return self._info

    def window(self, lo: float, hi: float) -> list[_FrameEntry]:
        """Kept frames with ``lo <= stamp <= hi``, oldest first."""
        with self._lock:
            return [e for e in self._frames if lo <= e.stamp <= hi]

    def latest_stamp(self) -> float | None:
        """Stamp of the newest kept frame."""
        with self._lock:
            return self._frames[-1].stamp if self._frames else None


def spread(items: Sequence[T], count: int) -> list[T]:
    """At most ``count`` items evenly spaced over ``items``, first and last included."""
    if len(items) <= count:
        return list(items)
    picks = np.linspace(0, len(items) - 1, count).round().astype(int)
    return [items[int(i)] for i in dict.fromkeys(picks.tolist())]


@dataclass(frozen=True)
class GripperReading:
    """Gripper joint at one stamp: jaw opening (m) and grip force (N)."""

    opening_m: float
    effort_n: float


def gripper_reading(msg: JointState, joint: str) -> GripperReading | None:
    """The gripper joint of a joint state message; None when the message does not carry it.

    Raises:
        ValueError: the gripper entry is present but not finite or the opening is negative.
    """
    try:
        index = list(msg.name).index(joint)
    except ValueError:
        return None
    if index >= len(msg.position):
        raise ValueError(f"joint state names '{joint}' but carries no position for it")
    opening = float(msg.position[index])
    effort = float(msg.effort[index]) if index < len(msg.effort) else 0.0
    if not (math.isfinite(opening) and math.isfinite(effort)):
        raise ValueError(f"gripper joint '{joint}' is not finite")
    if opening < 0.0:
        raise ValueError(f"gripper opening {opening} m is negative")
    return GripperReading(opening, effort)


def fixture_samples(
    msg: JointState, joint_type: Callable[[str], str]
) -> tuple[list[FixtureStateSample], list[str]]:
    """Fixture joint readings of a ``target_state`` message.

    Args:
        msg: one entry per fixture: name = memory node id, position = opening (rad or m).
        joint_type: ``prismatic`` or ``revolute`` for a node id.

    Returns:
        (samples, problems): the valid readings, and one text per entry left out (no name,
        no position, a non-finite value).
    """
    stamp = to_seconds(msg.header.stamp)
    samples: list[FixtureStateSample] = []
    problems: list[str] = []
    for index, name in enumerate(msg.name):
        if not name.strip():
            problems.append(f"entry {index} has no name")
            continue
        if index >= len(msg.position):
            problems.append(f"'{name}' carries no position")
            continue
        kind = joint_type(name)
        try:
            samples.append(FixtureStateSample(
                fixture_id=name.strip(), stamp=stamp, position=float(msg.position[index]),
                joint_type="prismatic" if kind == "prismatic" else "revolute"))
        except EvidenceError as err:
            problems.append(f"'{name}': {err}")
    return samples, problems


def detections_from_msg(msg: ObjectObservationArray) -> tuple[list[Detection3D], int]:
    """3D observations as detections; returns (detections, number skipped as invalid)."""
    found: list[Detection3D] = []
    skipped = 0
    for obs in msg.observations:
        stamp = to_seconds(obs.header.stamp) or to_seconds(msg.header.stamp)
        score = float(obs.score)
        try:
            found.append(
                Detection3D(
                    label=obs.label,
                    position=np.array([obs.centroid.x, obs.centroid.y, obs.centroid.z]),
                    score=min(max(score, 0.0), 1.0) if math.isfinite(score) else math.nan,
                    stamp=stamp,
                    camera=obs.camera or msg.camera,
                    ref=obs.detection_id,
                )
            )
        except EvidenceError:
            skipped += 1
    return found, skipped


# ---------------------------------------------------------------------------- memory writes


@dataclass(frozen=True)
class WriteContext:
    """What every memory write of one analysis (or re-check) shares.

    Attributes:
        interaction_id: id of the interaction being analysed (evidence and event ids).
        primitive: primitive of the interaction.
        task: instruction the primitive served.
        stamp: end of the action window, s.
        keyframe_ids: keyframes saved for the interaction.
        frame_keyframes: evidence reference of a frame -> keyframe id it was saved as.
        detection_refs: references that name detections.
        known: whether a node id exists in memory (writes to unknown ids are not sent).
        event_prefix: prefix of the caller-chosen event ids (replay-safe).
    """

    interaction_id: str
    primitive: str
    task: str
    stamp: float
    keyframe_ids: tuple[str, ...]
    frame_keyframes: dict[str, str]
    detection_refs: frozenset[str]
    known: Callable[[str], bool]
    event_prefix: str


@dataclass
class PlannedWrite:
    """One ``update_node`` request and the verdicts it records (None: not written)."""

    verdicts: list[Verdict]
    request: UpdateNode.Request | None
    subject: str
    note: str = ""
    events: list[MemoryEventMsg] = field(default_factory=list)
    error: str = ""


def _note(verdict: Verdict) -> str:
    return f"{verdict.decision} by {verdict.verifier or 'harness'}: {verdict.reason}"


def _reasoning(text: str, verdict: Verdict) -> str:
    return f"{text} | {_note(verdict)}" if text else _note(verdict)


def evidence_refs(
    refs: Iterable[str], ctx: WriteContext, origin: str = ""
) -> list[EvidenceRef]:
    """Evidence references of a write: interaction, keyframes, detections and robot state.

    Frame references that were not saved as keyframes are left out (nothing to point at).
    """
    out = [EvidenceRef(kind="interaction", id=ctx.interaction_id)]
    if origin and origin != ctx.interaction_id:
        out.append(EvidenceRef(kind="interaction", id=origin, detail="claim made here"))
    seen: set[tuple[str, str]] = set()
    for key in ctx.keyframe_ids:
        seen.add(("keyframe", key))
        out.append(EvidenceRef(kind="keyframe", id=key))
    for ref in refs:
        if ref in ctx.detection_refs:
            item = ("detection", ref)
        elif ref.startswith(("gripper@", "joint:")):
            item = ("robot_state", ref)
        elif ref in ctx.frame_keyframes:
            item = ("keyframe", ctx.frame_keyframes[ref])
        else:
            continue
        if item not in seen:
            seen.add(item)
            out.append(EvidenceRef(kind=item[0], id=item[1]))
    return out


def _property_msgs(claim: PropertyClaim, reasoning: str) -> list[Property]:
    props = [
        Property(
            name=claim.name,
            value_json=json.dumps(claim.new_value),
            confidence=float(min(max(claim.confidence, 0.0), 1.0)),
            source="interaction",
            reasoning=reasoning,
        )
    ]
    if claim.name == "openable" and claim.is_opened is not None:
        props.append(
            Property(
                name="is_opened",
                value_json=json.dumps(bool(claim.is_opened)),
                confidence=props[0].confidence,
                source="interaction",
                reasoning=reasoning,
            )
        )
    return props


def _request(node_id: str, verdict: Verdict, refs: list[EvidenceRef]) -> UpdateNode.Request:
    return UpdateNode.Request(
        node_id=node_id,
        source="interaction",
        evidence=refs,
        verdict=str(verdict.decision),
        verdict_reason=_note(verdict),
    )


def _claim_request(
    claim: Claim, verdict: Verdict, ctx: WriteContext
) -> tuple[str, UpdateNode.Request | None]:
    """(subject id, request) recording one claim with the verdict's decision."""
    refs = evidence_refs(verdict.evidence_refs, ctx, verdict.interaction_id)
    if isinstance(claim, PropertyClaim) and claim.name == "is_opened":
        # memory keeps the open state on ``openable``; a fixture that opens is openable
        if not isinstance(claim.new_value, bool):
            return claim.object_id, None
        claim = dataclasses.replace(claim, name="openable", new_value=True,
                                    is_opened=claim.new_value)
    if isinstance(claim, PropertyClaim):
        req = _request(claim.object_id, verdict, refs)
        req.properties = _property_msgs(claim, _reasoning(claim.reasoning, verdict))
        return claim.object_id, req
    if isinstance(claim, ContentClaim | EmptyClaim):
        req = _request(claim.fixture_id, verdict, refs)
        req.set_contents = True
        if isinstance(claim, ContentClaim):
            req.contents = [ContentItemMsg(name=claim.name, description=claim.description,
                                           reasoning=_reasoning(claim.reasoning, verdict))]
        req.contents_source_action = ctx.primitive
        return claim.fixture_id, req
    if isinstance(claim, OutcomeClaim):
        req = _request(claim.target_id, verdict, refs)
        req.add_task_record = True
        req.task_record = TaskRecord(
            task=ctx.task or claim.primitive,
            primitive=claim.primitive,
            success=bool(claim.success),
            failure_reason=claim.failure_reason or "",
            interaction_id=verdict.interaction_id or ctx.interaction_id,
            stamp=from_seconds(max(ctx.stamp, 0.0)),
        )
        return claim.target_id, req
    return claim.cited_id, None


def _contents_request(update: ContentsUpdate, ctx: WriteContext) -> UpdateNode.Request:
    effective = [v for v in update.verdicts if v.effective is not None]
    decision = (Decision.CORRECT if any(v.decision is Decision.CORRECT for v in effective)
                else Decision.ADMIT)
    reason = "; ".join(f"{v.verifier}: {v.reason}" for v in effective)
    per_item = [v for v in effective if isinstance(v.effective, ContentClaim)]
    items = []
    for index, item in enumerate(update.contents):
        note = _reasoning(update.reasoning, per_item[index]) if index < len(per_item) else (
            update.reasoning)
        items.append(ContentItemMsg(name=item.name, description=item.description,
                                    reasoning=note))
    origin = effective[0].interaction_id if effective else ""
    return UpdateNode.Request(
        node_id=update.fixture_id,
        source="interaction",
        evidence=evidence_refs(update.evidence_refs, ctx, origin),
        verdict=str(decision),
        verdict_reason=f"{decision}: {reason}" if reason else str(decision),
        set_contents=True,
        contents=items,
        contents_source_action=update.source_action,
    )


def plan_writes(result: HarnessResult, ctx: WriteContext, skip_deferred: bool = False
                ) -> list[PlannedWrite]:
    """One write per verdict (admitted contents of a fixture share one write).

    Admitted and corrected claims are written with their effective (possibly corrected) form;
    deferred and rejected claims are written as proposed, with their verdict, so that they
    stay in the event log without changing memory. Grounding verdicts and claims about ids
    that memory does not hold are not sent (they are answered to the caller only).

    Args:
        result: the harness verdicts and admitted updates.
        ctx: shared write context.
        skip_deferred: leave out verdicts that are still deferred (re-checks).
    """
    contents = {u.fixture_id: u for u in result.contents_updates}
    written_contents: dict[str, PlannedWrite] = {}
    plans: list[PlannedWrite] = []
    for verdict in result.verdicts:
        if skip_deferred and verdict.decision is Decision.DEFER:
            continue
        claim = verdict.effective or verdict.claim
        if isinstance(verdict.claim, GroundingClaim):
            plans.append(PlannedWrite([verdict], None, verdict.claim.cited_id,
                                      "grounding verdicts are reported, not written"))
            continue
        effective = verdict.effective
        if isinstance(effective, ContentClaim | EmptyClaim) and effective.fixture_id in contents:
            fixture = effective.fixture_id
            if fixture in written_contents:
                written_contents[fixture].verdicts.append(verdict)
                continue
            plan = PlannedWrite([verdict], _contents_request(contents[fixture], ctx), fixture)
            if not ctx.known(fixture):
                plan.request, plan.note = None, f"'{fixture}' is not in memory"
            written_contents[fixture] = plan
            plans.append(plan)
            continue
        subject, request = _claim_request(claim, verdict, ctx)
        if request is None and isinstance(claim, PropertyClaim):
            plans.append(PlannedWrite([verdict], None, subject,
                                      f"'{claim.name}' = {claim.new_value!r} has no memory form"))
            continue
        if request is not None and not ctx.known(subject):
            plans.append(PlannedWrite([verdict], None, subject, f"'{subject}' is not in memory"))
            continue
        plans.append(PlannedWrite([verdict], request, subject))
    for index, plan in enumerate(plans):
        if plan.request is not None:
            plan.request.event_id = f"{ctx.event_prefix}:{index}"
    return plans


_KIND_OF_CLAIM = {
    PropertyClaim: "property_set",
    ContentClaim: "contents_set",
    EmptyClaim: "contents_set",
    OutcomeClaim: "task_outcome_recorded",
    GroundingClaim: "grounding",
}


def unwritten_event(verdict: Verdict, subject: str, note: str, stamp: float) -> MemoryEventMsg:
    """A verdict that was not appended to the log (sequence 0), for the caller's answer."""
    record = verdict.to_log()
    if note:
        record["not_written"] = note
    msg = MemoryEventMsg(
        event_id="",
        sequence=0,
        kind=_KIND_OF_CLAIM.get(type(verdict.claim), "claim"),
        source="interaction",
        subject_id=subject,
        payload_json=json.dumps(record, default=str, sort_keys=True),
        evidence=[EvidenceRef(kind="interaction", id=verdict.interaction_id)]
        if verdict.interaction_id else [],
        verdict=str(verdict.decision),
        verdict_reason=verdict.reason,
    )
    msg.header.stamp = from_seconds(max(stamp, 0.0))
    return msg


def _events_of(plans: Iterable[PlannedWrite], stamp: float) -> list[MemoryEventMsg]:
    out: list[MemoryEventMsg] = []
    for plan in plans:
        if plan.events:
            out.extend(plan.events)
        else:
            out.extend(unwritten_event(v, plan.subject, plan.error or plan.note, stamp)
                       for v in plan.verdicts)
    return out


# ------------------------------------------------------------------------------------ node


@dataclass
class _Job:
    """One interaction's analysis: its answer and the writes behind it."""

    done: threading.Event = field(default_factory=threading.Event)
    response: Any = None
    plans: list[PlannedWrite] = field(default_factory=list)
    stamp: float = 0.0


def _error(code: int, message: str, backend: str = "") -> Any:
    response = _Response()
    response.error_code = code
    response.error_msg = message
    response.backend = backend
    response.task_success = False
    return response


class AnalyzerNode(Node):
    """Interaction analyzer; see the module docstring for its interfaces.

    Args:
        backend: a ready backend to use instead of the configured one (simulation, tests).
        **kwargs: passed to :class:`rclpy.node.Node` (context, parameter overrides...).
    """

    def __init__(self, backend: VlmBackend | None = None, **kwargs: Any) -> None:
        super().__init__("analyzer", **kwargs)
        self.config = cfg = declare_config(self, AnalyzerNodeConfig)
        self.reasoning = self._load_reasoning()
        self.world = SceneGraphWorld()
        try:
            self.backend = backend or make_backend(self.reasoning)
            self.analyzer = InteractionAnalyzer(self.backend, self.world, self.reasoning)
        except ReasoningError as err:
            raise AnalyzerNodeError(f"cannot build the reasoning backend: {err}") from err
        self.counters = NodeCounters(_WARN_KEYS)
        self._tf = make_transform_source(self, cache_seconds=cfg.buffer_seconds + 10.0)
        self.streams = {
            cam: CameraStream(cfg.buffer_seconds, cfg.frame_min_period_s, cfg.depth_tolerance_s)
            for cam in cfg.cameras
        }
        self.gripper: StampedBuffer[GripperReading] = StampedBuffer(cfg.buffer_seconds)
        self.fixture_states: StampedBuffer[FixtureStateSample] = StampedBuffer(
            cfg.buffer_seconds)
        self._prismatic = frozenset(label.strip().lower() for label in cfg.prismatic_labels)
        self.detections: StampedBuffer[Detection3D] = StampedBuffer(cfg.buffer_seconds)
        self._fresh_detections: list[Detection3D] = []
        self._fresh_lock = threading.Lock()
        self._jobs: dict[str, _Job] = {}
        self._jobs_lock = threading.Lock()
        self._work_lock = threading.Lock()

        sensor_group = ReentrantCallbackGroup()
        client_group = ReentrantCallbackGroup()
        analysis_group = MutuallyExclusiveCallbackGroup()
        service_group = MutuallyExclusiveCallbackGroup()
        for cam in cfg.cameras:
            self.create_subscription(
                Image, f"cameras/{cam}/color/image_raw",
                lambda msg, cam=cam: self._on_color(cam, msg), qos.SENSOR,
                callback_group=sensor_group)
            self.create_subscription(
                Image, f"cameras/{cam}/depth/image_raw",
                lambda msg, cam=cam: self._on_depth(cam, msg), qos.SENSOR,
                callback_group=sensor_group)
            self.create_subscription(
                CameraInfo, f"cameras/{cam}/color/camera_info",
                lambda msg, cam=cam: self.streams[cam].set_info(msg), qos.SENSOR,
                callback_group=sensor_group)
        self.create_subscription(JointState, "joint_states", self._on_joint_state, qos.SENSOR,
                                 callback_group=sensor_group)
        self.create_subscription(JointState, "target_state", self._on_target_state, qos.EVENTS,
                                 callback_group=sensor_group)
        self.create_subscription(ObjectObservationArray, "observations", self._on_observations,
                                 qos.EVENTS, callback_group=sensor_group)
        self.create_subscription(SceneGraph, "scene_graph", self._on_scene_graph, qos.LATCHED,
                                 callback_group=sensor_group)
        self.create_subscription(InteractionEvent, "interaction_events", self._on_interaction,
                                 qos.EVENTS, callback_group=analysis_group)
        self._update_client: Client = self.create_client(
            UpdateNode, "update_node", callback_group=client_group)
        self._keyframe_client: Client = self.create_client(
            SaveKeyframe, "save_keyframe", callback_group=client_group)
        self._graph_client: Client = self.create_client(
            GetSceneGraph, "get_scene_graph", callback_group=client_group)
        self.create_service(AnalyzeInteraction, "analyze_interaction", self._on_analyze,
                            callback_group=service_group)
        self._diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", qos.EVENTS,
                                               publisher_class=FloatSafePublisher)
        self.create_timer(cfg.recheck_period_s, self._recheck_detections,
                          callback_group=analysis_group)
        self.create_timer(cfg.diagnostics_period_s, self._report, callback_group=sensor_group)
        self.get_logger().info(
            f"interaction analyzer with backend {self.backend.name}, cameras "
            f"{', '.join(cfg.cameras)}, auto_analyze={cfg.auto_analyze}"
        )

    def _load_reasoning(self) -> ReasoningConfig:
        try:
            reasoning = load_reasoning_config(
                config_file("reasoning.yaml", self.config.reasoning_config))
            if self.config.vlm_backend:
                reasoning = dataclasses.replace(
                    reasoning, vlm=dataclasses.replace(reasoning.vlm,
                                                       backend=self.config.vlm_backend))
        except (ConfigFileNotFoundError, ReasoningError) as err:
            raise AnalyzerNodeError(f"cannot load the reasoning config: {err}") from err
        return reasoning

    # ------------------------------------------------------------------ sensor input
    def _warn(self, key: str, text: str) -> None:
        self.counters.add(key)
        self.get_logger().warning(text, throttle_duration_sec=5.0)

    def _on_color(self, camera: str, msg: Image) -> None:
        if msg.height < 2 or msg.width < 2 or not msg.data:
            self._warn("bad_image", f"ignoring an empty {camera} colour image")
            return
        if self.streams[camera].add_color(to_seconds(msg.header.stamp), msg):
            self.counters.add(f"frames.{camera}")

    def _on_depth(self, camera: str, msg: Image) -> None:
        if msg.encoding not in ("16UC1", "mono16", "32FC1") or not msg.data:
            self._warn("bad_depth", f"ignoring {camera} depth with encoding {msg.encoding!r}")
            return
        self.streams[camera].add_depth(to_seconds(msg.header.stamp), msg)

    def _on_joint_state(self, msg: JointState) -> None:
        try:
            reading = gripper_reading(msg, self.config.gripper_joint)
        except ValueError as err:
            self._warn("bad_joint_state", f"ignoring a joint state: {err}")
            return
        if reading is not None:
            self.gripper.add(to_seconds(msg.header.stamp), reading)

    def joint_type(self, node_id: str) -> str:
        """``prismatic`` or ``revolute`` for a fixture id (see the module docstring)."""
        node = self.world.node(node_id)
        label = node.label if node is not None else label_of_id(node_id)
        return "prismatic" if label.strip().lower() in self._prismatic else "revolute"

    def _on_target_state(self, msg: JointState) -> None:
        samples, problems = fixture_samples(msg, self.joint_type)
        if problems:
            self._warn("bad_fixture_state", f"ignoring fixture states: {'; '.join(problems)}")
        for sample in samples:
            self.fixture_states.add(sample.stamp, sample)

    def _on_observations(self, msg: ObjectObservationArray) -> None:
        frame = msg.header.frame_id or self.config.map_frame
        if frame != self.config.map_frame:
            self._warn("bad_observation", f"ignoring observations in frame {frame!r}")
            return
        found, skipped = detections_from_msg(msg)
        if skipped:
            self._warn("bad_observation", f"ignoring {skipped} invalid observation(s)")
        for det in found:
            self.detections.add(det.stamp, det)
        with self._fresh_lock:
            self._fresh_detections.extend(found)

    def _on_scene_graph(self, msg: SceneGraph) -> None:
        frame = msg.header.frame_id or self.config.map_frame
        if frame != self.config.map_frame:
            self._warn("bad_scene_graph", f"ignoring a scene graph in frame {frame!r}")
            return
        report = self.world.update(msg)
        if report is not None and (report.skipped_nodes or report.skipped_properties):
            self._warn("bad_scene_graph", f"scene graph revision {msg.revision}: skipped nodes "
                       f"{list(report.skipped_nodes)}, properties "
                       f"{list(report.skipped_properties)}")

    def _report(self) -> None:
        self.counters.set("pending_claims", len(self.analyzer.harness.pending))
        self._diag_pub.publish(self.counters.report("analyzer", self.get_name()))

    # ---------------------------------------------------------------- service calls
    def _call(self, client: Client, request: Any, what: str) -> Any:
        """Calls a service from inside a callback, waiting on the future with a timeout."""
        timeout = self.config.service_timeout_s
        if not client.service_is_ready() and not client.wait_for_service(timeout_sec=timeout):
            raise ServiceUnavailableError(f"{what} is not available")
        future = client.call_async(coerce_floats(request))
        deadline = time.monotonic() + timeout
        while not future.done():
            if time.monotonic() > deadline:
                client.remove_pending_request(future)
                raise ServiceCallError(f"{what} did not answer within {timeout:.1f} s")
            time.sleep(0.005)
        result = future.result()
        if result is None:
            raise ServiceCallError(f"{what} returned no response")
        return result

    def refresh_world(self) -> bool:
        """Reads the whole graph through ``get_scene_graph``; False when that failed."""
        try:
            response = self._call(self._graph_client, GetSceneGraph.Request(), "get_scene_graph")
        except ServiceCallError as err:
            self.get_logger().warning(f"cannot refresh the scene graph: {err}")
            return False
        if response.error_code != GetSceneGraph.Response.NONE:
            self.get_logger().warning(f"get_scene_graph failed: {response.error_msg}")
            return False
        self.world.update(response.graph)
        return True

    # ------------------------------------------------------------------ the window
    def _camera_pose(self, camera: str, frame_id: str, stamp: float,
                     deadline: float) -> np.ndarray | None:
        """Pose of a frame's optical frame in the map at its stamp.

        A stamp beyond the buffered transforms (TF of the newest frames can trail the images)
        is retried until ``deadline`` (monotonic s), which all frames of a window share.
        """
        frame = frame_id or f"{camera}{self.config.optical_frame_suffix}"
        while True:
            try:
                return np.asarray(self._tf.lookup(self.config.map_frame, frame, stamp))
            except ExtrapolationError as err:
                if time.monotonic() < deadline:
                    time.sleep(0.02)
                    continue
                problem = str(err)
            except TransformError as err:
                problem = str(err)
            self._warn("camera_pose_unavailable", f"no pose of {frame} at {stamp:.3f}: {problem}")
            return None

    def _frames(self, lo: float, hi: float) -> list[CameraFrame]:
        frames: list[CameraFrame] = []
        tf_deadline = time.monotonic() + self.config.tf_wait_s
        for camera, stream in self.streams.items():
            entries = spread(stream.window(lo, hi), self.config.max_frames_per_camera)
            if not entries:
                continue
            k_matrix: np.ndarray | None = None
            size: tuple[int, int] | None = None
            info = stream.info
            if info is not None:
                try:
                    intrinsics = camera_info_to_intrinsics(info, rectified=self.config.rectified)
                    k_matrix, size = intrinsics.matrix, (intrinsics.width, intrinsics.height)
                except CameraInfoError as err:
                    self._warn("bad_camera_info", f"ignoring {camera} camera info: {err}")
            for entry in entries:
                try:
                    rgb = image_to_rgb(entry.color)
                except ImageConversionError as err:
                    self._warn("bad_image", f"ignoring a {camera} frame: {err}")
                    continue
                depth: np.ndarray | None = None
                if entry.depth is not None:
                    try:
                        depth = depth_to_metres(entry.depth)
                    except ImageConversionError as err:
                        self._warn("bad_depth", f"ignoring {camera} depth: {err}")
                    if depth is not None and depth.shape != rgb.shape[:2]:
                        self._warn("bad_depth", f"{camera} depth size differs from colour")
                        depth = None
                image_size = (rgb.shape[1], rgb.shape[0])
                try:
                    frames.append(CameraFrame(
                        camera=camera,
                        stamp=entry.stamp,
                        rgb=rgb,
                        depth=depth,
                        intrinsics=k_matrix if size == image_size else None,
                        camera_to_map=self._camera_pose(camera, entry.color.header.frame_id,
                                                        entry.stamp, tf_deadline),
                    ))
                except EvidenceError as err:
                    self._warn("bad_image", f"ignoring a {camera} frame: {err}")
        return frames

    def _base_pose(self, stamp: float) -> tuple[float, float, float] | None:
        try:
            mat = self._tf.lookup(self.config.map_frame, self.config.base_frame, stamp)
        except TransformError:
            return None
        yaw = float(Rotation.from_matrix(np.asarray(mat)[:3, :3]).as_euler("xyz")[2])
        return float(mat[0, 3]), float(mat[1, 3]), yaw

    def _robot_states(self, lo: float, hi: float) -> list[RobotStateSample]:
        cfg = self.config
        samples: list[RobotStateSample] = []
        pose: tuple[float, float, float] | None = None
        missing = 0
        for stamp, reading in self.gripper.between(lo, hi):
            pose = self._base_pose(stamp) or pose
            if pose is None:
                missing += 1
            samples.append(RobotStateSample(
                stamp=stamp,
                gripper_opening_m=reading.opening_m,
                gripper_effort_n=reading.effort_n,
                contact=(reading.effort_n >= cfg.contact_effort_n
                         and reading.opening_m >= cfg.closed_opening_m),
                base_pose=pose or (0.0, 0.0, 0.0),
            ))
        if missing:
            self._warn("base_pose_unavailable",
                       f"no {cfg.map_frame} -> {cfg.base_frame} transform for {missing} "
                       "gripper samples; base pose recorded as the origin")
        return samples

    def _wait_for_frames(self, until: float) -> None:
        """Waits (bounded, ``frame_wait_s``) until every camera delivered a frame past ``until``."""
        deadline = time.monotonic() + self.config.frame_wait_s
        while True:
            latest = [s.latest_stamp() for s in self.streams.values()]
            seen = [t for t in latest if t is not None]
            if seen and all(t >= until for t in seen):
                return
            if time.monotonic() >= deadline:
                return
            time.sleep(0.02)

    # --------------------------------------------------------------------- analysis
    def _on_interaction(self, msg: InteractionEvent) -> None:
        if msg.phase != InteractionEvent.PHASE_ENDED or not self.config.auto_analyze:
            return
        response = self.analyze(msg)
        level = self.get_logger().info if response.error_code in (
            _Response.NONE, _Response.UNKNOWN_TARGET) else self.get_logger().warning
        level(f"interaction {msg.interaction_id} ({msg.primitive} on {msg.target_id or '-'}): "
              f"{'success' if response.task_success else 'failure'}; error "
              f"{response.error_code} {response.error_msg}")

    def _on_analyze(self, request: Any, response: Any) -> Any:
        result = self.analyze(request.interaction)
        for name in ("task_success", "failure_reason", "verdicts", "keyframe_ids", "backend",
                     "error_code", "error_msg"):
            setattr(response, name, getattr(result, name))
        return response

    def analyze(self, event: InteractionEvent) -> Any:
        """Analyses one interaction once; later requests for the same id get that answer.

        A result with an error other than MEMORY_WRITE_FAILED is forgotten, so a later
        request tries again; MEMORY_WRITE_FAILED retries only the failed writes (their event
        ids make the replay safe).
        """
        iid = event.interaction_id or (
            f"{event.primitive}:{event.target_id}:{to_seconds(event.window_end):.3f}")
        with self._jobs_lock:
            job = self._jobs.get(iid)
            owner = job is None
            if job is None:
                job = _Job()
                self._jobs[iid] = job
        if not owner:
            if not job.done.wait(self.config.analysis_timeout_s):
                return _error(_Response.MODEL_ERROR,
                              f"the analysis of {iid} already in flight did not finish in "
                              f"{self.config.analysis_timeout_s:.0f} s")
            if job.response.error_code == _Response.MEMORY_WRITE_FAILED:
                with self._work_lock:
                    self._retry_writes(job)
            return job.response
        response = _error(_Response.MODEL_ERROR, "analysis did not complete")
        try:
            response = self._analyze(event, iid, job)
        finally:
            job.response = response
            job.done.set()
            with self._jobs_lock:
                if response.error_code not in (_Response.NONE, _Response.MEMORY_WRITE_FAILED):
                    self._jobs.pop(iid, None)
                finished = [k for k, j in self._jobs.items() if j.done.is_set()]
                for key in finished[: max(0, len(finished) - _KEEP_RESULTS)]:
                    del self._jobs[key]
        return response

    def _analyze(self, event: InteractionEvent, iid: str, job: _Job) -> Any:
        cfg = self.config
        if event.phase != InteractionEvent.PHASE_ENDED:
            return _error(_Response.NO_FRAMES, f"interaction {iid} has not ended")
        if not event.target_id:
            return _error(_Response.UNKNOWN_TARGET, "the interaction names no target id")
        start, end = to_seconds(event.window_start), to_seconds(event.window_end)
        try:
            primitive = PrimitiveRecord(
                name=event.primitive, target_id=event.target_id, start_stamp=start,
                end_stamp=end, reported_success=bool(event.success),
                reported_message=event.message, task=event.task)
        except EvidenceError as err:
            return _error(_Response.NO_FRAMES, f"invalid interaction window: {err}")
        if not self.world.has_node(primitive.target_id):
            self.refresh_world()
            if not self.world.has_node(primitive.target_id):
                return _error(_Response.UNKNOWN_TARGET,
                              f"target '{primitive.target_id}' is not in memory")
        self._wait_for_frames(end)
        lo, hi = start - cfg.window_margin_s, end + cfg.window_margin_s
        frames = self._frames(lo, hi)
        if not frames:
            return _error(_Response.NO_FRAMES,
                          f"no camera frame between {lo:.3f} and {hi:.3f} s")
        window = ActionWindow(
            frames=tuple(frames),
            robot_states=tuple(self._robot_states(lo, hi)),
            fixture_states=tuple(s for _, s in self.fixture_states.between(lo, hi)),
        )
        detections = [d for _, d in self.detections.between(lo, hi)]
        backend = self.backend.name
        with self._work_lock:
            try:
                prepared = self.analyzer.prepare(window, primitive, detections, iid)
            except EvidenceError as err:
                code = (_Response.UNKNOWN_TARGET if not self.world.has_node(primitive.target_id)
                        else _Response.NO_FRAMES)
                return _error(code, str(err), backend)
            try:
                vlm_response, answer, attempts = self.analyzer.ask(prepared)
            except AnswerRetriesExhaustedError as err:
                return _error(_Response.INVALID_ANSWER, f"nothing written: {err}", backend)
            except (BackendError, ReasoningError) as err:
                return _error(_Response.MODEL_ERROR, f"{type(err).__name__}: {err}", backend)
            recheck = self._recheck(prepared.evidence)
            result = self.analyzer.verify(prepared, vlm_response, answer, attempts)
            keyframe_ids, frame_keyframes = self._save_keyframes(result, event)
            ctx = WriteContext(
                interaction_id=iid,
                primitive=primitive.name,
                task=primitive.task,
                stamp=end,
                keyframe_ids=tuple(keyframe_ids),
                frame_keyframes=frame_keyframes,
                detection_refs=frozenset(d.ref for d in detections),
                known=self.world.has_node,
                event_prefix=f"analyzer:{iid}",
            )
            plans = plan_writes(result.harness, ctx)
            if recheck is not None:
                plans += plan_writes(recheck, dataclasses.replace(
                    ctx, primitive="", task="", event_prefix=f"analyzer:{iid}:recheck"),
                    skip_deferred=True)
            job.plans, job.stamp = plans, end
            self._send(plans)
        response = self._answer(result, plans, keyframe_ids, end)
        response.backend = vlm_response.backend or backend
        return response

    def _answer(self, result: AnalysisResult, plans: list[PlannedWrite],
                keyframe_ids: list[str], stamp: float) -> Any:
        response = _Response()
        outcome = result.outcome_updates[0] if result.outcome_updates else None
        if outcome is not None:
            response.task_success = bool(outcome.success)
            response.failure_reason = "" if outcome.success else (outcome.failure_reason or
                                                                  outcome.category)
        else:
            pending = next((v for v in result.verdicts if isinstance(v.claim, OutcomeClaim)),
                           None)
            response.task_success = False
            response.failure_reason = ("outcome not verified: " + pending.reason
                                       if pending is not None else "no outcome was claimed")
        response.verdicts = _events_of(plans, stamp)
        response.keyframe_ids = list(keyframe_ids)
        failed = [p for p in plans if p.error]
        if failed:
            response.error_code = _Response.MEMORY_WRITE_FAILED
            response.error_msg = "; ".join(f"{p.subject}: {p.error}" for p in failed)
        return response

    def _send(self, plans: list[PlannedWrite]) -> None:
        unavailable = ""
        for plan in plans:
            if plan.request is None or plan.events:
                continue
            if unavailable:
                plan.error = unavailable
                continue
            try:
                reply = self._call(self._update_client, plan.request, "update_node")
            except ServiceCallError as err:
                plan.error = str(err)
                if isinstance(err, ServiceUnavailableError):
                    unavailable = plan.error
            else:
                if reply.error_code == UpdateNode.Response.NONE:
                    plan.events, plan.error = list(reply.events), ""
                else:
                    plan.error = f"update_node error {reply.error_code}: {reply.error_msg}"
            if plan.error:
                self._warn("memory_write_failed", f"writing to {plan.subject} failed: "
                           f"{plan.error}")

    def _retry_writes(self, job: _Job) -> None:
        self._send(job.plans)
        failed = [p for p in job.plans if p.error]
        response = job.response
        response.verdicts = _events_of(job.plans, job.stamp)
        if failed:
            response.error_msg = "; ".join(f"{p.subject}: {p.error}" for p in failed)
        else:
            response.error_code, response.error_msg = _Response.NONE, ""

    def _save_keyframes(self, result: AnalysisResult, event: InteractionEvent
                        ) -> tuple[list[str], dict[str, str]]:
        ids: list[str] = []
        by_frame: dict[str, str] = {}
        for request in result.keyframes:
            try:
                reply = self._call(self._keyframe_client, self._keyframe_request(
                    request, event.interaction_id or result.interaction_id), "save_keyframe")
            except ServiceCallError as err:
                self._warn("keyframe_save_failed", f"keyframe {request.role}: {err}")
                if isinstance(err, ServiceUnavailableError):
                    break
                continue
            if reply.error_code != SaveKeyframe.Response.NONE or not reply.keyframe_id:
                self._warn("keyframe_save_failed",
                           f"keyframe {request.role}: {reply.result} {reply.error_msg}")
                continue
            if reply.keyframe_id not in ids:
                ids.append(reply.keyframe_id)
            by_frame.setdefault(request.frame_ref, reply.keyframe_id)
        return ids, by_frame

    def _keyframe_request(self, request: KeyframeRequest, iid: str) -> SaveKeyframe.Request:
        return SaveKeyframe.Request(
            camera=request.camera,
            stamp=from_seconds(max(request.stamp, 0.0)),
            max_offset_s=float(self.config.keyframe_max_offset_s),
            trigger="interaction",
            action=request.action,
            phase=_PHASES.get(request.role, "peak"),
            interaction_id=iid,
            linked_nodes=list(request.linked_node_ids),
            labels=[KeyframeLabel(text=label, source="analyzer") for label in request.labels
                    if label.strip()],
            caption=request.caption,
        )

    # ------------------------------------------------------------------- re-checks
    def _recheck(self, evidence: Evidence) -> HarnessResult | None:
        """Re-judges the deferred claims with new evidence (caller holds the work lock)."""
        if not len(self.analyzer.harness.pending):
            return None
        return self.analyzer.harness.recheck(evidence)

    def _pending_boxes(self) -> dict[str, Any]:
        boxes: dict[str, Any] = {}
        for item in self.analyzer.harness.pending.items():
            for node_id in item.claim.subject_ids:
                node = self.world.node(node_id)
                if node is not None and node.bbox is not None:
                    boxes[node_id] = node.bbox
        return boxes

    def _recheck_detections(self) -> None:
        """Re-checks deferred claims when new detections fall inside a fixture they concern."""
        with self._fresh_lock:
            fresh, self._fresh_detections = self._fresh_detections, []
        if not fresh or not len(self.analyzer.harness.pending):
            return
        margin = self.reasoning.percepts.box_margin_m
        boxes = self._pending_boxes()
        relevant = [d for d in fresh
                    if any(box.contains(d.position, margin) for box in boxes.values())]
        if not relevant:
            return
        opened = frozenset(i for i in boxes if (n := self.world.node(i)) and is_opened(n))
        evidence = Evidence(detections=tuple(relevant), observed_interiors=opened,
                            refs=tuple(d.ref for d in relevant))
        with self._work_lock:
            result = self._recheck(evidence)
            if result is None:
                return
            batch = uuid.uuid4().hex[:12]
            ctx = WriteContext(
                interaction_id=f"recheck-{batch}",
                primitive="",
                task="",
                stamp=max(d.stamp for d in relevant),
                keyframe_ids=(),
                frame_keyframes={},
                detection_refs=frozenset(d.ref for d in relevant),
                known=self.world.has_node,
                event_prefix=f"analyzer:recheck:{batch}",
            )
            plans = plan_writes(result, ctx, skip_deferred=True)
            self._send(plans)
        written = sum(len(p.events) for p in plans)
        if plans:
            self.get_logger().info(f"re-checked deferred claims with {len(relevant)} new "
                                   f"detection(s): {written} event(s) written")


def main(args: list[str] | None = None) -> int:
    """Console script ``analyzer_node``."""
    return run_node(AnalyzerNode, args, threads=6)


if __name__ == "__main__":
    sys.exit(main())
