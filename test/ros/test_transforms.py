"""The ROS-free transform buffer: chains, interpolation, and its typed errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.transform import Rotation

from mimir.transforms import (
    ConnectivityError,
    ExtrapolationError,
    InvalidTransformError,
    TransformBuffer,
    UnknownFrameError,
    compose,
    decompose,
    quaternion_to_matrix,
)

IDENTITY_Q = [0.0, 0.0, 0.0, 1.0]


def _quat_z(angle: float) -> list[float]:
    return list(Rotation.from_euler("z", angle).as_quat())


@pytest.fixture
def tree() -> TransformBuffer:
    buf = TransformBuffer(cache_seconds=100.0)
    # map -> odom static; odom -> base_link moves; base_link -> camera static mount.
    buf.set_transform("map", "odom", 0.0, [1.0, 0.0, 0.0], IDENTITY_Q, static=True)
    buf.set_transform("odom", "base_link", 10.0, [0.0, 0.0, 0.0], _quat_z(0.0))
    buf.set_transform("odom", "base_link", 12.0, [2.0, 0.0, 0.0], _quat_z(np.pi / 2))
    buf.set_transform("base_link", "camera", 0.0, [0.0, 0.0, 1.0], IDENTITY_Q, static=True)
    return buf


def test_chain_at_sample(tree: TransformBuffer) -> None:
    mat = tree.lookup("map", "camera", 10.0)
    np.testing.assert_allclose(mat[:3, 3], [1.0, 0.0, 1.0], atol=1e-12)


def test_interpolates_translation_and_rotation(tree: TransformBuffer) -> None:
    mat = tree.lookup("map", "base_link", 11.0)
    np.testing.assert_allclose(mat[:3, 3], [2.0, 0.0, 0.0], atol=1e-12)
    yaw = Rotation.from_matrix(mat[:3, :3]).as_euler("xyz")[2]
    assert yaw == pytest.approx(np.pi / 4)


def test_inverse_direction(tree: TransformBuffer) -> None:
    forward = tree.lookup("map", "camera", 11.5)
    backward = tree.lookup("camera", "map", 11.5)
    np.testing.assert_allclose(forward @ backward, np.eye(4), atol=1e-12)


def test_latest_common_time(tree: TransformBuffer) -> None:
    mat = tree.lookup("map", "base_link", 0.0)
    np.testing.assert_allclose(mat[:3, 3], [3.0, 0.0, 0.0], atol=1e-12)


def test_siblings_through_common_parent(tree: TransformBuffer) -> None:
    tree.set_transform("odom", "tag_0", 0.0, [5.0, 5.0, 0.0], IDENTITY_Q, static=True)
    mat = tree.lookup("base_link", "tag_0", 10.0)
    np.testing.assert_allclose(mat[:3, 3], [5.0, 5.0, 0.0], atol=1e-12)


def test_unknown_frame(tree: TransformBuffer) -> None:
    with pytest.raises(UnknownFrameError, match="gripper"):
        tree.lookup("map", "gripper", 10.0)


def test_extrapolation(tree: TransformBuffer) -> None:
    with pytest.raises(ExtrapolationError, match="known only"):
        tree.lookup("map", "base_link", 12.5)
    with pytest.raises(ExtrapolationError):
        tree.lookup("map", "base_link", 9.0)


def test_a_bags_own_stamps_at_unix_epoch_times_do_not_extrapolate() -> None:
    """One recorded stamp converted two ways differs by a float rounding step at epoch times;
    a lookup at the last (or first) sample's stamp still succeeds, a microsecond beyond fails."""
    sec, nanosec = 1_764_000_000, 123_456_789
    as_sum = float(sec) + float(nanosec) * 1e-9
    as_ns = (sec * 1_000_000_000 + nanosec) / 1e9
    buf = TransformBuffer(cache_seconds=100.0)
    buf.set_transform("map", "cam", as_sum - 1.0, [0, 0, 0], IDENTITY_Q)
    buf.set_transform("map", "cam", as_sum, [1, 0, 0], IDENTITY_Q)
    for stamp in (as_ns, np.nextafter(as_sum, np.inf), np.nextafter(as_sum - 1.0, -np.inf)):
        buf.lookup("map", "cam", float(stamp))
    assert buf.lookup("map", "cam", float(np.nextafter(as_sum, np.inf)))[0, 3] == 1.0
    with pytest.raises(ExtrapolationError):
        buf.lookup("map", "cam", as_sum + 2e-6)


def test_disconnected_trees(tree: TransformBuffer) -> None:
    tree.set_transform("world", "other", 0.0, [0, 0, 0], IDENTITY_Q, static=True)
    with pytest.raises(ConnectivityError):
        tree.lookup("map", "other", 10.0)


