"""Transform sources take /tf on a node and thread of their own, whatever their owner is doing."""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
import pytest
import rclpy
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from tf2_msgs.msg import TFMessage

from mimir.ros import qos
from mimir.ros.tf import (
    ClosesTransforms,
    TransformPublisher,
    make_transform_source,
    matrix_to_transform,
)
from mimir.transforms import ExtrapolationError, TransformError, compose

STAMP0 = 1_700_000_000.0


def _pose(x: float) -> np.ndarray:
    return compose([x, 0.0, 1.0], [0.0, 0.0, 0.0, 1.0])


def _names(node: Node) -> set[tuple[str, str]]:
    return set(node.get_node_names_and_namespaces())


def test_transforms_arrive_while_the_owner_is_never_spun(
        ros_context: Context, spin_node: Node, wait_for: Callable[..., bool]) -> None:
    owner = Node("owner_node", context=ros_context)  # in no executor: as busy as a node can be
    source = make_transform_source(owner)
    try:
        broadcaster = TransformPublisher(spin_node)
        stamps = [STAMP0 + 0.01 * k for k in range(60)]
        # one burst on one topic, as three cameras' poses at 15 Hz reach a busy node
        for k, stamp in enumerate(stamps):
            broadcaster.send([matrix_to_transform(_pose(0.01 * k), "map", f"cam{k % 3}_optical",
                                                  stamp)])

        def every_pose_known() -> bool:
            try:
                return all(np.allclose(
                    source.lookup("map", f"cam{k % 3}_optical", stamp)[:3, 3], [0.01 * k, 0, 1])
                    for k, stamp in enumerate(stamps))
            except TransformError:
                return False

        assert wait_for(every_pose_known, timeout=20.0)
        with pytest.raises(ExtrapolationError):  # a stamp past the newest is still refused
            source.lookup("map", "cam0_optical", stamps[-1] + 5.0)
    finally:
        source.close()
        owner.destroy_node()


def test_the_intake_is_hidden_in_the_owners_namespace_and_goes_on_close(
        ros_context: Context, spin_node: Node, wait_for: Callable[..., bool]) -> None:
    owner = Node("deprojection_node", namespace="/robot1", context=ros_context)
    source = make_transform_source(owner)
    intake = ("_deprojection_node_tf", "/robot1")
    try:
        assert wait_for(lambda: intake in _names(spin_node), timeout=20.0), _names(spin_node)
    finally:
        source.close()
        source.close()  # closing twice is harmless
    assert wait_for(lambda: intake not in _names(spin_node), timeout=20.0)
    assert ("deprojection_node", "/robot1") in _names(spin_node)  # the owner stays
    owner.destroy_node()


def test_a_launch_rename_of_the_owner_does_not_rename_the_intake_too() -> None:
    # launch gives a node its name as a process-wide `-r __node:=` remapping
    context = Context()
    rclpy.init(args=["--ros-args", "-r", "__node:=renamed"], context=context)
    try:
        owner = Node("written_name", context=context)
        source = make_transform_source(owner)
        looker = Node("looker", context=context, use_global_arguments=False)
        try:
            assert owner.get_name() == "renamed"
            spinner = SingleThreadedExecutor(context=context)
            spinner.add_node(looker)
            names: set[str] = set()
            for _ in range(100):  # discovery of the context's own nodes
                spinner.spin_once(timeout_sec=0.1)
                names = {name for name, _ in looker.get_node_names_and_namespaces()}
                if "_renamed_tf" in names:
                    break
            assert "_renamed_tf" in names, names
            assert sorted(names).count("renamed") == 1, names
        finally:
            source.close()
            looker.destroy_node()
            owner.destroy_node()
    finally:
        rclpy.try_shutdown(context=context)


def test_a_malformed_transform_is_logged_and_the_good_ones_still_land(
        ros_context: Context, spin_node: Node, wait_for: Callable[..., bool]) -> None:
    owner = Node("owner_node", context=ros_context)
    source = make_transform_source(owner)
    try:
        bad = matrix_to_transform(_pose(0.0), "map", "bad_optical", STAMP0)
        bad.transform.rotation.w = 0.0  # a zero quaternion
        good = matrix_to_transform(_pose(0.5), "map", "good_optical", STAMP0)
        TransformPublisher(spin_node).send([bad, good])

        def good_known() -> bool:
            try:
                source.lookup("map", "good_optical", STAMP0)
                return True
            except TransformError:
                return False

        assert wait_for(good_known, timeout=20.0)
        with pytest.raises(TransformError):
            source.lookup("map", "bad_optical", STAMP0)
    finally:
        source.close()
        owner.destroy_node()


def test_closing_from_another_thread_while_transforms_stream(
        ros_context: Context, spin_node: Node) -> None:
    owner = Node("owner_node", context=ros_context)
    source = make_transform_source(owner)
    broadcaster = TransformPublisher(spin_node)
    stop = threading.Event()

    def stream() -> None:
        k = 0
        while not stop.is_set():
            broadcaster.send([matrix_to_transform(_pose(0.0), "map", "cam", STAMP0 + 0.001 * k)])
            k += 1

    streamer = threading.Thread(target=stream, daemon=True)
    streamer.start()
    try:
        closer = threading.Thread(target=source.close)
        closer.start()
        closer.join(timeout=15.0)
        assert not closer.is_alive(), "close() hung while transforms were arriving"
    finally:
        stop.set()
        streamer.join(timeout=5.0)
        owner.destroy_node()


def test_a_remapping_given_to_the_owner_alone_holds_for_its_transforms(
        ros_context: Context, spin_node: Node, wait_for: Callable[..., bool]) -> None:
    owner = Node("owner_node", context=ros_context,
                 cli_args=["--ros-args", "-r", "/tf:=/isolated/tf"])
    source = make_transform_source(owner)
    try:
        isolated = spin_node.create_publisher(TFMessage, "/isolated/tf", qos.TF)
        shared = TransformPublisher(spin_node)  # the plain /tf, which the owner does not hear

        def known(frame: str) -> bool:
            try:
                source.lookup("map", frame, STAMP0)
                return True
            except TransformError:
                return False

        def send() -> bool:
            isolated.publish(TFMessage(transforms=[
                matrix_to_transform(_pose(0.0), "map", "own_optical", STAMP0)]))
            shared.send([matrix_to_transform(_pose(0.0), "map", "other_optical", STAMP0)])
            return known("own_optical")

        assert wait_for(send, timeout=20.0)
        assert not known("other_optical")
    finally:
        source.close()
        owner.destroy_node()


class _Owner(ClosesTransforms, Node):
    def __init__(self, context: Context, build: bool = True) -> None:
        super().__init__("mixin_owner", context=context)
        if build:
            self._tf = make_transform_source(self)


def test_the_mixin_closes_the_source_when_its_node_is_destroyed(
        ros_context: Context, spin_node: Node, wait_for: Callable[..., bool]) -> None:
    owner = _Owner(ros_context)
    intake = ("_mixin_owner_tf", "/")
    assert wait_for(lambda: intake in _names(spin_node), timeout=20.0)
    owner.destroy_node()
    assert wait_for(lambda: intake not in _names(spin_node), timeout=20.0)
    _Owner(ros_context, build=False).destroy_node()  # a constructor that stopped early: no source
