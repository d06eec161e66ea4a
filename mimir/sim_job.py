"""``mimir sim``: run a kitchen scenario through the whole node graph over real ROS 2 topics.

The job starts every node as its own process (simulation bridge, deprojection, scene graph,
keyframes, analyzer, planner) with a parameter file written into the run folder, then plays the
scenario's instructions one at a time through the planner's ``run_task`` action. It prints each
planning step, each primitive and its outcome, and each memory update with its verdict; it asks
the bridge to judge every instruction from simulator state; and it writes a run folder:

    runs/<scenario>-<time>/
        params.yaml      parameters given to the nodes
        memory/          world.db, task.db, keyframes/ (the robot's memory after the run)
        logs/<node>.log  each node's output
        robot_trace.jsonl every target the executor streamed and the state the robot reported
        trace.jsonl      everything printed, as JSON lines
        report.md        task progress, steps, memory figures

``ros2 launch mimir sim.launch.py`` starts the same graph on a ROS 2 installation.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import resource
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import yaml

from mimir.paths import ConfigFileNotFoundError, config_file
from mimir.signals import handling
from mimir.sim_graph import (
    SIM_GRAPH,
    SIM_PARAMS_FILE,
    GraphNode,
    graph_parameters,
    section_key,
)
from mimir.sim_report import InstructionReport, SimJobError
from mimir.version import code_version

#: Nodes of the simulation graph: (console script, node name), from :data:`SIM_GRAPH`.
SIM_NODES: tuple[tuple[str, str], ...] = tuple((n.executable, n.name) for n in SIM_GRAPH)


#: Reasoning backends the analyzer and the planner accept.
VLM_BACKENDS: tuple[str, ...] = ("offline", "openai", "transformers")


@dataclass(frozen=True)
class SimJobOptions:
    """What ``mimir sim`` was asked to do."""

    scenario: str = "locked_unlocked"
    vlm_backend: str = "offline"
    run_root: Path = Path("runs")
    seed: int = -1
    step_budget: int = 12
    instruction_timeout_s: float = 600.0
    startup_timeout_s: float = 120.0
    params_file: str = ""
    extra_params: dict[str, dict[str, Any]] = field(default_factory=dict)
    quiet: bool = False
    reasoner_faults: float = 0.0
    fault_seed: int = 0
    verifiers_off: str = ""
    hold_s: float = 0.0
    tidybot_dir: str = ""
    noise_profile: str = "realistic"
    noise_scale: float = 1.0
    run_name: str = ""
    in_process: bool = False



def load_scenario_instructions(scenario: str, seed: int = -1) -> list[str]:
    """The instruction texts of a scenario (name or path) in the order the layout of ``seed``
    plays them (a negative seed: the scenario's own), read with the simulation's loader."""
    from mimir_sim.layouts import generate_layout  # noqa: PLC0415 - heavy import, job only
    from mimir_sim.scenario import load_scenario  # noqa: PLC0415

    loaded = load_scenario(scenario)
    layout = generate_layout(loaded, seed) if seed >= 0 else loaded
    return [item.text for item in layout.instructions]


def check_options(options: SimJobOptions) -> None:
    """Refuse option values the job cannot run with.

    Raises:
        SimJobError: an empty scenario, an unknown backend, a limit that is not positive, or a
            run name that leaves the run root.
    """
    if not options.scenario.strip():
        raise SimJobError("--scenario is empty",
                          "give a scenario name from config/scenarios or a scenario file")
    if options.vlm_backend not in VLM_BACKENDS:
        raise SimJobError(f"unknown reasoning backend {options.vlm_backend!r}",
                          f"give --vlm one of {', '.join(VLM_BACKENDS)}")
    if options.step_budget < 1:
        raise SimJobError(f"--step-budget must be at least 1, got {options.step_budget}",
                          "give the number of planner calls allowed per instruction")
    if not (math.isfinite(options.reasoner_faults) and 0.0 <= options.reasoner_faults <= 1.0):
        raise SimJobError(f"--reasoner-faults must lie in [0, 1], got {options.reasoner_faults}",
                          "give the share of reasoner answers to corrupt")
    if not (math.isfinite(options.hold_s) and options.hold_s >= 0.0):
        raise SimJobError(f"--hold must be a non-negative number of seconds, got "
                          f"{options.hold_s}", "give how long to keep the graph up after the run")
    if options.in_process and options.hold_s > 0.0:
        raise SimJobError("--hold needs the node graph; an in-process run has none to keep up",
                          "leave out --in-process or --hold")
    if options.in_process and options.vlm_backend != "offline":
        raise SimJobError("an in-process run plans and analyses with the offline reasoner only",
                          "leave out --in-process to use a model server")
    name = Path(options.run_name)
    if options.run_name and (name.is_absolute() or ".." in name.parts):
        raise SimJobError(f"the run name {options.run_name!r} must be a folder name inside "
                          "--runs", "give a relative name without '..'")
    noise_profile(options)
    limits = (("--instruction-timeout", options.instruction_timeout_s),
              ("the start-up timeout", options.startup_timeout_s))
    for what, value in limits:
        if not (math.isfinite(value) and value > 0.0):
            raise SimJobError(f"{what} must be a positive number of seconds, got {value}",
                              "give a wall-clock limit above zero")


def noise_profile(options: SimJobOptions) -> dict[str, Any]:
    """The summary of the run's noise profile (name, scale, every term), checked before any node
    starts so a bad ``--profile`` or ``--noise-scale`` is one clear line."""
    from mimir_sim.noise import NoiseProfileError, load_noise_profile  # noqa: PLC0415 - job only

    try:
        return load_noise_profile(options.noise_profile, options.noise_scale).summary()
    except NoiseProfileError as err:
        raise SimJobError(str(err), "give --profile ideal, realistic or a profile YAML path, and "
                          "--noise-scale a number >= 0") from err


def layout_seed(options: SimJobOptions) -> int:
    """The layout seed the run uses: ``--seed``, or the scenario's own when it is negative."""
    if options.seed >= 0:
        return options.seed
    from mimir_sim.scenario import load_scenario  # noqa: PLC0415 - heavy import, job only

    return load_scenario(options.scenario).seed


def robot_model(tidybot_dir: str) -> tuple[Path, str]:
    """The robot MJCF the bridge will load and where it came from (``--tidybot-dir`` or
    mujoco-menagerie), resolved before any node starts so a missing model is one clear line."""
    from mimir_sim.errors import ModelDirError  # noqa: PLC0415 - job only
    from mimir_sim.robot_model import resolve_robot_model  # noqa: PLC0415

    try:
        model = resolve_robot_model(tidybot_dir or None)
    except ModelDirError as err:
        raise SimJobError(str(err), "see README 'The main job' for the robot model") from err
    return model.xml, model.source


def scenario_instructions(scenario: str, seed: int = -1) -> list[str]:
    """:func:`load_scenario_instructions`, with a missing or invalid scenario as a SimJobError."""
    from mimir_sim.errors import ScenarioError, UnknownScenarioError  # noqa: PLC0415 - job only

    try:
        instructions = load_scenario_instructions(scenario, seed)
    except UnknownScenarioError as err:
        raise SimJobError(str(err), "give --scenario one of the available names or the path of "
                          "a scenario YAML file") from err
    except ScenarioError as err:
        raise SimJobError(f"scenario {scenario!r} is invalid: {err}",
                          "fix the scenario file or choose another scenario") from err
    if not instructions:
        raise SimJobError(f"scenario {scenario!r} has no instructions",
                          "add instructions to the scenario file or choose another scenario")
    return instructions


def _yaml_problem(err: Exception) -> str:
    """A YAML parse error in one line: what is wrong and where."""
    if isinstance(err, yaml.MarkedYAMLError) and err.problem:
        mark = err.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        return f"{err.problem}{where}"
    return " ".join(str(err).split())


def robot_link() -> dict[str, Any]:
    """A robot link of this run's own: two free localhost ports and a fresh secret.

    Runs side by side (tests, evaluation) must not reach each other's simulated robot.
    """
    ports = []
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(2)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
            ports.append(int(sock.getsockname()[1]))
    finally:
        for sock in sockets:
            sock.close()
    return {"base_port": ports[0], "arm_port": ports[1], "authkey": secrets.token_hex(16)}


def sim_params(options: SimJobOptions, run_dir: Path) -> dict[str, Any]:
    """The run's node parameters: the installed (or given) sim parameters plus this run's choices.

    Sections are keyed ``/**/<node>`` as in the installed file; a file keyed by bare node names
    is read the same way (its sections are moved under ``/**/<node>``). The per-node choices of
    the graph (:func:`mimir.sim_graph.graph_parameters`) go over the file, then ``extra_params``.
    Nothing is written; ``run_dir`` only sets where the nodes keep their memory.

    Raises:
        SimJobError: the parameter file is missing, unreadable, not YAML, or not shaped as
            ``/**/<node>: {ros__parameters: {...}}``.
    """
    hint = ("give --params-file an existing, readable YAML file, or leave it out to use the "
            f"installed {SIM_PARAMS_FILE}")
    try:
        source = config_file(SIM_PARAMS_FILE, options.params_file)
    except ConfigFileNotFoundError as err:
        if options.params_file:
            missing = Path(options.params_file).expanduser()
            raise SimJobError(f"parameter file not found: {missing}", hint) from err
        raise SimJobError(str(err), "reinstall mimir or give --params-file") from err
    try:
        data = yaml.safe_load(source.read_text()) or {}
    except OSError as err:
        raise SimJobError(f"cannot read the parameter file {source}: {err.strerror or err}",
                          hint) from err
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise SimJobError(f"the parameter file {source} is not valid YAML: {_yaml_problem(err)}",
                          hint) from err
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise SimJobError(f"the parameter file {source} does not map node names to "
                          "{ros__parameters: {...}}", hint)
    names = [n.name for n in SIM_GRAPH] + list(options.extra_params)
    for name in names:
        key = section_key(name)
        if name in data and key not in data:
            data[key] = data.pop(name)
        entry = data.setdefault(key, {})
        if not isinstance(entry, dict) or not isinstance(
                entry.setdefault("ros__parameters", {}), dict):
            raise SimJobError(f"the parameter file {source}: entry {key!r} is not of the form "
                              "{ros__parameters: {...}}", hint)
    memory_dir = str((run_dir / "memory").resolve())
    link = robot_link()
    for node in SIM_GRAPH:
        section = data[section_key(node.name)]["ros__parameters"]
        section.update(graph_parameters(node, memory_dir=memory_dir, use_sim_time=True,
                                        scenario=options.scenario,
                                        vlm_backend=options.vlm_backend, **link))
    data[section_key("executor")]["ros__parameters"]["trace_file"] = str(
        (run_dir / "robot_trace.jsonl").resolve())
    bridge = data[section_key("sim_bridge")]["ros__parameters"]
    bridge.update(seed=options.seed, noise_profile=options.noise_profile,
                  noise_scale=float(options.noise_scale),
                  localisation_file=str((run_dir / "localisation.json").resolve()),
                  unstable_state_file=str((run_dir / "physics_unstable.npz").resolve()))
    data[section_key("planner")]["ros__parameters"]["step_budget"] = options.step_budget
    data[section_key("sim_bridge")]["ros__parameters"]["audit_file"] = str(
        (run_dir / "audit.jsonl").resolve())
    data[section_key("analyzer")]["ros__parameters"].update(
        reasoner_faults=float(options.reasoner_faults), reasoner_fault_seed=options.fault_seed,
        fault_log=str((run_dir / "reasoner_faults.jsonl").resolve()),
        evidence_log=str((run_dir / "analyzer_evidence.jsonl").resolve()),
        verifiers_off=options.verifiers_off)
    for name, values in options.extra_params.items():
        data[section_key(name)]["ros__parameters"].update(values)
    return data


def with_robot_model(params: dict[str, Any], model_xml: Path) -> dict[str, Any]:
    """Give the resolved robot model to the node(s) of the graph that take it; ``params``."""
    for entry in SIM_GRAPH:
        if "tidybot_dir" in entry.optional:
            params[section_key(entry.name)]["ros__parameters"]["tidybot_dir"] = str(model_xml)
    return params


def exit_on_termination() -> contextlib.AbstractContextManager[None]:
    """Turn SIGTERM and SIGHUP into ``SystemExit`` while the block runs.

    Python's default for SIGTERM ends the process without running ``finally`` blocks, which
    would leave the node processes (each in its own session) running. Only the main thread
    can install handlers; elsewhere the block runs unchanged.
    """

    def _exit(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    return handling((signal.SIGTERM, signal.SIGHUP), _exit)


#: How long a node may take to stop after SIGINT before it is killed (s).
STOP_WAIT_S = 10.0


class NodeProcesses:
    """The node processes of one run; restarts one that dies; stops them all on exit.

    Args:
        run_dir: the run folder (``logs/<name>.log`` per node).
        params: the run's parameter file.
        graph: the nodes to run (default: :data:`SIM_GRAPH`).
        bin_dir: where their console scripts lie (default: beside this Python).
        restarts: how often one node may be started again in a run.
        restart_delay_s: how long after a death it is started again (as launch's respawn).
        on_restart: told ``(name, attempt, exit status)`` when a node is started again.
    """

    def __init__(self, run_dir: Path, params: Path, *, graph: tuple[GraphNode, ...] = SIM_GRAPH,
                 bin_dir: Path | None = None, restarts: int = 3, restart_delay_s: float = 2.0,
                 on_restart: Callable[[str, int, int], None] | None = None) -> None:
        self._run_dir = run_dir
        self._params = params
        self._graph = {node.name: node for node in graph}
        self._bin = bin_dir or Path(sys.executable).parent
        self._max_restarts = restarts
        self._delay = restart_delay_s
        self._on_restart = on_restart
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.restarts: dict[str, int] = {}
        self._died_at: dict[str, float] = {}
        self._logs: list[TextIO] = []

    def start(self) -> None:
        (self._run_dir / "logs").mkdir(parents=True, exist_ok=True)
        for name in self._graph:
            self._launch(name)

    def _launch(self, name: str, *, append: bool = False) -> None:
        script = self._graph[name].executable
        exe = self._bin / script
        hint = "install mimir's console scripts into this environment (scripts/setup.sh)"
        if not exe.exists():
            raise SimJobError(f"node executable {script} is missing beside {sys.executable}",
                              hint)
        path = self._run_dir / "logs" / f"{name}.log"
        log = path.open("a") if append else path.open("w")  # closed in stop()
        self._logs.append(log)
        try:
            self.procs[name] = subprocess.Popen(
                [str(exe), "--ros-args", "-r", f"__node:={name}", "--params-file",
                 str(self._params)],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )
        except OSError as err:
            raise SimJobError(f"cannot start {exe}: {err.strerror or err}", hint) from err

    def dead(self) -> list[str]:
        """Names of nodes that have exited."""
        return [name for name, proc in self.procs.items() if proc.poll() is not None]

    def supervise(self) -> list[str]:
        """Start again, ``restart_delay_s`` after it died, a restartable node that has exited
        (at most ``restarts`` times each); the names of nodes that are dead for good."""
        gone: list[str] = []
        now = time.monotonic()
        for name in self.dead():
            used = self.restarts.get(name, 0)
            if not self._graph[name].restartable or used >= self._max_restarts:
                gone.append(name)
                continue
            died = self._died_at.setdefault(name, now)
            if now - died < self._delay:
                continue
            status = self.procs[name].returncode
            del self._died_at[name]
            self.restarts[name] = used + 1
            self._launch(name, append=True)
            if self._on_restart is not None:
                self._on_restart(name, used + 1, status)
        return gone

    def log_tail(self, name: str, lines: int = 15) -> str:
        path = self._run_dir / "logs" / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """Stops the nodes with SIGINT (SIGKILL for one still running after ``STOP_WAIT_S``):
        first those that follow the clock, then its owner, the bridge. On a robot the robot
        outlives the software; stopping the simulated one with its clients had the executor
        report a lost robot link at the end of every run, and its clients lose /clock."""
        waves = ([n for n in self.procs if self._graph[n].follows_clock],
                 [n for n in self.procs if not self._graph[n].follows_clock])
        for wave in waves:
            procs = [self.procs[name] for name in wave]
            for proc in procs:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGINT)
            deadline = time.monotonic() + STOP_WAIT_S
            for proc in procs:
                try:
                    proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=5.0)
        for log in self._logs:
            log.close()


