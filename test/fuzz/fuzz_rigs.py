"""The memory nodes the fuzzed nodes talk to, seeded with a few real nodes and one keyframe.

The scene graph and keyframe nodes run in the caller's watched executor on a temporary memory
folder, on wall time like a robot's nodes. Three observations make three nodes; one buffered
camera frame becomes a keyframe; the ids are kept so generated requests can name real things.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import rclpy
from fuzz_runner import (
    Caller,
    Watched,
    watched,
)
from image_helpers import textured
from rclpy.context import Context
from rclpy.node import Node
from rclpy.parameter import Parameter
from ros_helpers import observation_batch, observation_msg, wait_until
from sensor_msgs.msg import Image

from mimir.nodes.memory.keyframe_node import KeyframeNode
from mimir.nodes.memory.scene_graph_node import SceneGraphNode
from mimir.ros import qos
from mimir.ros.images import numpy_to_image
from mimir.ros.time import from_seconds
from mimir_msgs.msg import ObjectObservationArray, Property
from mimir_msgs.srv import GetSceneGraph, SaveKeyframe, UpdateNode

CAMERA = "pole"
SEEDED = {"cabinet": (1.0, 0.0, 0.5), "cup": (1.2, 0.4, 0.9), "apple": (0.8, -0.3, 0.9)}


@dataclass
class MemoryRig:
    """The memory nodes, a driver node, and what they were seeded with."""

    context: Context
    driver: Node
    ex: Watched
    memory: Path
    ids: list[str] = field(default_factory=list)
    keyframe_ids: list[str] = field(default_factory=list)
    frames_at: float = 0.0
    callers: dict[str, Caller] = field(default_factory=dict)

    def call(self, name: str, request: Any, timeout: float = 20.0) -> Any:
        reply = self.callers[name].call(request, timeout, self.ex.alive)
        assert reply is not None, f"{name} did not answer within {timeout} s"
        return reply

    def graph_ids(self) -> set[str]:
        return {n.id for n in self.call("get_scene_graph", GetSceneGraph.Request()).graph.nodes}

    def probe(self) -> None:
        """The memory nodes still do their job: a new observation becomes a node, an update
        lands, a fresh frame is saved as a keyframe."""
        now = time.time()
        pub = self.driver.create_publisher(ObjectObservationArray, "observations", qos.EVENTS)
        count = len(self.graph_ids())
        obs = observation_msg("sponge", (2.0, 2.0 + 0.5 * count, 0.9),
                              detection_id=f"probe-{count}", stamp=now)
        assert wait_until(lambda: pub.get_subscription_count() > 0, 10.0)
        before = self.graph_ids()
        assert wait_until(lambda: (pub.publish(observation_batch(obs)), len(
            self.graph_ids() - before) > 0)[1], 20.0), "an observation no longer makes a node"
        self.driver.destroy_publisher(pub)
        update = self.call("update_node", UpdateNode.Request(
            node_id=self.ids[0], source="operator",
            properties=[Property(name="probe", value_json="true", confidence=0.9)]))
        assert update.error_code == UpdateNode.Response.NONE, update.error_msg
        publish_frames(self.driver, now)
        saved = self.call("save_keyframe", SaveKeyframe.Request(
            camera=CAMERA, stamp=from_seconds(now), trigger="operator",
            linked_nodes=[self.ids[0]]))
        assert saved.error_code == SaveKeyframe.Response.NONE, saved.error_msg

    def ready(self, driver_caller: type, name: str) -> Caller:
        """A ready client of one more service, kept with the others."""
        caller = Caller(self.driver, driver_caller, name)
        caller.ready()
        self.callers[name] = caller
        return caller


def publish_frames(driver: Node, stamp: float) -> None:
    """Five frames of the buffered camera around ``stamp``, paced like a camera."""
    pub = driver.create_publisher(Image, f"cameras/{CAMERA}/color/image_raw", qos.SENSOR)
    assert wait_until(lambda: pub.get_subscription_count() > 0, 10.0)
    rgb = textured(np.random.default_rng(int(stamp) % 1000), 96, 128)
    for k in range(5):
        msg = numpy_to_image(rgb, "rgb8")
        msg.header.stamp = from_seconds(stamp + 0.3 * (k - 2))
        msg.header.frame_id = f"{CAMERA}_color_optical_frame"
        pub.publish(msg)
        time.sleep(0.05)
    time.sleep(0.3)
    driver.destroy_publisher(pub)


@contextmanager
def memory_rig(memory: Path, *others: Any) -> Iterator[MemoryRig]:
    """The seeded memory nodes in a fresh context; ``others`` are factories
    ``(context, memory) -> Node`` of the nodes under test, started beside them."""
    context = Context()
    rclpy.init(context=context)
    try:
        with watched(context) as ex:
            graph = SceneGraphNode(context=context, parameter_overrides=[
                Parameter("memory_dir", value=str(memory)),
                Parameter("publish_period_s", value=0.2)])
            frames = KeyframeNode(context=context, parameter_overrides=[
                Parameter("memory_dir", value=str(memory)),
                Parameter("cameras", value=[CAMERA])])
            driver = rclpy.create_node("fuzz_driver", context=context)
            for node in (graph, frames, driver):
                ex.add(node)
            for make in others:
                ex.add(make(context, memory))
            rig = MemoryRig(context, driver, ex, memory)
            for name, kind in (("get_scene_graph", GetSceneGraph), ("update_node", UpdateNode),
                               ("save_keyframe", SaveKeyframe)):
                rig.ready(kind, name)
            pub = driver.create_publisher(ObjectObservationArray, "observations", qos.EVENTS)
            assert wait_until(lambda: pub.get_subscription_count() > 0, 10.0)
            now = time.time()
            batch = observation_batch(*[
                observation_msg(label, xyz, detection_id=f"seed-{label}", half=0.1, stamp=now)
                for label, xyz in SEEDED.items()])
            assert wait_until(lambda: (pub.publish(batch), len(rig.graph_ids()) >= 3)[1], 20.0)
            driver.destroy_publisher(pub)
            rig.ids = sorted(rig.graph_ids())
            publish_frames(driver, now)
            saved = rig.call("save_keyframe", SaveKeyframe.Request(
                camera=CAMERA, stamp=from_seconds(now), trigger="operator",
                linked_nodes=rig.ids[:1]))
            assert saved.error_code == SaveKeyframe.Response.NONE, saved.error_msg
            rig.keyframe_ids, rig.frames_at = [saved.keyframe_id], now
            yield rig
    finally:
        rclpy.try_shutdown(context=context)
