"""Drive one node interface with generated messages over real DDS and count what went wrong.

A rig runs the nodes under test in this process on a multi-threaded executor whose spin thread
records the exception that stopped it: a callback that raises takes the executor down, which is
what a node death looks like in a process of its own. For each generated case:

* topics: the message is published; the node must still spin afterwards;
* services: the request must be answered within the timeout, with an ``error_code`` the
  service documents; when the code refuses the request, the memory databases must hold exactly
  the events they held before (a refused request writes nothing).

After the cases the rig's probe sends a valid input and checks the node still does its job, and
the memory folder must pass ``mimir memory check`` (no stored event that does not apply).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from rclpy.context import Context
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

from mimir.ros.runtime import HandOffExecutor
from mimir_memory.maintenance import check_memory

#: Generated cases per interface: a bounded, seeded run in ``make test``; ``make fuzz`` sets more.
CASES = int(os.environ.get("MIMIR_FUZZ_CASES", "12"))
SEED = int(os.environ.get("MIMIR_FUZZ_SEED", "20261202"))
#: Per-test limit (s): grows with the cases, since an action case can take seconds.
TIMEOUT_S = max(900, 10 * CASES)
#: Where ``make fuzz`` collects the per-interface rows (JSON lines); unset in ``make test``.
TABLE = os.environ.get("MIMIR_FUZZ_TABLE", "")

#: Offers what every subscriber asks for (reliable, transient local) so no QoS mismatch hides
#: a case: a best-effort or volatile subscription matches it too.
FUZZ_QOS = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.TRANSIENT_LOCAL)


class NodeDiedError(AssertionError):
    """The executor running the nodes under test stopped on an exception."""


@dataclass
class Row:
    """What one interface's run found."""

    node: str
    interface: str
    kind: str
    cases: int = 0
    deaths: int = 0
    no_reply: int = 0
    wrong_codes: int = 0
    invalid_writes: int = 0
    refused: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (self.deaths or self.no_reply or self.wrong_codes or self.invalid_writes)

    def as_dict(self) -> dict[str, Any]:
        return {"node": self.node, "interface": self.interface, "kind": self.kind,
                "cases": self.cases, "deaths": self.deaths, "no_reply": self.no_reply,
                "wrong_codes": self.wrong_codes, "invalid_writes": self.invalid_writes,
                "refused": self.refused, "problems": self.problems[:5]}


class WatchedExecutor:
    """A multi-threaded executor spinning in a thread that keeps the exception that stopped it."""

    def __init__(self, context: Context, threads: int = 4) -> None:
        self.executor = HandOffExecutor(num_threads=threads, context=context)
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        try:
            self.executor.spin()
        except BaseException as err:  # noqa: BLE001 - kept and reported as the node's death
            self.error = err

    def alive(self) -> bool:
        return self._thread.is_alive() and self.error is None

    def check(self) -> None:
        """Raises NodeDiedError when the executor stopped."""
        if not self.alive():
            raise NodeDiedError(f"the node executor stopped: {self.error!r}")

    def shutdown(self) -> None:
        nodes = list(self.executor.get_nodes())
        self.executor.shutdown(timeout_sec=5.0)
        for node in nodes:
            node.destroy_node()
        self._thread.join(timeout=5.0)


class Watched:
    """One watched executor per node, as if each ran in its own process: a node whose
    callbacks wait on another node's service cannot starve that service of threads."""

    def __init__(self, context: Context) -> None:
        self.context = context
        self.executors: list[WatchedExecutor] = []

    def add(self, node: Node, threads: int = 4) -> Node:
        ex = WatchedExecutor(self.context, threads)
        ex.executor.add_node(node)
        self.executors.append(ex)
        return node

    def alive(self) -> bool:
        return all(ex.alive() for ex in self.executors)

    @property
    def error(self) -> BaseException | None:
        return next((ex.error for ex in self.executors if ex.error is not None), None)

    def check(self) -> None:
        for ex in self.executors:
            ex.check()

    def shutdown(self) -> None:
        for ex in reversed(self.executors):
            ex.shutdown()


@contextmanager
def watched(context: Context) -> Iterator[Watched]:
    group = Watched(context)
    try:
        yield group
    finally:
        group.shutdown()


#: The memory databases, by the name a service's ``writes`` uses.
DATABASES = {"world": "world.db", "task": "task.db", "keyframes": "keyframes/keyframes.db"}


def memory_snapshot(folder: Path, names: tuple[str, ...] = tuple(DATABASES)
                    ) -> tuple[int, ...]:
    """Event counts and last sequence numbers of the named memory databases (read-only)."""
    out: list[int] = []
    for db in (folder / DATABASES[name] for name in names):
        if not db.is_file():
            out += [-1, -1]
            continue
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10.0) as con:
            count, last = con.execute("SELECT COUNT(*), COALESCE(MAX(seq), 0) FROM events"
                                      ).fetchone()
        out += [int(count), int(last)]
    return tuple(out)


