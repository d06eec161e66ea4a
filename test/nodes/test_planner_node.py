"""The planner node over real DDS with the real memory nodes and a stand-in robot.

The stand-in (``FakeRobot``) serves ``execute_primitive`` and ``analyze_interaction``: it acts on
a ground-truth kitchen (cabinet_1 locked and empty, cabinet_2 with fruit, cabinet_3 with
ketchup), publishes STARTED/ENDED interaction events, and on analysis writes what the analyzer
would admit into world memory through the real scene graph node's ``update_node``. The scene
graph and keyframe nodes run on a memory folder in tmp_path, seeded with the cabinets through
``observations``; the planner reads that memory read-only and owns task memory.
"""

from __future__ import annotations

import math
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rclpy
from geometry_msgs.msg import Point
from rclpy.action import ActionServer
from rclpy.action.server import ServerGoalHandle
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.context import Context
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from ros_helpers import call_service, spinning_executor
from sensor_msgs.msg import CameraInfo, Image
from std_msgs.msg import Header

from mimir.nodes.memory.keyframe_node import KeyframeNode
from mimir.nodes.memory.scene_graph_node import SceneGraphNode
from mimir.nodes.perception.messages import intrinsics_to_camera_info
from mimir.nodes.planner.planner_node import PlannerNode, PlannerNodeConfig, PlannerNodeError
from mimir.nodes.planner.primitive_messages import (
    InteractionEventBuffer,
    ended_event_from_result,
    primitive_goal,
)
from mimir.nodes.planner.ros_executor import ActionPrimitiveExecutor, ExecutorSettings
from mimir.ros import qos
from mimir.ros.actions import ActionClient
from mimir.ros.images import image_to_numpy, numpy_to_image
from mimir.ros.tf import TransformPublisher, matrix_to_transform
from mimir.ros.time import from_seconds
from mimir_memory.world import WorldMemory
from mimir_msgs.action import ExecutePrimitive, RunTask
from mimir_msgs.msg import (
    ContentItem,
    InteractionEvent,
    ObjectObservation,
    ObjectObservationArray,
    Property,
    SceneGraph,
    TaskRecord,
)
from mimir_msgs.srv import (
    AnalyzeInteraction,
    ApprovePrimitive,
    ListPendingPrimitives,
    RetrieveMemory,
    UpdateNode,
)
from mimir_perception.camera import Intrinsics
from mimir_planner.outcomes import step_effects
from mimir_planner.primitives import ExecutableStep
from mimir_planner.runs import ExecutorUnavailableError
from mimir_planner.trace import TRACE_FILE, read_trace

pytestmark = pytest.mark.ros

Wait = Callable[..., bool]


# ---------------------------------------------------------------------- the stand-in robot
@dataclass
class Cabinet:
    """Ground truth of one cabinet."""

    position: tuple[float, float, float]
    locked: bool = False
    contents: tuple[str, ...] = ()
    is_open: bool = False


@dataclass
class _Interaction:
    primitive: str
    target_id: str
    cabinet: Cabinet
    success: bool
    outcome: str


@dataclass
class FakeRobotLog:
    """What the stand-in did."""

    executed: list[tuple[str, str]] = field(default_factory=list)
    analyzed: list[str] = field(default_factory=list)


