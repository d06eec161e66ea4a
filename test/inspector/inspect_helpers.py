"""A run folder for the inspector tests, written through the memory core as the nodes write it:
a counter and two cabinets, one learned locked at 40 s (with keyframes and robot traces as
evidence), the other opened and inspected at 50 s (a banana inside), a task agenda, a planner
trace, and labels and model text carrying markup."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mimir.inspect.folder import MemoryFolder
from mimir.inspect.server import InspectorServer, make_server
from mimir_memory.events import Evidence, Source
from mimir_memory.keyframes import KeyframeStore, Trigger
from mimir_memory.task import TaskMemory
from mimir_memory.world import WorldMemory
from mimir_planner.trace import PlannerTrace

MARKUP = '<script>alert("x")</script><img src=x onerror=alert(1)>'
LOCK_STAMP = 40.0


@dataclass
class RunFolder:
    root: Path
    memory: Path
    lock_keyframe: str
    keyframes: list[str]


def _image(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    img = np.zeros((240, 320, 3), np.uint8)
    img[:, :, 0] = np.linspace(0, 255, 320, dtype=np.uint8)
    img[60:180, 80 + 10 * seed:200 + 10 * seed] = rng.integers(0, 255, 3, dtype=np.uint8)
    return img


def make_run_folder(root: Path) -> RunFolder:
    memory = root / "memory"
    memory.mkdir(parents=True)
    store = KeyframeStore.open(memory / "keyframes")
    frames = []
    # the cameras look along +x from 1.2 m up, in line with the cabinet each frame shows (the
    # first frame keeps no view, as a keyframe saved without camera info or TF would)
    views = [None, *({"position": [0.1 * i, y, 1.2], "orientation": [-0.5, 0.5, -0.5, 0.5],
                      "fx": 250.0, "fy": 250.0, "cx": 159.5, "cy": 119.5}
                     for i, y in ((1, 0.6), (2, 0.6), (3, -0.6)))]
    for i, (stamp, trigger, camera) in enumerate([
            (5.0, Trigger.NEW_NODE, "pole"), (38.0, Trigger.INTERACTION_PRE, "wrist"),
            (40.0, Trigger.INTERACTION_POST, "wrist"), (52.0, Trigger.INTERACTION_POST, "base")]):
        saved = store.save(_image(i), timestamp=stamp, camera=camera, trigger=trigger,
                           action="open" if trigger.interaction else None,
                           node_ids=["cabinet_1"] if i < 3 else ["cabinet_2"],
                           robot_pose=[0.2 * i, 0.1 * i, 0.0], caption=f"frame {i} {MARKUP}",
                           camera_view=views[i])
        assert saved.frame_id is not None
        frames.append(saved.frame_id)
    store.close()
    world = WorldMemory.open(memory / "world.db")
    world.add_node("counter", [1.0, 0.0, 0.4], stamp=1.0, bbox_min=[0.8, -0.9, 0.0],
                   bbox_max=[1.2, 0.9, 0.9])
    world.add_node("cabinet", [1.0, 0.6, 1.2], stamp=1.0, bbox_min=[0.85, 0.35, 0.9],
                   bbox_max=[1.2, 0.85, 1.5])
    world.add_node("cabinet", [1.0, -0.6, 1.2], stamp=1.0, bbox_min=[0.85, -0.85, 0.9],
                   bbox_max=[1.2, -0.35, 1.5])
    world.add_node(f"banana {MARKUP}", [1.0, -0.6, 1.1], stamp=2.0)
    banana = next(n for n in world.state.nodes if n.startswith("banana"))
    world.set_property("cabinet_1", "locked", True, confidence=0.85, stamp=LOCK_STAMP,
                       reasoning=f"held back while holding {MARKUP}",
                       evidence=Evidence(keyframe_ids=(frames[1], frames[2]),
                                         event_ids=("interaction:abc123",
                                                    "robot_state:gripper@38.000")))
    world.set_property("cabinet_2", "openable", True, confidence=0.9, stamp=50.0,
                       is_opened=True, evidence=Evidence(keyframe_ids=(frames[3],)))
    world.set_contents("cabinet_2", [{"name": "banana", "node_id": banana,
                                      "description": f"seen inside {MARKUP}"}],
                       is_empty=False, stamp=52.0, source_action="inspect")
    world.set_parent(banana, "cabinet_2", "container", stamp=52.0)
    world.close()
    task = TaskMemory.open(memory / "task.db")
    task.add_goal("g001_find", "found(banana)", stamp=30.0, description=f"find it {MARKUP}",
                  source=Source.OPERATOR)
    task.record_binding_failure("g001_find", "banana", stamp=41.0, source_id="cabinet_1",
                                reason="locked")
    task.close()
    trace = PlannerTrace(memory)
    trace.append({"instruction": "Find the banana.", "call": 1, "goal_id": "g001_find",
                  "outcome": "executed", "primitive": "open", "target": "cabinet_1",
                  "success": False, "detail": f"NO_MOTION {MARKUP}", "start": 36.0,
                  "end": 41.0, "plan": [{"primitive": "open", "target": "cabinet_1",
                                         "reasoning": "the banana may be inside"}],
                  "candidates": [{"node_id": "cabinet_1", "score": 0.7,
                                  "evidence": ["explore"]}],
                  "retrieved": [{"frame_id": frames[0], "reason": "shows the cabinet",
                                 "pool": "graph"}]})
    return RunFolder(root, memory, frames[2], frames)


class Serving:
    """The inspector served on a free loopback port in a thread (a context manager)."""

    def __init__(self, path: Path) -> None:
        self.folder = MemoryFolder(path)
        self.server: InspectorServer = make_server(self.folder, "127.0.0.1", 0)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return self.server.url

    def __enter__(self) -> Serving:
        self.thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.folder.close()
