"""Scene builder: scenario -> kitchen MJCF with the TidyBot++ attached, plus an entity index.

The kitchen is one run of fixtures along a back wall at ``x = wall_x`` (fronts face -x, towards
the robot, which spawns looking along +x). The robot is not copied: the generated MJCF declares
the robot's own ``tidybot.xml`` as a model asset and attaches its ``base_link`` body, so the
robot's meshes resolve from its folder. A ``pole`` camera is added to ``base_link``.

Every kitchen geom is named ``<entity>/<part>``; the entity index maps geom ids to stable ids
such as ``cab_1`` (carcass), ``cab_1_door``, ``cab_1_handle`` or ``banana_1`` and to labels.
"""

from __future__ import annotations

import logging
import math
import os
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import quoteattr

import mujoco
import numpy as np

from mimir_sim.errors import ModelDirError, SceneBuildError
from mimir_sim.scenario import (
    OPENABLE_TYPES,
    CategorySpec,
    FixtureSpec,
    KitchenSpec,
    ObjectSpec,
    Scenario,
    VariantSpec,
)

LOG = logging.getLogger(__name__)

ROBOT_XML = Path("stanford_tidybot") / "tidybot.xml"
PANEL = 0.015  # carcass panel thickness (m)
DOOR_T = 0.018  # door / drawer front thickness (m)
HANDLE_STANDOFF = 0.05  # handle bar axis in front of the door face (m)
HANDLE_RADIUS = 0.011
HANDLE_HALF_LEN = 0.07
UNLOCKED_RANGE = {"door": 1.9, "drawer": 0.32}
LOCKED_PLAY = 0.002  # rattle of a locked door or drawer (rad or m)
FOOT_RADIUS_FRACTION = 0.6  # foot disc radius of ellipsoid objects, relative to their x/y radius
FOOT_HALF_HEIGHT = 0.003
POLE_PITCH = math.radians(35.0)
POLE_POS = (-0.15, 0.0, 1.5)
POLE_FOVY = 60.0
NAMED_COLORS = (
    (0.85, 0.15, 0.15),
    (0.15, 0.45, 0.85),
    (0.15, 0.7, 0.3),
    (0.95, 0.8, 0.1),
    (0.95, 0.95, 0.95),
    (0.1, 0.1, 0.1),
    (0.6, 0.3, 0.75),
    (0.95, 0.5, 0.1),
)


def default_tidybot_dir() -> Path:
    """``$MIMIR_TIDYBOT_DIR`` if set, else ``../shared/models/tidybot`` beside the checkout."""
    override = os.environ.get("MIMIR_TIDYBOT_DIR")
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[2] / "shared" / "models" / "tidybot"


def robot_xml_path(tidybot_dir: Path) -> Path:
    """Path of the robot's MJCF inside the model folder, checked to exist."""
    path = Path(tidybot_dir) / ROBOT_XML
    if not path.is_file():
        raise ModelDirError(f"TidyBot++ model not found: {path} does not exist")
    return path.resolve()


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

    def entity_of_geom(self, geom_id: int) -> str | None:
        """Entity id of a geom id (``None`` for geoms outside any entity)."""
        if 0 <= geom_id < len(self.geom_entity):
            return self.geom_entity[geom_id]
        return None


# ---------------------------------------------------------------------------------------------
# MJCF text helpers


def _f(values: tuple[float, ...] | list[float] | np.ndarray) -> str:
    return " ".join(f"{float(v):.5g}" for v in values)


def _rgba(color: tuple[float, float, float], alpha: float = 1.0) -> str:
    return _f((*color, alpha))


class _Writer:
    """Accumulates kitchen MJCF elements."""

    def __init__(self) -> None:
        self.assets: list[str] = []
        self.world: list[str] = []
        self.contact: list[str] = []

    def box(
        self,
        out: list[str],
        name: str,
        pos: tuple[float, float, float],
        half: tuple[float, float, float],
        color: tuple[float, float, float],
        *,
        collide: bool = True,
        material: str | None = None,
        extra: str = "",
    ) -> None:
        flags = "" if collide else ' contype="0" conaffinity="0"'
        mat = f' material="{material}"' if material else f' rgba="{_rgba(color)}"'
        out.append(
            f'<geom name="{name}" type="box" pos="{_f(pos)}" size="{_f(half)}"{mat}{flags}{extra}/>'
        )


