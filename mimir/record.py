"""``mimir record``: record live topics into a bag (:func:`record`) and its command line.

Records live topics into an mcap rosbag2 bag folder without the ``ros2`` command. The recording
node and how it stops: :mod:`mimir.nodes.bags.recorder`; the default topics and their QoS:
:mod:`mimir.nodes.bags.topics`; the bag's layout on disk: :mod:`mimir.bag_writer`.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mimir.bag_writer import default_output
from mimir.bags import BagError
from mimir.nodes.bags.recorder import (
    BYTES_PER_MB,
    USAGE_ERROR_STATUS,
    BagRecorder,
    RecordSummary,
)
from mimir.nodes.bags.topics import default_topics
from mimir.signals import handling
from mimir_robot import contract

if TYPE_CHECKING:
    from rclpy.context import Context


def stop_on_signals(stop: Callable[[], None]) -> contextlib.AbstractContextManager[None]:
    """SIGINT and SIGTERM call ``stop`` while the block runs (main thread only)."""
    return handling((signal.SIGINT, signal.SIGTERM), lambda _sig, _frame: stop())


def record(output: Path | str, topics: Sequence[str], *, duration_s: float | None = None,
           namespace: str = "", split_size_bytes: int | None = None,
           context: Context | None = None, handle_signals: bool = False,
           on_open: Callable[[BagRecorder], None] | None = None) -> RecordSummary:
    """Record ``topics`` into the bag folder ``output`` until ``duration_s`` passes or, with
    ``handle_signals``, SIGINT or SIGTERM arrives; the bag is closed in every case.

    ``on_open`` is called once the bag is open and the node subscribed to what it found.

    Raises:
        BagError: the recording was refused (names, output folder) or the bag failed.
    """

    if duration_s is not None and not duration_s > 0.0:
        raise BagError(f"duration must be positive, got {duration_s} s")
    recorder = BagRecorder(output, topics, namespace=namespace,
                           split_size_bytes=split_size_bytes, context=context)
    signals = (stop_on_signals(recorder.request_stop) if handle_signals
               else contextlib.nullcontext())
    with signals:
        recorder.open()
        try:
            if on_open is not None:
                on_open(recorder)
            recorder.spin(duration_s)
        finally:
            summary = recorder.close()
    return summary


def _positive_number(text: str) -> float:
    try:
        value = float(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from err
    if not (value > 0.0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def add_parser(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Register the ``record`` subcommand with its options; its handler is :func:`run`."""
    parser = subparsers.add_parser(
        "record", help="record live topics to an mcap rosbag2 bag (no ros2 command needed)",
        description="Record live topics to an mcap rosbag2 bag folder. Without --topics the "
                    "bag gets what a replay on a machine without a GPU needs: the cameras' "
                    "images, camera info and segmentation, /tf, /tf_static, the robot's "
                    "signals, observations, interaction and memory events. Stop with Ctrl-C "
                    "or --duration.")
    parser.add_argument("-o", "--output", default="", metavar="DIR",
                        help="bag folder to create; must not exist or be empty (default: "
                             "rosbag2_<date>-<time> in the current folder)")
    chosen = parser.add_mutually_exclusive_group()
    chosen.add_argument("--topics", nargs="+", default=None, metavar="TOPIC",
                        help="record these topics instead of the default set")
    chosen.add_argument("--cameras", nargs="+", default=None, metavar="CAMERA",
                        help="cameras of the default set (default: "
                             f"{' '.join(contract.CAMERAS)})")
    parser.add_argument("--namespace", default="",
                        help="namespace put before relative topic names")
    parser.add_argument("--split-size", type=_positive_number, default=None, metavar="MB",
                        help="start a new file in the bag when the current one reaches this "
                             "many megabytes (10^6 bytes)")
    parser.add_argument("--duration", type=_positive_number, default=None, metavar="S",
                        help="stop after this many seconds (default: until Ctrl-C)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """The ``mimir record`` command: record, then print the one-line summary.

    A refused recording (invalid names, an output that exists or cannot be created) prints one
    ``mimir: error:`` line and returns the usage-error status without touching the disk; a
    recording that fails once begun (a full disk) prints the same line and returns 1.
    """

    topics = args.topics if args.topics else default_topics(args.cameras or contract.CAMERAS)
    output = Path(args.output) if args.output else default_output()
    split = (None if args.split_size is None
             else max(1, int(args.split_size * BYTES_PER_MB)))

    opened: list[BagRecorder] = []

    def announce(recorder: BagRecorder) -> None:
        opened.append(recorder)
        until = ("Ctrl-C to stop" if args.duration is None
                 else f"for {args.duration:g} s, Ctrl-C to stop early")
        print(f"recording {len(recorder.topics)} topics to {recorder.output} "
              f"({len(recorder.subscribed_topics())} publishing now; {until})", flush=True)

    try:
        summary = record(output, topics, duration_s=args.duration, namespace=args.namespace,
                         split_size_bytes=split, handle_signals=True, on_open=announce)
    except BagError as err:
        sys.stdout.flush()
        print(f"mimir: error: {' '.join(str(err).split())}", file=sys.stderr)
        return 1 if opened else USAGE_ERROR_STATUS
    print(summary.line(), flush=True)
    return 0
