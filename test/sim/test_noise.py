"""Noise profiles and the noise models of the simulated sensors and actuators (no simulator)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from mimir_perception.segmentation import compose_instances
from mimir_sim.noise import (
    ArmNoise,
    ColorNoise,
    DepthNoise,
    HandError,
    NoiseProfile,
    NoiseProfileError,
    OdometryDrift,
    OdometryNoise,
    SegmentationNoise,
    SensorNoise,
    image_motion,
    load_noise_profile,
    noisy_color,
    noisy_depth,
    noisy_segmentation,
    parse_noise_profile,
)
from mimir_sim.rendering import CameraInfo, Frame

SECTIONS = ("depth", "color", "segmentation", "odometry", "arm")


# ------------------------------------------------------------------------------- profiles


def test_realistic_profile_says_where_every_value_comes_from() -> None:
    profile = load_noise_profile("realistic")
    assert profile.name == "realistic" and profile.scale == 1.0
    for section in SECTIONS:
        assert not profile.quiet(section), section
    written = {f"{s}.{k}" for s in SECTIONS for k in profile.summary()[s]}
    assert set(profile.sources) <= written
    assert len(profile.sources) >= 25
    kinds = {source.split(" ")[0].rstrip(":") for source in profile.sources.values()}
    assert kinds <= {"assumption", "data"}, kinds
    # the terms nobody can measure here are marked as such
    assert profile.sources["segmentation.miss_p"].startswith("assumption")
    assert profile.sources["depth.sigma_per_m2"].startswith("data sheet")


def test_ideal_profile_is_quiet_and_so_is_scale_zero() -> None:
    ideal = load_noise_profile("ideal")
    assert all(ideal.quiet(s) for s in SECTIONS)
    zero = load_noise_profile("realistic", 0.0)
    assert all(zero.quiet(s) for s in SECTIONS)
    assert zero.scale == 0.0 and zero.color.jpeg_quality == 100
    # sensor limits are properties of the camera, not noise
    assert zero.depth.min_range_m == pytest.approx(0.1)
    assert zero.depth.max_range_m == pytest.approx(15.0)


def test_scale_multiplies_every_noise_term() -> None:
    one = load_noise_profile("realistic")
    two = one.scaled(2.0)
    assert two.scale == 2.0
    assert two.depth.sigma_per_m2 == pytest.approx(2 * one.depth.sigma_per_m2)
    assert two.odometry.xy_walk_per_sqrt_m == pytest.approx(2 * one.odometry.xy_walk_per_sqrt_m)
    assert two.arm.approach_sigma_m == pytest.approx(2 * one.arm.approach_sigma_m)
    assert two.segmentation.miss_p == pytest.approx(2 * one.segmentation.miss_p)
    assert two.segmentation.boundary_px == 2 * one.segmentation.boundary_px
    assert two.depth.edge_jump_m == one.depth.edge_jump_m  # a threshold, not noise
    assert two.color.jpeg_quality == one.color.jpeg_quality  # quality stops at the file's
    assert one.scaled(40.0).segmentation.miss_small_p == 1.0  # probabilities clip at 1
    half = one.scaled(0.5)
    assert half.color.jpeg_quality == round(100 - 0.5 * (100 - one.color.jpeg_quality))


@pytest.mark.parametrize(("data", "words"), [
    ({"lens": {}}, "unknown keys"),
    ({"depth": {"blur": {"value": 1, "source": "x"}}}, "unknown keys"),
    ({"depth": {"sigma_per_m2": 0.01}}, "depth.sigma_per_m2 must be {value"),
    ({"depth": {"sigma_per_m2": {"value": 0.01}}}, "depth.sigma_per_m2 must be {value"),
    ({"depth": {"sigma_per_m2": {"value": 0.01, "source": " "}}}, "source must say"),
    ({"depth": {"sigma_per_m2": {"value": -0.01, "source": "x"}}}, "sigma_per_m2"),
    ({"depth": {"sigma_per_m2": {"value": "big", "source": "x"}}}, "must be a number"),
    ({"segmentation": {"miss_p": {"value": 1.5, "source": "x"}}}, "miss_p"),
    ({"segmentation": {"confusions": {"value": ["mug"], "source": "x"}}}, "at least two"),
    ({"color": {"jpeg_quality": {"value": 0, "source": "x"}}}, "jpeg_quality"),
    ({"depth": {"min_range_m": {"value": 5.0, "source": "x"},
                "max_range_m": {"value": 2.0, "source": "x"}}}, "min_range_m"),
    ({"depth": [1, 2]}, "depth must be a mapping"),
])
def test_malformed_profiles_are_refused_with_the_key(data: dict[str, object], words: str) -> None:
    with pytest.raises(NoiseProfileError, match=words.replace("{", r"\{")):
        parse_noise_profile(data, "bad")


def test_unknown_unreadable_and_bad_scale(tmp_path: Path) -> None:
    with pytest.raises(NoiseProfileError, match=r"unknown noise profile 'noisy'.*realistic"):
        load_noise_profile("noisy")
    with pytest.raises(NoiseProfileError, match="cannot read"):
        load_noise_profile(tmp_path / "missing.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("depth: [unclosed\n")
    with pytest.raises(NoiseProfileError, match="not valid YAML"):
        load_noise_profile(broken)
    for scale in (-1.0, math.nan, math.inf, True):
        with pytest.raises(NoiseProfileError, match="noise scale"):
            load_noise_profile("realistic", scale)  # type: ignore[arg-type]


def test_a_profile_file_by_path(tmp_path: Path) -> None:
    path = tmp_path / "lab.yaml"
    path.write_text("arm:\n  approach_sigma_m: {value: 0.01, source: measurement on our arm}\n")
    profile = load_noise_profile(path, 0.5)
    assert profile.name == "lab" and profile.arm.approach_sigma_m == pytest.approx(0.005)
    assert profile.quiet("depth") and not profile.quiet("arm")


# ------------------------------------------------------------------------------- depth


def test_depth_noise_grows_with_the_square_of_range() -> None:
    term = DepthNoise(sigma_per_m2=0.002, max_range_m=20.0)
    rng = np.random.default_rng(1)
    spread = {}
    for z in (1.0, 2.0, 4.0):
        plane = np.full((120, 160), z, np.float32)
        spread[z] = float(np.std(noisy_depth(plane, None, term, rng) - z))
    assert spread[1.0] == pytest.approx(0.002, rel=0.05)
    assert spread[2.0] / spread[1.0] == pytest.approx(4.0, rel=0.1)
    assert spread[4.0] / spread[2.0] == pytest.approx(4.0, rel=0.1)


def test_depth_without_a_reading_is_nan() -> None:
    term = DepthNoise(edge_jump_m=0.05, edge_invalid_px=2, min_range_m=0.3, max_range_m=3.0,
                      dark_below=0.1, dark_invalid_p=1.0)
    depth = np.full((40, 40), 1.0, np.float32)
    depth[:, 20:] = 2.0  # an occlusion edge between columns 19 and 20
    depth[0, 0] = 0.2  # nearer than the camera can see
    depth[39, 39] = 5.0  # farther
    color = np.full((40, 40, 3), 128, np.uint8)
    color[30:35, 5:10] = 5  # a dark patch
    out = noisy_depth(depth, color, term, np.random.default_rng(0))
    assert np.isnan(out[0, 0]) and np.isnan(out[39, 39])
    # the band along the edge, on its far side only: the nearer surface keeps its depth
    assert np.isnan(out[10, 20:22]).all()
    assert np.isfinite(out[10, 5:20]).all() and np.isfinite(out[10, 22:35]).all()
    assert np.isnan(out[30:35, 5:10]).all()
    assert out[10, 5] == pytest.approx(1.0)  # no range noise in this term


# ------------------------------------------------------------------------------- colour


def test_colour_noise_repeats_with_its_seed_and_changes_the_image() -> None:
    image = np.random.default_rng(3).integers(0, 255, (48, 64, 3), dtype=np.uint8)
    term = ColorNoise(exposure_sigma=0.1, white_balance_sigma=0.03, jpeg_quality=80)
    first = noisy_color(image, term, np.random.default_rng(5))
    again = noisy_color(image, term, np.random.default_rng(5))
    other = noisy_color(image, term, np.random.default_rng(6))
    assert np.array_equal(first, again)
    assert not np.array_equal(first, other)
    assert not np.array_equal(first, image)
    assert noisy_color(image, ColorNoise(), np.random.default_rng(5)).tobytes() == image.tobytes()


def test_motion_blur_smears_along_the_image_motion() -> None:
    image = np.zeros((40, 40, 3), np.uint8)
    image[:, 20] = 255  # a vertical line
    term = ColorNoise(exposure_time_s=0.01)
    sideways = noisy_color(image, term, np.random.default_rng(0), np.array([6.0, 0.0]))
    along = noisy_color(image, term, np.random.default_rng(0), np.array([0.0, 6.0]))
    assert np.count_nonzero(sideways[20, :, 0]) >= 5  # spread across columns
    assert np.count_nonzero(along[20, :, 0]) == 1  # moving along the line keeps it sharp


def test_image_motion_of_a_turning_camera() -> None:
    k = np.array([[200.0, 0, 160], [0, 200.0, 120], [0, 0, 1]])
    before = np.eye(4)
    turn = 0.01  # rad about the optical y axis
    now = np.eye(4)
    now[:3, :3] = [[math.cos(turn), 0, math.sin(turn)], [0, 1, 0],
                   [-math.sin(turn), 0, math.cos(turn)]]
    shift = image_motion(before, now, k, 2.0)
    assert abs(shift[0]) == pytest.approx(200.0 * math.tan(turn), rel=0.01)
    assert shift[1] == pytest.approx(0.0, abs=1e-9)
    assert np.allclose(image_motion(before, before, k, 2.0), 0.0)


# ------------------------------------------------------------------------------- segmentation


def _scene(size: int = 30) -> tuple[np.ndarray, object]:
    """A view with a large near mug, a tiny far one and a lemon."""
    masks = np.zeros((3, 120, 160), bool)
    masks[0, 10:10 + size, 10:10 + size] = True
    masks[1, 100:104, 100:104] = True
    masks[2, 50:80, 100:130] = True
    result = compose_instances(masks, ["mug", "mug", "lemon"], [1.0, 1.0, 1.0])
    depth = np.full((120, 160), 1.0, np.float32)
    depth[100:104, 100:104] = 4.5
    return depth, result


def test_segmentation_misses_small_far_instances_more_often() -> None:
    depth, result = _scene()
    term = SegmentationNoise(miss_p=0.05, miss_small_p=0.5, small_area_px=150.0,
                             miss_far_p=0.2, far_from_m=2.0, far_span_m=2.0)
    rng = np.random.default_rng(7)
    kept = {"big": 0, "tiny": 0}
    trials = 2000
    for _ in range(trials):
        out = noisy_segmentation(result, depth, term, rng)
        boxes = [i.box for i in out.instances]
        kept["big"] += any(b[0] == 10 for b in boxes)
        kept["tiny"] += any(b[0] == 100 and b[1] == 100 for b in boxes)
    big_miss = 1 - kept["big"] / trials
    tiny_miss = 1 - kept["tiny"] / trials
    expected_big = 0.05 + 0.5 * math.exp(-900 / 150)
    expected_tiny = 0.05 + 0.5 * math.exp(-16 / 150) + 0.2
    for seen, expected in ((big_miss, expected_big), (tiny_miss, expected_tiny)):
        tolerance = 4 * math.sqrt(expected * (1 - expected) / trials)
        assert abs(seen - expected) <= tolerance, (seen, expected)


def test_segmentation_confuses_only_look_alikes_and_scores_below_one() -> None:
    depth, result = _scene()
    term = SegmentationNoise(confusion_p=1.0, confusions=("mug|cup",), score_drop=0.1,
                             score_spread=0.05, boundary_px=2)
    out = noisy_segmentation(result, depth, term, np.random.default_rng(2))
    labels = sorted(i.label for i in out.instances)
    assert labels == ["cup", "cup", "lemon"]  # a lemon has no look-alike in this profile
    assert all(0.0 < i.score < 1.0 for i in out.instances)
    sizes = {i.pixel_count for i in out.instances}
    assert sizes != {i.pixel_count for i in result.instances}  # boundaries moved


def test_segmentation_that_misses_everything_is_an_empty_result() -> None:
    depth, result = _scene()
    out = noisy_segmentation(result, depth, SegmentationNoise(miss_p=1.0),
                             np.random.default_rng(0))
    assert out.instances == () and not out.instance_ids.any()
    assert out.instance_ids.shape == result.instance_ids.shape


def test_sensor_noise_repeats_for_the_same_seed_and_keeps_the_truth() -> None:
    info = CameraInfo("pole", 64, 48, 50.0, 50.0, 32.0, 24.0, 0.05, 50.0)
    rng = np.random.default_rng(0)
    frame = Frame("pole", 1.0, rng.integers(0, 255, (48, 64, 3), dtype=np.uint8),
                  np.full((48, 64), 2.0, np.float32), None, (), (), info, np.eye(4))
    realistic = load_noise_profile("realistic")
    first = SensorNoise(realistic, 11).view(frame)
    second = SensorNoise(realistic, 11).view(frame)
    other = SensorNoise(realistic, 12).view(frame)
    assert first.color is not None and second.color is not None and other.color is not None
    assert np.array_equal(first.color, second.color)
    assert np.array_equal(first.depth, second.depth, equal_nan=True)
    assert not np.array_equal(first.color, other.color)
    assert frame.depth is not None and np.all(frame.depth == 2.0)  # the truth is untouched
    exact = SensorNoise(NoiseProfile(), 11).view(frame)
    assert exact.color is frame.color and exact.depth is frame.depth


# ------------------------------------------------------------------------------- actuators


def test_odometry_drift_is_a_random_walk_with_a_scale_error() -> None:
    term = OdometryNoise(scale_sigma=0.01, xy_walk_per_sqrt_m=0.005, yaw_walk_per_sqrt_m=0.005)
    finals = []
    for seed in range(200):
        drift = OdometryDrift(term, np.random.default_rng(seed))
        drift.restart()
        x = 0.0
        for _ in range(100):  # 1 m in 1 cm steps
            x += drift.increment(0.01, 0.0, 0.0)[0]
        finals.append(x - 1.0)
    spread = float(np.std(finals))
    expected = math.hypot(0.01, 0.005)  # scale error on 1 m and the walk over sqrt(1 m)
    assert spread == pytest.approx(expected, rel=0.2)
    exact = OdometryDrift(OdometryNoise(), np.random.default_rng(0))
    exact.restart()
    assert exact.increment(0.3, -0.1, 0.2) == (0.3, -0.1, 0.2)


def test_hand_error_calibration_per_reset_and_approach_per_motion() -> None:
    hand = HandError(ArmNoise(calibration_sigma_m=0.004, approach_sigma_m=0.003),
                     np.random.default_rng(4))
    hand.restart()
    calibration = hand.offset.copy()
    assert np.linalg.norm(calibration) > 0.0
    hand.new_motion()
    first = hand.offset.copy()
    hand.new_motion()
    assert not np.allclose(first, hand.offset)
    assert np.allclose(hand.calibration, calibration)  # the calibration stays until a reset
    hand.restart()
    assert not np.allclose(hand.calibration, calibration)
    assert np.allclose(hand.approach, 0.0)
