"""``get_scene_graph`` client of ``bench_keepup.py``, in a process of its own.

The benchmark's measuring process takes a thousand memory events a second; a response
deserialised there waits for that process's interpreter as well as for the service. This
process does what a planner does with the service and nothing else: it calls
``get_scene_graph`` every ``--period`` seconds, one call at a time, and prints one line per
call::

    CALL <wall time sent> <latency in s, or nan after --timeout> <nodes in the answer>

The latency runs from the call to the response deserialised here. It prints ``READY`` once the
service is there, and stops on ``STOP``, end of stdin, SIGINT or SIGTERM.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time

import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.signals import SignalHandlerOptions

from mimir_msgs.srv import GetSceneGraph


def _read_commands(stop: threading.Event) -> None:
    for line in sys.stdin:
        if line.strip().upper() == "STOP":
            break
    stop.set()  # STOP or end of stdin (the parent went away)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--period", type=float, default=0.5, help="seconds between calls")
    parser.add_argument("--timeout", type=float, default=2.0, help="seconds a call may take")
    parser.add_argument("--service", default="get_scene_graph")
    args = parser.parse_args(argv)
    if not (args.period > 0.0 and args.timeout > 0.0):
        parser.error("--period and --timeout must be positive")

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    threading.Thread(target=_read_commands, args=(stop,), daemon=True).start()
    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node("keepup_service_client")
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    try:
        client = node.create_client(GetSceneGraph, args.service)
        while not client.wait_for_service(timeout_sec=0.5):
            if stop.is_set():
                return 0
        print("READY", flush=True)
        due = time.monotonic()
        while not stop.wait(max(0.0, due - time.monotonic())):
            answered: list[float] = []  # when the response came, set in the executor
            done = threading.Event()
            sent_wall, sent = time.time(), time.monotonic()
            future = client.call_async(GetSceneGraph.Request())
            future.add_done_callback(
                lambda _future, at=answered, done=done: (at.append(time.monotonic()), done.set()))
            if done.wait(args.timeout) and answered:
                latency = answered[0] - sent
                result = future.result()
                nodes = len(result.graph.nodes) if result is not None else -1
            else:
                latency, nodes = float("nan"), -1
                client.remove_pending_request(future)
            print(f"CALL {sent_wall:.4f} {latency:.6f} {nodes}", flush=True)
            due = max(due + args.period, time.monotonic())
        return 0
    finally:
        executor.shutdown(timeout_sec=2.0)
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    sys.exit(main())
