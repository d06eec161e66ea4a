"""What remembered nodes look like, read from the keyframes linked to them, without a model.

A keyframe that recorded its camera view shows a node where the node's remembered box projects
(the node's own keyframes, and its holder's: a look into a cabinet shows what it holds).
The crop around that box, the pixels in it unlike its surroundings (the object's mask) and
:mod:`mimir_perception.appearance` give colour words, a pattern and a likeness per frame; over
a node's newest frames the words are pooled (a word's confidence is its summed confidence over
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

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from mimir_memory.errors import MemoryStoreError
from mimir_memory.graph import SceneNode
from mimir_memory.keyframes import KeyframeRecord, KeyframeStore, box_corners
from mimir_perception.appearance import (
    Appearance,
    AppearanceConfig,
    Match,
    colour_words,
    describe,
    distance,
    match_distances,
    object_mask,
    pattern_word,
)
from mimir_perception.errors import AppearanceError

LOG = logging.getLogger(__name__)

#: Attribute kinds as the planner's attribute table names them.
KINDS = ("color", "pattern")


@dataclass(frozen=True)
class Look:
    """A node's appearance pooled over the frames that showed it.

    Attributes:
        node_id: The node.
        words: Kind -> word -> pooled confidence in [0, 1].
        frames: Keyframe ids measured.
        appearances: The measurement of each of those frames.
        skipped: (keyframe id, why) for linked frames left out.
    """

    node_id: str
    words: dict[str, dict[str, float]]
    frames: tuple[str, ...]
    appearances: tuple[Appearance, ...] = field(repr=False)
    skipped: tuple[tuple[str, str], ...] = ()

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
            per node and which projected boxes are too small or too far outside the image.
    """

    def __init__(self, store: KeyframeStore, config: AppearanceConfig) -> None:
        self.store = store
        self.config = config
        crops = config.crops
        self.frames = crops.frames
        self.min_box_px = crops.min_box_px
        self.min_inside = crops.min_inside
        # per node, its newest look and the frames and box it was measured on (one entry per
        # node, so hours of work do not grow it past the graph's size)
        self._cache: dict[str, tuple[tuple[tuple[str, ...], tuple[float, ...]], Look]] = {}

    def box_in(self, record: KeyframeRecord, node: SceneNode) -> tuple[int, int, int, int] | str:
        """The node's remembered box in the frame's pixels (x0, y0, x1, y1), or why not."""
        view = record.camera_view
        if view is None:
            return "no camera view"
        uv, depth = view.project(box_corners(node.bbox_min, node.bbox_max))
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
        """The node's pooled appearance (empty when no linked frame shows it).

        The frames are the node's own and its holder's (a look into a cabinet is linked to the
        cabinet and shows what it holds from close by), newest first.
        """
        linked_to = [node.node_id] + ([node.parent] if node.parent else [])
        try:
            linked = self.store.query(node_ids=linked_to, limit=4 * self.frames)
        except MemoryStoreError as err:
            LOG.warning("cannot read the keyframes of %s: %s", node.node_id, err)
            linked = []
        boxes: list[tuple[KeyframeRecord, tuple[int, int, int, int]]] = []
        skipped: list[tuple[str, str]] = []
        for record in linked:
            box = self.box_in(record, node)
            if isinstance(box, str):
                skipped.append((record.frame_id, box))
            else:
                boxes.append((record, box))
            if len(boxes) == self.frames:
                break
        key = (tuple(r.frame_id for r, _ in boxes), (*node.bbox_min, *node.bbox_max))
        cached = self._cache.get(node.node_id)
        if cached is not None and cached[0] == key:
            return cached[1]
        pooled: dict[str, dict[str, float]] = {kind: {} for kind in KINDS}
        used: list[str] = []
        measured: list[Appearance] = []
        for record, box in boxes:
            try:
                appearance = self._measure(record.frame_id, box)
            except (AppearanceError, MemoryStoreError) as err:
                skipped.append((record.frame_id, str(err)))
                continue
            used.append(record.frame_id)
            measured.append(appearance)
            for attribute in colour_words(appearance, self.config):
                pooled["color"][attribute.word] = (pooled["color"].get(attribute.word, 0.0)
                                                   + attribute.confidence)
            pattern = pattern_word(appearance, self.config)
            pooled["pattern"][pattern.word] = (pooled["pattern"].get(pattern.word, 0.0)
                                               + pattern.confidence)
        count = max(len(used), 1)
        words = {kind: {w: c / count for w, c in found.items()} for kind, found in pooled.items()}
        look = Look(node.node_id, words, tuple(used), tuple(measured), tuple(skipped))
        self._cache[node.node_id] = (key, look)
        return look

    def _measure(self, frame_id: str, box: tuple[int, int, int, int]) -> Appearance:
        """The appearance of what stands out inside ``box`` of a keyframe.

        Raises:
            AppearanceError: a grey frame, or nothing in the box stands out.
            MemoryStoreError: the image cannot be read.
        """
        image = np.asarray(self.store.load_image(frame_id))
        if image.ndim != 3:
            raise AppearanceError("a grey keyframe has no colour to read")
        bgr = np.ascontiguousarray(image, dtype=np.uint8)
        return describe(bgr, object_mask(bgr, box, self.config), self.config)

    def in_frame(self, frame_id: str, node: SceneNode, min_confidence: float
                 ) -> FrameLook | str:
        """What one keyframe shows of ``node`` (its words of ``min_confidence`` or more), or
        why it shows nothing to measure."""
        try:
            record = self.store.get(frame_id)
        except MemoryStoreError as err:
            return str(err)
        box = self.box_in(record, node)
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
