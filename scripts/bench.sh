#!/usr/bin/env bash
# Run every benchmark script and print its figures (not part of the tests).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export MUJOCO_GL="${MUJOCO_GL:-egl}"
for script in benchmarks/bench_*.py; do
  echo "== $script"
  .venv/bin/python "$script"
done
