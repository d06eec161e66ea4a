"""Generic percepts over mechanical evidence: contact, hold, displacement, containment, words.

These small deterministic functions are what the verifiers and the analyzer's evidence builder
read the robot's signals with. The offline reasoner does not use them: it reads the evidence
its own way, so that the verifiers check it rather than agree with it by construction.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from mimir_planner.reasoning.config import PerceptConfig, VocabularyConfig
from mimir_planner.reasoning.evidence import (
    CameraFrame,
    Detection3D,
    DisplacementMeasurement,
    Evidence,
    PullTracking,
    RobotStateSample,
)
from mimir_planner.reasoning.world_view import Box3D


@dataclass(frozen=True)
class ContactSummary:
    """How the gripper engaged over the window.

    Attributes:
        contact: whether enough samples show the jaws engaging an object.
        engaged_samples: number of samples that show engagement.
        peak_stamp: stamp of the strongest engagement (largest effort), or None.
        max_pull_force_n: largest reported wrist pull force, or None when not reported.
        pull_ok: whether the pull force reached the threshold (True when not reported).
        held_at_end: whether the jaws still hold an object at the last sample.
        end_opening_m: jaw opening at the last sample.
    """

    contact: bool
    engaged_samples: int
    peak_stamp: float | None
    max_pull_force_n: float | None
    pull_ok: bool
    held_at_end: bool
    end_opening_m: float


def _engaged(sample: RobotStateSample, cfg: PerceptConfig) -> bool:
    gripping = (
        sample.gripper_effort_n >= cfg.min_grip_effort_n
        and sample.gripper_opening_m >= cfg.min_object_width_m
    )
    return sample.contact or gripping


def contact_summary(
    samples: Sequence[RobotStateSample], cfg: PerceptConfig
) -> ContactSummary | None:
    """Summarises gripper engagement; None when there are no samples to judge from."""
    if not samples:
        return None
    ordered = sorted(samples, key=lambda s: s.stamp)
    engaged = [s for s in ordered if _engaged(s, cfg)]
    peak = max(engaged, key=lambda s: s.gripper_effort_n) if engaged else None
    pulls = [s.pull_force_n for s in ordered if s.pull_force_n is not None]
    max_pull = max(pulls) if pulls else None
    last = ordered[-1]
    return ContactSummary(
        contact=len(engaged) >= cfg.min_contact_samples,
        engaged_samples=len(engaged),
        peak_stamp=peak.stamp if peak is not None else None,
        max_pull_force_n=max_pull,
        pull_ok=max_pull is None or max_pull >= cfg.min_pull_force_n,
        held_at_end=_engaged(last, cfg) and last.gripper_opening_m >= cfg.min_object_width_m,
        end_opening_m=last.gripper_opening_m,
    )


def hand_displacement(
    fixture_id: str, samples: Sequence[RobotStateSample], cfg: PerceptConfig
) -> DisplacementMeasurement | None:
    """How far the hand travelled while the jaws held something (m), as the part's motion.

    A handle held in the jaws moves with the hand: the largest distance of the reported hand
    position from where it was at the first engaged sample, over the engaged samples taken
    while the robot commanded the hand (the same samples as :func:`pull_tracking`). Once the
    commands stop, a hand that held against a locked door springs back as the jaws loosen,
    before the gripper's reading shows them open. None without at least two such samples.
    """
    held = [s for s in sorted(samples, key=lambda s: s.stamp)
            if s.hand_position is not None and s.hand_commanded is not None
            and _engaged(s, cfg)]
    if len(held) < 2:
        return None
    track = hand_track(held)
    travel = float(np.linalg.norm(track - track[0], axis=1).max())
    return DisplacementMeasurement(
        fixture_id=fixture_id,
        magnitude=travel,
        unit="m",
        source="hand",
        refs=(f"hand:{held[0].stamp:.3f}-{held[-1].stamp:.3f}",),
    )


def box_region(frame: CameraFrame, box: Box3D) -> tuple[int, int, int, int] | None:
    """Pixel rectangle (x0, y0, x1, y1) covering the box in a frame; None when not visible."""
    if frame.intrinsics is None or frame.camera_to_map is None:
        return None
    map_to_cam = np.linalg.inv(frame.camera_to_map)
    corners = np.c_[box.corners(), np.ones(8)] @ map_to_cam.T
    z = corners[:, 2]
    if np.any(z <= 1e-3):
        return None
    uv = (corners[:, :3] / z[:, None]) @ frame.intrinsics.T
    h, w = frame.rgb.shape[:2]
    x0, y0 = np.floor(uv[:, :2].min(axis=0)).astype(int)
    x1, y1 = np.ceil(uv[:, :2].max(axis=0)).astype(int)
    x0, y0 = max(int(x0), 0), max(int(y0), 0)
    x1, y1 = min(int(x1), w), min(int(y1), h)
    if x1 - x0 < 2 or y1 - y0 < 2:
        return None
    return x0, y0, x1, y1


def hand_track(held: Sequence[RobotStateSample], commanded: bool = False) -> np.ndarray:
    """Achieved (or commanded) hand positions of ``held`` for measuring how the hand moved.

    In ``odom`` where at least half of the samples (and two) carry it, from those samples
    alone: a localisation correction during the action moves ``map`` against ``odom``, not the
    hand, so a few samples whose odom position went missing must not switch the whole
    measurement to ``map``. Otherwise in ``map``.
    """
    odom = [p for p in (s.commanded_odom if commanded else s.hand_odom for s in held)
            if p is not None]
    if len(odom) >= 2 and 2 * len(odom) >= len(held):
        return np.asarray(odom, dtype=np.float64)
    return np.asarray([s.hand_commanded if commanded else s.hand_position for s in held],
                      dtype=np.float64)


def pull_tracking(samples: Sequence[RobotStateSample], cfg: PerceptConfig) -> PullTracking | None:
    """How far the held hand went against how far it was commanded to go.

    Over the samples where the jaws held something and both the commanded and the achieved
    hand positions are known: the largest distance of each from its value at the first such
    sample. A handle that does not give way holds the hand back while the command moves on.
    None without two such samples.
    """
    held = [s for s in sorted(samples, key=lambda s: s.stamp)
            if s.hand_position is not None and s.hand_commanded is not None and _engaged(s, cfg)]
    if len(held) < 2:
        return None
    cmd = hand_track(held, commanded=True)
    ach = hand_track(held)
    return PullTracking(
        commanded_m=float(np.linalg.norm(cmd - cmd[0], axis=1).max()),
        achieved_m=float(np.linalg.norm(ach - ach[0], axis=1).max()),
        samples=len(held),
        refs=(f"hand:{held[0].stamp:.3f}-{held[-1].stamp:.3f}",),
    )


def release_point(samples: Sequence[RobotStateSample], cfg: PerceptConfig) -> np.ndarray | None:
    """Where the hand was (map, m) at the last sample whose jaws held something: where a placed
    object was let go. None when no held sample carries the hand position."""
    last = _last_held(sorted(samples, key=lambda s: s.stamp), cfg)
    return None if last is None else np.asarray(last.hand_position, dtype=np.float64)


def _last_held(ordered: Sequence[RobotStateSample], cfg: PerceptConfig
               ) -> RobotStateSample | None:
    """The last of the stamp-ordered samples whose jaws held something and which carries the
    hand position, or None."""
    return next((s for s in reversed(ordered)
                 if s.hand_position is not None and _engaged(s, cfg)), None)


@dataclass(frozen=True)
class PlaceSightings:
    """What the cameras saw of a placed thing after the jaws let it go.

    Attributes:
        release: where the hand was (map, m) at the last sample whose jaws held something.
        stamp: that sample's stamp (s).
        resting: detections of the thing's name near the release point, at most
            ``place_fall_m`` below it: it stands where it was set down.
        fallen: detections of the name more than ``place_fall_m`` below the release point and
            within ``place_fall_reach_m`` of it across: it fell off the top.
    """

    release: np.ndarray
    stamp: float
    resting: tuple[Detection3D, ...]
    fallen: tuple[Detection3D, ...]


def place_sightings(samples: Sequence[RobotStateSample], detections: Sequence[Detection3D],
                    names: Sequence[str], synonyms: Mapping[str, Sequence[str]],
                    cfg: PerceptConfig) -> PlaceSightings | None:
    """Sort the detections of ``names`` made ``place_settle_s`` or more after the release into
    those resting near the release point and those that fell below it. None when no held
    sample carries the hand position (the release point is unknown) or when the jaws never
    opened after it (nothing was let go)."""
    ordered = sorted(samples, key=lambda s: s.stamp)
    last = _last_held(ordered, cfg)
    if last is None or not any(s.stamp > last.stamp and not _engaged(s, cfg) for s in ordered):
        return None
    release = np.asarray(last.hand_position, dtype=np.float64)
    stamp = last.stamp
    resting: list[Detection3D] = []
    fallen: list[Detection3D] = []
    for det in detections:
        if det.stamp < stamp + cfg.place_settle_s or not any(
                names_match(name, det.label, synonyms) for name in names):
            continue
        offset = det.position - release
        across, drop = float(np.hypot(offset[0], offset[1])), float(-offset[2])
        if drop <= cfg.place_fall_m and across <= cfg.place_rest_m:
            resting.append(det)
        elif drop > cfg.place_fall_m and across <= cfg.place_fall_reach_m:
            fallen.append(det)
    return PlaceSightings(release, stamp, tuple(resting), tuple(fallen))


def _relative_pose(before: CameraFrame, after: CameraFrame) -> np.ndarray | None:
    """Pose of ``before``'s optical frame in ``after``'s.

    Taken through ``odom`` when both frames carry it: a localisation correction moves ``map``
    against ``odom`` without moving the camera, so it must not read as scene motion.
    """
    if before.camera_to_odom is not None and after.camera_to_odom is not None:
        return np.asarray(np.linalg.inv(after.camera_to_odom) @ before.camera_to_odom)
    if before.camera_to_map is not None and after.camera_to_map is not None:
        return np.asarray(np.linalg.inv(after.camera_to_map) @ before.camera_to_map)
    return None


def _registration(before: CameraFrame, after: CameraFrame, cfg: PerceptConfig
                  ) -> np.ndarray | None:
    """:func:`_relative_pose`, or None when the camera moved further than the registration
    limits between the two frames (or a pose is unknown)."""
    rel = _relative_pose(before, after)
    if rel is None:
        return None
    angle = float(np.arccos(np.clip((np.trace(rel[:3, :3]) - 1.0) / 2.0, -1.0, 1.0)))
    if np.linalg.norm(rel[:3, 3]) > cfg.registration_max_m or angle > cfg.registration_max_rad:
        return None
    return rel


def settled_pair(frames: Sequence[CameraFrame], cfg: PerceptConfig
                 ) -> tuple[CameraFrame, CameraFrame] | None:
    """The earliest frame taken from where the camera stands at the end, and the latest one.

    The latest frame is the newest one with depth and a known camera pose (the pose of the
    very newest frame may not have arrived when the window is read). A window often opens
    while the base is still settling from the move before the action; comparing its very
    first frame with the last would then fail the registration limits. The first frame within
    those limits of the last one is the earliest view of the scene from the same place. None
    with fewer than two such frames or when no earlier frame registers.
    """
    posed = [f for f in frames if f.depth is not None
             and (f.camera_to_odom is not None or f.camera_to_map is not None)]
    if len(posed) < 2:
        return None
    last = posed[-1]
    for frame in posed[:-1]:
        if frame.camera == last.camera and _registration(frame, last, cfg) is not None:
            return frame, last
    return None


def pair_problem(frames: Sequence[CameraFrame], cfg: PerceptConfig) -> str:
    """Why :func:`settled_pair` found no pair in ``frames``, in words."""
    posed = [f for f in frames if f.depth is not None
             and (f.camera_to_odom is not None or f.camera_to_map is not None)]
    if len(frames) < 2:
        return f"{len(frames)} frame(s) in the window"
    if len(posed) < 2:
        return f"{len(posed)} of {len(frames)} frames carry depth and a camera pose"
    rel = _relative_pose(posed[0], posed[-1])
    if rel is None:
        return "no common frame for the camera poses"
    return (f"the camera moved {float(np.linalg.norm(rel[:3, 3])):.3f} m between its first "
            "and last frames and stood still in none of the earlier ones")


def depth_change(
    before: CameraFrame, after: CameraFrame, fixture_id: str, box: Box3D, cfg: PerceptConfig
) -> DisplacementMeasurement | None:
    """:func:`measure_depth_change`, None where it could not be measured."""
    measure = measure_depth_change(before, after, fixture_id, box, cfg)
    return measure if isinstance(measure, DisplacementMeasurement) else None


def measure_depth_change(
    before: CameraFrame, after: CameraFrame, fixture_id: str, box: Box3D, cfg: PerceptConfig
) -> DisplacementMeasurement | str:
    """Depth change inside the fixture's image region between two frames of one camera.

    The points ``before`` saw in the region are moved into ``after``'s optical frame by the
    camera's own motion between the two stamps (identity while the base stands still) and
    compared with the depth ``after`` measured where they land. The magnitude is the configured
    quantile of the absolute change over the points valid in both. Where it cannot be measured
    the answer is the reason, in words: a frame lacks depth or intrinsics, the camera moved
    further than ``registration_max_m`` / ``registration_max_rad``, the region is not in view,
    or too few points carry depth.
    """
    if before.camera != after.camera:
        return f"frames of two cameras ({before.camera}, {after.camera})"
    if before.depth is None or after.depth is None:
        return "a frame has no registered depth"
    if before.intrinsics is None or after.intrinsics is None:
        return "a frame has no intrinsics"
    rel = _registration(before, after, cfg)
    if rel is None:
        return "the camera moved between the frames (or its pose is unknown)"
    region = box_region(before, box)
    if region is None:
        return "the region is not in view"
    x0, y0, x1, y1 = region
    d0 = before.depth[y0:y1, x0:x1].astype(np.float64)
    vs, us = np.nonzero(np.isfinite(d0) & (d0 > 0))
    z0 = d0[vs, us]
    rays = np.linalg.inv(before.intrinsics) @ np.vstack([us + x0, vs + y0, np.ones_like(z0)])
    points = rel[:3, :3] @ (rays * z0) + rel[:3, 3:4]
    ahead = points[2] > 1e-3
    uv = after.intrinsics @ (points[:, ahead] / points[2, ahead])
    u1, v1 = np.round(uv[0]).astype(int), np.round(uv[1]).astype(int)
    h, w = after.depth.shape
    inside = (u1 >= 0) & (u1 < w) & (v1 >= 0) & (v1 < h)
    measured = after.depth[v1[inside], u1[inside]].astype(np.float64)
    expected = points[2, ahead][inside]
    valid = np.isfinite(measured) & (measured > 0)
    if int(valid.sum()) < cfg.depth_min_valid_pixels:
        return (f"{int(valid.sum())} points with depth in both frames, fewer than "
                f"{cfg.depth_min_valid_pixels}")
    delta = np.abs(measured[valid] - expected[valid])
    return DisplacementMeasurement(
        fixture_id=fixture_id,
        magnitude=float(np.quantile(delta, cfg.depth_change_quantile)),
        unit="m",
        source="depth",
        refs=(before.ref, after.ref),
    )


def in_view(frame: CameraFrame, box: Box3D, cfg: PerceptConfig) -> bool:
    """Whether the box lies in the frame's view with enough depth readings on it."""
    region = box_region(frame, box)
    if region is None or frame.depth is None:
        return False
    x0, y0, x1, y1 = region
    depth = frame.depth[y0:y1, x0:x1]
    return int((np.isfinite(depth) & (depth > 0)).sum()) >= cfg.depth_min_valid_pixels


