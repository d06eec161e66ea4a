"""``mimir replay --fast``: rebuild memory from a rosbag2 recording in-process, without DDS.

The bag is read with ``rosbags`` (mcap or sqlite3 storage, split bags, and ROS 1 bags where
``rosbags`` reads them), so no ROS installation is needed. The cores run in stamp order on the
message time alone, as fast as the machine allows, with the settings of the deployment's node
sections (deprojection, scene graph, keyframes), so a replay builds the memory the live node graph
would have built:

1. ``/tf_static`` and ``/tf`` are read first, all of them, into one
   :class:`mimir.transforms.TransformBuffer` whose cache spans the whole bag (the live nodes'
   10 s cache would drop everything but the end of a bag loaded in bulk).
2. Camera messages follow in recording order: camera info, registered depth and segmentation go
   to the :class:`~mimir_perception.sync.FrameSynchronizer`; a camera without recorded
   segmentation is segmented from its colour images by the given backend (SAM3 on a robot
   installation), or the replay refuses it.
3. Each matched frame is deprojected in the map at its image stamp
   (:class:`~mimir_perception.deprojection.Deprojector`), fused into world memory
   (:meth:`~mimir_memory.world.WorldMemory.ingest`, message time as the clock) and its view
   records misses (:class:`~mimir_memory.misses.MissRecorder`), as the scene graph node does.
4. When a frame of the perception camera changed the graph, its colour image becomes a
   perception keyframe (no more often than the keyframe node's period), as the keyframe node
   does.

Validation is the cores' own: a message that cannot be converted, a frame without camera info
or transform, a stamp older than the previous one of its stream are skipped and counted by
reason; nothing else is lost. A bag that ends in a fault (truncated, corrupt) stops the replay
with :class:`~mimir.bags.BagError` after everything read before it is in memory.

The same bag, settings and code give the same memory: same nodes, same events in the same order
(event ids aside, which are fresh for every write), same keyframe ids.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt
from rosbags.highlevel import AnyReader

from mimir import transforms as tfm
from mimir.bags import BagError, topic_key, typestore
from mimir.bounds import load_bounds
from mimir.nodes.memory.keyframe_params import KeyframeConfig
from mimir.nodes.memory.scene_graph_params import SceneGraphConfig
from mimir.nodes.perception.deprojection_params import DeprojectionNodeConfig
from mimir.nodes.perception.messages import camera_info_to_intrinsics, msg_to_segmentation
from mimir.nodes.perception.segmentation_node import resolve_vocabulary
from mimir.paths import config_file
from mimir.replay_analysis import SIGNALS, ReplayAnalyzer, detections_from_observations
from mimir.ros.images import image_to_numpy, image_to_rgb
from mimir_memory.config import load_memory_config
from mimir_memory.errors import MemoryStoreError
from mimir_memory.events import EventKind, MemoryEvent, Source
from mimir_memory.keyframes import CameraView as KeyframeView
from mimir_memory.keyframes import KeyframeStore, Trigger
from mimir_memory.misses import MissRecorder
from mimir_memory.visibility import CameraView
from mimir_memory.world import WorldMemory
from mimir_perception.camera import Intrinsics
from mimir_perception.deprojection import Deprojector, DepthUnit
from mimir_perception.frames import FrameBuffer
from mimir_perception.segmentation import SegmentationBackend, SegmentationResult
from mimir_perception.sync import FrameSynchronizer, SyncedFrame
from mimir_perception.vocabulary import Vocabulary
from mimir_planner.reasoning import AnalysisResult

#: Message types each stream accepts (colour and depth may be compressed).
_IMAGE_TYPES = ("sensor_msgs/msg/Image", "sensor_msgs/msg/CompressedImage")
_STREAM_TYPES: dict[str, tuple[str, ...]] = {
    "color": _IMAGE_TYPES,
    "depth": _IMAGE_TYPES,
    "camera_info": ("sensor_msgs/msg/CameraInfo",),
    "segmentation": ("mimir_msgs/msg/Segmentation",),
}
_TF_TYPE = "tf2_msgs/msg/TFMessage"
_INTERACTION_TYPE = "mimir_msgs/msg/InteractionEvent"
_PHASE_ENDED = 1  # mimir_msgs/InteractionEvent.PHASE_ENDED
#: Memory events after which a perception keyframe is worth taking (as the keyframe node).
_GRAPH_CHANGES = (EventKind.NODE_CREATED, EventKind.PROPERTY_SET, EventKind.CONTENTS_SET)
_SEEN_KINDS = (EventKind.NODE_CREATED, EventKind.OBSERVATION_FUSED)
#: The keyframe trigger of each frame role the analyzer asks to keep.
_ROLE_TRIGGERS = {"interaction_before": Trigger.INTERACTION_PRE,
                  "interaction_after": Trigger.INTERACTION_POST,
                  "interaction_peak": Trigger.INTERACTION_PEAK}


@dataclass(frozen=True)
class ReplayTopics:
    """Which bag topics feed which camera stream; ``{camera}`` stands for the camera name.

    The defaults are mimir's own topic names; other drivers' layouts need only these patterns
    (the ZED wrapper's ``zed/zed_node/rgb/image_rect_color``, a RealSense driver's
    ``camera/aligned_depth_to_color/image_raw``...). A leading slash does not matter.
    """

    cameras: tuple[str, ...] = ("pole",)
    color: str = "cameras/{camera}/color/image_raw"
    depth: str = "cameras/{camera}/depth/image_raw"
    camera_info: str = "cameras/{camera}/color/camera_info"
    segmentation: str = "cameras/{camera}/segmentation"
    tf: str = "tf"
    tf_static: str = "tf_static"
    interaction_events: str = "interaction_events"
    namespace: str = ""

    def __post_init__(self) -> None:
        if not self.cameras or len(set(self.cameras)) != len(self.cameras):
            raise ValueError(f"cameras must be distinct names, got {self.cameras!r}")
        for name in ("color", "depth", "camera_info", "segmentation"):
            pattern = getattr(self, name)
            if pattern and "{camera}" not in pattern and len(self.cameras) > 1:
                raise ValueError(f"the {name} topic {pattern!r} needs {{camera}} when more than "
                                 "one camera is replayed")

    def full(self, name: str) -> str:
        """A topic name as the bag holds it under the namespace (no leading slash)."""
        return self._full(name)

    def _full(self, name: str) -> str:
        name = topic_key(name)
        return f"{topic_key(self.namespace)}/{name}" if self.namespace.strip("/") else name

    def streams(self) -> dict[str, tuple[str, str]]:
        """Bag topic (no leading slash) -> (camera, stream) of every camera stream."""
        out: dict[str, tuple[str, str]] = {}
        for camera in self.cameras:
            for stream in _STREAM_TYPES:
                pattern = getattr(self, stream)
                if pattern:
                    out[self._full(pattern.format(camera=camera))] = (camera, stream)
        return out

    def interaction_key(self) -> str:
        """Bag topic of the executor's interaction events (empty: not replayed)."""
        return self._full(self.interaction_events) if self.interaction_events else ""

    def transforms(self) -> dict[str, bool]:
        """Bag topic -> whether it carries static transforms."""
        return {self._full(self.tf): False, self._full(self.tf_static): True}


