"""Embodiment adapter of the simulated TidyBot++: abstract primitives -> simulator controllers.

The planner names targets by memory node id (``cabinet_2``) and, with them, the node's remembered
position in the map frame and its label. The simulator knows its own ids (``cab_2``). This module
binds the two: a target resolves to the nearest simulator entity whose label is compatible with
the remembered label and that lies within a tolerance of the remembered position; with none, the
request fails closed (:class:`UnknownTargetError`).

Requests are checked before anything moves (:meth:`SimEmbodiment.prepare`): target resolution,
preconditions (interact only with what the robot last moved to, pick needs a free hand, place
needs a held object) and base-pose reachability. :meth:`SimEmbodiment.run` then executes the
controller and turns the simulator's outcome into a short code (``OPENED``, ``NO_MOTION``,
``MISSED_GRASP``, ...).

Label matching is in :mod:`mimir_sim.entity_labels`; what the robot reports (joint states, base and
camera poses) in :mod:`mimir_sim.robot_signals`; ground-truth segmentation in
:mod:`mimir_sim.truth_segmentation`.

The MuJoCo world frame is the ``map`` frame (ground-truth localisation).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from mimir.labels import label_text
from mimir_sim.entity_labels import LabelMap, labels_compatible
from mimir_sim.errors import (
    PrimitiveError,
    SimError,
    UnknownEntityError,
    UnreachablePoseError,
)
from mimir_sim.recording import PrimitiveRecord
from mimir_sim.scene_layout import start_pose_for
from mimir_sim.sim import KitchenSim

LOG = logging.getLogger(__name__)
FloatArray = npt.NDArray[np.float64]

PRIMITIVES = ("move_to", "open", "close", "inspect", "pick", "place")

#: Outcome code of a successful primitive.
SUCCESS_CODES = {
    "move_to": "REACHED",
    "open": "OPENED",
    "close": "CLOSED",
    "inspect": "INSPECTED",
    "pick": "PICKED",
    "place": "PLACED",
}

#: Failure outcome codes, keyed by a phrase of the simulator's outcome text (first match wins).
FAILURE_CODES: tuple[tuple[str, str], ...] = (
    ("out of reach", "OUT_OF_REACH"),
    ("missed grasp", "MISSED_GRASP"),
    ("did not move", "NO_MOTION"),
    ("grasp pose not reachable", "GRASP_UNREACHABLE"),
    ("did not open far enough", "PARTIAL_OPEN"),
    ("still open", "STILL_OPEN"),
    ("slipped or stayed", "SLIPPED"),
    ("no view", "NO_VIEW"),
    ("not reached", "NOT_REACHED"),
    (" is closed", "FIXTURE_CLOSED"),
    ("object now on", "NOT_PLACED"),
    ("not on a fixture", "NOT_PLACED"),
)
FAILED = "FAILED"


# ---------------------------------------------------------------------------------------------
# errors


class EmbodimentError(SimError):
    """A primitive request refused before the robot moved; ``code`` names the result code."""

    code = "EXECUTION_FAILED"


class UnknownPrimitiveError(EmbodimentError):
    """The primitive is not one of :data:`PRIMITIVES`."""

    code = "UNKNOWN_PRIMITIVE"


class UnknownTargetError(EmbodimentError):
    """No simulator entity matches the target (label, position, kind), or it is malformed."""

    code = "UNKNOWN_TARGET"


class PreconditionFailedError(EmbodimentError):
    """A precondition of the primitive does not hold."""

    code = "PRECONDITION_FAILED"


class TargetUnreachableError(EmbodimentError):
    """The base cannot stand where the primitive needs it."""

    code = "UNREACHABLE"


# ---------------------------------------------------------------------------------------------
# geometry


def entity_distance(sim: KitchenSim, entity_id: str, point: FloatArray) -> float:
    """Distance (m) from a world point to an entity's current box (0 inside it)."""
    return sim.entity_state(entity_id).distance_to(point)


def yaw_from_quaternion(x: float, y: float, z: float, w: float) -> float:
    """Heading (rad) of an x, y, z, w quaternion about the world z axis."""
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


# ---------------------------------------------------------------------------------------------
# requests and outcomes


