"""Segmentation node over real DDS with a tiny randomly initialised SAM3 saved to disk."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from rclpy.context import Context
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from ros_helpers import DiagnosticsCounters
from sensor_msgs.msg import Image
from std_msgs.msg import Header
from tiny_sam3 import save_tiny_sam3

from mimir.nodes.perception.messages import PerceptionNodeError, msg_to_segmentation
from mimir.nodes.perception.segmentation_node import SegmentationNode
from mimir.ros import qos
from mimir.ros.images import numpy_to_image
from mimir.ros.time import from_seconds, to_seconds
from mimir_msgs.msg import Segmentation

pytestmark = pytest.mark.ros

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_sam3(tmp_path_factory.mktemp("sam3_tiny"))


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("vocab") / "tiny.yaml"
    # Threshold 0 keeps every query of the random model, so instances always come back.
    path.write_text(
        "name: tiny\ndefaults: {score_threshold: 0.0}\nfixtures: [cabinet]\nobjects: [mug]\n"
    )
    return path


def overrides(model_dir: Path, vocab_file: Path, **extra: object) -> list[Parameter]:
    parts = vocab_file.with_name("parts.yaml")
    parts.write_text("name: parts\ndefaults: {score_threshold: 0.0}\nfixtures: [handle]\n")
    values: dict[str, object] = {
        "model": str(model_dir), "vocabulary": str(vocab_file), "min_pixels": 1,
        "part_vocabulary": str(parts),
        "max_rate_hz": 20.0, "diagnostics_period": 0.2, **extra,
    }
    return [Parameter(k, value=v) for k, v in values.items()]


def color(stamp: float, encoding: str = "rgb8", shape: tuple[int, int] = (48, 64)) -> Image:
    rng = np.random.default_rng(int(stamp * 10))
    header = Header(frame_id="base_color_optical_frame", stamp=from_seconds(stamp))
    channels = 4 if encoding == "bgra8" else 3
    return numpy_to_image(
        rng.integers(0, 255, size=(*shape, channels), dtype=np.uint8), encoding, header
    )


class Collector(DiagnosticsCounters):
    """Keeps the segmentations and the latest diagnostics counters the node publishes."""

    def __init__(self, node: Node) -> None:
        super().__init__(node, "segmentation")
        self.segmentations: list[Segmentation] = []
        self.parts: list[Segmentation] = []
        node.create_subscription(Segmentation, "cameras/base/segmentation", self._on_seg,
                                 qos.SENSOR)
        node.create_subscription(Segmentation, "cameras/base/parts", self._on_parts, qos.SENSOR)
        self.pub = node.create_publisher(Image, "cameras/base/color/image_raw", qos.SENSOR)

    def _on_seg(self, msg: Segmentation) -> None:
        with self._lock:
            self.segmentations.append(msg)

    def _on_parts(self, msg: Segmentation) -> None:
        with self._lock:
            self.parts.append(msg)

    def stamps(self) -> list[float]:
        with self._lock:
            return [to_seconds(m.header.stamp) for m in self.segmentations]


def test_segments_images_and_skips_bad_ones(
    ros_executor: MultiThreadedExecutor, spin_node: Node, model_dir: Path, vocab_file: Path,
    wait_for: Callable[..., bool],
) -> None:
    node = SegmentationNode(context=spin_node.context,
                            parameter_overrides=overrides(model_dir, vocab_file))
    ros_executor.add_node(node)
    out = Collector(spin_node)
    assert wait_for(lambda: out.pub.get_subscription_count() > 0)

    # Best effort: resend until the first result arrives (early samples can precede matching).
    def published(stamp: float, encoding: str = "rgb8") -> bool:
        out.pub.publish(color(stamp, encoding))
        return wait_for(lambda: stamp in out.stamps(), timeout=2.0)

    assert wait_for(lambda: published(5.0), timeout=60.0), "no segmentation came back"
    msg = next(m for m in out.segmentations if to_seconds(m.header.stamp) == 5.0)
    assert msg.header.frame_id == "base_color_optical_frame"
    assert msg.backend == "sam3" and msg.camera == "base"
    assert (msg.instance_ids.encoding, msg.instance_ids.height, msg.instance_ids.width) == (
        "mono16", 48, 64)
    result = msg_to_segmentation(msg)
    result.validate()
    assert len(result) > 0
    assert {i.label for i in result.instances} <= {"cabinet", "mug"}
    # The parts the executor points at come on their own topic, same stamp, never as objects.
    assert wait_for(lambda: any(to_seconds(m.header.stamp) == 5.0 for m in out.parts))
    parts = msg_to_segmentation(next(m for m in out.parts if to_seconds(m.header.stamp) == 5.0))
    parts.validate()
    assert len(parts) > 0 and {i.label for i in parts.instances} == {"handle"}
    # Another colour encoding is converted, not refused.
    assert wait_for(lambda: published(6.0, "bgra8"), timeout=30.0)

    # Bad input: an unsupported encoding and an empty image are skipped and counted.
    bad = color(7.0)
    bad.encoding = "yuv422"
    empty = Image(header=Header(stamp=from_seconds(8.0)), encoding="rgb8", height=0, width=0)

    def skipped(msg: Image, key: str) -> bool:
        out.pub.publish(msg)
        return wait_for(lambda: out.count(key) > 0, timeout=1.0)

    assert wait_for(lambda: skipped(bad, "base.unsupported_encoding"), timeout=30.0)
    assert wait_for(lambda: skipped(empty, "base.bad_image"), timeout=30.0)
    assert 7.0 not in out.stamps() and 8.0 not in out.stamps()
    # The node keeps working after bad input.
    assert wait_for(lambda: published(9.0), timeout=30.0)


def test_newest_frame_wins_and_drops_are_counted(
    ros_context: Context, spin_node: Node, model_dir: Path, vocab_file: Path,
    wait_for: Callable[..., bool],
) -> None:
    # The node is not spun: its callbacks are called directly, so the order is deterministic.
    node = SegmentationNode(context=ros_context,
                            parameter_overrides=overrides(model_dir, vocab_file, preload=False))
    try:
        out = Collector(spin_node)
        for stamp in (1.0, 2.0, 3.0):
            node._on_color("base", color(stamp))
        node._on_color("base", color(2.5))  # older than the parked frame: refused
        node._work()
        node._work()  # nothing parked any more
        assert node.counters.get("base.received") == 4
        assert node.counters.get("base.dropped") == 2
        assert node.counters.get("base.out_of_order") == 1
        assert node.counters.get("base.published") == 1
        assert wait_for(lambda: out.stamps() == [3.0])
    finally:
        node.destroy_node()


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"backend": "yolo"}, "backend"),
        ({"vocabulary": "no_such_vocabulary"}, "vocabulary"),
        ({"device": "tpu"}, "device"),
        ({"cameras": ["base", "base"]}, "repeat"),
    ],
)
def test_bad_parameters_stop_the_constructor(
    ros_context: Context, model_dir: Path, vocab_file: Path, params: dict[str, object],
    match: str,
) -> None:
    with pytest.raises(PerceptionNodeError, match=match):
        SegmentationNode(context=ros_context,
                         parameter_overrides=overrides(model_dir, vocab_file, **params))


def test_missing_model_exits_with_status_1(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mimir.nodes.perception.segmentation_node", "--ros-args",
         "-p", f"model:={tmp_path / 'no_model'}"],
        capture_output=True, text=True, timeout=120, cwd=REPO, check=False,
    )
    assert proc.returncode == 1, proc.stderr
    assert "not found" in proc.stderr and "no_model" in proc.stderr
