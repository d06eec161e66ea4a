"""World memory: the scene graph owned by the scene graph node.

Writes go through the append-only event log; the in-memory :class:`SceneGraphState` is its
projection and is updated only after the events are committed. A reader opened with
``readonly=True`` replays the same log and follows the writer with :meth:`WorldMemory.refresh`.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mimir.bounds import BoundsError
from mimir_memory.config import MemoryConfig
from mimir_memory.errors import DuplicateEventError, InvalidValueError
from mimir_memory.events import (
    WORLD_KINDS,
    EventKind,
    EventLog,
    Evidence,
    MemoryEvent,
    Source,
    Verdict,
    new_event_id,
)
from mimir_memory.graph import (
    AT_LAST_PLACE,
    HAND_PARENT,
    OPENABLE,
    Point,
    SceneGraphState,
    SceneNode,
    SkippedEvent,
    finite_point,
    node_id_prefix,
)
from mimir_memory.locking import synchronized
from mimir_memory.observations import ObjectObservation, Sighting
from mimir_memory.render import render_graph
from mimir_memory.representation import MemoryView
from mimir_memory.schema import DatabaseHandle, Store, open_database
from mimir_memory.updates import NodeUpdate

LOG = logging.getLogger(__name__)

PLACE_CONFIDENCE = 0.9
"""Confidence of the ``at_last_place`` values memory writes itself."""


@dataclass(frozen=True)
class Association:
    """Outcome of associating one observation.

    Attributes:
        index: Position of the observation in the batch.
        node_id: Matched node, or the id the new node will get.
        created: True when the observation starts a new node.
        distance: Centroid distance to the matched node (m); 0 for a new node.
        alternatives: Same-label nodes close enough to be the same object (new nodes only).
        part: The observation shows a part of the open fixture ``node_id`` that stands out of
            it (a door): a sighting that does not move the node.
        anchored: ``node_id`` is a fixture memory holds open or the robot is operating: the
            observation may widen its box but does not move its centroid.
        held_back: Why the observation is not stored (it matches no node and its camera may
            not start a node of its label, ``AssociationConfig.no_start_cameras``); empty when
            it is stored. ``node_id`` is then empty.
    """

    index: int
    node_id: str
    created: bool
    distance: float
    alternatives: tuple[str, ...] = ()
    part: bool = False
    anchored: bool = False
    held_back: str = ""


class WorldMemory(Store):
    """Scene graph with an append-only event log in its own SQLite database."""

    def __init__(
        self,
        handle: DatabaseHandle,
        config: MemoryConfig | None = None,
        *,
        map_frame: str = "map",
        view: MemoryView | None = None,
    ) -> None:
        if view is not None and not handle.readonly:
            raise ValueError("a memory view narrows what a reader sees; a writer sees all")
        self.handle = handle
        self.view = view
        self.lock = threading.RLock()
        self.config = config or MemoryConfig()
        self.map_frame = map_frame
        self.log = EventLog(handle)
        self.bounds = self.config.bounds
        # every event folded (for a writer, or a reader without a view, the graph itself)
        self._folded = SceneGraphState(self.config.association, self.bounds)
        self.state = self._folded
        """The graph as this memory shows it: with a view, what that view lets a reader see."""
        self._last_seq = 0
        # interaction id -> (fixture, start stamp) of the opens and closes under way
        self._operations: dict[str, tuple[str, float]] = {}
        self.refresh()

    @classmethod
    def open(
        cls,
        path: str | Path,
        *,
        config: MemoryConfig | None = None,
        readonly: bool = False,
        map_frame: str = "map",
        snapshot: bool = False,
        view: MemoryView | None = None,
    ) -> WorldMemory:
        """Open (or create) a world database and rebuild the graph from its log.

        ``snapshot`` (with ``readonly``): see :func:`~mimir_memory.schema.open_database`.
        ``view`` (with ``readonly``): show only what this representation keeps (see
        :mod:`mimir_memory.representation`).

        Raises:
            SchemaVersionError: The database is of a newer schema version or another kind.
            WriterBusyError: Another writer holds the database.
            StorageError: The file cannot be opened or created.
        """
        config = config or MemoryConfig()
        handle = open_database(path, "world", readonly=readonly, storage=config.storage,
                               snapshot=snapshot)
        try:
            return cls(handle, config, map_frame=map_frame, view=view)
        except BaseException:
            handle.close()
            raise

    @property
    def revision(self) -> int:
        """Sequence number of the last event folded into the graph."""
        return self.state.revision

    @synchronized
    def refresh(self) -> int:
        """Fold events appended since the last call (by another process, for a reader).

        Returns:
            Number of events applied.
        """
        count = 0
        folded = self._folded
        for event in self.log.iter_events(after_seq=self._last_seq):
            if not folded.apply_stored(event):
                LOG.warning("world memory %s: event %s (seq %s, %s) does not apply and is "
                            "kept out of the graph: %s", self.handle.path, event.event_id,
                            event.seq, event.kind.value,
                            folded.skipped[event.event_id].reason)
            self._last_seq = event.seq or self._last_seq
            count += 1
        if self.view is not None:
            self.state = self.view.project(folded)
        return count

    @property
    def skipped_events(self) -> list[SkippedEvent]:
        """Stored events kept out of the graph because they do not apply (oldest first)."""
        return sorted(self.state.skipped.values(), key=lambda s: s.seq)

    @synchronized
    def retract_skipped(self, *, stamp: float, reason: str = "repair") -> list[MemoryEvent]:
        """Append one ``event_retracted`` event per skipped event (the log stays append-only).

        After this the memory reports no skipped event; each retraction names the event it
        compensates and why that event did not apply.
        """
        events = [
            self._event(EventKind.EVENT_RETRACTED,
                        {"event_id": item.event_id,
                         "reason": f"{reason}: {item.reason}"[: self.bounds.max_text_chars]},
                        stamp=stamp, source=Source.OPERATOR, evidence=None, verdict=None,
                        event_id=f"retract:{item.event_id}"[: self.bounds.max_id_chars])
            for item in self.skipped_events
        ]
        return self.append(events) if events else []

    @synchronized
    def operation_started(self, node_id: str, stamp: float, interaction_id: str) -> None:
        """The robot starts opening or closing fixture ``node_id`` at ``stamp`` (s) in
        interaction ``interaction_id``. Until memory holds that interaction's outcome (its
        analysis, which says whether the fixture now stands open), or for at most
        ``association.operation_timeout_s`` by observation stamps, views of the fixture keep
        its centroid (``association.anchor_open``). Not an event: what it decides is stored
        in each observation's event.

        Raises:
            UnknownNodeError: No such node.
            InvalidValueError: The stamp is not a finite number or the id is empty.
        """
        if isinstance(stamp, bool) or not isinstance(stamp, (int, float)) or not math.isfinite(
                stamp):
            raise InvalidValueError(f"operation stamp must be a finite number, got {stamp!r}")
        if not isinstance(interaction_id, str) or not interaction_id:
            raise InvalidValueError("an operation needs its interaction id")
        node = self.state.node(node_id)
        self._operations[interaction_id] = (node.node_id, float(stamp))

    def operation_ended(self, interaction_id: str) -> bool:
        """Release the anchor of an operation before its analysis arrives (a replay without
        the analyzer, when the executor reported that the fixture does not stand open).
        Returns whether such an operation was anchoring."""
        return self._operations.pop(interaction_id, None) is not None

    def _anchored(self, node_id: str, stamp: float) -> bool:
        """Whether a view of ``node_id`` taken at ``stamp`` keeps its centroid."""
        assoc = self.config.association
        if not assoc.anchor_open:
            return False
        node = self.state.nodes[node_id]
        # a node merged into another while operated hands its operation on
        mine = [(interaction_id, started)
                for interaction_id, (operated, started) in self._operations.items()
                if self.state.resolve(operated) == node_id]
        if mine:
            analysed = {h.get("interaction_id") for h in node.task_history}
            for interaction_id, started in mine:
                if interaction_id in analysed or stamp > started + assoc.operation_timeout_s:
                    del self._operations[interaction_id]
                else:
                    return True
        openable = node.properties.get(OPENABLE)
        return openable is not None and openable.is_opened is True

    # -------------------------------------------------------------------- writes
    @synchronized
    def append(self, events: Sequence[MemoryEvent]) -> list[MemoryEvent]:
        """Validate, store and apply world events in one transaction.

        Events with a ``defer``/``reject`` verdict are stored for audit without validation
        against the graph and without effect.

        Returns:
            The newly stored events (idempotent repeats are left out).

        Raises:
            InvalidEventError, InvalidValueError, UnknownNodeError, GraphConsistencyError: The
                batch does not fit the graph (nothing is written).
            DuplicateEventError: An id is stored with different content (nothing is written).
            StorageError, ReadOnlyStoreError: The database cannot be written.
        """
        for event in events:
            if not isinstance(event, MemoryEvent):
                raise InvalidValueError(f"expected MemoryEvent, got {type(event).__name__}")
        self.refresh()
        self.state.check(e for e in events if e.verdict.effective or e.kind not in WORLD_KINDS)
        for event in events:  # refused claims are kept for audit, but only about real nodes
            if not event.verdict.effective and event.kind in WORLD_KINDS:
                node_id = event.payload.get("node_id")
                if node_id is not None:
                    self.state.node(node_id)
        stored = self.log.append(events)
        for event in stored:
            self.state.apply(event)
            self._last_seq = max(self._last_seq, event.seq or 0)
        return stored

    @synchronized
    def associate(self, observations: Sequence[ObjectObservation]) -> list[Association]:
        """Match observations to same-label nodes by 3D proximity (no write).

        Each node takes at most one observation of a batch. Pairs whose boxes nest (see
        ``AssociationConfig.box_overlap``) are assigned first, then the rest, nearest first.

        Raises:
            InvalidValueError: An element is not an ObjectObservation or is in another frame.
        """
        for index, obs in enumerate(observations):
            if not isinstance(obs, ObjectObservation):
                raise InvalidValueError(
                    f"observation {index} is a {type(obs).__name__}, not an ObjectObservation"
                )
        pairs: list[tuple[int, float, int, str]] = []
        assoc = self.config.association
        factor = assoc.hypothesis_factor
        # One query per observation out to the hypothesis reach; the nearer part are matches.
        nearby: list[list[tuple[float, str]]] = []
        for index, obs in enumerate(observations):
            if not isinstance(obs, ObjectObservation):
                raise InvalidValueError(
                    f"observation {index} is a {type(obs).__name__}, not an ObjectObservation"
                )
            if obs.frame_id != self.map_frame:
                raise InvalidValueError(
                    f"observation {index} is in frame {obs.frame_id!r}, expected {self.map_frame!r}"
                )
            radius = assoc.radius(obs.label)
            found = self.state.within(obs.label, _as_point(obs.centroid), radius * factor)
            nearby.append(found)
            for distance, node_id in found:
                nested = (assoc.box_overlap > 0.0
                          and self._box_overlap(obs, node_id) >= assoc.box_overlap)
                if nested or distance <= radius:
                    # pairs whose boxes nest go first: a partial view near a neighbour's
                    # centroid must not take the node its own box sits in
                    pairs.append((0 if nested else 1, distance, index, node_id))
        pairs.sort()
        matched: dict[int, tuple[str, float]] = {}
        taken: set[str] = set()
        for _, distance, index, node_id in pairs:
            if index in matched or node_id in taken:
                continue
            matched[index] = (node_id, distance)
            taken.add(node_id)
        counters: dict[str, int] = {}
        result: list[Association] = []
        for index, obs in enumerate(observations):
            if index in matched:
                node_id, distance = matched[index]
                result.append(Association(index, node_id, False, distance,
                                          anchored=self._anchored(node_id, float(obs.stamp))))
                continue
            holder = self._open_holder(obs, nearby[index]) if assoc.open_swing else None
            if holder is not None:
                result.append(Association(index, holder[1], False, holder[0], part=True))
                continue
            if not assoc.may_start(obs.label, obs.camera):
                near = f"; nearest {nearby[index][0][1]} at {nearby[index][0][0]:.2f} m" \
                    if nearby[index] else ""
                result.append(Association(
                    index, "", False, 0.0,
                    held_back=f"a {obs.camera} view may not start a {obs.label.strip()} node "
                              f"and it matches none{near}"))
                continue
            prefix = node_id_prefix(obs.label)
            number = counters.get(prefix, self.state.label_counters.get(prefix, 0)) + 1
            while f"{prefix}_{number}" in self.state.reserved_ids:
                number += 1
            counters[prefix] = number
            alternatives = tuple(sorted(i for _, i in nearby[index]))
            result.append(Association(index, f"{prefix}_{number}", True, 0.0, alternatives))
        return result

    def check_observation(self, obs: ObjectObservation, now: float | None = None) -> None:
        """Refuse an observation outside the bounds (workspace, box, label, stamp).

        Args:
            obs: The observation.
            now: The receiving clock (s); None when unknown (no stamp-skew check).

        Raises:
            InvalidValueError: Which bound it breaks.
        """
        try:
            self.bounds.ident(obs.label, "label")
            self.bounds.ident(obs.camera, "camera", allow_empty=True)
            self.bounds.ident(obs.detection_id, "detection_id", allow_empty=True)
            self.bounds.box(obs.centroid.tolist(), obs.bbox_min.tolist(), obs.bbox_max.tolist(),
                            f"{obs.label} observation")
            self.bounds.stamp(obs.stamp, now, f"{obs.label} observation stamp")
        except BoundsError as err:
            raise InvalidValueError(str(err)) from err

    def _open_holder(self, obs: ObjectObservation,
                     nearby: Sequence[tuple[float, str]]) -> tuple[float, str] | None:
        """The nearest same-label node memory holds open, or that an open or close is moving
        now, whose swing holds the observation's box (``box_overlap`` share), as (distance,
        node id); None when there is none."""
        assoc = self.config.association
        lo, hi = obs.bbox_min.tolist(), obs.bbox_max.tolist()
        operated = {self.state.resolve(node_id) for node_id, _ in self._operations.values()}
        for distance, node_id in sorted(nearby):
            node = self.state.nodes[node_id]
            openable = node.properties.get(OPENABLE)
            is_open = openable is not None and openable.is_opened is True
            if not is_open and node_id not in operated:
                continue
            swing_lo, swing_hi = _swing(node.bbox_min, node.bbox_max)
            if _inside_share(lo, hi, swing_lo, swing_hi,
                             assoc.box_tolerance_m) >= assoc.box_overlap:
                return distance, node_id
        return None

    def _box_overlap(self, obs: ObjectObservation, node_id: str) -> float:
        """Share of the observation's box inside the node's, or of the node's inside the
        observation's, whichever is larger (per-axis shares multiplied)."""
        node = self.state.nodes[node_id]
        tol = self.config.association.box_tolerance_m
        lo, hi = obs.bbox_min.tolist(), obs.bbox_max.tolist()
        return max(_inside_share(lo, hi, node.bbox_min, node.bbox_max, tol),
                   _inside_share(node.bbox_min, node.bbox_max, lo, hi, tol))

    @synchronized
    def ingest(
        self,
        observations: Sequence[ObjectObservation],
        *,
        source: Source = Source.PERCEPTION,
        keyframe_ids: Sequence[str] = (),
        now: float | None = None,
        refused: list[tuple[ObjectObservation, str]] | None = None,
        held_back: list[tuple[ObjectObservation, str]] | None = None,
    ) -> list[MemoryEvent]:
        """Check, associate and store a batch of observations (one transaction).

        Each observation is checked against the bounds once, here.

        Args:
            observations: The batch.
            source: Source of the events.
            keyframe_ids: Keyframes showing the batch.
            now: The receiving clock (s): stamps too far ahead of it are refused (None: the
                stamps are not compared with a clock).
            refused: When given, an observation that breaks a bound is left out and appended
                here with the reason, and the rest is stored; when None, it refuses the batch.
            held_back: When given, receives each valid observation that is not stored because
                it matches no node and its camera may not start one of its label
                (``AssociationConfig.no_start_cameras``), with the reason. Such observations
                are left out whether or not it is given.

        Returns:
            One ``node_created`` or ``observation_fused`` event per stored observation; an
            ``observation_fused`` event of a node whose ``at_last_place`` property is False is
            followed by a ``property_set`` event putting it back to True (it is back).

        Raises:
            InvalidValueError: An observation breaks a bound and ``refused`` is None (nothing
                is written).
        """
        if isinstance(observations, ObjectObservation):
            observations = [observations]
        kept: list[ObjectObservation] = []
        for obs in observations:
            if not isinstance(obs, ObjectObservation):
                kept.append(obs)  # associate names the wrong type
                continue
            try:
                self.check_observation(obs, now)
            except InvalidValueError as err:
                if refused is None:
                    raise
                refused.append((obs, str(err)))
                continue
            kept.append(obs)
        if not kept:
            return []
        observations = kept
        associations = self.associate(observations)
        events: list[MemoryEvent] = []
        for assoc in associations:
            obs = observations[assoc.index]
            if assoc.held_back:
                LOG.debug("observation held back: %s", assoc.held_back)
                if held_back is not None:
                    held_back.append((obs, assoc.held_back))
                continue
            payload: dict[str, Any] = {
                "node_id": assoc.node_id,
                "centroid": obs.centroid.tolist(),
                "bbox_min": obs.bbox_min.tolist(),
                "bbox_max": obs.bbox_max.tolist(),
                "score": float(obs.score),
                "point_count": int(obs.point_count),
                "camera": obs.camera,
            }
            if assoc.created:
                payload["label"] = obs.label.strip()
                payload["alternatives"] = list(assoc.alternatives)
            if assoc.part:
                payload["part"] = True
            if assoc.anchored:
                payload["anchored"] = True
            evidence = Evidence(
                keyframe_ids=tuple(keyframe_ids),
                detection_ids=(obs.detection_id,) if obs.detection_id else (),
            )
            kind = EventKind.NODE_CREATED if assoc.created else EventKind.OBSERVATION_FUSED
            events.append(
                MemoryEvent(
                    kind=kind,
                    stamp=float(obs.stamp),
                    source=source,
                    payload=payload,
                    evidence=evidence,
                )
            )
            if not assoc.created and self._away(assoc.node_id):
                where = f"camera {obs.camera!r}" if obs.camera else "perception"
                events.append(self._event(
                    EventKind.PROPERTY_SET,
                    _property_payload(assoc.node_id, AT_LAST_PLACE, True,
                                      confidence=PLACE_CONFIDENCE,
                                      reasoning=f"seen again by {where} after it was missed",
                                      is_opened=None),
                    stamp=float(obs.stamp), source=source, evidence=evidence, verdict=None))
        stored = self.append(events)
        if self.config.association.merge_converged:
            fused = [a.node_id for a in associations
                     if not a.created and not a.part and not a.held_back]
            stamp = max(float(o.stamp) for o in observations)
            merges = self._converged(fused, stamp=stamp, source=source)
            if merges:
                stored += self.append(merges)
        return stored

    def _converged(self, node_ids: Sequence[str], *, stamp: float,
                   source: Source) -> list[MemoryEvent]:
        """Merges of nodes that turned out to be one object: for each fused node, a same-label
        node within the association radius whose box nests with its box. The node with more
        observations (then the older one) is kept."""
        assoc = self.config.association
        if assoc.box_overlap <= 0.0:
            return []
        merges: list[MemoryEvent] = []
        gone: set[str] = set()
        for node_id in dict.fromkeys(node_ids):
            if node_id in gone or node_id not in self.state.nodes:
                continue
            node = self.state.nodes[node_id]
            radius = assoc.radius(node.label)
            for distance, other_id in self.state.within(node.label, node.centroid, radius):
                if other_id == node_id or other_id in gone:
                    continue
                other = self.state.nodes[other_id]
                share = max(
                    _inside_share(node.bbox_min, node.bbox_max, other.bbox_min, other.bbox_max,
                                  assoc.box_tolerance_m),
                    _inside_share(other.bbox_min, other.bbox_max, node.bbox_min, node.bbox_max,
                                  assoc.box_tolerance_m))
                if share < assoc.box_overlap or node_id in self.state.ancestors(other_id) \
                        or other_id in self.state.ancestors(node_id):
                    continue
                kept, merged = sorted(
                    (node, other),
                    key=lambda n: (-n.observation_count, n.first_seen, n.node_id))
                merges.append(self._event(
                    EventKind.NODES_MERGED,
                    {"kept_id": kept.node_id, "merged_id": merged.node_id,
                     "reason": f"converged: centroids {distance:.2f} m apart (radius "
                               f"{radius:.2f} m) and {share:.0%} of one box inside the other"},
                    stamp=stamp, source=source, evidence=None, verdict=None))
                gone.add(merged.node_id)
                if merged.node_id == node_id:
                    break
        return merges

    def _away(self, node_id: str) -> bool:
        """True when memory holds that the node is no longer at its last place."""
        prop = self.state.node(node_id).properties.get(AT_LAST_PLACE)
        return prop is not None and prop.value is False

    def add_node(
        self,
        label: str,
        position: Iterable[float],
        *,
        stamp: float,
        bbox_min: Iterable[float] | None = None,
        bbox_max: Iterable[float] | None = None,
        source: Source = Source.OPERATOR,
        evidence: Evidence | None = None,
        event_id: str | None = None,
    ) -> MemoryEvent:
        """Create a node without association (rooms, operator-declared fixtures).

        Raises:
            InvalidValueError: Empty label or non-finite geometry.
        """
        if not isinstance(label, str) or not label.strip():
            raise InvalidValueError(f"label must be a non-empty string, got {label!r}")
        point = finite_point(position, "position")
        lo = finite_point(bbox_min if bbox_min is not None else point, "bbox_min")
        hi = finite_point(bbox_max if bbox_max is not None else point, "bbox_max")
        payload = {
            "node_id": self.state.next_node_id(label),
            "label": label.strip(),
            "centroid": list(point),
            "bbox_min": list(lo),
            "bbox_max": list(hi),
            "alternatives": [],
            "observed": False,
        }
        return self._one(EventKind.NODE_CREATED, payload, stamp=stamp, source=source,
                         evidence=evidence, verdict=None, event_id=event_id)

    def set_property(
        self,
        node_id: str,
        name: str,
        value: Any,
        *,
        confidence: float,
        stamp: float,
        source: Source = Source.INTERACTION,
        reasoning: str = "",
        is_opened: bool | None = None,
        evidence: Evidence | None = None,
        verdict: Verdict = Verdict.ADMIT,
        event_id: str | None = None,
    ) -> MemoryEvent:
        """Set a seeded or open-vocabulary property; newer admitted evidence overwrites."""
        payload = _property_payload(node_id, name, value, confidence=confidence,
                                    reasoning=reasoning, is_opened=is_opened)
        return self._one(EventKind.PROPERTY_SET, payload, stamp=stamp, source=source,
                         evidence=evidence, verdict=verdict, event_id=event_id)

    def set_contents(
        self,
        node_id: str,
        contents: Sequence[Mapping[str, Any]],
        *,
        is_empty: bool,
        stamp: float,
        source_action: str | None = None,
        reasoning: str = "",
        source: Source = Source.INTERACTION,
        evidence: Evidence | None = None,
        verdict: Verdict = Verdict.ADMIT,
        event_id: str | None = None,
    ) -> MemoryEvent:
        """Replace the contents of a fixture (items are ``{"name": ..., ...}`` mappings)."""
        if isinstance(contents, (str, bytes)) or not isinstance(contents, Sequence):
            raise InvalidValueError("contents must be a sequence of mappings")
        items = []
        for item in contents:
            if not isinstance(item, Mapping):
                raise InvalidValueError(f"content item must be a mapping, got {item!r}")
            items.append(dict(item))
        payload = _contents_payload(node_id, items, is_empty, source_action, reasoning)
        return self._one(EventKind.CONTENTS_SET, payload, stamp=stamp, source=source,
                         evidence=evidence, verdict=verdict, event_id=event_id)

    def set_parent(
        self,
        node_id: str,
        parent_id: str | None,
        relation: str | None,
        *,
        stamp: float,
        position: Iterable[float] | None = None,
        source: Source = Source.INTERACTION,
        evidence: Evidence | None = None,
        verdict: Verdict = Verdict.ADMIT,
        event_id: str | None = None,
    ) -> MemoryEvent:
        """Set the single active parent (room, surface, container, or ``hand``) of a node.

        Args:
            node_id: The node (a merged id names the node it was merged into).
            parent_id: New parent, ``"hand"``, or None to clear it.
            relation: ``room``, ``surface``, ``container`` or ``hand``; None with no parent.
            stamp: Stamp of the evidence.
            position: Where the node was put (map frame, m): the node moves there, its box
                slides along and its position estimate restarts from that point.
            source: Source of the event.
            evidence: Evidence references.
            verdict: The verifier's verdict.
            event_id: Caller's id for the event.

        Raises:
            InvalidValueError: ``position`` is not three finite numbers, or breaks a bound.
            UnknownNodeError: ``node_id`` or ``parent_id`` names no node.
            GraphConsistencyError: The new parent would make a cycle.
        """
        payload = _parent_payload(node_id, parent_id, relation, position)
        return self._one(EventKind.PARENT_CHANGED, payload, stamp=stamp, source=source,
                         evidence=evidence, verdict=verdict, event_id=event_id)

    @synchronized
    def record_miss(
        self,
        node_id: str,
        *,
        stamp: float,
        camera: str = "",
        reason: str = "",
        source: Source = Source.PERCEPTION,
        evidence: Evidence | None = None,
    ) -> list[MemoryEvent]:
        """Record that perception expected to see a node and did not (negative evidence).

        The node counts its misses until it is seen again. The first miss that brings the
        count to ``AssociationConfig.misses_to_stale`` or more, at least
        ``AssociationConfig.stale_after_s`` after any camera last saw the node, also writes, in
        the same transaction, the property ``at_last_place`` = False: the object is no longer
        where memory last saw it.
        Nothing is deleted; :meth:`ingest` sets the property back to True when the node is
        fused again.

        Args:
            node_id: The node that was not seen.
            stamp: Stamp of the view that should have shown it (s).
            camera: Camera of that view (may be empty).
            reason: Why it was expected there (free text, may be empty).
            source: Source of the events.
            evidence: Evidence references (e.g. the keyframe of the view).

        Returns:
            The stored events: the ``observation_missed`` event, then the ``property_set``
            event when this miss makes the node stale.

        Raises:
            UnknownNodeError: No such node.
            InvalidValueError: A stamp that is not a finite number, or a camera or reason
                that is not a string within the bounds.
        """
        self.refresh()
        node = self.state.node(node_id)
        _check_stamp(stamp)
        payload = {"node_id": node_id, "camera": camera, "reason": reason}
        events = [self._event(EventKind.OBSERVATION_MISSED, payload, stamp=stamp,
                              source=source, evidence=evidence, verdict=None)]
        count = node.misses + 1
        limit = self.config.association.misses_to_stale
        floor = self.config.association.stale_after_s
        unseen_s = stamp - node.last_seen
        if count >= limit and unseen_s >= floor and not self._away(node_id):
            note = (f"expected in view but not seen {count} times in a row in the "
                    f"{unseen_s:.1f} s since it was last seen (limits {limit} and {floor:g} s)")
            events.append(self._event(
                EventKind.PROPERTY_SET,
                _property_payload(node_id, AT_LAST_PLACE, False, confidence=PLACE_CONFIDENCE,
                                  reasoning=note, is_opened=None),
                stamp=stamp, source=source, evidence=evidence, verdict=None))
        return self.append(events)

    def merge(
        self,
        kept_id: str,
        merged_id: str,
        *,
        stamp: float,
        reason: str,
        source: Source = Source.OPERATOR,
        evidence: Evidence | None = None,
        event_id: str | None = None,
    ) -> MemoryEvent:
        """Merge a duplicate node into another (see ``SceneGraphState._apply_merged``).

        Afterwards ``merged_id`` is an alias: :meth:`node`, :meth:`why` and later events that
        name it reach the kept node, and :meth:`why` on the kept node lists both nodes'
        events. :meth:`as_of` before the merge still shows the two nodes.

        Args:
            kept_id: The node that stays (a merged id names the node it was merged into).
            merged_id: The duplicate; it must still be a node of its own.
            stamp: Stamp of the evidence that they are one object (s).
            reason: Why they are one object.
            source: Source of the event.
            evidence: Evidence references.
            event_id: Caller's id for the event.

        Raises:
            UnknownNodeError: Either id names no node.
            GraphConsistencyError: The ids name one node, nodes of different labels, a node
                that was already merged, or nodes of which one holds the other.
            InvalidValueError: A stamp that is not a finite number, or a reason that is not
                a string within the bounds.
        """
        _check_stamp(stamp)
        payload = {"kept_id": kept_id, "merged_id": merged_id, "reason": reason}
        return self._one(EventKind.NODES_MERGED, payload, stamp=stamp, source=source,
                         evidence=evidence, verdict=None, event_id=event_id)

    def record_outcome(
        self,
        node_id: str,
        task: str,
        success: bool,
        *,
        stamp: float,
        failure_reason: str | None = None,
        source: Source = Source.INTERACTION,
        evidence: Evidence | None = None,
        verdict: Verdict = Verdict.ADMIT,
        event_id: str | None = None,
    ) -> MemoryEvent:
        """Append a task outcome to a node's task history."""
        payload = _outcome_payload(node_id, task, success, failure_reason)
        return self._one(EventKind.TASK_OUTCOME_RECORDED, payload, stamp=stamp, source=source,
                         evidence=evidence, verdict=verdict, event_id=event_id)

    def link_keyframe(
        self,
        frame_id: str,
        node_ids: Sequence[str],
        *,
        stamp: float,
        source: Source = Source.PERCEPTION,
        event_id: str | None = None,
    ) -> MemoryEvent:
        """Link a stored keyframe to graph nodes."""
        payload = {"frame_id": frame_id, "node_ids": list(node_ids)}
        return self._one(EventKind.KEYFRAME_LINKED, payload, stamp=stamp, source=source,
                         evidence=None, verdict=None, event_id=event_id)

    def link_hypotheses(
        self,
        node_ids: Sequence[str],
        *,
        stamp: float,
        source: Source = Source.OPERATOR,
        evidence: Evidence | None = None,
        event_id: str | None = None,
    ) -> MemoryEvent:
        """Mark nodes as alternative hypotheses of one object."""
        payload = {"node_ids": list(node_ids)}
        return self._one(EventKind.HYPOTHESES_LINKED, payload, stamp=stamp, source=source,
                         evidence=evidence, verdict=None, event_id=event_id)

    def update_node(
        self,
        node_id: str,
        *,
        stamp: float,
        source: Source = Source.INTERACTION,
        properties: Mapping[str, Mapping[str, Any]] | None = None,
        contents: Mapping[str, Any] | None = None,
        parent: tuple[str | None, str | None] | None = None,
        position: Iterable[float] | None = None,
        outcome: Mapping[str, Any] | None = None,
        evidence: Evidence | None = None,
        verdict: Verdict = Verdict.ADMIT,
        event_id: str | None = None,
        verdict_reason: str = "",
    ) -> list[MemoryEvent]:
        """Apply several updates to one node in one transaction (an analyzer result).

        Args:
            node_id: Target node.
            stamp: Stamp of the evidence.
            source: Source of every update.
            properties: ``name -> {"value", "confidence", "reasoning"?, "is_opened"?}``.
            contents: ``{"contents": [...], "is_empty": bool, "source_action"?, "reasoning"?}``.
            parent: ``(parent_id, relation)``.
            position: Where the node was put with that parent (see :meth:`set_parent`); only
                together with ``parent``.
            outcome: ``{"task", "success", "failure_reason"?}``.
            evidence: Evidence shared by all updates.
            verdict: Verdict shared by all updates.
            event_id: Caller's id for the update; the events get ``<event_id>:<n>`` so that
                replaying the same update is recognised (see :meth:`update_applied`).
            verdict_reason: Why the verifier decided so; kept in every event's payload.

        Raises:
            UnknownNodeError: The node, or a parent, is not in the graph.
            InvalidValueError: A malformed update, or a ``position`` without a ``parent`` or
                that is not three finite numbers.
        """
        self.state.node(node_id)
        if position is not None and parent is None:
            raise InvalidValueError("position is where a node was put: it needs a parent")
        updates: list[tuple[EventKind, dict[str, Any]]] = []
        for name, spec in (properties or {}).items():
            if not isinstance(spec, Mapping):
                raise InvalidValueError(f"property {name!r} update must be a mapping")
            if "value" not in spec:
                raise InvalidValueError(f"property {name!r} update needs a value")
            updates.append((EventKind.PROPERTY_SET, _property_payload(
                node_id, name, spec.get("value"), confidence=spec.get("confidence"),
                reasoning=spec.get("reasoning", ""), is_opened=spec.get("is_opened"))))
        if contents is not None:
            items = [dict(i) if isinstance(i, Mapping) else i for i in contents.get("contents", [])]
            updates.append((EventKind.CONTENTS_SET, _contents_payload(
                node_id, items, contents.get("is_empty"), contents.get("source_action"),
                contents.get("reasoning", ""))))
        if parent is not None:
            updates.append((EventKind.PARENT_CHANGED,
                            _parent_payload(node_id, parent[0], parent[1], position)))
            if parent[0] is not None and parent[1] in ("container", "surface") \
                    and verdict in (Verdict.ADMIT, Verdict.CORRECT) and self._away(node_id):
                # found there by the interaction (seen inside on a look, or put there): a
                # camera that could not see it there before memory knew must not keep it stale
                updates.append((EventKind.PROPERTY_SET, _property_payload(
                    node_id, AT_LAST_PLACE, True, confidence=PLACE_CONFIDENCE,
                    reasoning=f"found in {parent[0]} by the interaction", is_opened=None)))
        if outcome is not None:
            payload = _outcome_payload(node_id, outcome.get("task"), outcome.get("success"),
                                       outcome.get("failure_reason"))
            for key in ("primitive", "interaction_id"):
                if outcome.get(key):
                    payload[key] = outcome[key]
            updates.append((EventKind.TASK_OUTCOME_RECORDED, payload))
        ev = evidence or Evidence()
        events = [
            self._event(
                kind,
                {**payload, "verdict_reason": verdict_reason} if verdict_reason else payload,
                stamp=stamp,
                source=source,
                evidence=ev,
                verdict=verdict,
                event_id=f"{event_id}:{i}" if event_id else None,
            )
            for i, (kind, payload) in enumerate(updates)
        ]
        if event_id:
            earlier = self.update_applied(event_id)
            if earlier:
                self._same_update(event_id, earlier, events)
                return []
        return self.append(events)

    def apply_update(self, update: NodeUpdate, *, stamp: float) -> list[MemoryEvent]:
        """Apply one planned :class:`~mimir_memory.updates.NodeUpdate` (see :meth:`update_node`).

        Returns the events appended; none when an update with the same ``update_id`` was
        applied before (raises DuplicateEventError when that one differed).
        """
        return self.update_node(
            update.node_id, stamp=stamp, source=update.source,
            properties=update.property_specs(), contents=update.contents_spec(),
            parent=update.parent_spec(), position=update.parent_position,
            outcome=update.outcome_spec(),
            evidence=update.core_evidence(), verdict=update.verdict,
            event_id=update.update_id or None, verdict_reason=update.verdict_reason,
        )

    @staticmethod
    def _same_update(event_id: str, earlier: Sequence[MemoryEvent],
                     events: Sequence[MemoryEvent]) -> None:
        """Raise unless ``events`` repeat the stored ``earlier`` ones (stamps aside)."""
        same = len(earlier) == len(events) and all(
            dataclasses.replace(new, stamp=old.stamp).digest == old.digest
            for old, new in zip(earlier, events, strict=True))
        if not same:
            raise DuplicateEventError(
                f"update id {event_id!r} was already used for a different update of "
                f"{earlier[0].payload.get('node_id')!r}")

    def update_applied(self, event_id: str) -> list[MemoryEvent]:
        """Events already stored for an :meth:`update_node` call with this ``event_id``."""
        found: list[MemoryEvent] = []
        while (event := self.log.get(f"{event_id}:{len(found)}")) is not None:
            found.append(event)
        return found

    def _event(self, kind: EventKind, payload: Mapping[str, Any], *, stamp: float,
               source: Source, evidence: Evidence | None, verdict: Verdict | None,
               event_id: str | None = None) -> MemoryEvent:
        return MemoryEvent(kind=kind, stamp=stamp, source=source, payload=payload,
                           evidence=evidence or Evidence(), verdict=verdict or Verdict.ADMIT,
                           event_id=event_id or new_event_id())

    def _one(self, kind: EventKind, payload: Mapping[str, Any], *, stamp: float,
             source: Source, evidence: Evidence | None, verdict: Verdict | None,
             event_id: str | None) -> MemoryEvent:
        """Append one event; a repeat of a stored one returns the stored one."""
        event = self._event(kind, payload, stamp=stamp, source=source, evidence=evidence,
                            verdict=verdict, event_id=event_id)
        stored = self.append([event])
        if stored:
            return stored[0]
        existing = self.log.get(event.event_id)
        return existing if existing is not None else event

    # ------------------------------------------------------------------- queries
    @synchronized
    def node(self, node_id: str) -> SceneNode:
        """Node by id (raises UnknownNodeError).

        The id of a node merged into another gives the node kept, whose ``node_id`` differs.
        """
        return self.state.node(node_id)

    @synchronized
    def nodes_by_label(self, label: str) -> list[SceneNode]:
        """Nodes whose label matches (case and spacing insensitive), by id."""
        key = node_id_prefix(label)
        return [
            self.state.nodes[i]
            for i in sorted(self.state.nodes)
            if node_id_prefix(self.state.nodes[i].label) == key
        ]

    @synchronized
    def nodes_near(
        self, point: Iterable[float], radius: float, label: str | None = None
    ) -> list[SceneNode]:
        """Nodes within ``radius`` metres of ``point`` (optionally of one label), nearest first."""
        centre = finite_point(point, "point")
        if isinstance(radius, bool) or not isinstance(radius, (int, float)) or not radius >= 0:
            raise InvalidValueError(f"radius must be a number >= 0, got {radius!r}")
        if radius == float("inf"):
            raise InvalidValueError("radius must be finite")
        labels = [label] if label is not None else self.state.index.labels()
        found: list[tuple[float, str]] = []
        for lab in labels:
            found.extend(self.state.within(lab, centre, float(radius)))
        found.sort()
        return [self.state.nodes[i] for _, i in found]

    @synchronized
    def nodes_inside(
        self, container_id: str, *, recursive: bool = False, relation: str | None = None
    ) -> list[SceneNode]:
        """Children of a node (or of the hand: ``"hand"``), sorted by id.

        Args:
            container_id: Parent node id.
            recursive: Include children of children.
            relation: Only children attached with this relation (``container``, ``surface``...).
        """
        if container_id != HAND_PARENT:
            container_id = self.state.node(container_id).node_id
        result: list[SceneNode] = []
        frontier = [container_id]
        seen = {container_id}
        while frontier:
            current = frontier.pop()
            for child_id in self.state.children.get(current, set()):
                if child_id in seen:
                    continue
                seen.add(child_id)
                child = self.state.nodes[child_id]
                if relation is None or child.parent_relation == relation:
                    result.append(child)
                if recursive:
                    frontier.append(child_id)
        result.sort(key=lambda n: n.node_id)
        return result

    @synchronized
    def why(self, node_id: str, field: str) -> list[MemoryEvent]:
        """Admitted events (oldest first) behind a node field, with their evidence.

        A node that absorbed duplicates lists their events too, and the id of a merged node
        answers for the node it was merged into.

        Args:
            node_id: Node id.
            field: A property name, or ``contents``, ``parent``, ``position``, ``task_history``,
                ``hypotheses``, ``created``, ``misses``, ``merged``.

        Raises:
            UnknownNodeError: No such node.
            InvalidValueError: The node has no such field.
        """
        node = self.state.node(node_id)
        ids = field_event_ids(node, field)
        if ids is None:
            raise InvalidValueError(f"node {node_id!r} has no recorded field {field!r}")
        return self.log.get_many(ids)

    @synchronized
    def sightings(self, node_id: str, *, newest: int = 400) -> list[Sighting]:
        """Where the cameras saw a node, newest first: each perception observation among the
        node's newest ``newest`` position events that created it or was fused into it (those
        of nodes merged into it too), with its camera, image stamp and own box.

        Raises:
            UnknownNodeError: No such node.
            InvalidValueError: ``newest`` is not a positive integer.
        """
        if isinstance(newest, bool) or not isinstance(newest, int) or newest < 1:
            raise InvalidValueError(f"newest must be a positive integer, got {newest!r}")
        node = self.state.node(node_id)
        ids = [*node.history.get("created", ()), *node.history.get("position", ())]
        found: list[Sighting] = []
        for event in self.log.get_many(ids[-newest:]):
            if event.kind not in (EventKind.NODE_CREATED, EventKind.OBSERVATION_FUSED) \
                    or event.source is not Source.PERCEPTION:
                continue
            camera = event.payload.get("camera")
            lo, hi = event.payload.get("bbox_min"), event.payload.get("bbox_max")
            if not camera or lo is None or hi is None:
                continue
            found.append(Sighting(str(camera), float(event.stamp),
                                  finite_point(lo, "bbox_min"), finite_point(hi, "bbox_max")))
        found.sort(key=lambda s: -s.stamp)
        return found

    @synchronized
    def as_of(self, stamp: float) -> SceneGraphState:
        """The graph as it stood with every event stamped at or before ``stamp``."""
        if isinstance(stamp, bool) or not isinstance(stamp, (int, float)):
            raise InvalidValueError(f"stamp must be a number, got {stamp!r}")
        if math.isnan(stamp):
            raise InvalidValueError("stamp must not be NaN")
        past = SceneGraphState(self.config.association, self.bounds)
        for event in self.log.iter_events(until_stamp=float(stamp), kinds=WORLD_KINDS):
            past.apply_stored(event)
        return past

    @synchronized
    def referenced_keyframes(self) -> frozenset[str]:
        """Keyframes retention must keep: evidence of admitted events and each node's newest frame.

        Pass the result (or a lambda calling this method) as ``protected`` to
        :meth:`KeyframeStore.enforce_budget`.
        """
        newest = {n.keyframes[-1] for n in self.state.nodes.values() if n.keyframes}
        return frozenset(self.state.evidence_keyframes | newest)

    @synchronized
    def graph_snapshot(self) -> dict[str, Any]:
        """JSON-ready graph (revision + node records)."""
        return self.state.snapshot()

    @synchronized
    def render(self, max_chars: int | None = None, focus: Iterable[str] = ()) -> str:
        """Bounded planner-prompt text of the graph (see :func:`render_graph`)."""
        return render_graph(self.state, max_chars or self.config.render.max_chars, focus)


