"""Keyframe node: owns the keyframe store.

Keeps a short buffer of recent color frames per camera, each with its segmentation
(``cameras/<cam>/segmentation``) once that arrives. When a primitive ends
(``interaction_events``, phase ENDED) it saves, for every camera, the frames just before, in the
middle of and just after the action window, linked to the primitive's target (interaction frames
are always kept). When world memory creates or updates a node (``memory_events``) it saves the
newest frame of the perception camera linked to the nodes involved, subject to the store's
blank/blurry/near-duplicate filters. Serves ``query_keyframes``, ``get_keyframe_image``,
``save_keyframe`` (e.g. the analyzer's peak frame) and ``add_keyframe_labels``.

Every keyframe records its camera view when it can: the optical frame's pose in the map at the
frame's stamp (TF) and the intrinsics of the camera's latest ``camera_info`` scaled to the stored
image; and its segmentation's instance-id image when the frame has one (a reader then takes an
object's pixels from the segmenter's mask). The newest ``frustums`` keyframes with a view are
drawn as camera frustums on ``keyframes/markers`` (latched).
"""

from __future__ import annotations

import math
import sys
import threading
import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.node import Node
from sensor_msgs.msg import CameraInfo, Image
from visualization_msgs.msg import MarkerArray

from mimir.bounds import BoundsError
from mimir.nodes.memory.keyframe_messages import (
    instances_from_msg,
    trigger_from_msg,
    trigger_to_msg,
)
from mimir.nodes.memory.keyframe_params import KeyframeConfig
from mimir.nodes.memory.keyframe_services import StoreServices
from mimir.nodes.memory.keyframe_views import CameraViews
from mimir.nodes.memory.markers import frustum_markers
from mimir.nodes.memory.messages import MessageValueError
from mimir.paths import config_file, data_dir
from mimir.ros import qos
from mimir.ros.diagnostics import NodeCounters
from mimir.ros.errors import set_error
from mimir.ros.floatfix import FloatSafePublisher
from mimir.ros.images import ImageConversionError, image_to_rgb
from mimir.ros.params import declare_config
from mimir.ros.runtime import run_node
from mimir.ros.tf import ClosesTransforms, make_transform_source
from mimir.ros.time import clock_seconds, to_seconds
from mimir_memory.config import load_memory_config
from mimir_memory.errors import MemoryStoreError, failure_class
from mimir_memory.keyframes import KeyframeStore, Trigger
from mimir_msgs.msg import InteractionEvent, Segmentation
from mimir_msgs.msg import MemoryEvent as MemoryEventMsg
from mimir_msgs.srv import SaveKeyframe
from mimir_perception.frames import PairedFrames

RgbImage = npt.NDArray[np.uint8]
#: A camera's buffer: colour frames (image, optical frame) paired with their segmentations.
FrameStream = PairedFrames[tuple[RgbImage, str], Segmentation, None]

#: A segmentation belongs to the colour frame of its own stamp (s).
_SAME_FRAME_S = 1e-3

#: Memory events after which a perception keyframe is worth taking.
_GRAPH_CHANGES = {"node_created", "property_set", "contents_set"}


#: TF kept beyond the oldest frame the node may still save (s): a transform can trail its image.
_TF_SLACK_S = 5.0

#: Counters that turn the /diagnostics status to WARN when they grow.
_WARN_KEYS = ("store_error", "refused", "bad_image", "bad_camera_info")


@dataclass
class _PendingInteraction:
    event: InteractionEvent
    received: float


