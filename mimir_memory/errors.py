"""Typed errors raised by the memory core.

Every error derives from :class:`MemoryStoreError` so a node can catch the whole family in one
place and turn it into an error code, while tests can check for the precise cause.
"""

from __future__ import annotations

from typing import ClassVar


class MemoryStoreError(Exception):
    """Base class of every error raised by ``mimir_memory``."""


class _UnknownIdError(KeyError):
    """What the unknown-id errors (node, keyframe, goal) share.

    Unlike a plain ``KeyError``, the message prints as written, without quotes.
    """

    what: ClassVar[str] = "id"

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else f"unknown {self.what}"


class InvalidEventError(MemoryStoreError, ValueError):
    """An event whose fields have the wrong type or an unknown kind, source or verdict."""


class DuplicateEventError(MemoryStoreError):
    """An event id that is already in the log with different content."""


class UnknownNodeError(MemoryStoreError, _UnknownIdError):
    """A node id that is not in the scene graph."""

    what = "node"


class InvalidValueError(MemoryStoreError, ValueError):
    """A value (position, confidence, property, label...) that is malformed or not finite."""


class GraphConsistencyError(MemoryStoreError):
    """An update that would break the graph's invariants (e.g. a parent cycle)."""


class SchemaVersionError(MemoryStoreError):
    """A database written by a newer schema version, or of the wrong kind."""


class StorageError(MemoryStoreError, OSError):
    """The database or the image folder cannot be written (read-only, disk full...)."""


class ReadOnlyStoreError(MemoryStoreError):
    """A write attempted through a store opened read-only."""


class WriterBusyError(MemoryStoreError):
    """Another process already holds the single writer lock of a database."""


class InvalidImageError(MemoryStoreError, ValueError):
    """An image that is not an 8-bit grey/BGR array, or is empty."""


class ImageTooLargeError(InvalidImageError):
    """An image with more pixels than the configured maximum."""


class UnknownKeyframeError(MemoryStoreError, _UnknownIdError):
    """A keyframe id that is not in the keyframe index."""

    what = "keyframe"


class UnknownGoalError(MemoryStoreError, _UnknownIdError):
    """A goal id that is not in task memory."""

    what = "goal"


class InvalidGoalError(MemoryStoreError, ValueError):
    """A goal or predicate that is malformed (unknown prerequisite, cycle, bad arguments)."""


class ConfigError(MemoryStoreError, ValueError):
    """A memory configuration file or value that is malformed."""


FAILURE_CLASSES: dict[type[MemoryStoreError], str] = {
    UnknownNodeError: "UNKNOWN_NODE",
    UnknownKeyframeError: "UNKNOWN_KEYFRAME",
    UnknownGoalError: "UNKNOWN_GOAL",
    DuplicateEventError: "DUPLICATE_EVENT",
    InvalidEventError: "INVALID_REQUEST",
    InvalidValueError: "INVALID_REQUEST",
    GraphConsistencyError: "INVALID_REQUEST",
    InvalidImageError: "INVALID_REQUEST",
    InvalidGoalError: "INVALID_REQUEST",
    ConfigError: "INVALID_REQUEST",
    StorageError: "STORAGE_ERROR",
    ReadOnlyStoreError: "STORAGE_ERROR",
    WriterBusyError: "STORAGE_ERROR",
    SchemaVersionError: "STORAGE_ERROR",
}
"""The failure class (the UPPER_CASE error-code name of the services) of every memory error.

Services look a caught error up here, most specific class first, and answer with the code of
that name; README's "Reliability" section prints this table.
"""


def failure_class(err: BaseException) -> str:
    """The failure class of ``err``: the entry of its most specific class in the table.

    Errors that are not memory errors are ``INVALID_REQUEST`` when they are ``ValueError``s
    (bad input) and ``STORAGE_ERROR`` otherwise.
    """
    for cls in type(err).__mro__:
        name = FAILURE_CLASSES.get(cls)
        if name is not None:
            return name
    return "INVALID_REQUEST" if isinstance(err, ValueError) else "STORAGE_ERROR"
