"""One primitive request, from the remembered target to the executor's motions.

:func:`plan_and_run` finds the request's target again in the current camera views (trying the
pointing cameras in order), derives the geometry the primitive needs
(:mod:`mimir_robot.targeting`) and runs it on the :class:`~mimir_robot.executor.Executor`.
``move_to`` first drives to a stance computed from memory alone, then, when the target is in view,
squares up in front of its front face. What the robot holds between ``pick`` and ``place`` (how
far the object hangs below the hand) stays on the executor.

Failures to find or locate the target raise :class:`~mimir_robot.requests.RequestError` or
:class:`~mimir_robot.pointing.PointingError` before anything moves; the caller reports them.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
from scipy.spatial.transform import Rotation

from mimir.transforms import TransformError, planar_pose
from mimir_perception.camera import transform_points
from mimir_robot import pointing as pt
from mimir_robot import targeting as tg
from mimir_robot.executor import PARTIAL_OPEN, Articulation, Executor, GraspTarget, Outcome
from mimir_robot.profile import FloatArray, RobotProfile
from mimir_robot.requests import (
    PrimitiveRequest,
    RequestError,
    TargetSpec,
    UnknownTargetError,
)

#: Squaring up moves the base only when the refined stance differs by more than this (m, rad).
SQUARE_UP_MIN_SHIFT = (0.04, 0.05)

LOG = logging.getLogger(__name__)

_T = TypeVar("_T")


@dataclass(frozen=True)
class PlanContext:
    """What a primitive needs besides its request.

    Attributes:
        executor: runs the motions (and remembers what the hand holds).
        profile: the robot profile.
        cameras: pointing cameras, tried in order.
        view: ``view(camera, after)`` -> the newest view stamped at or after ``after``, or None.
        odom_from_map: the current map -> odom transform (4x4; localisation).
        now: the clock the views are stamped with (s).
        tolerance: largest distance between a seen instance and the remembered position (m).
        hand_camera: the camera on the arm, brought closer when the others miss a handle
            (None: never).
    """

    executor: Executor
    profile: RobotProfile
    cameras: tuple[str, ...]
    view: Callable[[str, float], tg.CameraView | None]
    odom_from_map: Callable[[], FloatArray]
    now: Callable[[], float]
    tolerance: float = 0.6
    hand_camera: str | None = "wrist"


def _one_look(ctx: PlanContext, spec: TargetSpec, since: float,
              derive: Callable[[tg.CameraView, tg.Found], _T],
              shown: list[tuple[tg.CameraView, tg.Found]] | None = None
              ) -> tuple[tg.CameraView, tg.Found, _T]:
    """One look: each pointing camera in turn, with its view stamped at or after ``since``,
    until one shows the target and ``derive`` gets what the primitive needs from it. Views
    that showed the target but gave ``derive`` nothing are added to ``shown``.

    Raises:
        UnknownTargetError, PointingError: no camera gave both; the error is of the kind the
            first camera met, and its message gives every camera's reason.
    """
    reasons: list[str] = []
    first: UnknownTargetError | pt.PointingError | None = None
    for camera in ctx.cameras:
        view = ctx.view(camera, since)
        if view is None:
            reasons.append(f"{camera}: no fresh frame")
            continue
        try:
            found = tg.find_target(view, spec, ctx.tolerance, ctx.profile.match_slack)
        except UnknownTargetError as err:
            reasons.append(str(err))
            first = first or err
            continue
        try:
            return view, found, derive(view, found)
        except (UnknownTargetError, pt.PointingError) as err:
            reasons.append(str(err))
            first = first or err
            if shown is not None:
                shown.append((view, found))
    kind = type(first) if first is not None else UnknownTargetError
    raise kind(f"{spec.describe()}: " + "; ".join(reasons))


def locate(ctx: PlanContext, spec: TargetSpec, after: float) -> tuple[tg.CameraView, tg.Found]:
    """The first pointing camera whose view (stamped at or after ``after``) shows the target.

    Raises:
        UnknownTargetError: no camera shows it (the reasons of every camera in the message).
    """
    view, found, _ = _one_look(ctx, spec, after, lambda _view, _found: None)
    return view, found


def look_until(ctx: PlanContext, spec: TargetSpec, after: float,
               derive: Callable[[tg.CameraView, tg.Found], _T],
               shown: list[tuple[tg.CameraView, tg.Found]] | None = None
               ) -> tuple[tg.CameraView, tg.Found, _T]:
    """The target and what the primitive needs of it (``derive``: the grasp or views), from
    the first pointing camera whose view shows both, looking again with fresh views up to the
    profile's ``target_looks`` times.

    Every camera that shows the target is asked in turn: one that sees the fixture may miss
    its handle or see it as a few pixels while another, lower or closer, has it. A segmenter
    misses a small part now and then and stereo depth has holes; a fresh look usually has
    them. The first look uses views stamped at or after ``after``. Views that showed the
    target without what ``derive`` needs are added to ``shown``.

    Raises:
        UnknownTargetError, PointingError: the last look's failure (:func:`_one_look`).
    """
    for look in range(ctx.profile.target_looks):
        try:
            return _one_look(ctx, spec, after if look == 0 else ctx.now(), derive, shown)
        except (UnknownTargetError, pt.PointingError):
            if look + 1 == ctx.profile.target_looks:
                raise
    raise AssertionError("target_looks is at least 1")


def _pose_goal(spec: TargetSpec, odom_from_map: FloatArray) -> tuple[float, float, float]:
    assert spec.position is not None
    p = transform_points(odom_from_map, np.asarray([spec.position]))[0]
    turn = float(Rotation.from_matrix(odom_from_map[:3, :3]).as_euler("xyz")[2])
    return float(p[0]), float(p[1]), (spec.yaw or 0.0) + turn


def _front_of(faces: Iterable[pt.FrontFace], point: FloatArray,
              depth_limit: float) -> FloatArray | None:
    """The level outward normal (odom) of a remembered front face the point lies behind.

    The point must lie within the face's width and height and no more than ``depth_limit``
    behind it.
    """
    for face in faces:
        centre = np.asarray(face.center, dtype=np.float64)
        normal = np.asarray(face.normal, dtype=np.float64)
        rel = np.asarray(point, dtype=np.float64) - centre
        inside = (abs(float(rel @ np.asarray(face.right))) <= face.width_m / 2.0
                  and abs(float(rel @ np.asarray(face.up))) <= face.height_m / 2.0 + 0.05)
        depth = -float(rel @ normal)
        level = _level(face.normal)
        if inside and 0.0 <= depth <= depth_limit and level is not None:
            return level
    return None


def wall_of(faces: Iterable[pt.FrontFace], point: FloatArray,
             depth_limit: float) -> FloatArray | None:
    """The level outward normal (odom) of the wall a point stands in, as the remembered front
    faces show it: the face nearest along its own plane of those the point lies no more than
    ``depth_limit`` behind, or half that in front (a remembered centre sits near the front a
    camera saw, and an open door drags it out); fixtures along one wall share their fronts'
    normal."""
    best: tuple[float, FloatArray] | None = None
    for face in faces:
        level = _level(face.normal)
        if level is None:
            continue
        rel = np.asarray(point, dtype=np.float64) - np.asarray(face.center, dtype=np.float64)
        depth = -float(rel @ level)
        along = float(np.linalg.norm(rel[:2] + level[:2] * depth))
        if -depth_limit / 2.0 <= depth <= depth_limit and (best is None or along < best[0]):
            best = (along, level)
    return None if best is None else best[1]


def _level(normal: pt.Vector3) -> FloatArray | None:
    """A face normal made level and unit, or None for a face that looks up or down."""
    return tg.level_unit(normal, 0.5)


def _move_to(req: PrimitiveRequest, ctx: PlanContext) -> Outcome:
    ex, prof = ctx.executor, ctx.profile
    odom_from_map = ctx.odom_from_map()
    if req.target.is_pose_only:
        return ex.move_to(_pose_goal(req.target, odom_from_map))
    if req.target.position is None:
        raise UnknownTargetError(f"move_to {req.target.describe()} needs a remembered position")
    target = transform_points(odom_from_map, np.asarray([req.target.position]))[0]
    measured = ex.faces.get(req.target.target_id) if req.target.target_id else None
    level = None if measured is None else _level(measured.normal)
    front = _front_of(ex.faces.values(), target, prof.fixture_depth)
    if measured is not None and level is not None:
        # a fixture this robot opened: stand square in front of the front it measured then (an
        # open door drags memory's centre of the fixture sideways and out)
        spot = np.asarray(measured.center, dtype=np.float64)[:2] + level[:2] * prof.face_standoff
        coarse = (float(spot[0]), float(spot[1]), math.atan2(-level[1], -level[0]))
    elif front is not None:
        # inside a fixture the robot has measured: stand in front of it, not on the way from
        # wherever the robot is (a neighbour's open door may hide the target from the side)
        coarse = tg.stance(target, (*(target[:2] + front[:2]), 0.0), prof.stance_distance)
    elif (wall := wall_of(ex.faces.values(), target, prof.fixture_depth)) is not None:
        # a fixture along a wall the robot has measured: in front of it, not on the line from
        # wherever the robot stands (from a neighbour, that line runs along the wall)
        coarse = tg.stance(target, (*(target[:2] + wall[:2]), 0.0), prof.stance_distance)
    else:
        coarse = tg.stance(target, ex.motion.base(), prof.stance_distance)
    out = ex.move_to(coarse)
    if not out.success or level is not None:
        # squaring up to what the cameras see of an opened fixture would face its open door
        return out
    try:
        view, found = locate(ctx, req.target, ctx.now())
    except UnknownTargetError as err:
        out.measurements["squared_up"] = 0.0
        out.message += f"; not squared up: {err}"
        return out
    odom_from_base = ctx.odom_from_map() @ view.map_from_base
    refined = tg.square_up(view, found, prof, odom_from_base)
    if refined is None:
        out.measurements["squared_up"] = 0.0
        return out
    shift = math.hypot(refined[0] - coarse[0], refined[1] - coarse[1])
    turn = abs(math.remainder(refined[2] - coarse[2], 2.0 * math.pi))
    if shift < SQUARE_UP_MIN_SHIFT[0] and turn < SQUARE_UP_MIN_SHIFT[1]:
        out.measurements["squared_up"] = 1.0
        return out
    second = ex.move_to(refined)
    second.measurements["squared_up"] = 1.0 if second.success else 0.0
    second.measurements["square_up_shift"] = shift
    routed = out.measurements.get("route_waypoints", 0.0) + second.measurements.get(
        "route_waypoints", 0.0)
    if routed:
        second.measurements["route_waypoints"] = routed  # waypoints of both drives
    return second


def _actuate(req: PrimitiveRequest, ctx: PlanContext, after: float) -> Outcome:
    """Open or close: find the handle in a view stamped at or after ``after`` and pull/push."""
    ex = ctx.executor
    opening = req.primitive == "open"
    # a fixture this executor has not moved stands closed: its handle is on its front, and one
    # out in front of it is a neighbour's (an open door's); a moved one may carry its own out
    closed = opening and req.target.target_id not in ex.opened

    def handle(v: tg.CameraView, f: tg.Found) -> tuple[GraspTarget, Articulation, pt.FrontFace]:
        return tg.handle_target(v, f, ctx.profile, ctx.now(), req.pixel, closed=closed)

    def moved_handle(v: tg.CameraView, f: tg.Found
                     ) -> tuple[GraspTarget, Articulation, pt.FrontFace]:
        return tg.handle_target(v, f, ctx.profile, ctx.now(), req.pixel)

    shown: list[tuple[tg.CameraView, tg.Found]] = []
    closer = 0.0  # wrist views it took to find a handle the looks missed
    try:
        view, _found, (grasp, art, front) = look_until(ctx, req.target, after, handle, shown)
    except UnknownTargetError as err:
        if not (closed and shown):
            raise
        (view, _found, (grasp, art, front)), closer = _handle_up_close(
            ctx, req.target, handle, err, shown[-1])
    fits = opening and ex.in_reach_to_open(grasp, art)
    shift = ex.pull_stance(grasp, art) if opening and not fits else None
    stepped = 0.0
    carried = False
    if shift is not None:
        # the pull would fold the arm past its reach from here (a low door swings its handle
        # up to the robot): step back square to the handle, then find it again from there
        odom_from_before = planar_pose(*ex.motion.base())
        odom_from_stance = odom_from_before @ planar_pose(*shift)
        moved = ex.move_to((float(odom_from_stance[0, 3]), float(odom_from_stance[1, 3]),
                            math.atan2(odom_from_stance[1, 0], odom_from_stance[0, 0])))
        stepped = math.hypot(shift[0], shift[1])
        LOG.info("%s: stepped %.2f m back for room to pull (%s)", req.target.describe(),
                 stepped, moved.code)
        try:
            view, _found, (grasp, art, front) = look_until(ctx, req.target, ctx.now(), handle)
        except (UnknownTargetError, pt.PointingError) as err:
            # from further back the handle may be a few pixels or missed by the segmenter: the
            # one seen before the step, carried over by odometry, is a few millimetres off
            here_from_before = np.linalg.inv(planar_pose(*ex.motion.base())) @ odom_from_before
            grasp, art = grasp.moved(here_from_before), art.moved(here_from_before)
            carried = True
            LOG.info("%s: the handle seen before the step, carried by odometry (%s)",
                     req.target.describe(), err)
        fits = ex.in_reach_to_open(grasp, art)
    if opening and req.target.target_id:
        # remember the front as it stood closed (odom): an open door hides it later
        odom_from_base = ctx.odom_from_map() @ view.map_from_base
        ex.faces[req.target.target_id] = tg.move_face(front, odom_from_base)
    if req.primitive == "close":
        out = ex.close(grasp, art)
        if out.success and req.target.target_id:
            ex.opened.discard(req.target.target_id)
        return out
    out = ex.open(grasp, art)
    out.measurements["pull_in_reach"] = 1.0 if fits else 0.0  # from where it pulled
    if closer:
        out.measurements["closer_look_views"] = closer
    if stepped:
        out.measurements["pull_stance_shift"] = stepped
        out.measurements["handle_carried"] = 1.0 if carried else 0.0
    if req.target.target_id and (
            out.measurements.get("path_fraction", 0.0) >= ctx.profile.moved_fraction):
        ex.opened.add(req.target.target_id)  # it moved: it may stand open from now on
    if out.code == PARTIAL_OPEN:
        out = _pull_again(req, ctx, out, moved_handle)
    return out


def _handle_up_close(ctx: PlanContext, spec: TargetSpec,
                     derive: Callable[[tg.CameraView, tg.Found], _T],
                     missed: UnknownTargetError, shown: tuple[tg.CameraView, tg.Found]
                     ) -> tuple[tuple[tg.CameraView, tg.Found, _T], float]:
    """After every look missed the handle of a closed fixture that a camera showed (``shown``:
    its last such view), bring the hand camera in front of the fixture's front
    (:func:`targeting.handle_look_views`, :meth:`Executor.look`) and find the handle there. In
    the close views the fixture is the instance sharing surface with the one ``shown``
    (:func:`targeting.find_same_surface`): a close view shows part of a front, whose centre
    may lie far from memory's.

    Raises:
        UnknownTargetError: ``missed`` itself where there is no hand camera or the hand holds
            something; else the hand camera found no handle either (``missed``'s reasons and
            the look's).
    """
    camera = ctx.hand_camera
    if camera is None or camera not in ctx.cameras or ctx.executor.holding:
        raise missed
    seen_view, seen = shown
    views = tg.handle_look_views(seen_view, seen, ctx.profile)
    known = tg.seen_surface(seen_view, seen)
    got: list[tuple[tg.CameraView, tg.Found, _T]] = []
    reasons: list[str] = []

    def at_view() -> bool:
        view = ctx.view(camera, ctx.now())
        if view is None:
            reasons.append(f"{camera}: no fresh frame")
            return False
        try:
            found = tg.find_same_surface(view, spec.label, known)
            got.append((view, found, derive(view, found)))
        except (UnknownTargetError, pt.PointingError) as err:
            reasons.append(str(err))
            return False
        return True

    out = ctx.executor.look(views, at_view, ctx.profile.handle_looks)
    LOG.info("%s: %s camera brought closer for the handle: %s %s", spec.describe(), camera,
             out.code, out.message)
    if got and out.success:
        return got[-1], out.measurements["look_views"]
    last = f" ({reasons[-1]})" if reasons else ""
    raise UnknownTargetError(f"{missed}; the {camera} camera brought closer: {out.code} "
                             f"{out.message}{last}")


def _pull_again(req: PrimitiveRequest, ctx: PlanContext, first: Outcome,
                handle: Callable[[tg.CameraView, tg.Found],
                                 tuple[GraspTarget, Articulation, pt.FrontFace]]) -> Outcome:
    """A second pull after an open that moved the fixture but stopped short of the path's
    end: the arm may have met the end of its reach on the branch it pulled with (its server
    refuses to swing the hand through the workspace), while the handle, seen afresh where it
    now stands, starts a pull the arm can follow further. The door half open in front of the
    opening would also stand in the way of the look that usually comes next.

    The second pull is the outcome when it opened the fixture or moved it further; otherwise
    (the handle not found again, out of reach, the fixture at its stop) the first one stands,
    with what the second did in its measurements (a fixture that will not go further is no
    lock: the first pull moved it)."""
    ex = ctx.executor
    try:
        _view, _found, (grasp, art, _front) = look_until(ctx, req.target, ctx.now(), handle)
    except REFUSALS as err:
        LOG.info("%s: no second pull, the handle was not found again (%s)",
                 req.target.describe(), err)
        first.measurements["second_pull"] = 0.0
        return first
    if not ex.in_reach_to_open(grasp, art):
        LOG.info("%s: no second pull, its handle is out of reach from here",
                 req.target.describe())
        first.measurements["second_pull"] = 0.0
        return first
    second = ex.open(grasp, art)
    moved = second.measurements.get("path_fraction", 0.0) >= ctx.profile.moved_fraction
    LOG.info("%s: second pull %s (%s)", req.target.describe(),
             "moved it" if moved else "did not move it", second.code)
    if not (second.success or moved):
        first.measurements["second_pull"] = 1.0
        first.measurements["second_pull_fraction"] = second.measurements.get(
            "path_fraction", 0.0)
        return first
    second.measurements["second_pull"] = 1.0
    second.measurements["first_pull_fraction"] = first.measurements.get("path_fraction", 0.0)
    for key in ("pull_stance_shift", "handle_carried"):
        if key in first.measurements:
            second.measurements[key] = first.measurements[key]
    second.measurements["pull_in_reach"] = 1.0
    return second


#: What finding a target or deriving its geometry may refuse a primitive with (a bad value
#: derived from a view is a ValueError); the primitive then fails with the reason.
REFUSALS: tuple[type[Exception], ...] = (RequestError, pt.PointingError, TransformError,
                                          ValueError)


def refused(primitive: str, err: Exception) -> Outcome:
    """The outcome of a primitive refused with ``err``: its ``code`` (upper case) when it has
    one, else EXECUTION_FAILED, and the error as the message."""
    code = getattr(err, "code", "EXECUTION_FAILED")
    code = code.upper() if isinstance(code, str) else "EXECUTION_FAILED"
    return Outcome(primitive, False, code, f"{type(err).__name__}: {err}")


def plan_and_run(req: PrimitiveRequest, ctx: PlanContext) -> Outcome:
    """Find the target, derive the geometry and run the primitive.

    Raises:
        RequestError: the target cannot be found, or a precondition fails before moving.
        PointingError: the target part cannot be located in 3D.
    """
    ex, prof = ctx.executor, ctx.profile
    name = req.primitive
    if name == "move_to":
        return _move_to(req, ctx)
    start = ctx.now()
    if name in ("open", "close"):
        out = _actuate(req, ctx, start)
        if out.code == "MISSED_GRASP":
            # one more try from a fresh look: the hand is back out of the way by now
            out = _actuate(req, ctx, ctx.now())
            out.measurements["retried"] = 1.0
        return out
    if name == "inspect":
        view, found = locate(ctx, req.target, start)
        known = ex.faces.get(req.target.target_id) if req.target.target_id else None
        face: pt.FrontFace | None = None
        if known is not None:
            base_from_odom = np.asarray(np.linalg.inv(ctx.odom_from_map() @ view.map_from_base),
                                        dtype=np.float64)
            face = tg.move_face(known, base_from_odom)
        views = tg.inspect_views(view, found, prof, face=face)
        return ex.inspect(views, on_view=lambda _i: None)
    if name == "pick":
        for attempt in range(2):  # a missed grasp is tried once more from a fresh look
            _view, _found, (grasp, hang) = look_until(
                ctx, req.target, start if attempt == 0 else ctx.now(),
                lambda v, f: tg.object_target(v, f, prof, ctx.now(), req.pixel))
            out = ex.pick(grasp)
            if out.code != "MISSED_GRASP":
                break
        if out.success:
            ex.held_hang = hang
        return out
    return _place(req, ctx, start)


def _place(req: PrimitiveRequest, ctx: PlanContext, start: float) -> Outcome:
    """Set the held object on the destination's top; where the reachable part of the top
    leaves no spot inside its edge, step the base toward the top once and look again."""
    ex, prof = ctx.executor, ctx.profile
    spec = req.destination or req.target
    view, found = locate(ctx, spec, start)
    try:
        point = tg.place_target(view, found, ex.held_hang, prof, req.slot)
        stepped = 0.0
    except UnknownTargetError as err:
        step = tg.place_step(view, found, prof)
        if step is None or not ex.holding:
            raise
        odom_from_before = planar_pose(*ex.motion.base())
        odom_goal = odom_from_before @ planar_pose(float(step[0]), float(step[1]), 0.0)
        moved = ex.move_to((float(odom_goal[0, 3]), float(odom_goal[1, 3]),
                            ex.motion.base()[2]))
        stepped = float(np.linalg.norm(step))
        LOG.info("%s: stepped %.2f m toward the top for a place (%s; %s)", spec.describe(),
                 stepped, moved.code, err)
        view, found = locate(ctx, spec, ctx.now())
        point = tg.place_target(view, found, ex.held_hang, prof, req.slot)
    out = ex.place(point)
    if stepped:
        out.measurements["place_step"] = stepped
        out.message += f" after a {stepped:.2f} m step toward the top"
    return out
