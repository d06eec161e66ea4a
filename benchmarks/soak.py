"""An hour of the simulation graph at work, its resources sampled every minute (``make soak``).

    python benchmarks/soak.py --runs runs/soak [--minutes 60] [--period 60] [--seed 1000]
        [--profile realistic] [--warmup 10]
    python benchmarks/soak.py --analyse runs/soak          # table and plot again from samples

One ``mimir sim`` run stays up for the whole soak: a generated Locked-and-Unlocked layout
(``--seed``) whose instructions repeat "find the banana", "find the ketchup" round after round.
From the second round on, each round begins with a person swapping the banana and the ketchup
between the two cabinets that open, so memory is wrong at the start of every round and the
robot must look again; the robot returns to its start pose before every instruction. The graph
is not restarted between rounds: memory, perception, the analyzer and the planner live through
the whole hour, as on a robot.

Every ``--period`` seconds the soak records, for every node process and the job itself, the
resident memory (RSS), open file descriptors and threads (from ``/proc``); the size of the
memory databases (with their write-ahead logs), of the keyframe folder and of the rest of the
run folder; the number of memory events stored; the drop counters the nodes report on
``/diagnostics``; and the instructions judged so far. The samples go to ``samples.jsonl`` in
``--runs``; the table to ``summary.md``, the plot to ``soak.png`` (matplotlib, from
requirements.txt).

Pass, per process, after the warm-up (``--warmup`` minutes): RSS grows less than 10 % from the
warm-up sample to the last one; descriptors and threads stay within a small slack of their
warm-up value (``--fd-slack``, ``--thread-slack``); a process that was started again fails, since
its figures no longer continue. The databases pass when the bytes they grew per stored event in
the second half of the judged span lie within a factor two of the first half's (bytes in use
as a reader sees them, not file sizes, which jump with write-ahead log checkpoints). Exit
status 0 when everything passes, 1 otherwise, 2 for a usage error.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from run_files import json_lines, node_pids  # noqa: E402

from mimir.sim_graph import SIM_GRAPH  # noqa: E402 - after the path set-up

NODES = [n.name for n in SIM_GRAPH]
JOB = "mimir_sim_job"
#: Substrings of a /diagnostics counter key that mark an input a node dropped.
DROP_MARKS = ("drop", "queue_full", "overflow", "evicted")
RSS_LIMIT = 0.10


# ---------------------------------------------------------------------------- the scenario
def soak_scenario(rounds: int) -> dict[str, Any]:
    """The Locked-and-Unlocked scenario with ``rounds`` rounds of its two finding instructions;
    from the second round on the banana and the ketchup trade cabinets as each round begins."""
    raw = yaml.safe_load((REPO / "config" / "scenarios" / "locked_unlocked.yaml").read_text())
    banana, ketchup = raw["instructions"]
    raw["name"] = "soak"
    raw["description"] = (f"{rounds} rounds of finding the banana and the ketchup; from the "
                          "second round on they trade cabinets as each round begins.")
    instructions = []
    for r in range(rounds):
        first = dict(banana)
        if r > 0:
            first["start_at"] = "$start"
            swapped = r % 2 == 1
            first["moves"] = [
                {"object": "banana_1", "in": "$sauce" if swapped else "$fruit",
                 "slot": [0.5, 0.55]},
                {"object": "ketchup_1", "in": "$fruit" if swapped else "$sauce",
                 "slot": [0.5, 0.5]},
            ]
        instructions += [first, dict(ketchup)]
    raw["instructions"] = instructions
    return raw


# ---------------------------------------------------------------------------- sampling
def graph_pids() -> dict[str, int]:
    """Pid of every running node process of the graph, by node name."""
    return {name: pids[0] for name in NODES if (pids := node_pids(name))}


def process_figures(pid: int) -> dict[str, int] | None:
    """RSS (KiB), open descriptors and threads of ``pid``; None when it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    return {"pid": pid, "rss_kib": int(fields["VmRSS"].split()[0]), "fds": fds,
            "threads": int(fields["Threads"])}


