"""The append-only event log: the source of truth of every memory.

An event is a typed, immutable record (kind, stamp, source, evidence, verdict, payload). The log
stores it once under its unique id; appending the same id with the same content again is a no-op,
appending it with different content raises :class:`DuplicateEventError`. Current state (scene
graph, keyframe index, agenda) is a projection rebuilt by replaying the log in order.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import sqlite3
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import sqlite_utils

from mimir.bounds import DEFAULT_BOUNDS, Bounds, BoundsError
from mimir_memory.errors import DuplicateEventError, InvalidEventError
from mimir_memory.schema import DatabaseHandle, storage_error

LOG = logging.getLogger(__name__)


class EventKind(StrEnum):
    """Kinds of events across the world, task and keyframe logs.

    The payload of each world kind is validated by ``mimir_memory.graph``. Among them,
    ``observation_missed`` (``node_id``, ``camera``, ``reason``) records that perception
    expected to see a node and did not, and ``nodes_merged`` (``kept_id``, ``merged_id``,
    ``reason``) folds a duplicate node into another.
    """

    NODE_CREATED = "node_created"
    OBSERVATION_FUSED = "observation_fused"
    PROPERTY_SET = "property_set"
    CONTENTS_SET = "contents_set"
    PARENT_CHANGED = "parent_changed"
    TASK_OUTCOME_RECORDED = "task_outcome_recorded"
    KEYFRAME_LINKED = "keyframe_linked"
    HYPOTHESES_LINKED = "hypotheses_linked"
    EVENT_RETRACTED = "event_retracted"
    OBSERVATION_MISSED = "observation_missed"
    NODES_MERGED = "nodes_merged"
    GOAL_ADDED = "goal_added"
    GOAL_STATUS_CHANGED = "goal_status_changed"
    HAND_CHANGED = "hand_changed"
    BINDING_FAILED = "binding_failed"
    ROBOT_LOCATION_CHANGED = "robot_location_changed"
    QUESTION_ANSWERED = "question_answered"
    KEYFRAME_SAVED = "keyframe_saved"
    KEYFRAME_LABELS_ADDED = "keyframe_labels_added"
    KEYFRAME_REMOVED = "keyframe_removed"


WORLD_KINDS = frozenset(
    {
        EventKind.NODE_CREATED,
        EventKind.OBSERVATION_FUSED,
        EventKind.PROPERTY_SET,
        EventKind.CONTENTS_SET,
        EventKind.PARENT_CHANGED,
        EventKind.TASK_OUTCOME_RECORDED,
        EventKind.KEYFRAME_LINKED,
        EventKind.HYPOTHESES_LINKED,
        EventKind.EVENT_RETRACTED,
        EventKind.OBSERVATION_MISSED,
        EventKind.NODES_MERGED,
    }
)
TASK_KINDS = frozenset(
    {
        EventKind.GOAL_ADDED,
        EventKind.GOAL_STATUS_CHANGED,
        EventKind.HAND_CHANGED,
        EventKind.BINDING_FAILED,
        EventKind.ROBOT_LOCATION_CHANGED,
        EventKind.QUESTION_ANSWERED,
    }
)
KEYFRAME_KINDS = frozenset(
    {EventKind.KEYFRAME_SAVED, EventKind.KEYFRAME_LABELS_ADDED, EventKind.KEYFRAME_REMOVED}
)


class Source(StrEnum):
    """Where an event's information came from."""

    PERCEPTION = "perception"
    INTERACTION = "interaction"
    OPERATOR = "operator"
    SYSTEM = "system"


class Verdict(StrEnum):
    """The verifier's verdict on the claim behind an event (gamma.md).

    Only ``admit`` and ``correct`` take effect in the projections; ``defer`` and ``reject`` are
    kept in the log for audit.
    """

    ADMIT = "admit"
    DEFER = "defer"
    CORRECT = "correct"
    REJECT = "reject"

    @property
    def effective(self) -> bool:
        """Whether an event with this verdict changes the current state."""
        return self in (Verdict.ADMIT, Verdict.CORRECT)