def children_cpu_s() -> float:
    """CPU time (user and system, s) spent by the child processes of this process that have
    ended and been waited for (``getrusage(RUSAGE_CHILDREN)``). The difference across a run,
    once its node processes are stopped, is what the node graph cost; a node started again
    counts with every life it had."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class Trace:
    """Prints lines for the user and writes the same records to trace.jsonl."""

    def __init__(self, path: Path, quiet: bool, out: Callable[[str], None] = print) -> None:
        self._file = path.open("w")
        self._quiet = quiet
        self._out = out
        self._lock = threading.Lock()
        self._start = time.monotonic()

    def record(self, kind: str, text: str, *, echo: bool = True, **data: Any) -> None:
        """Write one record to trace.jsonl; also print it unless quiet or ``echo`` is False."""
        with self._lock:
            entry = {"t": round(time.monotonic() - self._start, 3), "kind": kind, "text": text,
                     **data}
            self._file.write(json.dumps(entry, default=str) + "\n")
            self._file.flush()
            if echo and not self._quiet:
                self._out(text)

    def close(self) -> None:
        self._file.close()


def run_sim_job(options: SimJobOptions, argv_echo: Sequence[str] = ()) -> int:
    """Run the job; returns the process exit status (0 when every instruction was judged done).

    The options, the scenario and the parameter file are checked before the run folder is
    made, so a mistake there leaves nothing behind. A run that fails before any node process
    started removes the run folder it made.

    Raises:
        SimJobError: a user error (bad option, unknown scenario, unusable parameter file), a
            run folder that cannot be made, or a run that failed (a node died, a timeout); its
            ``hint`` says what to do. The run folder of a failed run keeps the node logs.
    """
    from mimir.sim_client import SimClient  # noqa: PLC0415 - imports rclpy

    check_options(options)
    instructions = scenario_instructions(options.scenario, options.seed)
    model_xml, model_source = robot_model(options.tidybot_dir)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    scenario_name = Path(options.scenario).stem
    run_dir = (options.run_root / (options.run_name or f"{scenario_name}-{stamp}")).resolve()
    param_data = sim_params(options, run_dir)
    with_robot_model(param_data, model_xml)
    made_run_dir = not run_dir.exists()
    try:
        (run_dir / "memory").mkdir(parents=True, exist_ok=True)
        params = run_dir / "params.yaml"
        params.write_text(yaml.safe_dump(param_data, sort_keys=True))
        trace = Trace(run_dir / "trace.jsonl", options.quiet)
    except OSError as err:
        if made_run_dir:
            _remove_unused_run_folder(run_dir)
        raise SimJobError(f"cannot create the run folder {run_dir}: {err.strerror or err}",
                          "give --runs a folder this user can write") from err
    trace.record("start", f"mimir sim: scenario {scenario_name}, reasoning backend "
                 f"{options.vlm_backend}, run folder {run_dir}", argv=list(argv_echo))
    trace.record("start", f"robot model {model_xml} ({model_source})")
    trace.record("start", f"layout seed {layout_seed(options)}; noise profile "
                 f"{options.noise_profile} at scale {options.noise_scale:g}")
    if options.in_process:
        return _run_in_process(options, run_dir, param_data, trace, instructions,
                               made_run_dir=made_run_dir)
    nodes = NodeProcesses(run_dir, params, on_restart=lambda name, attempt, status: trace.record(
        "restart", f"node {name} exited ({status}); started again (restart {attempt})",
        node=name, attempt=attempt, status=status))
    reports: list[InstructionReport] = []
    failure: SimJobError | None = None
    started = time.monotonic()
    cpu_before = children_cpu_s()
    # a SIGTERM must still stop the node processes in the finally block below
    with exit_on_termination():
        try:
            nodes.start()
            with SimClient(trace, nodes.supervise,
                           lambda name: nodes.restarts.get(name, 0)) as client:
                client.wait_ready(options.startup_timeout_s)
                (run_dir / "graph.json").write_text(json.dumps(client.graph_snapshot(),
                                                               indent=1, sort_keys=True))
                for index, text in enumerate(instructions):
                    report = client.run_instruction(index, text, options.step_budget,
                                                    options.instruction_timeout_s)
                    reports.append(report)
                figures = client.memory_figures()
                if options.hold_s > 0.0:
                    client.hold(options.hold_s)
        except SimJobError as err:
            failure = err
            # the command line prints the error itself; the trace keeps it with the log tails
            trace.record("error", f"error: {err}", echo=False)
            for name in nodes.dead():
                trace.record("error", f"--- {name} log ---\n{nodes.log_tail(name)}")
        finally:
            nodes.stop()
    if failure is not None:
        trace.close()
        if nodes.procs:
            failure.hint = failure.hint or f"see the node logs in {run_dir / 'logs'}"
        elif made_run_dir:
            _remove_unused_run_folder(run_dir)
        raise failure
    wall = time.monotonic() - started
    summary = write_report(run_dir, scenario_name, options, reports=reports, figures=figures,
                           wall=wall, cpu=children_cpu_s() - cpu_before)
    trace.record("summary", summary)
    trace.record("summary", f"look at what memory learned: mimir inspect {run_dir}")
    trace.close()
    return 0 if reports and all(r.success for r in reports) else 1


def _run_in_process(options: SimJobOptions, run_dir: Path, params: dict[str, Any], trace: Trace,
                    instructions: list[str], *, made_run_dir: bool) -> int:
    """The run in one process, in simulation time (:mod:`mimir.sim_inprocess`); the same
    report, results and trace as the node mode's."""
    from mimir import sim_inprocess as inproc  # noqa: PLC0415 - loads the simulator and cores
    from mimir_sim.errors import PhysicsUnstableError  # noqa: PLC0415

    trace.record("start", "in-process run: one process, simulation time (no DDS, no RPC)")
    started = time.monotonic()
    cpu_before = inproc.process_cpu_s()
    try:
        run = inproc.InProcessRun(run_dir, params, trace)
    except SimJobError as err:
        trace.record("error", f"error: {err}", echo=False)
        trace.close()
        if made_run_dir:
            _remove_unused_run_folder(run_dir)
        raise
    try:
        with exit_on_termination():
            try:
                run.start()
                reports = inproc.run_instructions(run, instructions, options.step_budget,
                                                  options.instruction_timeout_s)
            except PhysicsUnstableError as err:
                raise inproc.physics_failure(run, err) from err
            figures = inproc.memory_figures(run)
    except SimJobError as err:
        trace.record("error", f"error: {err}", echo=False)
        trace.close()
        raise
    finally:
        run.close()
    wall = time.monotonic() - started
    summary = write_report(run_dir, Path(options.scenario).stem, options, reports=reports,
                           figures=figures, wall=wall,
                           cpu=inproc.process_cpu_s() - cpu_before)
    trace.record("summary", summary)
    trace.record("summary", f"look at what memory learned: mimir inspect {run_dir}")
    trace.close()
    return 0 if reports and all(r.success for r in reports) else 1


