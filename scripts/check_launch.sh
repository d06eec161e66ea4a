#!/usr/bin/env bash
# Run the launch files for real, as a robot user would, and check every node's parameters.
#
#   scripts/check_launch.sh [SOURCES]        (or: make check-launch LAUNCH_SOURCES=SOURCES)
#
# SOURCES (argument, or $MIMIR_LAUNCH_SOURCES) is a folder holding upstream source trees:
#   SOURCES/launch          ros2/launch       (packages launch, launch_xml, launch_yaml)
#   SOURCES/launch_ros      ros2/launch_ros   (packages launch_ros, ros2launch)
#   SOURCES/rcl_interfaces  ros2/rcl_interfaces (only composition_interfaces, which launch_ros
#                           imports and no wheel provides)
# Without them the script prints one line saying it skips, and exits 0.
#
# What it does, all outside .venv (which it only reads):
#   1. makes a separate virtual environment ($WORK/venv) whose Python also sees .venv's
#      site-packages (a .pth file), so the ROS wheels are reused, not copied or changed;
#   2. builds composition_interfaces with cmake into $WORK/prefix (about 20 s);
#   3. installs launch, launch_xml, launch_yaml, launch_ros, ros2launch from the sources with
#      `pip install --no-deps`, plus osrf_pycommon and colcon-common-extensions from the registry;
#   4. copies the checkout (tracked and untracked, not ignored files) to $WORK/ws/src/mimir,
#      checks that colcon finds mimir and mimir_msgs with the README's --base-paths, and runs
#      `colcon build --symlink-install --base-paths ... --packages-ignore mimir_msgs` there
#      (mimir_msgs is already built into .venv, so only the ament_python package is built);
#   5. for bringup, sim and replay, each with and without namespace:=robot1, finds the launch
#      file through the ament index (ros2launch's get_share_file_path_from_package, as
#      `ros2 launch mimir <file>` does), runs it through launch.LaunchService for
#      $MIMIR_CHECK_LAUNCH_SECONDS (30) seconds, and meanwhile asks every node over DDS
#      (<namespace>/<node>/get_parameters) for every parameter its section of the deployment
#      file sets; a node that exits early, never answers or holds another value fails the run.
# Robot-only parts are replaced: bringup runs with use_zed:=false (no ZED SDK here),
# vlm_backend:=offline (no endpoint) and the fake TidyBot++ base and arm servers on the deployment
# file's ports; under the namespace it also gives the per-site arguments (cameras, robot_host,
# sam3_model, vlm_endpoint, vlm_model) and checks that they reach their nodes; replay's `ros2 bag play` is a stand-in script that only
# sleeps (no ros2 CLI here). Node output goes to $WORK/logs/<case>.log.
set -euo pipefail

# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh" "check-launch: " "check-launch: FAILED: "
SOURCES="${1:-${MIMIR_LAUNCH_SOURCES:-}}"
WORK="${MIMIR_CHECK_LAUNCH_DIR:-/tmp/mimir-check-launch}"
SECONDS_PER_RUN="${MIMIR_CHECK_LAUNCH_SECONDS:-30}"
ROS_VENV="$ROOT/.venv"

skip() { say "SKIPPED: $*"; exit 0; }

[[ -n "$SOURCES" ]] || skip "no upstream sources given (argument or MIMIR_LAUNCH_SOURCES: a folder with launch/, launch_ros/, rcl_interfaces/ from github ros2/launch, ros2/launch_ros, ros2/rcl_interfaces)"
for sub in launch/launch launch/launch_xml launch/launch_yaml launch_ros/launch_ros \
           launch_ros/ros2launch rcl_interfaces/composition_interfaces; do
  [[ -f "$SOURCES/$sub/package.xml" ]] || skip "$SOURCES/$sub/package.xml is absent, so the upstream launch sources are not there"
done
[[ -x "$ROS_VENV/bin/python" ]] || skip "$ROS_VENV is missing (run scripts/setup.sh first)"
command -v cmake >/dev/null 2>&1 || skip "cmake is missing (needed for composition_interfaces)"

