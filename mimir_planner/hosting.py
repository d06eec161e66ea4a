"""Ready-made pieces for whatever hosts a planning session (the ROS planner node, tools, tests).

* :class:`RecordingPolicy` keeps the last planning context and answer of a policy, so a host can
  report the plan, the grounding and the retrieved keyframes of every planner call.
* :class:`TrackedGate` is an operator gate that tells the host about each new request (to list
  it and announce it) and can deny everything waiting at once (cancel, shutdown).
* :func:`wait_for_first_nodes` holds an instruction back until perception has put something
  into an empty world memory.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from mimir_memory.world import WorldMemory
from mimir_planner.config import GateConfig
from mimir_planner.errors import GateError, PlanAnswerError
from mimir_planner.gate import GateRequest, OperatorGate
from mimir_planner.plan_schema import PlanAnswer, parse_plan_answer
from mimir_planner.policies import PlannerPolicy, PlanningContext


class RecordingPolicy:
    """Wraps a planner policy and keeps the last context and answer (for feedback)."""

    def __init__(self, inner: PlannerPolicy) -> None:
        self.inner = inner
        self.context: PlanningContext | None = None
        self.text: str | None = None

    @property
    def name(self) -> str:
        """The wrapped policy's name."""
        return self.inner.name

    def reset(self) -> None:
        """Forget the last call (before a new planner step)."""
        self.context = None
        self.text = None

    def propose(self, ctx: PlanningContext) -> str:
        """Delegate and record."""
        self.context = ctx
        self.text = None
        text = self.inner.propose(ctx)
        self.text = text
        return text

    def answer(self) -> PlanAnswer | None:
        """The last answer parsed, or None when there was none or it was invalid."""
        if self.text is None:
            return None
        try:
            return parse_plan_answer(self.text)
        except PlanAnswerError:
            return None


class TrackedGate(OperatorGate):
    """Operator gate that reports each new request to a callback (to list and announce it)."""

    def __init__(self, config: GateConfig, on_submit: Callable[[GateRequest], None]) -> None:
        super().__init__(config)
        self._on_submit = on_submit
        self._known: set[int] = set()
        self._known_lock = threading.Lock()

    def submit(self, description: str) -> GateRequest:
        """Queue a request and report it."""
        request = super().submit(description)
        with self._known_lock:
            self._known.add(request.request_id)
        self._on_submit(request)
        return request

    def known(self, request_id: int) -> bool:
        """Whether the request was ever submitted."""
        with self._known_lock:
            return request_id in self._known

    def deny_all(self, reason: str) -> int:
        """Deny every pending request; returns how many were denied."""
        count = 0
        for request in self.pending():
            try:
                self.deny(request.request_id, reason)
                count += 1
            except GateError:
                continue  # decided (or timed out) meanwhile
        return count


def wait_for_first_nodes(world: WorldMemory, *, wait_s: float, settle_s: float,
                         cancelled: Callable[[], bool], poll_s: float = 0.1) -> bool:
    """Wait for a first perception of the scene when world memory is empty.

    A robot that has just started has not perceived anything yet; exploring an empty memory
    would block the first instruction at once ("nothing left to explore"), and exploring the
    first fixture seen would ignore the others a moment later. So an empty memory is waited on
    (refreshing it every ``poll_s``) until it holds nodes and no new node has appeared for
    ``settle_s``, at most ``wait_s`` in all; ``cancelled`` ends the wait early. A memory that
    already holds nodes is used as it is.

    Returns:
        Whether memory holds a node.
    """
    if world.state.nodes:
        return True
    start = time.monotonic()
    deadline = start + wait_s
    count, changed = 0, start
    while time.monotonic() < deadline and not cancelled():
        time.sleep(poll_s)
        world.refresh()
        now = time.monotonic()
        if len(world.state.nodes) != count:
            count, changed = len(world.state.nodes), now
        elif count and now - changed >= settle_s:
            break
    return bool(world.state.nodes)
