"""From a remembered target and the current camera view to the executor's geometry.

The planner names a target by memory id with its remembered label and map position. The
executor must find it again in what the robot sees now: a :class:`CameraView` bundles one camera's
registered depth, intrinsics and segmentation (objects and fixtures in ``objects``, parts such as
handles in ``parts``) with the camera and base poses at the frame's stamp. This module picks the
instance the request means (label compatible with the remembered one, nearest the remembered
position, within ``max_distance``), then derives what each primitive needs:

* :func:`stance` / :func:`square_up`: where the base should stand, first from memory alone, then
  refined from the target's front face when it is in view;
* :func:`handle_target`: a grasp on the fixture's handle (3D pointing) and a guess of how the
  door or drawer moves (its front face and where the handle sits on it);
* :func:`object_target`: a grasp on an object, approached level from the robot;
* :func:`place_target`: a spot on the destination's top surface (and :func:`place_step`, a
  step toward a top whose reachable part leaves none);
* :func:`inspect_views`: wrist camera poses looking into a fixture;
* :func:`handle_look_views`: wrist camera poses looking at a closed fixture's front, for a
  handle the pole and base cameras missed.

Nothing here knows a simulator: instances come from segmentation, positions from depth.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import cv2
import numpy as np
import numpy.typing as npt
from scipy.spatial import cKDTree

from mimir.labels import label_key
from mimir_perception.camera import Intrinsics, transform_points
from mimir_perception.segmentation import InstanceInfo, SegmentationResult
from mimir_robot import pointing as pt
from mimir_robot.executor import Articulation, GraspTarget
from mimir_robot.profile import FloatArray, RobotProfile
from mimir_robot.requests import TargetSpec, UnknownTargetError

HANDLE_LABEL = "handle"
SURFACE_BAND = 0.02   # m: points this close to a surface's height belong to it
SET_DOWN_GAP = 0.015  # m above the surface the held object's bottom is let go
EDGE_PROBES = 8       # directions in which a place spot looks for surface round it
EDGE_PROBE_TOL = 0.02  # m from a probe within which a seen surface point must lie
MIN_PLACE_STEP = 0.03  # m: a shorter step toward a top changes too little to take

#: Front faces for articulation guesses keep their full extent: the hinge lies on the far edge,
#: so trimming the edges moves the guessed hinge towards the handle (1 px of erosion still drops
#: depth that bleeds across the border).
FACE_CONFIG = pt.PointingConfig(face_erode_px=1, extent_trim_pct=0.0)
UP = np.array([0.0, 0.0, 1.0])
BORDER_PX = 2  # px at each edge of a frame that count as its border (a mask there is cut off)


@dataclass(frozen=True)
class CameraView:
    """One camera frame with everything needed to find things in it (base_link / map)."""

    camera: str
    stamp: float
    depth: npt.NDArray[np.floating]
    intrinsics: Intrinsics
    base_from_camera: FloatArray
    map_from_base: FloatArray
    objects: SegmentationResult
    parts: SegmentationResult | None = None


@dataclass(frozen=True)
class Found:
    """The instance a target was matched to: its mask and its centre (base_link and map)."""

    instance_id: int
    mask: npt.NDArray[np.bool_]
    centre_base: FloatArray
    centre_map: FloatArray
    distance: float  # m between the centre and the remembered position


def _points_base(view: CameraView, mask: npt.NDArray[np.bool_], limit: int = 4000) -> FloatArray:
    """Base-frame points of the valid depth pixels under ``mask`` (subsampled to ``limit``)."""
    depth = np.asarray(view.depth, dtype=np.float64)
    v, u = np.nonzero(mask & np.isfinite(depth) & (depth > 0.05))
    if v.size > limit:
        keep = np.linspace(0, v.size - 1, limit).astype(np.intp)
        v, u = v[keep], u[keep]
    z = depth[v, u]
    k = view.intrinsics
    cam = np.stack(((u - k.cx) / k.fx * z, (v - k.cy) / k.fy * z, z), axis=1)
    return transform_points(view.base_from_camera, cam)


def _instances_with_depth(view: CameraView, label: str
                          ) -> Iterator[tuple[InstanceInfo, npt.NDArray[np.bool_], FloatArray]]:
    """The object instances of ``view`` whose label is ``label``'s (any, for an empty label)
    and that have depth enough to place them: each with its mask and base-frame points."""
    key = label_key(label)
    for info in view.objects.instances:
        if key and label_key(info.label) != key:
            continue
        mask = view.objects.mask(info.instance_id)
        pts = _points_base(view, mask)
        if len(pts) >= 10:
            yield info, mask, pts


def find_target(view: CameraView, spec: TargetSpec, max_distance: float = 0.6,
                slack: float = 0.12) -> Found:
    """The instance of ``view.objects`` that ``spec`` names.

    An instance of the remembered label matches when its centre lies within ``slack`` plus half
    its own largest extent of the remembered position (a cabinet's remembered centre moves when
    its door opens; a bottle's does not, and the bottle beside it must not pass for it), or when
    along every axis the remembered position lies within ``slack`` plus half the instance's
    extent on that axis of its centre (a tall fixture whose remembered centre memory pulled low
    from views that showed only its foot, while the camera now sees it whole: far from the seen
    centre in height but inside what is seen), and never further than ``max_distance``; the
    nearest match wins.

    Raises:
        UnknownTargetError: no instance with a compatible label and usable depth lies close
            enough to the remembered position (or, without a position, there is not exactly one).
    """
    found: list[Found] = []
    misses: list[float] = []
    for info, mask, pts in _instances_with_depth(view, spec.label):
        centre = np.median(pts, axis=0)
        centre_map = transform_points(view.map_from_base, centre[None, :])[0]
        dist = (float(np.linalg.norm(centre_map - np.asarray(spec.position)))
                if spec.position is not None else 0.0)
        extents = np.percentile(pts, 95, axis=0) - np.percentile(pts, 5, axis=0)
        if dist <= min(max_distance, slack + float(np.max(extents)) / 2.0) or (
                dist <= max_distance and spec.position is not None
                and _within_extent(view, spec.position, centre_map, extents + 2.0 * slack)):
            found.append(Found(info.instance_id, mask, centre, centre_map, dist))
        else:
            misses.append(dist)
    if spec.position is None:
        if len(found) == 1:
            return found[0]
        raise UnknownTargetError(
            f"{spec.describe()}: {len(found)} candidates in the {view.camera} camera and no "
            "position to choose by")
    if not found:
        seen = f"; nearest candidate {min(misses):.2f} m away" if misses else ""
        raise UnknownTargetError(
            f"{spec.describe()} is not in view of the {view.camera} camera near where memory "
            f"has it{seen}")
    return min(found, key=lambda f: f.distance)


def find_same_surface(view: CameraView, label: str, known_map: FloatArray,
                      near: float = 0.03, least: int = 30) -> Found:
    """The instance labelled ``label`` in ``view`` that shares most surface with points known
    to lie on the target (map frame; another camera's view of it): at least ``least`` of its
    points within ``near`` of them.

    For a view that shows only part of a fixture (the wrist camera close in front of it), where
    the seen part's centre may lie far from the remembered centre and a neighbour's may lie
    nearer: the surface both views see decides, not the centres.

    Raises:
        UnknownTargetError: no instance of the label shares that much surface.
    """
    tree = cKDTree(np.asarray(known_map, dtype=np.float64))
    best: tuple[int, Found] | None = None
    for info, mask, pts in _instances_with_depth(view, label):
        pts_map = transform_points(view.map_from_base, pts)
        shared = int(np.count_nonzero(tree.query(pts_map, distance_upper_bound=near)[0] <= near))
        if shared >= least and (best is None or shared > best[0]):
            centre = np.median(pts, axis=0)
            centre_map = transform_points(view.map_from_base, centre[None, :])[0]
            best = (shared, Found(info.instance_id, mask, centre, centre_map, 0.0))
    if best is None:
        raise UnknownTargetError(f"no {label} in the {view.camera} camera shares surface with "
                                 "the one seen before")
    return best[1]


def seen_surface(view: CameraView, found: Found) -> FloatArray:
    """The map-frame points of a found instance's depth (for :func:`find_same_surface`)."""
    return transform_points(view.map_from_base, _points_base(view, found.mask))


def _within_extent(view: CameraView, position: tuple[float, float, float],
                   centre_map: FloatArray, extents_base: FloatArray) -> bool:
    """Whether ``position`` (map) lies in the box of ``extents_base`` (base_link axes) centred on
    ``centre_map``."""
    rotation = np.asarray(view.map_from_base, dtype=np.float64)[:3, :3]
    offset = rotation.T @ (np.asarray(position, dtype=np.float64) - centre_map)
    return bool(np.all(np.abs(offset) <= extents_base / 2.0))


# -- base ----------------------------------------------------------------------------------------
def stance(target_odom: FloatArray, robot_odom: tuple[float, float, float],
           distance: float) -> tuple[float, float, float]:
    """Stand ``distance`` from the target on the robot's side of it, facing it (odom x, y, yaw)."""
    tx, ty = float(target_odom[0]), float(target_odom[1])
    dx, dy = robot_odom[0] - tx, robot_odom[1] - ty
    norm = math.hypot(dx, dy)
    if norm < 1e-6:
        dx, dy, norm = -math.cos(robot_odom[2]), -math.sin(robot_odom[2]), 1.0
    x, y = tx + dx / norm * distance, ty + dy / norm * distance
    return x, y, math.atan2(ty - y, tx - x)


def square_up(view: CameraView, found: Found, profile: RobotProfile,
              odom_from_base: FloatArray) -> tuple[float, float, float] | None:
    """A refined stance (odom) from what the camera sees of the target, or None.

    A target whose front is a wide upright plane (a fixture) gets a stance straight in front of
    that face at ``face_standoff``; anything smaller (an object) one at ``pick_distance`` from
    its seen centre, on the robot's side. None when the target shows no usable geometry.
    """
    try:
        face = pt.fit_front_face(found.mask, view.depth, view.intrinsics, view.base_from_camera)
    except pt.PointingError:
        face = None
    if face is not None and face.width_m >= profile.min_face_width:
        n = np.asarray(face.normal, dtype=np.float64)
        level = np.array([n[0], n[1], 0.0])
        if np.linalg.norm(level) < math.cos(math.radians(30.0)):
            return None
        level /= np.linalg.norm(level)
        centre = np.asarray(face.center, dtype=np.float64)
        spot = centre + level * profile.face_standoff
    else:
        centre = np.asarray(found.centre_base, dtype=np.float64)
        toward = np.array([-centre[0], -centre[1], 0.0])  # from the object to the base centre
        if np.linalg.norm(toward) < 1e-6:
            return None
        spot = centre + toward / np.linalg.norm(toward) * profile.pick_distance
        spot[2] = centre[2]
    odom = transform_points(odom_from_base, np.stack([centre, spot]))
    yaw = math.atan2(odom[0, 1] - odom[1, 1], odom[0, 0] - odom[1, 0])
    return float(odom[1, 0]), float(odom[1, 1]), yaw


# -- grasps --------------------------------------------------------------------------------------
def _workspace(profile: RobotProfile) -> pt.WorkspaceBox:
    lo = profile.from_arm(np.asarray(profile.workspace_min))
    hi = profile.from_arm(np.asarray(profile.workspace_max))
    return pt.WorkspaceBox(tuple(lo), tuple(hi))


def _grasp_from(result: pt.PointingResult, profile: RobotProfile, depth: float) -> GraspTarget:
    rot = result.grasp.rotation()
    approach = rot[:, 2]
    finger = rot[:, 0] if profile.finger_axis == "x" else rot[:, 1]
    point = np.asarray(result.point_base, dtype=np.float64) + approach * depth
    return GraspTarget(point, approach, finger)


def move_face(face: pt.FrontFace, transform: FloatArray) -> pt.FrontFace:
    """A front face expressed in another frame (``transform`` maps its frame into the new one)."""
    rot = np.asarray(transform)[:3, :3]
    centre = transform_points(transform, np.asarray([face.center]))[0]

    def turn(v: pt.Vector3) -> pt.Vector3:
        x, y, z = (float(c) for c in rot @ np.asarray(v))
        return x, y, z

    return pt.FrontFace(center=(float(centre[0]), float(centre[1]), float(centre[2])),
        normal=turn(face.normal), up=turn(face.up), right=turn(face.right),
        width_m=face.width_m, height_m=face.height_m, n_points=face.n_points)


def handle_target(view: CameraView, found: Found, profile: RobotProfile, now: float,
                  pixel: tuple[float, float] | None = None, *, closed: bool = False
                  ) -> tuple[GraspTarget, Articulation, pt.FrontFace]:
    """Grasp on the target fixture's handle, a guess of its motion, and its front face.

    The handle is the ``handle`` part that touches the fixture's mask most. The approach is
    against the fixture's front face; the hinge (a door) or slide (a drawer) is guessed from
    where the handle sits on that face.

    With ``closed`` (the fixture should stand closed: an open the robot has not pulled on
    before), the handle must also stand on the fixture's front: one whose depth lies more than
    ``handle_proud_max`` in front of or behind that plane hangs on something else, such as a
    neighbour's door swung open in front of it, and is passed over however much of the mask it
    covers. A partly open door carries its own handle out of that plane, so closes and further
    pulls leave ``closed`` off.

    Raises:
        UnknownTargetError: no handle on the fixture in view.
        PointingError: the handle cannot be located in 3D (no depth, stale, out of reach).
    """
    if view.parts is None:
        raise UnknownTargetError(f"the {view.camera} camera has no part segmentation")
    grown = _dilate(found.mask, 7)
    front = _closed_front(view, found, profile) if closed else None
    best, best_overlap, off_front = None, 0, 0
    for info in view.parts.instances:
        if label_key(info.label) != HANDLE_LABEL:
            continue
        mask = view.parts.mask(info.instance_id)
        overlap = int(np.count_nonzero(mask & grown))
        if overlap <= best_overlap:
            continue
        if front is not None and _proud_of(view, mask, front) > profile.handle_proud_max:
            off_front += 1
            continue
        best, best_overlap = mask, overlap
    if best is None:
        away = f" ({off_front} off its front)" if off_front else ""
        raise UnknownTargetError(
            f"no handle seen on the target in the {view.camera} camera{away}")
    config = pt.PointingConfig(closing_axis=profile.finger_axis,  # type: ignore[arg-type]
                               max_age_s=2.0)
    result = pt.point_at(best, view.depth, view.intrinsics, view.base_from_camera,
                         stamp=view.stamp, now=now, workspace=_workspace(profile), pixel=pixel,
                         finger_axis_hint=(0.0, 1.0, 0.0), config=config)
    face = pt.fit_front_face(found.mask | best, view.depth, view.intrinsics,
                             view.base_from_camera, config=FACE_CONFIG)
    guess = pt.articulation_guess(face, np.asarray(result.point_base))
    grasp = _grasp_from(result, profile, profile.grasp_depth)
    if guess.kind == "revolute":
        bottom = float(np.asarray(face.center)[2] - face.height_m / 2.0)
        art = Articulation("revolute", np.asarray(guess.axis), np.asarray(guess.origin), bottom)
    else:  # a drawer, or a face the guess cannot place: pull straight out along the normal
        art = Articulation("prismatic", np.asarray(face.normal))
    return grasp, art, face


def _closed_front(view: CameraView, found: Found, profile: RobotProfile) -> pt.FrontFace | None:
    """The plane of a fixture's front from its own mask, or None where no wide front fits."""
    try:
        face = pt.fit_front_face(found.mask, view.depth, view.intrinsics, view.base_from_camera,
                                 config=FACE_CONFIG)
    except pt.PointingError:
        return None
    return face if face.width_m >= profile.min_face_width else None


def _proud_of(view: CameraView, mask: npt.NDArray[np.bool_], face: pt.FrontFace) -> float:
    """How far (m) the part under ``mask`` stands off ``face``'s plane, at the median of its
    depth points (0 where it has none: nothing to tell it by)."""
    pts = _points_base(view, mask)
    if len(pts) == 0:
        return 0.0
    offsets = (pts - np.asarray(face.center)) @ np.asarray(face.normal)
    return abs(float(np.median(offsets)))


def object_target(view: CameraView, found: Found, profile: RobotProfile, now: float,
                  pixel: tuple[float, float] | None = None) -> tuple[GraspTarget, float]:
    """A level grasp on an object from the robot's side, and how far its bottom lies below it.

    Raises:
        PointingError: no depth on the object, stale frame, out of reach.
    """
    config = pt.PointingConfig(closing_axis=profile.finger_axis,  # type: ignore[arg-type]
                               max_age_s=2.0)
    result = pt.point_at(found.mask, view.depth, view.intrinsics, view.base_from_camera,
                         stamp=view.stamp, now=now, workspace=_workspace(profile), pixel=pixel,
                         config=config)
    point = np.asarray(result.point_base, dtype=np.float64)
    pts = _points_base(view, found.mask)
    mount = np.asarray(profile.arm_mount)
    level = np.array([point[0] - mount[0], point[1] - mount[1], 0.0])
    level /= max(float(np.linalg.norm(level)), 1e-9)
    finger = np.cross(UP, level)
    # grip the object round its middle: centre height, a little behind the visible surface
    centre_z = float(np.median(pts[:, 2])) if len(pts) else float(point[2])
    grip = np.array([point[0], point[1], centre_z]) + level * profile.grasp_depth
    bottom = float(np.percentile(pts[:, 2], 2)) if len(pts) else centre_z
    return GraspTarget(grip, level, finger), max(0.0, centre_z - bottom)


def place_target(view: CameraView, found: Found, hang: float, profile: RobotProfile,
                 slot: tuple[float, float] = (0.5, 0.4)) -> FloatArray:
    """Hand position (base_link) that sets the held object on the destination's top surface.

    The top surface is the highest layer of the destination's points. Candidate spots on it must
    lie within easy reach of the arm (with the object above them) and have free space above them:
    no depth point of the whole view within ``place_radius`` of the spot between the surface and
    ``place_headroom`` above it (an open door, a shelf above the counter), and must lie at
    least ``place_edge_margin`` inside the surface seen round it, so that the object does not
    stand over the top's edge (or on the rim of something standing on it) and topple. Of the
    spots left, the one nearest the ``slot`` (u across from the robot's left, v from the front,
    over the reachable part of the surface) is taken. ``hang`` is how far the object's bottom
    lies below the hand.

    Raises:
        UnknownTargetError: no surface in view, or no free spot within reach and inside the
            edge.
    """
    top, layer = _top_layer(view, found)
    surface = cKDTree(layer[:, :2]) if len(layer) else None
    # where the hand will be with the object above the spot: within the box and easy reach
    above_spot = layer + np.array([0.0, 0.0, hang + SET_DOWN_GAP + profile.place_clearance])
    lo = profile.from_arm(np.asarray(profile.workspace_min))
    hi = profile.from_arm(np.asarray(profile.workspace_max))
    reach = np.linalg.norm(above_spot - np.asarray(profile.arm_mount), axis=1)
    layer = layer[np.all((above_spot >= lo) & (above_spot <= hi), axis=1)
                  & (reach <= profile.easy_reach)]
    if len(layer) < 10:
        raise UnknownTargetError("the destination's top surface is out of reach")
    x_lo, x_hi = np.percentile(layer[:, 0], [10, 60])
    y_lo, y_hi = np.percentile(layer[:, 1], [10, 90])
    u, v = slot
    wanted = np.array([x_lo + (x_hi - x_lo) * v, y_hi - (y_hi - y_lo) * u])
    scene = _points_base(view, np.isfinite(np.asarray(view.depth)), limit=20000)
    over = scene[(scene[:, 2] > top + SURFACE_BAND) & (scene[:, 2] < top + profile.place_headroom)]
    tree = cKDTree(over[:, :2]) if len(over) else None
    candidates = layer[:: max(len(layer) // 400, 1)]
    if tree is not None:
        nearest, _ = tree.query(candidates[:, :2], distance_upper_bound=profile.place_radius)
        candidates = candidates[np.isinf(nearest)]  # nothing over it within the radius
    if not len(candidates):
        raise UnknownTargetError(
            "no free spot on the destination's top surface: something hangs over every "
            "reachable part of it")
    assert surface is not None  # candidates come from the layer
    candidates = candidates[_inside(surface, candidates[:, :2], profile.place_edge_margin)]
    if not len(candidates):
        raise UnknownTargetError(
            "no free spot on the destination's top surface lies "
            f"{profile.place_edge_margin:.2f} m inside its edge within reach: the reachable "
            "part is a strip along the edge, or clutter covers the rest")
    spot = candidates[int(np.argmin(np.linalg.norm(candidates[:, :2] - wanted, axis=1)))]
    return np.array([spot[0], spot[1], top + hang + SET_DOWN_GAP])


def _top_layer(view: CameraView, found: Found) -> tuple[float, FloatArray]:
    """The height of the destination's top surface (base_link) and its points there.

    Raises:
        UnknownTargetError: the destination shows too few points with depth.
    """
    pts = _points_base(view, found.mask, limit=20000)
    if len(pts) < 30:
        raise UnknownTargetError("the destination shows no surface with depth")
    top = float(np.percentile(pts[:, 2], 95))
    return top, pts[np.abs(pts[:, 2] - top) < SURFACE_BAND]


def place_step(view: CameraView, found: Found, profile: RobotProfile) -> FloatArray | None:
    """How far (base_link x, y) to step straight toward the destination's top for a place.

    A stance made to work a fixture's front can leave only a strip along a counter's edge in
    easy reach, too narrow for a spot inside the edge. The step brings the top's near edge to
    ``place_standoff`` from the base centre, along the line from the base to the seen top.
    None when the top shows too few points, when the edge already lies within a few
    centimetres of that, or when the step would exceed ``max_place_step`` (a far edge is more
    likely a misjudged view than a place to drive to blind).

    Raises:
        UnknownTargetError: the destination shows no surface with depth.
    """
    _, layer = _top_layer(view, found)
    if len(layer) < 30:
        return None
    toward = np.mean(layer[:, :2], axis=0)
    size = float(np.linalg.norm(toward))
    if size < 1e-6:
        return None
    toward /= size
    near = float(np.percentile(layer[:, :2] @ toward, 2))
    step = near - profile.place_standoff
    if step < MIN_PLACE_STEP or step > profile.max_place_step:
        return None
    return np.asarray(toward * step, dtype=np.float64)


def _inside(surface: cKDTree, spots: FloatArray, margin: float) -> npt.NDArray[np.bool_]:
    """Which ``spots`` (x, y) have seen surface at least ``margin`` away in every probed
    direction (a probe lies one tolerance further out, so a point that answers it is no
    nearer than ``margin``)."""
    angles = np.linspace(0.0, 2.0 * math.pi, EDGE_PROBES, endpoint=False)
    ring = (margin + EDGE_PROBE_TOL) * np.stack((np.cos(angles), np.sin(angles)), axis=1)
    probes = (spots[:, None, :] + ring[None, :, :]).reshape(-1, 2)
    gap, _ = surface.query(probes, distance_upper_bound=EDGE_PROBE_TOL)
    return np.all(np.isfinite(gap).reshape(len(spots), EDGE_PROBES), axis=1)


def inspect_views(view: CameraView, found: Found, profile: RobotProfile, count: int = 3,
                  face: pt.FrontFace | None = None) -> list[tuple[FloatArray, FloatArray]]:
    """Wrist poses in front of a fixture's opening, looking in, swept across its width.

    ``face`` is the fixture's front as measured before it was opened (base_link); without it
    the front is estimated from the current view, where an open door may stand in the way.
    """
    pitch = profile.inspect_pitch
    sweep = profile.inspect_sweep
    offsets = np.linspace(-sweep, sweep, count) if count > 1 else np.zeros(1)
    if face is not None:
        inward = -np.asarray(face.normal, dtype=np.float64)
        inward[2] = 0.0
        inward /= max(float(np.linalg.norm(inward)), 1e-9)
        side = np.cross(UP, inward)
        rot = profile.tool_rotation(inward * math.cos(pitch) - UP * math.sin(pitch), side)
        spot = (np.asarray(face.center, dtype=np.float64) - inward * profile.inspect_standoff
                - UP * profile.inspect_drop)
        return [(spot + side * o, rot) for o in offsets]
    centre = found.centre_base
    mount = np.asarray(profile.arm_mount)
    level = np.array([centre[0] - mount[0], centre[1] - mount[1], 0.0])
    dist = float(np.linalg.norm(level))
    if dist < 1e-6:
        raise UnknownTargetError("the fixture's centre lies above the arm")
    level /= dist
    side = np.cross(UP, level)
    pts = _points_base(view, found.mask)
    # the front is where the carcass around the opening is nearest, in a band about the
    # centre: an open door swings out to one side and must not count as the front
    band = pts[np.abs((pts - centre) @ side) < 0.1] if len(pts) else pts
    front = (float(np.percentile(band @ level, 5)) if len(band) >= 10
             else float(centre @ level) - 0.2)
    approach = level * math.cos(pitch) - UP * math.sin(pitch)
    rot = profile.tool_rotation(approach, side)
    stand = (front - profile.inspect_standoff) - float(centre @ level)
    base_point = centre + level * stand - UP * profile.inspect_drop
    return [(base_point + side * o, rot) for o in offsets]


def handle_look_views(view: CameraView, found: Found, profile: RobotProfile
                      ) -> list[list[tuple[FloatArray, FloatArray]]]:
    """Wrist poses (hand position, rotation; base_link) that aim the wrist camera at a closed
    fixture's front, for a handle the other cameras missed: one group of poses per point
    aimed at, the poses of a group being ways to look at the same point (from above, level,
    from below, each from ``handle_look_standoff``), of which the caller takes the first the arm
    reaches.

    A handle sits near a corner of a door's front (by the edge away from the hinge, high on a
    low door, low on a high one), and the one the cameras missed may be on the part of the
    front they never saw: where the fixture's mask runs into the border of the frame, the
    front goes on past it. The points aimed at are the four corners of the front as seen,
    moved ``handle_look_past`` beyond the border where the frame cut the fixture, those with
    most such cuts first; then the middle. From ``handle_look_standoff`` the camera sees the
    patch of the front round each point, where a handle by that corner stands. The front is
    the plane fitted to the fixture in ``view``; where none fits, the side of the fixture
    facing the arm.

    Raises:
        UnknownTargetError: the fixture's centre lies above the arm (no side faces it), or
            too little of it has depth.
    """
    pts = _points_base(view, found.mask)
    if len(pts) < 10:
        raise UnknownTargetError(f"too little depth on the fixture in the {view.camera} camera")
    face = _closed_front(view, found, profile)
    inward = None if face is None else level_unit(-np.asarray(face.normal))
    if inward is None:
        inward = level_unit(found.centre_base - np.asarray(profile.arm_mount))
        if inward is None:
            raise UnknownTargetError("the fixture's centre lies above the arm")
    side = np.cross(UP, inward)        # to the left, looking in
    front = float(np.percentile(pts @ inward, 5))   # depth of the front, looking in
    across, high = pts @ side, pts[:, 2]
    left, right = float(np.percentile(across, 95)), float(np.percentile(across, 5))
    top, bottom = float(np.percentile(high, 95)), float(np.percentile(high, 5))
    cut = _cut_sides(view, found.mask, np.median(pts, axis=0), side)
    past = profile.handle_look_past
    spans = {"left": left + past if cut["left"] else left,
             "right": right - past if cut["right"] else right,
             "top": top + past if cut["top"] else top,
             "bottom": bottom - past if cut["bottom"] else bottom}
    aims: list[tuple[int, float, float]] = []
    for a_name in ("left", "right"):
        for h_name in ("top", "bottom"):
            unseen = int(cut[a_name]) + int(cut[h_name])
            aims.append((-unseen, spans[a_name], spans[h_name]))
    aims.sort(key=lambda aim: aim[0])              # stable: the frame's cuts first
    aims.append((0, (left + right) / 2.0, (top + bottom) / 2.0))
    groups: list[list[tuple[FloatArray, FloatArray]]] = []
    for _, a, h in aims:
        point = inward * front + side * a + UP * h
        group = []
        for tilt in (profile.handle_look_tilt, 0.0, -profile.handle_look_tilt):
            # tilt > 0: the hand above the point, looking down at it
            approach = inward * math.cos(tilt) - UP * math.sin(tilt)
            group.append((point - approach * profile.handle_look_standoff,
                          profile.tool_rotation(approach, side)))
        groups.append(group)
    return groups


def _cut_sides(view: CameraView, mask: npt.NDArray[np.bool_], centre: FloatArray,
               side: FloatArray) -> dict[str, bool]:
    """Where the frame's border cuts the fixture's mask, as sides of its front (left and right
    along ``side``, top and bottom): for each edge of the image that the mask runs into (its
    outer ``BORDER_PX`` rows or columns), the median base-frame point of the mask's pixels
    there, against ``centre``, the mask's own median point."""
    cut = {"left": False, "right": False, "top": False, "bottom": False}
    edges = (np.s_[:BORDER_PX, :], np.s_[-BORDER_PX:, :], np.s_[:, :BORDER_PX],
             np.s_[:, -BORDER_PX:])
    for edge in edges:
        on_edge = np.zeros_like(mask)
        on_edge[edge] = mask[edge]
        pts = _points_base(view, on_edge)
        if len(pts) < 3:
            continue
        off = np.median(pts, axis=0) - centre
        along, up = float(off @ side), float(off[2])
        if abs(up) >= abs(along):
            cut["top" if up > 0 else "bottom"] = True
        else:
            cut["left" if along > 0 else "right"] = True
    return cut


def level_unit(vector: FloatArray | pt.Vector3, least: float = 1e-6) -> FloatArray | None:
    """``vector`` made level and unit, or None where its level part is shorter than ``least``
    (it points up or down; a unit vector with ``least`` 0.5 leans more than 60 degrees)."""
    level = np.array([vector[0], vector[1], 0.0], dtype=np.float64)
    size = float(np.linalg.norm(level))
    return level / size if math.isfinite(size) and size > least else None


def _dilate(mask: npt.NDArray[np.bool_], radius: int) -> npt.NDArray[np.bool_]:
    kernel = np.ones((2 * radius + 1, 2 * radius + 1), np.uint8)
    return np.asarray(cv2.dilate(mask.astype(np.uint8), kernel) > 0)
