"""The evaluation report from trial folders: tables, pairs, plots, trial lines, failures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from eval_helpers import finish_trial

from mimir.evaluation.methods import Method
from mimir.evaluation.report import comparisons, retrieval_latencies, write_report
from mimir.evaluation.trials import IN_PROCESS, NODES, TrialResult, TrialSpec, read_trial

FULL = Method(name="full", label="full")
SG = Method(name="sg", label="SG", interaction=False, keyframes=False)
SEEDS = (1000, 1001, 1002, 1003, 1004, 1005)


def evaluation(root: Path) -> list[TrialResult]:
    """Six layouts: full does every instruction; SG misses the third one on each layout and
    its last layout's run failed."""
    results = []
    for seed in SEEDS:
        full = TrialSpec("locked_unlocked", FULL, seed, "ideal")
        finish_trial(full, root, (1.0, 1.0, 1.0))
        results.append(read_trial(full, root))
        sg = TrialSpec("locked_unlocked", SG, seed, "ideal")
        if seed == SEEDS[-1]:
            sg.folder(root).mkdir(parents=True)
            (sg.folder(root) / "error.json").write_text('{"error": "node planner died"}')
        else:
            calls = [
                {"call": 1, "instruction": "instruction 2", "primitive": "move_to",
                 "target": "cabinet_1", "outcome": "executed", "success": True,
                 "detail": "REACHED", "start": 50.0, "retrieved": []},
                {"call": 2, "instruction": "instruction 2", "primitive": "open",
                 "target": "cabinet_1", "outcome": "executed", "success": False,
                 "detail": "NO_MOTION: the fixture did not move", "start": 60.0,
                 "retrieved": []},
            ]
            trace = [{"kind": "memory", "instruction": 2, "verdict": "defer",
                      "subject": "cabinet_1", "reason": "no mechanical evidence"}]
            finish_trial(sg, root, (1.0, 1.0, 0.0), calls=calls, trace=trace)
        results.append(read_trial(sg, root))
    return results


def test_the_report_gives_means_intervals_pairs_and_failed_runs(tmp_path: Path) -> None:
    results = evaluation(tmp_path)
    path = write_report(results, [FULL, SG], tmp_path, command="mimir eval --trials 6")
    text = path.read_text()
    assert "    mimir eval --trials 6" in text
    assert "| full | 6 (0) | 100.0% [100.0, 100.0] | 18/18 |" in text
    # SG: 5 finished layouts at 2/3 each; the failed run is listed, not averaged as zero
    assert "| SG | 5 (1) | 66.7% [66.7, 66.7] | 10/15 |" in text
    assert "- sg/scale-1/seed-1005: node planner died" in text
    # per family: the third instruction is the memory family
    assert "| memory | 100.0% [100.0, 100.0] | 0.0% [0.0, 0.0] |" in text
    # five layouts paired, all in favour of full: exact p = 2/32
    assert "| full | SG | 5 | +33.3 | 0.0625 | 0.0625 |" in text
    assert "Sanity baselines" in text and "fixed_order" in text
    for plot in ("progress.png", "tasks.png"):
        assert (tmp_path / "report" / plot).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (tmp_path / "report" / "noise.png").exists()


def test_failures_name_the_unmet_criterion_the_first_wrong_call_and_the_verdicts(
        tmp_path: Path) -> None:
    write_report(evaluation(tmp_path), [FULL, SG], tmp_path)
    failures = (tmp_path / "report" / "failures.md").read_text()
    assert failures.count("### sg/scale-1/seed-") == 5
    assert "- unmet: target 2 discovered: False" in failures
    assert ("call 2: open(cabinet_1) executed, failed: NO_MOTION: the fixture did not move "
            "**<- first to go wrong**") in failures
    assert "memory [defer] cabinet_1: no mechanical evidence" in failures
    assert "seed-1000, instruction 1" not in failures


