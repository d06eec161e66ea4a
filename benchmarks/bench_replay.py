"""Replay speed: how fast a recorded bag rebuilds memory (``--fast``) and plays over DDS.

Writes the 200 real 7-Scenes kitchen frames (640x480 colour, 16-bit depth, camera info,
segmentation masks, camera poses on /tf) as one camera at 15 Hz into an mcap bag, the same way
the replay tests do (``test/bag_helpers.py``), then:

* ``--fast``: the bag through deprojection, fusion and keyframe filtering in-process; prints
  bag seconds per wall second (target: at least 10x real time on two cores);
* DDS: the bag republished as fast as the player goes (``rate`` 1000) to a subscriber of every
  camera topic in another context; prints messages per second and bag seconds per wall second.

    .venv/bin/python benchmarks/bench_replay.py [--frames 200] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import rclpy
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import CameraInfo, Image

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "test"))

from bag_helpers import CAMERA, KitchenFrames, write_bag  # noqa: E402

from mimir.nodes.bags.player import BagPlayer  # noqa: E402
from mimir.replay import FastReplay, ReplayTopics  # noqa: E402
from mimir_msgs.msg import Segmentation  # noqa: E402

RATE_HZ = 15.0


def fast(bag: Path, root: Path, repeat: int) -> None:
    speeds = []
    for i in range(repeat):
        run = FastReplay(bag, root / f"memory_{i}", ReplayTopics(cameras=(CAMERA,)))
        summary = run.run()
        run.close()
        speeds.append(summary.bag_seconds / summary.wall_seconds)
        print(f"  fast run {i + 1}: {summary.frames_used[CAMERA]} frames, "
              f"{summary.bag_seconds:.1f} s of bag in {summary.wall_seconds:.2f} s "
              f"({speeds[-1]:.1f}x real time); {summary.nodes} nodes, {summary.keyframes} "
              "keyframes")
    print(f"fast replay, one camera at {RATE_HZ:g} Hz 640x480 RGB-D with masks: median "
          f"{statistics.median(speeds):.1f}x real time (target >= 10x)")


def dds(bag: Path, frames: int) -> None:
    context = Context()
    rclpy.init(context=context)
    try:
        listener = rclpy.create_node("bench_listener", context=context)
        counts = {"n": 0}

        def count(_msg: object) -> None:
            counts["n"] += 1

        qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
        for kind, topic in ((Image, "color/image_raw"), (Image, "depth/image_raw"),
                            (CameraInfo, "color/camera_info"), (Segmentation, "segmentation")):
            listener.create_subscription(kind, f"/cameras/{CAMERA}/{topic}", count, qos)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(listener)
        spinner = threading.Thread(target=executor.spin, daemon=True)
        spinner.start()
        player = BagPlayer(bag, rate=1000.0, clock=False, context=context)
        player.open()
        deadline = time.monotonic() + 20.0
        while time.monotonic() < deadline and not all(
                p.get_subscription_count() for p in player.node.publishers
                if "cameras" in p.topic_name):
            time.sleep(0.05)
        summary = player.run()
        expected = 4 * frames
        settle = time.monotonic() + 10.0
        while counts["n"] < expected and time.monotonic() < settle:
            time.sleep(0.05)
        player.close()
        total = sum(summary.published.values())
        print(f"DDS playback as fast as it goes: {total} messages in "
              f"{summary.wall_seconds:.2f} s ({total / summary.wall_seconds:.0f} messages/s, "
              f"{summary.bag_seconds / summary.wall_seconds:.1f}x real time); the subscriber "
              f"got {counts['n']} of {expected} camera messages")
        executor.shutdown()
        listener.destroy_node()
    finally:
        rclpy.try_shutdown(context=context)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--data", type=Path,
                        default=REPO.parent / "shared" / "data" / "sevenscenes_kitchen")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mimir-bench-replay-") as tmp:
        root = Path(tmp)
        kitchen = KitchenFrames(args.data, args.frames, period=1.0 / RATE_HZ)
        began = time.monotonic()
        bag = write_bag(root / "bag", kitchen)
        size = sum(f.stat().st_size for f in bag.iterdir()) / 1e6
        print(f"bag: {args.frames} frames ({args.frames / RATE_HZ:.1f} s at {RATE_HZ:g} Hz), "
              f"{size:.0f} MB, written in {time.monotonic() - began:.1f} s")
        fast(bag, root, args.repeat)
        dds(bag, args.frames)
    return 0


if __name__ == "__main__":
    sys.exit(main())
