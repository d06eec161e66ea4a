"""The planner's :class:`~mimir_planner.planner.Executor` over ROS: primitive action + analyzer.

:class:`ActionPrimitiveExecutor` runs one validated step on the robot (or the simulation) and
reports what memory can rely on:

1. it sends an ``execute_primitive`` goal (mimir_msgs/ExecutePrimitive) naming the abstract
   primitive, the target's scene-graph id, its remembered position in the map
   (``use_target_pose``) and label (parameter ``label``); a ``place`` also carries the destination
   (``destination_id``/``destination_label``/``destination_x|y|z``) and the held object;
2. it waits for the result with a timeout (a primitive that does not finish is canceled);
3. for primitives the interaction analyzer judges, it takes the ENDED ``interaction_events``
   message with the result's interaction id (or rebuilds it from the result when the event was
   missed) and calls ``analyze_interaction``, which writes the verified updates to world memory
   through the scene graph node;
4. it refreshes the read-only world memory and returns an
   :class:`~mimir_planner.planner.ExecutionOutcome` whose success is the executor's report
   confirmed by the analyzer's verified verdict, with the effects task memory needs (both judged
   by the core, :mod:`mimir_planner.outcomes`). The outcome also carries the executor's outcome
   code and its own success report, so the planner can tell a missed grasp from a locked
   fixture and an unconfirmed success from a failure.

Nothing here spins an executor: futures are polled with timeouts from the caller's thread, so
the caller must be a callback of a multi-threaded executor whose clients live in a reentrant
callback group (the planner node's run_task loop).
"""

from __future__ import annotations

import functools
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rclpy.action import ActionClient
from rclpy.client import Client
from rclpy.node import Node

from mimir.nodes.planner.primitive_messages import (
    InteractionEventBuffer,
    analysis_code_name,
    ended_event_from_result,
    primitive_goal,
    settle_result,
)
from mimir.ros.floatfix import coerce_floats
from mimir_memory.world import WorldMemory
from mimir_msgs.action import ExecutePrimitive
from mimir_msgs.msg import InteractionEvent
from mimir_msgs.srv import AnalyzeInteraction
from mimir_planner.outcomes import Opens, Verification, step_outcome
from mimir_planner.primitives import ExecutableStep
from mimir_planner.runs import ExecutionOutcome, ExecutorUnavailableError, Observation

LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class ExecutorSettings:
    """Timeouts and policies of :class:`ActionPrimitiveExecutor`.

    Attributes:
        server_wait_s: How long to wait for the action server before giving up (s).
        accept_timeout_s: How long to wait for the goal to be accepted (s).
        busy_retry_s: How often a goal the executor refused (busy) is sent again (s).
        result_timeout_s: How long a primitive may run before it is canceled (s).
        event_wait_s: How long to wait for the ENDED interaction event after the result (s).
        analysis_timeout_s: How long to wait for the analyzer's answer (s).
        analyzed_primitives: Primitives whose outcome the analyzer verifies.
        require_verification: When true, an analysed primitive the analyzer could not verify
            (analyzer down or failing) counts as failed; when false the executor's report stands.
        map_frame: Frame of remembered positions.
        embodiment: Embodiment name sent along as a parameter.
    """

    server_wait_s: float = 5.0
    accept_timeout_s: float = 10.0
    busy_retry_s: float = 0.5
    result_timeout_s: float = 180.0
    event_wait_s: float = 2.0
    analysis_timeout_s: float = 180.0
    analyzed_primitives: tuple[str, ...] = ("open", "close", "inspect", "pick", "place")
    require_verification: bool = True
    map_frame: str = "map"
    embodiment: str = ""

    def __post_init__(self) -> None:
        for name in ("server_wait_s", "accept_timeout_s", "busy_retry_s", "result_timeout_s",
                     "analysis_timeout_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0.0):
                raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
        if not (math.isfinite(self.event_wait_s) and self.event_wait_s >= 0.0):
            raise ValueError(f"event_wait_s must be >= 0, got {self.event_wait_s!r}")


def _wait_future(future: Any, timeout_s: float, poll_s: float = 0.01) -> bool:
    deadline = time.monotonic() + timeout_s
    while not future.done():
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)
    return True