@contextmanager
def _quiet_mujoco_warnings() -> Iterator[None]:
    """Route MuJoCo's compile warnings (empty attach prefix) to logging instead of a log file."""
    previous: Callable[[str], None] | None = mujoco.get_mju_user_warning()

    def _log(message: str) -> None:
        LOG.debug("mujoco: %s", message.strip())

    mujoco.set_mju_user_warning(_log)
    try:
        yield
    finally:
        mujoco.set_mju_user_warning(previous)


# ---------------------------------------------------------------------------------------------
# fixtures


def _fixture_extent(kitchen: KitchenSpec, fixture: FixtureSpec) -> tuple[float, float, float]:
    """(depth, z_low, z_high) of a fixture's carcass."""
    if fixture.type == "upper_cabinet":
        return (
            kitchen.upper_depth,
            kitchen.upper_bottom,
            kitchen.upper_bottom + kitchen.upper_height,
        )
    return kitchen.counter_depth, 0.0, kitchen.counter_height


def _carcass(
    w: _Writer,
    fid: str,
    bounds: tuple[float, float, float, float, float, float],
    color: tuple[float, float, float],
) -> None:
    """Five panels open at the front (x0 side); ``bounds`` is (x0, x1, y0, y1, z0, z1)."""
    x0, x1, y0, y1, z0, z1 = bounds
    cx, cy, cz = (x0 + x1) / 2, (y0 + y1) / 2, (z0 + z1) / 2
    hx, hy, hz = (x1 - x0) / 2, (y1 - y0) / 2, (z1 - z0) / 2
    t = PANEL / 2
    w.box(w.world, f"{fid}/left", (cx, y1 - t, cz), (hx, t, hz), color)
    w.box(w.world, f"{fid}/right", (cx, y0 + t, cz), (hx, t, hz), color)
    w.box(w.world, f"{fid}/bottom", (cx, cy, z0 + t), (hx, hy, t), color)
    w.box(w.world, f"{fid}/top", (cx, cy, z1 - t), (hx, hy, t), color)
    w.box(w.world, f"{fid}/back", (x1 - t, cy, cz), (t, hy, hz), color)


def _handle_geoms(
    out: list[str], hid: str, bar_pos: tuple[float, float, float], vertical: bool
) -> None:
    """A bar handle on two standoffs; ``bar_pos`` is the bar centre, the door face is at +x."""
    bx, by, bz = bar_pos
    out.append(
        f'<geom name="{hid}/bar" type="cylinder" fromto="'
        + (
            _f((bx, by, bz - HANDLE_HALF_LEN, bx, by, bz + HANDLE_HALF_LEN))
            if vertical
            else _f((bx, by - HANDLE_HALF_LEN, bz, bx, by + HANDLE_HALF_LEN, bz))
        )
        + f'" size="{HANDLE_RADIUS}" rgba="0.55 0.55 0.58 1" friction="1.2 0.01 0.001"'
        + ' priority="1"/>'
    )
    off = HANDLE_HALF_LEN - 0.01
    for k, sign in enumerate((-1.0, 1.0)):
        spos = (
            (bx + HANDLE_STANDOFF / 2, by, bz + sign * off)
            if vertical
            else (bx + HANDLE_STANDOFF / 2, by + sign * off, bz)
        )
        out.append(
            f'<geom name="{hid}/standoff{k}" type="box" pos="{_f(spos)}" '
            f'size="{_f((HANDLE_STANDOFF / 2, 0.006, 0.006))}" rgba="0.55 0.55 0.58 1"/>'
        )


