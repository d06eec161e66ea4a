"""Perception benchmarks: deprojection, association into a 1,000-node graph, fiducials.

Run: ``.venv/bin/python benchmarks/bench_perception.py [--runs N]``

Everything runs on one core (thread pools of numpy, OpenCV and Open3D are limited to one
thread before they load). Figures are printed; nothing is asserted.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from functools import partial  # noqa: E402
from pathlib import Path  # noqa: E402

import cv2  # noqa: E402
import numpy as np  # noqa: E402
import open3d as o3d  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mimir.transforms import matrix_to_quaternion  # noqa: E402
from mimir_memory.observations import ObjectObservation  # noqa: E402
from mimir_memory.world import WorldMemory  # noqa: E402
from mimir_perception.camera import Intrinsics, invert_transform, make_transform  # noqa: E402
from mimir_perception.deprojection import DeprojectionConfig, Deprojector  # noqa: E402
from mimir_perception.fiducials import (  # noqa: E402
    FiducialLocalizer,
    parse_fiducial_map,
    render_tags,
)
from mimir_perception.segmentation import SegmentationResult, compose_instances  # noqa: E402

cv2.setNumThreads(1)
W, H = 1280, 720
INTR = Intrinsics(700.0, 700.0, 639.5, 359.5, W, H)
LABELS = [
    "cabinet",
    "drawer",
    "counter",
    "mug",
    "cup",
    "bowl",
    "bottle",
    "banana",
    "shelf",
    "chair",
]


def yaw_rotation(yaw: float) -> np.ndarray:
    """Rotation about z by ``yaw`` (rad)."""
    c, s = math.cos(yaw), math.sin(yaw)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def percentiles(samples: list[float]) -> tuple[float, float]:
    arr = np.asarray(samples) * 1000.0
    return float(np.percentile(arr, 50)), float(np.percentile(arr, 90))


def timed(fn: Callable[[], object], runs: int, warmup: int = 2) -> tuple[float, float]:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return percentiles(samples)


def synthetic_frame(seed: int = 0) -> tuple[SegmentationResult, np.ndarray, np.ndarray]:
    """A 1280x720 depth frame of a room with 20 objects, their masks and a camera pose."""
    rng = np.random.default_rng(seed)
    v, u = np.mgrid[0:H, 0:W]
    depth = (3.0 + 0.4 * (v / H) + rng.normal(0.0, 0.005, size=(H, W))).astype(np.float32)
    masks = []
    for _ in range(20):
        cx, cy = rng.uniform(80, W - 80), rng.uniform(60, H - 60)
        ax, ay = rng.uniform(30, 130), rng.uniform(25, 100)
        mask = ((u - cx) / ax) ** 2 + ((v - cy) / ay) ** 2 <= 1.0
        depth[mask] = rng.uniform(0.8, 2.5) + rng.normal(0.0, 0.004, size=int(mask.sum()))
        masks.append(mask)
    # Invalid readings: zero, NaN and a ring of bleeding edges around some objects.
    depth[rng.random((H, W)) < 0.02] = 0.0
    depth[rng.random((H, W)) < 0.01] = np.nan
    labels = [LABELS[i % len(LABELS)] for i in range(20)]
    scores = list(rng.uniform(0.4, 0.95, size=20))
    seg = compose_instances(masks, labels, scores, min_pixels=50, stamp=12.5, camera="base")
    optical_to_base = np.column_stack([[0, -1, 0], [0, 0, -1], [1, 0, 0]]).astype(float)
    base = make_transform(yaw_rotation(0.3), [1.0, 2.0, 0.0])
    pose = base @ make_transform(optical_to_base, [0.1, 0.0, 1.2])
    return seg, depth, pose


def open3d_baseline(
    seg: SegmentationResult, depth: np.ndarray, pose: np.ndarray
) -> list[np.ndarray]:
    """Straightforward per-mask Open3D pipeline (what the vectorised path replaces)."""
    intrinsic = o3d.camera.PinholeCameraIntrinsic(W, H, INTR.fx, INTR.fy, INTR.cx, INTR.cy)
    extrinsic = invert_transform(pose)
    clean = np.nan_to_num(depth, nan=0.0)
    centroids = []
    for info in seg.instances:
        masked = np.where(seg.instance_ids == info.instance_id, clean, 0.0).astype(np.float32)
        cloud = o3d.geometry.PointCloud.create_from_depth_image(
            o3d.geometry.Image(masked),  # type: ignore[call-overload]
            intrinsic,
            extrinsic,
            depth_scale=1.0,
            depth_trunc=10.0,
        )
        cloud, _ = cloud.remove_statistical_outlier(nb_neighbors=20, std_ratio=2.0)
        box = cloud.get_axis_aligned_bounding_box()
        centroids.append(np.asarray(box.get_center()))
    return centroids


CONFIGS = (
    ("stride 1, OBB", DeprojectionConfig()),
    ("stride 1, no OBB", DeprojectionConfig(compute_obb=False)),
    ("stride 2, OBB (robot setting)", DeprojectionConfig(pixel_stride=2)),
)


def seeded_world(path: Path) -> WorldMemory:
    """A world memory holding 1,000 nodes on a 1 m grid (10 labels, none of them merge)."""
    grid = np.stack(np.meshgrid(np.arange(10), np.arange(10), np.arange(10)), axis=-1)
    grid = grid.reshape(-1, 3).astype(float) + np.array([-5.0, -5.0, 0.0])
    world = WorldMemory.open(path)
    batch = [
        ObjectObservation(
            label=LABELS[i % len(LABELS)],
            centroid=grid[i],
            bbox_min=grid[i] - 0.1,
            bbox_max=grid[i] + 0.1,
            stamp=1.0,
            detection_id=f"seed#{i}",
        )
        for i in range(1000)
    ]
    for start in range(0, 1000, 100):
        world.ingest(batch[start : start + 100])
    return world


def bench_frames(runs: int) -> None:
    """Deprojection alone, association alone, and both per frame, for each configuration."""
    seg, depth, pose = synthetic_frame()
    covered = float(np.count_nonzero(seg.instance_ids)) / (W * H)
    print(f"frame: {W}x{H}, {len(seg)} masks covering {covered:.0%} of the image")
    with tempfile.TemporaryDirectory() as tmp:
        world = seeded_world(Path(tmp) / "world.db")
        try:
            nodes = len(world.state.nodes)
            p50s = {}
            for name, cfg in CONFIGS:
                dep = Deprojector(cfg)
                out = dep.deproject(seg, depth, INTR, pose)
                p50, p90 = timed(partial(dep.deproject, seg, depth, INTR, pose), runs)
                p50s[name] = p50
                print(
                    f"deprojection [{name}]: p50 {p50:.2f} ms, p90 {p90:.2f} ms, "
                    f"{len(out.observations)} obs"
                )
                observations = list(out.observations)
                p50, p90 = timed(lambda obs=observations: world.associate(obs), runs)
                print(
                    f"  association of {len(observations)} observations into a {nodes}-node "
                    f"graph: p50 {p50:.2f} ms, p90 {p90:.2f} ms"
                )

                def frame(dep: Deprojector = dep) -> None:
                    world.associate(list(dep.deproject(seg, depth, INTR, pose).observations))

                p50, p90 = timed(frame, runs)
                print(f"  per frame, deprojection + association: p50 {p50:.2f} ms, "
                      f"p90 {p90:.2f} ms")
        finally:
            world.close()
    try:
        base_p50, base_p90 = timed(lambda: open3d_baseline(seg, depth, pose), max(5, runs // 10), 1)
    except ImportError as err:
        print(f"open3d baseline skipped: {err}")
        return
    print(f"open3d per-mask baseline: p50 {base_p50:.2f} ms, p90 {base_p90:.2f} ms")
    for name, p50 in p50s.items():
        print(f"speed-up over open3d [{name}]: {base_p50 / p50:.0f}x")


def bench_fiducials(runs: int) -> None:
    wall = matrix_to_quaternion(np.column_stack([[0, -1, 0], [0, 0, 1], [-1, 0, 0]])).tolist()
    tag_map = parse_fiducial_map(
        {
            "dictionary": "DICT_APRILTAG_36h11",
            "tag_size": 0.2,
            "tags": [
                {"id": k, "position": [2.5, -0.9 + 0.6 * k, 1.0 + 0.1 * k], "orientation": wall}
                for k in range(4)
            ],
        }
    )
    base_from_camera = make_transform(
        np.column_stack([[0, -1, 0], [0, 0, -1], [1, 0, 0]]), [0.1, 0, 1.0]
    )
    truth = make_transform(yaw_rotation(0.1), [0.3, 0.1, 0.0])
    view = render_tags(tag_map, truth @ base_from_camera, INTR)
    image = cv2.GaussianBlur(view.image, (0, 0), 0.7)
    loc = FiducialLocalizer(tag_map, base_from_camera)
    p50, p90 = timed(lambda: loc.detect(image), runs)
    print(f"fiducial detection per {W}x{H} frame: p50 {p50:.2f} ms, p90 {p90:.2f} ms")
    p50, p90 = timed(lambda: loc.localize(image, INTR, 1.0), runs)
    result = loc.localize(image, INTR, 1.0)
    assert result is not None
    err = float(np.linalg.norm(result.map_from_base[:3, 3] - truth[:3, 3]))
    print(
        f"fiducial localisation (detect + pose + fusion, {len(result.used_tags)} tags): "
        f"p50 {p50:.2f} ms, p90 {p90:.2f} ms, position error {err * 1000:.1f} mm"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=100, help="timed repetitions per figure")
    args = parser.parse_args()
    bench_frames(args.runs)
    bench_fiducials(max(10, args.runs // 4))


if __name__ == "__main__":
    main()
