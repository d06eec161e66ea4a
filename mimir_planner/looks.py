"""What remembered nodes look like, read from the keyframes linked to them, without a model.

The frames that show a node best are those the cameras saw it in: world memory keeps, for
every observation fused into a node, its camera, image stamp and own 3D box
(:meth:`~mimir_memory.world.WorldMemory.sightings`). A keyframe taken by that camera at that
stamp shows the node where that box projects through the camera view the keyframe recorded,
registered to that very image (the node's fused box, pooled over many poses, can miss a small
object by a few centimetres up close, and a frame where the node was not segmented may show a
door in front of it). Those frames are measured largest view first. A node with no such frame
falls back to its linked keyframes (its own and its holder's: a look into a cabinet shows what
it holds), newest first, with its remembered box projected into them.

The crop around the box, the pixels in it unlike its surroundings (the object's mask) and
:mod:`mimir_perception.appearance` give colour words, a pattern and a likeness per frame; over a
node's measured frames the words are pooled (a word's confidence is its summed confidence over
the frames measured), so one odd view does not decide. Frames where the box is mostly outside
the image, behind the camera or too small to measure, or where nothing in it stands out from its
surroundings (the thing has moved since, or is hidden), are left out and said so.

The offline planner asks :meth:`NodeLooks.words` whether a remembered apple is known to be
green; a word below the planner's ``attributes.min_confidence`` counts as unknown, which makes
the planner look again or block rather than guess. :meth:`NodeLooks.likeness` answers "the cup
that looks like the cup on the counter": each candidate's distance to the reference is the
median over every pair of their measured views, and the matcher of
:mod:`mimir_perception.appearance` picks the closest or abstains (too far from everything, or
two too close to tell apart).
"""

from __future__ import annotations

import bisect
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from mimir_memory.errors import MemoryStoreError
from mimir_memory.graph import SceneNode
from mimir_memory.keyframes import KeyframeRecord, KeyframeStore, box_corners
from mimir_memory.observations import Sighting
from mimir_perception.appearance import (
    Appearance,
    AppearanceConfig,
    Match,
    colour_words,
    describe,
    distance,
    instance_mask,
    main_colour_word,
    match_distances,
    object_mask,
    pattern_word,
)
from mimir_perception.errors import AppearanceError

LOG = logging.getLogger(__name__)

#: Attribute kinds as the planner's attribute table names them, and ``main``: the colour word
#: of the main colour alone (not a label's or a part's).
KINDS = ("color", "pattern", "main")


class SightingSource(Protocol):
    """Where the cameras saw a node, newest first, at most ``newest`` of them (world
    memory's :meth:`~mimir_memory.world.WorldMemory.sightings`)."""

    def __call__(self, node_id: str, *, newest: int) -> Sequence[Sighting]: ...


@dataclass(frozen=True)
class Look:
    """A node's appearance pooled over the frames that showed it.

    Attributes:
        node_id: The node.
        words: Kind -> word -> pooled confidence in [0, 1].
        frames: Keyframe ids measured.
        appearances: The measurement of each of those frames.
        skipped: (keyframe id, why) for linked frames left out.
        viewpoints: Map position (x, y, z) of the camera of each measured frame.
    """

    node_id: str
    words: dict[str, dict[str, float]]
    frames: tuple[str, ...]
    appearances: tuple[Appearance, ...] = field(repr=False)
    skipped: tuple[tuple[str, str], ...] = ()
    viewpoints: tuple[tuple[float, float, float], ...] = ()

    def why(self, kind: str, word: str) -> str:
        """One line on where a word came from."""
        return (f"{word} at {self.words.get(kind, {}).get(word, 0.0):.2f} from "
                f"{len(self.frames)} keyframe(s) of {self.node_id}")


@dataclass(frozen=True)
class FrameLook:
    """What one keyframe shows of a node: its box's size in pixels and the colour and
    pattern words its crop carries with enough confidence."""

    node_id: str
    size_px: tuple[int, int]
    words: frozenset[str]