def _build_fixture(
    w: _Writer, kitchen: KitchenSpec, fixture: FixtureSpec, entities: dict[str, Entity]
) -> FixtureLayout:
    fid = fixture.id
    depth, z0, z1 = _fixture_extent(kitchen, fixture)
    x1 = kitchen.wall_x
    x0 = x1 - depth
    y0, y1 = fixture.y - fixture.width / 2, fixture.y + fixture.width / 2
    entities[fid] = Entity(fid, "fixture", fixture.label)
    if fixture.type == "counter":
        w.box(
            w.world,
            f"{fid}/block",
            ((x0 + x1) / 2, fixture.y, z1 / 2),
            (depth / 2, fixture.width / 2, z1 / 2),
            fixture.color,
        )
        return FixtureLayout(
            id=fid,
            type=fixture.type,
            locked=False,
            center_y=fixture.y,
            width=fixture.width,
            front_x=x0,
            depth=depth,
            z_low=z0,
            z_high=z1,
            interior_low=(x0, y0, z1),
            interior_high=(x1, y1, min(z1 + 0.2, kitchen.upper_bottom - 0.01)),
        )

    if fixture.type == "upper_cabinet":
        body_z0, body_z1 = z0, z1
    else:
        # lower units: plinth below, counter slab on top
        w.box(
            w.world,
            f"{fid}/slab",
            ((x0 + x1) / 2 - 0.01, fixture.y, z1 - 0.015),
            (depth / 2 + 0.01, fixture.width / 2, 0.015),
            (0.35, 0.33, 0.32),
        )
        body_z0, body_z1 = 0.08, z1 - 0.03
        w.box(
            w.world,
            f"{fid}/plinth",
            (x0 + 0.05, fixture.y, 0.04),
            (0.01, fixture.width / 2, 0.04),
            (0.2, 0.2, 0.2),
        )
    lo = (x0 + DOOR_T, y0 + PANEL, body_z0 + PANEL)
    hi = (x1 - PANEL, y1 - PANEL, body_z1 - PANEL)
    if fixture.type == "drawer":
        return _build_drawer(w, kitchen, fixture, entities, (x0, x1, y0, y1, body_z0, body_z1))

    _carcass(w, fid, (x0, x1, y0, y1, body_z0, body_z1), fixture.color)
    door_id, handle_id = f"{fid}_door", f"{fid}_handle"
    entities[door_id] = Entity(door_id, "door", f"{fixture.label} door", fid)
    entities[handle_id] = Entity(handle_id, "handle", "handle", fid)
    left = fixture.hinge == "left"
    hinge_y = y1 if left else y0
    free_y = y0 if left else y1
    hinge_x = x0 - DOOR_T
    door_h = (body_z1 - body_z0) / 2 - 0.003
    door_cz = (body_z0 + body_z1) / 2
    # handle low on upper doors, high on lower doors (reachable from the base)
    handle_z = body_z0 + 0.13 if fixture.type == "upper_cabinet" else body_z1 - 0.13
    handle_y = free_y + (0.055 if left else -0.055)
    bar_x = hinge_x - HANDLE_STANDOFF
    rng = UNLOCKED_RANGE["door"] if not fixture.locked else LOCKED_PLAY
    door_color = tuple(min(1.0, c * 0.92) for c in fixture.color)
    w.world.append(f'<body name="{door_id}" pos="{_f((hinge_x, hinge_y, 0.0))}">')
    w.world.append(
        f'<joint name="{fid}_hinge" type="hinge" axis="0 0 {-1 if left else 1}" '
        f'range="0 {rng:.4g}" damping="2" frictionloss="2.0" armature="0.01"/>'
    )
    w.box(
        w.world,
        f"{door_id}/panel",
        (DOOR_T / 2, (y1 + y0) / 2 - hinge_y, door_cz),
        (DOOR_T / 2, fixture.width / 2 - 0.003, door_h),
        (door_color[0], door_color[1], door_color[2]),
        extra=' mass="1.5"',
    )
    _handle_geoms(w.world, handle_id, (bar_x - hinge_x, handle_y - hinge_y, handle_z), True)
    w.world.append(
        f'<site name="{handle_id}" pos="{_f((bar_x - hinge_x, handle_y - hinge_y, handle_z))}" '
        'size="0.01" rgba="1 0 0 0.3" group="4"/>'
    )
    w.world.append("</body>")
    return FixtureLayout(
        id=fid,
        type=fixture.type,
        locked=fixture.locked,
        center_y=fixture.y,
        width=fixture.width,
        front_x=x0,
        depth=depth,
        z_low=body_z0,
        z_high=body_z1,
        interior_low=lo,
        interior_high=hi,
        joint=f"{fid}_hinge",
        handle_site=handle_id,
        moving_body=door_id,
        hinge_point=(hinge_x, hinge_y),
        hinge_sign=-1.0 if left else 1.0,
        open_range=UNLOCKED_RANGE["door"],
    )


