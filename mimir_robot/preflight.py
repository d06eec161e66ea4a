"""Pre-flight checks an operator runs before the robot's first move (``mimir doctor --robot``).

Each check turns one observation (the TF tree seen for a few seconds, the arrival times of each
camera's messages, a TCP/authentication handshake with a TidyBot++ server, free disk space, a model
folder, the planner's gate parameter) into one :class:`PreflightCheck` line that says what was
found and, when it failed, what to fix. Collecting the observations over DDS is the ROS layer's
job (``mimir.nodes.robot.preflight``); everything here runs without ROS and is unit-tested.
"""

from __future__ import annotations

import shutil
import socket
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from multiprocessing import AuthenticationError
from multiprocessing.managers import BaseManager
from pathlib import Path
from typing import Any

from mimir_robot import contract as c

#: Files a local SAM3 model folder must hold (weights may be one file or shards).
_SAM3_FILES = ("config.json",)
_WEIGHT_SUFFIXES = (".safetensors", ".bin")


@dataclass(frozen=True)
class PreflightCheck:
    """One line of the pre-flight: what was checked, whether it passed, what to do if not."""

    name: str
    ok: bool
    detail: str
    fix: str = ""

    def line(self) -> str:
        mark = "ok " if self.ok else "FAIL"
        tail = "" if self.ok or not self.fix else f" -> {self.fix}"
        return f"[{mark}] {self.name}: {self.detail}{tail}"