class ActionPrimitiveExecutor:
    """Executor protocol over the ``execute_primitive`` action and ``analyze_interaction``.

    Args:
        node: Node that owns the clients (created in a reentrant callback group by the caller).
        action_client: ExecutePrimitive client.
        analyze_client: AnalyzeInteraction client.
        events: Buffer fed by the node's ``interaction_events`` subscription.
        world: The read-only world memory the planner reads (refreshed after each step).
        settings: Timeouts and policies.
        holding: Returns the held object id (task memory's hand).
        opens: Whether a scene node is a fixture that opens (for place relations).
        observe: Returns the latest camera observation (attached to each outcome), or None.
        task_text: Returns the instruction being served (sent with every goal).
        cancelled: Returns True when the caller's task was canceled (a running primitive is
            then canceled too).
    """

    def __init__(
        self,
        node: Node,
        action_client: ActionClient,
        analyze_client: Client,
        events: InteractionEventBuffer,
        *,
        world: WorldMemory,
        settings: ExecutorSettings,
        holding: Callable[[], str | None],
        opens: Opens,
        observe: Callable[[], Observation | None] | None = None,
        task_text: Callable[[], str] | None = None,
        cancelled: Callable[[], bool] | None = None,
    ) -> None:
        self.node = node
        self.action_client = action_client
        self.analyze_client = analyze_client
        self.events = events
        self.world = world
        self.settings = settings
        self._holding = holding
        self._opens = opens
        self._observe = observe or (lambda: None)
        self._task_text = task_text or (lambda: "")
        self._cancelled = cancelled or (lambda: False)
        self.executed: list[tuple[ExecutableStep, bool, str]] = []

    def _now(self) -> float:
        return float(self.node.get_clock().now().nanoseconds) * 1e-9

    def _wait_for_server(self) -> None:
        deadline = time.monotonic() + self.settings.server_wait_s
        while not self.action_client.server_is_ready():
            if time.monotonic() >= deadline:
                raise ExecutorUnavailableError(
                    f"the execute_primitive action server did not appear within "
                    f"{self.settings.server_wait_s:g} s")
            time.sleep(0.02)

    def _accepted(self, goal: ExecutePrimitive.Goal) -> Any:
        """The handle of the accepted goal.

        The executor refuses a goal while it runs another one (a planner started again finds
        its predecessor's primitive still running). That says nothing about the target, so the
        goal is sent again every ``busy_retry_s`` for as long as one primitive may run
        (``result_timeout_s``).

        Raises:
            ExecutorUnavailableError: no answer to a goal, or refused for that long.
        """
        busy_until = time.monotonic() + self.settings.result_timeout_s
        while True:
            self._wait_for_server()
            send = self.action_client.send_goal_async(coerce_floats(goal))
            if not _wait_future(send, self.settings.accept_timeout_s):
                send.cancel()
                raise ExecutorUnavailableError(
                    f"execute_primitive did not answer the goal within "
                    f"{self.settings.accept_timeout_s:g} s")
            handle = send.result()
            if handle is not None and handle.accepted:
                return handle
            if self._cancelled():
                raise ExecutorUnavailableError("the task was canceled while the executor was "
                                               "busy with another goal")
            if time.monotonic() >= busy_until:
                raise ExecutorUnavailableError(
                    f"the executor refused every goal for {self.settings.result_timeout_s:g} s "
                    "(busy with another one)")
            time.sleep(self.settings.busy_retry_s)

    def _send(self, goal: ExecutePrimitive.Goal) -> ExecutePrimitive.Result | str:
        """The action result, or the reason there is none."""
        handle = self._accepted(goal)
        result_future = handle.get_result_async()
        deadline = time.monotonic() + self.settings.result_timeout_s
        canceled_by_task = False
        while not result_future.done():
            if not canceled_by_task and self._cancelled():
                # the executor decides whether it can stop; its result is awaited as usual
                handle.cancel_goal_async()
                canceled_by_task = True
            if time.monotonic() >= deadline:
                handle.cancel_goal_async()
                grace = time.monotonic() + self.settings.accept_timeout_s
                while not result_future.done() and time.monotonic() < grace:
                    time.sleep(0.01)
                if not result_future.done():
                    return (f"{goal.primitive}({goal.target_id}) did not finish within "
                            f"{self.settings.result_timeout_s:g} s; cancel requested")
                break
            time.sleep(0.01)
        response = result_future.result()
        if response is None:
            return "the executor returned no result"
        result: ExecutePrimitive.Result = response.result
        return result

    def _analyze(self, event: InteractionEvent) -> Verification:
        client = self.analyze_client
        if not client.service_is_ready() and not client.wait_for_service(
                timeout_sec=self.settings.server_wait_s):
            return Verification(False, reason="the interaction analyzer is not available")
        future = client.call_async(coerce_floats(AnalyzeInteraction.Request(interaction=event)))
        if not _wait_future(future, self.settings.analysis_timeout_s):
            client.remove_pending_request(future)
            return Verification(False, reason=(
                f"the interaction analyzer did not answer within "
                f"{self.settings.analysis_timeout_s:g} s"))
        response = future.result()
        if response is None:
            return Verification(False, reason="the interaction analyzer returned nothing")
        code = int(response.error_code)
        keyframes = tuple(response.keyframe_ids)
        if code not in (AnalyzeInteraction.Response.NONE,
                        AnalyzeInteraction.Response.MEMORY_WRITE_FAILED):
            return Verification(False, reason=(
                f"analysis failed ({analysis_code_name(code)}): {response.error_msg}"),
                keyframe_ids=keyframes)
        if code == AnalyzeInteraction.Response.MEMORY_WRITE_FAILED:
            LOG.warning("analysis of %s: some memory writes failed: %s",
                        event.interaction_id, response.error_msg)
        return Verification(True, bool(response.task_success), response.failure_reason,
                            keyframes)

    def execute(self, step: ExecutableStep) -> ExecutionOutcome:
        """Run ``step`` and return the verified outcome.

        Raises:
            ExecutorUnavailableError: The action server is not there or does not answer.
        """
        self.world.refresh()
        holding = self._holding()
        stamp = self._now()
        try:
            goal = primitive_goal(step, self.world.state, holding=holding,
                                  task=self._task_text(), map_frame=self.settings.map_frame,
                                  stamp=stamp)
        except ValueError as err:
            return self._outcome(step, False, f"not sent: {err}", None, code="NOT_SENT")
        result = self._send(goal)
        if isinstance(result, str):
            return self._outcome(step, False, result, None, code="NO_RESULT")

        def verdict() -> Verification:
            event = self.events.wait(result.interaction_id, self.settings.event_wait_s)
            if event is None:
                LOG.info("no ENDED event for %s; analysing from the action result",
                         result.interaction_id)
                event = ended_event_from_result(goal, result, stamp)
            seen = self._analyze(event)
            self.world.refresh()
            return seen

        return settle_result(
            step, result, functools.partial(self._outcome, step),
            analysed=self.settings.analyzed_primitives, verdict=verdict,
            require_verification=self.settings.require_verification)

    def _outcome(self, step: ExecutableStep, success: bool, detail: str,
                 stamp: float | None, *, code: str = "",
                 reported: bool | None = None) -> ExecutionOutcome:
        """The outcome; ``reported`` is the executor's own word (None when it gave none)."""
        self.executed.append((step, success, detail))
        return step_outcome(step, success, detail, stamp, world=self.world.state,
                            holding=self._holding(), opens=self._opens,
                            observation=self._observe(), code=code, reported=reported)