def _build_drawer(
    w: _Writer,
    kitchen: KitchenSpec,
    fixture: FixtureSpec,
    entities: dict[str, Entity],
    bounds: tuple[float, float, float, float, float, float],
) -> FixtureLayout:
    x0, x1, _, _, z0, z1 = bounds
    fid = fixture.id
    _carcass(w, fid, bounds, fixture.color)
    dz1 = z1 - PANEL - 0.005
    dz0 = dz1 - kitchen.drawer_height
    # fixed front panel below the drawer
    w.box(
        w.world,
        f"{fid}/front",
        (x0 - DOOR_T / 2, fixture.y, (z0 + dz0) / 2),
        (DOOR_T / 2, fixture.width / 2 - 0.003, (dz0 - z0) / 2 - 0.003),
        fixture.color,
    )
    drawer_id, handle_id = f"{fid}_drawer", f"{fid}_handle"
    entities[drawer_id] = Entity(drawer_id, "drawer", f"{fixture.label} box", fid)
    entities[handle_id] = Entity(handle_id, "handle", "handle", fid)
    inner_w = fixture.width / 2 - PANEL - 0.006
    box_d = (x1 - x0 - PANEL - 0.02) / 2
    wall = 0.006
    col = tuple(min(1.0, c * 0.92) for c in fixture.color)
    color = (col[0], col[1], col[2])
    rng = UNLOCKED_RANGE["drawer"] if not fixture.locked else LOCKED_PLAY
    dh = (dz1 - dz0) / 2
    w.world.append(f'<body name="{drawer_id}" pos="{_f((x0, fixture.y, dz0))}">')
    w.world.append(
        f'<joint name="{fid}_slide" type="slide" axis="-1 0 0" range="0 {rng:.4g}" '
        'damping="8" frictionloss="0.5" armature="0.05"/>'
    )
    w.box(
        w.world,
        f"{drawer_id}/front",
        (-DOOR_T / 2, 0, dh),
        (DOOR_T / 2, fixture.width / 2 - 0.003, dh),
        color,
        extra=' mass="1"',
    )
    w.box(w.world, f"{drawer_id}/floor", (box_d, 0, wall), (box_d, inner_w, wall), color)
    w.box(w.world, f"{drawer_id}/back", (2 * box_d - wall, 0, dh), (wall, inner_w, dh), color)
    w.box(w.world, f"{drawer_id}/left", (box_d, inner_w - wall, dh), (box_d, wall, dh), color)
    w.box(w.world, f"{drawer_id}/right", (box_d, -inner_w + wall, dh), (box_d, wall, dh), color)
    bar = (-DOOR_T - HANDLE_STANDOFF, 0.0, dh)
    _handle_geoms(w.world, handle_id, bar, False)
    w.world.append(
        f'<site name="{handle_id}" pos="{_f(bar)}" size="0.01" rgba="1 0 0 0.3" group="4"/>'
    )
    w.world.append("</body>")
    return FixtureLayout(
        id=fid,
        type=fixture.type,
        locked=fixture.locked,
        center_y=fixture.y,
        width=fixture.width,
        front_x=x0,
        depth=x1 - x0,
        z_low=z0,
        z_high=z1,
        interior_low=(x0 + 0.02, fixture.y - inner_w + 2 * wall, dz0 + 2 * wall),
        interior_high=(x0 + 2 * box_d - 2 * wall, fixture.y + inner_w - 2 * wall, dz1),
        joint=f"{fid}_slide",
        handle_site=handle_id,
        moving_body=drawer_id,
        open_range=UNLOCKED_RANGE["drawer"],
    )


# ---------------------------------------------------------------------------------------------
# objects


def _object_half_height(cat: CategorySpec) -> float:
    if cat.shape == "sphere":
        return cat.size[0]
    if cat.shape == "capsule":  # lies on its side
        return cat.size[0]
    return cat.size[-1] if cat.shape in ("box", "ellipsoid") else cat.size[1]


def _object_half_extent_xy(cat: CategorySpec) -> float:
    if cat.shape in ("sphere", "cylinder"):
        return cat.size[0]
    if cat.shape == "capsule":
        return cat.size[0] + cat.size[1]
    return max(cat.size[0], cat.size[1])


def _jitter_color(
    rng: np.random.Generator, color: tuple[float, float, float], amount: float
) -> tuple[float, float, float]:
    out = np.clip(np.asarray(color) + rng.uniform(-amount, amount, 3), 0.0, 1.0)
    return (float(out[0]), float(out[1]), float(out[2]))