@dataclass
class ReplaySummary:
    """What a replay read, used and skipped, and what memory holds afterwards."""

    bag: str
    messages: int = 0
    transforms: int = 0
    frames_used: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    observations: int = 0
    nodes_created: int = 0
    nodes: int = 0
    events: int = 0
    misses: int = 0
    keyframes: int = 0
    operations: int = 0
    """Opens and closes whose fixture was anchored while they ran."""
    analyses: int = 0
    """Interactions the analyzer analysed."""
    analysis_events: int = 0
    """Events the analyzer's admitted writes appended."""
    bag_seconds: float = 0.0
    wall_seconds: float = 0.0
    error: str = ""

    def lines(self) -> list[str]:
        """The summary as printed at the end of a replay."""
        used = ", ".join(f"{c} {n}" for c, n in sorted(self.frames_used.items())) or "none"
        skipped = ", ".join(f"{k} {n}" for k, n in sorted(self.skipped.items())) or "none"
        speed = self.bag_seconds / self.wall_seconds if self.wall_seconds > 0 else math.inf
        out = [
            f"replayed {self.bag}: {self.messages} messages, {self.bag_seconds:.1f} s of bag in "
            f"{self.wall_seconds:.1f} s ({speed:.1f}x real time)",
            f"frames used: {used}; skipped: {skipped}",
            f"memory: {self.nodes} nodes ({self.nodes_created} created), {self.observations} "
            f"observations, {self.events} events, {self.misses} misses, {self.keyframes} "
            f"keyframes kept, {self.operations} operated fixtures anchored; "
            f"{self.analyses} interactions analysed ({self.analysis_events} events written)",
        ]
        if self.error:
            out.append(f"stopped early: {self.error} (everything before it is in memory)")
        return out


def node_config(cls: type[Any], sections: Mapping[str, Mapping[str, Any]], name: str) -> Any:
    """The node's parameter dataclass from its deployment section (defaults where absent).

    Raises:
        ValueError: a key the dataclass does not declare, or a value it refuses.
    """
    values = dict(sections.get(name, {}))
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"section {name!r} has keys {unknown} that {cls.__name__} does not "
                         "declare")
    return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})


def stamp_of(msg: Any) -> float:
    """A message header's stamp in seconds."""
    stamp = msg.header.stamp
    return float(stamp.sec) + float(stamp.nanosec) * 1e-9


def _decode(msg: Any, stream: str) -> npt.NDArray[np.generic]:
    """The pixels of an image or compressed image message (colour as RGB, depth raw).

    Raises:
        ValueError: an image that cannot be decoded.
    """
    if not hasattr(msg, "format"):
        return image_to_rgb(msg) if stream == "color" else image_to_numpy(msg)
    data = np.asarray(msg.data, dtype=np.uint8)
    fmt = str(msg.format).lower()
    if stream == "depth":
        if "compresseddepth" in fmt:
            if "32fc1" in fmt:
                raise ValueError("compressedDepth 32FC1 (quantised inverse depth) is not read; "
                                 "record 16UC1 depth")
            data = data[12:]  # the compressedDepth header precedes the PNG
        depth = cv2.imdecode(data, cv2.IMREAD_UNCHANGED)
        if depth is None or depth.ndim != 2 or depth.dtype != np.uint16:
            raise ValueError(f"compressed depth ({msg.format!r}) is not a 16-bit PNG")
        return depth
    bgr = cv2.imdecode(data, cv2.IMREAD_COLOR)
    if bgr is None:
        raise ValueError(f"compressed image ({msg.format!r}) cannot be decoded")
    return np.ascontiguousarray(bgr[:, :, ::-1])


