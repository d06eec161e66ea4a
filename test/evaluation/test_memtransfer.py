"""``mimir bench memtransfer``: conditions, the reference policies, the resumable runner, the
figures and the command line."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from mimir.cli import main
from mimir.evaluation.memtransfer.protocol import (
    DEFAULT_SETTINGS,
    START_SETTINGS,
    Setting,
    plan_episode,
)
from mimir.evaluation.memtransfer.report import closure, markdown, plot, spl, success_rate
from mimir.evaluation.memtransfer.runner import (
    EPISODES,
    Job,
    Outcome,
    jobs_for,
    read_outcomes,
    run_episode,
    run_jobs,
    trace_path,
)
from mimir.evaluation.memtransfer.workshop import Workshop
from mimir.paths import config_file
from mimir_sim.warehouse.cases import Case
from mimir_sim.warehouse.layout import Layout, WarehouseError
from mimir_sim.warehouse.planning import replay


@pytest.fixture(scope="module")
def cases(memtransfer_cases: list[Case]) -> list[Case]:
    return memtransfer_cases


@pytest.fixture(scope="module")
def shop() -> Workshop:
    return Workshop("", str(config_file("memtransfer/cases.json")))


def test_setting_keys_round_trip_and_bad_settings_are_refused() -> None:
    for setting in (*DEFAULT_SETTINGS, *START_SETTINGS):
        assert Setting.from_key(setting.key) == setting
    assert Setting("original", 1, memory_demo="distant").key == "original/1:distant"
    for bad in ({"condition": "sideways"}, {"condition": "original", "demos": 2},
                {"condition": "original", "demos": 1, "memory_demo": "far"},
                {"condition": "mixed", "demos": 1}, {"condition": "mixed", "mix": "odd"}):
        with pytest.raises(WarehouseError):
            Setting(**bad)
    with pytest.raises(WarehouseError, match="condition/demos"):
        Setting.from_key("blocked")


def test_each_condition_starts_where_the_protocol_says(warehouse: Layout,
                                                       cases: list[Case]) -> None:
    case = cases[42]
    original = plan_episode(warehouse, case, Setting("original", 1), cases)
    assert original.start == case.origin and not original.blocked
    assert original.reference_steps == len(case.demos["original"].actions)
    assert [h.demo for h in original.histories] == ["original"]
    nearby = plan_episode(warehouse, case, Setting("original", 1, memory_demo="nearby"), cases)
    assert [h.demo for h in nearby.histories] == ["nearby"]
    new = plan_episode(warehouse, case, Setting("new-start", 4), cases)
    assert new.start == case.test.start and len(new.histories) == 4
    blocked = plan_episode(warehouse, case, Setting("blocked", 4), cases)
    assert blocked.blocked == case.blocked
    assert blocked.reference_steps == len(case.blocked_test.actions)
    cells = replay(warehouse, case.task, case.test.start, case.test.actions).cells
    assert blocked.approach and blocked.approach <= set(cells)


def test_mixed_memory_replaces_two_demonstrations_with_other_tasks(warehouse: Layout,
                                                                   cases: list[Case]) -> None:
    case = cases[7]
    test_poses = set(replay(warehouse, case.task, case.test.start, case.test.actions).poses)
    for mix in ("irrelevant", "confusable"):
        plan = plan_episode(warehouse, case, Setting("mixed", 4, mix=mix), cases)
        own = [h for h in plan.histories if h.case_id == case.id]
        others = [h for h in plan.histories if h.case_id != case.id]
        assert [h.demo for h in own] == ["original", "opposite"] and len(others) == 2
        by_id = {c.id: c for c in cases}
        for history in others:
            assert by_id[history.case_id].task.type != case.task.type
            poses = set(replay(warehouse, history.task, history.trajectory.start,
                               history.trajectory.actions).poses)
            assert bool(poses & test_poses) == (mix == "confusable")


def test_the_oracle_solves_every_condition_with_spl_one(shop: Workshop,
                                                        cases: list[Case]) -> None:
    for case in cases[::9]:
        for setting in DEFAULT_SETTINGS:
            outcome = run_episode(shop, Job("oracle", setting.key, 0, case.id))
            assert outcome.success and outcome.spl == pytest.approx(1.0), (case.id, setting)
            assert outcome.bumps == 0 and outcome.prompts == 0


def test_no_memory_ignores_memory_and_learns_walls_from_bumps(shop: Workshop,
                                                              cases: list[Case]) -> None:
    for case in cases[:20:4]:
        one = run_episode(shop, Job("no_memory", "new-start/1", 1, case.id))
        four = run_episode(shop, Job("no_memory", "new-start/4", 1, case.id))
        mixed = run_episode(shop, Job("no_memory", "mixed/4:confusable", 1, case.id))
        assert one.actions == four.actions == mixed.actions
        assert one.steps <= 200
    # It never tries the same failed move twice from the same pose.
    outcome = run_episode(shop, Job("no_memory", "blocked/4", 0, cases[3].id))
    assert outcome.bumps <= 60


def test_no_memory_finds_a_target_next_to_it(shop: Workshop, cases: list[Case]) -> None:
    near = [c for c in cases if c.task.type == 1 and len(c.demos["original"].actions) <= 14]
    outcomes = [run_episode(shop, Job("no_memory", "original/1", 0, c.id)) for c in near]
    assert near and any(o.success for o in outcomes)
    assert all(o.steps == len(o.actions) and o.invalid_answers == 0 for o in outcomes)
    with pytest.raises(ValueError, match="unknown policy"):
        shop.policy("psychic")


def test_the_runner_resumes_and_workers_agree(tmp_path: Path, shop: Workshop,
                                              cases: list[Case]) -> None:
    few = [c for c in cases if c.id.endswith("c00")]
    by_type = {c.id: c for c in few}
    jobs = jobs_for(["oracle", "no_memory"], [Setting("blocked", 4)], 1, few)
    first = run_jobs(tmp_path / "a", jobs, shop, progress=False)
    assert len(first) == 20
    for outcome, job in zip(sorted(first, key=lambda o: o.key), sorted(jobs, key=lambda j: j.key),
                            strict=True):
        rows = [json.loads(line) for line in trace_path(tmp_path / "a", job).read_text(
            encoding="utf-8").splitlines()]
        assert [r["action"] for r in rows] == list(outcome.actions)
        assert rows[-1]["stages_done"] == (len(by_type[job.case].task.stages)
                                           if outcome.success else rows[-1]["stages_done"])
    again = run_jobs(tmp_path / "a", jobs, shop, progress=False)
    assert again == first
    parallel = run_jobs(tmp_path / "b", jobs, shop, workers=2, progress=False)
    assert sorted(parallel, key=lambda o: o.key) == sorted(first, key=lambda o: o.key)
    # A line cut off by a stop is dropped and run again; a bad line in the middle is an error.
    path = tmp_path / "a" / EPISODES
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:30], encoding="utf-8")
    assert len(read_outcomes(tmp_path / "a")) == 19
    assert len(run_jobs(tmp_path / "a", jobs, shop, progress=False)) == 20
    path.write_text("garbage\n" + "\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(WarehouseError, match="not an episode line"):
        read_outcomes(tmp_path / "a")


def _outcome(policy: str, setting: str, run: int, case: str, success: bool, *,
             met: bool = False, steps: int = 20) -> Outcome:
    return Outcome(f"{policy}|{setting}|{run}|{case}", policy, setting, run, case, 1, success,
                   steps, 10, 10 / steps if success else 0.0, met, 0, 0, 0, 0, 0, ())


def test_figures_follow_their_definitions() -> None:
    outcomes = [
        # Baseline: 2/2 unchanged, 1/2 blocked in run 0; 1/2 and 0/2 in run 1.
        _outcome("base", "new-start/4", 0, "a", True),
        _outcome("base", "new-start/4", 0, "b", True),
        _outcome("base", "blocked/4", 0, "a", True, met=True),
        _outcome("base", "blocked/4", 0, "b", False, met=True),
        _outcome("base", "new-start/4", 1, "a", True),
        _outcome("base", "new-start/4", 1, "b", False),
        _outcome("base", "blocked/4", 1, "a", False), _outcome("base", "blocked/4", 1, "b", False),
        # Memory: always solves unchanged; blocked 1/2 each run, the failure after meeting it.
        _outcome("mem", "new-start/4", 0, "a", True),
        _outcome("mem", "new-start/4", 0, "b", True),
        _outcome("mem", "new-start/4", 1, "a", True),
        _outcome("mem", "new-start/4", 1, "b", True),
        _outcome("mem", "blocked/4", 0, "a", True),
        _outcome("mem", "blocked/4", 0, "b", False, met=True),
        _outcome("mem", "blocked/4", 1, "a", True, met=True),
        _outcome("mem", "blocked/4", 1, "b", False, met=True),
    ]
    sr = success_rate([o for o in outcomes if o.policy == "base" and o.setting == "new-start/4"])
    assert (sr.mean, sr.runs) == (75.0, 2) and sr.sd == pytest.approx(35.355, abs=1e-3)
    assert spl([_outcome("x", "s", 0, "a", True, steps=20)]).mean == pytest.approx(0.5)
    result = closure(outcomes, "mem", "base")
    # mem drops 100 -> 50 (-50); base drops 75 -> 25 (-50): delta 0; retention 0.5.
    assert result.delta == pytest.approx(0.0)
    assert result.retention == pytest.approx(0.5)
    assert result.follow.mean == pytest.approx(75.0)  # met in 1/2 then 2/2
    assert result.recovery.mean == pytest.approx(25.0)  # 0/1 then 1/2
    empty = success_rate([])
    assert empty.runs == 0 and math.isnan(empty.mean) and empty.text() == "-"


def test_the_report_has_the_papers_tables(tmp_path: Path, shop: Workshop,
                                          cases: list[Case]) -> None:
    settings = [*DEFAULT_SETTINGS, Setting("original", 1, memory_demo="distant")]
    outcomes = [run_episode(shop, job)
                for job in jobs_for(["oracle", "no_memory"], settings, 1, cases[:2])]
    text = markdown(outcomes, baseline="no_memory", command="mimir bench memtransfer")
    for heading in ("Table III", "Table IV", "Table V", "Mixed histories", "Task groups"):
        assert f"## {heading}" in text
    assert "| oracle | 0 | 0 | 0.00 | 100.0 | 1.000 |" in text
    plot(outcomes, tmp_path / "sr.png")
    assert (tmp_path / "sr.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_command_line_runs_and_refuses_bad_input(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bench"
    assert main(["bench", "memtransfer", "--limit", "1", "--runs", "1", "--types", "1,7",
                 "--condition", "blocked", "--out", str(out), "--no-progress"]) == 0
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "blocked/4" in report and "4 episodes" in report
    assert len(read_outcomes(out)) == 4
    assert main(["bench", "memtransfer", "--policies", "psychic", "--out", str(out)]) == 2
    assert "unknown policies or representations" in capsys.readouterr().err
    assert main(["bench", "memtransfer", "--cases", str(tmp_path / "none.json"),
                 "--out", str(out)]) == 2
    assert "mimir: error:" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text("{}", encoding="utf-8")
    assert main(["bench", "memtransfer", "--cases", str(bad), "--out", str(out)]) == 2
    assert "not a mimir.memtransfer.cases" in capsys.readouterr().err
    assert main(["bench", "memtransfer", "--runs", "0", "--out", str(out)]) == 2
