"""Checks that every dependency key in the package manifests resolves against rosdistro.

    python3 scripts/check_rosdep_keys.py ROSDISTRO_DIR [--distros jazzy kilted]

``ROSDISTRO_DIR`` is a checkout of github.com/ros/rosdistro. A key resolves when it is a ROS
package released in each named distribution (``<distro>/distribution.yaml``) or a system key in
``rosdep/*.yaml`` with a rule for Ubuntu. Prints one line per key and exits 1 when any key does
not resolve, which is what ``rosdep install`` would stop on.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import yaml

MANIFESTS = ("package.xml", "mimir_msgs/package.xml")
DEPENDS = ("depend", "build_depend", "buildtool_depend", "exec_depend", "test_depend",
           "build_export_depend")
OWN = {"mimir", "mimir_msgs"}


def keys_of(manifest: Path) -> set[str]:
    root = ET.parse(manifest).getroot()
    return {el.text.strip() for tag in DEPENDS for el in root.iter(tag) if el.text}


def ros_packages(rosdistro: Path, distro: str) -> set[str]:
    data = yaml.safe_load((rosdistro / distro / "distribution.yaml").read_text())
    names: set[str] = set()
    for repo, entry in (data.get("repositories") or {}).items():
        release = entry.get("release") or {}
        names |= set(release.get("packages") or [repo])
    return names


def system_keys(rosdistro: Path) -> dict[str, object]:
    keys: dict[str, object] = {}
    for path in sorted((rosdistro / "rosdep").glob("*.yaml")):
        keys.update(yaml.safe_load(path.read_text()) or {})
    return keys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rosdistro", type=Path)
    parser.add_argument("--distros", nargs="+", default=["jazzy", "kilted"])
    args = parser.parse_args(argv)
    root = Path(__file__).resolve().parent.parent
    wanted = set().union(*(keys_of(root / m) for m in MANIFESTS)) - OWN
    released = {d: ros_packages(args.rosdistro, d) for d in args.distros}
    system = system_keys(args.rosdistro)
    failed = 0
    for key in sorted(wanted):
        missing = [d for d in args.distros if key not in released[d]]
        rule = system.get(key)
        ubuntu = isinstance(rule, dict) and ("ubuntu" in rule or "*" in rule)
        if not missing:
            print(f"ok      {key}: ROS package in {', '.join(args.distros)}")
        elif ubuntu:
            print(f"ok      {key}: system key with an Ubuntu rule")
        else:
            failed += 1
            print(f"MISSING {key}: not released in {', '.join(missing)} and no system rule")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
