"""The one loader of settings files: YAML mappings into frozen dataclasses, with typed errors.

Every core keeps its settings in frozen dataclasses whose defaults match the shipped YAML file
(``config/memory.yaml``, ``planner.yaml``, ``reasoning.yaml``, ``sim.yaml``). This module reads
such a file and builds one dataclass per section: unknown keys are refused, every value must
have the type of its default (an int is accepted for a float), lists become tuples, and each
dataclass checks its own ranges: it derives from :class:`Checked` and lists its rules as a table
in its class line, instead of checking field by field. Errors are raised as the caller's error
class (a subclass of ``ValueError``), so each core keeps its own typed error while the rules are
written once.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import yaml

T = TypeVar("T")
ErrorType = type[Exception]


class SettingsError(ValueError):
    """A settings file or value that is malformed (the default error class)."""


def param(default: Any, description: str, *, read_only: bool = False) -> Any:
    """A dataclass field that is also a described ROS parameter (see ``mimir.ros.params``).

    ``read_only`` parameters cannot change while the node runs. Immutable defaults only (a
    tuple, not a list).
    """
    metadata: dict[str, Any] = {"description": description}
    if read_only:
        metadata["read_only"] = True
    return dataclasses.field(default=default, metadata=metadata)


def read_mapping(path: str | Path, what: str, error: ErrorType = SettingsError
                 ) -> dict[str, Any]:
    """The top-level mapping of a YAML file (an empty file is an empty mapping).

    Raises:
        error: The file cannot be read, is not YAML, or is not a mapping.
    """
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as err:
        raise error(f"cannot read {what} {path}: {err}") from err
    except yaml.YAMLError as err:
        raise error(f"{what} {path} is not valid YAML: {err}") from err
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise error(f"{what} {path} must be a mapping, got {type(data).__name__}")
    return dict(data)


def refuse_unknown(data: Mapping[str, Any], known: set[str] | frozenset[str], where: str,
                   error: ErrorType = SettingsError) -> None:
    """Raise when ``data`` has keys outside ``known``."""
    unknown = sorted(str(k) for k in set(data) - set(known))
    if unknown:
        raise error(f"unknown keys in {where}: {unknown}")


def section(cls: type[T], name: str, raw: object, error: ErrorType = SettingsError) -> T:
    """Build the dataclass ``cls`` from the mapping ``raw`` (None gives the defaults).

    Values are checked against the type of the field's default; lists become tuples of
    strings where the default is a tuple, and mappings of lists where it is a mapping.

    Raises:
        error: An unknown key, a value of the wrong type, or a value ``cls`` refuses.
    """
    if raw is None:
        return cls()
    if not isinstance(raw, Mapping):
        raise error(f"section {name!r} must be a mapping, got {type(raw).__name__}")
    names = {f.name for f in dataclasses.fields(cls) if f.init}  # type: ignore[arg-type]
    refuse_unknown(raw, names, f"section {name!r}", error)
    defaults = cls()
    values = {key: coerce(f"{name}.{key}", value, getattr(defaults, key), error)
              for key, value in raw.items()}
    try:
        return cls(**values)
    except error:
        raise
    except (TypeError, ValueError) as err:
        raise error(f"section {name!r}: {err}") from err


def coerce(name: str, value: object, default: object, error: ErrorType = SettingsError
           ) -> object:
    """``value`` checked against the type of ``default`` (see :func:`section`)."""
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise error(f"{name} must be true or false, got {value!r}")
        return value
    if isinstance(default, int | float):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise error(f"{name} must be a number, got {value!r}")
        if isinstance(default, float):
            return float(value)
        if not isinstance(value, int):
            raise error(f"{name} must be an integer, got {value!r}")
        return value
    if isinstance(default, str):
        if not isinstance(value, str):
            raise error(f"{name} must be a string, got {value!r}")
        return value
    if isinstance(default, tuple):
        return strings(name, value, error)
    if isinstance(default, Mapping) and isinstance(value, Mapping):
        return {str(k): strings(f"{name}.{k}", v, error) if isinstance(v, list) else v
                for k, v in value.items()}
    return value


def strings(name: str, value: object, error: ErrorType = SettingsError) -> tuple[str, ...]:
    """A list of non-empty strings as a tuple (stripped)."""
    if not isinstance(value, list | tuple) or not all(
            isinstance(v, str) and v.strip() for v in value):
        raise error(f"{name} must be a list of non-empty strings, got {value!r}")
    return tuple(v.strip() for v in value)


def positive(name: str, value: object, error: ErrorType = SettingsError) -> float:
    """A finite number > 0."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
            math.isfinite(value) and value > 0):
        raise error(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def non_negative(name: str, value: object, error: ErrorType = SettingsError) -> float:
    """A finite number >= 0."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
            math.isfinite(value) and value >= 0):
        raise error(f"{name} must be a finite number >= 0, got {value!r}")
    return float(value)


def positive_int(name: str, value: object, error: ErrorType = SettingsError) -> int:
    """An integer > 0."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise error(f"{name} must be a positive integer, got {value!r}")
    return value


def within(name: str, value: object, low: float, high: float,
           error: ErrorType = SettingsError, *, integer: bool = False) -> float:
    """A number in ``[low, high]`` (an integer when ``integer``)."""
    kind = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kind) or not low <= value <= high:
        what = "an integer" if integer else "a number"
        raise error(f"{name} must be {what} in [{low:g}, {high:g}], got {value!r}")
    return value


