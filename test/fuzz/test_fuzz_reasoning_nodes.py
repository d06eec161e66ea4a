"""Fuzz the analyzer and the planner over DDS: every topic they read and every service they serve.

They run beside the seeded memory nodes (their memory clients need them). The analyzer uses the
offline reasoner; the planner has no executor to drive, so an instruction it accepts ends blocked or
failed once it needs the robot. Checks as in the memory module: nodes keep spinning, replies carry
documented codes, refused requests write nothing, memory stays sound, and afterwards the
analyzer still refuses an interaction it has no frames for with its documented code, the
planner still recalls a remembered object, and the memory nodes still work.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fuzz_messages import cases, known
from fuzz_rigs import CAMERA, MemoryRig, memory_rig
from fuzz_runner import TIMEOUT_S, Row, fuzz_interface
from geometry_msgs.msg import PoseStamped
from hypothesis import strategies as st
from rclpy.context import Context
from rclpy.parameter import Parameter
from sensor_msgs.msg import CameraInfo, Image
from std_msgs.msg import Float64

from mimir.nodes.planner.analyzer_node import AnalyzerNode
from mimir.nodes.planner.planner_node import PlannerNode
from mimir.ros.time import from_seconds
from mimir_msgs.action import RunTask
from mimir_msgs.msg import InteractionEvent, ObjectObservationArray, SceneGraph
from mimir_msgs.srv import (
    AnalyzeInteraction,
    ApprovePrimitive,
    ListPendingPrimitives,
    RetrieveMemory,
)
from mimir_robot.contract import TOPIC_EE_ACHIEVED, TOPIC_EE_COMMANDED, TOPIC_GRIPPER

pytestmark = [pytest.mark.ros, pytest.mark.timeout(TIMEOUT_S)]


def _analyzer(context: Context, _memory: Path) -> AnalyzerNode:
    return AnalyzerNode(context=context, parameter_overrides=[
        Parameter("vlm_backend", value="offline"), Parameter("cameras", value=[CAMERA]),
        Parameter("frame_wait_s", value=0.3), Parameter("service_timeout_s", value=5.0)])


def _planner(context: Context, memory: Path) -> PlannerNode:
    return PlannerNode(context=context, parameter_overrides=[
        Parameter("memory_dir", value=str(memory)), Parameter("server_wait_s", value=0.5)])


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MemoryRig]:
    with memory_rig(tmp_path_factory.mktemp("fuzz_reasoning"), _analyzer, _planner) as rig:
        rig.ready(AnalyzeInteraction, "analyze_interaction")
        rig.ready(RetrieveMemory, "retrieve_memory")
        yield rig


def _ended(rig: MemoryRig) -> InteractionEvent:
    now = time.time()
    msg = InteractionEvent(interaction_id=f"fz-{now:.3f}", phase=InteractionEvent.PHASE_ENDED,
                           primitive="open", target_id=rig.ids[0], success=False,
                           outcome="NO_MOTION")
    msg.header.stamp = from_seconds(now)
    msg.window_start, msg.window_end = from_seconds(now - 2.0), from_seconds(now)
    return msg


def _probe(rig: MemoryRig) -> None:
    """The analyzer refuses a window it has no frames for with its code (it looked, found
    none, wrote nothing); the planner recalls a remembered cup."""
    refused = rig.call("analyze_interaction", AnalyzeInteraction.Request(
        interaction=_ended(rig)), timeout=60.0)
    assert refused.error_code in (AnalyzeInteraction.Response.NO_FRAMES,
                                  AnalyzeInteraction.Response.NONE), refused.error_msg
    recalled = rig.call("retrieve_memory", RetrieveMemory.Request(task="Find the cup."))
    assert recalled.error_code == RetrieveMemory.Response.NONE, recalled.error_msg
    assert any(c.node_id.startswith("cup") for c in recalled.candidates), recalled.candidates


def _analyze(rig: MemoryRig) -> Any:
    return cases(AnalyzeInteraction.Request,
                 lambda: AnalyzeInteraction.Request(interaction=_ended(rig)),
                 {"id": known(rig.ids)})


def _hand(rig: MemoryRig) -> Any:
    def valid() -> PoseStamped:
        msg = PoseStamped()
        msg.header.stamp, msg.header.frame_id = from_seconds(time.time()), "base_link"
        msg.pose.orientation.w = 1.0
        return msg
    return cases(PoseStamped, valid)


INTERFACES: dict[str, tuple[str, str, type, Any]] = {
    "analyze_interaction": ("analyzer", "service", AnalyzeInteraction, _analyze),
    "interaction_events": ("analyzer+planner", "topic", InteractionEvent,
                           lambda rig: cases(InteractionEvent, lambda: _ended(rig),
                                             {"id": known(rig.ids)})),
    "observations": ("analyzer", "topic", ObjectObservationArray,
                     lambda rig: cases(ObjectObservationArray, hints={"id": known(rig.ids)})),
    "scene_graph": ("analyzer", "topic", SceneGraph,
                    lambda rig: cases(SceneGraph, hints={"id": known(rig.ids)})),
    TOPIC_GRIPPER: ("analyzer", "topic", Float64, lambda rig: cases(Float64)),
    TOPIC_EE_ACHIEVED: ("analyzer", "topic", PoseStamped, _hand),
    TOPIC_EE_COMMANDED: ("analyzer", "topic", PoseStamped, _hand),
    f"cameras/{CAMERA}/color/image_raw": ("analyzer+planner+keyframes", "topic", Image,
                                          lambda rig: cases(Image)),
    f"cameras/{CAMERA}/depth/image_raw": ("analyzer", "topic", Image, lambda rig: cases(Image)),
    f"cameras/{CAMERA}/color/camera_info": ("analyzer+planner", "topic", CameraInfo,
                                            lambda rig: cases(CameraInfo)),
    "retrieve_memory": ("planner", "service", RetrieveMemory,
                        lambda rig: cases(RetrieveMemory.Request,
                                          lambda: RetrieveMemory.Request(task="Find the cup."),
                                          {"id": known(rig.ids)})),
    "approve_primitive": ("planner", "service", ApprovePrimitive,
                          lambda rig: cases(ApprovePrimitive.Request)),
    "list_pending_primitives": ("planner", "service", ListPendingPrimitives,
                                lambda rig: cases(ListPendingPrimitives.Request)),
    "run_task": ("planner", "action", RunTask,
                 lambda rig: cases(RunTask.Goal, lambda: RunTask.Goal(
                     instruction="Find the cup.", step_budget=2),
                     {"step_budget": st.integers(0, 2**32 - 1).map(lambda n: n % 4)})),
}


@pytest.mark.parametrize("interface", list(INTERFACES))
def test_reasoning_node_interface_survives_fuzzing(rig: MemoryRig, interface: str) -> None:
    node, kind, msg_type, strategy = INTERFACES[interface]

    def probe() -> None:
        _probe(rig)
        rig.probe()
    # the analyzer writes the world and keyframes, the planner its task memory
    fuzz_interface(Row(node, interface, kind), rig.driver, rig.ex, msg_type, strategy(rig),
                   probe=probe, memory=rig.memory,
                   writes=("world", "keyframes") if node == "analyzer" else ("task",),
                   timeout=120.0 if kind == "action" else 60.0)
