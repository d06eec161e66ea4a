"""The ``mimir`` command line: one entry point for what a user runs.

Subcommands:
    doctor       check the installation (ROS 2 middleware, interfaces, optional drivers, models)
    interfaces   list mimir's messages, services and actions with their fields
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass


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
    failed = 0
    for check in run_checks():
        mark = "ok " if check.ok else ("FAIL" if check.required else "--  ")
        print(f"[{mark}] {check.name}: {check.detail}")
        failed += int(check.required and not check.ok)
    if failed:
        print(f"{failed} required check(s) failed")
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


Command = Callable[[argparse.Namespace], int]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand."""
    parser = argparse.ArgumentParser(
        prog="mimir", description="Persistent, interaction-grounded robot memory."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    doctor = sub.add_parser("doctor", help="check the installation")
    doctor.set_defaults(handler=_cmd_doctor)
    interfaces = sub.add_parser("interfaces", help="list mimir's messages, services and actions")
    interfaces.add_argument("--fields", action="store_true", help="show every field")
    interfaces.set_defaults(handler=_cmd_interfaces)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``mimir`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Command = args.handler
    return handler(args)


if __name__ == "__main__":
    sys.exit(main())
