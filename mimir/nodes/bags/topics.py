"""What ``mimir record`` subscribes to, and with which QoS.

The default topic set is what a replay on a machine without a GPU needs: per camera the colour
and depth images, the colour camera info, the segmentation masks and the part masks; ``/tf`` and
``/tf_static``; the robot contract's signals (odometry, commanded and achieved end-effector
pose, gripper, interaction events, ``/diagnostics``); the observations and the memory events.
The planner publishes no trace topic (it writes its trace to a file), so none is recorded.

QoS follows the publishers, as ``ros2 bag record`` does: a topic is subscribed reliable when
every publisher offers reliable delivery and best effort otherwise, and transient-local when
every publisher is latched (``/tf_static``, the scene graph), so the latched value is caught
even when it was sent before the recorder started. A publisher that appears later with weaker
QoS makes the recorder subscribe again with the weaker setting (:func:`weakest`). The
publishers' offered QoS is stored with each topic in the bag (:func:`bag_qos`), so a replay can
publish the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from mimir.bags import BagError
from mimir_robot import contract

if TYPE_CHECKING:
    from rclpy.qos import QoSProfile
    from rosbags.interfaces import Qos

# rclpy and rosbags are imported where they are used: ``mimir`` builds every subcommand's parser
# at start, and loading them takes most of a second.

#: Queue depth of every subscription (keep-last); latched topics replay up to this many values.
QUEUE_DEPTH = 100

# ------------------------------------------------------------------------------- topic names


def default_topics(cameras: Sequence[str] = contract.CAMERAS) -> list[str]:
    """The topics a replay without a GPU needs, for the given cameras (names as published)."""
    topics: list[str] = []
    for camera in cameras:
        names = contract.camera_topics(camera)
        topics += [names.color, names.depth, names.camera_info,
                   f"cameras/{camera}/segmentation", f"cameras/{camera}/parts"]
    topics += ["/tf", "/tf_static", contract.TOPIC_ODOM, contract.TOPIC_EE_COMMANDED,
               contract.TOPIC_EE_ACHIEVED, contract.TOPIC_GRIPPER,
               contract.TOPIC_INTERACTION_EVENTS, contract.TOPIC_DIAGNOSTICS,
               "observations", "memory_events"]
    return topics


def _first_line(err: Exception) -> str:
    lines = str(err).strip().splitlines()
    return lines[0] if lines else type(err).__name__


def resolve_topics(topics: Sequence[str], namespace: str = "") -> list[str]:
    """Absolute topic names: relative ones are put under ``namespace``; duplicates dropped.

    Raises:
        BagError: the list is empty, the namespace is invalid, or a name is not a valid ROS
            topic name (every invalid name is listed).
    """
    from rclpy.exceptions import (  # noqa: PLC0415 - see the imports
        InvalidNamespaceException,
        InvalidTopicNameException,
    )
    from rclpy.validate_full_topic_name import validate_full_topic_name  # noqa: PLC0415
    from rclpy.validate_namespace import validate_namespace  # noqa: PLC0415


    prefix = ""
    if namespace.strip("/"):
        prefix = "/" + namespace.strip("/")
        try:
            validate_namespace(prefix)
        except InvalidNamespaceException as err:
            raise BagError(f"invalid namespace {namespace!r}: {_first_line(err)}") from err
    if not topics:
        raise BagError("no topic to record — name at least one with --topics")
    resolved: list[str] = []
    invalid: list[str] = []
    for name in topics:
        full = name if name.startswith("/") else f"{prefix}/{name}"
        try:
            validate_full_topic_name(full)
        except InvalidTopicNameException as err:
            reason = _first_line(err).removeprefix("Invalid topic name: ").rstrip(":")
            invalid.append(f"{name!r} ({reason})")
            continue
        if full not in resolved:
            resolved.append(full)
    if invalid:
        raise BagError("invalid topic name(s): " + "; ".join(invalid)
                       + " — topic names use letters, digits, '_' and '/'")
    return resolved


# ----------------------------------------------------------------------------------------- QoS


def subscription_qos(offered: Sequence[QoSProfile]) -> QoSProfile:
    """The QoS that matches every offered profile: reliable and transient-local only when all
    publishers offer them (an empty list is treated as all of them offering both)."""
    from rclpy.qos import (  # noqa: PLC0415 - see the imports
        DurabilityPolicy,
        HistoryPolicy,
        QoSProfile,
        ReliabilityPolicy,
    )

    reliable = all(q.reliability == ReliabilityPolicy.RELIABLE for q in offered)
    latched = all(q.durability == DurabilityPolicy.TRANSIENT_LOCAL for q in offered)
    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST,
        depth=QUEUE_DEPTH,
        reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT,
        durability=DurabilityPolicy.TRANSIENT_LOCAL if latched else DurabilityPolicy.VOLATILE,
    )


def weakest(current: QoSProfile, wanted: QoSProfile) -> QoSProfile:
    """``current`` weakened wherever ``wanted`` asks for less (never strengthened)."""
    from rclpy.qos import (  # noqa: PLC0415 - see the imports
        DurabilityPolicy,
        HistoryPolicy,
        QoSProfile,
        ReliabilityPolicy,
    )

    best_effort = ReliabilityPolicy.BEST_EFFORT in (current.reliability, wanted.reliability)
    volatile = DurabilityPolicy.VOLATILE in (current.durability, wanted.durability)
    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST,
        depth=QUEUE_DEPTH,
        reliability=ReliabilityPolicy.BEST_EFFORT if best_effort else ReliabilityPolicy.RELIABLE,
        durability=DurabilityPolicy.VOLATILE if volatile else DurabilityPolicy.TRANSIENT_LOCAL,
    )


def bag_qos(profile: QoSProfile) -> Qos:
    """A publisher's offered QoS as the ``rosbags`` writer stores it in the bag."""
    from rosbags.interfaces import (  # noqa: PLC0415 - see the imports
        Qos,
        QosDurability,
        QosHistory,
        QosLiveliness,
        QosReliability,
        QosTime,
    )

    def _qos_time(nanoseconds: int) -> QosTime:
        return QosTime(nanoseconds // 1_000_000_000, nanoseconds % 1_000_000_000)

    return Qos(
        history=QosHistory.__members__.get(profile.history.name, QosHistory.UNKNOWN),
        depth=profile.depth,
        reliability=QosReliability.__members__.get(profile.reliability.name,
                                                   QosReliability.UNKNOWN),
        durability=QosDurability.__members__.get(profile.durability.name,
                                                 QosDurability.UNKNOWN),
        deadline=_qos_time(profile.deadline.nanoseconds),
        lifespan=_qos_time(profile.lifespan.nanoseconds),
        liveliness=QosLiveliness.__members__.get(profile.liveliness.name,
                                                 QosLiveliness.UNKNOWN),
        liveliness_lease_duration=_qos_time(profile.liveliness_lease_duration.nanoseconds),
        avoid_ros_namespace_conventions=profile.avoid_ros_namespace_conventions,
    )
