"""Scenario files: kitchen layout, objects, instructions and their success criteria.

A scenario is a YAML file under ``config/scenarios/``. Every key is checked when the file is
loaded; a bad value raises :class:`MalformedScenarioError` whose ``key`` is the dotted path of the
offending entry (for example ``fixtures[2].locked``).

A file may carry a ``roles:`` section (what a seed varies: which fixture is locked, which holds
an object, the fixtures' order on the wall, the start, variants, the order of instructions) and
write ``$role`` where a fixture id would stand; :mod:`mimir_sim.layouts` describes the syntax.
Such a file is checked as a whole at load (unknown roles, roles choosing unknown fixtures, and
roles that could lock a fixture an instruction needs open are refused), and loading returns the
concrete layout of the file's own ``seed``; :func:`mimir_sim.layouts.generate_layout` gives the
layout of any other seed.
"""

from __future__ import annotations

import math
import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from mimir_sim.errors import MalformedScenarioError, UnknownScenarioError
from mimir_sim.layouts import (
    WIDTH_CLASS_TOLERANCE,
    fixture_role_choices,
    generate_layout,
    is_role_ref,
    role_ref_name,
)
from mimir_sim.scenario_specs import (
    Assignment,
    CategorySpec,
    CriterionSpec,
    FixtureRole,
    FixtureSpec,
    InstructionSpec,
    KitchenSpec,
    LayoutTemplate,
    MoveSpec,
    ObjectSpec,
    OrderRole,
    RandomizationSpec,
    ReorderRole,
    RoleSpec,
    RoleValue,
    Scenario,
    VariantRole,
    VariantSpec,
)

#: this module's names, with the scenario data types it re-exports from
#: :mod:`mimir_sim.scenario_specs`
__all__ = [
    "CATALOG_FILE",
    "CRITERIA",
    "FAMILIES",
    "FIXTURE_TYPES",
    "OPENABLE_TYPES",
    "PATTERNS",
    "ROLE_KINDS",
    "SHAPES",
    "Assignment",
    "CategorySpec",
    "CriterionSpec",
    "FixtureRole",
    "FixtureSpec",
    "InstructionSpec",
    "KitchenSpec",
    "LayoutTemplate",
    "MoveSpec",
    "ObjectSpec",
    "OrderRole",
    "RandomizationSpec",
    "ReorderRole",
    "RoleSpec",
    "RoleValue",
    "Scenario",
    "VariantRole",
    "VariantSpec",
    "available_scenarios",
    "default_scenarios_dir",
    "load_catalog",
    "load_scenario",
    "parse_catalog",
    "parse_scenario",
]

FIXTURE_TYPES = ("upper_cabinet", "lower_cabinet", "drawer", "counter")
OPENABLE_TYPES = ("upper_cabinet", "lower_cabinet", "drawer")
SHAPES = ("box", "cylinder", "sphere", "capsule", "ellipsoid")
PATTERNS = ("plain", "checker", "stripes", "gradient")
FAMILIES = ("finding", "matching", "manipulation", "memory_query")
CRITERIA = (
    "fixture_opened",
    "object_discovered",
    "open_attempted",
    "reopen_attempted",
    "object_on_fixture",
    "object_removed_from",
    "destination_selected",
    "answer_objects",
)
CATALOG_FILE = "catalog.yaml"


def default_scenarios_dir() -> Path:
    """``config/scenarios`` of this checkout, or ``$MIMIR_SCENARIOS_DIR`` when set."""
    override = os.environ.get("MIMIR_SCENARIOS_DIR")
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[1] / "config" / "scenarios"


# ---------------------------------------------------------------------------------------------
# validation helpers


