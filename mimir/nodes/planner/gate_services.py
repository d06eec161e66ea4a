"""The operator gate over ROS: ``list_pending_primitives`` and ``approve_primitive``.

:class:`GateServices` owns the planner's :class:`~mimir_planner.hosting.TrackedGate`. When a
primitive waits for approval it remembers the plan step and the instruction it belongs to (what
``list_pending_primitives`` shows), logs it and announces it through the task's feedback; the
services then let an operator approve or deny it by request id.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from rclpy.callback_groups import CallbackGroup
from rclpy.node import Node

from mimir.ros.diagnostics import NodeCounters
from mimir_msgs.msg import PlanStep
from mimir_msgs.srv import ApprovePrimitive, ListPendingPrimitives
from mimir_planner.config import GateConfig
from mimir_planner.errors import GateError
from mimir_planner.gate import GateRequest
from mimir_planner.hosting import TrackedGate


@dataclass
class _Pending:
    step: PlanStep
    task: str


class GateServices:
    """The gate's services and request bookkeeping.

    Args:
        node: Node that owns the services and logs.
        config: Gate settings (enabled, timeout).
        counters: Diagnostics counters (approvals and denials are counted).
        plan: The current plan as PlanStep messages (its first step is what waits).
        task_text: The instruction being served.
        announce: Publishes a feedback status with the waiting step.
        group: Callback group of the services.
    """

    def __init__(self, node: Node, config: GateConfig, *, counters: NodeCounters,
                 plan: Callable[[], list[PlanStep]], task_text: Callable[[], str],
                 announce: Callable[[str, list[PlanStep]], None],
                 group: CallbackGroup) -> None:
        self._node = node
        self._counters = counters
        self._plan = plan
        self._task_text = task_text
        self._announce = announce
        self._pending: dict[int, _Pending] = {}
        self._lock = threading.Lock()
        self.gate = TrackedGate(config, self._on_submit)
        node.create_service(ApprovePrimitive, "approve_primitive", self._on_approve,
                            callback_group=group)
        node.create_service(ListPendingPrimitives, "list_pending_primitives",
                            self._on_list_pending, callback_group=group)

    def _on_submit(self, request: GateRequest) -> None:
        if not self.gate.enabled:
            return
        steps = self._plan()
        step = steps[0] if steps else PlanStep(reasoning=request.description)
        with self._lock:
            self._pending[request.request_id] = _Pending(step, self._task_text())
        self._node.get_logger().info(
            f"awaiting approval of request {request.request_id}: {request.description}")
        self._announce(f"awaiting_approval request {request.request_id}: "
                       f"{request.description}", steps[:1])

    def _on_list_pending(self, request: ListPendingPrimitives.Request,
                         response: ListPendingPrimitives.Response
                         ) -> ListPendingPrimitives.Response:
        pending = self.gate.pending()
        with self._lock:
            info = {i: self._pending.get(i) for i in (r.request_id for r in pending)}
        for req in pending:
            item = info.get(req.request_id)
            response.request_ids.append(str(req.request_id))
            response.steps.append(item.step if item else PlanStep(reasoning=req.description))
            response.tasks.append(item.task if item else "")
        return response

    def _on_approve(self, request: ApprovePrimitive.Request,
                    response: ApprovePrimitive.Response) -> ApprovePrimitive.Response:
        text = request.request_id.strip()
        if not text.isdigit() or not self.gate.known(int(text)):
            response.error_code = ApprovePrimitive.Response.UNKNOWN_REQUEST
            response.error_msg = f"unknown request id {request.request_id!r}"
            return response
        request_id = int(text)
        try:
            if request.approve:
                self.gate.approve(request_id, request.reason)
            else:
                self.gate.deny(request_id, request.reason)
        except GateError as err:
            response.error_code = ApprovePrimitive.Response.ALREADY_DECIDED
            response.error_msg = str(err)
            return response
        with self._lock:
            self._pending.pop(request_id, None)
        self._counters.add("gate_approved" if request.approve else "gate_denied")
        response.error_code = ApprovePrimitive.Response.NONE
        return response
