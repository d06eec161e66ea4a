"""Benchmark of the memory core (world memory, keyframe store, event replay).

Run from the repository root:

    PYTHONPATH=. .venv/bin/python benchmarks/bench_memory.py [--quick] [--data FOLDER]

Prints: association latency for batches of 20 observations into graphs of 1,000 and 10,000
nodes (pure association and ingest with the commit), keyframe ingest rate for 640x480 frames
(filters, dedup, thumbnail, encode, atomic files, insert) on one core, the time to rebuild the
scene graph from 100,000 events, and bytes of database and images per 1,000 keyframes.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np

from mimir_memory.config import KeyframeConfig, MemoryConfig, StorageConfig
from mimir_memory.events import EventKind, MemoryEvent, Source
from mimir_memory.keyframes import KeyframeStore, Trigger
from mimir_memory.observations import ObjectObservation
from mimir_memory.world import WorldMemory

LABELS = [f"object {i}" for i in range(20)]


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p50 = statistics.median(ordered)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return p50 * 1e3, p95 * 1e3


def _seed_graph(world: WorldMemory, count: int, rng: np.random.Generator) -> np.ndarray:
    """Create ``count`` nodes spread over a 60 m x 60 m x 2 m volume in one transaction."""
    points = rng.uniform([0, 0, 0], [60, 60, 2], size=(count, 3))
    events = []
    counters: dict[str, int] = {}
    for i, p in enumerate(points):
        label = LABELS[i % len(LABELS)]
        key = label.replace(" ", "_")
        counters[key] = counters.get(key, 0) + 1
        events.append(
            MemoryEvent(
                kind=EventKind.NODE_CREATED,
                stamp=float(i) * 1e-3,
                source=Source.PERCEPTION,
                payload={
                    "node_id": f"{key}_{counters[key]}",
                    "label": label,
                    "centroid": p.tolist(),
                    "bbox_min": (p - 0.05).tolist(),
                    "bbox_max": (p + 0.05).tolist(),
                    "alternatives": [],
                },
            )
        )
    world.append(events)
    return points


def _batch(points: np.ndarray, rng: np.random.Generator, stamp: float) -> list[ObjectObservation]:
    """20 observations: 15 near existing nodes (re-observations), 5 at random spots."""
    out = []
    idx = rng.integers(0, len(points), size=15)
    for j in idx:
        c = points[j] + rng.normal(0, 0.02, 3)
        out.append(ObjectObservation(LABELS[j % len(LABELS)], c, c - 0.05, c + 0.05, stamp))
    for _ in range(5):
        c = rng.uniform([0, 0, 0], [60, 60, 2])
        label = LABELS[int(rng.integers(0, len(LABELS)))]
        out.append(ObjectObservation(label, c, c - 0.05, c + 0.05, stamp))
    return out


def bench_association(sizes: list[int], rounds: int, folder: Path) -> None:
    print("== association: batches of 20 observations ==")
    for sync in ("FULL", "NORMAL"):
        for size in sizes:
            rng = np.random.default_rng(size)
            config = MemoryConfig(storage=StorageConfig(synchronous=sync))
            world = WorldMemory.open(folder / f"assoc_{size}_{sync}.db", config=config)
            points = _seed_graph(world, size, rng)
            pure, full = [], []
            for r in range(rounds):
                batch = _batch(points, rng, 100.0 + r)
                t0 = time.perf_counter()
                world.associate(batch)
                pure.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                world.ingest(batch)
                full.append(time.perf_counter() - t0)
            a50, a95 = _percentiles(pure)
            i50, i95 = _percentiles(full)
            if sync == "FULL":
                print(
                    f"graph {size:>6} nodes: associate p50 {a50:.3f} ms p95 {a95:.3f} ms | "
                    f"ingest+commit (sync={sync}) p50 {i50:.2f} ms p95 {i95:.2f} ms "
                    f"| nodes after: {len(world.state.nodes)}"
                )
            else:
                print(
                    f"graph {size:>6} nodes: ingest+commit (sync={sync}) "
                    f"p50 {i50:.2f} ms p95 {i95:.2f} ms"
                )
            world.close()


def _frames(data: Path | None, count: int) -> list[np.ndarray]:
    images: list[np.ndarray] = []
    if data is not None and data.is_dir():
        for path in sorted(data.glob("frame-*.color.jpg"))[:count]:
            image = cv2.imread(str(path), cv2.IMREAD_COLOR)
            if image is not None:
                images.append(image)
    if not images:
        rng = np.random.default_rng(0)
        base = cv2.resize(
            rng.integers(0, 256, (60, 80, 3), dtype=np.uint8),
            (640, 480),
            interpolation=cv2.INTER_CUBIC,
        )
        images = [np.roll(base, 7 * i, axis=1) for i in range(count)]
    return images


def bench_keyframes(data: Path | None, total: int, folder: Path) -> None:
    print("== keyframes: 640x480 ingest on one core ==")
    cv2.setNumThreads(1)
    frames = _frames(data, 200)
    source = "7-Scenes kitchen" if data is not None and data.is_dir() else "synthetic"
    print(f"frames: {len(frames)} {source} images")
    for image_format, sync in (("jpg", "FULL"), ("jpg", "NORMAL"), ("png", "FULL")):
        config = MemoryConfig(
            keyframes=KeyframeConfig(image_format=image_format),
            storage=StorageConfig(synchronous=sync),
        )
        root = folder / f"kf_{image_format}_{sync}"
        fmt = f"{image_format}, sync={sync}"
        store = KeyframeStore.open(root, config=config)
        # Perception frames in recording order: filters and dedup decide what is kept.
        t0 = time.perf_counter()
        kept = 0
        reasons: dict[str, int] = {}
        for i, image in enumerate(frames):
            res = store.save(
                image,
                timestamp=i * 0.17,
                camera="base",
                trigger=Trigger.NEW_NODE,
                node_ids=[f"cabinet_{1 + i // 40}"],
            )
            kept += res.saved
            reasons[res.reason] = reasons.get(res.reason, 0) + 1
        dt = time.perf_counter() - t0
        print(
            f"[{fmt}] perception pass: {len(frames) / dt:.1f} frames/s offered, "
            f"outcomes {dict(sorted(reasons.items()))}"
        )
        # Distinct interaction frames (shifted copies so every one is stored) up to `total`.
        t0 = time.perf_counter()
        n = 0
        while store.count() < total:
            image = np.roll(frames[n % len(frames)], 3 + n // len(frames), axis=1)
            store.save(
                image,
                timestamp=1000.0 + n,
                camera="wrist",
                trigger=Trigger.INTERACTION_POST,
                node_ids=["cabinet_1", "mug_1"],
                labels=[("open cabinet", "analyzer")],
                action="OpenCabinet",
            )
            n += 1
        dt = time.perf_counter() - t0
        if n:
            print(f"[{fmt}] interaction frames stored: {n / dt:.1f} frames/s ({n} frames)")
        count = store.count()
        store.handle.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db_bytes = sum(p.stat().st_size for p in root.glob("keyframes.db*"))
        image_bytes = sum(p.stat().st_size for p in (root / "images").iterdir())
        thumb_bytes = sum(p.stat().st_size for p in (root / "thumbs").iterdir())
        per = 1000 / count
        print(
            f"[{fmt}] per 1,000 keyframes: database {db_bytes * per / 1e6:.2f} MB, "
            f"images {image_bytes * per / 1e6:.1f} MB, thumbnails {thumb_bytes * per / 1e6:.2f} MB"
        )
        t0 = time.perf_counter()
        hits = store.query(label="cabinet", limit=50)
        print(
            f"[{fmt}] label query over {count} frames: {(time.perf_counter() - t0) * 1e3:.1f} ms"
            f" ({len(hits)} results)"
        )
        store.close()


def bench_rebuild(events_total: int, folder: Path) -> None:
    print(f"== rebuild: scene graph from {events_total:,} events ==")
    path = folder / "rebuild.db"
    world = WorldMemory.open(path, config=MemoryConfig(storage=StorageConfig("NORMAL")))
    rng = np.random.default_rng(1)
    nodes = max(1, events_total // 20)
    points = _seed_graph(world, nodes, rng)
    written = nodes
    stamp = 10.0
    ids = sorted(world.state.nodes)
    chunk: list[MemoryEvent] = []
    while written < events_total:
        stamp += 0.01
        j = int(rng.integers(0, len(ids)))
        node_id = ids[j]
        if written % 3:
            c = world.state.nodes[node_id].centroid
            p = np.asarray(c) + rng.normal(0, 0.01, 3)
            kind, source = EventKind.OBSERVATION_FUSED, Source.PERCEPTION
            payload: dict[str, object] = {
                "centroid": p.tolist(),
                "bbox_min": (p - 0.05).tolist(),
                "bbox_max": (p + 0.05).tolist(),
            }
        else:
            kind, source = EventKind.PROPERTY_SET, Source.INTERACTION
            payload = {
                "name": "pickable",
                "value": bool(written % 2),
                "confidence": 0.8,
                "reasoning": "lifted during a pick",
            }
        chunk.append(
            MemoryEvent(
                kind=kind, stamp=stamp, source=source, payload={"node_id": node_id, **payload}
            )
        )
        written += 1
        if len(chunk) >= 5000:
            world.append(chunk)
            chunk = []
    if chunk:
        world.append(chunk)
    live = world.graph_snapshot()
    world.close()
    del points
    t0 = time.perf_counter()
    rebuilt = WorldMemory.open(path, readonly=True)
    dt = time.perf_counter() - t0
    same = rebuilt.graph_snapshot() == live
    print(
        f"rebuilt {rebuilt.log.count():,} events into {len(rebuilt.state.nodes):,} nodes in "
        f"{dt:.2f} s (identical to live state: {same}); "
        f"database {path.stat().st_size / 1e6:.1f} MB"
    )
    rebuilt.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes for a smoke run")
    parser.add_argument(
        "--data",
        type=Path,
        default=Path(__file__).resolve().parents[1].parent / "shared/data/sevenscenes_kitchen",
        help="folder of 640x480 color frames (frame-*.color.jpg)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if args.quick:
            bench_association([1000], 50, folder)
            bench_keyframes(args.data, 100, folder)
            bench_rebuild(10_000, folder)
        else:
            bench_association([1000, 10_000], 300, folder)
            bench_keyframes(args.data, 1000, folder)
            bench_rebuild(100_000, folder)


if __name__ == "__main__":
    main()
