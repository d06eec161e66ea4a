"""Keep-up benchmark: do deprojection and world memory keep up with three cameras over DDS?

Run: ``.venv/bin/python benchmarks/bench_keepup.py [--rate HZ] [--duration S] [--duration-30 S]
[--warmup S] [--cameras base,pole,wrist] [--transport localhost|large-data] [--out FILE]``

By default it makes two runs: 15 Hz per camera for 600 s, then 30 Hz for 120 s, each measured
after a 10 s warm-up. Each run starts from nothing: a fresh memory folder, fresh node processes.

What runs, each as its own process, all on an isolated ROS domain (a random id in 150..200, or
``--domain-id``) with the DDS set-up of ``--transport`` (see below):

* ``deprojection_node`` and ``scene_graph_node``, the real console scripts, with their sections
  of the deployment file (``config/mimir.yaml``, or ``--params-file``) and only these changes:
  the camera list, a fresh ``memory_dir`` and ``use_sim_time: false``;
* the feeder (``benchmarks/keepup_feed.py``): the 7-Scenes kitchen recording scaled to 1280x720,
  published per camera at the given rate as colour, registered depth, camera info, a
  segmentation (a fixed colour-region stand-in for SAM3 output, see that file) and the
  ``map`` -> optical frame transform on ``/tf``, all stamped with the wall-clock time of
  publishing. Every message is built before the clock starts;
* a ``get_scene_graph`` client (``benchmarks/keepup_client.py``), a process of its own as the
  planner would be;
* this process, which measures.

Figures, over the measured window only (warm-up excluded; a frame belongs to the window when its
stamp does):

* frames processed per camera: ``observations`` batches received whose stamp is one the feeder
  published, as a share of the frames published. The deprojection node's own counters
  (``/diagnostics``) over the same window are printed beside it as a cross-check, with its
  drop counters, so a shortfall can be traced to its cause;
* stamp -> observation: receive time of the batch minus its header stamp (the image stamp);
* stamp -> graph: receive time of the last ``memory_events`` message of a frame minus the
  image stamp. The link is exact: the deprojection node stamps every observation with the image
  stamp, and world memory gives each event (``node_created`` / ``observation_fused``) the stamp
  of the observation it stored, so events are matched to frames by stamp (each published stamp
  is unique over all cameras). The observation -> event lag (event receive minus batch receive)
  is printed too;
* ``get_scene_graph``: a client calls it every 0.5 s during the whole stream (a call waits for
  the previous one; timeout 2 s); p50, p95, max, timeouts. The latency runs from the call to
  the response deserialised by the client, which runs as a process of its own
  (``keepup_client.py``), as the planner would: in this process the response waited for an
  interpreter busy with the memory events it counts;
* CPU of each process in % of one core, averaged over the window, and the load average;
* transport check, during the warm-up only: this process also subscribes to every camera's
  segmentation topic and counts how many of the published messages reach it, then drops those
  subscriptions before the window starts. A low share means DDS loses frames before any node
  sees them.

DDS transport (``--transport``): ``large-data`` (default) uses Fast DDS's ``LARGE_DATA`` built-in
transports (shared memory and TCP for data), the set-up Fast DDS recommends for camera streams
and the one a robot running these nodes should use (``FASTDDS_BUILTIN_TRANSPORTS=LARGE_DATA``);
discovery then uses Fast DDS's default multicast, so the isolation rests on the domain id.
``localhost`` sets ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` instead: rmw_fastrtps then installs
its own transports (shared memory plus UDP), and on the two-core machine where this script was
written that lost most 1280x720 best-effort images even at 2 Hz and delayed small reliable
messages such as /tf by seconds. Compare the two to separate the transport from the nodes.

All times are the wall clock of this machine (``use_sim_time`` is false everywhere). Receive
times are taken at the start of this process's callbacks, so they include its own executor
delay; its CPU is shown so that this can be judged. The image stamp is the moment of
publishing, so no camera or segmentation-model delay is included: the figures are the robot-side
path from a segmented frame to world memory. The feeder reports its own rate, lag behind its
schedule and CPU, and the script says when the feeder may have been the bottleneck.

Pass criteria (set for 15 Hz; other rates show them for reference): every camera has at least
90 % of its frames processed, stamp -> graph p95 <= 100 ms, ``get_scene_graph`` p95 <= 50 ms.
PASS/FAIL is printed per criterion; the exit status is 0 whatever the verdict (1 when the
benchmark itself could not run, 130 after Ctrl-C). Ctrl-C or an error stops every process and
prints what was measured so far. Node logs and the run files stay in a folder under the temp
dir, printed at the start; each run's memory folder is removed after noting its size.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import math
import os
import platform
import queue
import random
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import IO, Any

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.serialization import deserialize_message
from rclpy.signals import SignalHandlerOptions

from mimir.paths import config_file
from mimir.ros import qos
from mimir.ros.time import to_seconds
from mimir_msgs.msg import MemoryEvent, ObjectObservationArray, SceneGraph, Segmentation

try:
    import psutil
except ImportError:  # CPU times are then read from /proc
    psutil = None

FEEDER = Path(__file__).resolve().with_name("keepup_feed.py")
CLIENT = FEEDER.with_name("keepup_client.py")
#: Must equal keepup_feed.STAMP_QUANTUM: stamps are matched in these units (s).
STAMP_QUANTUM = 1e-4
TRANSPORTS = ("localhost", "large-data")
SERVICE_PERIOD_S = 0.5
SERVICE_TIMEOUT_S = 2.0
CRITERIA_RATE_HZ = 15.0
MIN_PROCESSED_SHARE = 0.90
MAX_GRAPH_P95_MS = 100.0
MAX_SERVICE_P95_MS = 50.0
NODES = {"deprojection": "deprojection_node", "scene_graph": "scene_graph_node"}
#: Process groups started and not yet reaped; killed at exit whatever happened.
_LIVE_GROUPS: set[int] = set()


@atexit.register
def _kill_leftovers() -> None:
    for pgid in list(_LIVE_GROUPS):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)


class BenchmarkError(RuntimeError):
    """The benchmark cannot go on (a process died, something did not come up)."""


class NotDiscoveredError(BenchmarkError):
    """The nodes started but this process never discovered them over DDS, or two of them never
    connected (the scene graph took nothing the deprojection node published)."""


#: Starts of one run, each on a fresh domain, before a discovery failure ends the benchmark: on
#: this machine about one start in three right after earlier runs did not discover the nodes
#: within a minute (the next start on another domain did).
DISCOVERY_ATTEMPTS = 3


def stamp_key(stamp: float) -> int:
    """Integer key of a stamp, as the feeder rounds it."""
    return round(stamp / STAMP_QUANTUM)


def percentiles_ms(seconds: list[float]) -> dict[str, Any]:
    """p50, p95 and max of durations in seconds, as milliseconds (None without samples)."""
    if not seconds:
        return {"n": 0, "p50": None, "p95": None, "max": None}
    arr = np.asarray(seconds) * 1000.0
    return {"n": len(seconds), "p50": round(float(np.percentile(arr, 50)), 2),
            "p95": round(float(np.percentile(arr, 95)), 2), "max": round(float(arr.max()), 2)}


def cpu_seconds(pid: int, cache: dict[int, Any]) -> float | None:
    """User plus system CPU seconds of a process so far (None when it is gone)."""
    if psutil is not None:
        try:
            proc = cache.get(pid) or cache.setdefault(pid, psutil.Process(pid))
            times = proc.cpu_times()
        except psutil.Error:
            return None
        return float(times.user + times.system)
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def dds_env(transport: str) -> dict[str, str | None]:
    """Environment of every process for a transport choice (None: unset the variable)."""
    if transport == "large-data":
        return {"ROS_AUTOMATIC_DISCOVERY_RANGE": "SYSTEM_DEFAULT",
                "FASTDDS_BUILTIN_TRANSPORTS": "LARGE_DATA"}
    return {"ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST", "FASTDDS_BUILTIN_TRANSPORTS": None}


def apply_env(env: MutableMapping[str, str], changes: dict[str, str | None]
              ) -> MutableMapping[str, str]:
    """``env`` with ``changes`` applied (in place); returned for convenience."""
    for key, value in changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def filesystem_of(path: Path) -> str:
    """Type of the filesystem holding ``path`` (from /proc/mounts; '?' when unknown)."""
    best, kind = "", "?"
    try:
        lines = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return kind
    target = str(path.resolve())
    for line in lines:
        parts = line.split()
        if len(parts) > 2 and target.startswith(parts[1]) and len(parts[1]) > len(best):
            best, kind = parts[1], parts[2]
    return kind


# ---------------------------------------------------------------- processes
class Processes:
    """The child processes of one run, each in its own process group."""

    def __init__(self, log_dir: Path, env: dict[str, str]) -> None:
        self.log_dir = log_dir
        self.env = env
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self._logs: list[IO[bytes]] = []

    def start(self, name: str, argv: list[str], *, pipes: bool = False) -> subprocess.Popen[bytes]:
        log = (self.log_dir / f"{name}.log").open("wb")
        self._logs.append(log)
        proc = subprocess.Popen(
            argv, env=self.env, cwd=str(FEEDER.parents[1]), start_new_session=True,
            stdin=subprocess.PIPE if pipes else subprocess.DEVNULL,
            stdout=subprocess.PIPE if pipes else log,
            stderr=log if pipes else subprocess.STDOUT,
        )
        self.procs[name] = proc
        _LIVE_GROUPS.add(proc.pid)
        return proc

    def check_alive(self) -> None:
        """Raise when a process has exited before being told to."""
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise BenchmarkError(f"{name} exited with status {proc.returncode}; its log:\n"
                                     f"{self.log_tail(name)}")

    def log_tail(self, name: str, lines: int = 15) -> str:
        path = self.log_dir / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join("    " + line for line in text.splitlines()[-lines:])

    def stop(self) -> None:
        """Ask every process to stop (feeder: STOP then SIGTERM; nodes: SIGINT), then kill."""
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                continue
            if proc.stdin is not None:
                with contextlib.suppress(OSError):
                    proc.stdin.write(b"STOP\n")
                    proc.stdin.close()
            sig = signal.SIGTERM if name == "feeder" else signal.SIGINT
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
        deadline = time.monotonic() + 10.0
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5.0)
            _LIVE_GROUPS.discard(proc.pid)
        for log in self._logs:
            log.close()


# ---------------------------------------------------------------- measuring node
def cdr_stamp(data: bytes) -> float:
    """Header stamp of a serialised message whose first field is a std_msgs/Header."""
    little = data[1] & 1  # encapsulation id: odd for little-endian
    sec, nanosec = struct.unpack_from("<iI" if little else ">iI", data, 4)
    return sec + nanosec * 1e-9


@dataclass
class Recorded:
    """What the measuring node has received (guarded by ``lock``)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    observations: dict[int, tuple[str, float, int]] = field(default_factory=dict)
    events_first: dict[int, float] = field(default_factory=dict)
    events_last: dict[int, float] = field(default_factory=dict)
    event_count: int = 0
    event_times: list[float] = field(default_factory=list)
    diagnostics: dict[str, list[tuple[float, dict[str, int]]]] = field(default_factory=dict)
    calls: list[tuple[float, float | None, int]] = field(default_factory=list)
    raw_events: bool = True
    last_input: float = 0.0
    delivered: dict[str, set[int]] = field(default_factory=dict)
    watch_until: float | None = None
    graphs_received: int = 0


