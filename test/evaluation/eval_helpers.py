"""Trial folders as a finished ``mimir sim`` run leaves them, for the evaluation tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mimir.evaluation.trials import TrialSpec
from mimir.sim_job import write_results
from mimir.sim_report import InstructionReport

FAMILIES = ("finding", "finding", "memory")


def finish_trial(spec: TrialSpec, root: Path, outcomes: tuple[float, ...], *,
                 keyframes: int = 40, calls: list[dict[str, Any]] | None = None,
                 trace: list[dict[str, Any]] | None = None) -> None:
    """Write the files a finished trial of ``spec`` leaves, with the judged progress of each
    instruction in ``outcomes``."""
    folder = spec.folder(root)
    (folder / "memory").mkdir(parents=True, exist_ok=True)
    reports = []
    for index, progress in enumerate(outcomes):
        reports.append(InstructionReport(
            index=index, instruction=f"instruction {index}", success=progress >= 1.0,
            judged_progress=progress, planner_progress=progress, steps=4 + index,
            family=FAMILIES[index % len(FAMILIES)],
            criteria=[{"group": "success", "type": "object_discovered", "satisfied":
                       progress >= 1.0, "reason": f"target {index} discovered: "
                       f"{progress >= 1.0}"}]))
    figures = {"scene graph nodes": 10, "keyframes stored": keyframes,
               "interaction-derived properties": 3}
    write_results(folder, spec.scenario, spec.options(root), reports=reports, figures=figures,
                  wall=100.0)
    if calls is not None:
        (folder / "memory" / "planner_trace.jsonl").write_text(
            "".join(json.dumps(c) + "\n" for c in calls))
    if trace is not None:
        (folder / "trace.jsonl").write_text("".join(json.dumps(t) + "\n" for t in trace))