def _str_tuple(value: object, name: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise InvalidEventError(f"{name} must be a sequence of strings, got {value!r}")
    items = tuple(value)
    for item in items:
        if not isinstance(item, str) or not item:
            raise InvalidEventError(f"{name} must hold non-empty strings, got {item!r}")
    return items


@dataclass(frozen=True)
class Evidence:
    """References to the evidence behind an event.

    Attributes:
        keyframe_ids: Keyframes that show the fact.
        detection_ids: Perception detections fused into the fact.
        event_ids: Earlier events this one builds on (e.g. the claim it corrects).
    """

    keyframe_ids: tuple[str, ...] = ()
    detection_ids: tuple[str, ...] = ()
    event_ids: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("keyframe_ids", "detection_ids", "event_ids"):
            object.__setattr__(self, name, _str_tuple(getattr(self, name), f"evidence.{name}"))

    def to_dict(self) -> dict[str, list[str]]:
        """JSON form."""
        return {
            "keyframe_ids": list(self.keyframe_ids),
            "detection_ids": list(self.detection_ids),
            "event_ids": list(self.event_ids),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Evidence:
        """Inverse of :meth:`to_dict`."""
        if not any(data.values()):
            return _NO_EVIDENCE
        return cls(
            keyframe_ids=tuple(data.get("keyframe_ids", ())),
            detection_ids=tuple(data.get("detection_ids", ())),
            event_ids=tuple(data.get("event_ids", ())),
        )

    @property
    def empty(self) -> bool:
        """True when no reference is given."""
        return not (self.keyframe_ids or self.detection_ids or self.event_ids)


_NO_EVIDENCE = Evidence()


def canonical_json(value: object) -> str:
    """Deterministic JSON text (sorted keys, no spaces, finite numbers only).

    Raises:
        InvalidEventError: The value holds NaN/inf or objects JSON cannot represent.
    """
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as err:
        raise InvalidEventError(f"value is not finite JSON: {err}") from err


ENVELOPE = Bounds(max_json_chars=16 * DEFAULT_BOUNDS.max_json_chars,
                  max_json_depth=2 * DEFAULT_BOUNDS.max_json_depth,
                  max_items=16 * DEFAULT_BOUNDS.max_items)
"""Limits of a whole event payload, whatever the log: generous multiples of the value bounds
(a payload wraps values), checked before the payload is serialised."""


def new_event_id() -> str:
    """A fresh random event id."""
    return uuid.uuid4().hex


@dataclass(frozen=True)
class MemoryEvent:
    """One immutable entry of a memory log.

    Attributes:
        kind: What happened.
        stamp: Message stamp of the information (s); never wall time.
        source: Where the information came from.
        payload: Kind-specific JSON object.
        evidence: Evidence references.
        verdict: The verifier's verdict that admitted (or not) the claim.
        event_id: Unique id; a random one by default.
        seq: Position in the log, set once stored (not part of the content).
    """

    kind: EventKind
    stamp: float
    source: Source
    payload: Mapping[str, Any] = field(default_factory=dict)
    evidence: Evidence = field(default_factory=Evidence)
    verdict: Verdict = Verdict.ADMIT
    event_id: str = field(default_factory=new_event_id)
    seq: int | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "kind", EventKind(self.kind))
            object.__setattr__(self, "source", Source(self.source))
            object.__setattr__(self, "verdict", Verdict(self.verdict))
        except ValueError as err:
            raise InvalidEventError(f"bad event enum value: {err}") from err
        if not isinstance(self.event_id, str) or not self.event_id.strip():
            raise InvalidEventError(f"event_id must be a non-empty string, got {self.event_id!r}")
        if isinstance(self.stamp, bool) or not isinstance(self.stamp, (int, float)):
            raise InvalidEventError(f"stamp must be a number, got {self.stamp!r}")
        if not math.isfinite(self.stamp):
            raise InvalidEventError(f"stamp must be finite, got {self.stamp!r}")
        object.__setattr__(self, "stamp", float(self.stamp))
        if not isinstance(self.evidence, Evidence):
            raise InvalidEventError("evidence must be an Evidence instance")
        if not isinstance(self.payload, Mapping):
            raise InvalidEventError("payload must be a mapping")
        if len(self.event_id) > DEFAULT_BOUNDS.max_id_chars:
            raise InvalidEventError("event_id is too long")
        try:
            ENVELOPE.json_value(dict(self.payload), "event payload")
        except BoundsError as err:
            raise InvalidEventError(str(err)) from err
        # Normalise the payload to its JSON form so live and replayed events compare equal.
        object.__setattr__(self, "payload", json.loads(canonical_json(dict(self.payload))))

    @classmethod
    def trusted(
        cls,
        *,
        kind: EventKind,
        stamp: float,
        source: Source,
        payload: Mapping[str, Any],
        evidence: Evidence,
        verdict: Verdict,
        event_id: str,
        seq: int | None,
    ) -> MemoryEvent:
        """Rebuild an event read back from the log without re-validating it.

        Only for content that went through :meth:`__post_init__` before it was stored; this
        keeps replaying a long log fast.
        """
        event = object.__new__(cls)
        for name, value in (
            ("kind", kind),
            ("stamp", stamp),
            ("source", source),
            ("payload", payload),
            ("evidence", evidence),
            ("verdict", verdict),
            ("event_id", event_id),
            ("seq", seq),
        ):
            object.__setattr__(event, name, value)
        return event

    def content(self) -> dict[str, Any]:
        """Everything that defines the event (all fields except ``seq``)."""
        return {
            "event_id": self.event_id,
            "kind": self.kind.value,
            "stamp": self.stamp,
            "source": self.source.value,
            "verdict": self.verdict.value,
            "evidence": self.evidence.to_dict(),
            "payload": self.payload,
        }

    @property
    def digest(self) -> str:
        """SHA-256 of the canonical JSON content."""
        return hashlib.sha256(canonical_json(self.content()).encode()).hexdigest()

    def to_dict(self) -> dict[str, Any]:
        """JSON form including ``seq``."""
        data = self.content()
        data["seq"] = self.seq
        return data


_COLUMNS = "seq, event_id, kind, stamp, source, verdict, evidence, payload"


def _row_to_event(row: Sequence[Any]) -> MemoryEvent:
    seq, event_id, kind, stamp, source, verdict, evidence, payload = row
    return MemoryEvent.trusted(
        kind=_KINDS[kind],
        stamp=float(stamp),
        source=_SOURCES[source],
        payload=json.loads(payload),
        evidence=Evidence.from_dict(json.loads(evidence)),
        verdict=_VERDICTS[verdict],
        event_id=event_id,
        seq=seq,
    )


_KINDS = {k.value: k for k in EventKind}
_SOURCES = {s.value: s for s in Source}
_VERDICTS = {v.value: v for v in Verdict}


class EventLog:
    """Append-only event table of one database.

    The log does not know the projections; callers validate events against their state before
    appending and apply them after the append returns.
    """

    def __init__(self, handle: DatabaseHandle) -> None:
        self.handle = handle

    @property
    def db(self) -> sqlite_utils.Database:
        """The underlying database."""
        return self.handle.db

    def insert(self, db: sqlite_utils.Database, event: MemoryEvent) -> MemoryEvent | None:
        """Insert ``event`` inside an open transaction.

        Returns:
            The stored event with its ``seq``, or None when the same event was already stored.

        Raises:
            DuplicateEventError: The id is stored with different content.
        """
        digest = event.digest
        row = db.execute(
            "SELECT digest FROM events WHERE event_id = ?", [event.event_id]
        ).fetchone()
        if row is not None:
            if row[0] == digest:
                return None
            raise DuplicateEventError(
                f"event id {event.event_id!r} is already stored with different content"
            )
        cursor = db.execute(
            "INSERT INTO events (event_id, kind, stamp, source, verdict, evidence, payload, digest)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                event.event_id,
                event.kind.value,
                event.stamp,
                event.source.value,
                event.verdict.value,
                canonical_json(event.evidence.to_dict()),
                canonical_json(event.payload),
                digest,
            ],
        )
        return MemoryEvent.trusted(
            kind=event.kind,
            stamp=event.stamp,
            source=event.source,
            payload=event.payload,
            evidence=event.evidence,
            verdict=event.verdict,
            event_id=event.event_id,
            seq=cursor.lastrowid,
        )

    def append(self, events: Sequence[MemoryEvent]) -> list[MemoryEvent]:
        """Append events in one transaction (all or nothing).

        Returns:
            The newly stored events (with ``seq``), skipping idempotent repeats.

        Raises:
            DuplicateEventError: An id is stored with different content (nothing is written).
            StorageError: The database cannot be written (nothing is written).
        """
        stored: list[MemoryEvent] = []
        try:
            with self.handle.transaction() as db:
                for event in events:
                    result = self.insert(db, event)
                    if result is not None:
                        stored.append(result)
        except sqlite3.Error as err:
            raise storage_error(f"cannot append to {self.handle.path}", err) from err
        return stored

    def get(self, event_id: str) -> MemoryEvent | None:
        """The stored event with this id, or None."""
        row = self.db.execute(
            f"SELECT {_COLUMNS} FROM events WHERE event_id = ?", [event_id]
        ).fetchone()
        return None if row is None else _row_to_event(row)

    def get_many(self, event_ids: Iterable[str]) -> list[MemoryEvent]:
        """Stored events among ``event_ids``, in log order."""
        ids = list(dict.fromkeys(event_ids))
        found: list[MemoryEvent] = []
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self.db.execute(
                f"SELECT {_COLUMNS} FROM events WHERE event_id IN ({marks})", chunk
            ).fetchall()
            found.extend(_row_to_event(row) for row in rows)
        found.sort(key=lambda e: e.seq or 0)
        return found

    def iter_events(
        self,
        *,
        after_seq: int = 0,
        until_stamp: float | None = None,
        kinds: Iterable[EventKind] | None = None,
        batch: int = 5000,
    ) -> Iterator[MemoryEvent]:
        """Stored events in log order.

        Args:
            after_seq: Only events with a larger ``seq``.
            until_stamp: Only events whose stamp is at most this value.
            kinds: Only these kinds.
            batch: Rows fetched per query.
        """
        where = ["seq > ?"]
        params: list[Any] = []
        if until_stamp is not None:
            where.append("stamp <= ?")
            params.append(float(until_stamp))
        if kinds is not None:
            kind_list = [EventKind(k).value for k in kinds]
            where.append(f"kind IN ({','.join('?' * len(kind_list))})")
            params.extend(kind_list)
        sql = f"SELECT {_COLUMNS} FROM events WHERE {' AND '.join(where)} ORDER BY seq LIMIT ?"
        last = after_seq
        while True:
            try:
                rows = self.db.execute(sql, [last, *params, batch]).fetchall()
            except sqlite3.Error as err:
                raise storage_error(f"cannot read events of {self.handle.path}", err) from err
            if not rows:
                return
            for row in rows:
                yield _row_to_event(row)
            last = rows[-1][0]

    def last_seq(self) -> int:
        """Largest stored ``seq`` (0 when empty)."""
        row = self.db.execute("SELECT MAX(seq) FROM events").fetchone()
        return int(row[0] or 0)

    def count(self) -> int:
        """Number of stored events."""
        return int(self.db.execute("SELECT COUNT(*) FROM events").fetchone()[0])


__all__ = [
    "KEYFRAME_KINDS",
    "TASK_KINDS",
    "WORLD_KINDS",
    "EventKind",
    "EventLog",
    "Evidence",
    "MemoryEvent",
    "Source",
    "Verdict",
    "canonical_json",
    "new_event_id",
]
