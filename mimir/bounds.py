"""The one table of input bounds every core checks before it keeps anything.

A robot's memory must survive whatever a broken driver, a replayed bag or a hostile peer sends
it. Finite is not enough: a bowl reported at 1e155 m is a finite number that later overflows
the graph's distance code. Every core (memory, perception, reasoning) validates its inputs
against :class:`Bounds`, so that nodes, replay and in-process runs get the same protection.

The defaults are the table; ``config/memory.yaml`` (section ``bounds``) overrides any of them.
README's "Reliability" section lists the same values.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import yaml


class BoundsError(ValueError):
    """A value outside the bounds of :class:`Bounds` (or not finite)."""


@dataclass(frozen=True)
class Bounds:
    """Limits on what the cores accept.

    Attributes:
        workspace_m: Largest absolute value of any coordinate in the map frame (m). A
            building-scale robot never leaves a few hundred metres around its map origin.
        max_box_side_m: Longest side of an object or fixture box (m).
        centroid_tolerance_m: How far a centroid may lie outside its own box (m).
        max_future_s: How far a stamp may lie ahead of the receiving clock (s).
        max_past_s: How far a stamp may lie behind the receiving clock (s); 0 for no limit
            (bags and late analyses carry old stamps).
        max_id_chars: Longest id, label, name, camera or source string.
        max_text_chars: Longest free text (reasoning, description, caption).
        max_json_chars: Longest JSON text of one value or one event payload.
        max_json_depth: Deepest nesting of lists and objects in one JSON value.
        max_items: Most entries of one list (contents, node ids, evidence, labels).
    """

    workspace_m: float = 500.0
    max_box_side_m: float = 50.0
    centroid_tolerance_m: float = 0.05
    max_future_s: float = 5.0
    max_past_s: float = 0.0
    max_id_chars: int = 256
    max_text_chars: int = 8192
    max_json_chars: int = 65536
    max_json_depth: int = 32
    max_items: int = 1000

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise BoundsError(f"bounds.{item.name} must be a number, got {value!r}")
            if not math.isfinite(value) or value < 0:
                raise BoundsError(f"bounds.{item.name} must be a finite number >= 0")
            if item.type == "int" and not isinstance(value, int):
                raise BoundsError(f"bounds.{item.name} must be an integer, got {value!r}")
        for name in ("workspace_m", "max_box_side_m", "max_id_chars", "max_text_chars",
                     "max_json_chars", "max_json_depth", "max_items"):
            if getattr(self, name) <= 0:
                raise BoundsError(f"bounds.{name} must be positive")

    # ------------------------------------------------------------------ numbers
    def coordinate(self, value: object, name: str) -> float:
        """A finite coordinate within the workspace (m)."""
        if isinstance(value, bool):
            raise BoundsError(f"{name} must be a number, got {value!r}")
        try:
            number = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError, OverflowError) as err:
            raise BoundsError(f"{name} must be a number, got {value!r}") from err
        if not math.isfinite(number):
            raise BoundsError(f"{name} must be finite, got {number!r}")
        if abs(number) > self.workspace_m:
            raise BoundsError(
                f"{name} = {number:.6g} m lies outside the workspace (|value| <= "
                f"{self.workspace_m:g} m)")
        return number

    def point(self, value: object, name: str) -> tuple[float, float, float]:
        """Three finite coordinates within the workspace (m)."""
        if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
            raise BoundsError(f"{name} must be three numbers, got {value!r}")
        items = list(value)
        if len(items) != 3:
            raise BoundsError(f"{name} must have three components, got {len(items)}")
        x, y, z = (self.coordinate(v, f"{name}[{i}]") for i, v in enumerate(items))
        return (x, y, z)

    def box(self, centroid: object, bbox_min: object, bbox_max: object,
            name: str = "box") -> None:
        """A box inside the workspace, no side longer than allowed, holding its centroid."""
        c = self.point(centroid, f"{name} centroid")
        lo = self.point(bbox_min, f"{name} bbox_min")
        hi = self.point(bbox_max, f"{name} bbox_max")
        for axis in range(3):
            if lo[axis] > hi[axis]:
                raise BoundsError(f"{name} bbox_min {lo} exceeds bbox_max {hi}")
            if hi[axis] - lo[axis] > self.max_box_side_m:
                raise BoundsError(
                    f"{name} side {hi[axis] - lo[axis]:.6g} m is longer than "
                    f"{self.max_box_side_m:g} m")
            tol = self.centroid_tolerance_m
            if not lo[axis] - tol <= c[axis] <= hi[axis] + tol:
                raise BoundsError(
                    f"{name} centroid {c} lies outside its box {lo}..{hi} (tolerance {tol:g} m)")

    def stamp(self, stamp: float, now: float | None, name: str = "stamp") -> float:
        """A finite stamp not too far from the receiving clock ``now`` (s).

        ``now`` of None or 0 means the receiving clock is not known yet (simulated time before
        the first ``/clock``); only finiteness and sign are checked then.
        """
        if isinstance(stamp, bool) or not isinstance(stamp, (int, float)):
            raise BoundsError(f"{name} must be a number, got {stamp!r}")
        if not math.isfinite(stamp) or stamp < 0:
            raise BoundsError(f"{name} must be a finite time >= 0, got {stamp!r}")
        if now is None or now <= 0:
            return float(stamp)
        if stamp > now + self.max_future_s:
            raise BoundsError(
                f"{name} {stamp:.3f} s lies {stamp - now:.3g} s ahead of the receiving clock "
                f"(at most {self.max_future_s:g} s allowed)")
        if self.max_past_s > 0 and stamp < now - self.max_past_s:
            raise BoundsError(
                f"{name} {stamp:.3f} s lies {now - stamp:.3g} s behind the receiving clock "
                f"(at most {self.max_past_s:g} s allowed)")
        return float(stamp)

    # ------------------------------------------------------------------ strings
    def ident(self, value: object, name: str, *, allow_empty: bool = False) -> str:
        """A short string (id, label, name) without control characters."""
        if not isinstance(value, str):
            raise BoundsError(f"{name} must be a string, got {type(value).__name__}")
        if not allow_empty and not value.strip():
            raise BoundsError(f"{name} must not be empty")
        _no_longer(value, name, self.max_id_chars)
        if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
            raise BoundsError(f"{name} holds control characters")
        return value

    def text(self, value: object, name: str) -> str:
        """Free text of bounded length."""
        if not isinstance(value, str):
            raise BoundsError(f"{name} must be a string, got {type(value).__name__}")
        return _no_longer(value, name, self.max_text_chars)

    def items(self, value: object, name: str) -> list[Any]:
        """A list of bounded length."""
        if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
            raise BoundsError(f"{name} must be a list, got {type(value).__name__}")
        out = list(value)
        if len(out) > self.max_items:
            raise BoundsError(f"{name} has {len(out)} entries (at most {self.max_items})")
        return out

    # --------------------------------------------------------------------- JSON
    def json_value(self, value: object, name: str) -> None:
        """A JSON-ready value: bounded depth and size, finite numbers only.

        The walk is iterative, so a value nested deeper than the interpreter's recursion limit
        is refused with a :class:`BoundsError` instead of a RecursionError.
        """
        stack: list[tuple[object, int]] = [(value, 1)]
        budget = self.max_json_chars
        while stack:
            item, depth = stack.pop()
            if isinstance(item, (dict, list, tuple)):
                if depth > self.max_json_depth:
                    raise BoundsError(f"{name} is nested deeper than {self.max_json_depth}")
                children = item.items() if isinstance(item, dict) else enumerate(item)
                for key, child in children:
                    if isinstance(item, dict):
                        if not isinstance(key, str):
                            raise BoundsError(f"{name} has a non-text key {key!r}")
                        budget -= len(key) + 4
                    stack.append((child, depth + 1))
                budget -= 2
            elif isinstance(item, str):
                budget -= len(item) + 2
            elif isinstance(item, float):
                if not math.isfinite(item):
                    raise BoundsError(f"{name} holds a non-finite number")
                budget -= 8
            elif item is None or isinstance(item, (bool, int)):
                budget -= 5
            else:
                raise BoundsError(f"{name} holds a {type(item).__name__}, not JSON")
            if budget < 0:
                raise BoundsError(f"{name} is larger than {self.max_json_chars} characters")

    def parse_json(self, text: object, name: str) -> Any:
        """Parse JSON text of bounded size and nesting (never a RecursionError)."""
        if not isinstance(text, str):
            raise BoundsError(f"{name} must be JSON text, got {type(text).__name__}")
        _no_longer(text, name, self.max_json_chars)
        if _text_depth(text) > self.max_json_depth:
            raise BoundsError(f"{name} is nested deeper than {self.max_json_depth}")
        try:
            value = json.loads(text, parse_constant=_no_constant)
        except (json.JSONDecodeError, RecursionError) as err:
            raise BoundsError(f"{name} is not JSON ({err})") from err
        self.json_value(value, name)
        return value


def _no_longer(text: str, name: str, limit: int) -> str:
    """``text`` unless it is longer than ``limit`` characters."""
    if len(text) > limit:
        raise BoundsError(f"{name} is {len(text)} characters long (at most {limit})")
    return text


def _no_constant(token: str) -> Any:
    raise BoundsError(f"JSON constant {token} is not allowed")


def _text_depth(text: str) -> int:
    """Deepest bracket nesting of JSON text, ignoring brackets inside strings."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


