"""The ``mimir`` command line: one entry point for what a user runs.

Subcommands:
    sim          run a kitchen scenario in simulation through the whole node graph (main job)
    doctor       check the installation (ROS 2 middleware, interfaces, optional drivers, models);
                 with --robot, the pre-flight before a robot's first move
    interfaces   list mimir's messages, services and actions with their fields
    approve      operator gate: approve or deny the primitives waiting for approval
    memory       check a memory folder, or repair events that do not apply

A mistake the user can fix (a bad option, an unknown scenario, a missing parameter file) ends
with one line on stderr, ``mimir: error: <what> — <what to do>``, and exit status 2; the global
``--debug`` option (``mimir --debug sim ...``) adds the traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from pathlib import Path

#: Exit status of a user error (the same as argparse uses for a bad command line).
USER_ERROR_STATUS = 2


class UserError(Exception):
    """A mistake the user can fix; printed as one line with ``hint`` saying what to do."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.hint = hint

    def line(self) -> str:
        """The one line printed to stderr."""
        what = " ".join(str(self).split())
        return f"mimir: error: {what}" + (f" — {self.hint}" if self.hint else "")


class _Parser(argparse.ArgumentParser):
    """An argument parser whose command-line errors are one ``mimir: error:`` line."""

    def error(self, message: str) -> NoReturn:
        line = UserError(message, f"see '{self.prog} --help'").line()
        self.exit(USER_ERROR_STATUS, line + "\n")


@dataclass(frozen=True)
class Check:
    """One installation check: a name, whether it passed, and what was found."""

    name: str
    ok: bool
    detail: str
    required: bool = True


def _module_check(name: str, module: str, required: bool = True,
                  hint: str = "") -> Check:
    try:
        mod = importlib.import_module(module)
    except ImportError as err:
        return Check(name, False, f"{err}{'; ' + hint if hint else ''}", required)
    version = getattr(mod, "__version__", "")
    return Check(name, True, f"{module} {version}".strip(), required)


def run_checks() -> list[Check]:
    """Every installation check, required ones first."""
    checks = [
        _module_check("ROS 2 client library", "rclpy"),
        _module_check("mimir interfaces", "mimir_msgs.msg", hint="run scripts/setup.sh"),
        _module_check("tf2 messages", "tf2_msgs.msg", hint="run scripts/setup.sh"),
        _module_check("numpy", "numpy"),
        _module_check("OpenCV", "cv2"),
        _module_check("SQLite utilities", "sqlite_utils"),
        _module_check("torch", "torch", required=False),
        _module_check("transformers", "transformers", required=False),
        _module_check("open3d", "open3d", required=False),
        _module_check("MuJoCo", "mujoco", required=False),
        _module_check("tf2_ros (robot installs)", "tf2_ros", required=False,
                      hint="mimir uses its own transform buffer instead"),
        _module_check("cv_bridge (robot installs)", "cv_bridge", required=False,
                      hint="mimir converts images itself"),
        _module_check("ZED SDK (pyzed)", "pyzed.sl", required=False,
                      hint="needed only by zed_node on a robot with ZED cameras"),
    ]
    rmw = os.environ.get("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp (default)")
    checks.append(Check("ROS middleware", True, rmw, required=False))
    return checks


def _cmd_doctor(args: argparse.Namespace) -> int:
    if args.robot:
        return _doctor_robot(args)
    failed = 0
    for check in run_checks():
        mark = "ok " if check.ok else ("FAIL" if check.required else "--  ")
        print(f"[{mark}] {check.name}: {check.detail}")
        failed += int(check.required and not check.ok)
    if failed:
        print(f"{failed} required check(s) failed")
    return 1 if failed else 0


