"""Camera feeder of ``bench_keepup.py``: replays the 7-Scenes kitchen as three robot cameras.

Run by ``bench_keepup.py`` as its own process; it can also be started by hand::

    .venv/bin/python benchmarks/keepup_feed.py --rate 15 --duration 60 --stamps stamps.txt

Before the clock starts it loads the recording (``frame-XXXXXX.color.jpg`` 640x480,
``.depth.png`` 16-bit mm, ``.pose.txt`` 4x4 camera-to-world, ``camera-intrinsics.txt``), scales
every frame to 1280x720 (colour bilinear, depth and masks nearest-neighbour, intrinsics scaled
to match), and builds every message once. The publishing loop only changes header stamps and
frame names, so the feeder costs little beside the nodes it feeds.

Per camera and frame it publishes, all stamped with the same wall-clock time (rounded to 0.1 ms
so that the stamp survives the float round trips in the nodes and can be matched exactly):

* ``/tf``: ``map`` -> ``<cam>_color_optical_frame`` (the recorded camera-to-world pose; the
  recording's camera axes are already the optical axes: x right, y down, z forward);
* ``cameras/<cam>/color/camera_info`` (ideal pinhole, rectified);
* ``cameras/<cam>/depth/image_raw`` (``16UC1`` mm, or ``32FC1`` m with ``--depth-encoding``);
* ``cameras/<cam>/segmentation`` (``mimir_msgs/Segmentation``, header = the colour header);
* ``cameras/<cam>/color/image_raw`` (``rgb8``; left out with ``--no-color``).

The cameras take turns within each period (camera i is published i/N of a period after
camera 0) and each cycles through the frames from its own offset, so the three streams show
different parts of the kitchen at any moment.

Segmentation stand-in: the recording has no masks, and SAM3 is not run here. In its place every
frame is cut into regions by a fixed rule: median blur (7 px), colour quantised to 4 levels per
channel (64 colour bins), each bin opened with a 5 px ellipse and split into 4-connected
components; the 15 largest components of at least 0.3 % of the image become instances. An
instance's label is the kitchen vocabulary entry picked by its colour bin (so the same surface
keeps its label from frame to frame and fuses in memory), its score grows with its area
(0.55 to 0.95). The result is deterministic and cached as one ``.npz`` per frame under
``<tmp>/mimir_keepup_masks/``. These masks stand in for SAM3 output: they have its shape and
size (an id image plus 10 to 20 labelled instances per frame), not its meaning. The depth of
7-Scenes comes from a separate sensor and is not exactly registered to the colour image; that
changes which points land in a mask, not the work per frame.

Control: the feeder prints ``READY <frames> <seconds of preparation>`` when everything is built,
waits for a line ``GO`` on stdin, prints ``STARTED <wall time>`` and publishes for
``--warmup`` + ``--duration`` seconds (or until ``STOP``, end of stdin, SIGINT or SIGTERM).
Every published frame is appended to ``--stamps`` as ``<camera> <stamp>``; a summary (achieved
rate, lag behind the schedule, time spent publishing, own CPU) goes to ``--summary`` as JSON and
to stderr, then it prints ``DONE``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import cv2
import numpy as np
import numpy.typing as npt
import yaml
from scipy import ndimage

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import rclpy
from geometry_msgs.msg import TransformStamped
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions
from sensor_msgs.msg import CameraInfo, Image
from std_msgs.msg import Header
from tf2_msgs.msg import TFMessage

from mimir.nodes.perception.messages import (
    intrinsics_to_camera_info,
    segmentation_to_msg,
)
from mimir.ros import qos
from mimir.ros.images import numpy_to_image
from mimir.ros.tf import matrix_to_transform
from mimir.ros.time import from_seconds
from mimir_msgs.msg import Segmentation
from mimir_perception.camera import Intrinsics
from mimir_perception.segmentation import InstanceInfo, SegmentationResult
from mimir_robot.contract import camera_optical_frame, camera_topics

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO_ROOT.parent / "shared/data/sevenscenes_kitchen"
DEFAULT_VOCABULARY = REPO_ROOT / "config/vocabularies/kitchen.yaml"
WIDTH, HEIGHT = 1280, 720
MAP_FRAME = "map"
#: Stamps are rounded to this (s): coarse enough to survive float64 round trips at epoch times
#: (about 0.2 us of resolution), fine enough not to matter for latencies.
STAMP_QUANTUM = 1e-4
BACKEND = "keepup_colour_regions"

# The segmentation stand-in; changing any of these changes the cache key.
MASK_METHOD = "v1"
MEDIAN_PX = 7
LEVELS = 4
OPEN_PX = 5
MIN_AREA_SHARE = 0.003
MAX_REGIONS = 15


def stamp_key(stamp: float) -> int:
    """The integer key of a stamp (units of :data:`STAMP_QUANTUM`)."""
    return round(stamp / STAMP_QUANTUM)


def load_vocabulary(path: Path) -> list[str]:
    """Labels of a vocabulary YAML (fixtures, then objects), in file order."""
    data = yaml.safe_load(path.read_text())
    labels: list[str] = []
    for section in ("fixtures", "objects"):
        for entry in data.get(section) or []:
            labels.append(entry["label"] if isinstance(entry, dict) else str(entry))
    if not labels:
        raise ValueError(f"{path} lists no labels")
    return labels


def frame_stems(data: Path, limit: int) -> list[str]:
    """Names ``frame-XXXXXX`` of the recording's complete frames, in order (at most ``limit``)."""
    stems = sorted(p.name[: -len(".color.jpg")] for p in data.glob("frame-*.color.jpg"))
    stems = [s for s in stems if (data / f"{s}.depth.png").is_file()
             and (data / f"{s}.pose.txt").is_file()]
    if not stems:
        raise FileNotFoundError(f"no complete frames (colour, depth, pose) in {data}")
    return stems[:limit] if limit > 0 else stems