class FakeRobot(Node):
    """Serves execute_primitive and analyze_interaction over a ground-truth kitchen."""

    def __init__(self, cabinets: list[Cabinet], **kwargs: Any) -> None:
        super().__init__("fake_robot", **kwargs)
        self.cabinets = cabinets
        self.log = FakeRobotLog()
        self.last_moved_to: Cabinet | None = None
        self._count = 0
        self._interactions: dict[str, _Interaction] = {}
        group = ReentrantCallbackGroup()
        self._events = self.create_publisher(InteractionEvent, "interaction_events", qos.EVENTS)
        self._update = self.create_client(UpdateNode, "update_node", callback_group=group)
        self._server = ActionServer(self, ExecutePrimitive, "execute_primitive",
                                    execute_callback=self._execute, callback_group=group)
        self.create_service(AnalyzeInteraction, "analyze_interaction", self._analyze,
                            callback_group=group)

    def _resolve(self, goal: Any) -> Cabinet | None:
        p = goal.target_pose.pose.position
        best = min(self.cabinets, key=lambda c: math.dist(c.position, (p.x, p.y, p.z)))
        return best if math.dist(best.position, (p.x, p.y, p.z)) < 0.3 else None

    def _event(self, goal: Any, iid: str, phase: int, stamp: float, *, success: bool = False,
               outcome: str = "") -> None:
        msg = InteractionEvent(interaction_id=iid, phase=phase, primitive=goal.primitive,
                               target_id=goal.target_id, task=goal.task, success=success,
                               outcome=outcome, window_start=from_seconds(stamp))
        msg.header.frame_id = "map"
        msg.header.stamp = from_seconds(stamp + 1.0)
        if phase == InteractionEvent.PHASE_ENDED:
            msg.window_end = from_seconds(stamp + 1.0)
        self._events.publish(msg)

    def _execute(self, handle: ServerGoalHandle) -> ExecutePrimitive.Result:
        goal = handle.request
        params = {kv.key: kv.value for kv in goal.parameters}
        cabinet = self._resolve(goal)
        if cabinet is None or params.get("label") != "cabinet":
            handle.abort()
            return ExecutePrimitive.Result(success=False, outcome="REFUSED",
                                           error_code=ExecutePrimitive.Result.UNKNOWN_TARGET,
                                           error_msg="no such target")
        self.log.executed.append((goal.primitive, goal.target_id))
        self._count += 1
        iid = f"fake_{self._count:03d}"
        start = 10.0 * self._count
        self._event(goal, iid, InteractionEvent.PHASE_STARTED, start)
        success, outcome = True, "SUCCEEDED"
        if goal.primitive == "move_to":
            self.last_moved_to = cabinet
        elif goal.primitive in ("open", "close"):
            if cabinet.locked:
                success, outcome = False, "NO_MOTION"
            else:
                cabinet.is_open = goal.primitive == "open"
        elif goal.primitive == "inspect" and not cabinet.is_open:
            success, outcome = False, "CLOSED"
        self._interactions[iid] = _Interaction(goal.primitive, goal.target_id, cabinet,
                                               success, outcome)
        self._event(goal, iid, InteractionEvent.PHASE_ENDED, start, success=success,
                    outcome=outcome)
        if success:
            handle.succeed()
        else:
            handle.abort()
        return ExecutePrimitive.Result(
            success=success, outcome=outcome, interaction_id=iid,
            window_start=from_seconds(start), window_end=from_seconds(start + 1.0),
            error_code=(ExecutePrimitive.Result.NONE if success
                        else ExecutePrimitive.Result.EXECUTION_FAILED),
            error_msg="" if success else outcome.lower())

    def _write(self, request: UpdateNode.Request) -> None:
        assert self._update.wait_for_service(timeout_sec=10.0)
        future = self._update.call_async(request)
        deadline = time.monotonic() + 10.0
        while not future.done() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert future.done() and future.result().error_code == UpdateNode.Response.NONE

    def _analyze(self, request: Any, response: Any) -> Any:
        event = request.interaction
        self.log.analyzed.append(event.interaction_id)
        item = self._interactions.get(event.interaction_id)
        if item is None or event.phase != InteractionEvent.PHASE_ENDED:
            response.error_code = AnalyzeInteraction.Response.UNKNOWN_TARGET
            response.error_msg = "unknown interaction"
            return response
        update = UpdateNode.Request(node_id=item.target_id, event_id=f"fake:{event.interaction_id}",
                                    source="interaction", verdict="admit")
        if item.primitive in ("open", "close") and not item.success:
            update.properties = [Property(name="locked", value_json="true", confidence=0.9,
                                          reasoning="grip held, the door did not move")]
            update.add_task_record = True
            update.task_record = TaskRecord(task=item.primitive, primitive=item.primitive,
                                            success=False, failure_reason="locked",
                                            interaction_id=event.interaction_id)
        elif item.primitive in ("open", "close"):
            is_open = "true" if item.primitive == "open" else "false"
            update.properties = [Property(name="openable", value_json="true", confidence=0.9),
                                 Property(name="is_opened", value_json=is_open, confidence=0.9)]
        elif item.primitive == "inspect" and item.success:
            update.set_contents = True
            update.contents = [ContentItem(name=c) for c in item.cabinet.contents]
            update.contents_source_action = "inspect"
        if update.properties or update.set_contents:
            self._write(update)
        response.task_success = item.success
        response.failure_reason = "" if item.success else item.outcome.lower()
        response.backend = "fake"
        response.error_code = AnalyzeInteraction.Response.NONE
        return response


def kitchen() -> list[Cabinet]:
    """messymem C.1: cabinet_1 locked and empty, cabinet_2 fruit, cabinet_3 ketchup."""
    return [
        Cabinet((1.1, 0.6, 1.6), locked=True),
        Cabinet((1.1, 0.0, 1.6), contents=("banana", "apple", "orange")),
        Cabinet((1.1, -0.6, 1.6), contents=("ketchup",)),
    ]


# ---------------------------------------------------------------------- fixtures, helpers
@pytest.fixture
def executor(ros_context: Context) -> Iterator[MultiThreadedExecutor]:
    """A roomy executor (the planner's task loop holds one thread while a task runs)."""
    with spinning_executor(ros_context, num_threads=8) as ex:
        yield ex