def deployment_sections(params_file: str) -> dict[str, dict[str, Any]]:
    """``{node: ros__parameters}`` of a deployment file (the installed mimir.yaml by default).

    Raises:
        UserError: the file is missing, not YAML, or not shaped ``/**/<node>: {ros__parameters}``.
    """
    import yaml  # noqa: PLC0415 - only this command reads deployment files

    from mimir.paths import ConfigFileNotFoundError, config_file  # noqa: PLC0415

    hint = "give --params-file the robot's deployment file (config/mimir.yaml)"
    try:
        source = config_file("mimir.yaml", params_file)
        data = yaml.safe_load(source.read_text())
    except ConfigFileNotFoundError as err:
        raise UserError(str(err), hint) from err
    except (OSError, yaml.YAMLError, UnicodeDecodeError) as err:
        raise UserError(f"cannot read the deployment file: {err}", hint) from err
    if not isinstance(data, dict):
        raise UserError(f"{source} does not map node sections to parameters", hint)
    sections: dict[str, dict[str, Any]] = {}
    for key, entry in data.items():
        values = entry.get("ros__parameters") if isinstance(entry, dict) else None
        if not isinstance(values, dict):
            raise UserError(f"{source}: section {key!r} has no ros__parameters mapping", hint)
        sections[str(key).rsplit("/", 1)[-1]] = values
    return sections


#: Options of ``mimir doctor --robot``: flag, type, default, help.
_PREFLIGHT_OPTIONS: tuple[tuple[str, type, Any, str], ...] = (
    ("--params-file", str, "", "robot deployment file (default: the installed mimir.yaml)"),
    ("--namespace", str, "", "namespace of the running graph"),
    ("--window", float, 5.0, "how long to listen to TF and the cameras (s)"),
    ("--host", str, "", "robot computer (default: the file's)"),
    ("--memory-dir", str, "", "memory folder (default: the file's)"),
    ("--sam3-model", str, "", "SAM3 folder (default: the file's)"),
    ("--min-camera-hz", float, 10.0, "slowest acceptable camera rate (Hz)"),
    ("--min-free-gb", float, 5.0, "least free disk space for memory (GB)"),
)


def _doctor_robot(args: argparse.Namespace) -> int:
    from mimir.nodes.robot.preflight import observe_once  # noqa: PLC0415 - needs rclpy
    from mimir_robot.preflight import RobotProfile, run_preflight  # noqa: PLC0415

    for option, value in (("--window", args.window), ("--min-camera-hz", args.min_camera_hz)):
        if not value > 0.0:
            raise UserError(f"{option} must be a positive number, got {value}")
    profile = RobotProfile.from_deployment(
        deployment_sections(args.params_file), host=args.host or None,
        memory_dir=args.memory_dir or None, sam3_model=args.sam3_model or None,
        min_camera_hz=args.min_camera_hz, min_free_gb=args.min_free_gb)
    print(f"listening {args.window:g} s for TF and cameras {', '.join(profile.cameras)} ...")
    observation = observe_once(profile.cameras, args.window, args.namespace)
    checks = run_preflight(profile, observation)
    for check in checks:
        print(check.line())
    failed = sum(not check.ok for check in checks)
    print(f"{failed} of {len(checks)} pre-flight check(s) failed" if failed
          else f"all {len(checks)} pre-flight checks passed: the robot may take its first "
          "instruction")
    return 1 if failed else 0


def _describe(kind: str, name: str) -> list[str]:
    module = importlib.import_module(f"mimir_msgs.{kind}")
    cls = getattr(module, name)
    lines = [f"{kind}/{name}"]
    if kind == "msg":
        parts = [("", cls)]
    elif kind == "srv":
        parts = [("request", cls.Request), ("response", cls.Response)]
    else:
        parts = [("goal", cls.Goal), ("result", cls.Result), ("feedback", cls.Feedback)]
    for label, part in parts:
        fields = part.get_fields_and_field_types()
        prefix = f"  {label}: " if label else "  "
        lines.append(prefix + ", ".join(f"{k} ({v})" for k, v in fields.items()))
    return lines


def interface_names() -> dict[str, list[str]]:
    """Names of mimir's interfaces by kind (msg, srv, action)."""
    names: dict[str, list[str]] = {}
    for kind in ("msg", "srv", "action"):
        module = importlib.import_module(f"mimir_msgs.{kind}")
        names[kind] = sorted(
            n for n in dir(module)
            if "_" not in n and not n.startswith("_") and isinstance(getattr(module, n), type)
        )
    return names


def _cmd_interfaces(args: argparse.Namespace) -> int:
    for kind, names in interface_names().items():
        for name in names:
            print("\n".join(_describe(kind, name)) if args.fields else f"{kind}/{name}")
    return 0


