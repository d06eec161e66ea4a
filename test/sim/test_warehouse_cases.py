"""MemTransfer cases: the installed 100 keep every rule and replay; the generator is repeatable
and names the rule a case breaks."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from pathlib import Path

import pytest

from mimir_sim.warehouse.cases import (
    DEMOS,
    Case,
    CaseRuleError,
    CaseRules,
    Trajectory,
    cross_section,
    generate,
    read_cases,
    violations,
    write_cases,
)
from mimir_sim.warehouse.layout import Layout, Pose, WarehouseError
from mimir_sim.warehouse.planning import replay, shortest


@pytest.fixture(scope="module")
def cases(memtransfer_cases: list[Case]) -> list[Case]:
    return memtransfer_cases


def test_the_installed_cases_are_ten_of_each_type(cases: list[Case]) -> None:
    assert len(cases) == 100
    assert Counter(c.task.type for c in cases) == dict.fromkeys(range(1, 11), 10)
    assert len({c.id for c in cases}) == 100
    assert len({(c.task.instruction, c.origin) for c in cases}) == 100


def test_every_reference_trajectory_replays_to_success(warehouse: Layout,
                                                       cases: list[Case]) -> None:
    replayed = 0
    for case in cases:
        runs: list[tuple[Trajectory, frozenset[tuple[int, int]]]] = [
            (d, frozenset()) for d in case.demos.values()]
        runs += [(case.test, frozenset()), (case.blocked_test, case.blocked)]
        for trajectory, blocked in runs:
            run = replay(warehouse, case.task, trajectory.start, trajectory.actions,
                         blocked=blocked)
            assert run.success and run.finished_at == len(trajectory.actions), case.id
            assert not run.bumps, case.id
            replayed += 1
    assert replayed == 600


def test_every_installed_case_keeps_every_rule(warehouse: Layout, cases: list[Case]) -> None:
    broken = {case.id: violations(warehouse, case) for case in cases}
    assert {k: v for k, v in broken.items() if v} == {}


def test_the_closed_passage_lengthens_the_test_route(cases: list[Case]) -> None:
    for case in cases:
        assert len(case.blocked_test.actions) > len(case.test.actions), case.id
        assert 2 <= len(case.blocked) <= 3


def test_references_are_shortest_routes(warehouse: Layout, cases: list[Case]) -> None:
    for case in cases[::10]:
        for name in DEMOS:
            demo = case.demos[name]
            assert len(demo.actions) == len(shortest(warehouse, case.task, demo.start)), case.id


def test_the_generator_repeats_itself(warehouse: Layout, cases: list[Case]) -> None:
    firsts = generate(warehouse, 2609, CaseRules(cases_per_type=1))
    installed = {c.id: c for c in cases}
    for case in firsts:
        assert case == installed[case.id]


def test_the_generator_says_which_rule_no_draw_kept(warehouse: Layout) -> None:
    with pytest.raises(CaseRuleError, match="test start") as err:
        generate(warehouse, 1, CaseRules(cases_per_type=1, test_length_ratio=(5.0, 6.0),
                                         attempts=4), types=(1,))
    assert err.value.rule == "no case"


def _tampered(case: Case, **change: object) -> Case:
    return dataclasses.replace(case, **change)  # type: ignore[arg-type]


def test_violations_name_the_broken_rule(warehouse: Layout, cases: list[Case]) -> None:
    case = cases[0]
    short = Trajectory(case.test.start, case.test.actions[:-1])
    assert any(v.startswith("replay: the test route does not finish")
               for v in violations(warehouse, _tampered(case, test=short)))
    original = case.demos["original"].start
    demos = dict(case.demos)
    demos["opposite"] = Trajectory(original, demos["opposite"].actions)
    assert any(v.startswith("opposite heading")
               for v in violations(warehouse, _tampered(case, demos=demos)))
    on_demo = Trajectory(original, case.demos["original"].actions)
    assert any(v.startswith("test start: on a demonstration's start cell")
               for v in violations(warehouse, _tampered(case, test=on_demo)))
    elsewhere = frozenset({(13, 28), (14, 28)})
    found = violations(warehouse, _tampered(case, blocked=elsewhere))
    assert any(v.startswith("blocked route: the closed passage is not on the test route")
               for v in found)
    bad = Trajectory(case.test.start, ("forward", "fly"))
    assert violations(warehouse, _tampered(case, test=bad))[0].startswith(
        "replay: the test route cannot run")


def test_cases_round_trip_and_bad_files_are_refused(tmp_path: Path, warehouse: Layout,
                                                   cases: list[Case]) -> None:
    path = tmp_path / "cases.json"
    write_cases(path, warehouse, cases[:3], 2609)
    assert read_cases(path, warehouse) == cases[:3]
    data = json.loads(path.read_text(encoding="utf-8"))
    for change, words in ((lambda d: d.update(format="other"), "not a"),
                          (lambda d: d.update(layout="elsewhere"), "layout"),
                          (lambda d: d.update(cases={}), "list"),
                          (lambda d: d["cases"][0].pop("test"), "exactly the keys"),
                          (lambda d: d["cases"][0]["demos"].pop("nearby"), "demos are"),
                          (lambda d: d["cases"][0].update(blocked=[[1]]), "blocked"),
                          (lambda d: d["cases"][0]["test"].update(start=[1, 2, 7]), "pose"),
                          (lambda d: d["cases"][0]["test"].update(actions="forward"),
                           "list of action")):
        broken = json.loads(json.dumps(data))
        change(broken)
        path.write_text(json.dumps(broken), encoding="utf-8")
        with pytest.raises(WarehouseError, match=words):
            read_cases(path, warehouse)
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(WarehouseError, match="cannot read"):
        read_cases(path, warehouse)
    with pytest.raises(WarehouseError, match="cannot read"):
        read_cases(tmp_path / "missing.json", warehouse)


def test_a_cross_section_spans_the_aisle(warehouse: Layout) -> None:
    # Corridor B of the south bank is two cells wide (x 5 and 6).
    assert cross_section(warehouse, (5, 8), (0, 1)) == {(5, 8), (6, 8)}
    # Across the two-row cross-aisle, travelling east, between two racks' ends.
    assert cross_section(warehouse, (3, 14), (1, 0)) == {(3, 14), (3, 15)}
    # Where a corridor meets the cross-aisle, the floor runs on down the corridors.
    assert len(cross_section(warehouse, (5, 14), (1, 0))) == 26  # y 2 to 27
    assert Pose(5, 8, 0).cell == (5, 8)
