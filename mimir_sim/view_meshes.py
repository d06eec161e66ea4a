"""Lighter copies of the robot's visual meshes, for the simulated cameras only.

The TidyBot++ model draws its arm, gripper and base with about 130,000 mesh faces, and the
offscreen renderer (software GL on these machines) processes every face of every frame whether
the part is in view or not: at 320 x 240 the robot's meshes took over half a frame's render
time. A camera of that size cannot show the detail, so each purely visual geom (geom group 2,
no contacts) whose mesh has more faces than a limit is pointed at a copy decimated with
Open3D's quadric simplification. Collision geoms keep the original meshes and bodies keep
their inertia, so the physics is the same; only the robot's own silhouette in the images moves,
by a pixel at its edges.

Decimating takes about half a second for the robot (plus Open3D's import), so the copies are
kept in a cache folder keyed by the source file's bytes and the face limit: a trial reads a
few small arrays instead. An unwritable cache costs time, not correctness.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np
import numpy.typing as npt

from mimir_sim.errors import SceneBuildError

LOG = logging.getLogger(__name__)

#: most faces a robot visual mesh keeps for the cameras by default; at the cameras' 320 x 240
#: this moved at most 0.2 % of a view's pixels (segment or depth), all on the robot's outline,
#: and cut a frame's render time by a third
DEFAULT_VIEW_FACES = 2000
#: geom group of MuJoCo Menagerie's visual geoms (collision geoms are group 3)
VISUAL_GROUP = 2
#: suffix of a lightened copy's mesh name
VIEW_SUFFIX = "__view"
#: bump when the decimation changes, so old cache entries are not read
_CACHE_VERSION = 1


@dataclass(frozen=True)
class LightMesh:
    """A decimated mesh: vertices in the source file's frame and units, triangles by index,
    and how many triangles the source had."""

    vertices: npt.NDArray[np.float64]
    faces: npt.NDArray[np.int32]
    source_faces: int


def mesh_dir_of(robot_xml: Path) -> Path:
    """Where the robot file's mesh paths resolve: its ``compiler`` ``meshdir`` (or
    ``assetdir``), relative to the file's folder.

    Raises:
        SceneBuildError: the file is not readable XML.
    """
    try:
        root = ET.parse(robot_xml).getroot()
    except (OSError, ET.ParseError) as err:
        raise SceneBuildError(f"cannot read the robot model {robot_xml}: {err}") from err
    folder = ""
    for compiler in root.iter("compiler"):
        folder = compiler.get("meshdir") or compiler.get("assetdir") or folder
    return (robot_xml.parent / folder).resolve()


def decimate(path: Path, max_faces: int) -> LightMesh:
    """The mesh file at ``path`` reduced to at most ``max_faces`` triangles (quadric error).

    Raises:
        SceneBuildError: the file cannot be read as a triangle mesh.
    """
    import open3d as o3d  # noqa: PLC0415 - half a second to import; only on a cache miss

    o3d.utility.set_verbosity_level(o3d.utility.VerbosityLevel.Error)
    mesh = o3d.io.read_triangle_mesh(path)
    if len(mesh.triangles) == 0:
        raise SceneBuildError(f"{path}: no triangles read; is it a mesh file?")
    # STL repeats each corner per triangle; the simplification needs shared vertices
    source_faces = len(mesh.triangles)
    mesh.remove_duplicated_vertices()
    light = mesh.simplify_quadric_decimation(target_number_of_triangles=max_faces)
    light.remove_unreferenced_vertices()
    light.remove_degenerate_triangles()
    return LightMesh(np.asarray(light.vertices, dtype=np.float64),
                     np.asarray(light.triangles, dtype=np.int32), source_faces)


def _cache_key(path: Path, max_faces: int) -> str:
    digest = hashlib.sha256(path.read_bytes())
    digest.update(f"|{max_faces}|{_CACHE_VERSION}".encode())
    return digest.hexdigest()[:32]


def cached_decimate(path: Path, max_faces: int, cache_dir: Path | None) -> LightMesh:
    """:func:`decimate`, read from or written to ``cache_dir`` (None: no cache)."""
    if cache_dir is None:
        return decimate(path, max_faces)
    entry = cache_dir / f"{path.stem}-{_cache_key(path, max_faces)}.npz"
    if entry.is_file():
        try:
            with np.load(entry) as stored:
                return LightMesh(stored["vertices"].astype(np.float64),
                                 stored["faces"].astype(np.int32),
                                 int(stored["source_faces"]))
        except (OSError, ValueError, KeyError) as err:
            LOG.warning("view mesh cache %s unreadable (%s); decimating again", entry, err)
    light = decimate(path, max_faces)
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        # written beside its final name and renamed, so a parallel trial never reads half a file
        with tempfile.NamedTemporaryFile(dir=cache_dir, suffix=".npz", delete=False) as tmp:
            np.savez(tmp, vertices=light.vertices, faces=light.faces,
                     source_faces=light.source_faces)
        os.replace(tmp.name, entry)
    except OSError as err:
        LOG.warning("view mesh cache %s not written (%s); the next build decimates again",
                    cache_dir, err)
    return light


def lighten_visual_meshes(spec: mujoco.MjSpec, mesh_dir: Path, max_faces: int,
                          cache_dir: Path | None = None) -> dict[str, int]:
    """Point the purely visual mesh geoms of ``spec`` at decimated copies of their meshes.

    A geom qualifies when it is in :data:`VISUAL_GROUP` and takes part in no contact; its
    mesh qualifies when it is read from a file under ``mesh_dir`` and has more than
    ``max_faces`` triangles. Each such mesh gets one copy, ``<name>__view``, with the
    original's scale applied; collision geoms sharing the mesh keep it.

    Returns:
        mesh name -> faces of its copy, for the meshes replaced.

    Raises:
        ValueError: ``max_faces`` is not positive.
        SceneBuildError: a qualifying mesh file is missing or unreadable.
    """
    if max_faces <= 0:
        raise ValueError(f"max_faces must be positive, got {max_faces}")
    visual: dict[str, list[mujoco.MjsGeom]] = {}
    for geom in spec.geoms:
        if (geom.type == mujoco.mjtGeom.mjGEOM_MESH and geom.group == VISUAL_GROUP
                and geom.contype == 0 and geom.conaffinity == 0 and geom.meshname):
            visual.setdefault(geom.meshname, []).append(geom)
    meshes = {mesh.name: mesh for mesh in spec.meshes}
    replaced: dict[str, int] = {}
    for name, geoms in visual.items():
        source = meshes.get(name)
        if source is None or not source.file or len(source.uservert) > 0:
            continue
        path = mesh_dir / source.file
        if not path.is_file():
            raise SceneBuildError(f"visual mesh {name!r}: file {path} not found")
        light = cached_decimate(path, max_faces, cache_dir)
        if light.source_faces <= max_faces:
            continue
        copy = spec.add_mesh(name=name + VIEW_SUFFIX)
        copy.uservert = (light.vertices * np.asarray(source.scale)).ravel().tolist()
        copy.userface = light.faces.ravel().tolist()
        for geom in geoms:
            geom.meshname = copy.name
        replaced[name] = len(light.faces)
    return replaced

