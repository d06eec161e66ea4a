"""Typed claims, verdicts and the memory updates built from admitted claims.

Everything a model proposes becomes a claim. The harness gives every claim a
:class:`Verdict`; only admitted (or corrected) claims turn into updates, and every verdict is
kept, with its evidence references, for the memory event log.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum

from mimir_planner.reasoning.answer_schema import JsonScalar


class ClaimKind(StrEnum):
    """Claim families of the propose-verify contract."""

    EVENT = "event"
    PROPERTY = "property"
    CONTENTS = "contents"
    PROGRESS = "progress"
    GROUNDING = "grounding"


class Decision(StrEnum):
    """Verdict of a verifier on a claim."""

    ADMIT = "admit"
    DEFER = "defer"
    CORRECT = "correct"
    REJECT = "reject"


@dataclass(frozen=True)
class PropertyClaim:
    """The target has a property ``name`` with a value (``openable = true, is_opened``)."""

    object_id: str
    name: str
    new_value: JsonScalar
    confidence: float
    reasoning: str
    old_value: JsonScalar = None
    is_opened: bool | None = None
    source: str = "model"

    @property
    def kind(self) -> ClaimKind:
        return ClaimKind.PROPERTY

    @property
    def subject_ids(self) -> tuple[str, ...]:
        return (self.object_id,)

    def key(self) -> tuple[object, ...]:
        """Identity used to find duplicates."""
        return ("property", self.object_id, self.name, self.new_value, self.is_opened)


class _AboutAFixture:
    """What claims about a fixture's interior share: their kind and their one subject."""

    fixture_id: str

    @property
    def kind(self) -> ClaimKind:
        return ClaimKind.CONTENTS

    @property
    def subject_ids(self) -> tuple[str, ...]:
        return (self.fixture_id,)


@dataclass(frozen=True)
class ContentClaim(_AboutAFixture):
    """A fixture holds an item."""

    fixture_id: str
    name: str
    description: str
    reasoning: str
    source: str = "model"

    def key(self) -> tuple[object, ...]:
        return ("content", self.fixture_id, self.name.strip().lower())


@dataclass(frozen=True)
class EmptyClaim(_AboutAFixture):
    """A fixture's interior is visible and holds nothing."""

    fixture_id: str
    reasoning: str
    source: str = "model"

    def key(self) -> tuple[object, ...]:
        return ("empty", self.fixture_id)


@dataclass(frozen=True)
class OutcomeClaim:
    """How the primitive ended: success, or a failure of a named category.

    ``category`` is ``success``, ``fixture_locked``, ``missed_grasp`` or ``other``.
    """

    target_id: str
    primitive: str
    success: bool
    failure_reason: str | None
    category: str
    confidence: float
    source: str = "model"

    @property
    def kind(self) -> ClaimKind:
        return ClaimKind.PROGRESS

    @property
    def subject_ids(self) -> tuple[str, ...]:
        return (self.target_id,)

    def key(self) -> tuple[object, ...]:
        return ("outcome", self.target_id, self.primitive)


@dataclass(frozen=True)
class GroundingClaim:
    """A cited id names a node in memory."""

    cited_id: str
    role: str

    @property
    def kind(self) -> ClaimKind:
        return ClaimKind.GROUNDING

    @property
    def subject_ids(self) -> tuple[str, ...]:
        return (self.cited_id,)

    def key(self) -> tuple[object, ...]:
        return ("grounding", self.cited_id, self.role)


Claim = PropertyClaim | ContentClaim | EmptyClaim | OutcomeClaim | GroundingClaim


@dataclass(frozen=True)
class Verdict:
    """A verifier's decision on one claim, with the evidence it rests on.

    Attributes:
        claim: the claim as proposed.
        decision: admit, defer, correct or reject.
        reason: why, in one sentence.
        evidence_refs: references to frames, detections and state samples used.
        verifier: name of the predicate that decided.
        corrected: the repaired claim when ``decision`` is CORRECT.
        interaction_id: interaction the claim came from.
    """

    claim: Claim
    decision: Decision
    reason: str
    evidence_refs: tuple[str, ...] = ()
    verifier: str = ""
    corrected: Claim | None = None
    interaction_id: str = ""

    @property
    def effective(self) -> Claim | None:
        """The claim that takes effect: the corrected one, the admitted one, or None."""
        if self.decision is Decision.CORRECT:
            return self.corrected
        if self.decision is Decision.ADMIT:
            return self.claim
        return None

    def to_log(self) -> dict[str, object]:
        """JSON-ready record for the memory event log."""
        record: dict[str, object] = {
            "interaction_id": self.interaction_id,
            "kind": str(self.claim.kind),
            "claim": _claim_json(self.claim),
            "decision": str(self.decision),
            "reason": self.reason,
            "verifier": self.verifier,
            "evidence_refs": list(self.evidence_refs),
        }
        if self.corrected is not None:
            record["corrected"] = _claim_json(self.corrected)
        return record


def _claim_json(claim: Claim) -> dict[str, object]:
    data = asdict(claim)
    data["type"] = type(claim).__name__
    return data


@dataclass(frozen=True)
class PropertyUpdate:
    """An admitted property write for one node."""

    object_id: str
    property: str
    value: JsonScalar
    confidence: float
    reasoning: str
    is_opened: bool | None
    verdict: Verdict
    evidence_refs: tuple[str, ...]
    source: str = "interaction"

    @classmethod
    def admitted(cls, claim: PropertyClaim, verdict: Verdict) -> PropertyUpdate:
        """The write of an admitted (or corrected) claim; model claims write as ``interaction``."""
        return cls(
            object_id=claim.object_id,
            property=claim.name,
            value=claim.new_value,
            confidence=claim.confidence,
            reasoning=claim.reasoning,
            is_opened=claim.is_opened,
            verdict=verdict,
            evidence_refs=verdict.evidence_refs,
            source="interaction" if claim.source == "model" else claim.source,
        )


@dataclass(frozen=True)
class ContentItem:
    """One verified item of a fixture's contents."""

    name: str
    description: str
    evidence_refs: tuple[str, ...] = ()


@dataclass(frozen=True)
class ContentsUpdate:
    """An admitted replacement of a fixture's contents (newer evidence overwrites)."""

    fixture_id: str
    contents: tuple[ContentItem, ...]
    is_empty: bool
    reasoning: str
    source_action: str
    verdicts: tuple[Verdict, ...]
    evidence_refs: tuple[str, ...]


@dataclass(frozen=True)
class OutcomeUpdate:
    """An admitted interaction outcome for the target's task history."""

    target_id: str
    primitive: str
    success: bool
    failure_reason: str | None
    category: str
    verdict: Verdict
    evidence_refs: tuple[str, ...]

    @classmethod
    def admitted(cls, claim: OutcomeClaim, verdict: Verdict) -> OutcomeUpdate:
        """The record of an admitted (or corrected) outcome claim."""
        return cls(
            target_id=claim.target_id,
            primitive=claim.primitive,
            success=claim.success,
            failure_reason=claim.failure_reason,
            category=claim.category,
            verdict=verdict,
            evidence_refs=verdict.evidence_refs,
        )
