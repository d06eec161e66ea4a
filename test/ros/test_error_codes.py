"""Error codes come from one table: every failure class maps to a code each service documents."""

from __future__ import annotations

import pytest

from mimir.ros.errors import UnmappedFailureError, error_code, set_error
from mimir_memory.errors import FAILURE_CLASSES, GraphConsistencyError, failure_class
from mimir_msgs.srv import (
    AddKeyframeLabels,
    GetKeyframeImage,
    GetSceneGraph,
    QueryKeyframes,
    SaveKeyframe,
    UpdateNode,
)

MEMORY_SERVICES = (UpdateNode, GetSceneGraph, SaveKeyframe, QueryKeyframes, GetKeyframeImage,
                   AddKeyframeLabels)


@pytest.mark.parametrize("service", MEMORY_SERVICES, ids=lambda s: s.__name__)
def test_every_failure_class_has_a_documented_code(service: type) -> None:
    response = service.Response
    codes = {name: getattr(response, name) for name in dir(response)
             if name.isupper() and isinstance(getattr(response, name), int)}
    for failure in sorted(set(FAILURE_CLASSES.values())):
        code = error_code(response, failure)
        assert code in codes.values() and code != codes["NONE"], (service, failure)
        if failure in codes:  # a class the service names gets exactly that code
            assert code == codes[failure]


def test_the_documented_codes_of_update_node() -> None:
    response = UpdateNode.Response
    assert error_code(response, "INVALID_REQUEST") == 2
    assert error_code(response, failure_class(GraphConsistencyError("cycle"))) == 2
    assert error_code(response, "STORAGE_ERROR") == 4
    filled = set_error(UpdateNode.Response(), "DUPLICATE_EVENT", "used before")
    assert (filled.error_code, filled.error_msg) == (3, "used before")
    with pytest.raises(UnmappedFailureError):
        error_code(response, "NO_SUCH_CLASS")
    with pytest.raises(UnmappedFailureError):
        error_code(response, "NONE")
