"""Finding a remembered target in a camera view and deriving each primitive's geometry.

Scenes are ray cast in the test (the renderer of test_pointing.py): rectangles for doors,
handles, bottles, a counter top and whatever hangs over it, seen by a camera on a base at the map
origin.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from test_executor import make as make_executor
from test_pointing import INTRINSICS, Rect, camera_pose, door, render, vertical_bar

from mimir_perception.segmentation import SegmentationResult, compose_instances
from mimir_robot import targeting as tg
from mimir_robot.primitive_plans import PlanContext, _front_of, look_until, plan_and_run
from mimir_robot.profile import ProfileError, RobotProfile
from mimir_robot.requests import PrimitiveRequest, TargetSpec, UnknownTargetError

PROFILE = RobotProfile()
STAMP = 50.0
EYE = np.eye(4)


def view_of(rects: list[Rect], labels: list[str], parts: dict[int, str] | None = None,
            pose: np.ndarray | None = None) -> tg.CameraView:
    """A camera view whose object segmentation labels ``rects[i]`` as ``labels[i]`` (an empty
    label leaves it out) and whose part segmentation holds the rects named in ``parts``."""
    pose = camera_pose() if pose is None else pose
    depth, hit = render(rects, pose)
    parts = parts or {}
    obj = [i for i, name in enumerate(labels) if name and i not in parts]
    objects = compose_instances([hit == i for i in obj], [labels[i] for i in obj],
                                [1.0] * len(obj), min_pixels=5, stamp=STAMP, camera="pole")
    part_ids = sorted(parts)
    part_seg = (compose_instances([hit == i for i in part_ids], [parts[i] for i in part_ids],
                                  [1.0] * len(part_ids), min_pixels=5, stamp=STAMP,
                                  camera="pole")
                if part_ids else SegmentationResult.empty(*hit.shape, STAMP, "pole"))
    return tg.CameraView("pole", STAMP, depth, INTRINSICS, pose, EYE, objects, part_seg)


def bottle(y: float, x: float = 1.0, z: float = 0.85) -> Rect:
    return Rect((x, y, z), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0), 0.035, 0.09)


# -- finding the target --------------------------------------------------------------------------
def test_the_instance_nearest_the_remembered_position_is_the_target() -> None:
    view = view_of([bottle(0.15), bottle(-0.15)], ["ketchup", "ketchup"])
    left = tg.find_target(view, TargetSpec("ketchup_1", "ketchup", (1.0, 0.14, 0.85)))
    right = tg.find_target(view, TargetSpec("ketchup_2", "ketchup", (1.0, -0.16, 0.84)))
    assert left.centre_map[1] > 0.1 and right.centre_map[1] < -0.1
    assert left.distance < 0.05 and right.distance < 0.05


def test_a_small_object_is_not_taken_for_one_remembered_a_hand_span_away() -> None:
    view = view_of([bottle(-0.15)], ["ketchup"])
    # the remembered ketchup stood 0.3 m to the left: the one in view is another bottle
    with pytest.raises(UnknownTargetError, match=r"not in view.*nearest candidate 0\.3"):
        tg.find_target(view, TargetSpec("ketchup_1", "ketchup", (1.0, 0.15, 0.85)))


def test_a_large_fixture_matches_with_more_slack() -> None:
    view = view_of([door(width=0.6)], ["cabinet"])
    # a cabinet's remembered centre drifts when its door is seen open: 0.3 m off still binds
    found = tg.find_target(view, TargetSpec("cabinet_1", "cabinet", (1.05, 0.3, 0.9)))
    assert found.distance > 0.25


def tall_front() -> Rect:
    """A cabinet front 0.8 m high whose lower half the pitched camera does not see: the seen part
    spans about 0.54 m across and 0.37 m in height round a centre at 0.71 m."""
    return door(width=0.6, height=0.8, center_z=0.5)


def test_a_fixture_remembered_low_in_what_is_seen_of_it_matches() -> None:
    view = view_of([tall_front()], ["cabinet"])
    # memory fused close views of the lower part: its centre sits 0.41 m from the seen centre,
    # more than slack plus half the largest extent, but inside the seen extent axis by axis
    found = tg.find_target(view, TargetSpec("cabinet_5", "cabinet", (1.0, 0.3, 0.45)))
    assert 0.39 < found.distance < 0.45


def test_the_extent_test_runs_along_the_base_axes_wherever_the_base_stands() -> None:
    yaw = math.radians(70.0)
    map_from_base = np.eye(4)
    map_from_base[:3, :3] = [[math.cos(yaw), -math.sin(yaw), 0.0],
                             [math.sin(yaw), math.cos(yaw), 0.0], [0.0, 0.0, 1.0]]
    map_from_base[:3, 3] = (2.0, -1.0, 0.0)
    view = dataclasses.replace(view_of([tall_front()], ["cabinet"]), map_from_base=map_from_base)
    remembered = tuple(float(v) for v in map_from_base @ np.array([1.0, 0.3, 0.45, 1.0]))[:3]
    found = tg.find_target(view, TargetSpec("cabinet_5", "cabinet", remembered))
    assert 0.39 < found.distance < 0.45


@pytest.mark.parametrize(("remembered", "why"), [
    ((1.0, 0.0, 0.3), "below what is seen by more than the slack"),
    ((1.3, 0.3, 0.45), "behind the seen front by more than the slack"),
    ((1.0, 0.5, 0.7), "beside what is seen by more than the slack"),
])
def test_a_fixture_remembered_outside_what_is_seen_of_it_is_refused(
        remembered: tuple[float, float, float], why: str) -> None:
    view = view_of([tall_front()], ["cabinet"])
    with pytest.raises(UnknownTargetError, match="nearest candidate"):
        tg.find_target(view, TargetSpec("cabinet_5", "cabinet", remembered))


def test_inside_what_is_seen_is_still_no_further_than_the_tolerance() -> None:
    view = view_of([tall_front()], ["cabinet"])
    with pytest.raises(UnknownTargetError, match=r"nearest candidate 0\.4"):
        tg.find_target(view, TargetSpec("cabinet_5", "cabinet", (1.0, 0.3, 0.45)),
                       max_distance=0.35)


@pytest.mark.parametrize("spec", [
    TargetSpec("mustard_1", "mustard", (1.0, 0.15, 0.85)),   # no such label in view
    TargetSpec("ketchup_1", "ketchup", None),                # two candidates, no position
])
def test_targets_that_cannot_be_told_are_refused(spec: TargetSpec) -> None:
    view = view_of([bottle(0.15), bottle(-0.15)], ["ketchup", "ketchup"])
    with pytest.raises(UnknownTargetError):
        tg.find_target(view, spec)


# -- the base ------------------------------------------------------------------------------------
def test_stance_faces_the_target_from_the_robot_side() -> None:
    x, y, yaw = tg.stance(np.array([2.0, 1.0, 1.0]), (0.0, 1.0, 0.0), 0.8)
    assert (x, y) == pytest.approx((1.2, 1.0)) and yaw == pytest.approx(0.0)
    x, y, yaw = tg.stance(np.array([0.0, 0.0, 0.0]), (0.0, -2.0, 0.0), 0.5)
    assert (x, y) == pytest.approx((0.0, -0.5)) and yaw == pytest.approx(math.pi / 2)


def test_square_up_stands_straight_in_front_of_a_wide_face() -> None:
    view = view_of([door(width=0.6)], ["cabinet"])
    found = tg.find_target(view, TargetSpec("cabinet_1", "cabinet", (1.0, 0.0, 0.9)))
    x, y, yaw = tg.square_up(view, found, PROFILE, EYE) or (9.0, 9.0, 9.0)
    assert x == pytest.approx(1.0 - PROFILE.face_standoff, abs=0.02)
    assert abs(y) < 0.03 and abs(yaw) < 0.03


def test_square_up_stands_at_pick_distance_from_a_small_object() -> None:
    view = view_of([bottle(0.15)], ["ketchup"])
    found = tg.find_target(view, TargetSpec("ketchup_1", "ketchup", (1.0, 0.15, 0.85)))
    x, y, _ = tg.square_up(view, found, PROFILE, EYE) or (9.0, 9.0, 9.0)
    assert math.hypot(found.centre_base[0] - x, found.centre_base[1] - y) == pytest.approx(
        PROFILE.pick_distance, abs=0.01)


def test_remembered_fronts_tell_where_to_stand_for_what_is_inside() -> None:
    view = view_of([door(width=0.6)], ["cabinet"])
    found = tg.find_target(view, TargetSpec("cabinet_1", "cabinet", (1.0, 0.0, 0.9)))
    face = tg.handle_target(
        view_of([door(width=0.6), vertical_bar(-0.22)], ["cabinet", ""], {1: "handle"}),
        found, PROFILE, STAMP)[2]
    inside = np.array([1.15, 0.1, 0.85])
    assert _front_of([face], inside, 0.6) == pytest.approx(np.array([-1.0, 0.0, 0.0]), abs=0.02)
    assert _front_of([face], np.array([1.15, 0.9, 0.85]), 0.6) is None  # beside it
    assert _front_of([face], np.array([0.6, 0.0, 0.85]), 0.6) is None  # in front of it


# -- grasps --------------------------------------------------------------------------------------
def test_handle_target_grips_the_bar_and_guesses_the_hinge_on_the_far_edge() -> None:
    bar = vertical_bar(-0.22)
    view = view_of([door(width=0.6), bar], ["cabinet", ""], {1: "handle"})
    found = tg.find_target(view, TargetSpec("cabinet_1", "cabinet", (1.0, 0.0, 0.9)))
    grasp, art, face = tg.handle_target(view, found, PROFILE, STAMP + 0.1)
    centre = np.asarray(bar.center)
    assert np.linalg.norm(grasp.point - (centre + np.array([PROFILE.grasp_depth, 0, 0]))) < 0.015
    assert grasp.approach @ np.array([1.0, 0.0, 0.0]) > 0.99   # into the door
    assert abs(grasp.finger[2]) < 0.1                           # fingers close sideways
    assert art.kind == "revolute" and art.point[1] > 0.2        # hinge on the other side
    assert art.bottom == pytest.approx(0.6, abs=0.03)
    assert face.width_m == pytest.approx(0.6, abs=0.03)


def test_a_fixture_without_a_handle_in_view_is_refused() -> None:
    view = view_of([door(width=0.6)], ["cabinet"])
    found = tg.find_target(view, TargetSpec("cabinet_1", "cabinet", (1.0, 0.0, 0.9)))
    with pytest.raises(UnknownTargetError, match="no handle"):
        tg.handle_target(view, found, PROFILE, STAMP)
    no_parts = tg.CameraView(view.camera, view.stamp, view.depth, view.intrinsics,
                             view.base_from_camera, view.map_from_base, view.objects, None)
    with pytest.raises(UnknownTargetError, match="no part segmentation"):
        tg.handle_target(no_parts, found, PROFILE, STAMP)


def open_neighbour_handle(y: float = 0.1, standoff: float = 0.35) -> Rect:
    """A neighbour's door swung open in front of the target carries its handle out here: a
    larger bar than the target's own, ``standoff`` m in front of the target's front."""
    return Rect((1.0 - standoff, y, 0.95), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0), 0.03, 0.16)


def neighbour_scene(own: bool = True) -> tuple[tg.CameraView, tg.Found]:
    rects = [door(width=0.6), open_neighbour_handle()]
    parts = {1: "handle"}
    if own:
        rects.append(vertical_bar(-0.22, length=0.1))
        parts[2] = "handle"
    view = view_of(rects, ["cabinet"] + [""] * (len(rects) - 1), parts)
    return view, tg.find_target(view, TargetSpec("cabinet_1", "cabinet", (1.0, 0.0, 0.9)))


def test_a_closed_fixture_is_gripped_by_the_handle_on_its_front() -> None:
    """A neighbour's open door hangs its handle in front of the target and covers more of the
    target's mask than the target's own: an open of a closed fixture takes the one on its
    front; a pull on a door that may stand open (its handle out of the plane) takes the one
    covering the mask most, as before."""
    view, found = neighbour_scene()
    grasp, _, _ = tg.handle_target(view, found, PROFILE, STAMP, closed=True)
    assert grasp.point[0] > 0.95 and grasp.point[1] == pytest.approx(-0.22, abs=0.02)
    loose, _, _ = tg.handle_target(view, found, PROFILE, STAMP)
    assert loose.point[0] < 0.7 and loose.point[1] == pytest.approx(0.1, abs=0.03)


def test_a_closed_fixture_with_only_a_handle_off_its_front_in_view_is_refused() -> None:
    view, found = neighbour_scene(own=False)
    with pytest.raises(UnknownTargetError, match=r"no handle seen on the target .*1 off its front"):
        tg.handle_target(view, found, PROFILE, STAMP, closed=True)


@pytest.mark.parametrize("value", [0.0, -0.1, float("nan")])
def test_a_profile_without_room_for_a_handle_is_refused(value: float) -> None:
    with pytest.raises(ProfileError, match="handle_proud_max"):
        dataclasses.replace(PROFILE, handle_proud_max=value)


def test_object_target_grips_level_round_the_middle() -> None:
    view = view_of([bottle(0.1, x=0.8)], ["ketchup"])
    found = tg.find_target(view, TargetSpec("ketchup_1", "ketchup", (0.8, 0.1, 0.85)))
    grasp, hang = tg.object_target(view, found, PROFILE, STAMP)
    assert abs(grasp.approach[2]) < 1e-9 and abs(grasp.finger[2]) < 1e-9
    assert grasp.point[2] == pytest.approx(0.85, abs=0.02)
    assert hang == pytest.approx(0.09, abs=0.02)  # half the bottle's height below the grip


# -- places --------------------------------------------------------------------------------------
def counter(z: float = 0.7) -> Rect:
    return Rect((0.95, 0.0, z), (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), 0.35, 0.5)


def overhang(y_lo: float, y_hi: float, z: float = 0.95) -> Rect:
    """A plate above the counter (an open door's lower edge) over ``y_lo``..``y_hi``."""
    return Rect((0.9, (y_lo + y_hi) / 2, z), (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), 0.3,
                (y_hi - y_lo) / 2)


def test_place_target_picks_a_free_reachable_spot_on_the_top() -> None:
    pose = camera_pose(position=(0.2, 0.0, 1.3), yaw_deg=0.0, pitch_down_deg=40.0)
    view = view_of([counter(), overhang(-0.5, 0.05)], ["counter", ""], pose=pose)
    found = tg.find_target(view, TargetSpec("counter_1", "counter", (0.95, 0.0, 0.7)))
    spot = tg.place_target(view, found, 0.1, PROFILE)
    assert spot[2] == pytest.approx(0.7 + 0.1 + 0.015, abs=0.01)
    assert spot[1] > 0.05 + 0.08 - 0.01  # clear of what hangs over the right part
    above = spot + np.array([0.0, 0.0, 0.1])
    assert np.linalg.norm(above - np.asarray(PROFILE.arm_mount)) <= PROFILE.easy_reach + 1e-6


def test_place_target_keeps_the_object_inside_the_edge() -> None:
    """A counter whose front edge the arm barely clears: only a strip along the edge is in easy
    reach, and the spot is taken from it no nearer the edge than the margin (a bottle set 3 mm
    inside the edge of a counter fell to the floor)."""
    pose = camera_pose(position=(0.2, 0.0, 1.3), yaw_deg=0.0, pitch_down_deg=40.0)
    edge = 0.6
    top = Rect((edge + 0.35, 0.0, 0.7), (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), 0.35, 0.5)
    view = view_of([top], ["counter"], pose=pose)
    found = tg.find_target(view, TargetSpec("counter_1", "counter", (0.95, 0.0, 0.7)))
    spot = tg.place_target(view, found, 0.1, PROFILE)
    assert spot[0] >= edge + PROFILE.place_edge_margin - 0.01
    # a reachable strip narrower than the margin leaves no spot, and the error says why
    narrow = dataclasses.replace(PROFILE, place_edge_margin=0.2)
    with pytest.raises(UnknownTargetError, match="inside its edge"):
        tg.place_target(view, found, 0.1, narrow)


@pytest.mark.parametrize(("edge", "step"), [(0.6, 0.15), (0.47, None), (0.9, None)])
def test_place_step_brings_the_near_edge_to_the_standoff(edge: float,
                                                         step: float | None) -> None:
    """Near enough already, or so far that the view is more likely wrong: no step."""
    pose = camera_pose(position=(0.2, 0.0, 1.3), yaw_deg=0.0, pitch_down_deg=40.0)
    top = Rect((edge + 0.2, 0.05, 0.7), (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), 0.2, 0.5)
    view = view_of([top], ["counter"], pose=pose)
    found = tg.find_target(view, TargetSpec("counter_1", "counter", (edge + 0.2, 0.0, 0.7)))
    got = tg.place_step(view, found, PROFILE)
    if step is None:
        assert got is None
    else:
        assert got is not None
        assert got[0] == pytest.approx(step, abs=0.02) and abs(got[1]) < 0.02
    no_depth = dataclasses.replace(view, depth=np.full_like(view.depth, np.nan))
    with pytest.raises(UnknownTargetError, match="no surface with depth"):
        tg.place_step(no_depth, found, PROFILE)


def test_a_place_from_a_stance_too_far_back_steps_up_to_the_top() -> None:
    """From where the robot works a fixture's front, a counter's edge lies 0.66 m ahead and only
    a strip along it is in easy reach: the place steps the base up to the top and sets the
    object down inside the edge from there (the fake robot runs the motions)."""
    def top_view(edge: float) -> tg.CameraView:
        top = Rect((edge + 0.3, 0.0, 0.75), (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), 0.3, 0.5)
        return view_of([top], ["counter"], pose=camera_pose(position=(0.2, 0.0, 1.3),
                                                            yaw_deg=0.0, pitch_down_deg=40.0))
    far, spec = top_view(0.66), TargetSpec("counter_1", "counter", (0.96, 0.0, 0.75))
    with pytest.raises(UnknownTargetError, match="inside its edge"):
        tg.place_target(far, tg.find_target(far, spec), 0.09, PROFILE)
    ex, _robot, _arm, _samples = make_executor()
    ex.holding, ex.held_hang = True, 0.09
    views = [far, top_view(0.45)]  # what the camera sees before and after the step
    ctx, _asked = _context(views)
    ctx = dataclasses.replace(ctx, executor=ex)
    out = plan_and_run(PrimitiveRequest("place", spec), ctx)
    assert out.code == "PLACED", out
    assert out.measurements["place_step"] == pytest.approx(0.21, abs=0.02)
    assert "m step toward the top" in out.message
    assert ex.motion.base()[0] == pytest.approx(0.21, abs=0.03) and not ex.holding
    # the spot, in the base's frame after the step, lies inside the edge seen from there
    assert out.measurements["place_x"] >= 0.45 + PROFILE.place_edge_margin - 0.01
    # without a view after the step the place fails with the reason, still holding
    ex.holding = True
    ctx, _asked = _context([top_view(0.66)])
    ctx = dataclasses.replace(ctx, executor=ex, profile=RobotProfile(target_looks=1))
    with pytest.raises(UnknownTargetError, match="no fresh frame"):
        plan_and_run(PrimitiveRequest("place", spec), ctx)
    assert ex.holding


def test_place_target_keeps_clear_of_a_gap_in_the_top() -> None:
    """A hole in the seen top (an object standing on it hides the surface) is an edge too."""
    pose = camera_pose(position=(0.2, 0.0, 1.3), yaw_deg=0.0, pitch_down_deg=40.0)
    left = Rect((0.95, 0.3, 0.7), (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), 0.35, 0.2)
    right = Rect((0.95, -0.3, 0.7), (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), 0.35, 0.2)
    view = view_of([left, right], ["counter", "counter"], pose=pose)
    whole = view.objects.instance_ids > 0
    found = dataclasses.replace(tg.find_target(view, TargetSpec("counter_1", "counter",
                                                                (0.95, 0.3, 0.7))), mask=whole)
    spot = tg.place_target(view, found, 0.1, PROFILE, slot=(0.5, 0.4))  # wanted: the gap
    assert abs(spot[1]) >= 0.1 + PROFILE.place_edge_margin - 0.01


def test_place_target_refuses_a_surface_with_no_free_spot() -> None:
    pose = camera_pose(position=(0.2, 0.0, 1.3), yaw_deg=0.0, pitch_down_deg=40.0)
    view = view_of([counter(), overhang(-0.6, 0.6)], ["counter", ""], pose=pose)
    found = tg.find_target(view, TargetSpec("counter_1", "counter", (0.95, 0.0, 0.7)))
    with pytest.raises(UnknownTargetError, match="no free spot"):
        tg.place_target(view, found, 0.1, PROFILE)


def test_inspect_views_stand_in_front_of_the_remembered_front() -> None:
    bar = vertical_bar(-0.22)
    view = view_of([door(width=0.6), bar], ["cabinet", ""], {1: "handle"})
    found = tg.find_target(view, TargetSpec("cabinet_1", "cabinet", (1.0, 0.0, 0.9)))
    face = tg.handle_target(view, found, PROFILE, STAMP)[2]
    views = tg.inspect_views(view, found, PROFILE, face=face)
    assert len(views) == 3
    for pos, rot in views:
        assert pos[0] == pytest.approx(1.0 - 0.15, abs=0.02)   # in front of the face
        assert rot[:, 2] @ np.array([1.0, 0.0, 0.0]) > 0.9     # looking in


# -- looking again -------------------------------------------------------------------------------
def _context(views: list[tg.CameraView], profile: RobotProfile = PROFILE) -> tuple[PlanContext,
                                                                                   list[float]]:
    """A plan context whose pole camera yields ``views`` one per request (None after them)."""
    asked: list[float] = []

    def view(camera: str, after: float) -> tg.CameraView | None:
        asked.append(after)
        return views.pop(0) if views else None

    ctx = PlanContext(executor=None, profile=profile, cameras=("pole",),  # type: ignore[arg-type]
                      view=view, odom_from_map=lambda: EYE, now=lambda: STAMP + len(asked))
    return ctx, asked


def test_a_part_missed_in_one_view_is_found_in_a_fresh_one() -> None:
    spec = TargetSpec("cabinet_1", "cabinet", (1.0, 0.0, 0.9))
    missed = view_of([door(width=0.6)], ["cabinet"])  # the segmenter missed the handle
    seen = view_of([door(width=0.6), vertical_bar(-0.22)], ["cabinet", ""], {1: "handle"})
    ctx, asked = _context([missed, seen])
    view, _found, (grasp, _art, _face) = look_until(
        ctx, spec, STAMP, lambda v, f: tg.handle_target(v, f, PROFILE, STAMP))
    assert view is seen and grasp.approach[0] > 0.99
    assert asked[0] == STAMP and asked[1] > STAMP  # the second look asks for a newer view


def test_looking_gives_up_after_the_profiles_looks_with_the_last_reason() -> None:
    spec = TargetSpec("cabinet_1", "cabinet", (1.0, 0.0, 0.9))
    ctx, asked = _context([view_of([door(width=0.6)], ["cabinet"]) for _ in range(5)],
                          RobotProfile(target_looks=2))
    with pytest.raises(UnknownTargetError, match="no handle"):
        look_until(ctx, spec, STAMP, lambda v, f: tg.handle_target(v, f, PROFILE, STAMP))
    assert len(asked) == 2
    ctx, asked = _context([])  # no frame at all
    with pytest.raises(UnknownTargetError, match="no fresh frame"):
        look_until(ctx, spec, STAMP, lambda v, f: tg.handle_target(v, f, PROFILE, STAMP))
    assert len(asked) == PROFILE.target_looks
    with pytest.raises(ValueError, match="target_looks"):
        RobotProfile(target_looks=0)


def test_a_handle_one_camera_misses_is_taken_from_the_next_in_the_same_look() -> None:
    """The pole camera sees the door but not its handle (too small from a step back); the base
    camera, asked next in the same look, has it. Where none has it, the error names each."""
    spec = TargetSpec("cabinet_1", "cabinet", (1.0, 0.0, 0.9))
    missed = view_of([door(width=0.6)], ["cabinet"])
    seen = view_of([door(width=0.6), vertical_bar(-0.22)], ["cabinet", ""], {1: "handle"})
    seen = tg.CameraView("base", seen.stamp, seen.depth, seen.intrinsics, seen.base_from_camera,
                         seen.map_from_base, seen.objects, seen.parts)
    by_camera = {"pole": missed, "base": seen}
    asked: list[tuple[str, float]] = []

    def view(camera: str, after: float) -> tg.CameraView | None:
        asked.append((camera, after))
        return by_camera.get(camera)

    ctx = PlanContext(executor=None, profile=PROFILE,  # type: ignore[arg-type]
                      cameras=("pole", "base", "wrist"), view=view,
                      odom_from_map=lambda: EYE, now=lambda: STAMP + 1.0)
    got, _found, (grasp, _art, _face) = look_until(
        ctx, spec, STAMP, lambda v, f: tg.handle_target(v, f, PROFILE, STAMP))
    assert got is seen and grasp.approach[0] > 0.99
    assert asked == [("pole", STAMP), ("base", STAMP)]  # one look, the wrist never asked
    by_camera["base"] = missed
    asked.clear()
    with pytest.raises(UnknownTargetError) as err:
        look_until(ctx, spec, STAMP, lambda v, f: tg.handle_target(v, f, PROFILE, STAMP))
    assert "no handle seen on the target in the pole camera" in str(err.value)
    assert "wrist: no fresh frame" in str(err.value)
    assert len(asked) == 3 * PROFILE.target_looks


def test_an_open_passes_over_a_handle_off_the_front_until_the_fixture_has_moved() -> None:
    """The executor's open of a fixture it has not moved refuses the neighbour's handle; once
    it has moved the fixture (a door that may stand partly open), the handle is taken."""
    spec = TargetSpec("cabinet_1", "cabinet", (1.0, 0.0, 0.9))
    ex, _robot, _arm, _samples = make_executor()
    ctx, _asked = _context([neighbour_scene(own=False)[0]] * 4, RobotProfile(target_looks=1))
    ctx = dataclasses.replace(ctx, executor=ex)
    with pytest.raises(UnknownTargetError, match="off its front"):
        plan_and_run(PrimitiveRequest("open", spec), ctx)
    ex.opened.add("cabinet_1")
    ctx, _asked = _context([neighbour_scene(own=False)[0]] * 4, RobotProfile(target_looks=1))
    ctx = dataclasses.replace(ctx, executor=ex)
    out = plan_and_run(PrimitiveRequest("open", spec), ctx)
    assert out.code == "MISSED_GRASP", out  # the grasp was tried (the fake hand holds nothing)


# -- the wrist brought closer for a missed handle ------------------------------------------------
def _aims(views: list[list[tuple[np.ndarray, np.ndarray]]]) -> list[np.ndarray]:
    """Where each group's first pose looks on the plane x = DOOR_X (base_link)."""
    aims = []
    for pos, rot in (group[0] for group in views):
        aims.append(pos + rot[:, 2] * (1.0 - pos[0]) / rot[0, 2])
    return aims


def test_handle_look_views_aim_at_the_corners_of_the_seen_front_then_its_middle() -> None:
    """A door wholly in view: one group per corner of its front, then its middle; each
    group looks at one point from above, level and from below, from the profile's standoff,
    and its approach passes through that point."""
    view = view_of([door(width=0.6, height=0.6, center_z=0.9)], ["cabinet"],
                   pose=camera_pose(position=(0.2, 0.0, 0.9), yaw_deg=0.0, pitch_down_deg=0.0))
    found = tg.find_target(view, TargetSpec("cabinet_1", "cabinet", (1.0, 0.0, 0.9)))
    views = tg.handle_look_views(view, found, PROFILE)
    assert len(views) == 5 and all(len(group) == 3 for group in views)
    standoff, tilt = PROFILE.handle_look_standoff, PROFILE.handle_look_tilt
    for group in views:
        ends = [pos + rot[:, 2] * standoff for pos, rot in group]
        assert all(np.allclose(end, ends[0], atol=1e-9) for end in ends)  # one point
        assert ends[0][0] == pytest.approx(1.0, abs=0.02)                 # on the front
        assert [rot[2, 2] for _pos, rot in group] == pytest.approx(
            [-math.sin(tilt), 0.0, math.sin(tilt)], abs=1e-6)  # from above, level, below
        assert all(np.allclose(rot.T @ rot, np.eye(3), atol=1e-9) for _pos, rot in group)
    aims = _aims(views)
    assert aims[-1][1:] == pytest.approx([0.0, 0.9], abs=0.03)           # the middle, last
    corners = {(round(float(a[1]), 1), round(float(a[2]), 1)) for a in aims[:4]}
    assert corners == {(-0.3, 0.6), (-0.3, 1.2), (0.3, 0.6), (0.3, 1.2)}  # of the 0.6 m door


def test_handle_look_views_aim_past_where_the_frame_cut_the_fixture_first() -> None:
    """A front wider than the frame: the look aims past the left and right borders first (the
    part no camera saw), ``handle_look_past`` beyond what was seen; a fixture with no side
    facing the arm is refused."""
    view = view_of([door(width=3.0, height=0.3, center_z=0.9)], ["cabinet"])
    found = tg.find_target(view, TargetSpec("cabinet_1", "cabinet", (1.0, 0.0, 0.9)))
    seen_y = tg._points_base(view, found.mask)[:, 1]
    aims = _aims(tg.handle_look_views(view, found, PROFILE))
    past = PROFILE.handle_look_past
    first = [float(a[1]) for a in aims[:4]]
    assert sum(y > np.percentile(seen_y, 95) + past - 0.01 for y in first) == 2   # left
    assert sum(y < np.percentile(seen_y, 5) - past + 0.01 for y in first) == 2    # right
    middle = (np.percentile(seen_y, 95) + np.percentile(seen_y, 5)) / 2.0
    assert len(aims) == 5 and float(aims[4][1]) == pytest.approx(middle, abs=0.01)
    narrow = view_of([door(width=0.2, height=0.6, center_z=0.9)], ["cabinet"])
    overhead = dataclasses.replace(
        tg.find_target(narrow, TargetSpec("cabinet_1", "cabinet", (1.0, 0.0, 0.9))),
        centre_base=np.array([0.0, 0.0, 1.5]))
    with pytest.raises(UnknownTargetError, match="above the arm"):
        tg.handle_look_views(narrow, overhead, PROFILE)
    bare = dataclasses.replace(found, mask=np.zeros_like(found.mask))
    with pytest.raises(UnknownTargetError, match="too little depth"):
        tg.handle_look_views(view, bare, PROFILE)


def test_a_part_of_a_fixture_is_found_by_the_surface_another_view_saw() -> None:
    """A close view of the door's left part is the door the far view saw (they share
    surface), though the centre of what it shows lies off the far view's; a neighbour's door
    beside it, or another label, is not."""
    far = view_of([door(width=0.6)], ["cabinet"])
    known = tg.seen_surface(far, tg.find_target(far, TargetSpec("cabinet_1", "cabinet",
                                                                (1.0, 0.0, 0.9))))
    close_pose = camera_pose(position=(0.6, 0.2, 0.9), yaw_deg=0.0, pitch_down_deg=0.0)
    neighbour = Rect((1.0, 0.65, 0.9), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0), 0.3, 0.3)
    close = view_of([door(width=0.6), neighbour], ["cabinet", "cabinet"], pose=close_pose)
    found = tg.find_same_surface(close, "cabinet", known)
    assert found.centre_base[1] == pytest.approx(0.12, abs=0.05)
    only_neighbour = view_of([neighbour], ["cabinet"], pose=close_pose)
    with pytest.raises(UnknownTargetError, match="shares surface"):
        tg.find_same_surface(only_neighbour, "cabinet", known)
    with pytest.raises(UnknownTargetError, match="no drawer"):
        tg.find_same_surface(close, "drawer", known)