@pytest.fixture
def ns() -> str:
    """A namespace of the test's own (stale discovery data of earlier tests cannot match)."""
    return f"/planner_test_{uuid.uuid4().hex[:8]}"


@pytest.fixture
def driver(ros_context: Context, executor: MultiThreadedExecutor, ns: str) -> Node:
    """The test's own node (clients, publishers)."""
    node = rclpy.create_node("planner_test_driver", context=ros_context, namespace=ns)
    executor.add_node(node)
    return node


def _seed_memory(ctx: Context, ex: MultiThreadedExecutor, driver: Node, memory: Path, *,
                 cabinets: list[Cabinet], wait_for: Wait) -> list[str]:
    """Start the memory nodes and create one cabinet node per ground-truth cabinet."""
    ns = driver.get_namespace()
    ex.add_node(SceneGraphNode(context=ctx, namespace=ns, parameter_overrides=[
        Parameter("memory_dir", value=str(memory)), Parameter("publish_period_s", value=0.1)]))
    ex.add_node(KeyframeNode(context=ctx, namespace=ns, parameter_overrides=[
        Parameter("memory_dir", value=str(memory))]))
    graphs: list[SceneGraph] = []
    driver.create_subscription(SceneGraph, "scene_graph", graphs.append, qos.LATCHED)
    pub = driver.create_publisher(ObjectObservationArray, "observations", qos.EVENTS)
    assert wait_for(lambda: pub.get_subscription_count() > 0)
    batch = ObjectObservationArray(camera="pole")
    batch.header.frame_id = "map"
    batch.header.stamp = from_seconds(5.0)
    for i, cab in enumerate(cabinets):
        x, y, z = cab.position
        obs = ObjectObservation(label="cabinet", camera="pole", score=0.9, point_count=800,
                                detection_id=f"seed-{i}")
        obs.header.frame_id = "map"
        obs.header.stamp = from_seconds(5.0)
        obs.centroid = Point(x=x, y=y, z=z)
        obs.bbox_min = Point(x=x - 0.2, y=y - 0.2, z=z - 0.2)
        obs.bbox_max = Point(x=x + 0.2, y=y + 0.2, z=z + 0.2)
        batch.observations.append(obs)
    pub.publish(batch)
    assert wait_for(lambda: graphs and len(graphs[-1].nodes) == len(cabinets))
    by_y = sorted(graphs[-1].nodes, key=lambda n: -n.position.y)
    return [n.id for n in by_y]


def _planner(ctx: Context, ex: MultiThreadedExecutor, memory: Path, ns: str, **params: Any
             ) -> PlannerNode:
    overrides = [Parameter("memory_dir", value=str(memory)),
                 Parameter("server_wait_s", value=2.0),
                 Parameter("accept_timeout_s", value=5.0),
                 Parameter("event_wait_s", value=1.0),
                 Parameter("analysis_timeout_s", value=20.0),
                 Parameter("primitive_timeout_s", value=20.0)]
    overrides += [Parameter(k, value=v) for k, v in params.items()]
    node = PlannerNode(context=ctx, namespace=ns, parameter_overrides=overrides)
    ex.add_node(node)
    return node


class TaskClient:
    """Sends run_task goals and collects feedback."""

    def __init__(self, node: Node, wait_for: Wait) -> None:
        self.client = ActionClient(node, RunTask, "run_task")
        self.wait_for = wait_for
        self.feedback: list[Any] = []
        assert self.client.wait_for_server(timeout_sec=20.0)

    def send(self, instruction: str, budget: int = 0) -> Any:
        # a goal sent while discovery is still settling can lose its answer: send again
        for _ in range(3):
            future = self.client.send_goal_async(
                RunTask.Goal(instruction=instruction, step_budget=budget),
                feedback_callback=lambda msg: self.feedback.append(msg.feedback))
            if self.wait_for(future.done, 15.0):
                return future.result()
        raise AssertionError(f"run_task did not answer the goal {instruction!r}")

    def result(self, handle: Any, timeout: float = 40.0) -> Any:
        future = handle.get_result_async()
        assert self.wait_for(future.done, timeout), "run_task did not finish"
        return future.result().result

    def run(self, instruction: str, budget: int = 0) -> Any:
        handle = self.send(instruction, budget)
        assert handle.accepted
        return self.result(handle)


# ---------------------------------------------------------------------- the tests
def test_config_rejects_bad_parameters() -> None:
    with pytest.raises(ValueError, match="vlm_backend"):
        PlannerNodeConfig(vlm_backend="magic")
    with pytest.raises(ValueError, match="step_budget"):
        PlannerNodeConfig(step_budget=0)
    with pytest.raises(ValueError, match="gate_timeout_s"):
        PlannerNodeConfig(gate_timeout_s=math.nan)
    with pytest.raises(ValueError, match="busy_retry_s"):
        PlannerNodeConfig(busy_retry_s=0.0)
    with pytest.raises(ValueError, match="trace_max_bytes"):
        PlannerNodeConfig(trace_max_bytes=0)
    with pytest.raises(ValueError, match="busy_retry_s"):
        ExecutorSettings(busy_retry_s=-1.0)