# ---------------------------------------------------------------- segmentation stand-in
@dataclass(frozen=True)
class Region:
    """One instance of the stand-in segmentation (in the 640x480 source image)."""

    instance_id: int
    label: str
    score: float


def segment_regions(bgr: npt.NDArray[np.uint8], vocabulary: list[str]
                    ) -> tuple[npt.NDArray[np.uint8], list[Region]]:
    """Colour-quantised connected components (see the module docstring): id image and table."""
    blur = cv2.medianBlur(bgr, MEDIAN_PX)
    q = (blur // (256 // LEVELS)).astype(np.int32)
    bins = q[..., 0] * LEVELS * LEVELS + q[..., 1] * LEVELS + q[..., 2]
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (OPEN_PX, OPEN_PX))
    min_area = MIN_AREA_SHARE * bins.size
    components: dict[int, npt.NDArray[np.int32]] = {}
    candidates: list[tuple[int, int, int]] = []  # (area, colour bin, component)
    for colour in np.unique(bins).tolist():
        mask = cv2.morphologyEx((bins == colour).astype(np.uint8), cv2.MORPH_OPEN, kernel)
        count, labels, stats, _ = cv2.connectedComponentsWithStats(mask, connectivity=4)
        found = [(int(stats[i, cv2.CC_STAT_AREA]), colour, i) for i in range(1, count)
                 if stats[i, cv2.CC_STAT_AREA] >= min_area]
        if found:
            components[colour] = labels
            candidates.extend(found)
    candidates.sort(key=lambda c: (-c[0], c[1], c[2]))
    kept = candidates[:MAX_REGIONS]
    ids = np.zeros(bins.shape, np.uint8)
    regions: list[Region] = []
    largest = kept[0][0] if kept else 1
    for rank, (area, colour, component) in enumerate(kept, start=1):
        ids[components[colour] == component] = rank
        score = round(0.55 + 0.4 * area / largest, 3)
        regions.append(Region(rank, vocabulary[colour % len(vocabulary)], score))
    return ids, regions