PYV="$("$ROS_VENV/bin/python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
ROS_SITE="$ROS_VENV/lib/python$PYV/site-packages"
VENV="$WORK/venv"
PREFIX="$WORK/prefix"
WS="$WORK/ws"
mkdir -p "$WORK/logs"

# The ROS wheels find their shared libraries through LD_LIBRARY_PATH, which .venv's start-up hook
# would compute from the running interpreter's prefix; set it here for .venv and mark it done.
ld="$ROS_VENV/lib:$PREFIX/lib"
for libs in "$ROS_SITE"/ros_*.libs; do ld="$ld:$libs"; done
export LD_LIBRARY_PATH="$ld${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export _ROS_WHEELS_BOOTSTRAP_COMPLETE=1
export AMENT_PREFIX_PATH="$PREFIX:$VENV:$ROS_VENV"
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
export ROS_LOG_DIR="$WORK/logs/ros"
# The simulation bridge takes the robot model from mujoco-menagerie (the offline copy where there is one).
use_offline_robot_model

# 1. separate environment that sees the ROS wheels ---------------------------------------------
if [[ ! -x "$VENV/bin/python" ]]; then
  say "creating $VENV"
  "$ROS_VENV/bin/python" -m venv "$VENV"
fi
VENV_SITE="$VENV/lib/python$PYV/site-packages"
printf 'import site; site.addsitedir(%s)\n' "'$PREFIX/lib/python$PYV/site-packages'" \
  > "$VENV_SITE/zz_mimir_composition.pth"
printf 'import site; site.addsitedir(%s)\n' "'$ROS_SITE'" > "$VENV_SITE/zz_mimir_ros_wheels.pth"
PY="$VENV/bin/python"

# 2. composition_interfaces ------------------------------------------------------------------
if ! "$PY" -c 'import composition_interfaces.srv' 2>/dev/null; then
  say "building composition_interfaces into $PREFIX"
  rm -rf "$WORK/build/composition_interfaces"
  if ! cmake_install "$SOURCES/rcl_interfaces/composition_interfaces" \
         "$WORK/build/composition_interfaces" "$PREFIX" "$ROS_VENV" "$ROS_VENV/bin/python" 2 \
         "$WORK/logs/composition_interfaces.log"; then
    tail -n 30 "$WORK/logs/composition_interfaces.log" >&2
    die "building composition_interfaces failed"
  fi
fi

# 3. launch packages from source, colcon from the registry ------------------------------------
if ! "$PY" -c 'import launch_ros, launch_xml, launch_yaml, ros2launch.api, osrf_pycommon, colcon_core' 2>/dev/null; then
  say "installing launch, launch_xml, launch_yaml, launch_ros, ros2launch (--no-deps) into $VENV"
  "$PY" -m pip install --no-deps --no-warn-conflicts "$SOURCES/launch/launch" \
    "$SOURCES/launch/launch_xml" "$SOURCES/launch/launch_yaml" "$SOURCES/launch_ros/launch_ros" \
    "$SOURCES/launch_ros/ros2launch" >"$WORK/logs/pip.log" 2>&1 ||
    { tail -n 20 "$WORK/logs/pip.log" >&2; die "pip install of the launch sources failed"; }
  say "installing osrf_pycommon and colcon-common-extensions into $VENV"
  "$PY" -m pip install --no-warn-conflicts osrf_pycommon colcon-common-extensions \
    >>"$WORK/logs/pip.log" 2>&1 ||
    { tail -n 20 "$WORK/logs/pip.log" >&2; die "pip install of colcon failed"; }
fi
versions="$("$PY" - <<'EOF'
from importlib.metadata import version
print(", ".join(f"{p} {version(p)}" for p in
                ("launch", "launch_ros", "launch_xml", "launch_yaml", "ros2launch", "rclpy")))
EOF
)"
say "using $versions"

