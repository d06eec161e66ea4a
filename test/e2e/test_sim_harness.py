"""End to end: the propose-verify harness inside a running ``mimir sim`` graph.

``mimir sim`` runs Locked-and-Unlocked with the reasoner fault profile on (a seeded share of
the offline reasoner's answers corrupted, each corruption logged) and holds the graph up after
the instructions. Meanwhile the test sends the executor a look into a cabinet memory does not
hold open, over the ``execute_primitive`` action. Afterwards the run folder shows corrupted
claims rejected, corrected and deferred, no wrong fact admitted, and the look into the closed
cabinet recorded as "interior not observed" with no contents and no emptiness written.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import rclpy
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from sim_runs import mimir_exe, sim_env

from mimir.ros import qos
from mimir.ros.actions import ActionClient
from mimir_msgs.action import ExecutePrimitive
from mimir_msgs.msg import MemoryEvent
from mimir_msgs.srv import GetSceneGraph

pytestmark = [pytest.mark.ros, pytest.mark.slow, pytest.mark.timeout(1200),
              pytest.mark.usefixtures("one_simulation_at_a_time")]

#: fault rate and seed of the run; the seed is fixed so the test sees the same corruptions
RATE, SEED = 0.6, 4

#: the memory events each corruption kind can put wrong facts into
_EVENTS_OF = {
    "flip_locked": ("property_set",), "flip_openable": ("property_set",),
    "invent_content": ("contents_set",), "occluded_content": ("contents_set",),
    "wrong_id": ("property_set", "contents_set"),
    "false_success": ("task_outcome_recorded",), "unseen_success": ("task_outcome_recorded",),
}


def _trace(run: Path) -> list[dict[str, Any]]:
    path = run / "trace.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _end(proc: subprocess.Popen[str]) -> str:
    """End the job and return its output: Ctrl-C ends the hold; a job still running after a
    minute gets SIGTERM (it then stops its nodes), so no graph outlives the test and meets the
    next simulation on this process's ROS domain."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        if proc.poll() is not None:
            break
        proc.send_signal(sig)
        try:
            return proc.communicate(timeout=60)[0]
        except subprocess.TimeoutExpired:
            continue
    if proc.poll() is None:
        proc.kill()
    return proc.communicate(timeout=60)[0]