def _cmd_sim(args: argparse.Namespace) -> int:
    from pathlib import Path  # noqa: PLC0415 - keep the CLI start fast

    from mimir.sim_job import SimJobError, SimJobOptions, run_sim_job  # noqa: PLC0415

    os.environ.setdefault("MUJOCO_GL", "egl")
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    options = SimJobOptions(
        scenario=args.scenario, vlm_backend=args.vlm, run_root=Path(args.runs),
        seed=args.seed, step_budget=args.step_budget, params_file=args.params_file,
        instruction_timeout_s=args.instruction_timeout, quiet=args.quiet,
        reasoner_faults=args.reasoner_faults, fault_seed=args.fault_seed,
        verifiers_off=args.verifiers_off, hold_s=args.hold, tidybot_dir=args.tidybot_dir,
        noise_profile=args.profile, noise_scale=args.noise_scale, in_process=args.in_process,
    )
    try:
        return run_sim_job(options, sys.argv)
    except SimJobError as err:
        raise UserError(str(err), err.hint or "run again with 'mimir --debug sim ...' for "
                        "details") from err


def _cmd_bench(args: argparse.Namespace) -> int:
    # views are rendered offscreen (worker processes inherit the setting)
    os.environ.setdefault("MUJOCO_GL", "egl")
    from mimir.paths import ConfigFileNotFoundError  # noqa: PLC0415
    from mimir_planner.reasoning.errors import ReasoningError  # noqa: PLC0415
    from mimir_sim.warehouse.layout import WarehouseError  # noqa: PLC0415

    try:
        status: int = args.bench_handler(args)
    except (WarehouseError, ConfigFileNotFoundError, ReasoningError) as err:
        raise UserError(str(err), f"see 'mimir bench {args.bench_command} --help'") from err
    return status


def _cmd_eval(args: argparse.Namespace) -> int:
    if args.against:
        return _eval_against(args)
    from pathlib import Path  # noqa: PLC0415 - keep the CLI start fast

    from mimir.evaluation.archive import ArchiveError  # noqa: PLC0415
    from mimir.evaluation.job import run_evaluation  # noqa: PLC0415
    from mimir.evaluation.methods import EvalConfigError  # noqa: PLC0415
    from mimir.evaluation.options import EvalOptions  # noqa: PLC0415
    from mimir.evaluation.trials import TrialFileError  # noqa: PLC0415
    from mimir.ros.domains import NoFreeDomainError  # noqa: PLC0415
    from mimir.sim_job import SimJobError  # noqa: PLC0415

    os.environ.setdefault("MUJOCO_GL", "egl")
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    out = _eval_folder(args)
    options = EvalOptions(
        scenario=args.scenario, methods=args.methods, trials=args.trials, first_seed=args.seed,
        profile=args.profile, noise_scales=tuple(args.noise_scale), jobs=args.jobs, out=out,
        vlm_backend=args.vlm, instruction_timeout_s=args.instruction_timeout,
        config=args.config, report_only=args.report_only, in_process=args.in_process,
        merge=Path(args.merge) if args.merge else None,
        pack=Path(args.pack) if args.pack else None, nodes=args.nodes, argv=tuple(sys.argv))
    try:
        report = run_evaluation(options, say=print)
    except (EvalConfigError, TrialFileError, ArchiveError, NoFreeDomainError) as err:
        raise UserError(str(err), "see 'mimir eval --help' and config/eval.yaml") from err
    except SimJobError as err:
        raise UserError(str(err), err.hint) from err
    print(f"report: {report}")
    return 0


def _eval_folder(args: argparse.Namespace) -> Path:
    """``mimir eval``'s evaluation folder: ``--out``, else evals/<scenario>-<profile>."""
    from pathlib import Path  # noqa: PLC0415 - keep the CLI start fast

    return Path(args.out or f"evals/{Path(args.scenario).stem}-{Path(args.profile).stem}")