def folder_bytes(path: Path) -> tuple[int, int]:
    """Total size and number of the files under ``path``."""
    total = count = 0
    if path.is_dir():
        for item in path.rglob("*"):
            try:
                if item.is_file():
                    total += item.stat().st_size
                    count += 1
            except FileNotFoundError:
                continue  # removed while walking
    return total, count


def stored_events(memory: Path) -> int:
    """Memory events in the world and task databases (read-only)."""
    total = 0
    for db in (memory / "world.db", memory / "task.db"):
        if db.is_file():
            try:
                with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5.0) as con:
                    total += con.execute("SELECT COUNT(*) FROM events").fetchone()[0]
            except sqlite3.OperationalError:
                continue  # the table is being made
    return total


def database_bytes(memory: Path) -> int:
    """Bytes the memory databases hold (pages in use, as a reader sees them; the write-ahead
    log's size comes and goes with checkpoints, so file sizes would not track the content)."""
    total = 0
    for db in (memory / "world.db", memory / "task.db", memory / "keyframes" / "keyframes.db"):
        if db.is_file():
            try:
                with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5.0) as con:
                    pages = con.execute("PRAGMA page_count").fetchone()[0]
                    total += pages * con.execute("PRAGMA page_size").fetchone()[0]
            except sqlite3.OperationalError:
                continue  # being made
    return total


def file_bytes(memory: Path) -> int:
    """Bytes of the database files on disk, write-ahead logs included."""
    return sum(p.stat().st_size for p in memory.rglob("*.db*") if p.is_file())


def judged(run: Path) -> tuple[int, int]:
    """Instructions judged so far and how many of them were judged done."""
    results = [e for e in json_lines(run / "trace.jsonl") if e.get("kind") == "result"]
    return len(results), sum(bool(e.get("judged")) for e in results)


class DropCounters:
    """The latest drop counters each node reports on /diagnostics (an rclpy node of its own)."""

    def __init__(self) -> None:
        import rclpy  # noqa: PLC0415 - only the sampling run needs ROS
        from diagnostic_msgs.msg import DiagnosticArray  # noqa: PLC0415
        from rclpy.context import Context  # noqa: PLC0415
        from rclpy.executors import SingleThreadedExecutor  # noqa: PLC0415
        from rclpy.node import Node  # noqa: PLC0415

        self._lock = threading.Lock()
        self.drops: dict[str, int] = {}
        self._context = Context()
        rclpy.init(context=self._context)
        self._node = Node("mimir_soak_sampler", context=self._context)
        self._node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diag, 50)
        self._executor = SingleThreadedExecutor(context=self._context)
        self._executor.add_node(self._node)
        self._thread = threading.Thread(target=self._executor.spin, daemon=True)
        self._thread.start()

    def _on_diag(self, msg: Any) -> None:
        with self._lock:
            for status in msg.status:
                name = status.name.rsplit("/", 1)[-1]
                count = 0
                for kv in status.values:
                    marked = any(mark in kv.key for mark in DROP_MARKS)
                    if marked and kv.value.lstrip("-").isdigit():
                        count += int(kv.value)
                self.drops[name] = count

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self.drops)

    def close(self) -> None:
        self._executor.shutdown()
        self._node.destroy_node()
        self._context.try_shutdown()


