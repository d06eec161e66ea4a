"""The one loader of settings files: YAML mappings into frozen dataclasses, with typed errors.

Every core keeps its settings in frozen dataclasses whose defaults match the shipped YAML file
(``config/memory.yaml``, ``planner.yaml``, ``reasoning.yaml``, ``sim.yaml``). This module reads
such a file and builds one dataclass per section: unknown keys are refused, every value must
have the type of its default (an int is accepted for a float), lists become tuples, and each
dataclass's ``__post_init__`` checks its own ranges with the validators below. Errors are raised
as the caller's error class (a subclass of ``ValueError``), so each core keeps its own typed
error while the rules are written once.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

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


__all__ = ["SettingsError", "coerce", "non_negative", "param", "positive", "positive_int",
           "read_mapping", "refuse_unknown", "section", "strings"]
