"""The robot's simulated cameras: offscreen colour, metric depth and instance segmentation.

:class:`SceneRenderer` renders one image size; :class:`Cameras` keeps one renderer per size for a
running simulation and renders the named cameras (base, wrist, pole) from its current state.

Poses are returned for the REP-103 optical frame (z forward, x right, y down). MuJoCo cameras
look along their -z axis with +y up, so the optical rotation is ``R_mujoco @ diag(1, -1, -1)``.
Depth comes from MuJoCo's depth buffer, linearised with the model's near and far planes
(``znear``/``zfar`` times the model extent); pixels that hit nothing read ``far``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TypedDict, Unpack

import mujoco
import numpy as np
import numpy.typing as npt

from mimir_sim.errors import RenderError, UnknownEntityError
from mimir_sim.scene_layout import KitchenScene

CAMERAS = ("base", "wrist", "pole")
OPTICAL_FROM_MUJOCO = np.diag([1.0, -1.0, -1.0])


class Channels(TypedDict, total=False):
    """Which images a render fills: each is on unless set false (:meth:`SceneRenderer.render`)."""

    color: bool
    depth: bool
    segmentation: bool


@dataclass(frozen=True)
class CameraInfo:
    """Pinhole intrinsics of a rendered image (pixels; principal point at pixel centres)."""

    name: str
    width: int
    height: int
    fx: float
    fy: float
    cx: float
    cy: float
    near: float
    far: float

    @property
    def k(self) -> npt.NDArray[np.float64]:
        """3x3 intrinsic matrix."""
        return np.array([[self.fx, 0.0, self.cx], [0.0, self.fy, self.cy], [0.0, 0.0, 1.0]])


@dataclass(frozen=True)
class Frame:
    """One rendered view.

    Attributes:
        camera: camera name.
        stamp: simulation time of the view (s).
        color: (H, W, 3) uint8 RGB, or ``None`` when not requested.
        depth: (H, W) float32 metres along the optical axis, or ``None``.
        segmentation: (H, W) int32 entity index, -1 where no entity, or ``None``.
        entity_ids: entity id of every index used in ``segmentation``.
        entity_labels: label of every index used in ``segmentation``.
        info: intrinsics.
        pose: 4x4 world-from-optical-frame transform.
    """

    camera: str
    stamp: float
    color: npt.NDArray[np.uint8] | None
    depth: npt.NDArray[np.float32] | None
    segmentation: npt.NDArray[np.int32] | None
    entity_ids: tuple[str, ...]
    entity_labels: tuple[str, ...]
    info: CameraInfo
    pose: npt.NDArray[np.float64]

    def visible_entities(self) -> set[str]:
        """Entity ids present in the segmentation image."""
        if self.segmentation is None:
            return set()
        return {self.entity_ids[i] for i in np.unique(self.segmentation) if i >= 0}


def camera_intrinsics(model: mujoco.MjModel, camera: str, width: int, height: int) -> CameraInfo:
    """Intrinsics of a MuJoCo perspective camera rendered at ``width`` x ``height``."""
    cam_id = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, camera)
    if cam_id < 0:
        raise UnknownEntityError(f"unknown camera {camera!r}")
    fovy = math.radians(float(model.cam_fovy[cam_id]))
    fy = (height / 2.0) / math.tan(fovy / 2.0)
    extent = float(model.stat.extent)
    return CameraInfo(
        name=camera,
        width=width,
        height=height,
        fx=fy,
        fy=fy,
        cx=(width - 1) / 2.0,
        cy=(height - 1) / 2.0,
        near=float(model.vis.map.znear) * extent,
        far=float(model.vis.map.zfar) * extent,
    )


def camera_pose(model: mujoco.MjModel, data: mujoco.MjData, camera: str) -> npt.NDArray[np.float64]:
    """World-from-optical 4x4 transform of a camera (REP-103 optical convention)."""
    cam_id = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, camera)
    if cam_id < 0:
        raise UnknownEntityError(f"unknown camera {camera!r}")
    pose = np.eye(4)
    pose[:3, :3] = data.cam_xmat[cam_id].reshape(3, 3) @ OPTICAL_FROM_MUJOCO
    pose[:3, 3] = data.cam_xpos[cam_id]
    return pose


class SceneRenderer:
    """Renders the scene's cameras offscreen at one image size.

    Args:
        scene: compiled kitchen scene.
        width: image width (pixels), at most the model's offscreen width (1280).
        height: image height (pixels), at most the model's offscreen height (960).
    """

    def __init__(self, scene: KitchenScene, width: int, height: int) -> None:
        model = scene.model
        if width <= 0 or height <= 0:
            raise RenderError(f"image size must be positive, got {width}x{height}")
        if width > model.vis.global_.offwidth or height > model.vis.global_.offheight:
            raise RenderError(
                f"image size {width}x{height} exceeds the offscreen buffer "
                f"{model.vis.global_.offwidth}x{model.vis.global_.offheight}"
            )
        self._scene = scene
        self._model = model
        self.width = width
        self.height = height
        try:
            self._renderer = mujoco.Renderer(model, height=height, width=width)
        except Exception as err:
            raise RenderError(
                f"offscreen rendering unavailable (MUJOCO_GL=egl or osmesa needed): {err}"
            ) from err
        self._entity_ids = tuple(sorted(scene.entities))
        self._entity_labels = tuple(scene.entities[e].label for e in self._entity_ids)
        index = {e: i for i, e in enumerate(self._entity_ids)}
        self._geom_to_index = np.array(
            [index[e] if e is not None else -1 for e in scene.geom_entity], dtype=np.int32
        )
        self._option = mujoco.MjvOption()
        # show the default geom groups only (collision meshes of the robot live in group 3)
        self._option.geomgroup[:] = [1, 1, 1, 0, 0, 0]

    def close(self) -> None:
        """Free the GL context."""
        self._renderer.close()

    def render(
        self,
        data: mujoco.MjData,
        camera: str,
        *,
        color: bool = True,
        depth: bool = True,
        segmentation: bool = True,
    ) -> Frame:
        """Render one camera from the current state of ``data``."""
        if camera not in CAMERAS and (
            mujoco.mj_name2id(self._model, mujoco.mjtObj.mjOBJ_CAMERA, camera) < 0
        ):
            raise UnknownEntityError(f"unknown camera {camera!r}; known: {', '.join(CAMERAS)}")
        info = camera_intrinsics(self._model, camera, self.width, self.height)
        r = self._renderer
        rgb_img: npt.NDArray[np.uint8] | None = None
        depth_img: npt.NDArray[np.float32] | None = None
        seg_img: npt.NDArray[np.int32] | None = None
        r.update_scene(data, camera=camera, scene_option=self._option)
        if color:
            rgb_img = r.render().copy()
        if depth:
            r.enable_depth_rendering()
            try:
                depth_img = r.render().astype(np.float32)
            finally:
                r.disable_depth_rendering()
        if segmentation:
            r.enable_segmentation_rendering()
            try:
                raw = r.render()
            finally:
                r.disable_segmentation_rendering()
            seg_img = np.full(raw.shape[:2], -1, dtype=np.int32)
            is_geom = (raw[:, :, 1] == int(mujoco.mjtObj.mjOBJ_GEOM)) & (raw[:, :, 0] >= 0)
            seg_img[is_geom] = self._geom_to_index[raw[:, :, 0][is_geom]]
        return Frame(
            camera=camera,
            stamp=float(data.time),
            color=rgb_img,
            depth=depth_img,
            segmentation=seg_img,
            entity_ids=self._entity_ids,
            entity_labels=self._entity_labels,
            info=info,
            pose=camera_pose(self._model, data, camera),
        )


def deproject(frame: Frame, u: float, v: float) -> npt.NDArray[np.float64]:
    """World point seen at pixel (u, v) of a frame with depth."""
    if frame.depth is None:
        raise RenderError("frame has no depth image")
    row, col = round(v), round(u)
    if not (0 <= row < frame.info.height and 0 <= col < frame.info.width):
        raise RenderError(f"pixel ({u}, {v}) lies outside the image")
    z = float(frame.depth[row, col])
    p_cam = np.array(
        [(u - frame.info.cx) * z / frame.info.fx, (v - frame.info.cy) * z / frame.info.fy, z]
    )
    return np.asarray(frame.pose[:3, :3] @ p_cam + frame.pose[:3, 3], dtype=np.float64)


class Cameras:
    """The named cameras of a running simulation, with one cached renderer per image size.

    Args:
        scene: compiled kitchen scene.
        data: the simulation's live state; frames show it as it is when rendered.
    """

    def __init__(self, scene: KitchenScene, data: mujoco.MjData) -> None:
        self._scene = scene
        self._data = data
        self._renderers: dict[tuple[int, int], SceneRenderer] = {}

    def renderer(self, width: int, height: int) -> SceneRenderer:
        """The renderer for one image size (created on first use)."""
        key = (width, height)
        if key not in self._renderers:
            self._renderers[key] = SceneRenderer(self._scene, width, height)
        return self._renderers[key]

    def render(
        self, camera: str, width: int = 640, height: int = 480, **channels: Unpack[Channels]
    ) -> Frame:
        """Render ``camera`` (base, wrist or pole) from the current state."""
        if camera not in CAMERAS:
            raise UnknownEntityError(f"unknown camera {camera!r}; known: {', '.join(CAMERAS)}")
        return self.renderer(width, height).render(self._data, camera, **channels)

    def close(self) -> None:
        """Release every renderer's GL context."""
        for renderer in self._renderers.values():
            renderer.close()
        self._renderers.clear()
