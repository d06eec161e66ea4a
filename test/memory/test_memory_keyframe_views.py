"""Keyframe camera views: where the camera stood and its intrinsics, stored with the frame,
projected back, migrated into older stores, and refused when malformed."""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from memory_helpers import as_older_keyframe_schema, textured

from mimir_memory.errors import InvalidValueError, SchemaVersionError
from mimir_memory.keyframes import CameraView, KeyframeStore, Trigger, files_on_disk
from mimir_memory.schema import SCHEMA_VERSION

#: a camera 1 m above the map origin looking along +x (optical z forward, x right, y down).
LOOKING_ALONG_X: dict[str, Any] = {
    "position": [0.0, 0.0, 1.0], "orientation": [-0.5, 0.5, -0.5, 0.5],
    "fx": 500.0, "fy": 500.0, "cx": 320.0, "cy": 240.0}


def test_a_view_is_stored_read_back_and_projects_points(tmp_path: Path) -> None:
    with KeyframeStore.open(tmp_path / "kf") as store:
        saved = store.save(textured(1), timestamp=3.0, camera="wrist",
                           trigger=Trigger.INTERACTION_POST, node_ids=["cabinet_1"],
                           camera_view=LOOKING_ALONG_X)
        assert saved.frame_id
        view = store.get(saved.frame_id).camera_view
        assert view is not None and view.fx == 500.0 and view.position == (0.0, 0.0, 1.0)
        # straight ahead lands on the principal point; left of the camera (+y) is left in the
        # image, up (+z) is up
        uv, depth = view.project([[2.0, 0.0, 1.0], [2.0, 0.5, 1.0], [2.0, 0.0, 1.5],
                                  [-1.0, 0.0, 1.0]])
        assert np.allclose(uv[0], [320.0, 240.0]) and math.isclose(depth[0], 2.0)
        assert uv[1][0] < 320.0 and uv[2][1] < 240.0
        assert depth[3] < 0.0  # behind the camera
        assert np.allclose(view.camera_to_map()[:3, 2], [1.0, 0.0, 0.0])  # optical axis
        other = store.save(textured(2), timestamp=4.0, camera="wrist",
                           trigger=Trigger.INTERACTION_POST)
        assert other.frame_id and store.get(other.frame_id).camera_view is None
        assert store.index_from_log() == store.index_from_tables()


def test_a_quaternion_that_is_not_unit_is_normalised() -> None:
    view = CameraView.parse({**LOOKING_ALONG_X, "orientation": [-1.0, 1.0, -1.0, 1.0]})
    assert np.allclose(view.orientation, LOOKING_ALONG_X["orientation"])
    assert CameraView.parse(view.to_dict()) == view


@pytest.mark.parametrize("bad", [
    {"position": [0.0, 0.0], "orientation": [0, 0, 0, 1], "fx": 1.0, "fy": 1.0, "cx": 0.0,
     "cy": 0.0},
    {**LOOKING_ALONG_X, "position": [0.0, math.nan, 1.0]},
    {**LOOKING_ALONG_X, "orientation": [0.0, 0.0, 0.0, 0.0]},
    {**LOOKING_ALONG_X, "orientation": [0.0, 0.0, 1.0]},
    {**LOOKING_ALONG_X, "orientation": "identity"},
    {**LOOKING_ALONG_X, "fx": -500.0},
    {**LOOKING_ALONG_X, "fy": True},
    {**LOOKING_ALONG_X, "cx": math.inf},
    {**LOOKING_ALONG_X, "cy": "240"},
    {**LOOKING_ALONG_X, "skew": 0.0},
    {k: v for k, v in LOOKING_ALONG_X.items() if k != "fx"},
    [0.0, 0.0, 1.0],
])
def test_a_malformed_view_is_refused_and_nothing_is_stored(tmp_path: Path, bad: Any) -> None:
    with KeyframeStore.open(tmp_path / "kf") as store:
        with pytest.raises(InvalidValueError, match="camera_view"):
            store.save(textured(3), timestamp=1.0, camera="wrist",
                       trigger=Trigger.INTERACTION_PRE, camera_view=bad)
        assert store.count() == 0 and not files_on_disk(store)
        assert store.index_from_log() == {}


def test_a_store_of_the_previous_schema_is_migrated_by_its_writer(tmp_path: Path) -> None:
    root = tmp_path / "kf"
    with KeyframeStore.open(root) as store:
        old = str(store.save(textured(4), timestamp=1.0, camera="pole",
                             trigger=Trigger.INTERACTION_PRE).frame_id)
    as_older_keyframe_schema(root, 2, "camera_view", "mask_file")
    with pytest.raises(SchemaVersionError, match="writer"):
        KeyframeStore.open(root, readonly=True)
    with KeyframeStore.open(root) as store:
        assert store.get(old).camera_view is None
        new = str(store.save(textured(5), timestamp=2.0, camera="pole",
                             trigger=Trigger.INTERACTION_POST,
                             camera_view=LOOKING_ALONG_X).frame_id)
        assert store.get(new).camera_view == CameraView.parse(LOOKING_ALONG_X)
        assert store.index_from_log() == store.index_from_tables()
    with sqlite3.connect(root / "keyframes.db") as conn:
        version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    assert int(version[0]) == SCHEMA_VERSION


def test_a_box_projects_to_twelve_edges_and_is_cut_at_the_camera() -> None:
    view = CameraView.parse(LOOKING_ALONG_X)
    ahead = view.box_edges([1.8, -0.2, 0.8], [2.2, 0.2, 1.2])
    assert len(ahead) == 12
    us = [u for seg in ahead for u, _ in seg]
    vs = [v for seg in ahead for _, v in seg]
    # symmetric about the optical axis: the box straddles the principal point
    assert min(us) < 320.0 < max(us) and min(vs) < 240.0 < max(vs)
    assert math.isclose(min(us) + max(us), 640.0) and math.isclose(min(vs) + max(vs), 480.0)
    # a box the camera stands inside keeps only what lies in front, cut at the near plane
    around = view.box_edges([-1.0, -1.0, 0.0], [1.0, 1.0, 2.0])
    assert 0 < len(around) < 12
    assert all(np.isfinite(seg).all() for seg in around)
    assert view.box_edges([-3.0, -1.0, 0.0], [-2.0, 1.0, 2.0]) == []  # behind the camera
    frustum = view.frustum(640, 480, 0.1)
    assert np.allclose(frustum[0], [0.0, 0.0, 1.0])
    assert np.allclose(frustum[1:, 0], 0.1)  # the image corners 0.1 m ahead
    assert frustum[1, 1] > 0.0 and frustum[1, 2] > 1.0  # top left: left (+y) and up (+z)
