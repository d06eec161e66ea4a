"""The ``main()`` every node shares: init, spin, always shut down.

A node whose callbacks never wait on one another (streams in, results out) spins on a
``SingleThreadedExecutor`` (``threads=1``). That is not only simpler: with this rclpy release the
``MultiThreadedExecutor`` busy-loops while submitted callbacks wait for a pool thread (its spin
thread re-yields queued tasks and scans its growing list of futures), holding the interpreter
lock its own workers need. Profiled under three 1280x720 cameras at 15 Hz, the deprojection node
spent about 70% of its samples in that loop and processed under 1% of the frames. Nodes that
call services from callbacks and wait for the answer spin a :class:`HandOffExecutor`, a
multi-threaded executor without that loop.
"""

from __future__ import annotations

import faulthandler
import gc
import os
import sys
import threading
import traceback
from collections.abc import Callable, Sequence
from typing import Any

import rclpy
from rclpy.executors import (
    ConditionReachedException,
    Executor,
    ExternalShutdownException,
    MultiThreadedExecutor,
    ShutdownException,
    SingleThreadedExecutor,
    TimeoutException,
)
from rclpy.node import Node

#: After a failure, the process gets this long to tear down DDS and exit on its own. If teardown
#: hangs, every thread's stack is written to stderr and the process exits with status 1, so a
#: launcher or test never waits on a node that has already failed.
FAILURE_EXIT_GRACE_S = 15.0

#: Set this environment variable to ``1`` to get the full traceback of a failed start.
DEBUG_ENV = "MIMIR_DEBUG"


def run_node(factory: Callable[[], Node], args: Sequence[str] | None = None,
             threads: int | None = None) -> int:
    """Create the node with ``factory`` and spin it until shutdown.

    ``threads`` is the size of the executor's thread pool: 1 spins on a
    ``SingleThreadedExecutor`` (see the module docstring), None sizes the pool from the CPU count.
    Once the node is built, what start-up made is frozen out of the garbage collector's full
    passes (:func:`settle_heap`). Exits quietly on Ctrl-C or an external shutdown. A constructor
    (or ``rclpy.init``) that raises is a failed start: one line ``<node>: <message>`` goes to
    stderr (the traceback too when ``MIMIR_DEBUG=1``), the half-built node is never handed to
    its own ``destroy_node``, and the function returns exit status 1. A ``RuntimeError``,
    ``ValueError``, ``OSError`` or ``ImportError`` while spinning is written as one line and
    also returns 1. After either failure a watchdog bounds the rest of the shutdown by
    :data:`FAILURE_EXIT_GRACE_S`.
    """
    try:
        rclpy.init(args=list(args) if args is not None else sys.argv)
    except BaseException as err:  # noqa: BLE001 - every kind is handled or re-raised below
        return _failed_start(factory, err)  # e.g. a malformed --ros-args or parameter file
    try:
        try:
            node = factory()
        except BaseException as err:  # noqa: BLE001 - every kind is handled or re-raised below
            return _failed_start(factory, err)
        settle_heap()
        return _spin(node, threads)
    finally:
        rclpy.try_shutdown()


class HandOffExecutor(MultiThreadedExecutor):
    """A multi-threaded executor whose spin thread hands each ready callback to the pool once
    and then waits until a worker has started it.

    This rclpy's ``MultiThreadedExecutor`` hands a callback to its pool and goes straight back
    for more work; a callback still queued for a worker is "not running yet", so it is handed out
    again at once, and again, without the spin thread ever blocking. Counted in a simulation run,
    the analyzer's spin thread went round about 3,000 times a second for 50 callbacks that were
    new, the executor's about 800 for 40: 40-50 % and 15-25 % of a core spent handing out the
    same work. Here the spin thread waits (on an event, not a loop) until a worker takes the
    callback, so a queued callback is never handed out again and the spin thread sleeps in the
    middleware's wait whenever nothing new is ready.

    Nothing can run sooner than with the stock executor: a callback needs a free worker either
    way, and the pool runs callbacks in the order they were handed to it. A wait for a worker
    ends early on shutdown and when the spin's own condition holds (``spin_until_future_complete``).
    """

    #: How often a wait for a free worker looks at shutdown and the spin's condition (s).
    POLL_S = 0.05

    def _spin_once_impl(self, timeout_sec: Any = None,
                        wait_condition: Callable[[], bool] = lambda: False) -> None:
        try:
            handler, _, _ = self.wait_for_ready_callbacks(timeout_sec, None, wait_condition)
        except (ExternalShutdownException, ShutdownException, TimeoutException,
                ConditionReachedException):
            return
        started = threading.Event()
        self._executor.submit(_run_started, handler, started)
        self._futures.append(handler)
        while not started.wait(self.POLL_S):
            if self._is_shutdown or not self._context.ok() or wait_condition():
                break
        for future in [f for f in self._futures if f.done()]:
            self._futures.remove(future)
            future.result()  # a callback that raised stops the spin, as with the stock executor