class _Connections:
    """A bag's connections sorted by role: camera streams, transforms, interaction events
    and the signals the analyzer reads."""

    def __init__(self, topics: ReplayTopics) -> None:
        self.streams = topics.streams()
        self.tf_static = topics.transforms()
        self.interaction_key = topics.interaction_key()
        self.signals = {topics.full(name): name for name in SIGNALS}
        self.camera: list[Any] = []
        self.tf: list[Any] = []
        self.interaction: list[Any] = []
        self.signal: list[Any] = []

    def role(self, key: str) -> str | None:
        if key in self.tf_static:
            return "tf"
        if key in self.streams:
            return "camera"
        if key == self.interaction_key:
            return "interaction"
        return "signal" if key in self.signals else None

    def types(self, key: str, role: str) -> tuple[str, ...]:
        if role == "tf":
            return (_TF_TYPE,)
        if role == "camera":
            return _STREAM_TYPES[self.streams[key][1]]
        if role == "interaction":
            return (_INTERACTION_TYPE,)
        return (SIGNALS[self.signals[key]],)

    def where(self, key: str, role: str) -> str:
        """The counter prefix of a topic."""
        if role == "camera":
            return ".".join(self.streams[key])
        return {"tf": key, "interaction": "interaction_events"}.get(role, key)

    def add(self, role: str, conn: Any) -> None:
        {"tf": self.tf, "camera": self.camera, "interaction": self.interaction,
         "signal": self.signal}[role].append(conn)


