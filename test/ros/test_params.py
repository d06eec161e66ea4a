"""Declaring node parameters from a frozen dataclass."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
import rclpy
from rclpy.context import Context
from rclpy.parameter import Parameter

from mimir.ros.params import ConfigError, declare_config

pytestmark = pytest.mark.ros


@dataclass(frozen=True)
class _Config:
    rate_hz: float = field(default=2.0, metadata={"description": "processing rate (Hz)"})
    cameras: tuple[str, ...] = field(default=("base", "pole"),
                                     metadata={"description": "camera names"})
    database: str = field(default="world.db", metadata={"description": "database path",
                                                        "read_only": True})
    max_masks: int = 64
    enabled: bool = True

    def __post_init__(self) -> None:
        if self.rate_hz <= 0:
            raise ValueError("rate_hz must be positive")


def test_declares_with_descriptors_and_overrides(ros_context: Context) -> None:
    node = rclpy.create_node(
        "params_test", context=ros_context,
        parameter_overrides=[
            Parameter("rate_hz", value=5.0),
            Parameter("cameras", value=["wrist"]),
        ],
    )
    try:
        config = declare_config(node, _Config)
        assert config == _Config(rate_hz=5.0, cameras=("wrist",))
        descriptor = node.describe_parameter("rate_hz")
        assert descriptor.description == "processing rate (Hz)"
        assert node.describe_parameter("database").read_only
        with pytest.raises(AttributeError):
            config.rate_hz = 1.0  # type: ignore[misc]
    finally:
        node.destroy_node()


@pytest.mark.parametrize(("node_name", "name", "value"), [
    ("params_bad", "rate_hz", -1.0),  # refused by the dataclass
    ("params_type", "max_masks", "many"),  # the wrong parameter type
])
def test_bad_value_or_type_is_a_config_error(ros_context: Context, node_name: str, name: str,
                                             value: object) -> None:
    node = rclpy.create_node(node_name, context=ros_context,
                             parameter_overrides=[Parameter(name, value=value)])
    try:
        with pytest.raises(ConfigError, match=name):
            declare_config(node, _Config)
    finally:
        node.destroy_node()


def test_unsupported_field_type(ros_context: Context) -> None:
    @dataclass(frozen=True)
    class Bad:
        mapping: dict[str, int] = field(default_factory=dict)

    node = rclpy.create_node("params_unsupported", context=ros_context)
    try:
        with pytest.raises(ConfigError, match="mapping"):
            declare_config(node, Bad)
    finally:
        node.destroy_node()