class Probe(Node):
    """Subscribes to observations, memory events and diagnostics; calls get_scene_graph."""

    VERIFY_FIRST = 50  # events whose raw stamp is checked against a full deserialisation

    def __init__(self, context: Context, record: Recorded) -> None:
        super().__init__("keepup_probe", context=context)
        self.record = record
        self._verify_left = self.VERIFY_FIRST
        self.create_subscription(ObjectObservationArray, "observations", self._on_observations,
                                 qos.EVENTS)
        self.create_subscription(MemoryEvent, "memory_events", self._on_event, qos.EVENTS,
                                 raw=True)
        self.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics,
                                 qos.EVENTS)
        # the latched graph, read raw as the analyzer reads it on the robot (so the scene graph
        # builds and publishes it as it would there)
        self.create_subscription(SceneGraph, "scene_graph", self._on_graph, qos.LATCHED,
                                 raw=True)
        self._watching: list[Any] = []

    def _on_graph(self, _raw: bytes) -> None:
        with self.record.lock:
            self.record.graphs_received += 1

    def watch_delivery(self, cameras: list[str]) -> None:
        """Count the segmentation messages reaching this process (raw: no deserialisation)."""
        for cam in cameras:
            self.record.delivered[cam] = set()
            self._watching.append(self.create_subscription(
                Segmentation, f"cameras/{cam}/segmentation",
                partial(self._on_segmentation, cam), qos.SENSOR, raw=True))

    def stop_watching(self) -> None:
        """Drop the delivery subscriptions (before the measured window)."""
        with self.record.lock:
            self.record.watch_until = time.time()
        for sub in self._watching:
            self.destroy_subscription(sub)
        self._watching.clear()

    def _on_segmentation(self, cam: str, data: bytes) -> None:
        key = stamp_key(cdr_stamp(data))
        with self.record.lock:
            self.record.delivered[cam].add(key)

    def _on_observations(self, msg: ObjectObservationArray) -> None:
        now = time.time()
        key = stamp_key(to_seconds(msg.header.stamp))
        with self.record.lock:
            self.record.observations.setdefault(key, (msg.camera, now, len(msg.observations)))
            self.record.last_input = now

    def _on_event(self, data: bytes) -> None:
        now = time.time()
        rec = self.record
        if rec.raw_events:
            stamp = cdr_stamp(data)
            if self._verify_left > 0:
                self._verify_left -= 1
                full = to_seconds(deserialize_message(data, MemoryEvent).header.stamp)
                if stamp_key(full) != stamp_key(stamp):
                    rec.raw_events = False  # unexpected layout: deserialise from now on
                    stamp = full
        else:
            stamp = to_seconds(deserialize_message(data, MemoryEvent).header.stamp)
        key = stamp_key(stamp)
        with rec.lock:
            rec.events_first.setdefault(key, now)
            rec.events_last[key] = now
            rec.event_count += 1
            rec.event_times.append(now)
            rec.last_input = now

    def _on_diagnostics(self, msg: DiagnosticArray) -> None:
        now = time.time()
        for status in msg.status:
            name = status.name.rsplit("/", 1)[-1]
            if name not in NODES:
                continue
            counters: dict[str, int] = {}
            for kv in status.values:
                try:
                    counters[kv.key] = int(kv.value)
                except ValueError:
                    continue
            with self.record.lock:
                self.record.diagnostics.setdefault(name, []).append((now, counters))