# 4. colcon build of mimir ---------------------------------------------------------------------
say "building mimir with colcon in $WS"
rm -rf "$WS/src/mimir"
mkdir -p "$WS/src/mimir"
if git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1; then
  # what a clone of this working tree would hold: tracked and untracked, not ignored files
  (cd "$ROOT" && git ls-files -z --cached --others --exclude-standard |
     tar --null --ignore-failed-read -T - -cf - 2>/dev/null) | tar -x -C "$WS/src/mimir"
else
  (cd "$ROOT" && tar --exclude=./.venv --exclude=./build --exclude=./install --exclude=./log \
     --exclude=./runs --exclude='*/__pycache__' -cf - .) | tar -x -C "$WS/src/mimir"
fi
# the README's paths: colcon stops below a folder that is a package, so both are named
found="$(cd "$WS" && "$VENV/bin/colcon" list --names-only \
           --base-paths src/mimir src/mimir/mimir_msgs | sort | tr '\n' ' ')"
[[ "$found" == "mimir mimir_msgs " ]] || die "colcon finds '$found' with the README's base paths"
if ! (cd "$WS" && "$VENV/bin/colcon" build --symlink-install \
        --base-paths src/mimir src/mimir/mimir_msgs --packages-ignore mimir_msgs \
        >"$WORK/logs/colcon.log" 2>&1); then
  tail -n 30 "$WORK/logs/colcon.log" >&2
  die "colcon build failed; full log in $WORK/logs/colcon.log"
fi
say "colcon: $(grep -E 'Summary' "$WORK/logs/colcon.log" || echo 'built')"
set +u
# shellcheck disable=SC1091
source "$WS/install/local_setup.bash"
set -u

# 5. each launch file, with and without a namespace ------------------------------------------
# A stand-in for `ros2 bag play` (replay.launch.py): no ros2 CLI and no bag here.
mkdir -p "$WORK/bin"
cat > "$WORK/bin/ros2" <<'EOF'
#!/usr/bin/env bash
echo "stand-in ros2 $*: no bag player in this check, sleeping"
exec sleep 3600
EOF
chmod +x "$WORK/bin/ros2"
export PATH="$WORK/bin:$PATH"

cat > "$WORK/run_case.py" <<'EOF'
"""Run one launch file through launch.LaunchService and read every node's parameters back."""

import os
import sys
import threading
import time
from pathlib import Path

import yaml

launch_file, namespace, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
memory_dir = sys.argv[4]

# a ROS domain no test process holds (same lock files as test/conftest.py)
locks = Path("/tmp/mimir-ros-domains")
locks.mkdir(exist_ok=True)
for domain in range(1, 101):
    lock = locks / f"{domain}.pid"
    try:
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        try:
            os.kill(int(lock.read_text() or "0"), 0)
            continue
        except (ValueError, ProcessLookupError):
            lock.unlink(missing_ok=True)
            continue
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)
    os.environ["ROS_DOMAIN_ID"] = str(domain)
    break

import rclpy  # noqa: E402
from launch import LaunchDescription, LaunchService  # noqa: E402
from launch.actions import (IncludeLaunchDescription, RegisterEventHandler,  # noqa: E402
                            Shutdown, TimerAction)
from launch.event_handlers import OnProcessExit  # noqa: E402
from launch.launch_description_sources import PythonLaunchDescriptionSource  # noqa: E402
from rcl_interfaces.msg import ParameterType  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rcl_interfaces.srv import GetParameters  # noqa: E402
from ros2launch.api import get_share_file_path_from_package  # noqa: E402

from mimir.sim_graph import DEFAULT_ROBOT_LINK, SIM_GRAPH, graph_parameters  # noqa: E402

path = get_share_file_path_from_package(package_name="mimir", file_name=launch_file)
share = Path(path).parents[1]
args = {"memory_dir": memory_dir}
if namespace:
    args["namespace"] = namespace