class KeyframeNode(ClosesTransforms, Node):
    """Owns the keyframe store; see the module docstring for its interfaces."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("keyframes", **kwargs)
        self.config = declare_config(self, KeyframeConfig)
        memory_config = load_memory_config(config_file("memory.yaml", self.config.memory_config))
        root = data_dir(self.config.memory_dir) / "keyframes"
        self.store = KeyframeStore.open(root, config=memory_config)
        self.root = root
        self.session = self.config.session or uuid.uuid4().hex[:12]
        self.buffers: dict[str, FrameStream] = {
            cam: PairedFrames(self.config.buffer_seconds, self.config.buffer_min_period_s,
                              _SAME_FRAME_S, max_count=self.config.buffer_max_frames)
            for cam in self.config.cameras}
        self.counters = NodeCounters(_WARN_KEYS)
        self._pending: list[_PendingInteraction] = []
        self._pending_lock = threading.Lock()
        self._last_perception = -math.inf
        self._frames_changed = True  # draw what the store already holds
        # a frame is saved up to buffer_seconds after it was taken: keep TF as long
        self._tf = make_transform_source(
            self, cache_seconds=(self.config.buffer_seconds + self.config.after_wait_s
                                 + _TF_SLACK_S))
        self.views = CameraViews(self, self._tf, self.config.map_frame, self.config.base_frame,
                                 self._count)
        camera_group = ReentrantCallbackGroup()
        store_group = MutuallyExclusiveCallbackGroup()
        for cam in self.config.cameras:
            self.create_subscription(
                Image, f"cameras/{cam}/color/image_raw",
                lambda msg, cam=cam: self._on_image(cam, msg), qos.SENSOR,
                callback_group=camera_group)
            self.create_subscription(
                CameraInfo, f"cameras/{cam}/color/camera_info",
                lambda msg, cam=cam: self.views.on_camera_info(cam, msg), qos.SENSOR,
                callback_group=camera_group)
            self.create_subscription(
                Segmentation, f"cameras/{cam}/segmentation",
                lambda msg, cam=cam: self.buffers[cam].add_depth(
                    to_seconds(msg.header.stamp), msg),
                qos.SENSOR, callback_group=camera_group)
        self.create_subscription(InteractionEvent, "interaction_events", self._on_interaction,
                                 qos.EVENTS, callback_group=store_group)
        self.create_subscription(MemoryEventMsg, "memory_events", self._on_memory_event,
                                 qos.EVENTS, callback_group=store_group)
        self.create_service(SaveKeyframe, "save_keyframe", self._on_save,
                            callback_group=store_group)
        self.store_services = StoreServices(self, self.store,
                                            query_limit=self.config.query_limit,
                                            refuse=self._refuse, group=store_group)
        self.create_timer(0.2, self._flush_interactions, callback_group=store_group)
        self._diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", qos.EVENTS,
            publisher_class=FloatSafePublisher)
        self._frustum_pub = self.create_publisher(MarkerArray, "keyframes/markers", qos.LATCHED,
                                                  publisher_class=FloatSafePublisher)
        if self.config.frustums:
            self.create_timer(1.0, self._publish_frustums, callback_group=store_group)
        self.create_timer(self.config.diagnostics_period, self._report,
                          callback_group=store_group)
        self.get_logger().info(f"keyframe store at {root}: {self.store.count()} keyframes, "
                               f"session {self.session}")

    def destroy_node(self) -> None:
        """Close the store before the node goes (a node whose start failed may have none)."""
        store = getattr(self, "store", None)
        if store is not None:
            store.close()
        super().destroy_node()

    def _count(self, key: str) -> None:
        self.counters.add(key)

    def _report(self) -> None:
        self.counters.set("keyframes", self.store.count())
        self.counters.publish(self, self._diag_pub, "keyframe_store")

    def _refuse(self, response: Any, failure: str, message: str) -> Any:
        self._count("refused")
        self.get_logger().warning(f"request refused ({failure}): {message}",
                                  throttle_duration_sec=1.0)
        return set_error(response, failure, message)

    # ------------------------------------------------------------------- frames
    def _on_image(self, camera: str, msg: Image) -> None:
        stamp = to_seconds(msg.header.stamp)
        try:  # a frame stamped far ahead would age every real frame out of the buffer
            self.store.config.bounds.stamp(stamp, clock_seconds(self), f"{camera} image stamp")
        except BoundsError as err:
            self._count(f"{camera}.bad_stamp")
            self.get_logger().warning(f"ignoring {camera} image: {err}",
                                      throttle_duration_sec=5.0)
            return
        if not self.buffers[camera].admits(stamp):
            return  # within buffer_min_period_s of the last kept frame: not even decoded
        try:
            rgb = image_to_rgb(msg)
        except ImageConversionError as err:
            self._count(f"{camera}.bad_image")
            self.get_logger().warning(f"ignoring {camera} image: {err}", throttle_duration_sec=5.0)
            return
        self.buffers[camera].add_color(stamp, (rgb, msg.header.frame_id))

    def _publish_frustums(self) -> None:
        if not self._frames_changed or not self._frustum_pub.get_subscription_count():
            return
        self._frames_changed = False
        try:
            frames = self.store.query(limit=self.config.frustums)
        except MemoryStoreError as err:
            self._count("store_error")
            self.get_logger().error(f"cannot read keyframes to draw: {err}",
                                    throttle_duration_sec=5.0)
            return
        self._frustum_pub.publish(frustum_markers(frames, self.config.map_frame,
                                                  self.config.frustum_depth_m))

    def _instances(self, camera: str, segmentation: Segmentation | None,
                   shape: tuple[int, ...]) -> npt.NDArray[np.uint16] | None:
        """A frame's instance-id image, or None when it has no segmentation or one that is not
        a 16-bit image of its size (counted and logged; the frame is saved without it)."""
        if segmentation is None:
            return None
        try:
            return instances_from_msg(segmentation, shape)
        except MessageValueError as err:
            self._count(f"{camera}.bad_segmentation")
            self.get_logger().warning(f"{camera} frame saved without its segmentation: {err}",
                                      throttle_duration_sec=5.0)
            return None

    def _save(self, camera: str, stamp: float, side: str, *, trigger: Trigger,
              action: str | None, nodes: list[str], tags: list[str],
              labels: tuple[tuple[str, str], ...] = (), parent: str | None = None,
              caption: str = "", max_offset: float | None = None) -> tuple[str, str]:
        """Save the buffered frame of ``camera`` nearest ``stamp``; returns (id, result)."""
        buffer = self.buffers.get(camera)
        if buffer is None:
            raise KeyError(f"camera {camera!r} is not buffered")
        found = buffer.nearest(stamp, side)
        offset = self.config.max_offset_s if max_offset is None else max_offset
        if found is None or abs(found.stamp - stamp) > offset:
            self._count("no_frame")
            return "", "no_frame"
        frame_stamp, (rgb, optical_frame) = found.stamp, found.color
        result = self.store.save(
            np.ascontiguousarray(rgb[:, :, ::-1]), timestamp=frame_stamp, camera=camera,
            trigger=trigger, session=self.session, action=action, parent_frame=parent,
            node_ids=nodes,
            robot_pose=self.views.robot_pose(frame_stamp), tags=tags, labels=labels,
            caption=caption,
            camera_view=self.views.view(camera, optical_frame, frame_stamp, rgb.shape[1],
                                        rgb.shape[0]),
            instances=self._instances(camera, found.depth, rgb.shape[:2]),
        )
        self._frames_changed |= result.saved
        self._count(f"save_{result.reason}")
        return result.frame_id or "", result.reason

    # ------------------------------------------------------------- interactions
    def _on_interaction(self, msg: InteractionEvent) -> None:
        if msg.phase != InteractionEvent.PHASE_ENDED:
            return
        with self._pending_lock:
            self._pending.append(_PendingInteraction(msg, to_seconds(msg.window_end)))

    def _flush_interactions(self) -> None:
        with self._pending_lock:
            pending, self._pending = self._pending, []
        keep = []
        for item in pending:
            end = to_seconds(item.event.window_end)
            ready = all((b.latest_stamp() or -math.inf) >= end for b in self.buffers.values())
            newest = max((b.latest_stamp() or -math.inf) for b in self.buffers.values())
            if ready or newest >= end + self.config.after_wait_s or not math.isfinite(newest):
                self._save_interaction(item.event)
            else:
                keep.append(item)
        with self._pending_lock:
            self._pending.extend(keep)

    def _save_interaction(self, event: InteractionEvent) -> None:
        start, end = to_seconds(event.window_start), to_seconds(event.window_end)
        nodes = [event.target_id] if event.target_id else []
        base_tags = [f"interaction:{event.interaction_id}", f"outcome:{event.outcome}"]
        for camera in self.config.cameras:
            parent = ""
            for trigger, stamp, side in ((Trigger.INTERACTION_PRE, start, "before"),
                                         (Trigger.INTERACTION_DURING, (start + end) / 2.0, "any"),
                                         (Trigger.INTERACTION_POST, end, "after")):
                phase = trigger_to_msg(trigger)[1]
                try:
                    frame_id, result = self._save(
                        camera, stamp, side, trigger=trigger, action=event.primitive,
                        nodes=nodes, tags=base_tags, parent=parent or None,
                        max_offset=max(self.config.after_wait_s, (end - start) / 2.0 + 0.5),
                    )
                except MemoryStoreError as err:
                    self._count("store_error")
                    self.get_logger().error(f"could not save {phase} frame of {camera}: {err}")
                    continue
                if frame_id and not parent:
                    parent = frame_id
                self.get_logger().debug(f"{event.interaction_id} {camera} {phase}: {result}")
        self._enforce_budget(end)

    def _enforce_budget(self, stamp: float) -> None:
        if self.config.disk_budget_mb <= 0:
            return
        removed = self.store.enforce_budget(int(self.config.disk_budget_mb * 1e6), (),
                                            stamp=stamp)
        if removed:
            self._frames_changed = True
            self.get_logger().info(f"retention removed {len(removed)} perception keyframes")

    # ----------------------------------------------------------- graph changes
    def _on_memory_event(self, msg: MemoryEventMsg) -> None:
        if msg.kind not in _GRAPH_CHANGES or msg.verdict not in ("admit", "correct", ""):
            return
        stamp = to_seconds(msg.header.stamp)
        if stamp - self._last_perception < self.config.perception_min_period_s:
            return
        camera = self.config.perception_camera
        if camera not in self.buffers:
            return
        try:
            payload = self.store.config.bounds.parse_json(msg.payload_json or "{}",
                                                          "memory event payload")
        except BoundsError:
            self._count("bad_memory_event")
            payload = {}
        if not isinstance(payload, dict):
            payload = {}
        nodes = [msg.subject_id] if msg.subject_id else []
        try:
            _, result = self._save(
                camera, stamp, "any",
                trigger=Trigger.NEW_NODE if msg.kind == "node_created" else Trigger.NODE_UPDATE,
                action=None, nodes=nodes,
                tags=[f"event:{msg.kind}"], caption=str(payload.get("label", "")),
            )
        except MemoryStoreError as err:
            self._count("store_error")
            self.get_logger().error(f"could not save a perception keyframe: {err}",
                                    throttle_duration_sec=5.0)
            return
        if result == "saved":
            self._last_perception = stamp
        self._enforce_budget(stamp)

    # ----------------------------------------------------------------- services
    def _on_save(self, request: SaveKeyframe.Request,
                 response: SaveKeyframe.Response) -> SaveKeyframe.Response:
        try:
            trigger = trigger_from_msg(request.trigger, request.phase)
        except MessageValueError as err:
            return self._refuse(response, "INVALID_REQUEST", str(err))
        if request.camera not in self.buffers:
            return self._refuse(response, "INVALID_REQUEST",
                                f"camera {request.camera[:64]!r} is not buffered")
        offset = float(request.max_offset_s)
        if not math.isfinite(offset) or offset < 0.0:
            return self._refuse(response, "INVALID_REQUEST",
                                f"max_offset_s must be a finite number >= 0 (0 for the "
                                f"default {self.config.max_offset_s:g} s), got {offset!r}")
        tags = [f"interaction:{request.interaction_id}"] if request.interaction_id else []
        try:
            frame_id, result = self._save(
                request.camera, to_seconds(request.stamp), "any", trigger=trigger,
                action=request.action or None, nodes=list(request.linked_nodes), tags=tags,
                labels=tuple((lab.text, lab.source or "analyzer") for lab in request.labels),
                caption=request.caption, max_offset=offset or None,
            )
        except MemoryStoreError as err:
            return self._refuse(response, failure_class(err), str(err))
        response.result = result
        response.keyframe_id = frame_id
        if result == "no_frame":
            response.error_code = SaveKeyframe.Response.NO_FRAME
            response.error_msg = f"no {request.camera} frame near the requested stamp"
        elif not frame_id:
            response.error_code = SaveKeyframe.Response.REJECTED
            response.error_msg = f"frame rejected as {result}"
        return response


def main(args: list[str] | None = None) -> int:
    """Console script ``keyframe_node``."""
    return run_node(KeyframeNode, args, threads=1)  # callbacks never wait on each other


if __name__ == "__main__":
    sys.exit(main())