class MemoryPipeline:
    """Perception, world memory, keyframes and the analyzer, fed message by message in one process.

    What the deprojection, scene graph and keyframe nodes (and, once :meth:`start_analysis` is
    called, the analyzer) do with their messages, without DDS: a bag replay feeds it from the
    recording (:class:`FastReplay`), an in-process simulation run from the simulator as it steps
    (:mod:`mimir.sim_inprocess`). Messages must arrive in stamp order per stream; transforms go
    in before the frames that need them.

    Args:
        memory_dir: Memory folder (``world.db``, ``keyframes/``); may hold earlier memory.
        cameras: The cameras whose frames are used.
        sections: The deployment's node parameter sections (``/**/<node>`` ->
            ``ros__parameters``); absent sections use the nodes' defaults.
        segmenter: Segments colour images of cameras that deliver no segmentation.
        vocabulary: What ``segmenter`` looks for.
        analyze: Whether :meth:`start_analysis` may start the analyzer.
        session: Session name of the keyframes saved.
        tf_cache_s: How far back transforms are kept (s).
        live: The input is the robot as it runs, not a recording of the graph: the detections
            of each frame deprojected here go to the analyzer (a bag holds the deprojection
            node's own), interactions leave keyframes as the keyframe node saves them
            (before, during and after each action on every buffered camera, and the frames
            the analyzer asks for), and ended interactions are analysed only with the
            analyzer's ``auto_analyze`` (others when the owner asks, as the planner does).
    """

    def __init__(self, memory_dir: Path, cameras: Sequence[str], *,
                 sections: Mapping[str, Mapping[str, Any]] | None = None,
                 segmenter: SegmentationBackend | None = None,
                 vocabulary: Vocabulary | None = None,
                 analyze: bool = True, session: str = "pipeline",
                 tf_cache_s: float = 10.0, live: bool = False) -> None:
        if segmenter is not None and vocabulary is None:
            raise ValueError("a segmenter needs a vocabulary")
        sections = sections or {}
        self._sections = sections
        self.analyze = analyze
        self.analysis: ReplayAnalyzer | None = None
        self._now = -math.inf  # newest header stamp read: the robot's clock in stamp order
        self.deprojection: DeprojectionNodeConfig = node_config(
            DeprojectionNodeConfig, sections, "deprojection")
        self.scene_graph: SceneGraphConfig = node_config(
            SceneGraphConfig, sections, "scene_graph")
        self.keyframe_config: KeyframeConfig = node_config(KeyframeConfig, sections, "keyframes")
        memory_config = load_memory_config(
            config_file("memory.yaml", self.scene_graph.memory_config))
        # the input can rebuild this memory at any time: commits need not wait for the disk
        # (WAL with synchronous=NORMAL keeps every commit through a crash of the process)
        memory_config = dataclasses.replace(memory_config, storage=dataclasses.replace(
            memory_config.storage, synchronous="NORMAL"))
        bounds = load_bounds(config_file("memory.yaml", self.deprojection.memory_config))
        self.map_frame = self.scene_graph.map_frame
        self.segmenter = segmenter
        self.vocabulary = vocabulary
        self._deprojectors: dict[DepthUnit, Deprojector] = {
            unit: Deprojector(self.deprojection.deprojection(unit, bounds))
            for unit in ("mm", "m")}
        memory_dir = Path(memory_dir).expanduser()
        memory_dir.mkdir(parents=True, exist_ok=True)
        self.world = WorldMemory.open(memory_dir / "world.db", config=memory_config,
                                      map_frame=self.map_frame)
        self.keyframes = KeyframeStore.open(memory_dir / "keyframes", config=memory_config)
        self.session = session
        self._misses = MissRecorder(self.world, self.scene_graph.visibility(),
                                    self.scene_graph.miss_min_period_s)
        self._sync = FrameSynchronizer(self.deprojection.sync())
        self._tf = tfm.TransformBuffer(cache_seconds=tf_cache_s)
        self._optical: dict[str, str] = {}
        kf = self.keyframe_config
        # colour frames held for perception keyframes, as the keyframe node buffers them
        self._colour: dict[str, FrameBuffer[npt.NDArray[np.uint8]]] = {
            camera: FrameBuffer(kf.buffer_seconds, kf.buffer_max_frames,
                                min_period_s=kf.buffer_min_period_s)
            for camera in cameras}
        self._last: dict[tuple[str, str], float] = {}
        self._last_keyframe = -math.inf
        self._labels_sought = (resolve_vocabulary(self.deprojection.vocabulary).labels
                               if self.deprojection.vocabulary else ())
        self.summary = ReplaySummary(bag=session)
        self._nodes_before = len(self.world.state.nodes)
        self.live = live
        self._intrinsics: dict[str, Intrinsics] = {}
        self._ended: list[tuple[float, Any]] = []  # interactions whose frames are still due
        self._last_recheck = -math.inf

    def close(self) -> None:
        """Close world memory and the keyframe store."""
        self.world.close()
        self.keyframes.close()

    # ------------------------------------------------------------------ feeding
    @property
    def transforms(self) -> tfm.TransformBuffer:
        """The transform buffer frames are posed with (filled by :meth:`on_tf`)."""
        return self._tf

    def start_analysis(self) -> ReplayAnalyzer | None:
        """Start the analyzer (when ``analyze``): from now on, signals and camera messages also
        go to it and ended interactions are analysed. Returns it (None when not analysing).

        Raises:
            ValueError: the analyzer section or the reasoning settings are invalid.
        """
        if self.analyze and self.analysis is None:
            self.analysis = ReplayAnalyzer(
                self.world, self._tf, self._sections,
                save_keyframes=self._analysis_keyframes if self.live else None)
        return self.analysis

    def on_tf(self, msg: Any, *, static: bool) -> None:
        """A ``tf2_msgs/TFMessage``: every transform goes into the buffer (bad ones counted)."""
        self._on_tf(msg, static=static)

    def on_camera(self, camera: str, stream: str, msg: Any) -> None:
        """A camera message (``color``, ``depth``, ``camera_info`` or ``segmentation``)."""
        self._advance_to(stamp_of(msg))
        self._on_message(camera, stream, msg)
        if self.analysis is not None:
            self.analysis.on_camera(camera, stream, msg)

    def on_interaction(self, msg: Any) -> None:
        """An executor ``InteractionEvent`` (operations anchored, ended ones analysed)."""
        self._advance_to(stamp_of(msg))
        self._on_interaction(msg)

    def on_signal(self, name: str, msg: Any) -> None:
        """A robot-contract signal or an observation array for the analyzer (``name``: its
        topic, a key of :data:`~mimir.replay_analysis.SIGNALS`); signals without a header
        (the gripper) take the clock as last read."""
        if hasattr(msg, "header"):
            self._advance_to(stamp_of(msg))
        if self.analysis is not None:
            self.analysis.on_signal(name, msg, self._now)

    def advance(self, now: float) -> None:
        """The clock reached ``now``: analyse every ended interaction whose window (and margin)
        lies before it."""
        self._advance_to(now)

    def _advance_to(self, stamp: float) -> None:
        self._now = max(self._now, stamp)
        if self._ended:
            self._save_interactions()
        if self.analysis is not None:
            self.analysis.run_due(self._now)
            # the analyzer node's timer: deferred claims re-judged on fresh detections
            if self._now - self._last_recheck >= self.analysis.config.recheck_period_s:
                self._last_recheck = self._now
                self.analysis.recheck()

    def finish(self) -> ReplaySummary:
        """Save and analyse what is still pending and bring the summary up to date."""
        self._save_interactions(everything=True)
        if self.analysis is not None:
            self.analysis.finish()
        return self.update_summary()

    def update_summary(self) -> ReplaySummary:
        """The summary brought up to date (what memory holds, what was skipped); called once,
        when the input has ended."""
        self._count_unmatched()
        if self.analysis is not None:
            counts = self.analysis.counts
            self.summary.analyses = counts.pop("analyses", 0)
            self.summary.analysis_events = counts.pop("analyses.events_written", 0)
            self.summary.skipped.update(counts)
        self.summary.nodes = len(self.world.state.nodes)
        self.summary.nodes_created = max(0, self.summary.nodes - self._nodes_before)
        self.summary.keyframes = self.keyframes.count()
        return self.summary

    # ------------------------------------------------------------------ messages
    def _on_interaction(self, msg: Any) -> None:
        """An ended interaction goes to the analyzer when it runs. An open or close anchors
        its fixture as the scene graph node does. Live, the anchor ends as there: with the
        analysed outcome, or after ``association.operation_timeout_s``. A bag replay without
        the analyzer's outcome ends an operation with the executor's report unless it was an
        open that succeeded (the door then stands open)."""
        if msg.phase == _PHASE_ENDED and self.live:
            self._ended.append((stamp_of(msg) + self.keyframe_config.after_wait_s, msg))
            if self.analysis is not None and self.analysis.config.auto_analyze:
                self.analysis.on_ended(msg)
            return  # as the scene graph node: the analysis or the timeout ends an anchor
        if msg.phase == _PHASE_ENDED and self.analysis is not None:
            self.analysis.on_ended(msg)  # its analysed outcome ends the anchor, as live
            return
        if msg.primitive not in self.scene_graph.operated_primitives:
            return
        if msg.phase == _PHASE_ENDED:
            if not (msg.primitive == "open" and msg.success):
                self.world.operation_ended(msg.interaction_id)
            return
        node_id = self._operated_node(msg)
        if node_id is None:
            self.summary.skipped["interaction_events.unknown_target"] += 1
            return
        window = msg.window_start
        stamp = (float(window.sec) + float(window.nanosec) * 1e-9) or stamp_of(msg)
        try:
            self.world.operation_started(node_id, stamp, msg.interaction_id)
        except MemoryStoreError:
            self.summary.skipped["interaction_events.refused"] += 1
            return
        self.summary.operations += 1

    def _operated_node(self, msg: Any) -> str | None:
        """The replayed node the operation acted on: the recorded id when that node stands
        where the event's target pose says (node ids of a replay may differ from the live
        run's), else the nearest node the pose falls within the association radius of; the
        radius is memory's own for each label (``association`` in the memory config)."""
        state = self.world.state
        radius = self.world.config.association.radius
        p = msg.target_pose.position
        target = np.array([p.x, p.y, p.z])
        posed = bool(np.any(target))

        def gap(node: Any) -> float:
            return float(np.linalg.norm(np.asarray(node.centroid) - target))

        own = state.nodes.get(state.resolve(msg.target_id)) if msg.target_id else None
        if own is not None and (not posed or gap(own) <= radius(own.label)):
            return str(own.node_id)
        if not posed:
            return None
        close = [(gap(n), n.node_id) for n in state.nodes.values() if gap(n) <= radius(n.label)]
        return min(close)[1] if close else None

    def _count_unmatched(self) -> None:
        """What the synchroniser dropped or never matched (no camera info yet, no depth within
        the tolerance, too old), per camera and stream, into the skip counts."""
        for camera, entries in self._sync.diagnostics().items():
            for key, count in entries.items():
                if key == "emitted" or not count:
                    continue
                first, _, second = key.partition(".")  # queued.<stream> or <stream>.<reason>
                if key.startswith("camera_info.") or key == "queued.camera_info":
                    continue  # infos are latched: older ones give way to newer by design
                name = f"{second}.unmatched" if first == "queued" else key
                self.summary.skipped[f"{camera}.{name}"] += count

    def _on_tf(self, msg: Any, *, static: bool) -> None:
        for t in msg.transforms:
            tr, rot = t.transform.translation, t.transform.rotation
            try:
                self._tf.set_transform(t.header.frame_id, t.child_frame_id, stamp_of(t),
                                       (tr.x, tr.y, tr.z), (rot.x, rot.y, rot.z, rot.w),
                                       static=static)
                self.summary.transforms += 1
            except tfm.InvalidTransformError:
                self.summary.skipped["tf.invalid"] += 1

    def _on_message(self, camera: str, stream: str, msg: Any) -> None:
        stamp = stamp_of(msg)
        key = (camera, stream)
        if stamp < self._last.get(key, -math.inf):
            self.summary.skipped[f"{camera}.{stream}.out_of_order"] += 1
            return
        self._last[key] = stamp
        try:
            frames = self._feed(camera, stream, msg, stamp)
        except Exception as err:  # noqa: BLE001 - any conversion failure skips this message
            self.summary.skipped[f"{camera}.{stream}.{_reason(err)}"] += 1
            return
        for frame in frames:
            self._process(frame)

    def _feed(self, camera: str, stream: str, msg: Any, stamp: float) -> list[SyncedFrame]:
        sync = self._sync
        if stream == "camera_info":
            intrinsics = camera_info_to_intrinsics(msg, rectified=self.deprojection.rectified)
            self._intrinsics[camera] = intrinsics
            return sync.add_camera_info(camera, stamp, intrinsics)
        if stream == "depth":
            depth = _decode(msg, "depth")
            if depth.dtype not in (np.uint16, np.float32):
                raise ValueError(f"depth of type {depth.dtype} is not 16UC1 mm or 32FC1 m")
            return sync.add_depth(camera, stamp, depth)
        if stream == "segmentation":
            if msg.header.frame_id:
                self._optical[camera] = msg.header.frame_id
            return sync.add_segmentation(msg_to_segmentation(msg, camera=camera), camera)
        if msg.header.frame_id:
            self._optical.setdefault(camera, msg.header.frame_id)
        segment = self.segmenter is not None and not self._recorded_segmentation(camera)
        if not segment and not self._colour[camera].admits(stamp):
            return []  # neither segmented nor kept for keyframes: not even decoded
        rgb = _decode(msg, "color").astype(np.uint8, copy=False)
        self._colour[camera].add(stamp, rgb)
        if self.segmenter is None or not segment:
            return []
        assert self.vocabulary is not None
        result: SegmentationResult = self.segmenter.segment(rgb, self.vocabulary, stamp=stamp,
                                                            camera=camera)
        return sync.add_segmentation(result, camera)

    def _recorded_segmentation(self, camera: str) -> bool:
        return (camera, "segmentation") in self._last

    def _process(self, frame: SyncedFrame) -> None:
        camera = frame.camera
        optical = self._optical.get(camera, f"{camera}_color_optical_frame")
        try:
            pose = self._tf.lookup(self.map_frame, optical, frame.stamp)
        except tfm.ExtrapolationError:
            self.summary.skipped[f"{camera}.transform_extrapolation"] += 1
            return
        except tfm.TransformError:
            self.summary.skipped[f"{camera}.transform_unavailable"] += 1
            return
        unit: DepthUnit = "mm" if frame.depth.dtype == np.uint16 else "m"
        try:
            result = self._deprojectors[unit].deproject(
                frame.segmentation, frame.depth, frame.intrinsics, pose, stamp=frame.stamp,
                camera=camera)
        except Exception as err:  # noqa: BLE001 - the deprojector's typed refusals
            self.summary.skipped[f"{camera}.{_reason(err)}"] += 1
            return
        for skipped in result.skipped:
            self.summary.skipped[f"{camera}.{skipped.reason.value}"] += 1
        self.summary.frames_used[camera] += 1
        events: list[MemoryEvent] = []
        if result.observations:
            refused: list[Any] = []
            try:
                events = self.world.ingest(list(result.observations), source=Source.PERCEPTION,
                                           now=frame.stamp, refused=refused)
            except MemoryStoreError as err:
                raise BagError(f"memory refused the frame of {camera} at {frame.stamp:.3f}: "
                               f"{err}") from err
            if refused:
                self.summary.skipped[f"{camera}.observation_refused"] += len(refused)
            self.summary.observations += len(result.observations) - len(refused)
            if self.live and self.analysis is not None:
                self.analysis.add_detections(detections_from_observations(result.observations))
        view = self._view(frame, pose, unit)
        if view is not None:
            seen = {str(e.payload["node_id"]) for e in events if e.kind in _SEEN_KINDS}
            report = self._misses.record(view, seen, stamp=frame.stamp, camera=camera)
            self.summary.misses += report.recorded
            events += report.events
        self.summary.events += len(events)
        if any(e.kind in _GRAPH_CHANGES for e in events):
            self._keyframe(camera, frame, events)

    def _view(self, frame: SyncedFrame, pose: tfm.Matrix4, unit: DepthUnit) -> CameraView | None:
        try:
            return self.deprojection.view(frame.depth, frame.intrinsics, pose, unit,
                                          self._labels_sought)
        except MemoryStoreError:
            self.summary.skipped[f"{frame.camera}.view_failed"] += 1
            return None

    def _keyframe(self, camera: str, frame: SyncedFrame, events: Sequence[MemoryEvent]) -> None:
        cfg, stamp = self.keyframe_config, frame.stamp
        if camera != cfg.perception_camera or \
                stamp - self._last_keyframe < cfg.perception_min_period_s:
            return
        buffer = self._colour.get(camera)
        colour = buffer.nearest(stamp) if buffer is not None else None
        if colour is None or abs(colour[0] - stamp) > cfg.max_offset_s:
            self.summary.skipped[f"{camera}.keyframe_no_frame"] += 1
            return
        change = next(e for e in events if e.kind in _GRAPH_CHANGES)
        node = str(change.payload.get("node_id", ""))
        # the segmentation goes with the colour image it was made from
        ids = frame.segmentation.instance_ids
        same = colour[0] == stamp and ids.shape == colour[1].shape[:2]
        result = self.keyframes.save(
            np.ascontiguousarray(colour[1][:, :, ::-1]), timestamp=colour[0], camera=camera,
            trigger=Trigger.NEW_NODE if change.kind == EventKind.NODE_CREATED
            else Trigger.NODE_UPDATE,
            session=self.session, node_ids=[node] if node else [],
            tags=[f"event:{change.kind.value}"], caption=str(change.payload.get("label", "")),
            instances=ids if same else None, **self._where(camera, colour[0], colour[1]))
        if result.reason == "saved":
            self._last_keyframe = stamp


    # ---------------------------------------------------------------- keyframes
    def _where(self, camera: str, stamp: float, image: npt.NDArray[np.uint8]) -> dict[str, Any]:
        """Where the camera stood and the base was at ``stamp`` (what the keyframe node stores
        with each frame); whatever the transforms or the camera info lack is left out."""
        out: dict[str, Any] = {}
        try:
            base = self._tf.lookup(self.map_frame, self.keyframe_config.base_frame, stamp)
            out["robot_pose"] = [float(base[0, 3]), float(base[1, 3]),
                                 math.atan2(float(base[1, 0]), float(base[0, 0]))]
        except tfm.TransformError:
            pass
        intrinsics = self._intrinsics.get(camera)
        optical = self._optical.get(camera, f"{camera}_color_optical_frame")
        try:
            pose = self._tf.lookup(self.map_frame, optical, stamp)
        except tfm.TransformError:
            return out
        if intrinsics is None:
            return out
        height, width = image.shape[:2]
        sx, sy = width / intrinsics.width, height / intrinsics.height
        try:
            out["camera_view"] = KeyframeView.parse({
                "position": pose[:3, 3].tolist(),
                "orientation": tfm.matrix_to_quaternion(pose[:3, :3]).tolist(),
                "fx": intrinsics.fx * sx, "fy": intrinsics.fy * sy,
                "cx": (intrinsics.cx + 0.5) * sx - 0.5, "cy": (intrinsics.cy + 0.5) * sy - 0.5})
        except (MemoryStoreError, ValueError):
            self.summary.skipped[f"{camera}.bad_camera_view"] += 1
        return out

    def _save_frame(self, camera: str, stamp: float, side: str, max_offset: float,
                    **fields: Any) -> str:
        """Save the buffered colour frame of ``camera`` nearest ``stamp`` (no farther than
        ``max_offset``); its id, or "" when there is none or the store refused it."""
        buffer = self._colour.get(camera)
        found = buffer.nearest(stamp, side) if buffer is not None else None
        if found is None or abs(found[0] - stamp) > max_offset:
            self.summary.skipped[f"{camera}.keyframe_no_frame"] += 1
            return ""
        result = self.keyframes.save(
            np.ascontiguousarray(found[1][:, :, ::-1]), timestamp=found[0], camera=camera,
            session=self.session, **fields, **self._where(camera, found[0], found[1]))
        return result.frame_id or ""

    def _save_interactions(self, everything: bool = False) -> None:
        """Keyframes of ended interactions whose frames are in: before, during and after the
        action on every buffered camera, the later ones children of the first."""
        due = [e for e in self._ended if everything or e[0] <= self._now]
        self._ended = [e for e in self._ended if not (everything or e[0] <= self._now)]
        for _, msg in due:
            start = float(msg.window_start.sec) + float(msg.window_start.nanosec) * 1e-9
            end = stamp_of(msg)
            offset = max(self.keyframe_config.after_wait_s, (end - start) / 2.0 + 0.5)
            tags = [f"interaction:{msg.interaction_id}", f"outcome:{msg.outcome}"]
            for camera in self.keyframe_config.cameras:
                parent = ""
                for trigger, stamp, side in ((Trigger.INTERACTION_PRE, start, "before"),
                                             (Trigger.INTERACTION_DURING, (start + end) / 2.0,
                                              "any"),
                                             (Trigger.INTERACTION_POST, end, "after")):
                    frame_id = self._save_frame(
                        camera, stamp, side, offset, trigger=trigger, action=msg.primitive,
                        node_ids=[msg.target_id] if msg.target_id else [], tags=tags,
                        parent_frame=parent or None)
                    parent = parent or frame_id

    def _analysis_keyframes(self, result: AnalysisResult, iid: str
                            ) -> tuple[list[str], dict[str, str]]:
        """The frames the analyzer asks for, saved as the keyframe node's ``save_keyframe``
        saves them; returns (ids, frame reference -> id)."""
        ids: list[str] = []
        by_frame: dict[str, str] = {}
        offset = self.analysis.config.keyframe_max_offset_s if self.analysis else 0.5
        for request in result.keyframes:
            frame_id = self._save_frame(
                request.camera, request.stamp, "any", offset or self.keyframe_config.max_offset_s,
                trigger=_ROLE_TRIGGERS.get(request.role, Trigger.INTERACTION_PEAK),
                action=request.action or None, node_ids=list(request.linked_node_ids),
                tags=[f"interaction:{iid}"],
                labels=[(label, "analyzer") for label in request.labels if label.strip()],
                caption=request.caption)
            if not frame_id:
                continue
            if frame_id not in ids:
                ids.append(frame_id)
            by_frame.setdefault(request.frame_ref, frame_id)
        return ids, by_frame