def sample(t: float, job_pid: int, run: Path | None, drops: DropCounters | None) -> dict[str, Any]:
    """One sample of everything the soak watches, ``t`` seconds after the start."""
    procs: dict[str, Any] = {}
    for name, pid in {**graph_pids(), JOB: job_pid}.items():
        figures = process_figures(pid)
        if figures is not None:
            procs[name] = figures
    entry: dict[str, Any] = {"minute": round(t / 60.0, 2), "procs": procs}
    if run is not None:
        memory = run / "memory"
        keyframes_bytes, keyframes = folder_bytes(memory / "keyframes")
        run_bytes, _ = folder_bytes(run)
        on_disk = file_bytes(memory)  # every database file, the keyframe index's included
        images = keyframes_bytes - file_bytes(memory / "keyframes")
        total, done = judged(run)
        entry.update(db_bytes=database_bytes(memory), db_file_bytes=on_disk,
                     events=stored_events(memory), keyframe_bytes=images, keyframes=keyframes,
                     other_bytes=run_bytes - images - on_disk, instructions=total, done=done)
    if drops is not None:
        entry["drops"] = drops.snapshot()
    return entry


# ---------------------------------------------------------------------------- verdict
@dataclass
class ProcessVerdict:
    name: str
    rss_start_mib: float
    rss_end_mib: float
    rss_growth: float
    fds: tuple[int, int]
    threads: tuple[int, int]
    restarted: bool
    passed: bool
    why: list[str] = field(default_factory=list)


@dataclass
class SoakVerdict:
    minutes: float
    processes: list[ProcessVerdict]
    bytes_per_event: tuple[float, float] | None
    database_ok: bool
    instructions: int
    done: int
    drops: dict[str, int]

    @property
    def passed(self) -> bool:
        return self.database_ok and all(p.passed for p in self.processes)


def _after(samples: list[dict[str, Any]], warmup_min: float) -> list[dict[str, Any]]:
    later = [s for s in samples if s["minute"] >= warmup_min]
    return later or samples[-1:]


