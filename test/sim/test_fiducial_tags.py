"""Fiducial tags of the simulated kitchen: layout, textures as rendered, map file, localisation.

Simulator truth (the base's true pose, the camera's true pose) is read here only as the judge of
what the fiducial localiser estimates from rendered frames.
"""

from __future__ import annotations

import math
import os

os.environ.setdefault("MUJOCO_GL", "egl")

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml

from mimir.paths import config_dir
from mimir.sim_graph import SIM_GRAPH, graph_parameters
from mimir_perception.camera import Intrinsics
from mimir_perception.fiducials import FiducialLocalizer, LocalizationConfig, load_fiducial_map
from mimir_sim.errors import FiducialLayoutError
from mimir_sim.fiducial_tags import (
    SITE_MAP_FILE,
    SITE_MAP_HEADER,
    TagSite,
    check_map_covers,
    plan_tags,
    site_layout,
)
from mimir_sim.layouts import generate_layout
from mimir_sim.rendering import Frame
from mimir_sim.robot_signals import base_pose_matrix, camera_in_base
from mimir_sim.scenario import FixtureSpec, KitchenSpec, available_scenarios, load_scenario
from mimir_sim.scene_layout import start_pose_for
from mimir_sim.sim import KitchenSim

SIZE = (320, 240)  # the bridge's image size (config/mimir_sim.yaml)
TOLERANCE = 0.03  # m, base position error allowed against simulator truth
YAW_TOLERANCE = math.radians(1.5)


def intrinsics(frame: Frame) -> Intrinsics:
    i = frame.info
    return Intrinsics(i.fx, i.fy, i.cx, i.cy, i.width, i.height)


def pole_frame(sim: KitchenSim) -> Frame:
    return sim.render("pole", *SIZE, depth=False, segmentation=False)


def start_poses(sim: KitchenSim) -> list[str]:
    """Every fixture a run of the scenario starts an instruction at."""
    scenario = sim.scene.scenario
    starts = [scenario.start_at, *(i.start_at for i in scenario.instructions)]
    return sorted({s for s in starts if s is not None})


@pytest.fixture(scope="module")
def sims(tidybot_dir: Path) -> Iterator[dict[str, KitchenSim]]:
    built = {name: KitchenSim.from_scenario(load_scenario(name), tidybot_dir)
             for name in available_scenarios()}
    try:
        yield built
    finally:
        for sim in built.values():
            sim.shutdown()


# ------------------------------------------------------------------------- layout and map file


def test_the_shipped_map_is_the_generated_site_map() -> None:
    path = config_dir() / SITE_MAP_FILE
    layout = site_layout()
    assert path.read_text(encoding="utf-8") == layout.map_text(SITE_MAP_HEADER), (
        "regenerate with: site_layout().write_map(config_dir() / SITE_MAP_FILE, SITE_MAP_HEADER)")
    shipped = load_fiducial_map(path)
    assert sorted(shipped.tags) == sorted(layout.ids)
    check_map_covers(layout, shipped)


def test_every_scenario_kitchen_hangs_tags_of_the_shipped_map() -> None:
    shipped = load_fiducial_map(config_dir() / SITE_MAP_FILE)
    for name in available_scenarios():
        scenario = load_scenario(name)
        layout = plan_tags(scenario.kitchen, scenario.fixtures)
        check_map_covers(layout, shipped)
        # tags sit on the back wall, clear of every upper cabinet, or on a counter's front
        kitchen, half = scenario.kitchen, layout.site.outer_size / 2
        fixtures = {f.id: f for f in scenario.fixtures}
        for tag in layout.tags:
            x, y, z = tag.position
            if tag.mount == "wall":
                assert x == pytest.approx(kitchen.wall_x - layout.site.thickness)
                assert z > kitchen.counter_height
                for f in scenario.fixtures:
                    if f.type == "upper_cabinet":
                        assert abs(y - f.y) >= f.width / 2 + half
            else:
                counter = fixtures[tag.mount]
                assert counter.type == "counter"
                assert x == pytest.approx(
                    kitchen.wall_x - kitchen.counter_depth - layout.site.thickness)
                assert z + half < kitchen.counter_height
                assert abs(y - counter.y) + half <= counter.width / 2
        assert any(t.mount != "wall" for t in layout.tags), name


