"""Intrinsics, rigid transforms and projection."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mimir.transforms import InvalidTransformError, matrix_to_quaternion, quaternion_to_matrix
from mimir_perception.camera import (
    Intrinsics,
    as_transform,
    invert_transform,
    make_transform,
    project_points,
    transform_points,
)
from mimir_perception.deprojection import deproject_pixels
from mimir_perception.errors import DepthError, IntrinsicsError, TransformError

INTR = Intrinsics(600.0, 610.0, 319.5, 239.5, 640, 480)


def random_pose(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    q = rng.normal(size=4)
    return make_transform(quaternion_to_matrix(q), rng.uniform(-3, 3, size=3))


def test_intrinsics_from_matrix_and_back() -> None:
    k = [[585.0, 0.0, 320.0], [0.0, 585.0, 240.0], [0.0, 0.0, 1.0]]
    intr = Intrinsics.from_matrix(k, 640, 480)
    assert (intr.fx, intr.fy, intr.cx, intr.cy) == (585.0, 585.0, 320.0, 240.0)
    np.testing.assert_allclose(intr.matrix, k)
    assert intr.shape == (480, 640)


@pytest.mark.parametrize(
    ("k", "w", "h"),
    [
        ([[0.0, 0, 1], [0, 1, 1], [0, 0, 1]], 10, 10),  # zero focal length
        ([[1.0, 0.2, 1], [0, 1, 1], [0, 0, 1]], 10, 10),  # skew
        ([[1.0, 0, 1], [0, 1, 1], [0, 0, 2]], 10, 10),  # bad last row
        ([[math.nan, 0, 1], [0, 1, 1], [0, 0, 1]], 10, 10),
        ([1.0, 2.0], 10, 10),
        ([[1.0, 0, 1], [0, 1, 1], [0, 0, 1]], 0, 10),
    ],
)
def test_intrinsics_rejects_bad_input(k: object, w: int, h: int) -> None:
    with pytest.raises(IntrinsicsError):
        Intrinsics.from_matrix(k, w, h)  # type: ignore[arg-type]


def test_intrinsics_scaling_matches_resize_convention() -> None:
    half = INTR.scaled(320, 240)
    assert half.fx == pytest.approx(300.0)
    assert half.fy == pytest.approx(305.0)
    # The centre of the image stays the centre.
    assert half.cx == pytest.approx(159.5)
    assert half.cy == pytest.approx(119.5)
    with pytest.raises(IntrinsicsError):
        INTR.scaled(0, 10)
    with pytest.raises(IntrinsicsError):
        INTR.check_image((240, 320), "depth")


def test_transform_validation() -> None:
    with pytest.raises(TransformError):
        as_transform(None)
    with pytest.raises(TransformError):
        as_transform(np.eye(3))
    bad = np.eye(4)
    bad[0, 0] = 2.0
    with pytest.raises(TransformError):
        as_transform(bad)
    nan = np.eye(4)
    nan[0, 3] = np.nan
    with pytest.raises(TransformError):
        as_transform(nan)
    mirror = np.diag([1.0, 1.0, -1.0, 1.0])
    with pytest.raises(TransformError):
        as_transform(mirror)
    with pytest.raises(InvalidTransformError):
        quaternion_to_matrix([0, 0, 0, 0])


@settings(max_examples=50, deadline=None)
@given(st.integers(min_value=0, max_value=10_000))
def test_quaternion_and_inverse_round_trip(seed: int) -> None:
    pose = random_pose(seed)
    q = matrix_to_quaternion(pose[:3, :3])
    np.testing.assert_allclose(quaternion_to_matrix(q), pose[:3, :3], atol=1e-9)
    np.testing.assert_allclose(invert_transform(pose) @ pose, np.eye(4), atol=1e-9)


@settings(max_examples=50, deadline=None)
@given(
    st.integers(min_value=0, max_value=10_000),
    st.lists(
        st.tuples(
            st.floats(0, 639, allow_nan=False),
            st.floats(0, 479, allow_nan=False),
            st.floats(0.2, 20.0, allow_nan=False),
        ),
        min_size=1,
        max_size=20,
    ),
)
def test_deproject_then_project_round_trip(
    seed: int, pixels: list[tuple[float, float, float]]
) -> None:
    pose = random_pose(seed)
    arr = np.asarray(pixels)
    points = deproject_pixels(arr[:, :2], arr[:, 2], INTR, pose)
    proj = project_points(points, INTR, pose)
    assert proj.visible.all()
    np.testing.assert_allclose(proj.uv, arr[:, :2], atol=1e-6)
    np.testing.assert_allclose(proj.depth, arr[:, 2], rtol=1e-9)


def test_projection_marks_points_behind_and_outside() -> None:
    pose = np.eye(4)
    pts = np.array([[0.0, 0.0, 2.0], [0.0, 0.0, -2.0], [100.0, 0.0, 1.0], [0.0, 0.0, 0.01]])
    proj = project_points(pts, INTR, pose)
    assert proj.visible.tolist() == [True, False, False, False]
    np.testing.assert_allclose(proj.uv[0], [INTR.cx, INTR.cy])
    with pytest.raises(TransformError):
        project_points(np.zeros((2, 2)), INTR, pose)


def test_transform_points_and_bad_depths() -> None:
    pose = make_transform(np.eye(3), [1.0, 2.0, 3.0])
    np.testing.assert_allclose(transform_points(pose, [[0.0, 0.0, 0.0]]), [[1.0, 2.0, 3.0]])
    with pytest.raises(DepthError):
        deproject_pixels([[1.0, 1.0]], [0.0], INTR, pose)
    with pytest.raises(DepthError):
        deproject_pixels([[1.0, 1.0]], [1.0, 2.0], INTR, pose)