def verdict(samples: list[dict[str, Any]], *, warmup_min: float = 10.0, fd_slack: int = 8,
            thread_slack: int = 4) -> SoakVerdict:
    """Judge the samples: each process after the warm-up, and the databases' growth per event.

    Raises:
        ValueError: no samples.
    """
    if not samples:
        raise ValueError("no samples to judge")
    later = _after(samples, warmup_min)
    names = sorted({n for s in samples for n in s["procs"]})
    rows = []
    for name in names:
        seen = [s["procs"][name] for s in later if name in s["procs"]]
        if not seen:
            rows.append(ProcessVerdict(name, 0.0, 0.0, 0.0, (0, 0), (0, 0), False, False,
                                       ["not running after the warm-up"]))
            continue
        first, last = seen[0], seen[-1]
        restarted = len({p["pid"] for s in samples if name in s["procs"]
                         for p in [s["procs"][name]]}) > 1
        growth = (last["rss_kib"] - first["rss_kib"]) / max(first["rss_kib"], 1)
        fds = (min(p["fds"] for p in seen), max(p["fds"] for p in seen))
        threads = (min(p["threads"] for p in seen), max(p["threads"] for p in seen))
        why = []
        if growth >= RSS_LIMIT:
            why.append(f"RSS grew {growth:.0%}")
        if fds[1] > first["fds"] + fd_slack:
            why.append(f"descriptors rose to {fds[1]} from {first['fds']}")
        if threads[1] > first["threads"] + thread_slack:
            why.append(f"threads rose to {threads[1]} from {first['threads']}")
        if restarted:
            why.append("started again during the soak")
        rows.append(ProcessVerdict(name, first["rss_kib"] / 1024, last["rss_kib"] / 1024,
                                   growth, fds, threads, restarted, not why, why))
    with_db = [s for s in _after(samples, warmup_min) if "events" in s]
    per_event = None
    database_ok = False
    if len(with_db) >= 3:
        mid = with_db[len(with_db) // 2]
        first_half = _slope(with_db[0], mid)
        second_half = _slope(mid, with_db[-1])
        if first_half is not None and second_half is not None:
            per_event = (first_half, second_half)
            database_ok = 0.5 <= second_half / max(first_half, 1e-9) <= 2.0
    final = with_db[-1] if with_db else {}
    return SoakVerdict(samples[-1]["minute"], rows, per_event, database_ok,
                       int(final.get("instructions", 0)), int(final.get("done", 0)),
                       dict(samples[-1].get("drops", {})))


def _slope(a: dict[str, Any], b: dict[str, Any]) -> float | None:
    """Database bytes grown per stored event between two samples (None: no events between)."""
    events = b["events"] - a["events"]
    return (b["db_bytes"] - a["db_bytes"]) / events if events > 0 else None


def table(v: SoakVerdict, warmup_min: float) -> list[str]:
    lines = [f"Soak of {v.minutes:.0f} min; figures from minute {warmup_min:g} (after the "
             f"warm-up) to the end. Instructions judged: {v.instructions} "
             f"({v.done} done).", "",
             "| process | RSS after warm-up (MiB) | RSS at end (MiB) | growth | descriptors "
             "(min-max) | threads (min-max) | pass |",
             "|---|---:|---:|---:|---|---|---|"]
    for p in v.processes:
        lines.append(f"| {p.name} | {p.rss_start_mib:.0f} | {p.rss_end_mib:.0f} | "
                     f"{p.rss_growth:+.1%} | {p.fds[0]}-{p.fds[1]} | {p.threads[0]}-"
                     f"{p.threads[1]} | {'yes' if p.passed else 'NO: ' + '; '.join(p.why)} |")
    lines.append("")
    if v.bytes_per_event is not None:
        a, b = v.bytes_per_event
        judged_db = "proportional (pass)" if v.database_ok else "NOT proportional"
        lines.append(f"Databases: {a:.0f} bytes per stored event in the first half, {b:.0f} in "
                     f"the second: {judged_db}.")
    else:
        lines.append("Databases: too few samples with new events to judge (fail).")
    dropped = {k: n for k, n in sorted(v.drops.items()) if n}
    lines.append("Inputs dropped (node counters on /diagnostics at the end): "
                 + (", ".join(f"{k} {n}" for k, n in dropped.items()) or "none") + ".")
    lines.append(f"Verdict: {'PASS' if v.passed else 'FAIL'}.")
    return lines


def plot(samples: list[dict[str, Any]], path: Path, warmup_min: float) -> bool:
    """RSS, descriptors and threads per process, and the databases against events."""
    import matplotlib  # noqa: PLC0415 - plotting only at the end

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415
    names = sorted({n for s in samples for n in s["procs"]})
    fig, axes = plt.subplots(2, 2, figsize=(12, 8))
    for key, ax, scale, label in (("rss_kib", axes[0][0], 1 / 1024, "RSS (MiB)"),
                                  ("fds", axes[0][1], 1, "open descriptors"),
                                  ("threads", axes[1][0], 1, "threads")):
        for name in names:
            pts = [(s["minute"], s["procs"][name][key] * scale) for s in samples
                   if name in s["procs"]]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], label=name)
        ax.axvline(warmup_min, color="grey", linestyle=":")
        ax.set_xlabel("minute")
        ax.set_ylabel(label)
    axes[0][0].legend(fontsize=7)
    db = [s for s in samples if "events" in s]
    ax = axes[1][1]
    ax.plot([s["events"] for s in db], [s["db_bytes"] / 2**20 for s in db], label="databases")
    ax.plot([s["events"] for s in db], [s["keyframe_bytes"] / 2**20 for s in db],
            label="keyframes")
    ax.set_xlabel("memory events stored")
    ax.set_ylabel("MiB")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def report(folder: Path, warmup_min: float, fd_slack: int, thread_slack: int) -> int:
    path = folder / "samples.jsonl"
    if not path.is_file():
        print(f"no samples in {folder}", file=sys.stderr)
        return 2
    samples = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    v = verdict(samples, warmup_min=warmup_min, fd_slack=fd_slack, thread_slack=thread_slack)
    lines = table(v, warmup_min)
    if plot(samples, folder / "soak.png", warmup_min):
        lines.append(f"Plot: {folder / 'soak.png'}")
    else:
        lines.append("Plot: not drawn (matplotlib is not installed; make soak installs it).")
    (folder / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if v.passed else 1


# ---------------------------------------------------------------------------- the run
def newest_run(root: Path) -> Path | None:
    runs = [p for p in root.glob("soak-*") if (p / "trace.jsonl").is_file()]
    return max(runs, key=lambda p: p.stat().st_mtime) if runs else None


def soak(args: argparse.Namespace) -> int:
    root: Path = args.runs.resolve()
    if root.exists() and any(root.iterdir()):
        print(f"{root} is not empty; give --runs a fresh folder", file=sys.stderr)
        return 2
    root.mkdir(parents=True, exist_ok=True)
    rounds = int(args.minutes) + 5  # an instruction takes well over half a minute
    scenario = root / "soak.yaml"
    scenario.write_text(yaml.safe_dump(soak_scenario(rounds), sort_keys=False))
    env = dict(os.environ, MUJOCO_GL=os.environ.get("MUJOCO_GL", "egl"),
               ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    os.environ.update(ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    mimir = str(Path(sys.executable).parent / "mimir")
    log = (root / "job.log").open("w")
    job = subprocess.Popen([mimir, "sim", "--scenario", str(scenario), "--seed", str(args.seed),
                            "--profile", args.profile, "--runs", str(root),
                            "--instruction-timeout", "900", "--quiet"],
                           env=env, stdout=log, stderr=subprocess.STDOUT)
    drops = DropCounters()
    started = time.monotonic()
    end = started + args.minutes * 60.0
    samples = (root / "samples.jsonl").open("w")
    ended = ""
    try:
        while True:
            now = time.monotonic()
            entry = sample(now - started, job.pid, newest_run(root), drops)
            samples.write(json.dumps(entry) + "\n")
            samples.flush()
            print(f"minute {entry['minute']:5.1f}: {len(entry['procs'])} processes, "
                  f"{entry.get('events', 0)} events, {entry.get('instructions', 0)} "
                  f"instructions judged", file=sys.stderr, flush=True)
            if job.poll() is not None:
                ended = f"the job ended by itself at minute {entry['minute']:.1f} " \
                        f"(exit status {job.returncode}); see {root / 'job.log'}"
                break
            if now >= end:
                break
            time.sleep(max(0.0, min(args.period, end - time.monotonic())))
    finally:
        samples.close()
        if job.poll() is None:
            job.send_signal(signal.SIGTERM)
            try:
                job.wait(timeout=60)
            except subprocess.TimeoutExpired:
                job.kill()
        drops.close()
        log.close()
    status = report(root, args.warmup, args.fd_slack, args.thread_slack)
    if ended:
        print(f"NOTE: {ended}")
        return 1
    return status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, help="fresh folder for the run and the samples")
    parser.add_argument("--analyse", type=Path, metavar="FOLDER",
                        help="only judge and plot the samples.jsonl of an earlier soak")
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--period", type=float, default=60.0, help="seconds between samples")
    parser.add_argument("--seed", type=int, default=1000, help="layout seed")
    parser.add_argument("--profile", default="realistic", help="noise profile of the run")
    parser.add_argument("--warmup", type=float, default=10.0, help="minutes before judging")
    parser.add_argument("--fd-slack", type=int, default=8)
    parser.add_argument("--thread-slack", type=int, default=4)
    args = parser.parse_args(argv)
    if args.analyse is not None:
        return report(args.analyse, args.warmup, args.fd_slack, args.thread_slack)
    if args.runs is None:
        parser.error("give --runs (or --analyse)")
    if not (args.minutes > 0 and args.period > 0 and args.warmup >= 0):
        parser.error("--minutes and --period must be positive, --warmup not negative")
    return soak(args)


if __name__ == "__main__":
    sys.exit(main())
