"""Declare a node's parameters from a frozen dataclass and read them back into one.

Every field of the config dataclass becomes a parameter with a descriptor: its description comes
from the field's metadata (``mimir.settings.param`` writes it), its type from the annotation, its
default from the dataclass default. Fields marked read-only cannot change at run time.

    @dataclass(frozen=True)
    class Config:
        rate_hz: float = param(2.0, "processing rate (Hz)")
        camera: str = param("pole", "camera to read", read_only=True)

    config = declare_config(node, Config)
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, TypeVar

from rcl_interfaces.msg import ParameterDescriptor, ParameterType
from rclpy.exceptions import InvalidParameterTypeException, InvalidParameterValueException
from rclpy.node import Node

T = TypeVar("T")


class ConfigError(ValueError):
    """A parameter value that does not fit its config field."""


_TYPES: dict[Any, int] = {
    bool: ParameterType.PARAMETER_BOOL,
    int: ParameterType.PARAMETER_INTEGER,
    float: ParameterType.PARAMETER_DOUBLE,
    str: ParameterType.PARAMETER_STRING,
    list[str]: ParameterType.PARAMETER_STRING_ARRAY,
    list[float]: ParameterType.PARAMETER_DOUBLE_ARRAY,
    list[int]: ParameterType.PARAMETER_INTEGER_ARRAY,
    list[bool]: ParameterType.PARAMETER_BOOL_ARRAY,
    tuple[str, ...]: ParameterType.PARAMETER_STRING_ARRAY,
    tuple[float, ...]: ParameterType.PARAMETER_DOUBLE_ARRAY,
    tuple[int, ...]: ParameterType.PARAMETER_INTEGER_ARRAY,
}


def _default(field: dataclasses.Field[Any]) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    raise ConfigError(f"config field {field.name!r} needs a default to be a parameter")


def declare_config(node: Node, config_type: type[T], prefix: str = "") -> T:
    """Declare one parameter per field of ``config_type`` and return the values read back.

    Raises:
        ConfigError: a field type that cannot be a parameter, or a value of the wrong type.
    """
    if not dataclasses.is_dataclass(config_type):
        raise ConfigError(f"{config_type!r} is not a dataclass")
    hints = typing.get_type_hints(config_type)
    values: dict[str, Any] = {}
    for field in dataclasses.fields(config_type):
        if not field.init:
            continue
        annotation = hints[field.name]
        param_type = _TYPES.get(annotation)
        if param_type is None:
            raise ConfigError(f"field {field.name!r} has type {annotation!r}, not a parameter type")
        default = _default(field)
        if isinstance(default, tuple):
            default = list(default)
        descriptor = ParameterDescriptor(
            name=prefix + field.name,
            type=param_type,
            description=str(field.metadata.get("description", "")),
            read_only=bool(field.metadata.get("read_only", False)),
        )
        try:
            param = node.declare_parameter(prefix + field.name, default, descriptor)
        except (InvalidParameterTypeException, InvalidParameterValueException) as err:
            raise ConfigError(f"parameter {prefix + field.name!r}: {err}") from err
        value = param.value
        if annotation is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if typing.get_origin(annotation) is tuple and value is not None:
            value = tuple(value)
        elif typing.get_origin(annotation) is list and value is not None:
            value = list(value)
        values[field.name] = value
    try:
        return config_type(**values)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"invalid parameters for {config_type.__name__}: {err}") from err