def test_the_map_file_round_trips_through_the_loader(tmp_path: Path) -> None:
    scenario = load_scenario("locked_unlocked")
    layout = plan_tags(scenario.kitchen, scenario.fixtures)
    path = layout.write_map(tmp_path / "maps" / "kitchen.yaml", "a test map\nsecond line")
    assert path.read_text(encoding="utf-8").startswith("# a test map\n# second line\n")
    loaded = load_fiducial_map(path)
    assert loaded.dictionary == "DICT_APRILTAG_36h11" and loaded.frame_id == "map"
    assert sorted(loaded.tags) == sorted(layout.ids)
    for tag in layout.tags:
        np.testing.assert_allclose(loaded.tags[tag.tag_id].map_from_tag, tag.map_from_tag,
                                   atol=1e-6)
        assert loaded.tags[tag.tag_id].size == tag.size
    # the tag frame: x right and y up for a viewer facing the wall (looking along +x), z out
    rot = layout.tags[0].map_from_tag[:3, :3]
    np.testing.assert_allclose(rot[:, 0], [0, -1, 0], atol=1e-9)
    np.testing.assert_allclose(rot[:, 1], [0, 0, 1], atol=1e-9)
    np.testing.assert_allclose(rot[:, 2], [-1, 0, 0], atol=1e-9)


def test_a_kitchen_without_room_for_the_tags_is_refused() -> None:
    with pytest.raises(FiducialLayoutError, match="room for 0 tag"):
        plan_tags(KitchenSpec(room_y=(-0.1, 0.1)))
    covered = [FixtureSpec("cab_1", "upper_cabinet", 0.0, 1.6, "cabinet")]
    with pytest.raises(FiducialLayoutError, match="fewer than the 2 needed"):
        plan_tags(KitchenSpec(room_y=(-0.9, 0.9)), covered)
    with pytest.raises(FiducialLayoutError, match="above"):
        plan_tags(KitchenSpec(counter_height=2.3))
    with pytest.raises(FiducialLayoutError, match="pitch"):
        TagSite(pitch=0.1)
    with pytest.raises(FiducialLayoutError, match="below the 587 markers"):
        TagSite(first_id=580)
    with pytest.raises(FiducialLayoutError, match="below the 587 markers"):
        TagSite(front_first_id=560)
    with pytest.raises(FiducialLayoutError, match="overlap"):
        TagSite(front_first_id=150)


def test_a_moved_tag_is_caught_against_the_map() -> None:
    layout = site_layout()
    moved = replace(layout, tags=(replace(layout.tags[0], size=0.1), *layout.tags[1:]))
    with pytest.raises(FiducialLayoutError, match="tag 100"):
        check_map_covers(moved, layout.fiducial_map())
    with pytest.raises(FiducialLayoutError, match="not in the map"):
        check_map_covers(site_layout(site=TagSite(first_id=300)), layout.fiducial_map())


# ------------------------------------------------------------------------- rendered tags


@pytest.mark.parametrize("name", ["moved_object", "long_horizon"])
def test_every_tag_is_detected_where_the_map_puts_it(sims: dict[str, KitchenSim],
                                                      name: str) -> None:
    """From 1 m in front of each slot the pole camera finds both its tags, corners in order."""
    sim = sims[name]
    layout = sim.scene.fiducials
    assert layout is not None
    tag_map = layout.fiducial_map()
    seen: set[int] = set()
    for y in sorted({t.position[1] for t in layout.tags}):
        sim.reset((sim.scene.scenario.kitchen.wall_x - 1.05, y, 0.0))
        frame = pole_frame(sim)
        assert frame.color is not None
        localizer = FiducialLocalizer(tag_map, camera_in_base(sim, "pole"))
        detections = {d.tag_id: d for d in localizer.detect(frame.color)}
        here = [t for t in layout.tags if t.position[1] == y]
        camera_from_map = np.linalg.inv(frame.pose)
        k = intrinsics(frame).matrix
        for tag in here:
            assert tag.tag_id in detections, (name, y, sorted(detections))
            half = tag.size / 2
            corners = np.array([[-half, half, 0, 1], [half, half, 0, 1], [half, -half, 0, 1],
                                [-half, -half, 0, 1]])  # detector order, tag frame
            cam = (camera_from_map @ tag.map_from_tag @ corners.T)[:3]
            expected = (k @ cam)[:2] / cam[2]
            # the texture lies upright on the face: every corner where the map says, in order
            np.testing.assert_allclose(detections[tag.tag_id].corners, expected.T, atol=1.5)
            seen.add(tag.tag_id)
    assert seen == set(layout.ids)


