"""The warehouse's egocentric view: real offscreen MuJoCo renders of the MemTransfer layout."""

from __future__ import annotations

import os
from collections.abc import Iterator

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np
import numpy.typing as npt
import pytest

from mimir_sim.errors import RenderError
from mimir_sim.warehouse.layout import Item, Layout, Pose, WarehouseError, load_layout
from mimir_sim.warehouse.render import OBSTACLES, WarehouseRenderer, vertical_fov_deg

SIZE = 128
CORRIDOR = Pose(2, 4, 0)  # the south bank's west corridor, looking north along it


@pytest.fixture(scope="module")
def layout() -> Layout:
    return load_layout()


@pytest.fixture(scope="module")
def renderer(layout: Layout) -> Iterator[WarehouseRenderer]:
    with WarehouseRenderer(layout, SIZE, SIZE) as view:
        yield view


def facing(item: Item) -> Pose:
    """The pose on the item's front cell that looks at it."""
    return Pose(item.front[0], item.front[1], (item.face + 2) % 4)


def centre(image: npt.NDArray[np.uint8], fraction: float = 0.2) -> npt.NDArray[np.float64]:
    """The pixels of the central ``fraction`` of the image (each side), as rows of RGB."""
    h, w = image.shape[:2]
    top, left = round(h * (1 - fraction) / 2), round(w * (1 - fraction) / 2)
    patch = image[top:h - top, left:w - left]
    return np.asarray(patch.reshape(-1, 3), dtype=np.float64)


def difference(a: npt.NDArray[np.uint8], b: npt.NDArray[np.uint8]) -> float:
    """Mean absolute difference of two images (0..255)."""
    return float(np.abs(a.astype(np.int16) - b.astype(np.int16)).mean())


def test_render_is_an_rgb_image(renderer: WarehouseRenderer) -> None:
    image = renderer.render(CORRIDOR)
    assert image.shape == (SIZE, SIZE, 3)
    assert image.dtype == np.uint8
    assert image.std() > 10  # not a blank frame


def test_view_changes_with_heading(renderer: WarehouseRenderer) -> None:
    views = [renderer.render(Pose(5, 14, h)) for h in range(4)]
    for i in range(4):
        for j in range(i + 1, 4):
            assert difference(views[i], views[j]) > 5, (i, j)
    # the same pose renders the same image
    assert np.array_equal(renderer.render(Pose(5, 14, 0)), views[0])


@pytest.mark.parametrize("kind", ["red barrel", "blue barrel", "green crate", "yellow crate",
                                  "cardboard box"])
def test_facing_an_item_shows_its_colour(renderer: WarehouseRenderer, layout: Layout,
                                         kind: str) -> None:
    item = next(i for i in layout.items if i.kind == kind)
    pixels = centre(renderer.render(facing(item)))
    want = np.array(layout.kinds[kind].rgba[:3]) * 255.0
    # lit, not flat: allow for shading
    assert np.abs(pixels.mean(axis=0) - want).max() < 45, (pixels.mean(axis=0), want)
    near = np.linalg.norm(pixels - want, axis=1) < 60
    assert near.mean() > 0.8


def test_a_closed_cell_ahead_blocks_the_view(renderer: WarehouseRenderer) -> None:
    open_view = renderer.render(CORRIDOR)
    closed_view = renderer.render(CORRIDOR, frozenset({(2, 5)}))
    assert difference(open_view, closed_view) > 20
    # the barrier's yellow and black bands fill the centre
    pixels = centre(closed_view)
    yellow = np.linalg.norm(pixels - [242, 204, 13], axis=1) < 80
    black = pixels.max(axis=1) < 50
    assert (yellow | black).mean() > 0.9
    # a cell closed behind the camera changes nothing; opening the cell again parks the barrier
    assert np.array_equal(renderer.render(CORRIDOR, frozenset({(2, 3)})), open_view)
    assert np.array_equal(renderer.render(CORRIDOR), open_view)


def test_horizontal_field_of_view(layout: Layout) -> None:
    # a 2:1 image with 90 degrees across: its middle half is a square image whose field of view
    # is the wide image's vertical one
    narrow = vertical_fov_deg(90.0, 2 * 48, 48)
    assert narrow == pytest.approx(2 * np.degrees(np.arctan(0.5)))
    with (WarehouseRenderer(layout, 2 * 48, 48) as wide,
          WarehouseRenderer(layout, 48, 48, fov_deg=narrow) as square):
        for pose in (CORRIDOR, Pose(5, 14, 1)):
            image = wide.render(pose)
            assert image.shape == (48, 96, 3)
            assert difference(image[:, 24:72], square.render(pose)) < 1.0


def test_bad_poses_and_closed_cells(renderer: WarehouseRenderer, layout: Layout) -> None:
    rack = layout.items[0].rack
    with pytest.raises(WarehouseError, match="not on a floor cell"):
        renderer.render(Pose(rack[0], rack[1], 0))
    with pytest.raises(WarehouseError, match="not on a floor cell"):
        renderer.render(Pose(0, 0, 0))  # a wall
    with pytest.raises(WarehouseError, match="closed cell"):
        renderer.render(CORRIDOR, frozenset({CORRIDOR.cell}))
    many = frozenset(layout.floor_cells[-(OBSTACLES + 1):])
    assert CORRIDOR.cell not in many
    with pytest.raises(WarehouseError, match="at most"):
        renderer.render(CORRIDOR, many)
    with pytest.raises(WarehouseError, match="not a floor cell"):
        renderer.render(CORRIDOR, frozenset({rack}))
    with pytest.raises(WarehouseError, match="heading"):
        renderer.render(Pose(2, 4, 4))
    # the renderer is still usable after refusing
    assert renderer.render(CORRIDOR, frozenset(layout.floor_cells[-OBSTACLES:])).shape == (
        SIZE, SIZE, 3)


@pytest.mark.parametrize("settings", [{"width": 0}, {"height": -1}, {"width": 12.5},
                                      {"fov_deg": 0.0}, {"fov_deg": 180.0}, {"fov_deg": -30.0},
                                      {"fov_deg": 200.0}, {"camera_height_m": 0.0}])
def test_bad_settings(layout: Layout, settings: dict[str, float]) -> None:
    with pytest.raises(WarehouseError):
        WarehouseRenderer(layout, **settings)  # type: ignore[arg-type]


def test_closed_renderer_refuses(layout: Layout) -> None:
    view = WarehouseRenderer(layout, 32, 32)
    view.close()
    view.close()  # closing twice is harmless
    with pytest.raises(RenderError, match="closed"):
        view.render(CORRIDOR)