def _place_objects(
    scenario: Scenario,
    fixtures: dict[str, FixtureLayout],
    rng: np.random.Generator,
) -> dict[str, ObjectLayout]:
    by_fixture: dict[str, list[ObjectSpec]] = {}
    for obj in scenario.objects:
        by_fixture.setdefault(obj.fixture, []).append(obj)
    rand = scenario.randomization
    placed: dict[str, ObjectLayout] = {}
    for fid, objs in by_fixture.items():
        fx = fixtures[fid]
        unslotted = [o for o in objs if o.slot is None]
        for obj in objs:
            cat = scenario.catalog[obj.category]
            if obj.slot is None:
                k = unslotted.index(obj)
                slot = ((k + 1) / (len(unslotted) + 1), 0.5)
            else:
                slot = obj.slot
            margin = _object_half_extent_xy(cat) + 0.01
            x_lo, x_hi = fx.interior_low[0] + margin, fx.interior_high[0] - margin
            y_lo, y_hi = fx.interior_low[1] + margin, fx.interior_high[1] - margin
            if x_lo > x_hi:
                x_lo = x_hi = (fx.interior_low[0] + fx.interior_high[0]) / 2
            if y_lo > y_hi:
                y_lo = y_hi = (fx.interior_low[1] + fx.interior_high[1]) / 2
            # u runs from the robot's left (+y) to its right, v from the front to the back
            x = x_lo + slot[1] * (x_hi - x_lo) + rng.uniform(-1, 1) * rand.object_jitter
            y = y_hi - slot[0] * (y_hi - y_lo) + rng.uniform(-1, 1) * rand.object_jitter
            x = float(np.clip(x, x_lo, x_hi))
            y = float(np.clip(y, y_lo, y_hi))
            z = fx.interior_low[2] + _object_half_height(cat) + 0.003
            variant: VariantSpec = obj.variant
            color = variant.color or _jitter_color(rng, cat.color, rand.color_jitter)
            pattern = variant.pattern or str(
                rng.choice(["plain", "checker", "stripes", "gradient"])
            )
            brand = variant.brand or f"brand_{int(rng.integers(0, 1000)):03d}"
            placed[obj.id] = ObjectLayout(
                id=obj.id,
                category=obj.category,
                fixture=fid,
                label=cat.label,
                pos=(x, y, z),
                yaw=float(rng.uniform(-1, 1) * rand.yaw_jitter),
                color=color,
                pattern=pattern,
                brand=brand,
            )
    return placed


def _object_xml(
    w: _Writer, scenario: Scenario, obj: ObjectLayout, spec: ObjectSpec, rng: np.random.Generator
) -> None:
    cat = scenario.catalog[obj.category]
    oid = obj.id
    second = spec.variant.pattern_color or NAMED_COLORS[int(rng.integers(0, len(NAMED_COLORS)))]
    label_color = spec.variant.label_color or NAMED_COLORS[int(rng.integers(0, len(NAMED_COLORS)))]
    material = f"{oid}/mat"
    if obj.pattern in ("checker", "gradient"):
        w.assets.append(
            f'<texture name="{oid}/tex" type="cube" builtin="{obj.pattern}" '
            f'rgb1="{_f(obj.color)}" rgb2="{_f(second)}" width="64" height="64"/>'
        )
        w.assets.append(f'<material name="{material}" texture="{oid}/tex"/>')
    else:
        w.assets.append(f'<material name="{material}" rgba="{_rgba(obj.color)}"/>')
    half_h = _object_half_height(cat)
    quat = (math.cos(obj.yaw / 2), 0.0, 0.0, math.sin(obj.yaw / 2))
    w.world.append(f'<body name="{oid}" pos="{_f(obj.pos)}" quat="{_f(quat)}">')
    w.world.append(f'<freejoint name="{oid}/free"/>')
    # capsules lie along x (pointing into the cabinet) so the gripper closes across them
    geom_quat = ' quat="0.7071068 0 0.7071068 0"' if cat.shape == "capsule" else ""
    w.world.append(
        f'<geom name="{oid}/body" type="{cat.shape}" size="{_f(cat.size)}" material="{material}" '
        f'mass="{cat.mass:.4g}" friction="1.2 0.01 0.001" condim="4"{geom_quat}/>'
    )
    if cat.shape == "ellipsoid":
        # an upright ellipsoid balances on one point and topples at the first touch: a thin disc
        # under it (collision only, in the hidden geom group 3) gives it a flat base to stand on
        foot_r = FOOT_RADIUS_FRACTION * min(cat.size[0], cat.size[1])
        w.world.append(
            f'<geom name="{oid}/foot" type="cylinder" size="{foot_r:.4g} {FOOT_HALF_HEIGHT:.4g}" '
            f'pos="0 0 {-half_h + FOOT_HALF_HEIGHT:.4g}" mass="0.001" friction="1.2 0.01 0.001" '
            'condim="4" group="3" rgba="0 0 0 0"/>'
        )
    # label band on the -x face and an optional stripe: visual only, same entity
    r_xy = _object_half_extent_xy(cat)
    if cat.shape in ("cylinder", "box"):
        w.box(
            w.world,
            f"{oid}/label",
            (-(cat.size[0] if cat.shape == "box" else r_xy) - 0.001, 0.0, 0.0),
            (0.001, min(r_xy * 0.7, 0.03), half_h * 0.35),
            label_color,
            collide=False,
        )
    if obj.pattern == "stripes":
        stripe_r = r_xy * 1.02 if cat.shape != "capsule" else cat.size[0] * 1.05
        w.world.append(
            f'<geom name="{oid}/stripe" type="cylinder" size="{stripe_r:.4g} {half_h * 0.12:.4g}" '
            f'pos="0 0 {half_h * 0.3:.4g}" rgba="{_rgba(second)}" contype="0" conaffinity="0" '
            f'mass="0"{geom_quat}/>'
        )
    w.world.append("</body>")