def test_trial_lines_carry_every_trial(tmp_path: Path) -> None:
    write_report(evaluation(tmp_path), [FULL, SG], tmp_path)
    lines = [json.loads(line) for line in
             (tmp_path / "report" / "trials.jsonl").read_text().splitlines()]
    assert len(lines) == 12
    failed = [line for line in lines if not line["finished"]]
    assert [line["trial"] for line in failed] == ["sg/scale-1/seed-1005"]
    sg = next(line for line in lines if line["trial"] == "sg/scale-1/seed-1000")
    assert sg["families"] == {"finding": 1.0, "memory": 0.0}
    assert sg["planner_calls"] == 2 and sg["figures"]["keyframes stored"] == 40


def test_several_noise_scales_give_a_noise_plot(tmp_path: Path) -> None:
    results = []
    for scale, outcome in ((0.0, 1.0), (2.0, 0.0)):
        for seed in (1000, 1001):
            spec = TrialSpec("locked_unlocked", FULL, seed, "realistic", scale)
            finish_trial(spec, tmp_path, (outcome, outcome))
            results.append(read_trial(spec, tmp_path))
    write_report(results, [FULL], tmp_path)
    assert (tmp_path / "report" / "noise.png").read_bytes()[:4] == b"\x89PNG"


def test_methods_with_no_shared_layout_are_not_paired(tmp_path: Path) -> None:
    a = TrialSpec("locked_unlocked", FULL, 1000)
    b = TrialSpec("locked_unlocked", SG, 1001)
    finish_trial(a, tmp_path, (1.0,))
    finish_trial(b, tmp_path, (0.0,))
    assert comparisons([read_trial(a, tmp_path), read_trial(b, tmp_path)], [FULL, SG]) == []


def test_an_empty_evaluation_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least one trial"):
        write_report([], [FULL], tmp_path)


def test_the_report_says_which_code_the_trials_ran_on(tmp_path: Path) -> None:
    from mimir.version import code_version

    results = evaluation(tmp_path)
    text = write_report(results, [FULL, SG], tmp_path).read_text()
    assert f"Code: every finished trial ran on {code_version()}." in text
    # an evaluation resumed later, and a trial written before runs recorded their code
    for seed, version in ((1001, "abc1234"), (1002, None)):
        path = TrialSpec("locked_unlocked", FULL, seed, "ideal").folder(tmp_path) / "results.json"
        data = json.loads(path.read_text())
        if version is None:
            del data["code_version"]
        else:
            data["code_version"] = version
        path.write_text(json.dumps(data))
    mixed = [read_trial(r.spec, tmp_path) for r in results]
    text = write_report(mixed, [FULL, SG], tmp_path).read_text()
    assert "abc1234 (seeds 1001)" in text and "not recorded (seeds 1002)" in text
    assert f"{code_version()} (seeds 1000, 1001, 1002, 1003, 1004, 1005)" in text
    lines = [json.loads(x) for x in (tmp_path / "report" / "trials.jsonl").read_text().splitlines()]
    assert {x["code_version"] for x in lines if x["finished"]} == {code_version(), "abc1234", ""}


def test_trials_not_run_yet_are_not_counted_as_failed(tmp_path: Path) -> None:
    """A report of an evaluation stopped half way (``--report-only``): trials without a folder,
    or whose run was stopped before it ended, are to be run, not failures."""
    results = evaluation(tmp_path)
    later = [TrialSpec("locked_unlocked", FULL, seed, "ideal") for seed in (1006, 1007)]
    later[1].folder(tmp_path).mkdir(parents=True)  # stopped mid-run: a folder, no results
    text = write_report([*results, *(read_trial(s, tmp_path) for s in later)], [FULL, SG],
                        tmp_path).read_text()
    assert "| full | 6 (0; 2 not run) | 100.0% [100.0, 100.0] | 18/18 |" in text
    assert "| SG | 5 (1) |" in text
    assert "- sg/scale-1/seed-1005: node planner died" in text
    assert ("Not run yet, or stopped before the end (2; the same command runs them): "
            "full/scale-1/seed-1006, full/scale-1/seed-1007.") in text
    assert "full/scale-1/seed-1006:" not in text  # not listed among the failed runs


