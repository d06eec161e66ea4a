"""ObjectObservation has one encoder and one decoder, and nothing is lost on the way."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from mimir.nodes.memory.observation_messages import (
    observation_from_msg,
    observation_to_msg,
    observations_from_msg,
    observations_to_msgs,
)
from mimir_memory.observations import InvalidObservationError, ObjectObservation
from mimir_msgs.msg import ObjectObservationArray


def _observation(with_box: bool, seed: int = 3) -> ObjectObservation:
    rng = np.random.default_rng(seed)
    centre = rng.uniform(-5, 5, 3)
    extra = {}
    if with_box:
        extra = {"obb_center": centre + 0.01,
                 "obb_extent": np.array([0.4, 0.2, 0.9]),
                 "obb_rotation": Rotation.from_rotvec(rng.normal(size=3)).as_matrix()}
    return ObjectObservation(label="cabinet", centroid=centre, bbox_min=centre - 0.5,
                             bbox_max=centre + 0.5, stamp=12.25, score=0.75, point_count=812,
                             camera="pole", detection_id="pole@12.25#4", frame_id="map",
                             **extra)


@pytest.mark.parametrize("with_box", [True, False])
def test_an_observation_survives_the_round_trip(with_box: bool) -> None:
    obs = _observation(with_box)
    back = observation_from_msg(observation_to_msg(obs))
    for name in ("label", "camera", "detection_id", "frame_id", "point_count"):
        assert getattr(back, name) == getattr(obs, name)
    assert back.stamp == pytest.approx(obs.stamp)
    assert back.score == pytest.approx(obs.score)
    for name in ("centroid", "bbox_min", "bbox_max"):
        np.testing.assert_allclose(getattr(back, name), getattr(obs, name))
    if with_box:
        np.testing.assert_allclose(back.obb_center, obs.obb_center)
        np.testing.assert_allclose(back.obb_extent, obs.obb_extent)
        np.testing.assert_allclose(back.obb_rotation, obs.obb_rotation, atol=1e-12)
    else:
        assert back.obb_center is None and back.obb_extent is None and back.obb_rotation is None


def test_a_frame_encodes_in_one_go_exactly_as_item_by_item() -> None:
    # boxed, unboxed, a box without rotation (identity), and a rotation whose quaternion
    # SciPy gives with w < 0 (the encoder flips it)
    flipped = Rotation.from_quat([0.0, 0.0, 0.9, -0.1]).as_matrix()
    items = [_observation(True, 1), _observation(False, 2),
             dataclasses.replace(_observation(True, 3), obb_rotation=None),
             dataclasses.replace(_observation(True, 4), obb_rotation=flipped)]
    assert observations_to_msgs(items) == [observation_to_msg(o) for o in items]
    q = observations_to_msgs(items)[3].oriented_box.center.orientation
    assert q.w > 0
    assert observations_to_msgs([]) == []


def test_the_array_supplies_what_an_item_leaves_empty() -> None:
    msg = observation_to_msg(_observation(False))
    msg.header.frame_id = ""
    msg.header.stamp.sec, msg.header.stamp.nanosec = 0, 0
    msg.camera = ""
    array = ObjectObservationArray(camera="wrist", observations=[msg])
    array.header.frame_id = "map"
    array.header.stamp.sec = 40
    back = observation_from_msg(msg, array)
    assert (back.frame_id, back.camera, back.stamp) == ("map", "wrist", 40.0)


def test_a_broken_oriented_box_is_refused() -> None:
    msg = observation_to_msg(_observation(True))
    q = msg.oriented_box.center.orientation
    q.x = q.y = q.z = q.w = 0.0
    with pytest.raises(InvalidObservationError, match="oriented box"):
        observation_from_msg(msg)
    msg = observation_to_msg(_observation(True))
    msg.oriented_box.size.x = float("nan")
    with pytest.raises(InvalidObservationError):
        observation_from_msg(msg)


def test_an_array_decodes_item_by_item_and_says_why_it_left_one_out() -> None:
    good = observation_to_msg(_observation(True, seed=1))
    broken = observation_to_msg(_observation(True, seed=2))
    broken.label = "drawer"
    broken.oriented_box.size.x = float("nan")
    elsewhere = observation_to_msg(_observation(False, seed=4))
    elsewhere.label = "mug"
    elsewhere.header.frame_id = "odom"
    array = ObjectObservationArray(camera="pole", observations=[broken, good, elsewhere])
    taken, refused = observations_from_msg(array, "map")
    assert [o.label for o in taken] == ["cabinet"]
    np.testing.assert_allclose(taken[0].obb_extent, [0.4, 0.2, 0.9])
    assert [(r.reason, r.label) for r in refused] == [("invalid", "drawer"),
                                                     ("wrong_frame", "mug")]
    assert "'odom'" in refused[1].text
    assert observations_from_msg(ObjectObservationArray(), "map") == ([], [])