# ---------------------------------------------------------------------------------------------
# top level


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


def kitchen_mjcf(
    scenario: Scenario, tidybot_dir: Path, seed: int | None = None
) -> tuple[str, dict[str, Entity], dict[str, FixtureLayout], dict[str, ObjectLayout], int]:
    """Generate the kitchen MJCF text; the robot is referenced by path, never copied."""
    robot_path = robot_xml_path(tidybot_dir)
    used_seed = scenario.seed if seed is None else int(seed)
    rng = np.random.default_rng(used_seed)
    kitchen = scenario.kitchen
    w = _Writer()
    entities: dict[str, Entity] = {
        "floor": Entity("floor", "structure", "floor"),
        "wall": Entity("wall", "structure", "wall"),
        "robot": Entity("robot", "robot", "robot"),
    }
    rx, ry = kitchen.room_x, kitchen.room_y
    w.world.append(
        f'<geom name="floor/plane" type="plane" pos="{_f(((rx[0] + rx[1]) / 2, 0, 0))}" '
        f'size="{_f(((rx[1] - rx[0]) / 2 + 1, (ry[1] - ry[0]) / 2 + 1, 0.05))}" material="floor"/>'
    )
    w.box(
        w.world,
        "wall/back",
        (kitchen.wall_x + 0.05, (ry[0] + ry[1]) / 2, 1.3),
        (0.05, (ry[1] - ry[0]) / 2, 1.3),
        (0.93, 0.92, 0.88),
    )
    for side, yy in (("left", ry[1] + 0.05), ("right", ry[0] - 0.05)):
        w.box(
            w.world,
            f"wall/{side}",
            ((rx[0] + rx[1]) / 2, yy, 1.3),
            ((rx[1] - rx[0]) / 2, 0.05, 1.3),
            (0.9, 0.9, 0.86),
        )
    fixtures: dict[str, FixtureLayout] = {}
    for fixture in scenario.fixtures:
        fixtures[fixture.id] = _build_fixture(w, kitchen, fixture, entities)
    objects = _place_objects(scenario, fixtures, rng)
    specs = {o.id: o for o in scenario.objects}
    for oid, layout in objects.items():
        entities[oid] = Entity(oid, "object", layout.label, layout.fixture)
        _object_xml(w, scenario, layout, specs[oid], rng)
    lines = [
        f'<mujoco model="mimir_kitchen_{scenario.name}">',
        '  <compiler angle="radian" autolimits="true"/>',
        '  <option timestep="0.002" integrator="implicitfast" cone="elliptic" impratio="10"/>',
        '  <size memory="64M"/>',
        '  <visual><headlight diffuse="0.5 0.5 0.5" ambient="0.35 0.35 0.35" specular="0 0 0"/>',
        '    <map znear="0.01" zfar="50"/><quality shadowsize="0"/>',
        '    <global offwidth="1280" offheight="960"/></visual>',
        '  <statistic center="0.5 0 0.8" extent="3"/>',
        "  <asset>",
        f'    <model name="tidybot" file={quoteattr(str(robot_path))}/>',
        '    <texture name="floor" type="2d" builtin="checker" rgb1="0.55 0.5 0.45" '
        'rgb2="0.45 0.4 0.36" width="128" height="128"/>',
        '    <material name="floor" texture="floor" texrepeat="8 8" texuniform="true"/>',
        *[f"    {a}" for a in w.assets],
        "  </asset>",
        "  <worldbody>",
        '    <light name="ceiling" pos="0 0 3" dir="0.3 0 -1" directional="false" '
        'diffuse="0.6 0.6 0.6" castshadow="false"/>',
        '    <attach model="tidybot" body="base_link" prefix=""/>',
        *[f"    {line}" for line in w.world],
        "  </worldbody>",
        "  <equality>",
        *[
            f'    <connect name="grip_{fid}" body1="base" body2="{fx.moving_body}" anchor="0 0 0" '
            'active="false" solref="0.01 1"/>'
            for fid, fx in fixtures.items()
            if fx.moving_body is not None
        ],
        *[
            f'    <weld name="grasp_{oid}" body1="base" body2="{oid}" active="false" '
            'solref="0.01 1"/>'
            for oid in objects
        ],
        "  </equality>",
        "</mujoco>",
    ]
    return "\n".join(lines), entities, fixtures, objects, used_seed


