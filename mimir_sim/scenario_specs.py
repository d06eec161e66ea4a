"""The data a scenario file describes: kitchen, fixtures, objects, instructions and roles.

These frozen dataclasses are filled by :mod:`mimir_sim.scenario` (which parses and checks the
files and re-exports every name here) and turned into concrete layouts by
:mod:`mimir_sim.layouts`; this module imports neither, so both can build on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class KitchenSpec:
    """Dimensions of the single wall run of cabinets (metres; the wall faces -x)."""

    wall_x: float = 1.25
    room_x: tuple[float, float] = (-2.0, 1.25)
    room_y: tuple[float, float] = (-2.0, 2.0)
    counter_height: float = 0.75
    counter_depth: float = 0.5
    upper_bottom: float = 1.0
    upper_height: float = 0.45
    upper_depth: float = 0.35
    drawer_height: float = 0.16


@dataclass(frozen=True)
class FixtureSpec:
    """One fixture on the wall run, centred at ``y`` with the given ``width`` (m)."""

    id: str
    type: str
    y: float
    width: float
    label: str
    locked: bool = False
    hinge: str = "left"
    color: tuple[float, float, float] = (0.85, 0.82, 0.76)


@dataclass(frozen=True)
class VariantSpec:
    """Visual variant of an object instance; ``None`` fields are drawn from the seed."""

    color: tuple[float, float, float] | None = None
    pattern: str | None = None
    pattern_color: tuple[float, float, float] | None = None
    label_color: tuple[float, float, float] | None = None
    brand: str | None = None


@dataclass(frozen=True)
class ObjectSpec:
    """A movable object placed in or on a fixture at slot ``(u, v)`` in [0, 1]^2 (width, depth)."""

    id: str
    category: str
    fixture: str
    slot: tuple[float, float] | None
    variant: VariantSpec


@dataclass(frozen=True)
class CriterionSpec:
    """A success (or failure) condition, judged from simulator state and the primitive log."""

    type: str
    fixture: str | None = None
    object: str | None = None
    answer: tuple[str, ...] = ()


@dataclass(frozen=True)
class MoveSpec:
    """An object the scenario itself moves when an instruction begins (a person tidied up).

    The object goes to slot ``(u, v)`` in [0, 1]^2 of the fixture ``fixture``, like an object's
    initial ``slot``; the robot plays no part in the move.
    """

    object: str
    fixture: str
    slot: tuple[float, float]


@dataclass(frozen=True)
class InstructionSpec:
    """One instruction of the sequence with how it is judged.

    ``moves`` are applied when the instruction begins, after the robot is returned to its start
    and before it acts.
    """

    text: str
    family: str
    success: tuple[CriterionSpec, ...]
    failure: tuple[CriterionSpec, ...] = ()
    start_at: str | None = None
    moves: tuple[MoveSpec, ...] = ()


@dataclass(frozen=True)
class RandomizationSpec:
    """Per-trial layout randomisation amplitudes."""

    object_jitter: float = 0.015
    yaw_jitter: float = 0.4
    color_jitter: float = 0.06


@dataclass(frozen=True)
class CategorySpec:
    """Shape, size (MuJoCo geom size), base colour and mass of an object category."""

    name: str
    shape: str
    size: tuple[float, ...]
    color: tuple[float, float, float]
    mass: float
    label: str


@dataclass(frozen=True)
class FixtureRole:
    """A fixture the seed picks among ``among``; ``locked`` locks the pick; the pick differs
    from the picks of the roles named in ``unlike``."""

    name: str
    among: tuple[str, ...]
    locked: bool = False
    unlike: tuple[str, ...] = ()


@dataclass(frozen=True)
class OrderRole:
    """Fixtures (same type and width) whose ``y`` places the seed shuffles among them."""

    name: str
    fixtures: tuple[str, ...]


@dataclass(frozen=True)
class VariantRole:
    """Objects that all take one of ``options``; an option's set fields replace the object's."""

    name: str
    objects: tuple[str, ...]
    options: tuple[VariantSpec, ...]


@dataclass(frozen=True)
class ReorderRole:
    """Instructions (file indices) the seed may run in any order within their own places."""

    name: str
    instructions: tuple[int, ...]


RoleSpec = FixtureRole | OrderRole | VariantRole | ReorderRole
#: what an assignment gives a role: a fixture id (fixture role), the fixtures in the order they
#: take the listed places (order role), an option index (variant role) or the file indices in
#: the order they run (reorder role)
RoleValue = str | int | tuple[str, ...] | tuple[int, ...]


@dataclass(frozen=True)
class Assignment:
    """One value for every role, in the order the roles are declared."""

    values: tuple[tuple[str, RoleValue], ...] = ()

    def __getitem__(self, role: str) -> RoleValue:
        for name, value in self.values:
            if name == role:
                return value
        raise KeyError(role)

    def as_dict(self) -> dict[str, RoleValue]:
        """The assignment as a role -> value mapping."""
        return dict(self.values)

    def describe(self) -> str:
        """One line such as ``locked=cab_2 fruit=cab_1 wall=cab_3,cab_1,cab_2``."""
        parts = []
        for name, value in self.values:
            text = ",".join(str(v) for v in value) if isinstance(value, tuple) else str(value)
            parts.append(f"{name}={text}")
        return " ".join(parts) if parts else "(no roles)"


@dataclass(frozen=True)
class LayoutTemplate:
    """A scenario's roles and its entries as written, with ``$role`` references unresolved."""

    roles: tuple[RoleSpec, ...]
    fixtures: tuple[FixtureSpec, ...]
    objects: tuple[ObjectSpec, ...]
    instructions: tuple[InstructionSpec, ...]
    start_at: str | None


@dataclass(frozen=True)
class Scenario:
    """A parsed scenario file."""

    name: str
    description: str
    seed: int
    kitchen: KitchenSpec
    fixtures: tuple[FixtureSpec, ...]
    objects: tuple[ObjectSpec, ...]
    instructions: tuple[InstructionSpec, ...]
    start_at: str | None
    randomization: RandomizationSpec
    catalog: Mapping[str, CategorySpec] = field(default_factory=dict)
    source: Path | None = None
    #: the roles and the entries as written (``None`` for a file without ``roles:``)
    layout: LayoutTemplate | None = None
    #: the role assignment this concrete layout was generated from (``None`` without roles)
    assignment: Assignment | None = None

    def fixture(self, fixture_id: str) -> FixtureSpec:
        """The fixture with this id (KeyError when absent)."""
        for fixture in self.fixtures:
            if fixture.id == fixture_id:
                return fixture
        raise KeyError(fixture_id)