def mask_cache_dir(data: Path, vocabulary: list[str]) -> Path:
    """Cache folder of the stand-in masks for this recording, method and vocabulary."""
    key = json.dumps([MASK_METHOD, str(data.resolve()), MEDIAN_PX, LEVELS, OPEN_PX,
                      MIN_AREA_SHARE, MAX_REGIONS, vocabulary])
    digest = hashlib.sha1(key.encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / "mimir_keepup_masks" / f"{MASK_METHOD}-{digest}"


def cached_regions(cache: Path, stem: str, bgr: npt.NDArray[np.uint8], vocabulary: list[str]
                   ) -> tuple[npt.NDArray[np.uint8], list[Region]]:
    """The stand-in segmentation of one frame, from the cache or computed and stored."""
    path = cache / f"{stem}.npz"
    if path.is_file():
        try:
            with np.load(path, allow_pickle=False) as data:
                ids = data["ids"]
                table = json.loads(str(data["table"]))
            return ids, [Region(int(i), str(label), float(s)) for i, label, s in table]
        except (OSError, ValueError, KeyError):
            pass  # a damaged cache entry is computed again
    ids, regions = segment_regions(bgr, vocabulary)
    cache.mkdir(parents=True, exist_ok=True)
    tmp = cache / f"{stem}.tmp.npz"
    table = json.dumps([[r.instance_id, r.label, r.score] for r in regions])
    np.savez_compressed(tmp, ids=ids, table=np.array(table))
    tmp.replace(path)
    return ids, regions


# ---------------------------------------------------------------- scaling to 1280x720
def nearest_index(src: int, dst: int) -> npt.NDArray[np.intp]:
    """Source index of each destination pixel under nearest-neighbour scaling (floor rule)."""
    return (np.arange(dst) * src) // dst


def instance_table(ids: npt.NDArray[np.uint16], regions: list[Region]
                   ) -> tuple[InstanceInfo, ...]:
    """Table rows with the exact pixel boxes and counts of each region in the scaled id image."""
    slices = ndimage.find_objects(ids)
    counts = np.bincount(ids.ravel(), minlength=len(slices) + 1)
    rows: list[InstanceInfo] = []
    for region in regions:
        box = slices[region.instance_id - 1] if region.instance_id <= len(slices) else None
        if box is None:
            continue  # the region vanished in scaling (cannot happen when scaling up)
        ys, xs = box
        rows.append(InstanceInfo(region.instance_id, region.label, region.score,
                                 (xs.start, ys.start, xs.stop, ys.stop),
                                 int(counts[region.instance_id])))
    return tuple(rows)


def read_intrinsics(data: Path, src_w: int, src_h: int) -> Intrinsics:
    """The recording's intrinsics scaled to 1280x720 (pixel centres kept aligned)."""
    k = np.loadtxt(data / "camera-intrinsics.txt").reshape(3, 3)
    sx, sy = WIDTH / src_w, HEIGHT / src_h
    return Intrinsics(
        fx=float(k[0, 0]) * sx,
        fy=float(k[1, 1]) * sy,
        cx=(float(k[0, 2]) + 0.5) * sx - 0.5,
        cy=(float(k[1, 2]) + 0.5) * sy - 0.5,
        width=WIDTH,
        height=HEIGHT,
    )


@dataclass
class FrameMessages:
    """The pre-built messages of one recorded frame (headers are filled at publish time)."""

    color: Image
    depth: Image
    segmentation: Segmentation
    transform: TransformStamped
    instances: int


def build_frame(data: Path, stem: str, cache: Path, vocabulary: list[str],
                depth_encoding: str) -> FrameMessages:
    """Load, scale, segment and encode one frame."""
    bgr = cv2.imread(str(data / f"{stem}.color.jpg"), cv2.IMREAD_COLOR)
    depth_mm = cv2.imread(str(data / f"{stem}.depth.png"), cv2.IMREAD_UNCHANGED)
    if bgr is None or depth_mm is None or depth_mm.dtype != np.uint16:
        raise ValueError(f"{stem}: unreadable colour or depth image")
    pose = np.loadtxt(data / f"{stem}.pose.txt").reshape(4, 4)
    ids_small, regions = cached_regions(cache, stem, bgr, vocabulary)
    rows = nearest_index(bgr.shape[0], HEIGHT)
    cols = nearest_index(bgr.shape[1], WIDTH)
    rgb = cv2.resize(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB), (WIDTH, HEIGHT),
                     interpolation=cv2.INTER_LINEAR)
    depth_mm = np.where(depth_mm == 65535, 0, depth_mm).astype(np.uint16)  # 65535 = no reading
    depth_mm = depth_mm[rows][:, cols]
    ids = ids_small[rows][:, cols].astype(np.uint16)
    depth_array: npt.NDArray[Any] = (
        depth_mm if depth_encoding == "16UC1" else depth_mm.astype(np.float32) / 1000.0)
    infos = instance_table(ids, regions)
    result = SegmentationResult(ids, infos)
    header = Header()
    return FrameMessages(
        color=numpy_to_image(rgb, "rgb8", header),
        depth=numpy_to_image(depth_array, depth_encoding, header),
        segmentation=segmentation_to_msg(result, header, BACKEND, camera=""),
        transform=matrix_to_transform(pose, MAP_FRAME, "", 0.0),
        instances=len(infos),
    )


