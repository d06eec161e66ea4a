"""Base routes around the doors the robot opened (mimir_robot.routes) and the executor's use of
them: the wall runs along y at x = 1.0 with fronts facing -x, as in the simulated kitchen."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from test_executor import make

from mimir_robot.pointing import FrontFace
from mimir_robot.primitive_plans import wall_of
from mimir_robot.profile import RobotProfile
from mimir_robot.routes import DoorStrip, base_route

PROFILE = RobotProfile()
RADIUS, MARGIN = PROFILE.base_radius, PROFILE.route_margin
WALL_X = 1.0


def front(y: float, width: float = 0.55, normal: tuple[float, float, float] = (-1.0, 0.0, 0.0),
          ) -> FrontFace:
    return FrontFace(center=(WALL_X, y, 1.2), normal=normal, up=(0.0, 0.0, 1.0),
                     right=(0.0, 1.0, 0.0), width_m=width, height_m=0.45, n_points=500)


def stance(y: float) -> tuple[float, float, float]:
    return (WALL_X - PROFILE.face_standoff, y, 0.0)


def clear_of(strip: DoorStrip, a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return not strip.crossed_by(np.asarray(a[:2]), np.asarray(b[:2]), RADIUS)


def test_no_open_door_no_detour() -> None:
    assert base_route(stance(-0.6), stance(0.6), [], radius=RADIUS, margin=MARGIN) == []
    # an open door far down the wall is not in the way
    assert base_route(stance(-0.6), stance(0.0), [front(3.0)], radius=RADIUS,
                      margin=MARGIN) == []


def test_leaving_an_open_door_backs_out_drives_along_a_clear_lane_and_comes_in() -> None:
    door = front(-0.6)
    start, goal = stance(-0.6), stance(0.6)
    via = base_route(start, goal, [door], radius=RADIUS, margin=MARGIN)
    assert len(via) == 2
    out, into = via
    # straight back from the start, keeping its heading; straight in to the goal, on its heading
    assert out[1] == pytest.approx(start[1]) and out[2] == start[2]
    assert into[1] == pytest.approx(goal[1]) and into[2] == goal[2]
    lane = WALL_X - out[0]
    assert lane == pytest.approx(door.width_m + RADIUS + MARGIN)
    strip = DoorStrip.of_face(door)
    assert strip is not None
    assert clear_of(strip, out, into) and clear_of(strip, into, goal)
    # the straight line it replaces runs into the door
    assert not clear_of(strip, start, goal)


def test_the_lane_clears_the_widest_door_in_the_way() -> None:
    via = base_route(stance(-1.2), stance(1.2), [front(-0.6, 0.4), front(0.0, 0.7)],
                     radius=RADIUS, margin=MARGIN)
    assert WALL_X - via[0][0] == pytest.approx(0.7 + RADIUS + MARGIN)


def test_a_start_already_on_the_lane_needs_no_back_out() -> None:
    start = (WALL_X - 1.6, -0.6, 0.3)
    via = base_route(start, stance(0.3), [front(0.0)], radius=RADIUS, margin=MARGIN)
    assert len(via) == 1 and via[0][1] == pytest.approx(0.3)


@pytest.mark.parametrize("face", [
    front(0.0, normal=(0.0, 0.0, 1.0)),          # faces up: no lane clears it
    front(0.0, width=float("nan")),
    front(0.0, normal=(float("nan"), 0.0, 0.0)),
])
def test_fronts_without_a_sideways_normal_are_ignored(face: FrontFace) -> None:
    assert DoorStrip.of_face(face) is None
    assert base_route(stance(-0.6), stance(0.6), [face], radius=RADIUS, margin=MARGIN) == []


def test_executor_drives_around_a_door_it_opened_and_straight_otherwise() -> None:
    ex, robot, _, samples = make()
    ex.faces["cab_1"] = front(0.0)
    goal = (0.2, 1.0, math.pi / 2)
    out = ex.move_to(goal)  # the door was never opened: straight
    assert out.success and "route_waypoints" not in out.measurements
    ex.opened.add("cab_1")
    samples.clear()
    back = (WALL_X - PROFILE.face_standoff, -1.0, 0.0)
    out = ex.move_to(back)
    assert out.success and out.code == "REACHED", out
    assert out.measurements["route_waypoints"] == 2.0
    strip = DoorStrip.of_face(ex.faces["cab_1"])
    assert strip is not None
    achieved = [x.achieved for x in samples if x.part == "base"]
    # the base never came nearer the open door's strip than its own radius
    for a, b in itertools.pairwise(achieved):
        assert clear_of(strip, a, b)
    s = robot.base_state()
    assert abs(s.x - back[0]) < 0.05 and abs(s.y - back[1]) < 0.05


def test_bad_route_inputs_are_refused() -> None:
    ex, _, _, _ = make()
    out = ex.move_to((float("nan"), 0.0, 0.0))
    assert not out.success and out.code == "EXECUTION_FAILED"
    with pytest.raises(ValueError):
        RobotProfile(base_radius=0.0)
    with pytest.raises(ValueError):
        RobotProfile(route_margin=-0.1)


def test_the_wall_of_a_fixture_not_yet_measured_comes_from_its_neighbours() -> None:
    faces = [front(0.0), front(-0.6)]
    # a remembered centre a little in front of the wall (as seen) or inside it: the wall's normal
    for x in (WALL_X - 0.05, WALL_X + 0.2):
        normal = wall_of(faces, np.array([x, 0.6, 1.2]), PROFILE.fixture_depth)
        assert normal is not None and normal[:2] == pytest.approx((-1.0, 0.0))
    # far in front of every front, or behind the fixtures' depth: no wall
    assert wall_of(faces, np.array([WALL_X - 0.8, 0.6, 1.2]), PROFILE.fixture_depth) is None
    assert wall_of(faces, np.array([WALL_X + 0.9, 0.6, 1.2]), PROFILE.fixture_depth) is None
    assert wall_of([], np.array([WALL_X, 0.6, 1.2]), PROFILE.fixture_depth) is None
    # a face that looks up gives no wall
    lid = front(0.0, normal=(0.0, 0.0, 1.0))
    assert wall_of([lid], np.array([WALL_X, 0.6, 1.2]), PROFILE.fixture_depth) is None
