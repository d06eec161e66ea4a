"""Fuzz the memory nodes (scene graph, keyframes) over DDS: every topic they read, every service.

Each interface gets ``MIMIR_FUZZ_CASES`` generated inputs (a few in ``make test``, hundreds in
``make fuzz``): whole generated messages and valid ones with one or two fields replaced. The
nodes must keep running, answer every request with a documented code, write nothing for a
refused request, keep memory passing its check, and still do their job afterwards.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from fuzz_messages import cases, known, mutants
from fuzz_rigs import CAMERA, MemoryRig, memory_rig
from fuzz_runner import TIMEOUT_S, Row, fuzz_interface
from hypothesis import strategies as st
from ros_helpers import observation_batch, observation_msg
from sensor_msgs.msg import CameraInfo, Image

from mimir.ros.time import from_seconds
from mimir_msgs.msg import (
    ContentItem,
    InteractionEvent,
    KeyframeLabel,
    MemoryEvent,
    ObjectObservation,
    ObjectObservationArray,
    Property,
    Segmentation,
)
from mimir_msgs.srv import (
    AddKeyframeLabels,
    GetKeyframeImage,
    GetSceneGraph,
    QueryKeyframes,
    SaveKeyframe,
    UpdateNode,
)

pytestmark = [pytest.mark.ros, pytest.mark.timeout(TIMEOUT_S)]


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MemoryRig]:
    with memory_rig(tmp_path_factory.mktemp("fuzz_memory")) as rig:
        yield rig


def _valid_observation() -> ObjectObservation:
    return observation_msg("cup", (1.2, 0.4, 0.9), detection_id="fz-cup", stamp=time.time())


def _observations(rig: MemoryRig) -> st.SearchStrategy[Any]:
    """Whole arrays, and valid one-observation arrays whose observation is a mutant."""
    hints = {"id": known(rig.ids)}
    one = mutants(_valid_observation, hints).map(observation_batch)
    return st.one_of(cases(ObjectObservationArray, hints=hints), one)


def _interaction(rig: MemoryRig) -> st.SearchStrategy[Any]:
    def valid() -> InteractionEvent:
        msg = InteractionEvent(interaction_id="fz-int", phase=InteractionEvent.PHASE_ENDED,
                               primitive="open", target_id=rig.ids[0], success=False,
                               outcome="NO_MOTION")
        now = time.time()
        msg.header.stamp = from_seconds(now)
        msg.window_start, msg.window_end = from_seconds(now - 2.0), from_seconds(now)
        return msg
    return cases(InteractionEvent, valid, {"id": known(rig.ids)})


def _update(rig: MemoryRig) -> st.SearchStrategy[Any]:
    def valid() -> UpdateNode.Request:
        return UpdateNode.Request(
            node_id=rig.ids[0], source="interaction",
            properties=[Property(name="openable", value_json="true", confidence=0.8)],
            set_contents=True, contents=[ContentItem(name="cup", node_id=rig.ids[-1])],
            verdict="admit")
    return cases(UpdateNode.Request, valid, {"id": known(rig.ids)})


def _save(rig: MemoryRig) -> st.SearchStrategy[Any]:
    def valid() -> SaveKeyframe.Request:
        return SaveKeyframe.Request(camera=CAMERA, stamp=from_seconds(rig.frames_at),
                                    trigger="operator", linked_nodes=rig.ids[:1],
                                    labels=[KeyframeLabel(text="fuzz", source="operator")])
    return cases(SaveKeyframe.Request, valid,
                 {"id": known(rig.ids), "camera": st.sampled_from([CAMERA, "", "wrist", "../x"])})


def _by_keyframe(cls: type, rig: MemoryRig) -> st.SearchStrategy[Any]:
    def valid() -> Any:
        return cls(keyframe_id=rig.keyframe_ids[0])
    return cases(cls, valid, {"id": known(rig.keyframe_ids + rig.ids)})


INTERFACES: dict[str, tuple[str, str, type, Any]] = {
    # interface: (node, kind, type, strategy factory)
    "observations": ("scene_graph", "topic", ObjectObservationArray, _observations),
    "interaction_events": ("scene_graph+keyframes", "topic", InteractionEvent, _interaction),
    "memory_events": ("keyframes", "topic", MemoryEvent,
                      lambda rig: cases(MemoryEvent, hints={"id": known(rig.ids)})),
    f"cameras/{CAMERA}/color/image_raw": ("keyframes", "topic", Image,
                                          lambda rig: cases(Image)),
    f"cameras/{CAMERA}/color/camera_info": ("keyframes", "topic", CameraInfo,
                                            lambda rig: cases(CameraInfo)),
    f"cameras/{CAMERA}/segmentation": ("keyframes", "topic", Segmentation,
                                       lambda rig: cases(Segmentation)),
    "update_node": ("scene_graph", "service", UpdateNode, _update),
    "get_scene_graph": ("scene_graph", "service", GetSceneGraph,
                        lambda rig: cases(GetSceneGraph.Request,
                                          hints={"id": known(rig.ids)})),
    "save_keyframe": ("keyframes", "service", SaveKeyframe, _save),
    "query_keyframes": ("keyframes", "service", QueryKeyframes,
                        lambda rig: cases(QueryKeyframes.Request,
                                          hints={"id": known(rig.ids)})),
    "get_keyframe_image": ("keyframes", "service", GetKeyframeImage,
                           lambda rig: _by_keyframe(GetKeyframeImage.Request, rig)),
    "add_keyframe_labels": ("keyframes", "service", AddKeyframeLabels,
                            lambda rig: _by_keyframe(AddKeyframeLabels.Request, rig)),
}


@pytest.mark.parametrize("interface", list(INTERFACES))
def test_memory_node_interface_survives_fuzzing(rig: MemoryRig, interface: str) -> None:
    node, kind, msg_type, strategy = INTERFACES[interface]
    fuzz_interface(Row(node, interface, kind), rig.driver, rig.ex, msg_type, strategy(rig),
                   probe=rig.probe, memory=rig.memory,
                   writes=("world",) if node == "scene_graph" else ("keyframes",))