def reach_inside(frame: CameraFrame, box: Box3D, cfg: PerceptConfig) -> int | None:
    """How many of a frame's depth points land at the back of a fixture's box.

    The depth image (every ``interior_stride_px``-th pixel each way; all of it, since a box
    the camera stands next to or in has no image rectangle) is lifted into ``map``. The box is
    looked into along its level axis that points most nearly away from the camera. Points
    count when they lie within the box shrunk by ``interior_inset_m`` across that axis (so a
    counter slab on a lower unit, or the wall beside it, stays out), between the box's front,
    widened outward by the inset, and its back; those within ``interior_back_m`` of the back
    are returned. A shut door stops every ray at the fixture's front, well before its back; an
    open one lets the rays reach the back wall, the floor and what stands there. None where it
    cannot be measured: no depth or pose, the camera right above the box's centre, or fewer
    than ``depth_min_valid_pixels`` sampled points in that column (the box is out of view).
    """
    if frame.depth is None or frame.intrinsics is None or frame.camera_to_map is None:
        return None
    camera = frame.camera_to_map[:3, 3]
    level = (box.center - camera)[:2]
    if float(np.linalg.norm(level)) < 1e-6:
        return None
    axis = int(np.argmax(np.abs(level)))
    away = 1.0 if level[axis] > 0 else -1.0
    step = cfg.interior_stride_px
    sampled = frame.depth[::step, ::step]
    vs, us = np.nonzero(np.isfinite(sampled) & (sampled > 0))
    z = sampled[vs, us].astype(np.float64)
    rays = np.linalg.inv(frame.intrinsics) @ np.vstack([us * step, vs * step, np.ones_like(z)])
    points = (frame.camera_to_map[:3, :3] @ (rays * z) + camera[:, None]).T
    inset = np.minimum(cfg.interior_inset_m, (box.upper - box.lower) / 4.0)
    lower, upper = box.lower + inset, box.upper - inset
    front, back = (box.lower[axis], box.upper[axis])[::int(away)]
    lower[axis], upper[axis] = sorted((front - away * inset[axis], back))
    kept = points[np.all((points >= lower) & (points <= upper), axis=1)]
    if len(kept) < cfg.depth_min_valid_pixels:
        return None
    return int(np.count_nonzero(away * (back - kept[:, axis]) <= cfg.interior_back_m))