def test_retrieval_time_per_planner_call_is_reported_per_method(tmp_path: Path) -> None:
    """The planner trace's ``retrieval_s`` (wall time a call spent retrieving keyframes) gives
    the median and 95th percentile per method; a method that reads no keyframes shows none."""
    results = []
    for seed, times in ((1000, (0.010, 0.020)), (1001, (0.030, 0.110))):
        calls = [{"call": k + 1, "instruction": "instruction 0", "primitive": "move_to",
                  "target": "cabinet_1", "outcome": "executed", "success": True,
                  "start": 10.0 * k, "retrieved": [], "retrieval_s": t}
                 for k, t in enumerate(times)]
        full = TrialSpec("locked_unlocked", FULL, seed, "ideal")
        finish_trial(full, tmp_path, (1.0,), calls=calls)
        results.append(read_trial(full, tmp_path))
        sg = TrialSpec("locked_unlocked", SG, seed, "ideal")
        finish_trial(sg, tmp_path, (1.0,), calls=[{**calls[0], "retrieval_s": None}])
        results.append(read_trial(sg, tmp_path))
    text = write_report(results, [FULL, SG], tmp_path).read_text()
    # four calls: 10, 20, 30 and 110 ms -> median 25, 95th percentile 30 + 0.85 * 80 = 98
    rows = text.splitlines()
    header = next(line for line in rows if line.startswith("| method |")).split(" | ")
    column = header.index("retrieval time, median / p95 (ms)")
    table = rows[rows.index(" | ".join(header)):]  # the method table comes first
    cells: dict[str, list[str]] = {}
    for line in table:
        if line.startswith(("| full |", "| SG |")):
            cells.setdefault(line.split(" | ")[0], line.split(" | "))
    assert cells["| full"][column] == "25 / 98"
    assert cells["| SG"][column] == "-"  # reads no keyframes: nothing timed
    lines = [json.loads(x) for x in (tmp_path / "report" / "trials.jsonl").read_text().splitlines()]
    by_trial = {x["trial"]: x for x in lines}
    assert by_trial["full/scale-1/seed-1001"]["retrieval_latency_s"] == [0.03, 0.11]
    assert by_trial["sg/scale-1/seed-1001"]["retrieval_latency_s"] == []


def test_retrieval_times_that_are_not_durations_are_left_out() -> None:
    calls = [{"retrieval_s": 0.5}, {"retrieval_s": None}, {}, {"retrieval_s": "0.2"},
             {"retrieval_s": -1.0}, {"retrieval_s": float("nan")}, {"retrieval_s": True},
             {"retrieval_s": float("inf")}, {"retrieval_s": 0}]
    assert retrieval_latencies(calls) == (0.5, 0.0)


def test_cpu_per_trial_is_reported_where_runs_recorded_it(tmp_path: Path) -> None:
    results = []
    for seed, cpu in ((1000, 150.0), (1001, 250.0), (1002, None), (1003, "lots")):
        spec = TrialSpec("locked_unlocked", FULL, seed, "ideal")
        finish_trial(spec, tmp_path, (1.0,))
        path = spec.folder(tmp_path) / "results.json"
        data = json.loads(path.read_text())
        data["cpu_s"] = cpu  # None: a run that did not measure it; "lots": a damaged file
        path.write_text(json.dumps(data))
        results.append(read_trial(spec, tmp_path))
    text = write_report(results, [FULL], tmp_path).read_text()
    row = next(line for line in text.splitlines() if line.startswith("| full |"))
    assert row.endswith("| 100 | 200 |")  # wall time 100 s each; CPU over the two measured
    lines = [json.loads(x) for x in (tmp_path / "report" / "trials.jsonl").read_text().splitlines()]
    assert [x["cpu_s"] for x in lines] == [150.0, 250.0, None, None]