def test_every_start_pose_sees_a_tag_and_localises(sims: dict[str, KitchenSim]) -> None:
    errors: list[str] = []
    for name, sim in sims.items():
        assert sim.scene.fiducials is not None
        tag_map = sim.scene.fiducials.fiducial_map()
        for start in start_poses(sim):
            sim.reset(start)
            frame = pole_frame(sim)
            assert frame.color is not None
            localizer = FiducialLocalizer(tag_map, camera_in_base(sim, "pole"))
            result = localizer.localize(frame.color, intrinsics(frame), frame.stamp)
            assert result is not None and not result.held, f"{name} at {start}: no tag in view"
            truth = base_pose_matrix(sim)  # the judge
            error = float(np.linalg.norm(result.map_from_base[:2, 3] - truth[:2, 3]))
            yaw_error = abs(result.yaw - math.atan2(truth[1, 0], truth[0, 0]))
            errors.append(f"{name}@{start}: {100 * error:.1f} cm {math.degrees(yaw_error):.2f} deg "
                          f"tags {result.used_tags}")
            assert error < TOLERANCE and yaw_error < YAW_TOLERANCE, errors[-1]
    print("\n".join(errors))


def _search_turns() -> list[float]:
    """The headings the executor's start-up tag search tries in simulation (rad)."""
    data = yaml.safe_load((config_dir() / "mimir_sim.yaml").read_text(encoding="utf-8"))
    executor = data["/**/executor"]["ros__parameters"]
    assert executor["search_tags_on_start"] is True
    return [float(t) for t in executor["tag_search_turns"]]


def _drawn_starts(sim: KitchenSim, seeds: range) -> dict[tuple[float, float, float], str]:
    """Start poses the generated layouts of ``seeds`` put the robot at (-> a layout's start
    fixture). A layout's fixtures only trade places and roles, so the scenario's own kitchen has
    the same geometry at every one of these poses."""
    own = sim.scene.scenario
    shapes = sorted((f.type, f.y, f.width) for f in own.fixtures)
    starts: dict[tuple[float, float, float], str] = {}
    for seed in seeds:
        layout = generate_layout(own, seed)
        assert sorted((f.type, f.y, f.width) for f in layout.fixtures) == shapes
        fixture = next(f for f in layout.fixtures if f.id == layout.start_at)
        place = next(f.id for f in own.fixtures if f.y == fixture.y and f.type == fixture.type)
        starts.setdefault(start_pose_for(sim.scene.fixtures[place]), f"{seed}:{fixture.id}")
    return starts


def test_every_drawn_start_localises_at_once_or_on_the_tag_search(
        sims: dict[str, KitchenSim]) -> None:
    """Wherever a generated layout starts the robot (the evaluation's seeds), the pole camera
    sees a tag from the start heading or from a heading of the executor's start-up search; the
    Long Horizon's row of upper cabinets leaves a tag beside every one, so it needs no turn."""
    turns = [0.0, *_search_turns()]
    rows: list[str] = []
    for name, sim in sims.items():
        assert sim.scene.fiducials is not None
        tag_map = sim.scene.fiducials.fiducial_map()
        for (x, y, yaw), drawn in sorted(_drawn_starts(sim, range(1000, 1020)).items()):
            first = None
            for turn in turns:
                sim.reset((x, y, yaw + turn))
                frame = pole_frame(sim)
                assert frame.color is not None
                localizer = FiducialLocalizer(tag_map, camera_in_base(sim, "pole"))
                if localizer.localize(frame.color, intrinsics(frame), frame.stamp) is not None:
                    first = turn
                    break
            rows.append(f"{name} at ({x:.2f}, {y:.2f}) [{drawn}]: "
                        + ("no tag from any heading" if first is None else f"turn {first:+.1f}"))
            assert first is not None, rows[-1]
            if name == "long_horizon":
                assert first == 0.0, rows[-1]
    print("\n".join(rows))


@pytest.mark.parametrize("pose", [(0.1, -1.0, 0.0), (0.1, -0.4, 0.0), (0.3, 0.2, 0.0),
                                  (-0.2, 0.0, 0.2), (0.1, 0.6, -0.25)])
def test_poses_along_the_wall_localise(sims: dict[str, KitchenSim],
                                       pose: tuple[float, float, float]) -> None:
    sim = sims["moved_object"]
    assert sim.scene.fiducials is not None
    sim.reset(pose)
    frame = pole_frame(sim)
    assert frame.color is not None
    localizer = FiducialLocalizer(sim.scene.fiducials.fiducial_map(), camera_in_base(sim, "pole"))
    result = localizer.localize(frame.color, intrinsics(frame), frame.stamp)
    assert result is not None and len(result.used_tags) >= 2
    truth = base_pose_matrix(sim)
    error = float(np.linalg.norm(result.map_from_base[:2, 3] - truth[:2, 3]))
    yaw_error = abs(result.yaw - math.atan2(truth[1, 0], truth[0, 0]))
    assert error < TOLERANCE and yaw_error < YAW_TOLERANCE, (pose, error, yaw_error)