def read_calls(stream: IO[bytes], record: Recorded, ready: threading.Event) -> None:
    """Collect the client process's ``CALL`` lines (see ``keepup_client.py``)."""
    for raw in stream:
        word, *rest = raw.decode(errors="replace").split() or [""]
        if word == "READY":
            ready.set()
        elif word == "CALL":
            try:
                sent, latency, nodes = float(rest[0]), float(rest[1]), int(rest[2])
                if len(rest) != 3 or not math.isfinite(sent):
                    raise ValueError("expected: CALL <sent> <latency or nan> <nodes>")
            except (ValueError, IndexError) as err:
                print(f"  ignoring a line of the client: {raw[:80]!r} ({err})", flush=True)
                continue
            with record.lock:
                record.calls.append((sent, None if math.isnan(latency) else latency, nodes))


# ---------------------------------------------------------------- CPU and load sampling
@dataclass
class Samples:
    """CPU seconds per process and the 1-minute load, sampled every second."""

    times: list[float] = field(default_factory=list)
    cpu: list[dict[str, float | None]] = field(default_factory=list)
    load: list[float] = field(default_factory=list)


def sample_loop(pids: Callable[[], dict[str, int]], samples: Samples, stop: threading.Event
                ) -> None:
    cache: dict[int, Any] = {}
    while True:
        now = time.time()
        cpu = {name: cpu_seconds(pid, cache) for name, pid in pids().items()}
        samples.times.append(now)
        samples.cpu.append(cpu)
        samples.load.append(os.getloadavg()[0])
        if stop.wait(1.0):
            return


# ---------------------------------------------------------------- one run
@dataclass
class Run:
    """Settings and state of one run; everything the report needs."""

    rate: float
    duration: float
    warmup: float
    cameras: list[str]
    folder: Path
    domain: int
    transport: str = "localhost"
    started: float | None = None        # wall time of the feeder's first frame
    stopped: float | None = None        # wall time the stream ended (or was cut short)
    interrupted: str = ""
    record: Recorded = field(default_factory=Recorded)
    samples: Samples = field(default_factory=Samples)
    feeder_summary: dict[str, Any] | None = None
    memory_fs: str = "?"
    memory_mb: float | None = None
    memory_dir: Path | None = None

    @property
    def window(self) -> tuple[float, float] | None:
        """Measured window [start, end) in wall time, shortened when the run was cut."""
        if self.started is None:
            return None
        start = self.started + self.warmup
        end = start + self.duration
        if self.interrupted and self.stopped is not None:
            end = min(end, self.stopped - 2.0)  # the last frames had no time to get through
        return (start, end) if end > start else None


def node_params(params_file: Path, cameras: list[str], memory_dir: Path) -> dict[str, Any]:
    """The two nodes' sections of the deployment file, with the run's changes."""
    data = yaml.safe_load(params_file.read_text()) or {}
    out: dict[str, Any] = {}
    for name in NODES:
        section = dict((data.get(f"/**/{name}") or {}).get("ros__parameters") or {})
        section["use_sim_time"] = False
        out[f"/**/{name}"] = {"ros__parameters": section}
    out["/**/deprojection"]["ros__parameters"]["cameras"] = cameras
    out["/**/scene_graph"]["ros__parameters"]["memory_dir"] = str(memory_dir)
    return out


