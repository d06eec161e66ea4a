"""The MemTransfer warehouse as a grid: cells, headings, the seven moves, items on rack faces.

The floor is a grid of square cells (``cell_m`` on a side); cell ``(x, y)`` has its centre at
``(x * cell_m, y * cell_m)``, x growing east and y north. The agent stands on a floor cell facing
north, east, south or west, and moves one cell forward, backward, left or right without turning,
or turns left, right or around. Racks and walls cannot be entered; neither can cells a condition
closes (``blocked``). An item stands on one face of a rack cell and is reached from the floor
cell in front of that face.

The layout comes from a YAML file (``config/memtransfer/warehouse.yaml``): a character grid, a
grid of aisle letters, the kinds of item and runs of stocked bays.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from mimir.paths import config_file
from mimir.settings import read_mapping
from mimir_sim.errors import SimError

WALL, RACK, FLOOR = "#", "R", "."
HEADINGS = ("N", "E", "S", "W")
STEPS = ((0, 1), (1, 0), (0, -1), (-1, 0))
ACTIONS = ("forward", "backward", "left", "right", "turn_left", "turn_right", "turn_around")
MOVES = {"forward": 0, "right": 1, "backward": 2, "left": 3}
TURNS = {"turn_right": 1, "turn_around": 2, "turn_left": 3}
SHAPES = {"box": 3, "cylinder": 2, "sphere": 1, "capsule": 2}
DEFAULT_LAYOUT = "memtransfer/warehouse.yaml"

Cell = tuple[int, int]


class WarehouseError(SimError):
    """A warehouse layout, case or episode that is not valid; the message says what."""


@dataclass(frozen=True, order=True)
class Pose:
    """A cell and a heading (0 north, 1 east, 2 south, 3 west)."""

    x: int
    y: int
    heading: int

    @property
    def cell(self) -> Cell:
        """The cell the agent stands on."""
        return (self.x, self.y)

    def to_list(self) -> list[int]:
        """``[x, y, heading]`` for JSON."""
        return [self.x, self.y, self.heading]

    @classmethod
    def from_list(cls, value: object) -> Pose:
        """The pose ``[x, y, heading]``.

        Raises:
            WarehouseError: not three integers with a heading in 0..3.
        """
        if (not isinstance(value, list | tuple) or len(value) != 3
                or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)
                or not 0 <= value[2] <= 3):
            raise WarehouseError(f"a pose is [x, y, heading 0..3], got {value!r}")
        return cls(value[0], value[1], value[2])

    def __str__(self) -> str:
        return f"({self.x}, {self.y}) facing {HEADINGS[self.heading]}"


def moved(pose: Pose, action: str) -> Pose:
    """Where ``action`` would take ``pose`` on an open floor (no collision check).

    Raises:
        WarehouseError: not one of :data:`ACTIONS`.
    """
    if action in TURNS:
        return Pose(pose.x, pose.y, (pose.heading + TURNS[action]) % 4)
    if action not in MOVES:
        raise WarehouseError(f"unknown action {action!r}; one of {', '.join(ACTIONS)}")
    dx, dy = STEPS[(pose.heading + MOVES[action]) % 4]
    return Pose(pose.x + dx, pose.y + dy, pose.heading)


@dataclass(frozen=True)
class Kind:
    """What an item is: its name, category and look (for rendering)."""

    name: str
    category: str
    shape: str
    rgba: tuple[float, float, float, float]
    size: tuple[float, ...]


@dataclass(frozen=True)
class Item:
    """One item on a rack face: ``rack`` is its rack cell, ``face`` the heading its face looks
    to."""

    id: str
    kind: str
    category: str
    rack: Cell
    face: int

    @property
    def front(self) -> Cell:
        """The floor cell the item is reached from."""
        dx, dy = STEPS[self.face]
        return (self.rack[0] + dx, self.rack[1] + dy)


@dataclass(frozen=True)
class Step:
    """What one action did: the new pose, and what stopped a move (``wall``, ``rack``,
    ``obstacle``; empty when the agent moved or turned)."""

    pose: Pose
    bumped: str = ""


@dataclass(frozen=True)
class Layout:
    """A warehouse: its grid (``rows[0]`` is the north end), aisles, kinds and items."""

    name: str
    cell_m: float
    rows: tuple[str, ...]
    aisle_rows: tuple[str, ...]
    kinds: Mapping[str, Kind]
    items: tuple[Item, ...]

    @property
    def width(self) -> int:
        """Cells from west to east."""
        return len(self.rows[0])

    @property
    def height(self) -> int:
        """Cells from south to north."""
        return len(self.rows)

    def char(self, cell: Cell) -> str:
        """The grid character at ``cell`` (a wall outside the grid)."""
        x, y = cell
        if not (0 <= x < self.width and 0 <= y < self.height):
            return WALL
        return self.rows[self.height - 1 - y][x]

    def aisle(self, cell: Cell) -> str:
        """The aisle letter of a floor cell (the grid character elsewhere)."""
        x, y = cell
        if not (0 <= x < self.width and 0 <= y < self.height):
            return WALL
        return self.aisle_rows[self.height - 1 - y][x]

    def is_floor(self, cell: Cell, blocked: Iterable[Cell] = ()) -> bool:
        """Whether the agent may stand on ``cell``."""
        return self.char(cell) == FLOOR and cell not in blocked

    @cached_property
    def floor_cells(self) -> tuple[Cell, ...]:
        """Every floor cell, west to east within south to north."""
        return tuple((x, y) for y in range(self.height) for x in range(self.width)
                     if self.char((x, y)) == FLOOR)

    @cached_property
    def items_by_id(self) -> dict[str, Item]:
        """Items by id."""
        return {item.id: item for item in self.items}

    @cached_property
    def _fronting(self) -> dict[Cell, tuple[Item, ...]]:
        fronting: dict[Cell, list[Item]] = {}
        for item in self.items:
            fronting.setdefault(item.front, []).append(item)
        return {cell: tuple(items) for cell, items in fronting.items()}

    def items_at(self, cell: Cell) -> tuple[Item, ...]:
        """The items reached from ``cell``."""
        return self._fronting.get(cell, ())

    def of_kind(self, kind: str) -> tuple[Item, ...]:
        """Every item of a kind."""
        return tuple(item for item in self.items if item.kind == kind)

    def of_category(self, category: str) -> tuple[Item, ...]:
        """Every item of a category."""
        return tuple(item for item in self.items if item.category == category)

    def step(self, pose: Pose, action: str, blocked: frozenset[Cell] = frozenset()) -> Step:
        """One action from ``pose``: a move into a wall, rack or closed cell leaves it in place.

        Raises:
            WarehouseError: an unknown action.
        """
        target = moved(pose, action)
        if action in TURNS:
            return Step(target)
        if target.cell in blocked:
            return Step(pose, "obstacle")
        char = self.char(target.cell)
        if char != FLOOR:
            return Step(pose, "rack" if char == RACK else "wall")
        return Step(target)

    def visible(self, pose: Pose, blocked: frozenset[Cell] = frozenset(),
                fov_deg: float = 90.0, max_range_m: float = 12.0) -> tuple[Item, ...]:
        """Items whose face the camera at ``pose`` sees: inside the horizontal field of view,
        facing the camera, within range and with no wall, rack or closed cell in between."""
        hx, hy = STEPS[pose.heading]
        half = math.radians(fov_deg) / 2.0
        seen = []
        for item in self.items:
            fx, fy = STEPS[item.face]
            px, py = item.rack[0] + 0.5 * fx, item.rack[1] + 0.5 * fy
            vx, vy = px - pose.x, py - pose.y
            dist = math.hypot(vx, vy)
            if dist * self.cell_m > max_range_m or dist < 1e-9:
                continue
            if vx * fx + vy * fy >= 0.0:
                continue  # its back is to the camera
            if math.acos(max(-1.0, min(1.0, (vx * hx + vy * hy) / dist))) > half:
                continue
            if self._clear_line(pose.cell, (px, py), item.rack, blocked):
                seen.append(item)
        return tuple(seen)

    def _clear_line(self, start: Cell, end: tuple[float, float], rack: Cell,
                    blocked: frozenset[Cell]) -> bool:
        samples = max(2, int(math.hypot(end[0] - start[0], end[1] - start[1]) / 0.05))
        for i in range(1, samples):
            t = i / samples
            cell = (math.floor(start[0] + t * (end[0] - start[0]) + 0.5),
                    math.floor(start[1] + t * (end[1] - start[1]) + 0.5))
            if cell == rack:
                continue
            if not self.is_floor(cell, blocked):
                return False
        return True


def load_layout(path: str | Path = "") -> Layout:
    """The warehouse in ``path`` (empty: the installed ``memtransfer/warehouse.yaml``).

    Raises:
        WarehouseError: the file is missing, not YAML, or describes no valid warehouse.
    """
    try:
        source = config_file(DEFAULT_LAYOUT, str(path))
    except FileNotFoundError as err:
        raise WarehouseError(str(err)) from err
    return layout_from_mapping(read_mapping(source, "warehouse layout", WarehouseError))


def layout_from_mapping(data: Mapping[str, Any]) -> Layout:
    """A :class:`Layout` from the mapping of a layout file.

    Raises:
        WarehouseError: a missing or unknown key, a ragged or unfenced grid, aisles that do not
        match the grid, an unknown kind, or a bay that is not a rack face onto the floor.
    """
    known = {"name", "cell_m", "grid", "aisles", "kinds", "stock"}
    unknown = sorted(set(data) - known)
    missing = sorted(known - set(data))
    if unknown or missing:
        raise WarehouseError(f"warehouse layout: unknown keys {unknown}, missing keys {missing}")
    rows = _grid(data["grid"], "grid")
    if any(c != WALL for c in rows[0] + rows[-1]) or any(
            r[0] != WALL or r[-1] != WALL for r in rows):
        raise WarehouseError("warehouse layout: the grid must be fenced by walls")
    aisle_rows = _grid(data["aisles"], "aisles")
    if len(aisle_rows) != len(rows) or any(len(a) != len(r) for a, r in zip(aisle_rows, rows,
                                                                          strict=True)):
        raise WarehouseError("warehouse layout: aisles must have the grid's shape")
    for row, aisle_row in zip(rows, aisle_rows, strict=True):
        for char, letter in zip(row, aisle_row, strict=True):
            if char not in (WALL, RACK, FLOOR):
                raise WarehouseError(f"warehouse layout: unknown grid character {char!r}")
            if (char == FLOOR) != (letter not in (WALL, RACK, FLOOR)):
                raise WarehouseError("warehouse layout: every floor cell, and only a floor "
                                     f"cell, has an aisle letter (got {letter!r} on {char!r})")
    cell_m = data["cell_m"]
    if isinstance(cell_m, bool) or not isinstance(cell_m, int | float) or cell_m <= 0:
        raise WarehouseError(f"warehouse layout: cell_m must be > 0, got {cell_m!r}")
    kinds = _kinds(data["kinds"])
    layout = Layout(str(data["name"]), float(cell_m), rows, aisle_rows, kinds, ())
    items = _stock(data["stock"], layout)
    return Layout(layout.name, layout.cell_m, rows, aisle_rows, kinds, items)


def _grid(text: object, key: str) -> tuple[str, ...]:
    if not isinstance(text, str) or not text.strip():
        raise WarehouseError(f"warehouse layout: {key} must be a block of text")
    rows = tuple(line.strip() for line in text.strip().splitlines())
    if len({len(r) for r in rows}) != 1 or len(rows) < 3 or len(rows[0]) < 3:
        raise WarehouseError(f"warehouse layout: {key} rows must be of one length (3 or more)")
    return rows


def _kinds(raw: object) -> dict[str, Kind]:
    if not isinstance(raw, Mapping) or not raw:
        raise WarehouseError("warehouse layout: kinds must be a mapping of names")
    kinds = {}
    for name, spec in raw.items():
        where = f"warehouse layout: kind {name!r}"
        if not isinstance(spec, Mapping) or set(spec) != {"category", "shape", "rgba", "size"}:
            raise WarehouseError(f"{where} needs exactly category, shape, rgba and size")
        shape = spec["shape"]
        if shape not in SHAPES:
            raise WarehouseError(f"{where}: shape must be one of {sorted(SHAPES)}")
        rgba, size = spec["rgba"], spec["size"]
        if not _numbers(rgba, 4) or not all(0.0 <= v <= 1.0 for v in rgba):
            raise WarehouseError(f"{where}: rgba must be four numbers in [0, 1]")
        if not _numbers(size, SHAPES[shape]) or not all(v > 0 for v in size):
            raise WarehouseError(f"{where}: a {shape} takes {SHAPES[shape]} sizes > 0")
        kinds[str(name)] = Kind(str(name), str(spec["category"]), shape,
                                tuple(float(v) for v in rgba),  # type: ignore[arg-type]
                                tuple(float(v) for v in size))
    return kinds


def _numbers(value: object, count: int) -> bool:
    return (isinstance(value, list) and len(value) == count
            and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value))


def _stock(raw: object, layout: Layout) -> tuple[Item, ...]:
    if not isinstance(raw, list):
        raise WarehouseError("warehouse layout: stock must be a list of runs")
    items: list[Item] = []
    counts: dict[str, int] = {}
    taken: set[tuple[Cell, int]] = set()
    for run in raw:
        if not isinstance(run, Mapping) or set(run) != {"from", "face", "toward", "kinds"}:
            raise WarehouseError(f"warehouse layout: a stock run needs from, face, toward and "
                                 f"kinds, got {run!r}")
        start, face, toward = run["from"], run["face"], run["toward"]
        if not _numbers(start, 2) or face not in HEADINGS or toward not in HEADINGS:
            raise WarehouseError(f"warehouse layout: stock run {run!r}: from is [x, y], face "
                                 "and toward one of N, E, S, W")
        if not isinstance(run["kinds"], list):
            raise WarehouseError(f"warehouse layout: stock run {run!r}: kinds is a list")
        dx, dy = STEPS[HEADINGS.index(toward)]
        for n, name in enumerate(run["kinds"]):
            if name == "":
                continue
            if name not in layout.kinds:
                raise WarehouseError(f"warehouse layout: stock names an unknown kind {name!r}")
            rack = (int(start[0]) + n * dx, int(start[1]) + n * dy)
            item_face = HEADINGS.index(face)
            probe = Item("", name, "", rack, item_face)
            if layout.char(rack) != RACK or not layout.is_floor(probe.front):
                raise WarehouseError(f"warehouse layout: bay {rack} facing {face} is not a rack "
                                     "face onto the floor")
            if (rack, item_face) in taken:
                raise WarehouseError(f"warehouse layout: bay {rack} facing {face} is stocked "
                                     "twice")
            taken.add((rack, item_face))
            counts[name] = counts.get(name, 0) + 1
            items.append(Item(f"{name.replace(' ', '_')}_{counts[name]}", name,
                              layout.kinds[name].category, rack, item_face))
    if not items:
        raise WarehouseError("warehouse layout: no item is stocked")
    return tuple(items)