def test_executor_helpers_build_goals_events_and_effects(tmp_path: Path) -> None:
    world = WorldMemory.open(tmp_path / "world.db")
    world.add_node("cabinet", (1.1, 0.0, 1.6), stamp=1.0)
    world.add_node("mug", (1.0, 0.0, 0.9), stamp=1.0)
    state = world.state
    place = ExecutableStep("place", "place", "cabinet_1", "sim_tidybot", goal_id="g001")
    goal = primitive_goal(place, state, holding="mug_1", task="put the mug away",
                          map_frame="map", stamp=3.0)
    params = {kv.key: kv.value for kv in goal.parameters}
    assert goal.primitive == "place" and goal.target_id == "cabinet_1" and goal.use_target_pose
    assert goal.target_pose.header.frame_id == "map"
    assert goal.target_pose.pose.position.z == pytest.approx(1.6)
    assert params["label"] == "cabinet" and params["object_id"] == "mug_1"
    assert float(params["destination_x"]) == pytest.approx(1.1)
    close = ExecutableStep("close", "close_fixture", "cabinet_1", "sim_tidybot")
    assert primitive_goal(close, state, holding=None, task="", map_frame="map",
                          stamp=0.0).primitive == "close"  # abstract name, legal one as param
    with pytest.raises(ValueError, match="no longer"):
        primitive_goal(ExecutableStep("open", "open", "drawer_9", "sim_tidybot"), state,
                       holding=None, task="", map_frame="map", stamp=0.0)

    def opens(node: Any) -> bool:
        return bool(node.label == "cabinet")

    effects = step_effects(place, state, "mug_1", opens)
    assert [(e.kind.value, e.subject, e.target, e.value) for e in effects] == [
        ("place", "mug_1", "cabinet_1", "container")]
    assert step_effects(close, state, None, opens)[0].value is False
    assert step_effects(ExecutableStep("inspect", "inspect", "cabinet_1", "x"), state, None,
                        opens) == ()

    result = ExecutePrimitive.Result(success=False, outcome="NO_MOTION", interaction_id="i7",
                                     window_start=from_seconds(4.0),
                                     window_end=from_seconds(6.0), error_msg="stuck")
    event = ended_event_from_result(goal, result, 9.0)
    assert event.phase == InteractionEvent.PHASE_ENDED and event.interaction_id == "i7"
    assert event.target_id == "cabinet_1" and not event.success and event.message == "stuck"
    buffer = InteractionEventBuffer(capacity=2)
    assert not buffer.add(InteractionEvent(interaction_id="i7",
                                           phase=InteractionEvent.PHASE_STARTED))
    assert buffer.wait("i7", 0.0) is None
    for iid in ("a", "b", "c"):
        assert buffer.add(InteractionEvent(interaction_id=iid,
                                           phase=InteractionEvent.PHASE_ENDED))
    assert buffer.wait("a", 0.0) is None and buffer.wait("c", 0.0) is not None
    with pytest.raises(ValueError, match="result_timeout_s"):
        ExecutorSettings(result_timeout_s=0.0)
    world.close()


class _Done:
    """A future that is already done."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def done(self) -> bool:
        return True

    def result(self) -> Any:
        return self.value

    def cancel(self) -> None:
        return None


class _Clients:
    """Stand-ins for the action client, analyzer client and node (no ROS graph needed)."""

    def __init__(self) -> None:
        self.result = ExecutePrimitive.Result()
        self.analysis = AnalyzeInteraction.Response()
        self.goals: list[Any] = []
        self.analyzed: list[Any] = []
        self.busy_for = 0  # goals refused before one is accepted (the executor is busy)

    # action client
    def server_is_ready(self) -> bool:
        return True

    def send_goal_async(self, goal: Any) -> _Done:
        self.goals.append(goal)
        busy, self.busy_for = self.busy_for > 0, max(0, self.busy_for - 1)
        handle = type("Handle", (), {
            "accepted": not busy,
            "get_result_async": lambda _h: _Done(type("R", (), {"result": self.result})()),
            "cancel_goal_async": lambda _h: _Done(None)})()
        return _Done(handle)

    # analyzer client
    def service_is_ready(self) -> bool:
        return True

    def call_async(self, request: Any) -> _Done:
        self.analyzed.append(request)
        return _Done(self.analysis)

    # node
    def get_clock(self) -> Any:
        return type("Clock", (), {"now": lambda _c: type("T", (), {"nanoseconds": 5e9})()})()


def _executor_on_stand_ins(tmp_path: Path, **settings: float
                           ) -> tuple[ActionPrimitiveExecutor, _Clients, WorldMemory]:
    """The planner's action executor on the stand-ins, with one remembered cabinet."""
    world = WorldMemory.open(tmp_path / "world.db")
    world.add_node("cabinet", (1.1, 0.0, 1.6), stamp=1.0)
    fake = _Clients()
    executor = ActionPrimitiveExecutor(
        fake, fake, fake, InteractionEventBuffer(),  # type: ignore[arg-type]
        world=world, settings=ExecutorSettings(event_wait_s=0.0, **settings),  # type: ignore[arg-type]
        holding=lambda: None, opens=lambda node: True)
    return executor, fake, world