DEFAULT_BOUNDS = Bounds()
"""The defaults, for code that runs without a configuration file."""


def bounds_from_dict(data: object) -> Bounds:
    """Bounds from a parsed YAML mapping (unknown keys are an error)."""
    if data is None:
        return DEFAULT_BOUNDS
    if not isinstance(data, Mapping):
        raise BoundsError("bounds must be a mapping")
    known = {f.name for f in fields(Bounds)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise BoundsError(f"unknown keys in bounds: {unknown}")
    return Bounds(**dict(data))


def load_bounds(path: str | Path) -> Bounds:
    """The ``bounds`` section of a settings YAML file (``config/memory.yaml``).

    Raises:
        BoundsError: The file cannot be read, is not YAML, or holds bad bounds.
    """
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as err:
        raise BoundsError(f"cannot read bounds from {path}: {err}") from err
    if data is not None and not isinstance(data, Mapping):
        raise BoundsError(f"{path} does not hold a mapping")
    return bounds_from_dict((data or {}).get("bounds"))


def bounds_table() -> list[tuple[str, Any, str]]:
    """(name, default, meaning) of every bound, for documentation and ``mimir`` help."""
    doc = Bounds.__doc__ or ""
    meanings: dict[str, str] = {}
    current = ""
    for line in doc.splitlines():
        stripped = line.strip()
        head, sep, rest = stripped.partition(":")
        if sep and head in {f.name for f in fields(Bounds)}:
            current = head
            meanings[current] = rest.strip()
        elif current and stripped:
            meanings[current] += " " + stripped
        elif not stripped:
            current = ""
    return [(f.name, getattr(DEFAULT_BOUNDS, f.name), meanings.get(f.name, ""))
            for f in fields(Bounds)]


__all__ = ["DEFAULT_BOUNDS", "Bounds", "BoundsError", "bounds_from_dict", "bounds_table",
           "load_bounds"]