@dataclass(frozen=True)
class TargetSpec:
    """A target as the planner gives it.

    Attributes:
        target_id: memory node id (diagnostic only; never a simulator id).
        label: remembered label (``""`` when unknown).
        position: remembered position in the map frame (m), or ``None``.
        yaw: heading of the given pose (rad), or ``None``.
    """

    target_id: str = ""
    label: str = ""
    position: tuple[float, float, float] | None = None
    yaw: float | None = None

    @property
    def is_pose_only(self) -> bool:
        """A bare pose: no memory id and no label, only a position."""
        return not self.target_id and not self.label and self.position is not None

    def describe(self) -> str:
        """Short text for error messages."""
        name = self.target_id or "target"
        label = f" ({self.label})" if self.label else ""
        where = (
            " at ({:.2f}, {:.2f}, {:.2f})".format(*self.position)
            if self.position is not None
            else ""
        )
        return f"{name}{label}{where}"


@dataclass(frozen=True)
class PrimitiveRequest:
    """One primitive with its target and, for ``place``, the destination."""

    primitive: str
    target: TargetSpec
    destination: TargetSpec | None = None
    slot: tuple[float, float] = (0.5, 0.4)


def _float_param(params: Mapping[str, str], key: str) -> float | None:
    if key not in params or params[key].strip() == "":
        return None
    try:
        value = float(params[key])
    except ValueError as err:
        raise UnknownTargetError(f"parameter {key}={params[key]!r} is not a number") from err
    if not math.isfinite(value):
        raise UnknownTargetError(f"parameter {key}={params[key]!r} is not finite")
    return value


def build_request(
    primitive: str,
    target_id: str,
    position: tuple[float, float, float] | None,
    yaw: float | None,
    params: Mapping[str, str],
) -> PrimitiveRequest:
    """A :class:`PrimitiveRequest` from the fields of an ExecutePrimitive goal.

    ``params`` may carry ``label``, ``destination_label``, ``destination_x/y/z`` (place) and
    ``slot_u``/``slot_v`` (place position on the surface, each in [0, 1]).

    Raises:
        UnknownPrimitiveError: the primitive is not registered.
        UnknownTargetError: malformed numbers or an incomplete destination.
    """
    name = label_text(primitive).replace(" ", "_")
    if name not in PRIMITIVES:
        raise UnknownPrimitiveError(
            f"primitive {primitive!r} is not registered; use one of {', '.join(PRIMITIVES)}"
        )
    if position is not None and not all(math.isfinite(v) for v in position):
        raise UnknownTargetError(f"target position {position} is not finite")
    target = TargetSpec(target_id.strip(), params.get("label", "").strip(), position, yaw)
    destination: TargetSpec | None = None
    coords = [_float_param(params, f"destination_{axis}") for axis in "xyz"]
    dest_label = params.get("destination_label", "").strip()
    if any(c is not None for c in coords) or dest_label:
        if any(c is None for c in coords):
            raise UnknownTargetError("a destination needs destination_x, destination_y and _z")
        x, y, z = (float(c) for c in coords if c is not None)
        destination = TargetSpec(params.get("destination_id", "").strip(), dest_label, (x, y, z))
    slot = (0.5, 0.4)
    u, v = _float_param(params, "slot_u"), _float_param(params, "slot_v")
    if u is not None or v is not None:
        slot = (slot[0] if u is None else u, slot[1] if v is None else v)
        if not all(0.0 <= s <= 1.0 for s in slot):
            raise UnknownTargetError(f"slot {slot} must lie in [0, 1] x [0, 1]")
    return PrimitiveRequest(name, target, destination, slot)


@dataclass(frozen=True)
class PreparedPrimitive:
    """A request checked against the simulator, ready to run.

    Attributes:
        request: the original request.
        sim_target: simulator id the controller acts on (fixture or object), or a pose text.
        destination: simulator fixture id of a place.
        base_goal: base pose (x, y, yaw) of a move.
    """

    request: PrimitiveRequest
    sim_target: str
    destination: str | None = None
    base_goal: tuple[float, float, float] | None = None


#: primitives whose target is a fixture; their fixture's joint is reported while they run
FIXTURE_PRIMITIVES = ("open", "close", "inspect")


@dataclass(frozen=True)
class FixtureJointState:
    """The joint of the fixture a primitive acts on, as the embodiment reports it.

    Attributes:
        target_id: memory node id the planner named (the name the state is published under).
        sim_fixture: simulator id of the fixture.
        position: door angle (rad) for hinges, drawer travel (m) for slides; 0 is closed.
        joint_type: ``revolute`` (hinge) or ``prismatic`` (slide).
    """

    target_id: str
    sim_fixture: str
    position: float
    joint_type: str


@dataclass(frozen=True)
class PrimitiveOutcome:
    """What a primitive did, in the terms the action result reports."""

    primitive: str
    sim_target: str
    success: bool
    outcome: str  # short code (OPENED, NO_MOTION, ...)
    message: str  # the simulator's outcome text
    start: float  # sim time (s)
    end: float
    record: PrimitiveRecord | None


