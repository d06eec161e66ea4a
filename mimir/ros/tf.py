"""Transform lookups and broadcasting for nodes.

:func:`make_transform_source` returns an object whose ``lookup(target, source, stamp)`` gives a
4x4 matrix and raises the typed errors of :mod:`mimir.transforms`. On a robot, where tf2_ros is
importable, it wraps a ``tf2_ros.Buffer`` and ``TransformListener``; elsewhere it subscribes to
/tf and /tf_static itself and feeds a :class:`mimir.transforms.TransformBuffer`.

Either way the subscriptions live on a small node of their own (``_<node>_tf``, hidden from
``ros2 node list``) spun by its own executor thread, as rclcpp's listener does by default. An
executor takes one message per subscription each time it wakes, and /tf carries every moving
frame on one topic: on the owner's executor it fell behind the camera topics as soon as the
owner's callbacks took time (three cameras' poses at 15 Hz each reached a deprojection node
busy with HD frames one per wake), and lookups at an image's stamp kept failing until it caught
up. ``close()`` stops the thread; the owner calls it from ``destroy_node`` (the
:class:`ClosesTransforms` mixin does), and a shutdown of the context stops it too.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
import time
from collections.abc import Iterable
from typing import Any, Protocol

from geometry_msgs.msg import TransformStamped
from rclpy.duration import Duration
from rclpy.executors import ExternalShutdownException, ShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.time import Time as RclpyTime

from mimir.ros import qos
from mimir.ros.floatfix import FloatSafePublisher, coerce_floats
from mimir.ros.time import from_seconds, to_seconds
from mimir.transforms import (
    ConnectivityError,
    ExtrapolationError,
    Matrix4,
    TransformBuffer,
    TransformError,
    UnknownFrameError,
    compose,
    decompose,
)


def _import_optional(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


_tf2_ros = _import_optional("tf2_ros")
_tf2_msgs = _import_optional("tf2_msgs.msg")


class TransformSource(Protocol):
    """What nodes need from a transform buffer."""

    backend: str

    def lookup(self, target: str, source: str, stamp: float) -> Matrix4:
        """Matrix mapping points in ``source`` into ``target`` at ``stamp`` (s; 0 = latest)."""


class ListeningTransformSource(TransformSource, Protocol):
    """A transform source that listens to /tf for its owner node until closed."""

    def close(self) -> None:
        """Stop listening (idempotent)."""


#: The topics a transform source listens to (names before the owner's remappings).
TF_TOPICS = ("/tf", "/tf_static")


class TransformIntake:
    """The node and executor thread that take /tf and /tf_static for one owner node.

    The node is named ``_<owner>_tf`` (a leading underscore hides it from ``ros2 node list``),
    sits in the owner's namespace and context, and serves no parameters. Its name is given as a
    node-local remapping, which rcl reads before the process's global ``__node:=`` remapping
    (launch renames the owner that way, and would otherwise rename this node too). /tf and
    /tf_static are remapped to what the owner resolves them to, so a remapping given to the
    owner alone (a composed node's, a test's per-namespace TF) holds for its transforms too.
    """

    #: How long :meth:`close` waits for the executor thread.
    CLOSE_TIMEOUT_S = 5.0

    def __init__(self, owner: Node) -> None:
        name = f"_{owner.get_name()}_tf"
        remaps = [f"{topic}:={owner.resolve_topic_name(topic)}" for topic in TF_TOPICS]
        self.node = Node(name, namespace=owner.get_namespace(), context=owner.context,
                         cli_args=["--ros-args", "-r", f"__node:={name}",
                                   *(arg for remap in remaps for arg in ("-r", remap))],
                         start_parameter_services=False, enable_rosout=False)
        self._executor = SingleThreadedExecutor(context=owner.context)
        self._executor.add_node(self.node)
        self._closed = False
        self._thread = threading.Thread(target=self._spin, name=name, daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        # a shut-down context ends the spin with one of these: the process is ending
        with contextlib.suppress(ExternalShutdownException, ShutdownException):
            self._executor.spin()

    def close(self) -> None:
        """Stop the executor thread and destroy the node (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._executor.shutdown(timeout_sec=self.CLOSE_TIMEOUT_S)
        self._thread.join(timeout=self.CLOSE_TIMEOUT_S)
        self.node.destroy_node()


def lookup_waiting(source: TransformSource, target: str, frame: str, stamp: float, *,
                   deadline: float, poll_s: float = 0.02) -> Matrix4:
    """``source.lookup(target, frame, stamp)``, retried while the stamp lies beyond the newest
    transform (TF can trail the images it belongs to) until ``deadline`` (monotonic s).

    Raises:
        TransformError: what the last lookup raised.
    """
    while True:
        try:
            return source.lookup(target, frame, stamp)
        except ExtrapolationError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(poll_s)


def transform_to_matrix(msg: TransformStamped) -> Matrix4:
    """A TransformStamped as a 4x4 matrix (header.frame_id <- child_frame_id)."""
    t, q = msg.transform.translation, msg.transform.rotation
    return compose([t.x, t.y, t.z], [q.x, q.y, q.z, q.w])


def matrix_to_transform(matrix: Matrix4, parent: str, child: str, stamp: float) -> TransformStamped:
    """A 4x4 matrix (parent <- child) as a TransformStamped."""
    trans, quat = decompose(matrix)
    msg = TransformStamped()
    msg.header.frame_id = parent
    msg.header.stamp = from_seconds(stamp)
    msg.child_frame_id = child
    msg.transform.translation.x, msg.transform.translation.y, msg.transform.translation.z = (
        float(v) for v in trans
    )
    (msg.transform.rotation.x, msg.transform.rotation.y, msg.transform.rotation.z,
     msg.transform.rotation.w) = (float(v) for v in quat)
    return msg


class BufferTransformSource:
    """Listens to /tf and /tf_static and answers lookups from a :class:`TransformBuffer`."""

    backend = "mimir"

    def __init__(self, node: Node, cache_seconds: float = 10.0) -> None:
        if _tf2_msgs is None:
            raise ImportError("tf2_msgs is not importable; run scripts/setup.sh to build it")
        self.buffer = TransformBuffer(cache_seconds)
        self._node = node
        self._intake = TransformIntake(node)
        tf_message = _tf2_msgs.TFMessage
        self._intake.node.create_subscription(tf_message, "/tf", self._on_tf, qos.TF)
        self._intake.node.create_subscription(tf_message, "/tf_static", self._on_tf_static,
                                              qos.TF_STATIC)

    def add(self, transforms: Iterable[TransformStamped], static: bool) -> None:
        """Feed transforms into the buffer, logging (not raising) malformed ones."""
        for msg in transforms:
            t, q = msg.transform.translation, msg.transform.rotation
            try:
                self.buffer.set_transform(
                    msg.header.frame_id, msg.child_frame_id, to_seconds(msg.header.stamp),
                    [t.x, t.y, t.z], [q.x, q.y, q.z, q.w], static=static,
                )
            except ValueError as err:
                self._node.get_logger().warning(
                    f"ignoring transform {msg.header.frame_id} -> {msg.child_frame_id}: {err}",
                    throttle_duration_sec=5.0,
                )

    def _on_tf(self, msg: Any) -> None:
        self.add(msg.transforms, static=False)

    def _on_tf_static(self, msg: Any) -> None:
        self.add(msg.transforms, static=True)

    def lookup(self, target: str, source: str, stamp: float) -> Matrix4:
        return self.buffer.lookup(target, source, stamp)

    def close(self) -> None:
        self._intake.close()


class Tf2TransformSource:
    """Answers lookups through tf2_ros (robot installations)."""

    backend = "tf2_ros"

    def __init__(self, node: Node, cache_seconds: float = 10.0) -> None:
        self._buffer = _tf2_ros.Buffer(cache_time=Duration(seconds=cache_seconds))
        self._intake = TransformIntake(node)
        self._listener = _tf2_ros.TransformListener(self._buffer, self._intake.node)

    def close(self) -> None:
        self._listener.unregister()
        self._intake.close()

    def lookup(self, target: str, source: str, stamp: float) -> Matrix4:
        when = RclpyTime() if stamp == 0.0 else RclpyTime(nanoseconds=round(stamp * 1e9))
        try:
            msg = self._buffer.lookup_transform(target, source, when)
        except _tf2_ros.ExtrapolationException as err:
            raise ExtrapolationError(str(err)) from err
        except _tf2_ros.ConnectivityException as err:
            raise ConnectivityError(str(err)) from err
        except _tf2_ros.LookupException as err:
            raise UnknownFrameError(str(err)) from err
        except _tf2_ros.TransformException as err:
            raise TransformError(str(err)) from err
        return transform_to_matrix(msg)


class ClosesTransforms:
    """Mixin for a node that keeps a transform source as ``_tf``: ``destroy_node`` closes it
    (when the constructor got that far) before the node goes. List it before ``Node``."""

    def destroy_node(self) -> None:
        source = getattr(self, "_tf", None)
        if source is not None:
            source.close()
        super().destroy_node()  # type: ignore[misc]


def make_transform_source(
    node: Node, cache_seconds: float = 10.0, prefer_tf2: bool = True
) -> ListeningTransformSource:
    """The best transform source available: tf2_ros when importable, else mimir's buffer."""
    if prefer_tf2 and _tf2_ros is not None:
        return Tf2TransformSource(node, cache_seconds)
    return BufferTransformSource(node, cache_seconds)


class TransformPublisher:
    """Publishes on /tf or /tf_static, through tf2_ros broadcasters when present."""

    def __init__(self, node: Node, static: bool = False) -> None:
        self._static = static
        if _tf2_ros is not None:
            cls = _tf2_ros.StaticTransformBroadcaster if static else _tf2_ros.TransformBroadcaster
            self._broadcaster: Any = cls(node)
            self._publisher: Any = None
        else:
            if _tf2_msgs is None:
                raise ImportError("tf2_msgs is not importable; run scripts/setup.sh to build it")
            self._broadcaster = None
            topic, profile = ("/tf_static", qos.TF_STATIC) if static else ("/tf", qos.TF)
            self._publisher = node.create_publisher(_tf2_msgs.TFMessage, topic, profile,
                                                    publisher_class=FloatSafePublisher)
            self._static_cache: dict[str, TransformStamped] = {}

    def send(self, transforms: Iterable[TransformStamped]) -> None:
        """Publish transforms. Static transforms accumulate like tf2's static broadcaster."""
        batch = [coerce_floats(msg) for msg in transforms]
        if self._broadcaster is not None:
            self._broadcaster.sendTransform(batch)
            return
        if self._static:
            for msg in batch:
                self._static_cache[msg.child_frame_id] = msg
            batch = list(self._static_cache.values())
        self._publisher.publish(_tf2_msgs.TFMessage(transforms=batch))