@dataclass(frozen=True)
class RobotProfile:
    """What the pre-flight expects, read from the robot deployment file's node sections.

    Attributes:
        cameras: cameras the graph uses (deprojection's list).
        map_frame: fixed frame every camera must connect to.
        host, base_port, arm_port, authkey: the TidyBot++ servers the executor drives.
        memory_dir: where memory is kept (needs free space).
        sam3_model: the segmentation node's model (a folder, or a hub id).
        min_camera_hz: slowest acceptable rate of each camera topic.
        min_free_gb: least free disk space for memory and keyframes.
    """

    cameras: tuple[str, ...]
    map_frame: str = c.FRAME_MAP
    host: str = "127.0.0.1"
    base_port: int = c.BASE_RPC_PORT
    arm_port: int = c.ARM_RPC_PORT
    authkey: str = ""
    memory_dir: str = "~/.local/share/mimir/default"
    sam3_model: str = ""
    min_camera_hz: float = 10.0
    min_free_gb: float = 5.0

    @classmethod
    def from_deployment(cls, sections: Mapping[str, Mapping[str, Any]], **overrides: Any
                        ) -> RobotProfile:
        """The profile of a deployment file parsed into ``{node: ros__parameters}``."""

        def get(node: str, key: str, default: Any) -> Any:
            return sections.get(node, {}).get(key, default)

        values: dict[str, Any] = {
            "cameras": tuple(str(x) for x in get("deprojection", "cameras", ["base"])),
            "map_frame": str(get("deprojection", "map_frame", c.FRAME_MAP)),
            "host": str(get("executor", "host", "127.0.0.1")),
            "base_port": int(get("executor", "base_port", c.BASE_RPC_PORT)),
            "arm_port": int(get("executor", "arm_port", c.ARM_RPC_PORT)),
            "authkey": str(get("executor", "authkey", "")),
            "memory_dir": str(get("scene_graph", "memory_dir", cls.memory_dir)),
            "sam3_model": str(get("segmentation", "model", "")),
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


@dataclass
class Observation:
    """What the ROS layer saw during the observation window.

    Attributes:
        window_s: how long it listened.
        parents: child frame -> parent frame of every transform seen (``/tf`` and ``/tf_static``).
        arrivals: topic -> receive times (s, monotonic) of its messages.
        gate: the planner's ``operator_gate`` value, or None when the planner did not answer.
    """

    window_s: float
    parents: dict[str, str] = field(default_factory=dict)
    arrivals: dict[str, list[float]] = field(default_factory=dict)
    gate: bool | None = None


def frame_chain(parents: Mapping[str, str], frame: str, root: str) -> list[str] | None:
    """Frames from ``frame`` up to ``root`` (both included), or None when the chain breaks."""
    chain = [frame]
    while chain[-1] != root:
        parent = parents.get(chain[-1])
        if parent is None or parent in chain:
            return None
        chain.append(parent)
    return chain


def tf_check(parents: Mapping[str, str], root: str, frame: str) -> PreflightCheck:
    """Whether TF connects ``frame`` to ``root``; on failure names the frame the chain stops at."""
    name = f"TF {root} -> {frame}"
    chain = frame_chain(parents, frame, root)
    if chain is not None:
        return PreflightCheck(name, True, " <- ".join(chain))
    stop = frame
    seen = {frame}
    while stop in parents and parents[stop] not in seen:
        stop = parents[stop]
        seen.add(stop)
    return PreflightCheck(name, False, f"no transform above {stop!r}", _tf_fix(stop, root))


def _tf_fix(stop: str, root: str) -> str:
    """What publishes the missing parent of ``stop``."""
    if stop == c.FRAME_ODOM:
        return f"start localization (it publishes {root} -> {c.FRAME_ODOM} from the fiducials)"
    if stop == c.FRAME_BASE:
        return (f"start the executor with the base server up (it publishes {c.FRAME_ODOM} -> "
                f"{c.FRAME_BASE} from odometry)")
    return (f"publish the mount of {stop!r} (the robot description's static transforms or the "
            "camera driver's)")


def rate_check(topic: str, arrivals: Sequence[float], window_s: float, min_hz: float
               ) -> PreflightCheck:
    """Whether ``topic`` arrived at ``min_hz`` or faster over the window."""
    name = f"topic {topic}"
    if not arrivals:
        return PreflightCheck(name, False, f"nothing in {window_s:.0f} s",
                              "start the camera driver or remap its topics to this name")
    if len(arrivals) >= 2:
        span = max(arrivals[-1] - arrivals[0], 1e-6)
        hz = (len(arrivals) - 1) / span
    else:
        hz = 1.0 / window_s
    ok = hz >= min_hz
    return PreflightCheck(name, ok, f"{hz:.1f} Hz (needs {min_hz:g} Hz)",
                          "" if ok else "check the camera's frame rate, USB bandwidth and CPU load")


def camera_checks(observation: Observation, cameras: Iterable[str], min_hz: float
                  ) -> list[PreflightCheck]:
    """Rate checks of each camera's colour, depth and camera-info topics."""
    checks: list[PreflightCheck] = []
    for camera in cameras:
        topics = c.camera_topics(camera)
        for topic in (topics.color, topics.depth, topics.camera_info):
            checks.append(rate_check(topic, observation.arrivals.get(topic, []),
                                     observation.window_s, min_hz))
    return checks


def server_check(name: str, host: str, port: int, authkey: str, timeout_s: float = 2.0
                 ) -> PreflightCheck:
    """Whether a TidyBot++ RPC server answers the authenticated handshake (nothing moves).

    Only the manager handshake runs: no controller is created, so an executor already
    connected is not disturbed.
    """
    label = f"{name} server {host}:{port}"
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as err:
        return PreflightCheck(label, False, f"not reachable ({err.strerror or err})",
                              f"start {name}_server.py on the robot computer, or set "
                              "executor.host/ports in the deployment file")
    if not authkey:
        return PreflightCheck(label, False, "reachable, but no authkey is configured",
                              "set executor.authkey to the servers' RPC_AUTHKEY")
    manager = BaseManager(address=(host, port), authkey=authkey.encode())
    try:
        manager.connect()
    except AuthenticationError:
        return PreflightCheck(label, False, "refused the authkey",
                              "set executor.authkey to the servers' RPC_AUTHKEY")
    except (OSError, EOFError) as err:
        return PreflightCheck(label, False, f"handshake failed ({err})",
                              "restart the server; check that nothing else listens on the port")
    return PreflightCheck(label, True, "answers")


def disk_check(folder: str | Path, min_free_gb: float) -> PreflightCheck:
    """Whether the memory folder (or its nearest existing parent) has ``min_free_gb`` free."""
    path = Path(folder).expanduser()
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    free_gb = shutil.disk_usage(probe).free / 1e9
    ok = free_gb >= min_free_gb
    return PreflightCheck(f"disk for memory {path}", ok,
                          f"{free_gb:.1f} GB free (needs {min_free_gb:g} GB)",
                          "" if ok else "free space or point memory_dir at a larger disk")


def sam3_check(model: str) -> PreflightCheck:
    """Whether the segmentation model is a local folder with its config and weights."""
    name = "SAM3 model"
    how = ("download the weights (`hf download facebook/sam3 --local-dir ~/models/sam3`, after "
           "accepting the licence on the model page) and launch with sam3_model:=~/models/sam3")
    if not model:
        return PreflightCheck(name, False, "no model configured", how)
    path = Path(model).expanduser()
    if not path.is_dir():
        return PreflightCheck(name, False, f"{model!r} is not a local folder", how)
    missing = [f for f in _SAM3_FILES if not (path / f).is_file()]
    weights = [p for p in path.iterdir() if p.suffix in _WEIGHT_SUFFIXES]
    if missing or not weights:
        lacks = ", ".join(missing + ([] if weights else ["weights (*.safetensors)"]))
        return PreflightCheck(name, False, f"{path} lacks {lacks}", how)
    return PreflightCheck(name, True, f"{path} ({len(weights)} weight file(s))")


def gate_check(gate: bool | None) -> PreflightCheck:
    """Whether the planner is up with its operator gate on."""
    name = "operator gate"
    if gate is None:
        return PreflightCheck(name, False, "the planner did not answer",
                              "start the graph (ros2 launch mimir bringup.launch.py)")
    if not gate:
        return PreflightCheck(name, False, "off: primitives run without approval",
                              "launch with operator_gate:=true")
    return PreflightCheck(name, True, "on")


def run_preflight(profile: RobotProfile, observation: Observation, *,
                  server_timeout_s: float = 2.0) -> list[PreflightCheck]:
    """Every pre-flight check, in the order an operator fixes them."""
    checks = [tf_check(observation.parents, profile.map_frame, c.FRAME_BASE)]
    checks += [tf_check(observation.parents, profile.map_frame, c.camera_optical_frame(cam))
               for cam in profile.cameras]
    checks += camera_checks(observation, profile.cameras, profile.min_camera_hz)
    checks += [
        server_check("base", profile.host, profile.base_port, profile.authkey, server_timeout_s),
        server_check("arm", profile.host, profile.arm_port, profile.authkey, server_timeout_s),
        disk_check(profile.memory_dir, profile.min_free_gb),
        sam3_check(profile.sam3_model),
        gate_check(observation.gate),
    ]
    return checks