def _eval_against(args: argparse.Namespace) -> int:
    """``mimir eval --against``: pair two evaluations' trials and report what changed."""
    from pathlib import Path  # noqa: PLC0415 - keep the CLI start fast

    from mimir.evaluation.paired import PairingError, compare, report_lines  # noqa: PLC0415
    from mimir.evaluation.trials import TrialFileError  # noqa: PLC0415

    before, after = Path(args.against), _eval_folder(args)
    try:
        found = compare(before, after)
    except (PairingError, TrialFileError) as err:
        raise UserError(str(err), "see 'mimir eval --help'") from err
    lines = report_lines(found, str(before), str(after))
    print("\n".join(lines))
    path = after / "against.md"
    path.write_text("\n".join(lines) + "\n")
    print(f"report: {path}")
    return 0


def _approve_service_name(namespace: str, name: str) -> str:
    return f"{namespace.rstrip('/')}/{name}" if namespace.strip("/") else name


_APPROVE_RESEND_S = 3.0  # s between repeats of an unanswered read-only gate request


def _call_service(executor: Any, client: Any, request: Any, timeout: float, *,
                  retry: bool = False) -> Any:
    """The service's answer, or None after ``timeout`` s. A request that only reads
    (``retry``) is sent again every few seconds meanwhile: the first request of a new node can
    be lost while DDS is still matching the reader of its reply."""
    import time  # noqa: PLC0415 - keep the CLI start fast

    deadline = time.monotonic() + timeout
    while True:
        future = client.call_async(request)
        left = max(0.0, deadline - time.monotonic())
        executor.spin_until_future_complete(
            future, timeout_sec=min(left, _APPROVE_RESEND_S) if retry else left)
        if future.done():
            return future.result()
        client.remove_pending_request(future)
        if not retry or time.monotonic() >= deadline:
            return None


def run_approve(args: argparse.Namespace, ask: Callable[[str], str] = input) -> int:
    """Operator prompt of the gate: list pending primitives, decide each (y/n, or all at once).

    Returns 0 when every decision was accepted (also when nothing waits), 1 when the planner
    cannot be reached or a decision was refused, 2 when the operator quit with requests left.
    """
    import time  # noqa: PLC0415 - keep the CLI start fast

    import rclpy  # noqa: PLC0415
    from rclpy.context import Context  # noqa: PLC0415
    from rclpy.executors import SingleThreadedExecutor  # noqa: PLC0415

    from mimir_msgs.srv import ApprovePrimitive, ListPendingPrimitives  # noqa: PLC0415

    context = Context()
    rclpy.init(context=context)
    node = rclpy.create_node("mimir_approve", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)

    def call(client: Any, request: Any, *, retry: bool = False) -> Any:
        return _call_service(executor, client, request, args.timeout, retry=retry)

    try:
        ns = args.namespace
        lister: Any = node.create_client(ListPendingPrimitives,
                                         _approve_service_name(ns, "list_pending_primitives"))
        decider: Any = node.create_client(ApprovePrimitive,
                                          _approve_service_name(ns, "approve_primitive"))
        if not (lister.wait_for_service(timeout_sec=args.timeout)
                and decider.wait_for_service(timeout_sec=args.timeout)):
            seen = sorted(name for name, _types in node.get_service_names_and_types()
                          if name.endswith("/approve_primitive"))
            print(f"the planner's gate services are not available (namespace "
                  f"{args.namespace or '/'}); is the planner running? "
                  + (f"Gate services seen: {', '.join(seen)}" if seen
                     else "No gate service is visible on this ROS domain."))
            return 1
        deadline = time.monotonic() + max(0.0, args.wait)
        while True:
            listing: Any = call(lister, ListPendingPrimitives.Request(), retry=True)
            if listing is None:
                print("list_pending_primitives did not answer")
                return 1
            if listing.request_ids or time.monotonic() >= deadline:
                break
            time.sleep(0.2)
        if not listing.request_ids:
            print("no primitive is waiting for approval")
            return 0
        status = 0
        items = zip(listing.request_ids, listing.steps, listing.tasks, strict=False)
        for request_id, step, task in items:
            print(f"[{request_id}] {step.primitive}({step.target_id}) for {task!r}"
                  + (f"\n    because: {step.reasoning}" if step.reasoning else ""))
            if args.approve_all or args.deny_all:
                approve = bool(args.approve_all)
            else:
                try:
                    answer = ask("approve? [y/n, q to stop] ").strip().lower()
                except EOFError:
                    answer = "q"
                if answer not in ("y", "yes", "n", "no"):
                    print("stopped; the remaining requests keep waiting")
                    return 2
                approve = answer in ("y", "yes")
            request = ApprovePrimitive.Request(request_id=request_id, approve=approve,
                                               reason=args.reason)
            reply: Any = call(decider, request)
            if reply is None:
                print(f"[{request_id}] approve_primitive did not answer")
                status = 1
            elif reply.error_code != ApprovePrimitive.Response.NONE:
                print(f"[{request_id}] not decided: {reply.error_msg}")
                status = 1
            else:
                print(f"[{request_id}] {'approved' if approve else 'denied'}")
        return status
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown(context=context)


