"""The ROS side of ``mimir sim``: sends instructions, prints what happens, asks for judgement."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

import rclpy
from rclpy.client import Client
from rclpy.context import Context
from rclpy.node import Node

from mimir.ros import qos
from mimir.ros.actions import ActionClient
from mimir.ros.floatfix import coerce_floats
from mimir.ros.runtime import HandOffExecutor
from mimir.signals import handling
from mimir.sim_report import (
    InstructionReport,
    SimJobError,
    TraceSink,
    close_report,
    memory_record,
    primitive_record,
    step_line,
)
from mimir_msgs.action import RunTask
from mimir_msgs.msg import InteractionEvent, MemoryEvent, SceneGraph
from mimir_msgs.srv import BeginInstruction, JudgeInstruction, QueryKeyframes


def ctrl_c_interrupts() -> contextlib.AbstractContextManager[None]:
    """Ctrl-C (SIGINT) raises KeyboardInterrupt inside the block, also in a process that was
    started with SIGINT ignored (a job started in the background by a non-interactive shell
    inherits that), so "Ctrl-C ends it" holds however the job was started."""
    return handling((signal.SIGINT,), signal.default_int_handler, only_if_ignored=True)


class SimClient:
    """A node that drives the planner and reads back memory; used as a context manager."""

    def __init__(self, trace: TraceSink, dead_nodes: Callable[[], list[str]],
                 restarts: Callable[[str], int] = lambda _name: 0) -> None:
        """``dead_nodes()`` names the nodes dead for good (it may start others again);
        ``restarts(name)`` says how often a node was started again so far."""
        self._trace = trace
        self._dead = dead_nodes
        self._restarts = restarts
        self._context = Context()
        rclpy.init(context=self._context)
        self.node = Node("mimir_sim_job", context=self._context,
                         parameter_overrides=[rclpy.parameter.Parameter("use_sim_time",
                                                                        value=True)])
        self._executor = HandOffExecutor(context=self._context)
        self._executor.add_node(self.node)
        self._thread = threading.Thread(target=self._executor.spin, daemon=True)
        self._graph: SceneGraph | None = None
        self._events = 0
        self._current = -1
        self._primitives: list[str] = []
        self._lock = threading.Lock()
        self._run_task = ActionClient(self.node, RunTask, "run_task")
        self._begin: Client[Any, Any] = self.node.create_client(
            BeginInstruction, "sim/begin_instruction")
        self._judge: Client[Any, Any] = self.node.create_client(
            JudgeInstruction, "sim/judge_instruction")
        self._keyframes: Client[Any, Any] = self.node.create_client(
            QueryKeyframes, "query_keyframes")
        self.node.create_subscription(SceneGraph, "scene_graph", self._on_graph, qos.LATCHED)
        self.node.create_subscription(MemoryEvent, "memory_events", self._on_memory_event,
                                      qos.EVENTS)
        self.node.create_subscription(InteractionEvent, "interaction_events",
                                      self._on_interaction, qos.EVENTS)

    def __enter__(self) -> SimClient:
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._executor.shutdown(timeout_sec=5.0)
        self.node.destroy_node()
        rclpy.try_shutdown(context=self._context)
        self._thread.join(timeout=5.0)

    # ------------------------------------------------------------------ waiting
    def _check_alive(self) -> None:
        dead = self._dead()
        if dead:
            raise SimJobError(f"node(s) exited: {', '.join(dead)}")

    def _wait(self, predicate: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            self._check_alive()
            if time.monotonic() > deadline:
                raise SimJobError(f"timed out after {timeout:.0f} s waiting for {what}")
            time.sleep(0.05)

    def _call(self, client: Any, request: Any, timeout: float, what: str) -> Any:
        future = client.call_async(coerce_floats(request))
        self._wait(future.done, timeout, what)
        return future.result()

    def wait_ready(self, timeout: float) -> None:
        """Wait until the planner, the bridge and the memory answer."""
        self._trace.record("status", "waiting for the nodes to come up ...")
        self._wait(self._run_task.server_is_ready, timeout, "the planner's run_task")
        for client, name in ((self._begin, "sim/begin_instruction"),
                             (self._judge, "sim/judge_instruction"),
                             (self._keyframes, "query_keyframes")):
            self._wait(client.service_is_ready, timeout, name)
        self._trace.record("status", "all nodes are up; letting the first views settle in memory")
        self._wait_memory_settled(timeout)
        graph = self._graph
        labels = sorted({n.label for n in graph.nodes}) if graph is not None else []
        self._trace.record("status", f"memory holds {len(graph.nodes) if graph else 0} nodes "
                           f"({', '.join(labels)}) before the first instruction")

    def _wait_memory_settled(self, timeout: float, quiet_s: float = 3.0) -> None:
        """Wait until the scene graph has nodes and no new node appeared for ``quiet_s``.

        The protocol starts every trial after the robot has looked at the fixtures; the graph
        must hold what that first look revealed before the planner grounds anything.
        """
        self._wait(lambda: self._graph is not None and len(self._graph.nodes) > 0, timeout,
                   "the first scene-graph nodes")
        deadline = time.monotonic() + timeout
        last_ids: set[str] = set()
        last_change = time.monotonic()
        while time.monotonic() - last_change < quiet_s:
            self._check_alive()
            graph = self._graph
            ids = {n.id for n in graph.nodes} if graph is not None else set()
            if ids != last_ids:
                last_ids, last_change = ids, time.monotonic()
            if time.monotonic() > deadline:
                raise SimJobError(f"the scene graph did not settle within {timeout:.0f} s")
            time.sleep(0.1)

    # ---------------------------------------------------------------- callbacks
    def _on_graph(self, msg: SceneGraph) -> None:
        self._graph = msg

    def _on_memory_event(self, msg: MemoryEvent) -> None:
        with self._lock:
            self._events += 1
        record = memory_record(msg)
        if record is not None:
            text, data = record
            self._trace.record("memory", text, instruction=self._current, **data)

    def _on_interaction(self, msg: InteractionEvent) -> None:
        if msg.phase != InteractionEvent.PHASE_ENDED:
            return
        name, text, data = primitive_record(msg)
        with self._lock:
            self._primitives.append(name)
        self._trace.record("primitive", text, instruction=self._current, **data)

    def _on_feedback(self, feedback_msg: Any) -> None:
        fb = feedback_msg.feedback
        self._trace.record(
            "step", step_line(fb.step, fb.status, [(s.primitive, s.target_id) for s in fb.plan],
                              [c.node_id for c in fb.grounding], len(fb.retrieved)),
            instruction=self._current, step=fb.step, status=fb.status,
            plan=[(s.primitive, s.target_id, s.reasoning) for s in fb.plan])

    # ------------------------------------------------------------- instructions
    def run_instruction(self, index: int, text: str, step_budget: int,
                        timeout: float) -> InstructionReport:
        """Run one instruction through the planner and have the bridge judge it."""
        report = InstructionReport(index=index, instruction=text)
        started = time.monotonic()
        self._current = index
        with self._lock:
            self._primitives = []
        self._trace.record("instruction", f"\n[{index + 1}] {text}", instruction=index)
        begin = self._call(self._begin, BeginInstruction.Request(index=index, instruction=text),
                           30.0, "sim/begin_instruction")
        if begin.error_code != BeginInstruction.Response.NONE:
            raise SimJobError(f"the bridge refused instruction {index}: {begin.error_msg}")
        goal = RunTask.Goal(instruction=text, step_budget=step_budget)
        deadline = time.monotonic() + timeout
        restarts = self._restarts("planner")
        result_future = self._send(goal, index)
        while not result_future.done():
            self._check_alive()
            if time.monotonic() > deadline:
                raise SimJobError(f"timed out after {timeout:.0f} s waiting for instruction "
                                  f"{index + 1} to finish")
            if self._restarts("planner") != restarts:
                # the planner died with the instruction: the new one gets it again (memory
                # kept what the first one learned)
                restarts = self._restarts("planner")
                self._trace.record("restart", f"  the planner was started again: instruction "
                                   f"{index + 1} sent again", instruction=index)
                result_future = self._send(goal, index, tries=6)
            time.sleep(0.05)
        outcome = result_future.result()
        if outcome is None:
            raise SimJobError(f"instruction {index + 1} ended without a result")
        result = outcome.result
        report.steps = int(result.steps)
        report.planner_progress = float(result.progress)
        report.answer = result.answer
        report.error = result.error_msg
        # The judge binds what the answer names to simulated entities by remembered position;
        # the planner's words themselves are never taken as simulator ids.
        judged = self._call(self._judge, JudgeInstruction.Request(
            index=index, answer_entities=list(result.answer_entities)),
            30.0, "sim/judge_instruction")
        with self._lock:
            primitives = list(self._primitives)
        close_report(
            report, self._trace, judged=bool(judged.success),
            judged_progress=float(judged.progress), details_json=judged.details_json,
            named=", ".join(e.node_id or f"{e.label} (listed)" for e in result.answer_entities),
            goals="; ".join(f"{g.description}: {g.status}" for g in result.goals),
            primitives=primitives, started=started)
        return report

    def _send(self, goal: RunTask.Goal, index: int, *, tries: int = 1) -> Any:
        """Send the instruction once the planner serves it; the future of its result.

        With ``tries`` above one, a goal nobody answered within 10 s is sent again: a planner
        just started again can still look served through its dead predecessor's endpoints."""
        for attempt in range(1, tries + 1):
            self._wait(self._run_task.server_is_ready, 60.0, "the planner's run_task")
            send = self._run_task.send_goal_async(goal, feedback_callback=self._on_feedback)
            if attempt < tries:
                with contextlib.suppress(SimJobError):
                    self._wait(send.done, 10.0, "the planner to accept the instruction")
                if not send.done():
                    continue
            else:
                self._wait(send.done, 30.0, "the planner to accept the instruction")
            handle = send.result()
            if handle is None or not handle.accepted:
                raise SimJobError(f"the planner rejected instruction {index}")
            return handle.get_result_async()
        raise AssertionError("unreachable: the last try raises or returns")

    def hold(self, seconds: float) -> None:
        """Keeps the graph running for ``seconds`` after the instructions (to look at it, or
        to send it primitives by hand); a node that dies meanwhile ends the run as a failure."""
        domain = os.environ.get("ROS_DOMAIN_ID", "0")
        self._trace.record("status", f"holding the graph for {seconds:.0f} s "
                           f"(ROS_DOMAIN_ID={domain}); Ctrl-C ends it")
        deadline = time.monotonic() + seconds
        try:
            with ctrl_c_interrupts():
                while time.monotonic() < deadline:
                    self._check_alive()
                    time.sleep(0.2)
        except KeyboardInterrupt:
            self._trace.record("status", "hold ended by Ctrl-C")

    def graph_snapshot(self) -> dict[str, dict[str, list[str]]]:
        """The running graph as DDS sees it: per node, what it publishes, subscribes to, serves
        and calls (topic and service names), for the run folder's ``graph.json``."""
        node = self.node
        snapshot: dict[str, dict[str, list[str]]] = {}
        for name, namespace in node.get_node_names_and_namespaces():
            key = f"{namespace.rstrip('/')}/{name}"
            snapshot[key] = {
                "publishers": sorted(t for t, _ in node.get_publisher_names_and_types_by_node(
                    name, namespace)),
                "subscriptions": sorted(t for t, _ in
                                        node.get_subscriber_names_and_types_by_node(
                                            name, namespace)),
                "services": sorted(t for t, _ in node.get_service_names_and_types_by_node(
                    name, namespace)),
                "clients": sorted(t for t, _ in node.get_client_names_and_types_by_node(
                    name, namespace)),
            }
        return snapshot

    def memory_figures(self) -> dict[str, Any]:
        """Sizes of the memory after the run, read over ROS."""
        keyframes = self._call(self._keyframes, QueryKeyframes.Request(limit=100000), 30.0,
                               "query_keyframes")
        graph = self._graph
        nodes = len(graph.nodes) if graph is not None else 0
        props = sum(1 for n in (graph.nodes if graph else []) for p in n.properties
                    if p.source == "interaction")
        with self._lock:
            events = self._events
        return {
            "scene graph nodes": nodes,
            "graph revision": graph.revision if graph is not None else 0,
            "interaction-derived properties": props,
            "memory events seen": events,
            "keyframes stored": len(keyframes.keyframes),
        }