def read_lines(stream: IO[bytes], lines: queue.Queue[str]) -> None:
    for raw in stream:
        lines.put(raw.decode(errors="replace").strip())
    lines.put("")  # end of output


def wait_for_line(lines: queue.Queue[str], word: str, timeout: float, procs: Processes) -> str:
    """The feeder's next line starting with ``word`` (its other lines are skipped)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        procs.check_alive()
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            continue
        if line.startswith(word):
            return line
        if line == "":
            break
    procs.check_alive()
    raise BenchmarkError(f"the feeder did not say {word} within {timeout:.0f} s")


def wait_until(what: str, ready: Callable[[], bool], timeout: float, procs: Processes) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        procs.check_alive()
        if time.monotonic() > deadline:
            raise NotDiscoveredError(f"{what} did not come up within {timeout:.0f} s")
        time.sleep(0.2)


def start_processes(run: Run, args: argparse.Namespace, procs: Processes) -> queue.Queue[str]:
    """Write the parameter file, start both nodes and the feeder; the feeder's output lines."""
    memory = Path(tempfile.mkdtemp(prefix="mimir_keepup_memory_", dir=args.memory_root))
    run.memory_dir = memory
    run.memory_fs = filesystem_of(memory)
    params = run.folder / "params.yaml"
    params.write_text(yaml.safe_dump(node_params(args.params_file, run.cameras, memory)))
    bin_dir = Path(sys.executable).parent
    for name, script in NODES.items():
        exe = bin_dir / script
        if not exe.exists():
            raise BenchmarkError(f"{exe} is missing; install mimir into this environment")
        procs.start(name, [str(exe), "--ros-args", "--params-file", str(params),
                           "-r", f"__node:={name}"])
    argv = [sys.executable, str(FEEDER), "--rate", str(run.rate),
            "--duration", str(run.warmup + run.duration), "--cameras", ",".join(run.cameras),
            "--data", str(args.data), "--frames", str(args.frames),
            "--depth-encoding", args.depth_encoding,
            "--stamps", str(run.folder / "stamps.txt"),
            "--summary", str(run.folder / "feeder_summary.json")]
    if args.no_color:
        argv.append("--no-color")
    feeder = procs.start("feeder", argv, pipes=True)
    lines: queue.Queue[str] = queue.Queue()
    assert feeder.stdout is not None
    threading.Thread(target=read_lines, args=(feeder.stdout, lines), daemon=True).start()
    return lines


def stream(run: Run, procs: Processes, lines: queue.Queue[str], probe: Probe) -> None:
    """From GO to the feeder's DONE (progress every 30 s), then let the pipeline drain."""
    feeder = procs.procs["feeder"]
    assert feeder.stdin is not None
    feeder.stdin.write(b"GO\n")
    feeder.stdin.flush()
    run.started = float(wait_for_line(lines, "STARTED", 30.0, procs).split()[1])
    watching = run.warmup > 0.0
    total = run.warmup + run.duration
    print(f"  streaming {total:.0f} s ({run.warmup:.0f} s warm-up) ...", flush=True)
    next_note = time.monotonic() + 30.0
    deadline = time.monotonic() + total + 60.0
    while True:
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            line = None
        if line == "DONE":
            break
        if watching and time.time() >= run.started + run.warmup - 0.5:
            probe.stop_watching()
            watching = False
            check_connected(run)
        if line == "" or time.monotonic() > deadline:
            procs.check_alive()
            raise BenchmarkError("the feeder stopped without finishing")
        for name in NODES:
            if procs.procs[name].poll() is not None:
                procs.check_alive()
        if time.monotonic() >= next_note:
            next_note += 30.0
            print("  " + progress(run), flush=True)
    run.stopped = time.time()
    # Drain: frames still in the pipeline get up to 15 s, and stop counting after 2 s of quiet.
    drain_end = time.monotonic() + 15.0
    while time.monotonic() < drain_end:
        with run.record.lock:
            quiet = time.time() - run.record.last_input
        if quiet > 2.0:
            break
        time.sleep(0.2)


def check_connected(run: Run) -> None:
    """After the warm-up: observations reached this process, so they must reach memory too.

    Once in a 10-minute run on this machine, Fast DDS's large-data transport connected the
    deprojection node to this probe and never to the scene graph (the graph stayed empty, at 1 %
    of a core, for the whole run). Such a run measures nothing; it starts again on another
    domain instead.

    Raises:
        NotDiscoveredError: Observation batches arrived here and no memory event did.
    """
    with run.record.lock:
        batches, events = len(run.record.observations), run.record.event_count
        calls = [(nodes, latency) for _, latency, nodes in run.record.calls]
    if batches and not events:
        # whether the node answered tells a missing connection from a stuck node
        answered = [nodes for nodes, latency in calls if latency is not None]
        raise NotDiscoveredError(
            f"the scene graph took none of the {batches} observation batches of the warm-up "
            f"(its get_scene_graph answered {len(answered)} of {len(calls)} calls, "
            f"with {max(answered, default=0)} nodes at most)")


def progress(run: Run) -> str:
    rec = run.record
    with rec.lock:
        batches, events = len(rec.observations), rec.event_count
        calls = list(rec.calls[-20:])
    answered = [c for c in calls if c[1] is not None]
    nodes = answered[-1][2] if answered else -1
    t = time.time() - (run.started or time.time())
    lat = percentiles_ms([c[1] for c in answered if c[1] is not None])
    return (f"t={t:4.0f} s: {batches} observation batches, {events} memory events, graph "
            f"{nodes} nodes, get_scene_graph p95 of the last {len(calls)}: {lat['p95']} ms")


