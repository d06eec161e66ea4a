"""Ground-truth segmentation of rendered frames, in the vocabulary's labels.

The renderer marks every pixel with an entity index; :class:`TruthSegmenter` turns that into
the instances and labels a segmentation model would report (fixture parts join their fixture,
walls and the robot are background), so the simulation can stand in for the perception stack's
segmenter. It also reports the parts a robot points at, as a part-prompted model would: every
handle is its own instance labelled ``handle`` (:data:`PART_LABEL`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from mimir_perception.segmentation import (
    SegmentationResult,
    SegmenterConfig,
    SimGroundTruthBackend,
)
from mimir_sim.entity_labels import LabelMap
from mimir_sim.rendering import Frame
from mimir_sim.scene_layout import Entity

FIXTURE_PART_KINDS = ("door", "drawer", "handle")
PART_LABEL = "handle"
SEGMENTED_KINDS = ("fixture", "object", *FIXTURE_PART_KINDS)


def segmentation_tables(
    entity_ids: Sequence[str],
    entities: Mapping[str, Entity],
    label_map: LabelMap | None = None,
) -> tuple[dict[int, str], dict[int, str]]:
    """Label and instance-group tables for :class:`SimGroundTruthBackend`.

    Render index ``i`` is ``entity_ids[i]`` (the renderer's entity order). Fixture parts (door,
    drawer box, handle) take their fixture's label and join its instance; walls, floor and the
    robot are left out (background), and so is an entity whose label the vocabulary has no word
    for.

    Returns:
        ``(labels, groups)``: render index -> label, render index -> instance key.
    """
    labels: dict[int, str] = {}
    groups: dict[int, str] = {}
    for index, eid in enumerate(entity_ids):
        entity = entities.get(eid)
        if entity is None or entity.kind not in SEGMENTED_KINDS:
            continue
        owner = entity.fixture if entity.kind in FIXTURE_PART_KINDS else eid
        if owner is None or owner not in entities:
            continue
        label = entities[owner].label
        if label_map is not None:
            mapped = label_map.in_vocabulary(label)
            if mapped is None:
                continue  # outside the robot's vocabulary: background, as SAM3 would leave it
            label = mapped
        labels[index] = label
        groups[index] = owner
    return labels, groups


def part_tables(
    entity_ids: Sequence[str], entities: Mapping[str, Entity]
) -> tuple[dict[int, str], dict[int, str]]:
    """Label and instance tables of the parts segmentation: each handle alone, as ``handle``."""
    labels: dict[int, str] = {}
    groups: dict[int, str] = {}
    for index, eid in enumerate(entity_ids):
        entity = entities.get(eid)
        if entity is not None and entity.kind == "handle":
            labels[index] = PART_LABEL
            groups[index] = eid
    return labels, groups


class TruthSegmenter:
    """Segments rendered frames from their ground-truth entity image.

    Args:
        entities: the scene's entities.
        label_map: maps simulator labels to the vocabulary's.
        min_pixels: instances with fewer pixels are left out.
    """

    def __init__(
        self, entities: Mapping[str, Entity], label_map: LabelMap, min_pixels: int
    ) -> None:
        self._entities = entities
        self._label_map = label_map
        self._config = SegmenterConfig(min_pixels=min_pixels)
        self._part_config = SegmenterConfig(min_pixels=max(1, min_pixels // 4))
        self._ids: tuple[str, ...] = ()
        self._backend = self._build(tuple(sorted(entities)))

    def _build(self, entity_ids: tuple[str, ...]) -> SimGroundTruthBackend:
        labels, groups = segmentation_tables(entity_ids, self._entities, self._label_map)
        self._ids = entity_ids
        part_labels, part_groups = part_tables(entity_ids, self._entities)
        self._parts = SimGroundTruthBackend(part_labels, part_groups, self._part_config)
        return SimGroundTruthBackend(labels, groups, self._config)

    def _run(self, frame: Frame, camera: str, parts: bool) -> SegmentationResult | None:
        if frame.segmentation is None:
            return None
        if frame.entity_ids != self._ids:
            self._backend = self._build(frame.entity_ids)
        backend = self._parts if parts else self._backend
        return backend.segment_ids(frame.segmentation, stamp=frame.stamp, camera=camera)

    def segment(self, frame: Frame, camera: str) -> SegmentationResult | None:
        """Instances of one frame (``None`` for a frame rendered without segmentation).

        Raises:
            SegmentationError: the entity image does not fit the frame's entity ids.
        """
        return self._run(frame, camera, parts=False)

    def segment_parts(self, frame: Frame, camera: str) -> SegmentationResult | None:
        """Part instances (handles) of one frame (``None`` without segmentation).

        Raises:
            SegmentationError: the entity image does not fit the frame's entity ids.
        """
        return self._run(frame, camera, parts=True)
