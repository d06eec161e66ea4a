"""End to end: ``mimir eval`` runs two methods on one generated layout and writes its report.

The smoke version of the evaluation: the full system and SG (no analyzer, no keyframes) on the
first evaluation layout of Locked-and-Unlocked, ideal profile, two trials at a time: each
method in process (the default) and again as the node graph (``--nodes 1``). It checks that
each method's switches reached the run in both modes (SG's memory holds no interaction-derived
property and its planner retrieved no keyframe), that the report and its files are written
with the comparison of the two modes, and that running the same command again resumes:
nothing is run twice.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from sim_runs import mimir_exe, sim_env

pytestmark = [pytest.mark.ros, pytest.mark.slow, pytest.mark.timeout(1500),
              pytest.mark.usefixtures("one_simulation_at_a_time")]


def run_eval(out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [mimir_exe(), "eval", "--scenario", "locked_unlocked", "--methods", "full,sg",
         "--trials", "1", "--nodes", "1", "--jobs", "2", "--profile", "ideal",
         "--out", str(out), "--instruction-timeout", "400"],
        capture_output=True, text=True, timeout=1400, env=sim_env(), check=False)


def test_two_methods_one_layout_report_and_resume(tmp_path: Path) -> None:
    out = tmp_path / "eval"
    proc = run_eval(out)
    logs = "\n".join(f"--- {p}\n{p.read_text()[-3000:]}" for p in out.rglob("trial.log"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:] + logs
    report = (out / "report" / "report.md").read_text()
    assert "| SG+IA+KF (full) | 1 (0) |" in report, report
    assert "| SG | 1 (0) |" in report, report
    assert "## Node graph against in-process" in report, report
    assert "| SG+IA+KF (full) | 1 | " in report and "| SG | 1 | " in report, report
    lines = [json.loads(x) for x in (out / "report" / "trials.jsonl").read_text().splitlines()]
    assert sorted((x["method"], x["mode"]) for x in lines) == [
        ("full", "in_process"), ("full", "nodes"), ("sg", "in_process"), ("sg", "nodes")]
    assert all(x["finished"] and x["seed"] == 1000 for x in lines)
    for line in lines:  # the switches reached the run in both modes
        if line["method"] == "sg":
            assert line["figures"]["interaction-derived properties"] == 0, line
            assert line["retrieved_frames"] == 0, line
        else:
            assert line["figures"]["interaction-derived properties"] > 0, line
    for folder in ("seed-1000", "seed-1000-in-process"):
        params = (out / "sg" / "scale-1" / folder / "params.yaml").read_text()
        assert "use_keyframes: false" in params and "auto_analyze: false" in params
    assert not (out / "sg" / "scale-1" / "seed-1000-in-process" / "graph.json").exists()
    assert (out / "sg" / "scale-1" / "seed-1000" / "graph.json").is_file()
    for plot in ("progress.png", "tasks.png"):
        assert (out / "report" / plot).stat().st_size > 1000
    assert (out / "report" / "failures.md").is_file()

    # the same command again reads both trials and runs none
    stamps = {p: p.stat().st_mtime for p in out.rglob("results.json")}
    again = run_eval(out)
    assert again.returncode == 0, again.stderr[-3000:]
    assert {p: p.stat().st_mtime for p in out.rglob("results.json")} == stamps
    assert (out / "report" / "report.md").read_text().count("| 1 (0) |") == 2
