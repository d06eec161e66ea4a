"""The ``main()`` every node shares: init, spin on a multi-threaded executor, always shut down."""

from __future__ import annotations

import faulthandler
import sys
from collections.abc import Callable, Sequence

import rclpy
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node

#: After a failure, the process gets this long to tear down DDS and exit on its own. If teardown
#: hangs, every thread's stack is written to stderr and the process exits with status 1, so a
#: launcher or test never waits on a node that has already failed.
FAILURE_EXIT_GRACE_S = 15.0


def run_node(factory: Callable[[], Node], args: Sequence[str] | None = None,
             threads: int | None = None) -> int:
    """Create the node with ``factory`` and spin it until shutdown.

    Exits quietly on Ctrl-C or an external shutdown. A node constructor that raises logs the
    error to stderr and returns exit status 1 instead of a traceback; a watchdog then bounds the
    rest of the shutdown by :data:`FAILURE_EXIT_GRACE_S`.
    """
    rclpy.init(args=list(args) if args is not None else sys.argv)
    node: Node | None = None
    status = 0
    try:
        node = factory()
        executor = MultiThreadedExecutor(num_threads=threads)
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
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
    return status