def run_once(run: Run, args: argparse.Namespace) -> None:
    """Start everything, stream, measure; always stops every process. Fills ``run``."""
    logs = run.folder / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, ROS_DOMAIN_ID=str(run.domain), PYTHONUNBUFFERED="1")
    apply_env(env, dds_env(run.transport))
    procs = Processes(logs, env)
    context = Context()
    stop = threading.Event()
    threads: list[threading.Thread] = []
    executor: SingleThreadedExecutor | None = None
    probe: Probe | None = None
    try:
        lines = start_processes(run, args, procs)
        # Ctrl-C and SIGTERM stay with this script, which stops everything in order.
        rclpy.init(context=context, domain_id=run.domain,
                   signal_handler_options=SignalHandlerOptions.NO)
        probe = Probe(context, run.record)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(probe)
        threads.append(threading.Thread(target=executor.spin, daemon=True))
        me = os.getpid()
        threads.append(threading.Thread(
            target=sample_loop, args=(lambda: {**{n: p.pid for n, p in procs.procs.items()},
                                               "measurer": me}, run.samples, stop),
            daemon=True))
        for thread in threads:
            thread.start()
        frames, prep = wait_for_line(lines, "READY", args.prepare_timeout, procs).split()[1:3]
        print(f"  feeder ready: {frames} frames built in {prep} s", flush=True)
        service_ready = threading.Event()
        client = procs.start("client", [sys.executable, str(CLIENT), "--period",
                                        str(SERVICE_PERIOD_S), "--timeout",
                                        str(SERVICE_TIMEOUT_S)], pipes=True)
        assert client.stdout is not None
        threads.append(threading.Thread(target=read_calls, daemon=True,
                                        args=(client.stdout, run.record, service_ready)))
        threads[-1].start()
        wait_until("get_scene_graph", service_ready.is_set, 60.0, procs)
        wait_until("the deprojection node's diagnostics",
                   lambda: "deprojection" in run.record.diagnostics, 60.0, procs)
        if run.warmup > 0.0:
            probe.watch_delivery(run.cameras)
        stream(run, procs, lines, probe)
    except KeyboardInterrupt:
        run.interrupted = "interrupted"
        raise
    except BenchmarkError as err:
        run.interrupted = str(err)
        raise
    finally:
        run.stopped = run.stopped or time.time()
        stop.set()
        procs.stop()
        summary = run.folder / "feeder_summary.json"
        if summary.is_file():
            run.feeder_summary = json.loads(summary.read_text())
        if executor is not None:
            executor.shutdown(timeout_sec=2.0)
        if probe is not None:
            probe.destroy_node()
        rclpy.try_shutdown(context=context)
        for thread in threads:
            thread.join(timeout=3.0)
        release_memory(run, keep=args.keep_memory)


def release_memory(run: Run, *, keep: bool) -> None:
    """Note the size of the run's memory folder, then remove it unless asked to keep it."""
    if run.memory_dir is None or not run.memory_dir.is_dir():
        return
    size = sum(p.stat().st_size for p in run.memory_dir.rglob("*") if p.is_file())
    run.memory_mb = round(size / 1e6, 1)
    if not keep:
        shutil.rmtree(run.memory_dir, ignore_errors=True)


# ---------------------------------------------------------------- analysis
def published_stamps(run: Run) -> dict[str, list[float]]:
    """Stamps the feeder published, per camera (from its stamps file)."""
    out: dict[str, list[float]] = {cam: [] for cam in run.cameras}
    path = run.folder / "stamps.txt"
    if not path.is_file():
        return out
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 2:
            out.setdefault(parts[0], []).append(float(parts[1]))
    return out


def cpu_over(samples: Samples, window: tuple[float, float]) -> dict[str, float | None]:
    """Average CPU % of one core per process between the samples bounding the window."""
    inside = [i for i, t in enumerate(samples.times) if window[0] <= t <= window[1]]
    if len(inside) < 2:
        return {}
    first, last = inside[0], inside[-1]
    span = samples.times[last] - samples.times[first]
    out: dict[str, float | None] = {}
    for name, end in samples.cpu[last].items():
        begin = samples.cpu[first].get(name)
        out[name] = (None if end is None or begin is None
                     else round(100.0 * (end - begin) / span, 1))
    return out


def counters_over(series: list[tuple[float, dict[str, int]]], window: tuple[float, float]
                  ) -> dict[str, int]:
    """Growth of a node's /diagnostics counters over the window (reports nearest its ends)."""
    before = [c for t, c in series if t <= window[0]]
    within = [c for t, c in series if t <= window[1] + 1.5]
    if not within:
        return {}
    start = before[-1] if before else {}
    end = within[-1]
    return {k: v - start.get(k, 0) for k, v in sorted(end.items()) if v - start.get(k, 0)}


def camera_figures(run: Run, stamps: list[float], window: tuple[float, float]) -> dict[str, Any]:
    """Published, processed and latency figures of one camera over the window."""
    rec = run.record
    keys = [(stamp_key(s), s) for s in stamps if window[0] <= s < window[1]]
    to_obs: list[float] = []
    to_graph: list[float] = []
    obs_to_event: list[float] = []
    for key, stamp in keys:
        obs = rec.observations.get(key)
        if obs is not None:
            to_obs.append(obs[1] - stamp)
        last = rec.events_last.get(key)
        if last is not None:
            to_graph.append(last - stamp)
            if obs is not None:
                obs_to_event.append(last - obs[1])
    published = len(keys)
    return {
        "published": published,
        "published_rate_hz": round(published / (window[1] - window[0]), 2),
        "processed": len(to_obs),
        "processed_share": round(len(to_obs) / published, 4) if published else None,
        "with_graph_update": len(to_graph),
        "stamp_to_observation_ms": percentiles_ms(to_obs),
        "stamp_to_graph_ms": percentiles_ms(to_graph),
        "observation_to_event_ms": percentiles_ms(obs_to_event),
        "_to_graph": to_graph,
    }


