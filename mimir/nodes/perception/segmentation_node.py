"""Segmentation node: color images -> instance segmentation (``mimir_msgs/Segmentation``).

For every configured camera ``<cam>`` it subscribes ``cameras/<cam>/color/image_raw`` (sensor
QoS) and publishes ``cameras/<cam>/segmentation`` (sensor QoS; header = the color image's
header, so the stamp and optical frame carry over). With a ``part_vocabulary`` it also segments
the parts the executor points at (handles) and publishes them on ``cameras/<cam>/parts``, kept
apart so they never become memory nodes.

The model is slower than the camera, so the newest frame wins: the image callback only parks
the latest message per camera (a parked frame that is replaced unprocessed counts as
``dropped``), and a worker timer in its own callback group segments the parked frames at most
``max_rate_hz`` times per second per camera.

Backends (parameter ``backend``):

* ``sam3``: SAM3 through transformers (:mod:`mimir_perception.sam3`); ``model`` is a local
  directory (``config.json``, weights, tokenizer) or, with ``allow_hub``, a model hub id. The
  constructor only checks that the model exists (a missing path stops the node with exit
  status 1 and a message); the weights load in the worker right after startup, so startup
  never blocks on them.

In simulation the bridge publishes ground-truth segmentation itself, so this node is not started
there. The vocabulary (``vocabulary``: a name under ``config/vocabularies`` or a YAML path)
gives the prompts and the per-label score thresholds.

Bad input (unsupported encoding, empty or malformed image, a model failure) is skipped with a
rate-limited warning and counted; counters go to ``/diagnostics`` once per
``diagnostics_period``.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from sensor_msgs.msg import Image

from mimir.bounds import DEFAULT_BOUNDS, BoundsError
from mimir.nodes import common_params as shared
from mimir.nodes.perception.messages import PerceptionNodeError, segmentation_to_msg
from mimir.paths import ConfigFileNotFoundError, config_dir
from mimir.ros import qos
from mimir.ros.diagnostics import NodeCounters, SkipReasons
from mimir.ros.floatfix import FloatSafePublisher
from mimir.ros.images import IMAGE_SKIPS, image_to_rgb
from mimir.ros.params import declare_config
from mimir.ros.runtime import run_node
from mimir.ros.time import clock_seconds, to_seconds
from mimir.settings import param
from mimir_msgs.msg import Segmentation
from mimir_perception.errors import (
    ModelInferenceError,
    ModelNotFoundError,
    SegmentationError,
    VocabularyError,
)
from mimir_perception.segmentation import SegmentationBackend, SegmenterConfig
from mimir_perception.vocabulary import Vocabulary, load_named_vocabulary, load_vocabulary

BACKENDS = ("sam3",)
_WARN_KEYS = (
    "unsupported_encoding",
    "bad_image",
    "model_unavailable",
    "inference_failed",
    "out_of_order",
    "bad_stamp",
)
#: Counters of a frame the model fails on (a missing model is handled on its own).
_MODEL_SKIPS = SkipReasons(
    (ModelInferenceError, "inference_failed"),
    (SegmentationError, "bad_image"),
)


@dataclass(frozen=True)
class SegmentationNodeConfig:
    """Parameters of the segmentation node."""

    cameras: tuple[str, ...] = param(("base",), "camera names to segment", read_only=True)
    backend: str = param("sam3", "segmentation backend: sam3", read_only=True)
    model: str = param(
        "facebook/sam3",
        "SAM3 model directory (config.json + weights + tokenizer) or a hub id when allow_hub is "
        "true",
        read_only=True)
    allow_hub: bool = param(
        False, "resolve a non-path model through the model hub cache", read_only=True)
    device: str = param("cpu", "cpu, cuda or cuda:N", read_only=True)
    dtype: str = param("float32", "float32, float16 or bfloat16", read_only=True)
    vocabulary: str = param(
        "kitchen",
        "prompt vocabulary: a name under config/vocabularies or a YAML path",
        read_only=True)
    part_vocabulary: str = param(
        "parts",
        "vocabulary of the parts the executor points at (published on cameras/<cam>/parts); "
        "empty for none",
        read_only=True)
    mask_threshold: float = param(0.5, "mask probability threshold in (0, 1)", read_only=True)
    prompt_batch_size: int = param(8, "prompts decoded together per image", read_only=True)
    min_pixels: int = param(50, "instances with fewer pixels are dropped", read_only=True)
    max_instances: int = param(256, "most instances per image", read_only=True)
    max_rate_hz: float = param(
        2.0, "most frames segmented per second and camera (Hz)", read_only=True)
    preload: bool = param(
        True, "load the weights right after startup (in the worker)", read_only=True)
    diagnostics_period: float = shared.diagnostics_period()

    def __post_init__(self) -> None:
        shared.check_cameras(self.cameras)
        if self.backend not in BACKENDS:
            raise ValueError(
                f"backend must be one of {BACKENDS}, got {self.backend!r} (simulation "
                "ground truth is published by the sim bridge)"
            )
        if not self.max_rate_hz > 0.0 or not self.diagnostics_period > 0.0:
            raise ValueError("max_rate_hz and diagnostics_period must be positive")


def check_model_source(model: str, allow_hub: bool) -> None:
    """Fail fast when the SAM3 model cannot exist, without loading any weight.

    Raises:
        PerceptionNodeError: The path is missing or holds no ``config.json`` and is not an
            allowed hub id.
    """
    path = Path(model).expanduser()
    if path.exists():
        if not (path / "config.json").is_file():
            raise PerceptionNodeError(f"SAM3 model directory {path} has no config.json")
        return
    if allow_hub and "/" in model and not model.startswith(("/", ".", "~")):
        return
    raise PerceptionNodeError(
        f"SAM3 model {model!r} not found: get the weights (accept the licence on the facebook/sam3 "
        "model page, then `hf download facebook/sam3 --local-dir ~/models/sam3`) and launch with "
        "sam3_model:=~/models/sam3 (the 'model' parameter; a hub id needs allow_hub:=true)"
    )


def resolve_vocabulary(value: str) -> Vocabulary:
    """Load a vocabulary by name (``config/vocabularies/<name>.yaml``) or from a YAML path.

    Raises:
        PerceptionNodeError: Missing or malformed vocabulary.
    """
    try:
        if value.endswith((".yaml", ".yml")) or "/" in value:
            return load_vocabulary(Path(value).expanduser())
        return load_named_vocabulary(value, config_dir())
    except (VocabularyError, ConfigFileNotFoundError) as err:
        raise PerceptionNodeError(f"cannot load vocabulary {value!r}: {err}") from err


def make_backend(config: SegmentationNodeConfig) -> SegmentationBackend:
    """Construct the configured backend without loading weights.

    Raises:
        PerceptionNodeError: Missing model or invalid backend settings.
    """
    check_model_source(config.model, config.allow_hub)
    # Imported here: it pulls in torch and transformers, which only this backend needs.
    from mimir_perception.sam3 import Sam3Backend, Sam3BackendConfig  # noqa: PLC0415

    try:
        return Sam3Backend(
            Sam3BackendConfig(
                model=config.model,
                device=config.device,
                dtype=config.dtype,
                mask_threshold=config.mask_threshold,
                prompt_batch_size=config.prompt_batch_size,
                allow_hub=config.allow_hub,
                segmenter=SegmenterConfig(config.min_pixels, config.max_instances),
            )
        )
    except SegmentationError as err:
        raise PerceptionNodeError(f"invalid SAM3 settings: {err}") from err


class SegmentationNode(Node):
    """Segments the newest color frame of each camera and publishes the instances."""

    def __init__(self, backend: SegmentationBackend | None = None, **kwargs: Any) -> None:
        """Create the node.

        Args:
            backend: Use this backend instead of building one from the parameters.
            **kwargs: Passed to :class:`rclpy.node.Node` (``context``, ``parameter_overrides``).
        """
        super().__init__("segmentation", **kwargs)
        try:
            self.config = declare_config(self, SegmentationNodeConfig)
        except ValueError as err:
            raise PerceptionNodeError(str(err)) from err
        cfg = self.config
        self.vocabulary = resolve_vocabulary(cfg.vocabulary)
        self.parts = resolve_vocabulary(cfg.part_vocabulary) if cfg.part_vocabulary else None
        self.backend = backend if backend is not None else make_backend(cfg)
        self.backend_name = cfg.backend
        self.counters = NodeCounters(_WARN_KEYS)
        self._lock = threading.Lock()
        self._pending: dict[str, Image | None] = dict.fromkeys(cfg.cameras)
        self._last_stamp: dict[str, float] = {}
        self._model_failed = False
        self._work_group = MutuallyExclusiveCallbackGroup()
        self._seg_pubs = {
            cam: self.create_publisher(Segmentation, f"cameras/{cam}/segmentation", qos.SENSOR,
                                       publisher_class=FloatSafePublisher)
            for cam in cfg.cameras
        }
        self._part_pubs = {
            cam: self.create_publisher(Segmentation, f"cameras/{cam}/parts", qos.SENSOR,
                                       publisher_class=FloatSafePublisher)
            for cam in (cfg.cameras if self.parts is not None else ())
        }
        for cam in cfg.cameras:
            self.create_subscription(
                Image, f"cameras/{cam}/color/image_raw", partial(self._on_color, cam), qos.SENSOR
            )
        self._diagnostics = self.create_publisher(DiagnosticArray, "/diagnostics", qos.EVENTS,
                                                  publisher_class=FloatSafePublisher)
        self.create_timer(1.0 / cfg.max_rate_hz, self._work, callback_group=self._work_group)
        self.create_timer(cfg.diagnostics_period, self._report)
        self._preload_timer = (
            self.create_timer(0.0, self._preload, callback_group=self._work_group)
            if cfg.preload
            else None
        )
        self.get_logger().info(
            f"segmenting {', '.join(cfg.cameras)} with {cfg.backend} "
            f"({len(self.vocabulary.entries)} prompts from {self.vocabulary.name!r}) "
            f"at <= {cfg.max_rate_hz} Hz"
        )

    def _preload(self) -> None:
        if self._preload_timer is not None:
            self._preload_timer.cancel()
            self.destroy_timer(self._preload_timer)
            self._preload_timer = None
        load = getattr(self.backend, "load", None)
        if load is None:
            return
        try:
            load()
        except ModelNotFoundError as err:
            self._model_failed = True
            self.get_logger().error(f"cannot load the segmentation model: {err}")

    def _on_color(self, camera: str, msg: Image) -> None:
        self.counters.add(f"{camera}.received")
        stamp = to_seconds(msg.header.stamp)
        try:  # one frame stamped far ahead would make every later frame out of order
            DEFAULT_BOUNDS.stamp(stamp, clock_seconds(self), f"{camera} image stamp")
        except BoundsError as err:
            self._skip(camera, "bad_stamp", f"skipping frame: {err}")
            return
        with self._lock:
            if stamp < self._last_stamp.get(camera, -1.0):
                self.counters.add(f"{camera}.out_of_order")
                return
            self._last_stamp[camera] = stamp
            if self._pending[camera] is not None:
                self.counters.add(f"{camera}.dropped")
            self._pending[camera] = msg

    def _take(self, camera: str) -> Image | None:
        with self._lock:
            msg = self._pending[camera]
            self._pending[camera] = None
        return msg

    def _work(self) -> None:
        for camera in self.config.cameras:
            msg = self._take(camera)
            if msg is not None:
                self._process(camera, msg)

    def _skip(self, camera: str, key: str, text: str) -> None:
        self.counters.add(f"{camera}.{key}")
        self.get_logger().warning(f"{camera}: {text}", throttle_duration_sec=5.0)

    def _process(self, camera: str, msg: Image) -> None:
        if self._model_failed:
            self._skip(camera, "model_unavailable", "segmentation model failed to load")
            return
        try:
            rgb = image_to_rgb(msg)
        except IMAGE_SKIPS.errors as err:
            self._skip(camera, IMAGE_SKIPS.key(err), f"skipping frame: {err}")
            return
        stamp = to_seconds(msg.header.stamp)
        try:
            result = self.backend.segment(rgb, self.vocabulary, stamp=stamp, camera=camera)
            parts = (self.backend.segment(rgb, self.parts, stamp=stamp, camera=camera)
                     if self.parts is not None else None)
        except ModelNotFoundError as err:
            self._model_failed = True
            self._skip(camera, "model_unavailable", f"cannot load the model: {err}")
            return
        except _MODEL_SKIPS.errors as err:
            self._skip(camera, _MODEL_SKIPS.key(err), f"skipping frame: {err}")
            return
        self._seg_pubs[camera].publish(
            segmentation_to_msg(result, msg.header, self.backend_name, camera)
        )
        self.counters.add(f"{camera}.published")
        self.counters.add(f"{camera}.instances", len(result))
        if parts is not None:
            self._part_pubs[camera].publish(
                segmentation_to_msg(parts, msg.header, self.backend_name, camera))
            self.counters.add(f"{camera}.parts", len(parts))

    def _report(self) -> None:
        self.counters.publish(self, self._diagnostics, ",".join(self.config.cameras))


def main(args: list[str] | None = None) -> int:
    """Run the segmentation node."""
    return run_node(SegmentationNode, args, threads=1)  # callbacks never wait on each other


if __name__ == "__main__":
    sys.exit(main())
