"""The robot's simulated cameras: offscreen colour, metric depth and instance segmentation.

:class:`SceneRenderer` renders one image size; :class:`Cameras` keeps one renderer per size for a
running simulation and renders the named cameras (base, wrist, pole) from its current state.

Poses are returned for the REP-103 optical frame (z forward, x right, y down). MuJoCo cameras
look along their -z axis with +y up, so the optical rotation is ``R_mujoco @ diag(1, -1, -1)``.
Depth comes from MuJoCo's depth buffer, linearised with the model's near and far planes
(``znear``/``zfar`` times the model extent); pixels that hit nothing read ``far``.

A frame costs two render passes, not three: colour, then depth and segmentation together.
``mujoco.Renderer`` renders each of the three in a pass of its own; depth there is read from a
segmentation-style pass too (flat id colours, no lighting), so one such pass gives both images,
and :class:`SceneRenderer` drives MuJoCo's public rendering calls (``mjv_updateScene``,
``mjr_render``, ``mjr_readPixels``) itself to read them at once. Colour and segmentation equal
what ``mujoco.Renderer`` makes pass by pass, depth to single-precision rounding
(``test/sim/test_sim_core.py`` compares them). The flat pass draws into a buffer of its own
without multisampling: MuJoCo's id colours and depth read the same from either buffer, and the
multisampled one made that pass a third slower on a software rasteriser.
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
            self._gl = mujoco.GLContext(width, height)
            self._gl.make_current()
            self._context: mujoco.MjrContext | None = self._mjr_context(model)
            self._flat_context: mujoco.MjrContext | None = self._mjr_context(model, samples=0)
        except Exception as err:
            raise RenderError(
                f"offscreen rendering unavailable (MUJOCO_GL=egl or osmesa needed): {err}"
            ) from err
        self._view = mujoco.MjvScene(model, maxgeom=10000)
        self._rect = mujoco.MjrRect(0, 0, width, height)
        self._camera = mujoco.MjvCamera()
        self._camera.type = mujoco.mjtCamera.mjCAMERA_FIXED
        extent = model.stat.extent
        self._near = np.float32(model.vis.map.znear * extent)
        self._far = np.float32(model.vis.map.zfar * extent)
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
        if self._context is not None and self._flat_context is not None:
            self._gl.make_current()
            self._context.free()
            self._flat_context.free()
            self._context = self._flat_context = None
            self._gl.free()

    @staticmethod
    def _mjr_context(model: mujoco.MjModel, samples: int | None = None) -> mujoco.MjrContext:
        """A rendering context drawing to its own offscreen buffer, with the model's
        multisampling or ``samples`` per pixel (the flat pass takes 0: its ids and depth come
        out the same without it, and a multisampled buffer costs about a third of its time);
        depth reads reversed, 1 at the near plane and 0 at the far one."""
        quality = model.vis.quality
        kept = quality.offsamples
        if samples is not None:
            quality.offsamples = samples
        try:
            context = mujoco.MjrContext(model, mujoco.mjtFontScale.mjFONTSCALE_150.value)
        finally:
            quality.offsamples = kept
        mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN.value, context)
        context.readDepthMap = mujoco.mjtDepthMap.mjDEPTH_ZEROFAR
        return context

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
        camera_id = mujoco.mj_name2id(self._model, mujoco.mjtObj.mjOBJ_CAMERA, camera)
        if camera_id < 0:
            raise UnknownEntityError(f"unknown camera {camera!r}; known: {', '.join(CAMERAS)}")
        if self._context is None or self._flat_context is None:
            raise RenderError("the renderer was closed")
        info = camera_intrinsics(self._model, camera, self.width, self.height)
        self._gl.make_current()
        self._camera.fixedcamid = camera_id
        mujoco.mjv_updateScene(self._model, data, self._option, None, self._camera,
                               mujoco.mjtCatBit.mjCAT_ALL.value, self._view)
        rgb_img: npt.NDArray[np.uint8] | None = None
        depth_img: npt.NDArray[np.float32] | None = None
        seg_img: npt.NDArray[np.int32] | None = None
        if color:
            rgb_img = self._pass(flat=False)[0]
        if depth or segmentation:
            ids, zbuffer = self._pass(flat=True, read_depth=depth)
            if depth and zbuffer is not None:
                depth_img = self._metric(zbuffer)
            if segmentation:
                seg_img = self._entities(ids)
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

    def _pass(self, *, flat: bool, read_depth: bool = False
              ) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.float32] | None]:
        """One render of the updated scene: its colour buffer (lit colours, or with ``flat``
        each geom's id colour, unlit) and, if asked, its depth buffer; rows top first."""
        flags = self._view.flags
        saved = flags.copy()
        if flat:
            flags[mujoco.mjtRndFlag.mjRND_SEGMENT] = True
            flags[mujoco.mjtRndFlag.mjRND_IDCOLOR] = True
        context = self._flat_context if flat else self._context
        assert context is not None  # render() checks that the renderer is open
        try:
            # both contexts live in one GL context: bind this one's offscreen buffer
            mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN.value, context)
            mujoco.mjr_render(self._rect, self._view, context)
            rgb = np.empty((self.height, self.width, 3), dtype=np.uint8)
            zbuffer = np.empty((self.height, self.width), dtype=np.float32) if read_depth else None
            mujoco.mjr_readPixels(rgb, zbuffer, self._rect, context)
        finally:
            np.copyto(flags, saved)
        # OpenGL reads rows bottom first
        return np.flipud(rgb).copy(), None if zbuffer is None else np.flipud(zbuffer).copy()

    def _metric(self, zbuffer: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """Metres along the optical axis from the reversed depth buffer: with near plane n and
        far plane f, a buffer value b is the depth n f / (n + b (f - n)), so 1 reads n and 0
        reads f (the planes in single precision, as the GL projection has them; the division
        in double)."""
        near, far = self._near, self._far
        span = far - near
        numerator = float(far * near / span)
        return (numerator / (zbuffer.astype(np.float64) + float(near / span))).astype(np.float32)

    def _entities(self, ids: npt.NDArray[np.uint8]) -> npt.NDArray[np.int32]:
        """Entity index per pixel (-1: nothing, or a geom of no entity) from the id colours: a
        pixel's colour spells the scene geom's position plus one (0 is the background)."""
        code = (ids[:, :, 0].astype(np.int64) | (ids[:, :, 1].astype(np.int64) << 8)
                | (ids[:, :, 2].astype(np.int64) << 16))
        view = self._view
        model_geom = np.full(view.ngeom + 1, -1, dtype=np.int64)
        for slot in range(view.ngeom):
            shown = view.geoms[slot]
            if shown.segid >= 0 and shown.objtype == mujoco.mjtObj.mjOBJ_GEOM and shown.objid >= 0:
                model_geom[shown.segid + 1] = shown.objid
        geom = model_geom[np.clip(code, 0, view.ngeom)]
        out = np.full(geom.shape, -1, dtype=np.int32)
        hit = geom >= 0
        out[hit] = self._geom_to_index[geom[hit]]
        return out


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