def by_minute(run: Run, stamps: dict[str, list[float]], window: tuple[float, float]
              ) -> list[dict[str, Any]]:
    """Processed share and stamp -> graph p95 per minute of the window (all cameras)."""
    rec = run.record
    rows = []
    start = window[0]
    while start < window[1]:
        end = min(start + 60.0, window[1])
        keys = [(stamp_key(s), s) for cam in stamps.values() for s in cam if start <= s < end]
        done = sum(1 for k, _ in keys if k in rec.observations)
        graph = [rec.events_last[k] - s for k, s in keys if k in rec.events_last]
        rows.append({"from_s": round(start - window[0]), "published": len(keys),
                     "processed_share": round(done / len(keys), 4) if keys else None,
                     "stamp_to_graph_p95_ms": percentiles_ms(graph)["p95"]})
        start = end
    return rows


def link_check(run: Run, stamps: dict[str, list[float]]) -> dict[str, Any]:
    """How many memory events carry a published stamp (the stamp -> graph link)."""
    published = {stamp_key(s) for cam in stamps.values() for s in cam}
    rec = run.record
    linked = sum(1 for k in rec.events_last if k in published)
    out: dict[str, Any] = {"event_stamps": len(rec.events_last), "linked": linked,
                           "raw_stamp_parsing": rec.raw_events}
    if rec.events_last and not linked:
        # No honest link: fall back to the lag of each event behind the latest batch before it.
        obs_times = sorted(t for _, t, _ in rec.observations.values())
        lags = []
        for t in rec.event_times:
            i = int(np.searchsorted(obs_times, t, side="right"))
            if i:
                lags.append(t - obs_times[i - 1])
        out["note"] = ("memory events carry no published stamp; stamp -> graph is not "
                       "reported, observation receive -> event receive lag instead")
        out["observation_receive_to_event_receive_ms"] = percentiles_ms(lags)
    return out


def delivery_check(run: Run) -> dict[str, Any] | None:
    """Share of the warm-up's segmentation messages that reached the measuring process."""
    rec = run.record
    if run.started is None or rec.watch_until is None or not rec.delivered:
        return None
    # Frames from the last half second before the subscriptions went were still under way.
    start, end = run.started + 1.0, rec.watch_until - 0.5
    stamps = published_stamps(run)
    out: dict[str, Any] = {}
    with rec.lock:
        for cam, got in rec.delivered.items():
            keys = [stamp_key(s) for s in stamps.get(cam, []) if start <= s < end]
            share = sum(1 for k in keys if k in got) / len(keys) if keys else None
            out[cam] = {"published": len(keys), "delivered_share": share}
    return out


def analyse(run: Run) -> dict[str, Any]:
    """Every figure of the run (partial when the run was cut short)."""
    out: dict[str, Any] = {
        "rate_hz": run.rate, "duration_s": run.duration, "warmup_s": run.warmup,
        "cameras": run.cameras, "domain_id": run.domain, "transport": run.transport,
        "folder": str(run.folder),
        "memory_filesystem": run.memory_fs, "memory_folder_mb": run.memory_mb,
        "complete": not run.interrupted,
    }
    if run.interrupted:
        out["stopped_by"] = run.interrupted
    out["transport_check"] = delivery_check(run)
    window = run.window
    if window is None:
        out["note"] = "stopped before the measured window began; nothing to report"
        return out
    out["window_s"] = round(window[1] - window[0], 1)
    stamps = published_stamps(run)
    rec = run.record
    with rec.lock:
        cams = {cam: camera_figures(run, stamps.get(cam, []), window) for cam in run.cameras}
        graph_all = [x for c in cams.values() for x in c.pop("_to_graph")]
        out["per_camera"] = cams
        out["stamp_to_graph_all_ms"] = percentiles_ms(graph_all)
        out["by_minute"] = by_minute(run, stamps, window)
        out["link"] = link_check(run, stamps)
        calls = [c for c in rec.calls if window[0] <= c[0] < window[1]]
        diags = {name: counters_over(series, window)
                 for name, series in rec.diagnostics.items()}
    answered = [c[1] for c in calls if c[1] is not None]
    out["get_scene_graph"] = {
        "calls": len(calls), "timeouts": len(calls) - len(answered),
        "latency_ms": percentiles_ms(answered),
        "graph_nodes_last": next((c[2] for c in reversed(calls) if c[1] is not None), None),
    }
    out["cpu_percent_of_one_core"] = cpu_over(run.samples, window)
    loads = [v for t, v in zip(run.samples.times, run.samples.load, strict=True)
             if window[0] <= t <= window[1]]
    out["load_average"] = {"mean_1min": round(float(np.mean(loads)), 2) if loads else None,
                           "end": [round(v, 2) for v in os.getloadavg()],
                           "cores": os.cpu_count()}
    out["diagnostics_over_window"] = diags
    out["feeder"] = run.feeder_summary
    out["criteria"] = criteria(out)
    return out


