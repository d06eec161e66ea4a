"""The MemTransfer warehouse: layout, moves, sight, task stages, shortest routes and episodes."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from mimir.paths import config_file
from mimir_sim.warehouse.episode import Episode
from mimir_sim.warehouse.layout import (
    ACTIONS,
    Layout,
    Pose,
    WarehouseError,
    layout_from_mapping,
    load_layout,
    moved,
)
from mimir_sim.warehouse.planning import NoRouteError, replay, shortest
from mimir_sim.warehouse.tasks import Progress, Stage, Task, advance, goal_cells

SMALL = {
    "name": "small",
    "cell_m": 1.0,
    "grid": "#######\n#.....#\n#.RRR.#\n#.....#\n#######",
    "aisles": "#######\n#aaaaa#\n#bRRRc#\n#ddddd#\n#######",
    "kinds": {"red barrel": {"category": "barrels", "shape": "cylinder",
                             "rgba": [1, 0, 0, 1], "size": [0.3, 0.4]},
              "blue barrel": {"category": "barrels", "shape": "cylinder",
                              "rgba": [0, 0, 1, 1], "size": [0.3, 0.4]},
              "tire": {"category": "wheels", "shape": "cylinder",
                       "rgba": [0, 0, 0, 1], "size": [0.3, 0.1]}},
    "stock": [{"from": [2, 2], "face": "N", "toward": "E", "kinds": ["red barrel", "", "tire"]},
              {"from": [2, 2], "face": "S", "toward": "E",
               "kinds": ["blue barrel", "red barrel"]}],
}


@pytest.fixture(scope="module")
def small() -> Layout:
    return layout_from_mapping(SMALL)


def test_the_installed_warehouse(warehouse: Layout) -> None:
    assert (warehouse.width, warehouse.height) == (16, 30)
    assert len(warehouse.items) == 59
    for item in warehouse.items:
        assert warehouse.char(item.rack) == "R"
        assert warehouse.is_floor(item.front)
    kinds = {item.kind for item in warehouse.items}
    assert all(len(warehouse.of_kind(k)) >= 2 for k in kinds)
    # Items of a category stand in neighbouring bays of one face.
    for category in {item.category for item in warehouse.items}:
        members = warehouse.of_category(category)
        assert len({m.face for m in members}) == 1
        span = max(abs(a.rack[0] - b.rack[0]) + abs(a.rack[1] - b.rack[1])
                   for a in members for b in members)
        assert span <= 6


def test_items_are_named_in_stock_order(small: Layout) -> None:
    assert [i.id for i in small.items] == ["red_barrel_1", "tire_1", "blue_barrel_1",
                                           "red_barrel_2"]
    assert small.items_by_id["tire_1"].front == (4, 3)
    assert [i.id for i in small.items_at((2, 1))] == ["blue_barrel_1"]


def _broken(**change: Any) -> dict[str, Any]:
    data = copy.deepcopy(SMALL)
    data.update(change)
    return data


@pytest.mark.parametrize(("data", "words"), [
    ({k: v for k, v in SMALL.items() if k != "stock"}, "missing keys"),
    (_broken(extra=1), "unknown keys"),
    (_broken(grid="#######\n#....#\n#######"), "one length"),
    (_broken(grid="#######\n#.....#\n#.RRR..\n#.....#\n#######"), "fenced"),
    (_broken(grid="#######\n#.....#\n#.RXR.#\n#.....#\n#######"), "unknown grid character"),
    (_broken(aisles="#######\n#aaaaa#\n#bRRR.#\n#ddddd#\n#######"), "aisle letter"),
    (_broken(aisles="#####\n#aaa#\n#####"), "shape"),
    (_broken(cell_m=0), "cell_m"),
    (_broken(kinds={"x": {"category": "c", "shape": "cone", "rgba": [1, 0, 0, 1],
                          "size": [1]}}), "shape must be"),
    (_broken(kinds={"x": {"category": "c", "shape": "box", "rgba": [2, 0, 0, 1],
                          "size": [1, 1, 1]}}), "rgba"),
    (_broken(kinds={"x": {"category": "c", "shape": "box", "rgba": [1, 0, 0, 1],
                          "size": [1]}}), "sizes"),
    (_broken(stock=[{"from": [2, 2], "face": "N", "toward": "E", "kinds": ["cone"]}]),
     "unknown kind"),
    (_broken(stock=[{"from": [1, 1], "face": "N", "toward": "E", "kinds": ["tire"]}]),
     "not a rack face"),
    (_broken(stock=[{"from": [2, 2], "face": "W", "toward": "E", "kinds": ["tire", "tire"]}]),
     "not a rack face"),
    (_broken(stock=[{"from": [2, 2], "face": "N", "toward": "E", "kinds": ["tire"]},
                    {"from": [2, 2], "face": "N", "toward": "E", "kinds": ["tire"]}]),
     "stocked twice"),
    (_broken(stock=[{"from": [2, 2], "face": "Q", "toward": "E", "kinds": ["tire"]}]),
     "face"),
    (_broken(stock=[]), "no item"),
])
def test_bad_layouts_are_refused_with_the_reason(data: dict[str, Any], words: str) -> None:
    with pytest.raises(WarehouseError, match=words):
        layout_from_mapping(data)


def test_a_layout_file_that_is_not_yaml_is_a_warehouse_error(tmp_path: Path) -> None:
    bad = tmp_path / "w.yaml"
    bad.write_text("grid: [unclosed", encoding="utf-8")
    with pytest.raises(WarehouseError, match="not valid YAML"):
        load_layout(bad)
    with pytest.raises(WarehouseError, match="not found"):
        load_layout(tmp_path / "missing.yaml")


def test_the_installed_file_round_trips_through_the_loader() -> None:
    data = yaml.safe_load(config_file("memtransfer/warehouse.yaml").read_text(encoding="utf-8"))
    assert layout_from_mapping(data) == load_layout()


def test_moves_keep_the_heading_and_turns_keep_the_cell() -> None:
    pose = Pose(3, 3, 0)
    assert moved(pose, "forward") == Pose(3, 4, 0)
    assert moved(pose, "backward") == Pose(3, 2, 0)
    assert moved(pose, "left") == Pose(2, 3, 0)
    assert moved(pose, "right") == Pose(4, 3, 0)
    assert moved(Pose(3, 3, 1), "left") == Pose(3, 4, 1)
    assert moved(pose, "turn_left") == Pose(3, 3, 3)
    assert moved(pose, "turn_right") == Pose(3, 3, 1)
    assert moved(pose, "turn_around") == Pose(3, 3, 2)
    with pytest.raises(WarehouseError, match="unknown action"):
        moved(pose, "jump")


def test_a_move_into_a_rack_wall_or_closed_cell_stays_and_says_why(small: Layout) -> None:
    assert small.step(Pose(2, 1, 0), "forward").bumped == "rack"
    assert small.step(Pose(2, 1, 0), "backward").bumped == "wall"
    step = small.step(Pose(2, 1, 0), "right", frozenset({(3, 1)}))
    assert step.bumped == "obstacle" and step.pose == Pose(2, 1, 0)
    assert small.step(Pose(2, 1, 0), "right").pose == Pose(3, 1, 0)


def test_sight_needs_the_face_the_field_of_view_and_a_clear_line(warehouse: Layout) -> None:
    item = warehouse.items_by_id["red_barrel_1"]  # rack (3, 5) facing west, seen from (2, 5)
    assert item in warehouse.visible(Pose(2, 5, 1))
    assert item not in warehouse.visible(Pose(2, 5, 3))  # facing away
    assert item in warehouse.visible(Pose(1, 1, 0)) or item in warehouse.visible(Pose(2, 2, 0))
    assert item not in warehouse.visible(Pose(5, 5, 3))  # the rack's back is between
    assert item not in warehouse.visible(Pose(2, 2, 0), frozenset({(2, 4), (1, 4)}))


def test_pose_lists_are_checked() -> None:
    assert Pose.from_list([1, 2, 3]) == Pose(1, 2, 3)
    for bad in ([1, 2], [1, 2, 4], ["1", 2, 0], [1, 2, True], "1,2,0"):
        with pytest.raises(WarehouseError):
            Pose.from_list(bad)


def _ids(layout: Layout, kind: str) -> tuple[str, ...]:
    return tuple(i.id for i in layout.of_kind(kind))


def test_stages_move_on_in_order_only(small: Layout) -> None:
    reds, tires = _ids(small, "red barrel"), _ids(small, "tire")
    ordered = Task(6, "red then tire", (Stage("any", (reds,)), Stage("any", (tires,))))
    origin = (1, 1)
    progress = advance(ordered, small, Progress(), (4, 3), origin)  # the tire first
    assert progress.stage == 0
    progress = advance(ordered, small, progress, (2, 3), origin)  # red barrel 1
    assert progress.stage == 1 and progress.chosen == ("red_barrel_1",)
    progress = advance(ordered, small, progress, (4, 3), origin)
    assert progress.done(ordered)


def test_all_stages_count_each_group_and_return_needs_the_origin(small: Layout) -> None:
    reds = _ids(small, "red barrel")
    task = Task(8, "every red, home", (Stage("all", tuple((r,) for r in reds)),
                                       Stage("origin")))
    origin = (5, 2)
    progress = advance(task, small, Progress(), (2, 3), origin)
    assert (progress.stage, progress.mask) == (0, 1)
    assert goal_cells(task, small, progress, origin) == ((3, 1),)
    progress = advance(task, small, progress, (3, 1), origin)
    assert progress.stage == 1
    assert goal_cells(task, small, progress, origin) == (origin,)
    assert advance(task, small, progress, origin, origin).done(task)


def test_the_same_stage_needs_the_very_item(small: Layout) -> None:
    reds, tires = _ids(small, "red barrel"), _ids(small, "tire")
    task = Task(9, "a red, the tire, that red", (Stage("any", (reds,)), Stage("any", (tires,)),
                                                 Stage("same", same_as=0)))
    progress = advance(task, small, Progress(), (3, 1), (1, 1))  # red barrel 2
    progress = advance(task, small, progress, (4, 3), (1, 1))
    assert advance(task, small, progress, (2, 3), (1, 1)).stage == 2  # another red
    assert advance(task, small, progress, (3, 1), (1, 1)).done(task)


@pytest.mark.parametrize(("data", "words"), [
    ({"type": 11, "instruction": "x", "stages": [{"mode": "origin"}]}, "unknown task type"),
    ({"type": 1, "instruction": "x", "stages": []}, "at least one stage"),
    ({"type": 1, "instruction": "x", "stages": [{"mode": "some"}]}, "mode"),
    ({"type": 1, "instruction": "x", "stages": [{"mode": "any", "groups": [["nothing_1"]]}]},
     "unknown items"),
    ({"type": 1, "instruction": "x", "stages": [{"mode": "any", "groups": []}]}, "groups"),
    ({"type": 1, "instruction": "x", "stages": [{"mode": "any",
                                                 "groups": [["tire_1"], ["tire_1"]]}]},
     "one group"),
    ({"type": 9, "instruction": "x", "stages": [{"mode": "same", "same_as": 0}]}, "earlier"),
    ({"type": 1, "instruction": "x"}, "type, instruction and stages"),
])
def test_bad_tasks_are_refused(small: Layout, data: dict[str, Any], words: str) -> None:
    with pytest.raises(WarehouseError, match=words):
        Task.from_dict(data, small)


def test_shortest_routes_are_shortest_and_replay_to_success(small: Layout) -> None:
    tires = _ids(small, "tire")
    task = Task(1, "a tire", (Stage("any", (tires,)),))
    route = shortest(small, task, Pose(1, 1, 0))
    # (1,1) -> (1,2) -> (1,3) -> ... -> (4,3): five moves, no turn needed.
    assert len(route) == 5
    run = replay(small, task, Pose(1, 1, 0), route)
    assert run.success and run.finished_at == 5 and not run.bumps
    # Exhaustive: both red barrels, on two sides of the rack.
    reds = _ids(small, "red barrel")
    both = Task(3, "every red", (Stage("all", tuple((r,) for r in reds)),))
    # (3, 1) in two moves, then round the rack's west end to (2, 3) in five.
    assert len(shortest(small, both, Pose(1, 1, 0))) == 7


def test_a_closed_passage_lengthens_or_cuts_the_route(small: Layout) -> None:
    tires = _ids(small, "tire")
    task = Task(1, "a tire", (Stage("any", (tires,)),))
    assert len(shortest(small, task, Pose(1, 1, 0), blocked=frozenset({(1, 2)}))) == 7
    with pytest.raises(NoRouteError):
        shortest(small, task, Pose(1, 1, 0), blocked=frozenset({(1, 2), (5, 2)}))
    with pytest.raises(WarehouseError, match="not a free floor cell"):
        shortest(small, task, Pose(2, 2, 0))


def test_an_episode_reports_bumps_stages_and_its_end(small: Layout) -> None:
    reds, tires = _ids(small, "red barrel"), _ids(small, "tire")
    task = Task(6, "red then tire", (Stage("any", (reds,)), Stage("any", (tires,))))
    episode = Episode(small, task, Pose(1, 1, 0), max_steps=10)
    observation = episode.step("backward")
    assert "failed: a wall is in the way" in observation.feedback
    observation = episode.step("right")
    assert observation.pose == Pose(2, 1, 0)
    assert observation.in_front == ("blue barrel",)
    observation = episode.step("right")
    assert "stage 1 of 2 done" in observation.feedback and observation.stages_done == 1
    for action in ("right", "right", "forward", "forward", "left"):
        observation = episode.step(action)
    assert episode.done and episode.success and "task complete" in observation.feedback
    with pytest.raises(WarehouseError, match="over"):
        episode.step("forward")


def test_an_episode_ends_at_its_step_limit_and_refuses_bad_input(small: Layout) -> None:
    task = Task(1, "a tire", (Stage("any", (_ids(small, "tire"),)),))
    episode = Episode(small, task, Pose(1, 1, 0), max_steps=2)
    episode.step("turn_left")
    with pytest.raises(WarehouseError, match="unknown action"):
        episode.step("fly")
    episode.step("turn_left")
    assert episode.done and not episode.success
    with pytest.raises(WarehouseError):
        Episode(small, task, Pose(2, 2, 0))
    with pytest.raises(WarehouseError):
        Episode(small, task, Pose(1, 1, 0), blocked=frozenset({(1, 1)}))
    with pytest.raises(WarehouseError, match="max_steps"):
        Episode(small, task, Pose(1, 1, 0), max_steps=0)
    assert set(ACTIONS) == {"forward", "backward", "left", "right", "turn_left", "turn_right",
                            "turn_around"}


def test_an_episode_renders_only_when_asked(small: Layout) -> None:
    calls = []

    def render(pose: Pose, blocked: frozenset[tuple[int, int]]) -> Any:
        calls.append((pose, blocked))
        return "image"

    task = Task(1, "a tire", (Stage("any", (_ids(small, "tire"),)),))
    episode = Episode(small, task, Pose(1, 1, 0), render=render)
    observation = episode.step("forward")
    assert calls == []
    assert observation.image is not None and observation.image() == "image"
    assert calls == [(Pose(1, 2, 0), frozenset())]