def test_a_busy_executor_is_waited_for_not_counted_against_the_target(tmp_path: Path) -> None:
    executor, fake, world = _executor_on_stand_ins(tmp_path, busy_retry_s=0.01,
                                                   result_timeout_s=2.0)
    move = ExecutableStep("move_to", "move_to", "cabinet_1", "sim_tidybot", goal_id="g1")
    # still running its previous goal twice, then free: the step runs as usual
    fake.busy_for = 2
    fake.result = ExecutePrimitive.Result(success=True, outcome="REACHED", interaction_id="i1",
                                          window_end=from_seconds(7.0))
    out = executor.execute(move)
    assert out.feedback.success and out.code == "REACHED" and len(fake.goals) == 3
    # busy for longer than a primitive may run: the robot is unavailable, not the target bad
    fake.busy_for = 10_000
    with pytest.raises(ExecutorUnavailableError, match="busy with another one"):
        executor.execute(move)
    world.close()


def test_executor_outcome_carries_code_and_executor_report(tmp_path: Path) -> None:
    executor, fake, world = _executor_on_stand_ins(tmp_path)
    open_step = ExecutableStep("open", "open", "cabinet_1", "sim_tidybot", goal_id="g1")

    def result(success: bool, outcome: str) -> ExecutePrimitive.Result:
        return ExecutePrimitive.Result(success=success, outcome=outcome, interaction_id="i1",
                                       window_end=from_seconds(7.0))

    # done in the simulator, but the analyzer could not confirm it
    fake.result = result(True, "OPENED")
    fake.analysis = AnalyzeInteraction.Response(
        task_success=False, failure_reason="outcome not verified",
        error_code=AnalyzeInteraction.Response.NONE)
    out = executor.execute(open_step)
    assert not out.feedback.success and out.reported is True and out.code == "OPENED"
    assert "the analyzer found it failed" in out.detail and out.stamp == pytest.approx(7.0)
    assert fake.analyzed[-1].interaction.interaction_id == "i1"
    # a missed grasp is a failure by the executor's own word
    fake.result = result(False, "MISSED_GRASP")
    out = executor.execute(open_step)
    assert out.reported is False and out.code == "MISSED_GRASP" and not out.feedback.success
    # verified success carries the effects
    fake.result = result(True, "OPENED")
    fake.analysis = AnalyzeInteraction.Response(task_success=True,
                                                error_code=AnalyzeInteraction.Response.NONE)
    out = executor.execute(open_step)
    assert out.feedback.success and out.reported is True and out.feedback.effects
    # move_to is judged by the executor alone
    fake.result = result(True, "REACHED")
    before = len(fake.analyzed)
    out = executor.execute(ExecutableStep("move_to", "move_to", "cabinet_1", "sim_tidybot"))
    assert out.feedback.success and out.code == "REACHED" and len(fake.analyzed) == before
    # a target that left memory is never sent
    out = executor.execute(ExecutableStep("open", "open", "drawer_9", "sim_tidybot"))
    assert out.code == "NOT_SENT" and out.reported is False and not out.feedback.success
    world.close()