def outcome_code(primitive: str, success: bool, text: str) -> str:
    """Short outcome code of a primitive from its success flag and outcome text."""
    if success:
        return SUCCESS_CODES.get(primitive, "SUCCEEDED")
    low = text.lower()
    for phrase, code in FAILURE_CODES:
        if phrase in low:
            return code
    return FAILED


class SimEmbodiment:
    """Resolves targets, enforces preconditions and runs the simulator's controllers.

    Args:
        sim: the simulator (the caller serialises access to it).
        tolerance: largest distance (m) between a remembered position and a simulator entity's
            current box for the entity to match.
        label_map: maps simulator labels to vocabulary labels for matching.
    """

    def __init__(
        self, sim: KitchenSim, tolerance: float = 0.6, label_map: LabelMap | None = None
    ) -> None:
        if not tolerance > 0.0:
            raise ValueError(f"tolerance must be positive, got {tolerance}")
        self.sim = sim
        self.tolerance = tolerance
        self.label_map = label_map
        start = sim.scene.scenario.start_at
        self.last_moved_to: str | None = start

    # ------------------------------------------------------------------ resolution

    def _candidates(self, kinds: Sequence[str]) -> list[str]:
        out: list[str] = []
        if "fixture" in kinds:
            out.extend(self.sim.scene.fixtures)
        if "object" in kinds:
            out.extend(self.sim.scene.objects)
        return out

    def resolve(self, target: TargetSpec, kinds: Sequence[str] = ("fixture", "object")) -> str:
        """Simulator id of the entity a remembered target names.

        With a position: the nearest compatible entity within :attr:`tolerance`. Without one:
        the only compatible entity, if exactly one exists.

        Raises:
            UnknownTargetError: no (or, without a position, no unique) compatible entity.
        """
        entities = self.sim.scene.entities
        compatible = [
            eid
            for eid in self._candidates(kinds)
            if labels_compatible(target.label, entities[eid].label, self.label_map)
        ]
        what = " or ".join(kinds)
        if target.position is None:
            if target.label and len(compatible) == 1:
                return compatible[0]
            raise UnknownTargetError(
                f"cannot bind {target.describe()} to a simulated {what}: a target pose is "
                f"needed ({len(compatible)} entities carry a compatible label)"
            )
        point = np.asarray(target.position, dtype=np.float64)
        scored = sorted(
            (
                entity_distance(self.sim, eid, point),
                float(np.linalg.norm(self.sim.entity_position(eid) - point)),
                eid,
            )
            for eid in compatible
        )
        if not scored or scored[0][0] > self.tolerance:
            nearest = f"; nearest compatible is {scored[0][0]:.2f} m away" if scored else ""
            raise UnknownTargetError(
                f"no simulated {what} matches {target.describe()} within "
                f"{self.tolerance:.2f} m{nearest}"
            )
        return scored[0][2]

    # ------------------------------------------------------------------ preconditions

    def _require_last_moved_to(self, primitive: str, fixture: str, target: TargetSpec) -> None:
        if self.last_moved_to != fixture:
            where = self.last_moved_to or "nothing yet"
            raise PreconditionFailedError(
                f"{primitive} acts only on what the robot last moved to ({where}); "
                f"move_to {target.target_id or fixture} first"
            )

    def _check_base(self, goal: tuple[float, float, float]) -> None:
        try:
            self.sim.check_base_pose(goal)
        except UnreachablePoseError as err:
            raise TargetUnreachableError(str(err)) from err

    def prepare(self, request: PrimitiveRequest) -> PreparedPrimitive:
        """Resolve the targets and check every precondition without moving anything.

        Raises:
            UnknownTargetError, PreconditionFailedError, TargetUnreachableError.
        """
        sim = self.sim
        target = request.target
        name = request.primitive
        if name == "move_to":
            if target.is_pose_only:
                assert target.position is not None
                goal = (
                    target.position[0],
                    target.position[1],
                    0.0 if target.yaw is None else target.yaw,
                )
                self._check_base(goal)
                return PreparedPrimitive(request, "", base_goal=goal)
            eid = self.resolve(target)
            fixture = eid
            if eid in sim.scene.objects:
                home = sim.object_fixture(eid)
                if home is None:
                    raise TargetUnreachableError(
                        f"{target.describe()} ({eid}) lies on no fixture to stand at"
                    )
                fixture = home
            goal = start_pose_for(sim.scene.fixtures[fixture])
            self._check_base(goal)
            return PreparedPrimitive(request, fixture, base_goal=goal)
        if name in ("open", "close", "inspect"):
            fixture = self.resolve(target, ("fixture",))
            self._require_last_moved_to(name, fixture, target)
            if sim.holding is not None:
                raise PreconditionFailedError(
                    f"{name} needs a free hand; the gripper holds {sim.holding}"
                )
            if name != "inspect" and not sim.scene.fixtures[fixture].is_openable:
                raise PreconditionFailedError(
                    f"{target.describe()} ({fixture}) has no door or drawer to {name}"
                )
            return PreparedPrimitive(request, fixture)
        if name == "pick":
            if sim.holding is not None:
                raise PreconditionFailedError(
                    f"pick needs a free hand; the gripper holds {sim.holding}"
                )
            obj = self.resolve(target, ("object",))
            home = sim.object_fixture(obj)
            if home is None or home != self.last_moved_to:
                where = self.last_moved_to or "nothing yet"
                raise PreconditionFailedError(
                    f"pick acts only on what the robot last moved to ({where}); "
                    f"{target.describe()} ({obj}) is in {home or 'no fixture'}"
                )
            return PreparedPrimitive(request, obj)
        # place
        if sim.holding is None:
            raise PreconditionFailedError("place needs a held object; the hand is empty")
        dest_spec = request.destination or target
        destination = self.resolve(dest_spec, ("fixture",))
        return PreparedPrimitive(request, sim.holding, destination=destination)

    # ------------------------------------------------------------------ fixture state

    def target_joint_state(self, prepared: PreparedPrimitive) -> FixtureJointState | None:
        """Current joint state of the fixture a prepared primitive acts on.

        ``None`` when the primitive does not act on a fixture (``move_to``, ``pick``,
        ``place``), when the request names no memory id to publish it under, or when the
        fixture has no door or drawer joint (a counter).
        """
        request = prepared.request
        if request.primitive not in FIXTURE_PRIMITIVES or not request.target.target_id:
            return None
        fixture = self.sim.scene.fixtures.get(prepared.sim_target)
        if fixture is None or fixture.joint is None:
            return None
        return FixtureJointState(
            target_id=request.target.target_id,
            sim_fixture=prepared.sim_target,
            position=self.sim.fixture_opening(prepared.sim_target),
            joint_type="prismatic" if fixture.is_drawer else "revolute",
        )

    # ------------------------------------------------------------------ execution

    def _call(self, prepared: PreparedPrimitive) -> tuple[bool, str, PrimitiveRecord | None]:
        sim = self.sim
        name = prepared.request.primitive
        if name == "move_to":
            target: str | Sequence[float]
            if prepared.sim_target:
                target = prepared.sim_target
            else:
                assert prepared.base_goal is not None
                target = prepared.base_goal
            result = sim.move_to(target)
            record = sim.log[-1] if sim.log and sim.log[-1].name == "move_to" else None
            text = record.outcome if record is not None else ("reached" if result.reached else "")
            return result.reached, text, record
        actions: dict[str, Callable[[], PrimitiveRecord]] = {
            "open": lambda: sim.open(prepared.sim_target),
            "close": lambda: sim.close_fixture(prepared.sim_target),
            "inspect": lambda: sim.inspect(prepared.sim_target),
            "pick": lambda: sim.pick(prepared.sim_target),
        }
        if name in actions:
            record = actions[name]()
        else:
            assert prepared.destination is not None
            record = sim.place(prepared.sim_target, prepared.destination, prepared.request.slot)
        return record.success, record.outcome, record

    def run(self, prepared: PreparedPrimitive) -> PrimitiveOutcome:
        """Execute a prepared primitive through the simulator's controllers.

        A simulator refusal raised after preparation (it should not happen) becomes a failed
        outcome with code ``REFUSED`` and the reason as message.
        """
        sim = self.sim
        name = prepared.request.primitive
        start = sim.time
        try:
            success, text, record = self._call(prepared)
        except (PrimitiveError, UnknownEntityError, UnreachablePoseError) as err:
            LOG.warning("simulator refused %s(%s): %s", name, prepared.sim_target, err)
            return PrimitiveOutcome(
                name, prepared.sim_target, False, "REFUSED", str(err), start, sim.time, None
            )
        if name == "move_to":
            self.last_moved_to = prepared.sim_target if success and prepared.sim_target else None
        return PrimitiveOutcome(
            primitive=name,
            sim_target=prepared.sim_target,
            success=success,
            outcome=outcome_code(name, success, text),
            message=text,
            start=start,
            end=sim.time,
            record=record,
        )
