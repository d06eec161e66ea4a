# Shell helpers shared by the scripts in this folder (sourced, not run):
#
#   source scripts/common.sh MSG_PREFIX ERROR_PREFIX
#
# MSG_PREFIX starts each progress line (`say`), ERROR_PREFIX the line `die` prints. Sourcing also
# sets ROOT to the checkout's top folder.

MSG_PREFIX="$1"
ERROR_PREFIX="$2"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

say() { printf '%s%s\n' "$MSG_PREFIX" "$*"; }
die() { printf '%s%s\n' "$ERROR_PREFIX" "$*" >&2; exit 1; }

# cmake_install SRC BUILD PREFIX DEPS PYTHON JOBS LOG: configure the cmake package in SRC (Release,
# no tests, generators run by PYTHON, dependencies found under DEPS), build it in BUILD with JOBS
# jobs and install it into PREFIX; all output goes to LOG. Fails (status 1) when a step fails.
cmake_install() {
  local src="$1" build="$2" prefix="$3" deps="$4" python="$5" jobs="$6" log="$7"
  { cmake -S "$src" -B "$build" -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_PREFIX_PATH="$deps" \
      -DPython3_EXECUTABLE="$python" -DBUILD_TESTING=OFF -DCMAKE_BUILD_TYPE=Release &&
    cmake --build "$build" -j "$jobs" &&
    cmake --install "$build"; } >"$log" 2>&1
}

# use_offline_robot_model: the simulated robot comes from mujoco-menagerie, which downloads it on
# first use; where MENAGERIE_ROOT is unset and the offline copy beside the checkout exists
# (../shared/models/tidybot), point Menagerie at that copy instead (as the Makefile and the tests do).
use_offline_robot_model() {
  if [[ -z "${MENAGERIE_ROOT:-}" && -d "$ROOT/../shared/models/tidybot/stanford_tidybot" ]]; then
    MENAGERIE_ROOT="$(cd "$ROOT/../shared/models/tidybot" && pwd)"
    export MENAGERIE_ROOT
  fi
}
