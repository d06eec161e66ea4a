"""What a ``mimir sim`` run leaves for evaluations: the judge's details and ``results.json``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mimir.sim_job import (
    RESULTS_VERSION,
    SimJobOptions,
    check_options,
    children_cpu_s,
    write_results,
)
from mimir.sim_report import InstructionReport, SimJobError, judge_details


def test_judge_details_give_family_and_criteria() -> None:
    family, criteria = judge_details(json.dumps(
        {"family": "finding", "criteria": [{"type": "object_discovered", "satisfied": True}]}))
    assert family == "finding" and criteria[0]["satisfied"] is True
    assert judge_details("{}") == ("", [])


@pytest.mark.parametrize("bad", ["{oops", "[1, 2]", '{"family": 3}',
                                 '{"family": "finding", "criteria": [1]}'])
def test_unreadable_judge_details_are_a_job_error(bad: str) -> None:
    with pytest.raises(SimJobError, match="judge's details"):
        judge_details(bad)


def test_results_json_holds_the_run_and_its_judged_instructions(tmp_path: Path) -> None:
    options = SimJobOptions(scenario="locked_unlocked", seed=1004, noise_profile="ideal",
                            extra_params={"planner": {"use_keyframes": False}})
    report = InstructionReport(index=0, instruction="Find the ketchup.", success=True,
                               judged_progress=1.0, steps=4, family="finding")
    write_results(tmp_path, "locked_unlocked", options, reports=[report],
                  figures={"keyframes stored": 7}, wall=12.5, cpu=20.25)
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["version"] == RESULTS_VERSION and data["seed"] == 1004
    assert data["wall_s"] == 12.5 and data["cpu_s"] == 20.25
    assert data["extra_params"] == {"planner": {"use_keyframes": False}}
    assert data["instructions"][0]["family"] == "finding"
    assert data["figures"] == {"keyframes stored": 7}


@pytest.mark.parametrize("name", ["/tmp/elsewhere", "../up", "a/../../b"])
def test_a_run_name_must_stay_inside_the_run_root(name: str) -> None:
    with pytest.raises(SimJobError, match="run name"):
        check_options(SimJobOptions(run_name=name))


def test_children_cpu_counts_a_child_once_it_is_waited_for() -> None:
    """The node graph's CPU is the growth of the ended children's CPU across a run."""
    before = children_cpu_s()
    burn = subprocess.Popen([sys.executable, "-c",
                             "import time\nend = time.process_time() + 0.3\n"
                             "while time.process_time() < end: pass"])
    assert burn.wait(timeout=60) == 0
    assert children_cpu_s() - before >= 0.3