def criteria(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The pass criteria against the figures."""
    shares = {cam: c["processed_share"] for cam, c in result["per_camera"].items()}
    worst = min(shares.items(), key=lambda kv: -1.0 if kv[1] is None else kv[1])
    graph_p95 = result["stamp_to_graph_all_ms"]["p95"]
    service_p95 = result["get_scene_graph"]["latency_ms"]["p95"]
    return [
        {"name": f"frames processed per camera >= {MIN_PROCESSED_SHARE:.0%}",
         "value": f"worst {worst[0]} {_pct(worst[1])}",
         "pass": worst[1] is not None and worst[1] >= MIN_PROCESSED_SHARE},
        {"name": f"stamp -> graph p95 <= {MAX_GRAPH_P95_MS:.0f} ms",
         "value": f"{graph_p95} ms", "pass": graph_p95 is not None
         and graph_p95 <= MAX_GRAPH_P95_MS},
        {"name": f"get_scene_graph p95 <= {MAX_SERVICE_P95_MS:.0f} ms",
         "value": f"{service_p95} ms", "pass": service_p95 is not None
         and service_p95 <= MAX_SERVICE_P95_MS},
    ]


# ---------------------------------------------------------------- printing
def _pct(share: float | None) -> str:
    return "n/a" if share is None else f"{100.0 * share:.1f} %"


def _lat(figures: dict[str, Any]) -> str:
    if not figures["n"]:
        return "n/a"
    return f"{figures['p50']:.1f} / {figures['p95']:.1f}"


def print_feeder(result: dict[str, Any]) -> None:
    feed = result.get("feeder")
    cams = result["per_camera"]
    rates = ", ".join(f"{c} {f['published_rate_hz']:.2f}" for c, f in cams.items())
    print(f"feeder: {rates} Hz published in the window (target {result['rate_hz']:g})")
    cpu = result["cpu_percent_of_one_core"].get("feeder")
    if feed and feed.get("lag_ms_p50") is not None:
        print(f"        lag behind schedule p50/p95/max {feed['lag_ms_p50']:.1f} / "
              f"{feed['lag_ms_p95']:.1f} / {feed['lag_ms_max']:.1f} ms (slot "
              f"{feed['slot_ms']:.1f} ms, {feed['late_ticks']} late), publishing one frame "
              f"p50/p95 {feed['publish_ms_p50']:.1f} / {feed['publish_ms_p95']:.1f} ms, busy "
              f"{100 * feed['busy_share']:.0f} %, own CPU {feed['cpu_percent']:.0f} % of a core "
              f"(whole stream)")
    # Whole frames in a finite window: one frame less than the rate allows is not a shortfall.
    expected = 0.98 * result["rate_hz"] * result["window_s"]
    short = [c for c, f in cams.items() if f["published"] + 1 < expected]
    late = bool(feed) and feed["late_ticks"] > 0.05 * sum(feed["published"].values())
    if short or late or (cpu is not None and cpu > 90.0):
        print("        WARNING: the feeder fell behind its rate or used a whole core; it may be "
              "the bottleneck, so the figures below understate what the nodes can do")


def print_transport(result: dict[str, Any]) -> None:
    check = result.get("transport_check")
    if not check:
        return
    shares = [c["delivered_share"] for c in check.values() if c["delivered_share"] is not None]
    print("transport check (warm-up, segmentation messages reaching this process): " + ", ".join(
        f"{cam} {_pct(c['delivered_share'])} of {c['published']}" for cam, c in check.items()))
    if shares and min(shares) < MIN_PROCESSED_SHARE:
        print("        WARNING: DDS loses frames before any node sees them; the processed "
              "shares below are limited by the transport (see --transport)")


def print_report(result: dict[str, Any]) -> None:
    """The table of one run."""
    head = (f"== keep-up at {result['rate_hz']:g} Hz per camera, cameras "
            f"{','.join(result['cameras'])}, 1280x720 ==")
    print("\n" + head)
    print(f"run folder (logs, params, stamps): {result['folder']}   domain {result['domain_id']}"
          f"   memory on {result['memory_filesystem']}, {result['memory_folder_mb']} MB at the end")
    if not result["complete"]:
        print(f"INCOMPLETE: {result.get('stopped_by')}")
    if "per_camera" not in result:
        print(result.get("note", "no figures"))
        return
    print(f"measured window {result['window_s']:.0f} s after {result['warmup_s']:g} s warm-up; "
          f"DDS transport {result['transport']}")
    print_feeder(result)
    print_transport(result)
    diag = result["diagnostics_over_window"].get("deprojection", {})
    print(f"{'camera':8} {'published':>9} {'processed':>9} {'share':>8} {'deproj.count':>12}"
          f"   stamp->obs p50/p95 ms   stamp->graph p50/p95 ms   obs->event p50/p95 ms")
    for cam, fig in result["per_camera"].items():
        print(f"{cam:8} {fig['published']:9d} {fig['processed']:9d} "
              f"{_pct(fig['processed_share']):>8} {diag.get(f'{cam}.frames_published', 0):12d}"
              f"   {_lat(fig['stamp_to_observation_ms']):>21}"
              f"   {_lat(fig['stamp_to_graph_ms']):>23}"
              f"   {_lat(fig['observation_to_event_ms']):>21}")
    print(f"stamp -> graph over all cameras: p50/p95/max "
          f"{_lat(result['stamp_to_graph_all_ms'])} / {result['stamp_to_graph_all_ms']['max']} ms"
          f" (last memory event of each frame; {result['link']['linked']} of "
          f"{result['link']['event_stamps']} event stamps linked to published frames)")
    if "note" in result["link"]:
        print(f"NOTE: {result['link']['note']}: "
              f"{_lat(result['link']['observation_receive_to_event_receive_ms'])} ms")
    svc = result["get_scene_graph"]
    lat = svc["latency_ms"]
    print(f"get_scene_graph: {svc['calls']} calls, p50/p95/max {lat['p50']} / {lat['p95']} / "
          f"{lat['max']} ms, {svc['timeouts']} timeouts ({SERVICE_TIMEOUT_S:g} s); graph "
          f"{svc['graph_nodes_last']} nodes at the end")
    cpu = result["cpu_percent_of_one_core"]
    load = result["load_average"]
    print("CPU, % of one core over the window: "
          + ", ".join(f"{k} {v}" for k, v in cpu.items())
          + f"; load average mean {load['mean_1min']} (end {load['end']}), {load['cores']} cores")
    print_losses(result)
    if len(result["by_minute"]) > 1:
        print("per minute (processed share, stamp->graph p95 ms): " + "  ".join(
            f"{r['from_s']}s {_pct(r['processed_share'])} {r['stamp_to_graph_p95_ms']}"
            for r in result["by_minute"]))
    reference = result["rate_hz"] != CRITERIA_RATE_HZ
    print("criteria" + (f" (set for {CRITERIA_RATE_HZ:g} Hz; shown for reference):"
                        if reference else ":"))
    for c in result["criteria"]:
        print(f"  {'PASS' if c['pass'] else 'FAIL'}  {c['name']:42} {c['value']}")


def print_losses(result: dict[str, Any]) -> None:
    """Drop and skip counters that grew during the window."""
    skip = ("frames_published", "observations", "sync.emitted", "observations_received",
            "observations_stored", "nodes", "revision", "update_node.ok")
    for name, counters in result["diagnostics_over_window"].items():
        # camera_info.stale is routine: the synchroniser keeps one latched info, drops the rest
        losses = {k: v for k, v in counters.items()
                  if not k.endswith(skip) and ".queued." not in k
                  and not k.endswith("camera_info.stale") and v > 0}
        text = ", ".join(f"{k} +{v}" for k, v in losses.items()) or "none"
        print(f"{name} drops/skips during the window: {text}")
    sg = result["diagnostics_over_window"].get("scene_graph", {})
    if sg:
        print(f"scene_graph during the window: observations received "
              f"+{sg.get('observations_received', 0)}, stored "
              f"+{sg.get('observations_stored', 0)}, nodes {sg.get('nodes', 0):+d}")


# ---------------------------------------------------------------- main
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=float, default=None,
                        help="frames per second per camera (default: a 15 Hz run, then 30 Hz)")
    parser.add_argument("--duration", type=float, default=600.0,
                        help="measured seconds of a run (every rate except 30 Hz)")
    parser.add_argument("--duration-30", type=float, default=120.0,
                        help="measured seconds of a 30 Hz run")
    parser.add_argument("--warmup", type=float, default=10.0, help="seconds left out at the start")
    parser.add_argument("--cameras", default="base,pole,wrist")
    parser.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    parser.add_argument("--params-file", type=Path, default=None,
                        help="deployment file whose node sections are used (default mimir.yaml)")
    parser.add_argument("--data", type=Path,
                        default=Path(__file__).resolve().parents[2] / "shared/data/"
                        "sevenscenes_kitchen", help="7-Scenes style recording")
    parser.add_argument("--frames", type=int, default=0,
                        help="use the first N recorded frames (0: all; each is ~6.5 MB in RAM)")
    parser.add_argument("--depth-encoding", choices=("16UC1", "32FC1"), default="16UC1")
    parser.add_argument("--no-color", action="store_true",
                        help="do not publish colour images (nothing here subscribes to them)")
    parser.add_argument("--transport", choices=TRANSPORTS, default="large-data",
                        help="DDS transport set-up (see the module docstring)")
    parser.add_argument("--domain-id", type=int, default=None,
                        help="ROS domain id (default: random in 150..200)")
    parser.add_argument("--memory-root", type=Path, default=None,
                        help="folder for the fresh memory folders (default: the temp dir)")
    parser.add_argument("--keep-memory", action="store_true",
                        help="keep each run's memory folder (removed by default)")
    parser.add_argument("--prepare-timeout", type=float, default=300.0,
                        help="seconds the feeder may take to build its messages")
    args = parser.parse_args(argv)
    args.cameras = [c.strip() for c in args.cameras.split(",") if c.strip()]
    if not args.cameras:
        parser.error("--cameras needs at least one camera")
    if args.rate is not None and args.rate <= 0.0:
        parser.error("--rate must be positive")
    if min(args.duration, args.duration_30) <= 0.0 or args.warmup < 0.0:
        parser.error("durations must be positive and the warm-up not negative")
    if args.params_file is None:
        args.params_file = config_file("mimir.yaml")
    return args


def write_json(path: Path | None, results: list[dict[str, Any]], argv: list[str]) -> None:
    if path is None:
        return
    doc = {"benchmark": "bench_keepup", "argv": argv, "host": platform.node(),
           "cores": os.cpu_count(), "psutil": psutil is not None,
           "criteria": {"rate_hz": CRITERIA_RATE_HZ, "min_processed_share": MIN_PROCESSED_SHARE,
                        "max_stamp_to_graph_p95_ms": MAX_GRAPH_P95_MS,
                        "max_get_scene_graph_p95_ms": MAX_SERVICE_P95_MS},
           "runs": results}
    path.write_text(json.dumps(doc, indent=1, default=str))
    print(f"figures written to {path}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    rates = [args.rate] if args.rate is not None else [15.0, 30.0]
    domain = args.domain_id if args.domain_id is not None else random.randint(150, 200)
    # This process measures on the same isolated domain as its children.
    os.environ["ROS_DOMAIN_ID"] = str(domain)
    apply_env(os.environ, dds_env(args.transport))
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # SIGTERM unwinds like Ctrl-C
    root = Path(tempfile.mkdtemp(prefix="mimir_keepup_"))
    print(f"bench_keepup: rates {', '.join(f'{r:g}' for r in rates)} Hz per camera, cameras "
          f"{','.join(args.cameras)}, ROS domain {domain}, DDS transport {args.transport}, "
          f"files under {root}", flush=True)
    results: list[dict[str, Any]] = []
    status = 0
    for index, rate in enumerate(rates):
        duration = args.duration_30 if rate == 30.0 else args.duration
        # each run on a domain of its own: a run that starts right after the previous one's
        # processes were killed on the same domain sometimes did not discover its nodes
        for attempt in range(DISCOVERY_ATTEMPTS):
            run = Run(rate=rate, duration=duration, warmup=args.warmup, cameras=args.cameras,
                      folder=root / f"rate{rate:g}-{attempt}",
                      domain=domain + index + 10 * attempt, transport=args.transport)
            print(f"\n-- run at {rate:g} Hz: {duration:g} s measured; logs in "
                  f"{run.folder / 'logs'}", flush=True)
            try:
                run_once(run, args)
                break
            except NotDiscoveredError as err:
                if attempt + 1 == DISCOVERY_ATTEMPTS:
                    print(f"\nbenchmark error: {err}")
                    status = 1
                    break
                print(f"  {err}; starting again on another domain")
            except KeyboardInterrupt:
                print("\ninterrupted: every process stopped; figures so far follow")
                status = 130
                break
            except (BenchmarkError, OSError, ValueError) as err:
                print(f"\nbenchmark error: {err}")
                status = 1
                break
        result = analyse(run)
        results.append(result)
        print_report(result)
        write_json(args.out, results, argv)
        if status:
            break
    return 0 if status == 0 else status


if __name__ == "__main__":
    sys.exit(main())
