"""The agent's egocentric colour view of the warehouse, rendered offscreen with MuJoCo.

:class:`WarehouseRenderer` turns a :class:`~mimir_sim.warehouse.layout.Layout` into one MuJoCo
model (:func:`warehouse_xml`) and renders it from a pose: the camera stands at the centre of the
agent's cell, ``camera_height_m`` above the floor, and looks level along the heading.

The model holds:

- a floor with a checker of one cell per square, so that a viewer can count cells, and a ceiling
  at the top of the walls;
- walls on the wall cells, runs of wall cells merged into one box each;
- shelving on the rack cells: orange uprights at the cell corners round each block of racks, grey
  boards at :data:`SHELF_TOPS_M` and, down the middle of a rack one or two cells deep with floor
  on both sides, a back panel that keeps its two faces apart;
- every item as its kind's primitive (upright: a cylinder's or capsule's axis is vertical, a box's
  first size runs along the rack face) standing on the item shelf at its face's edge of the rack
  cell, so that it is seen from the front cell;
- :data:`OBSTACLES` striped barriers on mocap bodies: per render the ones in use fill the closed
  cells and the rest are parked far below the floor, so closed cells change without a new model;
- shadowless directional lights, slanted from above and one from below for the ceiling, and a
  headlight, so that every face the camera sees is lit.

Geoms do not collide (rendering only). The horizontal field of view is ``fov_deg``; MuJoCo's
vertical ``fovy`` is set to match it for the image's aspect ratio (:func:`vertical_fov_deg`).

MuJoCo picks its GL backend from ``MUJOCO_GL`` at import; offscreen rendering here, as in
:mod:`mimir_sim.rendering`, expects ``egl`` or ``osmesa``.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from dataclasses import dataclass
from types import TracebackType

import mujoco
import numpy as np
import numpy.typing as npt

from mimir_sim.errors import RenderError
from mimir_sim.rendering import CameraInfo, camera_intrinsics, camera_pose
from mimir_sim.warehouse.layout import (
    FLOOR,
    RACK,
    STEPS,
    WALL,
    Cell,
    Item,
    Layout,
    Pose,
    WarehouseError,
)

OBSTACLES = 8
WALL_HEIGHT_M = 3.0
RACK_HEIGHT_M = 2.0
SHELF_TOPS_M = (0.12, 0.9, 1.9)
ITEM_SHELF = 1
BARRIER_HEIGHT_M = 1.5
BARRIER_BANDS = 6
PARK_Z_M = -100.0

BOARD_HALF_M = 0.02
UPRIGHT_HALF_M = 0.035
PANEL_HALF_M = 0.01
ITEM_INSET_M = 0.04
BARRIER_INSET_M = 0.05

FLOOR_RGB = ((0.55, 0.55, 0.53), (0.45, 0.45, 0.44))
WALL_RGBA = (0.78, 0.76, 0.72, 1.0)
CEILING_RGBA = (0.62, 0.63, 0.66, 1.0)
UPRIGHT_RGBA = (0.88, 0.36, 0.06, 1.0)
BOARD_RGBA = (0.6, 0.62, 0.65, 1.0)
PANEL_RGBA = (0.3, 0.33, 0.38, 1.0)
BARRIER_RGBA = ((0.95, 0.8, 0.05, 1.0), (0.08, 0.08, 0.08, 1.0))

# The camera body faces north at rest (its camera looks along -z, so z points south and y up);
# heading h turns it h quarter turns clockwise, seen from above, about the vertical.
HEADING_QUATS = tuple(
    (math.cos(-h * math.pi / 4.0), 0.0, 0.0, math.sin(-h * math.pi / 4.0)) for h in range(4))
EYE = "eye"

Rect = tuple[int, int, int, int]


@dataclass(frozen=True)
class SeenFrame:
    """One view with what a depth camera and a perfect segmenter would add to it: metric depth
    along the optical axis, the index (into ``layout.items``) of the item seen at each pixel
    (-1: no item), the intrinsics and the world-from-optical pose (REP-103)."""

    color: npt.NDArray[np.uint8]
    depth: npt.NDArray[np.float32]
    items: npt.NDArray[np.int32]
    info: CameraInfo
    camera_to_map: npt.NDArray[np.float64]


def vertical_fov_deg(fov_deg: float, width: int, height: int) -> float:
    """MuJoCo's vertical ``fovy`` (degrees) that gives a ``width`` x ``height`` image the
    horizontal field of view ``fov_deg``."""
    half = math.radians(fov_deg) / 2.0
    return math.degrees(2.0 * math.atan(math.tan(half) * height / width))


def _check_settings(width: object, height: object, camera_height_m: object,
                    fov_deg: object) -> None:
    for name, size in (("width", width), ("height", height)):
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            raise WarehouseError(f"image {name} must be a positive integer, got {size!r}")
    if (isinstance(camera_height_m, bool) or not isinstance(camera_height_m, int | float)
            or not 0.0 < camera_height_m < WALL_HEIGHT_M):
        raise WarehouseError(f"camera_height_m must lie in (0, {WALL_HEIGHT_M}) m, got "
                             f"{camera_height_m!r}")
    if (isinstance(fov_deg, bool) or not isinstance(fov_deg, int | float)
            or not 0.0 < fov_deg < 180.0):
        raise WarehouseError(f"fov_deg must lie in (0, 180) degrees, got {fov_deg!r}")


def warehouse_xml(layout: Layout, width: int = 256, height: int = 256,
                  camera_height_m: float = 1.2, fov_deg: float = 90.0) -> str:
    """The MJCF of ``layout`` with an egocentric camera for ``width`` x ``height`` images.

    Raises:
        WarehouseError: a size that is not a positive integer, a camera height outside
        (0, :data:`WALL_HEIGHT_M`) or a field of view outside (0, 180) degrees.
    """
    _check_settings(width, height, camera_height_m, fov_deg)
    c = layout.cell_m
    root = ET.Element("mujoco", model=layout.name)
    ET.SubElement(root, "compiler", angle="degree")
    ET.SubElement(root, "statistic", center=_vec((layout.width - 1) * c / 2.0,
                                                 (layout.height - 1) * c / 2.0, 1.0),
                  extent=_vec(_extent(layout)))
    visual = ET.SubElement(root, "visual")
    ET.SubElement(visual, "global", offwidth=str(width), offheight=str(height))
    ET.SubElement(visual, "headlight", ambient=_vec(0.35, 0.35, 0.35),
                  diffuse=_vec(0.4, 0.4, 0.4), specular=_vec(0.0, 0.0, 0.0))
    # near and far planes in units of the extent (half the floor's diagonal): the near plane a
    # few centimetres out, as a rack face is half a cell from the camera; the far one past the
    # opposite corner
    ET.SubElement(visual, "map", znear=_vec(0.02 / _extent(layout)), zfar="2.5")
    default = ET.SubElement(root, "default")
    ET.SubElement(default, "geom", contype="0", conaffinity="0", material="matte")
    _assets(ET.SubElement(root, "asset"), layout)
    world = ET.SubElement(root, "worldbody")
    _lights(world, layout)
    _shell(world, layout)
    _racks(world, layout)
    for item in layout.items:
        _item(world, layout, item)
    for index in range(OBSTACLES):
        _barrier(world, layout, index)
    eye = ET.SubElement(world, "body", name=EYE, mocap="true",
                        pos=_vec(0.0, 0.0, camera_height_m))
    ET.SubElement(eye, "camera", name=EYE, xyaxes=_vec(1, 0, 0, 0, 0, 1),
                  fovy=_vec(vertical_fov_deg(fov_deg, width, height)))
    return ET.tostring(root, encoding="unicode")


class WarehouseRenderer:
    """Renders the agent's view of one warehouse at one image size.

    Args:
        layout: the warehouse.
        width: image width (pixels).
        height: image height (pixels).
        camera_height_m: height of the camera above the floor (m).
        fov_deg: horizontal field of view (degrees, in (0, 180)).

    Raises:
        WarehouseError: a bad size, camera height or field of view (see :func:`warehouse_xml`).
        RenderError: MuJoCo refused the model, or no offscreen GL context could be made.

    Attributes:
        model: the compiled model (:func:`warehouse_xml`); its camera and obstacles are mocap
            bodies that :meth:`render` moves.
    """

    def __init__(self, layout: Layout, width: int = 256, height: int = 256,
                 camera_height_m: float = 1.2, fov_deg: float = 90.0) -> None:
        xml = warehouse_xml(layout, width, height, camera_height_m, fov_deg)
        try:
            self.model = mujoco.MjModel.from_xml_string(xml)
        except ValueError as err:
            raise RenderError(f"MuJoCo refused the warehouse model: {err}") from err
        self.layout = layout
        self.width = width
        self.height = height
        self.camera_height_m = float(camera_height_m)
        self.fov_deg = float(fov_deg)
        self._data = mujoco.MjData(self.model)
        self._camera = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_CAMERA, EYE)
        self._eye = self._mocap(EYE)
        self._obstacles = tuple(self._mocap(f"obstacle_{i}") for i in range(OBSTACLES))
        self._shown: tuple[Pose, tuple[Cell, ...]] | None = None
        self._geom_item = np.full(self.model.ngeom, -1, np.int32)
        for index, item in enumerate(layout.items):
            geom = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_GEOM, f"item_{item.id}")
            self._geom_item[geom] = index
        try:
            self._renderer: mujoco.Renderer | None = mujoco.Renderer(
                self.model, height=height, width=width)
        except Exception as err:  # the GL backends raise assorted errors
            raise RenderError(
                f"offscreen rendering unavailable (MUJOCO_GL=egl or osmesa needed): {err}"
            ) from err

    def _mocap(self, body: str) -> int:
        return int(self.model.body_mocapid[
            mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, body)])

    def render(self, pose: Pose, blocked: frozenset[Cell] = frozenset()) -> npt.NDArray[np.uint8]:
        """The (height, width, 3) RGB view from ``pose`` with the cells in ``blocked`` closed.

        Raises:
            WarehouseError: ``pose`` is not on an open floor cell or has no heading 0..3, a
            closed cell is not a floor cell, or more than :data:`OBSTACLES` cells are closed.
            RenderError: the renderer is closed.
        """
        if self._renderer is None:
            raise RenderError("the warehouse renderer is closed")
        closed = self._closed(blocked)
        if pose.heading not in range(4):
            raise WarehouseError(f"pose heading must be 0..3, got {pose.heading!r}")
        char = self.layout.char(pose.cell)
        if char != FLOOR:
            raise WarehouseError(f"pose {pose} is not on a floor cell (it is "
                                 f"{'a rack' if char == RACK else 'a wall'})")
        if pose.cell in closed:
            raise WarehouseError(f"pose {pose} stands on a closed cell")
        if self._shown != (pose, closed):
            self._place(pose, closed)
            self._shown = (pose, closed)
        self._renderer.update_scene(self._data, camera=self._camera)
        return self._renderer.render()

    def frame(self, pose: Pose, blocked: frozenset[Cell] = frozenset()) -> SeenFrame:
        """The view from ``pose`` with its depth, the item at each pixel and the camera.

        Raises:
            WarehouseError, RenderError: as :meth:`render`.
        """
        color = self.render(pose, blocked).copy()
        renderer = self._renderer
        assert renderer is not None  # render() refused a closed renderer
        renderer.enable_depth_rendering()
        try:
            depth = renderer.render().astype(np.float32)
        finally:
            renderer.disable_depth_rendering()
        renderer.enable_segmentation_rendering()
        try:
            raw = renderer.render()
        finally:
            renderer.disable_segmentation_rendering()
        items = np.full(raw.shape[:2], -1, np.int32)
        is_geom = (raw[:, :, 1] == int(mujoco.mjtObj.mjOBJ_GEOM)) & (raw[:, :, 0] >= 0)
        items[is_geom] = self._geom_item[raw[:, :, 0][is_geom]]
        return SeenFrame(color, depth, items,
                         camera_intrinsics(self.model, EYE, self.width, self.height),
                         camera_pose(self.model, self._data, EYE))

    def _closed(self, blocked: Iterable[Cell]) -> tuple[Cell, ...]:
        cells = list(blocked)
        for cell in cells:
            if (not isinstance(cell, tuple) or len(cell) != 2
                    or not all(isinstance(v, int) and not isinstance(v, bool) for v in cell)
                    or self.layout.char(cell) != FLOOR):
                raise WarehouseError(f"closed cell {cell!r} is not a floor cell")
        if len(cells) > OBSTACLES:
            raise WarehouseError(f"{len(cells)} closed cells, but the renderer shows at most "
                                 f"{OBSTACLES}")
        return tuple(sorted(set(cells)))

    def _place(self, pose: Pose, closed: tuple[Cell, ...]) -> None:
        c = self.layout.cell_m
        data = self._data
        data.mocap_pos[self._eye] = (pose.x * c, pose.y * c, self.camera_height_m)
        data.mocap_quat[self._eye] = HEADING_QUATS[pose.heading]
        for n, mocap in enumerate(self._obstacles):
            if n < len(closed):
                data.mocap_pos[mocap] = (closed[n][0] * c, closed[n][1] * c, 0.0)
            else:
                data.mocap_pos[mocap] = (0.0, 0.0, PARK_Z_M)
        mujoco.mj_forward(self.model, data)

    def close(self) -> None:
        """Free the GL context; later renders raise :class:`RenderError`."""
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None

    def __enter__(self) -> WarehouseRenderer:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()


def _vec(*values: float) -> str:
    return " ".join(f"{v:.10g}" for v in values)


def _extent(layout: Layout) -> float:
    return math.hypot(layout.width, layout.height) * layout.cell_m / 2.0


def _assets(asset: ET.Element, layout: Layout) -> None:
    ET.SubElement(asset, "texture", name="floor", type="2d", builtin="checker",
                  rgb1=_vec(*FLOOR_RGB[0]), rgb2=_vec(*FLOOR_RGB[1]), width="64", height="64")
    # on a plane with texuniform, a checker square spans 1 / texrepeat metres: one per cell
    ET.SubElement(asset, "material", name="floor", texture="floor", texuniform="true",
                  texrepeat=_vec(1.0 / layout.cell_m, 1.0 / layout.cell_m), specular="0",
                  shininess="0", reflectance="0")
    ET.SubElement(asset, "material", name="matte", specular="0.1", shininess="0.1",
                  reflectance="0")


def _lights(world: ET.Element, layout: Layout) -> None:
    c = layout.cell_m
    above = _vec((layout.width - 1) * c / 2.0, (layout.height - 1) * c / 2.0,
                 WALL_HEIGHT_M + 5.0)
    # slanted from four sides, so that a vertical face of any heading takes some light
    for dx, dy in ((1, 1), (-1, 1), (1, -1), (-1, -1)):
        ET.SubElement(world, "light", type="directional", castshadow="false", pos=above,
                      dir=_vec(0.5 * dx, 0.5 * dy, -1.0), diffuse=_vec(0.2, 0.2, 0.2),
                      specular=_vec(0.0, 0.0, 0.0))
    # and one from below for the ceiling, which the headlight only grazes
    ET.SubElement(world, "light", type="directional", castshadow="false",
                  pos=_vec((layout.width - 1) * c / 2.0, (layout.height - 1) * c / 2.0, 0.5),
                  dir=_vec(0.0, 0.0, 1.0), diffuse=_vec(0.3, 0.3, 0.3),
                  specular=_vec(0.0, 0.0, 0.0))


def _shell(world: ET.Element, layout: Layout) -> None:
    """The floor, the ceiling and the walls."""
    c = layout.cell_m
    cx, cy = (layout.width - 1) * c / 2.0, (layout.height - 1) * c / 2.0
    hx, hy = layout.width * c / 2.0, layout.height * c / 2.0
    ET.SubElement(world, "geom", name="floor", type="plane", material="floor",
                  pos=_vec(cx, cy, 0.0), size=_vec(hx, hy, 1.0))
    ET.SubElement(world, "geom", name="ceiling", type="box", rgba=_vec(*CEILING_RGBA),
                  pos=_vec(cx, cy, WALL_HEIGHT_M + 0.05), size=_vec(hx, hy, 0.05))
    for n, (x0, y0, x1, y1) in enumerate(_rectangles(layout, WALL)):
        ET.SubElement(world, "geom", name=f"wall_{n}", type="box", rgba=_vec(*WALL_RGBA),
                      pos=_vec((x0 + x1) * c / 2.0, (y0 + y1) * c / 2.0, WALL_HEIGHT_M / 2.0),
                      size=_vec((x1 - x0 + 1) * c / 2.0, (y1 - y0 + 1) * c / 2.0,
                                WALL_HEIGHT_M / 2.0))


def _racks(world: ET.Element, layout: Layout) -> None:
    """Shelving on the rack cells: per block of racks, boards across the block and uprights at
    the cell corners round its edge; back panels where a rack is double-sided."""
    c = layout.cell_m
    u = UPRIGHT_HALF_M
    uprights = 0
    for n, (x0, y0, x1, y1) in enumerate(_rectangles(layout, RACK)):
        west, east = (x0 - 0.5) * c, (x1 + 0.5) * c
        south, north = (y0 - 0.5) * c, (y1 + 0.5) * c
        for k, top in enumerate(SHELF_TOPS_M):
            ET.SubElement(world, "geom", name=f"board_{n}_{k}", type="box",
                          rgba=_vec(*BOARD_RGBA),
                          pos=_vec((west + east) / 2.0, (south + north) / 2.0, top - BOARD_HALF_M),
                          size=_vec((east - west) / 2.0 - u, (north - south) / 2.0 - u,
                                    BOARD_HALF_M))
        corners = [(x, y) for x in range(x1 - x0 + 2) for y in range(y1 - y0 + 2)
                   if x in (0, x1 - x0 + 1) or y in (0, y1 - y0 + 1)]
        for x, y in corners:
            px = min(max(west + x * c, west + u), east - u)
            py = min(max(south + y * c, south + u), north - u)
            ET.SubElement(world, "geom", name=f"upright_{uprights}", type="box",
                          rgba=_vec(*UPRIGHT_RGBA), pos=_vec(px, py, RACK_HEIGHT_M / 2.0),
                          size=_vec(u, u, RACK_HEIGHT_M / 2.0))
            uprights += 1
    for n, (ax, ay, bx, by) in enumerate(_panels(layout)):
        # a panel runs along the segment from (ax, ay) to (bx, by) (cell units), its ends short
        # of the uprights
        along = (abs(bx - ax) + abs(by - ay)) * c / 2.0 - u
        size = (along, PANEL_HALF_M) if ay == by else (PANEL_HALF_M, along)
        ET.SubElement(world, "geom", name=f"panel_{n}", type="box", rgba=_vec(*PANEL_RGBA),
                      pos=_vec((ax + bx) * c / 2.0, (ay + by) * c / 2.0, RACK_HEIGHT_M / 2.0),
                      size=_vec(*size, RACK_HEIGHT_M / 2.0))


def _rectangles(layout: Layout, char: str) -> list[Rect]:
    """The cells showing ``char``, covered by rectangles ``(x0, y0, x1, y1)`` (inclusive): each
    runs east as far as it can from its south-west cell, then north as far as the whole run
    can."""
    todo = {(x, y) for y in range(layout.height) for x in range(layout.width)
            if layout.char((x, y)) == char}
    rects = []
    for y in range(layout.height):
        for x in range(layout.width):
            if (x, y) not in todo:
                continue
            x1 = x
            while (x1 + 1, y) in todo:
                x1 += 1
            y1 = y
            while all((i, y1 + 1) in todo for i in range(x, x1 + 1)):
                y1 += 1
            todo -= {(i, j) for i in range(x, x1 + 1) for j in range(y, y1 + 1)}
            rects.append((x, y, x1, y1))
    return rects


def _panels(layout: Layout) -> list[tuple[float, float, float, float]]:
    """Back panels as segments ``(x0, y0, x1, y1)`` in cell units.

    A run of one or two rack cells across a row or column with floor at both ends is a
    double-sided rack: a panel down its middle (through the cell, or between the two) runs the
    length of the cell. Panels in line are joined.
    """
    pieces: dict[tuple[int, float], list[int]] = {}  # (axis, line) -> cells along the line
    for axis, (dx, dy) in enumerate(STEPS[:2]):  # axis 0: runs north (columns), 1: east (rows)
        for x, y in ((x, y) for y in range(layout.height) for x in range(layout.width)):
            if layout.char((x, y)) != RACK or layout.char((x - dx, y - dy)) != FLOOR:
                continue
            depth = 1
            while depth < 3 and layout.char((x + depth * dx, y + depth * dy)) == RACK:
                depth += 1
            if depth == 3 or layout.char((x + depth * dx, y + depth * dy)) != FLOOR:
                continue
            middle = (x + (depth - 1) * dx / 2.0, y + (depth - 1) * dy / 2.0)
            line, along = (middle[1], x) if axis == 0 else (middle[0], y)
            pieces.setdefault((axis, line), []).append(along)
    segments = []
    for (axis, line), cells in sorted(pieces.items()):
        cells.sort()
        start = cells[0]
        for i, cell in enumerate(cells):
            if i + 1 < len(cells) and cells[i + 1] == cell + 1:
                continue
            if axis == 0:  # a wall of panels across a column: it runs east-west
                segments.append((start - 0.5, line, cell + 0.5, line))
            else:
                segments.append((line, start - 0.5, line, cell + 0.5))
            if i + 1 < len(cells):
                start = cells[i + 1]
    return segments


def _half_extents(shape: str, size: tuple[float, ...]) -> tuple[float, float, float]:
    """Half extents of an upright item: along the rack face, away from it, and up."""
    if shape == "box":
        return size[0], size[1], size[2]
    if shape == "sphere":
        return size[0], size[0], size[0]
    if shape == "capsule":
        return size[0], size[0], size[0] + size[1]
    return size[0], size[0], size[1]  # cylinder


def _item(world: ET.Element, layout: Layout, item: Item) -> None:
    """An item on the item shelf of its rack cell, at the edge of its face."""
    kind = layout.kinds[item.kind]
    c = layout.cell_m
    _, depth, up = _half_extents(kind.shape, kind.size)
    dx, dy = STEPS[item.face]
    out = max(0.0, c / 2.0 - ITEM_INSET_M - depth)
    # a box's first size runs along the face: east-west for a north or south face
    quat = (1.0, 0.0, 0.0, 0.0) if item.face in (0, 2) else (
        math.sqrt(0.5), 0.0, 0.0, math.sqrt(0.5))
    ET.SubElement(world, "geom", name=f"item_{item.id}", type=kind.shape, rgba=_vec(*kind.rgba),
                  size=_vec(*kind.size), quat=_vec(*quat),
                  pos=_vec(item.rack[0] * c + dx * out, item.rack[1] * c + dy * out,
                           SHELF_TOPS_M[ITEM_SHELF] + up))


def _barrier(world: ET.Element, layout: Layout, index: int) -> None:
    """A mocap barrier of yellow and black bands that fills a cell, parked below the floor."""
    half = max(layout.cell_m / 2.0 - BARRIER_INSET_M, layout.cell_m / 4.0)
    band = BARRIER_HEIGHT_M / BARRIER_BANDS / 2.0
    body = ET.SubElement(world, "body", name=f"obstacle_{index}", mocap="true",
                         pos=_vec(0.0, 0.0, PARK_Z_M))
    for k in range(BARRIER_BANDS):
        ET.SubElement(body, "geom", name=f"obstacle_{index}_{k}", type="box",
                      rgba=_vec(*BARRIER_RGBA[k % 2]), pos=_vec(0.0, 0.0, (2 * k + 1) * band),
                      size=_vec(half, half, band))