def _wait(predicate: Any, timeout: float, what: str, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert proc.poll() is None, f"mimir sim ended early ({proc.returncode}) waiting for {what}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


class _Operator:
    """A node that sends the executor primitives and listens to memory, as an operator would."""

    def __init__(self) -> None:
        self.context = Context()
        rclpy.init(context=self.context)
        self.node = Node("harness_probe", context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.events: list[MemoryEvent] = []
        self.node.create_subscription(MemoryEvent, "memory_events", self.events.append,
                                      qos.EVENTS)
        self.actions = ActionClient(self.node, ExecutePrimitive, "execute_primitive")
        self.graph = self.node.create_client(GetSceneGraph, "get_scene_graph")

    def spin_until(self, done: Any, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not done() and time.monotonic() < deadline:
            self.executor.spin_once(timeout_sec=0.1)

    def call_graph(self) -> Any:
        assert self.graph.wait_for_service(timeout_sec=30.0)
        future = self.graph.call_async(GetSceneGraph.Request())
        self.spin_until(future.done, 30.0)
        assert future.done()
        return future.result()

    def run(self, primitive: str, node: Any) -> Any:
        goal = ExecutePrimitive.Goal(primitive=primitive, target_id=node.id,
                                     use_target_pose=True, task="look inside a closed cabinet")
        goal.target_pose.header.frame_id = "map"
        goal.target_pose.pose.position = node.position
        goal.target_pose.pose.orientation.w = 1.0
        goal.parameters = [_kv("label", node.label)]
        assert self.actions.wait_for_server(timeout_sec=30.0)
        sent = self.actions.send_goal_async(goal)
        self.spin_until(sent.done, 30.0)
        handle = sent.result()
        assert handle is not None and handle.accepted, f"{primitive} refused"
        result = handle.get_result_async()
        self.spin_until(result.done, 180.0)
        assert result.done(), f"{primitive} did not finish"
        return result.result().result

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)


def _kv(key: str, value: str) -> Any:
    from diagnostic_msgs.msg import KeyValue

    return KeyValue(key=key, value=value)


def test_harness_rejects_corrects_and_defers_corrupted_claims_in_a_running_graph(
        tmp_path: Path) -> None:
    env = sim_env()
    proc = subprocess.Popen(
        [mimir_exe(), "sim", "--scenario", "locked_unlocked", "--profile", "ideal",
         "--runs", str(tmp_path),
         "--instruction-timeout", "400", "--reasoner-faults", str(RATE), "--fault-seed",
         str(SEED), "--hold", "240", "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    operator = None
    try:
        _wait(lambda: len(list(tmp_path.iterdir())) == 1, 60, "the run folder", proc)
        run = next(tmp_path.iterdir())
        _wait(lambda: any(t["kind"] == "status" and t["text"].startswith("holding the graph")
                          for t in _trace(run)), 900, "the instructions to finish", proc)
        operator = _Operator()
        graph = operator.call_graph().graph
        # a cabinet memory does not hold open, the one it holds locked first (in this scenario
        # the locked one stays closed)
        def said(node: Any, name: str) -> bool:
            return any(p.name == name and p.value_json == "true" for p in node.properties)

        closed = [n for n in graph.nodes if n.label == "cabinet" and not said(n, "is_opened")]
        assert closed, "memory holds no closed cabinet after the run"
        cabinet = sorted(closed, key=lambda n: not said(n, "locked"))[0]
        moved = operator.run("move_to", cabinet)
        assert moved.success, moved.outcome
        looked = operator.run("inspect", cabinet)
        iid = looked.interaction_id

        def analysed() -> bool:
            return any(e.kind == "task_outcome_recorded" and e.subject_id == cabinet.id
                       and any(r.kind == "interaction" and r.id == iid for r in e.evidence)
                       for e in operator.events)

        operator.spin_until(analysed, 120.0)
        assert analysed(), "the look into the closed cabinet was never analysed"
        about = [e for e in operator.events if e.subject_id == cabinet.id
                 and any(r.kind == "interaction" and r.id == iid for r in e.evidence)]
        outcome = next(e for e in about if e.kind == "task_outcome_recorded")
        assert outcome.verdict in ("admit", "correct")
        assert json.loads(outcome.payload_json)["success"] is False
        assert "interior not observed" in outcome.verdict_reason + outcome.payload_json
        written = [e for e in about if e.kind in ("contents_set", "property_set")
                   and e.verdict in ("admit", "correct")]
        assert written == [], [e.payload_json for e in written]
        after = next(n for n in operator.call_graph().graph.nodes if n.id == cabinet.id)
        assert not after.contents
        fullness = [json.loads(p.value_json) for p in after.properties if p.name == "fullness"]
        assert "empty" not in fullness, fullness
    finally:
        if operator is not None:
            operator.close()
        out = _end(proc)
    run = next(tmp_path.iterdir())
    trace = _trace(run)
    faults = [json.loads(line) for line in
              (run / "reasoner_faults.jsonl").read_text().splitlines()]
    corrupted = {f["interaction_id"] for f in faults}
    assert corrupted, out[-3000:]
    memory = [t for t in trace if t["kind"] == "memory"]
    verdicts = {t["verdict"] for t in memory if corrupted & set(t.get("interactions", ()))}
    assert {"reject", "correct", "defer"} <= verdicts, (verdicts, faults)
    audit = json.loads((run / "audit_summary.json").read_text())
    assert audit["faults"] == len(faults)
    # no corruption got through: no fact of the corrupted kind, from a corrupted interaction,
    # took effect wrong (event ids are analyzer:<interaction>:...; the judge graded every verdict)
    grades = [json.loads(line) for line in (run / "audit.jsonl").read_text().splitlines()]
    touched = {(f["interaction_id"], kind) for f in faults for kind in _EVENTS_OF[f["kind"]]}
    leaked = [g for g in grades if g["verdict"] in ("admit", "correct") and g["truth"] is False
              and (g["event_id"].split(":")[1], g["kind"]) in touched]
    assert leaked == [], leaked