# Poses where the 6-DoF solve (PnP, then flattened) was 2-4 cm off with default settings: few
# tags, nearly coplanar, let the camera's height and tilt absorb corner noise. A fixture name
# stands for the pose facing it; a tuple is (x, y, yaw) in the moved_object kitchen.
HARD_POSES: list[tuple[str, str | tuple[float, float, float]]] = [
    ("clutter_aware_pick", "counter_1"),
    ("long_horizon", "cab_10"),
    ("long_horizon", "cab_1"),
    ("clutter_aware_pick", "cab_1"),
    ("moved_object", "counter_2"),
    ("moved_object", (-0.2, 0.0, 0.2)),
    ("moved_object", (0.1, -0.4, 0.0)),
    ("moved_object", (0.1, 0.6, -0.25)),
]


def test_the_planar_solve_holds_where_the_full_solve_drifted(
        sims: dict[str, KitchenSim]) -> None:
    """Planar (x, y, yaw) solve within 3 cm and 1.5 degrees at every hard pose; prints both."""
    rows = [f"{'pose':34s} {'planar cm':>9s} {'deg':>5s} {'full cm':>8s} {'deg':>5s}  tags"]
    failures: list[str] = []
    for name, where in HARD_POSES:
        sim = sims[name]
        assert sim.scene.fiducials is not None
        sim.reset(start_pose_for(sim.scene.fixtures[where]) if isinstance(where, str) else where)
        frame = pole_frame(sim)
        assert frame.color is not None
        truth = base_pose_matrix(sim)  # the judge
        figures: dict[str, tuple[float, float]] = {}
        used: tuple[int, ...] = ()
        for solver in ("planar", "full"):
            localizer = FiducialLocalizer(sim.scene.fiducials.fiducial_map(),
                                          camera_in_base(sim, "pole"),
                                          LocalizationConfig(solver=solver))
            result = localizer.localize(frame.color, intrinsics(frame), frame.stamp)
            assert result is not None and not result.held, f"{name}@{where} {solver}: no estimate"
            error = float(np.linalg.norm(result.map_from_base[:2, 3] - truth[:2, 3]))
            yaw_error = abs(math.remainder(
                result.yaw - math.atan2(truth[1, 0], truth[0, 0]), math.tau))
            figures[solver] = (error, yaw_error)
            used = result.used_tags if solver == "planar" else used
        (p_err, p_yaw), (f_err, f_yaw) = figures["planar"], figures["full"]
        rows.append(f"{f'{name}@{where}':34s} {100 * p_err:9.1f} {math.degrees(p_yaw):5.2f} "
                    f"{100 * f_err:8.1f} {math.degrees(f_yaw):5.2f}  {used}")
        if not (p_err < TOLERANCE and p_yaw < YAW_TOLERANCE):
            failures.append(rows[-1])
    print("\n" + "\n".join(rows))
    assert not failures, failures


def test_a_frame_without_a_tag_gives_no_estimate(sims: dict[str, KitchenSim]) -> None:
    sim = sims["long_horizon"]
    assert sim.scene.fiducials is not None
    # facing away from the wall: the room's open side, no tag in view
    sim.reset((0.0, 0.0, math.pi))
    frame = pole_frame(sim)
    assert frame.color is not None
    localizer = FiducialLocalizer(sim.scene.fiducials.fiducial_map(), camera_in_base(sim, "pole"))
    assert localizer.detect(frame.color) == []
    assert localizer.localize(frame.color, intrinsics(frame), frame.stamp) is None
    blank = np.full_like(frame.color, 200)
    assert localizer.localize(blank, intrinsics(frame), frame.stamp) is None


# ------------------------------------------------------------------------- the simulation graph


def test_the_sim_graph_localises_from_the_tags() -> None:
    import yaml

    names = [n.name for n in SIM_GRAPH]
    assert "localization" in names and names.index("localization") > names.index("sim_bridge")
    node = SIM_GRAPH[names.index("localization")]
    assert node.executable == "localization_node" and node.follows_clock
    assert graph_parameters(node, memory_dir="/m") == {"use_sim_time": True}
    params = yaml.safe_load((config_dir() / "mimir_sim.yaml").read_text(encoding="utf-8"))
    section = params["/**/localization"]["ros__parameters"]
    assert section["camera"] == "pole" and section["publish"] == "map_to_odom"
    assert section["fiducial_map"] == SITE_MAP_FILE
    assert "pole" in params["/**/sim_bridge"]["ros__parameters"]["cameras"]
