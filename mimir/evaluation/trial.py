"""Run one trial in this process: ``python -m mimir.evaluation.trial <folder>/trial.json``.

The runner starts one such process per trial (each with its own ``ROS_DOMAIN_ID``), so a trial
that hangs or crashes is killed without touching the others. Exit status: 0 when every
instruction was judged done, 1 when some were not (the trial is still finished), 2 when the
job failed; the failure is written to ``error.json`` beside ``trial.json``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from mimir.evaluation.trials import TrialFileError, TrialSpec
from mimir.sim_job import SimJobError, run_sim_job


def main(argv: list[str] | None = None) -> int:
    """Entry point; see the module docstring."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m mimir.evaluation.trial <trial folder>/trial.json",
              file=sys.stderr)
        return 2
    spec_path = Path(args[0])
    try:
        spec = TrialSpec.from_json(json.loads(spec_path.read_text()))
    except (OSError, json.JSONDecodeError, TrialFileError) as err:
        print(f"cannot read {spec_path}: {err}", file=sys.stderr)
        return 2
    os.environ.setdefault("MUJOCO_GL", "egl")
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    root = spec_path.parent
    for _ in spec.key.split("/"):
        root = root.parent
    try:
        return run_sim_job(spec.options(root))
    except SimJobError as err:
        (spec_path.parent / "error.json").write_text(
            json.dumps({"error": str(err), "hint": err.hint}, indent=1))
        print(f"trial {spec.key} failed: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