def prepare(data: Path, vocabulary_file: Path, limit: int, depth_encoding: str
            ) -> tuple[list[FrameMessages], CameraInfo]:
    """Every frame's messages and the camera info, built before the clock starts."""
    vocabulary = load_vocabulary(vocabulary_file)
    stems = frame_stems(data, limit)
    first = cv2.imread(str(data / f"{stems[0]}.color.jpg"), cv2.IMREAD_COLOR)
    if first is None:
        raise ValueError(f"cannot read {stems[0]}.color.jpg")
    intrinsics = read_intrinsics(data, first.shape[1], first.shape[0])
    cache = mask_cache_dir(data, vocabulary)
    frames = [build_frame(data, stem, cache, vocabulary, depth_encoding) for stem in stems]
    return frames, intrinsics_to_camera_info(intrinsics, Header())


# ---------------------------------------------------------------- publishing
@dataclass
class CameraPublishers:
    """The publishers of one camera."""

    name: str
    optical: str
    info: Any
    depth: Any
    segmentation: Any
    color: Any | None


class Feeder:
    """Publishes the pre-built frames of every camera at a fixed rate."""

    def __init__(self, node: Node, frames: list[FrameMessages], info: CameraInfo, *,
                 cameras: list[str], rate: float, color: bool) -> None:
        self.node = node
        self.frames = frames
        self.info = info
        self.rate = rate
        self.tf_pub = node.create_publisher(TFMessage, "/tf", qos.TF)
        self.cameras: list[CameraPublishers] = []
        for cam in cameras:
            topics = camera_topics(cam)
            self.cameras.append(CameraPublishers(
                name=cam,
                optical=camera_optical_frame(cam),
                info=node.create_publisher(CameraInfo, topics.camera_info, qos.SENSOR),
                depth=node.create_publisher(Image, topics.depth, qos.SENSOR),
                segmentation=node.create_publisher(
                    Segmentation, f"cameras/{cam}/segmentation", qos.SENSOR),
                color=node.create_publisher(Image, topics.color, qos.SENSOR) if color else None,
            ))
        self.counts = dict.fromkeys(cameras, 0)
        self.spans: dict[str, list[float]] = {}  # camera: [first stamp, last stamp]
        self.lags: list[float] = []
        self.publish_s: list[float] = []

    def publish(self, cam: CameraPublishers, frame: FrameMessages, stamp: float) -> None:
        """Publish one frame of one camera, everything stamped ``stamp``."""
        header = Header(stamp=from_seconds(stamp), frame_id=cam.optical)
        transform = frame.transform
        transform.header.stamp = header.stamp
        transform.child_frame_id = cam.optical
        self.tf_pub.publish(TFMessage(transforms=[transform]))
        self.info.header = header
        cam.info.publish(self.info)
        frame.depth.header = header
        cam.depth.publish(frame.depth)
        seg = frame.segmentation
        seg.header = header
        seg.instance_ids.header = header
        seg.camera = cam.name
        cam.segmentation.publish(seg)
        if cam.color is not None:
            frame.color.header = header
            cam.color.publish(frame.color)

    def run(self, seconds: float, stop: threading.Event, stamps: TextIO) -> tuple[float, float]:
        """Publish for ``seconds`` or until ``stop``; returns the first and last stamp."""
        slot = 1.0 / (self.rate * len(self.cameras))
        offsets = [i * len(self.frames) // len(self.cameras) for i in range(len(self.cameras))]
        start = time.monotonic()
        end = start + seconds
        tick = 0
        first = last = time.time()
        flushed = start
        while not stop.is_set():
            due = start + tick * slot
            if due >= end:
                break
            wait = due - time.monotonic()
            if wait > 0.0:
                stop.wait(wait)
                if stop.is_set():
                    break
            began = time.monotonic()
            self.lags.append(began - due)
            index, round_ = tick % len(self.cameras), tick // len(self.cameras)
            cam = self.cameras[index]
            frame = self.frames[(offsets[index] + round_) % len(self.frames)]
            stamp = round(time.time() / STAMP_QUANTUM) * STAMP_QUANTUM
            if tick == 0:
                first = stamp
            self.publish(cam, frame, stamp)
            last = stamp
            self.spans.setdefault(cam.name, [stamp, stamp])[1] = stamp
            self.publish_s.append(time.monotonic() - began)
            self.counts[cam.name] += 1
            stamps.write(f"{cam.name} {stamp:.4f}\n")
            if began - flushed > 1.0:
                stamps.flush()
                flushed = began
            tick += 1
        stamps.flush()
        return first, last


def percentile_ms(values: list[float], q: float) -> float | None:
    """The ``q``-th percentile of seconds, in milliseconds (None without values)."""
    return float(np.percentile(np.asarray(values) * 1000.0, q)) if values else None


def summary(feeder: Feeder, first: float, last: float, *, cpu_s: float, wall_s: float,
            prep_s: float) -> dict[str, Any]:
    """What the feeder reports about itself."""
    slot_ms = 1000.0 / (feeder.rate * len(feeder.cameras))
    return {
        "target_rate_hz": feeder.rate,
        "frames": len(feeder.frames),
        "published": feeder.counts,
        "achieved_rate_hz": {
            cam: (feeder.counts[cam] - 1) / (b - a) if b > a else 0.0
            for cam, (a, b) in feeder.spans.items()},
        "first_stamp": first,
        "last_stamp": last,
        "slot_ms": slot_ms,
        "lag_ms_p50": percentile_ms(feeder.lags, 50),
        "lag_ms_p95": percentile_ms(feeder.lags, 95),
        "lag_ms_max": percentile_ms(feeder.lags, 100),
        "late_ticks": sum(1 for lag in feeder.lags if lag * 1000.0 > slot_ms),
        "publish_ms_p50": percentile_ms(feeder.publish_s, 50),
        "publish_ms_p95": percentile_ms(feeder.publish_s, 95),
        "busy_share": sum(feeder.publish_s) / max(wall_s, 1e-9),
        "cpu_percent": 100.0 * cpu_s / max(wall_s, 1e-9),
        "wall_s": wall_s,
        "prepare_s": prep_s,
    }


def _read_commands(go: threading.Event, stop: threading.Event) -> None:
    for line in sys.stdin:
        word = line.strip().upper()
        if word == "GO":
            go.set()
        elif word == "STOP":
            break
    stop.set()  # STOP or end of stdin (the parent went away)
    go.set()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=float, default=15.0, help="frames per second per camera")
    parser.add_argument("--duration", type=float, default=60.0,
                        help="seconds of publishing after GO (warm-up included)")
    parser.add_argument("--cameras", default="base,pole,wrist")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--vocabulary", type=Path, default=DEFAULT_VOCABULARY)
    parser.add_argument("--frames", type=int, default=0, help="use the first N frames (0: all)")
    parser.add_argument("--depth-encoding", choices=("16UC1", "32FC1"), default="16UC1")
    parser.add_argument("--no-color", action="store_true", help="do not publish colour images")
    parser.add_argument("--stamps", type=Path, required=True, help="file of published stamps")
    parser.add_argument("--summary", type=Path, default=None, help="JSON summary file")
    parser.add_argument("--no-wait", action="store_true", help="start without waiting for GO")
    args = parser.parse_args(argv)
    cameras = [c.strip() for c in args.cameras.split(",") if c.strip()]
    if not cameras or not math.isfinite(args.rate) or args.rate <= 0.0:
        parser.error("need at least one camera and a positive rate")

    stop, go = threading.Event(), threading.Event()
    def _on_signal(*_: object) -> None:
        stop.set()
        go.set()  # also release a wait for GO

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _on_signal)
    t0 = time.monotonic()
    frames, info = prepare(args.data, args.vocabulary, args.frames, args.depth_encoding)
    prep_s = time.monotonic() - t0
    per_frame = sum(f.instances for f in frames) / len(frames)
    sys.stderr.write(f"feeder: {len(frames)} frames ready in {prep_s:.1f} s "
                     f"({per_frame:.1f} instances per frame, depth {args.depth_encoding}, "
                     f"mask cache {mask_cache_dir(args.data, load_vocabulary(args.vocabulary))})\n")
    # The loop stops on SIGINT/SIGTERM through ``stop``; rclpy must not shut down under it.
    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node("keepup_feeder")
    try:
        feeder = Feeder(node, frames, info, cameras=cameras, rate=args.rate,
                        color=not args.no_color)
        print(f"READY {len(frames)} {prep_s:.1f}", flush=True)
        if not args.no_wait:
            threading.Thread(target=_read_commands, args=(go, stop), daemon=True).start()
            go.wait()
        if stop.is_set():
            return 0
        print(f"STARTED {time.time():.4f}", flush=True)
        cpu0, wall0 = time.process_time(), time.monotonic()
        with args.stamps.open("w") as stamps:
            first, last = feeder.run(args.duration, stop, stamps)
        report = summary(feeder, first, last, cpu_s=time.process_time() - cpu0,
                         wall_s=time.monotonic() - wall0, prep_s=prep_s)
        text = json.dumps(report, indent=1)
        if args.summary is not None:
            args.summary.write_text(text)
        sys.stderr.write(f"feeder summary: {text}\n")
        print("DONE", flush=True)
        return 0
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    sys.exit(main())