def field_event_ids(node: SceneNode, field: str) -> list[str] | None:
    """Ids of the events behind a field of ``node`` (oldest first): its recorded history, or
    for a property seeded when the node was made, the node's creation. None: no such field."""
    ids = node.history.get(field)
    if ids is None and field in node.properties:
        ids = node.history["created"]
    return ids


def _property_payload(node_id: str, name: str, value: Any, *, confidence: Any,
                      reasoning: Any, is_opened: Any) -> dict[str, Any]:
    """Payload of a ``property_set`` event (``is_opened`` only when given)."""
    payload: dict[str, Any] = {
        "node_id": node_id,
        "name": name,
        "value": value,
        "confidence": confidence,
        "reasoning": reasoning,
    }
    if is_opened is not None:
        payload["is_opened"] = is_opened
    return payload


def _parent_payload(node_id: str, parent_id: Any, relation: Any,
                    position: Iterable[float] | None) -> dict[str, Any]:
    """Payload of a ``parent_changed`` event (``centroid`` only when a position is given).

    Raises:
        InvalidValueError: ``position`` is not three finite numbers.
    """
    payload: dict[str, Any] = {"node_id": node_id, "parent_id": parent_id, "relation": relation}
    if position is not None:
        payload["centroid"] = list(finite_point(position, "position"))
    return payload


