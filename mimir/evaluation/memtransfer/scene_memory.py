"""mimir's own memory as a seventh MemTransfer representation: a scene graph with linked
keyframes, built from the demonstrations by the regular perception and memory cores and read
through mimir's retrieval.

Building: every pose of every demonstration in memory is rendered with depth and the items'
masks; the masks go through the realistic profile's segmentation noise (misses, small and far
instances lost more often, boundaries eroded or dilated, scores) and the depth through its
stereo noise, so what reaches memory is what a segmenter and a depth camera would report, not
the renderer's truth. :class:`~mimir_perception.deprojection.Deprojector` turns each frame
into observations, :class:`~mimir_memory.world.WorldMemory` associates and fuses them into
nodes (real SQLite files in a folder of the episode's own), and each frame that produced an
observation is kept in a :class:`~mimir_memory.keyframes.KeyframeStore` linked to its nodes.

Reading: the nodes whose label is a kind the instruction names, or a kind of a category it
names, are the task's; :class:`~mimir_planner.retrieval.KeyframeRetriever` (its offline
reasoner: linked nodes, label matches, distinct sharp frames) picks the frames to show, and the
graph is given as mimir renders it for its planner, the task's nodes first. Positions are in
metres in the warehouse frame, where cell ``(x, y)`` is the square around ``(x, y)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path

import cv2
import numpy as np

from mimir.evaluation.memtransfer.memories import Recall, Record
from mimir.transforms import decompose
from mimir_memory.events import EventKind
from mimir_memory.keyframes import CameraView, KeyframeStore, Trigger
from mimir_memory.world import WorldMemory
from mimir_perception.camera import Intrinsics
from mimir_perception.deprojection import Deprojector
from mimir_perception.segmentation import compose_instances
from mimir_planner.config import RetrievalConfig
from mimir_planner.retrieval import KeyframeRetriever, RetrievalQuery, task_terms
from mimir_sim.noise import NoiseProfile, noisy_depth, noisy_segmentation
from mimir_sim.warehouse.episode import Image
from mimir_sim.warehouse.layout import Layout, Pose
from mimir_sim.warehouse.render import SeenFrame

CAMERA = "head"
GRAPH_CHARS = 6000


def named_kinds(layout: Layout, instruction: str) -> set[str]:
    """The kinds an instruction names, itself or through its category (the perception
    vocabulary: kinds and their categories)."""
    text = f" {instruction.lower()} "
    kinds = {k for k in layout.kinds if f" {k} " in text or f" {k}." in text
             or f" {k}," in text}
    categories = {kind.category for kind in layout.kinds.values()
                  if f" {kind.category} " in text}
    kinds |= {k for k, kind in layout.kinds.items() if kind.category in categories}
    return kinds


class SceneMemory:
    """The scene graph and keyframes of a set of demonstrations, read for one instruction."""

    def __init__(self, folder: Path, layout: Layout, records: Sequence[Record],
                 frames: Callable[[Pose], SeenFrame], noise: NoiseProfile, *, seed: int,
                 final_k: int = 3) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.layout = layout
        self.world = WorldMemory.open(folder / "world.db")
        self.store = KeyframeStore.open(folder / "keyframes")
        self.frames_kept = 0
        self._final_k = final_k
        self._noise = noise
        self._rng = np.random.default_rng(seed)
        self._deprojector = Deprojector()
        stamp = 1000.0
        for rec in records:
            for pose in rec.poses:
                stamp += 1.0
                self._see(frames(pose), pose, stamp)

    def _see(self, frame: SeenFrame, pose: Pose, stamp: float) -> None:
        present = [int(i) for i in np.unique(frame.items) if i >= 0]
        if not present:
            return
        truth = compose_instances([frame.items == i for i in present],
                                  [self.layout.items[i].kind for i in present],
                                  [1.0] * len(present), stamp=stamp, camera=CAMERA)
        seen = noisy_segmentation(truth, frame.depth, self._noise.segmentation, self._rng)
        depth = noisy_depth(frame.depth, frame.color, self._noise.depth, self._rng)
        info = frame.info
        intrinsics = Intrinsics(info.fx, info.fy, info.cx, info.cy, info.width, info.height)
        observations = self._deprojector.deproject(seen, depth, intrinsics, frame.camera_to_map,
                                             stamp=stamp, camera=CAMERA).observations
        if not observations:
            return
        events = self.world.ingest(observations, now=stamp)
        nodes = sorted({str(e.payload["node_id"]) for e in events
                        if e.kind in (EventKind.NODE_CREATED, EventKind.OBSERVATION_FUSED)})
        origin, quaternion = decompose(frame.camera_to_map)
        view = CameraView((float(origin[0]), float(origin[1]), float(origin[2])),
                          (float(quaternion[0]), float(quaternion[1]), float(quaternion[2]),
                           float(quaternion[3])), info.fx, info.fy, info.cx, info.cy)
        saved = self.store.save(cv2.cvtColor(frame.color, cv2.COLOR_RGB2BGR), timestamp=stamp,
                                camera=CAMERA, trigger=Trigger.NEW_NODE, node_ids=nodes,
                                robot_pose=[pose.x * self.layout.cell_m,
                                            pose.y * self.layout.cell_m,
                                            math.pi / 2 - pose.heading * math.pi / 2],
                                labels=[(o.label, "segmentation") for o in observations],
                                camera_view=view)
        if saved.frame_id:
            self.world.link_keyframe(saved.frame_id, nodes, stamp=stamp)
            self.frames_kept += 1

    def read(self, instruction: str) -> Recall:
        """The graph and the retrieved frames for ``instruction``."""
        kinds = named_kinds(self.layout, instruction)
        relevant = [n.node_id for kind in sorted(kinds)
                    for n in self.world.nodes_by_label(kind)]
        graph = self.world.render(GRAPH_CHARS, focus=relevant)
        retriever = KeyframeRetriever(self.store, RetrievalConfig(
            final_k=self._final_k, shortlist_k=max(self._final_k, 6)))
        result = retriever.retrieve(RetrievalQuery(instruction, tuple(relevant),
                                                   task_terms([instruction])), graph)
        images: list[tuple[str, Image]] = []
        for chosen in result.frames:
            bgr = self.store.load_image(chosen.frame_id)
            record = self.store.get(chosen.frame_id)
            where = ""
            if record.robot_pose is not None:
                x, y = record.robot_pose[0], record.robot_pose[1]
                where = f" seen from cell ({round(x)}, {round(y)})"
            images.append((f"remembered frame{where}, showing {', '.join(record.node_ids)}: "
                           f"{chosen.reason}", cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)))
        named = ", ".join(relevant) or "none"
        text = (f"mimir's scene graph of earlier runs (positions in metres; cell (x, y) is the "
                f"square around (x, y)); nodes of this task: {named}.\n{graph}")
        return Recall(text, tuple(images))

    def close(self) -> None:
        """Close the databases."""
        self.world.close()
        self.store.close()


class SceneRecall:
    """A :class:`SceneMemory` read once for an episode's instruction."""

    def __init__(self, memory: SceneMemory, instruction: str) -> None:
        self._recall = memory.read(instruction)

    def recall(self, view: Image) -> Recall:
        """The graph and frames (the same at every step)."""
        return self._recall
