"""rosbag2 files without a ROS installation: the message types mimir's bags hold, and opening one.

Recording (``mimir record``) and replay (``mimir replay``) read and write rosbag2 bags (mcap or
sqlite3 storage, split bags) with the ``rosbags`` library, which needs no ``ros2`` command and
no sourced workspace. Its type store knows the standard messages of the ROS 2 distribution
(:data:`DISTRO`); :func:`typestore` adds mimir's own messages from ``mimir_msgs/msg/*.msg``, so
segmentation masks, observations, interaction events and memory events read back as typed
objects. Messages come back as ``rosbags`` data classes with the fields of the ROS message, so
the converters of the ROS layer (``mimir.ros.images``, ``mimir.nodes.perception.messages``...)
read them as they read live messages.
"""

from __future__ import annotations

import functools
import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # rosbags loads in about a second: only commands that read bags pay for it
    from rosbags.typesys.store import Typestore

#: The ROS 2 distribution whose standard message definitions bags are read and written with
#: (a member of ``rosbags.typesys.Stores``).
DISTRO = "ROS2_KILTED"

#: Where the message definitions of ``mimir_msgs`` live (the source tree, or the installed
#: share folder of a robot installation).
_MSG_DIRS = (Path(__file__).resolve().parents[1] / "mimir_msgs" / "msg",)


class BagError(RuntimeError):
    """A bag cannot be opened, read or written (missing, corrupt, truncated, unknown storage)."""


def _msg_dir() -> Path:
    for folder in _MSG_DIRS:
        if folder.is_dir():
            return folder
    try:
        from ament_index_python.packages import get_package_share_directory  # noqa: PLC0415
    except ImportError as err:
        raise BagError("mimir_msgs message definitions not found") from err
    return Path(get_package_share_directory("mimir_msgs")) / "msg"


@functools.cache
def typestore() -> Typestore:
    """The distribution's standard types plus every ``mimir_msgs`` message (built once)."""
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore  # noqa: PLC0415

    store = get_typestore(Stores[DISTRO])
    types: dict[str, object] = {}
    for path in sorted(_msg_dir().glob("*.msg")):
        types.update(get_types_from_msg(path.read_text(encoding="utf-8"),
                                        f"mimir_msgs/msg/{path.stem}"))
    store.register(types)  # type: ignore[arg-type]
    return store


def topic_key(topic: str) -> str:
    """A topic name without its leading slash (bags store absolute names)."""
    return topic.lstrip("/")


def message_class(msgtype: str) -> Any:
    """The Python message class of a ``pkg/msg/Name`` type installed here.

    Raises:
        ImportError: the package or the type is not installed (or the name is malformed).
    """
    try:
        package, kind, name = msgtype.split("/")
        return getattr(importlib.import_module(f"{package}.{kind}"), name)
    except (ValueError, AttributeError) as err:
        raise ImportError(f"no message type {msgtype!r} here: {err}") from err