def shut_in_view(frames: Sequence[CameraFrame], box: Box3D, cfg: PerceptConfig) -> bool | None:
    """Whether the frames show a fixture shut: True when at least ``min_visible_frames`` of
    them measure :func:`reach_inside` and none counts ``interior_back_min_pixels`` points at
    the back; False when one does; None when too few measure it (the cameras say nothing).

    The newest frames are read first (a look's settled views come last) and the reading stops
    at the first frame that sees the back: an open fixture costs one or two frames, not all."""
    measured = 0
    for frame in reversed(frames):
        count = reach_inside(frame, box, cfg)
        if count is None:
            continue
        if count >= cfg.interior_back_min_pixels:
            return False
        measured += 1
    return True if measured >= cfg.min_visible_frames else None


def displacement_threshold(measure: DisplacementMeasurement, cfg: PerceptConfig) -> float:
    """Motion that counts as a real opening or closing, in the measurement's unit."""
    return cfg.open_hand_travel_m if measure.source == "hand" else cfg.open_displacement_m


def moved(measure: DisplacementMeasurement | None, cfg: PerceptConfig) -> bool | None:
    """True/False when the fixture did/did not move; None when nothing was measured."""
    if measure is None:
        return None
    return measure.magnitude >= displacement_threshold(measure, cfg)


