"""MJCF of the kitchen's fixtures: carcasses, hinged doors, drawers, handles and their locks.

A locked door or drawer is built with a joint range of only ``LOCKED_PLAY``, so a pull meets
resistance without motion, as a real lock would.
"""

from __future__ import annotations

from mimir_sim.mjcf import MjcfWriter, floats
from mimir_sim.scenario import FixtureSpec, KitchenSpec
from mimir_sim.scene_layout import (
    DOOR_T,
    HANDLE_HALF_LEN,
    HANDLE_RADIUS,
    HANDLE_STANDOFF,
    LOCKED_PLAY,
    PANEL,
    UNLOCKED_RANGE,
    Entity,
    FixtureLayout,
)


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
    w: MjcfWriter,
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


def _moving_part_color(color: tuple[float, float, float]) -> tuple[float, float, float]:
    """A door's or drawer's colour: its carcass colour a shade darker."""
    r, g, b = (min(1.0, c * 0.92) for c in color)
    return (r, g, b)


def _handle(out: list[str], hid: str, bar_pos: tuple[float, float, float], vertical: bool) -> None:
    """A bar handle on two standoffs with its grip site; ``bar_pos`` is the bar centre, the door
    face is at +x."""
    bx, by, bz = bar_pos
    out.append(
        f'<geom name="{hid}/bar" type="cylinder" fromto="'
        + (
            floats((bx, by, bz - HANDLE_HALF_LEN, bx, by, bz + HANDLE_HALF_LEN))
            if vertical
            else floats((bx, by - HANDLE_HALF_LEN, bz, bx, by + HANDLE_HALF_LEN, bz))
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
            f'<geom name="{hid}/standoff{k}" type="box" pos="{floats(spos)}" '
            f'size="{floats((HANDLE_STANDOFF / 2, 0.006, 0.006))}" rgba="0.55 0.55 0.58 1"/>'
        )
    out.append(
        f'<site name="{hid}" pos="{floats(bar_pos)}" size="0.01" rgba="1 0 0 0.3" group="4"/>'
    )


def build_fixture(
    w: MjcfWriter, kitchen: KitchenSpec, fixture: FixtureSpec, entities: dict[str, Entity]
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
    door_color = _moving_part_color(fixture.color)
    w.world.append(f'<body name="{door_id}" pos="{floats((hinge_x, hinge_y, 0.0))}">')
    w.world.append(
        f'<joint name="{fid}_hinge" type="hinge" axis="0 0 {-1 if left else 1}" '
        f'range="0 {rng:.4g}" damping="2" frictionloss="2.0" armature="0.01"/>'
    )
    w.box(
        w.world,
        f"{door_id}/panel",
        (DOOR_T / 2, (y1 + y0) / 2 - hinge_y, door_cz),
        (DOOR_T / 2, fixture.width / 2 - 0.003, door_h),
        door_color,
        extra=' mass="1.5"',
    )
    _handle(w.world, handle_id, (bar_x - hinge_x, handle_y - hinge_y, handle_z), True)
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
    w: MjcfWriter,
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
    color = _moving_part_color(fixture.color)
    rng = UNLOCKED_RANGE["drawer"] if not fixture.locked else LOCKED_PLAY
    dh = (dz1 - dz0) / 2
    w.world.append(f'<body name="{drawer_id}" pos="{floats((x0, fixture.y, dz0))}">')
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
    _handle(w.world, handle_id, bar, False)
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
