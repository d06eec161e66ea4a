"""Primitive requests as the planner sends them, independent of the robot that executes them.

An ``ExecutePrimitive`` goal names an abstract primitive, a target by memory node id with its
remembered label and position (map frame), and primitive-specific key/value parameters. This
module turns those fields into a checked :class:`PrimitiveRequest`; anything malformed is a
:class:`RequestError` whose ``code`` names the action result code, so the executor refuses it
before the robot moves.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from mimir.labels import label_text

PRIMITIVES = ("move_to", "open", "close", "inspect", "pick", "place")


class RequestError(ValueError):
    """A primitive request refused before anything moved; ``code`` names the result code."""

    code = "EXECUTION_FAILED"


class UnknownPrimitiveError(RequestError):
    """The primitive is not one of :data:`PRIMITIVES`."""

    code = "UNKNOWN_PRIMITIVE"


class UnknownTargetError(RequestError):
    """The target is malformed, or cannot be found where memory says it is."""

    code = "UNKNOWN_TARGET"


class PreconditionFailedError(RequestError):
    """A precondition of the primitive does not hold."""

    code = "PRECONDITION_FAILED"


class TargetUnreachableError(RequestError):
    """The robot cannot stand or reach where the primitive needs it."""

    code = "UNREACHABLE"


@dataclass(frozen=True)
class TargetSpec:
    """A target as the planner gives it.

    Attributes:
        target_id: memory node id (for messages and events; never a simulator id).
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
        where = (" at ({:.2f}, {:.2f}, {:.2f})".format(*self.position)
                 if self.position is not None else "")
        return f"{name}{label}{where}"


@dataclass(frozen=True)
class PrimitiveRequest:
    """One primitive with its target and, for ``place``, the destination.

    ``pixel`` is a point on the target in the pointing camera's image (u, v), when a model chose
    one; otherwise the executor picks the part itself.
    """

    primitive: str
    target: TargetSpec
    destination: TargetSpec | None = None
    slot: tuple[float, float] = (0.5, 0.4)
    pointing: str = ""
    pixel: tuple[float, float] | None = None


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
    *,
    pointing: str = "",
) -> PrimitiveRequest:
    """A :class:`PrimitiveRequest` from the fields of an ExecutePrimitive goal.

    ``params`` may carry ``label``, ``destination_label``, ``destination_x/y/z`` (place),
    ``slot_u``/``slot_v`` (place position on the surface, each in [0, 1]) and
    ``point_u``/``point_v`` (a pixel on the target chosen by a model).

    Raises:
        UnknownPrimitiveError: the primitive is not registered.
        UnknownTargetError: malformed numbers or an incomplete destination.
    """
    name = label_text(primitive).replace(" ", "_")
    if name not in PRIMITIVES:
        raise UnknownPrimitiveError(
            f"primitive {primitive!r} is not registered; use one of {', '.join(PRIMITIVES)}")
    if position is not None and not all(math.isfinite(v) for v in position):
        raise UnknownTargetError(f"target position {position} is not finite")
    if yaw is not None and not math.isfinite(yaw):
        raise UnknownTargetError(f"target heading {yaw} is not finite")
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
    pu, pv = _float_param(params, "point_u"), _float_param(params, "point_v")
    pixel: tuple[float, float] | None = None
    if pu is not None or pv is not None:
        if pu is None or pv is None or pu < 0.0 or pv < 0.0:
            raise UnknownTargetError("a pointed pixel needs non-negative point_u and point_v")
        pixel = (pu, pv)
    return PrimitiveRequest(name, target, destination, slot, pointing.strip(), pixel)
