#!/usr/bin/env bash
# Run every benchmark script and print its figures (not part of the tests).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/common.sh
source scripts/common.sh "bench: " "bench: error: "
use_offline_robot_model
export MUJOCO_GL="${MUJOCO_GL:-egl}"
for script in benchmarks/bench_*.py; do
  echo "== $script"
  .venv/bin/python "$script"
done
