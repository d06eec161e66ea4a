"""Writing one rosbag2 bag in mcap storage, split into numbered files, without a ROS installation.

Bag layout. The output folder is one rosbag2 bag in mcap storage: ``metadata.yaml`` plus the
files ``<name>_0.mcap``, ``<name>_1.mcap`` ... (``<name>`` is the folder's name), exactly the
layout ``ros2 bag record --max-bag-size`` writes. The ``rosbags`` writer cannot split a bag by
itself, so :class:`SplitBagWriter` writes each file as a bag of its own in the staging folder
``<output>/<name>_<N>/``; when the file reaches the split size (counted as the bytes written to
it, messages plus their record headers, because the writer holds up to 1 MiB in memory before
the file grows), or when the writer is closed, that bag is closed, its file moves up into the
output folder and ``metadata.yaml`` is rewritten to describe every closed file. A process killed
outright (SIGKILL, power loss) therefore leaves a readable bag of the files closed before, and
the file it was writing in its staging folder, unindexed.

Messages are written as the serialized CDR bytes they arrived as; nothing is deserialized.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from mimir.bags import BagError, typestore

if TYPE_CHECKING:
    from collections.abc import Sequence

    from rosbags.interfaces import Connection, Qos
    from rosbags.rosbag2 import Writer

# rosbags and PyYAML are imported where they are used: ``mimir`` builds every subcommand's parser
# at start, and loading them takes most of a second.

#: rosbag2 metadata version written (the newest the ``rosbags`` writer knows; Jazzy and later).
BAG_VERSION: Final = 9

#: Bytes an mcap file holds per message besides its payload: the message record's header
#: (opcode, length, channel, sequence, two timestamps) and its entry in the message index.
RECORD_OVERHEAD_BYTES = 47


# ----------------------------------------------------------------------------- output folder


def default_output() -> Path:
    """``rosbag2_<date>-<time>`` in the current folder, the name ``ros2 bag record`` picks."""
    return Path(datetime.now().strftime("rosbag2_%Y_%m_%d-%H_%M_%S"))


def check_output(path: Path) -> None:
    """Refuse an output that would overwrite something or cannot be created.

    An absent path or an empty folder is accepted.

    Raises:
        BagError: the path is a file, a folder that is not empty, or lies where no folder can be
            created (below a file, or in a folder this user cannot write).
    """

    hint = " — give --output a new folder"
    if path.exists() or path.is_symlink():
        if not path.is_dir():
            raise BagError(f"output {path} exists and is not a folder; not overwriting it{hint}")
        if any(path.iterdir()):
            raise BagError(f"output folder {path} exists and is not empty; not overwriting "
                           f"it{hint}")
        if not os.access(path, os.W_OK | os.X_OK):
            raise BagError(f"output folder {path} is not writable{hint}")
        return
    parent = path.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise BagError(f"cannot create output folder {path}: {parent} is not a folder{hint}")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise BagError(f"cannot create output folder {path}: {parent} is not writable{hint}")


# ------------------------------------------------------------------------------------ writer


@dataclass(frozen=True)
class BagTopic:
    """A topic of the bag: its absolute name, message type and the QoS its publishers offered
    (stored so that a replay can publish the same way)."""

    name: str
    msgtype: str
    offered: tuple[Qos, ...] = ()


@dataclass
class _Part:
    """The bag file being written: a one-file bag in its staging folder."""

    index: int
    folder: Path
    writer: Writer
    connections: dict[str, Connection] = field(default_factory=dict)
    size: int = 0


class SplitBagWriter:
    """One mcap rosbag2 bag folder written as numbered files (see the module's bag layout).

    The folder must exist; :meth:`open` starts its first file. Topics may be added at any time:
    each file of the bag gets a connection for every topic added before it was opened or while
    it was open. Not thread-safe: call it from one thread.

    Args:
        output: the bag folder (existing; its name names the files).
        split_size_bytes: start a new file when the current one reaches this size; None never.
        recorded_by: stored in the bag's custom data under ``recorded_by``.
    """

    def __init__(self, output: Path, *, split_size_bytes: int | None = None,
                 recorded_by: str = "mimir") -> None:
        if split_size_bytes is not None and split_size_bytes <= 0:
            raise BagError(f"split size must be positive, got {split_size_bytes} bytes")
        self.output = output
        self._split_size = split_size_bytes
        self._recorded_by = recorded_by
        self._topics: dict[str, BagTopic] = {}
        self._part: _Part | None = None
        self._closed_parts: list[dict[str, Any]] = []

    @property
    def files(self) -> tuple[str, ...]:
        """The bag's closed files, in order (names relative to the bag folder)."""
        return tuple(path for p in self._closed_parts for path in p["relative_file_paths"])

    def size_bytes(self) -> int:
        """Size on disk of the bag's closed files."""
        return sum((self.output / name).stat().st_size for name in self.files)

    def open(self) -> None:
        """Start the bag's next file (its first, on a new writer)."""
        from rosbags.rosbag2 import StoragePlugin, Writer, WriterError  # noqa: PLC0415

        if self._part is not None:
            raise BagError(f"a file of {self.output} is already open")
        index = len(self._closed_parts)
        folder = self.output / f"{self.output.name}_{index}"
        try:
            writer = Writer(folder, version=BAG_VERSION, storage_plugin=StoragePlugin.MCAP)
            writer.set_custom_data("recorded_by", self._recorded_by)
            writer.open()
        except (WriterError, OSError) as err:
            raise BagError(f"cannot open bag file in {folder}: {err}") from err
        part = _Part(index, folder, writer)
        for topic in self._topics.values():
            self._add_connection(part, topic)
        self._part = part

    def add_topic(self, name: str, msgtype: str, offered: Sequence[Qos] = ()) -> None:
        """Make ``name`` writable in this file and every later one.

        Raises:
            BagError: the topic was added before, or its type is not in the bag's type store.
        """
        if name in self._topics:
            raise BagError(f"topic {name} is in the bag already")
        if msgtype not in typestore().fielddefs:
            raise BagError(f"cannot add topic {name}: type {msgtype} is not known to the bag "
                           "type store (neither a standard ROS 2 message nor a mimir_msgs one)")
        topic = BagTopic(name, msgtype, tuple(offered))
        if self._part is not None:
            self._add_connection(self._part, topic)
        self._topics[name] = topic

    def write(self, name: str, stamp_ns: int, data: bytes) -> None:
        """Write one serialized message of topic ``name`` received at ``stamp_ns``; a file that
        reaches the split size is closed and the next message opens the next one.

        Raises:
            BagError: the topic was not added, or the file cannot be written.
        """
        from rosbags.rosbag2 import WriterError  # noqa: PLC0415 - see the imports

        if name not in self._topics:
            raise BagError(f"topic {name} was not added to the bag")
        if self._part is None:
            self.open()
        part = self._part
        assert part is not None
        try:
            part.writer.write(part.connections[name], stamp_ns, data)
        except WriterError as err:
            raise BagError(f"cannot write to {part.folder}: {err}") from err
        part.size += len(data) + RECORD_OVERHEAD_BYTES
        if self._split_size is not None and part.size >= self._split_size:
            self.close()

    def close(self) -> None:
        """Close the file being written, move it into the bag folder and rewrite
        ``metadata.yaml`` (nothing when no file is open)."""
        import yaml  # noqa: PLC0415 - see the imports
        from rosbags.rosbag2 import WriterError  # noqa: PLC0415

        part, self._part = self._part, None
        if part is None:
            return
        try:
            part.writer.close()
            staged_meta = part.folder / "metadata.yaml"
            info = yaml.safe_load(staged_meta.read_text(encoding="utf-8"))
            info = info["rosbag2_bagfile_information"]
            (staged,) = part.folder.glob("*.mcap")
            final = self.output / staged.name
            staged.replace(final)
            staged_meta.unlink()
            part.folder.rmdir()
        except (WriterError, OSError, yaml.YAMLError, KeyError, ValueError) as err:
            raise BagError(f"cannot close bag file in {part.folder}: {err}") from err
        info["relative_file_paths"] = [final.name]
        for entry in info.get("files", []):
            entry["path"] = final.name
        self._closed_parts.append(info)
        self._write_metadata()

    @staticmethod
    def _add_connection(part: _Part, topic: BagTopic) -> None:
        from rosbags.rosbag2 import WriterError  # noqa: PLC0415 - see the imports

        try:
            part.connections[topic.name] = part.writer.add_connection(
                topic.name, topic.msgtype, typestore=typestore(),
                offered_qos_profiles=list(topic.offered))
        except WriterError as err:
            raise BagError(f"cannot add topic {topic.name} to the bag: {err}") from err

    def _write_metadata(self) -> None:
        """``metadata.yaml`` of the bag folder, describing every closed file."""
        import yaml  # noqa: PLC0415 - see the imports

        parts = self._closed_parts
        first = parts[0]
        with_messages = [p for p in parts if p["message_count"] > 0]
        if with_messages:
            start = min(p["starting_time"]["nanoseconds_since_epoch"] for p in with_messages)
            end = max(p["starting_time"]["nanoseconds_since_epoch"]
                      + p["duration"]["nanoseconds"] for p in with_messages)
        else:
            start = first["starting_time"]["nanoseconds_since_epoch"]
            end = start
        topics: dict[tuple[str, str], dict[str, Any]] = {}
        for part in parts:
            for entry in part["topics_with_message_count"]:
                meta = entry["topic_metadata"]
                key = (meta["name"], meta["type"])
                if key in topics:
                    topics[key]["message_count"] += entry["message_count"]
                else:
                    topics[key] = {"topic_metadata": meta,
                                   "message_count": entry["message_count"]}
        info = {
            "version": first["version"],
            "storage_identifier": first["storage_identifier"],
            "duration": {"nanoseconds": end - start},
            "starting_time": {"nanoseconds_since_epoch": start},
            "message_count": sum(p["message_count"] for p in parts),
            "topics_with_message_count": list(topics.values()),
            "compression_format": first.get("compression_format", ""),
            "compression_mode": first.get("compression_mode", ""),
            "relative_file_paths": [path for p in parts for path in p["relative_file_paths"]],
            "files": [entry for p in parts for entry in p.get("files", [])],
            "custom_data": first.get("custom_data"),
            "ros_distro": first.get("ros_distro"),
        }
        target = self.output / "metadata.yaml"
        scratch = target.with_suffix(".yaml.tmp")
        try:
            scratch.write_text(yaml.safe_dump({"rosbag2_bagfile_information": info},
                                               sort_keys=False), encoding="utf-8")
            scratch.replace(target)
        except OSError as err:
            raise BagError(f"cannot write {target}: {err}") from err
