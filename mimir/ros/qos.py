"""The QoS profiles mimir uses, named by role."""

from __future__ import annotations

from rclpy.qos import (
    DurabilityPolicy,
    HistoryPolicy,
    QoSProfile,
    ReliabilityPolicy,
    qos_profile_sensor_data,
)

#: Camera streams and other high-rate sensor data: best effort, keep the last few.
SENSOR = qos_profile_sensor_data


def _reliable(depth: int, durability: DurabilityPolicy) -> QoSProfile:
    """A reliable keep-last profile of ``depth`` messages with the given durability."""
    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST,
        depth=depth,
        reliability=ReliabilityPolicy.RELIABLE,
        durability=durability,
    )


#: Latched state (scene graph, static transforms): the last value reaches late joiners.
LATCHED = _reliable(1, DurabilityPolicy.TRANSIENT_LOCAL)

#: Events that must not be lost between live nodes (memory events, interaction events).
EVENTS = _reliable(100, DurabilityPolicy.VOLATILE)

#: /tf as tf2 publishes it.
TF = _reliable(100, DurabilityPolicy.VOLATILE)

#: /tf_static as tf2 publishes it.
TF_STATIC = _reliable(100, DurabilityPolicy.TRANSIENT_LOCAL)
