"""Float fields that arrive as the numbers the code assigned.

rosidl_generator_py's C conversion (``_msg_support.c.em``, Kilted 0.24) reads a float32/float64
field with ``PyFloat_AS_DOUBLE`` and only an ``assert(PyFloat_Check(...))`` that release builds
drop, while the generated Python setters store any value unchanged unless
``ROS_PYTHON_CHECK_FIELDS`` is set. A Python ``int`` (or ``bool``, ``numpy.int64``,
``numpy.float32``) in a scalar float field is therefore sent as the bits of the object's header:
``Point(x=1)`` arrives as 5e-324, ``Point(x=-3)`` as nan, ``Property(confidence=1)`` as 0.0.
Float sequences and fixed arrays are safe: their setters convert to ``array.array`` or
``numpy.ndarray``.

scripts/setup.sh patches the generator template for the interfaces it builds (mimir_msgs,
tf2_msgs), but the standard messages (geometry_msgs, visualization_msgs, ...) come prebuilt in
wheels, they are nested in mimir_msgs (Point, Pose, Vector3), and on a robot mimir_msgs is built
by the distribution's generator. So every message mimir sends goes through
:func:`coerce_floats` first:

* publishers are created with ``publisher_class=FloatSafePublisher``;
* service callbacks and action execute callbacks that answer with float fields are wrapped in
  :func:`coerced` (the response or result is coerced);
* action feedback, service requests and action goals are passed through :func:`coerce_floats`
  where they are sent.

Importing this module changes nothing global.
"""

from __future__ import annotations

import array
import functools
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import numpy as np
from rclpy.publisher import Publisher
from rosidl_parser.definition import AbstractNestedType, Array, BasicType, NamespacedType

M = TypeVar("M")
F = TypeVar("F", bound=Callable[..., Any])

# typename -> (array.array typecode, numpy dtype) of the typed storage the setters produce
_FLOAT_STORAGE: dict[str, tuple[str | None, Any]] = {
    "float": ("f", np.float32),
    "double": ("d", np.float64),
    "long double": (None, None),
}


@dataclass(frozen=True)
class _Plan:
    """The fields of one message type that hold floats, directly or in nested messages."""

    scalars: tuple[str, ...]
    # (field, array.array typecode, numpy dtype, fixed-size array)
    sequences: tuple[tuple[str, str | None, Any, bool], ...]
    # (field, is a sequence or array of messages)
    nested: tuple[tuple[str, bool], ...]


_PLANS: dict[type, _Plan | None] = {}


def _message_class(namespaced: NamespacedType) -> type:
    module = importlib.import_module(".".join(namespaced.namespaces))
    cls: type = getattr(module, namespaced.name)
    return cls


def _plan(cls: type) -> _Plan | None:
    """The float fields of a message class (None when it holds no float anywhere), cached."""
    try:
        return _PLANS[cls]
    except KeyError:
        pass
    if not hasattr(cls, "SLOT_TYPES"):  # not a generated message (None, bytes, ...)
        return None
    scalars: list[str] = []
    sequences: list[tuple[str, str | None, Any, bool]] = []
    nested: list[tuple[str, bool]] = []
    fields: Any = cls
    for name, slot in zip(fields.get_fields_and_field_types(), fields.SLOT_TYPES, strict=True):
        is_nested = isinstance(slot, AbstractNestedType)
        value_type = slot.value_type if is_nested else slot
        if isinstance(value_type, BasicType) and value_type.typename in _FLOAT_STORAGE:
            if is_nested:
                typecode, dtype = _FLOAT_STORAGE[value_type.typename]
                sequences.append((name, typecode, dtype, isinstance(slot, Array)))
            else:
                scalars.append(name)
        elif isinstance(value_type, NamespacedType) and _plan(_message_class(value_type)):
            nested.append((name, is_nested))
    plan = _Plan(tuple(scalars), tuple(sequences), tuple(nested)) if (
        scalars or sequences or nested) else None
    _PLANS[cls] = plan
    return plan


def _as_float(value: Any, cls: type, name: str) -> float:
    if isinstance(value, (str, bytes, bytearray)):
        raise TypeError(f"{cls.__name__}.{name} is a float field, got {value!r}")
    try:
        return float(value)
    except (TypeError, ValueError) as err:
        raise TypeError(f"{cls.__name__}.{name} is a float field, got {value!r}") from err


def coerce_floats(msg: M) -> M:
    """Make every float field of ``msg`` (recursively) hold a Python float; returns ``msg``.

    Scalar float fields holding anything but a ``float`` (int, bool, numpy scalar) are converted
    in place; float sequences and arrays not held in the typed storage the generated setters
    produce are set again as lists of floats. Raises :class:`TypeError` for a value that is not a
    number. Cheap for types without float fields (one dict lookup).
    """
    cls = type(msg)
    plan = _plan(cls)
    if plan is None:
        return msg
    for name in plan.scalars:
        value = getattr(msg, name)
        if type(value) is not float:
            setattr(msg, name, _as_float(value, cls, name))
    for name, typecode, dtype, fixed in plan.sequences:
        value = getattr(msg, name)
        if fixed and isinstance(value, np.ndarray) and value.dtype == dtype:
            continue
        if not fixed and isinstance(value, array.array) and value.typecode == typecode:
            continue
        setattr(msg, name, [_as_float(v, cls, name) for v in value])
    for name, is_sequence in plan.nested:
        value = getattr(msg, name)
        if is_sequence:
            for item in value:
                coerce_floats(item)
        else:
            coerce_floats(value)
    return msg


def coerced(callback: F) -> F:
    """``callback`` with :func:`coerce_floats` applied to what it returns.

    For service callbacks (the response) and action execute callbacks (the result).
    """

    @functools.wraps(callback)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return coerce_floats(callback(*args, **kwargs))

    return cast(F, wrapper)


class FloatSafePublisher(Publisher):
    """A publisher that applies :func:`coerce_floats` to every message before sending it.

    Pass it as ``node.create_publisher(..., publisher_class=FloatSafePublisher)``.
    """

    def publish(self, msg: Any) -> None:
        if not isinstance(msg, bytes):
            coerce_floats(msg)
        super().publish(msg)
