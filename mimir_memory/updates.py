"""A planned update of one scene-graph node, as the memory core applies it.

The analyzer decides, for each verifier verdict, what to write about which node: properties,
contents, a parent, a task record, with the evidence, the verdict and the verifier's reason.
:class:`NodeUpdate` is that decision as plain data. :meth:`WorldMemory.apply_update
<mimir_memory.world.WorldMemory.apply_update>` applies one; the ROS layer carries it as an
``UpdateNode`` request (``mimir.nodes.memory.messages``) without losing anything.

The open state of a fixture rides on its ``openable`` property (``is_opened``), as the memory
keeps it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mimir_memory.errors import InvalidValueError
from mimir_memory.events import Evidence, Source, Verdict

#: Kinds of evidence an update may cite.
EVIDENCE_KINDS = ("keyframe", "detection", "robot_state", "interaction", "event")


@dataclass(frozen=True)
class PropertyWrite:
    """One property value to set (``value`` is JSON data)."""

    name: str
    value: Any
    confidence: float
    source: str = ""
    reasoning: str = ""
    is_opened: bool | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise InvalidValueError("a property update needs a name")
        if isinstance(self.confidence, bool) or not isinstance(self.confidence, (int, float)) \
                or not math.isfinite(self.confidence) or not 0.0 <= self.confidence <= 1.0:
            raise InvalidValueError(f"property {self.name!r}: confidence must lie in [0, 1], "
                                    f"got {self.confidence!r}")
        if self.is_opened is not None and (self.name != "openable"
                                           or not isinstance(self.is_opened, bool)):
            raise InvalidValueError("is_opened is true or false and rides on openable only")


@dataclass(frozen=True)
class ContentEntry:
    """One item inside a container."""

    name: str
    description: str = ""
    node_id: str = ""
    reasoning: str = ""


@dataclass(frozen=True)
class TaskRecordEntry:
    """One past interaction to append to a node's task history (``stamp`` in seconds)."""

    task: str
    primitive: str
    success: bool
    failure_reason: str = ""
    interaction_id: str = ""
    stamp: float = 0.0


@dataclass(frozen=True)
class EvidenceLink:
    """A reference to evidence: its kind (see :data:`EVIDENCE_KINDS`), id and a detail."""

    kind: str
    id: str
    detail: str = ""

    def __post_init__(self) -> None:
        if self.kind not in EVIDENCE_KINDS:
            raise InvalidValueError(f"unknown evidence kind {self.kind!r}")
        if not isinstance(self.id, str) or not self.id:
            raise InvalidValueError("an evidence reference has an empty id")


@dataclass(frozen=True)
class NodeUpdate:
    """Everything one write changes on one node, with its provenance.

    Attributes:
        node_id: the node written.
        update_id: caller-chosen id; replaying an update with the same id changes nothing
            (empty: memory picks one).
        source: who says so.
        properties: properties to set.
        contents: the node's new contents (empty: known to be empty); None leaves them.
        contents_source_action: primitive that revealed the contents.
        parent: ``(parent_id, relation)`` to set ("" detaches); None leaves the parent.
        parent_position: where the node now lies (fixed frame, m), given with a parent when the
            node moved with its holder (a placed object); None keeps the remembered position.
        task_record: a record to append to the task history; None appends nothing.
        evidence: evidence behind the update.
        verdict: the verifier's decision (deferred and rejected updates are logged only).
        verdict_reason: why the verifier decided so.
    """

    node_id: str
    update_id: str = ""
    source: Source = Source.INTERACTION
    properties: tuple[PropertyWrite, ...] = ()
    contents: tuple[ContentEntry, ...] | None = None
    contents_source_action: str = ""
    parent: tuple[str, str] | None = None
    parent_position: tuple[float, float, float] | None = None
    task_record: TaskRecordEntry | None = None
    evidence: tuple[EvidenceLink, ...] = ()
    verdict: Verdict = Verdict.ADMIT
    verdict_reason: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.node_id, str) or not self.node_id:
            raise InvalidValueError("an update needs a node id")
        if not isinstance(self.source, Source) or not isinstance(self.verdict, Verdict):
            raise InvalidValueError("source and verdict must be Source and Verdict values")
        names = [p.name for p in self.properties]
        if len(set(names)) != len(names):
            raise InvalidValueError(f"a property is set twice in one update: {names}")
        if self.parent_position is not None:
            if self.parent is None:
                raise InvalidValueError("a position is written only with a parent change")
            point = tuple(self.parent_position)
            if len(point) != 3 or not all(isinstance(v, int | float) and math.isfinite(v)
                                          for v in point):
                raise InvalidValueError(
                    f"parent_position must be three finite numbers, got {self.parent_position!r}")
            object.__setattr__(self, "parent_position", tuple(float(v) for v in point))

    # ------------------------------------------------ the memory core's update_node arguments
    def property_specs(self) -> dict[str, dict[str, Any]]:
        """``name -> {"value", "confidence", "reasoning", "is_opened"?}``."""
        specs: dict[str, dict[str, Any]] = {}
        for prop in self.properties:
            spec: dict[str, Any] = {"value": prop.value, "confidence": float(prop.confidence),
                                    "reasoning": prop.reasoning}
            if prop.is_opened is not None:
                spec["is_opened"] = prop.is_opened
            specs[prop.name] = spec
        return specs

    def contents_spec(self) -> dict[str, Any] | None:
        """The new contents as memory records them, or None."""
        if self.contents is None:
            return None
        return {
            "contents": [{"name": c.name, "description": c.description,
                          **({"node_id": c.node_id} if c.node_id else {})}
                         for c in self.contents],
            "is_empty": not self.contents,
            "source_action": self.contents_source_action or None,
            "reasoning": "; ".join(c.reasoning for c in self.contents if c.reasoning),
        }

    def parent_spec(self) -> tuple[str | None, str | None] | None:
        """``(parent_id or None, relation or None)``, or None."""
        if self.parent is None:
            return None
        return self.parent[0] or None, self.parent[1] or None

    def outcome_spec(self) -> Mapping[str, Any] | None:
        """The task record as memory records it, or None."""
        rec = self.task_record
        if rec is None:
            return None
        return {"task": rec.task or rec.primitive, "success": bool(rec.success),
                "failure_reason": rec.failure_reason or None,
                "primitive": rec.primitive or None,
                "interaction_id": rec.interaction_id or None}

    def core_evidence(self) -> Evidence:
        """The evidence as memory events keep it (details are not kept)."""
        keyframes, detections, events = [], [], []
        for link in self.evidence:
            if link.kind == "keyframe":
                keyframes.append(link.id)
            elif link.kind == "detection":
                detections.append(link.id)
            else:
                events.append(link.id if link.kind == "event" else f"{link.kind}:{link.id}")
        return Evidence(keyframe_ids=tuple(keyframes), detection_ids=tuple(detections),
                        event_ids=tuple(events))
