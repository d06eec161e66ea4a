"""Interaction analyzer overhead without model time.

Three cameras at 640x480, ten frames per camera, registered depth on one camera. Measures
window gathering and evidence (depth change, gripper), collage and image preparation,
verification and building the writes. The model is replaced by the offline reasoner, whose
own time is measured separately and subtracted.

Run: .venv/bin/python benchmarks/bench_analyzer.py [--runs N]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from mimir_planner.reasoning import (
    ActionWindow,
    Box3D,
    CameraFrame,
    Detection3D,
    InMemoryWorld,
    InteractionAnalyzer,
    NodeSnapshot,
    PrimitiveRecord,
    RobotStateSample,
    load_reasoning_config,
    make_backend,
    parse_analyzer_answer,
)

H, W = 480, 640
K = np.array([[500.0, 0.0, W / 2], [0.0, 500.0, H / 2], [0.0, 0.0, 1.0]])
POSE = np.array(
    [[0.0, 0.0, 1.0, 0.0], [-1.0, 0.0, 0.0, 0.0], [0.0, -1.0, 0.0, 0.5], [0.0, 0.0, 0.0, 1.0]]
)


def _scene(frames_per_camera: int) -> tuple[InMemoryWorld, ActionWindow, list[Detection3D]]:
    rng = np.random.default_rng(0)
    nodes = [
        NodeSnapshot(
            f"drawer_{i}",
            "drawer",
            np.array([1.0, 0.4 * i, 0.5]),
            Box3D(np.array([0.8, 0.4 * i - 0.15, 0.4]), np.array([1.2, 0.4 * i + 0.15, 0.6])),
        )
        for i in range(6)
    ]
    world = InMemoryWorld(nodes)
    stamps = np.linspace(100.0, 103.0, frames_per_camera)
    frames = []
    for cam in ("base", "side", "wrist"):
        for k, t in enumerate(stamps):
            rgb = rng.integers(0, 255, (H, W, 3), dtype=np.uint8)
            if cam == "base":
                depth = np.full((H, W), 0.8, dtype=np.float32)
                if k == len(stamps) - 1:
                    depth[150:330, 200:440] = 0.6
                frames.append(CameraFrame(cam, float(t), rgb, depth, K, POSE))
            else:
                frames.append(CameraFrame(cam, float(t), rgb))
    states = tuple(
        RobotStateSample(float(t), 0.02, 30.0, True, (0.0, 0.0, 0.0), 20.0)
        for t in np.linspace(100.0, 103.0, 60)
    )
    detections = [
        Detection3D("scissors", np.array([1.0, 0.05, 0.5]), 0.9, 103.0, "wrist"),
        Detection3D("mug", np.array([1.0, 0.4, 0.5]), 0.8, 103.0, "wrist"),
    ]
    return world, ActionWindow(tuple(frames), states), detections


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--frames", type=int, default=10)
    args = parser.parse_args()
    cfg = load_reasoning_config()
    world, window, detections = _scene(args.frames)
    backend = make_backend(cfg)
    analyzer = InteractionAnalyzer(backend, world, cfg)
    primitive = PrimitiveRecord("OpenDrawer", "drawer_0", 100.0, 103.0, task="find scissors")
    prepare_ms, verify_ms, model_ms, total_ms = [], [], [], []
    for i in range(args.runs + 2):
        t0 = time.perf_counter()
        prepared = analyzer.prepare(window, primitive, detections, interaction_id=f"bench{i}")
        t1 = time.perf_counter()
        response = backend.complete(prepared.request)
        t2 = time.perf_counter()
        answer = parse_analyzer_answer(response.text, cfg.vocabulary)
        result = analyzer.verify(prepared, response, answer)
        t3 = time.perf_counter()
        if i < 2:  # warm-up
            continue
        prepare_ms.append((t1 - t0) * 1e3)
        model_ms.append((t2 - t1) * 1e3)
        verify_ms.append((t3 - t2) * 1e3)
        total_ms.append(((t1 - t0) + (t3 - t2)) * 1e3)
    print(f"cameras=3 frames/camera={args.frames} size={W}x{H} runs={args.runs}")
    admitted = len(result.harness.admitted)
    print(f"admitted updates per run: {admitted}; keyframes {len(result.keyframes)}")
    for name, values in (
        ("prepare (window, evidence, collage, prompt)", prepare_ms),
        ("verify (parse, claims, harness, writes, keyframes)", verify_ms),
        ("overhead excluding model", total_ms),
        ("offline reasoner (model stand-in, excluded)", model_ms),
    ):
        print(f"{name:52s} median {statistics.median(values):7.2f} ms  max {max(values):7.2f} ms")
    target = 100.0
    verdict = "OK" if statistics.median(total_ms) <= target else "OVER TARGET"
    print(f"target <= {target:.0f} ms per interaction: {verdict}")


if __name__ == "__main__":
    main()
