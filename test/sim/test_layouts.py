"""Layout generation from scenario roles: coverage, determinism, resolution, judging, refusals,
and memory-free baselines that must stay at chance on generated layouts."""

from __future__ import annotations

import copy
import itertools
import math
import os
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np
import pytest
import yaml

from mimir.sim_job import load_scenario_instructions
from mimir_sim import baselines
from mimir_sim.errors import MalformedScenarioError
from mimir_sim.judge import judge_instruction
from mimir_sim.layouts import (
    Assignment,
    apply_assignment,
    assignment_for_seed,
    generate_layout,
    role_assignments,
)
from mimir_sim.scenario import (
    Scenario,
    default_scenarios_dir,
    load_catalog,
    load_scenario,
    parse_scenario,
)

#: seeds the coverage and baseline checks run over (fixed, so every run checks the same)
SEEDS = range(400)
#: enough seeds to meet each of the 144 assignments of the small every-kind scenario
MANY_SEEDS = range(3000)
#: layouts a baseline is scored on
BASELINE_LAYOUTS = 200
#: standard deviations a memory-free score may stray from chance (two-sided p ~ 6e-5 each)
Z = 4.0


def _data(name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(
        (default_scenarios_dir() / f"{name}.yaml").read_text(encoding="utf-8")
    )
    return data


def _parse(data: object) -> Scenario:
    return parse_scenario(data, load_catalog())


def _small_data() -> dict[str, Any]:
    """locked_unlocked with one role of every other kind: order, variant and reorder."""
    data = _data("locked_unlocked")
    data["fixtures"].append({"id": "counter_2", "type": "counter", "y": -1.2, "width": 0.3})
    data["fixtures"].append({"id": "counter_3", "type": "counter", "y": 1.2, "width": 0.3})
    data["objects"].append({"id": "mug_1", "category": "mug", "in": "counter_2"})
    data["roles"]["ends"] = {"permute": ["counter_2", "counter_3"]}
    data["roles"]["look"] = {
        "objects": ["mug_1"],
        "variants": [{"color": [0.9, 0.1, 0.1]}, {"color": [0.1, 0.1, 0.9], "pattern": "stripes"}],
    }
    data["instructions"].append(
        {"text": "Find the mug.", "family": "finding",
         "success": [{"type": "object_discovered", "object": "mug_1"}]}
    )
    data["roles"]["later"] = {"reorder": [1, 2]}
    return data


@pytest.fixture(scope="module")
def locked() -> Scenario:
    return load_scenario("locked_unlocked")


@pytest.fixture(scope="module")
def clutter() -> Scenario:
    return load_scenario("clutter_aware_pick")


@pytest.fixture(scope="module")
def small() -> Scenario:
    return _parse(_small_data())


def _strings(value: object) -> Iterator[str]:
    """Every string inside nested dataclasses, tuples and mappings."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, tuple | list):
        for item in value:
            yield from _strings(item)
    elif hasattr(value, "__dataclass_fields__"):
        for name in value.__dataclass_fields__:
            yield from _strings(getattr(value, name))


# ------------------------------------------------------------------------------ enumeration


@pytest.mark.parametrize(
    ("name", "count"), [("locked_unlocked", 18), ("clutter_aware_pick", 16)]
)
def test_seeds_cover_every_assignment(name: str, count: int) -> None:
    scenario = load_scenario(name)
    every = role_assignments(scenario)
    assert len(every) == len(set(every)) == count
    drawn = {assignment_for_seed(scenario, seed) for seed in SEEDS}
    assert drawn == set(every)


def test_seeds_cover_every_assignment_of_every_role_kind(small: Scenario) -> None:
    every = role_assignments(small)
    # 6 picks of locked/fruit/sauce, 3 starts, 2 orders, 2 variants, 2 instruction orders
    assert len(every) == len(set(every)) == 6 * 3 * 2 * 2 * 2
    assert {assignment_for_seed(small, seed) for seed in MANY_SEEDS} == set(every)


def test_an_assignment_keeps_locked_fruit_and_sauce_apart(locked: Scenario) -> None:
    for assignment in role_assignments(locked):
        values = assignment.as_dict()
        assert len({values["locked"], values["fruit"], values["sauce"]}) == 3


# ------------------------------------------------------------------------------ determinism


def test_same_seed_same_layout(locked: Scenario, small: Scenario) -> None:
    for scenario in (locked, small):
        for seed in (0, 3, 77):
            a, b = generate_layout(scenario, seed), generate_layout(scenario, seed)
            assert a == b
            assert a.seed == seed
            # a concrete layout generates again from its roles, whatever seed it came from
            assert generate_layout(generate_layout(scenario, seed + 1), seed) == a


def test_loading_gives_the_layout_of_the_files_own_seed(locked: Scenario) -> None:
    assert locked == generate_layout(locked, locked.seed)
    assert locked.assignment == assignment_for_seed(locked, locked.seed)


@pytest.mark.parametrize("name", ["locked_unlocked", "clutter_aware_pick", "long_horizon"])
def test_different_seeds_vary_every_role(name: str) -> None:
    scenario = load_scenario(name)
    assert scenario.layout is not None
    seen: dict[str, set[object]] = {role.name: set() for role in scenario.layout.roles}
    for seed in range(60):
        for role, value in assignment_for_seed(scenario, seed).values:
            seen[role].add(value)
    assert all(len(values) > 1 for values in seen.values()), seen


def test_every_role_kind_varies_the_concrete_layout(small: Scenario) -> None:
    layouts = [generate_layout(small, seed) for seed in range(60)]
    assert len({tuple(f.locked for f in s.fixtures) for s in layouts}) == 3
    assert len({s.fixture("counter_2").y for s in layouts}) == 2
    assert len({next(o.variant for o in s.objects if o.id == "mug_1") for s in layouts}) == 2
    assert len({s.instructions[1].text for s in layouts}) == 2
    assert len({s.start_at for s in layouts}) == 3


def test_a_scenario_without_roles_is_unchanged() -> None:
    scenario = load_scenario("moved_object")
    assert scenario.layout is None and scenario.assignment is None
    assert generate_layout(scenario, 5) is scenario
    assert role_assignments(scenario) == [Assignment()]
    assert assignment_for_seed(scenario, 5) == Assignment()
    with pytest.raises(ValueError, match="no roles"):
        apply_assignment(scenario, Assignment((("locked", "cab_1"),)))


# ------------------------------------------------------------------------------ resolution


def test_roles_resolve_to_ids_in_locked_unlocked(locked: Scenario) -> None:
    for assignment in role_assignments(locked):
        s = apply_assignment(locked, assignment)
        v = assignment.as_dict()
        assert not any(text.startswith("$") for text in _strings(s.fixtures))
        assert not any(text.startswith("$") for text in _strings(s.objects))
        assert not any(text.startswith("$") for text in _strings(s.instructions))
        assert [f.id for f in s.fixtures if f.locked] == [v["locked"]]
        homes = {o.id: o.fixture for o in s.objects}
        assert homes["banana_1"] == homes["apple_1"] == v["fruit"]
        assert homes["ketchup_1"] == v["sauce"] and homes["sponge_1"] == "counter_1"
        assert s.start_at == s.instructions[1].start_at == v["start"]
        assert s.instructions[1].failure[0].fixture == v["locked"]
        # slots travel with their objects; the wall keeps its places
        template = {o.id: o.slot for o in locked.objects}
        assert all(o.slot == template[o.id] for o in s.objects)
        assert {f.id: f.y for f in s.fixtures} == {f.id: f.y for f in locked.fixtures}


def test_roles_resolve_to_ids_in_clutter_aware_pick(clutter: Scenario) -> None:
    for assignment in role_assignments(clutter):
        s = apply_assignment(clutter, assignment)
        v = assignment.as_dict()
        homes = {o.id: o.fixture for o in s.objects}
        assert {o for o, f in homes.items() if f == v["clear"]} == {
            "ketchup_1", "mayonnaise_1", "soup_can_1", "coffee_1", "hot_sauce_1", "tea_box_1"}
        assert {o for o, f in homes.items() if f == v["wedged"]} == {
            "ketchup_2", "mustard_1", "mayonnaise_2"}
        assert s.instructions[1].start_at == v["restart"] and s.start_at == v["start"]
        assert s.instructions[1].failure[0].fixture == v["wedged"]
        looks = {o.id: o.variant for o in s.objects if o.category == "ketchup"}
        assert looks["ketchup_1"] == looks["ketchup_2"]
        assert looks["ketchup_1"].color == (0.75, 0.08, 0.06)  # only the label and brand vary
        assert not any(f.locked for f in s.fixtures)


def test_the_files_own_seeds_give_the_papers_layouts(
    locked: Scenario, clutter: Scenario
) -> None:
    assert locked.assignment is not None and locked.assignment.as_dict() == {
        "locked": "cab_1", "fruit": "cab_2", "sauce": "cab_3", "start": "cab_1"}
    assert clutter.assignment is not None and clutter.assignment.as_dict() == {
        "clear": "cab_1", "wedged": "cab_2", "start": "cab_1", "restart": "cab_2", "bottle": 0}
    horizon = load_scenario("long_horizon")
    assert horizon.assignment is not None
    assert horizon.assignment["wall"] == tuple(f"cab_{i}" for i in range(1, 9))


def test_order_roles_trade_places_and_keep_the_wall(small: Scenario) -> None:
    horizon = load_scenario("long_horizon")
    places = sorted(f.y for f in horizon.fixtures)
    for seed in range(20):
        s = generate_layout(horizon, seed)
        assert sorted(f.y for f in s.fixtures) == places
        lower = {f.id: f.y for f in s.fixtures if f.type != "upper_cabinet"}
        assert lower == {f.id: f.y for f in horizon.fixtures if f.type != "upper_cabinet"}
        assert {f.id for f in s.fixtures if f.locked} == {"cab_2", "cab_5", "cab_7"}
        assert [i.text for i in s.instructions] == [i.text for i in horizon.instructions]
    for assignment in role_assignments(small):
        s = apply_assignment(small, assignment)
        order, runs = assignment["ends"], assignment["later"]
        assert isinstance(order, tuple) and isinstance(runs, tuple) and small.layout is not None
        assert s.fixture(str(order[0])).y == -1.2 and s.fixture(str(order[1])).y == 1.2
        assert [i.text for i in s.instructions[1:]] == [
            small.layout.instructions[int(i)].text for i in runs
        ]


# ------------------------------------------------------------------------------ judging


@pytest.fixture(scope="module")
def shuffled_sim(locked: Scenario, tidybot_dir: Path) -> Iterator[Any]:
    """locked_unlocked built for a seed whose layout is not the paper's."""
    from mimir_sim.sim import KitchenSim

    seed = next(s for s in range(50) if assignment_for_seed(locked, s)["locked"] != "cab_1"
                and assignment_for_seed(locked, s)["start"] != "cab_1")
    sim = KitchenSim.from_scenario(locked, tidybot_dir, seed)
    try:
        yield sim
    finally:
        sim.shutdown()


def test_the_judge_judges_the_concrete_layout(shuffled_sim: Any) -> None:
    sim = shuffled_sim
    s: Scenario = sim.scene.scenario
    assert s.assignment is not None and s.seed == sim.scene.seed
    v = s.assignment.as_dict()
    assert sim.scene.fixtures[v["locked"]].locked
    assert all(not sim.scene.fixtures[c].locked for c in ("cab_1", "cab_2", "cab_3")
               if c != v["locked"])
    assert sim.scene.objects["banana_1"].fixture == v["fruit"]
    assert sim.scene.objects["ketchup_1"].fixture == v["sauce"]
    first, second = s.instructions
    sim.begin_instruction(0)
    assert sim.move_to(v["fruit"]).reached
    assert sim.open(v["fruit"]).success
    assert sim.inspect(v["fruit"]).success
    assert judge_instruction(sim, first, 0, ["banana_1"]).success
    sim.begin_instruction(1)
    assert sim.move_to(v["locked"]).reached
    assert not sim.open(v["locked"]).success
    verdict = judge_instruction(sim, second, 1, ["ketchup_1"])
    assert not verdict.success
    assert any(f"open attempted on {v['locked']}: True" in r for r in verdict.reasons)


# ------------------------------------------------------------------------------ baselines


def _binomial_ok(successes: int, trials: int, p: float) -> bool:
    """Whether ``successes`` of ``trials`` lies within ``Z`` standard deviations of ``p``."""
    spread = Z * math.sqrt(p * (1.0 - p) / trials)
    return abs(successes / trials - p) <= spread + 0.5 / trials


def test_chance_level_matches_every_order() -> None:
    task = baselines.FindingTask(0, "x", "a", ("b",), None)
    fixtures = ("a", "b", "c", "d")
    for k in range(1, 5):
        orders = list(itertools.permutations(fixtures))
        hits = sum(baselines.task_success(o, task, k) for o in orders)
        assert baselines.chance_level(task, len(fixtures), k) == pytest.approx(hits / len(orders))


@pytest.mark.parametrize("name", ["locked_unlocked", "clutter_aware_pick"])
@pytest.mark.parametrize("policy", sorted(baselines.POLICIES))
def test_memory_free_policies_stay_at_chance(name: str, policy: str) -> None:
    scenario = load_scenario(name)
    n = len(baselines.candidates(scenario))
    for k in (1, n):
        wins: dict[int, int] = {}
        chance: dict[int, float] = {}
        for seed in range(BASELINE_LAYOUTS):
            layout = generate_layout(scenario, seed)
            rng = np.random.default_rng(seed)
            for index, ok in baselines.score(policy, layout, k, rng).items():
                wins[index] = wins.get(index, 0) + int(ok)
            chance = baselines.chance_levels(layout, k)
        assert set(wins) == set(chance) and wins
        for index, p in chance.items():
            assert _binomial_ok(wins[index], BASELINE_LAYOUTS, p), (policy, k, index, wins, p)


def test_a_fixed_layout_is_caught_leaking(locked: Scenario) -> None:
    """The same check flags the paper's one layout: opening left to right always meets the
    locked cabinet first."""
    rng = np.random.default_rng(0)
    wins = sum(baselines.score("fixed_order", locked, 1, rng)[1] for _ in range(BASELINE_LAYOUTS))
    p = baselines.chance_levels(locked, 1)[1]
    assert p == pytest.approx(1 / 3)
    assert not _binomial_ok(wins, BASELINE_LAYOUTS, p)


# ------------------------------------------------------------------------------ refusals


def _set(path: tuple[Any, ...], value: object) -> Callable[[dict[str, Any]], None]:
    def mutate(data: dict[str, Any]) -> None:
        target: Any = data
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = value

    return mutate


def _drop(path: tuple[Any, ...]) -> Callable[[dict[str, Any]], None]:
    def mutate(data: dict[str, Any]) -> None:
        target: Any = data
        for step in path[:-1]:
            target = target[step]
        del target[path[-1]]

    return mutate


def _all(*steps: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    def mutate(data: dict[str, Any]) -> None:
        for step in steps:
            step(data)

    return mutate


BAD_ROLES = [
    # references
    (_set(("instructions", 1, "failure", 0, "fixture"), "$nope"),
     "instructions[1].failure[0].fixture"),
    (_set(("objects", 0, "in"), "$nope"), "objects[0].in"),
    (_set(("start_at",), "$nope"), "start_at"),
    (_all(_set(("roles", "wall"), {"permute": ["cab_1", "cab_2"]}),
          _set(("start_at",), "$wall")), "start_at"),
    (_drop(("roles",)), "objects[0].in"),
    # the section and its entries
    (_set(("roles",), ["locked"]), "roles"),
    (_set(("roles",), {}), "roles"),
    (_set(("roles", "bad-name"), {"among": ["cab_1", "cab_2"]}), "roles.bad-name"),
    (_set(("roles", "start"), {}), "roles.start"),
    (_set(("roles", "start"), {"among": ["cab_1", "cab_2"], "permute": ["cab_1", "cab_2"]}),
     "roles.start"),
    (_set(("roles", "start", "colour"), "red"), "roles.start.colour"),
    (_set(("roles", "extra"), {"among": ["cab_1", "cab_2"]}), "roles.extra"),
    # fixture roles choosing among unknown or unfit fixtures
    (_set(("roles", "locked", "among", 1), "cab_9"), "roles.locked.among[1]"),
    (_set(("roles", "start", "among"), ["cab_1"]), "roles.start.among"),
    (_set(("roles", "start", "among"), ["cab_1", "cab_1"]), "roles.start.among[1]"),
    (_set(("roles", "locked", "among", 2), "counter_1"), "roles.locked.among[2]"),
    (_set(("fixtures", 1, "locked"), True), "roles.locked.among[0]"),
    (_set(("roles", "locked", "locked"), "yes"), "roles.locked.locked"),
    (_set(("roles", "sauce", "unlike", 1), "nobody"), "roles.sauce.unlike[1]"),
    (_set(("roles", "sauce", "unlike", 1), "sauce"), "roles.sauce.unlike[1]"),
    (_all(*(_set(("roles", r, "among"), ["cab_1", "cab_2"]) for r in ("locked", "fruit", "sauce"))),
     "roles"),
    # contradictions: a locked fixture holding what an instruction must find
    (_set(("roles", "fruit", "unlike"), []), "roles.fruit.unlike"),
    (_set(("objects", 0, "in"), "cab_1"), "roles.locked.among[0]"),
    (_set(("instructions", 1, "moves"), [{"object": "banana_1", "in": "$locked",
                                          "slot": [0.5, 0.5]}]),
     "instructions[1].moves[0].in"),
    (_set(("instructions", 0, "success", 0), {"type": "fixture_opened", "fixture": "$locked"}),
     "instructions[0].success[0].fixture"),
    # order, variant and reorder roles
    (_set(("roles", "wall"), {"permute": ["cab_1", "counter_1"]}), "roles.wall.permute[1]"),
    (_all(_set(("fixtures", 3, "width"), 0.6), _set(("roles", "wall"), {"permute":
                                                                        ["cab_1", "cab_3"]})),
     "roles.wall.permute[1]"),
    (_all(_set(("roles", "w1"), {"permute": ["cab_1", "cab_2"]}),
          _set(("roles", "w2"), {"permute": ["cab_2", "cab_3"]})), "roles.w2.permute[0]"),
    (_set(("roles", "r"), {"reorder": [0, 5]}), "roles.r.reorder[1]"),
    (_set(("roles", "r"), {"reorder": [0]}), "roles.r.reorder"),
    (_set(("roles", "r"), {"reorder": [0, True]}), "roles.r.reorder[1]"),
    (_set(("roles", "v"), {"objects": ["ghost"], "variants": [{"brand": "a"}, {"brand": "b"}]}),
     "roles.v.objects[0]"),
    (_set(("roles", "v"), {"objects": ["banana_1"], "variants": [{"brand": "a"}]}),
     "roles.v.variants"),
    (_set(("roles", "v"), {"objects": ["banana_1"], "variants": [{"brand": "a"}, {}]}),
     "roles.v.variants[1]"),
    (_set(("roles", "v"), {"objects": ["banana_1"], "variants": [{"brand": "a"},
                                                                {"pattern": "dots"}]}),
     "roles.v.variants[1].pattern"),
    (_set(("roles", "v"), {"variants": [{"brand": "a"}, {"brand": "b"}]}), "roles.v.objects"),
]


@pytest.mark.parametrize(("mutate", "key"), BAD_ROLES)
def test_malformed_roles_name_the_key(
    mutate: Callable[[dict[str, Any]], None], key: str
) -> None:
    data = copy.deepcopy(_data("locked_unlocked"))
    mutate(data)
    with pytest.raises(MalformedScenarioError) as info:
        _parse(data)
    assert info.value.key == key, str(info.value)


def test_a_valid_edit_still_loads() -> None:
    data = _data("locked_unlocked")
    data["roles"]["wall"] = {"permute": ["cab_1", "cab_2", "cab_3"]}
    scenario = _parse(data)
    assert len(role_assignments(scenario)) == 18 * 6
    assert replace(scenario, source=None).name == "locked_unlocked"


def test_mimir_sim_plays_the_instructions_in_the_order_of_the_layout(tmp_path: Path) -> None:
    path = tmp_path / "reordered.yaml"
    path.write_text(yaml.safe_dump(_small_data()), encoding="utf-8")
    template = load_scenario(path)
    orders = set()
    for seed in range(12):
        played = load_scenario_instructions(str(path), seed)
        assert played == [i.text for i in generate_layout(template, seed).instructions]
        orders.add(tuple(played))
    assert len(orders) == 2  # instructions 1 and 2 swap with the seed; the first stays first
    assert all(order[0] == template.instructions[0].text for order in orders)
    # a negative seed plays the file's own layout
    assert load_scenario_instructions(str(path)) == [i.text for i in template.instructions]