def test_the_cost_section_sums_each_layout_and_the_set(tmp_path: Path) -> None:
    results = []
    for seed, cpus in ((1000, (120.0, 180.0)), (1001, (240.0, None))):
        for method, cpu in zip((FULL, SG), cpus, strict=True):
            spec = TrialSpec("locked_unlocked", method, seed, "ideal")
            finish_trial(spec, tmp_path, (1.0,))
            path = spec.folder(tmp_path) / "results.json"
            data = json.loads(path.read_text())
            data["cpu_s"] = cpu
            path.write_text(json.dumps(data))
            results.append(read_trial(spec, tmp_path))
    failed = TrialSpec("locked_unlocked", FULL, 1002, "ideal")
    failed.folder(tmp_path).mkdir(parents=True)
    (failed.folder(tmp_path) / "error.json").write_text('{"error": "physics unstable"}')
    results.append(read_trial(failed, tmp_path))
    text = write_report(results, [FULL, SG], tmp_path).read_text()
    cost = text.split("## Cost", 1)[1]
    assert "| 1000 | 2 | 5.0 | 3.3 |" in cost  # 300 core-s; two trials of 100 s wall
    assert "| 1001 | 2 | 4.0 | 3.3 |" in cost
    assert "| 1002 |" not in cost  # the failed run has no figures
    assert "| all | 4 | 9.0 | 6.7 |" in cost
    assert "at least 4 minutes of wall time (0.07 h)" in cost
    assert "1 finished trial(s) recorded no CPU time" in cost


def test_node_graph_reruns_are_compared_with_the_in_process_trials(tmp_path: Path) -> None:
    """Full agrees across modes; SG's node-graph reruns do worse than its in-process trials on
    the same layouts, and one of them failed to run."""
    results = []
    for seed in SEEDS[:4]:
        for method, ours, theirs in ((FULL, (1.0, 1.0), (1.0, 1.0)),
                                     (SG, (1.0, 1.0), (0.0, 0.0))):
            fast = TrialSpec("locked_unlocked", method, seed, "ideal", mode=IN_PROCESS)
            finish_trial(fast, tmp_path, ours)
            results.append(read_trial(fast, tmp_path))
            if seed > SEEDS[2]:
                continue  # the node subsample: the first three layouts
            slow = TrialSpec("locked_unlocked", method, seed, "ideal", mode=NODES)
            if method is SG and seed == SEEDS[2]:
                slow.folder(tmp_path).mkdir(parents=True)
                (slow.folder(tmp_path) / "error.json").write_text('{"error": "node died"}')
            else:
                finish_trial(slow, tmp_path, theirs)
            results.append(read_trial(slow, tmp_path))
    text = write_report(results, [FULL, SG], tmp_path).read_text()
    # the main table counts the in-process trials only
    assert "| full | 4 (0) | 100.0% [100.0, 100.0] |" in text
    assert "| SG | 4 (0) | 100.0% [100.0, 100.0] |" in text
    assert "ran in one process in simulation time" in text
    assert "## Node graph against in-process" in text
    assert ("| full | 3 | 100.0% [100.0, 100.0] | 100.0% [100.0, 100.0] | 0.0 points | yes | "
            "100 / 100 |") in text
    assert "| SG | 2 | 100.0% [100.0, 100.0] | 0.0% [0.0, 0.0] | 100.0 points | NO |" in text
    assert "- sg/scale-1/seed-1002: node died" in text
    modes = [json.loads(x)["mode"]
             for x in (tmp_path / "report" / "trials.jsonl").read_text().splitlines()]
    assert modes.count(NODES) == 6 and modes.count(IN_PROCESS) == 8


def test_an_evaluation_of_node_graph_trials_has_no_mode_comparison(tmp_path: Path) -> None:
    text = write_report(evaluation(tmp_path), [FULL, SG], tmp_path).read_text()
    assert "ran as the node graph" in text and "Node graph against" not in text