def test_tasks_use_and_grow_memory(tmp_path: Path, ros_context: Context,
                                   executor: MultiThreadedExecutor, driver: Node,
                                   wait_for: Wait) -> None:
    ns = driver.get_namespace()
    cabinets = kitchen()
    ids = _seed_memory(ros_context, executor, driver, tmp_path, cabinets=cabinets,
                       wait_for=wait_for)
    locked, fruit, ketchup = ids
    assert locked == "cabinet_1"
    robot = FakeRobot(cabinets, context=ros_context, namespace=ns)
    executor.add_node(robot)
    _planner(ros_context, executor, tmp_path, ns)
    tasks = TaskClient(driver, wait_for)

    result = tasks.run("find the banana")
    assert result.error_code == RunTask.Result.NONE, result.error_msg
    assert result.progress == pytest.approx(1.0)
    assert [g.status for g in result.goals] == ["completed"]
    assert robot.log.executed == [("move_to", locked), ("open", locked), ("move_to", fruit),
                                  ("open", fruit), ("inspect", fruit)]
    # every analysed primitive was verified through analyze_interaction (move_to is not)
    assert len(robot.log.analyzed) == 3
    steps = [f.step for f in tasks.feedback]
    assert steps == list(range(1, result.steps + 1)) and result.steps == 6
    first = tasks.feedback[0]
    assert first.plan[0].primitive == "move_to" and first.plan[0].target_id == locked
    assert [c.node_id for c in first.grounding][:1] == [locked]
    assert tasks.feedback[-1].status.startswith("completed")
    # each planner call is in the memory folder's trace, as the feedback told it
    trace = read_trace(tmp_path / TRACE_FILE)
    assert [(t["call"], t["primitive"], t["target"]) for t in trace[:5]] == [
        (i + 1, p, t) for i, (p, t) in enumerate(robot.log.executed)]
    assert trace[0]["candidates"][0]["node_id"] == locked
    assert trace[1]["success"] is False and trace[0]["start"] <= trace[0]["end"]

    tasks.feedback.clear()
    before = len(robot.log.executed)
    result = tasks.run("find the ketchup")
    assert result.error_code == RunTask.Result.NONE, result.error_msg
    new = robot.log.executed[before:]
    assert new == [("move_to", ketchup), ("open", ketchup), ("inspect", ketchup)]
    assert all(target not in (locked, fruit) for _, target in new)
    assert "skipping" in " ".join(e for f in tasks.feedback for c in f.grounding
                                  for e in c.evidence)

    before = len(robot.log.executed)
    result = tasks.run("where is the banana?")
    assert result.error_code == RunTask.Result.NONE, result.error_msg
    assert fruit in result.answer and "banana" in result.answer
    assert robot.log.executed[before:] == []

    response = call_service(driver, RetrieveMemory, "retrieve_memory",
                            RetrieveMemory.Request(task="find the ketchup"))
    assert response.error_code == RetrieveMemory.Response.NONE, response.error_msg
    assert [c.node_id for c in response.candidates][:1] == [ketchup]
    assert any("contents" in e for e in response.candidates[0].evidence)
    assert ketchup in response.scene_graph_summary

    # the planner camera's latest image, calibration and pose give the current observation
    planner = next(n for n in executor.get_nodes() if isinstance(n, PlannerNode))
    image_pub = driver.create_publisher(Image, "cameras/pole/color/image_raw", qos.SENSOR)
    info_pub = driver.create_publisher(CameraInfo, "cameras/pole/color/camera_info", qos.SENSOR)
    # the pole camera 2 m in front of the cabinets, looking at them (optical: z ahead, y down)
    pose = np.eye(4)
    pose[:3, :3] = [[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]]
    pose[:3, 3] = [-0.9, 0.0, 1.6]
    TransformPublisher(driver, static=True).send(
        [matrix_to_transform(pose, "map", "pole_color_optical_frame", 0.0)])
    header = Header(stamp=from_seconds(50.0), frame_id="pole_color_optical_frame")
    intrinsics = Intrinsics(100.0, 100.0, 32.0, 24.0, 64, 48)

    def observed() -> bool:
        image_pub.publish(numpy_to_image(np.zeros((48, 64, 3), np.uint8), "rgb8", header))
        info_pub.publish(intrinsics_to_camera_info(intrinsics, header))
        obs = planner.current_observation()
        return obs is not None and obs.intrinsics is not None and obs.camera_to_map is not None

    assert wait_for(observed)

    # each planner call that saw the camera shows its Set-of-Mark image on a latched topic
    shown: list[Image] = []
    driver.create_subscription(Image, "planner/set_of_marks", shown.append, qos.LATCHED)
    result = tasks.run("where is the ketchup?")
    assert result.error_code == RunTask.Result.NONE, result.error_msg
    assert wait_for(lambda: bool(shown), timeout=10.0)
    marked = image_to_numpy(shown[-1])
    assert shown[-1].header.frame_id == "pole_color_optical_frame"
    assert marked.shape == (48, 64, 3) and marked.any()  # marks drawn on a black frame


def test_a_baseline_planner_reads_memory_through_its_representation(
        tmp_path: Path, ros_context: Context, executor: MultiThreadedExecutor, driver: Node,
        wait_for: Wait) -> None:
    ns = driver.get_namespace()
    _seed_memory(ros_context, executor, driver, tmp_path, cabinets=kitchen(), wait_for=wait_for)
    # an episodic memory holds only what its frames show; no frame was saved, so it knows no
    # cabinet to search and blocks without moving (the whole memory would try to move)
    _planner(ros_context, executor, tmp_path, ns, representation="episodic",
             memory_wait_s=1.0)
    tasks = TaskClient(driver, wait_for)
    result = tasks.run("find the banana")
    assert result.error_code == RunTask.Result.BLOCKED, result.error_msg
    assert [g.status for g in result.goals] == ["blocked"]
    assert "nothing left to explore" in result.goals[0].reason
    assert "executor unavailable" not in result.error_msg