@dataclasses.dataclass(frozen=True)
class Rules:
    """The range rules of one settings section (see :class:`Checked`)."""

    section: str = ""
    error: ErrorType = SettingsError
    positive: tuple[str, ...] = ()
    non_negative: tuple[str, ...] = ()
    positive_int: tuple[str, ...] = ()
    within: Mapping[str, tuple[float, float]] = dataclasses.field(default_factory=dict)
    choices: Mapping[str, tuple[object, ...]] = dataclasses.field(default_factory=dict)

    def where(self, name: str) -> str:
        """The name of a field in messages: ``section.field`` (or the bare field name)."""
        return f"{self.section}.{name}" if self.section else name

    def check(self, obj: object) -> None:
        """Raise ``error`` when a field of ``obj`` breaks a rule."""
        for names, rule in ((self.positive, positive), (self.non_negative, non_negative),
                            (self.positive_int, positive_int)):
            for name in names:
                rule(self.where(name), getattr(obj, name), self.error)
        for name, allowed in self.choices.items():
            if getattr(obj, name) not in allowed:
                raise self.error(f"{self.where(name)} must be one of {allowed}, got "
                                 f"{getattr(obj, name)!r}")
        if self.within:
            types = {f.name: f.type for f in dataclasses.fields(obj)}  # type: ignore[arg-type]
            for name, (low, high) in self.within.items():
                within(self.where(name), getattr(obj, name), low, high, self.error,
                       integer=types.get(name) in ("int", int))


class Checked:
    """Base of a settings dataclass whose range rules are a table in its class line.

    For example::

        @dataclass(frozen=True)
        class GateConfig(settings.Checked, section="gate", error=PlannerConfigError,
                         positive=("timeout_s",)):
            timeout_s: float = 120.0

    checks ``timeout_s`` whenever a ``GateConfig`` is built and raises
    ``PlannerConfigError("gate.timeout_s must be a finite number > 0, got -1.0")``. The rules
    are those of :class:`Rules`: ``positive`` and ``non_negative`` (finite numbers),
    ``positive_int``, ``within`` (name -> closed interval; an integer where the field is
    annotated ``int``) and ``choices`` (name -> allowed values). A class with checks beyond the
    table defines ``__post_init__`` and calls ``super().__post_init__()`` first. The table is
    not inherited: a subclass of such a class states its whole table again.
    """

    rules: ClassVar[Rules] = Rules()

    def __init_subclass__(cls, *, section: str = "", error: ErrorType = SettingsError,
                          positive: tuple[str, ...] = (), non_negative: tuple[str, ...] = (),
                          positive_int: tuple[str, ...] = (),
                          within: Mapping[str, tuple[float, float]] | None = None,
                          choices: Mapping[str, tuple[object, ...]] | None = None,
                          **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.rules = Rules(section, error, positive, non_negative, positive_int,
                          dict(within or {}), dict(choices or {}))

    def __post_init__(self) -> None:
        self.rules.check(self)


__all__ = ["Checked", "Rules", "SettingsError", "coerce", "non_negative", "param", "positive",
           "positive_int", "read_mapping", "refuse_unknown", "section", "strings", "within"]