_WORD = re.compile(r"[a-z0-9]+")


def _singular(word: str) -> str:
    if len(word) > 3 and word.endswith("es") and word[:-2].endswith(("ch", "sh", "x", "ss")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


@functools.lru_cache(maxsize=4096)
def words(text: str) -> tuple[str, ...]:
    """Lower-case singular word tokens of a name (``Red_Mugs`` -> ``('red', 'mug')``).

    Cached: the harness compares the same few names and labels against every detection of
    a fixture at each re-check, and the tokens of a string never change."""
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", text)
    return tuple(_singular(w) for w in _WORD.findall(spaced.lower()))


def names_match(name: str, label: str, synonyms: Mapping[str, Sequence[str]]) -> bool:
    """Whether a content name (``red mug``) refers to a detection label (``cup``)."""
    name_words = set(words(name))
    if not name_words:
        return False
    candidates = {words(label)}
    for key, alternatives in synonyms.items():
        group = {words(key), *(words(a) for a in alternatives)}
        if words(label) in group:
            candidates |= group
    return any(c and (set(c) <= name_words or name_words <= set(c)) for c in candidates)


def never_held(name: str, vocab: VocabularyConfig) -> bool:
    """Whether a content name means a fixture or the room's structure: the name is one of
    those labels (``cabinet``, ``counter``), or its last word is a structure label (``kitchen
    counter``; but a ``cereal box`` is held, although ``box`` is a fixture label)."""
    said = words(name)
    if not said:
        return False
    parts = {words(label) for label in vocab.never_contents}
    return said in parts or (said[-1],) in {words(label) for label in vocab.structure_labels}


def detections_inside(
    detections: Iterable[Detection3D], box: Box3D, cfg: PerceptConfig,
    positions: np.ndarray | None = None,
) -> list[Detection3D]:
    """Detections whose 3D position lies in the box grown by the configured margin (one
    array test for all of them: a window's evidence holds thousands). ``positions``, where
    the caller has them stacked already, are the detections' positions in order
    (:attr:`Evidence.detection_positions`)."""
    listed = detections if isinstance(detections, Sequence) else list(detections)
    if not listed:
        return []
    if positions is None:
        positions = np.stack([d.position for d in listed])
    elif len(positions) != len(listed):
        raise ValueError(f"{len(positions)} positions for {len(listed)} detections")
    inside = box.contains_points(positions, cfg.box_margin_m)
    return [listed[i] for i in np.flatnonzero(inside).tolist()]


def label_matches(name: str, detections: Iterable[Detection3D],
                  synonyms: Mapping[str, Sequence[str]]) -> dict[str, bool]:
    """For each distinct label among the detections, whether the content name refers to it
    (:func:`names_match`, asked once per label rather than once per detection)."""
    return {label: names_match(name, label, synonyms) for label in {d.label for d in detections}}


def matching(name: str, detections: Sequence[Detection3D],
             synonyms: Mapping[str, Sequence[str]]) -> list[Detection3D]:
    """The detections whose label the content name refers to."""
    said = label_matches(name, detections, synonyms)
    return [d for d in detections if said[d.label]]


def contents_inside(
    detections: Iterable[Detection3D], box: Box3D, cfg: PerceptConfig, vocab: VocabularyConfig,
    positions: np.ndarray | None = None,
) -> list[Detection3D]:
    """Detections inside the box that can be contents: fixture and structure labels are left
    out.

    A fixture's own door, shelves and walls (and the edge of a neighbour within the margin)
    are detected with fixture labels, and the counter slab on a lower unit with its own; they
    are structure, never what the fixture holds.
    """
    parts = vocab.never_contents
    return [d for d in detections_inside(detections, box, cfg, positions)
            if d.label not in parts]


def primitive_intent(name: str, vocab: VocabularyConfig) -> str:
    """Intent of a primitive from its name (``OpenCabinet`` -> ``open``); ``other`` if none."""
    for token in words(name):
        for intent, keys in vocab.primitive_intents.items():
            if any(token.startswith(k) for k in keys):
                return intent
    return "other"


def failure_category(reason: str | None, vocab: VocabularyConfig) -> str:
    """Category of a free-text failure reason: one of the configured keys or ``other``."""
    if not reason:
        return "other"
    text = " ".join(words(reason))
    for category, keys in vocab.failure_keywords.items():
        for key in keys:
            pattern = r"\b" + r"\s+".join(re.escape(w) for w in words(key)) + r"\b"
            if words(key) and re.search(pattern, text):
                return category
    return "other"


def gripper_evidence(evidence: Evidence, cfg: PerceptConfig) -> ContactSummary | None:
    """Contact summary of the evidence's gripper samples."""
    return contact_summary(evidence.gripper, cfg)