def _check_stamp(stamp: object) -> float:
    """A finite stamp (s).

    Raises:
        InvalidValueError: Not a number, or NaN/inf.
    """
    if isinstance(stamp, bool) or not isinstance(stamp, (int, float)):
        raise InvalidValueError(f"stamp must be a number, got {stamp!r}")
    if not math.isfinite(stamp):
        raise InvalidValueError(f"stamp must be finite, got {stamp!r}")
    return float(stamp)


def _contents_payload(node_id: str, items: list[Any], is_empty: Any, source_action: Any,
                      reasoning: Any) -> dict[str, Any]:
    """Payload of a ``contents_set`` event."""
    return {
        "node_id": node_id,
        "contents": items,
        "is_empty": is_empty,
        "source_action": source_action,
        "reasoning": reasoning,
    }


def _outcome_payload(node_id: str, task: Any, success: Any,
                     failure_reason: Any) -> dict[str, Any]:
    """Payload of a ``task_outcome_recorded`` event (callers may add optional keys)."""
    return {
        "node_id": node_id,
        "task": task,
        "success": success,
        "failure_reason": failure_reason,
    }


def _swing(lo: Sequence[float], hi: Sequence[float]) -> tuple[list[float], list[float]]:
    """Where a door or drawer of a fixture with box ``lo..hi`` can stand: the box stretched,
    both ways, along its shallower horizontal axis by its wider horizontal extent (the door's
    width, out into the room), and along the wider axis by half of it (a door opened past a
    right angle leans over its hinge's side)."""
    extents = [hi[0] - lo[0], hi[1] - lo[1]]
    deep = 0 if extents[0] <= extents[1] else 1
    reach = max(extents)
    swing_lo, swing_hi = list(lo), list(hi)
    swing_lo[deep] -= reach
    swing_hi[deep] += reach
    swing_lo[1 - deep] -= reach / 2.0
    swing_hi[1 - deep] += reach / 2.0
    return swing_lo, swing_hi


def _inside_share(lo: Sequence[float], hi: Sequence[float], outer_lo: Sequence[float],
                  outer_hi: Sequence[float], tol: float) -> float:
    """Share of box ``lo..hi`` inside box ``outer_lo..outer_hi`` widened by ``tol``.

    Per axis: the covered fraction of the extent (a flat axis counts 1 when inside, else 0);
    the axes multiply.
    """
    share = 1.0
    for a in range(3):
        start = max(lo[a], outer_lo[a] - tol)
        stop = min(hi[a], outer_hi[a] + tol)
        extent = hi[a] - lo[a]
        if extent <= 1e-6:
            share *= 1.0 if start <= stop else 0.0
        else:
            share *= max(0.0, stop - start) / extent
        if share == 0.0:
            break
    return share


def _as_point(values: Any) -> Point:
    return (float(values[0]), float(values[1]), float(values[2]))