def _remove_unused_run_folder(run_dir: Path) -> None:
    """Remove a run folder in which no node ever ran: only the files the job itself made.

    Anything else found there is left in place, together with the folders that hold it.
    """
    made = [run_dir / "params.yaml", run_dir / "trace.jsonl"]
    made += [run_dir / "logs" / f"{name}.log" for _, name in SIM_NODES]
    for path in made:
        with contextlib.suppress(OSError):
            if path.is_file() and (path.parent.name != "logs" or path.stat().st_size == 0):
                path.unlink()
    for folder in (run_dir / "logs", run_dir / "memory", run_dir):
        with contextlib.suppress(OSError):
            folder.rmdir()  # only succeeds when empty


def audit_lines(run_dir: Path) -> list[str]:
    """The report's harness audit: memory's verdicts graded by the judge, and reasoner faults.

    Also writes ``audit_summary.json`` beside ``audit.jsonl`` for evaluations to read.
    """
    from mimir_sim.audit import summarize  # noqa: PLC0415 - the judge's module, job only

    grades = _json_lines(run_dir / "audit.jsonl")
    faults = _json_lines(run_dir / "reasoner_faults.jsonl")
    audit = summarize(grades)
    refutable = sum(bool(f.get("refutable")) for f in faults)
    summary = {**dataclasses.asdict(audit), "wrong_admitted_rate": audit.wrong_admitted_rate,
               "true_held_rate": audit.true_held_rate, "faults": len(faults),
               "refutable_faults": refutable}
    (run_dir / "audit_summary.json").write_text(json.dumps(summary, indent=1))
    return [
        "Harness audit (memory's verdicts graded against simulator truth by the judge):",
        f"- facts admitted: {audit.admitted}, of which wrong: {audit.wrong_admitted} "
        f"({audit.wrong_admitted_rate:.0%})",
        f"- true facts: {audit.true_facts}, of which left deferred or rejected: "
        f"{audit.true_held} ({audit.true_held_rate:.0%})",
        f"- facts that could not be graded: {audit.ungraded}",
        f"- reasoner faults injected: {len(faults)} ({refutable} refutable, "
        f"{len(faults) - refutable} not refutable)",
    ]


