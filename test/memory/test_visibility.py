"""Negative evidence: which remembered nodes a camera view should have shown, and the misses
recorded for them in world memory (core)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from memory_helpers import obs

from mimir_memory.errors import ConfigError, InvalidValueError
from mimir_memory.events import EventKind
from mimir_memory.graph import PropertyValue, SceneNode
from mimir_memory.misses import MissRecorder
from mimir_memory.visibility import (
    CameraView,
    VisibilityConfig,
    expected_unseen,
    grid_edges,
    nearest_depth_grid,
)
from mimir_memory.world import WorldMemory

WIDTH, HEIGHT = 160, 120
ROWS, COLS = 12, 16  # cells of 10 x 10 pixels
FOCAL = 200.0
# Optical frame at (0, 0, 1) looking along map +x: x_opt = -y_map, y_opt = -z_map, z_opt = x_map.
CAMERA_TO_MAP = np.array([[0.0, 0.0, 1.0, 0.0],
                          [-1.0, 0.0, 0.0, 0.0],
                          [0.0, -1.0, 0.0, 1.0],
                          [0.0, 0.0, 0.0, 1.0]])
CFG = VisibilityConfig()


def view(depth: float | np.ndarray = 3.0, **changes: Any) -> CameraView:
    """The test camera over a wall at ``depth`` m (or the given grid)."""
    grid = np.full((ROWS, COLS), depth, np.float32) if np.isscalar(depth) else depth
    values: dict[str, Any] = {
        "camera_to_map": CAMERA_TO_MAP, "fx": FOCAL, "fy": FOCAL, "cx": 79.5, "cy": 59.5,
        "width": WIDTH, "height": HEIGHT, "max_range_m": 10.0, "depth_min_m": grid,
    }
    values.update(changes)
    return CameraView(**values)


def node(node_id: str, xyz: tuple[float, float, float], *, half: float = 0.08,
         label: str | None = None, parent: str | None = None, relation: str | None = None,
         observations: int = 1) -> SceneNode:
    lo = (xyz[0] - half, xyz[1] - half, xyz[2] - half)
    hi = (xyz[0] + half, xyz[1] + half, xyz[2] + half)
    return SceneNode(node_id=node_id, label=label or node_id.rsplit("_", 1)[0], centroid=xyz,
                     bbox_min=lo, bbox_max=hi, first_seen=1.0, last_seen=1.0,
                     observation_count=observations, parent=parent, parent_relation=relation)


MUG = node("mug_1", (2.0, 0.0, 1.0))  # projects onto the image centre, 16 px wide, 2 m deep


def ids(misses: list[Any]) -> list[str]:
    return [m.node_id for m in misses]


def test_a_node_in_view_with_nothing_in_front_is_missed() -> None:
    misses = expected_unseen([MUG], view(), seen_ids=set(), cfg=CFG)
    assert ids(misses) == ["mug_1"]
    node_id, reason = misses[0]  # a (node id, reason) pair
    assert node_id == "mug_1"
    assert "2.00 m" in reason and "not detected" in reason and "3.00 m" in reason


def test_seen_this_frame_is_not_missed() -> None:
    assert expected_unseen([MUG], view(), seen_ids={"mug_1"}, cfg=CFG) == []


@pytest.mark.parametrize("xyz", [
    (-2.0, 0.0, 1.0),   # behind the camera
    (2.0, 1.5, 1.0),    # left of the image
    (2.0, 0.0, -1.0),   # below the image
    (2.0, -0.7, 1.0),   # inside the image but its box reaches into the margin
    (6.0, 0.0, 1.0),    # beyond the configured range (4 m)
    (0.2, 0.0, 1.0),    # nearer than the configured minimum
])
def test_outside_the_view_is_not_missed(xyz: tuple[float, float, float]) -> None:
    assert expected_unseen([node("mug_1", xyz)], view(depth=8.0), set(), CFG) == []


def test_the_view_range_limits_too() -> None:
    assert expected_unseen([MUG], view(max_range_m=1.5), set(), CFG) == []
    wide = VisibilityConfig(max_range_m=8.0)
    assert ids(expected_unseen([node("mug_1", (6.0, 0.0, 1.0), half=0.3)], view(depth=8.0),
                               set(), wide)) == ["mug_1"]


def test_too_small_to_be_detected_is_not_missed() -> None:
    tiny = node("mug_1", (2.0, 0.0, 1.0), half=0.02)  # 4 px
    assert expected_unseen([tiny], view(), set(), CFG) == []
    assert ids(expected_unseen([tiny], view(), set(), VisibilityConfig(min_size_px=3.0))) == [
        "mug_1"]


def test_a_nearer_surface_hides_the_node_within_the_tolerance() -> None:
    grid = np.full((ROWS, COLS), 3.0, np.float32)
    grid[5:7, 7:9] = 1.0  # something 1 m away covers the image centre
    assert expected_unseen([MUG], view(grid), set(), CFG) == []
    grid[5:7, 7:9] = 1.95  # the surface it stood on: within the 0.1 m tolerance
    assert ids(expected_unseen([MUG], view(grid), set(), CFG)) == ["mug_1"]


def test_a_cell_without_depth_says_nothing() -> None:
    grid = np.full((ROWS, COLS), 3.0, np.float32)
    grid[5:7, 7:9] = np.nan
    assert expected_unseen([MUG], view(grid), set(), CFG) == []


def test_the_depth_grid_and_the_lookup_agree_on_cells() -> None:
    depth = np.full((HEIGHT, WIDTH), 3000, np.uint16)
    depth[60, 80] = 1000  # one near pixel in the cell of the mug's projection (80, 60)
    grid = nearest_depth_grid(depth, ROWS, COLS, scale=0.001)
    assert expected_unseen([MUG], view(grid), set(), CFG) == []
    depth[60, 80] = 3000
    depth[60, 79] = 1000  # the next cell to the left still lies under the mug's image box
    grid = nearest_depth_grid(depth, ROWS, COLS, scale=0.001)
    assert expected_unseen([MUG], view(grid), set(), CFG) == []
    depth[60, 79] = 3000
    depth[2, 2] = 1000  # a near pixel far from the mug's image box does not hide it
    grid = nearest_depth_grid(depth, ROWS, COLS, scale=0.001)
    assert ids(expected_unseen([MUG], view(grid), set(), CFG)) == ["mug_1"]


def test_memory_hides_what_is_in_a_container_or_in_the_hand() -> None:
    cabinet = node("cabinet_1", (3.0, 0.0, 1.0), half=0.5)
    plate = node("plate_1", (2.0, 0.2, 1.0), parent="cabinet_1", relation="container")
    in_cabinet = node("mug_1", (2.0, 0.0, 1.0), parent="cabinet_1", relation="container")
    on_plate = node("mug_2", (2.0, 0.1, 1.0), parent="plate_1", relation="surface")
    held = node("mug_3", (2.0, -0.1, 1.0), parent="hand", relation="hand")
    table = node("table_1", (2.5, 0.0, 0.5), half=0.5)
    on_table = node("mug_4", (2.0, 0.0, 1.1), parent="table_1", relation="surface")
    nodes = [cabinet, plate, in_cabinet, on_plate, held, table, on_table]
    # the fixtures are skipped, so is everything inside one; the mug on the table counts
    assert ids(expected_unseen(nodes, view(), set(), CFG)) == ["mug_4"]


def test_only_sought_labels_count() -> None:
    assert expected_unseen([MUG], view(labels_sought=("banana", "apple")), set(), CFG) == []
    assert ids(expected_unseen([MUG], view(labels_sought=("Mug",)), set(), CFG)) == ["mug_1"]


def test_skipped_labels_match_whole_labels_and_words() -> None:
    counter = node("kitchen_counter_1", (2.0, 0.0, 1.0), label="kitchen counter")
    cabinets = node("cabinets_1", (2.0, 0.0, 1.0), label="cabinets")
    assert expected_unseen([counter, cabinets], view(), set(), CFG) == []
    assert expected_unseen([MUG], view(), set(), CFG, skip_labels={"mug"}) == []
    only_mugs = VisibilityConfig(skip_labels=("mug",))
    assert ids(expected_unseen([counter, MUG], view(), set(), only_mugs)) == [
        "kitchen_counter_1"]


def test_never_observed_or_already_gone_is_not_missed() -> None:
    declared = node("mug_1", (2.0, 0.0, 1.0), observations=0)
    assert expected_unseen([declared], view(), set(), CFG) == []
    gone = node("mug_1", (2.0, 0.0, 1.0))
    gone.properties["at_last_place"] = PropertyValue(False, 0.9, "perception")
    assert expected_unseen([gone], view(), set(), CFG) == []
    gone.properties["at_last_place"] = PropertyValue(True, 0.9, "perception")
    assert ids(expected_unseen([gone], view(), set(), CFG)) == ["mug_1"]


def test_results_are_sorted_by_id() -> None:
    nodes = [node("mug_2", (2.0, 0.1, 1.0)), node("apple_1", (2.0, -0.1, 1.0)), MUG]
    assert ids(expected_unseen(nodes, view(), set(), CFG)) == ["apple_1", "mug_1", "mug_2"]


def _pose_with(row: int, col: int, value: float) -> np.ndarray:
    pose = CAMERA_TO_MAP.copy()
    pose[row, col] = value
    return pose


@pytest.mark.parametrize(("changes", "words"), [
    ({"camera_to_map": _pose_with(0, 3, math.nan)}, "finite"),
    ({"camera_to_map": _pose_with(0, 0, 2.0)}, "rigid"),
    ({"camera_to_map": np.eye(3)}, "4x4"),
    ({"fx": 0.0}, "fx"),
    ({"fy": math.inf}, "fy"),
    ({"cx": math.nan}, "cx"),
    ({"width": 0}, "width"),
    ({"max_range_m": 0.0}, "max_range_m"),
    ({"depth_min_m": np.full((ROWS + 200, COLS), 3.0)}, "rows"),
    ({"depth_min_m": np.full(ROWS * COLS, 3.0)}, "2D"),
    ({"depth_min_m": np.full((ROWS, COLS), -1.0)}, "depths"),
    ({"depth_min_m": np.full((ROWS, COLS), math.inf)}, "depths"),
    ({"labels_sought": ("mug", " ")}, "labels_sought"),
])
def test_bad_views_are_refused(changes: dict[str, Any], words: str) -> None:
    with pytest.raises(InvalidValueError, match=words):
        view(**changes)


def test_a_flat_grid_must_match_its_size() -> None:
    values = {"camera_to_map": CAMERA_TO_MAP, "fx": FOCAL, "fy": FOCAL, "cx": 79.5, "cy": 59.5,
              "width": WIDTH, "height": HEIGHT, "max_range_m": 10.0}
    flat = CameraView.from_flat(**values, depth_rows=2, depth_cols=3,
                                depth_min_m=[1, 2, 3, 4, 5, math.nan], labels_sought=["mug"])
    assert flat.grid_shape == (2, 3) and flat.depth_min_m[1, 1] == 5.0
    assert flat.labels_sought == ("mug",)
    assert not flat.depth_min_m.flags.writeable
    with pytest.raises(InvalidValueError, match="holds 5 values"):
        CameraView.from_flat(**values, depth_rows=2, depth_cols=3, depth_min_m=[1.0] * 5)
    with pytest.raises(InvalidValueError, match="depth_rows"):
        CameraView.from_flat(**values, depth_rows=0, depth_cols=3, depth_min_m=[])


@pytest.mark.parametrize("changes", [
    {"min_range_m": 5.0},
    {"margin_px": -1.0},
    {"max_range_m": 0.0},
    {"occlusion_tolerance_m": math.nan},
    {"skip_labels": ("mug", "")},
    {"skip_labels": "mug"},
])
def test_bad_settings_are_refused(changes: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        VisibilityConfig(**changes)


def _brute_force(depth_m: np.ndarray, rows: int, cols: int, low: float, high: float) -> np.ndarray:
    height, width = depth_m.shape
    r_edges = [*grid_edges(height, rows).tolist(), height]
    c_edges = [*grid_edges(width, cols).tolist(), width]
    out = np.full((rows, cols), np.nan, np.float32)
    for r in range(rows):
        for c in range(cols):
            cell = depth_m[r_edges[r]:r_edges[r + 1], c_edges[c]:c_edges[c + 1]]
            valid = cell[np.isfinite(cell) & (cell > 0) & (cell >= low) & (cell <= high)]
            if valid.size:
                out[r, c] = valid.min()
    return out


@pytest.mark.parametrize("shape", [(120, 160), (37, 53)])
def test_the_depth_grid_keeps_the_nearest_valid_depth_per_cell(shape: tuple[int, int]) -> None:
    rng = np.random.default_rng(3)
    millimetres = rng.integers(0, 12000, size=shape).astype(np.uint16)
    millimetres[: shape[0] // 3, : shape[1] // 3] = 0  # a patch without depth
    metres = millimetres.astype(np.float32) / 1000.0
    metres[millimetres == 0] = np.nan
    expected = _brute_force(metres, 5, 7, 0.5, 10.0)
    as_mm = nearest_depth_grid(millimetres, 5, 7, scale=0.001, min_depth=0.5, max_depth=10.0)
    as_m = nearest_depth_grid(metres, 5, 7, min_depth=0.5, max_depth=10.0)
    assert as_mm.dtype == np.float32 and as_mm.shape == (5, 7)
    np.testing.assert_allclose(as_mm, expected, rtol=1e-6)
    np.testing.assert_allclose(as_m, expected, rtol=1e-6)
    assert np.isnan(as_mm[0, 0]) and np.isnan(as_m[0, 0])


def test_a_depth_grid_the_image_cannot_hold_is_refused() -> None:
    with pytest.raises(InvalidValueError, match="rows"):
        nearest_depth_grid(np.ones((4, 4), np.float32), 5, 2)
    with pytest.raises(InvalidValueError, match="2D"):
        nearest_depth_grid(np.ones((4, 4, 3), np.float32), 2, 2)
    with pytest.raises(InvalidValueError, match="limits"):
        nearest_depth_grid(np.ones((4, 4), np.float32), 2, 2, min_depth=3.0, max_depth=1.0)


def test_the_recorder_throttles_per_node_marks_gone_and_refuses_bad_stamps(
        tmp_path: Path) -> None:
    """Misses of successive frames in a real world memory: one per node per min_period_s of
    frame time, the third in a row marks the node gone, a sighting starts the count afresh,
    and a miss memory refuses is reported, not raised."""
    world = WorldMemory.open(tmp_path / "world.db")
    (created,) = world.ingest([obs("mug", (2.0, 0.0, 1.0), 1.0, half=0.08)])
    mug = str(created.payload["node_id"])
    recorder = MissRecorder(world, CFG, min_period_s=1.0)
    first = recorder.record(view(), (), stamp=4.0, camera="pole")
    assert (first.recorded, first.throttled, first.stale) == (1, 0, 0)
    assert [e.kind for e in first.events] == [EventKind.OBSERVATION_MISSED]
    assert recorder.record(view(), (), stamp=4.5, camera="wrist").throttled == 1
    assert world.node(mug).misses == 1
    recorder.record(view(), (), stamp=5.0)
    third = recorder.record(view(), (), stamp=6.0)  # 5 s unseen (stale_after_s)
    assert third.stale == 1 and world.node(mug).properties["at_last_place"].value is False
    # gone from its place: no longer expected there, so nothing more is recorded
    assert recorder.record(view(), (), stamp=7.0).recorded == 0
    world.ingest([obs("mug", (2.0, 0.0, 1.0), 8.0, half=0.08)])
    again = recorder.record(view(), {mug}, stamp=8.0)
    assert again.recorded == 0 and world.node(mug).misses == 0
    bad = recorder.record(view(), (), stamp=math.nan)
    assert bad.recorded == 0 and [n for n, _ in bad.refused] == [mug]
    assert isinstance(bad.refused[0][1], InvalidValueError)
    with pytest.raises(ValueError, match="min_period_s"):
        MissRecorder(world, CFG, min_period_s=-1.0)
    world.close()
