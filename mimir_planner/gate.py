"""Operator gate core: when enabled, every primitive waits for an operator's approval.

A request gets an id and sits in a queue until an operator approves or denies it (through a
service or the command line in the node), or until its timeout passes, which counts as a denial.
When the gate is disabled (the simulation default) requests are approved at once.
Thread-safe: the planner thread waits while a service thread decides.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from mimir_planner.config import GateConfig
from mimir_planner.errors import GateError

LOG = logging.getLogger(__name__)


class GateState(StrEnum):
    """State of a gate request."""

    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"
    TIMED_OUT = "timed_out"


@dataclass(frozen=True)
class GateRequest:
    """A step awaiting approval."""

    request_id: int
    description: str
    created: float


@dataclass(frozen=True)
class GateDecision:
    """The answer to a request; ``approved`` is False for denials and timeouts."""

    request_id: int
    state: GateState
    reason: str = ""

    @property
    def approved(self) -> bool:
        """True only for an explicit approval (or a disabled gate)."""
        return self.state is GateState.APPROVED


class OperatorGate:
    """Request queue with approve/deny and a timeout that denies."""

    def __init__(
        self, config: GateConfig, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.config = config
        self._clock = clock
        self._cond = threading.Condition()
        self._ids = itertools.count(1)
        self._pending: dict[int, GateRequest] = {}
        self._decided: dict[int, GateDecision] = {}

    @property
    def enabled(self) -> bool:
        """Whether primitives wait for approval."""
        return self.config.enabled

    def submit(self, description: str) -> GateRequest:
        """Queue a step for approval (also when disabled, so the log is complete)."""
        if not isinstance(description, str) or not description.strip():
            raise GateError("a gate request needs a description")
        with self._cond:
            request = GateRequest(next(self._ids), description, self._clock())
            if self.enabled:
                self._pending[request.request_id] = request
            else:
                self._decided[request.request_id] = GateDecision(
                    request.request_id, GateState.APPROVED, "gate disabled"
                )
            LOG.info("gate request %d: %s", request.request_id, description)
            return request

    def pending(self) -> list[GateRequest]:
        """Requests awaiting a decision, oldest first."""
        with self._cond:
            return sorted(self._pending.values(), key=lambda r: r.request_id)

    def _decide(self, request_id: int, state: GateState, reason: str) -> GateDecision:
        with self._cond:
            if request_id in self._decided:
                raise GateError(f"gate request {request_id} was already decided")
            if request_id not in self._pending:
                raise GateError(f"unknown gate request {request_id}")
            del self._pending[request_id]
            decision = GateDecision(request_id, state, reason)
            self._decided[request_id] = decision
            self._cond.notify_all()
            LOG.info("gate request %d %s %s", request_id, state.value, reason)
            return decision

    def approve(self, request_id: int, reason: str = "") -> GateDecision:
        """Approve a pending request.

        Raises:
            GateError: Unknown or already decided request.
        """
        return self._decide(request_id, GateState.APPROVED, reason)

    def deny(self, request_id: int, reason: str = "") -> GateDecision:
        """Deny a pending request.

        Raises:
            GateError: Unknown or already decided request.
        """
        return self._decide(request_id, GateState.DENIED, reason or "denied by the operator")

    def wait(self, request_id: int, timeout_s: float | None = None) -> GateDecision:
        """Block until the request is decided; a timeout denies it.

        Raises:
            GateError: Unknown request.
        """
        limit = self.config.timeout_s if timeout_s is None else timeout_s
        with self._cond:
            if request_id not in self._pending and request_id not in self._decided:
                raise GateError(f"unknown gate request {request_id}")
            deadline = self._clock() + limit
            while request_id not in self._decided:
                remaining = deadline - self._clock()
                if remaining <= 0:
                    del self._pending[request_id]
                    decision = GateDecision(
                        request_id, GateState.TIMED_OUT, f"no decision within {limit:g} s"
                    )
                    self._decided[request_id] = decision
                    LOG.warning("gate request %d timed out", request_id)
                    return decision
                self._cond.wait(remaining)
            return self._decided[request_id]

    def request(self, description: str, timeout_s: float | None = None) -> GateDecision:
        """Submit and wait in one call."""
        return self.wait(self.submit(description).request_id, timeout_s)
