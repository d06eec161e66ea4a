"""MJCF of the kitchen's objects: placement in their fixtures, appearance and grasp welds."""

from __future__ import annotations

import math

import numpy as np

from mimir_sim.mjcf import MjcfWriter, floats, rgba
from mimir_sim.scenario import CategorySpec, ObjectSpec, Scenario, VariantSpec
from mimir_sim.scene_layout import FixtureLayout, ObjectLayout

FOOT_RADIUS_FRACTION = 0.6  # foot disc radius of ellipsoid objects, relative to their x/y radius
FOOT_HALF_HEIGHT = 0.003
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


def slot_position(
    fixture: FixtureLayout,
    category: CategorySpec,
    slot: tuple[float, float],
    jitter: tuple[float, float] = (0.0, 0.0),
) -> tuple[float, float, float]:
    """Where an object of ``category`` stands at ``slot`` of a fixture (world frame, metres).

    ``slot`` is ``(u, v)`` in [0, 1]^2: u runs across the fixture from the robot's left (+y) to
    its right, v from the front to the back. The object keeps 1 cm plus its own horizontal
    half extent off the interior's sides (it sits in the middle where the interior is narrower
    than that) and rests 3 mm above the interior's floor. ``jitter`` is added to x and y
    before the result is clipped back inside those margins; the initial layout draws it from
    the scenario's seed, a scenario's move passes none.

    The interior is that of the closed fixture: a caller placing into an open drawer shifts x
    by the drawer's travel.
    """
    margin = _object_half_extent_xy(category) + 0.01
    x_lo, x_hi = fixture.interior_low[0] + margin, fixture.interior_high[0] - margin
    y_lo, y_hi = fixture.interior_low[1] + margin, fixture.interior_high[1] - margin
    if x_lo > x_hi:
        x_lo = x_hi = (fixture.interior_low[0] + fixture.interior_high[0]) / 2
    if y_lo > y_hi:
        y_lo = y_hi = (fixture.interior_low[1] + fixture.interior_high[1]) / 2
    # u runs from the robot's left (+y) to its right, v from the front to the back
    x = x_lo + slot[1] * (x_hi - x_lo) + jitter[0]
    y = y_hi - slot[0] * (y_hi - y_lo) + jitter[1]
    x = float(np.clip(x, x_lo, x_hi))
    y = float(np.clip(y, y_lo, y_hi))
    z = fixture.interior_low[2] + _object_half_height(category) + 0.003
    return (x, y, z)


def place_objects(
    scenario: Scenario,
    fixtures: dict[str, FixtureLayout],
    rng: np.random.Generator,
) -> dict[str, ObjectLayout]:
    """Initial layout of the scenario's objects: position, yaw and appearance of each.

    Objects without a slot are spread evenly across the middle of their fixture. Position
    jitter, yaw and any appearance the scenario leaves open are drawn from ``rng`` in a fixed
    order, so a seed always gives the same layout.
    """
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
            # x jitter is drawn before y jitter (the order fixes the layout of a seed)
            jitter_x = rng.uniform(-1, 1) * rand.object_jitter
            jitter_y = rng.uniform(-1, 1) * rand.object_jitter
            x, y, z = slot_position(fx, cat, slot, (jitter_x, jitter_y))
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


def object_xml(
    w: MjcfWriter, scenario: Scenario, obj: ObjectLayout, spec: ObjectSpec, rng: np.random.Generator
) -> None:
    cat = scenario.catalog[obj.category]
    oid = obj.id
    second = spec.variant.pattern_color or NAMED_COLORS[int(rng.integers(0, len(NAMED_COLORS)))]
    label_color = spec.variant.label_color or NAMED_COLORS[int(rng.integers(0, len(NAMED_COLORS)))]
    material = f"{oid}/mat"
    if obj.pattern in ("checker", "gradient"):
        w.assets.append(
            f'<texture name="{oid}/tex" type="cube" builtin="{obj.pattern}" '
            f'rgb1="{floats(obj.color)}" rgb2="{floats(second)}" width="64" height="64"/>'
        )
        w.assets.append(f'<material name="{material}" texture="{oid}/tex"/>')
    else:
        w.assets.append(f'<material name="{material}" rgba="{rgba(obj.color)}"/>')
    half_h = _object_half_height(cat)
    quat = (math.cos(obj.yaw / 2), 0.0, 0.0, math.sin(obj.yaw / 2))
    w.world.append(f'<body name="{oid}" pos="{floats(obj.pos)}" quat="{floats(quat)}">')
    w.world.append(f'<freejoint name="{oid}/free"/>')
    # capsules lie along x (pointing into the cabinet) so the gripper closes across them
    geom_quat = ' quat="0.7071068 0 0.7071068 0"' if cat.shape == "capsule" else ""
    w.world.append(
        f'<geom name="{oid}/body" type="{cat.shape}" size="{floats(cat.size)}" '
        f'material="{material}" '
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
            f'pos="0 0 {half_h * 0.3:.4g}" rgba="{rgba(second)}" contype="0" conaffinity="0" '
            f'mass="0"{geom_quat}/>'
        )
    w.world.append("</body>")
