#!/usr/bin/env bash
# The main job on its embedded default: the Locked-and-Unlocked kitchen scenario in simulation.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/common.sh
source scripts/common.sh "demo: " "demo: error: "
use_offline_robot_model
export MUJOCO_GL="${MUJOCO_GL:-egl}"
exec .venv/bin/mimir sim "$@"