def localisation_line(run_dir: Path) -> str:
    """The report's line on localisation: the judge's comparison with simulator truth."""
    path = run_dir / "localisation.json"
    if not path.is_file():
        return "Localisation error against simulator truth: not measured (no localisation.json)"
    data = json.loads(path.read_text())
    if not data.get("samples"):
        return ("Localisation error against simulator truth: no sample (the robot was never "
                "localised while standing still)")
    return (f"Localisation error against simulator truth (base standing still, "
            f"{data['samples']} samples): mean {100 * data['mean_m']:.1f} cm, p95 "
            f"{100 * data['p95_m']:.1f} cm, max {100 * data['max_m']:.1f} cm; yaw mean "
            f"{data['mean_yaw_deg']:.2f} deg, max {data['max_yaw_deg']:.2f} deg")


def _json_lines(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_report(run_dir: Path, scenario: str, options: SimJobOptions, *,
                 reports: list[InstructionReport], figures: dict[str, Any], wall: float,
                 cpu: float | None = None) -> str:
    """Write report.md and return its text (``cpu``: core-seconds the node processes used)."""
    done = sum(r.success for r in reports)
    progress = done / len(reports) if reports else 0.0
    lines = [
        f"# mimir sim: {scenario}",
        "",
        f"Reasoning backend: {options.vlm_backend}"
        + (" (offline reasoner: answers derived from mechanical evidence, no model)"
           if options.vlm_backend == "offline" else ""),
        f"Task progress (judged from simulator state): {done}/{len(reports)} = {progress:.0%}",
        f"Planner steps: {sum(r.steps for r in reports)}; wall time {wall:.0f} s"
        + (f"; CPU of the {'run' if options.in_process else 'node processes'} {cpu:.0f} core-s "
           f"({cpu / wall:.2f} cores on average)"
           if cpu is not None and wall > 0 else ""),
        f"Layout seed: {layout_seed(options)}; noise profile: {options.noise_profile} at scale "
        f"{options.noise_scale:g}",
        "",
        "| # | instruction | judged | steps | primitives | answer |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in reports:
        lines.append(f"| {r.index + 1} | {r.instruction} | {'done' if r.success else 'FAILED'}"
                     f" | {r.steps} | {', '.join(r.primitives)} | {r.answer} |")
    lines += ["", "Memory after the run:"]
    lines += [f"- {key}: {value}" for key, value in figures.items()]
    lines += ["", localisation_line(run_dir)]
    lines += ["", *audit_lines(run_dir)]
    text = "\n".join(lines) + "\n"
    (run_dir / "report.md").write_text(text)
    write_results(run_dir, scenario, options, reports=reports, figures=figures, wall=wall,
                  cpu=cpu)
    return text


#: Version of ``results.json``; evaluations refuse another.
RESULTS_VERSION = 1


def write_results(run_dir: Path, scenario: str, options: SimJobOptions, *,
                  reports: list[InstructionReport], figures: dict[str, Any],
                  wall: float, cpu: float | None = None) -> None:
    """Write ``results.json``: the run's judged instructions and figures, for evaluations
    (``cpu_s``: core-seconds the node processes used, null when not measured)."""
    data = {
        "version": RESULTS_VERSION,
        "code_version": code_version(),
        "scenario": scenario,
        "seed": layout_seed(options),
        "vlm_backend": options.vlm_backend,
        "noise_profile": options.noise_profile,
        "noise_scale": options.noise_scale,
        "step_budget": options.step_budget,
        "verifiers_off": options.verifiers_off,
        "extra_params": options.extra_params,
        "wall_s": wall,
        "cpu_s": cpu,
        "figures": figures,
        "instructions": [dataclasses.asdict(r) for r in reports],
    }
    (run_dir / "results.json").write_text(json.dumps(data, indent=1, sort_keys=True))