def _closer_look_context(wrist_sees: bool, cameras: tuple[str, ...] = ("pole", "wrist"),
                         pole_sees_door: bool = True) -> tuple[PlanContext, list[str]]:
    """The pole camera sees the door without its handle (or only a chair where it stands); the
    wrist camera sees a bottle while the hand is at its carry pose and, brought before the
    door, the door with its handle when ``wrist_sees`` (the door alone otherwise)."""
    ex, _robot, _arm, _samples = make_executor()
    home = PROFILE.from_arm(np.asarray(PROFILE.retract_pos))
    pole = view_of([door(width=0.6)], ["cabinet" if pole_sees_door else "chair"])
    near = camera_pose(position=(0.55, 0.0, 0.9), yaw_deg=0.0, pitch_down_deg=0.0)
    rects = [door(width=0.6), vertical_bar(-0.22)] if wrist_sees else [door(width=0.6)]
    close = dataclasses.replace(
        view_of(rects, ["cabinet", ""][:len(rects)], {1: "handle"} if wrist_sees else None,
                pose=near), camera="wrist")
    elsewhere = dataclasses.replace(view_of([bottle(0.0)], ["ketchup"]), camera="wrist")
    asked: list[str] = []

    def view(camera: str, after: float) -> tg.CameraView | None:
        away = float(np.linalg.norm(ex.motion.hand()[0] - home)) > 0.1
        asked.append(camera + (" away" if away else ""))
        if camera == "wrist":
            return close if away else elsewhere
        return pole

    ctx = PlanContext(executor=ex, profile=RobotProfile(target_looks=1), cameras=cameras,
                      view=view, odom_from_map=lambda: EYE, now=lambda: STAMP + 1.0)
    return ctx, asked


