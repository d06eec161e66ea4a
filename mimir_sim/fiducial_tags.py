"""Fiducial tags on the simulated kitchen's back wall, and the tag map the robot localises with.

The simulated robot localises as the real one does: the localization node detects AprilTags
(36h11) in a camera image and looks their poses up in a map file
(:func:`mimir_perception.fiducials.load_fiducial_map`). This module decides where the kitchen's
tags hang, draws them (PNG textures made with ``cv2.aruco``, a one-module white quiet zone
around the black square), writes the MJCF that puts them flush on the wall and the matching map.

Where the tags hang
    Tag slots are anchored along the back wall (the plane ``x = wall_x``, facing -x) at
    ``y = k * pitch``; slot ``k`` always carries the same ids (:meth:`TagSite.slot_id`), one tag
    per row, the lowest ``clearance`` above the counter top. A kitchen shows the slots
    that lie on its wall with ``clearance`` to the room's corners and to every upper cabinet.
    Two consequences:

    * every kitchen with the same back-wall plane and counter height puts a given id at the
      same pose, so one surveyed map (:func:`site_layout`, shipped as
      ``config/fiducials/sim_kitchen.yaml``) serves every such scenario, as a building's survey
      serves every arrangement of its rooms;
    * no tag hangs on the backsplash under an upper cabinet: from the robot's working stand-off
      (about 0.7 m in front of a cabinet) the pole camera looks down over the cabinet's front
      edge, which hides all but a few centimetres of wall above the counter. Tags therefore sit
      between and beside the upper cabinets, where the camera that faces the wall sees them.

    Where upper cabinets stand close together (the Long Horizon's row leaves 15 cm between
    them) no wall slot is free, and a cabinet's side panel hides the wall beside it from a
    camera in front of it. So the counters carry a row too: slot ``k`` on the counters' front
    plane (``x = wall_x - counter_depth``), just under the top edge, where the pole camera
    looks down over the counter at every working pose. Only counters carry them (a lower
    cabinet's door or a drawer moves); their ids are a block of their own
    (:meth:`TagSite.front_id`), and the site map lists every slot of that plane too.

    The side walls carry no tags: the robot faces the back wall at every working pose, and a
    side wall's position changes with the room's width, which one shared map cannot follow.

Frames
    A tag's frame is that of :mod:`mimir_perception.fiducials`: origin at the centre of the tag's
    face, x to the right and y up for a viewer facing the tag, z out of the wall toward the
    viewer. The tag's geom is a thin box whose own frame is the tag frame (its +z face, the
    front, shows the texture); MuJoCo maps a 2D texture onto that face upright, which
    ``test/sim/test_fiducial_tags.py`` checks by detecting every tag in rendered frames.

Geoms are named ``<mount>/fiducial_<id>`` (``wall`` or the counter's id), so segmentation counts
a tag as part of what it is stuck on; they do not collide.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import yaml

from mimir import settings
from mimir.transforms import matrix_to_quaternion
from mimir_perception.fiducials import FiducialMap, aruco_dictionary, parse_fiducial_map
from mimir_sim.errors import FiducialLayoutError
from mimir_sim.geometry import FloatArray
from mimir_sim.mjcf import floats
from mimir_sim.scenario import FixtureSpec, KitchenSpec

#: rotation (columns: tag x, y, z in the world) of a tag on the back wall, facing -x
BACK_WALL_ROTATION = np.array([[0.0, 0.0, -1.0], [-1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
#: height of the kitchen's walls (m), as :func:`mimir_sim.scene.kitchen_mjcf` builds them
WALL_TOP = 2.6
#: the fiducial map shipped for the simulated kitchens (under the config folder)
SITE_MAP_FILE = "fiducials/sim_kitchen.yaml"


@dataclass(frozen=True)
class TagSite(settings.Checked, section="fiducial_tags", error=FiducialLayoutError,
              positive=("tag_size", "pitch", "half_span", "clearance", "thickness"),
              positive_int=("rows", "module_px", "min_tags"),
              non_negative=("first_id", "front_first_id")):
    """How the kitchens' tags are laid out and drawn.

    Attributes:
        dictionary: OpenCV dictionary of the tags.
        tag_size: Edge of the black square (m); the white quiet zone adds one module each side.
        pitch: Distance between neighbouring slots along the wall (m).
        half_span: Slots cover ``|y| <= half_span`` (m); the site map lists them all.
        clearance: Free margin between a tag's quiet zone and a room corner, an upper cabinet
            or the counter top (m).
        thickness: Thickness of a tag's geom (m); its back touches the wall.
        rows: Tags per slot, stacked upward ``clearance`` apart (two rows fix the camera's
            height and pitch far better than one).
        first_id: Id of the lowest tag of the slot at ``y = -max_slot * pitch``; ids grow with
            y along a row, then row by row upward.
        front_first_id: Id of the counter-front tag of the slot at ``y = -max_slot * pitch``;
            ids grow with y.
        min_tags: A kitchen showing fewer tags is refused.
        module_px: Texture pixels per module of the tag pattern.
    """

    dictionary: str = "DICT_APRILTAG_36h11"
    tag_size: float = 0.16
    pitch: float = 0.24
    half_span: float = 4.0
    clearance: float = 0.03
    thickness: float = 0.002
    rows: int = 2
    first_id: int = 100
    front_first_id: int = 200
    min_tags: int = 2
    module_px: int = 12

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.pitch < self.outer_size + self.clearance:
            raise FiducialLayoutError(
                f"fiducial_tags.pitch {self.pitch:g} m leaves neighbouring tags "
                f"({self.outer_size:g} m with quiet zone) less than {self.clearance:g} m apart")
        dictionary = aruco_dictionary(self.dictionary)
        count = int(dictionary.bytesList.shape[0])
        last = self.slot_id(self.max_slot, self.rows - 1)
        front_last = self.front_id(self.max_slot)
        if max(last, front_last) >= count:
            raise FiducialLayoutError(
                f"fiducial_tags: ids {self.first_id}..{last} and {self.front_first_id}.."
                f"{front_last} must lie below the {count} markers of {self.dictionary}")
        if self.front_first_id <= last and self.first_id <= front_last:
            raise FiducialLayoutError(
                f"fiducial_tags: counter-front ids {self.front_first_id}..{front_last} overlap "
                f"the wall's {self.first_id}..{last}")

    @property
    def bits(self) -> int:
        """Modules across the black square (data bits plus the black border)."""
        return int(aruco_dictionary(self.dictionary).markerSize) + 2

    @property
    def outer_size(self) -> float:
        """Edge of a tag with its white quiet zone (m)."""
        return self.tag_size * (self.bits + 2) / self.bits

    @property
    def max_slot(self) -> int:
        """Largest slot index ``k`` (slots run from ``-max_slot`` to ``max_slot``)."""
        return math.floor(self.half_span / self.pitch + 1e-9)

    def slot_id(self, k: int, row: int = 0) -> int:
        """Tag id of slot ``k`` in ``row`` (0 = the lowest)."""
        return self.first_id + row * (2 * self.max_slot + 1) + k + self.max_slot

    def front_id(self, k: int) -> int:
        """Tag id of the counter-front slot ``k``."""
        return self.front_first_id + k + self.max_slot

    def row_height(self, kitchen: KitchenSpec, row: int) -> float:
        """Height of the centres of ``row``'s tags above a kitchen's floor (m)."""
        step = self.outer_size + self.clearance
        return kitchen.counter_height + self.clearance + self.outer_size / 2.0 + row * step


@dataclass(frozen=True)
class PlacedTag:
    """One tag as hung: its id, the pose of its face in the world (= map), its size (m) and what it
    is stuck on (``wall`` or a counter's id)."""

    tag_id: int
    map_from_tag: FloatArray
    size: float
    mount: str = "wall"

    @property
    def position(self) -> tuple[float, float, float]:
        """Centre of the tag's face (m)."""
        x, y, z = (float(v) for v in self.map_from_tag[:3, 3])
        return (x, y, z)

    @property
    def texture_name(self) -> str:
        """File name of the tag's texture (asset key of the compiled model)."""
        return f"fiducial_{self.tag_id}.png"


def tag_texture(dictionary: str, tag_id: int, module_px: int) -> bytes:
    """PNG (RGB) of one tag with a one-module white quiet zone, ``module_px`` per module."""
    aruco = aruco_dictionary(dictionary)
    bits = int(aruco.markerSize) + 2
    if not 0 <= tag_id < int(aruco.bytesList.shape[0]):
        raise FiducialLayoutError(f"tag id {tag_id} is not a marker of {dictionary}")
    marker = cv2.aruco.generateImageMarker(aruco, tag_id, bits * module_px)
    framed = cv2.copyMakeBorder(marker, module_px, module_px, module_px, module_px,
                                cv2.BORDER_CONSTANT, value=255)
    ok, png = cv2.imencode(".png", cv2.cvtColor(framed, cv2.COLOR_GRAY2BGR))
    if not ok:
        raise FiducialLayoutError(f"OpenCV could not encode the texture of tag {tag_id}")
    return bytes(png.tobytes())


@dataclass(frozen=True)
class TagLayout:
    """The tags of one kitchen, with their textures, MJCF and fiducial map."""

    site: TagSite
    tags: tuple[PlacedTag, ...]
    frame_id: str = "map"

    @property
    def ids(self) -> tuple[int, ...]:
        """Ids of the tags, in wall order."""
        return tuple(t.tag_id for t in self.tags)

    def textures(self) -> dict[str, bytes]:
        """Texture PNGs keyed by file name, the ``assets`` of :meth:`mujoco.MjSpec.from_string`."""
        site = self.site
        return {t.texture_name: tag_texture(site.dictionary, t.tag_id, site.module_px)
                for t in self.tags}

    def mjcf_assets(self) -> list[str]:
        """``<texture>`` and ``<material>`` elements of the tags."""
        out: list[str] = []
        for t in self.tags:
            name = f"fiducial_{t.tag_id}"
            out.append(f'<texture name="{name}" type="2d" file="{t.texture_name}"/>')
            out.append(f'<material name="{name}" texture="{name}" texuniform="false" '
                       'texrepeat="1 1" specular="0" shininess="0" reflectance="0"/>')
        return out

    def mjcf_geoms(self) -> list[str]:
        """Thin non-colliding boxes, each with its back on the wall and the tag on its front."""
        half = self.site.outer_size / 2.0
        depth = self.site.thickness / 2.0
        out: list[str] = []
        for t in self.tags:
            rot = t.map_from_tag[:3, :3]
            centre = t.map_from_tag[:3, 3] - rot[:, 2] * depth
            axes = (*rot[:, 0], *rot[:, 1])
            out.append(
                f'<geom name="{t.mount}/fiducial_{t.tag_id}" type="box" pos="{floats(centre)}" '
                f'size="{floats((half, half, depth))}" xyaxes="{floats(axes)}" '
                f'material="fiducial_{t.tag_id}" contype="0" conaffinity="0"/>')
        return out

    def map_data(self) -> dict[str, Any]:
        """The fiducial map as YAML data (format of ``config/fiducials/lab.yaml``)."""
        tags = []
        for t in self.tags:
            quat = matrix_to_quaternion(t.map_from_tag[:3, :3])
            tags.append({"id": t.tag_id,
                         "position": [round(float(v), 6) for v in t.map_from_tag[:3, 3]],
                         "orientation": [round(float(v), 7) for v in quat]})
        return {"dictionary": self.site.dictionary, "tag_size": self.site.tag_size,
                "frame_id": self.frame_id, "tags": tags}

    def fiducial_map(self) -> FiducialMap:
        """The fiducial map, parsed by the localiser's own reader."""
        return parse_fiducial_map(self.map_data(), "generated kitchen tag layout")

    def map_text(self, header: str = "") -> str:
        """The map file's text: ``header`` as comment lines, then the map, one tag a line."""
        data = self.map_data()
        lines = [f"# {line}".rstrip() for line in header.splitlines()]
        lines += [f"dictionary: {data['dictionary']}", f"tag_size: {data['tag_size']}",
                  f"frame_id: {data['frame_id']}", "tags:"]
        lines += ["  - " + yaml.safe_dump(tag, default_flow_style=True, width=200,
                                          sort_keys=False).strip() for tag in data["tags"]]
        return "\n".join(lines) + "\n"

    def write_map(self, path: str | Path, header: str = "") -> Path:
        """Write the map file (parent folders are made); returns its path."""
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_text(self.map_text(header), encoding="utf-8")
        tmp.replace(out)
        return out


def _back_wall_tag(site: TagSite, kitchen: KitchenSpec, k: int, row: int) -> PlacedTag:
    pose = np.eye(4)
    pose[:3, :3] = BACK_WALL_ROTATION
    # the face stands proud of the wall by the geom's thickness
    pose[:3, 3] = (kitchen.wall_x - site.thickness, k * site.pitch, site.row_height(kitchen, row))
    return PlacedTag(site.slot_id(k, row), pose, site.tag_size)


def _counter_front_tag(site: TagSite, kitchen: KitchenSpec, k: int, mount: str) -> PlacedTag:
    pose = np.eye(4)
    pose[:3, :3] = BACK_WALL_ROTATION
    # just under the counter's top edge, on its front, the face proud by the geom's thickness
    height = kitchen.counter_height - site.clearance - site.outer_size / 2.0
    pose[:3, 3] = (kitchen.wall_x - kitchen.counter_depth - site.thickness, k * site.pitch,
                   height)
    return PlacedTag(site.front_id(k), pose, site.tag_size, mount)


def plan_tags(kitchen: KitchenSpec, fixtures: Sequence[FixtureSpec] = (),
              site: TagSite | None = None) -> TagLayout:
    """The tags a kitchen shows: every slot on its back wall clear of corners and upper
    cabinets, and every slot of the counters' front plane that lies on a counter.

    Raises:
        FiducialLayoutError: the tags would reach above the wall, or fewer than
            ``site.min_tags`` slots are free (a wall too short or covered by cabinets).
    """
    site = site or TagSite()
    half = site.outer_size / 2.0
    reach = half + site.clearance
    top = site.row_height(kitchen, site.rows - 1) + site.outer_size / 2.0
    if top > WALL_TOP:
        raise FiducialLayoutError(
            f"tags above a {kitchen.counter_height:g} m counter would reach {top:g} m, above "
            f"the {WALL_TOP:g} m wall")
    low, high = kitchen.room_y
    cabinets = [(f.y - f.width / 2.0, f.y + f.width / 2.0) for f in fixtures
                if f.type == "upper_cabinet"]
    tags: list[PlacedTag] = []
    for k in range(-site.max_slot, site.max_slot + 1):
        y = k * site.pitch
        if y - reach < low or y + reach > high:
            continue
        if any(y + reach > y0 and y - reach < y1 for y0, y1 in cabinets):
            continue
        tags.extend(_back_wall_tag(site, kitchen, k, row) for row in range(site.rows))
    counters = [f for f in fixtures if f.type == "counter"]
    for k in range(-site.max_slot, site.max_slot + 1):
        y = k * site.pitch
        on = [f for f in counters
              if f.y - f.width / 2.0 <= y - reach and y + reach <= f.y + f.width / 2.0]
        if on:
            tags.append(_counter_front_tag(site, kitchen, k, on[0].id))
    if len(tags) < site.min_tags:
        raise FiducialLayoutError(
            f"the kitchen (y {low:g}..{high:g} m) has room for {len(tags)} tag(s) on its back "
            f"wall beside the upper cabinets and on its counters' fronts, fewer than the "
            f"{site.min_tags} needed; widen the room, leave "
            f"{site.outer_size + 2 * site.clearance:.2f} m of wall free between cabinets or add "
            "a counter")
    return TagLayout(site, tuple(tags))


def site_layout(kitchen: KitchenSpec | None = None, site: TagSite | None = None) -> TagLayout:
    """Every slot of the site (``|y| <= half_span``) on the back wall of ``kitchen`` (default:
    :class:`~mimir_sim.scenario.KitchenSpec`) and on the counters' front plane; the source of
    the shipped map file."""
    site = site or TagSite()
    kitchen = kitchen or KitchenSpec()
    span = site.max_slot * site.pitch + site.outer_size / 2.0 + site.clearance + 1e-6
    counter = FixtureSpec("site_counter", "counter", 0.0, 2.0 * span, "counter")
    return plan_tags(replace(kitchen, room_y=(-span, span)), (counter,), site)


#: comment lines at the top of the shipped site map
SITE_MAP_HEADER = """\
Fiducial tags of the simulated kitchens (MuJoCo): the map the localization node uses in
simulation (config/mimir_sim.yaml). Generated by mimir_sim.fiducial_tags.site_layout() for the
default kitchen's back wall (x = 1.25 m, counter top 0.75 m); do not edit by hand: every tag a
scenario's kitchen hangs has the same id and pose here (test/sim/test_fiducial_tags.py).
Tag frame: x right and y up facing the tag, z out of the wall; orientation is [x, y, z, w]."""


def check_map_covers(layout: TagLayout, tag_map: FiducialMap, tolerance: float = 1e-4) -> None:
    """Check that ``tag_map`` holds every tag of ``layout`` at its pose and size.

    Raises:
        FiducialLayoutError: a tag is missing from the map or the map puts it elsewhere (more
            than ``tolerance`` m or rad off) or at another size.
    """
    for tag in layout.tags:
        known = tag_map.tags.get(tag.tag_id)
        if known is None:
            raise FiducialLayoutError(f"tag {tag.tag_id} of the kitchen is not in the map")
        offset = float(np.linalg.norm(known.map_from_tag[:3, 3] - tag.map_from_tag[:3, 3]))
        turn = known.map_from_tag[:3, :3].T @ tag.map_from_tag[:3, :3]
        angle = math.acos(max(-1.0, min(1.0, (float(np.trace(turn)) - 1.0) / 2.0)))
        if offset > tolerance or angle > tolerance or abs(known.size - tag.size) > tolerance:
            raise FiducialLayoutError(
                f"the map puts tag {tag.tag_id} {offset:.4f} m and {angle:.4f} rad from where "
                f"the kitchen hangs it (size {known.size:g} m vs {tag.size:g} m)")