def _cmd_approve(args: argparse.Namespace) -> int:
    return run_approve(args)


def _cmd_memory_check(args: argparse.Namespace) -> int:
    from mimir_memory.errors import MemoryStoreError  # noqa: PLC0415 - keep the CLI start fast
    from mimir_memory.maintenance import check_memory  # noqa: PLC0415

    try:
        reports = check_memory(args.folder)
    except MemoryStoreError as err:
        raise UserError(str(err), "give the folder that holds world.db (the memory_dir "
                        "parameter, or <run>/memory of a mimir sim run)") from err
    problems = 0
    for report in reports:
        if not report.present:
            print(f"{report.name}: absent ({report.path})")
            continue
        state = "ok" if report.ok else "PROBLEMS"
        print(f"{report.name}: {state}: {report.events} events, integrity {report.integrity}"
              f" ({report.path})")
        if report.error:
            print(f"  cannot replay: {report.error}")
        for line in report.skipped:
            print(f"  does not apply: {line}")
        problems += len(report.skipped) + int(bool(report.error)) + int(
            report.integrity != "ok")
    if problems:
        print(f"{problems} problem(s); `mimir memory repair {args.folder}` retracts the world "
              "events that do not apply (stop the scene graph node first)")
    return 1 if problems else 0


def _cmd_memory_repair(args: argparse.Namespace) -> int:
    import time  # noqa: PLC0415 - keep the CLI start fast

    from mimir_memory.errors import MemoryStoreError, WriterBusyError  # noqa: PLC0415
    from mimir_memory.maintenance import repair_memory  # noqa: PLC0415

    try:
        retracted = repair_memory(args.folder, stamp=time.time(), reason=args.reason)
    except WriterBusyError as err:
        raise UserError(str(err), "stop the scene graph node that owns this folder, then run "
                        "the repair again") from err
    except MemoryStoreError as err:
        raise UserError(str(err), "give the folder that holds world.db") from err
    for event_id in retracted:
        print(f"retracted {event_id}")
    print(f"{len(retracted)} event(s) retracted; the log keeps them, the graph ignores them")
    return 0


