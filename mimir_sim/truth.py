"""Ground truth of the simulated kitchen: where every fixture, part and object is now.

These queries know what the robot cannot (entity ids, true boxes, which fixture holds which
object); the judge, the scenario checks and the simulation's own bookkeeping use them, the
robot's controllers do not need them to move.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict

import numpy as np

from mimir_sim.errors import UnknownEntityError
from mimir_sim.fixtures import ArticulatedFixtures
from mimir_sim.geometry import FloatArray
from mimir_sim.physics import PhysicsWorld

BOXED_KINDS = ("fixture", "door", "drawer", "handle", "object")


class EntitySearch(TypedDict, total=False):
    """The filters of :meth:`SceneTruth.nearest_entity`, for callers that pass them on."""

    labels: Sequence[str] | None
    kinds: Sequence[str]
    max_distance: float


@dataclass(frozen=True)
class EntityState:
    """Where a fixture, fixture part or object is now (world frame = ``map``, metres).

    Attributes:
        id: stable entity id (``cab_1``, ``cab_1_door``, ``ketchup_1``).
        kind: ``fixture``, ``door``, ``drawer``, ``handle`` or ``object``.
        label: human label (``upper cabinet``, ``ketchup bottle``).
        category: object category (``ketchup``) or fixture type (``upper_cabinet``).
        fixture: owning fixture of a part; for an object the fixture that contains it now
            (``None`` while it is held or lies elsewhere).
        position: object body origin; box centre for fixtures and parts.
        box_low: lower corner of the axis-aligned box around the entity's geoms.
        box_high: upper corner of that box. A fixture's box covers its carcass (or counter
            block) only; its door, drawer and handle are entities of their own.
    """

    id: str
    kind: str
    label: str
    category: str
    fixture: str | None
    position: tuple[float, float, float]
    box_low: tuple[float, float, float]
    box_high: tuple[float, float, float]

    def distance_to(self, point: Sequence[float] | FloatArray) -> float:
        """Euclidean distance from ``point`` to the box (0 inside it)."""
        p = np.asarray(point, dtype=np.float64)
        gap = np.maximum(np.maximum(np.asarray(self.box_low) - p, 0.0), p - self.box_high)
        return float(np.linalg.norm(gap))


def _xyz(v: FloatArray) -> tuple[float, float, float]:
    return (float(v[0]), float(v[1]), float(v[2]))


class SceneTruth:
    """True positions, boxes and containment of the scene's entities."""

    def __init__(self, world: PhysicsWorld, fixtures: ArticulatedFixtures) -> None:
        self.world = world
        self.fixtures = fixtures
        scene = world.scene
        entity_geoms: dict[str, list[int]] = {}
        for g, eid in enumerate(scene.geom_entity):
            if eid is not None and scene.entities[eid].kind in BOXED_KINDS:
                entity_geoms.setdefault(eid, []).append(g)
        self._entity_geoms = {e: np.array(g, dtype=np.int64) for e, g in entity_geoms.items()}

    def entity_ids(self, kinds: Sequence[str] = ("fixture", "object")) -> list[str]:
        """Ids of the scene's entities of the given kinds, sorted."""
        return sorted(e for e, ent in self.world.scene.entities.items() if ent.kind in kinds)

    def entity_box(self, entity_id: str) -> tuple[FloatArray, FloatArray]:
        """Current world-frame axis-aligned box (low, high corners) around an entity's geoms.

        Raises:
            UnknownEntityError: not a fixture, fixture part or object of the scene.
        """
        geoms = self._entity_geoms.get(entity_id)
        if geoms is None:
            raise UnknownEntityError(
                f"unknown entity {entity_id!r} (boxes exist for {', '.join(BOXED_KINDS)})"
            )
        m, d = self.world.model, self.world.data
        rot = d.geom_xmat[geoms].reshape(-1, 3, 3)
        local = m.geom_aabb[geoms]
        centre = d.geom_xpos[geoms] + np.einsum("gij,gj->gi", rot, local[:, :3])
        half = np.einsum("gij,gj->gi", np.abs(rot), local[:, 3:])
        low = np.min(centre - half, axis=0)
        high = np.max(centre + half, axis=0)
        return np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)

    def entity_position(self, entity_id: str) -> FloatArray:
        """Object body origin, or the centre of a fixture's (or part's) current box."""
        if entity_id in self.world.scene.objects:
            return self.object_position(entity_id)
        low, high = self.entity_box(entity_id)
        return np.asarray((low + high) / 2.0, dtype=np.float64)

    def entity_state(self, entity_id: str) -> EntityState:
        """Label, kind and current position and box of a fixture, fixture part or object.

        Raises:
            UnknownEntityError: not a fixture, fixture part or object of the scene.
        """
        low, high = self.entity_box(entity_id)
        scene = self.world.scene
        entity = scene.entities[entity_id]
        if entity.kind == "object":
            category = scene.objects[entity_id].category
            parent = self.object_fixture(entity_id)
            pos = self.object_position(entity_id)
        else:
            category = scene.fixtures[entity.fixture or entity_id].type
            parent = entity.fixture
            pos = (low + high) / 2.0
        return EntityState(
            id=entity_id,
            kind=entity.kind,
            label=entity.label,
            category=category,
            fixture=parent,
            position=_xyz(pos),
            box_low=_xyz(low),
            box_high=_xyz(high),
        )

    def entity_states(self, kinds: Sequence[str] = ("fixture", "object")) -> dict[str, EntityState]:
        """Current :class:`EntityState` of every entity of the given kinds."""
        bad = sorted(set(kinds) - set(BOXED_KINDS))
        if bad:
            raise UnknownEntityError(f"no entity kind {bad[0]!r}; known: {', '.join(BOXED_KINDS)}")
        return {e: self.entity_state(e) for e in self.entity_ids(kinds)}

    def nearest_entity(
        self,
        point: Sequence[float] | FloatArray,
        *,
        labels: Sequence[str] | None = None,
        kinds: Sequence[str] = ("fixture", "object"),
        max_distance: float = math.inf,
    ) -> EntityState | None:
        """The entity whose current box lies nearest to a world point.

        Args:
            point: (x, y, z) in the world (``map``) frame.
            labels: accepted labels or categories (``ketchup``, ``ketchup bottle``,
                ``upper_cabinet``); ``None`` accepts any.
            kinds: entity kinds to consider.
            max_distance: ignore entities farther than this from ``point`` (m).

        Returns:
            The nearest entity (ties broken by distance to its position), or ``None``.

        Raises:
            UnknownEntityError: ``point`` is not three finite numbers or a kind is unknown.
        """
        p = np.asarray(point, dtype=np.float64)
        if p.shape != (3,) or not np.all(np.isfinite(p)):
            raise UnknownEntityError(f"expected a finite (x, y, z) point, got {point!r}")
        accepted = None if labels is None else set(labels)
        best: tuple[float, float, EntityState] | None = None
        for state in self.entity_states(kinds).values():
            if accepted is not None and not ({state.label, state.category} & accepted):
                continue
            gap = state.distance_to(p)
            if gap > max_distance:
                continue
            key = (gap, float(np.linalg.norm(p - np.asarray(state.position))))
            if best is None or key < best[:2]:
                best = (key[0], key[1], state)
        return None if best is None else best[2]

    def object_position(self, object_id: str) -> FloatArray:
        """World position of an object's body."""
        if object_id not in self.world.scene.objects:
            raise UnknownEntityError(f"unknown object {object_id!r}")
        w = self.world
        return np.array(w.data.xpos[w.model.body(object_id).id], dtype=np.float64)

    def object_fixture(self, object_id: str) -> str | None:
        """The fixture whose interior (or top, for counters) contains the object, if any."""
        pos = self.object_position(object_id)
        fixtures = self.world.scene.fixtures
        ordered = sorted(fixtures.items(), key=lambda item: item[1].type == "counter")
        for fid, fx in ordered:
            lo = np.array(fx.interior_low) - np.array([0.0, 0.0, 0.02])
            hi = np.array(fx.interior_high)
            if fx.is_drawer:
                shift = self.fixtures.opening(fid)
                lo = lo - np.array([shift, 0.0, 0.0])
                hi = hi - np.array([shift, 0.0, 0.0])
            if np.all(pos >= lo) and np.all(pos <= hi):
                return fid
        return None