memory_nodes = {"scene_graph", "keyframes", "planner"}
stop_servers = []
if launch_file == "bringup.launch.py":
    args.update(use_zed="false", vlm_backend="offline")
    params_file = "mimir.yaml"
    nodes = ["localization", "executor", "segmentation", "deprojection", "scene_graph",
             "keyframes", "analyzer", "planner"]
    launch_given = {"analyzer": {"vlm_backend": "offline"},
                    "planner": {"vlm_backend": "offline", "operator_gate": True}}
    if namespace:  # the optional per-site arguments must reach their nodes
        args.update(cameras="base,pole", robot_host="127.0.0.1", sam3_model="/no/sam3",
                    vlm_endpoint="http://127.0.0.1:8000/v1", vlm_model="site-model")
        for name in ("deprojection", "keyframes", "analyzer"):
            launch_given.setdefault(name, {})["cameras"] = ["base", "pole"]
        launch_given["executor"] = {"host": "127.0.0.1"}
        for name in ("analyzer", "planner"):
            launch_given[name].update(vlm_endpoint="http://127.0.0.1:8000/v1",
                                      vlm_model="site-model")
    clock = dict.fromkeys(nodes, False)
    # the TidyBot++ base and arm servers the executor drives: the fake ones, on the deployment
    # file's ports and secret
    from mimir_robot.fakes import start_fake_server  # noqa: E402

    robot = yaml.safe_load((Path(path).parents[1] / "config" / "mimir.yaml").read_text())
    link = robot["/**/executor"]["ros__parameters"]
    for typeid, port in (("Base", link["base_port"]), ("Arm", link["arm_port"])):
        # fork: this script is the main module, which a spawned child would run again
        stop_servers.append(start_fake_server(typeid, str(link["authkey"]).encode(),
                                              port=int(port), context="fork")[1])
elif launch_file == "sim.launch.py":
    params_file = "mimir_sim.yaml"
    nodes = [n.name for n in SIM_GRAPH]
    launch_given = {}
    clock = {}
    for n in SIM_GRAPH:
        given = graph_parameters(n, memory_dir=memory_dir, scenario="locked_unlocked",
                                 vlm_backend="offline", **DEFAULT_ROBOT_LINK)
        clock[n.name] = given.pop("use_sim_time")
        given.pop("memory_dir", None)
        launch_given[n.name] = given
else:
    args.update(bag="/nonexistent/bag")
    params_file = "mimir.yaml"
    nodes = ["segmentation", "deprojection", "scene_graph", "keyframes"]
    launch_given = {}
    clock = dict.fromkeys(nodes, True)
deployment = yaml.safe_load((share / "config" / params_file).read_text())

expected = {}
for name in nodes:
    want = dict(deployment[f"/**/{name}"]["ros__parameters"])
    want.update(launch_given.get(name, {}))
    want["use_sim_time"] = clock[name]
    if name in memory_nodes:
        want["memory_dir"] = memory_dir
    expected[name] = want

exits = {}
results = {}


def on_exit(event, _context):
    exits[getattr(event.action, "name", "?")] = event.returncode


def value_of(p):
    t = p.type
    return {
        ParameterType.PARAMETER_BOOL: lambda: p.bool_value,
        ParameterType.PARAMETER_INTEGER: lambda: p.integer_value,
        ParameterType.PARAMETER_DOUBLE: lambda: p.double_value,
        ParameterType.PARAMETER_STRING: lambda: p.string_value,
        ParameterType.PARAMETER_STRING_ARRAY: lambda: list(p.string_array_value),
        ParameterType.PARAMETER_INTEGER_ARRAY: lambda: list(p.integer_array_value),
        ParameterType.PARAMETER_DOUBLE_ARRAY: lambda: list(p.double_array_value),
        ParameterType.PARAMETER_BOOL_ARRAY: lambda: list(p.bool_array_value),
    }.get(t, lambda: "<not set>")()


def same(a, b):
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, (int, float)) and not isinstance(a, bool) and isinstance(b, (int, float)):
        return abs(float(a) - float(b)) < 1e-9
    return a == b