@pytest.mark.parametrize(
    ("parent", "child", "trans", "quat"),
    [
        ("", "a", [0, 0, 0], IDENTITY_Q),
        ("a", "a", [0, 0, 0], IDENTITY_Q),
        ("a", "b", [np.nan, 0, 0], IDENTITY_Q),
        ("a", "b", [0, 0, 0], [0, 0, 0, 0]),
    ],
)
def test_invalid_samples(parent: str, child: str, trans: list[float], quat: list[float]) -> None:
    with pytest.raises(InvalidTransformError):
        TransformBuffer().set_transform(parent, child, 1.0, trans, quat)


def test_cache_prunes_old_samples() -> None:
    buf = TransformBuffer(cache_seconds=1.0)
    for t in range(10):
        buf.set_transform("odom", "base_link", float(t), [t, 0, 0], IDENTITY_Q)
    with pytest.raises(ExtrapolationError):
        buf.lookup("odom", "base_link", 2.0)
    np.testing.assert_allclose(buf.lookup("odom", "base_link", 8.5)[:3, 3], [8.5, 0, 0])


finite = st.floats(-50, 50, allow_nan=False)


@settings(max_examples=60, deadline=None)
@given(
    st.tuples(finite, finite, finite),
    st.tuples(st.floats(-np.pi, np.pi), st.floats(-1.5, 1.5), st.floats(-np.pi, np.pi)),
)
def test_compose_decompose_round_trip(trans: tuple[float, float, float],
                                      euler: tuple[float, float, float]) -> None:
    quat = Rotation.from_euler("zyx", euler).as_quat()
    t, q = decompose(compose(trans, quat))
    np.testing.assert_allclose(t, trans, atol=1e-9)
    np.testing.assert_allclose(compose(t, q), compose(trans, quat), atol=1e-9)


unit_quats = st.tuples(*[st.floats(-1, 1, allow_nan=False)] * 4).filter(
    lambda q: float(np.linalg.norm(q)) > 0.1)


@settings(max_examples=80, deadline=None)
@given(unit_quats, st.floats(0.1, 10.0))
def test_compose_matches_scipy_for_any_length(quat: tuple[float, ...], scale: float) -> None:
    """compose writes the quaternion's matrix out by hand; SciPy is the reference."""
    q = np.asarray(quat) * scale
    np.testing.assert_allclose(compose([1.0, -2.0, 0.5], q)[:3, :3],
                               Rotation.from_quat(q).as_matrix(), atol=1e-12)


@settings(max_examples=80, deadline=None)
@given(unit_quats, st.floats(1e-3, 1e3))
def test_quaternion_to_matrix_matches_scipy_for_any_length(quat: tuple[float, ...],
                                                           scale: float) -> None:
    q = np.asarray(quat) * scale
    matrix = quaternion_to_matrix(q)
    assert matrix.shape == (3, 3)
    np.testing.assert_allclose(matrix, Rotation.from_quat(q).as_matrix(), atol=1e-12)


@pytest.mark.parametrize("quat", [[0.0, 0.0, 0.0, 0.0], [np.nan, 0.0, 0.0, 1.0],
                                  [np.inf, 0.0, 0.0, 1.0], [0.0, 0.0, 1.0], "wxyz"])
def test_quaternion_to_matrix_refuses_what_is_no_rotation(quat: object) -> None:
    with pytest.raises(InvalidTransformError):
        quaternion_to_matrix(quat)  # type: ignore[arg-type]


@settings(max_examples=80, deadline=None)
@given(unit_quats, unit_quats, st.floats(0.0, 1.0), st.booleans())
def test_interpolation_matches_scipy_slerp(q0: tuple[float, ...], q1: tuple[float, ...],
                                           alpha: float, flip: bool) -> None:
    """Between two samples the rotation is SciPy's Slerp at the same fraction, whichever sign
    the second sample's quaternion carries (q and -q are one rotation)."""
    from scipy.spatial.transform import Slerp
    a = np.asarray(q0) / np.linalg.norm(q0)
    b = np.asarray(q1) / np.linalg.norm(q1)
    buf = TransformBuffer()
    buf.set_transform("odom", "base_link", 10.0, [0.0, 0.0, 0.0], a)
    buf.set_transform("odom", "base_link", 11.0, [1.0, 0.0, 0.0], -b if flip else b)
    got = buf.lookup("odom", "base_link", 10.0 + alpha)  # (stamp 0 asks for the latest)
    want = Slerp([0.0, 1.0], Rotation.from_quat([a, b]))([alpha]).as_matrix()[0]
    np.testing.assert_allclose(got[:3, :3], want, atol=1e-6)
    assert got[0, 3] == pytest.approx(alpha, abs=1e-9)


def test_nearly_equal_samples_interpolate_without_dividing_by_zero() -> None:
    buf = TransformBuffer()
    buf.set_transform("odom", "base_link", 0.0, [0.0, 0.0, 0.0], _quat_z(0.3))
    buf.set_transform("odom", "base_link", 1.0, [0.0, 0.0, 0.0], _quat_z(0.3 + 1e-9))
    mat = buf.lookup("odom", "base_link", 0.5)
    assert np.all(np.isfinite(mat))
    np.testing.assert_allclose(mat[:3, :3], Rotation.from_euler("z", 0.3).as_matrix(), atol=1e-8)
