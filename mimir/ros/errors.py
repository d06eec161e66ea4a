"""Error codes of service responses, chosen from a failure class by one table.

Every mimir service response carries an UPPER_CASE ``error_code`` constant and an
``error_msg``. A core names the failure class of an error (``INVALID_REQUEST``,
``UNKNOWN_NODE``, ``STORAGE_ERROR``...; see ``mimir_memory.errors.FAILURE_CLASSES``); this module
turns that name into the code the service documents. Where a service has no code of that name,
:data:`CODE_FALLBACKS` says which of its own codes stands for the class; a class a service can
neither name nor fall back from is a programming error (:class:`UnmappedFailureError`), which a
test rules out for every service and class.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

CODE_FALLBACKS: Mapping[str, Mapping[str, str]] = {
    # service (the .srv name) -> failure class -> the code of that service that stands for it
    "GetKeyframeImage": {"INVALID_REQUEST": "UNKNOWN_KEYFRAME",
                         "UNKNOWN_NODE": "UNKNOWN_KEYFRAME",
                         "UNKNOWN_GOAL": "UNKNOWN_KEYFRAME",
                         "DUPLICATE_EVENT": "STORAGE_ERROR"},
    "AddKeyframeLabels": {"UNKNOWN_NODE": "INVALID_REQUEST",
                          "UNKNOWN_GOAL": "INVALID_REQUEST",
                          "DUPLICATE_EVENT": "INVALID_REQUEST"},
    "SaveKeyframe": {"UNKNOWN_NODE": "INVALID_REQUEST",
                     "UNKNOWN_KEYFRAME": "INVALID_REQUEST",
                     "UNKNOWN_GOAL": "INVALID_REQUEST",
                     "DUPLICATE_EVENT": "INVALID_REQUEST"},
    "QueryKeyframes": {"UNKNOWN_NODE": "INVALID_REQUEST",
                       "UNKNOWN_KEYFRAME": "INVALID_REQUEST",
                       "UNKNOWN_GOAL": "INVALID_REQUEST",
                       "DUPLICATE_EVENT": "INVALID_REQUEST"},
    "GetSceneGraph": {"UNKNOWN_KEYFRAME": "INVALID_REQUEST",
                      "UNKNOWN_GOAL": "INVALID_REQUEST",
                      "DUPLICATE_EVENT": "STORAGE_ERROR"},
    "UpdateNode": {"UNKNOWN_KEYFRAME": "INVALID_REQUEST",
                   "UNKNOWN_GOAL": "INVALID_REQUEST"},
}
"""Per service, the code that stands for a failure class the service has no code of."""


class UnmappedFailureError(LookupError):
    """A failure class that a service's response can neither name nor fall back from."""


def service_name(response_type: type[Any]) -> str:
    """The .srv name of a response class (``UpdateNode_Response`` -> ``UpdateNode``)."""
    return response_type.__name__.removesuffix("_Response")


def error_code(response_type: type[Any], failure: str) -> int:
    """The ``error_code`` value of ``response_type`` for the failure class ``failure``.

    Raises:
        UnmappedFailureError: Neither the response nor :data:`CODE_FALLBACKS` knows it.
    """
    name = failure
    if not hasattr(response_type, name):
        name = CODE_FALLBACKS.get(service_name(response_type), {}).get(failure, "")
    value = getattr(response_type, name, None) if name else None
    if not isinstance(value, int) or name == "NONE":
        raise UnmappedFailureError(
            f"{service_name(response_type)} has no error code for failure class {failure!r}")
    return value


def set_error(response: Any, failure: str, message: str) -> Any:
    """Fill ``error_code`` (from ``failure``) and ``error_msg`` of a response; returns it."""
    response.error_code = error_code(type(response), failure)
    response.error_msg = message or failure.lower().replace("_", " ")
    return response
