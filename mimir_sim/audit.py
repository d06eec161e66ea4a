"""Grading memory's claims against simulator truth, for the judge only.

Every memory event that carries a verdict (admitted, corrected, deferred, rejected) states a
fact about a remembered node: a fixture is locked or openable, holds these things or nothing, an
attempt on it succeeded. The auditor binds the node to a simulated entity by its remembered
label and position (as the judge binds answers) and says whether the fact is true now. Nothing
on the robot side reads these grades: they measure how often the harness lets a wrong fact in
and how often it holds back a true one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mimir_robot.requests import TargetSpec, UnknownTargetError
from mimir_sim.answer_binding import EntityResolver
from mimir_sim.entity_labels import labels_compatible

#: event kinds the auditor grades
GRADED_KINDS = ("property_set", "contents_set", "task_outcome_recorded")


@dataclass(frozen=True)
class Grade:
    """A graded memory event.

    Attributes:
        fact: what the event states, as a key that repeats when the same fact is claimed again
            (``cabinet_1 locked=true``).
        verdict: the harness's verdict on it.
        truth: whether the fact holds in the simulator; None when it cannot be graded (the node
            binds to no entity, the property has no simulated counterpart).
        why: how the truth was read.
    """

    fact: str
    verdict: str
    truth: bool | None
    why: str

    def as_dict(self) -> dict[str, Any]:
        """The grade as plain JSON values."""
        return {"fact": self.fact, "verdict": self.verdict, "truth": self.truth, "why": self.why}


class MemoryAuditor:
    """Grades memory events against the simulated kitchen (see the module docstring).

    Args:
        resolver: binds remembered nodes to simulated entities (its simulator is read).
    """

    def __init__(self, resolver: EntityResolver) -> None:
        self._resolver = resolver
        self._sim = resolver.sim

    def grade(self, kind: str, subject: str, verdict: str, payload: Mapping[str, Any], *,
              label: str, position: Sequence[float] | None) -> Grade | None:
        """The grade of one event; None for kinds that state no graded fact.

        Must run where the simulator may be read (the simulation thread or under its lock).
        """
        if kind not in GRADED_KINDS or not verdict:
            return None
        fact = _fact(kind, subject, payload)
        if fact is None:
            return None
        point = (float(position[0]), float(position[1]), float(position[2])) \
            if position is not None else None
        spec = TargetSpec(subject, label, point)
        try:
            entity = self._resolver.resolve(spec, ("fixture",))
        except UnknownTargetError as err:
            return Grade(fact, verdict, None, f"not bound: {err}")
        if kind == "property_set":
            truth, why = self._property(entity, str(payload.get("name")), payload.get("value"))
        elif kind == "contents_set":
            truth, why = self._contents(entity, payload)
        else:
            truth, why = self._outcome(entity, payload)
        return Grade(fact, verdict, truth, why)

    def _property(self, entity: str, name: str, value: Any) -> tuple[bool | None, str]:
        layout = self._sim.scene.fixtures[entity]
        if name == "locked" and isinstance(value, bool):
            return value == layout.locked, f"{entity} is {'' if layout.locked else 'not '}locked"
        if name == "openable" and isinstance(value, bool):
            openable = layout.is_openable and not layout.locked
            return value == openable, f"{entity} {'opens' if openable else 'does not open'}"
        return None, f"{name} has no simulated counterpart"

    def _inside(self, entity: str) -> list[str]:
        truth = self._sim.truth
        return [self._sim.scene.entities[o].label for o in self._sim.scene.objects
                if truth.object_fixture(o) == entity]

    def _contents(self, entity: str, payload: Mapping[str, Any]) -> tuple[bool | None, str]:
        inside = self._inside(entity)
        names = [str(c.get("name")) for c in payload.get("contents", []) if isinstance(c, dict)]
        label_map = self._resolver.label_map
        missing = [n for n in names
                   if not any(labels_compatible(n, label, label_map) for label in inside)]
        if missing:
            return False, f"{entity} holds {inside or 'nothing'}, not {missing}"
        if not names and inside:
            return False, f"{entity} is not empty: it holds {inside}"
        return True, f"{entity} holds {inside or 'nothing'}"

    def _outcome(self, entity: str, payload: Mapping[str, Any]) -> tuple[bool | None, str]:
        primitive = str(payload.get("primitive") or payload.get("action") or "")
        success = payload.get("success")
        name = primitive.lower()
        if not isinstance(success, bool) or not ("open" in name or "inspect" in name):
            return None, "only opens and looks inside are graded"
        opened = self._sim.is_open(entity)
        state = f"{entity} is {'open' if opened else 'closed'} now"
        if "open" in name:
            return success == opened, state  # an open succeeded exactly when it stands open
        # a look inside that succeeded needs an open fixture; one that failed at an open fixture
        # may have failed for reasons the judge does not see (no view reached)
        if success or not opened:
            return success == opened, state
        return None, state + "; a failed look at an open fixture is not graded"


def _fact(kind: str, subject: str, payload: Mapping[str, Any]) -> str | None:
    if kind == "property_set":
        return f"{subject} {payload.get('name')}={_json(payload.get('value'))}"
    if kind == "contents_set":
        names = sorted(str(c.get("name")) for c in payload.get("contents", [])
                       if isinstance(c, dict))
        return f"{subject} contents={','.join(names) or 'empty'}"
    if kind == "task_outcome_recorded":
        return (f"{subject} {payload.get('primitive') or payload.get('action')} "
                f"success={payload.get('success')} @{payload.get('interaction_id', '')}")
    return None


def _json(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


@dataclass(frozen=True)
class AuditSummary:
    """How the harness fared on the graded facts of one run.

    A fact claimed more than once (deferred, then admitted on re-check) counts once, with its
    last verdict. Admitted counts admitted and corrected facts.

    Attributes:
        admitted: graded facts that took effect.
        wrong_admitted: of those, facts the simulator contradicts.
        true_facts: graded facts that hold.
        true_held: of those, facts last left deferred or rejected.
        ungraded: facts that could not be graded.
    """

    admitted: int
    wrong_admitted: int
    true_facts: int
    true_held: int
    ungraded: int

    @property
    def wrong_admitted_rate(self) -> float:
        """Share of admitted facts that are wrong (0 when nothing was admitted)."""
        return self.wrong_admitted / self.admitted if self.admitted else 0.0

    @property
    def true_held_rate(self) -> float:
        """Share of true facts left deferred or rejected (0 when none was true)."""
        return self.true_held / self.true_facts if self.true_facts else 0.0


def summarize(grades: Sequence[Mapping[str, Any]]) -> AuditSummary:
    """Summary of grade records (``Grade.as_dict``) in the order they were made."""
    last: dict[str, Mapping[str, Any]] = {}
    for grade in grades:
        last[str(grade["fact"])] = grade
    final = list(last.values())
    effective = [g for g in final if g["verdict"] in ("admit", "correct")]
    graded_effective = [g for g in effective if g["truth"] is not None]
    true_facts = [g for g in final if g["truth"] is True]
    return AuditSummary(
        admitted=len(graded_effective),
        wrong_admitted=sum(g["truth"] is False for g in graded_effective),
        true_facts=len(true_facts),
        true_held=sum(g["verdict"] in ("defer", "reject") for g in true_facts),
        ungraded=sum(g["truth"] is None for g in final),
    )


@dataclass
class LocalisationAudit:
    """The robot's localised base pose against simulator truth, while the base stands still.

    The judge feeds it pairs of planar poses (x, y, yaw) in the map; a sample is taken only when
    the base moves slower than ``still_speed`` (m/s), so the lag between the robot's transform
    stamps and the truth read now does not count as error.
    """

    still_speed: float = 0.02
    #: seconds between comparisons (wall time for the bridge, simulated time in process)
    period_s: float = 1.0
    errors: list[float] = field(default_factory=list)
    yaw_errors: list[float] = field(default_factory=list)
    times: list[float] = field(default_factory=list)

    def add(self, estimate: Sequence[float], truth: Sequence[float], speed: float,
            sim_time: float = math.nan) -> bool:
        """Record one comparison (at ``sim_time``, s); whether it was taken (the base stood
        still)."""
        if speed > self.still_speed:
            return False
        self.errors.append(math.hypot(estimate[0] - truth[0], estimate[1] - truth[1]))
        self.yaw_errors.append(abs(math.remainder(estimate[2] - truth[2], math.tau)))
        self.times.append(float(sim_time))
        return True

    def series(self) -> list[list[float]]:
        """Every sample as ``[sim time s, position error m, yaw error deg]`` (3 decimals), so a
        run shows when its localisation went wrong, not only how far."""
        return [[round(t, 3), round(e, 3), round(math.degrees(y), 3)]
                for t, e, y in zip(self.times, self.errors, self.yaw_errors, strict=True)]

    def record(self, unavailable: int) -> dict[str, object]:
        """What ``localisation.json`` holds: the summary, how many comparisons found no
        localisation (``unavailable``) and every sample."""
        return {**self.summary(), "unavailable": unavailable, "series": self.series()}

    def summary(self) -> dict[str, float | int]:
        """Samples, mean, 95th percentile and largest position error (m) and yaw error (deg)."""
        if not self.errors:
            return {"samples": 0}
        pos = np.asarray(self.errors)
        yaw = np.degrees(np.asarray(self.yaw_errors))
        return {"samples": int(pos.size), "mean_m": float(pos.mean()),
                "p95_m": float(np.percentile(pos, 95)), "max_m": float(pos.max()),
                "mean_yaw_deg": float(yaw.mean()), "max_yaw_deg": float(yaw.max())}