def test_an_open_brings_the_wrist_closer_for_a_handle_every_camera_missed() -> None:
    spec = TargetSpec("cabinet_1", "cabinet", (1.0, 0.0, 0.9))
    ctx, asked = _closer_look_context(wrist_sees=True)
    out = plan_and_run(PrimitiveRequest("open", spec), ctx)
    assert out.code == "MISSED_GRASP", out  # the grasp was tried (the fake hand holds nothing)
    assert out.measurements["closer_look_views"] == 1.0  # the first close view had it
    # the one look (pole, then the wrist at its carry pose), then the wrist brought closer; the
    # fixture's view from that look places the close views, no camera is asked again for it
    assert asked[:3] == ["pole", "wrist", "wrist away"]
    # the wrist sees the door but no handle either: the open fails with both looks' reasons
    ctx, asked = _closer_look_context(wrist_sees=False)
    with pytest.raises(UnknownTargetError) as err:
        plan_and_run(PrimitiveRequest("open", spec), ctx)
    text = str(err.value)
    assert "no handle seen on the target in the pole camera" in text
    assert "the wrist camera brought closer: NOT_SEEN" in text
    assert asked.count("wrist away") == PROFILE.handle_looks
    home = PROFILE.from_arm(np.asarray(PROFILE.retract_pos))
    assert float(np.linalg.norm(ctx.executor.motion.hand()[0] - home)) <= PROFILE.ee_pos_tol


def test_no_closer_look_without_a_hand_camera_or_a_fixture_in_view() -> None:
    spec = TargetSpec("cabinet_1", "cabinet", (1.0, 0.0, 0.9))
    for ctx, asked in (_closer_look_context(True, cameras=("pole",)),
                       _closer_look_context(True, pole_sees_door=False)):
        with pytest.raises(UnknownTargetError) as err:
            plan_and_run(PrimitiveRequest("open", spec), ctx)
        assert "brought closer" not in str(err.value)
        assert not any(a.endswith("away") for a in asked)  # the arm never left its carry pose