def memory_problems(folder: Path) -> list[str]:
    """What ``mimir memory check`` finds wrong in the folder (empty when sound)."""
    return [f"{r.name}: {r.error or r.integrity} {r.skipped[:3]}"
            for r in check_memory(folder) if not r.ok]


def documented_codes(response_cls: type) -> dict[int, str]:
    """The error codes a service's response declares (its upper-case integer constants)."""
    return {getattr(response_cls, n): n for n in dir(response_cls)
            if n.isupper() and isinstance(getattr(response_cls, n), int)
            and n not in ("SLOT_TYPES",)}


def _run(strategy: st.SearchStrategy[Any], cases: int, salt: int,
         body: Callable[[Any], None]) -> None:
    @settings(max_examples=cases, database=None, deadline=None, derandomize=False,
              phases=(Phase.generate,), suppress_health_check=list(HealthCheck),
              print_blob=True)
    @seed(SEED + salt)
    @given(strategy)
    def case(value: Any) -> None:
        body(value)
    case()


def fuzz_topic(row: Row, driver: Node, ex: Watched, msg_type: type,
               strategy: st.SearchStrategy[Any], *, cases: int = CASES,
               pause_s: float = 0.01) -> None:
    """Publish ``cases`` generated messages on ``row.interface``; the nodes must keep spinning."""
    pub = driver.create_publisher(msg_type, row.interface, FUZZ_QOS)
    try:
        deadline = time.monotonic() + 10.0
        while pub.get_subscription_count() == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert pub.get_subscription_count() > 0, f"nobody subscribes to {row.interface}"

        def body(msg: Any) -> None:
            row.cases += 1
            pub.publish(msg)
            time.sleep(pause_s)
            _check_alive(row, ex)
        _run(strategy, cases, zlib.crc32(row.interface.encode()) % 10_000, body)
        time.sleep(1.0)  # let the queued messages reach the callbacks
        _check_alive(row, ex)
    finally:
        driver.destroy_publisher(pub)


def fuzz_service(row: Row, driver: Node, ex: Watched, srv_type: type,
                 strategy: st.SearchStrategy[Any], *, memory: Path | None,
                 writes: tuple[str, ...] = tuple(DATABASES), cases: int = CASES,
                 timeout: float = 20.0) -> None:
    """Call ``row.interface`` with ``cases`` generated requests; check replies and writes.

    ``writes`` names the databases the service may write (a refused request must leave them
    as they were); others change on their own (a keyframe saved because the graph changed)."""
    codes = documented_codes(srv_type.Response)
    none = codes and min(c for c, n in codes.items() if n == "NONE")
    caller = Caller(driver, srv_type, row.interface)
    try:
        caller.ready()

        def body(request: Any) -> None:
            row.cases += 1
            before = memory_snapshot(memory, writes) if memory is not None else None
            reply = caller.call(request, timeout, ex.alive)
            _check_alive(row, ex)
            if reply is None:
                row.no_reply += 1
                row.problems.append(f"no reply within {timeout} s")
                raise AssertionError(f"{row.interface}: no reply within {timeout} s")
            code = getattr(reply, "error_code", None)
            if code is None:
                return  # a service without codes (std_srvs/Trigger): answering is the check
            if code not in codes:
                row.wrong_codes += 1
                row.problems.append(f"undocumented code {code}: {reply.error_msg[:120]}")
                raise AssertionError(f"{row.interface}: undocumented error code {code}")
            if code != none:
                row.refused += 1
                if before is not None and memory is not None \
                        and memory_snapshot(memory, writes) != before:
                    row.invalid_writes += 1
                    row.problems.append(f"refused with {codes[code]} but memory changed")
                    raise AssertionError(f"{row.interface}: refused ({codes[code]}) yet "
                                         "memory changed")
        _run(strategy, cases, zlib.crc32(row.interface.encode()) % 10_000, body)
    finally:
        driver.destroy_client(caller.client)


class Caller:
    """A service client kept for the rig's life, made ready before its first counted call.

    ``wait_for_service`` only says the request can reach the server; until the reply path
    has matched as well, DDS may drop the first replies. ``ready()`` sends default requests
    (each refused or harmless) until one is answered."""

    def __init__(self, driver: Node, srv_type: type, name: str) -> None:
        self.srv_type, self.name = srv_type, name
        self.client: Any = driver.create_client(srv_type, name)

    def ready(self, tries: int = 20) -> None:
        assert self.client.wait_for_service(timeout_sec=20.0), f"{self.name} not available"
        for _ in range(tries):
            if self.call(self.srv_type.Request(), timeout=1.0) is not None:
                return
        raise AssertionError(f"{self.name} never answered a default request")

    def call(self, request: Any, timeout: float = 20.0,
             alive: Callable[[], bool] = lambda: True) -> Any:
        """The reply, or None when none came within ``timeout`` (or ``alive()`` turned false)."""
        future = self.client.call_async(request)
        end = time.monotonic() + timeout
        while not future.done() and time.monotonic() < end and alive():
            time.sleep(0.005)
        if not future.done():
            self.client.remove_pending_request(future)
            return None
        return future.result()