def _mapping(value: object, key: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise MalformedScenarioError(key, f"expected a mapping, got {type(value).__name__}")
    return value


def _list(value: object, key: str) -> Sequence[Any]:
    if not isinstance(value, list):
        raise MalformedScenarioError(key, f"expected a list, got {type(value).__name__}")
    return value


def _str(value: object, key: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise MalformedScenarioError(key, "expected a non-empty string")
    return value


def _float(value: object, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise MalformedScenarioError(key, f"expected a number, got {value!r}")
    result = float(value)
    if not math.isfinite(result):
        raise MalformedScenarioError(key, "expected a finite number")
    return result


def _positive(value: object, key: str) -> float:
    result = _float(value, key)
    if result <= 0.0:
        raise MalformedScenarioError(key, f"expected a positive number, got {result}")
    return result


def _bool(value: object, key: str) -> bool:
    if not isinstance(value, bool):
        raise MalformedScenarioError(key, f"expected true or false, got {value!r}")
    return value


def _vector(value: object, key: str, length: int) -> tuple[float, ...]:
    items = _list(value, key)
    if len(items) != length:
        raise MalformedScenarioError(key, f"expected {length} numbers, got {len(items)}")
    return tuple(_float(item, f"{key}[{i}]") for i, item in enumerate(items))


def _color(value: object, key: str) -> tuple[float, float, float]:
    vec = _vector(value, key, 3)
    if any(c < 0.0 or c > 1.0 for c in vec):
        raise MalformedScenarioError(key, "colour channels must lie in [0, 1]")
    return (vec[0], vec[1], vec[2])


def _choice(value: object, key: str, allowed: Sequence[str]) -> str:
    text = _str(value, key)
    if text not in allowed:
        raise MalformedScenarioError(key, f"{text!r} is not one of {', '.join(allowed)}")
    return text


def _unknown_keys(data: Mapping[str, Any], key: str, allowed: Sequence[str]) -> None:
    extra = sorted(set(data) - set(allowed))
    if extra:
        raise MalformedScenarioError(f"{key}.{extra[0]}" if key else extra[0], "unknown key")


def _required(data: Mapping[str, Any], name: str, key: str) -> Any:
    if name not in data:
        raise MalformedScenarioError(f"{key}.{name}" if key else name, "required key is missing")
    return data[name]


# ---------------------------------------------------------------------------------------------
# section parsers


def _parse_kitchen(data: object) -> KitchenSpec:
    if data is None:
        return KitchenSpec()
    raw = _mapping(data, "kitchen")
    fields = (
        "wall_x",
        "room_x",
        "room_y",
        "counter_height",
        "counter_depth",
        "upper_bottom",
        "upper_height",
        "upper_depth",
        "drawer_height",
    )
    _unknown_keys(raw, "kitchen", fields)
    base = KitchenSpec()
    values: dict[str, Any] = {}
    for name in fields:
        if name not in raw:
            values[name] = getattr(base, name)
        elif name in ("room_x", "room_y"):
            pair = _vector(raw[name], f"kitchen.{name}", 2)
            if pair[0] >= pair[1]:
                raise MalformedScenarioError(
                    f"kitchen.{name}", "expected [low, high] with low < high"
                )
            values[name] = (pair[0], pair[1])
        elif name == "wall_x":
            values[name] = _float(raw[name], "kitchen.wall_x")
        else:
            values[name] = _positive(raw[name], f"kitchen.{name}")
    kitchen = KitchenSpec(**values)
    if kitchen.upper_bottom <= kitchen.counter_height:
        raise MalformedScenarioError(
            "kitchen.upper_bottom", "upper cabinets must start above the counter top"
        )
    return kitchen


def _parse_fixture(data: object, key: str) -> FixtureSpec:
    raw = _mapping(data, key)
    _unknown_keys(raw, key, ("id", "type", "y", "width", "label", "locked", "hinge", "color"))
    ftype = _choice(_required(raw, "type", key), f"{key}.type", FIXTURE_TYPES)
    default_label = {
        "upper_cabinet": "upper cabinet",
        "lower_cabinet": "lower cabinet",
        "drawer": "drawer",
        "counter": "counter",
    }[ftype]
    locked = _bool(raw.get("locked", False), f"{key}.locked")
    if locked and ftype == "counter":
        raise MalformedScenarioError(f"{key}.locked", "a counter cannot be locked")
    return FixtureSpec(
        id=_str(_required(raw, "id", key), f"{key}.id"),
        type=ftype,
        y=_float(_required(raw, "y", key), f"{key}.y"),
        width=_positive(_required(raw, "width", key), f"{key}.width"),
        label=_str(raw.get("label", default_label), f"{key}.label"),
        locked=locked,
        hinge=_choice(raw.get("hinge", "left"), f"{key}.hinge", ("left", "right")),
        color=_color(raw["color"], f"{key}.color") if "color" in raw else (0.85, 0.82, 0.76),
    )


def _parse_variant(data: object, key: str) -> VariantSpec:
    if data is None:
        return VariantSpec()
    raw = _mapping(data, key)
    _unknown_keys(raw, key, ("color", "pattern", "pattern_color", "label_color", "brand"))
    return VariantSpec(
        color=_color(raw["color"], f"{key}.color") if "color" in raw else None,
        pattern=_choice(raw["pattern"], f"{key}.pattern", PATTERNS) if "pattern" in raw else None,
        pattern_color=(
            _color(raw["pattern_color"], f"{key}.pattern_color") if "pattern_color" in raw else None
        ),
        label_color=_color(raw["label_color"], f"{key}.label_color")
        if "label_color" in raw
        else None,
        brand=_str(raw["brand"], f"{key}.brand") if "brand" in raw else None,
    )


def _slot(value: object, key: str) -> tuple[float, float]:
    vec = _vector(value, key, 2)
    if any(v < 0.0 or v > 1.0 for v in vec):
        raise MalformedScenarioError(key, "slot coordinates must lie in [0, 1]")
    return (vec[0], vec[1])


def _parse_object(data: object, key: str) -> ObjectSpec:
    raw = _mapping(data, key)
    _unknown_keys(raw, key, ("id", "category", "in", "slot", "variant"))
    slot = _slot(raw["slot"], f"{key}.slot") if "slot" in raw else None
    return ObjectSpec(
        id=_str(_required(raw, "id", key), f"{key}.id"),
        category=_str(_required(raw, "category", key), f"{key}.category"),
        fixture=_str(_required(raw, "in", key), f"{key}.in"),
        slot=slot,
        variant=_parse_variant(raw.get("variant"), f"{key}.variant"),
    )


def _parse_criterion(data: object, key: str) -> CriterionSpec:
    raw = _mapping(data, key)
    _unknown_keys(raw, key, ("type", "fixture", "object", "answer"))
    ctype = _choice(_required(raw, "type", key), f"{key}.type", CRITERIA)
    needs_fixture = ctype in (
        "fixture_opened",
        "open_attempted",
        "reopen_attempted",
        "object_on_fixture",
        "object_removed_from",
        "destination_selected",
    )
    needs_object = ctype in ("object_discovered", "object_on_fixture", "object_removed_from")
    fixture = _str(raw["fixture"], f"{key}.fixture") if "fixture" in raw else None
    obj = _str(raw["object"], f"{key}.object") if "object" in raw else None
    if needs_fixture and fixture is None:
        raise MalformedScenarioError(f"{key}.fixture", f"required for {ctype}")
    if needs_object and obj is None:
        raise MalformedScenarioError(f"{key}.object", f"required for {ctype}")
    answer: tuple[str, ...] = ()
    if ctype == "answer_objects":
        items = _list(_required(raw, "answer", key), f"{key}.answer")
        if not items:
            raise MalformedScenarioError(f"{key}.answer", "expected at least one object id")
        answer = tuple(_str(item, f"{key}.answer[{i}]") for i, item in enumerate(items))
    return CriterionSpec(type=ctype, fixture=fixture, object=obj, answer=answer)


def _parse_move(data: object, key: str) -> MoveSpec:
    raw = _mapping(data, key)
    _unknown_keys(raw, key, ("object", "in", "slot"))
    return MoveSpec(
        object=_str(_required(raw, "object", key), f"{key}.object"),
        fixture=_str(_required(raw, "in", key), f"{key}.in"),
        slot=_slot(_required(raw, "slot", key), f"{key}.slot"),
    )


def _parse_instruction(data: object, key: str) -> InstructionSpec:
    raw = _mapping(data, key)
    _unknown_keys(raw, key, ("text", "family", "success", "failure", "start_at", "moves"))
    success_raw = _list(_required(raw, "success", key), f"{key}.success")
    if not success_raw:
        raise MalformedScenarioError(f"{key}.success", "expected at least one criterion")
    failure_raw = _list(raw.get("failure", []), f"{key}.failure")
    moves_raw = _list(raw.get("moves", []), f"{key}.moves")
    return InstructionSpec(
        text=_str(_required(raw, "text", key), f"{key}.text"),
        family=_choice(_required(raw, "family", key), f"{key}.family", FAMILIES),
        success=tuple(
            _parse_criterion(item, f"{key}.success[{i}]") for i, item in enumerate(success_raw)
        ),
        failure=tuple(
            _parse_criterion(item, f"{key}.failure[{i}]") for i, item in enumerate(failure_raw)
        ),
        start_at=_str(raw["start_at"], f"{key}.start_at") if "start_at" in raw else None,
        moves=tuple(_parse_move(item, f"{key}.moves[{i}]") for i, item in enumerate(moves_raw)),
    )


def _parse_randomization(data: object) -> RandomizationSpec:
    if data is None:
        return RandomizationSpec()
    raw = _mapping(data, "randomization")
    _unknown_keys(raw, "randomization", ("object_jitter", "yaw_jitter", "color_jitter"))
    base = RandomizationSpec()
    values = {}
    for name in ("object_jitter", "yaw_jitter", "color_jitter"):
        value = _float(raw.get(name, getattr(base, name)), f"randomization.{name}")
        if value < 0.0:
            raise MalformedScenarioError(f"randomization.{name}", "must not be negative")
        values[name] = value
    return RandomizationSpec(**values)


def parse_catalog(data: object) -> dict[str, CategorySpec]:
    """Parse the object catalog mapping (category name -> shape, size, colour, mass, label)."""
    raw = _mapping(data, "categories")
    catalog: dict[str, CategorySpec] = {}
    for name, entry in raw.items():
        key = f"categories.{name}"
        item = _mapping(entry, key)
        _unknown_keys(item, key, ("shape", "size", "color", "mass", "label"))
        shape = _choice(_required(item, "shape", key), f"{key}.shape", SHAPES)
        size_raw = _list(_required(item, "size", key), f"{key}.size")
        expected = {"box": 3, "cylinder": 2, "sphere": 1, "capsule": 2, "ellipsoid": 3}[shape]
        if len(size_raw) != expected:
            raise MalformedScenarioError(f"{key}.size", f"{shape} needs {expected} numbers")
        size = tuple(_positive(v, f"{key}.size[{i}]") for i, v in enumerate(size_raw))
        catalog[str(name)] = CategorySpec(
            name=str(name),
            shape=shape,
            size=size,
            color=_color(_required(item, "color", key), f"{key}.color"),
            mass=_positive(item.get("mass", 0.2), f"{key}.mass"),
            label=_str(item.get("label", str(name)), f"{key}.label"),
        )
    return catalog


def _read_yaml(path: Path) -> object:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise UnknownScenarioError(f"cannot read scenario file {path}: {err}") from err
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise MalformedScenarioError("<file>", f"{path.name} is not valid YAML: {err}") from err


def load_catalog(scenarios_dir: Path | None = None) -> dict[str, CategorySpec]:
    """Read ``catalog.yaml`` from the scenarios folder."""
    folder = scenarios_dir or default_scenarios_dir()
    data = _mapping(_read_yaml(folder / CATALOG_FILE), "<catalog>")
    return parse_catalog(_required(data, "categories", ""))


def available_scenarios(scenarios_dir: Path | None = None) -> list[str]:
    """Names of the scenario files in the folder (the catalog excluded)."""
    folder = scenarios_dir or default_scenarios_dir()
    return sorted(p.stem for p in folder.glob("*.yaml") if p.name != CATALOG_FILE)


@dataclass
class _FixtureRefs:
    """Checks fixture ids and ``$role`` references to fixture roles, noting the roles used."""

    fixture_ids: set[str]
    roles: Mapping[str, RoleSpec]
    used: set[str] = field(default_factory=set)

    def check(self, value: str, key: str) -> None:
        """Refuse ``value`` unless it is a fixture id or names a fixture role."""
        if is_role_ref(value):
            name = role_ref_name(value)
            role = self.roles.get(name)
            if role is None:
                raise MalformedScenarioError(key, f"unknown role {name!r}")
            if not isinstance(role, FixtureRole):
                raise MalformedScenarioError(key, f"role {name!r} does not choose a fixture")
            self.used.add(name)
        elif value not in self.fixture_ids:
            raise MalformedScenarioError(key, f"unknown fixture {value!r}")


def _check_instruction_ids(instr: InstructionSpec, key: str, refs: _FixtureRefs,
                           object_ids: set[str]) -> None:
    """Every fixture (or fixture role) and object an instruction's start, moves and criteria
    name must exist in the scenario."""
    if instr.start_at is not None:
        refs.check(instr.start_at, f"{key}.start_at")
    for j, move in enumerate(instr.moves):
        mkey = f"{key}.moves[{j}]"
        if move.object not in object_ids:
            raise MalformedScenarioError(f"{mkey}.object", f"unknown object {move.object!r}")
        refs.check(move.fixture, f"{mkey}.in")
    for group, crits in (("success", instr.success), ("failure", instr.failure)):
        for j, crit in enumerate(crits):
            ckey = f"{key}.{group}[{j}]"
            if crit.fixture is not None:
                refs.check(crit.fixture, f"{ckey}.fixture")
            if crit.object is not None and crit.object not in object_ids:
                raise MalformedScenarioError(f"{ckey}.object", f"unknown object {crit.object!r}")
            for k, answer_id in enumerate(crit.answer):
                if answer_id in object_ids:
                    continue
                if not is_role_ref(answer_id) and answer_id not in refs.fixture_ids:
                    raise MalformedScenarioError(f"{ckey}.answer[{k}]",
                                                 f"unknown id {answer_id!r}")
                refs.check(answer_id, f"{ckey}.answer[{k}]")


# ---------------------------------------------------------------------------------------------
# roles

ROLE_KINDS = ("among", "permute", "variants", "reorder")


def _id_list(value: object, key: str, known: Collection[str], what: str,
             minimum: int) -> tuple[str, ...]:
    """A list of at least ``minimum`` distinct known ids."""
    items = _list(value, key)
    if len(items) < minimum:
        raise MalformedScenarioError(key, f"expected at least {minimum} {what} ids")
    ids: list[str] = []
    for i, item in enumerate(items):
        text = _str(item, f"{key}[{i}]")
        if text not in known:
            raise MalformedScenarioError(f"{key}[{i}]", f"unknown {what} {text!r}")
        if text in ids:
            raise MalformedScenarioError(f"{key}[{i}]", f"{text!r} is listed twice")
        ids.append(text)
    return tuple(ids)


def _parse_fixture_role(name: str, raw: Mapping[str, Any], key: str,
                        fixtures: Mapping[str, FixtureSpec]) -> FixtureRole:
    _unknown_keys(raw, key, ("among", "locked", "unlike"))
    among = _id_list(raw["among"], f"{key}.among", fixtures, "fixture", 2)
    locked = _bool(raw.get("locked", False), f"{key}.locked")
    if locked:
        for i, fid in enumerate(among):
            if fixtures[fid].type == "counter":
                raise MalformedScenarioError(f"{key}.among[{i}]", "a counter cannot be locked")
            if fixtures[fid].locked:
                raise MalformedScenarioError(
                    f"{key}.among[{i}]",
                    f"{fid} is locked in fixtures; a locking role chooses among unlocked ones")
    unlike_raw = _list(raw.get("unlike", []), f"{key}.unlike")
    unlike = tuple(_str(item, f"{key}.unlike[{i}]") for i, item in enumerate(unlike_raw))
    return FixtureRole(name=name, among=among, locked=locked, unlike=unlike)


def _parse_order_role(name: str, raw: Mapping[str, Any], key: str,
                      fixtures: Mapping[str, FixtureSpec]) -> OrderRole:
    _unknown_keys(raw, key, ("permute",))
    ids = _id_list(raw["permute"], f"{key}.permute", fixtures, "fixture", 2)
    first = fixtures[ids[0]]
    for i, fid in enumerate(ids[1:], start=1):
        other = fixtures[fid]
        if other.type != first.type:
            raise MalformedScenarioError(
                f"{key}.permute[{i}]",
                f"{fid} is a {other.type}; only fixtures of one type ({first.type}) trade places")
        if abs(other.width - first.width) > WIDTH_CLASS_TOLERANCE:
            raise MalformedScenarioError(
                f"{key}.permute[{i}]",
                f"{fid} is {other.width} m wide; only fixtures {first.width} m wide trade places "
                f"with {first.id}")
    return OrderRole(name=name, fixtures=ids)


def _parse_variant_role(name: str, raw: Mapping[str, Any], key: str,
                        object_ids: Collection[str]) -> VariantRole:
    _unknown_keys(raw, key, ("objects", "variants"))
    objects = _id_list(_required(raw, "objects", key), f"{key}.objects", object_ids, "object", 1)
    options_raw = _list(raw["variants"], f"{key}.variants")
    if len(options_raw) < 2:
        raise MalformedScenarioError(f"{key}.variants", "expected at least 2 variants")
    options = tuple(_parse_variant(item, f"{key}.variants[{i}]")
                    for i, item in enumerate(options_raw))
    for i, option in enumerate(options):
        if option == VariantSpec():
            raise MalformedScenarioError(f"{key}.variants[{i}]", "a variant must set a field")
    return VariantRole(name=name, objects=objects, options=options)


def _parse_reorder_role(name: str, raw: Mapping[str, Any], key: str,
                        count: int) -> ReorderRole:
    _unknown_keys(raw, key, ("reorder",))
    items = _list(raw["reorder"], f"{key}.reorder")
    if len(items) < 2:
        raise MalformedScenarioError(f"{key}.reorder", "expected at least 2 instruction indices")
    indices: list[int] = []
    for i, item in enumerate(items):
        ikey = f"{key}.reorder[{i}]"
        if isinstance(item, bool) or not isinstance(item, int) or not 0 <= item < count:
            raise MalformedScenarioError(ikey, f"expected an instruction index 0..{count - 1}")
        if item in indices:
            raise MalformedScenarioError(ikey, f"instruction {item} is listed twice")
        indices.append(item)
    return ReorderRole(name=name, instructions=tuple(indices))


def _parse_roles(data: object, fixtures: Mapping[str, FixtureSpec], object_ids: set[str],
                 instruction_count: int) -> tuple[RoleSpec, ...]:
    """Parse ``roles:`` and check each role on its own and against the other roles."""
    raw = _mapping(data, "roles")
    if not raw:
        raise MalformedScenarioError("roles", "expected at least one role")
    roles: list[RoleSpec] = []
    for name, entry in raw.items():
        key = f"roles.{name}"
        if not isinstance(name, str) or not name.isidentifier():
            raise MalformedScenarioError(key, "a role name is a letter or _ then letters, "
                                              "digits or _")
        item = _mapping(entry, key)
        kinds = [k for k in ROLE_KINDS if k in item]
        if len(kinds) != 1:
            raise MalformedScenarioError(key, f"expected exactly one of {', '.join(ROLE_KINDS)}")
        role: RoleSpec
        if kinds[0] == "among":
            role = _parse_fixture_role(name, item, key, fixtures)
        elif kinds[0] == "permute":
            role = _parse_order_role(name, item, key, fixtures)
        elif kinds[0] == "variants":
            role = _parse_variant_role(name, item, key, object_ids)
        else:
            role = _parse_reorder_role(name, item, key, instruction_count)
        roles.append(role)
    _check_role_relations(roles)
    if not any(True for _ in fixture_role_choices(roles)):
        raise MalformedScenarioError("roles", "the unlike lists leave no fixture to choose")
    return tuple(roles)


def _check_role_relations(roles: Sequence[RoleSpec]) -> None:
    """``unlike`` names other fixture roles; no fixture, instruction or object is in two roles
    of one kind."""
    by_name = {r.name: r for r in roles}
    placed: dict[str, str] = {}
    ordered: dict[int, str] = {}
    varied: dict[str, str] = {}
    for role in roles:
        key = f"roles.{role.name}"
        if isinstance(role, FixtureRole):
            for i, other in enumerate(role.unlike):
                if other == role.name or not isinstance(by_name.get(other), FixtureRole):
                    raise MalformedScenarioError(
                        f"{key}.unlike[{i}]", f"{other!r} is not another fixture role")
        members: tuple[str | int, ...] = ()
        seen: dict[Any, str] = {}
        if isinstance(role, OrderRole):
            members, seen, what = role.fixtures, placed, "permute"
        elif isinstance(role, ReorderRole):
            members, seen, what = role.instructions, ordered, "reorder"
        elif isinstance(role, VariantRole):
            members, seen, what = role.objects, varied, "objects"
        for i, member in enumerate(members):
            if member in seen:
                raise MalformedScenarioError(
                    f"{key}.{what}[{i}]", f"{member!r} is already in role {seen[member]!r}")
            seen[member] = role.name


def _locations(obj: ObjectSpec, index: int, instructions: Sequence[InstructionSpec]
               ) -> list[tuple[str, str]]:
    """Every place (written fixture or ``$role``, with its key) the object can be in."""
    places = [(obj.fixture, f"objects[{index}].in")]
    for i, instr in enumerate(instructions):
        for j, move in enumerate(instr.moves):
            if move.object == obj.id:
                places.append((move.fixture, f"instructions[{i}].moves[{j}].in"))
    return places


def _needs_open(instructions: Sequence[InstructionSpec], objects: Sequence[ObjectSpec]
                ) -> list[tuple[str, str, str]]:
    """(written fixture or ``$role``, its key, why) of every place an instruction needs open:
    the homes of the objects it must find or pick, and the fixtures it must open or fill."""
    index = {o.id: i for i, o in enumerate(objects)}
    needs: list[tuple[str, str, str]] = []
    for i, instr in enumerate(instructions):
        for j, crit in enumerate(instr.success):
            ckey = f"instructions[{i}].success[{j}]"
            if crit.type in ("object_discovered", "object_on_fixture") and crit.object:
                k = index[crit.object]
                for place, key in _locations(objects[k], k, instructions):
                    needs.append((place, key, f"instructions[{i}] must reach {crit.object}"))
            if crit.type in ("fixture_opened", "destination_selected") and crit.fixture:
                needs.append((crit.fixture, f"{ckey}.fixture",
                              f"instructions[{i}] must open or fill it"))
    return needs


def _check_role_contradictions(roles: Sequence[RoleSpec], fixtures: Mapping[str, FixtureSpec],
                               objects: Sequence[ObjectSpec],
                               instructions: Sequence[InstructionSpec]) -> None:
    """Refuse roles under which some assignment locks a fixture an instruction needs open.

    An object that moves counts in every place it can be, whichever instruction moves it.
    """
    lockers = [r for r in roles if isinstance(r, FixtureRole) and r.locked]
    by_name = {r.name: r for r in roles if isinstance(r, FixtureRole)}
    needs = _needs_open(instructions, objects)
    for picks in fixture_role_choices(roles):
        locked_by = {picks[r.name]: r.name for r in lockers}
        for place, key, why in needs:
            ref = role_ref_name(place) if is_role_ref(place) else None
            fid = picks[ref] if ref is not None else place
            if not (fixtures[fid].locked or fid in locked_by):
                continue
            if ref is None and fid not in locked_by:
                continue  # locked in the file itself, no role involved
            if ref is not None and ref == locked_by.get(fid):
                raise MalformedScenarioError(
                    key, f"role {ref!r} locks its fixture, but {why} there")
            if ref is not None and fid in locked_by:
                raise MalformedScenarioError(
                    f"roles.{ref}.unlike",
                    f"role {ref!r} may pick {fid}, which role {locked_by[fid]!r} locks, but "
                    f"{why} there (named at {key}); add {locked_by[fid]!r} to its unlike list")
            role = by_name[ref] if ref is not None else by_name[locked_by[fid]]
            raise MalformedScenarioError(
                f"roles.{role.name}.among[{role.among.index(fid)}]",
                f"{fid} may be locked while {why} there (named at {key})")


def parse_scenario(
    data: object, catalog: Mapping[str, CategorySpec], source: Path | None = None
) -> Scenario:
    """Build a :class:`Scenario` from already-decoded YAML data and check cross references.

    A file with ``roles:`` comes back as the concrete layout of its own ``seed`` (see
    :func:`mimir_sim.layouts.generate_layout`), keeping its roles for other seeds.
    """
    raw = _mapping(data, "<root>")
    _unknown_keys(
        raw,
        "",
        (
            "name",
            "description",
            "seed",
            "kitchen",
            "fixtures",
            "objects",
            "instructions",
            "start_at",
            "randomization",
            "roles",
        ),
    )
    name = _str(_required(raw, "name", ""), "name")
    seed_raw = raw.get("seed", 0)
    if isinstance(seed_raw, bool) or not isinstance(seed_raw, int) or seed_raw < 0:
        raise MalformedScenarioError("seed", "expected a non-negative integer")
    fixtures_raw = _list(_required(raw, "fixtures", ""), "fixtures")
    fixtures = tuple(_parse_fixture(item, f"fixtures[{i}]") for i, item in enumerate(fixtures_raw))
    objects_raw = _list(raw.get("objects", []), "objects")
    objects = tuple(_parse_object(item, f"objects[{i}]") for i, item in enumerate(objects_raw))
    instr_raw = _list(_required(raw, "instructions", ""), "instructions")
    instructions = tuple(
        _parse_instruction(item, f"instructions[{i}]") for i, item in enumerate(instr_raw)
    )
    start_at = _str(raw["start_at"], "start_at") if "start_at" in raw else None

    fixture_ids: dict[str, FixtureSpec] = {}
    for i, fixture in enumerate(fixtures):
        if fixture.id in fixture_ids:
            raise MalformedScenarioError(f"fixtures[{i}].id", f"duplicate id {fixture.id!r}")
        fixture_ids[fixture.id] = fixture
    object_ids: set[str] = set()
    for i, obj in enumerate(objects):
        if obj.id in object_ids or obj.id in fixture_ids:
            raise MalformedScenarioError(f"objects[{i}].id", f"duplicate id {obj.id!r}")
        object_ids.add(obj.id)
    roles: tuple[RoleSpec, ...] = ()
    if "roles" in raw:
        roles = _parse_roles(raw["roles"], fixture_ids, object_ids, len(instructions))
    refs = _FixtureRefs(set(fixture_ids), {r.name: r for r in roles})
    for i, obj in enumerate(objects):
        refs.check(obj.fixture, f"objects[{i}].in")
        if obj.category not in catalog:
            raise MalformedScenarioError(
                f"objects[{i}].category", f"unknown category {obj.category!r}"
            )
    if start_at is not None:
        refs.check(start_at, "start_at")
    for i, instr in enumerate(instructions):
        _check_instruction_ids(instr, f"instructions[{i}]", refs, object_ids)
    for role in roles:
        if isinstance(role, FixtureRole) and not role.locked and role.name not in refs.used:
            raise MalformedScenarioError(
                f"roles.{role.name}", f"role {role.name!r} neither locks nor is named as "
                f"${role.name} anywhere")
    _check_role_contradictions(roles, fixture_ids, objects, instructions)
    scenario = Scenario(
        name=name,
        description=str(raw.get("description", "")),
        seed=seed_raw,
        kitchen=_parse_kitchen(raw.get("kitchen")),
        fixtures=fixtures,
        objects=objects,
        instructions=instructions,
        start_at=start_at,
        randomization=_parse_randomization(raw.get("randomization")),
        catalog=dict(catalog),
        source=source,
        layout=(LayoutTemplate(roles, fixtures, objects, instructions, start_at)
                if roles else None),
    )
    return generate_layout(scenario, seed_raw)


def load_scenario(name_or_path: str | Path, scenarios_dir: Path | None = None) -> Scenario:
    """Load a scenario by name (``locked_unlocked``) or by the path of a YAML file.

    Raises:
        UnknownScenarioError: no such scenario name or unreadable file.
        MalformedScenarioError: the file is invalid; ``err.key`` names the offending entry.
    """
    folder = scenarios_dir or default_scenarios_dir()
    candidate = Path(name_or_path)
    if candidate.suffix in (".yaml", ".yml") and candidate.is_file():
        path = candidate
    else:
        path = folder / f"{name_or_path}.yaml"
        if str(name_or_path) == Path(CATALOG_FILE).stem or not path.is_file():
            known = ", ".join(available_scenarios(folder)) or "none"
            raise UnknownScenarioError(
                f"unknown scenario {str(name_or_path)!r} (available: {known})"
            )
    catalog = load_catalog(folder)
    return parse_scenario(_read_yaml(path), catalog, source=path)
