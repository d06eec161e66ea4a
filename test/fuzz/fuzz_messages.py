"""Hypothesis strategies for ROS messages, built from their rosidl definitions.

Every field gets values a broken or hostile peer could send: NaN, infinities and extremes for
floats, the type's limits for integers, empty, huge, control-character and markup strings,
deep and huge JSON where a field carries JSON, stamps at zero, far in the past and far in the
future, and sequences empty, short or long. Fields named like ids draw from the ids the rig
knows (real, so the request reaches the code behind the check) as well as from garbage.
Images get wrong sizes, steps and encodings as well as consistent ones.
"""

from __future__ import annotations

import importlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hypothesis import strategies as st
from rosidl_parser import definition as d

#: Strings a peer might send on purpose: markup, paths, SQL, format strings, JSON look-alikes.
NASTY_STRINGS = (
    "", " ", "\t\n", "<script>alert(1)</script>", "<b>bold</b>", "../../../etc/passwd",
    "'; DROP TABLE events; --", "%s%s%n", "{}", "[]", "null", "NaN", "Infinity", "-1",
    "\u202e\u0041\u0301", "\U0001f600" * 3, "map", "base_link", "odom", "unknown", "true",
)
FLOAT_EXTREMES = (0.0, -0.0, 1e-300, -1e-300, 1e300, -1e300, math.nan, math.inf, -math.inf)
FLOAT32_EXTREMES = (0.0, -0.0, 1e-38, -1e-38, 3.4e38, -3.4e38, math.nan, math.inf, -math.inf)
#: Stamps: zero, far past, far future, a plausible now, and the type's limits.
STAMP_SECONDS = (0, 1, 2**31 - 1, -(2**31), 1_700_000_000, 5, 100)
IMAGE_ENCODINGS = ("rgb8", "bgr8", "rgba8", "mono8", "mono16", "16UC1", "32FC1", "8UC3", "bogus",
                   "", "yuv422")

_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1), "uint8": (0, 2**8 - 1), "char": (0, 2**8 - 1),
    "int16": (-(2**15), 2**15 - 1), "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1), "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1), "uint64": (0, 2**64 - 1),
    "short": (-(2**15), 2**15 - 1), "unsigned short": (0, 2**16 - 1),
    "long": (-(2**31), 2**31 - 1), "unsigned long": (0, 2**32 - 1),
    "long long": (-(2**63), 2**63 - 1), "unsigned long long": (0, 2**64 - 1),
}

Hints = Mapping[str, st.SearchStrategy[Any]]


def text() -> st.SearchStrategy[str]:
    """Strings from empty to huge, with control characters (no NUL: a C string cannot carry one
    and rclpy refuses it before it leaves the process) and markup."""
    chars = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
    common = st.one_of(
        st.sampled_from(NASTY_STRINGS),
        st.text(chars, max_size=40),
        st.text(st.characters(min_codepoint=1, max_codepoint=31), min_size=1, max_size=20),
    )
    huge = st.integers(1_000, 200_000).map(lambda n: "x" * n)
    # one string in twenty is huge: enough to hit every length check, not so many that each
    # request carries megabytes
    return st.integers(0, 19).flatmap(lambda i: huge if i == 0 else common)


def json_text() -> st.SearchStrategy[str]:
    """JSON-looking strings: valid objects of odd shapes, deep nesting, huge arrays, broken."""
    leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                     st.text(max_size=10))
    nested = st.recursive(leaf, lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)),
        max_leaves=20)
    return st.one_of(
        nested.map(json.dumps),
        st.integers(50, 3000).map(lambda n: "[" * n + "]" * n),
        st.integers(1_000, 100_000).map(lambda n: json.dumps({"v": list(range(n))})),
        st.sampled_from(('{"value": NaN}', '{"value": Infinity}', '{"a":', "[1, 2", "{'a': 1}",
                         '{"__proto__": {}}', '"just a string"')),
        text(),
    )


def stamp(cls: type) -> st.SearchStrategy[Any]:
    """builtin_interfaces/Time (or Duration): zero, far past, far future, plausible."""
    lo, hi = _INT_RANGES["int32"]
    return st.builds(cls, sec=st.one_of(st.sampled_from(STAMP_SECONDS), st.integers(lo, hi)),
                     nanosec=st.one_of(st.just(0), st.integers(0, 999_999_999)))


def _basic(typename: str) -> st.SearchStrategy[Any]:
    if typename == "boolean":
        return st.booleans()
    if typename in ("float", "float32"):
        return st.one_of(st.sampled_from(FLOAT32_EXTREMES),
                         st.floats(width=32, allow_nan=True, allow_infinity=True))
    if typename in ("double", "float64", "long double"):
        return st.one_of(st.sampled_from(FLOAT_EXTREMES),
                         st.floats(allow_nan=True, allow_infinity=True))
    if typename == "octet":
        return st.binary(min_size=1, max_size=1)
    lo, hi = _INT_RANGES[typename]
    return st.one_of(st.sampled_from(sorted({lo, hi, 0, min(hi, 1)})), st.integers(lo, hi))


def message_class(t: d.NamespacedType) -> type:
    """The Python class of a namespaced rosidl type (e.g. mimir_msgs/msg/Property)."""
    module = importlib.import_module(".".join(t.namespaces))
    cls: type = getattr(module, t.name)
    return cls