def fuzz_action(row: Row, driver: Node, ex: Watched, action_type: type,
                strategy: st.SearchStrategy[Any], *, cases: int = CASES,
                timeout: float = 60.0) -> None:
    """Send ``cases`` generated goals to ``row.interface``: each must be rejected, or accepted
    and finished within ``timeout`` with an error code its result documents."""
    from mimir.ros.actions import ActionClient
    codes = documented_codes(action_type.Result)
    none = min(c for c, n in codes.items() if n == "NONE")
    client = ActionClient(driver, action_type, row.interface)
    try:
        assert client.wait_for_server(timeout_sec=20.0), f"{row.interface} not served"

        def wait(future: Any, limit: float) -> bool:
            end = time.monotonic() + limit
            while not future.done() and time.monotonic() < end and ex.alive():
                time.sleep(0.01)
            return bool(future.done())

        def body(goal: Any) -> None:
            row.cases += 1
            sent = client.send_goal_async(goal)
            answered = wait(sent, 20.0)
            _check_alive(row, ex)
            if not answered:
                row.no_reply += 1
                raise AssertionError(f"{row.interface}: the goal was neither accepted nor "
                                     "rejected within 20 s")
            handle = sent.result()
            if not handle.accepted:
                row.refused += 1
                return
            result = handle.get_result_async()
            if not wait(result, timeout):
                handle.cancel_goal_async()
                wait(result, 20.0)
                row.no_reply += 1
                raise AssertionError(f"{row.interface}: no result within {timeout} s")
            _check_alive(row, ex)
            code = result.result().result.error_code
            if code not in codes:
                row.wrong_codes += 1
                raise AssertionError(f"{row.interface}: undocumented error code {code}")
            if code != none:
                row.refused += 1
        _run(strategy, cases, zlib.crc32(row.interface.encode()) % 10_000, body)
    finally:
        client.destroy()


def _check_alive(row: Row, ex: Watched) -> None:
    if not ex.alive():
        row.deaths += 1
        row.problems.append(repr(ex.error))
        ex.check()


def check_memory_sound(row: Row, memory: Path) -> None:
    """The memory folder passes ``mimir memory check``; counts an invalid write otherwise."""
    problems = memory_problems(memory)
    if problems:
        row.invalid_writes += 1
        row.problems += problems
    assert not problems, problems


def record(row: Row) -> None:
    """Append the row to ``$MIMIR_FUZZ_TABLE`` (``make fuzz``)."""
    if TABLE:
        import json
        with open(TABLE, "a", encoding="utf-8") as out:
            out.write(json.dumps(row.as_dict()) + "\n")


def thread_stacks(limit: int = 12) -> str:
    """Where every thread of this process is (for a node that stopped answering)."""
    import sys
    import traceback
    names = {t.ident: t.name for t in threading.enumerate()}
    return "\n".join(
        f"--- {names.get(ident, ident)}\n" + "".join(traceback.format_stack(frame, limit=limit))
        for ident, frame in sys._current_frames().items())


@contextmanager
def stacks_on_failure() -> Iterator[None]:
    """Re-raise an assertion with every thread's stack appended."""
    try:
        yield
    except AssertionError as err:
        raise AssertionError(f"{err}\n{thread_stacks()}") from err


def fuzz_interface(row: Row, driver: Node, ex: Watched, msg_type: type,
                   strategy: st.SearchStrategy[Any], *, probe: Callable[[], None],
                   memory: Path | None = None, writes: tuple[str, ...] = tuple(DATABASES),
                   timeout: float = 20.0) -> None:
    """One interface's whole check, by ``row.kind``: the cases, then the nodes still spin,
    ``probe()`` passes (with every thread's stack when it does not) and, given ``memory``, the
    folder passes its check. The row is recorded either way."""
    try:
        if row.kind == "topic":
            fuzz_topic(row, driver, ex, msg_type, strategy)
        elif row.kind == "action":
            fuzz_action(row, driver, ex, msg_type, strategy, timeout=timeout)
        else:
            fuzz_service(row, driver, ex, msg_type, strategy, memory=memory, writes=writes,
                         timeout=timeout)
        ex.check()
        with stacks_on_failure():
            probe()
        if memory is not None:
            check_memory_sound(row, memory)
    finally:
        record(row)
    assert row.clean, row.problems
