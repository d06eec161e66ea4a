"""Set-of-Mark overlays: scene graph nodes projected into a calibrated camera image.

For each node whose centroid projects inside the image (in front of the camera), a filled
circle and the node id are drawn, so the planner can refer to what it sees by scene graph id
(messymem.md B.3). Projection uses :func:`mimir_perception.camera.project_points` with the
camera's intrinsics and its pose in the map at the image stamp.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np
import numpy.typing as npt

from mimir_memory.graph import SceneNode
from mimir_perception.camera import Intrinsics, project_points
from mimir_perception.errors import PerceptionError
from mimir_planner.errors import OverlayError

_PALETTE = (
    (230, 25, 75), (60, 180, 75), (255, 225, 25), (0, 130, 200), (245, 130, 48),
    (145, 30, 180), (70, 240, 240), (240, 50, 230), (210, 245, 60), (250, 190, 212),
)


@dataclass(frozen=True)
class Mark:
    """A drawn mark: node id, pixel position (u right, v down) and depth (m)."""

    node_id: str
    u: float
    v: float
    depth: float


def draw_set_of_marks(
    rgb: npt.NDArray[np.uint8],
    nodes: Sequence[SceneNode],
    intrinsics: Intrinsics,
    camera_to_map: npt.ArrayLike,
    *,
    radius_px: int = 9,
    max_marks: int = 40,
) -> tuple[npt.NDArray[np.uint8], tuple[Mark, ...]]:
    """Draw the visible nodes on a copy of ``rgb``.

    Args:
        rgb: (H, W, 3) uint8 image matching ``intrinsics``.
        nodes: Candidate nodes (centroids in the map frame).
        intrinsics: Pinhole intrinsics of the image.
        camera_to_map: 4x4 pose of the camera optical frame in the map.
        radius_px: Circle radius.
        max_marks: At most this many marks, nearest first.

    Returns:
        The annotated copy and the marks drawn.

    Raises:
        OverlayError: Wrong image shape or type, or a malformed pose.
    """
    if not isinstance(rgb, np.ndarray) or rgb.dtype != np.uint8 or rgb.ndim != 3:
        raise OverlayError("overlay needs an (H, W, 3) uint8 image")
    if rgb.shape[2] != 3 or rgb.shape[:2] != (intrinsics.height, intrinsics.width):
        raise OverlayError(
            f"image shape {rgb.shape[:2]} does not match the intrinsics "
            f"{(intrinsics.height, intrinsics.width)}"
        )
    out = np.ascontiguousarray(rgb.copy())
    if not nodes:
        return out, ()
    points = np.array([n.centroid for n in nodes], dtype=np.float64)
    try:
        proj = project_points(points, intrinsics, camera_to_map)
    except PerceptionError as err:
        raise OverlayError(f"cannot project the nodes: {err}") from err
    order = sorted(np.flatnonzero(proj.visible).tolist(), key=lambda i: float(proj.depth[i]))
    marks: list[Mark] = []
    for rank, i in enumerate(order[:max_marks]):
        u, v = float(proj.uv[i, 0]), float(proj.uv[i, 1])
        colour = _PALETTE[rank % len(_PALETTE)]
        centre = (round(u), round(v))
        cv2.circle(out, centre, radius_px, colour, thickness=-1, lineType=cv2.LINE_AA)
        cv2.circle(out, centre, radius_px, (0, 0, 0), thickness=1, lineType=cv2.LINE_AA)
        text = nodes[i].node_id
        org = (centre[0] + radius_px + 2, centre[1] + 4)
        cv2.putText(out, text, org, cv2.FONT_HERSHEY_SIMPLEX, 0.45, (0, 0, 0), 3, cv2.LINE_AA)
        cv2.putText(out, text, org, cv2.FONT_HERSHEY_SIMPLEX, 0.45, (255, 255, 255), 1,
                    cv2.LINE_AA)
        marks.append(Mark(nodes[i].node_id, u, v, float(proj.depth[i])))
    return out, tuple(marks)
