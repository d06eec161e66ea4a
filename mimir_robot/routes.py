"""Base routes that keep clear of the doors the robot has opened.

A stance faces its fixture from ``face_standoff`` in front of it, and a door opened from there
stands out of the wall by up to its own width, right across the lane the next stance along the
wall lies in. A straight drive between two stances then runs into the door (the base stops
short, or it turns against the door and stops off its heading). The executor knows the front
faces of the fixtures it opened (measured while they were closed, in odom), so it can treat the
space in front of each as taken: the strip of the face's width that reaches out by that width.

:func:`base_route` returns the poses a move passes through. When the straight line from start to
goal, widened by the base's footprint radius, crosses none of those strips it returns no
waypoint. Otherwise it backs out from the start to a lane clear of every strip the line crosses,
drives along that lane, and comes in to the goal straight from the lane; the headings keep the
start's heading on the way out and take the goal's from the lane on, so the base never turns
next to a door.

Only plane geometry on odom poses; no robot, no ROS.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from mimir_robot.pointing import FrontFace

Pose2D = tuple[float, float, float]


@dataclass(frozen=True)
class DoorStrip:
    """The floor in front of an opened fixture a door may take (odom, level).

    Attributes:
        center: centre of the fixture's front (x, y).
        normal: unit outward normal of the front, level (x, y).
        half_width: half the front's width (m).
        reach: how far the strip reaches out of the front (m).
    """

    center: tuple[float, float]
    normal: tuple[float, float]
    half_width: float
    reach: float

    @classmethod
    def of_face(cls, face: FrontFace) -> DoorStrip | None:
        """The strip of a measured front; None for a front that does not face sideways (a
        lid, a face seen from above), which no base route can clear."""
        n = np.array([face.normal[0], face.normal[1]], dtype=np.float64)
        norm = float(np.linalg.norm(n))
        if not math.isfinite(norm) or norm < 0.5 or not (face.width_m > 0.0):
            return None
        n /= norm
        return cls((float(face.center[0]), float(face.center[1])), (float(n[0]), float(n[1])),
                   face.width_m / 2.0, face.width_m)

    def out_of(self, xy: np.ndarray) -> float:
        """Signed distance of a point in front of the face (negative behind it)."""
        return float((xy - np.asarray(self.center)) @ np.asarray(self.normal))

    def crossed_by(self, a: np.ndarray, b: np.ndarray, radius: float, samples: int = 64) -> bool:
        """Whether a disc of ``radius`` swept from ``a`` to ``b`` enters the strip."""
        normal = np.asarray(self.normal)
        side = np.array([-normal[1], normal[0]])
        centre = np.asarray(self.center)
        for s in np.linspace(0.0, 1.0, samples):
            rel = a + (b - a) * s - centre
            out, lateral = float(rel @ normal), float(rel @ side)
            # distance from the point to the strip's rectangle [0, reach] x [-hw, hw]
            dx = max(0.0 - out, 0.0, out - self.reach)
            dy = max(abs(lateral) - self.half_width, 0.0)
            if math.hypot(dx, dy) < radius:
                return True
        return False


def base_route(start: Pose2D, goal: Pose2D, faces: Iterable[FrontFace], *, radius: float,
               margin: float) -> list[Pose2D]:
    """Waypoints (odom x, y, theta) between ``start`` and ``goal``, without the goal itself.

    Args:
        start: where the base is.
        goal: where it should end.
        faces: fronts of the fixtures the robot opened (odom).
        radius: the base's footprint radius with the arm stowed (m).
        margin: clearance kept beyond a strip (m).

    Returns:
        No waypoint when the straight drive stays clear of every strip; else a pose in front of
        the start on a clear lane (start heading) and one in front of the goal on that lane
        (goal heading). A waypoint the base already stands at (it is on the lane) is left out.
    """
    a = np.array(start[:2], dtype=np.float64)
    b = np.array(goal[:2], dtype=np.float64)
    strips = [s for s in (DoorStrip.of_face(f) for f in faces) if s is not None]
    hit = [s for s in strips if s.crossed_by(a, b, radius)]
    if not hit or float(np.linalg.norm(b - a)) < 1e-6:
        return []
    normal = np.sum([np.asarray(s.normal) for s in hit], axis=0)
    if float(np.linalg.norm(normal)) < 1e-6:
        return []  # fronts facing each other across the way: no lane in front of both
    normal /= np.linalg.norm(normal)
    # every point of the lane lies this far out of each crossed front, along the common normal
    lane = max(s.reach + radius + margin for s in hit)

    def onto_lane(p: np.ndarray) -> np.ndarray:
        need = max(lane - min(s.out_of(p) for s in hit), 0.0)
        return p + normal * need

    out_a, out_b = onto_lane(a), onto_lane(b)
    via: list[Pose2D] = []
    if float(np.linalg.norm(out_a - a)) > margin:
        via.append((float(out_a[0]), float(out_a[1]), float(start[2])))
    if float(np.linalg.norm(out_b - b)) > margin:
        via.append((float(out_b[0]), float(out_b[1]), float(goal[2])))
    return via
