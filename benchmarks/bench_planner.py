"""Planner core timings (run on demand; prints figures).

1. Keyframe candidate pool + stage-one catalog over a large keyframe index (default 100,000
   frames). The index rows are bulk-inserted with SQL into a store created by KeyframeStore
   (saving 100,000 images through ``save`` would take far longer than the query under test);
   the pool queries then run exactly as in the planner. Target: p50 <= 20 ms.
2. Planner-step overhead without model time: one closed-loop step (grounding, retrieval with
   the offline reasoner over real saved keyframes, scene-graph rendering, overlay, prompt
   rendering with an instant recorded backend, strict parsing, validation, gate, task update)
   on a kitchen with ~60 nodes. Target: <= 50 ms.

Usage: python benchmarks/bench_planner.py [--frames 100000] [--queries 200] [--steps 60]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from mimir_memory.config import MemoryConfig, StorageConfig
from mimir_memory.keyframes import KeyframeStore, Trigger
from mimir_memory.task import Effect, EffectKind, Feedback, TaskMemory
from mimir_memory.world import WorldMemory
from mimir_perception.camera import Intrinsics
from mimir_planner.config import load_planner_config
from mimir_planner.planner import PlannerSession
from mimir_planner.policies import VlmPlanner
from mimir_planner.primitives import ExecutableStep
from mimir_planner.reasoning.prompts import PromptLibrary
from mimir_planner.reasoning.vlm import VlmRequest, VlmResponse
from mimir_planner.retrieval import KeyframeRetriever, RetrievalQuery
from mimir_planner.runs import ExecutionOutcome, Observation

LABELS = [f"item{i}" for i in range(150)] + ["ketchup", "banana", "mug", "cabinet interior"]
TRIGGERS = [t.value for t in Trigger]


def _ms(values: list[float]) -> str:
    ordered = sorted(values)
    p50 = statistics.median(ordered)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return f"p50 {p50 * 1e3:.2f} ms, p95 {p95 * 1e3:.2f} ms, max {ordered[-1] * 1e3:.2f} ms"


def fill_index(store: KeyframeStore, frames: int, seed: int = 0) -> None:
    """Bulk-insert ``frames`` keyframe rows with node links and labels (no image files)."""
    rng = random.Random(seed)
    db = store.handle.db.conn
    rows, links, labels = [], [], []
    for i in range(frames):
        fid = f"{i:032x}"
        trigger = rng.choice(TRIGGERS)
        rows.append((fid, i + 1, float(i), "bench", rng.choice(["base1", "wrist"]), trigger,
                     "open" if trigger.startswith("interaction") else None, None, None,
                     json.dumps([rng.choice(LABELS)]), "", f"{fid}.jpg", f"{fid}.jpg",
                     640, 480, "0" * 16, 1000))
        for node in {rng.randrange(200) for _ in range(rng.randint(1, 3))}:
            links.append((fid, f"node_{node}"))
        for pos in range(rng.randint(0, 2)):
            labels.append((fid, pos, rng.choice(LABELS), "analyzer", float(i)))
    with store.handle.transaction() as tx:
        tx.conn.executemany(
            "INSERT INTO keyframes (frame_id, seq, timestamp, session, camera, trigger, action,"
            " parent_frame, robot_pose, tags, caption, image_file, thumb_file, width, height,"
            " dhash, bytes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        tx.conn.executemany("INSERT INTO keyframe_nodes (frame_id, node_id) VALUES (?, ?)", links)
        tx.conn.executemany(
            "INSERT INTO keyframe_labels (frame_id, position, label, source, stamp)"
            " VALUES (?, ?, ?, ?, ?)", labels)
    del db


def bench_pool(frames: int, queries: int) -> None:
    config = load_planner_config()
    with tempfile.TemporaryDirectory() as tmp:
        mem = MemoryConfig(storage=StorageConfig(synchronous="NORMAL"))
        store = KeyframeStore.open(Path(tmp) / "kf", config=mem)
        t0 = time.perf_counter()
        fill_index(store, frames)
        print(f"filled {store.count()} keyframe rows in {time.perf_counter() - t0:.1f} s")
        retriever = KeyframeRetriever(store, config.retrieval)
        t0 = time.perf_counter()
        retriever.refresh_index()
        print(f"label index built once in {(time.perf_counter() - t0) * 1e3:.0f} ms")
        rng = random.Random(1)
        times, sizes = [], []
        for _ in range(queries):
            nodes = tuple(f"node_{rng.randrange(200)}" for _ in range(3))
            terms = (rng.choice(LABELS).split()[0], rng.choice(LABELS).split()[0])
            t0 = time.perf_counter()
            pool = retriever.candidate_pool(RetrievalQuery("bench task", nodes, terms))
            retriever.catalog(pool)
            times.append(time.perf_counter() - t0)
            sizes.append(len(pool))
        print(f"pool + catalog over {frames} frames ({queries} queries, pool "
              f"{min(sizes)}-{max(sizes)} frames): {_ms(times)}")
        store.close()


class _Instant:
    name = "recorded"

    def complete(self, request: VlmRequest) -> VlmResponse:
        plan = {"plan": [{"step": 1, "action": "move_to", "target_object": "cabinet_3",
                          "reasoning": "bench"}], "reasoning": ["bench"], "warnings": []}
        return VlmResponse(json.dumps(plan), "recorded", "none", 0.0)


class _Executor:
    def execute(self, step: ExecutableStep) -> ExecutionOutcome:
        return ExecutionOutcome(Feedback(True, (Effect(EffectKind.ARRIVE, step.target),)))


def bench_step(steps: int) -> None:
    config = load_planner_config()
    mem = MemoryConfig(storage=StorageConfig(synchronous="NORMAL"))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        world = WorldMemory.open(root / "world.db", config=mem)
        task = TaskMemory.open(root / "task.db", config=mem)
        store = KeyframeStore.open(root / "kf", config=mem)
        rng = np.random.default_rng(0)
        for i in range(6):
            world.add_node("cabinet", (1.1, 1.5 - 0.6 * i, 1.6), stamp=1.0)
        world.add_node("counter", (1.0, 0.0, 0.9), stamp=1.0)
        for i in range(50):
            node = world.add_node(f"thing{i % 17}", (1.0, rng.uniform(-2, 2), 0.95), stamp=1.0)
            world.set_parent(node.payload["node_id"], "counter_1", "surface", stamp=1.0)
        for i in range(300):
            cells = rng.integers(0, 255, (15, 20, 3), dtype=np.uint8)
            image = np.repeat(np.repeat(cells, 8, 0), 8, 1)
            store.save(image, timestamp=float(i), camera="wrist",
                       trigger=Trigger.INTERACTION_PEAK if i % 3 else Trigger.NEW_NODE,
                       node_ids=[f"cabinet_{1 + i % 6}"], labels=[("ketchup", "analyzer")])
        intr = Intrinsics(fx=500, fy=500, cx=320, cy=240, width=640, height=480)
        pose = np.array([[0, 0, 1, -1.0], [-1, 0, 0, 0], [0, -1, 0, 1.2], [0, 0, 0, 1]],
                        dtype=np.float64)
        frame = np.zeros((480, 640, 3), dtype=np.uint8)
        for label, policy in (("offline planner", None),
                              ("VLM planner, instant backend", "vlm")):
            session = PlannerSession(world, task, config, keyframes=store)
            if policy == "vlm":
                session.policy = VlmPlanner(_Instant(), PromptLibrary(config.prompt_dir))
            session.observe(Observation(frame, intr, pose, 0.0))
            times = []
            for _ in range(steps):
                session.submit("find the ketchup")
                task.update("move_to", Feedback(True, (Effect(EffectKind.ARRIVE, "counter_1"),)),
                            world.state, stamp=1.0)
                t0 = time.perf_counter()
                session.step(_Executor())
                times.append(time.perf_counter() - t0)
                goal = task.active_goal()
                if goal is not None:
                    task.set_status(goal.goal_id, "blocked", stamp=2.0, reason="bench")
            print(f"planner step overhead ({label}, {len(world.state.nodes)} nodes, "
                  f"{store.count()} keyframes): {_ms(times)}")
        for handle in (world, task, store):
            handle.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--frames", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--steps", type=int, default=60)
    args = parser.parse_args()
    bench_pool(args.frames, args.queries)
    bench_step(args.steps)


if __name__ == "__main__":
    main()