def check() -> None:
    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("mimir_launch_check", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    prefix = f"/{namespace}" if namespace else ""
    deadline = time.monotonic() + seconds - 3.0
    pending = list(nodes)
    while pending and time.monotonic() < deadline:
        for name in list(pending):
            client = node.create_client(GetParameters, f"{prefix}/{name}/get_parameters")
            if not client.wait_for_service(timeout_sec=0.5):
                node.destroy_client(client)
                continue
            names = sorted(expected[name])
            future = client.call_async(GetParameters.Request(names=names))
            executor.spin_until_future_complete(future, timeout_sec=5.0)
            node.destroy_client(client)
            if not future.done() or future.result() is None:
                continue
            got = dict(zip(names, (value_of(v) for v in future.result().values)))
            wrong = [f"{k}={got[k]!r} (file/launch: {expected[name][k]!r})" for k in names
                     if not same(got[k], expected[name][k])]
            results[name] = (not wrong, len(names), wrong)
            pending.remove(name)
        time.sleep(0.5)
    executor.shutdown()
    node.destroy_node()
    rclpy.try_shutdown(context=context)


ld = LaunchDescription([
    RegisterEventHandler(OnProcessExit(on_exit=on_exit)),
    IncludeLaunchDescription(PythonLaunchDescriptionSource(path),
                             launch_arguments=list(args.items())),
    TimerAction(period=seconds, actions=[Shutdown(reason="check time over")]),
])
service = LaunchService()
service.include_launch_description(ld)
checker = threading.Thread(target=check, daemon=True)
threading.Timer(2.0, checker.start).start()
service.run()
checker.join(timeout=10.0)
for stop in stop_servers:
    stop()

ok = True
lines = []
for name in nodes:
    fq = f"/{namespace}/{name}" if namespace else f"/{name}"
    if name in results:
        good, count, wrong = results[name]
        ok &= good
        status = "ok  " if good else "FAIL"
        detail = f"{count} parameters as given" if good else "; ".join(wrong)
    elif name == "segmentation" and any(k.startswith("segmentation_node") and v == 1
                                         for k, v in exits.items()):
        # no SAM3 weights here: the node stops at start-up with its one-line message
        status = "n/a "
        detail = "exited at start-up: no SAM3 model here (see the log for its message)"
    else:
        ok = False
        status = "FAIL"
        detail = "never answered get_parameters"
    lines.append(f"  {status} {fq}: {detail}")
early = {k: v for k, v in exits.items() if v not in (0, -2, -15, None)}
for name, code in early.items():
    lines.append(f"  note: {name} exited with {code} before the end")
label = f"{launch_file} namespace={namespace or '(none)'} params={params_file}"
print(("PASS " if ok else "FAIL ") + label, *lines, sep="\n", file=sys.__stderr__)
Path(os.environ["MIMIR_CHECK_RESULT"]).write_text(("PASS " if ok else "FAIL ") + label + "\n"
                                                   + "\n".join(lines) + "\n")
sys.exit(0 if ok else 1)
EOF

failed=0
for file in bringup.launch.py sim.launch.py replay.launch.py; do
  for ns in "" robot1; do
    case="${file%%.*}${ns:+-$ns}"
    export MIMIR_CHECK_RESULT="$WORK/logs/$case.result"
    rm -f "$MIMIR_CHECK_RESULT"
    say "running $file ${ns:+namespace:=$ns }for ${SECONDS_PER_RUN} s (log $WORK/logs/$case.log)"
    if ! timeout $((${SECONDS_PER_RUN%.*} + 60)) "$PY" "$WORK/run_case.py" "$file" "$ns" \
         "$SECONDS_PER_RUN" "$WORK/memory/$case" >"$WORK/logs/$case.log" 2>&1; then
      failed=1
    fi
    if [[ -f "$MIMIR_CHECK_RESULT" ]]; then
      cat "$MIMIR_CHECK_RESULT"
    else
      echo "FAIL $file namespace=${ns:-(none)}: no result; tail of the log:"
      tail -n 20 "$WORK/logs/$case.log"
    fi
  done
done
if [[ "$failed" -ne 0 ]]; then
  die "at least one launch file did not start every node with its parameters (logs in $WORK/logs)"
fi
say "PASSED: bringup, sim and replay, with and without namespace:=robot1 ($versions)"