def _field(t: d.AbstractType, name: str, hints: Hints, depth: int) -> st.SearchStrategy[Any]:
    if name in hints:
        return hints[name]
    if isinstance(t, d.BasicType):
        return _basic(t.typename)
    if isinstance(t, d.AbstractString | d.AbstractWString):
        if name.endswith("_json"):
            return json_text()
        if name.endswith(("_id", "_ids")) and "id" in hints:
            return st.one_of(hints["id"], text())
        return text()
    if isinstance(t, d.NamespacedType):
        return messages(message_class(t), hints, depth + 1)
    if isinstance(t, d.Array):
        return st.lists(_field(t.value_type, name, hints, depth), min_size=t.size,
                        max_size=t.size)
    if isinstance(t, d.AbstractSequence):
        item = t.value_type
        if isinstance(item, d.BasicType) and item.typename in ("uint8", "octet", "char"):
            return st.binary(max_size=4096).map(list)
        top = t.maximum_size if isinstance(t, d.BoundedSequence) else (4 if depth else 24)
        return st.one_of(st.just([]), st.lists(_field(item, name, hints, depth), max_size=top))
    raise TypeError(f"no strategy for {t!r} ({name})")


def messages(cls: type, hints: Hints | None = None, depth: int = 0) -> st.SearchStrategy[Any]:
    """Instances of the rosidl message class ``cls`` with every field drawn as above.

    ``hints`` maps a field name to the strategy that replaces the generated one (the key
    ``id`` supplies known ids for string fields named ``*_id``)."""
    hints = hints or {}
    full = f"{cls.__module__.split('.')[0]}/{cls.__name__}"
    if full in ("builtin_interfaces/Time", "builtin_interfaces/Duration"):
        return stamp(cls)
    if full == "sensor_msgs/Image" and "image" not in hints:
        return images()
    if depth > 6:
        return st.builds(cls)
    fields = dict(zip(cls.get_fields_and_field_types(), cls.SLOT_TYPES, strict=True))
    parts = {name: _field(t, name, hints, depth) for name, t in fields.items()}

    def build(values: dict[str, Any]) -> Any:
        msg = cls()
        for name, value in values.items():
            setattr(msg, name, value)
        return msg
    return st.fixed_dictionaries(parts).map(build)


def images(frame_ids: Sequence[str] = ("", "map", "camera", "cam_optical")
           ) -> st.SearchStrategy[Any]:
    """sensor_msgs/Image: consistent small images of every encoding, and ones whose size,
    step and data length disagree."""
    from builtin_interfaces.msg import Time
    from sensor_msgs.msg import Image

    def consistent(w: int, h: int, enc: str, ts: Any, frame: str) -> Image:
        size = {"rgb8": 3, "bgr8": 3, "rgba8": 4, "mono8": 1, "mono16": 2, "16UC1": 2,
                "32FC1": 4, "8UC3": 3}.get(enc, 1)
        msg = Image(width=w, height=h, encoding=enc, step=w * size, is_bigendian=0)
        msg.data = bytes((i * 37) % 256 for i in range(w * h * size))
        msg.header.stamp, msg.header.frame_id = ts, frame
        return msg

    def broken(w: int, h: int, enc: str, step: int, data: bytes, *, ts: Any,
               frame: str) -> Image:
        msg = Image(width=w, height=h, encoding=enc, step=step, is_bigendian=0)
        msg.data = data
        msg.header.stamp, msg.header.frame_id = ts, frame
        return msg
    frames = st.sampled_from(frame_ids)
    return st.one_of(
        st.builds(consistent, st.integers(1, 48), st.integers(1, 36),
                  st.sampled_from(IMAGE_ENCODINGS), stamp(Time), frames),
        st.builds(broken, st.integers(0, 5000), st.integers(0, 5000),
                  st.sampled_from(IMAGE_ENCODINGS), st.integers(0, 2**32 - 1),
                  st.binary(max_size=2048), ts=stamp(Time), frame=frames),
    )


def known(values: Sequence[str]) -> st.SearchStrategy[str]:
    """One of ``values`` (ids the rig knows), or a near miss of one."""
    pool = list(values) or ["none"]
    return st.one_of(st.sampled_from(pool),
                     st.sampled_from(pool).map(lambda v: v.upper()),
                     st.sampled_from(pool).map(lambda v: v + "_9"))


def overriding(base: st.SearchStrategy[Any],
               fix: Callable[[Any], Any]) -> st.SearchStrategy[Any]:
    """``base`` with ``fix`` applied to each drawn message (e.g. set a field that routes it)."""
    def apply(msg: Any) -> Any:
        fix(msg)
        return msg
    return base.map(apply)


def mutants(valid: Callable[[], Any], hints: Hints | None = None,
            most: int = 2) -> st.SearchStrategy[Any]:
    """A valid message (from ``valid()``) with one to ``most`` of its fields replaced by
    generated values: the request gets past the first checks and reaches the ones behind."""
    hints = hints or {}
    cls = type(valid())
    fields = dict(zip(cls.get_fields_and_field_types(), cls.SLOT_TYPES, strict=True))
    parts = {name: _field(t, name, hints, 0) for name, t in fields.items()}

    @st.composite
    def draw(draw_from: Any) -> Any:
        msg = valid()
        names = draw_from(st.lists(st.sampled_from(sorted(parts)), min_size=1,
                                   max_size=min(most, len(parts)), unique=True))
        for name in names:
            setattr(msg, name, draw_from(parts[name]))
        return msg
    return draw()


def cases(cls: type, valid: Callable[[], Any] | None = None,
          hints: Hints | None = None) -> st.SearchStrategy[Any]:
    """Whole generated messages and, given a valid example, its mutants."""
    whole = messages(cls, hints)
    return whole if valid is None else st.one_of(whole, mutants(valid, hints))
