"""Layout of the generated kitchen: dimensions, entities, fixtures and objects as placed.

These are the facts the scene builder decides and every other part of the simulator reads: the
entity index, each fixture's box, interior and moving part, each object's initial placement,
and the base pose that faces a fixture.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import mujoco

from mimir_sim.fiducial_tags import TagLayout
from mimir_sim.scenario import Scenario

PANEL = 0.015  # carcass panel thickness (m)
DOOR_T = 0.018  # door / drawer front thickness (m)
HANDLE_STANDOFF = 0.05  # handle bar axis in front of the door face (m)
HANDLE_RADIUS = 0.011
HANDLE_HALF_LEN = 0.07
UNLOCKED_RANGE = {"door": 1.9, "drawer": 0.32}
LOCKED_PLAY = 0.002  # rattle of a locked door or drawer (rad or m)


@dataclass(frozen=True)
class Entity:
    """A named thing in the scene: fixture part, object, structure or the robot."""

    id: str
    kind: str  # fixture | door | drawer | handle | object | structure | robot
    label: str
    fixture: str | None = None  # owning fixture for door/drawer/handle parts


@dataclass(frozen=True)
class FixtureLayout:
    """Where a fixture is and how its moving part moves (world frame, metres, radians)."""

    id: str
    type: str
    locked: bool
    center_y: float
    width: float
    front_x: float
    depth: float
    z_low: float
    z_high: float
    interior_low: tuple[float, float, float]
    interior_high: tuple[float, float, float]
    joint: str | None = None  # hinge or slide joint of the door / drawer
    handle_site: str | None = None
    moving_body: str | None = None
    hinge_point: tuple[float, float] | None = None  # (x, y) of the hinge axis
    hinge_sign: float = 1.0  # +1: opening turns the door about +z
    open_range: float = 0.0

    @property
    def is_openable(self) -> bool:
        """Whether the fixture has a door or drawer."""
        return self.joint is not None

    @property
    def is_drawer(self) -> bool:
        """Whether the moving part slides."""
        return self.type == "drawer"


@dataclass(frozen=True)
class ObjectLayout:
    """Initial placement and appearance of an object instance."""

    id: str
    category: str
    fixture: str
    label: str
    pos: tuple[float, float, float]
    yaw: float
    color: tuple[float, float, float]
    pattern: str
    brand: str


@dataclass
class KitchenScene:
    """A compiled scene with its MJCF text and the id maps used by rendering and judging."""

    scenario: Scenario
    seed: int
    mjcf: str
    model: mujoco.MjModel
    entities: dict[str, Entity]
    fixtures: dict[str, FixtureLayout]
    objects: dict[str, ObjectLayout]
    geom_entity: list[str | None] = field(default_factory=list)
    #: the wall's fiducial tags and their map (:mod:`mimir_sim.fiducial_tags`)
    fiducials: TagLayout | None = None

    def entity_of_geom(self, geom_id: int) -> str | None:
        """Entity id of a geom id (``None`` for geoms outside any entity)."""
        if 0 <= geom_id < len(self.geom_entity):
            return self.geom_entity[geom_id]
        return None


def start_pose_for(fixture: FixtureLayout, standoff: float = 0.62) -> tuple[float, float, float]:
    """Base pose (x, y, yaw) facing the fixture, ``standoff`` metres in front of its handle line.

    Doors are approached off-centre towards their free edge so the swing clears the arm.
    """
    y = fixture.center_y
    if fixture.hinge_point is not None:
        y = fixture.center_y - 0.1 * (1.0 if fixture.hinge_sign < 0 else -1.0)
    if fixture.type == "drawer":
        return (fixture.front_x - DOOR_T - HANDLE_STANDOFF - standoff - 0.12, y, 0.0)
    if fixture.type == "upper_cabinet":
        return (fixture.front_x - DOOR_T - HANDLE_STANDOFF - standoff + 0.02, y, 0.0)
    return (fixture.front_x - DOOR_T - HANDLE_STANDOFF - standoff, y, 0.0)