class NodeLooks:
    """Appearance of remembered nodes from their linked keyframes (cached per frame set).

    Args:
        store: The keyframe store (read-only is enough).
        config: Appearance settings; its ``crops`` section says how many frames are measured
            per node, which projected boxes are too small or too far outside the image and how
            close in time a keyframe must be to a sighting to show it.
        sightings: Where the cameras saw a node, newest first (world memory's
            :meth:`~mimir_memory.world.WorldMemory.sightings`); None measures linked keyframes
            only.
    """

    def __init__(self, store: KeyframeStore, config: AppearanceConfig,
                 sightings: SightingSource | None = None) -> None:
        self.store = store
        self.config = config
        self.sightings = sightings
        crops = config.crops
        self.frames = crops.frames
        self.min_box_px = crops.min_box_px
        self.min_inside = crops.min_inside
        self.window_s = crops.sighting_window_s
        # per node, its newest look and the frames and box it was measured on (one entry per
        # node, so hours of work do not grow it past the graph's size)
        self._cache: dict[str, tuple[tuple[object, ...], Look]] = {}
        # per node, the sighted frames and the sightings (count, newest stamp) they come from
        self._sighted_cache: dict[str, tuple[tuple[int, float], list[
            tuple[KeyframeRecord, tuple[int, int, int, int]]]]] = {}

    def box_in(self, record: KeyframeRecord, node: SceneNode) -> tuple[int, int, int, int] | str:
        """The node's remembered box in the frame's pixels (x0, y0, x1, y1), or why not."""
        return self._project(record, node.bbox_min, node.bbox_max)

    def _project(self, record: KeyframeRecord, bbox_min: Sequence[float],
                 bbox_max: Sequence[float]) -> tuple[int, int, int, int] | str:
        """A 3D box in the frame's pixels (x0, y0, x1, y1), or why it cannot be measured."""
        view = record.camera_view
        if view is None:
            return "no camera view"
        uv, depth = view.project(box_corners(bbox_min, bbox_max))
        if np.any(depth < 0.05):
            return "behind or at the camera"
        x0, y0 = uv.min(axis=0)
        x1, y1 = uv.max(axis=0)
        area = max((x1 - x0) * (y1 - y0), 1e-9)
        cx0, cy0 = max(x0, 0.0), max(y0, 0.0)
        cx1, cy1 = min(x1, float(record.width)), min(y1, float(record.height))
        if cx1 - cx0 < self.min_box_px or cy1 - cy0 < self.min_box_px:
            return "too small or outside the image"
        if (cx1 - cx0) * (cy1 - cy0) / area < self.min_inside:
            return "mostly outside the image"
        return int(cx0), int(cy0), int(np.ceil(cx1)), int(np.ceil(cy1))

    def look(self, node: SceneNode) -> Look:
        """The node's pooled appearance (empty when no frame shows it).

        The frames are those taken where the cameras saw the node, largest view first, else
        the node's own linked keyframes and its holder's (a look into a cabinet is linked to
        the cabinet and shows what it holds from close by), newest first.
        """
        skipped: list[tuple[str, str]] = []
        sighted = self._sighted(node)
        if sighted:
            boxes = sighted[: 4 * self.frames]
            key: tuple[object, ...] = ("sighted", *(f"{r.frame_id}{b}" for r, b in boxes))
        else:
            boxes = self._linked(node, skipped)
            key = ("linked", *(r.frame_id for r, _ in boxes), *node.bbox_min, *node.bbox_max)
        cached = self._cache.get(node.node_id)
        if cached is not None and cached[0] == key:
            return cached[1]
        pooled: dict[str, dict[str, float]] = {kind: {} for kind in KINDS}
        used: list[str] = []
        measured: list[Appearance] = []
        viewpoints: list[tuple[float, float, float]] = []
        for record, box in boxes:
            if len(used) == self.frames:
                break
            try:
                appearance = self._measure(record.frame_id, box)
            except (AppearanceError, MemoryStoreError) as err:
                skipped.append((record.frame_id, str(err)))
                continue
            used.append(record.frame_id)
            measured.append(appearance)
            if record.camera_view is not None:
                viewpoints.append(record.camera_view.position)
            for attribute in colour_words(appearance, self.config):
                pooled["color"][attribute.word] = (pooled["color"].get(attribute.word, 0.0)
                                                   + attribute.confidence)
            main = main_colour_word(appearance, self.config)
            if main is not None:
                pooled["main"][main.word] = pooled["main"].get(main.word, 0.0) + main.confidence
            pattern = pattern_word(appearance, self.config)
            pooled["pattern"][pattern.word] = (pooled["pattern"].get(pattern.word, 0.0)
                                               + pattern.confidence)
        count = max(len(used), 1)
        words = {kind: {w: c / count for w, c in found.items()} for kind, found in pooled.items()}
        look = Look(node.node_id, words, tuple(used), tuple(measured), tuple(skipped),
                    tuple(viewpoints))
        self._cache[node.node_id] = (key, look)
        return look

    def _linked(self, node: SceneNode, skipped: list[tuple[str, str]]
                ) -> list[tuple[KeyframeRecord, tuple[int, int, int, int]]]:
        """The newest frames linked to the node or its holder where its remembered box can be
        measured (at most ``frames``); the others go to ``skipped`` with why."""
        linked_to = [node.node_id] + ([node.parent] if node.parent else [])
        try:
            linked = self.store.query(node_ids=linked_to, limit=4 * self.frames)
        except MemoryStoreError as err:
            LOG.warning("cannot read the keyframes of %s: %s", node.node_id, err)
            linked = []
        boxes: list[tuple[KeyframeRecord, tuple[int, int, int, int]]] = []
        for record in linked:
            box = self.box_in(record, node)
            if isinstance(box, str):
                skipped.append((record.frame_id, box))
            else:
                boxes.append((record, box))
            if len(boxes) == self.frames:
                break
        return boxes

    def _sighted(self, node: SceneNode
                 ) -> list[tuple[KeyframeRecord, tuple[int, int, int, int]]]:
        """Keyframes taken by a camera within ``sighting_window_s`` of an image it saw the node
        in, each with that sighting's box in its pixels, largest first (one entry a frame)."""
        if self.sightings is None:
            return []
        try:
            seen = self.sightings(node.node_id, newest=self.config.crops.sightings)
        except MemoryStoreError as err:
            LOG.warning("cannot read where the cameras saw %s: %s", node.node_id, err)
            return []
        if not seen:
            return []
        key = (len(seen), max(s.stamp for s in seen))
        cached = self._sighted_cache.get(node.node_id)
        if cached is not None and cached[0] == key:
            return cached[1]
        by_camera: dict[str, list[Sighting]] = {}
        for sighting in seen:
            by_camera.setdefault(sighting.camera, []).append(sighting)
        ranked: dict[str, tuple[int, KeyframeRecord, tuple[int, int, int, int]]] = {}
        for camera, sightings in by_camera.items():
            stamps = sorted(s.stamp for s in sightings)
            try:
                records = self.store.query(camera=camera, start=stamps[0] - self.window_s,
                                           end=stamps[-1] + self.window_s,
                                           limit=self.config.crops.keyframes_per_camera)
            except MemoryStoreError as err:
                LOG.warning("cannot read the %s keyframes of %s: %s", camera, node.node_id, err)
                continue
            by_stamp = sorted(sightings, key=lambda s: s.stamp)
            for record in records:
                at = bisect.bisect_left(stamps, record.timestamp)
                near = [by_stamp[i] for i in (at - 1, at) if 0 <= i < len(stamps)
                        and abs(stamps[i] - record.timestamp) <= self.window_s]
                if not near:
                    continue
                sighting = min(near, key=lambda s: abs(s.stamp - record.timestamp))
                box = self._project(record, sighting.bbox_min, sighting.bbox_max)
                if isinstance(box, str):
                    continue
                area = (box[2] - box[0]) * (box[3] - box[1])
                ranked[record.frame_id] = (area, record, box)
        order = sorted(ranked.values(), key=lambda item: (-item[0], -item[1].timestamp))
        frames = [(record, box) for _, record, box in order]
        self._sighted_cache[node.node_id] = (key, frames)
        return frames

    def _measure(self, frame_id: str, box: tuple[int, int, int, int]) -> Appearance:
        """The appearance of the object inside ``box`` of a keyframe: its segmented instance
        where the frame was kept with its segmentation, else what stands out from the ring
        around the box.

        Raises:
            AppearanceError: a grey frame, no instance in the box, or nothing stands out.
            MemoryStoreError: the image or its segmentation cannot be read.
        """
        image = np.asarray(self.store.load_image(frame_id))
        if image.ndim != 3:
            raise AppearanceError("a grey keyframe has no colour to read")
        bgr = np.ascontiguousarray(image, dtype=np.uint8)
        instances = self.store.load_instances(frame_id)
        mask = (object_mask(bgr, box, self.config) if instances is None
                else instance_mask(instances, box, self.config))
        return describe(bgr, mask, self.config)

    def in_frame(self, frame_id: str, node: SceneNode, min_confidence: float
                 ) -> FrameLook | str:
        """What one keyframe shows of ``node`` (its words of ``min_confidence`` or more), or
        why it shows nothing to measure."""
        try:
            record = self.store.get(frame_id)
        except MemoryStoreError as err:
            return str(err)
        box = next((b for r, b in self._sighted(node) if r.frame_id == frame_id), None) \
            or self.box_in(record, node)
        if isinstance(box, str):
            return box
        try:
            appearance = self._measure(frame_id, box)
        except (AppearanceError, MemoryStoreError) as err:
            return str(err)
        words = {a.word for a in colour_words(appearance, self.config)
                 if a.confidence >= min_confidence}
        pattern = pattern_word(appearance, self.config)
        if pattern.confidence >= min_confidence:
            words.add(pattern.word)
        return FrameLook(node.node_id, (box[2] - box[0], box[3] - box[1]), frozenset(words))

    def viewpoint(self, node: SceneNode) -> tuple[float, float] | None:
        """Where the cameras saw the node from: the mean horizontal map position (x, y) of the
        cameras of its measured frames, or None when no frame measured it."""
        seen = self.look(node).viewpoints
        if not seen:
            return None
        x, y = np.mean(np.asarray(seen, dtype=np.float64)[:, :2], axis=0)
        return float(x), float(y)

    def words(self, node: SceneNode, kind: str, min_confidence: float
              ) -> tuple[frozenset[str], str]:
        """Words of ``kind`` the node's keyframes show at ``min_confidence`` or more, and why
        (empty when they show none: unknown)."""
        look = self.look(node)
        found = sorted(w for w, c in look.words.get(kind, {}).items() if c >= min_confidence)
        return frozenset(found), " and ".join(look.why(kind, w) for w in found)


    def likeness(self, reference: SceneNode, candidates: Sequence[SceneNode]) -> Match:
        """The candidate that looks most like ``reference``, or an abstention that says why
        (the reference or every candidate without a measured view included)."""
        ours = self.look(reference).appearances
        if not ours:
            return Match(None, math.inf, None, math.inf,
                         f"no keyframe shows {reference.node_id} well enough to compare with")
        distances: dict[str, float] = {}
        unseen: list[str] = []
        for node in candidates:
            theirs = self.look(node).appearances
            if not theirs:
                unseen.append(node.node_id)
                continue
            distances[node.node_id] = float(np.median(
                [distance(a, b, self.config) for a in ours for b in theirs]))
        found = match_distances(distances, self.config)
        if unseen:
            found = Match(found.best, found.distance, found.runner_up, found.runner_distance,
                          f"{found.reason}; not compared (no usable keyframe): "
                          f"{', '.join(unseen)}")
        return found