def _cmd_inspect(args: argparse.Namespace) -> int:
    from mimir.inspect.folder import InspectError, MemoryFolder  # noqa: PLC0415 - fast start
    from mimir.inspect.server import is_loopback, make_server  # noqa: PLC0415

    if not 0 <= args.port <= 65535:
        raise UserError(f"--port must lie in 0..65535, got {args.port}", "give a free port")
    try:
        folder = MemoryFolder(args.path)
    except InspectError as err:
        raise UserError(str(err)) from err
    try:
        server = make_server(folder, args.host, args.port)
    except OSError as err:
        folder.close()
        raise UserError(f"cannot listen on {args.host}:{args.port}: {err.strerror or err}",
                        "give another --port (0 picks a free one)") from err
    if not is_loopback(args.host):
        print(f"warning: listening on {args.host}, not only this machine: anyone who reaches "
              "it sees the robot's memory (no password)", file=sys.stderr)
    print(f"mimir inspect: {folder.root} at {server.url} (read-only; Ctrl-C ends it)",
          flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        folder.close()
    return 0


Command = Callable[[argparse.Namespace], int]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand."""
    parser = _Parser(
        prog="mimir", description="Persistent, interaction-grounded robot memory."
    )
    parser.add_argument("--debug", action="store_true",
                        help="show the full traceback of an error (give it before the command)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sim = sub.add_parser("sim", help="run a kitchen scenario in simulation (main job)")
    sim.add_argument("--scenario", default="locked_unlocked",
                     help="scenario name in config/scenarios or a scenario file")
    sim.add_argument("--vlm", default="offline", choices=("offline", "openai", "transformers"),
                     help="reasoning backend for the analyzer and the planner")
    sim.add_argument("--seed", type=int, default=-1,
                     help="layout seed (-1: the scenario's own)")
    sim.add_argument("--profile", default="realistic", metavar="NAME",
                     help="sensor and actuation noise: ideal, realistic (config/noise) or a "
                          "profile YAML path")
    sim.add_argument("--noise-scale", type=float, default=1.0, metavar="S",
                     help="multiply every noise term of the profile by S (0: noise-free)")
    sim.add_argument("--step-budget", type=int, default=12, help="planner calls per instruction")
    sim.add_argument("--runs", default="runs", help="folder that receives the run folder")
    sim.add_argument("--params-file", default="",
                     help="node parameter file (default: the installed mimir_sim.yaml)")
    sim.add_argument("--instruction-timeout", type=float, default=600.0,
                     help="wall-clock limit per instruction (s)")
    sim.add_argument("--quiet", action="store_true", help="write the trace without printing it")
    sim.add_argument("--reasoner-faults", type=float, default=0.0, metavar="P",
                     help="corrupt this share of reasoner answers (0..1, seeded, each logged to "
                          "reasoner_faults.jsonl) to test the verification harness")
    sim.add_argument("--fault-seed", type=int, default=0, help="seed of --reasoner-faults")
    sim.add_argument("--hold", type=float, default=0.0, metavar="SECONDS",
                     help="keep the node graph running this long after the instructions")
    sim.add_argument("--verifiers-off", default="", metavar="KINDS",
                     help="comma-separated verdict kinds to switch off, or 'all' (ablations)")
    sim.add_argument("--in-process", action="store_true",
                     help="run the graph's work in this one process in simulation time (no "
                          "DDS, no RPC; fast, for evaluations; offline reasoner only)")
    sim.add_argument("--tidybot-dir", default="", metavar="PATH",
                     help="TidyBot++ model: tidybot.xml or a folder holding it (default: "
                          "mujoco-menagerie's stanford_tidybot, or $MENAGERIE_ROOT's copy)")
    sim.set_defaults(handler=_cmd_sim)
    from mimir.evaluation import options as _eval_options  # noqa: PLC0415
    _eval_options.add_parser(sub, _cmd_eval)
    from mimir.evaluation.memtransfer import command as _bench  # noqa: PLC0415
    _bench.add_parsers(sub, _cmd_bench)
    doctor = sub.add_parser("doctor", help="check the installation (--robot: pre-flight on the "
                            "robot computer)")
    doctor.add_argument("--robot", action="store_true",
                        help="pre-flight: TF from map to every camera, camera rates, base and arm "
                             "servers, disk, SAM3 weights, the operator gate (graph running)")
    for flag, kind, default, text in _PREFLIGHT_OPTIONS:
        doctor.add_argument(flag, type=kind, default=default, help=text)
    doctor.set_defaults(handler=_cmd_doctor)
    interfaces = sub.add_parser("interfaces", help="list mimir's messages, services and actions")
    interfaces.add_argument("--fields", action="store_true", help="show every field")
    interfaces.set_defaults(handler=_cmd_interfaces)
    approve = sub.add_parser("approve", help="approve or deny primitives waiting at the operator "
                             "gate")
    decide_all = approve.add_mutually_exclusive_group()
    decide_all.add_argument("--approve-all", action="store_true",
                            help="approve every waiting primitive without asking")
    decide_all.add_argument("--deny-all", action="store_true",
                            help="deny every waiting primitive without asking")
    approve.add_argument("--namespace", default="", help="namespace of the planner node")
    approve.add_argument("--reason", default="", help="note stored with the decisions")
    approve.add_argument("--wait", type=float, default=0.0,
                         help="wait up to this long for a primitive to be pending (s)")
    approve.add_argument("--timeout", type=float, default=10.0,
                         help="timeout of each service call (s)")
    approve.set_defaults(handler=_cmd_approve)
    from mimir import record as _record  # noqa: PLC0415
    _record.add_parser(sub)
    memory = sub.add_parser("memory", help="check or repair a memory folder")
    memory_sub = memory.add_subparsers(dest="memory_command", required=True, metavar="ACTION")
    check = memory_sub.add_parser(
        "check", help="list events that do not apply and run SQLite's integrity check "
        "(read-only; safe beside a running robot); exit status 1 when something is wrong")
    check.add_argument("folder", help="memory folder (holds world.db, task.db, keyframes/)")
    check.set_defaults(handler=_cmd_memory_check)
    repair = memory_sub.add_parser(
        "repair", help="append a retraction for every world event that does not apply "
        "(needs the writer lock: stop the scene graph node first)")
    repair.add_argument("folder", help="memory folder (holds world.db)")
    repair.add_argument("--reason", default="mimir memory repair",
                        help="note stored with each retraction")
    repair.set_defaults(handler=_cmd_memory_repair)
    inspect = sub.add_parser(
        "inspect", help="look at a memory folder in a web browser: map, nodes and why memory "
        "believes each fact, keyframes, events, planner trace, agenda, any moment in time "
        "(read-only; safe beside a running robot)")
    inspect.add_argument("path", help="a run folder of mimir sim or a memory folder")
    inspect.add_argument("--host", default="127.0.0.1",
                         help="address to listen on (default: this machine only)")
    inspect.add_argument("--port", type=int, default=8765, help="port (0: any free port)")
    inspect.set_defaults(handler=_cmd_inspect)
    _replay_parser(sub)
    return parser


def _replay_parser(sub: Any) -> None:
    replay = sub.add_parser(
        "replay", help="rebuild memory from a rosbag2 recording (mcap or sqlite3)",
        description="Replay a recorded bag. By default its messages are republished over DDS "
        "as recorded, paced by their recording time, with the bag's time on /clock, for a "
        "running node graph (use_sim_time). --fast instead runs perception's geometry, fusion "
        "and keyframe filtering in this process in stamp order, as fast as the machine allows, "
        "with the settings of the deployment file, and writes memory itself.")
    replay.add_argument("bag", help="bag folder (rosbag2), or a single .mcap/.db3/.bag file")
    speed = replay.add_mutually_exclusive_group()
    speed.add_argument("--fast", action="store_true",
                       help="run the cores in-process on message time and write --memory")
    speed.add_argument("--rate", type=float, default=1.0,
                       help="DDS playback speed relative to the recording")
    replay.add_argument("--topics", nargs="*", default=[], metavar="TOPIC",
                        help="DDS playback: only these bag topics (default: all)")
    replay.add_argument("--no-clock", action="store_true",
                        help="DDS playback: do not publish /clock")
    replay.add_argument("--memory", default="~/.local/share/mimir/replay",
                        help="memory folder to build (world.db, keyframes/); may hold memory")
    replay.add_argument("--params", default="", metavar="FILE",
                        help="deployment parameter file whose deprojection, scene_graph and "
                             "keyframes sections apply (default: the installed mimir.yaml; "
                             "mimir_sim.yaml for bags of the simulation)")
    replay.add_argument("--start", type=float, default=0.0, metavar="S",
                        help="skip camera messages of the first S seconds of the bag")
    replay.add_argument("--end", type=float, default=None, metavar="E",
                        help="stop at E seconds from the bag's start")
    replay.add_argument("--cameras", default="", help="cameras to replay, comma-separated "
                        "(default: the deployment's deprojection cameras)")
    replay.add_argument("--namespace", default="", help="namespace the bag's topics carry")
    for flag, default in (("--color", "cameras/{camera}/color/image_raw"),
                          ("--depth", "cameras/{camera}/depth/image_raw"),
                          ("--camera-info", "cameras/{camera}/color/camera_info"),
                          ("--segmentation", "cameras/{camera}/segmentation")):
        replay.add_argument(flag, default=default, metavar="PATTERN",
                            help=f"topic of each camera's {flag[2:]} stream; {{camera}} is the "
                                 "camera name (Image or CompressedImage for colour and depth)")
    replay.add_argument("--segment", action="store_true",
                        help="segment the colour images of cameras whose bag holds no "
                             "segmentation with the deployment's segmentation model (SAM3)")
    replay.add_argument("--no-analyze", action="store_true",
                        help="--fast: do not run the analyzer on the bag's interactions")
    replay.add_argument("--quiet", action="store_true", help="print only the summary")
    replay.set_defaults(handler=_cmd_replay)


def _cmd_replay(args: argparse.Namespace) -> int:
    if not args.fast:
        return _replay_dds(args)
    import time  # noqa: PLC0415 - keep the CLI start fast
    from pathlib import Path  # noqa: PLC0415

    from mimir.bags import BagError  # noqa: PLC0415
    from mimir.replay import FastReplay, ReplayTopics, node_config  # noqa: PLC0415

    sections = deployment_sections(args.params)
    segmenter = vocabulary = None
    cameras = tuple(c.strip() for c in args.cameras.split(",") if c.strip())
    try:
        if args.segment:
            from mimir.nodes.perception.segmentation_node import (  # noqa: PLC0415
                PerceptionNodeError,
                SegmentationNodeConfig,
                make_backend,
                resolve_vocabulary,
            )
            seg_cfg = node_config(SegmentationNodeConfig, sections, "segmentation")
            try:
                segmenter = make_backend(seg_cfg)
            except PerceptionNodeError as err:
                raise UserError(str(err)) from err
            vocabulary = resolve_vocabulary(seg_cfg.vocabulary)
        if not cameras:
            cameras = tuple(sections.get("deprojection", {}).get("cameras") or ("pole",))
        topics = ReplayTopics(cameras=cameras, color=args.color, depth=args.depth,
                              camera_info=args.camera_info, segmentation=args.segmentation,
                              namespace=args.namespace)
        began = time.monotonic()

        def progress(count: int, reached: float) -> None:
            if not args.quiet:
                rate = count / max(time.monotonic() - began, 1e-6)
                print(f"\r{count} messages ({rate:.0f}/s), bag time {reached:.1f} s",
                      end="", file=sys.stderr, flush=True)

        run = FastReplay(Path(args.bag).expanduser(), Path(args.memory), topics,
                         sections=sections, segmenter=segmenter, vocabulary=vocabulary,
                         start=args.start, end=args.end, analyze=not args.no_analyze,
                         progress=progress)
    except ValueError as err:
        raise UserError(str(err), "check --params, --cameras and the topic patterns") from err
    try:
        summary = run.run()
        status = 0
    except BagError as err:
        summary, status = run.summary, 1
        if not summary.messages:
            run.close()
            raise UserError(str(err)) from err
    finally:
        if not args.quiet:
            print(file=sys.stderr)
    run.close()
    for line in summary.lines():
        print(line)
    return status


def _replay_dds(args: argparse.Namespace) -> int:
    import time  # noqa: PLC0415 - keep the CLI start fast
    from pathlib import Path  # noqa: PLC0415

    from mimir.bags import BagError  # noqa: PLC0415
    from mimir.nodes.bags.player import PlaySummary, play  # noqa: PLC0415

    began, shown = time.monotonic(), [0.0]

    def progress(summary: PlaySummary) -> None:
        now = time.monotonic()
        if not args.quiet and now - shown[0] >= 1.0:
            shown[0] = now
            count = sum(summary.published.values())
            print(f"\r{count} messages ({count / max(now - began, 1e-6):.0f}/s), bag time "
                  f"{summary.bag_seconds:.1f} s", end="", file=sys.stderr, flush=True)

    try:
        summary = play(Path(args.bag).expanduser(), progress=progress, rate=args.rate,
                       start=args.start, end=args.end, topics=args.topics,
                       namespace=args.namespace, clock=not args.no_clock)
    except (ValueError, BagError) as err:
        raise UserError(str(err)) from err
    finally:
        if not args.quiet:
            print(file=sys.stderr)
    for line in summary.lines():
        print(line)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``mimir`` console script.

    A :class:`UserError` becomes one line on stderr and exit status 2 (with the traceback
    before it under ``--debug``); any other exception keeps its traceback.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Command = args.handler
    try:
        return handler(args)
    except UserError as err:
        if args.debug:
            traceback.print_exc()
        sys.stdout.flush()
        print(err.line(), file=sys.stderr)
        return USER_ERROR_STATUS


if __name__ == "__main__":
    sys.exit(main())