def approve_cli(*argv: str, answers: str = "") -> subprocess.CompletedProcess[str]:
    """``mimir approve`` in its own process (its own DDS participant), answering the prompts
    from ``answers``; generous discovery timeouts for a loaded two-core machine."""
    return subprocess.run(
        [sys.executable, "-m", "mimir.cli", "approve", "--timeout", "60", *argv],
        input=answers, capture_output=True, text=True, timeout=240, check=False,
        cwd=Path(__file__).resolve().parents[2])


def test_operator_gate_approve_deny_cancel_and_timeout(
        tmp_path: Path, ros_context: Context, executor: MultiThreadedExecutor, driver: Node,
        wait_for: Wait) -> None:
    ns = driver.get_namespace()
    cabinets = kitchen()
    locked, _, _ = _seed_memory(ros_context, executor, driver, tmp_path, cabinets=cabinets,
                                wait_for=wait_for)
    robot = FakeRobot(cabinets, context=ros_context, namespace=ns)
    executor.add_node(robot)
    planner = _planner(ros_context, executor, tmp_path, ns, operator_gate=True,
                       gate_timeout_s=30.0)
    tasks = TaskClient(driver, wait_for)

    def pending() -> Any:
        return call_service(driver, ListPendingPrimitives, "list_pending_primitives",
                            ListPendingPrimitives.Request())

    def decide(request_id: str, approve: bool) -> Any:
        return call_service(driver, ApprovePrimitive, "approve_primitive",
                            ApprovePrimitive.Request(request_id=request_id, approve=approve,
                                                     reason="test operator"))

    handle = tasks.send("find the banana")
    assert handle.accepted
    assert wait_for(lambda: len(pending().request_ids) == 1)
    listed = pending()
    assert listed.steps[0].primitive == "move_to" and listed.steps[0].target_id == locked
    assert listed.tasks[0] == "find the banana"
    assert robot.log.executed == []  # waits for the operator
    # one task at a time: a second goal is rejected while the first runs
    assert not tasks.send("find the ketchup").accepted
    # bad requests: unknown id, non-numeric id
    assert decide("999", True).error_code == ApprovePrimitive.Response.UNKNOWN_REQUEST
    assert decide("abc", True).error_code == ApprovePrimitive.Response.UNKNOWN_REQUEST
    first_id = listed.request_ids[0]
    assert decide(first_id, True).error_code == ApprovePrimitive.Response.NONE
    assert decide(first_id, False).error_code == ApprovePrimitive.Response.ALREADY_DECIDED
    assert wait_for(lambda: robot.log.executed == [("move_to", locked)])
    assert wait_for(lambda: len(pending().request_ids) == 1)
    assert pending().steps[0].primitive == "open"
    # the operator denies it at the command-line prompt of another process, as on a robot
    denied = approve_cli("--namespace", ns, "--reason", "not now", answers="n\n")
    assert denied.returncode == 0, denied.stdout + denied.stderr
    assert denied.stdout.count("approve? [y/n, q to stop]") == 1
    assert "denied" in denied.stdout
    result = tasks.result(handle)
    assert result.error_code == RunTask.Result.BLOCKED
    assert "not approved" in result.error_msg and "denied" in result.error_msg
    assert [g.status for g in result.goals] == ["blocked"]
    assert robot.log.executed == [("move_to", locked)]  # the denied open never ran
    assert any(f.status.startswith("awaiting_approval") for f in tasks.feedback)

    # cancel while a primitive awaits approval: the request is denied, the task canceled
    handle = tasks.send("find the banana")
    assert handle.accepted
    assert wait_for(lambda: len(pending().request_ids) == 1)
    # quitting the prompt leaves the request waiting
    quit_ = approve_cli("--namespace", ns, answers="q\n")
    assert quit_.returncode == 2 and "remaining requests keep waiting" in quit_.stdout
    assert len(pending().request_ids) == 1
    cancel = handle.cancel_goal_async()
    assert wait_for(cancel.done)
    result = tasks.result(handle)
    assert result.error_code == RunTask.Result.CANCELED
    assert all(g.status == "blocked" for g in result.goals)
    assert pending().request_ids == []
    assert robot.log.executed == [("move_to", locked)]
    nothing = approve_cli("--deny-all", "--namespace", ns)
    assert nothing.returncode == 0 and "no primitive is waiting" in nothing.stdout
    nobody = approve_cli("--approve-all", "--namespace", ns + "_nobody", "--timeout", "0.5")
    assert nobody.returncode == 1 and "gate services are not available" in nobody.stdout

    # no decision within the gate timeout denies the primitive
    executor.remove_node(planner)
    planner.destroy_node()
    _planner(ros_context, executor, tmp_path, ns, operator_gate=True, gate_timeout_s=1.0)
    tasks = TaskClient(driver, wait_for)
    result = tasks.run("find the banana")
    assert result.error_code == RunTask.Result.BLOCKED
    assert "timed_out" in result.error_msg
    assert robot.log.executed == [("move_to", locked)]