class FastReplay(MemoryPipeline):
    """Rebuilds world memory and keyframes from a bag, in-process, in stamp order.

    Args:
        bag: The bag folder (rosbag2), or file (ROS 1 or a single mcap/db3 file).
        memory_dir: Memory folder (``world.db``, ``keyframes/``); may hold earlier memory.
        topics: Which topics feed which camera.
        sections: The deployment's node parameter sections (``/**/<node>`` ->
            ``ros__parameters``); absent sections use the nodes' defaults.
        segmenter: Segments colour images of cameras whose bag holds no segmentation.
        vocabulary: What ``segmenter`` looks for.
        start: Bag time offset (s from the bag's start) before which camera messages are ignored.
        end: Bag time offset after which the replay stops (None: the bag's end).
        progress: Called now and then with (messages read, bag seconds reached).
    """

    def __init__(self, bag: Path, memory_dir: Path, topics: ReplayTopics, *,
                 sections: Mapping[str, Mapping[str, Any]] | None = None,
                 segmenter: SegmentationBackend | None = None,
                 vocabulary: Vocabulary | None = None,
                 start: float = 0.0, end: float | None = None,
                 analyze: bool = True,
                 progress: Callable[[int, float], None] | None = None) -> None:
        if not (math.isfinite(start) and start >= 0.0):
            raise ValueError(f"start must be a non-negative number of seconds, got {start}")
        if end is not None and not end > start:
            raise ValueError(f"end ({end}) must come after start ({start})")
        self.bag = Path(bag)
        super().__init__(memory_dir, topics.cameras, sections=sections, segmenter=segmenter,
                         vocabulary=vocabulary, analyze=analyze,
                         session=f"replay-{self.bag.name}")
        self.summary.bag = str(self.bag)
        self.topics = topics
        self.start, self.end = start, end
        self.progress = progress

    # ------------------------------------------------------------------ reading
    def run(self) -> ReplaySummary:
        """Replay the whole bag (or its ``start``..``end`` slice) into memory.

        Raises:
            BagError: the bag cannot be opened, holds no usable camera, or ends in a fault
                (``summary.error`` says which; what came before it is in memory).
        """
        began = time.monotonic()
        try:
            reader = AnyReader([self.bag], default_typestore=typestore())
            reader.open()
        except Exception as err:  # rosbags raises several unrelated types for a bad bag
            raise BagError(f"cannot open the bag {self.bag}: {err}") from err
        try:
            self._replay(reader)
        except BagError as err:
            self.summary.error = str(err)
            raise
        finally:
            reader.close()
            self.update_summary()
            self.summary.wall_seconds = time.monotonic() - began
        return self.summary

    def _connections(self, reader: AnyReader) -> _Connections:
        """The bag's connections by what the replay does with them (wrong types counted)."""
        found = _Connections(self.topics)
        for conn in reader.connections:
            key = topic_key(conn.topic)
            role = found.role(key)
            if role is None:
                continue
            if conn.msgtype not in found.types(key, role):
                self.summary.skipped[f"{found.where(key, role)}.wrong_type"] += conn.msgcount
                continue
            found.add(role, conn)
        return found

    def _replay(self, reader: AnyReader) -> None:
        found = self._connections(reader)
        self._check_usable(found.camera, found.streams)
        # the whole bag's transforms are loaded before any frame: keep all of them
        self._tf = tfm.TransformBuffer(cache_seconds=max(10.0, reader.duration * 1e-9 + 10.0))
        begin = reader.start_time
        first = begin + round(self.start * 1e9)
        last = None if self.end is None else begin + round(self.end * 1e9)
        for conn, _t, raw in self._messages(reader, found.tf):
            try:
                msg = reader.deserialize(raw, conn.msgtype)
            except Exception:  # noqa: BLE001 - a message rosbags cannot decode is counted
                self.summary.skipped["tf.undecodable"] += 1
                continue
            self._on_tf(msg, static=found.tf_static[topic_key(conn.topic)])
        read = found.camera + found.interaction
        if found.interaction and self.start_analysis() is not None:
            read += found.signal
        for conn, stamp_ns, raw in self._messages(reader, read, first, last):
            key = topic_key(conn.topic)
            role = found.role(key)
            assert role is not None
            self.summary.messages += 1
            self.summary.bag_seconds = (stamp_ns - first) * 1e-9
            try:
                msg = reader.deserialize(raw, conn.msgtype)
            except Exception:  # noqa: BLE001 - a message rosbags cannot decode is counted
                self.summary.skipped[f"{found.where(key, role)}.undecodable"] += 1
                continue
            self._dispatch(key, role, found, msg)
            if self.progress is not None and self.summary.messages % 50 == 0:
                self.progress(self.summary.messages, self.summary.bag_seconds)
        if self.analysis is not None:
            self.analysis.finish()

    def _dispatch(self, key: str, role: str, found: _Connections, msg: Any) -> None:
        """One message of the main pass to its handler, in bag order."""
        if role == "camera":
            self.on_camera(*found.streams[key], msg)
        elif role == "interaction":
            self.on_interaction(msg)
        else:
            self.on_signal(found.signals[key], msg)

    def _check_usable(self, conns: Sequence[Any], streams: Mapping[str, tuple[str, str]]) -> None:
        have: dict[str, set[str]] = {}
        for conn in conns:
            if conn.msgcount == 0:
                continue
            camera, stream = streams[topic_key(conn.topic)]
            have.setdefault(camera, set()).add(stream)
        usable = [c for c, s in have.items() if {"depth", "camera_info"} <= s
                  and ("segmentation" in s or ("color" in s and self.segmenter is not None))]
        if usable:
            return
        wanted = ", ".join(sorted(streams))
        detail = "; ".join(f"{c} has {', '.join(sorted(s))}" for c, s in sorted(have.items()))
        need_model = any("color" in s and "segmentation" not in s for s in have.values())
        raise BagError(
            f"the bag holds no usable camera (looked for {wanted}; {detail or 'none of them'})"
            + ("; a camera without recorded segmentation needs a segmentation model"
               if need_model else ""))

    def _messages(self, reader: AnyReader, conns: Sequence[Any], first: int | None = None,
                  last: int | None = None) -> Iterator[tuple[Any, int, bytes]]:
        """The connections' messages in recording order; a fault of the bag is a BagError."""
        if not conns:
            return
        try:
            yield from reader.messages(connections=conns, start=first,
                                       stop=None if last is None else last + 1)
        except BagError:
            raise
        except Exception as err:  # a truncated or corrupt file fails in the storage reader
            raise BagError(f"the bag is damaged after {self.summary.messages} messages: "
                           f"{type(err).__name__}: {err}") from err


def _reason(err: BaseException) -> str:
    """A counter key for a refusal: the error class in snake case."""
    name = type(err).__name__.removesuffix("Error") or "error"
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")