def _run_started(handler: Callable[[], None], started: threading.Event) -> None:
    started.set()
    handler()


def settle_heap() -> None:
    """Keep what start-up built out of the cyclic garbage collector's full passes.

    A node's modules, message classes, parameters and loaded memory live as long as the
    process, yet every full (oldest-generation) collection walks them all again. In the scene
    graph node under three cameras at 15 Hz that was a pause every 16 s of 39 ms median, 68 ms
    at worst, landing in whatever service call or batch ran then; with the start-up objects
    frozen the same passes took 1-5 ms. ``gc.freeze`` moves everything alive now to a
    generation the collector never scans; objects made later are collected as usual.
    """
    gc.collect()  # garbage left by start-up is freed, not frozen
    gc.freeze()


def _spin(node: Node, threads: int | None) -> int:
    status = 0
    try:
        executor: Executor = (SingleThreadedExecutor() if threads == 1
                              else HandOffExecutor(num_threads=threads))
        executor.add_node(node)
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        status = 0  # a requested shutdown is a normal exit
    except (RuntimeError, ValueError, OSError, ImportError) as err:
        sys.stderr.write(f"{type(err).__name__}: {err}\n")
        sys.stderr.flush()
        status = 1
        faulthandler.dump_traceback_later(FAILURE_EXIT_GRACE_S, exit=True)
    finally:
        node.destroy_node()
    return status


def _failed_start(factory: Callable[[], Node], err: BaseException) -> int:
    """Report a constructor failure and release the half-built node; returns the exit status."""
    half_built = _nodes_under_construction(err)
    if isinstance(err, (KeyboardInterrupt, ExternalShutdownException)):
        _release(half_built)
        return 0  # interrupted while starting: still a requested shutdown
    if not isinstance(err, Exception):
        _release(half_built)
        raise err  # SystemExit and the like keep their meaning
    if os.environ.get(DEBUG_ENV) == "1":
        traceback.print_exception(err, file=sys.stderr)
    name = _node_name(half_built) or getattr(factory, "__name__", None) or repr(factory)
    sys.stderr.write(f"{name}: {describe_error(err)}\n")
    sys.stderr.flush()
    faulthandler.dump_traceback_later(FAILURE_EXIT_GRACE_S, exit=True)
    _release(half_built)
    return 1


def describe_error(err: BaseException) -> str:
    """One line for a failed start.

    mimir's own errors carry messages written for the reader and are shown as they are; any
    other error keeps its type name in front (``ValueError: ...``), since for those the type is
    often half the message (a bare ``KeyError`` says only ``'name'``).
    """
    text = str(err)
    if not type(err).__module__.startswith("mimir"):
        text = f"{type(err).__name__}: {text}" if text else type(err).__name__
    return " ".join(text.split()) or type(err).__name__


def _nodes_under_construction(err: BaseException) -> list[Node]:
    """The nodes whose methods were running when ``err`` was raised: the half-built node(s)."""
    found: list[Node] = []
    tb = err.__traceback__
    while tb is not None:
        candidate = tb.tb_frame.f_locals.get("self")
        if isinstance(candidate, Node) and all(candidate is not n for n in found):
            found.append(candidate)
        tb = tb.tb_next
    return found


def _node_name(nodes: list[Node]) -> str | None:
    for node in nodes:
        try:
            return node.get_name()
        except Exception:  # noqa: BLE001 - the base class itself may be half-built
            continue
    return None


def _release(nodes: list[Node]) -> None:
    """Free a half-built node's ROS entities without calling its class's ``destroy_node``.

    The override of a node class may use attributes that a failed constructor never set, and
    rclpy calls ``destroy_node`` on every node still registered with the context at shutdown.
    The base class's cleanup only needs what ``Node.__init__`` made; when even that is missing,
    the node is just unregistered so that shutdown leaves it alone.
    """
    for node in nodes:
        try:
            Node.destroy_node(node)
        except Exception:  # noqa: BLE001 - Node.__init__ itself did not finish
            context = getattr(node, "context", None)
            if context is not None:
                context.untrack_node(node)
