#!/usr/bin/env bash
# The main job on its embedded default: the Locked-and-Unlocked kitchen scenario in simulation.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export MUJOCO_GL="${MUJOCO_GL:-egl}"
if .venv/bin/mimir sim --help >/dev/null 2>&1; then
  exec .venv/bin/mimir sim "$@"
fi
echo "The simulation main job (mimir sim) is not part of this version yet."
echo "Running the installation check instead:"
exec .venv/bin/mimir doctor
