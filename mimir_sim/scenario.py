"""Scenario files: kitchen layout, objects, instructions and their success criteria.

A scenario is a YAML file under ``config/scenarios/``. Every key is checked when the file is
loaded; a bad value raises :class:`MalformedScenarioError` whose ``key`` is the dotted path of the
offending entry (for example ``fixtures[2].locked``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from mimir_sim.errors import MalformedScenarioError, UnknownScenarioError

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


@dataclass(frozen=True)
class KitchenSpec:
    """Dimensions of the single wall run of cabinets (metres; the wall faces -x)."""

    wall_x: float = 1.25
    room_x: tuple[float, float] = (-2.0, 1.25)
    room_y: tuple[float, float] = (-2.0, 2.0)
    counter_height: float = 0.75
    counter_depth: float = 0.5
    upper_bottom: float = 1.0
    upper_height: float = 0.45
    upper_depth: float = 0.35
    drawer_height: float = 0.16


@dataclass(frozen=True)
class FixtureSpec:
    """One fixture on the wall run, centred at ``y`` with the given ``width`` (m)."""

    id: str
    type: str
    y: float
    width: float
    label: str
    locked: bool = False
    hinge: str = "left"
    color: tuple[float, float, float] = (0.85, 0.82, 0.76)


@dataclass(frozen=True)
class VariantSpec:
    """Visual variant of an object instance; ``None`` fields are drawn from the seed."""

    color: tuple[float, float, float] | None = None
    pattern: str | None = None
    pattern_color: tuple[float, float, float] | None = None
    label_color: tuple[float, float, float] | None = None
    brand: str | None = None


@dataclass(frozen=True)
class ObjectSpec:
    """A movable object placed in or on a fixture at slot ``(u, v)`` in [0, 1]^2 (width, depth)."""

    id: str
    category: str
    fixture: str
    slot: tuple[float, float] | None
    variant: VariantSpec


@dataclass(frozen=True)
class CriterionSpec:
    """A success (or failure) condition, judged from simulator state and the primitive log."""

    type: str
    fixture: str | None = None
    object: str | None = None
    answer: tuple[str, ...] = ()


@dataclass(frozen=True)
class MoveSpec:
    """An object the scenario itself moves when an instruction begins (a person tidied up).

    The object goes to slot ``(u, v)`` in [0, 1]^2 of the fixture ``fixture``, like an object's
    initial ``slot``; the robot plays no part in the move.
    """

    object: str
    fixture: str
    slot: tuple[float, float]


@dataclass(frozen=True)
class InstructionSpec:
    """One instruction of the sequence with how it is judged.

    ``moves`` are applied when the instruction begins, after the robot is returned to its start
    and before it acts.
    """

    text: str
    family: str
    success: tuple[CriterionSpec, ...]
    failure: tuple[CriterionSpec, ...] = ()
    start_at: str | None = None
    moves: tuple[MoveSpec, ...] = ()


@dataclass(frozen=True)
class RandomizationSpec:
    """Per-trial layout randomisation amplitudes."""

    object_jitter: float = 0.015
    yaw_jitter: float = 0.4
    color_jitter: float = 0.06


@dataclass(frozen=True)
class CategorySpec:
    """Shape, size (MuJoCo geom size), base colour and mass of an object category."""

    name: str
    shape: str
    size: tuple[float, ...]
    color: tuple[float, float, float]
    mass: float
    label: str


@dataclass(frozen=True)
class Scenario:
    """A parsed scenario file."""

    name: str
    description: str
    seed: int
    kitchen: KitchenSpec
    fixtures: tuple[FixtureSpec, ...]
    objects: tuple[ObjectSpec, ...]
    instructions: tuple[InstructionSpec, ...]
    start_at: str | None
    randomization: RandomizationSpec
    catalog: Mapping[str, CategorySpec] = field(default_factory=dict)
    source: Path | None = None

    def fixture(self, fixture_id: str) -> FixtureSpec:
        """The fixture with this id (KeyError when absent)."""
        for fixture in self.fixtures:
            if fixture.id == fixture_id:
                return fixture
        raise KeyError(fixture_id)


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


def _check_instruction_ids(instr: InstructionSpec, key: str, fixture_ids: set[str],
                           object_ids: set[str]) -> None:
    """Every fixture and object an instruction's start, moves and criteria name must exist in
    the scenario."""
    if instr.start_at is not None and instr.start_at not in fixture_ids:
        raise MalformedScenarioError(f"{key}.start_at", f"unknown fixture {instr.start_at!r}")
    for j, move in enumerate(instr.moves):
        mkey = f"{key}.moves[{j}]"
        if move.object not in object_ids:
            raise MalformedScenarioError(f"{mkey}.object", f"unknown object {move.object!r}")
        if move.fixture not in fixture_ids:
            raise MalformedScenarioError(f"{mkey}.in", f"unknown fixture {move.fixture!r}")
    for group, crits in (("success", instr.success), ("failure", instr.failure)):
        for j, crit in enumerate(crits):
            ckey = f"{key}.{group}[{j}]"
            if crit.fixture is not None and crit.fixture not in fixture_ids:
                raise MalformedScenarioError(f"{ckey}.fixture", f"unknown fixture {crit.fixture!r}")
            if crit.object is not None and crit.object not in object_ids:
                raise MalformedScenarioError(f"{ckey}.object", f"unknown object {crit.object!r}")
            for k, answer_id in enumerate(crit.answer):
                if answer_id not in object_ids and answer_id not in fixture_ids:
                    raise MalformedScenarioError(f"{ckey}.answer[{k}]",
                                                 f"unknown id {answer_id!r}")


def parse_scenario(
    data: object, catalog: Mapping[str, CategorySpec], source: Path | None = None
) -> Scenario:
    """Build a :class:`Scenario` from already-decoded YAML data and check cross references."""
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
        if obj.fixture not in fixture_ids:
            raise MalformedScenarioError(f"objects[{i}].in", f"unknown fixture {obj.fixture!r}")
        if obj.category not in catalog:
            raise MalformedScenarioError(
                f"objects[{i}].category", f"unknown category {obj.category!r}"
            )
    if start_at is not None and start_at not in fixture_ids:
        raise MalformedScenarioError("start_at", f"unknown fixture {start_at!r}")
    for i, instr in enumerate(instructions):
        _check_instruction_ids(instr, f"instructions[{i}]", set(fixture_ids), object_ids)
    return Scenario(
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
    )


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
