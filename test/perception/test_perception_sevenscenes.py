"""Deprojection on real Kinect frames (7-Scenes kitchen, 200 frames with ground-truth poses)."""

from __future__ import annotations

import logging
from pathlib import Path

import cv2
import numpy as np
import pytest
from scipy.spatial import cKDTree

from mimir_perception.camera import Intrinsics, make_transform
from mimir_perception.deprojection import DeprojectionConfig, Deprojector
from mimir_perception.segmentation import SegmentationResult, compose_instances

LOG = logging.getLogger(__name__)
W, H = 640, 480


class Recording:
    """Lazy reader of the 7-Scenes frames."""

    def __init__(self, root: Path) -> None:
        if not root.is_dir():
            raise FileNotFoundError(f"7-Scenes recording not found at {root}")
        self.root = root
        self.depth_files = sorted(root.glob("frame-*.depth.png"))
        k = np.loadtxt(root / "camera-intrinsics.txt")
        self.intrinsics = Intrinsics.from_matrix(k, W, H)

    def depth(self, i: int) -> np.ndarray:
        image = cv2.imread(str(self.depth_files[i]), cv2.IMREAD_UNCHANGED)
        assert image is not None and image.dtype == np.uint16 and image.shape == (H, W)
        return image

    def pose(self, i: int) -> np.ndarray:
        return np.loadtxt(str(self.depth_files[i]).replace(".depth.png", ".pose.txt"))


@pytest.fixture(scope="module")
def recording(sevenscenes_dir: Path) -> Recording:
    return Recording(sevenscenes_dir)


def whole_frame(depth_shape: tuple[int, int]) -> SegmentationResult:
    return compose_instances([np.ones(depth_shape, bool)], ["scene"], [1.0], min_pixels=1)


def frame_cloud(
    rec: Recording, dep: Deprojector, i: int, pose: np.ndarray | None = None
) -> np.ndarray:
    seg = whole_frame((H, W))
    pts = dep.instance_points(
        seg, rec.depth(i), rec.intrinsics, rec.pose(i) if pose is None else pose
    )
    return pts[1].astype(np.float64)


def overlap_median(a: np.ndarray, b: np.ndarray, radius: float = 0.10) -> tuple[float, float]:
    dist, _ = cKDTree(b).query(a, distance_upper_bound=radius)
    close = np.isfinite(dist)
    return float(np.median(dist[close])), float(np.mean(close))


def test_recording_is_complete(recording: Recording) -> None:
    assert len(recording.depth_files) == 200
    assert recording.intrinsics.fx == pytest.approx(585.0)


def test_frames_agree_in_the_world(recording: Recording) -> None:
    """Frames two apart (about 0.33 s) deprojected into the world overlap within ~1 cm."""
    sparse = Deprojector(
        DeprojectionConfig(depth_unit="mm", pixel_stride=4, erode_px=0, outlier_mad_k=0)
    )
    dense = Deprojector(
        DeprojectionConfig(depth_unit="mm", pixel_stride=2, erode_px=0, outlier_mad_k=0)
    )
    medians = []
    for i in (0, 40, 80, 120, 160, 197):
        a = frame_cloud(recording, sparse, i)
        b = frame_cloud(recording, dense, i + 2)
        median, overlap = overlap_median(a, b)
        medians.append(median)
        assert overlap > 0.6, f"frames {i}/{i + 2} overlap only {overlap:.0%}"
    figure = float(np.median(medians))
    LOG.info("7-Scenes pairwise median surface distance: %.4f m (per pair %s)", figure, medians)
    print(
        f"\n7-Scenes median surface distance between frames i, i+2: {figure * 1000:.1f} mm "
        f"(per pair, mm: {[round(m * 1000, 1) for m in medians]})"
    )
    assert figure < 0.015
    assert max(medians) < 0.025
    # Negative control: a 10 cm error in one pose must show up clearly.
    shifted = recording.pose(2) @ make_transform(np.eye(3), [0.1, 0.0, 0.0])
    bad, _ = overlap_median(
        frame_cloud(recording, sparse, 0), frame_cloud(recording, dense, 2, shifted)
    )
    assert bad > 2.5 * medians[0]


def test_full_path_runs_over_all_frames(recording: Recording) -> None:
    """Every frame goes through the whole path: 2x3 grid of masks + mm depth + pose.

    Every second pixel row and column is used (pixel_stride=2) to keep the test quick.
    """
    dep = Deprojector(
        DeprojectionConfig(depth_unit="mm", min_points=100, max_depth=6.0, pixel_stride=2)
    )
    grid = []
    for r in range(2):
        for c in range(3):
            m = np.zeros((H, W), bool)
            m[r * 240 : (r + 1) * 240, c * 213 : (c + 1) * 213] = True
            grid.append(m)
    labels = [f"cell{k}" for k in range(6)]
    seg = compose_instances(grid, labels, [0.5] * 6, min_pixels=1)
    total_obs = 0
    for i in range(len(recording.depth_files)):
        depth = recording.depth(i)
        pose = recording.pose(i)
        out = dep.deproject(seg, depth, recording.intrinsics, pose, stamp=i / 6.0, camera="kinect")
        total_obs += len(out.observations)
        assert len(out.observations) + len(out.skipped) == 6
        cam_pos = pose[:3, 3]
        for obs in out.observations:
            assert np.all(obs.bbox_min <= obs.centroid + 1e-6)
            assert np.all(obs.centroid <= obs.bbox_max + 1e-6)
            # Everything is within the depth range of the camera.
            assert np.linalg.norm(obs.centroid - cam_pos) < 6.0
        if i % 50 == 0:
            # The median centroid of a cell sits on the cell's point cloud.
            pts = dep.instance_points(seg, depth, recording.intrinsics, pose)
            for obs, iid in zip(out.observations, out.instance_ids, strict=True):
                dist, _ = cKDTree(pts[iid]).query(obs.centroid)
                assert dist < 0.2
    assert total_obs >= 0.9 * 6 * 200