def test_first_instruction_waits_for_perception(
        tmp_path: Path, ros_context: Context, executor: MultiThreadedExecutor, driver: Node,
        wait_for: Wait) -> None:
    ns = driver.get_namespace()
    for name in ("memory_wait_s", "memory_settle_s"):
        with pytest.raises(ValueError, match=name):
            PlannerNodeConfig(**{name: -1.0})
    writer = WorldMemory.open(tmp_path / "world.db")  # exists, but nothing perceived yet
    _planner(ros_context, executor, tmp_path, ns, memory_wait_s=0.3)
    tasks = TaskClient(driver, wait_for)
    result = tasks.run("find the banana")
    assert result.error_code == RunTask.Result.BLOCKED
    assert "nothing left to explore" in result.error_msg

    # perception adds the first fixture while the instruction waits: planning goes ahead
    planner = next(n for n in executor.get_nodes() if isinstance(n, PlannerNode))
    executor.remove_node(planner)
    planner.destroy_node()
    _planner(ros_context, executor, tmp_path / "later", ns, memory_wait_s=20.0)
    late = WorldMemory.open(tmp_path / "later" / "world.db")
    tasks = TaskClient(driver, wait_for)  # a client that discovers the restarted server
    timer = threading.Timer(1.0, lambda: late.add_node("cabinet", (1.1, 0.0, 1.6), stamp=1.0))
    timer.start()
    try:
        result = tasks.run("find the banana")
    finally:
        timer.join()
    assert result.error_code == RunTask.Result.BLOCKED
    assert "executor unavailable" in result.error_msg  # it tried to move to cabinet_1
    late.close()
    writer.close()


def test_bad_instructions_and_missing_services(
        tmp_path: Path, ros_context: Context, executor: MultiThreadedExecutor, driver: Node,
        wait_for: Wait) -> None:
    ns = driver.get_namespace()
    for name, value, words in (("vlm_backend", "magic", "vlm_backend"),
                               ("embodiment", "hexapod", "hexapod"),
                               ("step_budget", 0, "step_budget"),
                               ("representation", "telepathy", "unknown representation")):
        with pytest.raises(PlannerNodeError, match=words):
            PlannerNode(context=ros_context, namespace=ns, parameter_overrides=[
                Parameter("memory_dir", value=str(tmp_path)), Parameter(name, value=value)])
    # the planner starts before any memory exists: tasks fail clearly, nothing is created
    _planner(ros_context, executor, tmp_path, ns)
    tasks = TaskClient(driver, wait_for)
    result = tasks.run("find the banana")
    assert result.error_code == RunTask.Result.BLOCKED
    assert "world memory" in result.error_msg
    response = call_service(driver, RetrieveMemory, "retrieve_memory",
                            RetrieveMemory.Request(task="find the banana"))
    assert response.error_code == RetrieveMemory.Response.BACKEND_ERROR

    cabinets = kitchen()
    _seed_memory(ros_context, executor, driver, tmp_path, cabinets=cabinets, wait_for=wait_for)
    result = tasks.run("   ")
    assert result.error_code == RunTask.Result.PARSE_FAILED
    assert "empty" in result.error_msg and list(result.goals) == []
    result = tasks.run("sing me a song")
    assert result.error_code == RunTask.Result.BLOCKED
    assert result.goals[0].status == "blocked" and result.goals[0].reason
    # no robot: the executor is down, the run stops with a clear message
    result = tasks.run("find the banana")
    assert result.error_code == RunTask.Result.BLOCKED
    assert "executor unavailable" in result.error_msg
    assert result.goals[0].status == "blocked"
    # the next instruction does not inherit the blocked goals
    result = tasks.run("is cabinet_1 locked?")
    assert [g.goal_id for g in result.goals] and all(
        g.description == "is cabinet_1 locked?" for g in result.goals)

    bad = call_service(driver, RetrieveMemory, "retrieve_memory", RetrieveMemory.Request(task=""))
    assert bad.error_code == RetrieveMemory.Response.INVALID_REQUEST
    bad = call_service(driver, RetrieveMemory, "retrieve_memory",
                       RetrieveMemory.Request(task="find the mug", focus_node_ids=["fridge_9"]))
    assert bad.error_code == RetrieveMemory.Response.INVALID_REQUEST
    assert "fridge_9" in bad.error_msg