def _pole_xyaxes() -> list[float]:
    c, s = math.cos(POLE_PITCH), math.sin(POLE_PITCH)
    # image x points to the robot's right (-y); image up is perpendicular to the view direction
    return [0.0, -1.0, 0.0, s, 0.0, c]


def build_scene(
    scenario: Scenario, tidybot_dir: Path | None = None, seed: int | None = None
) -> KitchenScene:
    """Compile the scenario into a MuJoCo model with the robot attached and the pole camera.

    Args:
        scenario: parsed scenario.
        tidybot_dir: robot model folder (default :func:`default_tidybot_dir`).
        seed: layout seed; ``None`` uses the scenario's own seed.

    Raises:
        ModelDirError: the robot model is missing.
        SceneBuildError: MuJoCo rejected the generated model.
    """
    folder = Path(tidybot_dir) if tidybot_dir is not None else default_tidybot_dir()
    mjcf, entities, fixtures, objects, used_seed = kitchen_mjcf(scenario, folder, seed)
    with _quiet_mujoco_warnings(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*empty prefix.*")
        try:
            spec = mujoco.MjSpec.from_string(mjcf)
            base = spec.body("base_link")
            if base is None:
                raise SceneBuildError("robot model has no base_link body")
            cam = base.add_camera(
                name="pole", pos=list(POLE_POS), fovy=POLE_FOVY, resolution=[640, 480]
            )
            cam.alt.type = mujoco.mjtOrientation.mjORIENTATION_XYAXES
            cam.alt.xyaxes = _pole_xyaxes()
            model = spec.compile()
        except (ValueError, mujoco.FatalError) as err:
            raise SceneBuildError(
                f"MuJoCo could not compile scenario {scenario.name}: {err}"
            ) from err
    geom_entity: list[str | None] = []
    base_id = model.body("base_link").id
    for g in range(model.ngeom):
        name = model.geom(g).name
        if "/" in name and name.split("/", 1)[0] in entities:
            geom_entity.append(name.split("/", 1)[0])
        elif model.body_rootid[model.geom_bodyid[g]] == base_id:
            geom_entity.append("robot")
        else:
            geom_entity.append(None)
    return KitchenScene(
        scenario=scenario,
        seed=used_seed,
        mjcf=mjcf,
        model=model,
        entities=entities,
        fixtures=fixtures,
        objects=objects,
        geom_entity=geom_entity,
    )


def openable_fixture_ids(scene: KitchenScene) -> list[str]:
    """Ids of fixtures with a door or drawer."""
    return [fid for fid, f in scene.fixtures.items() if f.type in OPENABLE_TYPES]
